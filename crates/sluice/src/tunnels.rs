//! The switch's tunnel state from its ports: tunnel ports (`vxlan:`,
//! `geneve:`, `gre:`) and underlays (ports with `ip=A/N`), with the
//! Geneve options' TLV map; and the `sluice ctl` commands that show and
//! change it (`tnl-neigh-show`, `tnl-route-show`, ... as `ovs-appctl
//! tnl/neigh/show`, `ovs/route/show`; `add-tlv-map`, `del-tlv-map`,
//! `dump-tlv-map` as `ovs-ofctl`'s).

use std::sync::Arc;

use sluice_classifier::tunnel::{Device, KernelRoute, Route, Tunnels, Underlay};
use std::net::IpAddr;

use sluice_packet::tunnel::{TlvEntry, TlvMap};
use sluice_packet::wire::ethernet::fmt_mac;
use sluice_port::PortSpec;

/// The tunnel state for these ports and Geneve option mapping (`None`
/// when no port is a tunnel or an underlay and nothing is mapped). A
/// tunnel port needs an underlay to send through.
pub fn from_ports(ports: &[(u32, PortSpec)], tlv: &TlvMap) -> Result<Option<Arc<Tunnels>>, String> {
    let mut tunnels = Vec::new();
    let mut underlays = Vec::new();
    for (n, spec) in ports {
        match spec {
            PortSpec::Tunnel(c) => tunnels.push((*n, c.clone())),
            PortSpec::Underlay { addr, .. } => {
                let own = spec.own_ifname().and_then(sluice_port::sys::if_mac);
                if let Some(u) = underlays.iter().find(|u: &&Underlay| u.ip == addr.ip) {
                    return Err(format!(
                        "ports {} and {n} both have address {}",
                        u.ofport, addr.ip
                    ));
                }
                underlays.push(Underlay {
                    ofport: *n,
                    ip: addr.ip,
                    prefix: addr.prefix,
                    mac: addr.mac_or(own),
                });
            }
            _ => {}
        }
    }
    if tunnels.is_empty() && underlays.is_empty() && tlv.is_empty() {
        return Ok(None);
    }
    if !tunnels.is_empty()
        && underlays.is_empty()
        && !ports.iter().any(|(_, s)| tap_name(s).is_some())
    {
        return Err(format!(
            "tunnel port {} has no underlay to send through: give an Ethernet port an address of the switch's own, e.g. --port 2=afpacket:eth1,ip=10.90.0.1/24, or add an internal (tap) port and give it an address in the kernel, as OVS's br-phy",
            tunnels[0].0
        ));
    }
    Tunnels::new(tunnels, underlays, tlv.clone()).map(|t| Some(Arc::new(t)))
}

/// The internal ports among `ports` (their numbers and interface names),
/// which [`refresh_kernel`] looks at.
pub fn internal_ports(ports: &[(u32, PortSpec)]) -> Vec<(u32, String)> {
    ports
        .iter()
        .filter_map(|(n, s)| tap_name(s).map(|i| (*n, i.to_string())))
        .collect()
}

/// The devices among the internal ports `taps` (those whose interface has
/// an address in the kernel; `bridge_of` names a port's bridge) and the
/// kernel's routes, set into `t`. Returns whether anything changed.
pub fn refresh_kernel(
    t: &Tunnels,
    taps: &[(u32, String)],
    bridge_of: impl Fn(u32) -> String,
) -> bool {
    if taps.is_empty() && !t.has_devices() {
        return false;
    }
    let addrs = sluice_port::kernel_net::if_addrs().unwrap_or_default();
    let devices = taps
        .iter()
        .filter_map(|(port, name)| {
            let (port, name) = (*port, name.as_str());
            let mine: Vec<(IpAddr, u8)> = addrs
                .iter()
                .filter(|a| a.ifname == name && !is_link_local(a.ip))
                .map(|a| (a.ip, a.prefix))
                .collect();
            if mine.is_empty() {
                return None;
            }
            Some(Device {
                port,
                name: name.to_string(),
                bridge: bridge_of(port),
                mac: sluice_port::sys::if_mac(name)?,
                addrs: mine,
            })
        })
        .collect();
    let routes: Vec<KernelRoute> = sluice_port::kernel_net::routes()
        .into_iter()
        .map(|r| KernelRoute {
            prefix: r.prefix,
            len: r.len,
            gw: r.gw,
            dev: r.dev,
            prefsrc: None,
        })
        .collect();
    t.set_kernel(devices, &routes)
}

