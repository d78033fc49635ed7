//! Whole conversations through the tracker, as bytes.

use super::*;
use sluice_packet::extract::extract;
use sluice_packet::key::{CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_REPLY_DIR};

pub(crate) const A: [u8; 4] = [10, 0, 0, 1];
pub(crate) const B: [u8; 4] = [10, 0, 0, 2];

pub(crate) fn ipv4(src: [u8; 4], dst: [u8; 4], p: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let len = (20 + l4.len()) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        0,
        0x40,
        0,
        64,
        p,
        0,
        0,
    ]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    with_checksums(f)
}

pub(crate) fn tcp(
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    flags: u16,
    data: usize,
) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&ports.0.to_be_bytes());
    t.extend_from_slice(&ports.1.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&(0x5000 | flags).to_be_bytes());
    t.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    t.extend(std::iter::repeat_n(0xab, data));
    ipv4(src, dst, 6, &t)
}

pub(crate) fn udp(src: [u8; 4], dst: [u8; 4], ports: (u16, u16)) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&ports.0.to_be_bytes());
    t.extend_from_slice(&ports.1.to_be_bytes());
    t.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    ipv4(src, dst, 17, &t)
}

fn icmp(src: [u8; 4], dst: [u8; 4], ty: u8, id: u16, quoted: &[u8]) -> Vec<u8> {
    let mut t = vec![ty, 0, 0, 0];
    t.extend_from_slice(&id.to_be_bytes());
    t.extend_from_slice(&[0, 1]);
    t.extend_from_slice(quoted);
    ipv4(src, dst, 1, &t)
}

pub(crate) fn run(ct: &Conntrack, frame: &[u8], req: &CtRequest, now_ms: u64) -> CtResult {
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(frame, 1, &mut meta, &mut key).unwrap();
    let mut f = frame.to_vec();
    ct.process(&mut f, &meta, &key, &CtResult::default(), req, now_ms)
}

pub(crate) const COMMIT: CtRequest = CtRequest {
    zone: 0,
    commit: true,
    force: false,
    mark: None,
    label: None,
    nat: None,
};
pub(crate) const LOOK: CtRequest = CtRequest {
    zone: 0,
    commit: false,
    force: false,
    mark: None,
    label: None,
    nat: None,
};
const TRK: u8 = CS_TRACKED;

#[test]
fn a_tcp_conversation_is_new_then_established_both_ways() {
    let ct = Conntrack::default();
    let p = (40000, 80);
    let r = (80, 40000);
    // Not committed: new each time, nothing kept.
    assert_eq!(
        run(&ct, &tcp(A, B, p, 1000, 0, 0x002, 0), &LOOK, 0).state,
        TRK | CS_NEW
    );
    assert!(ct.is_empty());
    assert_eq!(
        run(&ct, &tcp(A, B, p, 1000, 0, 0x002, 0), &COMMIT, 0).state,
        TRK | CS_NEW
    );
    assert_eq!(ct.len(), 1);
    assert_eq!(
        run(&ct, &tcp(B, A, r, 5000, 1001, 0x012, 0), &LOOK, 1).state,
        TRK | CS_ESTABLISHED | CS_REPLY_DIR
    );
    assert_eq!(
        run(&ct, &tcp(A, B, p, 1001, 5001, 0x010, 0), &LOOK, 2).state,
        TRK | CS_ESTABLISHED
    );
    assert_eq!(
        run(&ct, &tcp(A, B, p, 1001, 5001, 0x018, 100), &LOOK, 3).state,
        TRK | CS_ESTABLISHED
    );
    // A segment far outside the window.
    assert_eq!(
        run(
            &ct,
            &tcp(A, B, p, 1101 + 50_000_000, 5001, 0x018, 10),
            &LOOK,
            4
        )
        .state,
        TRK | CS_INVALID
    );
    let dump = ct.dump(None, 5);
    assert_eq!(
        dump,
        ["tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80),reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=40000),protoinfo=(state=ESTABLISHED)"]
    );
}

#[test]
fn a_syn_ack_cannot_start_a_connection_and_is_not_committed() {
    let ct = Conntrack::default();
    let r = run(
        &ct,
        &tcp(B, A, (80, 40000), 5000, 1001, 0x012, 0),
        &COMMIT,
        0,
    );
    assert_eq!(r.state, TRK | CS_INVALID);
    assert!(ct.is_empty());
}

