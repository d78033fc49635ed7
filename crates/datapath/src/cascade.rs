//! The cache cascade of one datapath thread: EMC → SMC → megaflow
//! classifier → upcall (translation through the rule tables).
//!
//! Never stale: every megaflow records the datapath *epoch* (bumped on
//! every rule or port change) it was translated or last revalidated
//! against. A hit on an older megaflow — from any cache level — is
//! revalidated before use: the megaflow's masked key is translated again
//! under the current rules; if the new decision depends only on bits the
//! megaflow already matches, the entry is updated in place (actions,
//! rules to credit) and used; otherwise it is removed and the packet goes
//! on as a miss. So no packet processed after a rule change is forwarded
//! by a decision made under the old rules. Housekeeping also revalidates
//! eagerly after a change and expires idle megaflows, so dead ones do not
//! linger in `dump-megaflows`.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_cache::emc::{self, Emc};
use sluice_cache::smc::{self, Smc};
use sluice_cache::CacheRef;
use sluice_classifier::dpaction::DpAction;
use sluice_classifier::megaflow::{
    FlowRef, InstallError, MacReads, Megaflow, MegaflowLimits, MegaflowTable,
};
use sluice_classifier::table::Rule;
use sluice_classifier::{translate, FlowSpec, Match, Translation, XlateEnv};
use sluice_packet::FlowKey;

use crate::stats::DpStats;

/// Cache geometry and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// EMC entries (8192, as OVS).
    pub emc_entries: usize,
    /// EMC insertion probability is 1/this (100, as OVS); 0 turns the EMC off.
    pub emc_insert_inv_prob: u32,
    /// SMC entries (1M, as OVS).
    pub smc_entries: usize,
    /// Whether the SMC is used.
    pub smc_enabled: bool,
    /// Megaflow table limits.
    pub megaflow: MegaflowLimits,
    /// Megaflows unused for this long are removed (10 s, OVS's `max-idle`).
    pub max_idle_us: u64,
    /// Whether megaflows wildcard the bits no rule consulted (true, the
    /// point of them). False makes every megaflow an exact match of the
    /// packet's whole key, as OVS's `upcall/disable-megaflows` does: every
    /// new flow then costs an upcall (for debugging, and for measuring the
    /// flow-setup rate).
    pub megaflows: bool,
    /// Share (%) of the PMD's cycles upcalls may take while cached traffic
    /// competes (25: a refused miss still costs its cache lookups, and the
    /// rest must leave established flows most of the PMD); misses beyond
    /// it are dropped as `upcall budget` so that established flows keep
    /// their rate in a miss storm. 100: no limit.
    pub upcall_share_pct: u32,
    /// Share (%) of the PMD's cycles making packet-ins may take while the
    /// PMD also forwards (10): a flood of packet-ins for the controller
    /// beyond it is dropped as `upcall budget`, so forwarded flows keep at
    /// least about 80 % of their rate even with no packet-in rate limit.
    /// With nothing forwarded, nothing is refused. 100: no limit.
    pub packet_in_share_pct: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            emc_entries: emc::DEFAULT_ENTRIES,
            emc_insert_inv_prob: emc::DEFAULT_INSERT_INV_PROB,
            smc_entries: smc::DEFAULT_ENTRIES,
            smc_enabled: true,
            megaflow: MegaflowLimits::default(),
            max_idle_us: 10_000_000,
            megaflows: true,
            upcall_share_pct: 25,
            packet_in_share_pct: 10,
        }
    }
}

#[inline]
pub(crate) fn cref(r: FlowRef) -> CacheRef {
    CacheRef {
        idx: r.idx,
        gen: r.gen,
    }
}

#[inline]
pub(crate) fn fref(c: CacheRef) -> FlowRef {
    FlowRef {
        idx: c.idx,
        gen: c.gen,
    }
}

/// A megaflow's actions and rules, shareable between megaflows.
type SharedTranslation = (Arc<[DpAction]>, Arc<[Arc<Rule>]>);

