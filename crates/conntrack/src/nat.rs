//! Address translation: what a `ct(nat...)` asks ([`Nat`]), the reply
//! tuple a translated connection gets ([`reply_tuple`], chosen as Open
//! vSwitch 3.1's userspace tracker chooses it) and the rewriting of its
//! packets ([`translate`]: addresses, TCP and UDP ports, checksums, and
//! the header an ICMP error quotes).

use sluice_packet::wire::checksum::{self, update16, update32, update_bytes};
use sluice_packet::wire::l4::proto;

use crate::tuple::Tuple;

/// Translate the source address (and port).
pub const NAT_SRC: u8 = 1;
/// Translate the destination address (and port).
pub const NAT_DST: u8 = 2;
/// A source port range was given.
pub const NAT_SRC_PORT: u8 = 4;
/// A destination port range was given.
pub const NAT_DST_PORT: u8 = 8;

/// What `ct(commit,nat)` (no `src` or `dst`) does to a new connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NatAlone {
    /// As OVS 3.1's userspace tracker: the connection gets a reply tuple
    /// of address 0 and destination port 0, so its replies never find it
    /// (see docs/conntrack.md).
    #[default]
    Ovs,
    /// As the Linux kernel's tracker (a "null binding"): no translation,
    /// the connection committed as it is, its replies found.
    Kernel,
}

impl NatAlone {
    /// `ovs` or `kernel`.
    pub fn parse(s: &str) -> Result<NatAlone, String> {
        match s {
            "ovs" => Ok(NatAlone::Ovs),
            "kernel" => Ok(NatAlone::Kernel),
            _ => Err(format!(
                "unknown ct_nat_alone mode '{s}': expected ovs (as OVS 3.1: a new connection committed with a bare nat gets an unusable reply tuple) or kernel (committed untranslated, as the Linux kernel does)"
            )),
        }
    }
}

/// Which side a `nat(...)` translates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `nat` alone: a committed connection's translation applies to
    /// its packets; a new connection gets none.
    #[default]
    Apply,
    /// `nat(src=...)`: SNAT.
    Src,
    /// `nat(dst=...)`: DNAT.
    Dst,
}

/// What a `ct` action's `nat` asks, as `ovs-ofctl` takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Nat {
    /// `src`, `dst` or neither.
    pub kind: NatKind,
    /// The address range's family, if an address was given (`Some(true)`:
    /// IPv6).
    pub v6: Option<bool>,
    /// The range's first address (IPv4 in the first 4 bytes).
    pub min: [u8; 16],
    /// Its last address (all zero: not given, the first alone).
    pub max: [u8; 16],
    /// The port range's first port (0: none given).
    pub min_port: u16,
    /// Its last (0: not given, the first alone).
    pub max_port: u16,
    /// `persistent` (kept and shown; OVS 3.1's userspace tracker picks
    /// an address by a hash of the connection either way).
    pub persistent: bool,
    /// `hash`.
    pub hash: bool,
    /// `random`.
    pub random: bool,
}

impl Nat {
    /// The datapath's `NAT_*` bits for it.
    pub fn action(&self) -> u8 {
        let (side, port) = match self.kind {
            NatKind::Apply => return 0,
            NatKind::Src => (NAT_SRC, NAT_SRC_PORT),
            NatKind::Dst => (NAT_DST, NAT_DST_PORT),
        };
        if self.min_port != 0 {
            side | port
        } else {
            side
        }
    }

    fn addr_range(&self) -> ([u8; 16], [u8; 16]) {
        let max = if self.max == [0; 16] || self.max < self.min {
            self.min
        } else {
            self.max
        };
        (self.min, max)
    }

    fn port_range(&self) -> (u16, u16) {
        (self.min_port, self.max_port.max(self.min_port))
    }
}

/// The other side of a `NAT_SRC`/`NAT_DST` action.
pub fn reverse_action(a: u8) -> u8 {
    if a & NAT_SRC != 0 {
        (a & !NAT_SRC) | NAT_DST
    } else if a & NAT_DST != 0 {
        (a & !NAT_DST) | NAT_SRC
    } else {
        a
    }
}