#[test]
fn udp_and_icmp_pseudo_connections_and_related_errors() {
    let ct = Conntrack::default();
    let q = udp(A, B, (5353, 53));
    assert_eq!(run(&ct, &q, &COMMIT, 0).state, TRK | CS_NEW);
    assert_eq!(
        run(&ct, &udp(B, A, (53, 5353)), &LOOK, 1).state,
        TRK | CS_ESTABLISHED | CS_REPLY_DIR
    );
    // An ICMP port unreachable from B quoting A's datagram: related.
    let quoted = &q[14..14 + 28];
    assert_eq!(
        run(&ct, &icmp(B, A, 3, 0, quoted), &LOOK, 2).state,
        TRK | CS_RELATED | CS_REPLY_DIR
    );
    // Quoting a datagram nobody tracked: invalid.
    let other = udp(A, B, (1111, 2222));
    assert_eq!(
        run(&ct, &icmp(B, A, 3, 0, &other[14..42]), &LOOK, 2).state,
        TRK | CS_INVALID
    );
    // Echo request committed; its reply is established; a lone reply is invalid.
    assert_eq!(
        run(&ct, &icmp(A, B, 8, 7, &[]), &COMMIT, 3).state,
        TRK | CS_NEW
    );
    assert_eq!(
        run(&ct, &icmp(B, A, 0, 7, &[]), &LOOK, 4).state,
        TRK | CS_ESTABLISHED | CS_REPLY_DIR
    );
    assert_eq!(
        run(&ct, &icmp(B, A, 0, 8, &[]), &COMMIT, 4).state,
        TRK | CS_INVALID
    );
    assert_eq!(ct.len(), 2);
}

/// Pings both ways with one ICMP id (as OVN's compare found): two
/// connections, as in OVS, whose keys carry the ICMP type (a request's
/// is not the other connection's reply key, a reply's type).
#[test]
fn echo_requests_both_ways_with_one_id_are_two_connections() {
    let ct = Conntrack::default();
    assert_eq!(
        run(&ct, &icmp(B, A, 8, 12036, &[]), &COMMIT, 0).state,
        TRK | CS_NEW
    );
    assert_eq!(
        run(&ct, &icmp(A, B, 0, 12036, &[]), &LOOK, 1).state,
        TRK | CS_ESTABLISHED | CS_REPLY_DIR
    );
    // A's own request with the same id: new, and committed.
    assert_eq!(
        run(&ct, &icmp(A, B, 8, 12036, &[]), &COMMIT, 2).state,
        TRK | CS_NEW
    );
    assert_eq!(ct.len(), 2);
    // B's reply to it: that connection's reply.
    assert_eq!(
        run(&ct, &icmp(B, A, 0, 12036, &[]), &LOOK, 3).state,
        TRK | CS_ESTABLISHED | CS_REPLY_DIR
    );
    // Each side's next request: its own connection's, established.
    assert_eq!(
        run(&ct, &icmp(B, A, 8, 12036, &[]), &LOOK, 4).state,
        TRK | CS_ESTABLISHED
    );
    assert_eq!(
        run(&ct, &icmp(A, B, 8, 12036, &[]), &LOOK, 4).state,
        TRK | CS_ESTABLISHED
    );
}

#[test]
fn zones_marks_labels_expiry_and_flush() {
    let ct = Conntrack::default();
    let f = udp(A, B, (1, 2));
    let z5 = CtRequest {
        zone: 5,
        mark: Some((0x12, 0xff)),
        label: Some((1 << 100, 1 << 100)),
        ..COMMIT
    };
    let r = run(&ct, &f, &z5, 0);
    assert_eq!(
        (r.state, r.zone, r.mark, r.label128()),
        (TRK | CS_NEW, 5, 0x12, 1 << 100)
    );
    // Another zone: another connection.
    assert_eq!(run(&ct, &f, &LOOK, 1).state, TRK | CS_NEW);
    // Zone 5's again: its connection (its mark), still `+new` without a
    // reply (as OVS 3.1's other_conn_update).
    let again = run(&ct, &f, &CtRequest { zone: 5, ..LOOK }, 1);
    assert_eq!((again.state, again.mark), (TRK | CS_NEW, 0x12));
    assert_eq!(
        ct.dump(Some(5), 2),
        ["udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2),reply=(src=10.0.0.2,dst=10.0.0.1,sport=2,dport=1),zone=5,mark=18,labels=0x10000000000000000000000000"]
    );
    // Past its timeout (60 s for UDP seen several times one way) it is
    // gone: the lookup misses, the sweep frees it.
    assert_eq!(
        run(&ct, &f, &CtRequest { zone: 5, ..LOOK }, 61_002).state,
        TRK | CS_NEW
    );
    assert_eq!(ct.len(), 0, "the lookup removed it");
    run(&ct, &f, &z5, 70_000);
    assert_eq!(ct.sweep(70_001), 0);
    assert_eq!(ct.sweep(70_000 + 60_001), 1);
    run(&ct, &f, &z5, 200_000);
    run(&ct, &f, &COMMIT, 200_000);
    assert_eq!(ct.flush(Some(5)), 1);
    assert_eq!(ct.flush(None), 1);
    assert!(ct.is_empty());
}

#[test]
fn force_drops_a_connection_seen_the_other_way() {
    let ct = Conntrack::default();
    run(&ct, &udp(A, B, (1, 2)), &COMMIT, 0);
    let forced = CtRequest {
        force: true,
        ..COMMIT
    };
    assert_eq!(run(&ct, &udp(B, A, (2, 1)), &forced, 1).state, TRK | CS_NEW);
    assert_eq!(
        ct.dump(None, 2),
        ["udp,orig=(src=10.0.0.2,dst=10.0.0.1,sport=2,dport=1),reply=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2)"]
    );
}

