//! Outer headers: built once per flow ([`TnlHeader::build`]), pushed per
//! packet ([`push`]: lengths, IPv4 checksum, UDP source port, optional
//! outer checksum), checked and popped on receipt ([`pop`]).
//!
//! Layouts: Ethernet (14) + IPv4 (20) or IPv6 (40, no extension
//! headers) + UDP (8) + VXLAN (8) = 50 or 70 bytes; Geneve as VXLAN
//! and its options (the flow's `tun_metadata` fields, [`super::tlv`]); GRE (4, + 4 with a checksum, + 4 with a key) carrying
//! Ethernet (protocol 0x6558, "transparent Ethernet bridging").

use super::tlv::{self, GeneveOpts, TlvMap};
use super::{TunnelKind, TunnelMeta};
use crate::key::{TUN_FLAG_CSUM, TUN_FLAG_DONT_FRAGMENT, TUN_FLAG_KEY, TUN_FLAG_OAM};
use crate::meta::{Offload, NO_OFFSET};
use std::net::IpAddr;

use crate::wire::checksum::{finish, pseudo_v4, pseudo_v6, sum, sum_wide};
use crate::wire::ethernet::{ethertype, ETH_HEADER_LEN};
use crate::wire::ipv4::{FLAG_DF, FLAG_MF, FRAG_OFFSET_MASK};
use crate::wire::{be16 as get16, be32 as get32, put16, put32};
use crate::Packet;

/// The longest outer header built: Geneve over IPv6 with every option
/// Sluice sends (70 + 48 bytes), in two VLAN tags (8).
pub const MAX_HEADER_LEN: usize = 70 + tlv::MAX_OPTS_LEN + 2 * VLAN_TAG_LEN;

/// An 802.1Q tag's length.
const VLAN_TAG_LEN: usize = 4;
/// The VLAN tags an outer header may carry (as a packet's key holds).
pub const MAX_HEADER_VLANS: usize = 2;

/// The EtherType GRE and Geneve carry for an Ethernet frame.
pub const ETH_TYPE_TEB: u16 = 0x6558;
/// VXLAN's flags word: the I bit (a valid VNI).
const VXLAN_FLAGS: u32 = 0x0800_0000;
/// GRE flag bits.
const GRE_CSUM: u16 = 0x8000;
const GRE_KEY: u16 = 0x2000;
const GRE_SEQ: u16 = 0x1000;
/// GRE flags Sluice does not take: routing, strict source route,
/// recursion control, and any version but 0.
const GRE_UNSUPPORTED: u16 = 0x4000 | 0x0800 | 0x0700 | 0x0007 | 0x00f8;
/// Geneve's OAM flag (maps to `tun_flags` bit 0, as OVS's
/// `FLOW_TNL_F_OAM`).
const GENEVE_OAM: u8 = 0x80;
/// Geneve's critical-options flag.
const GENEVE_CRITICAL: u8 = 0x40;

/// UDP source ports tunnels choose from, as OVS's defaults
/// (`tnl_udp_port_min`/`max`): the ephemeral range.
pub const UDP_SRC_MIN: u16 = 32768;
/// See [`UDP_SRC_MIN`].
pub const UDP_SRC_MAX: u16 = 61000;

/// What an outer header is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderParams {
    /// Protocol.
    pub kind: TunnelKind,
    /// Outer Ethernet source (the underlay port's address).
    pub eth_src: [u8; 6],
    /// Outer Ethernet destination (the next hop's).
    pub eth_dst: [u8; 6],
    /// Outer IP source (of the same family as `ip_dst`).
    pub ip_src: IpAddr,
    /// Outer IP destination.
    pub ip_dst: IpAddr,
    /// Outer TOS (IPv6: traffic class).
    pub tos: u8,
    /// Outer TTL (IPv6: hop limit).
    pub ttl: u8,
    /// Don't-fragment bit (IPv4; IPv6 routers never fragment).
    pub df: bool,
    /// VNI or GRE key (`None`: a GRE header without key).
    pub key: Option<u64>,
    /// UDP destination port.
    pub dst_port: u16,
    /// Outer UDP / GRE checksum.
    pub csum: bool,
    /// Geneve options (none for the other kinds).
    pub opts: GeneveOpts,
    /// Geneve's OAM flag (the flow's `tun_flags=+oam`).
    pub oam: bool,
}