/// A hash of the connection and the range: which address and port of a
/// range a connection starts from. (OVS salts its hash with a random
/// number per process, so its choice within a range of several cannot be
/// predicted; this one is fixed, so a connection gets the same choice
/// again.)
fn range_hash(orig: &Tuple, nat: &Nat) -> u32 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut mix = |v: u64| h = (h.rotate_left(27) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    for a in [&nat.min, &nat.max, &orig.src, &orig.dst] {
        mix(u64::from_ne_bytes(a[..8].try_into().expect("8 bytes")));
        mix(u64::from_ne_bytes(a[8..].try_into().expect("8 bytes")));
    }
    mix(u64::from(nat.min_port) << 16 | u64::from(nat.max_port));
    mix(u64::from(orig.sport) << 32 | u64::from(orig.dport) << 16 | u64::from(orig.proto));
    mix(u64::from(orig.zone));
    (h ^ (h >> 32)) as u32
}

/// `min + off` within an address range (IPv4: the first 4 bytes; IPv6:
/// the offset added to the low 64 bits, carried into the high).
fn addr_in_range(min: &[u8; 16], max: &[u8; 16], v6: bool, hash: u32) -> [u8; 16] {
    let mut out = *min;
    if !v6 {
        let lo = u32::from_be_bytes(min[..4].try_into().expect("4 bytes"));
        let hi = u32::from_be_bytes(max[..4].try_into().expect("4 bytes"));
        let range = u64::from(hi - lo) + 1;
        let a = lo + (u64::from(hash) % range) as u32;
        out[..4].copy_from_slice(&a.to_be_bytes());
        return out;
    }
    let (min_v, max_v) = (u128::from_be_bytes(*min), u128::from_be_bytes(*max));
    // As OVS: a delta of at most 2^32 - 2 addresses is used.
    let delta = (max_v - min_v).min(0xffff_fffe) as u64;
    let a = min_v + u128::from(u64::from(hash) % (delta + 1));
    a.to_be_bytes()
}

/// The ports tried for one side: from `curr` on, wrapping within
/// `[min, max]` (a `curr` outside the range is tried first, then the
/// range), at most 128 of them; then, while the range is larger than
/// the attempts made, half as many from a pseudo-random start. `free`
/// answers whether a port gives a tuple no connection holds.
fn unique_port(
    curr: u16,
    min: u16,
    max: u16,
    seed: u32,
    free: &mut dyn FnMut(u16) -> bool,
) -> Option<u16> {
    let range = u32::from(max) - u32::from(min) + 1;
    let mut attempts = range.min(128);
    let mut curr = curr;
    let mut seed = seed | 1;
    loop {
        let in_range = (min..=max).contains(&curr);
        let n = if in_range { range } else { range + 1 };
        let mut p = curr;
        for _ in 0..n.min(attempts) {
            if free(p) {
                return Some(p);
            }
            p = if !(min..=max).contains(&p) || p == max {
                min
            } else {
                p + 1
            };
        }
        if attempts < range && attempts >= 16 {
            attempts /= 2;
            // xorshift: no need for a real random source here.
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            curr = (u32::from(min) + seed % range) as u16;
        } else {
            return None;
        }
    }
}

