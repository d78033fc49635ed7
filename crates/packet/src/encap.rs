//! MPLS label stacks and PBB (802.1ah) encapsulation: push, pop, set and
//! the TTL copies of OpenFlow 1.3.
//!
//! As [`crate::rewrite`]: each function uses the offsets extraction left
//! in the metadata (`l3_ofs` is the first label of an MPLS packet, the
//! I-TAG of a PBB one), checks that what it changes is there and whole,
//! and changes nothing otherwise (returning `false`). What lies under a
//! label stack or behind an I-TAG is not parsed until the datapath parses
//! the packet again (a recirculation): a pop leaves the offsets pointing
//! at the start of the newly exposed header, with nothing known past it.

use crate::meta::NO_OFFSET;
use crate::pool::Packet;
use crate::wire::checksum::update16;
use crate::wire::ethernet::{ethertype, is_mpls, itag, mpls};
use crate::wire::{be16, be32, put16};

/// Where the header after the Ethernet header and its tags starts: the
/// parsed L3 offset, or right after the tags extraction found.
fn l2_end(pkt: &Packet) -> usize {
    pkt.meta
        .l3()
        .unwrap_or(14 + 4 * usize::from(pkt.meta.n_vlans))
}

fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The outermost label stack entry's offset, if the packet is MPLS.
fn top_lse(pkt: &Packet) -> Option<usize> {
    let at = pkt.meta.l3()?;
    (is_mpls(pkt.meta.l3_type) && pkt.len() >= at + mpls::LSE_LEN).then_some(at)
}

/// Pushes label stack entry `lse` (host order, as on the wire) after the
/// Ethernet header and tags, with EtherType `eth_type` (0x8847 or
/// 0x8848). False for a runt or a frame with no headroom left.
pub fn push_mpls(pkt: &mut Packet, eth_type: u16, lse: u32) -> bool {
    let at = l2_end(pkt);
    if at < 14 || at > pkt.len() || !pkt.insert_gap(at, mpls::LSE_LEN) {
        return false;
    }
    // insert_gap moved the bytes before `at` toward the front: the new
    // label sits at `at`, its EtherType just before it.
    let d = pkt.data_mut();
    put32(d, at, lse);
    put16(d, at - 2, eth_type);
    if pkt.meta.offload.needs_csum() {
        pkt.meta.offload.csum_start += mpls::LSE_LEN as u16;
    }
    pkt.meta.l3_ofs = at as u16;
    pkt.meta.l3_type = eth_type;
    pkt.meta.l4_ofs = NO_OFFSET;
    true
}

/// Pops the outermost label stack entry; what follows gets EtherType
/// `eth_type`. False when the packet is not MPLS.
pub fn pop_mpls(pkt: &mut Packet, eth_type: u16) -> bool {
    let Some(at) = top_lse(pkt) else {
        return false;
    };
    if !pkt.remove_range(at, mpls::LSE_LEN) {
        return false;
    }
    // remove_range moved the bytes before the label forward by its length:
    // the EtherType is again right before `at`.
    put16(pkt.data_mut(), at - 2, eth_type);
    pkt.meta.l3_type = eth_type;
    pkt.meta.l4_ofs = NO_OFFSET;
    true
}

/// Replaces the outermost label stack entry. False when not MPLS.
pub fn set_mpls_lse(pkt: &mut Packet, lse: u32) -> bool {
    let Some(at) = top_lse(pkt) else {
        return false;
    };
    put32(pkt.data_mut(), at, lse);
    true
}

/// What lies under the outermost label: the next entry's offset, or the
/// IP header's offset and version when the outermost is bottom of stack.
enum Inner {
    Lse(usize),
    Ipv4(usize),
    Ipv6(usize),
}

fn inner_of(pkt: &Packet, at: usize) -> Option<Inner> {
    let d = pkt.data();
    let next = at + mpls::LSE_LEN;
    if be32(d, at) & mpls::BOS == 0 {
        return (d.len() >= next + mpls::LSE_LEN).then_some(Inner::Lse(next));
    }
    match d.get(next)? >> 4 {
        4 if d.len() >= next + 20 => Some(Inner::Ipv4(next)),
        6 if d.len() >= next + 40 => Some(Inner::Ipv6(next)),
        _ => None,
    }
}

/// OpenFlow's `copy_ttl_out`: the TTL of the header under the outermost
/// label (the next label, or the IP header under the bottom of the stack)
/// into the outermost label. False when there is no such pair.
pub fn copy_ttl_out(pkt: &mut Packet) -> bool {
    let Some(at) = top_lse(pkt) else {
        return false;
    };
    let ttl = match inner_of(pkt, at) {
        Some(Inner::Lse(n)) => mpls::ttl(be32(pkt.data(), n)),
        Some(Inner::Ipv4(n)) => pkt.data()[n + 8],
        Some(Inner::Ipv6(n)) => pkt.data()[n + 7],
        None => return false,
    };
    let lse = mpls::with_ttl(be32(pkt.data(), at), ttl);
    put32(pkt.data_mut(), at, lse);
    true
}

