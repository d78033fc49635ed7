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
        let caches = &mut self.pipeline.caches;
        if caches.pending_learn.is_empty() {
            return;
        }
        let mut next: Option<RuleSet> = None;
        let mut put = Vec::new();
        for specs in caches.pending_learn.drain(..) {
            for s in specs.iter() {
                if next.is_none() && self.rules.refresh_learned(s, now_us) {
                    continue;
                }
                let set = next.get_or_insert_with(|| (*self.rules).clone());
                if let Some(r) = set.learn(s, now_us) {
                    put.push(r);
                }
            }
        }
        self.stats.learned += put.len() as u64;
        if let Some(set) = next.filter(|_| !put.is_empty()) {
            let queued = set.queue_learned(put);
            self.learned_mine.extend(queued);
            self.install_rules(Arc::new(set));
        }
    }

    /// NORMAL's MAC table or VLAN modes changed (a MAC learned, moved,
    /// aged): the decisions that read them are revalidated before their
    /// next use. One atomic load; after every batch, so that the next
    /// batch already sees what this one's upcalls learned (as OVS after
    /// its revalidators' round).
    #[inline]
    pub(super) fn see_bridge(&mut self) {
        let b = self.rules.bridge();
        let ports = b.ports_version();
        if ports != self.bridge_seen {
            // A VLAN mode changed: any NORMAL decision may.
            self.bridge_seen = ports;
            self.macs_seen = b.macs.version();
            self.epoch += 1;
            return;
        }
        let v = b.macs.version();
        if v == self.macs_seen {
            return;
        }
        // Only the decisions that read the entries that changed (a MAC
        // learned, moved, aged), as OVS's revalidators do with the MAC
        // learning tags of old; after a flush or too many changes, all.
        match b.macs.changes_since(self.macs_seen) {
            Some(keys) => {
                self.stats.revalidation_marks +=
                    self.pipeline.caches.mac_entries_changed(&keys) as u64;
            }
            None => self.epoch += 1,
        }
        self.macs_seen = v;
    }
}
