//! Tunnelled super-frames: encapsulating a super-frame once and cutting it
//! gives the very frames that cutting it and encapsulating each segment
//! gives; the tunnel form of the virtio-net header as the kernel writes it.

use super::tests::{pool, super_frame, verifies};
use super::*;
use crate::meta::Offload;
use crate::tunnel::tlv::{GeneveOpts, TlvEntry, TlvMap, SLOTS};
use crate::tunnel::{self, HeaderParams, TnlHeader, TunnelKind};
use proptest::prelude::*;
use std::net::IpAddr;

fn header(kind: TunnelKind, outer_v6: bool, csum: bool, opts: bool) -> (TnlHeader, TlvMap) {
    let mut map = TlvMap::default();
    let mut geneve = GeneveOpts::default();
    if opts {
        map.add(&[TlvEntry::new(0x0102, 0x80, 4, 0).unwrap()])
            .unwrap();
        let mut values = [0u64; SLOTS];
        values[0] = 0x0a0b_0c0d;
        geneve = GeneveOpts::of_fields(&map, 1, &values);
    }
    let (ip_src, ip_dst): (IpAddr, IpAddr) = if outer_v6 {
        (
            "2001:db8::a".parse().unwrap(),
            "2001:db8::b".parse().unwrap(),
        )
    } else {
        ("10.1.0.1".parse().unwrap(), "10.1.0.2".parse().unwrap())
    };
    let h = TnlHeader::build(&HeaderParams {
        kind,
        eth_src: [2, 0, 0, 0, 0, 1],
        eth_dst: [2, 0, 0, 0, 0, 2],
        ip_src,
        ip_dst,
        tos: 0,
        ttl: 64,
        df: true,
        key: Some(42),
        dst_port: kind.default_dst_port(),
        csum,
        opts: geneve,
        oam: false,
    });
    (h, map)
}

/// The header the kernel (6.18) wrote on a tap for a VXLAN super-frame
/// with its outer checksum on (an 8,000-byte UDP_SEGMENT send inside):
/// NEEDS_CSUM | UDP_TUNNEL_CSUM, GSO_UDP_L4 | UDP_TUNNEL_IPV4, headers 92
/// bytes, segments of 1,000, inner UDP at 84, outer UDP at 34, inner IPv4
/// at 64.
const KERNEL_HDR: [u8; VNET_HDR_TNL_LEN] = [
    0x09, 0x25, 0x5c, 0, 0xe8, 0x03, 0x54, 0, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x22, 0, 0x40,
    0,
];

#[test]
fn the_kernels_tunnel_header_reads_and_is_written_back_alike() {
    let o = from_vnet_hdr_tnl(&KERNEL_HDR).unwrap();
    assert_eq!(
        o,
        Offload {
            flags: Offload::NEEDS_CSUM
                | Offload::GSO_UDP_L4
                | Offload::UDP_TUNNEL
                | Offload::TUNNEL_CSUM,
            gso_size: 1000,
            csum_start: 84,
            csum_offset: 6,
        }
    );
    // The same frame made here: inner UDP/IPv4 super-frame, VXLAN with
    // its checksum over IPv4.
    let mut pool = pool();
    let mut p = super_frame(&mut pool, false, true, &[9u8; 8000], 1000);
    let (h, _) = header(TunnelKind::Vxlan, false, true, false);
    assert!(tunnel::push_super(&mut p, &h, 40000));
    let mut want = KERNEL_HDR;
    want[2] = 92; // hdr_len: the headers up to the inner UDP payload
    assert_eq!(vnet_hdr_tnl_of(&p), Some(want));
    assert_eq!(p.meta.offload, o);
    pool.free(p);
    // A tunnel bit without GSO, or both families: malformed.
    let mut bad = KERNEL_HDR;
    bad[1] = 0x20;
    assert_eq!(from_vnet_hdr_tnl(&bad), Err(OffloadError::Malformed));
    bad[1] = 0x65;
    assert_eq!(from_vnet_hdr_tnl(&bad), Err(OffloadError::Malformed));
    // The plain part alone, as before.
    let mut plain = [0u8; VNET_HDR_TNL_LEN];
    plain[..VNET_HDR_LEN].copy_from_slice(&[1, 1, 0, 0, 0xa8, 5, 34, 0, 16, 0]);
    assert_eq!(
        from_vnet_hdr_tnl(&plain).unwrap().flags,
        Offload::NEEDS_CSUM | Offload::GSO_TCPV4
    );
}