/// The tuple a new connection's replies will carry under `nat`, and its
/// `NAT_*` action bits: an address from the range (the packet's own when
/// none is given), the original ports when no connection holds the
/// result, else the next free ones (a given port range, or for a source
/// port the class it is in: 1-511, 600-1023, 1024-65535). `taken`
/// answers whether a connection holds a tuple. `None`: every candidate
/// is taken (OVS's "tuple space exhaustion").
///
/// `nat` without `src` or `dst` on a new connection gives it, as OVS
/// 3.1 does, a reply tuple of address 0 and destination port 0 (replies
/// then never find it): see docs/conntrack.md.
pub fn reply_tuple(
    orig: &Tuple,
    nat: &Nat,
    taken: &mut dyn FnMut(&Tuple) -> bool,
) -> Option<(u8, Tuple)> {
    let action = nat.action();
    let hash = range_hash(orig, nat);
    let (min, max) = nat.addr_range();
    let addr = if min == [0; 16] {
        if action & NAT_SRC != 0 {
            orig.src
        } else if action & NAT_DST != 0 {
            orig.dst
        } else {
            [0; 16]
        }
    } else {
        addr_in_range(&min, &max, orig.v6, hash)
    };
    let (pmin, pmax) = nat.port_range();
    let (curr_s, min_s, max_s) =
        if action & (NAT_SRC | NAT_SRC_PORT) == NAT_SRC || action & NAT_DST != 0 {
            let c = orig.sport;
            match c {
                0..=511 => (c, 1, 511),
                512..=1023 => (c, 600, 1023),
                _ => (c, 1024, 65535),
            }
        } else {
            let span = u32::from(pmax) - u32::from(pmin) + 1;
            ((u32::from(pmin) + hash % span) as u16, pmin, pmax)
        };
    let (curr_d, min_d, max_d) = if action & NAT_DST_PORT != 0 {
        let span = u32::from(pmax) - u32::from(pmin) + 1;
        ((u32::from(pmin) + hash % span) as u16, pmin, pmax)
    } else {
        (orig.dport, orig.dport, orig.dport)
    };
    let mut rev = orig.reverse();
    let pat = matches!(orig.proto, proto::TCP | proto::UDP);
    if pat {
        rev.sport = curr_d;
        rev.dport = curr_s;
    }
    if action & NAT_SRC != 0 {
        rev.dst = addr;
    } else {
        rev.src = addr;
    }
    if !pat {
        return (!taken(&rev)).then_some((action, rev));
    }
    if action & NAT_DST_PORT != 0 {
        let mut free = |p: u16| {
            let mut t = rev;
            t.sport = p;
            !taken(&t)
        };
        if let Some(p) = unique_port(curr_d, min_d, max_d, hash, &mut free) {
            rev.sport = p;
            return Some((action, rev));
        }
    }
    let mut free = |p: u16| {
        let mut t = rev;
        t.dport = p;
        !taken(&t)
    };
    let p = unique_port(curr_s, min_s, max_s, hash, &mut free)?;
    rev.dport = p;
    Some((action, rev))
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// One IP header within a packet: where it and its L4 header start,
/// where the datagram ends, its version and protocol.
#[derive(Debug, Clone, Copy)]
struct Ip {
    l3: usize,
    l4: usize,
    end: usize,
    v6: bool,
    proto: u8,
}

impl Ip {
    /// The IP header at `l3` (its L4 header at `l4`), ending where its
    /// length field says or at `limit`.
    fn at(b: &[u8], l3: usize, l4: usize, v6: bool, limit: usize) -> Option<Ip> {
        let (len_end, proto) = if v6 {
            (l3 + 40 + usize::from(be16(b, l3 + 4)), *b.get(l3 + 6)?)
        } else {
            (l3 + usize::from(be16(b, l3 + 2)), *b.get(l3 + 9)?)
        };
        Some(Ip {
            l3,
            l4,
            end: len_end.min(limit).max(l4),
            v6,
            proto,
        })
    }

    fn l4_len(&self) -> usize {
        self.end - self.l4
    }

    /// Sets the source (`src`) or destination address, updating the IPv4
    /// header checksum and the L4 checksum the address is in (TCP, UDP
    /// with one, ICMPv6), as OVS's `packet_set_ipv4_addr` and
    /// `packet_set_ipv6_addr` do (the L4 header must be whole).
    fn set_addr(&self, b: &mut [u8], src: bool, new: &[u8; 16]) {
        // Each family with its address length known (no call to
        // `memcmp` or `memcpy` for a 4-byte address).
        if self.v6 {
            self.set_addr_n::<16>(b, src, new);
        } else {
            self.set_addr_n::<4>(b, src, new);
        }
    }

    #[inline(always)]
    fn set_addr_n<const N: usize>(&self, b: &mut [u8], src: bool, new: &[u8; 16]) {
        let at = self.l3 + if self.v6 { 8 } else { 12 } + if src { 0 } else { N };
        let Some(old) = b.get(at..at + N).and_then(|o| <[u8; N]>::try_from(o).ok()) else {
            return;
        };
        let Ok(new) = <[u8; N]>::try_from(&new[..N]) else {
            return;
        };
        let fix = |c: u16| update_bytes(c, &old, &new);
        let l4_csum = self.l4_csum_at();
        // The same address again (a connection committed with `nat` and no
        // range, as OVN's `ct_commit_nat`, translates to itself): OVS
        // rewrites it all the same, which changes no byte unless a
        // checksum it updates is 0xffff (the update leaves 0x0000 then).
        if old == new
            && l4_csum.is_none_or(|c| be16(b, c) != 0xffff)
            && (self.v6 || be16(b, self.l3 + 10) != 0xffff)
        {
            return;
        }
        match l4_csum {
            // UDP's only if it has one, and never 0 after.
            Some(c) if self.proto == proto::UDP => {
                let v = be16(b, c);
                if v != 0 {
                    let v = fix(v);
                    put16(b, c, if v == 0 { 0xffff } else { v });
                }
            }
            Some(c) => put16(b, c, fix(be16(b, c))),
            None => {}
        }
        if !self.v6 {
            let word = |a: &[u8; N]| u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
            let c = update32(be16(b, self.l3 + 10), word(&old), word(&new));
            put16(b, self.l3 + 10, c);
        }
        b[at..at + N].copy_from_slice(&new);
    }

    /// Where the L4 checksum an address is in sits (TCP, UDP, ICMPv6),
    /// when the L4 header is whole.
    fn l4_csum_at(&self) -> Option<usize> {
        match self.proto {
            proto::TCP if self.l4_len() >= 20 => Some(self.l4 + 16),
            proto::UDP if self.l4_len() >= 8 => Some(self.l4 + 6),
            proto::ICMPV6 if self.v6 && self.l4_len() >= 4 => Some(self.l4 + 2),
            _ => None,
        }
    }

    /// Sets TCP or UDP ports, updating the checksum (UDP's only if it has
    /// one), as OVS's `packet_set_tcp_port`/`packet_set_udp_port`.
    fn set_ports(&self, b: &mut [u8], sport: u16, dport: u16) {
        let l4 = self.l4;
        let csum_at = match self.proto {
            proto::TCP => l4 + 16,
            proto::UDP => l4 + 6,
            _ => return,
        };
        if self.end < l4 + 4 {
            return;
        }
        let has_csum = csum_at + 2 <= self.end;
        let udp_none = self.proto == proto::UDP && (!has_csum || be16(b, csum_at) == 0);
        for (at, new) in [(l4, sport), (l4 + 2, dport)] {
            let old = be16(b, at);
            if old != new && has_csum && !udp_none {
                let c = update16(be16(b, csum_at), old, new);
                put16(b, csum_at, c);
            }
            put16(b, at, new);
        }
        if self.proto == proto::UDP && has_csum && !udp_none && be16(b, csum_at) == 0 {
            put16(b, csum_at, 0xffff);
        }
    }

    /// `nat_packet_ipv4`/`_ipv6`: SNAT writes `key`'s destination as the
    /// source, DNAT its source as the destination.
    fn nat_addr(&self, b: &mut [u8], key: &Tuple, act: u8) {
        if act & NAT_SRC != 0 {
            self.set_addr(b, true, &key.dst);
        } else if act & NAT_DST != 0 {
            self.set_addr(b, false, &key.src);
        }
    }
}

/// Translates a packet in place: `key` is the tuple it is translated to
/// read backwards (OVS's: the connection's reply tuple for a packet in
/// the original direction, its original tuple for a reply), `act` the
/// `NAT_SRC` or `NAT_DST` to apply. `related`: the packet is an ICMP
/// error, whose quoted header is translated back too and whose checksum
/// is computed again. `l3`/`l4` are the packet's offsets.
pub fn translate(
    b: &mut [u8],
    l3: usize,
    l4: usize,
    v6: bool,
    key: &Tuple,
    act: u8,
    related: bool,
) {
    let Some(outer) = Ip::at(b, l3, l4, v6, b.len()) else {
        return;
    };
    outer.nat_addr(b, key, act);
    if act & (NAT_SRC | NAT_DST) == 0 {
        return;
    }
    if !related {
        outer.set_ports(b, key.dport, key.sport);
        return;
    }
    // The quoted datagram went the other way: its tuple is `key`
    // reversed, and the other side is translated.
    let inner_l3 = l4 + 8;
    let Some(&vihl) = b.get(inner_l3) else { return };
    let inner_l4 = if v6 {
        inner_l3 + 40
    } else {
        inner_l3 + usize::from(vihl & 0xf) * 4
    };
    if inner_l4 > outer.end || inner_l3 + if v6 { 40 } else { 20 } > outer.end {
        return;
    }
    let Some(inner) = Ip::at(b, inner_l3, inner_l4, v6, outer.end) else {
        return;
    };
    let inner = Ip {
        end: outer.end,
        ..inner
    };
    let rev = Tuple {
        src: key.dst,
        dst: key.src,
        sport: key.dport,
        dport: key.sport,
        ..*key
    };
    inner.set_ports(b, rev.dport, rev.sport);
    inner.nat_addr(b, &rev, reverse_action(act));
    // The ICMP checksum over the whole message, again.
    let body = outer.l4..outer.end;
    put16(b, l4 + 2, 0);
    let c = if v6 {
        let src: [u8; 16] = b[l3 + 8..l3 + 24].try_into().expect("16 bytes");
        let dst: [u8; 16] = b[l3 + 24..l3 + 40].try_into().expect("16 bytes");
        let pseudo = checksum::pseudo_v6(&src, &dst, proto::ICMPV6, body.len() as u32);
        checksum::finish(checksum::sum(pseudo, &b[body]))
    } else {
        checksum::checksum(&b[body])
    };
    put16(b, l4 + 2, c);
}

fn v6_addr(a: &[u8; 16], bracket: bool) -> String {
    let s = std::net::Ipv6Addr::from(*a).to_string();
    if bracket {
        format!("[{s}]")
    } else {
        s
    }
}

impl std::fmt::Display for Nat {
    /// As `ovs-ofctl` prints it: `nat`, `nat(src)`,
    /// `nat(src=10.0.0.1-10.0.0.9:1024-2047,persistent,random)`,
    /// `nat(dst=[2001:db8::1]:80)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = match self.kind {
            NatKind::Apply => return f.write_str("nat"),
            NatKind::Src => "src",
            NatKind::Dst => "dst",
        };
        write!(f, "nat({side}")?;
        if let Some(v6) = self.v6 {
            f.write_str("=")?;
            let (min, max) = self.addr_range();
            if v6 {
                let b = self.min_port != 0;
                f.write_str(&v6_addr(&min, b))?;
                if max != min {
                    write!(f, "-{}", v6_addr(&max, b))?;
                }
            } else {
                let a = |x: &[u8; 16]| std::net::Ipv4Addr::new(x[0], x[1], x[2], x[3]);
                write!(f, "{}", a(&min))?;
                if max != min {
                    write!(f, "-{}", a(&max))?;
                }
            }
            if self.min_port != 0 {
                write!(f, ":{}", self.min_port)?;
                if self.max_port != 0 && self.max_port != self.min_port {
                    write!(f, "-{}", self.max_port)?;
                }
            }
            for (on, name) in [
                (self.persistent, ",persistent"),
                (self.hash, ",hash"),
                (self.random, ",random"),
            ] {
                if on {
                    f.write_str(name)?;
                }
            }
        }
        f.write_str(")")
    }
}