/// An outer header ready to push.
#[derive(Clone, PartialEq, Eq)]
pub struct TnlHeader {
    bytes: [u8; MAX_HEADER_LEN],
    len: u8,
    /// Where the IP header starts: after Ethernet and its VLAN tags.
    ip_at: u8,
    /// Where the UDP or GRE header starts: after IPv4 or IPv6.
    l4_at: u8,
    /// IPv4: the ones-complement sum of the header as built (total length
    /// zero, checksum zero): a packet's checksum is this plus its length.
    /// IPv6: the sum of the UDP pseudo-header's addresses and next header.
    ip_sum: u32,
    /// Protocol.
    pub kind: TunnelKind,
    csum: bool,
}

impl std::fmt::Debug for TnlHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TnlHeader({} ", self.kind.name())?;
        for b in self.bytes() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// Outer Ethernet, then IP (as a header is built: a VLAN tag added after
/// moves it, [`TnlHeader::with_vlan`]).
const IP_AT: usize = ETH_HEADER_LEN;
/// IPv4 and IPv6 header lengths.
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;

impl TnlHeader {
    /// Builds the header: every byte but the lengths, the IPv4 checksum,
    /// the UDP source port and the outer checksum, which [`push`] fills.
    pub fn build(p: &HeaderParams) -> Self {
        let mut b = [0u8; MAX_HEADER_LEN];
        b[0..6].copy_from_slice(&p.eth_dst);
        b[6..12].copy_from_slice(&p.eth_src);
        let proto = p.kind.ip_proto();
        let l4 = match (p.ip_src, p.ip_dst) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                put16(&mut b, 12, ethertype::IPV6);
                // Version 6, the traffic class, flow label 0 (as OVS).
                put32(&mut b, IP_AT, 6 << 28 | u32::from(p.tos) << 20);
                b[IP_AT + 6] = proto;
                b[IP_AT + 7] = p.ttl;
                b[IP_AT + 8..IP_AT + 24].copy_from_slice(&src.octets());
                b[IP_AT + 24..IP_AT + 40].copy_from_slice(&dst.octets());
                IP_AT + IPV6_LEN
            }
            (src, dst) => {
                let v4 = |a: IpAddr| match a {
                    IpAddr::V4(a) => u32::from(a),
                    IpAddr::V6(_) => 0,
                };
                put16(&mut b, 12, ethertype::IPV4);
                b[IP_AT] = 0x45;
                b[IP_AT + 1] = p.tos;
                // Identification 0: with DF set no fragment needs one (RFC 6864).
                put16(&mut b, IP_AT + 6, if p.df { FLAG_DF } else { 0 });
                b[IP_AT + 8] = p.ttl;
                b[IP_AT + 9] = proto;
                put32(&mut b, IP_AT + 12, v4(src));
                put32(&mut b, IP_AT + 16, v4(dst));
                IP_AT + IPV4_LEN
            }
        };
        let len = match p.kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => {
                put16(&mut b, l4 + 2, p.dst_port);
                let t = l4 + 8;
                let vni = (p.key.unwrap_or(0) as u32 & 0xff_ffff) << 8;
                put32(&mut b, t + 4, vni);
                if p.kind == TunnelKind::Vxlan {
                    put32(&mut b, t, VXLAN_FLAGS);
                    t + 8
                } else {
                    // Version 0, the options' length, not OAM.
                    let o = p.opts.bytes();
                    b[t] = (o.len() / 4) as u8;
                    if p.opts.critical {
                        b[t + 1] |= GENEVE_CRITICAL;
                    }
                    if p.oam {
                        b[t + 1] |= GENEVE_OAM;
                    }
                    put16(&mut b, t + 2, ETH_TYPE_TEB);
                    b[t + 8..t + 8 + o.len()].copy_from_slice(o);
                    t + 8 + o.len()
                }
            }
            TunnelKind::Gre => {
                let mut flags = 0;
                let mut at = l4 + 4;
                if p.csum {
                    flags |= GRE_CSUM;
                    at += 4;
                }
                if let Some(k) = p.key {
                    flags |= GRE_KEY;
                    put32(&mut b, at, k as u32);
                    at += 4;
                }
                put16(&mut b, l4, flags);
                put16(&mut b, l4 + 2, ETH_TYPE_TEB);
                at
            }
        };
        let ip_sum = if l4 == IP_AT + IPV6_LEN {
            // Addresses and next header; the length is added per packet.
            sum(u32::from(proto), &b[IP_AT + 8..l4])
        } else {
            sum(0, &b[IP_AT..l4])
        };
        TnlHeader {
            ip_sum,
            bytes: b,
            len: len as u8,
            ip_at: IP_AT as u8,
            l4_at: l4 as u8,
            kind: p.kind,
            csum: p.csum,
        }
    }

    /// The header's bytes as built.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Its length: what it adds to a frame.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never: a header has at least Ethernet and IP.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the outer header is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.l4_at - self.ip_at == IPV6_LEN as u8
    }

    /// Where the outer IP header starts (after its VLAN tags).
    pub fn ip_at(&self) -> usize {
        usize::from(self.ip_at)
    }

    /// Its VLAN tags, outermost first: (TPID, TCI).
    pub fn vlans(&self) -> impl Iterator<Item = (u16, u16)> + '_ {
        (ETH_HEADER_LEN - 2..self.ip_at() - 2)
            .step_by(VLAN_TAG_LEN)
            .map(|at| (get16(&self.bytes, at), get16(&self.bytes, at + 2)))
    }

    /// The header with a VLAN tag pushed outside those it has (the
    /// underlay's bridge sends the encapsulated packet into a VLAN, as a
    /// `push_vlan` before the output); `None` past two tags.
    pub fn with_vlan(&self, tpid: u16, tci: u16) -> Option<TnlHeader> {
        if self.vlans().count() >= MAX_HEADER_VLANS {
            return None;
        }
        let mut h = self.clone();
        let (at, len) = (ETH_HEADER_LEN - 2, self.len());
        h.bytes[at + VLAN_TAG_LEN..len + VLAN_TAG_LEN].copy_from_slice(&self.bytes[at..len]);
        put16(&mut h.bytes, at, tpid);
        put16(&mut h.bytes, at + 2, tci);
        h.len += VLAN_TAG_LEN as u8;
        h.ip_at += VLAN_TAG_LEN as u8;
        h.l4_at += VLAN_TAG_LEN as u8;
        Some(h)
    }

    /// The header with its outermost VLAN tag taken off (`pop_vlan`);
    /// `None` when it has none.
    pub fn without_vlan(&self) -> Option<TnlHeader> {
        self.vlans().next()?;
        let mut h = self.clone();
        let (at, len) = (ETH_HEADER_LEN - 2, self.len());
        h.bytes[at..len - VLAN_TAG_LEN].copy_from_slice(&self.bytes[at + VLAN_TAG_LEN..len]);
        h.bytes[len - VLAN_TAG_LEN..len].fill(0);
        h.len -= VLAN_TAG_LEN as u8;
        h.ip_at -= VLAN_TAG_LEN as u8;
        h.l4_at -= VLAN_TAG_LEN as u8;
        Some(h)
    }

    /// The header with its outermost VLAN tag's TCI set (`set(vlan(...))`);
    /// `None` when it has none.
    pub fn with_vlan_tci(&self, tci: u16) -> Option<TnlHeader> {
        self.vlans().next()?;
        let mut h = self.clone();
        put16(&mut h.bytes, ETH_HEADER_LEN, tci);
        Some(h)
    }

    /// The outer IP destination.
    pub fn ip_dst(&self) -> IpAddr {
        let (b, ip) = (&self.bytes, self.ip_at());
        if self.is_ipv6() {
            let a: [u8; 16] = b[ip + 24..ip + 40].try_into().expect("16 bytes");
            IpAddr::from(a)
        } else {
            IpAddr::from(get32(b, ip + 16).to_be_bytes())
        }
    }
}