#[test]
fn not_ip_is_untracked_and_fragments_are_invalid() {
    let ct = Conntrack::default();
    let arp = vec![0xffu8; 12]
        .into_iter()
        .chain([0x08, 0x06])
        .chain([0; 28])
        .collect::<Vec<_>>();
    assert_eq!(run(&ct, &arp, &COMMIT, 0).state, 0);
    let mut frag = udp(A, B, (1, 2));
    frag[20] = 0x20; // more fragments
    assert_eq!(run(&ct, &frag, &COMMIT, 0).state, TRK | CS_INVALID);
    assert!(ct.is_empty());
}

mod arbitrary {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes (mutations of real conversations' frames and noise)
        /// get an answer, never a panic, and the table's count stays its
        /// size.
        #[test]
        fn any_frame_is_answered(frames in proptest::collection::vec(
            (0usize..4, proptest::collection::vec(any::<(usize, u8)>(), 0..6), 0usize..80), 1..20)) {
            let ct = Conntrack::default();
            let base = [
                tcp(A, B, (1, 2), 7, 0, 0x002, 3),
                udp(A, B, (1, 2)),
                icmp(B, A, 3, 0, &udp(A, B, (1, 2))[14..42]),
                icmp(A, B, 8, 1, &[]),
            ];
            for (n, (which, flips, cut)) in frames.into_iter().enumerate() {
                let mut f = base[which].clone();
                for (at, v) in flips {
                    let i = at % f.len();
                    f[i] = v;
                }
                f.truncate(f.len().saturating_sub(cut).max(14));
                let mut meta = PacketMeta::default();
                let mut key = FlowKey::default();
                if extract(&f, 1, &mut meta, &mut key).is_ok() {
                    ct.process(&mut f, &meta, &key, &CtResult::default(), &COMMIT, n as u64);
                }
            }
            prop_assert_eq!(ct.len() as usize, ct.dump(None, 0).len());
        }
    }
}

#[test]
fn zone_limits_hold_commits_back_and_count_what_goes() {
    let ct = Conntrack::default();
    ct.set_limit(Some(5), 2);
    let z5 = CtRequest { zone: 5, ..COMMIT };
    for port in 1..=3 {
        // The third is still new (as OVS), just not committed.
        assert_eq!(run(&ct, &udp(A, B, (port, 9)), &z5, 0).state, TRK | CS_NEW);
    }
    assert_eq!(ct.len(), 2);
    assert_eq!(ct.stats.zone_full.load(Ordering::Relaxed), 1);
    assert_eq!(
        ct.limits(&[5, 6]),
        "default limit=0\nzone=5,limit=2,count=2\nzone=6,limit=0,count=0\n"
    );
    // Other zones are not limited; the default limits every zone
    // without its own.
    run(&ct, &udp(A, B, (1, 9)), &COMMIT, 0);
    ct.set_limit(None, 1);
    run(&ct, &udp(A, B, (2, 9)), &COMMIT, 0);
    assert_eq!(ct.len(), 3);
    // Expiry and flushes give the room back.
    assert_eq!(ct.flush(Some(5)), 2);
    assert_eq!(ct.limits(&[5]), "default limit=1\nzone=5,limit=2,count=0\n");
    run(&ct, &udp(A, B, (7, 9)), &z5, 0);
    assert_eq!(ct.sweep(u64::MAX), 2);
    assert_eq!(ct.limits(&[]), "default limit=1\nzone=5,limit=2,count=0\n");
}

/// Tracks a frame as `req` asks, after `prev`; the result and the frame
/// as it leaves (translated, maybe).
fn run_nat(
    ct: &Conntrack,
    frame: &[u8],
    prev: &CtResult,
    req: &CtRequest,
    now_ms: u64,
) -> (CtResult, Vec<u8>) {
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(frame, 1, &mut meta, &mut key).unwrap();
    let mut f = frame.to_vec();
    let r = ct.process(&mut f, &meta, &key, prev, req, now_ms);
    (r, f)
}

/// A frame's IPv4 header and L4 checksums are right.
pub(crate) fn checksums_hold(f: &[u8]) -> bool {
    use sluice_packet::wire::checksum::{checksum, finish, pseudo_v4, sum};
    let ip = &f[14..34];
    let l4 = &f[34..];
    let src = u32::from_be_bytes(ip[12..16].try_into().unwrap());
    let dst = u32::from_be_bytes(ip[16..20].try_into().unwrap());
    let l4_ok = match ip[9] {
        1 => checksum(l4) == 0,
        p => finish(sum(pseudo_v4(src, dst, p, l4.len() as u16), l4)) == 0,
    };
    checksum(ip) == 0 && l4_ok
}

