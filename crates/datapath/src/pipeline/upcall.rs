//! The upcall stage: the misses of a batch translated in arrival order,
//! one translation per distinct flow, or left to wait for the upcall
//! budget ([`super::waiting`]).

use sluice_classifier::XlateEnv;
use sluice_packet::batch::set_bits;
use sluice_packet::FlowKey;

use super::{Pipeline, Target, Wait, UPCALL_SAMPLES};
use crate::stats::DpStats;

impl Pipeline {
    pub(super) fn upcall_stage(
        &mut self,
        todo: u32,
        mut wait: Wait,
        env: XlateEnv<'_>,
        epoch: u64,
        now_us: u64,
        stats: &mut DpStats,
    ) {
        self.n_temps = 0;
        // The subtables this batch's installs went into: a later miss of
        // the batch missed every other one already.
        let mut installed = arrayvec::ArrayVec::<u32, 32>::new();
        // Every miss starts in table 0: its prefix tries' nodes for the
        // whole batch are fetched together rather than one walk at a time.
        let missed: arrayvec::ArrayVec<&FlowKey, 32> =
            set_bits(todo).map(|i| &self.keys[i]).collect();
        env.rules.warm(0, missed.iter().copied());
        let limited = self.upcall_budget.limited();
        if limited {
            self.upcall_budget.refill(crate::cycles::now());
        }
        for i in set_bits(todo) {
            let key = self.keys[i];
            // An earlier miss of this batch may have installed a megaflow
            // that covers this packet too.
            if !installed.is_empty() {
                let mut probes = 0;
                let again = self
                    .caches
                    .megaflows
                    .lookup_in(&key, &installed, &mut probes);
                stats.subtable_lookups += probes;
                if let Some(r) = again.filter(|&r| self.caches.fresh(r, env, epoch, stats)) {
                    self.targets[i] = Target::mega(r);
                    stats.megaflow_hits += 1;
                    continue;
                }
            }
            if let Some(t) = self.temps[..self.n_temps].iter().position(|t| t.key == key) {
                // A miss forwarded by an uncached translation: counted like
                // the one that made it.
                self.targets[i] = Target::temp(t as u8);
                stats.failed_upcalls += 1;
                continue;
            }
            let timed = limited || self.time_upcalls;
            let start = if timed { crate::cycles::now() } else { 0 };
            let refused = limited && !self.upcall_budget.allows(start);
            if wait.may {
                // Misses wait in arrival order: after the first of the
                // batch that waits, every later one does. One the budget
                // refuses waits even in a full queue: it is dropped
                // there, counted.
                let wants = wait.first || self.defer != 0 || refused;
                if refused || (wants && wait.room > 0) {
                    self.defer |= 1 << i;
                    self.defer_miss |= 1 << i;
                    wait.room = wait.room.saturating_sub(1);
                    continue;
                }
            }
            // Otherwise (a source that can wait, a recirculation, the
            // datapath's end) it is translated now, and charged.
            let result = self
                .caches
                .upcall(&key, self.hashes[i], env, epoch, now_us, stats);
            if timed {
                let spent = crate::cycles::now().wrapping_sub(start);
                if limited {
                    self.upcall_budget.charge(spent);
                }
                if self.time_upcalls && self.upcall_cycles.len() < UPCALL_SAMPLES {
                    self.upcall_cycles.push(spent);
                }
            }
            match result {
                Ok(r) => {
                    self.targets[i] = Target::mega(r);
                    self.upcalled |= 1 << i;
                    if let Some(sid) = self.caches.megaflows.subtable_of(r) {
                        if !installed.contains(&sid) {
                            installed.push(sid);
                        }
                    }
                }
                Err(_) => {
                    // Forward by the translation without caching it.
                    let t = &mut self.temps[self.n_temps];
                    t.key = key;
                    std::mem::swap(&mut t.xlate, &mut self.caches.xlate);
                    self.targets[i] = Target::temp(self.n_temps as u8);
                    self.n_temps += 1;
                }
            }
        }
    }
}
