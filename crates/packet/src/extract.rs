//! Flow key extraction: bytes → [`FlowKey`] + layer offsets.
//!
//! Follows Open vSwitch's `miniflow_extract`: parse as far as the headers
//! are sound; a header that is truncated or inconsistent stops the walk and
//! leaves the fields behind it zero, so every packet gets a well-defined
//! key. Only a frame too short for an Ethernet header is refused (OVS drops
//! those too). Lengths come from the IP header, not the frame, so padding
//! after the IP payload never changes the key (CVE-2020-35498 class).

use crate::key::{FlowKey, DP_WORDS, FRAG_ANY, FRAG_LATER};
use crate::meta::{PacketMeta, NO_OFFSET};
use crate::wire::arp::ArpPacket;
use crate::wire::ethernet::{ethertype, is_mpls, is_vlan_tpid, itag, tci, ETH_HEADER_LEN};
use crate::wire::icmp::{parse_nd, IcmpHeader};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{walk_ext_headers, Ipv6Packet, IPV6_HEADER_LEN};
use crate::wire::l4::{proto, SctpHeader, TcpHeader, UdpHeader};
use crate::wire::{be16, be32};

/// Most VLAN tags a key holds (802.1ad outer + 802.1Q inner), as OVS.
pub const MAX_VLANS: usize = 2;

/// How many VLAN tags extraction parses by default: one, as Open vSwitch's
/// `other_config:vlan-limit` (a second tag is then the EtherType, and the
/// frame has no L3 fields). See [`vlan_limit`].
pub const DEFAULT_VLAN_LIMIT: usize = 1;

/// The number of tags to parse for a `vlan-limit` setting: 0 means as many
/// as a key holds ([`MAX_VLANS`]), anything above that is [`MAX_VLANS`].
pub fn vlan_limit(setting: usize) -> usize {
    if setting == 0 {
        MAX_VLANS
    } else {
        setting.min(MAX_VLANS)
    }
}

/// dl_type of an 802.3 frame without an LLC/SNAP EtherType (OVS's
/// `FLOW_DL_TYPE_NONE`).
pub const DL_TYPE_NONE: u16 = 0x05ff;

/// Why a packet has no key at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtractError {
    /// Shorter than an Ethernet header.
    Runt,
}

/// What extraction knows of a key's shape without reading it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// The key is short ([`FlowKey::is_short`]): the fixed-offset IPv4
    /// path wrote zeros past L4.
    Short,
    /// Not known (the general walk): ask the key.
    Unknown,
}

/// Extracts the key of `data` received on `in_port` into `key`, and the
/// layer offsets into `meta`, parsing at most [`DEFAULT_VLAN_LIMIT`] VLAN
/// tags. Never reads outside `data`.
#[inline]
pub fn extract(
    data: &[u8],
    in_port: u32,
    meta: &mut PacketMeta,
    key: &mut FlowKey,
) -> Result<(), ExtractError> {
    extract_with_shape(data, in_port, DEFAULT_VLAN_LIMIT, meta, key).map(|_| ())
}

/// [`extract`] with `vlans` tags at most (from [`vlan_limit`]), also telling
/// what it knows of the key's shape (the datapath then hashes and compares
/// short keys on their first words).
#[inline]
pub fn extract_with_shape(
    data: &[u8],
    in_port: u32,
    vlans: usize,
    meta: &mut PacketMeta,
    key: &mut FlowKey,
) -> Result<KeyShape, ExtractError> {
    if extract_ipv4_l4_fast(data, in_port, meta, key) {
        return Ok(KeyShape::Short);
    }
    extract_any(data, in_port, vlans, meta, key).map(|()| KeyShape::Unknown)
}