/// OpenFlow's `copy_ttl_in`: the outermost label's TTL into the header
/// under it (an IPv4 header's checksum updated). False when there is no
/// such pair.
pub fn copy_ttl_in(pkt: &mut Packet) -> bool {
    let Some(at) = top_lse(pkt) else {
        return false;
    };
    let ttl = mpls::ttl(be32(pkt.data(), at));
    let inner = inner_of(pkt, at);
    let d = pkt.data_mut();
    match inner {
        Some(Inner::Lse(n)) => put32(d, n, mpls::with_ttl(be32(d, n), ttl)),
        Some(Inner::Ipv4(n)) => {
            let old = be16(d, n + 8);
            let new = (u16::from(ttl) << 8) | (old & 0xff);
            d[n + 8] = ttl;
            let sum = update16(be16(d, n + 10), old, new);
            put16(d, n + 10, sum);
        }
        Some(Inner::Ipv6(n)) => d[n + 7] = ttl,
        None => return false,
    }
    true
}

/// Sets the I-TAG's service instance ID. False when not PBB.
pub fn set_pbb_isid(pkt: &mut Packet, isid: u32) -> bool {
    let Some(at) = pkt.meta.l3() else {
        return false;
    };
    if pkt.meta.l3_type != ethertype::PBB || pkt.len() < at + itag::LEN {
        return false;
    }
    let d = pkt.data_mut();
    let tag = (be32(d, at) & !itag::ISID_MASK) | (isid & itag::ISID_MASK);
    put32(d, at, tag);
    true
}

/// Pushes a PBB encapsulation: backbone destination and source copied
/// from the frame's own addresses, EtherType `eth_type` (0x88e7), and an
/// I-TAG with `isid` (priority, DEI and UCA zero) in front of the whole
/// frame. False for a runt or a frame with no headroom left.
pub fn push_pbb(pkt: &mut Packet, eth_type: u16, isid: u32) -> bool {
    if pkt.len() < 14 || !pkt.insert_gap(0, itag::PUSH_LEN) {
        return false;
    }
    let d = pkt.data_mut();
    d.copy_within(itag::PUSH_LEN..itag::PUSH_LEN + 12, 0);
    put16(d, 12, eth_type);
    put32(d, 14, isid & itag::ISID_MASK);
    if pkt.meta.offload.needs_csum() {
        pkt.meta.offload.csum_start += itag::PUSH_LEN as u16;
    }
    pkt.meta.n_vlans = 0;
    pkt.meta.l3_ofs = 14;
    pkt.meta.l3_type = eth_type;
    pkt.meta.l4_ofs = NO_OFFSET;
    true
}

