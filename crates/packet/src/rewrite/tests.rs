use super::*;
use crate::build::{Frame, L4};
use crate::extract::extract;
use crate::key::FlowKey;
use crate::pool::PacketPool;

fn parsed(pool: &mut PacketPool, f: &Frame) -> Packet {
    let mut p = pool.alloc_from(&f.build()).unwrap();
    reparse(&mut p);
    p
}

/// A TCP SYN from port 5 to port 6.
fn tcp56() -> L4 {
    L4::Tcp {
        src: 5,
        dst: 6,
        flags: 2,
    }
}

/// Sets the packet's offsets from its bytes, as the datapath does.
fn reparse(p: &mut Packet) {
    let mut k = FlowKey::default();
    let mut meta = p.meta;
    extract(p.data(), 1, &mut meta, &mut k).unwrap();
    p.meta = meta;
}

#[test]
fn nat_rewrite_equals_rebuilt_frame() {
    let mut pool = PacketPool::new(4, 2048).unwrap();
    for l4 in [
        L4::Tcp {
            src: 1000,
            dst: 80,
            flags: 0x18,
        },
        L4::Udp { src: 53, dst: 5353 },
        L4::Sctp { src: 9, dst: 10 },
    ] {
        let before = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], l4.clone())
            .tos(4)
            .ttl(9)
            .payload(b"abc");
        let mut p = parsed(&mut pool, &before);
        assert!(set_ipv4_src(&mut p, 0xc0a8_0001, FragRewrites::Ovs));
        assert!(set_ipv4_dst(&mut p, 0xc0a8_0002, FragRewrites::Ovs));
        assert!(set_tp_port(&mut p, PortField::Src, 4000));
        assert!(set_tp_port(&mut p, PortField::Dst, 4001));
        assert!(set_ip_tos(&mut p, 0xb8, 0xff));
        assert!(set_ip_ttl(&mut p, 8));
        let l4_after = match l4 {
            L4::Tcp { flags, .. } => L4::Tcp {
                src: 4000,
                dst: 4001,
                flags,
            },
            L4::Udp { .. } => L4::Udp {
                src: 4000,
                dst: 4001,
            },
            _ => L4::Sctp {
                src: 4000,
                dst: 4001,
            },
        };
        let after = Frame::ipv4([192, 168, 0, 1], [192, 168, 0, 2], l4_after)
            .tos(0xb8)
            .ttl(8)
            .payload(b"abc");
        assert_eq!(p.data(), &after.build()[..], "{l4:?}");
        pool.free(p);
    }
}

#[test]
fn ipv6_rewrite_equals_rebuilt_frame() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let mut p = parsed(
        &mut pool,
        &Frame::ipv6([1; 16], [2; 16], L4::Icmp { ty: 128, code: 0 }),
    );
    assert!(set_ipv6_src(&mut p, [3; 16], FragRewrites::Ovs));
    assert!(set_ipv6_dst(&mut p, [4; 16], FragRewrites::Ovs));
    assert!(set_ipv6_label(&mut p, 0x12345));
    assert!(set_icmp(&mut p, PortField::Src, 129));
    let want = Frame::ipv6([3; 16], [4; 16], L4::Icmp { ty: 129, code: 0 }).label(0x12345);
    assert_eq!(p.data(), &want.build()[..]);
    pool.free(p);
}

#[test]
fn udp_zero_checksum_stays_zero() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let f =
        Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 1, dst: 2 }).udp_without_checksum();
    let mut p = parsed(&mut pool, &f);
    set_ipv4_dst(&mut p, 0x0303_0303, FragRewrites::Ovs);
    set_tp_port(&mut p, PortField::Dst, 9);
    assert_eq!(&p.data()[40..42], &[0, 0]);
    pool.free(p);
}

#[test]
fn vlan_push_pop_set() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 1, dst: 2 });
    let mut p = parsed(&mut pool, &f);
    assert!(!pop_vlan(&mut p), "no tag to pop");
    assert!(!set_vlan_tci(&mut p, 5));
    assert!(push_vlan(&mut p, 0x8100, 0x2005));
    assert_eq!(
        p.data(),
        &f.clone().vlan(0x8100, 0x2005).min_len(64).build()[..]
    );
    assert_eq!(p.meta.l3(), Some(18));
    // The rewrite still finds the IP header after the push.
    assert!(set_ipv4_dst(&mut p, 0x0909_0909, FragRewrites::Ovs));
    assert!(set_vlan_tci(&mut p, 7));
    assert!(pop_vlan(&mut p));
    let want = Frame::ipv4([1, 1, 1, 1], [9, 9, 9, 9], L4::Udp { src: 1, dst: 2 }).min_len(64);
    // The original was padded to 60 bytes; push added 4, pop removed 4.
    assert_eq!(&p.data()[..42], &want.build()[..42]);
    assert_eq!(p.meta.l3(), Some(14));
    pool.free(p);
}