/// An internal port's interface name (a tap, maybe with a VLAN): such a
/// port can be a device, a tunnel endpoint with the kernel's address.
fn tap_name(s: &PortSpec) -> Option<&str> {
    match s {
        PortSpec::Tap { ifname, .. } => Some(ifname),
        PortSpec::Bridged { port, .. } => tap_name(port),
        _ => None,
    }
}

/// IPv6 link-local addresses are no tunnel endpoints.
fn is_link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80)
}

/// Runs `add-tlv-map MAPPINGS`, `del-tlv-map [MAPPINGS]` or
/// `dump-tlv-map` against the mapping `map`: the answer, and the new
/// mapping to put in force when it changed.
pub fn tlv_command(
    cmd: &str,
    args: &[&str],
    map: &TlvMap,
) -> Result<(String, Option<TlvMap>), String> {
    let mut map = map.clone();
    match (cmd, args) {
        ("dump-tlv-map", []) => return Ok((map.dump(), None)),
        ("add-tlv-map", [spec]) => map
            .add(&TlvEntry::parse_list(spec)?)
            .map_err(|e| e.to_string())?,
        ("del-tlv-map", []) => map.clear(),
        ("del-tlv-map", [spec]) => {
            for e in TlvEntry::parse_list(spec)? {
                map.remove(u16::from(e.index));
            }
        }
        _ => {
            return Err(format!(
                "{cmd}: expected add-tlv-map MAPPINGS, del-tlv-map [MAPPINGS] or dump-tlv-map, a mapping being {{class=C,type=T,len=L}}->tun_metadataN (quote it for the shell)"
            ))
        }
    }
    Ok(("OK".into(), Some(map)))
}

/// Runs a `sluice ctl tnl-*` command against the tunnel state (`None`:
/// the switch has no underlay).
pub fn command(cmd: &str, args: &[&str], t: Option<&Tunnels>) -> Result<String, String> {
    const NO_UNDERLAY: &str = "no underlay port: give a port ip=A/N first";
    match (cmd, args) {
        ("tnl-ports-show", []) => Ok(ports_show(t)),
        ("tnl-neigh-show", []) => Ok(neigh_show(t)),
        ("tnl-route-show", []) => Ok(route_show(t, &sluice_port::kernel_net::cached_routes(), &[])),
        ("tnl-neigh-flush", []) => {
            if let Some(t) = t {
                t.flush_neighbours();
            }
            Ok("OK".into())
        }
        ("tnl-neigh-set", [at, ip, mac]) => {
            let t = t.ok_or(NO_UNDERLAY)?;
            // An underlay's port number, or (OVS's `tnl/neigh/set BRIDGE
            // IP MAC`) a device's bridge or interface name.
            let port = match at.parse::<u32>() {
                Ok(p) => p,
                Err(_) => device_port(t, at).ok_or_else(|| {
                        format!("'{at}' is neither a port number nor a bridge with a tunnel device")
                    })?,
            };
            t.set_neighbour(port, parse_ip(ip)?, parse_mac(mac)?)?;
            Ok("OK".into())
        }
        ("tnl-route-add", [p, rest @ ..]) if rest.len() <= 1 => {
            let (prefix, len) = parse_prefix(p)?;
            let gw = match rest {
                [g] => Some(parse_ip(g)?),
                _ => None,
            };
            t.ok_or(NO_UNDERLAY)?.route_add(prefix, len, gw)?;
            Ok("OK".into())
        }
        ("tnl-route-del", [p]) => {
            let (prefix, len) = parse_prefix(p)?;
            if t.ok_or(NO_UNDERLAY)?.route_del(prefix, len) {
                Ok("OK".into())
            } else {
                Err(format!("no route {p} added by hand"))
            }
        }
        (
            "tnl-ports-show" | "tnl-neigh-show" | "tnl-route-show" | "tnl-neigh-flush"
            | "tnl-neigh-set" | "tnl-route-add" | "tnl-route-del",
            _,
        ) => Err(format!(
            "{cmd}: wrong arguments; expected tnl-neigh-set PORT IP MAC, tnl-route-add PREFIX/LEN [GW], tnl-route-del PREFIX/LEN, or the -show and -flush commands alone"
        )),
        _ => Err(format!(
            "unknown command '{cmd}': the tunnel commands are tnl-ports-show, tnl-neigh-show, tnl-neigh-set, tnl-neigh-flush, tnl-route-show, tnl-route-add, tnl-route-del"
        )),
    }
}

