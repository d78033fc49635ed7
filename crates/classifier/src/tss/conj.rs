//! Conjunctive matches, as Open vSwitch's classifier makes them: a rule
//! whose actions are `conjunction(id,k/n)` is one clause of conjunction
//! `id` (a "soft" rule: it is never the result of a lookup itself); a
//! packet that matches a rule of every clause 1..n of `id` at one
//! priority, above any other rule it matches, is looked up again with
//! `conj_id=id`, and the rule that lookup finds (`conj_id=id,...`) is the
//! result.
//!
//! The soft rules of a table are kept apart from the tuple space search,
//! in priority order. A lookup that has any above its best ordinary match
//! scans those (their count, each checked against the packet, the
//! bits that decided it going into the megaflow mask), then takes the
//! priorities in turn, from the highest, as OVS's `classifier_lookup__`:
//! the first conjunction complete at a priority gives the second lookup.
//! The result equals OVS's: an ordinary rule under a soft one of the same
//! match, which OVS reaches once the soft one's priority has no complete
//! conjunction, is the best ordinary match here from the start.

use std::cmp::Reverse;
use std::sync::Arc;

use std::hash::{Hash, Hasher};

use im::OrdMap;
use sluice_packet::key::FlowKey;

use crate::action::Action;
use crate::flow_match::Match;
use crate::rule::{Rule, RuleId};
use crate::wildcards::explain_miss;

/// Soft rules by priority (highest first), then a hash of the match (the
/// key stays small: the map's nodes hold 64 of them), then age.
type SoftKey = (Reverse<u16>, u64, RuleId);

/// Whether a rule is a clause of a conjunction (its actions are
/// `conjunction(...)`, and maybe `note`s).
pub fn is_soft(r: &Rule) -> bool {
    r.actions
        .iter()
        .any(|a| matches!(a, Action::Conjunction { .. }))
}

/// A table's soft rules.
#[derive(Debug, Clone, Default)]
pub(super) struct Soft {
    rules: OrdMap<SoftKey, Arc<Rule>>,
}

fn match_hash(m: &Match) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    m.value.words().hash(&mut h);
    m.mask.words().hash(&mut h);
    h.finish()
}

impl Soft {
    pub(super) fn len(&self) -> usize {
        self.rules.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The key of the rule identical to (`m`, `priority`), if any.
    /// O(log n).
    fn identical(&self, m: &Match, priority: u16) -> Option<SoftKey> {
        if self.rules.is_empty() {
            return None;
        }
        let h = match_hash(m);
        let lo = (Reverse(priority), h, RuleId::MIN);
        let hi = (Reverse(priority), h, RuleId::MAX);
        self.rules
            .range(lo..=hi)
            .find(|(_, r)| r.matcher == *m)
            .map(|(k, _)| *k)
    }

    /// Adds a soft rule, replacing (and returning) an identical one.
    /// O(log n).
    pub(super) fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let old = self.remove_identical(&rule.matcher, rule.priority);
        let k = (Reverse(rule.priority), match_hash(&rule.matcher), rule.id);
        self.rules.insert(k, rule);
        old
    }

    /// Removes `rule` if it is here. O(log n).
    pub(super) fn remove(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        if self.rules.is_empty() {
            return None;
        }
        let k = (Reverse(rule.priority), match_hash(&rule.matcher), rule.id);
        self.rules.remove(&k)
    }

    /// Removes the rule identical to (`m`, `priority`), whatever its id.
    pub(super) fn remove_identical(&mut self, m: &Match, priority: u16) -> Option<Arc<Rule>> {
        let k = self.identical(m, priority)?;
        self.rules.remove(&k)
    }

    /// The rule identical to (`m`, `priority`). O(log n).
    pub(super) fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        let k = self.identical(m, priority)?;
        self.rules.get(&k)
    }

    /// The rules, highest priority first.
    pub(super) fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.rules.values()
    }
}

/// The conjunctions (`id`, clause bit, clauses) of a soft rule.
fn clauses(r: &Rule) -> impl Iterator<Item = (u32, u8, u8)> + '_ {
    r.actions.iter().filter_map(|a| match *a {
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => Some((id, clause, n_clauses)),
        _ => None,
    })
}

/// The result of a lookup of `key` given its best ordinary match `hard`:
/// a conjunctive match above it if one is complete and its `conj_id`
/// lookup (`lookup_hard`, ordinary rules only) finds a rule, else `hard`.
/// ORs into `wc` the bits the soft rules looked at decided on.
pub(super) fn resolve<'a>(
    soft: &'a Soft,
    key: &FlowKey,
    wc: &mut FlowKey,
    hard: Option<&'a Arc<Rule>>,
    lookup_hard: impl Fn(&FlowKey, &mut FlowKey) -> Option<&'a Arc<Rule>>,
) -> Option<&'a Arc<Rule>> {
    let floor = hard.map_or(-1, |h| i32::from(h.priority));
    let mut matched: Vec<&Arc<Rule>> = Vec::new();
    for r in soft.rules() {
        if i32::from(r.priority) <= floor {
            break;
        }
        if r.matcher.matches(key) {
            wc.or_assign(&r.matcher.mask);
            matched.push(r);
        } else {
            explain_miss(key, &r.matcher, wc);
        }
    }
    // Priority by priority, from the highest (`matched` is in that order).
    let mut rest = &matched[..];
    while let Some(first) = rest.first() {
        let n_here = rest
            .iter()
            .take_while(|r| r.priority == first.priority)
            .count();
        let (level, lower) = rest.split_at(n_here);
        rest = lower;
        // Clauses seen per conjunction id: the bits of those absent set
        // from the start, as OVS counts them.
        let mut seen: Vec<(u32, u64)> = Vec::new();
        for r in level {
            for (id, clause, n) in clauses(r) {
                if usize::from(n) > n_here {
                    continue;
                }
                let i = match seen.iter().position(|s| s.0 == id) {
                    Some(i) => i,
                    None => {
                        // (As OVS: `n & 63`, so that 64 clauses count
                        // as complete at the first.)
                        seen.push((id, u64::MAX << (n & 63)));
                        seen.len() - 1
                    }
                };
                seen[i].1 |= 1 << (clause - 1);
                if seen[i].1 == u64::MAX {
                    let mut k = *key;
                    k.conj_id = id;
                    if let Some(found) = lookup_hard(&k, wc) {
                        return Some(found);
                    }
                }
            }
        }
    }
    hard
}