#[test]
fn arp_fields() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let mut p = parsed(
        &mut pool,
        &Frame::arp(1, [1; 6], [1, 1, 1, 1], [0; 6], [2, 2, 2, 2]),
    );
    assert!(set_arp(&mut p, ArpField::Op(2)));
    assert!(set_arp(&mut p, ArpField::Sha([7; 6])));
    assert!(set_arp(&mut p, ArpField::Tha([8; 6])));
    assert!(set_arp(&mut p, ArpField::Spa(0x0202_0202)));
    assert!(set_arp(&mut p, ArpField::Tpa(0x0101_0101)));
    assert_eq!(
        p.data(),
        &Frame::arp(2, [7; 6], [2, 2, 2, 2], [8; 6], [1, 1, 1, 1]).build()[..]
    );
    assert!(!set_ipv4_src(&mut p, 1, FragRewrites::Ovs), "not IPv4");
    pool.free(p);
}

#[test]
fn truncated_l4_is_left_alone() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let mut bytes = Frame::ipv4(
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        L4::Tcp {
            src: 1,
            dst: 2,
            flags: 0,
        },
    )
    .build();
    bytes.truncate(14 + 20 + 8);
    bytes[16..18].copy_from_slice(&28u16.to_be_bytes());
    let mut p = pool.alloc_from(&bytes).unwrap();
    let mut k = FlowKey::default();
    let mut m = p.meta;
    extract(p.data(), 1, &mut m, &mut k).unwrap();
    p.meta = m;
    assert!(!set_tp_port(&mut p, PortField::Dst, 9));
    assert!(
        set_ipv4_src(&mut p, 5, FragRewrites::Ovs),
        "the IP header itself is whole"
    );
    pool.free(p);
}

/// As Open vSwitch: an SCTP CRC that was wrong stays wrong by the same
/// error after a port rewrite; a right one stays right.
#[test]
fn sctp_port_rewrite_keeps_a_bad_crc_bad() {
    let mut pool = PacketPool::new(4, 2048).unwrap();
    let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Sctp { src: 5, dst: 6 });
    let mut good = parsed(&mut pool, &f);
    assert!(set_tp_port(&mut good, PortField::Dst, 99));
    let l4 = good.meta.l4().unwrap();
    let crc_good: [u8; 4] = good.data()[l4 + 8..l4 + 12].try_into().unwrap();
    let end = 14 + u16::from_be_bytes([good.data()[16], good.data()[17]]) as usize;
    assert!(SctpHeader::new_checked(&mut good.data_mut()[l4..end])
        .unwrap()
        .verify_checksum());
    let mut bad = parsed(&mut pool, &f);
    bad.data_mut()[l4 + 8] ^= 0x5a;
    assert!(set_tp_port(&mut bad, PortField::Dst, 99));
    let crc_bad: [u8; 4] = bad.data()[l4 + 8..l4 + 12].try_into().unwrap();
    assert_eq!(crc_bad[0] ^ crc_good[0], 0x5a);
    assert_eq!(crc_bad[1..], crc_good[1..]);
    pool.free(good);
    pool.free(bad);
}

/// As Open vSwitch: a TCP header with a data offset below 5 keeps its
/// ports; an ICMPv6 message of 6 bytes still has its checksum updated
/// for an address rewrite.
#[test]
fn short_l4_headers_as_ovs() {
    let mut pool = PacketPool::new(4, 2048).unwrap();
    let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], tcp56());
    let mut p = pool.alloc_from(&f.build()).unwrap();
    p.data_mut()[14 + 20 + 12] = 4 << 4;
    reparse(&mut p);
    let before = p.data().to_vec();
    assert!(!set_tp_port(&mut p, PortField::Src, 80));
    assert_eq!(p.data(), &before[..]);
    pool.free(p);

    let f = Frame::ipv6([1; 16], [2; 16], L4::Icmp { ty: 128, code: 0 });
    let mut bytes = f.build();
    // Cut the ICMPv6 message to 6 bytes.
    bytes.truncate(14 + 40 + 6);
    bytes[18..20].copy_from_slice(&6u16.to_be_bytes());
    let mut p = pool.alloc_from(&bytes).unwrap();
    reparse(&mut p);
    let old = u16::from_be_bytes([p.data()[56], p.data()[57]]);
    let mut dst = [2u8; 16];
    dst[15] = 3;
    assert!(set_ipv6_dst(&mut p, dst, FragRewrites::Ovs));
    let new = u16::from_be_bytes([p.data()[56], p.data()[57]]);
    assert_eq!(new, update_bytes(old, &[2; 16], &dst));
    pool.free(p);
}