/// Fills a frame's checksums in (IPv4 header, TCP/UDP/ICMP).
pub(crate) fn with_checksums(mut f: Vec<u8>) -> Vec<u8> {
    use sluice_packet::wire::checksum::{checksum, finish, pseudo_v4, sum};
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let src = u32::from_be_bytes(f[26..30].try_into().unwrap());
    let dst = u32::from_be_bytes(f[30..34].try_into().unwrap());
    let p = f[23];
    let at = 34
        + match p {
            6 => 16,
            17 => 6,
            _ => 2,
        };
    if f.len() < at + 2 {
        return f;
    }
    f[at..at + 2].copy_from_slice(&[0, 0]);
    let c = if p == 1 {
        checksum(&f[34..])
    } else {
        finish(sum(pseudo_v4(src, dst, p, (f.len() - 34) as u16), &f[34..]))
    };
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f
}

pub(crate) const S: [u8; 4] = [192, 0, 2, 1];
pub(crate) const C: [u8; 4] = [10, 0, 0, 3];

/// `ct(commit,nat(src|dst=ADDR[:PORT]))` over IPv4 (port 0: none).
pub(crate) fn nat_to(kind: NatKind, addr: [u8; 4], port: u16) -> CtRequest {
    let mut min = [0; 16];
    min[..4].copy_from_slice(&addr);
    CtRequest {
        nat: Some(Nat {
            kind,
            v6: Some(false),
            min,
            min_port: port,
            ..Nat::default()
        }),
        ..COMMIT
    }
}

/// `base` with a bare `nat`: a committed connection's translation
/// applied (and, committing, OVS 3.1's reply tuple for a new one).
pub(crate) fn bare_nat(base: CtRequest) -> CtRequest {
    CtRequest {
        nat: Some(Nat::default()),
        ..base
    }
}

pub(crate) fn snat() -> CtRequest {
    nat_to(NatKind::Src, S, 0)
}

pub(crate) fn ports(f: &[u8]) -> (u16, u16) {
    (
        u16::from_be_bytes([f[34], f[35]]),
        u16::from_be_bytes([f[36], f[37]]),
    )
}

#[test]
fn snat_translates_both_ways_and_shares_one_address_by_ports() {
    let ct = Conntrack::default();
    let apply = bare_nat(LOOK);
    let none = CtResult::default();
    // A's first packet: committed, its source becomes S, its port kept.
    let (r, out) = run_nat(
        &ct,
        &with_checksums(udp(A, B, (5000, 53))),
        &none,
        &snat(),
        0,
    );
    assert_eq!(r.state, TRK | CS_NEW | CS_SRC_NAT);
    assert_eq!((&out[26..30], ports(&out)), (&S[..], (5000, 53)));
    assert!(checksums_hold(&out));
    // C from the same port to the same server: the next port.
    let (_, out_c) = run_nat(
        &ct,
        &with_checksums(udp(C, B, (5000, 53))),
        &none,
        &snat(),
        0,
    );
    assert_eq!((&out_c[26..30], ports(&out_c)), (&S[..], (5001, 53)));
    assert_eq!(
        ct.dump(None, 1),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=5000,dport=53),reply=(src=10.0.0.2,dst=192.0.2.1,sport=53,dport=5000)",
            "udp,orig=(src=10.0.0.3,dst=10.0.0.2,sport=5000,dport=53),reply=(src=10.0.0.2,dst=192.0.2.1,sport=53,dport=5001)",
        ]
    );
    // The replies, through ct(nat): back to A and to C.
    let (r, back) = run_nat(
        &ct,
        &with_checksums(udp(B, S, (53, 5001))),
        &none,
        &apply,
        1,
    );
    assert_eq!(r.state, TRK | CS_ESTABLISHED | CS_REPLY_DIR | CS_DST_NAT);
    assert_eq!((&back[30..34], ports(&back)), (&C[..], (53, 5000)));
    assert!(checksums_hold(&back));
    let (_, back) = run_nat(
        &ct,
        &with_checksums(udp(B, S, (53, 5000))),
        &none,
        &apply,
        1,
    );
    assert_eq!(&back[30..34], &A[..]);
    // Without nat the reply is tracked but left as it is.
    let (r, same) = run_nat(&ct, &with_checksums(udp(B, S, (53, 5000))), &none, &LOOK, 1);
    assert_eq!(r.state, TRK | CS_ESTABLISHED | CS_REPLY_DIR);
    assert_eq!(&same[30..34], &S[..]);
    // A later ct in the zone finds the translated packet by its new
    // tuple and does not translate it again.
    let (r1, out) = run_nat(
        &ct,
        &with_checksums(udp(A, B, (5000, 53))),
        &none,
        &apply,
        2,
    );
    assert_eq!(r1.state, TRK | CS_ESTABLISHED | CS_SRC_NAT);
    let (r2, again) = run_nat(&ct, &out, &r1, &apply, 2);
    assert_eq!(r2.state, TRK | CS_ESTABLISHED | CS_SRC_NAT);
    assert_eq!(again, out);
    // Gone together.
    assert_eq!(ct.nat_reply_tuples(), 2);
    ct.flush(None);
    assert_eq!((ct.len(), ct.nat_reply_tuples()), (0, 0));
}

