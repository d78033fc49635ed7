//! Rewrites of IPv6 neighbour discovery fields (the target address and
//! the link-layer address options), as Open vSwitch's `packet_set_nd`:
//! the ICMPv6 checksum is updated incrementally; an option the message
//! does not carry is not added. And [`advertise`]: a solicitation turned
//! into the advertisement that answers it, for an address of the
//! switch's own (a tunnel underlay's).

use crate::pool::Packet;
use crate::rewrite::l4_bytes;
use crate::wire::checksum::{finish, pseudo_v6, sum, update_bytes};
use crate::wire::ethernet::ethertype;
use crate::wire::icmp::nd;
use crate::wire::l4::proto;
use crate::wire::{be16, put16};

/// Which ND field to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdField {
    /// The target address.
    Target([u8; 16]),
    /// The source link-layer address option's address.
    Sll([u8; 6]),
    /// The target link-layer address option's address.
    Tll([u8; 6]),
}

/// Sets one ND field of a neighbour solicitation or advertisement. False
/// when the packet is not one, or lacks the field.
pub fn set_nd(pkt: &mut Packet, field: NdField) -> bool {
    if pkt.meta.l4_proto != proto::ICMPV6 {
        return false;
    }
    let Some(msg) = l4_bytes(pkt) else {
        return false;
    };
    if msg.len() < 24 || msg[1] != 0 || !matches!(msg[0], nd::SOLICIT | nd::ADVERT) {
        return false;
    }
    let (at, new): (usize, &[u8]) = match &field {
        NdField::Target(a) => (8, a),
        NdField::Sll(m) | NdField::Tll(m) => {
            let want = if matches!(field, NdField::Sll(_)) {
                nd::OPT_SLL
            } else {
                nd::OPT_TLL
            };
            let mut off = 24;
            let mut found = None;
            while off + 8 <= msg.len() {
                let len = usize::from(msg[off + 1]) * 8;
                if len == 0 || off + len > msg.len() {
                    break;
                }
                if msg[off] == want && len == 8 {
                    found = Some(off + 2);
                    break;
                }
                off += len;
            }
            let Some(at) = found else {
                return false;
            };
            (at, m)
        }
    };
    let sum = update_bytes(be16(msg, 2), &msg[at..at + new.len()], new);
    msg[at..at + new.len()].copy_from_slice(new);
    put16(msg, 2, sum);
    true
}

/// Length of the advertisement [`advertise`] writes: IPv6 header, ICMPv6
/// header and target (24), target link-layer address option (8).
const ADVERT_LEN: usize = 40 + 24 + 8;
/// Advertisement flags: solicited, override (RFC 4861 4.4; not a router).
const ADVERT_FLAGS: [u8; 4] = [0x60, 0, 0, 0];

