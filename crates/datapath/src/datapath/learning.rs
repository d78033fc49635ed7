//! What a PMD learns beside forwarding: rules its translations' `learn`
//! actions built, and the NORMAL MAC table's changes it revalidates for.

use std::sync::Arc;

use sluice_classifier::RuleSet;

use super::Datapath;

impl Datapath {
    /// Applies what `learn` actions built since the last call (the
    /// batch's upcalls, hit megaflows, a packet-out) to this thread's
    /// rules: a refresh costs an atomic store; a rule added or changed
    /// makes a new version (cached decisions revalidate before their next
    /// use, so the next batch sees the rule) and goes to the control
    /// plane.
    pub(super) fn apply_learned(&mut self, now_us: u64) {
        if self.pipeline.caches.pending_learn.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pipeline.caches.pending_learn);
        // Per bridge: its next version (once a rule is added or changed)
        // and the rules added. Bridges are few: a short list.
        let mut work: Vec<(u16, Option<RuleSet>, Vec<_>)> = Vec::new();
        for specs in pending.drain(..) {
            for (b, s) in specs.iter() {
                let Some(cur) = self.bridge_rules(*b) else {
                    // Its bridge is gone.
                    continue;
                };
                let i = match work.iter().position(|w| w.0 == *b) {
                    Some(i) => i,
                    None => {
                        work.push((*b, None, Vec::new()));
                        work.len() - 1
                    }
                };
                let w = &mut work[i];
                if w.1.is_none() && cur.refresh_learned(s, now_us) {
                    continue;
                }
                let set = w.1.get_or_insert_with(|| (**cur).clone());
                if let Some(r) = set.learn(s, now_us) {
                    w.2.push(r);
                }
            }
        }
        self.pipeline.caches.pending_learn = pending;
        for (b, next, put) in work {
            self.stats.learned += put.len() as u64;
            let Some(set) = next.filter(|_| !put.is_empty()) else {
                continue;
            };
            let queued = set.queue_learned(put);
            if b == 0 {
                self.learned_mine.extend(queued);
                self.install_rules(Arc::new(set));
            } else {
                self.extra_state[b as usize].learned_mine.extend(queued);
                self.install_bridge_rules(b, Arc::new(set));
            }
        }
    }

    /// NORMAL's MAC table or VLAN modes changed (a MAC learned, moved,
    /// aged): the decisions that read them are revalidated before their
    /// next use. One atomic load; after every batch, so that the next
    /// batch already sees what this one's upcalls learned (as OVS after
    /// its revalidators' round).
    #[inline]
    pub(super) fn see_bridge(&mut self) {
        let mut seen = Seen {
            epoch: &mut self.epoch,
            caches: &mut self.pipeline.caches,
            stats: &mut self.stats,
        };
        seen.one(
            self.rules.bridge(),
            &mut self.bridge_seen,
            &mut self.macs_seen,
        );
        for (v, st) in self.extra.iter().zip(self.extra_state.iter_mut()) {
            if let Some(v) = v {
                seen.one(v.rules.bridge(), &mut st.bridge_seen, &mut st.macs_seen);
            }
        }
    }
}

/// What seeing a bridge's MAC table changes.
struct Seen<'a> {
    epoch: &'a mut u64,
    caches: &'a mut crate::cascade::Caches,
    stats: &'a mut crate::stats::DpStats,
}

impl Seen<'_> {
    /// One bridge's part of [`Datapath::see_bridge`]: its versions last
    /// seen are `ports_seen` and `macs_seen`. The bridges' MAC tables
    /// share the cached decisions' index of entries read: a change in one
    /// bridge revalidates the decisions that read the same (VLAN, MAC) in
    /// any (more than needed, never less).
    #[inline]
    fn one(&mut self, b: &sluice_bridge::Bridge, ports_seen: &mut u64, macs_seen: &mut u64) {
        let ports = b.ports_version();
        if ports != *ports_seen {
            // A VLAN mode changed: any NORMAL decision may.
            *ports_seen = ports;
            *macs_seen = b.macs.version();
            *self.epoch += 1;
            return;
        }
        let v = b.macs.version();
        if v == *macs_seen {
            return;
        }
        // Only the decisions that read the entries that changed (a MAC
        // learned, moved, aged), as OVS's revalidators do with the MAC
        // learning tags of old; after a flush or too many changes, all.
        match b.macs.changes_since(*macs_seen) {
            Some(keys) => {
                self.stats.revalidation_marks += self.caches.mac_entries_changed(&keys) as u64;
            }
            None => *self.epoch += 1,
        }
        *macs_seen = v;
    }
}