/// A UDP source port for a packet of flow hash `hash`: constant per inner
/// flow, spread over the ephemeral range for the underlay's ECMP (OVS's
/// formula).
#[inline]
pub fn udp_src_port(hash: u32) -> u16 {
    let span = u64::from(UDP_SRC_MAX - UDP_SRC_MIN);
    ((u64::from(hash) * span) >> 32) as u16 + UDP_SRC_MIN
}

/// Pushes `h` in front of `pkt` (a complete frame: no offload pending)
/// and fills in what depends on the packet. False, changing nothing, when
/// the headroom is too small or the result would be longer than an IP
/// datagram may be.
#[inline]
pub fn push(pkt: &mut Packet, h: &TnlHeader, src_port: u16) -> bool {
    debug_assert!(
        !pkt.meta.offload.pending(),
        "offloads are done before encapsulation"
    );
    push_with(pkt, h, src_port, false)
}

/// Pushes UDP tunnel header `h` in front of GSO super-frame `pkt` (its
/// inner checksum partial), once: the packet becomes a tunnelled
/// super-frame ([`Offload::UDP_TUNNEL`](crate::meta::Offload::UDP_TUNNEL)),
/// cut later, each segment with the outer headers, by the port that sends
/// it or by the kernel behind a tap that takes such frames. The outer
/// lengths and IPv4 checksum are the super-frame's; a checksummed tunnel's
/// UDP checksum field holds the pseudo-header sum (each segment's is made
/// when it is cut). False, changing nothing, as [`push`] (and for GRE or
/// a packet that is no super-frame).
pub fn push_super(pkt: &mut Packet, h: &TnlHeader, src_port: u16) -> bool {
    let o = pkt.meta.offload;
    if !h.kind.is_udp() || o.gso() == 0 || !o.needs_csum() || o.flags & Offload::UDP_TUNNEL != 0 {
        return false;
    }
    let Some(start) = o.csum_start.checked_add(h.len() as u16) else {
        return false;
    };
    if !push_with(pkt, h, src_port, true) {
        return false;
    }
    let m = &mut pkt.meta.offload;
    m.csum_start = start;
    m.flags |= Offload::UDP_TUNNEL | if h.csum { Offload::TUNNEL_CSUM } else { 0 };
    true
}

