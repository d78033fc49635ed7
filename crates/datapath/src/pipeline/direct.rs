//! The direct output path: when every flow of a batch only sends to one
//! port (maybe through a meter that only drops) or drops, packets move
//! from the rx batch to their ports' output batches without per-flow
//! execution.

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::DpAction;
use sluice_classifier::meter::Meter;
use sluice_classifier::XlateDrop;
use sluice_packet::{PacketBatch, PacketPool, BATCH_SIZE};

use super::{actions_of, Fate, Pipeline};
use crate::execute::has_destination;
use crate::output::OutputStage;
use crate::stats::{DpStats, DropReason};

impl Pipeline {
    /// The common case: every flow of the batch just sends to one known
    /// port (forwarding, routing without rewrites), maybe through a meter
    /// with drop bands only, or drops. Then each packet moves straight from
    /// the rx batch to its port's output batch (or back to the pool) in
    /// arrival order, which keeps every flow's order, and a batch bound for
    /// one port that no meter thinned moves whole. Returns false, having
    /// moved nothing and metered nothing, otherwise.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn output_directly(
        &mut self,
        batch: &mut PacketBatch,
        classified: u32,
        rules: &sluice_classifier::RuleSet,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) -> bool {
        // The flows that go through a meter, with it.
        let mut meters = ArrayVec::<(usize, &Meter), BATCH_SIZE>::new();
        for (gi, g) in self.groups.iter_mut().enumerate() {
            let (actions, drop) = actions_of(&self.caches, &self.temps, g.target);
            g.fate = match *actions {
                [DpAction::Output(ofport)] => match out.index_of(ofport) {
                    Some(idx) => Some(Fate::Port(idx)),
                    None => return false,
                },
                [DpAction::Meter(id), DpAction::Output(ofport)] => {
                    match (rules.meter(id), out.index_of(ofport)) {
                        (Some(m), Some(idx)) if m.drops_only() => {
                            meters.push((gi, m));
                            Some(Fate::Port(idx))
                        }
                        _ => return false,
                    }
                }
                _ if !has_destination(actions) => {
                    // As `execute` drops a flow with no output.
                    Some(Fate::Drop(DropReason::Xlate(
                        drop.unwrap_or(XlateDrop::NoOutput),
                    )))
                }
                _ => return false,
            };
        }
        // Every flow qualified: now its meter, once per flow (as `execute`).
        let metered = self.meter_groups(batch, &meters, now_us);
        let n = classified.count_ones() as usize;
        let n_rx = batch.len();
        let first = self.groups.first().and_then(|g| g.fate);
        let one_port = first
            .filter(|f| matches!(f, Fate::Port(_)) && self.groups.iter().all(|g| g.fate == first));
        match one_port {
            Some(Fate::Port(idx)) if n == n_rx && metered == 0 => {
                out.enqueue_all(idx, batch, pool, stats, now_us);
                stats.forwarded += n as u64;
            }
            _ => {
                let mut unload = batch.unload();
                for i in 0..n_rx {
                    if classified & (1 << i) == 0 {
                        stats.dropped[self.unclassified_reason(i).index()] += 1;
                        unload.free(pool);
                        continue;
                    }
                    if metered & (1 << i) != 0 {
                        stats.dropped[DropReason::MeterDrop.index()] += 1;
                        unload.free(pool);
                        continue;
                    }
                    let g = &self.groups[self.group_of[i] as usize];
                    match g.fate.expect("resolved above") {
                        Fate::Port(idx) => {
                            out.enqueue_front(idx, &mut unload, pool, stats, now_us);
                            stats.forwarded += 1;
                        }
                        Fate::Drop(reason) => {
                            stats.dropped[reason.index()] += 1;
                            unload.free(pool);
                        }
                    }
                }
            }
        }
        true
    }

    /// Applies each metered flow's meter (drop bands only:
    /// [`Pipeline::output_directly`] checked), given as (group, meter), to
    /// its packets; returns the batch positions the meters drop.
    fn meter_groups(&self, batch: &PacketBatch, meters: &[(usize, &Meter)], now_us: u64) -> u32 {
        let pkts = batch.as_slice();
        let mut dropped = 0u32;
        for &(gi, m) in meters {
            let g = &self.groups[gi];
            let mut lens = ArrayVec::<usize, BATCH_SIZE>::new();
            for &i in &g.pkts {
                lens.push(pkts[i as usize].len());
            }
            let v = m.apply(now_us, &lens);
            for (k, &i) in g.pkts.iter().enumerate() {
                if v.drop & (1 << k) != 0 {
                    dropped |= 1 << i;
                }
            }
        }
        dropped
    }
}
