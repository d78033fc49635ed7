//! Rules `learn` actions add.
//!
//! A datapath thread applies what a packet's translation learned to its
//! own copy of the rules at once ([`RuleSet::learn`]), so that its next
//! packets see it, and hands each rule it put there to the control
//! plane, which owns the rules, through the [`LearnQueue`] every version
//! shares. The control plane puts those very rules (the same `Arc`, so
//! their counters carry on) into its own set ([`RuleSet::adopt_learned`])
//! and publishes it; the version says up to which rule it holds what was
//! learned ([`RuleSet::learned_seq`]), so that a thread given a version
//! made before its latest rules got there puts them back
//! ([`RuleSet::keep_learned`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{Rule, RuleSet};
use crate::action::Action;
use crate::learn::{flag, Learn};
use crate::parse::FlowSpec;

/// The `learn` actions of an action list (in its clones too).
fn learns_of(actions: &[Action]) -> impl Iterator<Item = &Learn> + '_ {
    actions
        .iter()
        .flat_map(|a| -> Box<dyn Iterator<Item = &Learn> + '_> {
            match a {
                Action::Learn(l) => Box::new(std::iter::once(&**l)),
                Action::Clone(inner) => Box::new(learns_of(inner)),
                _ => Box::new(std::iter::empty()),
            }
        })
}

/// Rules learned by datapath threads, for the control plane.
#[derive(Debug, Default)]
pub struct LearnQueue {
    seq: AtomicU64,
    pending: Mutex<Vec<(u64, Arc<Rule>)>>,
    /// Whether a control plane takes them (without one, a thread's copy
    /// is the only set and nothing is queued).
    drained: AtomicBool,
}

/// A rule a thread learned, numbered in the order of the queue.
pub type Learned = (u64, Arc<Rule>);

