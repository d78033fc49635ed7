//! Header rewrites on a parsed packet, keeping checksums valid.
//!
//! Every function uses the layer offsets that extraction left in the
//! packet's metadata, checks that the header it changes is present and
//! whole, and changes nothing otherwise (returning `false`). Checksums are
//! updated incrementally (RFC 1624), as Open vSwitch does: a packet that
//! arrived with a wrong checksum keeps it wrong by the same amount, and a
//! UDP checksum of zero ("none") stays zero. SCTP's CRC32c is recomputed
//! around the change, so a wrong one stays wrong by the same error. Which L4
//! checksums an address rewrite updates in fragments follows
//! [`FragRewrites`] (OVS's choice by default).

use crate::pool::Packet;
use crate::wire::checksum::{update16, update32, update_bytes};
use crate::wire::ethernet::{ethertype, is_vlan_tpid, VLAN_HEADER_LEN};
use crate::wire::icmp::IcmpHeader;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{ext, Ipv6Packet, IPV6_HEADER_LEN};
use crate::wire::l4::{proto, SctpHeader, TcpHeader, UdpHeader};
use crate::wire::{be16, put16};

/// Sets the Ethernet source.
pub fn set_eth_src(pkt: &mut Packet, mac: [u8; 6]) -> bool {
    pkt.len() >= 14 && {
        pkt.data_mut()[6..12].copy_from_slice(&mac);
        true
    }
}

/// Sets the Ethernet destination.
pub fn set_eth_dst(pkt: &mut Packet, mac: [u8; 6]) -> bool {
    pkt.len() >= 14 && {
        pkt.data_mut()[0..6].copy_from_slice(&mac);
        true
    }
}

fn ipv4(pkt: &mut Packet) -> Option<Ipv4Packet<&mut [u8]>> {
    let l3 = pkt.meta.l3()?;
    if pkt.meta.l3_type != ethertype::IPV4 {
        return None;
    }
    Ipv4Packet::new_checked(&mut pkt.data_mut()[l3..]).ok()
}

fn ipv6(pkt: &mut Packet) -> Option<Ipv6Packet<&mut [u8]>> {
    let l3 = pkt.meta.l3()?;
    if pkt.meta.l3_type != ethertype::IPV6 {
        return None;
    }
    Ipv6Packet::new_checked(&mut pkt.data_mut()[l3..]).ok()
}

/// How rewrites treat the L4 bytes of IP fragments (and L4 checksums
/// behind IPv6 extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FragRewrites {
    /// As Open vSwitch 3.1 (`packet_set_ipv4_addr`, `packet_rh_present`):
    /// IPv4: the TCP or UDP checksum field right after the IP header is
    /// updated in every packet whose payload is long enough, later
    /// fragments included, where those two bytes are data of the
    /// datagram's middle, not a checksum. IPv6: only in packets with no
    /// fragment header or a first fragment (offset 0, M set), so never in
    /// an atomic fragment; and in neither direction behind a routing
    /// header with segments left. An ICMP type or code set on an IPv4
    /// later fragment writes both (the flow's, 0 unless set) into its
    /// first two payload bytes.
    #[default]
    Ovs,
    /// Only where the L4 header is: nothing in an IPv4 or IPv6 later
    /// fragment, also in IPv6 atomic fragments (RFC 6946: a whole
    /// datagram), and for a source rewrite behind a routing header (the
    /// pseudo-header's destination is the routing header's last address,
    /// so a destination rewrite changes nothing there).
    Correct,
}

impl FragRewrites {
    /// Parses `ovs` or `correct`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ovs" => Ok(FragRewrites::Ovs),
            "correct" => Ok(FragRewrites::Correct),
            _ => Err(format!(
                "unknown fragment rewrite mode '{s}' (ovs or correct)"
            )),
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            FragRewrites::Ovs => "ovs",
            FragRewrites::Correct => "correct",
        }
    }
}

