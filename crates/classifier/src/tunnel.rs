//! Tunnel state the translation reads: the tunnel ports, the underlay
//! ports with addresses of the switch's own (IPv4 or IPv6), the routes to
//! tunnel peers and the neighbour (ARP and IPv6 ND) cache, as OVS's
//! `tnl-ports`, `ovs-router` and `tnl-neigh-cache`.
//!
//! Shared by every PMD (through the rule set, every version holding the
//! same [`Tunnels`]) and the control thread. Only the slow path touches
//! it: a translation reads a route and a neighbour (read locks), an ARP
//! or ND packet the translation sees teaches a neighbour (a write lock),
//! and a neighbour or route change bumps [`Tunnels::version`], on which
//! each PMD revalidates its megaflows as after a rule change. ARP requests
//! and neighbour solicitations for unknown next hops are queued here (at
//! most one a second per address) and sent by a PMD at its next
//! housekeeping.
//!
//! Complexity: routes are a list searched longest prefix first (O(routes):
//! tens, set by hand or by the underlay addresses); neighbours a hash map.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use sluice_packet::build::{Frame, L4};
use sluice_packet::tunnel::{Endpoint, TlvMap, TunnelConfig, TunnelKey, TunnelKind, TunnelMeta};

mod devices;
pub use devices::{Device, KernelRoute};

/// Most neighbours cached (OVS has no limit; this bounds what a flood of
/// ARP packets with made-up senders can take).
pub const MAX_NEIGHBOURS: usize = 65536;
/// How long a neighbour stays without being seen again (OVS's
/// `NEIGH_ENTRY_DEFAULT_IDLE_TIME`: 15 minutes).
pub const NEIGHBOUR_IDLE: Duration = Duration::from_secs(15 * 60);
/// Least time between two ARP requests for one address.
pub const ARP_RETRY: Duration = Duration::from_secs(1);

/// A port with an address of the switch's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Underlay {
    /// Its OpenFlow number.
    pub ofport: u32,
    /// Its IPv4 or IPv6 address.
    pub ip: IpAddr,
    /// The prefix length of its subnet.
    pub prefix: u8,
    /// Its Ethernet address.
    pub mac: [u8; 6],
}

/// A route to tunnel peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix (its host bits zero).
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The next hop (`None`: the destination itself, on the link).
    pub gw: Option<IpAddr>,
    /// The underlay port it leaves by.
    pub ofport: u32,
    /// The source address packets take.
    pub src: IpAddr,
    /// Added by hand (`tnl-route-add`), not from an underlay address.
    pub user: bool,
}

/// A neighbour: where an address is on the underlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// Its Ethernet address.
    pub mac: [u8; 6],
    /// The underlay port it was seen on.
    pub ofport: u32,
}

/// A tunnel port a decapsulated packet can come in by: what it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Receiver {
    ofport: u32,
    remote: Option<IpAddr>,
    local: Option<IpAddr>,
    /// `None`: any key (`key=flow`).
    key: Option<u64>,
}

/// The tunnel ports of one protocol and UDP port, for the datapath to
/// find a decapsulated packet's port by its outer addresses and key, as
/// OVS's `tnl_port_receive`: a port with a fixed remote beats one with
/// `remote_ip=flow`, then a fixed key beats `key=flow`.
#[derive(Debug, PartialEq, Eq)]
pub struct Receivers {
    /// Protocol.
    pub kind: TunnelKind,
    /// UDP destination port (0 for GRE).
    pub dst_port: u16,
    /// The Geneve options' mapping onto `tun_metadata` fields.
    pub tlv: TlvMap,
    ports: Vec<Receiver>,
}

impl Receivers {
    /// The port a packet with outer metadata `m` came in by.
    #[inline]
    pub fn lookup(&self, m: &TunnelMeta) -> Option<u32> {
        let mut best = None;
        let mut best_score = 0;
        let (src, dst) = (m.src_ip(), m.dst_ip());
        for r in &self.ports {
            let ok = r.remote.is_none_or(|a| a == src)
                && r.local.is_none_or(|a| a == dst)
                && r.key.is_none_or(|k| k == m.tun_id);
            if ok {
                let score = 1 + 2 * u8::from(r.remote.is_some()) + u8::from(r.key.is_some());
                if score > best_score {
                    best = Some(r.ofport);
                    best_score = score;
                }
            }
        }
        best
    }
}

