//! `ovs-appctl ovs/route/add|del|show|lookup` and `tnl/neigh/set`
//! (`tnl/arp/set`) as OVS 3.1's `ovs-router.c` and `tnl-neigh-cache.c`
//! take them: a route names its device (`ovs/route/add 10.0.0.0/24 br-p1
//! [GW] [pkt_mark=M]`) and takes its source address from it, whether or
//! not the switch has tunnels yet; `show` lists the kernel's routes
//! (every table's, as OVS's route table holds them) and those given by
//! hand; errors in OVS's words.

use std::net::IpAddr;

use sluice_classifier::tunnel::{in_prefix, mask_prefix};
use sluice_port::kernel_net::{self, CachedRoute, IfAddr};

use crate::ctl::Control;
use crate::tunnels::{self, UserRoute};

/// `pkt_mark=N` (C's `%i`: decimal, `0x` hex, or `0` octal).
fn mark(s: &str) -> Option<u32> {
    let v = s.strip_prefix("pkt_mark=")?;
    let (digits, radix) = match v {
        _ if v.starts_with("0x") || v.starts_with("0X") => (&v[2..], 16),
        _ if v.len() > 1 && v.starts_with('0') => (&v[1..], 8),
        _ => (v, 10),
    };
    u32::from_str_radix(digits, radix).ok()
}

/// `ovs/route/add`'s arguments (after the command) into a route, its
/// source from `addrs`; the error as OVS words it.
pub(super) fn parse_add(args: &[String], addrs: &[IfAddr]) -> Result<UserRoute, String> {
    let [p, dev, rest @ ..] = args else {
        return Err("\"ovs/route/add\" command requires at least 2 arguments".into());
    };
    if rest.len() > 2 {
        return Err("\"ovs/route/add\" command takes at most 4 arguments".into());
    }
    let (ip, len) = tunnels::parse_prefix(p).map_err(|_| "Invalid parameters".to_string())?;
    let mut gw = None;
    let mut pkt_mark = 0;
    if let Some(a) = rest.first() {
        match (mark(a), a.parse::<IpAddr>()) {
            (Some(m), _) => pkt_mark = m,
            (None, Ok(g)) if g.is_ipv4() == ip.is_ipv4() => {
                gw = (!g.is_unspecified()).then_some(g);
            }
            _ if ip.is_ipv4() => return Err("Invalid pkt_mark or gateway".into()),
            _ => return Err("Invalid pkt_mark or IPv6 gateway".into()),
        }
    }
    if let Some(a) = rest.get(1) {
        pkt_mark = mark(a).ok_or("Invalid pkt_mark")?;
    }
    let src = kernel_net::route_src(ip, gw, dev, addrs).ok_or("Error while inserting route.")?;
    Ok(UserRoute {
        prefix: mask_prefix(ip, len),
        len,
        dev: dev.clone(),
        gw,
        src,
        mark: pkt_mark,
    })
}

/// `ovs/route/del PREFIX/LEN [pkt_mark=M]`'s arguments.
fn parse_del(args: &[String]) -> Result<(IpAddr, u8, u32), String> {
    let (p, m) = match args {
        [p] => (p, None),
        [p, m] => (p, Some(m)),
        [] => return Err("\"ovs/route/del\" command requires at least 1 arguments".into()),
        _ => return Err("\"ovs/route/del\" command takes at most 2 arguments".into()),
    };
    let (ip, len) = tunnels::parse_prefix(p).map_err(|_| "Invalid parameters".to_string())?;
    let m = match m {
        Some(m) => mark(m).ok_or("Invalid pkt_mark")?,
        None => 0,
    };
    Ok((mask_prefix(ip, len), len, m))
}

/// OVS's lookup among `user` and `cached` routes for `dst` with `mark`:
/// the highest priority (a route by hand its length + 32, a local route
/// its length + 64, another its length). (source, gateway, device).
pub(super) fn lookup(
    dst: IpAddr,
    mark: u32,
    user: &[UserRoute],
    cached: &[CachedRoute],
) -> Option<(IpAddr, Option<IpAddr>, String)> {
    let users = user
        .iter()
        .filter(|r| r.mark == mark && in_prefix(dst, r.prefix, r.len))
        .map(|r| (u32::from(r.len) + 32, (r.src, r.gw, r.dev.clone())));
    let kernel = cached
        .iter()
        .filter(|r| r.mark == mark && in_prefix(dst, r.prefix, r.len))
        .map(|r| {
            let pri = u32::from(r.len) + if r.local { 64 } else { 0 };
            (pri, (r.src, r.gw, r.dev.clone()))
        });
    users.chain(kernel).max_by_key(|(p, _)| *p).map(|(_, r)| r)
}