/// The end of the IP payload by the header's own length (padding after it
/// excluded), for an IPv4 or IPv6 packet.
fn ip_end(data: &[u8], l3: usize, l3_type: u16) -> Option<usize> {
    match l3_type {
        ethertype::IPV4 => Some(l3 + be16(data, l3 + 2) as usize),
        ethertype::IPV6 => Some(l3 + IPV6_HEADER_LEN + be16(data, l3 + 4) as usize),
        _ => None,
    }
}

/// Where an IPv4 later fragment's payload starts: where Open vSwitch looks
/// for an L4 header that is not there.
fn ipv4_payload(data: &[u8], l3: usize) -> usize {
    l3 + (data[l3] as usize & 0xf) * 4
}

/// Where the L4 checksum an address rewrite updates is: (offset of the
/// L4 header, end of the IP payload, protocol), or None.
fn l4_span(pkt: &Packet, mode: FragRewrites, v6_dst: bool) -> Option<(usize, usize, u8)> {
    let l3 = pkt.meta.l3()?;
    let data = pkt.data();
    let end = ip_end(data, l3, pkt.meta.l3_type)?;
    match pkt.meta.l3_type {
        ethertype::IPV4 => {
            let l4 = match pkt.meta.l4() {
                Some(l4) => l4,
                // A later fragment keys no L4 header; OVS still finds one
                // right after the IP header.
                None if mode == FragRewrites::Ovs => ipv4_payload(data, l3),
                None => return None,
            };
            (l4 <= end && end <= data.len()).then_some((l4, end, data[l3 + 9]))
        }
        _ => {
            let l4 = pkt.meta.l4()?;
            if l4 > end || end > data.len() {
                return None;
            }
            let (frag, routed) = v6_headers(&data[l3..l4]);
            let skip = match mode {
                FragRewrites::Ovs => routed || frag.is_some_and(|offlg| offlg != 1),
                FragRewrites::Correct => routed && v6_dst,
            };
            (!skip).then_some((l4, end, pkt.meta.l4_proto))
        }
    }
}

/// The fragment header's offset-and-flags word, if there is one, and
/// whether a routing header with segments left comes before it, from the
/// IPv6 header up to the L4 header (a chain extraction already walked).
fn v6_headers(h: &[u8]) -> (Option<u16>, bool) {
    let (mut next, mut off, mut frag) = (h[6], IPV6_HEADER_LEN, None);
    while off + 8 <= h.len() {
        let len = match next {
            ext::HOPOPTS | ext::DSTOPTS => (h[off + 1] as usize + 1) * 8,
            ext::AH => (h[off + 1] as usize + 2) * 4,
            ext::ROUTING if h[off + 3] > 0 => return (frag, true),
            ext::ROUTING => (h[off + 1] as usize + 1) * 8,
            ext::FRAGMENT => {
                frag = Some(be16(h, off + 2) & 0xfff9);
                8
            }
            _ => break,
        };
        next = h[off];
        off += len;
    }
    (frag, false)
}

/// The L4 bytes, bounded by the IP payload length (padding excluded).
pub(crate) fn l4_bytes(pkt: &mut Packet) -> Option<&mut [u8]> {
    let (l3, l4) = (pkt.meta.l3()?, pkt.meta.l4()?);
    let data = pkt.data();
    let end = ip_end(data, l3, pkt.meta.l3_type)?;
    if l4 > end || end > data.len() {
        return None;
    }
    Some(&mut pkt.data_mut()[l4..end])
}

