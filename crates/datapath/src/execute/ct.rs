//! The `ct` action: each packet through the connection tracker (its
//! fragments held until their datagram is whole), the results kept for the
//! actions after it and the next pass.

use arrayvec::ArrayVec;
use sluice_conntrack::{CtRequest, CtResult, Prepared};
use sluice_packet::key::{CS_INVALID, CS_TRACKED, FRAG_ANY};
use sluice_packet::{FlowKey, BATCH_SIZE};

use super::{keeps_packet, keeps_tuple, Ctx, Fates, Step};

/// A `ct` action on `pkts`.
pub(super) fn track(
    req: &CtRequest,
    step: &Step<'_>,
    pkts: &[u8],
    cx: &mut Ctx<'_>,
    f: &mut Fates,
) {
    let Step {
        acts,
        ai,
        drop,
        is_last,
    } = *step;
    let ct = cx.rules.conntrack();
    let now_ms = ct.now_ms();
    // Whether an action before this one changed the packet
    // (a header rewrite, a translating ct): then it is parsed
    // again (its key is the pass's).
    let changed = cx.recirc.reparse || !acts[..ai].iter().all(keeps_packet);
    // Whether the key still says what the tracker reads (a router's new
    // MACs and TTL before the ct do not make it parse the packet again).
    let retuple = cx.recirc.reparse || !acts[..ai].iter().all(keeps_tuple);
    // Several packets, none a fragment, their keys what the tracker
    // reads: all read first, then tracked. With a table too large for
    // the caches their connections are prefetched between (the lookups
    // overlap their DRAM misses); with a small one the two passes still
    // pay, as a packet's reading is done (its stores retired) before
    // its tracking reads it back.
    if !retuple
        && pkts.len() > 1
        && pkts
            .iter()
            .all(|&i| cx.keys[i as usize].nw_frag & FRAG_ANY == 0)
    {
        let prefetch = ct.prefetch_pays();
        track_batch(req, is_last, prefetch, pkts, cx, f, now_ms);
        pkts_done(step, cx, now_ms);
        return;
    }
    // The shards the packets look in, each locked once for all of them.
    let mut batch = ct.batch();
    for &i in pkts {
        let bit = 1u32 << i;
        if f.skip & bit != 0 {
            continue;
        }
        let prev = prev_state(cx, i);
        let Some(p) = cx.slots.get_mut(i as usize) else {
            continue;
        };
        if cx.keys[i as usize].nw_frag & FRAG_ANY != 0 {
            // A fragment: held until its datagram is whole
            // (then tracked as one, its fragments going on
            // with the actions after this one), or tracked
            // as it is when it is none to hold.
            // (Not if its fate is settled already: a copy
            // carries it, or an output before this one sent it.)
            let fate = (cx.counted | cx.recirc.carried | f.sent | f.to_ctl) & bit == 0;
            let frag = crate::fragments::Fragment {
                key: &cx.keys[i as usize],
                reparse: changed,
                prev: &prev,
                fate,
            };
            let rest = crate::fragments::Rest {
                acts: &acts[ai + 1..],
                drop,
            };
            // Holding and reassembling lock shards themselves.
            batch.release();
            if crate::fragments::hold(ct, p, &frag, req, now_ms, &rest, &mut cx.recirc.released) {
                if let Some(p) = cx.slots.take(i as usize) {
                    cx.pool.free(p);
                }
                f.skip |= bit;
                if fate {
                    f.held |= bit;
                }
                continue;
            }
        }
        before_nat(req, p);
        // The result written where it is kept (not returned and copied:
        // a copy read right after the stores that made it waits for
        // them).
        let out = &mut cx.recirc.ct[i as usize];
        if !retuple {
            let meta = p.meta;
            batch.process_into(
                p.data_mut(),
                &meta,
                &cx.keys[i as usize],
                &prev,
                req,
                now_ms,
                out,
            );
        } else {
            let mut meta = p.meta;
            let mut key = FlowKey::default();
            match sluice_packet::extract::extract(p.data(), meta.in_port, &mut meta, &mut key) {
                Ok(()) => batch.process_into(p.data_mut(), &meta, &key, &prev, req, now_ms, out),
                Err(_) => {
                    *out = CtResult {
                        zone: req.zone,
                        ..CtResult::NONE
                    }
                }
            }
        }
        tracked_in_place(i, is_last, cx, f);
    }
    // The shards let go as soon as the packets are tracked.
    std::mem::drop(batch);
    pkts_done(step, cx, now_ms);
}