/// [`push`]; with `partial`, a UDP checksum is left as its pseudo-header
/// sum.
#[inline(always)]
fn push_with(pkt: &mut Packet, h: &TnlHeader, src_port: u16, partial: bool) -> bool {
    let hlen = h.len();
    let (ip, l4) = (h.ip_at(), usize::from(h.l4_at));
    let v6 = h.is_ipv6();
    let total = pkt.len() + hlen;
    // IPv4 counts its header in its length, IPv6 does not.
    let ip_len = total - if v6 { l4 } else { ip };
    if ip_len > usize::from(u16::MAX) {
        return false;
    }
    if !pkt.insert_gap(0, hlen) {
        return false;
    }
    let ip_len = ip_len as u16;
    let l4_len = (total - l4) as u16;
    let d = pkt.data_mut();
    d[..hlen].copy_from_slice(h.bytes());
    if v6 {
        put16(d, ip + 4, ip_len);
    } else {
        put16(d, ip + 2, ip_len);
        put16(d, ip + 10, finish(h.ip_sum + u32::from(ip_len)));
    }
    match h.kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => {
            put16(d, l4, src_port);
            put16(d, l4 + 4, l4_len);
            if h.csum {
                let ps = if v6 {
                    h.ip_sum + u32::from(l4_len)
                } else {
                    pseudo_v4(get32(d, ip + 12), get32(d, ip + 16), 17, l4_len)
                };
                if partial {
                    put16(d, l4 + 6, !finish(ps));
                } else {
                    let c = finish(sum_wide(ps, &d[l4..]));
                    put16(d, l4 + 6, if c == 0 { 0xffff } else { c });
                }
            }
        }
        TunnelKind::Gre => {
            if h.csum {
                let c = finish(sum_wide(0, &d[l4..]));
                put16(d, l4 + 4, c);
            }
        }
    }
    let m = &mut pkt.meta;
    m.n_vlans = ((ip - IP_AT) / VLAN_TAG_LEN) as u8;
    m.l3_ofs = ip as u16;
    m.l3_type = if v6 { ethertype::IPV6 } else { ethertype::IPV4 };
    m.l4_ofs = l4 as u16;
    m.l4_proto = h.kind.ip_proto();
    m.has_hash = 0;
    m.csum_ok = 0;
    true
}

/// Whether an IPv4 header's checksum is right: its 16-bit words summed
/// 32 bits at a time (a tunnel packet's header is checked per packet).
#[inline]
fn ipv4_header_ok(h: &[u8]) -> bool {
    let mut acc = 0u64;
    let mut words = h.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    // The header is whole 32-bit words (IHL counts them).
    debug_assert!(words.remainder().is_empty());
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc == 0xffff
}

/// Why a received tunnel packet was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopError {
    /// Outer IPv4, UDP or tunnel header malformed, truncated, a fragment,
    /// or with flags the protocol or Sluice does not take (a Geneve option
    /// the TLV map does not map and that is critical, or of another length
    /// than its mapping).
    BadHeader,
    /// An outer IPv4, UDP or GRE checksum is wrong.
    BadChecksum,
}

