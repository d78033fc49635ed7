//! Datagrams cut into fragments, held and rebuilt; what tracking the
//! whole does to its fragments.

use super::*;
use crate::{Conntrack, CtRequest, Nat, NatKind};
use sluice_packet::extract::extract;
use sluice_packet::key::{CS_INVALID, CS_NEW, CS_SRC_NAT, CS_TRACKED};
use sluice_packet::wire::checksum::{finish, pseudo_v4, pseudo_v6, sum_wide};

const ETH4: [u8; 14] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
const ETH6: [u8; 14] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
const A6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// A UDP datagram of `n` payload bytes from 10.0.1.1:5000 to
/// 10.0.2.1:53, checksums right.
fn udp4(n: usize, id: u16) -> Vec<u8> {
    let mut l4 = vec![0x13, 0x88, 0, 53];
    l4.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend((0..n).map(|i| (i * 7) as u8));
    let (src, dst) = (0x0a00_0101u32, 0x0a00_0201u32);
    let c = finish(sum_wide(pseudo_v4(src, dst, 17, l4.len() as u16), &l4));
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = ETH4.to_vec();
    let tot = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0, (tot >> 8) as u8, tot as u8]);
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&[0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&l4);
    f
}

/// The same over IPv6.
fn udp6(n: usize) -> Vec<u8> {
    let mut l4 = vec![0x13, 0x88, 0, 53];
    l4.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend((0..n).map(|i| (i * 5) as u8));
    let c = finish(sum_wide(pseudo_v6(&A6, &B6, 17, l4.len() as u32), &l4));
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = ETH6.to_vec();
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&A6);
    f.extend_from_slice(&B6);
    f.extend_from_slice(&l4);
    f
}

/// An IPv4 datagram cut at the given payload sizes (each a multiple of
/// 8 but the last, which takes the rest).
fn cut4(d: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    let payload = &d[34..];
    let mut out = Vec::new();
    let mut off = 0;
    for (i, &s) in sizes.iter().enumerate() {
        let last = i + 1 == sizes.len();
        let s = if last { payload.len() - off } else { s };
        let mut f = d[..34].to_vec();
        let tot = (20 + s) as u16;
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        let fo = (off / 8) as u16 | if last { 0 } else { 0x2000 };
        f[20..22].copy_from_slice(&fo.to_be_bytes());
        f[24..26].fill(0);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&payload[off..off + s]);
        out.push(f);
        off += s;
    }
    out
}

/// An IPv6 datagram cut the same way, fragment headers added.
fn cut6(d: &[u8], sizes: &[usize], id: u32) -> Vec<Vec<u8>> {
    let payload = &d[54..];
    let mut out = Vec::new();
    let mut off = 0;
    for (i, &s) in sizes.iter().enumerate() {
        let last = i + 1 == sizes.len();
        let s = if last { payload.len() - off } else { s };
        let mut f = d[..54].to_vec();
        f[18..20].copy_from_slice(&((8 + s) as u16).to_be_bytes());
        f[20] = 44;
        f.extend_from_slice(&[d[20], 0]);
        f.extend_from_slice(&(off as u16 | u16::from(!last)).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&payload[off..off + s]);
        out.push(f);
        off += s;
    }
    out
}

fn offer(ipf: &Ipf, f: &[u8], zone: u16, now: u64) -> Frag {
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(f, 1, &mut meta, &mut key).unwrap();
    ipf.handle(f, &meta, &key, zone, true, &CtResult::default(), now)
}

fn complete(v: Frag) -> Reassembled {
    match v {
        Frag::Complete(r) => r,
        v => panic!("not complete: {v:?}"),
    }
}

#[test]
fn ipv4_rebuilt_in_any_order_fragments_in_offset_order() {
    let d = udp4(3500, 77);
    let frags = cut4(&d, &[1480, 1480, 0]);
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
        let ipf = Ipf::default();
        assert!(matches!(offer(&ipf, &frags[order[0]], 0, 0), Frag::Held));
        assert!(matches!(offer(&ipf, &frags[order[1]], 0, 0), Frag::Held));
        assert_eq!(ipf.held(), 2);
        let r = complete(offer(&ipf, &frags[order[2]], 0, 0));
        assert_eq!(r.data, d, "the datagram as it was sent");
        let got: Vec<&Vec<u8>> = r.frags.iter().map(|f| &f.data).collect();
        assert_eq!(got, frags.iter().collect::<Vec<_>>(), "offset order");
        assert_eq!(ipf.held(), 0);
        assert_eq!(ipf.v4.accepted.load(Ordering::Relaxed), 3);
        assert_eq!(ipf.v4.completed.load(Ordering::Relaxed), 3);
    }
}