#[test]
fn dnat_to_a_port_and_icmp_errors_translated_inside() {
    let ct = Conntrack::default();
    let none = CtResult::default();
    let dnat = nat_to(NatKind::Dst, [10, 0, 0, 9], 8080);
    let apply = bare_nat(LOOK);
    let syn = with_checksums(tcp(A, B, (40000, 80), 1000, 0, 0x02, 0));
    let (r, out) = run_nat(&ct, &syn, &none, &dnat, 0);
    assert_eq!(r.state, TRK | CS_NEW | CS_DST_NAT);
    assert_eq!(
        (&out[30..34], ports(&out)),
        (&[10, 0, 0, 9][..], (40000, 8080))
    );
    assert!(checksums_hold(&out));
    // The backend's SYN-ACK goes back as from B:80.
    let synack = with_checksums(tcp([10, 0, 0, 9], A, (8080, 40000), 5000, 1001, 0x12, 0));
    let (r, back) = run_nat(&ct, &synack, &none, &apply, 1);
    assert_eq!(r.state, TRK | CS_ESTABLISHED | CS_REPLY_DIR | CS_SRC_NAT);
    assert_eq!((&back[26..30], ports(&back)), (&B[..], (80, 40000)));
    assert!(checksums_hold(&back));
    // An ICMP error from the backend quoting what it got (A -> 10.0.0.9:
    // 8080): A sees it from B, quoting A -> B:80.
    let err = with_checksums(icmp([10, 0, 0, 9], A, 3, 0, &out[14..14 + 28]));
    let (r, seen) = run_nat(&ct, &err, &none, &apply, 2);
    assert_eq!(r.state, TRK | CS_RELATED | CS_REPLY_DIR | CS_SRC_NAT);
    assert_eq!(&seen[26..30], &B[..]);
    let quoted = &seen[34 + 8..];
    assert_eq!(&quoted[16..20], &B[..], "the quoted destination, back");
    assert_eq!(u16::from_be_bytes([quoted[22], quoted[23]]), 80);
    assert!(checksums_hold(&seen));
}

#[test]
fn nat_without_a_range_commits_as_ovs_3_1_does() {
    // OVS 3.1's userspace tracker gives a new connection committed with
    // `nat` and no src/dst a reply tuple of address 0 and port 0: its
    // replies never find it and start connections of their own.
    let ct = Conntrack::default();
    let none = CtResult::default();
    let plain = bare_nat(COMMIT);
    let (r, out) = run_nat(&ct, &udp(A, B, (1000, 53)), &none, &plain, 0);
    assert_eq!(r.state, TRK | CS_NEW);
    assert_eq!(out, udp(A, B, (1000, 53)));
    let (r, _) = run_nat(&ct, &udp(B, A, (53, 1000)), &none, &plain, 0);
    assert_eq!(r.state, TRK | CS_NEW);
    assert_eq!(
        ct.dump(None, 1),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1000,dport=53),reply=(src=0.0.0.0,dst=10.0.0.1,sport=53,dport=0)",
            "udp,orig=(src=10.0.0.2,dst=10.0.0.1,sport=53,dport=1000),reply=(src=0.0.0.0,dst=10.0.0.2,sport=1000,dport=0)",
        ]
    );
}

#[test]
fn nat_without_a_range_commits_plainly_in_kernel_mode() {
    let ct = Conntrack::default();
    ct.set_nat_alone(NatAlone::Kernel);
    let none = CtResult::default();
    let plain = bare_nat(COMMIT);
    let (r, out) = run_nat(&ct, &udp(A, B, (1000, 53)), &none, &plain, 0);
    assert_eq!(r.state, TRK | CS_NEW);
    assert_eq!(out, udp(A, B, (1000, 53)));
    let (r, _) = run_nat(&ct, &udp(B, A, (53, 1000)), &none, &plain, 0);
    assert_eq!(r.state, TRK | CS_ESTABLISHED | CS_REPLY_DIR);
    assert_eq!(
        ct.dump(None, 1),
        ["udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1000,dport=53),reply=(src=10.0.0.2,dst=10.0.0.1,sport=53,dport=1000)"]
    );
    assert_eq!(ct.nat_reply_tuples(), 0);
}

#[test]
fn nat_exhaustion_leaves_the_packet_new_and_untranslated() {
    let ct = Conntrack::default();
    let none = CtResult::default();
    let one_port = nat_to(NatKind::Src, S, 7000);
    let (_, out) = run_nat(&ct, &udp(A, B, (1, 2)), &none, &one_port, 0);
    assert_eq!(ports(&out), (7000, 2));
    let (r, out) = run_nat(&ct, &udp(C, B, (1, 2)), &none, &one_port, 0);
    assert_eq!(r.state, TRK | CS_NEW);
    assert_eq!(out, udp(C, B, (1, 2)));
    assert_eq!(ct.stats.nat_exhausted.load(Ordering::Relaxed), 1);
    assert_eq!(ct.len(), 1);
}