/// The caches and the miss path's scratch translation.
pub(crate) struct Caches {
    pub emc: Emc,
    pub smc: Smc,
    pub megaflows: MegaflowTable,
    /// Scratch for upcalls and revalidation; after a failed install it
    /// holds the translation the caller forwards with.
    pub xlate: Translation,
    pub cfg: CacheConfig,
    /// The actions and rules given to the megaflow installed last.
    last_translation: Option<SharedTranslation>,
    /// When `NORMAL` megaflows last relearned their sources (µs).
    relearned_us: u64,
    /// Rules `learn` actions built (upcalls, hit megaflows), for the
    /// datapath to apply after the batch.
    pub pending_learn: Vec<Arc<[(u16, FlowSpec)]>>,
    /// Megaflows by the NORMAL MAC table entry their decision read
    /// ([`MacReads`]), and those that read several: a change of an entry
    /// revalidates those, not every megaflow. Entries may name megaflows
    /// since gone (their generation says so); pruned as they are read,
    /// and rebuilt when they outgrow the table.
    mac_index: HashMap<MacKey, Vec<FlowRef>>,
    mac_many: Vec<FlowRef>,
    mac_index_refs: usize,
}

type MacKey = sluice_bridge::macs::Key;

/// The rules a translation learned, shared by its megaflow and the
/// datapath's queue (`None`: it has no `learn`).
pub(crate) fn learned_of(x: &Translation) -> Option<Arc<[(u16, FlowSpec)]>> {
    (!x.learned.is_empty()).then(|| Arc::from(&x.learned[..]))
}

/// Learns what a translation's `NORMAL`s saw, each in its bridge's MAC
/// table.
pub(crate) fn learn_macs(learns: &sluice_bridge::macs::Learns, env: XlateEnv<'_>) {
    for l in learns.iter() {
        if let Some(r) = env.rules_of(l.bridge) {
            let b = r.bridge();
            b.macs.learn(l.mac, l.vlan, l.port, b.now_ms());
        }
    }
}

/// The `fin_timeout`s a translation ran (`None`: none), applied at once
/// to its rules: the translating packet is a FIN or RST.
pub(crate) fn fin_of(x: &Translation) -> Option<Arc<[(usize, u16, u16)]>> {
    for &(ix, idle, hard) in &x.fin_timeouts {
        if let Some(r) = x.rules.get(ix) {
            r.reduce_timeouts(idle, hard);
        }
    }
    (!x.fin_timeouts.is_empty()).then(|| Arc::from(&x.fin_timeouts[..]))
}

impl Caches {
    pub fn new(cfg: CacheConfig) -> Self {
        Caches {
            emc: Emc::new(cfg.emc_entries, cfg.emc_insert_inv_prob),
            smc: Smc::new(cfg.smc_entries, cfg.smc_enabled),
            megaflows: MegaflowTable::new(cfg.megaflow),
            xlate: Translation::default(),
            cfg,
            last_translation: None,
            relearned_us: 0,
            pending_learn: Vec::new(),
            mac_index: HashMap::new(),
            mac_many: Vec::new(),
            mac_index_refs: 0,
        }
    }

    /// The actions and rules of the scratch translation, each shared with
    /// the megaflow installed last when it is the same (one allocation per
    /// distinct list, not per megaflow: a miss storm over many rules with
    /// the same actions allocates the rule list only).
    fn shared_translation(&mut self) -> SharedTranslation {
        let x = &self.xlate;
        let last = self.last_translation.as_ref();
        let actions = match last {
            Some((a, _)) if **a == *x.actions => Arc::clone(a),
            _ => Arc::from(&x.actions[..]),
        };
        let rules = match last {
            Some((_, r))
                if r.len() == x.rules.len()
                    && r.iter().zip(&x.rules).all(|(p, q)| Arc::ptr_eq(p, q)) =>
            {
                Arc::clone(r)
            }
            _ => Arc::from(&x.rules[..]),
        };
        self.last_translation = Some((Arc::clone(&actions), Arc::clone(&rules)));
        (actions, rules)
    }

    /// Whether megaflow `r` may serve a packet now (revalidating it if it
    /// predates `epoch`).
    #[inline]
    pub fn fresh(
        &mut self,
        r: FlowRef,
        env: XlateEnv<'_>,
        epoch: u64,
        stats: &mut DpStats,
    ) -> bool {
        match self.megaflows.get(r) {
            None => false,
            Some(f) if f.version == epoch => true,
            Some(_) => self.revalidate(r, env, epoch, stats),
        }
    }

