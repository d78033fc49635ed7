use super::*;
use crate::build::{Frame, L4};
use crate::extract::extract;
use crate::key::FlowKey;
use crate::wire::checksum::checksum;
use crate::PacketPool;
use proptest::prelude::*;

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

fn params(kind: TunnelKind) -> HeaderParams {
    HeaderParams {
        kind,
        eth_src: SRC_MAC,
        eth_dst: DST_MAC,
        ip_src: IpAddr::from([10, 90, 0, 1]),
        ip_dst: IpAddr::from([10, 90, 0, 2]),
        tos: 0,
        ttl: 64,
        df: true,
        key: Some(42),
        dst_port: kind.default_dst_port(),
        csum: false,
        opts: GeneveOpts::default(),
        oam: false,
    }
}

const V6_SRC: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn params6(kind: TunnelKind) -> HeaderParams {
    HeaderParams {
        ip_src: IpAddr::from(V6_SRC),
        ip_dst: IpAddr::from(V6_DST),
        ..params(kind)
    }
}

fn inner() -> Vec<u8> {
    Frame::ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        L4::Udp {
            src: 1000,
            dst: 2000,
        },
    )
    .tos(0xb8)
    .payload(b"hello, tunnel")
    .build()
}

fn packet(pool: &mut PacketPool, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc_from(bytes).unwrap();
    let (d, m) = p.data_and_meta_mut();
    let mut k = FlowKey::default();
    extract(d, 1, m, &mut k).unwrap();
    p
}

/// Pushes `h` on a copy of `frame`, re-parses the result as received.
fn encap(pool: &mut PacketPool, frame: &[u8], h: &TnlHeader, sport: u16) -> Packet {
    let mut p = packet(pool, frame);
    assert!(push(&mut p, h, sport));
    let bytes = p.data().to_vec();
    pool.free(p);
    packet(pool, &bytes)
}

#[test]
fn vxlan_header_is_rfc_7348() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    let h = TnlHeader::build(&params(TunnelKind::Vxlan));
    assert_eq!(h.len(), 50);
    let f = inner();
    let p = encap(&mut pool, &f, &h, 40000);
    let d = p.data();
    assert_eq!(&d[0..6], &DST_MAC);
    assert_eq!(&d[6..12], &SRC_MAC);
    assert_eq!(&d[12..14], &[0x08, 0x00]);
    assert_eq!(d[14], 0x45);
    assert_eq!(get16(d, 16) as usize, f.len() + 36, "IP total length");
    assert_eq!(get16(d, 20), 0x4000, "DF, no fragment");
    assert_eq!((d[22], d[23]), (64, 17));
    assert_eq!(checksum(&d[14..34]), 0, "IPv4 header checksum");
    assert_eq!(get16(d, 34), 40000);
    assert_eq!(get16(d, 36), 4789);
    assert_eq!(get16(d, 38) as usize, f.len() + 16, "UDP length");
    assert_eq!(get16(d, 40), 0, "no UDP checksum by default");
    assert_eq!(&d[42..50], &[0x08, 0, 0, 0, 0, 0, 42, 0]);
    assert_eq!(&d[50..], &f[..]);
}

#[test]
fn vxlan_over_ipv6_has_a_payload_length_and_a_pseudo_header_checksum() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    let mut pr = params6(TunnelKind::Vxlan);
    pr.tos = 0xb8;
    pr.csum = true;
    let h = TnlHeader::build(&pr);
    assert_eq!(h.len(), 70);
    assert!(h.is_ipv6());
    assert_eq!(h.ip_dst(), IpAddr::from(V6_DST));
    let f = inner();
    let p = encap(&mut pool, &f, &h, 40000);
    let d = p.data();
    assert_eq!(&d[12..14], &[0x86, 0xdd]);
    assert_eq!(
        get32(d, 14),
        6 << 28 | 0xb8 << 20,
        "version, class, no label"
    );
    assert_eq!(get16(d, 18) as usize, f.len() + 16, "payload length");
    assert_eq!((d[20], d[21]), (17, 64), "next header, hop limit");
    assert_eq!(&d[22..38], &V6_SRC);
    assert_eq!(&d[38..54], &V6_DST);
    assert_eq!(get16(d, 54), 40000);
    assert_eq!(get16(d, 56), 4789);
    assert_eq!(get16(d, 58) as usize, f.len() + 16, "UDP length");
    let ps = pseudo_v6(&V6_SRC, &V6_DST, 17, (f.len() + 16) as u32);
    assert_eq!(
        finish(sum(ps, &d[54..])),
        0,
        "UDP checksum over the pseudo-header"
    );
    assert_ne!(get16(d, 60), 0);
    assert_eq!(&d[62..70], &[0x08, 0, 0, 0, 0, 0, 42, 0]);
    assert_eq!(&d[70..], &f[..]);
}