#[test]
fn a_tunnelled_super_frame_pops_back_to_the_plain_one() {
    let mut pool = pool();
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        let p = super_frame(&mut pool, false, false, &[3u8; 5000], 1448);
        let mut q = pool.clone_packet(&p).unwrap();
        q.meta = p.meta;
        let (h, map) = header(kind, false, true, kind == TunnelKind::Geneve);
        assert!(tunnel::push_super(&mut q, &h, 40000));
        assert_eq!(q.len(), p.len() + h.len());
        let m = tunnel::pop(&mut q, kind, &map).unwrap();
        assert_eq!(m.tun_id, 42);
        assert_eq!(q.data(), p.data());
        assert_eq!(q.meta.offload, p.meta.offload, "{kind:?}");
        pool.free(p);
        pool.free(q);
    }
}

#[test]
fn gre_and_complete_frames_are_not_pushed_whole() {
    let mut pool = pool();
    let mut p = super_frame(&mut pool, false, false, &[3u8; 5000], 1448);
    let (gre, _) = header(TunnelKind::Gre, false, false, false);
    assert!(!tunnel::push_super(&mut p, &gre, 0));
    p.meta.offload = Offload::NONE;
    let (vx, _) = header(TunnelKind::Vxlan, false, false, false);
    assert!(!tunnel::push_super(&mut p, &vx, 0));
    pool.free(p);
}

#[test]
fn a_tunnelled_frame_whose_headers_are_not_found_is_refused() {
    let mut pool = pool();
    let mut p = super_frame(&mut pool, false, false, &[3u8; 5000], 1448);
    let (h, _) = header(TunnelKind::Vxlan, false, false, false);
    assert!(tunnel::push_super(&mut p, &h, 40000));
    // The VXLAN I flag gone: not a tunnel frame this can cut.
    p.data_mut()[42] = 0;
    assert!(!needs_segmenting(&p));
    assert_eq!(
        segment(&p, &mut pool, &mut |_| panic!("a segment")),
        Err(OffloadError::Malformed)
    );
    assert_eq!(vnet_hdr_tnl_of(&p), None);
    assert_eq!(complete_csum(&mut p), Err(OffloadError::Malformed));
    pool.free(p);
}

proptest! {
    /// Encapsulating a super-frame once and cutting it (outer headers
    /// replicated, each segment's outer lengths and checksums its own)
    /// gives byte for byte the frames that cutting it first and
    /// encapsulating each segment gives; each verifies inside.
    #[test]
    fn encapsulating_then_cutting_equals_cutting_then_encapsulating(
        len in 1usize..12_000, mss in 200u16..1500, inner_v6 in any::<bool>(),
        outer_v6 in any::<bool>(), udp in any::<bool>(), csum in any::<bool>(),
        geneve in any::<bool>(), opts in any::<bool>(), seed in any::<u8>(),
        sport in 32768u16..61000,
    ) {
        let mut pool = pool();
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect();
        let p = super_frame(&mut pool, inner_v6, udp, &payload, mss);
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        let (h, _) = header(kind, outer_v6, csum, geneve && opts);
        let mut whole = pool.clone_packet(&p).unwrap();
        whole.meta = p.meta;
        prop_assert!(tunnel::push_super(&mut whole, &h, sport));
        prop_assert!(needs_segmenting(&whole));
        let mut after = Vec::new();
        segment(&whole, &mut pool, &mut |s| after.push(s)).unwrap();
        let mut before = Vec::new();
        segment(&p, &mut pool, &mut |s| before.push(s)).unwrap();
        prop_assert_eq!(after.len(), before.len());
        for (i, (a, mut b)) in after.into_iter().zip(before).enumerate() {
            prop_assert!(tunnel::push(&mut b, &h, sport));
            prop_assert_eq!(a.data(), b.data(), "segment {}", i);
            prop_assert!(!a.meta.offload.pending());
            prop_assert!(verifies(&a.data()[h.len()..], inner_v6));
            pool.free(a);
            pool.free(b);
        }
        pool.free(whole);
        pool.free(p);
        prop_assert_eq!(pool.available(), pool.capacity());
    }
}