    /// Translates megaflow `r`'s key again under the current rules; keeps
    /// (and updates) it if the new decision needs no bit it does not match.
    pub fn revalidate(
        &mut self,
        r: FlowRef,
        env: XlateEnv<'_>,
        epoch: u64,
        stats: &mut DpStats,
    ) -> bool {
        let Some(f) = self.megaflows.get(r) else {
            return false;
        };
        let Match { value, mask } = f.matcher;
        translate(env, &value, &mut self.xlate, false);
        let wc = self.xlate.wc;
        if wc.masked(&mask) == wc {
            let f = self.megaflows.get_mut(r).expect("checked above");
            // Hits so far were forwarded by the old rules: theirs.
            f.credit_rules();
            let drop = self.xlate.drop;
            let (actions, rules) = self.shared_translation();
            let f = self.megaflows.get_mut(r).expect("checked above");
            f.actions = actions;
            f.drop = drop;
            f.rules = rules;
            f.learn = self.xlate.learn;
            f.learned = learned_of(&self.xlate);
            f.fin = (!self.xlate.fin_timeouts.is_empty())
                .then(|| Arc::from(&self.xlate.fin_timeouts[..]));
            let reads = MacReads::of(&self.xlate.mac_reads);
            let changed = f.mac_reads != reads;
            f.mac_reads = reads;
            f.version = epoch;
            if changed {
                self.index_mac_reads(r, reads);
            }
            stats.revalidated += 1;
            true
        } else {
            self.megaflows.remove(r);
            stats.invalidated += 1;
            false
        }
    }

    /// Translates a missed key and installs the megaflow. On a refused
    /// install the translation stays in `self.xlate` for the caller.
    pub fn upcall(
        &mut self,
        key: &FlowKey,
        hash: u32,
        env: XlateEnv<'_>,
        epoch: u64,
        now_us: u64,
        stats: &mut DpStats,
    ) -> Result<FlowRef, InstallError> {
        translate(env, key, &mut self.xlate, false);
        // The one translation allowed side effects: NORMAL learns.
        learn_macs(&self.xlate.learn, env);
        let learned = learned_of(&self.xlate);
        if let Some(l) = &learned {
            // So are `learn` actions: the datapath applies them after the
            // batch.
            self.pending_learn.push(Arc::clone(l));
        }
        let mask = if self.cfg.megaflows {
            self.xlate.wc
        } else {
            FlowKey::exact_packet_mask()
        };
        let (actions, rules) = self.shared_translation();
        let m = Megaflow {
            matcher: Match {
                value: key.masked(&mask),
                mask,
            },
            actions,
            drop: self.xlate.drop,
            rules,
            version: epoch,
            packets: 0,
            bytes: 0,
            used_us: now_us,
            created_us: now_us,
            upcall_packets: 0,
            upcall_bytes: 0,
            credited: (0, 0),
            select_hits: Vec::new(),
            learn: self.xlate.learn,
            learned,
            mac_reads: MacReads::of(&self.xlate.mac_reads),
            fin: fin_of(&self.xlate),
        };
        let reads = m.mac_reads;
        match self.megaflows.insert(m) {
            Ok(r) => {
                self.index_mac_reads(r, reads);
                stats.upcalls += 1;
                self.smc.insert(hash, r.idx);
                self.emc.probabilistic_insert(key, hash, cref(r));
                Ok(r)
            }
            Err(e) => {
                stats.failed_upcalls += 1;
                match e {
                    InstallError::FlowLimit => stats.flow_limit_hits += 1,
                    InstallError::MaskLimit => stats.mask_limit_hits += 1,
                }
                Err(e)
            }
        }
    }

    /// Records that megaflow `r`'s decision read `reads`.
    fn index_mac_reads(&mut self, r: FlowRef, reads: MacReads) {
        match reads {
            MacReads::None => return,
            MacReads::One(k) => self.mac_index.entry(k).or_default().push(r),
            MacReads::Many => self.mac_many.push(r),
        }
        self.mac_index_refs += 1;
        if self.mac_index_refs > 2 * self.megaflows.len() + 1024 {
            self.rebuild_mac_index();
        }
    }

