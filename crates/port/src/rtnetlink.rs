//! The kernel's routing table over rtnetlink, as Open vSwitch's
//! `route-table.c` reads it: a dump of every route (`RTM_GETROUTE`), each
//! kept as OVS 3.1's `route_table_parse` keeps it (unicast and local
//! routes, not those of scope "nowhere", the output device by name), and
//! a [`Watch`] on the route, address and link groups that says when to
//! read it again. The parsing ([`parse`]) does no I/O.

#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One route of the kernel's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlRoute {
    /// Destination prefix.
    pub prefix: IpAddr,
    /// Its length.
    pub len: u8,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The interface it leaves by (its index, as the kernel gave it).
    pub oif: u32,
    /// A route to one of the host's own addresses (`RTN_LOCAL`).
    pub local: bool,
    /// `RTA_MARK` (0: none).
    pub mark: u32,
    /// The table (`RTA_TABLE`, else the header's): 254 is `main`, 255
    /// `local`.
    pub table: u32,
}

/// `RT_TABLE_MAIN`.
pub const TABLE_MAIN: u32 = 254;

const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_TABLE: u16 = 15;
const RTA_MARK: u16 = 16;
const RTN_UNICAST: u8 = 1;
const RTN_LOCAL: u8 = 2;
const RT_SCOPE_NOWHERE: u8 = 255;
/// `RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE |
/// RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE`.
const WATCH_GROUPS: u32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400;

/// What one buffer of a dump held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The routes kept.
    pub routes: Vec<NlRoute>,
    /// The dump's end was in it (`NLMSG_DONE`).
    pub done: bool,
    /// The kernel's error (`NLMSG_ERROR`, a negative errno), if any.
    pub error: Option<i32>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn addr(family: u8, p: &[u8]) -> Option<IpAddr> {
    match (family, p.len()) {
        (2, 4) => Some(IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3]))),
        (10, 16) => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(p).ok()?))),
        _ => None,
    }
}

/// The netlink messages in `buf` (one `recv`'s worth): `RTM_NEWROUTE`s
/// kept as OVS keeps them, the end of the dump and errors. Malformed
/// bytes end the parse of the buffer; nothing panics.
pub fn parse(buf: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(ty)) = (u32_at(buf, at), u16_at(buf, at + 4)) else {
            break;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            break;
        }
        let msg = &buf[at..at + len];
        match ty {
            NLMSG_DONE => out.done = true,
            NLMSG_ERROR => {
                let e = u32_at(msg, NLMSG_HDRLEN).map_or(-1, |e| e as i32);
                if e != 0 {
                    out.error = Some(e);
                }
                out.done = true;
            }
            RTM_NEWROUTE => {
                if let Some(r) = route(&msg[NLMSG_HDRLEN..]) {
                    out.routes.push(r);
                }
            }
            _ => {}
        }
        at += len.next_multiple_of(4);
    }
    out
}

/// One `RTM_NEWROUTE`'s body, if OVS would keep it.
fn route(body: &[u8]) -> Option<NlRoute> {
    let rt = body.get(..RTMSG_LEN)?;
    let (family, dst_len, table, scope, kind) = (rt[0], rt[1], rt[4], rt[6], rt[7]);
    if !matches!(family, 2 | 10) || scope == RT_SCOPE_NOWHERE {
        return None;
    }
    if kind != RTN_UNICAST && kind != RTN_LOCAL {
        return None;
    }
    let mut r = NlRoute {
        prefix: if family == 2 {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        },
        len: dst_len,
        gw: None,
        oif: 0,
        local: kind == RTN_LOCAL,
        mark: 0,
        table: u32::from(table),
    };
    if dst_len > if family == 2 { 32 } else { 128 } {
        return None;
    }
    let mut at = RTMSG_LEN;
    while at + 4 <= body.len() {
        let alen = usize::from(u16_at(body, at)?);
        let aty = u16_at(body, at + 2)? & 0x3fff;
        if alen < 4 || at + alen > body.len() {
            return None;
        }
        let p = &body[at + 4..at + alen];
        match aty {
            RTA_DST => r.prefix = addr(family, p)?,
            RTA_GATEWAY => r.gw = Some(addr(family, p)?),
            RTA_OIF => r.oif = u32_at(p, 0)?,
            RTA_MARK => r.mark = u32_at(p, 0)?,
            RTA_TABLE => r.table = u32_at(p, 0)?,
            _ => {}
        }
        at += alen.next_multiple_of(4);
    }
    Some(r)
}

