//! A packet's connection tuple (zone, protocol, addresses, ports or ICMP
//! id and type), read from its bytes and flow key, and what a TCP
//! segment tells the window tracker.

use sluice_packet::key::{FlowKey, FRAG_ANY};
use sluice_packet::meta::PacketMeta;
use sluice_packet::wire::ethernet::ethertype;
use sluice_packet::wire::l4::proto;

/// One direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tuple {
    /// The conntrack zone.
    pub zone: u16,
    /// IP protocol.
    pub proto: u8,
    /// IPv6 (else IPv4, in the addresses' first 4 bytes).
    pub v6: bool,
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Source port; ICMP: the echo (or timestamp, information) id.
    pub sport: u16,
    /// Destination port; ICMP: the request's type (a reply keys as its
    /// request, so the two directions are each other's reverse).
    pub dport: u16,
}

impl Tuple {
    /// The other direction.
    pub fn reverse(&self) -> Tuple {
        let icmp = matches!(self.proto, proto::ICMP | proto::ICMPV6);
        Tuple {
            src: self.dst,
            dst: self.src,
            sport: if icmp { self.sport } else { self.dport },
            dport: if icmp { self.dport } else { self.sport },
            ..*self
        }
    }

    /// The same for both directions (addresses and ports each taken in
    /// order: an ICMP reply keeps its id and type where TCP swaps its
    /// ports): which shard holds the connection, and where in the
    /// shard's table. Folded multiplies (a 128-bit product's halves
    /// XORed) of the words with a key chosen at random per process, as
    /// OVS seeds its tracker's hash: every bit of the result depends on
    /// every input bit (the shard, the group and the tag each take
    /// different ones), and which tuples collide cannot be known from
    /// outside.
    #[inline]
    pub fn shard_hash(&self) -> u64 {
        // (The addresses ordered as numbers, which is their bytes' order:
        // two register compares, not a call to `memcmp`.)
        let n = |x: &[u8; 16]| u128::from_be_bytes(*x);
        let (a, b) = if n(&self.src) <= n(&self.dst) {
            (&self.src, &self.dst)
        } else {
            (&self.dst, &self.src)
        };
        let (p, q) = (self.sport.min(self.dport), self.sport.max(self.dport));
        let w =
            |x: &[u8; 16], i: usize| u64::from_ne_bytes(x[i..i + 8].try_into().expect("8 bytes"));
        let rest = u64::from(self.zone) << 48
            | u64::from(self.proto) << 40
            | u64::from(p) << 16
            | u64::from(q);
        let k = hash_key();
        let x = fold(w(a, 0) ^ k[0], w(a, 8) ^ k[1]);
        let y = fold(w(b, 0) ^ k[2], w(b, 8) ^ k[3]);
        // MurmurHash3's finaliser last: the fold of a word that varies
        // in a few bits (the ports) by one fixed by the key spreads them
        // less evenly for some keys.
        let mut h = fold(x ^ rest ^ k[4], y ^ k[5]);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn addr(&self, a: &[u8; 16]) -> String {
        if self.v6 {
            std::net::Ipv6Addr::from(*a).to_string()
        } else {
            std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
        }
    }

    /// `(src=...,dst=...,sport=...,dport=...)` as `ovs-appctl
    /// dpctl/dump-conntrack` shows one direction (`id`, `type` and
    /// `code` for ICMP; ports 0 for a protocol without them).
    pub fn describe(&self, reply: bool) -> String {
        let (s, d) = (self.addr(&self.src), self.addr(&self.dst));
        if matches!(self.proto, proto::ICMP | proto::ICMPV6) {
            let ty = if reply {
                reply_type(self.proto, self.dport as u8)
            } else {
                self.dport as u8
            };
            format!("(src={s},dst={d},id={},type={ty},code=0)", self.sport)
        } else {
            // Every other protocol has ports in OVS's text (0 where it
            // has none).
            format!(
                "(src={s},dst={d},sport={},dport={})",
                self.sport, self.dport
            )
        }
    }
}

/// The product of `a` and `b`, its two halves XORed: each output bit
/// depends on every input bit.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// [`Tuple::shard_hash`]'s key: random, once per process.
#[inline]
fn hash_key() -> &'static [u64; 6] {
    static KEY: std::sync::OnceLock<[u64; 6]> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        use std::hash::BuildHasher;
        // std's per-process random SipHash keys, drawn through it.
        let rs = std::collections::hash_map::RandomState::new();
        std::array::from_fn(|i| rs.hash_one(i as u64))
    })
}

