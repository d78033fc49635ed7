//! Whole conversations through the tracker, as bytes.

use super::*;
use sluice_packet::extract::extract;
use sluice_packet::key::CS_INVALID;

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

fn ipv4(src: [u8; 4], dst: [u8; 4], p: u8, l4: &[u8]) -> Vec<u8> {
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
    f
}

fn tcp(
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

fn udp(src: [u8; 4], dst: [u8; 4], ports: (u16, u16)) -> Vec<u8> {
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

fn run(ct: &Conntrack, frame: &[u8], req: &CtRequest, now_ms: u64) -> CtResult {
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(frame, 1, &mut meta, &mut key).unwrap();
    ct.process(frame, &meta, &key, req, now_ms)
}

const COMMIT: CtRequest = CtRequest {
    zone: 0,
    commit: true,
    force: false,
    mark: None,
    label: None,
};
const LOOK: CtRequest = CtRequest {
    zone: 0,
    commit: false,
    force: false,
    mark: None,
    label: None,
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
    let again = run(&ct, &f, &CtRequest { zone: 5, ..LOOK }, 1);
    assert_eq!((again.state, again.mark), (TRK | CS_ESTABLISHED, 0x12));
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
                    ct.process(&f, &meta, &key, &COMMIT, n as u64);
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