/// Checks the outer headers of `pkt` (parsed: `meta.l3_ofs` at an IPv4
/// or IPv6 header carrying `kind`) and removes them, leaving the inner
/// Ethernet frame, unparsed. Returns what they said; Geneve options
/// through `map` (a critical one it does not map is a bad header).
pub fn pop(pkt: &mut Packet, kind: TunnelKind, map: &TlvMap) -> Result<TunnelMeta, PopError> {
    let mut meta = TunnelMeta::default();
    pop_into(pkt, kind, map, &mut meta)?;
    Ok(meta)
}

/// [`pop`], what the headers said written into `meta` (every field; on
/// an error, some). The datapath's form: the metadata goes where it is
/// kept, field by field, and is not copied while its stores are still
/// in flight (a 96-byte copy of a struct just written field by field
/// reads across those stores, which the core cannot forward: it waits
/// for them, a third of a decapsulation's pop).
#[inline]
pub fn pop_into(
    pkt: &mut Packet,
    kind: TunnelKind,
    map: &TlvMap,
    meta: &mut TunnelMeta,
) -> Result<(), PopError> {
    let l3 = pkt.meta.l3().ok_or(PopError::BadHeader)?;
    // A frame another host's stack made on this machine (a veth peer) may
    // come with its inner checksum left to complete: its outer checksums
    // are not checked then (they were never computed over final bytes;
    // the kernel trusts such frames likewise).
    let local = pkt.meta.offload.needs_csum();
    let d = pkt.data();
    *meta = TunnelMeta::default();
    let (l4, end) = match pkt.meta.l3_type {
        ethertype::IPV4 => outer_ipv4(d, l3, kind, local, meta)?,
        ethertype::IPV6 => outer_ipv6(d, l3, kind, meta)?,
        _ => return Err(PopError::BadHeader),
    };
    let inner = match kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => {
            if end < l4 + 16 {
                return Err(PopError::BadHeader);
            }
            let udp_len = usize::from(get16(d, l4 + 4));
            if udp_len != end - l4 {
                return Err(PopError::BadHeader);
            }
            let csum = get16(d, l4 + 6);
            if csum != 0 && !local {
                let ps = if meta.src == 0 && meta.dst == 0 {
                    pseudo_v6(&meta.ipv6_src, &meta.ipv6_dst, 17, udp_len as u32)
                } else {
                    pseudo_v4(meta.src, meta.dst, 17, udp_len as u16)
                };
                if finish(sum_wide(ps, &d[l4..end])) != 0 {
                    return Err(PopError::BadChecksum);
                }
                meta.flags |= TUN_FLAG_CSUM;
            }
            let t = l4 + 8;
            meta.flags |= TUN_FLAG_KEY;
            if kind == TunnelKind::Vxlan {
                let vni = get32(d, t + 4);
                if get32(d, t) != VXLAN_FLAGS || vni & 0xff != 0 {
                    return Err(PopError::BadHeader);
                }
                meta.tun_id = u64::from(vni >> 8);
                t + 8
            } else {
                let opt_len = usize::from(d[t] & 0x3f) * 4;
                if d[t] >> 6 != 0 || get16(d, t + 2) != ETH_TYPE_TEB || end < t + 8 + opt_len {
                    return Err(PopError::BadHeader);
                }
                if d[t + 1] & GENEVE_OAM != 0 {
                    meta.flags |= TUN_FLAG_OAM;
                }
                if opt_len != 0 {
                    meta.opts = tlv::read_options(&d[t + 8..t + 8 + opt_len], map)
                        .ok_or(PopError::BadHeader)?;
                }
                meta.tun_id = u64::from(get32(d, t + 4) >> 8);
                t + 8 + opt_len
            }
        }
        TunnelKind::Gre => {
            if end < l4 + 4 {
                return Err(PopError::BadHeader);
            }
            let flags = get16(d, l4);
            if flags & GRE_UNSUPPORTED != 0 || get16(d, l4 + 2) != ETH_TYPE_TEB {
                return Err(PopError::BadHeader);
            }
            let mut at = l4 + 4;
            if flags & GRE_CSUM != 0 {
                if end < at + 4 {
                    return Err(PopError::BadHeader);
                }
                if !local && finish(sum_wide(0, &d[l4..end])) != 0 {
                    return Err(PopError::BadChecksum);
                }
                meta.flags |= TUN_FLAG_CSUM;
                at += 4;
            }
            if flags & GRE_KEY != 0 {
                if end < at + 4 {
                    return Err(PopError::BadHeader);
                }
                meta.tun_id = u64::from(get32(d, at));
                meta.flags |= TUN_FLAG_KEY;
                at += 4;
            }
            if flags & GRE_SEQ != 0 {
                at += 4;
            }
            at
        }
    };
    if end < inner + ETH_HEADER_LEN {
        return Err(PopError::BadHeader);
    }
    let mut offload = pkt.meta.offload;
    if offload.needs_csum() {
        let start = usize::from(offload.csum_start);
        if start < inner {
            // The outer checksum was the one left to do: it goes with the
            // outer headers (the inner frame is complete).
            offload = Offload::NONE;
        } else if start < inner + ETH_HEADER_LEN {
            return Err(PopError::BadHeader);
        } else {
            // The inner frame's checksum is left to do: it moves with it
            // (and a tunnelled super-frame becomes a plain one).
            offload.csum_start -= inner as u16;
            offload.flags &= !(Offload::UDP_TUNNEL | Offload::TUNNEL_CSUM);
        }
    }
    // Ethernet padding after the outer datagram goes with the headers.
    let trailer = pkt.len() - end;
    if trailer > 0 {
        pkt.set_len(end);
    }
    if !pkt.remove_range(0, inner) {
        return Err(PopError::BadHeader);
    }
    let m = &mut pkt.meta;
    m.n_vlans = 0;
    m.l3_ofs = NO_OFFSET;
    m.l4_ofs = NO_OFFSET;
    m.l3_type = 0;
    m.l4_proto = 0;
    m.has_hash = 0;
    m.csum_ok = 0;
    m.offload = offload;
    Ok(())
}