/// Applies a pseudo-header change to the L4 checksum (TCP, UDP, ICMPv6).
fn fix_l4_pseudo(pkt: &mut Packet, mode: FragRewrites, v6_dst: bool, fix: impl Fn(u16) -> u16) {
    if pkt.meta.offload.needs_csum() {
        // The field holds the pseudo-header sum itself (not complemented),
        // for the hardware or the far end to complete: it takes the same
        // change, uncomplemented. Bytes past the pseudo-header need nothing.
        fix_partial(pkt, |c| !fix(!c));
        return;
    }
    let is_v6 = pkt.meta.l3_type == ethertype::IPV6;
    let Some((l4, end, p)) = l4_span(pkt, mode, v6_dst) else {
        return;
    };
    let l4 = &mut pkt.data_mut()[l4..end];
    match p {
        proto::TCP => {
            if let Ok(mut t) = TcpHeader::new_checked(l4) {
                let c = fix(t.checksum());
                t.set_checksum(c);
            }
        }
        // OVS updates the ICMPv6 checksum whenever its 4-byte header is
        // there, even in a message too short to key.
        proto::ICMPV6 if is_v6 && l4.len() >= 4 && l4.len() < 8 => {
            let c = fix(be16(l4, 2));
            l4[2..4].copy_from_slice(&c.to_be_bytes());
        }
        proto::UDP => {
            if let Ok(mut u) = UdpHeader::new_checked(l4) {
                if u.checksum() != 0 {
                    let c = fix(u.checksum());
                    u.set_checksum(if c == 0 { 0xffff } else { c });
                }
            }
        }
        proto::ICMPV6 if is_v6 => {
            if let Ok(mut i) = IcmpHeader::new_checked(l4) {
                let c = fix(i.checksum());
                i.set_checksum(c);
            }
        }
        _ => {}
    }
}

/// Applies `fix` to a partial checksum (see [`crate::meta::Offload`]),
/// where the packet's offload request says it is.
fn fix_partial(pkt: &mut Packet, fix: impl Fn(u16) -> u16) {
    let o = pkt.meta.offload;
    let at = usize::from(o.csum_start) + usize::from(o.csum_offset);
    if let Some(b) = pkt.data_mut().get_mut(at..at + 2) {
        let c = fix(u16::from_be_bytes([b[0], b[1]]));
        b.copy_from_slice(&c.to_be_bytes());
    }
}

/// Sets the IPv4 source, updating the IP and L4 checksums.
pub fn set_ipv4_src(pkt: &mut Packet, ip: u32, mode: FragRewrites) -> bool {
    let Some(mut h) = ipv4(pkt) else { return false };
    let old = h.src();
    h.set_src(ip);
    fix_l4_pseudo(pkt, mode, false, |c| update32(c, old, ip));
    true
}

/// Sets the IPv4 destination, updating the IP and L4 checksums.
pub fn set_ipv4_dst(pkt: &mut Packet, ip: u32, mode: FragRewrites) -> bool {
    let Some(mut h) = ipv4(pkt) else { return false };
    let old = h.dst();
    h.set_dst(ip);
    fix_l4_pseudo(pkt, mode, false, |c| update32(c, old, ip));
    true
}

/// Sets the IPv6 source, updating the L4 checksum.
pub fn set_ipv6_src(pkt: &mut Packet, a: [u8; 16], mode: FragRewrites) -> bool {
    let Some(mut h) = ipv6(pkt) else { return false };
    let old = h.src();
    h.set_src(a);
    fix_l4_pseudo(pkt, mode, false, |c| update_bytes(c, &old, &a));
    true
}

/// Sets the IPv6 destination, updating the L4 checksum.
pub fn set_ipv6_dst(pkt: &mut Packet, a: [u8; 16], mode: FragRewrites) -> bool {
    let Some(mut h) = ipv6(pkt) else { return false };
    let old = h.dst();
    h.set_dst(a);
    fix_l4_pseudo(pkt, mode, true, |c| update_bytes(c, &old, &a));
    true
}

/// Sets the EtherType after the VLAN tags (OpenFlow's `eth_type`); the
/// bytes after it are left as they are.
pub fn set_eth_type(pkt: &mut Packet, t: u16) -> bool {
    let data = pkt.data_mut();
    let mut at = 12;
    while at + 2 <= data.len() && is_vlan_tpid(be16(data, at)) {
        at += VLAN_HEADER_LEN;
    }
    if at + 2 > data.len() {
        return false;
    }
    put16(data, at, t);
    true
}