#[test]
fn ipv6_rebuilt_without_its_fragment_header() {
    let d = udp6(3000);
    let frags = cut6(&d, &[1448, 1448, 0], 0xdead_beef);
    let ipf = Ipf::default();
    assert!(matches!(offer(&ipf, &frags[1], 0, 0), Frag::Held));
    assert!(matches!(offer(&ipf, &frags[2], 0, 0), Frag::Held));
    let r = complete(offer(&ipf, &frags[0], 0, 0));
    assert_eq!(r.data, d);
    assert!(r.v6);
    assert_eq!(ipf.v6.completed.load(Ordering::Relaxed), 3);
}

#[test]
fn small_overlapping_and_malformed_fragments_are_refused() {
    let d = udp4(3000, 9);
    let ipf = Ipf::default();
    // 600-byte pieces: all but the last below 1200 bytes.
    let small = cut4(&d, &[600, 600, 600, 600, 600, 0]);
    assert!(matches!(offer(&ipf, &small[0], 0, 0), Frag::Invalid));
    assert_eq!(ipf.v4.too_small.load(Ordering::Relaxed), 1);
    // The minimum lowered, they are taken.
    ipf.set_min_frag(false, 400).unwrap();
    assert!(ipf.set_min_frag(false, 399).is_err());
    assert!(matches!(offer(&ipf, &small[0], 0, 0), Frag::Held));
    // The same data again, and a piece starting inside it.
    assert!(matches!(offer(&ipf, &small[0], 0, 0), Frag::Invalid));
    let shifted = cut4(&d, &[8, 1480, 0]);
    assert!(matches!(offer(&ipf, &shifted[1], 0, 0), Frag::Invalid));
    assert_eq!(ipf.v4.overlap.load(Ordering::Relaxed), 2);
    // A bad header checksum, a length past the frame.
    let mut bad = small[1].clone();
    bad[24] ^= 1;
    assert!(matches!(offer(&ipf, &bad, 0, 0), Frag::Invalid));
    let mut long = small[1].clone();
    long.truncate(long.len() - 4);
    // (The flow key of a datagram past its frame has no fragment bits:
    // tracked as it is, which finds it invalid too.)
    assert!(matches!(
        offer(&ipf, &long, 0, 0),
        Frag::Invalid | Frag::NotTaken
    ));
    // Not a fragment.
    assert!(matches!(offer(&ipf, &d, 0, 0), Frag::NotTaken));
    assert_eq!(ipf.held(), 1);
}

#[test]
fn lists_are_per_zone_and_bounded() {
    let d = udp4(3000, 5);
    let frags = cut4(&d, &[1480, 0]);
    let ipf = Ipf::default();
    assert!(matches!(offer(&ipf, &frags[0], 1, 0), Frag::Held));
    // The other half in another zone: a list of its own.
    assert!(matches!(offer(&ipf, &frags[1], 2, 0), Frag::Held));
    assert!(matches!(offer(&ipf, &frags[1], 1, 0), Frag::Complete(_)));
    assert_eq!(ipf.held(), 1);
    ipf.set_max_frags(1).unwrap();
    assert!(ipf.set_max_frags(5001).is_err());
    assert!(matches!(offer(&ipf, &frags[0], 3, 0), Frag::NotTaken));
    ipf.set_enabled(false, false);
    ipf.set_max_frags(100).unwrap();
    assert!(matches!(offer(&ipf, &frags[0], 3, 0), Frag::NotTaken));
}

