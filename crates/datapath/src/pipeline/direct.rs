//! The direct output path: when every flow of a batch only sends to one
//! port (maybe through a meter that only drops) or drops, packets move
//! from the rx batch to their ports' output batches without per-flow
//! execution.

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::{DpAction, Select};
use sluice_classifier::megaflow::FlowRef;
use sluice_classifier::meter::Meter;
use sluice_classifier::XlateDrop;
use sluice_packet::{PacketBatch, PacketPool, BATCH_SIZE};

use super::{actions_of, Fate, Pipeline, TargetKind};
use crate::execute::has_destination;
use crate::output::OutputStage;
use crate::stats::{DpStats, DropReason};

/// Most buckets of a select group the direct path takes.
const MAX_VARIANTS: usize = 16;

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
        // Select groups of outputs only: the group, its variants' ports.
        let mut selects = ArrayVec::<(usize, &Select, [u16; MAX_VARIANTS]), 4>::new();
        for (gi, g) in self.groups.iter_mut().enumerate() {
            let (actions, drop) = actions_of(&self.caches, &self.temps, g.target);
            g.fate = match *actions {
                [DpAction::Select(ref sel)] => {
                    let mut ports = [0u16; MAX_VARIANTS];
                    if sel.variants.len() > MAX_VARIANTS || selects.is_full() {
                        return false;
                    }
                    for (p, (_, v)) in ports.iter_mut().zip(&sel.variants) {
                        match **v {
                            [DpAction::Output(ofport)] => match out.index_of(ofport) {
                                Some(idx) => *p = idx as u16,
                                None => return false,
                            },
                            _ => return false,
                        }
                    }
                    selects.push((gi, sel, ports));
                    let n = sel.variants.len();
                    if ports[1..n].iter().all(|&p| p == ports[0]) {
                        // One port whichever bucket: only the counters
                        // need each packet's choice.
                        Some(Fate::Port(usize::from(ports[0])))
                    } else {
                        Some(Fate::PerPacket)
                    }
                }
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
        // Every flow qualified: now its meter, once per flow (as `execute`),
        // and each select's packets' ports.
        let metered = self.meter_groups(batch, &meters, now_us);
        let mut port_of = [0u16; BATCH_SIZE];
        let mut hits = ArrayVec::<(FlowRef, usize, [(u64, u64); MAX_VARIANTS]), 4>::new();
        for &(gi, sel, ports) in &selects {
            let g = &self.groups[gi];
            let pkts = batch.as_slice();
            let mut vs = [0u8; BATCH_SIZE];
            let mut lens = [0u64; BATCH_SIZE];
            for (k, &i) in g.pkts.iter().enumerate() {
                let v = sel.slots.variant_of(&self.keys[i as usize]) & (MAX_VARIANTS - 1);
                port_of[i as usize] = ports[v];
                vs[k] = v as u8;
                lens[k] = pkts[i as usize].len() as u64;
            }
            // Counted per variant without branches (which bucket a packet
            // takes is as good as random) and in registers.
            let mut counts = [(0u64, 0u64); MAX_VARIANTS];
            let m = g.pkts.len();
            for (v, c) in counts.iter_mut().enumerate().take(sel.variants.len()) {
                let (mut n, mut b) = (0u64, 0u64);
                for (&x, &len) in vs[..m].iter().zip(&lens[..m]) {
                    let hit = u64::from(usize::from(x) == v);
                    n += hit;
                    b += hit * len;
                }
                *c = (n, b);
            }
            match g.target.kind() {
                TargetKind::Mega(r) => hits.push((r, sel.variants.len(), counts)),
                _ => {
                    for (c, (n, bytes)) in sel.counters.iter().zip(counts) {
                        if n > 0 {
                            c.credit(n, bytes, now_us);
                        }
                    }
                }
            }
        }
        // Credited to the buckets with the megaflow's own hits, in bulk
        // ([`Megaflow::credit_rules`]).
        drop(selects);
        for (r, n, counts) in hits {
            let f = self.caches.megaflows.get_mut(r).expect("still live");
            if f.select_hits.len() < n {
                f.select_hits.resize(n, (0, 0));
            }
            for (h, c) in f.select_hits.iter_mut().zip(counts) {
                h.0 += c.0;
                h.1 += c.1;
            }
        }
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
                for (i, &port) in port_of.iter().enumerate().take(n_rx) {
                    if classified & (1 << i) == 0 {
                        stats.dropped[DropReason::Runt.index()] += 1;
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
                        Fate::PerPacket => {
                            let idx = usize::from(port);
                            out.enqueue_front(idx, &mut unload, pool, stats, now_us);
                            stats.forwarded += 1;
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