/// An IPv6 TCP frame with one 8-byte extension header of type `ty`
/// before the TCP header.
fn v6_with_ext(pool: &mut PacketPool, ty: u8, ext: [u8; 8]) -> Packet {
    let mut b = Frame::ipv6([1; 16], [2; 16], tcp56()).build();
    b.splice(54..54, ext);
    b[20] = ty;
    let plen = u16::from_be_bytes([b[18], b[19]]) + 8;
    b[18..20].copy_from_slice(&plen.to_be_bytes());
    let mut p = pool.alloc_from(&b).unwrap();
    reparse(&mut p);
    p
}

fn csum_at(p: &Packet, at: usize) -> u16 {
    u16::from_be_bytes([p.data()[at], p.data()[at + 1]])
}

/// Open vSwitch 3.1 updates the TCP checksum field after the IP header
/// of an IPv4 later fragment (payload data there), and none in an
/// IPv6 atomic fragment or behind a routing header with segments
/// left; `correct` does the opposite of each.
#[test]
fn fragment_checksums_as_ovs_or_as_the_rfcs() {
    use FragRewrites::{Correct, Ovs};
    let mut pool = PacketPool::new(8, 2048).unwrap();
    let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], tcp56());
    for (mode, changes) in [(Ovs, true), (Correct, false)] {
        let mut p = pool.alloc_from(&f.build()).unwrap();
        p.data_mut()[20..22].copy_from_slice(&11u16.to_be_bytes()); // offset 88
        reparse(&mut p);
        assert_eq!(p.meta.l4(), None, "a later fragment keys no L4 header");
        let old = csum_at(&p, 14 + 20 + 16);
        assert!(set_ipv4_src(&mut p, 0x0909_0909, mode));
        let want = if changes {
            update32(old, 0x0101_0101, 0x0909_0909)
        } else {
            old
        };
        assert_eq!(csum_at(&p, 14 + 20 + 16), want, "{mode:?}");
        pool.free(p);
    }
    let l4_csum = 14 + 40 + 8 + 16;
    let atomic = [6, 0, 0, 0, 0, 0, 0x12, 0x34];
    let routed = [6, 0, 0, 1, 0, 0, 0, 0];
    for (ty, ext, mode, src_changes, dst_changes) in [
        (44, atomic, Ovs, false, false),
        (44, atomic, Correct, true, true),
        (43, routed, Ovs, false, false),
        (43, routed, Correct, true, false),
    ] {
        let mut p = v6_with_ext(&mut pool, ty, ext);
        assert!(p.meta.l4().is_some());
        let old = csum_at(&p, l4_csum);
        assert!(set_ipv6_src(&mut p, [9; 16], mode));
        let mid = csum_at(&p, l4_csum);
        let want = if src_changes {
            update_bytes(old, &[1; 16], &[9; 16])
        } else {
            old
        };
        assert_eq!(mid, want, "src {ty} {mode:?}");
        assert!(set_ipv6_dst(&mut p, [8; 16], mode));
        let want = if dst_changes {
            update_bytes(mid, &[2; 16], &[8; 16])
        } else {
            mid
        };
        assert_eq!(csum_at(&p, l4_csum), want, "dst {ty} {mode:?}");
        pool.free(p);
    }
    // OVS's ICMP type/code in an IPv4 later fragment's payload.
    let icmp = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Icmp { ty: 8, code: 0 });
    let mut p = pool.alloc_from(&icmp.build()).unwrap();
    p.data_mut()[20..22].copy_from_slice(&11u16.to_be_bytes());
    reparse(&mut p);
    let before = p.data().to_vec();
    assert!(set_icmp_in_later_fragment(&mut p, 0, 1));
    assert_eq!(&p.data()[34..36], &[0, 1]);
    let c = update16(u16::from_be_bytes([before[36], before[37]]), 0x0800, 0x0001);
    assert_eq!(csum_at(&p, 36), c);
    assert!(
        !set_icmp(&mut p, PortField::Src, 3),
        "no L4 header for the usual rewrite"
    );
    pool.free(p);
    // A first fragment (offset 0, M set) and a plain packet: both modes update.
    for mode in [Ovs, Correct] {
        let mut p = v6_with_ext(&mut pool, 44, [6, 0, 0, 1, 0, 0, 0, 1]);
        let old = csum_at(&p, l4_csum);
        assert!(set_ipv6_src(&mut p, [9; 16], mode));
        assert_eq!(csum_at(&p, l4_csum), update_bytes(old, &[1; 16], &[9; 16]));
        pool.free(p);
    }
}