#[test]
fn every_kind_round_trips_over_ipv6() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
        for csum in [false, true] {
            let mut pr = params6(kind);
            pr.csum = csum;
            pr.tos = 0x2a;
            pr.ttl = 9;
            let f = inner();
            let mut p = encap(&mut pool, &f, &TnlHeader::build(&pr), 50000);
            let m = pop(&mut p, kind, &TlvMap::default())
                .unwrap_or_else(|e| panic!("{kind:?} csum={csum}: {e:?}"));
            assert_eq!(p.data(), &f[..], "{kind:?}");
            assert!(m.is_ipv6());
            assert_eq!((m.src, m.dst), (0, 0));
            assert_eq!((m.ipv6_src, m.ipv6_dst), (V6_SRC, V6_DST));
            assert_eq!((m.tos, m.ttl, m.tun_id), (0x2a, 9, 42));
            let mut want = TUN_FLAG_KEY;
            if csum {
                want |= TUN_FLAG_CSUM;
            }
            assert_eq!(m.flags, want, "{kind:?} csum={csum}: no DF in IPv6");
            pool.free(p);
        }
    }
    // A bad UDP checksum over IPv6 is caught; a wrong next header refused.
    let mut pr = params6(TunnelKind::Vxlan);
    pr.csum = true;
    let good = encap(&mut pool, &inner(), &TnlHeader::build(&pr), 1)
        .data()
        .to_vec();
    for (at, want) in [(80, PopError::BadChecksum), (20, PopError::BadHeader)] {
        let mut b = good.clone();
        b[at] ^= 0x04;
        let mut p = packet(&mut pool, &b);
        assert_eq!(
            pop(&mut p, TunnelKind::Vxlan, &TlvMap::default()),
            Err(want),
            "byte {at}"
        );
        pool.free(p);
    }
}

#[test]
fn geneve_options_go_out_with_the_fields_and_come_back() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    let mut map = TlvMap::default();
    map.add(&[
        crate::tunnel::TlvEntry::parse("{class=0x102,type=0x80,len=4}->tun_metadata0").unwrap(),
        crate::tunnel::TlvEntry::parse("{class=0xffff,type=1,len=8}->tun_metadata1").unwrap(),
    ])
    .unwrap();
    for v6 in [false, true] {
        let mut pr = if v6 {
            params6(TunnelKind::Geneve)
        } else {
            params(TunnelKind::Geneve)
        };
        pr.opts = GeneveOpts::of_fields(&map, 0b11, &[0xabcd, 0x0102_0304_0506_0708, 0, 0]);
        pr.oam = true;
        let h = TnlHeader::build(&pr);
        let t = if v6 { 62 } else { 42 };
        assert_eq!(h.len(), t + 8 + 20);
        let b = h.bytes();
        assert_eq!(
            (b[t], b[t + 1]),
            (5, 0xc0),
            "20 bytes of options; OAM, critical"
        );
        assert_eq!(&b[t + 8..t + 16], &[1, 2, 0x80, 1, 0, 0, 0xab, 0xcd]);
        let f = inner();
        let mut p = encap(&mut pool, &f, &h, 1234);
        let m = pop(&mut p, TunnelKind::Geneve, &map).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!(m.opts.present, 0b11);
        assert_eq!(m.flags & crate::key::TUN_FLAG_OAM, crate::key::TUN_FLAG_OAM);
        assert_eq!(m.opts.values[..2], [0xabcd, 0x0102_0304_0506_0708]);
        pool.free(p);
        // Without the mapping the critical option is refused.
        let mut p = encap(&mut pool, &f, &h, 1234);
        assert_eq!(
            pop(&mut p, TunnelKind::Geneve, &TlvMap::default()),
            Err(PopError::BadHeader)
        );
        pool.free(p);
    }
}

