//! A batch tracks as one packet at a time does, and batches on two
//! threads never wait for each other.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_packet::extract::extract;
use sluice_packet::key::{FlowKey, CS_SRC_NAT};
use sluice_packet::meta::PacketMeta;

use crate::tests::{bare_nat, checksums_hold, ports, snat, tcp, udp, B, COMMIT, LOOK, S};
use crate::{Conntrack, CtRequest, CtResult};

/// One packet of a script: its frame, what the `ct` asks, the clock.
type Step = (Vec<u8>, CtRequest, u64);

fn parsed(frame: &[u8]) -> (PacketMeta, FlowKey) {
    let mut meta = PacketMeta::default();
    let mut key = FlowKey::default();
    extract(frame, 1, &mut meta, &mut key).unwrap();
    (meta, key)
}

/// Each step through `ct.process` on its own: results and frames out.
fn one_by_one(ct: &Conntrack, steps: &[Step]) -> Vec<(CtResult, Vec<u8>)> {
    steps
        .iter()
        .map(|(f, req, now)| {
            let (meta, key) = parsed(f);
            let mut f = f.clone();
            let r = ct.process(&mut f, &meta, &key, &CtResult::default(), req, *now);
            (r, f)
        })
        .collect()
}

/// The steps in batches of 32, each through one [`crate::Batch`].
fn batched(ct: &Conntrack, steps: &[Step]) -> Vec<(CtResult, Vec<u8>)> {
    let mut out = Vec::new();
    for chunk in steps.chunks(32) {
        let mut b = ct.batch();
        for (f, req, now) in chunk {
            let (meta, key) = parsed(f);
            let mut f = f.clone();
            let r = b.process(&mut f, &meta, &key, &CtResult::default(), req, *now);
            assert!(b.held() as usize <= crate::held::HELD);
            out.push((r, f));
        }
    }
    out
}

/// Sources 10.1.0.i, each a UDP flow to B:53 from port 4000.
fn src(i: u8) -> [u8; 4] {
    [10, 1, 0, i]
}

#[test]
fn a_batch_tracks_as_one_packet_at_a_time() {
    let (one, many) = (Conntrack::default(), Conntrack::default());
    // Translated connections first (their reply tuples in other shards
    // than their own), the same on both trackers.
    let first: Vec<Step> = (0..40)
        .map(|i| (udp(src(i), B, (4000, 53)), snat(), 0))
        .collect();
    let a = one_by_one(&one, &first);
    assert_eq!(a, one_by_one(&many, &first));
    assert!(a.iter().all(|(_, f)| checksums_hold(f)));
    // Then a mix, in batches on one and alone on the other: replies by
    // their translated tuples, the flows again, TCP handshakes (commits
    // inside a batch), replies that force their connection out (its
    // alias removed), and late packets of expired connections.
    let mut steps: Vec<Step> = Vec::new();
    for (i, (_, out)) in a.iter().enumerate() {
        let i = i as u8;
        let (sport, _) = ports(out);
        steps.push((udp(B, S, (53, sport)), bare_nat(LOOK), 10));
        steps.push((udp(src(i), B, (4000, 53)), bare_nat(LOOK), 10));
        let syn = tcp(src(i), B, (5000 + u16::from(i), 80), 100, 0, 0x02, 0);
        steps.push((syn, COMMIT, 10));
        let syn_ack = tcp(B, src(i), (80, 5000 + u16::from(i)), 500, 101, 0x12, 0);
        steps.push((syn_ack, LOOK, 11));
        if i.is_multiple_of(5) {
            let force = CtRequest {
                force: true,
                ..COMMIT
            };
            steps.push((udp(B, S, (53, sport)), force, 12));
        }
        if i.is_multiple_of(7) {
            steps.push((udp(src(i), B, (4000, 53)), bare_nat(LOOK), 10_000_000));
        }
        if i.is_multiple_of(3) {
            // The handshake's connection expired: gone from the shard the
            // batch holds, and committed again under that lock.
            let syn = tcp(src(i), B, (5000 + u16::from(i), 80), 900, 0, 0x02, 0);
            steps.push((syn, COMMIT, 20_000_000));
        }
    }
    let alone = one_by_one(&one, &steps);
    let together = batched(&many, &steps);
    for (n, (x, y)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(x, y, "step {n}");
    }
    assert_eq!(one.dump(None, 12), many.dump(None, 12));
    assert_eq!(one.nat_reply_tuples(), many.nat_reply_tuples());
    assert_eq!(one.len(), many.len());
    for (x, y) in [
        (&one.stats.committed, &many.stats.committed),
        (&one.stats.invalid, &many.stats.invalid),
        (&one.stats.expired, &many.stats.expired),
    ] {
        assert_eq!(x.load(Ordering::Relaxed), y.load(Ordering::Relaxed));
    }
}