/// Sets the IP protocol (IPv4) or the next header that names the
/// upper-layer protocol (IPv6: the last of the extension chain), with the
/// IPv4 header checksum and the change of the pseudo-header in the
/// TCP/UDP/ICMPv6 checksum of the transport header the packet has (as
/// `fix_l4_pseudo` does for an address).
pub fn set_ip_proto(pkt: &mut Packet, p: u8, mode: FragRewrites) -> bool {
    let Some(l3) = pkt.meta.l3() else {
        return false;
    };
    let l3_type = pkt.meta.l3_type;
    let at = match l3_type {
        ethertype::IPV4 if ipv4(pkt).is_some() => l3 + 9,
        ethertype::IPV6 if ipv6(pkt).is_some() => match v6_upper_next_header(&pkt.data()[l3..]) {
            Some(off) => l3 + off,
            None => return false,
        },
        _ => return false,
    };
    let old = pkt.data()[at];
    if old == p {
        return true;
    }
    // The pseudo-header's protocol word is (0, protocol) in both versions.
    fix_l4_pseudo(pkt, mode, false, |c| {
        update16(c, u16::from(old), u16::from(p))
    });
    if pkt.meta.l3_type == ethertype::IPV4 {
        if let Some(mut h) = ipv4(pkt) {
            h.set_protocol(p);
        }
    } else {
        pkt.data_mut()[at] = p;
    }
    true
}

/// The offset, from the IPv6 header, of the next-header byte that names
/// the upper-layer protocol: the fixed header's, or the last extension
/// header's. `None` when the chain runs past the bytes there are.
fn v6_upper_next_header(h: &[u8]) -> Option<usize> {
    let (mut at, mut off) = (6, IPV6_HEADER_LEN);
    loop {
        let next = *h.get(at)?;
        let len = match next {
            ext::HOPOPTS | ext::DSTOPTS | ext::ROUTING => (*h.get(off + 1)? as usize + 1) * 8,
            ext::AH => (*h.get(off + 1)? as usize + 2) * 4,
            ext::FRAGMENT => 8,
            _ => return Some(at),
        };
        if off + len > h.len() {
            return None;
        }
        at = off;
        off += len;
    }
}

/// Sets the IPv6 flow label.
pub fn set_ipv6_label(pkt: &mut Packet, label: u32) -> bool {
    ipv6(pkt).map(|mut h| h.set_flow_label(label)).is_some()
}

/// Sets the `mask` bits of the TOS byte (IPv4) or traffic class (IPv6)
/// to those of `tos`, keeping the others (DSCP and ECN are set apart).
pub fn set_ip_tos(pkt: &mut Packet, tos: u8, mask: u8) -> bool {
    if let Some(mut h) = ipv4(pkt) {
        let new = (h.tos() & !mask) | (tos & mask);
        h.set_tos(new);
        return true;
    }
    ipv6(pkt)
        .map(|mut h| {
            let new = (h.traffic_class() & !mask) | (tos & mask);
            h.set_traffic_class(new)
        })
        .is_some()
}

/// Rewrites the DSCP (the top six bits of the TOS / traffic class byte)
/// as `f` maps it, the ECN bits kept. False when the packet is not IP.
pub fn map_dscp(pkt: &mut Packet, f: impl Fn(u8) -> u8) -> bool {
    if let Some(mut h) = ipv4(pkt) {
        let t = h.tos();
        h.set_tos((f(t >> 2) << 2) | (t & 3));
        return true;
    }
    ipv6(pkt)
        .map(|mut h| {
            let t = h.traffic_class();
            h.set_traffic_class((f(t >> 2) << 2) | (t & 3))
        })
        .is_some()
}

/// Sets the TTL (IPv4) or hop limit (IPv6).
pub fn set_ip_ttl(pkt: &mut Packet, ttl: u8) -> bool {
    if let Some(mut h) = ipv4(pkt) {
        h.set_ttl(ttl);
        return true;
    }
    ipv6(pkt).map(|mut h| h.set_hop_limit(ttl)).is_some()
}

/// Which L4 port to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortField {
    /// Source port.
    Src,
    /// Destination port.
    Dst,
}