/// An ARP request or neighbour solicitation waiting to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpRequest {
    /// The underlay port (or device).
    pub ofport: u32,
    /// The frame.
    pub frame: Vec<u8>,
    /// Sent as if it came in on `ofport` through that port's bridge's
    /// tables (a device's: OVS's `compose_table_xlate`), not out of it.
    pub through_table: bool,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Tunnels {
    ports: Vec<(u32, TunnelConfig)>,
    underlays: Vec<Underlay>,
    tlv: TlvMap,
    receivers: Vec<std::sync::Arc<Receivers>>,
    routes: RwLock<Vec<Route>>,
    kernel: RwLock<devices::Kernel>,
    has_devices: AtomicBool,
    neighbours: RwLock<HashMap<IpAddr, (Neighbour, Instant)>>,
    requests: Mutex<Vec<ArpRequest>>,
    asked: Mutex<HashMap<IpAddr, Instant>>,
    pending: AtomicBool,
    version: AtomicU64,
}

impl Tunnels {
    /// The state for these tunnel ports and underlays (each underlay's
    /// subnet becomes a route) and Geneve option mapping. Errors name what
    /// does not fit together.
    pub fn new(
        ports: Vec<(u32, TunnelConfig)>,
        underlays: Vec<Underlay>,
        tlv: TlvMap,
    ) -> Result<Self, String> {
        let mut ports = ports;
        ports.sort_by_key(|p| p.0);
        for (n, c) in &ports {
            if let Some((m, _)) = ports.iter().find(|(m, d)| {
                m < n
                    && d.kind == c.kind
                    && d.dst_port == c.dst_port
                    && d.remote == c.remote
                    && d.local == c.local
                    && d.in_key == c.in_key
            }) {
                return Err(format!(
                    "tunnel ports {m} and {n} would receive the same packets (same type, remote_ip, local_ip, key and dst_port)"
                ));
            }
        }
        let mut receivers: Vec<std::sync::Arc<Receivers>> = Vec::new();
        for (n, c) in &ports {
            let r = Receiver {
                ofport: *n,
                remote: match c.remote {
                    Endpoint::Fixed(a) => Some(a),
                    Endpoint::Flow => None,
                },
                local: match c.local {
                    Some(Endpoint::Fixed(a)) => Some(a),
                    _ => None,
                },
                key: match c.in_key {
                    Some(TunnelKey::Fixed(k)) => Some(k),
                    Some(TunnelKey::Flow) => None,
                    None => Some(0),
                },
            };
            let dst_port = if c.kind.is_udp() { c.dst_port } else { 0 };
            match receivers
                .iter_mut()
                .find(|x| x.kind == c.kind && x.dst_port == dst_port)
            {
                Some(x) => std::sync::Arc::get_mut(x)
                    .expect("not shared yet")
                    .ports
                    .push(r),
                None => receivers.push(std::sync::Arc::new(Receivers {
                    kind: c.kind,
                    dst_port,
                    tlv: tlv.clone(),
                    ports: vec![r],
                })),
            }
        }
        let routes = underlays
            .iter()
            .map(|u| Route {
                prefix: mask_prefix(u.ip, u.prefix),
                len: u.prefix,
                gw: None,
                ofport: u.ofport,
                src: u.ip,
                user: false,
            })
            .collect();
        Ok(Tunnels {
            ports,
            underlays,
            tlv,
            receivers,
            routes: RwLock::new(routes),
            kernel: RwLock::default(),
            has_devices: AtomicBool::new(false),
            neighbours: RwLock::default(),
            requests: Mutex::default(),
            asked: Mutex::default(),
            pending: AtomicBool::new(false),
            version: AtomicU64::new(0),
        })
    }

    /// Takes over what `old` learned and was told (neighbours on underlays
    /// that still exist, routes added by hand that still have a way out):
    /// a port added or removed does not forget them.
    pub fn adopt(&self, old: &Tunnels) {
        let kernel = old.kernel.read().unwrap_or_else(|e| e.into_inner()).clone();
        self.has_devices
            .store(!kernel.devices.is_empty(), Ordering::Release);
        *self.kernel.write().unwrap_or_else(|e| e.into_inner()) = kernel;
        let old_n = old.neighbours.read().unwrap_or_else(|e| e.into_inner());
        let mut n = self.neighbours.write().unwrap_or_else(|e| e.into_inner());
        for (ip, (nb, seen)) in old_n.iter() {
            if self.is_underlay(nb.ofport) {
                n.insert(*ip, (*nb, *seen));
            }
        }
        drop((n, old_n));
        for r in old.routes().into_iter().filter(|r| r.user) {
            let _ = self.route_add(r.prefix, r.len, r.gw);
        }
    }