fn socket(groups: u32, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if groups != 0 {
        // SAFETY: sockaddr_nl is plain data; all zeros is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = groups;
        // SAFETY: `sa` is a sockaddr_nl of the size given, alive for the call.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

fn recv(fd: &OwnedFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length for the whole call.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Every route of the kernel's tables (of the calling thread's network
/// namespace) that OVS keeps.
pub fn dump() -> io::Result<Vec<NlRoute>> {
    let fd = socket(0, 0)?;
    let mut req = [0u8; NLMSG_HDRLEN + RTMSG_LEN];
    req[..4].copy_from_slice(&((NLMSG_HDRLEN + RTMSG_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // rtmsg: family AF_UNSPEC (every family), the rest zero.
    // SAFETY: `req` is readable for its length; the socket is unbound, so
    // the message goes to the kernel.
    let n = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut routes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = recv(&fd, &mut buf, 0)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "rtnetlink dump cut short",
            ));
        }
        let p = parse(&buf[..n]);
        routes.extend(p.routes);
        if let Some(e) = p.error {
            return Err(io::Error::from_raw_os_error(-e));
        }
        if p.done {
            return Ok(routes);
        }
    }
}

/// The name of interface `index` (`None` when there is none).
pub fn ifname(index: u32) -> Option<String> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has room for IF_NAMESIZE bytes, as if_indextoname
    // needs; it writes a NUL-terminated name there or returns null.
    let p = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname succeeded: `name` holds a NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
}

/// A socket on rtnetlink's route, address and link groups: whether
/// anything changed since the last look, as OVS's route table is told
/// (it then reads the whole table again).
#[derive(Debug)]
pub struct Watch {
    fd: OwnedFd,
}

impl Watch {
    /// Joins the groups (in the calling thread's network namespace).
    pub fn open() -> io::Result<Watch> {
        Ok(Watch {
            fd: socket(WATCH_GROUPS, libc::SOCK_NONBLOCK)?,
        })
    }

    /// Whether any route, address or link changed since the last call
    /// (what was queued is read and dropped). A queue that overflowed
    /// counts as a change.
    pub fn changed(&self) -> bool {
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            match recv(&self.fd, &mut buf, libc::MSG_DONTWAIT) {
                Ok(0) => return any,
                Ok(_) => any = true,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => any = true,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return any,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A netlink message of `ty` with `body`.
    fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + body.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m.resize(len.next_multiple_of(4), 0);
        m
    }

    fn attr(ty: u16, p: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(p);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    fn rtmsg(
        family: u8,
        dst_len: u8,
        table: u8,
        scope: u8,
        kind: u8,
        attrs: &[Vec<u8>],
    ) -> Vec<u8> {
        let mut b = vec![family, dst_len, 0, 0, table, 4, scope, kind, 0, 0, 0, 0];
        for a in attrs {
            b.extend_from_slice(a);
        }
        b
    }

    #[test]
    fn routes_are_kept_as_ovs_keeps_them() {
        let mut buf = Vec::new();
        // 10.0.0.0/24 dev 7, main table.
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(
                2,
                24,
                254,
                253,
                RTN_UNICAST,
                &[
                    attr(RTA_DST, &[10, 0, 0, 0]),
                    attr(RTA_OIF, &7u32.to_ne_bytes()),
                ],
            ),
        ));
        // 10.0.0.17 local, local table.
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(
                2,
                32,
                255,
                254,
                RTN_LOCAL,
                &[
                    attr(RTA_DST, &[10, 0, 0, 17]),
                    attr(RTA_OIF, &7u32.to_ne_bytes()),
                ],
            ),
        ));
        // default via 10.0.0.1, a mark.
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(
                2,
                0,
                254,
                0,
                RTN_UNICAST,
                &[
                    attr(RTA_GATEWAY, &[10, 0, 0, 1]),
                    attr(RTA_OIF, &7u32.to_ne_bytes()),
                    attr(RTA_MARK, &5u32.to_ne_bytes()),
                ],
            ),
        ));
        // A broadcast route and one of scope nowhere: not kept.
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(2, 32, 255, 253, 3, &[attr(RTA_DST, &[10, 0, 0, 255])]),
        ));
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(
                2,
                8,
                254,
                255,
                RTN_UNICAST,
                &[attr(RTA_DST, &[11, 0, 0, 0])],
            ),
        ));
        // fd00::/64 with RTA_TABLE.
        let mut v6 = [0u8; 16];
        v6[0] = 0xfd;
        buf.extend(msg(
            RTM_NEWROUTE,
            &rtmsg(
                10,
                64,
                252,
                0,
                RTN_UNICAST,
                &[attr(RTA_DST, &v6), attr(RTA_TABLE, &1000u32.to_ne_bytes())],
            ),
        ));
        buf.extend(msg(NLMSG_DONE, &[0; 4]));
        let p = parse(&buf);
        assert!(p.done && p.error.is_none());
        let r = &p.routes;
        assert_eq!(r.len(), 4, "{r:?}");
        assert_eq!(
            (r[0].prefix, r[0].len, r[0].oif, r[0].local, r[0].table),
            ("10.0.0.0".parse().unwrap(), 24, 7, false, 254)
        );
        assert!(r[1].local);
        assert_eq!(
            (r[2].prefix, r[2].len, r[2].gw, r[2].mark),
            (
                "0.0.0.0".parse().unwrap(),
                0,
                Some("10.0.0.1".parse().unwrap()),
                5
            )
        );
        assert_eq!(
            (r[3].prefix, r[3].len, r[3].table),
            ("fd00::".parse().unwrap(), 64, 1000)
        );
        let e = parse(&msg(NLMSG_ERROR, &(-13i32).to_ne_bytes()));
        assert_eq!((e.done, e.error), (true, Some(-13)));
    }

    #[test]
    fn this_namespace_has_its_loopback_route() {
        // Every namespace has 127.0.0.1 local on lo (when lo is up, as
        // here in the test's own namespace).
        let routes = dump().unwrap();
        let lo = routes
            .iter()
            .find(|r| r.local && r.prefix == IpAddr::V4(Ipv4Addr::LOCALHOST));
        if let Some(lo) = lo {
            assert_eq!(ifname(lo.oif).as_deref(), Some("lo"));
        }
        assert!(ifname(0).is_none());
        // A watch opens and has nothing to say or something: either is fine.
        let w = Watch::open().unwrap();
        let _ = w.changed();
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&b);
        }
    }
}
