//! What the kernel of the switch's network namespace says about its
//! addresses and routes, for tunnels through internal ports (OVS's
//! `br-phy` with an address): every interface's addresses
//! (`getifaddrs`), the main routing table (over rtnetlink, else
//! `/proc/net/route` and `/proc/net/ipv6_route`), and every table's routes
//! with their source addresses as OVS's route table holds them
//! ([`cached_routes`], what `ovs/route/show` lists).

#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    /// The interface.
    pub ifname: String,
    /// The address.
    pub ip: IpAddr,
    /// Its prefix length.
    pub prefix: u8,
}

/// One route of the kernel's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoute {
    /// Destination prefix.
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The interface it leaves by.
    pub dev: String,
}

/// Every interface's IPv4 and IPv6 addresses.
pub fn if_addrs() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocated into `head`, freed
    // below with freeifaddrs; nothing else holds it.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs made, alive until
        // freeifaddrs; its pointers are null or valid for their types
        // (the family says which sockaddr an address is).
        let (name, addr, mask, next) = unsafe {
            let e = &*p;
            (
                std::ffi::CStr::from_ptr(e.ifa_name)
                    .to_string_lossy()
                    .into_owned(),
                sockaddr_ip(e.ifa_addr),
                sockaddr_ip(e.ifa_netmask),
                e.ifa_next,
            )
        };
        if let Some(ip) = addr {
            let prefix = match mask {
                Some(IpAddr::V4(m)) => u32::from(m).count_ones() as u8,
                Some(IpAddr::V6(m)) => u128::from(m).count_ones() as u8,
                None => {
                    if ip.is_ipv4() {
                        32
                    } else {
                        128
                    }
                }
            };
            out.push(IfAddr {
                ifname: name,
                ip,
                prefix,
            });
        }
        p = next;
    }
    // SAFETY: `head` is the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The IP address of a `sockaddr` of family AF_INET or AF_INET6.
///
/// # Safety
/// `sa` is null or points to a sockaddr whose family gives its type.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller's promise: a valid sockaddr, whose family says
    // which larger struct it begins.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let v = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(v.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let v = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(v.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// The main table's usable routes, IPv4 and IPv6: from rtnetlink (its
/// unicast routes with an output device), else from `/proc`.
pub fn routes() -> Vec<SysRoute> {
    if let Ok(all) = crate::rtnetlink::dump() {
        return all
            .into_iter()
            .filter(|r| r.table == crate::rtnetlink::TABLE_MAIN && !r.local)
            .filter_map(|r| {
                Some(SysRoute {
                    dev: crate::rtnetlink::ifname(r.oif)?,
                    prefix: r.prefix,
                    len: r.len,
                    gw: r.gw,
                })
            })
            .collect();
    }
    let mut v = std::fs::read_to_string("/proc/net/route")
        .map(|s| parse_ipv4_routes(&s))
        .unwrap_or_default();
    if let Ok(s) = std::fs::read_to_string("/proc/net/ipv6_route") {
        v.extend(parse_ipv6_routes(&s));
    }
    v
}

/// A route of the kernel's tables as `ovs-appctl ovs/route/show` lists
/// it (OVS's "Cached" routes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedRoute {
    /// Destination prefix.
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The interface it leaves by.
    pub dev: String,
    /// The source address packets to it take.
    pub src: IpAddr,
    /// A route to one of the host's own addresses.
    pub local: bool,
    /// Its packet mark (0: none).
    pub mark: u32,
}

/// Every route of the kernel's tables that OVS 3.1's route table holds
/// (`route_table_parse`, then `ovs_router_insert`): unicast and local
/// routes with an output device and a source address on it.
pub fn cached_routes() -> Vec<CachedRoute> {
    let routes = crate::rtnetlink::dump().unwrap_or_default();
    let addrs = if_addrs().unwrap_or_default();
    with_sources(&routes, crate::rtnetlink::ifname, &addrs)
}

/// [`cached_routes`] from a dump, the interfaces' names and addresses.
pub fn with_sources(
    routes: &[crate::rtnetlink::NlRoute],
    ifname: impl Fn(u32) -> Option<String>,
    addrs: &[IfAddr],
) -> Vec<CachedRoute> {
    routes
        .iter()
        .filter_map(|r| {
            let dev = ifname(r.oif)?;
            let src = route_src(r.prefix, r.gw, &dev, addrs)?;
            Some(CachedRoute {
                prefix: r.prefix,
                len: r.len,
                gw: r.gw,
                dev,
                src,
                local: r.local,
                mark: r.mark,
            })
        })
        .collect()
}

/// A route's source address, as OVS's `ovs_router_insert__` finds it:
/// `dev`'s address whose subnet holds the destination `dst`, else the one
/// whose subnet holds the gateway `gw`.
pub fn route_src(dst: IpAddr, gw: Option<IpAddr>, dev: &str, addrs: &[IfAddr]) -> Option<IpAddr> {
    src_addr(dst, dev, addrs).or_else(|| gw.and_then(|g| src_addr(g, dev, addrs)))
}

/// The address of `dev` whose subnet holds `dst`, the longest prefix
/// first (OVS's `get_src_addr`).
pub fn src_addr(dst: IpAddr, dev: &str, addrs: &[IfAddr]) -> Option<IpAddr> {
    let masked = |a: IpAddr, n: u8| -> u128 {
        let (bits, width) = match a {
            IpAddr::V4(v) => (u128::from(u32::from(v)), 32u32),
            IpAddr::V6(v) => (u128::from(v), 128),
        };
        let n = u32::from(n).min(width);
        if n == 0 {
            0
        } else {
            bits >> (width - n)
        }
    };
    addrs
        .iter()
        .filter(|a| a.ifname == dev && a.ip.is_ipv4() == dst.is_ipv4())
        .filter(|a| masked(a.ip, a.prefix) == masked(dst, a.prefix))
        .max_by_key(|a| a.prefix)
        .map(|a| a.ip)
}