impl std::hash::Hash for Tuple {
    /// [`Tuple::shard_hash`]: one word for the table's hasher (both
    /// directions of a connection land in one bucket chain, where
    /// equality tells them apart).
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.shard_hash());
    }
}

/// The reply type of an ICMP query type (echo, timestamp, information).
pub fn reply_type(p: u8, request: u8) -> u8 {
    match (p, request) {
        (proto::ICMP, 8) => 0,
        (proto::ICMP, 13) => 14,
        (proto::ICMP, 15) => 16,
        (proto::ICMPV6, 128) => 129,
        (_, t) => t,
    }
}

/// The request type of an ICMP query or reply type, and whether it is
/// the reply; `None` for other types (errors, ND, ...).
pub fn query_of(p: u8, ty: u8) -> Option<(u8, bool)> {
    match (p, ty) {
        (proto::ICMP, 8 | 13 | 15) | (proto::ICMPV6, 128) => Some((ty, false)),
        (proto::ICMP, 0) => Some((8, true)),
        (proto::ICMP, 14) => Some((13, true)),
        (proto::ICMP, 16) => Some((15, true)),
        (proto::ICMPV6, 129) => Some((128, true)),
        _ => None,
    }
}

/// Whether an ICMP type is an error that quotes the packet it is about.
pub fn is_icmp_error(p: u8, ty: u8) -> bool {
    match p {
        proto::ICMP => matches!(ty, 3 | 4 | 5 | 11 | 12),
        proto::ICMPV6 => matches!(ty, 1..=4),
        _ => false,
    }
}

/// What a TCP segment says, for the window tracker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpSeg {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Flags (the low 12 bits of the header's offset-and-flags word).
    pub flags: u16,
    /// Window (unscaled).
    pub win: u16,
    /// Payload bytes.
    pub len: u32,
    /// The window scale option, if the segment has one (capped at 14).
    pub wscale: Option<u8>,
}

/// How a packet reads for connection tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not IP: the ct action leaves it untracked.
    NotIp,
    /// IP, but not trackable (a fragment, a truncated or malformed
    /// header): `+trk+inv`.
    Invalid,
    /// A connection's packet.
    Conn {
        /// Its tuple.
        tuple: Tuple,
        /// The TCP segment, for TCP.
        tcp: Option<TcpSeg>,
        /// ICMP: whether the packet is the reply of a query.
        icmp_reply: bool,
    },
    /// An ICMP error: the tuple of the packet it quotes, as that packet
    /// went.
    Related(Tuple),
    /// IP of another protocol (GRE, ESP, and SCTP as OVS 3.1 tracks it):
    /// tracked by its addresses alone.
    Other(Tuple),
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An IPv4 address as the tuple holds it: its 4 bytes, then zeros. Made
/// as one 128-bit value, so that it is stored whole (not zeros and then 4
/// bytes over them, which the hash's 64-bit reads of the address right
/// after could not be forwarded from: they waited for both stores).
#[inline]
fn v4(a: u32) -> [u8; 16] {
    u128::from(u32::from_le_bytes(a.to_be_bytes())).to_le_bytes()
}

/// Reads a packet in `zone`: its key (addresses, protocol, ports, ICMP
/// type) and, for what the key lacks (TCP sequence numbers, window and
/// options, the ICMP id, an ICMP error's quoted header), its bytes.
#[inline]
pub fn parse(data: &[u8], meta: &PacketMeta, key: &FlowKey, zone: u16) -> Parsed {
    let mut p = Parsed::NotIp;
    parse_into(data, meta, key, zone, &mut p);
    p
}