    /// Whether there is anything to do (no tunnel port, no underlay, no
    /// option mapping).
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && self.underlays.is_empty() && self.tlv.is_empty()
    }

    /// The Geneve options' mapping onto `tun_metadata` fields.
    pub fn tlv(&self) -> &TlvMap {
        &self.tlv
    }

    /// The same ports and underlays with mapping `tlv`, keeping what this
    /// state learned and was told (`add-tlv-map`, `del-tlv-map`).
    pub fn with_tlv(&self, tlv: TlvMap) -> Result<Tunnels, String> {
        let t = Tunnels::new(self.ports.clone(), self.underlays.clone(), tlv)?;
        t.adopt(self);
        Ok(t)
    }

    /// Bumped by every change a translation depends on (neighbours,
    /// routes).
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Tunnel port `ofport`'s configuration.
    #[inline]
    pub fn port(&self, ofport: u32) -> Option<&TunnelConfig> {
        if self.ports.is_empty() {
            return None;
        }
        self.ports
            .binary_search_by_key(&ofport, |p| p.0)
            .ok()
            .map(|i| &self.ports[i].1)
    }

    /// The tunnel ports.
    pub fn ports(&self) -> &[(u32, TunnelConfig)] {
        &self.ports
    }

    /// Underlay port `ofport`.
    #[inline]
    pub fn underlay(&self, ofport: u32) -> Option<&Underlay> {
        self.underlays.iter().find(|u| u.ofport == ofport)
    }

    /// Whether `ofport` is an underlay or a device (neighbours are seen
    /// on those).
    pub fn is_underlay(&self, ofport: u32) -> bool {
        self.underlay(ofport).is_some() || self.device(ofport).is_some()
    }

    /// The underlays.
    pub fn underlays(&self) -> &[Underlay] {
        &self.underlays
    }

    /// The tunnel ports of `kind` on UDP port `dst_port` (0 for GRE).
    pub fn receivers(&self, kind: TunnelKind, dst_port: u16) -> Option<&std::sync::Arc<Receivers>> {
        self.receivers
            .iter()
            .find(|r| r.kind == kind && r.dst_port == dst_port)
    }

    /// The tunnel protocol whose packets come to UDP port `port`.
    pub fn udp_kind(&self, port: u16) -> Option<TunnelKind> {
        self.receivers
            .iter()
            .find(|r| r.kind.is_udp() && r.dst_port == port)
            .map(|r| r.kind)
    }

    /// Whether a GRE port exists.
    pub fn has_gre(&self) -> bool {
        self.receivers.iter().any(|r| r.kind == TunnelKind::Gre)
    }

    /// The route to `dst`: the longest prefix holding it (at the same
    /// length, one added by hand before the kernel's, the kernel's before
    /// an underlay's subnet).
    pub fn route(&self, dst: IpAddr) -> Option<Route> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let mine = routes
            .iter()
            .filter(|r| in_prefix(dst, r.prefix, r.len))
            .max_by_key(|r| (r.len, r.user))
            .copied();
        drop(routes);
        if !self.has_devices() {
            return mine;
        }
        let k = self.kernel.read().unwrap_or_else(|e| e.into_inner());
        let kernel = k
            .routes
            .iter()
            .find(|r| in_prefix(dst, r.prefix, r.len))
            .copied();
        match (mine, kernel) {
            (Some(m), Some(k)) if k.len > m.len || (k.len == m.len && !m.user) => Some(k),
            (None, k) => k,
            (m, _) => m,
        }
    }

    /// Every route (the kernel's through devices too), longest prefix
    /// first.
    pub fn routes(&self) -> Vec<Route> {
        let mut v = self
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        v.extend(self.kernel_routes());
        v.sort_by_key(|r| (r.prefix.is_ipv6(), std::cmp::Reverse(r.len), r.prefix));
        v
    }

    /// Adds a route to `prefix/len` via `gw` (`None`: on the link), out
    /// of the underlay whose subnet holds the next hop (`tnl-route-add`).
    pub fn route_add(&self, prefix: IpAddr, len: u8, gw: Option<IpAddr>) -> Result<Route, String> {
        if len > max_len(prefix) {
            return Err(format!("prefix length {len}: at most {}", max_len(prefix)));
        }
        if gw.is_some_and(|g| g.is_ipv4() != prefix.is_ipv4()) {
            return Err(format!(
                "gateway {} and prefix {prefix} are of different IP versions",
                gw.expect("some")
            ));
        }
        let hop = gw.unwrap_or(prefix);
        let by_underlay = self
            .underlays
            .iter()
            .find(|u| in_prefix(hop, u.ip, u.prefix))
            .map(|u| (u.ofport, u.ip));
        let by_device = || {
            self.devices().into_iter().find_map(|d| {
                d.addrs
                    .iter()
                    .find(|(a, n)| in_prefix(hop, *a, *n))
                    .map(|(a, _)| (d.port, *a))
            })
        };
        let (ofport, src) = by_underlay.or_else(by_device).ok_or_else(|| {
            format!(
                "no underlay port's or internal port's subnet holds {hop}: give a gateway on one (ports with ip=A/N, or internal ports with an address in the kernel)"
            )
        })?;
        let r = Route {
            prefix: mask_prefix(prefix, len),
            len,
            gw,
            ofport,
            src,
            user: true,
        };
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|x| !(x.user && x.prefix == r.prefix && x.len == r.len));
        routes.push(r);
        drop(routes);
        self.changed();
        Ok(r)
    }

    /// Removes a route added by hand. False if there was none.
    pub fn route_del(&self, prefix: IpAddr, len: u8) -> bool {
        let p = mask_prefix(prefix, len);
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        let before = routes.len();
        routes.retain(|x| !(x.user && x.prefix == p && x.len == len));
        let gone = routes.len() != before;
        drop(routes);
        if gone {
            self.changed();
        }
        gone
    }

    /// Where `ip` is, if known and not idle past [`NEIGHBOUR_IDLE`].
    pub fn neighbour(&self, ip: IpAddr) -> Option<Neighbour> {
        let n = self.neighbours.read().unwrap_or_else(|e| e.into_inner());
        n.get(&ip)
            .filter(|(_, seen)| seen.elapsed() < NEIGHBOUR_IDLE)
            .map(|(n, _)| *n)
    }

    /// Every neighbour, by address.
    pub fn neighbours(&self) -> Vec<(IpAddr, Neighbour)> {
        let n = self.neighbours.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = n.iter().map(|(ip, (m, _))| (*ip, *m)).collect();
        v.sort_by_key(|e| (e.0.is_ipv6(), e.0));
        v
    }

    /// Learns that `ip` is at `mac` on `ofport` (an ARP or ND packet said
    /// so). Returns whether anything changed (then translations that read
    /// it are redone).
    pub fn learn(&self, ip: IpAddr, mac: [u8; 6], ofport: u32) -> bool {
        if !is_unicast(ip) || mac[0] & 1 != 0 || mac == [0; 6] || !self.is_underlay(ofport) {
            return false;
        }
        let new = Neighbour { mac, ofport };
        let mut n = self.neighbours.write().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some((old, seen)) = n.get_mut(&ip) {
            *seen = now;
            if *old == new {
                return false;
            }
            *old = new;
        } else {
            if n.len() >= MAX_NEIGHBOURS {
                n.retain(|_, (_, seen)| seen.elapsed() < NEIGHBOUR_IDLE);
                if n.len() >= MAX_NEIGHBOURS {
                    return false;
                }
            }
            n.insert(ip, (new, now));
        }
        drop(n);
        self.changed();
        true
    }

    /// Sets a neighbour by hand (`tnl-neigh-set`, as OVS's
    /// `tnl/neigh/set`): as if an ARP packet on underlay `ofport` had said
    /// so (a later one may change it).
    pub fn set_neighbour(&self, ofport: u32, ip: IpAddr, mac: [u8; 6]) -> Result<(), String> {
        if !self.is_underlay(ofport) {
            return Err(format!(
                "port {ofport} is not an underlay (a port with ip=A/N)"
            ));
        }
        if !is_unicast(ip) || mac[0] & 1 != 0 || mac == [0; 6] {
            return Err("a neighbour has a unicast address and Ethernet address".into());
        }
        self.learn(ip, mac, ofport);
        Ok(())
    }

    /// Forgets every neighbour (`tnl-neigh-flush`).
    pub fn flush_neighbours(&self) {
        self.neighbours
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.changed();
    }

    /// Queues an ARP request (IPv4) or a neighbour solicitation (IPv6)
    /// for `ip` out of underlay `u`, unless one went less than
    /// [`ARP_RETRY`] ago. Returns whether one was queued.
    pub fn ask(&self, ip: IpAddr, u: &Underlay) -> bool {
        self.ask_from(ip, u.ip, u.mac, u.ofport, false)
    }

    /// [`Tunnels::ask`] from address `src` and Ethernet address `mac`,
    /// out of port `ofport` or (`through_table`) into its bridge's
    /// tables as if it came in on it.
    pub fn ask_from(
        &self,
        ip: IpAddr,
        src: IpAddr,
        mac: [u8; 6],
        ofport: u32,
        through_table: bool,
    ) -> bool {
        {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if asked
                .get(&ip)
                .is_some_and(|t| now.duration_since(*t) < ARP_RETRY)
            {
                return false;
            }
            if asked.len() >= MAX_NEIGHBOURS {
                asked.retain(|_, t| now.duration_since(*t) < ARP_RETRY);
            }
            asked.insert(ip, now);
        }
        let frame = match (src, ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                Frame::arp(1, mac, src.octets(), [0; 6], dst.octets())
                    .macs(mac, [0xff; 6])
                    .build()
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                // To the target's solicited-node multicast group (RFC 4861).
                let t = dst.octets();
                let mut group = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
                group[13..].copy_from_slice(&t[13..]);
                let group_mac = [0x33, 0x33, 0xff, t[13], t[14], t[15]];
                Frame::ipv6(
                    src.octets(),
                    group,
                    L4::NeighborSolicit {
                        target: t,
                        sll: Some(mac),
                    },
                )
                .ttl(255)
                .macs(mac, group_mac)
                .build()
            }
            _ => return false,
        };
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ArpRequest {
                ofport,
                frame,
                through_table,
            });
        self.pending.store(true, Ordering::Release);
        true
    }

    /// The ARP requests waiting (one atomic load when there are none).
    pub fn take_requests(&self) -> Vec<ArpRequest> {
        if !self.pending.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut q = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *q)
    }
}