#[test]
fn lists_expire_then_are_purged() {
    let d = udp4(3000, 5);
    let frags = cut4(&d, &[1480, 1480, 0]);
    let ipf = Ipf::default();
    assert!(matches!(offer(&ipf, &frags[0], 0, 1000), Frag::Held));
    assert!(matches!(offer(&ipf, &frags[1], 0, 2000), Frag::Held));
    assert!(ipf.take_expired(1000 + LIST_TIMEOUT_MS).is_none());
    let (f, purged) = ipf.take_expired(1001 + LIST_TIMEOUT_MS).unwrap();
    assert_eq!((f.len(), purged), (2, false));
    assert_eq!(ipf.v4.expired.load(Ordering::Relaxed), 2);
    assert!(ipf.take_expired(u64::MAX / 2).is_none());
    // Another, found only past the purge time.
    assert!(matches!(offer(&ipf, &frags[2], 0, 0), Frag::Held));
    let (f, purged) = ipf.take_expired(LIST_TIMEOUT_MS + PURGE_AFTER_MS).unwrap();
    assert_eq!((f.len(), purged), (1, true));
    assert!(matches!(offer(&ipf, &frags[2], 0, 0), Frag::Held));
    assert!(ipf.purge(LIST_TIMEOUT_MS, false).is_empty());
    assert_eq!(ipf.purge(0, true).len(), 1);
    assert_eq!(ipf.held(), 0);
    assert_eq!(ipf.v4.purged.load(Ordering::Relaxed), 2);
    let s = ipf.status(true);
    assert!(s.contains("        v4 frags purged: 2\n"), "{s}");
    assert!(s.contains("        num frag: 0\n"), "{s}");
}

#[test]
fn status_lists_what_is_held() {
    let d = udp4(3000, 300);
    let ipf = Ipf::default();
    offer(&ipf, &cut4(&d, &[1480, 0])[0], 7, 0);
    let s = ipf.status(true);
    assert!(
        s.contains("(src=10.0.1.1,dst=10.0.2.1,recirc_id=0,ip_id=300,dl_type=0x800,zone=7,nw_proto=17,num_fragments=1,state=first frag)"),
        "{s}"
    );
}

/// A datagram whose every fragment is tracked as the whole: SNAT
/// rewrites the addresses of each and the port and checksum in the first,
/// and the rewritten fragments make a valid datagram again.
#[test]
fn tracked_whole_translated_in_every_fragment() {
    for v6 in [false, true] {
        let ct = Conntrack::default();
        let (d, frags) = if v6 {
            let d = udp6(3000);
            let f = cut6(&d, &[1448, 1448, 0], 3);
            (d, f)
        } else {
            let d = udp4(3000, 3);
            let f = cut4(&d, &[1480, 1480, 0]);
            (d, f)
        };
        let to = if v6 {
            "[2001:db8:2::fe]:7000".to_string()
        } else {
            "10.0.2.254:7000".to_string()
        };
        let nat = Nat::parse(&format!("src={to}")).unwrap();
        assert_eq!(nat.kind, NatKind::Src);
        let req = CtRequest {
            zone: 4,
            commit: true,
            nat: Some(nat),
            ..CtRequest::default()
        };
        let ipf = ct.ipf();
        offer(ipf, &frags[2], 4, 0);
        offer(ipf, &frags[1], 4, 0);
        let mut r = complete(offer(ipf, &frags[0], 4, 0));
        let res = ct.track_reassembled(&mut r, &CtResult::default(), &req, 0);
        assert_eq!(res.state, CS_TRACKED | CS_NEW | CS_SRC_NAT, "v6 {v6}");
        assert_eq!(res.zone, 4);
        assert_eq!(ct.len(), 1);
        // Rebuilt from the rewritten fragments: the translated datagram,
        // checksums right (tracking it again finds it established).
        let again = Ipf::default();
        let n = r.frags.len();
        for (i, f) in r.frags.iter().enumerate() {
            let v = offer(&again, &f.data, 0, 0);
            if i + 1 < n {
                assert!(matches!(v, Frag::Held));
            } else {
                let mut whole = complete(v);
                assert_ne!(whole.data, d);
                let (l3, sport) = (14, if v6 { 54 } else { 34 });
                assert_eq!(&whole.data[sport..sport + 2], &7000u16.to_be_bytes());
                if !v6 {
                    assert_eq!(&whole.data[l3 + 12..l3 + 16], &[10, 0, 2, 254]);
                    for f in &r.frags {
                        assert_eq!(checksum(&f.data[14..34]), 0, "header checksum");
                    }
                }
                let plain = CtRequest {
                    zone: 4,
                    ..CtRequest::default()
                };
                let res = ct.track_reassembled(&mut whole, &CtResult::default(), &plain, 1);
                assert_eq!(res.state & CS_INVALID, 0, "checksums hold, v6 {v6}");
            }
        }
    }
}