/// `tnl-neigh-show`: the neighbour cache, as `ovs-appctl tnl/neigh/show`.
pub fn neigh_show(t: Option<&Tunnels>) -> String {
    let mut s = format!("{:<32} {:<18} {}\n", "IP", "MAC", "Bridge");
    s += &"-".repeat(64);
    s.push('\n');
    if let Some(t) = t {
        let devices = t.devices();
        for (ip, n) in t.neighbours() {
            // By bridge, as OVS names them (a neighbour learned on a port
            // that is no longer a device: by the bridge it is in).
            let bridge = |p: u32| sluice_classifier::xlate::split_dp_port(p).0;
            let at = devices
                .iter()
                .find(|d| d.port == n.ofport)
                .or_else(|| devices.iter().find(|d| bridge(d.port) == bridge(n.ofport)))
                .map_or_else(|| format!("port {}", n.ofport), |d| d.bridge.clone());
            s += &format!("{:<32} {:<18} {at}\n", ip.to_string(), fmt_mac(&n.mac));
        }
    }
    s
}

/// The datapath port of the device `at` names (its bridge's name or its
/// own, as `tnl/neigh/set BRIDGE` names it).
fn device_port(t: &Tunnels, at: &str) -> Option<u32> {
    t.devices()
        .iter()
        .find(|d| d.bridge == at || d.name == at)
        .map(|d| d.port)
}

/// A route given by hand (`ovs-appctl ovs/route/add PREFIX/LEN DEV
/// [GW] [pkt_mark=M]`, OVS's "User" routes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRoute {
    /// Destination prefix (host bits zero).
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The device named (a bridge's internal port, as OVS's
    /// `output_bridge`).
    pub dev: String,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The source address: the device's address whose subnet holds the
    /// destination (else the gateway), as OVS's `get_src_addr`.
    pub src: IpAddr,
    /// `pkt_mark=` (0: none).
    pub mark: u32,
}

/// Routes and neighbours given by hand, kept whatever the tunnels.
#[derive(Debug, Default)]
pub struct Manual {
    routes: Vec<UserRoute>,
    /// (bridge or device name, address, Ethernet address).
    neighbours: Vec<(String, IpAddr, [u8; 6])>,
}

impl Manual {
    /// Adds `r`, replacing one of the same prefix, length and mark.
    pub fn add_route(&mut self, r: UserRoute) {
        self.routes
            .retain(|x| !(x.prefix == r.prefix && x.len == r.len && x.mark == r.mark));
        self.routes.push(r);
    }

    /// Removes the route of `prefix/len` and `mark`; false if none.
    pub fn del_route(&mut self, prefix: IpAddr, len: u8, mark: u32) -> bool {
        let prefix = sluice_classifier::tunnel::mask_prefix(prefix, len);
        let before = self.routes.len();
        self.routes
            .retain(|x| !(x.prefix == prefix && x.len == len && x.mark == mark));
        self.routes.len() != before
    }

    /// The routes, in the order given.
    pub fn routes(&self) -> &[UserRoute] {
        &self.routes
    }

    /// Sets neighbour `ip` at `mac` behind `at` (replacing what was set
    /// for `ip`).
    pub fn set_neighbour(&mut self, at: &str, ip: IpAddr, mac: [u8; 6]) {
        self.neighbours.retain(|(_, i, _)| *i != ip);
        self.neighbours.push((at.to_string(), ip, mac));
    }

    /// Forgets the neighbours.
    pub fn forget_neighbours(&mut self) {
        self.neighbours.clear();
    }