#[test]
fn many_translated_connections_leave_nothing_behind() {
    let ct = Conntrack::default();
    let none = CtResult::default();
    for i in 0..10_000u32 {
        let src = [10, 1, (i >> 8) as u8, i as u8];
        run_nat(&ct, &udp(src, B, (4000, 53)), &none, &snat(), u64::from(i));
    }
    assert_eq!((ct.len(), ct.nat_reply_tuples()), (10_000, 10_000));
    // 10,000 sources on one port each: ports 4000 up, one each.
    assert_eq!(ct.sweep(u64::MAX), 10_000);
    assert_eq!((ct.len(), ct.nat_reply_tuples()), (0, 0));
}

#[test]
fn bad_checksums_are_invalid_unless_offloaded() {
    let ct = Conntrack::default();
    let syn = tcp(A, B, (1, 2), 1000, 0, 0x02, 0);
    let mut bad = syn.clone();
    bad[34 + 16] ^= 0x40;
    assert_eq!(run(&ct, &bad, &COMMIT, 0).state, TRK | CS_INVALID);
    let mut bad_ip = syn.clone();
    bad_ip[24] ^= 1;
    assert_eq!(run(&ct, &bad_ip, &COMMIT, 0).state, TRK | CS_INVALID);
    assert!(ct.is_empty(), "nothing committed");
    // A partial checksum (to be completed by an offload) is not checked.
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(&bad, 1, &mut meta, &mut key).unwrap();
    meta.offload.flags |= sluice_packet::meta::Offload::NEEDS_CSUM;
    let mut f = bad.clone();
    let r = ct.process(&mut f, &meta, &key, &CtResult::default(), &COMMIT, 0);
    assert_eq!(r.state, TRK | CS_NEW);
    // UDP over IPv4 without a checksum is fine; a UDP length past the
    // datagram is not.
    let mut none = udp(A, B, (7, 8));
    none[34 + 6..34 + 8].copy_from_slice(&[0, 0]);
    assert_eq!(run(&ct, &none, &COMMIT, 0).state, TRK | CS_NEW);
    let mut long = none.clone();
    long[34 + 5] = 200;
    assert_eq!(run(&ct, &long, &COMMIT, 0).state, TRK | CS_INVALID);
    // A UDP length short of the datagram: the checksum covers the whole
    // IP payload all the same (as OVS sums it).
    let mut short = udp(A, B, (9, 10));
    short[34 + 5] = 8;
    let short = with_checksums(short);
    assert_eq!(run(&ct, &short, &COMMIT, 0).state, TRK | CS_NEW);
}

#[test]
fn other_protocols_are_dumped_as_ovs_dumps_them() {
    // VRRP (112), as OVS's "conntrack - generic IP protocol": the
    // protocol's number, ports 0.
    let ct = Conntrack::default();
    let vrrp = ipv4(A, B, 112, &[0x21, 0x01, 0x64, 0x01, 0, 1, 0xba, 0x52]);
    assert_eq!(run(&ct, &vrrp, &COMMIT, 0).state, TRK | CS_NEW);
    assert_eq!(
        ct.dump(None, 1),
        ["112,orig=(src=10.0.0.1,dst=10.0.0.2,sport=0,dport=0),reply=(src=10.0.0.2,dst=10.0.0.1,sport=0,dport=0)"]
    );
}

#[test]
fn sctp_is_tracked_by_addresses_as_ovs_3_1_does() {
    let ct = Conntrack::default();
    let mut l4 = vec![0x03, 0xe8, 0x07, 0xd0];
    l4.extend_from_slice(&[0; 28]);
    let one = ipv4(A, B, 132, &l4);
    l4[1] = 0xe9;
    let other_ports = ipv4(A, B, 132, &l4);
    assert_eq!(run(&ct, &one, &COMMIT, 0).state, TRK | CS_NEW);
    // The same connection (one in the dump), `+new` until a reply.
    assert_eq!(run(&ct, &other_ports, &COMMIT, 0).state, TRK | CS_NEW);
    assert_eq!(
        ct.dump(None, 1),
        ["sctp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=0,dport=0),reply=(src=10.0.0.2,dst=10.0.0.1,sport=0,dport=0)"]
    );
}

#[test]
fn a_zone_timeout_policy_decides_when_its_connections_expire() {
    let ct = Conntrack::default();
    ct.timeout_policies()
        .set(3, &timeouts::parse_policy(&["udp_first=1"]).unwrap());
    let in_zone = |zone| CtRequest { zone, ..COMMIT };
    let dgram = udp(A, B, (5, 6));
    for zone in [0, 3] {
        assert_eq!(run(&ct, &dgram, &in_zone(zone), 0).state, TRK | CS_NEW);
    }
    // 1.5 s later: zone 3's connection is gone (a reply starts a new
    // one), zone 0's lives its 60 s (a reply is established).
    let back = udp(B, A, (6, 5));
    assert_eq!(run(&ct, &back, &in_zone(3), 1500).state, TRK | CS_NEW);
    assert_eq!(
        run(&ct, &back, &in_zone(0), 1500).state,
        TRK | CS_ESTABLISHED | sluice_packet::key::CS_REPLY_DIR
    );
}