#[test]
fn every_kind_round_trips_with_its_metadata() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
        for (csum, key) in [(false, Some(42)), (true, Some(0xfff)), (true, None)] {
            if key.is_none() && kind != TunnelKind::Gre {
                continue;
            }
            let mut pr = params(kind);
            pr.csum = csum;
            pr.key = key;
            pr.tos = 0x28;
            let h = TnlHeader::build(&pr);
            let f = inner();
            let mut p = encap(&mut pool, &f, &h, 50000);
            let m = pop(&mut p, kind, &TlvMap::default())
                .unwrap_or_else(|e| panic!("{kind:?} csum={csum}: {e:?}"));
            assert_eq!(p.data(), &f[..], "{kind:?}");
            assert_eq!(
                (m.src, m.dst, m.tos, m.ttl),
                (0x0a5a_0001, 0x0a5a_0002, 0x28, 64)
            );
            assert!(!m.is_ipv6());
            assert_eq!(m.tun_id, key.unwrap_or(0));
            let mut want = TUN_FLAG_DONT_FRAGMENT;
            if key.is_some() {
                want |= TUN_FLAG_KEY;
            }
            if csum {
                want |= TUN_FLAG_CSUM;
            }
            assert_eq!(m.flags, want, "{kind:?} csum={csum}");
            assert_eq!(
                p.meta.l3_ofs, NO_OFFSET,
                "the inner frame is not parsed yet"
            );
            pool.free(p);
        }
    }
}

#[test]
fn bad_outer_headers_are_refused_by_name() {
    let mut pool = PacketPool::new(16, 2048).unwrap();
    let mut pr = params(TunnelKind::Vxlan);
    let plain = encap(&mut pool, &inner(), &TnlHeader::build(&pr), 40000)
        .data()
        .to_vec();
    pr.csum = true;
    let h = TnlHeader::build(&pr);
    let good = encap(&mut pool, &inner(), &h, 40000).data().to_vec();
    let cases: [(bool, usize, u8, PopError); 5] = [
        (false, 42, 0x0c, PopError::BadHeader),  // VXLAN flags
        (false, 49, 0x01, PopError::BadHeader),  // VNI word's reserved byte
        (true, 60, 0x55, PopError::BadChecksum), // payload: UDP checksum
        (true, 24, 0x01, PopError::BadChecksum), // IPv4 checksum
        (false, 20, 0x20, PopError::BadHeader),  // a fragment (MF)
    ];
    for (with_csum, at, v, want) in cases {
        let mut b = if with_csum {
            good.clone()
        } else {
            plain.clone()
        };
        b[at] ^= v;
        if want == PopError::BadHeader && (14..34).contains(&at) {
            // A header made that way on purpose: its checksum is right.
            b[24..26].fill(0);
            let c = checksum(&b[14..34]);
            b[24..26].copy_from_slice(&c.to_be_bytes());
        }
        let mut p = packet(&mut pool, &b);
        assert_eq!(
            pop(&mut p, TunnelKind::Vxlan, &TlvMap::default()),
            Err(want),
            "byte {at}"
        );
        pool.free(p);
    }
    let mut p = packet(&mut pool, &good[..60]);
    assert_eq!(
        pop(&mut p, TunnelKind::Vxlan, &TlvMap::default()),
        Err(PopError::BadHeader),
        "truncated"
    );
    pool.free(p);
}

#[test]
fn three_tags_are_refused_and_a_tag_is_set_in_place() {
    let h = TnlHeader::build(&params(TunnelKind::Vxlan));
    assert!(h.without_vlan().is_none() && h.with_vlan_tci(5).is_none());
    let two = h
        .with_vlan(0x8100, 20)
        .unwrap()
        .with_vlan(0x88a8, 7)
        .unwrap();
    assert!(two.with_vlan(0x8100, 1).is_none());
    let set = two.with_vlan_tci(9).unwrap();
    assert_eq!(set.vlans().collect::<Vec<_>>(), [(0x88a8, 9), (0x8100, 20)]);
    assert_eq!(set.len(), h.len() + 8);
}

#[test]
fn source_ports_stay_in_the_ephemeral_range() {
    for h in [0, 1, u32::MAX / 2, u32::MAX] {
        let p = udp_src_port(h);
        assert!((UDP_SRC_MIN..UDP_SRC_MAX).contains(&p), "{h}: {p}");
    }
    assert_ne!(udp_src_port(1 << 31), udp_src_port(3 << 30));
}