/// Sets a TCP, UDP or SCTP port, updating the checksum as Open vSwitch
/// does (incrementally, only when the port changes; SCTP's CRC keeps any
/// error it had). A TCP header whose data offset is below 5 or beyond the
/// segment is left alone, as OVS leaves it.
pub fn set_tp_port(pkt: &mut Packet, which: PortField, port: u16) -> bool {
    let p = pkt.meta.l4_proto;
    // A partial checksum is completed over the ports as they are then.
    let partial = pkt.meta.offload.needs_csum();
    let Some(l4) = l4_bytes(pkt) else {
        return false;
    };
    let len = l4.len();
    match p {
        proto::TCP => {
            let Ok(mut t) = TcpHeader::new_checked(l4).and_then(|t| t.check_len(len)) else {
                return false;
            };
            let old = if which == PortField::Src {
                t.src_port()
            } else {
                t.dst_port()
            };
            if old != port {
                if !partial {
                    let c = update16(t.checksum(), old, port);
                    t.set_checksum(c);
                }
                if which == PortField::Src {
                    t.set_src_port_raw(port);
                } else {
                    t.set_dst_port_raw(port);
                }
            }
            true
        }
        proto::UDP => {
            let Ok(mut u) = UdpHeader::new_checked(l4) else {
                return false;
            };
            let old = if which == PortField::Src {
                u.src_port()
            } else {
                u.dst_port()
            };
            if old != port {
                if u.checksum() != 0 && !partial {
                    let c = update16(u.checksum(), old, port);
                    u.set_checksum(if c == 0 { 0xffff } else { c });
                }
                if which == PortField::Src {
                    u.set_src_port_raw(port);
                } else {
                    u.set_dst_port_raw(port);
                }
            }
            true
        }
        proto::SCTP => {
            let Ok(mut s) = SctpHeader::new_checked(l4) else {
                return false;
            };
            s.update_checksum_around(|s| {
                if which == PortField::Src {
                    s.set_src_port_raw(port);
                } else {
                    s.set_dst_port_raw(port);
                }
            });
            true
        }
        _ => false,
    }
}

/// Sets the ICMP / ICMPv6 type or code (`which` = Src for type, Dst for
/// code, as the flow key stores them), keeping the checksum valid.
pub fn set_icmp(pkt: &mut Packet, which: PortField, v: u8) -> bool {
    let p = pkt.meta.l4_proto;
    if p != proto::ICMP && p != proto::ICMPV6 {
        return false;
    }
    let Some(l4) = l4_bytes(pkt) else {
        return false;
    };
    let Ok(mut i) = IcmpHeader::new_checked(l4) else {
        return false;
    };
    let old = u16::from_be_bytes([i.msg_type(), i.code()]);
    if which == PortField::Src {
        i.set_msg_type_raw(v);
    } else {
        i.set_code_raw(v);
    }
    let new = u16::from_be_bytes([i.msg_type(), i.code()]);
    if new != old {
        let c = update16(i.checksum(), old, new);
        i.set_checksum(c);
    }
    true
}

/// Writes ICMP type and code into the first two payload bytes of an IPv4
/// later fragment with protocol ICMP and 8 bytes or more of payload, and
/// updates bytes 2-3 as an ICMP checksum: what Open vSwitch 3.1 does (its
/// L4 offset points there in a later fragment), kept as its behaviour.
pub fn set_icmp_in_later_fragment(pkt: &mut Packet, ty: u8, code: u8) -> bool {
    if pkt.meta.l4().is_some() || pkt.meta.l3_type != ethertype::IPV4 {
        return false;
    }
    let Some(l3) = pkt.meta.l3() else {
        return false;
    };
    if ipv4(pkt).is_none() {
        return false;
    }
    let data = pkt.data();
    let l4 = ipv4_payload(data, l3);
    let end = l3 + be16(data, l3 + 2) as usize;
    if data[l3 + 9] != proto::ICMP || end > data.len() || end < l4 + 8 {
        return false;
    }
    let d = pkt.data_mut();
    let (old, new) = (be16(d, l4), u16::from_be_bytes([ty, code]));
    if old != new {
        let c = update16(be16(d, l4 + 2), old, new);
        put16(d, l4, new);
        put16(d, l4 + 2, c);
    }
    true
}