    /// Puts what is missing of it into the tunnel state `t`: each route
    /// (out of the underlay or device whose subnet holds its next hop),
    /// each neighbour (on the device of that bridge or name). What `t`
    /// cannot take yet (no such device) waits for the next time.
    pub fn apply(&self, t: &Tunnels) {
        let have = t.routes();
        for r in &self.routes {
            if !have
                .iter()
                .any(|x| x.user && x.prefix == r.prefix && x.len == r.len)
            {
                let _ = t.route_add(r.prefix, r.len, r.gw);
            }
        }
        for (at, ip, mac) in &self.neighbours {
            if t.neighbour(*ip).is_some_and(|n| n.mac == *mac) {
                continue;
            }
            if let Some(port) = device_port(t, at) {
                let _ = t.set_neighbour(port, *ip, *mac);
            }
        }
    }
}

/// `tnl-route-show`, as `ovs-appctl ovs/route/show`: the kernel's routes
/// (`system`, OVS's "Cached" ones, whichever device they leave by), then
/// the switch's own: connected routes of underlay ports (`ip=A/N`) and
/// those added by hand (`User:`; `user`, those of `ovs/route/add`, first).
pub fn route_show(
    t: Option<&Tunnels>,
    system: &[sluice_port::kernel_net::CachedRoute],
    user: &[UserRoute],
) -> String {
    let mut s = String::from("Route Table:\n");
    let mut system: Vec<_> = system.iter().collect();
    system.sort_by_key(|r| {
        (
            r.prefix.is_ipv6(),
            std::cmp::Reverse(r.len),
            r.prefix,
            r.local,
        )
    });
    for r in system {
        let local = if r.local { " local" } else { "" };
        s += &route_line(
            "Cached", r.prefix, r.len, r.mark, &r.dev, r.gw, r.src, local,
        );
    }
    for r in user {
        s += &route_line("User", r.prefix, r.len, r.mark, &r.dev, r.gw, r.src, "");
    }
    if let Some(t) = t {
        let devices = t.devices();
        // The kernel's routes through devices are among `system`, and
        // `user`'s routes in the tunnel state among `user`.
        let kernel = t.kernel_routes();
        let shown = |r: &Route| {
            kernel.contains(r)
                || user
                    .iter()
                    .any(|u| r.user && u.prefix == r.prefix && u.len == r.len)
        };
        for r in t.routes().into_iter().filter(|r| !shown(r)) {
            let dev = match devices.iter().find(|d| d.port == r.ofport) {
                Some(d) => d.name.clone(),
                None => format!("port {}", r.ofport),
            };
            let kind = if r.user { "User" } else { "Cached" };
            s += &route_line(kind, r.prefix, r.len, 0, &dev, r.gw, r.src, "");
        }
    }
    s
}

/// One line of `ovs/route/show`, as OVS's `ovs_router_show` writes it.
#[allow(clippy::too_many_arguments)]
fn route_line(
    kind: &str,
    prefix: IpAddr,
    len: u8,
    mark: u32,
    dev: &str,
    gw: Option<IpAddr>,
    src: IpAddr,
    end: &str,
) -> String {
    let mark = match mark {
        0 => String::new(),
        m => format!(" MARK {m}"),
    };
    let gw = gw.map_or(String::new(), |g| format!(" GW {g}"));
    format!("{kind}: {prefix}/{len}{mark} dev {dev}{gw} SRC {src}{end}\n")
}

/// `tnl-ports-show`: the tunnel ports, underlays and devices.
pub fn ports_show(t: Option<&Tunnels>) -> String {
    let mut s = String::new();
    if let Some(t) = t {
        for d in t.devices() {
            let addrs: Vec<String> = d.addrs.iter().map(|(a, n)| format!("{a}/{n}")).collect();
            s += &format!(
                "device {} (port {:#x}, bridge {}): {} {}\n",
                d.name,
                d.port,
                d.bridge,
                addrs.join(" "),
                fmt_mac(&d.mac)
            );
        }
        for u in t.underlays() {
            s += &format!(
                "underlay port {}: {}/{} {}\n",
                u.ofport,
                u.ip,
                u.prefix,
                fmt_mac(&u.mac)
            );
        }
        for (n, c) in t.ports() {
            s += &format!("tunnel port {n}: {c}\n");
        }
    }
    s
}

