//! Rewrites of IPv6 neighbour discovery fields (the target address and
//! the link-layer address options), as Open vSwitch's `packet_set_nd`:
//! the ICMPv6 checksum is updated incrementally; an option the message
//! does not carry is not added.

use crate::pool::Packet;
use crate::rewrite::l4_bytes;
use crate::wire::checksum::update_bytes;
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