fn shift_offsets(pkt: &mut Packet, by: isize) {
    if pkt.meta.offload.needs_csum() {
        let o = &mut pkt.meta.offload;
        o.csum_start = (o.csum_start as isize + by) as u16;
    }
    if let Some(l3) = pkt.meta.l3() {
        pkt.meta.l3_ofs = (l3 as isize + by) as u16;
    }
    if let Some(l4) = pkt.meta.l4() {
        pkt.meta.l4_ofs = (l4 as isize + by) as u16;
    }
}

/// Pushes a VLAN tag (outermost) with `tpid` and `tci`. False when the
/// packet is a runt or its frame has no headroom left.
pub fn push_vlan(pkt: &mut Packet, tpid: u16, tci: u16) -> bool {
    if pkt.len() < 14 || !pkt.insert_gap(12, VLAN_HEADER_LEN) {
        return false;
    }
    let d = pkt.data_mut();
    put16(d, 12, tpid);
    put16(d, 14, tci);
    pkt.meta.n_vlans = pkt.meta.n_vlans.saturating_add(1);
    shift_offsets(pkt, VLAN_HEADER_LEN as isize);
    true
}

/// Removes the outermost VLAN tag. False when there is none.
pub fn pop_vlan(pkt: &mut Packet) -> bool {
    if pkt.len() < 18 || !is_vlan_tpid(be16(pkt.data(), 12)) {
        return false;
    }
    if !pkt.remove_range(12, VLAN_HEADER_LEN) {
        return false;
    }
    pkt.meta.n_vlans = pkt.meta.n_vlans.saturating_sub(1);
    shift_offsets(pkt, -(VLAN_HEADER_LEN as isize));
    true
}

/// Replaces the TCI of the outermost VLAN tag. False when there is none.
pub fn set_vlan_tci(pkt: &mut Packet, tci: u16) -> bool {
    if pkt.len() < 18 || !is_vlan_tpid(be16(pkt.data(), 12)) {
        return false;
    }
    put16(pkt.data_mut(), 14, tci);
    true
}

/// Which ARP field to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpField {
    /// Opcode.
    Op(u16),
    /// Sender protocol address.
    Spa(u32),
    /// Target protocol address.
    Tpa(u32),
    /// Sender hardware address.
    Sha([u8; 6]),
    /// Target hardware address.
    Tha([u8; 6]),
}

/// Sets one ARP field at its offset for Ethernet/IPv4 ARP, as Open
/// vSwitch does: whatever the header's types and lengths say, and in a
/// truncated header the part of the field inside the frame (OVS writes the
/// whole 28-byte header, past the frame's end into its buffer; what shows
/// is the part inside).
pub fn set_arp(pkt: &mut Packet, f: ArpField) -> bool {
    let Some(l3) = pkt.meta.l3() else {
        return false;
    };
    if pkt.meta.l3_type != ethertype::ARP && pkt.meta.l3_type != ethertype::RARP {
        return false;
    }
    let mut buf = [0u8; 6];
    let (at, bytes): (usize, &[u8]) = match f {
        ArpField::Op(v) => {
            buf[..2].copy_from_slice(&v.to_be_bytes());
            (6, &buf[..2])
        }
        ArpField::Sha(m) => {
            buf = m;
            (8, &buf[..])
        }
        ArpField::Spa(v) => {
            buf[..4].copy_from_slice(&v.to_be_bytes());
            (14, &buf[..4])
        }
        ArpField::Tha(m) => {
            buf = m;
            (18, &buf[..])
        }
        ArpField::Tpa(v) => {
            buf[..4].copy_from_slice(&v.to_be_bytes());
            (24, &buf[..4])
        }
    };
    let data = pkt.data_mut();
    let start = (l3 + at).min(data.len());
    let end = (l3 + at + bytes.len()).min(data.len());
    data[start..end].copy_from_slice(&bytes[..end - start]);
    end > start
}

#[cfg(test)]
mod tests;
