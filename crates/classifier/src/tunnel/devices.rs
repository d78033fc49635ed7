//! The kernel's side of tunnelling, as Open vSwitch's userspace datapath
//! takes it: an internal port (`br-phy`) whose kernel interface has
//! addresses is a tunnel endpoint (a *device*), and the routes of the
//! kernel's table that leave by such a port reach tunnel peers
//! (`ovs-router`'s cached routes). The control plane reads both from the
//! kernel and sets them here ([`Tunnels::set_kernel`]); translation reads
//! them (`crate::xlate`'s tunnel output and termination).
//!
//! Unlike an underlay (`ip=`), a device's address is the kernel's: the
//! kernel answers ARP for it through the internal port, and the switch
//! only snoops the replies and gratuitous ARP that reach it (OVS's
//! `tnl_neigh_snoop`).

use std::net::IpAddr;

use super::{in_prefix, mask_prefix, Route, Tunnels};

/// An internal port with addresses in the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its datapath port number.
    pub port: u32,
    /// Its kernel interface's name (`br-phy`).
    pub name: String,
    /// The name of the bridge it is a port of (neighbours are shown by it).
    pub bridge: String,
    /// Its Ethernet address.
    pub mac: [u8; 6],
    /// Its addresses and their prefix lengths, as the kernel has them.
    pub addrs: Vec<(IpAddr, u8)>,
}

impl Device {
    /// Whether `ip` is one of its addresses.
    pub fn has(&self, ip: IpAddr) -> bool {
        self.addrs.iter().any(|(a, _)| *a == ip)
    }

    /// The address a packet to `dst` leaves with (OVS's
    /// `ovs_router_get_netdev_source_address`): one on `dst`'s subnet,
    /// else the first of `dst`'s version.
    pub fn source_for(&self, dst: IpAddr) -> Option<IpAddr> {
        self.addrs
            .iter()
            .find(|(a, n)| in_prefix(dst, *a, *n))
            .or_else(|| {
                self.addrs
                    .iter()
                    .find(|(a, _)| a.is_ipv4() == dst.is_ipv4())
            })
            .map(|(a, _)| *a)
    }
}

/// A route of the kernel's table as the control plane read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    /// Destination prefix.
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The interface it leaves by.
    pub dev: String,
    /// Its preferred source address, if the table gives one.
    pub prefsrc: Option<IpAddr>,
}

/// The devices and the routes through them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Kernel {
    pub devices: Vec<Device>,
    pub routes: Vec<Route>,
}

impl Kernel {
    /// The devices and those of `table`'s routes that leave by one.
    pub fn new(mut devices: Vec<Device>, table: &[KernelRoute]) -> Kernel {
        devices.sort_by_key(|d| d.port);
        let mut routes = Vec::new();
        for r in table {
            let Some(d) = devices.iter().find(|d| d.name == r.dev) else {
                continue;
            };
            if r.gw.is_some_and(|g| g.is_ipv4() != r.prefix.is_ipv4()) {
                continue;
            }
            let src = r
                .prefsrc
                .filter(|s| s.is_ipv4() == r.prefix.is_ipv4())
                .or_else(|| d.source_for(r.gw.unwrap_or(r.prefix)));
            let Some(src) = src else {
                continue;
            };
            routes.push(Route {
                prefix: mask_prefix(r.prefix, r.len),
                len: r.len,
                gw: r.gw,
                ofport: d.port,
                src,
                user: false,
            });
        }
        routes.sort_by_key(|r| (r.prefix.is_ipv6(), std::cmp::Reverse(r.len), r.prefix));
        routes.dedup_by_key(|r| (r.prefix, r.len));
        Kernel { devices, routes }
    }
}

impl Tunnels {
    /// Sets the devices and the kernel's routes (`table`, all of it: those
    /// that leave by no device are left out). Returns whether anything
    /// changed (then every translation that read them is redone).
    pub fn set_kernel(&self, devices: Vec<Device>, table: &[KernelRoute]) -> bool {
        let new = Kernel::new(devices, table);
        let mut k = self.kernel.write().unwrap_or_else(|e| e.into_inner());
        if *k == new {
            return false;
        }
        let any = !new.devices.is_empty();
        *k = new;
        drop(k);
        self.has_devices
            .store(any, std::sync::atomic::Ordering::Release);
        self.changed();
        true
    }