proptest! {
    /// Any frame, any header: push then pop gives the frame back.
    #[test]
    fn push_then_pop_is_identity(
        payload in proptest::collection::vec(any::<u8>(), 0..1400),
        kind in 0..3u8,
        key in any::<u32>(),
        csum in any::<bool>(),
        sport in any::<u16>(),
        tos in any::<u8>(),
        ttl in 1..=255u8,
        v6 in any::<bool>(),
    ) {
        let kind = [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre][kind as usize];
        let mut pool = PacketPool::new(8, 2048).unwrap();
        let mut pr = if v6 { params6(kind) } else { params(kind) };
        pr.key = Some(if kind == TunnelKind::Gre { u64::from(key) } else { u64::from(key & 0xff_ffff) });
        pr.csum = csum;
        pr.tos = tos;
        pr.ttl = ttl;
        let f = Frame::ipv4([1, 2, 3, 4], [5, 6, 7, 8], L4::Tcp { src: 1, dst: 2, flags: 0x10 })
            .payload(&payload)
            .build();
        let mut p = encap(&mut pool, &f, &TnlHeader::build(&pr), sport);
        let m = pop(&mut p, kind, &TlvMap::default()).unwrap();
        prop_assert_eq!(p.data(), &f[..]);
        prop_assert_eq!(m.tun_id, pr.key.unwrap());
        prop_assert_eq!((m.tos, m.ttl), (tos, ttl));
    }

    /// A header given VLAN tags (as the underlay's bridge pushes them)
    /// makes the frame that pushing the untagged header and then the
    /// tags makes, byte for byte, the packet's offsets where a parse puts
    /// them; taking the tags off again gives the untagged header back.
    #[test]
    fn a_tagged_header_is_the_header_then_push_vlan(
        payload in proptest::collection::vec(any::<u8>(), 0..1400),
        kind in 0..3u8,
        csum in any::<bool>(),
        sport in any::<u16>(),
        v6 in any::<bool>(),
        tags in proptest::collection::vec((prop_oneof![Just(0x8100u16), Just(0x88a8u16)], any::<u16>()), 0..=2),
    ) {
        let kind = [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre][kind as usize];
        let mut pool = PacketPool::new(8, 2048).unwrap();
        let mut pr = if v6 { params6(kind) } else { params(kind) };
        pr.csum = csum;
        let plain = TnlHeader::build(&pr);
        let mut tagged = plain.clone();
        for &(tpid, tci) in &tags {
            tagged = tagged.with_vlan(tpid, tci).unwrap();
        }
        prop_assert_eq!(tagged.is_ipv6(), v6);
        prop_assert_eq!(tagged.ip_dst(), plain.ip_dst());
        let got: Vec<(u16, u16)> = tagged.vlans().collect();
        let want: Vec<(u16, u16)> = tags.iter().rev().copied().collect();
        prop_assert_eq!(got, want);
        let f = Frame::ipv4([1, 2, 3, 4], [5, 6, 7, 8], L4::Udp { src: 1, dst: 2 })
            .payload(&payload)
            .build();
        let mut a = packet(&mut pool, &f);
        prop_assert!(push(&mut a, &tagged, sport));
        let mut b = packet(&mut pool, &f);
        prop_assert!(push(&mut b, &plain, sport));
        for &(tpid, tci) in &tags {
            prop_assert!(crate::rewrite::push_vlan(&mut b, tpid, tci));
        }
        prop_assert_eq!(a.data(), b.data());
        prop_assert_eq!(
            (a.meta.n_vlans, a.meta.l3_ofs, a.meta.l4_ofs),
            (b.meta.n_vlans, b.meta.l3_ofs, b.meta.l4_ofs)
        );
        // (One tag: what a parse at OVS's default vlan-limit of 1 reads
        // whole.)
        if tags.len() <= 1 {
            let reparsed = packet(&mut pool, a.data());
            prop_assert_eq!(
                (reparsed.meta.n_vlans, reparsed.meta.l3_ofs, reparsed.meta.l4_ofs),
                (a.meta.n_vlans, a.meta.l3_ofs, a.meta.l4_ofs)
            );
        }
        let mut back = tagged.clone();
        for _ in &tags {
            back = back.without_vlan().unwrap();
        }
        prop_assert!(back.without_vlan().is_none());
        prop_assert_eq!(back, plain);
    }

    /// Any bytes where a tunnel packet is expected: an answer, no panic,
    /// and on success a frame no longer than what came.
    #[test]
    fn pop_takes_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        kind in 0..3u8,
        v6 in any::<bool>(),
    ) {
        let kind = [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre][kind as usize];
        let mut pool = PacketPool::new(8, 2048).unwrap();
        let mut b = vec![0u8; 12];
        b.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        b.extend_from_slice(&bytes);
        let mut p = pool.alloc_from(&b).unwrap();
        let (d, m) = p.data_and_meta_mut();
        let mut k = FlowKey::default();
        let _ = extract(d, 1, m, &mut k);
        let n = p.len();
        if pop(&mut p, kind, &TlvMap::default()).is_ok() {
            prop_assert!(p.len() + 14 <= n);
        }
    }
}