#[test]
fn the_cleared_state_is_the_default() {
    assert_eq!(CtResult::NONE, CtResult::default());
}

/// A connection translated to its own address (committed with `nat` and
/// no range, as OVN's `ct_commit_nat`): the rewrite OVS makes changes no
/// byte, unless a checksum is 0xffff, which OVS's update turns into
/// 0x0000; Sluice skips the rewrite only where it changes nothing.
#[test]
fn translating_to_the_same_address_changes_what_ovs_changes() {
    use sluice_packet::wire::checksum::update_bytes;
    // The premise, over every checksum value.
    let a = [10, 84, 1, 100];
    for c in 0..=u16::MAX {
        assert_eq!(
            update_bytes(c, &a, &a) == c,
            c != 0xffff,
            "checksum {c:#06x}"
        );
    }
    // A TCP packet 10.84.1.100:1024 -> 10.84.2.3:5201, source-translated
    // to itself, with its checksums as they are and then 0xffff.
    let frame = |tcp_csum: Option<u16>, ip_csum: Option<u16>| {
        let mut b = vec![0u8; 54];
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        b[14..34].copy_from_slice(&[
            0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 84, 1, 100, 10, 84, 2, 3,
        ]);
        let c = sluice_packet::wire::checksum::checksum(&b[14..34]);
        b[24..26].copy_from_slice(&ip_csum.unwrap_or(c).to_be_bytes());
        b[34..38].copy_from_slice(&[0x04, 0x00, 0x14, 0x51]);
        b[46] = 0x50;
        b[47] = 0x10;
        b[50..52].copy_from_slice(&tcp_csum.unwrap_or(0x1234).to_be_bytes());
        b
    };
    let reply = tuple::Tuple {
        zone: 2,
        proto: 6,
        v6: false,
        src: {
            let mut s = [0; 16];
            s[..4].copy_from_slice(&[10, 84, 2, 3]);
            s
        },
        dst: {
            let mut d = [0; 16];
            d[..4].copy_from_slice(&[10, 84, 1, 100]);
            d
        },
        sport: 5201,
        dport: 1024,
    };
    let snat = |mut b: Vec<u8>| {
        nat::translate(&mut b, 14, 34, false, &reply, nat::NAT_SRC, false);
        b
    };
    let plain = frame(None, None);
    assert_eq!(snat(plain.clone()), plain);
    let tcp_ones = snat(frame(Some(0xffff), None));
    assert_eq!(&tcp_ones[50..52], &[0, 0]);
    let ip_ones = snat(frame(None, Some(0xffff)));
    assert_eq!(&ip_ones[24..26], &[0, 0]);
}

/// A batch reading its connections' places without the shards' locks
/// (`prefetch_group`, `prefetch_entry`) while another thread adds
/// connections, so that the shards' indexes grow and are replaced under
/// it: the readers see old or new indexes, never freed memory, and
/// tracking after the prefetch finds every connection.
#[test]
fn prefetching_while_the_table_grows() {
    let ct = std::sync::Arc::new(Conntrack::default());
    let frames: Vec<Vec<u8>> = (0..20_000u16)
        .map(|i| udp(A, B, (1024 + i % 40_000, 53 + i / 40_000)))
        .collect();
    let parsed: Vec<(PacketMeta, FlowKey)> = frames
        .iter()
        .map(|f| {
            let mut meta = PacketMeta::default();
            let mut key = FlowKey::default();
            extract(f, 1, &mut meta, &mut key).unwrap();
            (meta, key)
        })
        .collect();
    let writer = {
        let ct = ct.clone();
        let frames = frames.clone();
        std::thread::spawn(move || {
            for f in &frames {
                assert!(run(&ct, f, &COMMIT, 1).state & CS_NEW != 0);
            }
        })
    };
    let mut rounds = 0;
    while !writer.is_finished() || rounds == 0 {
        for (f, (meta, key)) in frames.iter().zip(&parsed).step_by(7) {
            let p = ct.prepare(f, meta, key, 0);
            ct.prefetch_group(&p);
            ct.prefetch_entry(&p);
        }
        rounds += 1;
    }
    writer.join().unwrap();
    assert_eq!(ct.len(), 20_000);
    // Prepared, prefetched, then tracked: each is its connection's.
    let preps: Vec<Prepared> = frames
        .iter()
        .zip(&parsed)
        .map(|(f, (meta, key))| {
            let p = ct.prepare(f, meta, key, 0);
            ct.prefetch_group(&p);
            p
        })
        .collect();
    for p in &preps {
        ct.prefetch_entry(p);
    }
    for ((f, (meta, _)), p) in frames.iter().zip(&parsed).zip(&preps) {
        let mut f = f.clone();
        let r = ct.track_prepared(&mut f, meta, &CtResult::default(), &COMMIT, 2, p);
        // Unreplied: `+new`, as OVS has it.
        assert_eq!(r.state & (CS_ESTABLISHED | CS_NEW), CS_NEW);
    }
    // Each found its own connection: none was made.
    assert_eq!(ct.len(), 20_000);
}

