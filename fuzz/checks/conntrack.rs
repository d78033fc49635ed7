//! Untrusted packets through the connection tracker: the input is a
//! sequence of frames (a selector byte: commit, force, zone, mark, NAT;
//! two bytes of length; the frame), each extracted and tracked in turn
//! by one tracker, translated in place when the selector asks for NAT.
//! Never a panic; every answer is untracked (not IP) or tracked with one
//! verdict (new, established, related or invalid); a translated packet
//! keeps its length; the count of connections is what a dump lists; a
//! sweep empties it, reply tuples of translated connections included.
//! Fragments go to the reassembly module first (its minimum sizes
//! lowered, so that short inputs reach it): a datagram it completes is
//! tracked whole and its fragments keep their lengths; its counters add
//! up, and a purge leaves nothing held.

use sluice_conntrack::ipf::Frag;
use sluice_conntrack::{Conntrack, CtRequest, CtResult, Nat, NatKind};
use sluice_packet::extract::extract;
use sluice_packet::key::{CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_TRACKED};
use sluice_packet::{FlowKey, PacketMeta};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let ct = Conntrack::default();
    let ipf = ct.ipf();
    ipf.set_min_frag(false, 400).unwrap();
    ipf.set_min_frag(true, 400).unwrap();
    let mut rest = data;
    let mut now = 0;
    while let [sel, hi, lo, tail @ ..] = rest {
        let n = (usize::from(*hi) << 8 | usize::from(*lo)).min(tail.len());
        let (frame, next) = tail.split_at(n);
        rest = next;
        now += u64::from(*sel >> 4) * 1000;
        let req = CtRequest {
            zone: u16::from(sel & 3),
            commit: sel & 4 != 0,
            force: sel & 8 != 0 && sel & 4 != 0,
            mark: (sel & 0x10 != 0).then_some((u32::from(*sel), 0xff)),
            label: None,
            nat: match sel >> 5 {
                1 => Some(Nat::default()),
                2 | 3 => Some(Nat {
                    kind: if sel & 0x20 != 0 {
                        NatKind::Src
                    } else {
                        NatKind::Dst
                    },
                    v6: Some(false),
                    min: [192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                    min_port: if sel & 1 != 0 { 1000 } else { 0 },
                    max_port: if sel & 1 != 0 { 1003 } else { 0 },
                    ..Nat::default()
                }),
                _ => None,
            },
        };
        let (mut meta, mut key) = (PacketMeta::default(), FlowKey::default());
        if extract(frame, 1, &mut meta, &mut key).is_err() {
            continue;
        }
        let prev = CtResult::default();
        let r = match ipf.handle(frame, &meta, &key, req.zone, true, &prev, now) {
            Frag::Held => continue,
            Frag::Complete(mut whole) => {
                let lens: Vec<usize> = whole.frags.iter().map(|f| f.data.len()).collect();
                let r = ct.track_reassembled(&mut whole, &prev, &req, now);
                let after: Vec<usize> = whole.frags.iter().map(|f| f.data.len()).collect();
                assert_eq!(lens, after);
                r
            }
            Frag::NotTaken | Frag::Invalid => {
                let mut bytes = frame.to_vec();
                let r = ct.process(&mut bytes, &meta, &key, &prev, &req, now);
                assert_eq!(bytes.len(), frame.len());
                r
            }
        };
        if let Some((frags, _)) = ipf.take_expired(now) {
            assert!(!frags.is_empty());
        }
        if r.state != 0 {
            assert!(r.state & CS_TRACKED != 0, "{r:?}");
            let verdicts = [CS_NEW, CS_ESTABLISHED, CS_RELATED, CS_INVALID]
                .iter()
                .filter(|&&b| r.state & b != 0)
                .count();
            assert_eq!(verdicts, 1, "{r:?}");
        }
        assert_eq!(r.zone, req.zone);
    }
    let held = u64::from(ipf.held());
    let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let (v4, v6) = (&ipf.v4, &ipf.v6);
    assert_eq!(
        get(&v4.accepted) + get(&v6.accepted),
        get(&v4.completed)
            + get(&v6.completed)
            + get(&v4.expired)
            + get(&v6.expired)
            + get(&v4.purged)
            + get(&v6.purged)
            + held
    );
    assert_eq!(ipf.purge(now, true).len() as u64, held);
    assert_eq!(ipf.held(), 0);
    assert_eq!(ct.len() as usize, ct.dump(None, 0).len());
    ct.sweep(u64::MAX);
    assert!(ct.is_empty());
    assert_eq!(ct.nat_reply_tuples(), 0);
}