/// Runs `method` if it is one of this module's.
pub(super) fn call(
    method: &str,
    args: &[String],
    control: &Control,
) -> Option<Result<String, String>> {
    Some(match method {
        "ovs/route/add" => {
            let addrs = kernel_net::if_addrs().unwrap_or_default();
            parse_add(args, &addrs).map(|r| {
                control.user_route_add(r);
                "OK".to_string()
            })
        }
        "ovs/route/del" => parse_del(args).and_then(|(ip, len, m)| {
            if control.user_route_del(ip, len, m) {
                Ok("OK".to_string())
            } else {
                Err("Not found".to_string())
            }
        }),
        "ovs/route/show" => Ok(tunnels::route_show(
            control.tunnels().as_deref(),
            &kernel_net::cached_routes(),
            &control.user_routes(),
        )),
        "ovs/route/lookup" => {
            let (ip, m) = match args {
                [ip] => (ip, 0),
                [ip, m] => match mark(m) {
                    Some(m) => (ip, m),
                    None => return Some(Err("Invalid pkt_mark".into())),
                },
                _ => {
                    return Some(Err(
                        "\"ovs/route/lookup\" command requires at least 1 arguments".into(),
                    ))
                }
            };
            // A host address alone (OVS: a /32 or /128).
            let dst = match tunnels::parse_prefix(ip) {
                Ok((a, n)) if n == sluice_classifier::tunnel::max_len(a) => a,
                _ => return Some(Err("Invalid parameters".into())),
            };
            match lookup(dst, m, &control.user_routes(), &kernel_net::cached_routes()) {
                Some((src, gw, dev)) => Ok(format!(
                    "src {src}\ngateway {}\ndev {dev}\n",
                    gw.map_or("::".to_string(), |g| g.to_string())
                )),
                None => Err("Not found".into()),
            }
        }
        "tnl/neigh/set" | "tnl/arp/set" => match args {
            [br, ip, mac] => match (
                ip.parse::<IpAddr>(),
                sluice_packet::wire::ethernet::parse_mac(mac),
            ) {
                (Err(_), _) => Err("bad IP address".into()),
                (_, None) => Err("bad MAC address".into()),
                (Ok(ip), Some(mac)) => {
                    control.neighbour_set(br, ip, mac);
                    Ok("OK".into())
                }
            },
            _ => Err(format!(
                "\"{method}\" command requires at least 3 arguments"
            )),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn routes_by_hand_as_ovs_takes_them() {
        let addrs = [IfAddr {
            ifname: "br-p1".into(),
            ip: ip("10.0.0.1"),
            prefix: 24,
        }];
        let r = parse_add(&strings(&["10.0.0.92/24", "br-p1"]), &addrs).unwrap();
        assert_eq!(
            (r.prefix, r.len, r.src, r.gw, r.mark),
            (ip("10.0.0.0"), 24, ip("10.0.0.1"), None, 0)
        );
        let r = parse_add(
            &strings(&["10.9.0.0/16", "br-p1", "10.0.0.254", "pkt_mark=0x10"]),
            &addrs,
        )
        .unwrap();
        assert_eq!(
            (r.gw, r.mark, r.src),
            (Some(ip("10.0.0.254")), 16, ip("10.0.0.1"))
        );
        assert_eq!(
            parse_add(&strings(&["10.0.0.0/24", "br-p1", "pkt_mark=7"]), &addrs)
                .unwrap()
                .mark,
            7
        );
        for (a, e) in [
            (&["x/24", "br-p1"][..], "Invalid parameters"),
            (
                &["10.9.0.0/16", "br-p1", "frob"][..],
                "Invalid pkt_mark or gateway",
            ),
            (
                &["fd00::/64", "br-p1", "frob"][..],
                "Invalid pkt_mark or IPv6 gateway",
            ),
            (
                &["10.9.0.0/16", "br-p1", "10.0.0.254", "x"][..],
                "Invalid pkt_mark",
            ),
            // No address of br-p1 holds it, nor a gateway.
            (
                &["10.9.0.0/16", "br-p1"][..],
                "Error while inserting route.",
            ),
            (
                &["10.9.0.0/16", "eth9", "10.0.0.254"][..],
                "Error while inserting route.",
            ),
        ] {
            assert_eq!(parse_add(&strings(a), &addrs).unwrap_err(), e, "{a:?}");
        }
        assert_eq!(
            parse_del(&strings(&["10.0.0.92/24"])).unwrap(),
            (ip("10.0.0.0"), 24, 0)
        );
        assert_eq!(
            parse_del(&strings(&["10.0.0.0/24", "y"])).unwrap_err(),
            "Invalid pkt_mark"
        );
    }

    #[test]
    fn lookup_prefers_by_priority_as_ovs() {
        let user = [UserRoute {
            prefix: ip("10.0.0.0"),
            len: 24,
            dev: "br-p1".into(),
            gw: None,
            src: ip("10.0.0.1"),
            mark: 0,
        }];
        let cached = |p: &str, len, local| CachedRoute {
            prefix: ip(p),
            len,
            gw: None,
            dev: "eth0".into(),
            src: ip("10.0.0.2"),
            local,
            mark: 0,
        };
        // A user /24 beats a kernel /32 (24 + 32 > 32)...
        let got = lookup(ip("10.0.0.7"), 0, &user, &[cached("10.0.0.7", 32, false)]).unwrap();
        assert_eq!(got.2, "br-p1");
        // ...not a local /32 (32 + 64).
        let got = lookup(ip("10.0.0.7"), 0, &user, &[cached("10.0.0.7", 32, true)]).unwrap();
        assert_eq!(got.2, "eth0");
        assert!(
            lookup(ip("10.0.0.7"), 5, &user, &[]).is_none(),
            "another mark"
        );
        assert!(lookup(ip("10.1.0.7"), 0, &user, &[]).is_none());
    }
}