/// Checks an outer IPv4 header at `l3` carrying `kind`: the metadata it
/// gives (into `meta`, zeroed), where its payload starts and ends.
#[inline]
fn outer_ipv4(
    d: &[u8],
    l3: usize,
    kind: TunnelKind,
    local: bool,
    meta: &mut TunnelMeta,
) -> Result<(usize, usize), PopError> {
    if d.len() < l3 + IPV4_LEN || d[l3] >> 4 != 4 {
        return Err(PopError::BadHeader);
    }
    let ihl = usize::from(d[l3] & 0x0f) * 4;
    let ip_len = usize::from(get16(d, l3 + 2));
    if ihl < IPV4_LEN || ip_len < ihl || d.len() < l3 + ip_len {
        return Err(PopError::BadHeader);
    }
    if !local && !ipv4_header_ok(&d[l3..l3 + ihl]) {
        return Err(PopError::BadChecksum);
    }
    let frag = get16(d, l3 + 6);
    if frag & (FLAG_MF | FRAG_OFFSET_MASK) != 0 || d[l3 + 9] != kind.ip_proto() {
        return Err(PopError::BadHeader);
    }
    meta.src = get32(d, l3 + 12);
    meta.dst = get32(d, l3 + 16);
    meta.tos = d[l3 + 1];
    meta.ttl = d[l3 + 8];
    if frag & FLAG_DF != 0 {
        meta.flags = TUN_FLAG_DONT_FRAGMENT;
    }
    Ok((l3 + ihl, l3 + ip_len))
}

/// [`outer_ipv4`] for IPv6: the tunnel header must follow the IPv6
/// header directly (no extension headers, as OVS's native tunnels).
#[inline]
fn outer_ipv6(
    d: &[u8],
    l3: usize,
    kind: TunnelKind,
    meta: &mut TunnelMeta,
) -> Result<(usize, usize), PopError> {
    if d.len() < l3 + IPV6_LEN || d[l3] >> 4 != 6 {
        return Err(PopError::BadHeader);
    }
    let end = l3 + IPV6_LEN + usize::from(get16(d, l3 + 4));
    if d.len() < end || d[l3 + 6] != kind.ip_proto() {
        return Err(PopError::BadHeader);
    }
    meta.tos = (get16(d, l3) >> 4) as u8;
    meta.ttl = d[l3 + 7];
    meta.ipv6_src.copy_from_slice(&d[l3 + 8..l3 + 24]);
    meta.ipv6_dst.copy_from_slice(&d[l3 + 24..l3 + 40]);
    Ok((l3 + IPV6_LEN, end))
}

#[cfg(test)]
mod tests;