/// [`parse`] into `out`, where the caller keeps it: each way out writes
/// its result there (returned, the result was made in a temporary by
/// narrow stores, a TCP segment's fields, and copied out whole right
/// after: the copy waited for them).
#[inline]
pub fn parse_into(data: &[u8], meta: &PacketMeta, key: &FlowKey, zone: u16, out: &mut Parsed) {
    let v6 = match key.dl_type {
        ethertype::IPV4 => false,
        ethertype::IPV6 => true,
        _ => {
            *out = Parsed::NotIp;
            return;
        }
    };
    if key.nw_frag & FRAG_ANY != 0 {
        *out = Parsed::Invalid;
        return;
    }
    let (src, dst) = if v6 {
        (key.ipv6_src, key.ipv6_dst)
    } else {
        (v4(key.nw_src), v4(key.nw_dst))
    };
    // Each arm's tuple made whole where it goes (a tuple of no ports
    // built first and then copied with its ports set was read back
    // right after the narrower stores that made it, and waited).
    let tuple = |sport: u16, dport: u16| Tuple {
        zone,
        proto: key.nw_proto,
        v6,
        src,
        dst,
        sport,
        dport,
    };
    let Some(l4) = meta.l4() else {
        *out = Parsed::Invalid;
        return;
    };
    let b = data;
    // A partial checksum (offloaded, to be completed on the way out) is
    // as good as the sender's stack made it; any other must be right
    // (summed once: a packet an earlier tracker verified, changed since
    // only in ways that keep them right, is `csum_ok`).
    if !meta.offload.needs_csum()
        && meta.csum_ok == 0
        && !checksums_hold(b, meta.l3().unwrap_or(0), l4, v6, key.nw_proto)
    {
        *out = Parsed::Invalid;
        return;
    }
    match key.nw_proto {
        proto::TCP => {
            let Some(off_flags) = be16(b, l4 + 12) else {
                *out = Parsed::Invalid;
                return;
            };
            let hlen = usize::from(off_flags >> 12) * 4;
            if hlen < 20 || b.len() < l4 + hlen {
                *out = Parsed::Invalid;
                return;
            }
            let l3 = meta.l3().unwrap_or(0);
            let ip_end = if v6 {
                l3 + 40 + usize::from(be16(b, l3 + 4).unwrap_or(0))
            } else {
                l3 + usize::from(be16(b, l3 + 2).unwrap_or(0))
            };
            let len = ip_end.min(b.len()).saturating_sub(l4 + hlen) as u32;
            let seg = TcpSeg {
                seq: be32(b, l4 + 4).unwrap_or(0),
                ack: be32(b, l4 + 8).unwrap_or(0),
                flags: off_flags & 0x0fff,
                win: be16(b, l4 + 14).unwrap_or(0),
                len,
                wscale: wscale(&b[l4 + 20..l4 + hlen]),
            };
            *out = Parsed::Conn {
                tuple: tuple(key.tp_src, key.tp_dst),
                tcp: Some(seg),
                icmp_reply: false,
            };
        }
        // OVS 3.1's tracker reads no SCTP header: an SCTP association is
        // tracked by its addresses alone (ports 0), as any other protocol.
        proto::SCTP => *out = Parsed::Other(tuple(0, 0)),
        proto::UDP => {
            if b.len() < l4 + 8 {
                *out = Parsed::Invalid;
                return;
            }
            *out = Parsed::Conn {
                tuple: tuple(key.tp_src, key.tp_dst),
                tcp: None,
                icmp_reply: false,
            };
        }
        proto::ICMP | proto::ICMPV6 => {
            let ty = key.tp_src as u8;
            if b.len() < l4 + 8 {
                *out = Parsed::Invalid;
                return;
            }
            if let Some((request, reply)) = query_of(key.nw_proto, ty) {
                let id = be16(b, l4 + 4).unwrap_or(0);
                *out = Parsed::Conn {
                    tuple: tuple(id, u16::from(request)),
                    tcp: None,
                    icmp_reply: reply,
                };
                return;
            }
            if is_icmp_error(key.nw_proto, ty) {
                *out = match quoted(b, l4 + 8, v6, zone) {
                    Some(t) => Parsed::Related(t),
                    None => Parsed::Invalid,
                };
                return;
            }
            // Neither a query nor an error (ND, router messages...): as
            // OVS, nothing to track.
            *out = Parsed::Invalid;
        }
        _ => *out = Parsed::Other(tuple(0, 0)),
    }
}