/// The longest prefix of `a`'s version: 32 or 128.
pub fn max_len(a: IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

/// `a` with the bits past its first `len` cleared.
pub fn mask_prefix(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(v) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            IpAddr::from((u32::from(v) & m).to_be_bytes())
        }
        IpAddr::V6(v) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            IpAddr::from((u128::from(v) & m).to_be_bytes())
        }
    }
}

/// Whether `a` is in `prefix/len` (never across IP versions).
pub fn in_prefix(a: IpAddr, prefix: IpAddr, len: u8) -> bool {
    a.is_ipv4() == prefix.is_ipv4() && mask_prefix(a, len) == mask_prefix(prefix, len)
}

/// Whether `a` can be a neighbour: not unspecified, multicast or the
/// IPv4 broadcast address.
fn is_unicast(a: IpAddr) -> bool {
    !a.is_unspecified() && !a.is_multicast() && a != IpAddr::from([255; 4])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    fn tunnels() -> Tunnels {
        let cfg = |s: &str| {
            let (k, a) = s.split_once(':').unwrap();
            TunnelConfig::parse(TunnelKind::from_name(k).unwrap(), a, s).unwrap()
        };
        Tunnels::new(
            vec![
                (10, cfg("vxlan:remote_ip=10.90.0.2,key=42")),
                (11, cfg("vxlan:remote_ip=flow,key=flow")),
                (12, cfg("vxlan:remote_ip=10.90.0.2,key=flow")),
                (13, cfg("gre:remote_ip=10.90.0.3")),
            ],
            vec![Underlay {
                ofport: 2,
                ip: ip("10.90.0.1"),
                prefix: 24,
                mac: [2, 0, 0, 0, 0, 1],
            }],
            TlvMap::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_most_specific_port_receives() {
        let t = tunnels();
        let vx = t.receivers(TunnelKind::Vxlan, 4789).unwrap();
        let m = |src: &str, key| TunnelMeta {
            src: v4(src),
            dst: v4("10.90.0.1"),
            tun_id: key,
            ..Default::default()
        };
        assert_eq!(
            vx.lookup(&m("10.90.0.2", 42)),
            Some(10),
            "fixed remote and key"
        );
        assert_eq!(
            vx.lookup(&m("10.90.0.2", 7)),
            Some(12),
            "fixed remote, any key"
        );
        assert_eq!(
            vx.lookup(&m("10.90.0.9", 42)),
            Some(11),
            "any remote, any key"
        );
        let gre = t.receivers(TunnelKind::Gre, 0).unwrap();
        assert_eq!(gre.lookup(&m("10.90.0.3", 0)), Some(13));
        assert_eq!(
            gre.lookup(&m("10.90.0.3", 5)),
            None,
            "a GRE port without key takes key 0 only"
        );
        assert_eq!(gre.lookup(&m("10.90.0.4", 0)), None);
        assert!(t.receivers(TunnelKind::Geneve, 6081).is_none());
        assert_eq!(t.udp_kind(4789), Some(TunnelKind::Vxlan));
    }

    #[test]
    fn routes_take_the_longest_prefix() {
        let t = tunnels();
        assert_eq!(t.route(ip("10.90.0.77")).unwrap().gw, None);
        assert!(t.route(ip("192.0.2.1")).is_none());
        let v0 = t.version();
        t.route_add(ip("192.0.2.0"), 24, Some(ip("10.90.0.254")))
            .unwrap();
        assert!(t.version() > v0, "a route change redoes translations");
        let r = t.route(ip("192.0.2.1")).unwrap();
        assert_eq!(
            (r.gw, r.ofport, r.src),
            (Some(ip("10.90.0.254")), 2, ip("10.90.0.1"))
        );
        assert!(
            t.route_add(ip("192.0.3.0"), 24, Some(ip("172.16.0.1")))
                .is_err(),
            "gateway off every subnet"
        );
        assert!(t.route_del(ip("192.0.2.0"), 24));
        assert!(!t.route_del(ip("192.0.2.0"), 24));
        assert!(!t.route_del(ip("10.90.0.0"), 24), "connected routes stay");
    }

    #[test]
    fn neighbours_are_learned_once_and_asked_for_at_most_once_a_second() {
        let t = tunnels();
        let u = *t.underlay(2).unwrap();
        assert!(t.ask(ip("10.90.0.2"), &u));
        assert!(!t.ask(ip("10.90.0.2"), &u), "rate-limited");
        let reqs = t.take_requests();
        assert_eq!(reqs.len(), 1);
        let f = &reqs[0].frame;
        assert_eq!(&f[0..6], &[0xff; 6]);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        assert_eq!(&f[38..42], &v4("10.90.0.2").to_be_bytes(), "target");
        assert!(t.take_requests().is_empty());
        let v0 = t.version();
        assert!(t.learn(ip("10.90.0.2"), [2, 0, 0, 0, 0, 2], 2));
        assert!(
            !t.learn(ip("10.90.0.2"), [2, 0, 0, 0, 0, 2], 2),
            "no change"
        );
        assert_eq!(t.version(), v0 + 1);
        assert!(
            !t.learn(ip("10.90.0.5"), [1, 0, 0, 0, 0, 2], 2),
            "multicast MAC"
        );
        assert!(
            !t.learn(ip("10.90.0.5"), [2, 0, 0, 0, 0, 2], 7),
            "not an underlay"
        );
        assert_eq!(
            t.neighbour(ip("10.90.0.2")).unwrap().mac,
            [2, 0, 0, 0, 0, 2]
        );
        t.flush_neighbours();
        assert!(t.neighbour(ip("10.90.0.2")).is_none());
    }

    /// A neighbour solicitation comes from the asking port's Ethernet
    /// address (and says so in its option), to the target's
    /// solicited-node group.
    #[test]
    fn a_neighbour_solicitation_names_the_port_that_asks() {
        let t = Tunnels::new(vec![], vec![], TlvMap::default()).unwrap();
        let me = [2, 0, 0, 0, 0, 1];
        assert!(t.ask_from(ip("fd90::2"), ip("fd90::1"), me, 7, true));
        let r = t.take_requests();
        let f = &r[0].frame;
        assert_eq!(&f[0..6], &[0x33, 0x33, 0xff, 0, 0, 2], "to the group");
        assert_eq!(&f[6..12], &me, "from the port");
        assert_eq!(&f[f.len() - 6..], &me, "its source link-layer option");
        assert!(r[0].through_table);
    }

    #[test]
    fn two_ports_that_would_receive_the_same_packets_are_refused() {
        let c = TunnelConfig::new(TunnelKind::Vxlan, Endpoint::Fixed(ip("10.0.0.1")));
        let e = Tunnels::new(vec![(1, c.clone()), (2, c)], vec![], TlvMap::default()).unwrap_err();
        assert!(e.contains("ports 1 and 2"), "{e}");
    }
}