fn mapped(a: [u8; 4]) -> [u8; 16] {
    let mut m = [0; 16];
    m[10..].copy_from_slice(&[0xff, 0xff, a[0], a[1], a[2], a[3]]);
    m
}

/// `NXT_CT_FLUSH` as OVS 3.1 applies it: a whole original five-tuple
/// flushes its connection in the zone given (zone 0 without one), a
/// partial tuple every connection of the zone (or of any) that has it,
/// and the reply tuple is the translated one.
#[test]
fn flush_by_partial_tuples() {
    let ct = Conntrack::default();
    let z = |zone: u16| CtRequest { zone, ..COMMIT };
    for (sport, zone) in [(1000, 5), (1001, 5), (1000, 6), (1002, 0)] {
        run(&ct, &tcp(A, B, (sport, 80), 1, 0, 0x02, 0), &z(zone), 1);
    }
    // A DNAT to C of A's connection to S:443, in zone 7.
    let dnat = CtRequest {
        zone: 7,
        ..nat_to(NatKind::Dst, C, 8443)
    };
    run(&ct, &tcp(A, S, (2000, 443), 1, 0, 0x02, 0), &dnat, 1);
    assert_eq!(ct.len(), 5);

    let five = |sport: u16| FlushMatch {
        proto: 6,
        v6: Some(false),
        orig: FlushTuple {
            src: mapped(A),
            dst: mapped(B),
            sport,
            dport: 80,
        },
        ..FlushMatch::default()
    };
    // Zone 0 without a zone: A:1000 is in 5 and 6, not 0.
    assert_eq!(ct.flush_matching(None, &five(1000)), 0);
    assert_eq!(ct.flush_matching(Some(5), &five(1000)), 1);
    // The reply direction's five-tuple finds it too.
    let back = FlushMatch {
        orig: FlushTuple {
            src: mapped(B),
            dst: mapped(A),
            sport: 80,
            dport: 1002,
        },
        ..five(0)
    };
    assert_eq!(ct.flush_matching(None, &back), 1);
    // The translated connection by its backend (the reply's source), in
    // any zone: what ovn-controller sends for a removed backend.
    let backend = FlushMatch {
        proto: 6,
        v6: Some(false),
        reply: FlushTuple {
            src: mapped(C),
            sport: 8443,
            ..FlushTuple::default()
        },
        ..FlushMatch::default()
    };
    assert_eq!(ct.flush_matching(None, &backend), 1);
    assert_eq!(ct.nat_reply_tuples(), 0, "its reply tuple went with it");
    // Partial: every connection to B:80, zone 6 only, then any zone.
    let to_b = FlushMatch {
        proto: 6,
        v6: Some(false),
        orig: FlushTuple {
            dst: mapped(B),
            dport: 80,
            ..FlushTuple::default()
        },
        ..FlushMatch::default()
    };
    assert_eq!(ct.flush_matching(Some(6), &to_b), 1);
    assert_eq!(ct.flush_matching(None, &to_b), 1);
    assert_eq!(ct.len(), 0);
}

/// ICMP has no wildcard id or type in OVS 3.1's flush: addresses alone
/// match no echo; the id and the request's type do, and a whole tuple
/// finds its connection by the type's direction.
#[test]
fn flush_icmp_by_id_and_type() {
    let ct = Conntrack::default();
    run(&ct, &icmp(A, B, 8, 77, &[]), &COMMIT, 1);
    let m = |ty: u16, src, dst| FlushMatch {
        proto: 1,
        v6: Some(false),
        orig: FlushTuple {
            src: mapped(src),
            dst: mapped(dst),
            sport: 77,
            dport: ty,
        },
        reply: FlushTuple::default(),
    };
    // The reply type from A to B is no direction of it.
    assert_eq!(ct.flush_matching(Some(0), &m(0, A, B)), 0);
    assert_eq!(ct.flush_matching(Some(0), &m(8, B, A)), 0);
    let addresses_only = FlushMatch {
        orig: FlushTuple {
            sport: 0,
            dport: 0,
            ..m(8, A, B).orig
        },
        ..m(8, A, B)
    };
    let partial = FlushMatch {
        reply: FlushTuple {
            src: mapped(B),
            ..FlushTuple::default()
        },
        ..addresses_only
    };
    assert_eq!(ct.flush_matching(None, &partial), 0);
    assert_eq!(ct.len(), 1);
    // Its reply, B to A with the reply type: the connection.
    assert_eq!(ct.flush_matching(Some(0), &m(0, B, A)), 1);
    assert_eq!(ct.len(), 0);
}