/// Parses `PREFIX/LEN` (a route's prefix, IPv4 or IPv6; no length: a
/// host route).
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, n) = s.split_once('/').unwrap_or((s, ""));
    let a: IpAddr = a
        .parse()
        .map_err(|_| format!("'{s}': expected PREFIX/LEN, e.g. 10.91.0.0/16 or fd91::/64"))?;
    let max = sluice_classifier::tunnel::max_len(a);
    if n.is_empty() {
        return Ok((a, max));
    }
    let n: u8 = n
        .parse()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| format!("'{s}': the prefix length is 0 to {max}"))?;
    Ok((a, n))
}

/// Parses an Ethernet address (`02:00:00:00:00:01`).
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    sluice_packet::wire::ethernet::parse_mac(s)
        .ok_or_else(|| format!("'{s}' is not an Ethernet address like 02:00:00:00:00:01"))
}

/// Parses an IPv4 or IPv6 address.
pub fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not an IPv4 or IPv6 address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(specs: &[&str]) -> Vec<(u32, PortSpec)> {
        specs
            .iter()
            .map(|s| crate::config::parse_port_arg(s).unwrap())
            .collect()
    }

    fn from_ports(p: &[(u32, PortSpec)]) -> Result<Option<Arc<Tunnels>>, String> {
        super::from_ports(p, &TlvMap::default())
    }

    #[test]
    fn a_tunnel_needs_an_underlay_and_addresses_are_unique() {
        assert!(from_ports(&ports(&["1=null"])).unwrap().is_none());
        let e = from_ports(&ports(&["1=null", "10=vxlan:remote_ip=10.0.0.2"])).unwrap_err();
        assert!(e.contains("no underlay"), "{e}");
        assert!(
            from_ports(&ports(&["1=tap:t0", "10=vxlan:remote_ip=10.0.0.2"])).is_ok(),
            "an internal port may get an address in the kernel"
        );
        let e = from_ports(&ports(&["1=null,ip=10.0.0.1/24", "2=null,ip=10.0.0.1/8"])).unwrap_err();
        assert!(e.contains("both have address 10.0.0.1"), "{e}");
        let t = from_ports(&ports(&[
            "2=null,ip=10.0.0.1/24",
            "10=vxlan:remote_ip=10.0.0.2,key=5",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            t.underlay(2).unwrap().mac,
            [2, 0, 10, 0, 0, 1],
            "made from the address"
        );
        assert!(ports_show(Some(&t)).contains("tunnel port 10: vxlan:remote_ip=10.0.0.2,key=5"));
        assert!(
            route_show(Some(&t), &[], &[]).contains("Cached: 10.0.0.0/24 dev port 2 SRC 10.0.0.1")
        );
        assert!(neigh_show(Some(&t)).starts_with("IP"));
    }

    #[test]
    fn commands_check_their_arguments() {
        let t = from_ports(&ports(&["2=null,ip=10.0.0.1/24"]))
            .unwrap()
            .unwrap();
        let t = Some(&*t);
        assert_eq!(
            command("tnl-route-add", &["10.9.0.0/16", "10.0.0.254"], t).unwrap(),
            "OK"
        );
        assert!(command("tnl-route-show", &[], t)
            .unwrap()
            .contains("User: 10.9.0.0/16 dev port 2 GW 10.0.0.254"));
        assert!(command("tnl-route-del", &["10.9.0.0/16"], t).is_ok());
        assert!(command("tnl-route-del", &["10.9.0.0/16"], t)
            .unwrap_err()
            .contains("no route"));
        assert!(command("tnl-neigh-set", &["2", "10.0.0.7", "02:00:00:00:00:07"], t).is_ok());
        assert!(command("tnl-neigh-show", &[], t)
            .unwrap()
            .contains("10.0.0.7"));
        assert!(
            command("tnl-neigh-set", &["1", "10.0.0.7", "02:00:00:00:00:07"], t)
                .unwrap_err()
                .contains("not an underlay")
        );
        assert!(command("tnl-neigh-set", &["2", "10.0.0.7"], t)
            .unwrap_err()
            .contains("wrong arguments"));
        assert!(command("tnl-route-add", &["10.9.0.0/16"], None)
            .unwrap_err()
            .contains("no underlay"));
        assert!(command("tnl-nope", &[], t)
            .unwrap_err()
            .contains("unknown command"));
    }

    #[test]
    fn ipv6_underlays_take_ipv6_routes_and_neighbours() {
        let t = from_ports(&ports(&[
            "2=null,ip=10.0.0.1/24",
            "3=null,ip=fd90::1/64",
            "10=vxlan:remote_ip=fd90::2,key=5",
        ]))
        .unwrap()
        .unwrap();
        let t = Some(&*t);
        assert_eq!(
            command("tnl-route-add", &["fd91::/64", "fd90::fe"], t).unwrap(),
            "OK"
        );
        let routes = command("tnl-route-show", &[], t).unwrap();
        assert!(
            routes.contains("Cached: fd90::/64 dev port 3 SRC fd90::1"),
            "{routes}"
        );
        assert!(
            routes.contains("User: fd91::/64 dev port 3 GW fd90::fe SRC fd90::1"),
            "{routes}"
        );
        assert!(command("tnl-route-add", &["fd92::/64", "10.0.0.254"], t)
            .unwrap_err()
            .contains("different IP versions"));
        assert!(command("tnl-neigh-set", &["3", "fd90::2", "02:00:00:00:00:07"], t).is_ok());
        assert!(command("tnl-neigh-show", &[], t)
            .unwrap()
            .contains("fd90::2"));
        assert!(
            command("tnl-neigh-set", &["3", "ff02::1", "02:00:00:00:00:07"], t).is_err(),
            "multicast"
        );
        assert!(ports_show(t).contains("underlay port 3: fd90::1/64"));
    }

    #[test]
    fn tlv_maps_are_added_dumped_and_removed() {
        let (_, t) = tlv_command(
            "add-tlv-map",
            &["{class=0xffff,type=0,len=4}->tun_metadata0,{class=0x102,type=0x80,len=8}->tun_metadata1"],
            &TlvMap::default(),
        )
        .unwrap();
        let t = t.unwrap();
        assert_eq!(t.entries().len(), 2);
        let (dump, none) = tlv_command("dump-tlv-map", &[], &t).unwrap();
        assert!(none.is_none());
        assert!(
            dump.contains(" 0x0102 0x80  8       tun_metadata1"),
            "{dump}"
        );
        let e = tlv_command(
            "add-tlv-map",
            &["{class=1,type=1,len=4}->tun_metadata0"],
            &t,
        )
        .unwrap_err();
        assert!(e.contains("already mapped"), "{e}");
        let (_, t2) = tlv_command(
            "del-tlv-map",
            &["{class=0xffff,type=0,len=4}->tun_metadata0"],
            &t,
        )
        .unwrap();
        assert_eq!(t2.unwrap().entries().len(), 1);
        let (_, t3) = tlv_command("del-tlv-map", &[], &t).unwrap();
        assert!(t3.unwrap().is_empty());
        assert!(TlvEntry::parse_list("").is_err());
        assert!(tlv_command("add-tlv-map", &[], &TlvMap::default()).is_err());
    }

    #[test]
    fn prefixes_parse() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(parse_prefix("10.1.0.0/16").unwrap(), (ip("10.1.0.0"), 16));
        assert_eq!(parse_prefix("10.1.0.9").unwrap(), (ip("10.1.0.9"), 32));
        assert_eq!(parse_prefix("fd91::/64").unwrap(), (ip("fd91::"), 64));
        assert_eq!(parse_prefix("fd91::9").unwrap(), (ip("fd91::9"), 128));
        assert!(parse_prefix("10.1.0.0/33").is_err());
        assert!(parse_prefix("fd91::/129").is_err());
        assert!(parse_ip("x").is_err());
        assert_eq!(
            parse_mac("02:00:0a:5a:00:01").unwrap(),
            [2, 0, 10, 0x5a, 0, 1]
        );
        for bad in [
            "02:00:0a:5a:00",
            "02:00:0a:5a:00:01:02",
            "2:0:a:5a:0:1",
            "zz:00:00:00:00:00",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
    }
}
