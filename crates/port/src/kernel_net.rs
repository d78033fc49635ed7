//! What the kernel of the switch's network namespace says about its
//! addresses and routes, for tunnels through internal ports (OVS's
//! `br-phy` with an address): every interface's addresses
//! (`getifaddrs`), and the main routing table (`/proc/net/route` and
//! `/proc/net/ipv6_route`), as OVS's `route-table` reads it.

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

/// The main table's usable routes, IPv4 and IPv6.
pub fn routes() -> Vec<SysRoute> {
    let mut v = std::fs::read_to_string("/proc/net/route")
        .map(|s| parse_ipv4_routes(&s))
        .unwrap_or_default();
    if let Ok(s) = std::fs::read_to_string("/proc/net/ipv6_route") {
        v.extend(parse_ipv6_routes(&s));
    }
    v
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