/// Whether a packet's IPv4 header checksum and its TCP, UDP, ICMP or
/// ICMPv6 checksum are right, as OVS's tracker checks them before it
/// tracks a packet (a bad one is `+inv`): the L4 header whole within
/// the datagram, a UDP length within it and not below 8, every L4
/// checksum summed over the whole IP payload, a UDP checksum of 0 taken
/// as none over IPv4 only. Other protocols, and what an ICMP
/// error quotes, are not checked.
pub fn checksums_hold(b: &[u8], l3: usize, l4: usize, v6: bool, p: u8) -> bool {
    use sluice_packet::wire::checksum::{checksum, finish, pseudo_v4, pseudo_v6, sum_wide};
    let ip_end = if v6 {
        be16(b, l3 + 4).map(|n| l3 + 40 + usize::from(n))
    } else {
        let ihl = usize::from(b.get(l3).copied().unwrap_or(0) & 0xf) * 4;
        if b.len() < l3 + ihl || checksum(&b[l3..l3 + ihl]) != 0 {
            return false;
        }
        be16(b, l3 + 2).map(|n| l3 + usize::from(n))
    };
    let end = ip_end.unwrap_or(b.len()).min(b.len());
    if end < l4 {
        return false;
    }
    let seg = &b[l4..end];
    let pseudo = |len: usize| {
        if v6 {
            let a: [u8; 16] = b[l3 + 8..l3 + 24].try_into().expect("16 bytes");
            let d: [u8; 16] = b[l3 + 24..l3 + 40].try_into().expect("16 bytes");
            pseudo_v6(&a, &d, p, len as u32)
        } else {
            let a = u32::from_be_bytes(b[l3 + 12..l3 + 16].try_into().expect("4 bytes"));
            let d = u32::from_be_bytes(b[l3 + 16..l3 + 20].try_into().expect("4 bytes"));
            pseudo_v4(a, d, p, len as u16)
        }
    };
    match p {
        proto::TCP => {
            let hlen = seg.get(12).map_or(0, |o| usize::from(o >> 4) * 4);
            seg.len() >= 20
                && (20..=seg.len()).contains(&hlen)
                && finish(sum_wide(pseudo(seg.len()), seg)) == 0
        }
        proto::UDP => {
            let Some(len) = be16(seg, 4).map(usize::from) else {
                return false;
            };
            if !(8..=seg.len()).contains(&len) {
                return false;
            }
            // Over the whole IP payload, as OVS's checksum_valid sums it
            // (not the UDP length's bytes, when that is shorter).
            (!v6 && be16(seg, 6) == Some(0)) || finish(sum_wide(pseudo(seg.len()), seg)) == 0
        }
        proto::ICMP if !v6 => finish(sum_wide(0, seg)) == 0,
        proto::ICMPV6 if v6 => finish(sum_wide(pseudo(seg.len()), seg)) == 0,
        _ => true,
    }
}

/// The window scale option among TCP options.
fn wscale(opts: &[u8]) -> Option<u8> {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return None,
            1 => i += 1,
            kind => {
                let len = usize::from(*opts.get(i + 1)?);
                if len < 2 || i + len > opts.len() {
                    return None;
                }
                if kind == 3 && len == 3 {
                    return Some(opts[i + 2].min(14));
                }
                i += len;
            }
        }
    }
    None
}

/// The tuple of the IP header (and first L4 bytes) an ICMP error quotes
/// at `at`.
fn quoted(b: &[u8], at: usize, v6: bool, zone: u16) -> Option<Tuple> {
    let (p, src, dst, l4) = if v6 {
        if b.get(at)? >> 4 != 6 {
            return None;
        }
        let src: [u8; 16] = b.get(at + 8..at + 24)?.try_into().ok()?;
        let dst: [u8; 16] = b.get(at + 24..at + 40)?.try_into().ok()?;
        (*b.get(at + 6)?, src, dst, at + 40)
    } else {
        let vihl = *b.get(at)?;
        if vihl >> 4 != 4 || vihl & 0xf < 5 {
            return None;
        }
        (
            *b.get(at + 9)?,
            v4(be32(b, at + 12)?),
            v4(be32(b, at + 16)?),
            at + usize::from(vihl & 0xf) * 4,
        )
    };
    let (sport, dport) = match p {
        proto::TCP | proto::UDP => (be16(b, l4)?, be16(b, l4 + 2)?),
        proto::ICMP | proto::ICMPV6 => {
            let (request, _) = query_of(p, *b.get(l4)?)?;
            (be16(b, l4 + 4)?, u16::from(request))
        }
        _ => (0, 0),
    };
    Some(Tuple {
        zone,
        proto: p,
        v6,
        src,
        dst,
        sport,
        dport,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn both_directions_share_a_shard(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, p in prop::sample::select(vec![1u8, 6, 17, 58, 47]), zone: u16) {
            let t = Tuple { zone, proto: p, v6: true, src, dst, sport, dport };
            prop_assert_eq!(t.shard_hash(), t.reverse().shard_hash());
            prop_assert_eq!(t.reverse().reverse(), t);
        }
    }
}