    /// Whether any device is known (one atomic load).
    #[inline]
    pub fn has_devices(&self) -> bool {
        self.has_devices.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Device `port` (a datapath number).
    pub fn device(&self, port: u32) -> Option<Device> {
        if !self.has_devices() {
            return None;
        }
        let k = self.kernel.read().unwrap_or_else(|e| e.into_inner());
        k.devices.iter().find(|d| d.port == port).cloned()
    }

    /// The devices.
    pub fn devices(&self) -> Vec<Device> {
        self.kernel
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .devices
            .clone()
    }

    /// Whether a device has address `ip` and Ethernet address `mac` (a
    /// tunnel packet to them ends here, as OVS's `tnl_port_map_lookup`).
    pub fn device_takes(&self, ip: IpAddr, mac: [u8; 6]) -> bool {
        if !self.has_devices() {
            return false;
        }
        let k = self.kernel.read().unwrap_or_else(|e| e.into_inner());
        k.devices.iter().any(|d| d.mac == mac && d.has(ip))
    }

    /// The routes read from the kernel that leave by a device.
    pub fn kernel_routes(&self) -> Vec<Route> {
        self.kernel
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .routes
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::tunnel::TlvMap;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn phy() -> Device {
        Device {
            port: 0x2_fffe,
            name: "br-phy".into(),
            bridge: "br-phy".into(),
            mac: [2, 0, 0, 0, 0, 1],
            addrs: vec![(ip("10.0.0.1"), 24), (ip("fd00::1"), 64)],
        }
    }

    fn route(p: &str, len: u8, gw: Option<&str>, dev: &str) -> KernelRoute {
        KernelRoute {
            prefix: ip(p),
            len,
            gw: gw.map(ip),
            dev: dev.into(),
            prefsrc: None,
        }
    }

    #[test]
    fn routes_by_a_device_are_taken_with_its_address_as_source() {
        let t = Tunnels::new(vec![], vec![], TlvMap::default()).unwrap();
        assert!(t.route(ip("10.0.0.2")).is_none());
        let v0 = t.version();
        let table = [
            route("10.0.0.0", 24, None, "br-phy"),
            route("192.0.2.0", 24, Some("10.0.0.254"), "br-phy"),
            route("0.0.0.0", 0, Some("172.16.0.1"), "eth0"),
            route("fd00::", 64, None, "br-phy"),
        ];
        assert!(t.set_kernel(vec![phy()], &table));
        assert!(t.version() > v0, "a change redoes translations");
        assert!(!t.set_kernel(vec![phy()], &table), "no change");
        let r = t.route(ip("10.0.0.2")).unwrap();
        assert_eq!((r.ofport, r.gw, r.src), (0x2_fffe, None, ip("10.0.0.1")));
        let r = t.route(ip("192.0.2.9")).unwrap();
        assert_eq!(r.gw, Some(ip("10.0.0.254")));
        assert!(
            t.route(ip("8.8.8.8")).is_none(),
            "the default route leaves by a port that is not the switch's"
        );
        assert_eq!(t.route(ip("fd00::2")).unwrap().src, ip("fd00::1"));
        assert!(t.device_takes(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1]));
        assert!(!t.device_takes(ip("10.0.0.1"), [2, 0, 0, 0, 0, 9]));
        assert!(t.learn(ip("10.0.0.2"), [2, 0, 0, 0, 0, 2], 0x2_fffe));
        assert!(t.set_kernel(vec![], &table));
        assert!(t.route(ip("10.0.0.2")).is_none(), "the device went");
        assert!(t.device(0x2_fffe).is_none());
    }

    #[test]
    fn a_prefsrc_of_the_routes_version_wins() {
        let mut r = route("10.1.0.0", 16, Some("10.0.0.254"), "br-phy");
        r.prefsrc = Some(ip("10.0.0.7"));
        let k = Kernel::new(vec![phy()], &[r]);
        assert_eq!(k.routes[0].src, ip("10.0.0.7"));
    }
}