/// The common case in one pass of fixed-offset reads: untagged Ethernet,
/// an IPv4 header without options and not a fragment, and a whole UDP or
/// TCP header inside the IP length. Returns false, having written nothing,
/// for anything else; [`extract_any`] then gives the same key the general
/// walk always gives (a property test holds the two equal).
#[inline(always)]
fn extract_ipv4_l4_fast(
    data: &[u8],
    in_port: u32,
    meta: &mut PacketMeta,
    key: &mut FlowKey,
) -> bool {
    const L3: usize = ETH_HEADER_LEN;
    const L4: usize = L3 + 20;
    // Enough for the UDP header; TCP needs 12 more bytes, checked below.
    let Some(d) = data.get(..L4 + 8) else {
        return false;
    };
    if be16(d, 12) != ethertype::IPV4 || d[L3] != 0x45 || be16(d, L3 + 6) & 0x3fff != 0 {
        return false;
    }
    let tot = be16(d, L3 + 2) as usize;
    let proto = d[L3 + 9];
    let (tp_src, tp_dst, tcp_flags) = match proto {
        proto::UDP if tot >= 20 + 8 && L3 + tot <= data.len() => (be16(d, L4), be16(d, L4 + 2), 0),
        // The whole TCP header, options included, inside the IP payload
        // (as OVS: a data offset below 5 or beyond the payload keys no L4).
        proto::TCP
            if tot >= 20 + 20
                && L3 + tot <= data.len()
                && (5..=(tot - 20) / 4).contains(&(data[L4 + 12] as usize >> 4)) =>
        {
            (be16(d, L4), be16(d, L4 + 2), be16(data, L4 + 12) & 0x0fff)
        }
        _ => return false,
    };
    // The key written as whole words, in FlowKey's layout (the property
    // test holds it to the field-by-field walk): a later word-wise read
    // (hash, EMC compare) then never waits on a mix of narrow stores.
    let word = |b: [u8; 8]| u64::from_ne_bytes(b);
    let cat = |a: &[u8], b: &[u8]| {
        let mut w = [0u8; 8];
        w[..a.len()].copy_from_slice(a);
        w[a.len()..a.len() + b.len()].copy_from_slice(b);
        w
    };
    // in_port, dl_type, nw_proto, nw_tos.
    let mut w0 = cat(&in_port.to_ne_bytes(), &ethertype::IPV4.to_ne_bytes());
    w0[6] = proto;
    w0[7] = d[L3 + 1];
    // No VLAN TPIDs, nw_ttl, nw_frag 0 (not a fragment), tcp_flags.
    let mut w3 = [0u8; 8];
    w3[4] = d[L3 + 8];
    w3[6..8].copy_from_slice(&tcp_flags.to_ne_bytes());
    let words = key.words_mut();
    words[0] = word(w0);
    // dl_dst and the first two bytes of dl_src are the frame's first 8.
    words[1] = word(d[0..8].try_into().expect("8 bytes"));
    // The rest of dl_src; no VLAN TCIs.
    words[2] = word(cat(&d[8..12], &[]));
    words[3] = word(w3);
    // nw_src, nw_dst; then tp_src, tp_dst and no IPv6 label.
    words[4] = word(cat(
        &be32(d, L3 + 12).to_ne_bytes(),
        &be32(d, L3 + 16).to_ne_bytes(),
    ));
    words[5] = word(cat(&tp_src.to_ne_bytes(), &tp_dst.to_ne_bytes()));
    // (Not the registers: see extract_any.)
    words[6..DP_WORDS].fill(0);
    meta.in_port = in_port;
    meta.l3_ofs = L3 as u16;
    meta.l4_ofs = L4 as u16;
    meta.n_vlans = 0;
    meta.l4_proto = proto;
    meta.l3_type = ethertype::IPV4;
    true
}

