//! Actions that send packets on to more actions: a select group (each
//! bucket's packets through its list), `check_pkt_len` (each branch's
//! packets through its list), `recirc` (to the next pass).

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::{DpAction, Select as SelectAction};
use sluice_classifier::XlateDrop;
use sluice_conntrack::CtResult;
use sluice_packet::tunnel::TunnelMeta;
use sluice_packet::{Slots, BATCH_SIZE};

use super::{check_len, copy_packets, execute, keeps_packet, Ctx, Fates, Step};
use crate::stats::DropReason;

/// A select group chosen per packet: each variant's packets run its
/// whole action list (no variant is a select again).
pub(super) fn select(sel: &SelectAction, drop: Option<XlateDrop>, pkts: &[u8], cx: &mut Ctx<'_>) {
    let mut variant = [0u16; BATCH_SIZE];
    let mut todo = 0u32;
    for &i in pkts {
        variant[i as usize] = sel.slots.variant_of(&cx.keys[i as usize]) as u16;
        todo |= 1 << i;
    }
    let mut group = [0u8; BATCH_SIZE];
    while todo != 0 {
        let v = variant[todo.trailing_zeros() as usize];
        let (mut n, mut bytes) = (0usize, 0u64);
        for &i in pkts {
            if todo & (1 << i) != 0 && variant[i as usize] == v {
                todo &= !(1 << i);
                group[n] = i;
                n += 1;
                bytes += cx.slots.get(i as usize).map_or(0, |p| p.len() as u64);
            }
        }
        let list = match sel.variants.get(v as usize) {
            // One select per translation: a variant is never one.
            Some((_, list)) if !matches!(**list, [DpAction::Select(_)]) => list,
            _ => {
                for &i in &group[..n] {
                    if let Some(p) = cx.slots.take(i as usize) {
                        cx.pool.free(p);
                    }
                    if cx.counted & (1 << i) == 0 {
                        cx.stats.dropped[DropReason::Xlate(XlateDrop::NoOutput).index()] += 1;
                    }
                }
                continue;
            }
        };
        if let Some(c) = sel.counters.get(v as usize) {
            c.credit(n as u64, bytes, cx.now_us);
        }
        execute(list, drop, &group[..n], cx);
    }
}

/// A `check_pkt_len` action: the packets longer than `len` through `gt`,
/// the others through `le`.
pub(super) fn check_pkt_len(
    len: u16,
    gt: &[DpAction],
    le: &[DpAction],
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
    let (mut big, mut small) = (
        ArrayVec::<u8, BATCH_SIZE>::new(),
        ArrayVec::<u8, BATCH_SIZE>::new(),
    );
    for &i in pkts {
        if f.skip & (1u32 << i) != 0 {
            continue;
        }
        if let Some(p) = cx.slots.get(i as usize) {
            if check_len(p) > usize::from(len) {
                big.push(i);
            } else {
                small.push(i);
            }
        }
    }
    // Last: the packets themselves, their fates the branches'.
    // Otherwise copies, whose fates are not counted (their
    // packets go on with the actions after this one).
    let mut copies: Slots;
    let (targets, branch_counted) = if is_last {
        for &i in big.iter().chain(&small) {
            f.branched |= 1 << i;
        }
        (&mut *cx.slots, cx.counted)
    } else {
        copies = Slots::new();
        let which = big.iter().chain(&small).copied();
        f.no_buf |= copy_packets(which, cx.slots, &mut copies, cx.pool, cx.stats);
        (&mut copies, u32::MAX)
    };
    // The branches start from this list's scratch (a `ct`
    // result so far, the packet changed); the actions after
    // this one find it as it was.
    let saved = (
        cx.recirc.branch,
        cx.recirc.reparse,
        cx.recirc.carried,
        cx.recirc.ct_set,
    );
    // (The results array is copied only when it will be read.)
    let ct_saved = if !is_last && cx.recirc.ct_set != 0 {
        Some(cx.recirc.ct)
    } else {
        None
    };
    cx.recirc.branch = true;
    cx.recirc.reparse |= !acts[..ai].iter().all(keeps_packet);
    {
        let mut sub = Ctx {
            slots: targets,
            pool: &mut *cx.pool,
            out: &mut *cx.out,
            stats: &mut *cx.stats,
            packet_ins: &mut *cx.packet_ins,
            recirc: &mut *cx.recirc,
            now_us: cx.now_us,
            counted: branch_counted,
            rules: cx.rules,
            keys: cx.keys,
            hashes: cx.hashes,
        };
        for (list, group) in [(gt, &big), (le, &small)] {
            if !group.is_empty() {
                execute(list, drop, group, &mut sub);
            }
        }
    }
    (
        cx.recirc.branch,
        cx.recirc.reparse,
        cx.recirc.carried,
        cx.recirc.ct_set,
    ) = saved;
    if let Some(ct) = ct_saved {
        cx.recirc.ct = ct;
    }
}

/// A `recirc` action: each packet (a copy before the last action) queued
/// for pass `id`, with its tunnel and conntrack state.
pub(super) fn recirculate(id: u32, is_last: bool, pkts: &[u8], cx: &mut Ctx<'_>, f: &mut Fates) {
    for &i in pkts {
        if f.skip & (1u32 << i) != 0 {
            continue;
        }
        let bit = 1u32 << i;
        // The next pass's cache hash, from this one's.
        let hash = sluice_packet::hash::recirc_hash(cx.hashes[i as usize], id);
        // The state a `ct` of this run gave it, or what its key had.
        let of_key = (cx.recirc.ct_set & bit == 0).then(|| CtResult::of_key(&cx.keys[i as usize]));
        let tun = TunnelMeta::in_key(&cx.keys[i as usize]);
        if is_last {
            // Moved from its slot to the queue in one copy.
            if cx.slots.is_empty_at(i as usize) {
                cx.stats.copy_failures += 1;
                f.no_buf |= bit;
                continue;
            }
            let tun = cx.recirc.tun_index(tun);
            if !cx.recirc.push_slot(
                i,
                cx.counted,
                cx.slots,
                id,
                of_key.as_ref(),
                tun,
                Some(hash),
            ) {
                if let Some(p) = cx.slots.take(i as usize) {
                    cx.pool.free(p);
                }
                f.recirc_full |= bit;
            }
            continue;
        }
        let Some(mut p) = cx
            .slots
            .get(i as usize)
            .and_then(|p| cx.pool.clone_packet(p))
        else {
            cx.stats.copy_failures += 1;
            f.no_buf |= bit;
            continue;
        };
        p.meta.hash = hash;
        p.meta.has_hash = 1;
        if let Err(p) = cx.recirc.push(i, cx.counted, p, id, of_key.as_ref(), tun) {
            cx.pool.free(p);
            f.recirc_full |= bit;
        }
    }
}