/// Translation updates checksums as they are: a partial one is
/// completed first.
fn before_nat(req: &CtRequest, p: &mut sluice_packet::Packet) {
    if req.nat.is_some() && p.meta.offload.needs_csum() {
        let _ = sluice_packet::offload::complete_csum(p);
    }
}

/// What tracking packet `i` gave it (its result in `cx.recirc.ct[i]`):
/// kept for the actions after and the next pass.
fn tracked_in_place(i: u8, is_last: bool, cx: &mut Ctx<'_>, f: &mut Fates) {
    let bit = 1u32 << i;
    let state = cx.recirc.ct[i as usize].state;
    if let Some(p) = cx.slots.get_mut(i as usize) {
        // Tracked and not invalid: its checksums were summed and right
        // (or taken as right before), and the tracker's own rewrites
        // (NAT) keep them so. A partial checksum was not summed.
        if state & CS_TRACKED != 0 && state & CS_INVALID == 0 && !p.meta.offload.needs_csum() {
            p.meta.csum_ok = 1;
        }
    }
    cx.recirc.ct_set |= bit;
    if is_last {
        if let Some(p) = cx.slots.take(i as usize) {
            cx.pool.free(p);
        }
        f.ct_end |= bit;
    }
}

/// The state an earlier `ct` gave packet `i` (this pass's, or the one
/// its key came in with).
fn prev_state(cx: &Ctx<'_>, i: u8) -> CtResult {
    if cx.recirc.ct_set & (1u32 << i) != 0 {
        cx.recirc.ct[i as usize]
    } else {
        CtResult::of_key(&cx.keys[i as usize])
    }
}

/// The `ct` action on packets none of which is a fragment and whose
/// keys are what the tracker reads, in three passes: each read (and,
/// with `prefetch`, its group of the tracker's index prefetched); the
/// connections the groups name prefetched (with `prefetch`); each
/// tracked (each shard locked once for all).
fn track_batch(
    req: &CtRequest,
    is_last: bool,
    prefetch: bool,
    pkts: &[u8],
    cx: &mut Ctx<'_>,
    f: &mut Fates,
    now_ms: u64,
) {
    let ct = cx.rules.conntrack();
    // One entry a packet, each written once (an array of them made
    // whole first was 2.5 KB cleared per batch).
    let mut prep: ArrayVec<Prepared, BATCH_SIZE> = ArrayVec::new();
    for &i in pkts {
        prep.push(Prepared::NONE);
        if f.skip & (1u32 << i) != 0 {
            continue;
        }
        let Some(p) = cx.slots.get_mut(i as usize) else {
            continue;
        };
        before_nat(req, p);
        let out = prep.last_mut().expect("pushed");
        ct.prepare_into(p.data(), &p.meta, &cx.keys[i as usize], req.zone, out);
        if prefetch {
            ct.prefetch_group(out);
        }
    }
    if prefetch {
        for p in &prep {
            ct.prefetch_entry(p);
        }
    }
    let mut batch = ct.batch();
    for (n, &i) in pkts.iter().enumerate() {
        if f.skip & (1u32 << i) != 0 {
            continue;
        }
        let prev = prev_state(cx, i);
        let Some(p) = cx.slots.get_mut(i as usize) else {
            continue;
        };
        let meta = p.meta;
        let out = &mut cx.recirc.ct[i as usize];
        batch.track_prepared_into(p.data_mut(), &meta, &prev, req, now_ms, &prep[n], out);
        tracked_in_place(i, is_last, cx, f);
    }
}

/// After a `ct` on a batch: as OVS, one expired list of fragments goes on
/// (`+inv`) with the batch's packets.
fn pkts_done(step: &Step<'_>, cx: &mut Ctx<'_>, now_ms: u64) {
    let Step { acts, ai, drop, .. } = *step;
    let ct = cx.rules.conntrack();
    if ct.ipf().held() != 0 {
        // As OVS, a `ct` sends on one expired list of
        // fragments (`+inv`) with its own packets.
        let rest = crate::fragments::Rest {
            acts: &acts[ai + 1..],
            drop,
        };
        crate::fragments::expire(ct, now_ms, &rest, &mut cx.recirc.released, cx.stats);
    }
}