/// The general walk: any frame, as far as its headers are sound.
fn extract_any(
    data: &[u8],
    in_port: u32,
    vlans: usize,
    meta: &mut PacketMeta,
    key: &mut FlowKey,
) -> Result<(), ExtractError> {
    // Every word a packet's key has; the registers past them
    // (`REG_WORDS`) are translation's alone, zero in every key buffer
    // and written by nothing on the datapath, so they are left as they
    // are: a packet's key then stays within its first DP_WORDS.
    key.words_mut()[..DP_WORDS].fill(0);
    key.in_port = in_port;
    meta.in_port = in_port;
    meta.l3_ofs = NO_OFFSET;
    meta.l4_ofs = NO_OFFSET;
    meta.n_vlans = 0;
    meta.l4_proto = 0;
    meta.l3_type = 0;
    if data.len() < ETH_HEADER_LEN {
        return Err(ExtractError::Runt);
    }
    key.dl_dst.copy_from_slice(&data[0..6]);
    key.dl_src.copy_from_slice(&data[6..12]);

    // VLAN tags: each needs its 4 bytes plus the next EtherType.
    let mut off = 12;
    let mut n = 0;
    while n < vlans.min(MAX_VLANS) && is_vlan_tpid(be16(data, off)) && data.len() >= off + 6 {
        key.vlan_tpid[n] = be16(data, off);
        key.vlan_tci[n] = be16(data, off + 2) | tci::PRESENT;
        off += 4;
        n += 1;
    }
    meta.n_vlans = n as u8;

    let mut dl_type = be16(data, off);
    off += 2;
    if dl_type < ethertype::MIN {
        // 802.3: an EtherType only behind LLC/SNAP with a zero OUI.
        let snap = data.get(off..off + 8);
        dl_type = match snap {
            Some(s) if s[0..6] == [0xaa, 0xaa, 0x03, 0, 0, 0] && be16(s, 6) >= ethertype::MIN => {
                off += 8;
                be16(s, 6)
            }
            _ => DL_TYPE_NONE,
        };
    }
    key.dl_type = dl_type;
    let l3 = &data[off..];

    match dl_type {
        ethertype::IPV4 => {
            meta.l3_ofs = off as u16;
            meta.l3_type = dl_type;
            extract_ipv4(l3, off, meta, key);
        }
        ethertype::IPV6 => {
            meta.l3_ofs = off as u16;
            meta.l3_type = dl_type;
            extract_ipv6(l3, off, meta, key);
        }
        ethertype::ARP | ethertype::RARP => {
            meta.l3_ofs = off as u16;
            meta.l3_type = dl_type;
            if let Ok(arp) = ArpPacket::new_checked(l3) {
                if arp.op() <= 0xff {
                    key.nw_proto = arp.op() as u8;
                }
                key.nw_src = arp.spa();
                key.nw_dst = arp.tpa();
                key.arp_sha = arp.sha();
                key.arp_tha = arp.tha();
            }
        }
        // MPLS: the outermost label stack entry, and no further (what is
        // under the labels is not known until a pop says: OVS's
        // miniflow_extract likewise). `l3_ofs` is the first label.
        t if is_mpls(t) => {
            meta.l3_ofs = off as u16;
            meta.l3_type = dl_type;
            if l3.len() >= 4 {
                key.ipv6_label = be32(l3, 0);
            }
        }
        // PBB: the I-TAG's service ID; the customer frame behind it is
        // parsed after a pop_pbb. `l3_ofs` is the I-TAG.
        ethertype::PBB => {
            meta.l3_ofs = off as u16;
            meta.l3_type = dl_type;
            if l3.len() >= itag::LEN {
                key.ipv6_label = be32(l3, 0) & itag::ISID_MASK;
            }
        }
        _ => {}
    }
    Ok(())
}