impl LearnQueue {
    /// How many rules wait.
    pub fn len(&self) -> usize {
        self.pending.lock().expect("learn queue").len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RuleSet {
    /// Adds the rule `spec` describes or, when one with its table,
    /// priority and match is there, refreshes it (its hard timeout starts
    /// again) if it is the same, else gives it `spec`'s actions, cookie,
    /// timeouts and flags, keeping its age and counters (OVS's learned
    /// `MODIFY_STRICT`). Returns the rule put into the set (a new
    /// version), `None` after a refresh. O(log n).
    pub fn learn(&mut self, spec: &FlowSpec, now_us: u64) -> Option<Arc<Rule>> {
        if self.refresh_learned(spec, now_us) {
            return None;
        }
        // Learned past its limit (by several packets of one batch, each
        // translated before the others' rules were in): not put.
        if !self.learn_allowed(spec) {
            return None;
        }
        let old = self
            .tables
            .get(usize::from(spec.table))
            .and_then(|t| t.find(&spec.matcher, spec.priority))
            .cloned();
        let rule = match old {
            Some(old) => {
                let new = Rule {
                    id: old.id,
                    created_us: old.created_us,
                    ..Self::rule_of(spec, old.id, now_us)
                };
                let (p, b) = old.counters();
                new.credit(p, b, old.stats.last_used_us.load(Ordering::Relaxed));
                new.touch(now_us);
                new
            }
            None => Self::rule_of(spec, self.alloc_ids(1), now_us),
        };
        let rule = Arc::new(rule);
        self.put(Arc::clone(&rule));
        self.version += 1;
        Some(rule)
    }

    /// Whether a `learn` with a limit may put the rule `spec` describes:
    /// it is here as it says (a refresh), or its table holds fewer than
    /// the limit rules of its cookie (OVS counts them so). No limit: yes.
    /// O(rules of the table) with a limit, as OVS's count.
    pub fn learn_allowed(&self, spec: &FlowSpec) -> bool {
        if spec.learn_limit == 0 || self.is_learned_here(spec) {
            return true;
        }
        let n = self
            .table(spec.table)
            .filter(|r| r.cookie == spec.cookie)
            .count();
        n < spec.learn_limit as usize
    }

    fn is_learned_here(&self, spec: &FlowSpec) -> bool {
        self.tables
            .get(usize::from(spec.table))
            .and_then(|t| t.find(&spec.matcher, spec.priority))
            .is_some_and(|old| {
                old.actions == spec.actions
                    && old.cookie == spec.cookie
                    && old.idle_timeout == spec.idle_timeout
                    && old.hard_timeout == spec.hard_timeout
                    && old.flags == spec.flags
            })
    }

    /// [`RuleSet::learn`] when it would only refresh: if the rule `spec`
    /// describes is here as it says, starts its hard timeout again and
    /// returns true. O(log n), no change of version.
    pub fn refresh_learned(&self, spec: &FlowSpec, now_us: u64) -> bool {
        let same = self.is_learned_here(spec);
        if same {
            if let Some(old) = self
                .tables
                .get(usize::from(spec.table))
                .and_then(|t| t.find(&spec.matcher, spec.priority))
            {
                old.touch(now_us);
            }
        }
        same
    }

    /// Hands rules a datapath thread put into its copy to the control
    /// plane (nothing when there is none). Returns them numbered, for
    /// [`RuleSet::keep_learned`].
    pub fn queue_learned(&self, rules: Vec<Arc<Rule>>) -> Vec<Learned> {
        let q = &self.learn_queue;
        if !q.drained.load(Ordering::Relaxed) || rules.is_empty() {
            return Vec::new();
        }
        let mut pending = q.pending.lock().expect("learn queue");
        let numbered: Vec<Learned> = rules
            .into_iter()
            .map(|r| (q.seq.fetch_add(1, Ordering::Relaxed) + 1, r))
            .collect();
        pending.extend(numbered.iter().cloned());
        numbered
    }

    /// The control plane's side: from now on it takes what datapath
    /// threads learn ([`RuleSet::adopt_learned`]).
    pub fn take_learned(&self) {
        self.learn_queue.drained.store(true, Ordering::Relaxed);
    }

    /// Puts the rules datapath threads learned since the last call into
    /// this set (a new version when there were any). Returns how many.
    pub fn adopt_learned(&mut self) -> usize {
        let taken = std::mem::take(&mut *self.learn_queue.pending.lock().expect("learn queue"));
        for (seq, rule) in &taken {
            self.put(Arc::clone(rule));
            self.learned_seq = self.learned_seq.max(*seq);
        }
        if !taken.is_empty() {
            self.version += 1;
        }
        taken.len()
    }

    /// `delete_learned`: once `gone` (rules just removed) took away the
    /// last rule whose `learn(...,delete_learned)` learns into a table
    /// with a cookie, the rules of that table with that cookie go too
    /// (OVS's learned cookies). Removes and returns them. O(1) unless a
    /// rule of `gone` has such a learn; then a scan of the rules.
    pub(crate) fn delete_learned(&mut self, gone: &[Arc<Rule>]) -> Vec<Arc<Rule>> {
        let keys = |r: &Rule| -> Vec<(u8, u64)> {
            learns_of(&r.actions)
                .filter(|l| l.flags & flag::DELETE_LEARNED != 0)
                .map(|l| (l.table, l.cookie))
                .collect()
        };
        let mut doomed: Vec<(u8, u64)> = gone.iter().flat_map(|r| keys(r)).collect();
        if doomed.is_empty() {
            return Vec::new();
        }
        doomed.sort_unstable();
        doomed.dedup();
        let still: Vec<(u8, u64)> = self.rules().flat_map(|r| keys(r)).collect();
        doomed.retain(|k| !still.contains(k));
        let mut removed: Vec<Arc<Rule>> = self
            .rules()
            .filter(|r| doomed.contains(&(r.table, r.cookie)))
            .cloned()
            .collect();
        removed.sort_unstable_by_key(|r| Self::set_order(r));
        for r in &removed {
            self.retire(r);
        }
        if !removed.is_empty() {
            self.version += 1;
            // What those learned may go the same way.
            let more = self.delete_learned(&removed);
            removed.extend(more);
        }
        removed
    }

    /// The last learned rule this version holds (0: none).
    pub fn learned_seq(&self) -> u64 {
        self.learned_seq
    }

    /// A datapath thread given this version while it has learned rules
    /// the control plane had not taken when it made it (`mine`, those
    /// past [`RuleSet::learned_seq`]): puts them back. Drops from
    /// `mine` what the version holds. Whether it changed the set.
    pub fn keep_learned(&mut self, mine: &mut Vec<Learned>) -> bool {
        let seen = self.learned_seq;
        mine.retain(|(seq, _)| *seq > seen);
        for (_, rule) in mine.iter() {
            self.put(Arc::clone(rule));
        }
        if !mine.is_empty() {
            self.version += 1;
        }
        !mine.is_empty()
    }
}