/// A truncated ARP header (20 of 28 bytes) gets the parts of the
/// fields inside the frame, as OVS shows (found by scripts/ovs-compare).
#[test]
fn truncated_arp_gets_what_fits() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x06];
    b.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 1, 1, 1, 1, 1, 1, 10, 0, 0, 1, 9, 9]);
    let mut p = pool.alloc_from(&b).unwrap();
    reparse(&mut p);
    assert!(set_arp(&mut p, ArpField::Op(2)));
    assert!(set_arp(&mut p, ArpField::Sha([0xff; 6])));
    assert!(
        set_arp(&mut p, ArpField::Tha([7; 6])),
        "two of six bytes fit"
    );
    assert!(!set_arp(&mut p, ArpField::Tpa(5)), "nothing fits");
    assert_eq!(p.len(), b.len());
    assert_eq!(
        &p.data()[14 + 6..],
        &[0, 2, 255, 255, 255, 255, 255, 255, 10, 0, 0, 1, 7, 7]
    );
    pool.free(p);
}

/// `--set-field spec`'s ip_proto: the IPv4 header checksum and the
/// transport checksum stay valid for the new protocol in the
/// pseudo-header (what a frame built with that protocol would carry).
#[test]
fn ip_proto_rewrite_keeps_checksums_valid_for_the_new_protocol() {
    use crate::wire::checksum::{self, finish, pseudo_v4, pseudo_v6, sum};
    let mut pool = PacketPool::new(4, 2048).unwrap();
    // (frame, L3 offset, L4 offset, checksum offset in L4)
    let v4 = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], tcp56()).payload(b"abc");
    let mut p = parsed(&mut pool, &v4);
    assert!(set_ip_proto(&mut p, 17, FragRewrites::Ovs));
    let d = p.data().to_vec();
    assert_eq!(d[14 + 9], 17);
    assert_eq!(checksum::checksum(&d[14..34]), 0, "IPv4 header checksum");
    // The segment by the IP length (the frame is padded to 60 bytes).
    let l4 = &d[34..14 + usize::from(u16::from_be_bytes([d[16], d[17]]))];
    let acc = pseudo_v4(0x0a00_0001, 0x0a00_0002, 17, l4.len() as u16);
    assert_eq!(finish(sum(acc, l4)), 0, "TCP checksum under protocol 17");
    pool.free(p);

    // IPv6 behind a destination-options header: the last next header.
    let mut p = v6_with_ext(&mut pool, ext::DSTOPTS, [6, 0, 1, 4, 0, 0, 0, 0]);
    assert!(set_ip_proto(&mut p, 17, FragRewrites::Ovs));
    let d = p.data().to_vec();
    assert_eq!(
        (d[20], d[54]),
        (ext::DSTOPTS, 17),
        "fixed header kept, option's set"
    );
    let l4 = &d[62..54 + usize::from(u16::from_be_bytes([d[18], d[19]]))];
    let acc = pseudo_v6(&[1; 16], &[2; 16], 17, l4.len() as u32);
    assert_eq!(finish(sum(acc, l4)), 0, "TCP checksum under next header 17");
    // The same protocol again changes nothing.
    assert!(set_ip_proto(&mut p, 17, FragRewrites::Ovs));
    assert_eq!(p.data(), &d[..]);
    pool.free(p);

    // Not IP: nothing.
    let arp = Frame::arp(1, [1; 6], [1, 1, 1, 1], [0; 6], [2, 2, 2, 2]);
    let mut p = parsed(&mut pool, &arp);
    let before = p.data().to_vec();
    assert!(!set_ip_proto(&mut p, 17, FragRewrites::Ovs));
    assert_eq!(p.data(), &before[..]);
    pool.free(p);
}

/// `--set-field spec`'s eth_type: the EtherType after the tags, nothing
/// else.
#[test]
fn eth_type_rewrite_writes_after_the_tags() {
    let mut pool = PacketPool::new(2, 2048).unwrap();
    let f = Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], tcp56());
    let mut p = parsed(&mut pool, &f);
    assert!(push_vlan(&mut p, 0x8100, 10));
    let mut want = p.data().to_vec();
    assert!(set_eth_type(&mut p, 0x8848));
    want[16..18].copy_from_slice(&[0x88, 0x48]);
    assert_eq!(p.data(), &want[..]);
    pool.free(p);
}