impl Nat {
    /// Parses the inside of `nat(...)` (empty for a bare `nat`) as
    /// `ovs-ofctl` does: `src=RANGE` or `dst=RANGE`, where RANGE is
    /// `IP[-IP][:PORT[-PORT]]` (IPv6 in brackets when a port follows),
    /// and the flags `persistent`, `hash`, `random`.
    pub fn parse(args: &str) -> Result<Nat, String> {
        let mut n = Nat::default();
        let mut sides = 0;
        for arg in args.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let (k, v) = match arg.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (arg, None),
            };
            match (k, v) {
                ("src" | "dst", v) => {
                    sides += 1;
                    n.kind = if k == "src" {
                        NatKind::Src
                    } else {
                        NatKind::Dst
                    };
                    if let Some(v) = v {
                        n.range(v)?;
                    }
                }
                ("persistent", None) => n.persistent = true,
                ("hash", None) => n.hash = true,
                ("random", None) => n.random = true,
                _ => {
                    return Err(format!(
                        "invalid key \"{k}\" in \"nat\" argument: expected src=RANGE, dst=RANGE, persistent, hash or random"
                    ))
                }
            }
        }
        if sides > 1 {
            return Err("nat: may only specify one of \"src\" or \"dst\"".into());
        }
        if n.kind == NatKind::Apply && (n.persistent || n.hash || n.random) {
            return Err("nat: flags allowed only with \"src\" or \"dst\"".into());
        }
        if n.hash && n.random {
            return Err("nat: both \"hash\" and \"random\" are not allowed".into());
        }
        Ok(n)
    }

    /// `IP[-IP][:PORT[-PORT]]`.
    fn range(&mut self, s: &str) -> Result<(), String> {
        let bad = || {
            format!(
                "invalid nat range \"{s}\": expected IP[-IP][:PORT[-PORT]] (IPv6 in brackets before a port)"
            )
        };
        let (addrs, ports) = if s.starts_with('[') {
            // [A]-[B]:P-Q
            let close = s.rfind(']').ok_or_else(bad)?;
            let (a, rest) = s.split_at(close + 1);
            if rest.is_empty() {
                (a, None)
            } else {
                (a, Some(rest.strip_prefix(':').ok_or_else(bad)?))
            }
        } else if s
            .split(['-', ':'])
            .next()
            .is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
        {
            match s.split_once(':') {
                Some((a, p)) => (a, Some(p)),
                None => (s, None),
            }
        } else {
            (s, None)
        };
        if ports == Some("") {
            return Err(bad());
        }
        let unbracket = |a: &str| a.trim_start_matches('[').trim_end_matches(']').to_string();
        let (min, max) = match addrs.split_once('-') {
            Some((a, b)) => (unbracket(a), Some(unbracket(b))),
            None => (unbracket(addrs), None),
        };
        if let Ok(a) = min.parse::<std::net::Ipv4Addr>() {
            self.v6 = Some(false);
            self.min[..4].copy_from_slice(&a.octets());
            if let Some(b) = max {
                let b = b.parse::<std::net::Ipv4Addr>().map_err(|_| bad())?;
                if b < a {
                    return Err(bad());
                }
                self.max[..4].copy_from_slice(&b.octets());
            }
        } else if let Ok(a) = min.parse::<std::net::Ipv6Addr>() {
            self.v6 = Some(true);
            self.min = a.octets();
            if let Some(b) = max {
                let b = b.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
                if b < a {
                    return Err(bad());
                }
                self.max = b.octets();
            }
        } else {
            return Err(bad());
        }
        if let Some(p) = ports {
            let (a, b) = match p.split_once('-') {
                Some((a, b)) => (a, Some(b)),
                None => (p, None),
            };
            self.min_port = a.parse().map_err(|_| bad())?;
            if let Some(b) = b {
                self.max_port = b.parse().map_err(|_| bad())?;
                if self.max_port < self.min_port {
                    return Err(bad());
                }
            }
        }
        Ok(())
    }
}