/// Pops a PBB encapsulation: everything up to and including the I-TAG,
/// leaving the customer frame. False when the packet is not PBB.
pub fn pop_pbb(pkt: &mut Packet) -> bool {
    let Some(at) = pkt.meta.l3() else {
        return false;
    };
    let end = at + itag::LEN;
    if pkt.meta.l3_type != ethertype::PBB || pkt.len() < end + 14 {
        return false;
    }
    if !pkt.remove_range(0, end) {
        return false;
    }
    if pkt.meta.offload.needs_csum() {
        let o = &mut pkt.meta.offload;
        o.csum_start = o.csum_start.saturating_sub(end as u16);
    }
    // The customer frame is not parsed yet.
    pkt.meta.n_vlans = 0;
    pkt.meta.l3_ofs = NO_OFFSET;
    pkt.meta.l3_type = 0;
    pkt.meta.l4_ofs = NO_OFFSET;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::extract;
    use crate::key::FlowKey;
    use crate::pool::PacketPool;

    fn packet(pool: &mut PacketPool, bytes: &[u8]) -> Packet {
        let mut p = pool.alloc_from(bytes).expect("frame");
        let (data, meta) = p.data_and_meta_mut();
        let mut key = FlowKey::default();
        extract(data, 1, meta, &mut key).expect("not a runt");
        p
    }

    fn eth(t: u16) -> Vec<u8> {
        let mut v = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        v.extend_from_slice(&t.to_be_bytes());
        v
    }

    fn ipv4(ttl: u8) -> Vec<u8> {
        let mut h = vec![
            0x45, 0, 0, 20, 0, 0, 0, 0, ttl, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let sum = crate::wire::checksum::checksum(&h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        h
    }

    fn key_of(p: &mut Packet) -> FlowKey {
        let (data, meta) = p.data_and_meta_mut();
        let mut key = FlowKey::default();
        extract(data, 1, meta, &mut key).expect("not a runt");
        key
    }

    #[test]
    fn push_then_pop_mpls_restores_the_frame() {
        let mut pool = PacketPool::new(4, 2048).expect("pool");
        let mut frame = eth(ethertype::IPV4);
        frame.extend(ipv4(64));
        let mut p = packet(&mut pool, &frame);
        let lse = 100 << mpls::LABEL_SHIFT | 3 << mpls::TC_SHIFT | mpls::BOS | 64;
        assert!(push_mpls(&mut p, ethertype::MPLS, lse));
        assert_eq!(p.len(), frame.len() + 4);
        let k = key_of(&mut p);
        assert_eq!((k.dl_type, k.ipv6_label), (ethertype::MPLS, lse));
        assert_eq!(k.nw_src, 0, "nothing under the label is parsed");
        assert!(set_mpls_lse(&mut p, mpls::with_ttl(lse, 9)));
        assert!(copy_ttl_in(&mut p));
        let k = key_of(&mut p);
        assert_eq!(k.ipv6_label, mpls::with_ttl(lse, 9));
        assert!(pop_mpls(&mut p, ethertype::IPV4));
        let k = key_of(&mut p);
        assert_eq!(
            (k.dl_type, k.nw_ttl, k.nw_src),
            (ethertype::IPV4, 9, 0x0a00_0001)
        );
        let mut want = frame.clone();
        want[22] = 9;
        let sum = crate::wire::checksum::checksum(&{
            let mut h = want[14..34].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        want[24..26].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(p.data(), &want[..], "TTL copied in with a valid checksum");
    }

    #[test]
    fn copy_ttl_out_from_the_next_label_and_from_ip() {
        let mut pool = PacketPool::new(4, 2048).expect("pool");
        let mut frame = eth(ethertype::MPLS);
        frame.extend((200u32 << 12 | 30).to_be_bytes());
        frame.extend((300u32 << 12 | mpls::BOS | 20).to_be_bytes());
        frame.extend(ipv4(7));
        let mut p = packet(&mut pool, &frame);
        assert!(copy_ttl_out(&mut p));
        assert_eq!(mpls::ttl(key_of(&mut p).ipv6_label), 20);
        assert!(pop_mpls(&mut p, ethertype::MPLS));
        assert_eq!(key_of(&mut p).ipv6_label >> 12, 300);
        assert!(copy_ttl_out(&mut p));
        assert_eq!(mpls::ttl(key_of(&mut p).ipv6_label), 7);
    }

    #[test]
    fn pbb_push_and_pop() {
        let mut pool = PacketPool::new(4, 2048).expect("pool");
        let mut frame = eth(ethertype::VLAN_8021Q);
        frame.extend([0, 10, 8, 0]);
        frame.extend(ipv4(64));
        let mut p = packet(&mut pool, &frame);
        assert!(push_pbb(&mut p, ethertype::PBB, 0));
        assert!(set_pbb_isid(&mut p, 0x12_3456));
        assert_eq!(&p.data()[..12], &frame[..12], "backbone addresses copied");
        let k = key_of(&mut p);
        assert_eq!((k.dl_type, k.ipv6_label), (ethertype::PBB, 0x12_3456));
        assert_eq!(&p.data()[18..], &frame[..]);
        assert!(pop_pbb(&mut p));
        assert_eq!(p.data(), &frame[..]);
        let k = key_of(&mut p);
        assert_eq!((k.dl_type, k.nw_dst), (ethertype::IPV4, 0x0a00_0002));
    }

    #[test]
    fn wrong_or_truncated_headers_change_nothing() {
        let mut pool = PacketPool::new(4, 2048).expect("pool");
        let mut frame = eth(ethertype::IPV4);
        frame.extend(ipv4(64));
        let mut p = packet(&mut pool, &frame);
        assert!(!pop_mpls(&mut p, ethertype::IPV4));
        assert!(!set_mpls_lse(&mut p, 1));
        assert!(!copy_ttl_in(&mut p));
        assert!(!copy_ttl_out(&mut p));
        assert!(!pop_pbb(&mut p));
        assert_eq!(p.data(), &frame[..]);
        // An MPLS frame cut inside its label, and a PBB one inside its
        // customer header.
        let mut cut = eth(ethertype::MPLS);
        cut.extend([0, 1]);
        let mut p = packet(&mut pool, &cut);
        assert!(!pop_mpls(&mut p, ethertype::IPV4));
        assert!(!copy_ttl_out(&mut p));
        let mut cut = eth(ethertype::PBB);
        cut.extend([0, 0, 0, 1, 2, 2]);
        let mut p = packet(&mut pool, &cut);
        assert!(!pop_pbb(&mut p));
        assert_eq!(p.data(), &cut[..]);
    }
}