/// Turns a parsed neighbour solicitation for `ip` (asked from a unicast
/// address) into the advertisement that answers it, from `mac`: back to
/// the asker's Ethernet and IPv6 addresses, hop limit 255, solicited and
/// override, with a target link-layer address option. VLAN tags stay.
/// False, changing nothing, for any other packet.
pub fn advertise(pkt: &mut Packet, mac: [u8; 6], ip: [u8; 16]) -> bool {
    let Some(l3) = pkt.meta.l3() else {
        return false;
    };
    let m = &pkt.meta;
    if m.l3_type != ethertype::IPV6 || m.l4_proto != proto::ICMPV6 {
        return false;
    }
    let d = pkt.data();
    // The message must follow the IPv6 header (no extension headers) and
    // be a whole solicitation for `ip`.
    let msg = l3 + 40;
    if usize::from(m.l4_ofs) != msg
        || d.len() < msg + 24
        || d[l3 + 7] != 255
        || d[msg] != nd::SOLICIT
        || d[msg + 1] != 0
        || d[msg + 8..msg + 24] != ip
        || d[l3 + 8] == 0xff
        || d[l3 + 8..l3 + 24] == [0; 16]
    {
        return false;
    }
    let end = l3 + ADVERT_LEN;
    if end > pkt.len() + pkt.tailroom() {
        return false;
    }
    let mut asker = [0u8; 16];
    asker.copy_from_slice(&d[l3 + 8..l3 + 24]);
    let mut eth_asker = [0u8; 6];
    eth_asker.copy_from_slice(&d[6..12]);
    pkt.set_len(end);
    let d = pkt.data_mut();
    d[0..6].copy_from_slice(&eth_asker);
    d[6..12].copy_from_slice(&mac);
    d[l3..l3 + 4].copy_from_slice(&(6u32 << 28).to_be_bytes());
    put16(d, l3 + 4, (ADVERT_LEN - 40) as u16);
    d[l3 + 6] = proto::ICMPV6;
    d[l3 + 7] = 255;
    d[l3 + 8..l3 + 24].copy_from_slice(&ip);
    d[l3 + 24..l3 + 40].copy_from_slice(&asker);
    d[msg] = nd::ADVERT;
    d[msg + 1] = 0;
    put16(d, msg + 2, 0);
    d[msg + 4..msg + 8].copy_from_slice(&ADVERT_FLAGS);
    d[msg + 8..msg + 24].copy_from_slice(&ip);
    d[msg + 24] = nd::OPT_TLL;
    d[msg + 25] = 1;
    d[msg + 26..msg + 32].copy_from_slice(&mac);
    let ps = pseudo_v6(&ip, &asker, proto::ICMPV6, (ADVERT_LEN - 40) as u32);
    let c = finish(sum(ps, &d[msg..end]));
    put16(d, msg + 2, c);
    pkt.meta.has_hash = 0;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Frame, L4};
    use crate::extract::extract;
    use crate::key::FlowKey;
    use crate::pool::PacketPool;
    use crate::wire::checksum::{finish, pseudo_v6, sum};

    /// A neighbour solicitation with a source link-layer option.
    fn solicit() -> Vec<u8> {
        let mut body = [0u8; 16 + 8].to_vec();
        body[..16].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        body[16] = nd::OPT_SLL;
        body[17] = 1;
        body[18..24].copy_from_slice(&[2, 0, 0, 0, 0, 7]);
        Frame::ipv6(
            [0xfe; 16],
            [0xff; 16],
            L4::Icmp {
                ty: nd::SOLICIT,
                code: 0,
            },
        )
        .payload(&body)
        .build()
    }

    fn icmp_ok(frame: &[u8]) -> bool {
        let l4 = &frame[54..];
        let mut src = [0u8; 16];
        src.copy_from_slice(&frame[22..38]);
        let mut dst = [0u8; 16];
        dst.copy_from_slice(&frame[38..54]);
        finish(sum(
            pseudo_v6(&src, &dst, proto::ICMPV6, l4.len() as u32),
            l4,
        )) == 0
    }

    #[test]
    fn a_solicitation_for_our_address_is_answered() {
        const OURS: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        const ASKER: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
        let mut pool = PacketPool::new(4, 2048).unwrap();
        let group = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1];
        for sll in [Some([2, 0, 0, 0, 0, 0x22]), None] {
            let frame = Frame::ipv6(ASKER, group, L4::NeighborSolicit { target: OURS, sll })
                .ttl(255)
                .macs([2, 0, 0, 0, 0, 0x22], [0x33, 0x33, 0xff, 0, 0, 1])
                .build();
            let mut p = pool.alloc_from(&frame).unwrap();
            let (d, m) = p.data_and_meta_mut();
            let mut k = FlowKey::default();
            extract(d, 1, m, &mut k).unwrap();
            assert!(!advertise(&mut p, MAC, ASKER), "not for that address");
            assert!(advertise(&mut p, MAC, OURS));
            let d = p.data();
            assert_eq!(d.len(), 14 + 72);
            assert_eq!(&d[0..6], &[2, 0, 0, 0, 0, 0x22]);
            assert_eq!(&d[6..12], &MAC);
            assert!(icmp_ok(d));
            let (d, m) = p.data_and_meta_mut();
            extract(d, 1, m, &mut k).unwrap();
            assert_eq!((k.tp_src, k.nw_ttl), (u16::from(nd::ADVERT), 255));
            assert_eq!((k.ipv6_src, k.ipv6_dst), (OURS, ASKER));
            assert_eq!((k.nd_target, k.arp_tha), (OURS, MAC));
            assert_eq!(p.data()[58], 0x60, "solicited, override");
            pool.free(p);
        }
        // Duplicate address detection (from ::) is not answered.
        let dad = Frame::ipv6(
            [0; 16],
            group,
            L4::NeighborSolicit {
                target: OURS,
                sll: None,
            },
        )
        .ttl(255)
        .build();
        let mut p = pool.alloc_from(&dad).unwrap();
        let (d, m) = p.data_and_meta_mut();
        extract(d, 1, m, &mut FlowKey::default()).unwrap();
        assert!(!advertise(&mut p, MAC, OURS));
    }

    #[test]
    fn target_and_option_set_with_a_valid_checksum() {
        let mut pool = PacketPool::new(2, 2048).unwrap();
        let frame = solicit();
        assert!(icmp_ok(&frame), "the test frame is valid");
        let mut p = pool.alloc_from(&frame).unwrap();
        let (d, m) = p.data_and_meta_mut();
        let mut k = FlowKey::default();
        extract(d, 1, m, &mut k).unwrap();
        assert!(set_nd(&mut p, NdField::Target([0xa0; 16])));
        assert!(set_nd(&mut p, NdField::Sll([0xaa; 6])));
        assert!(!set_nd(&mut p, NdField::Tll([0xbb; 6])), "no such option");
        let (d, m) = p.data_and_meta_mut();
        extract(d, 1, m, &mut k).unwrap();
        assert_eq!(
            (k.nd_target, k.arp_sha, k.arp_tha),
            ([0xa0; 16], [0xaa; 6], [0; 6])
        );
        assert!(icmp_ok(p.data()));
    }
}