/// Route flags of `<linux/route.h>`.
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
const RTF_REJECT: u32 = 0x200;

/// `/proc/net/route`: a header line, then `Iface Destination Gateway
/// Flags RefCnt Use Metric Mask ...`, addresses in hex as the kernel
/// keeps them (network order read as a little-endian word).
pub fn parse_ipv4_routes(text: &str) -> Vec<SysRoute> {
    let word = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|w| Ipv4Addr::from(w.to_le_bytes()))
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dev, dst, gw, flags, mask) =
                (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?, f.get(7)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
                return None;
            }
            let gw = word(gw)?;
            Some(SysRoute {
                prefix: IpAddr::V4(word(dst)?),
                len: u32::from(word(mask)?).count_ones() as u8,
                gw: (flags & RTF_GATEWAY != 0 && !gw.is_unspecified()).then_some(IpAddr::V4(gw)),
                dev: (*dev).to_string(),
            })
        })
        .collect()
}

/// `/proc/net/ipv6_route`: `dest plen src plen gateway metric refcnt use
/// flags iface`, addresses as 32 hex digits; multicast, local-table
/// (`lo`) and rejected routes left out.
pub fn parse_ipv6_routes(text: &str) -> Vec<SysRoute> {
    let addr = |s: &str| u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from);
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let flags = u32::from_str_radix(f[8], 16).ok()?;
            let dst = addr(f[0])?;
            if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 || dst.is_multicast() || f[9] == "lo"
            {
                return None;
            }
            let gw = addr(f[4])?;
            Some(SysRoute {
                prefix: IpAddr::V6(dst),
                len: u8::from_str_radix(f[1], 16).ok()?,
                gw: (!gw.is_unspecified()).then_some(IpAddr::V6(gw)),
                dev: f[9].to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_routes_take_their_source_as_ovs_does() {
        use crate::rtnetlink::NlRoute;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let route = |p: &str, len, gw: Option<&str>, oif, local| NlRoute {
            prefix: ip(p),
            len,
            gw: gw.map(ip),
            oif,
            local,
            mark: 0,
            table: 254,
        };
        let addrs = [
            IfAddr {
                ifname: "p1".into(),
                ip: ip("10.0.0.17"),
                prefix: 24,
            },
            IfAddr {
                ifname: "p1".into(),
                ip: ip("fd00::17"),
                prefix: 64,
            },
            IfAddr {
                ifname: "p2".into(),
                ip: ip("10.9.0.1"),
                prefix: 16,
            },
        ];
        let names = |i: u32| match i {
            1 => Some("p1".to_string()),
            2 => Some("p2".to_string()),
            _ => None,
        };
        let routes = [
            route("10.0.0.0", 24, None, 1, false),
            route("10.0.0.17", 32, None, 1, true),
            route("0.0.0.0", 0, Some("10.0.0.1"), 1, false),
            route("fd00::", 64, None, 1, false),
            // No address on p2's device for it, no gateway: left out.
            route("192.168.0.0", 16, None, 2, false),
            // No device: left out.
            route("10.1.0.0", 16, None, 9, false),
        ];
        let c = with_sources(&routes, names, &addrs);
        let shown: Vec<(String, String)> = c
            .iter()
            .map(|r| (format!("{}/{}", r.prefix, r.len), r.src.to_string()))
            .collect();
        assert_eq!(
            shown,
            [
                ("10.0.0.0/24", "10.0.0.17"),
                ("10.0.0.17/32", "10.0.0.17"),
                ("0.0.0.0/0", "10.0.0.17"),
                ("fd00::/64", "fd00::17"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert!(c[1].local && !c[0].local);
    }

    #[test]
    fn the_kernels_ipv4_table_is_read() {
        let t =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                 br-phy\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                 bad\t0000000A\t00000000\t0201\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                 short\t00\n";
        let r = parse_ipv4_routes(t);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].gw, Some("192.168.0.1".parse().unwrap()));
        assert_eq!(r[0].len, 0);
        assert_eq!(
            (r[1].prefix, r[1].len, r[1].gw, r[1].dev.as_str()),
            ("10.0.0.0".parse().unwrap(), 24, None, "br-phy")
        );
    }

    #[test]
    fn the_kernels_ipv6_table_is_read() {
        let t = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   br-phy\n\
                 00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd0000000000000000000000000000fe 00000400 00000001 00000000 00000003   br-phy\n\
                 ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   br-phy\n\
                 fd000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n";
        let r = parse_ipv6_routes(t);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].prefix, r[0].len), ("fd00::".parse().unwrap(), 64));
        assert_eq!(r[1].gw, Some("fd00::fe".parse().unwrap()));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panicking(t in "\\PC{0,300}") {
            let _ = parse_ipv4_routes(&t);
            let _ = parse_ipv6_routes(&t);
        }
    }

    #[test]
    fn the_loopback_address_is_listed() {
        let a = if_addrs().unwrap();
        assert!(a
            .iter()
            .any(|x| x.ifname == "lo" && x.ip == IpAddr::from([127, 0, 0, 1]) && x.prefix == 8));
    }
}