fn extract_ipv4(l3: &[u8], l3_ofs: usize, meta: &mut PacketMeta, key: &mut FlowKey) {
    let Ok(ip) = Ipv4Packet::new_checked(l3) else {
        return;
    };
    key.nw_src = ip.src();
    key.nw_dst = ip.dst();
    key.nw_tos = ip.tos();
    key.nw_ttl = ip.ttl();
    key.nw_proto = ip.protocol();
    if ip.is_fragment() {
        key.nw_frag = FRAG_ANY;
        if ip.is_later_fragment() {
            key.nw_frag |= FRAG_LATER;
            return;
        }
    }
    let hl = ip.header_len();
    meta.l4_ofs = (l3_ofs + hl) as u16;
    meta.l4_proto = ip.protocol();
    extract_l4(ip.payload(), ip.protocol(), false, key);
}

fn extract_ipv6(l3: &[u8], l3_ofs: usize, meta: &mut PacketMeta, key: &mut FlowKey) {
    let Ok(ip) = Ipv6Packet::new_checked(l3) else {
        return;
    };
    key.ipv6_src = ip.src();
    key.ipv6_dst = ip.dst();
    let payload = ip.payload();
    // A broken extension header chain keys the addresses only (as OVS).
    let Ok(walk) = walk_ext_headers(payload, ip.next_header()) else {
        return;
    };
    // The extension-header flags ride above the 20-bit label (see FlowKey).
    key.ipv6_label = ip.flow_label() | u32::from(walk.flags) << 20;
    key.nw_tos = ip.traffic_class();
    key.nw_ttl = ip.hop_limit();
    key.nw_proto = walk.proto;
    if walk.fragment {
        key.nw_frag = FRAG_ANY;
        if walk.later_fragment {
            key.nw_frag |= FRAG_LATER;
            return;
        }
    }
    meta.l4_ofs = (l3_ofs + IPV6_HEADER_LEN + walk.offset) as u16;
    meta.l4_proto = walk.proto;
    extract_l4(&payload[walk.offset..], walk.proto, true, key);
}