/// Two threads tracking the same connections in batches, in opposite
/// orders, committing translated ones (a commit holds two shards):
/// neither waits for the other for ever.
#[test]
fn batches_on_two_threads_never_wait_for_each_other() {
    let ct = Arc::new(Conntrack::default());
    let frames: Vec<Vec<u8>> = (0..=255u8).map(|i| udp(src(i), B, (4000, 53))).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for reverse in [false, true] {
        let (ct, tx) = (ct.clone(), tx.clone());
        let mut frames = frames.clone();
        if reverse {
            frames.reverse();
        }
        std::thread::spawn(move || {
            for round in 0..200u64 {
                for chunk in frames.chunks(32) {
                    let mut b = ct.batch();
                    for f in chunk {
                        let (meta, key) = parsed(f);
                        let mut f = f.clone();
                        let req = if round.is_multiple_of(2) {
                            snat()
                        } else {
                            LOOK
                        };
                        b.process(&mut f, &meta, &key, &CtResult::default(), &req, round);
                    }
                }
                if round % 50 == 49 && round < 150 {
                    ct.flush(None);
                }
            }
            tx.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        rx.recv_timeout(std::time::Duration::from_secs(120))
            .expect("a batch waited for ever");
    }
    // Every flow one translated connection with its reply tuple: none
    // twice, none without its alias.
    assert_eq!((ct.len(), ct.nat_reply_tuples()), (256, 256));
    let again = one_by_one(&ct, &[(frames[0].clone(), bare_nat(LOOK), 200)]);
    assert_ne!(again[0].0.state & CS_SRC_NAT, 0);
}

/// Two threads committing the same plain connections in batches, in
/// opposite orders (a commit without NAT under the lock its batch took
/// for the lookup): each connection committed once, none lost.
#[test]
fn batches_on_two_threads_commit_each_connection_once() {
    let ct = Arc::new(Conntrack::default());
    let frames: Vec<Vec<u8>> = (0..=255u8).map(|i| udp(src(i), B, (4000, 53))).collect();
    let mut threads = Vec::new();
    for reverse in [false, true] {
        let ct = ct.clone();
        let mut frames = frames.clone();
        if reverse {
            frames.reverse();
        }
        threads.push(std::thread::spawn(move || {
            for round in 0..100u64 {
                for chunk in frames.chunks(32) {
                    let mut b = ct.batch();
                    for f in chunk {
                        let (meta, key) = parsed(f);
                        let mut f = f.clone();
                        b.process(&mut f, &meta, &key, &CtResult::default(), &COMMIT, round);
                    }
                }
                if round % 25 == 24 && round < 75 {
                    ct.flush(None);
                }
            }
        }));
    }
    for t in threads {
        t.join().expect("a tracking thread panicked");
    }
    assert_eq!(ct.len(), 256);
    let dump = ct.dump(None, 100);
    let mut tuples: Vec<&String> = dump.iter().collect();
    tuples.sort();
    tuples.dedup();
    assert_eq!(tuples.len(), 256);
}