    /// The index again from the megaflows (when gone ones crowd it).
    fn rebuild_mac_index(&mut self) {
        self.mac_index.clear();
        self.mac_many.clear();
        self.mac_index_refs = 0;
        for (r, f) in self.megaflows.iter() {
            match f.mac_reads {
                MacReads::None => continue,
                MacReads::One(k) => self.mac_index.entry(k).or_default().push(r),
                MacReads::Many => self.mac_many.push(r),
            }
            self.mac_index_refs += 1;
        }
    }

    /// NORMAL's MAC table changed at `keys`: the megaflows whose decision
    /// read one of them (and those that read several) are revalidated
    /// before their next use. Returns how many were marked.
    pub fn mac_entries_changed(&mut self, keys: &[MacKey]) -> usize {
        let mut marked = 0;
        let megaflows = &mut self.megaflows;
        let mut mark = |list: &mut Vec<FlowRef>| {
            list.retain(|&r| match megaflows.get_mut(r) {
                Some(f) => {
                    // Older than any epoch: `fresh` revalidates it.
                    f.version = 0;
                    marked += 1;
                    true
                }
                None => false,
            });
        };
        for k in keys {
            if let Some(list) = self.mac_index.get_mut(k) {
                let before = list.len();
                mark(list);
                self.mac_index_refs -= before - list.len();
                if list.is_empty() {
                    self.mac_index.remove(k);
                }
            }
        }
        if !keys.is_empty() {
            let before = self.mac_many.len();
            mark(&mut self.mac_many);
            self.mac_index_refs -= before - self.mac_many.len();
        }
        marked
    }

    /// Periodic work: rank subtables, expire idle megaflows, revalidate
    /// megaflows older than `epoch` (at most `budget`), sweep the EMC.
    pub fn housekeeping(
        &mut self,
        env: XlateEnv<'_>,
        epoch: u64,
        now_us: u64,
        budget: usize,
        stats: &mut DpStats,
    ) {
        self.megaflows.rank();
        // Sources NORMAL megaflows' packets carried since the last pass.
        let since = std::mem::replace(&mut self.relearned_us, now_us);
        for (_, f) in self.megaflows.iter() {
            for l in f.relearn(since).iter() {
                let Some(b) = env.rules_of(l.bridge).map(|r| r.bridge()) else {
                    continue;
                };
                // Its last packet, on the bridge's clock.
                let now_ms = b.now_ms();
                let hit_ms = now_ms.saturating_sub(now_us.saturating_sub(f.used_us) / 1000);
                b.macs.refresh(l.mac, l.vlan, l.port, hit_ms, now_ms);
            }
            if let Some(l) = f.learned.as_ref().filter(|_| f.hit_since(since)) {
                self.pending_learn.push(Arc::clone(l));
            }
            if f.fin.is_some() && f.hit_since(since) {
                f.apply_fin();
            }
        }
        let max_idle = self.cfg.max_idle_us;
        stats.idle_expired +=
            self.megaflows
                .retain(|_, f| now_us.saturating_sub(f.used_us) < max_idle) as u64;
        let stale: Vec<FlowRef> = self
            .megaflows
            .iter()
            .filter(|(_, f)| f.version != epoch)
            .map(|(r, _)| r)
            .take(budget)
            .collect();
        for r in stale {
            self.revalidate(r, env, epoch, stats);
        }
        let megaflows = &self.megaflows;
        self.emc.sweep(1024, |c| megaflows.get(fref(c)).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_translations_share_one_allocation() {
        let mut c = Caches::new(CacheConfig::default());
        c.xlate.actions = vec![DpAction::Output(2)];
        let (a1, r1) = c.shared_translation();
        let (a2, r2) = c.shared_translation();
        assert!(Arc::ptr_eq(&a1, &a2) && Arc::ptr_eq(&r1, &r2));
        c.xlate.actions = vec![DpAction::Output(3)];
        let (a3, _) = c.shared_translation();
        assert!(!Arc::ptr_eq(&a1, &a3));
        assert_eq!(*a3, [DpAction::Output(3)]);
        assert_eq!(*a1, [DpAction::Output(2)], "the old one is untouched");
    }
}