fn extract_l4(l4: &[u8], nw_proto: u8, ipv6: bool, key: &mut FlowKey) {
    match nw_proto {
        proto::TCP => {
            if let Ok(t) = TcpHeader::new_checked(l4).and_then(|t| t.check_len(l4.len())) {
                key.tp_src = t.src_port();
                key.tp_dst = t.dst_port();
                key.tcp_flags = t.flags();
            }
        }
        proto::UDP => {
            if let Ok(u) = UdpHeader::new_checked(l4) {
                key.tp_src = u.src_port();
                key.tp_dst = u.dst_port();
            }
        }
        proto::SCTP => {
            if let Ok(s) = SctpHeader::new_checked(l4) {
                key.tp_src = s.src_port();
                key.tp_dst = s.dst_port();
            }
        }
        proto::ICMP if !ipv6 => {
            if let Ok(i) = IcmpHeader::new_checked(l4) {
                key.tp_src = i.msg_type() as u16;
                key.tp_dst = i.code() as u16;
            }
        }
        proto::ICMPV6 if ipv6 => {
            if let Ok(i) = IcmpHeader::new_checked(l4) {
                key.tp_src = i.msg_type() as u16;
                key.tp_dst = i.code() as u16;
                if let Some(nd) = parse_nd(l4) {
                    key.nd_target = nd.target;
                    key.arp_sha = nd.sll;
                    key.arp_tha = nd.tll;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Frame, L4};
    use proptest::prelude::*;

    fn key_of(bytes: &[u8]) -> (FlowKey, PacketMeta) {
        let mut k = FlowKey::default();
        let mut m = PacketMeta::default();
        extract(bytes, 7, &mut m, &mut k).unwrap();
        (k, m)
    }

    fn key_with_vlans(bytes: &[u8], vlans: usize) -> (FlowKey, PacketMeta) {
        let mut k = FlowKey::default();
        let mut m = PacketMeta::default();
        extract_with_shape(bytes, 7, vlans, &mut m, &mut k).unwrap();
        (k, m)
    }

    /// Open vSwitch's vlan-limit 1 (its default): the second tag is the
    /// EtherType and the frame has no L3 or L4 fields.
    #[test]
    fn one_vlan_by_default() {
        let f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
            .vlan(0x88a8, 0x2064)
            .vlan(0x8100, 0x000a)
            .build();
        let (k, m) = key_of(&f);
        assert_eq!(
            (k.vlan_tpid, k.vlan_tci),
            ([0x88a8, 0], [0x2064 | tci::PRESENT, 0])
        );
        assert_eq!(k.dl_type, 0x8100);
        assert_eq!((k.nw_src, k.nw_proto, k.tp_src), (0, 0, 0));
        assert_eq!((m.l3(), m.l4(), m.n_vlans), (None, None, 1));
        assert_eq!(vlan_limit(0), 2);
        assert_eq!(vlan_limit(1), 1);
        assert_eq!(vlan_limit(7), 2);
    }

    /// TCP data offset below 5, or a header longer than the IP payload: no
    /// L4 fields (the frame from the OVS comparison: offset 4).
    #[test]
    fn tcp_with_a_bad_data_offset_keys_no_ports() {
        let hex = "02000000a000ffffffffffff080045010033d5f8400020066cc80a0102010a0102011f9003ffaf0e5a850d53ecdf40112932334800007198bafe015ce70100000f";
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let (k, _) = key_of(&bytes);
        assert_eq!((k.nw_proto, k.nw_src), (6, 0x0a01_0201));
        assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (0, 0, 0));
        let mut long = Frame::ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            L4::Tcp {
                src: 5,
                dst: 6,
                flags: 2,
            },
        )
        .build();
        long[14 + 20 + 12] = 6 << 4; // 24 bytes of header in 20
        assert_eq!(key_of(&long).0.tp_src, 0);
        long[14 + 20 + 12] = 5 << 4;
        assert_eq!(key_of(&long).0.tp_src, 5);
    }

    /// IPv6 fragments as OVS keys them: a later fragment's protocol is the
    /// fragment header (44); an atomic fragment (offset 0, M clear) is no
    /// fragment.
    #[test]
    fn ipv6_fragments_as_ovs() {
        let f = Frame::ipv6(
            [1; 16],
            [2; 16],
            L4::Tcp {
                src: 5,
                dst: 6,
                flags: 2,
            },
        )
        .build();
        // Insert a fragment header after the IPv6 header.
        let with_frag = |offlg: u16| {
            let mut b = f.clone();
            let l3 = 14;
            let plen = u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]) + 8;
            b[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
            let next = b[l3 + 6];
            b[l3 + 6] = 44;
            let mut hdr = vec![next, 0];
            hdr.extend_from_slice(&offlg.to_be_bytes());
            hdr.extend_from_slice(&[0, 0, 0, 1]);
            b.splice(l3 + 40..l3 + 40, hdr);
            b
        };
        let (k, m) = key_of(&with_frag(1 << 3));
        assert_eq!(
            (k.nw_proto, k.nw_frag, k.tp_src),
            (44, FRAG_ANY | FRAG_LATER, 0)
        );
        assert_eq!(m.l4(), None);
        let (k, _) = key_of(&with_frag(0));
        assert_eq!((k.nw_proto, k.nw_frag, k.tp_src), (6, 0, 5), "atomic");
        let (k, _) = key_of(&with_frag(1));
        assert_eq!((k.nw_proto, k.nw_frag, k.tp_src), (6, FRAG_ANY, 5), "first");
    }

    #[test]
    fn tcp_over_ipv4_with_two_vlans() {
        let f = Frame::ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            L4::Tcp {
                src: 1000,
                dst: 80,
                flags: 0x12,
            },
        )
        .vlan(0x88a8, 0x2064)
        .vlan(0x8100, 0x000a)
        .tos(0xb9)
        .ttl(9);
        let (k, m) = key_with_vlans(&f.build(), vlan_limit(2));
        assert_eq!(k.in_port, 7);
        assert_eq!(k.vlan_tpid, [0x88a8, 0x8100]);
        assert_eq!(k.vlan_tci, [0x2064 | tci::PRESENT, 0x000a | tci::PRESENT]);
        assert_eq!(k.dl_type, 0x0800);
        assert_eq!((k.nw_src, k.nw_dst), (0x0a00_0001, 0x0a00_0002));
        assert_eq!((k.nw_proto, k.nw_tos, k.nw_ttl, k.nw_frag), (6, 0xb9, 9, 0));
        assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (1000, 80, 0x12));
        assert_eq!((m.l3_ofs, m.l4_ofs, m.n_vlans, m.l4_proto), (22, 42, 2, 6));
    }

    #[test]
    fn ipv6_icmpv6_nd() {
        let target = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let f = Frame::ipv6(
            [1; 16],
            [2; 16],
            L4::NeighborSolicit {
                target,
                sll: Some([9; 6]),
            },
        );
        let (k, _) = key_of(&f.build());
        assert_eq!(k.dl_type, 0x86dd);
        assert_eq!(k.nw_proto, 58);
        assert_eq!((k.tp_src, k.tp_dst), (135, 0));
        assert_eq!(k.nd_target, target);
        assert_eq!(k.arp_sha, [9; 6]);
        assert_eq!(k.ipv6_src, [1; 16]);
    }

    #[test]
    fn arp_fields() {
        let f = Frame::arp(1, [1, 2, 3, 4, 5, 6], [10, 0, 0, 1], [0; 6], [10, 0, 0, 9]);
        let (k, _) = key_of(&f.build());
        assert_eq!((k.dl_type, k.nw_proto), (0x0806, 1));
        assert_eq!((k.nw_src, k.nw_dst), (0x0a00_0001, 0x0a00_0009));
        assert_eq!(k.arp_sha, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn later_fragment_has_no_ports() {
        let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 5, dst: 6 }).frag(0x0010);
        let (k, m) = key_of(&f.build());
        assert_eq!(k.nw_frag, FRAG_ANY | FRAG_LATER);
        assert_eq!((k.tp_src, k.tp_dst), (0, 0));
        assert_eq!(m.l4(), None);
        let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 5, dst: 6 }).frag(0x2000);
        let (k, _) = key_of(&f.build());
        assert_eq!((k.nw_frag, k.tp_src), (FRAG_ANY, 5));
    }

    #[test]
    fn truncated_l4_keeps_l3() {
        let bytes = Frame::ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            L4::Tcp {
                src: 5,
                dst: 6,
                flags: 2,
            },
        )
        .build();
        // Cut the TCP header and fix the IP total length to say so.
        let mut cut = bytes[..14 + 20 + 10].to_vec();
        cut[16..18].copy_from_slice(&30u16.to_be_bytes());
        let (k, _) = key_of(&cut);
        assert_eq!((k.nw_proto, k.nw_src), (6, 0x0101_0101));
        assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (0, 0, 0));
    }

    #[test]
    fn padding_after_ip_payload_does_not_change_key() {
        let bytes = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 5, dst: 6 }).build();
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0xff; 20]);
        assert_eq!(key_of(&bytes).0, key_of(&padded).0);
    }

    #[test]
    fn ip_total_length_beyond_frame_keys_no_l3() {
        let mut bytes = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 5, dst: 6 }).build();
        bytes[16..18].copy_from_slice(&1000u16.to_be_bytes());
        let (k, _) = key_of(&bytes);
        assert_eq!(k.dl_type, 0x0800);
        assert_eq!((k.nw_src, k.nw_proto, k.tp_src), (0, 0, 0));
    }

    #[test]
    fn runt_and_llc() {
        let mut m = PacketMeta::default();
        let mut k = FlowKey::default();
        assert_eq!(
            extract(&[0; 13], 1, &mut m, &mut k),
            Err(ExtractError::Runt)
        );
        let mut llc = vec![0u8; 12];
        llc.extend_from_slice(&[0x00, 0x30, 0x42, 0x42, 0x03]);
        let (k, _) = key_of(&llc);
        assert_eq!(k.dl_type, DL_TYPE_NONE);
        let mut snap = vec![0u8; 12];
        snap.extend_from_slice(&[0x00, 0x30, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06]);
        assert_eq!(key_of(&snap).0.dl_type, 0x0806);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), port in any::<u32>()) {
            let mut m = PacketMeta::default();
            let mut k = FlowKey::default();
            if extract(&bytes, port, &mut m, &mut k).is_ok() {
                prop_assert_eq!(k.in_port, port);
                prop_assert!(m.l3().is_none_or(|o| o <= bytes.len()));
                prop_assert!(m.l4().is_none_or(|o| o <= bytes.len()));
                prop_assert_eq!(k.recirc_id, 0);
            } else {
                prop_assert!(bytes.len() < 14);
            }
        }

        #[test]
        fn fast_path_keys_like_the_general_walk(seed in any::<u64>(), cut in 0usize..90, flips in proptest::collection::vec((0usize..60, any::<u8>()), 0..4), port in any::<u32>()) {
            let l4 = match seed % 3 {
                0 => L4::Tcp { src: seed as u16, dst: (seed >> 16) as u16, flags: (seed >> 32) as u16 },
                1 => L4::Udp { src: seed as u16, dst: (seed >> 16) as u16 },
                _ => L4::Icmp { ty: 8, code: 0 },
            };
            let mut bytes = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], l4).tos((seed >> 8) as u8).build();
            // Biased flips: the bytes the fast path decides on.
            for (at, v) in flips {
                let at = if at % 2 == 0 { [12, 13, 14, 16, 17, 20, 21, 23, 34, 46][at / 2 % 10] } else { at };
                if at < bytes.len() { bytes[at] = v; }
            }
            bytes.truncate(cut.max(14));
            let (mut m1, mut m2) = (PacketMeta::default(), PacketMeta::default());
            let (mut k1, mut k2) = (FlowKey::default(), FlowKey::default());
            let r1 = extract_with_shape(&bytes, port, 2, &mut m1, &mut k1);
            let r2 = extract_any(&bytes, port, 2, &mut m2, &mut k2);
            prop_assert_eq!(r1.map(|_| ()), r2);
            prop_assert!(k1 == k2, "keys differ for {:02x?}", bytes);
            prop_assert_eq!(m1, m2);
            // A key said to be short is short, and hashes and compares
            // the same on its first words as on all of them.
            if r1 == Ok(KeyShape::Short) {
                prop_assert!(k1.is_short());
                prop_assert_eq!(k1.hash_short(), k1.hash());
                prop_assert!(k1.eq_short(&k2));
                let mut k3 = k1;
                k3.tp_dst ^= 1;
                prop_assert!(!k1.eq_short(&k3));
            }
        }

        #[test]
        fn mutated_valid_frames_never_panic(seed in any::<u64>(), cut in 0usize..120, flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..6)) {
            let f = match seed % 4 {
                0 => Frame::ipv4([1, 2, 3, 4], [5, 6, 7, 8], L4::Tcp { src: 1, dst: 2, flags: 0x10 }),
                1 => Frame::ipv6([1; 16], [2; 16], L4::Udp { src: 1, dst: 2 }),
                2 => Frame::ipv4([1, 2, 3, 4], [5, 6, 7, 8], L4::Icmp { ty: 8, code: 0 }).vlan(0x8100, 5),
                _ => Frame::ipv6([1; 16], [2; 16], L4::NeighborSolicit { target: [3; 16], sll: Some([4; 6]) }),
            };
            let mut bytes = f.build();
            for (at, v) in flips {
                if at < bytes.len() { bytes[at] = v; }
            }
            bytes.truncate(cut.max(14));
            let (_k, _m) = key_of(&bytes);
        }
    }
}
