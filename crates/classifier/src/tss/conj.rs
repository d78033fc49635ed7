//! Conjunctive matches, as Open vSwitch's classifier makes them: a rule
//! whose actions are `conjunction(id,k/n)` is one clause of conjunction
//! `id` (a "soft" rule: it is never the result of a lookup itself); a
//! packet that matches a rule of every clause 1..n of `id` at one
//! priority, above any other rule it matches, is looked up again with
//! `conj_id=id`, and the rule that lookup finds (`conj_id=id,...`) is the
//! result.
//!
//! OVS keeps the rules of one match (mask and values) in one list, best
//! first, and its lookup sees the first of each list (`find_match_wc`):
//! an ordinary rule under a clause of the same match stays out of sight
//! until every clause above it has failed, and out of the second lookup
//! (which skips lists a clause heads) altogether. Sluice keeps the same:
//! the clauses of a table and the ordinary rules they hide are kept apart
//! from the tuple space search (which holds the ordinary rules in sight),
//! in priority order. A lookup that has clauses above its best ordinary
//! match scans those and the hidden rules above it (each checked against
//! the packet, the bits that decided it going into the megaflow mask),
//! then takes the clauses' priorities in turn, from the highest, as
//! OVS's `classifier_lookup__`: the first conjunction complete at a
//! priority gives the second lookup; a priority with none lets the rules
//! its clauses hid into sight.

use std::cmp::Reverse;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use im::OrdMap;
use sluice_packet::key::FlowKey;

use crate::action::Action;
use crate::flow_match::Match;
use crate::rule::{Rule, RuleId};
use crate::wildcards::explain_miss;

/// Rules by priority (highest first), then a hash of the match (the key
/// stays small: the maps' nodes hold 64 of them), then age.
type Key = (Reverse<u16>, u64, RuleId);

/// Whether a rule is a clause of a conjunction (its actions are
/// `conjunction(...)`, and maybe `note`s).
pub fn is_soft(r: &Rule) -> bool {
    r.actions
        .iter()
        .any(|a| matches!(a, Action::Conjunction { .. }))
}

fn match_hash(m: &Match) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    m.value.words().hash(&mut h);
    m.mask.words().hash(&mut h);
    h.finish()
}

fn key_of(r: &Rule) -> Key {
    (Reverse(r.priority), match_hash(&r.matcher), r.id)
}

/// A table's clauses, and the ordinary rules they hide.
#[derive(Debug, Clone, Default)]
pub(super) struct Soft {
    /// The clauses.
    rules: OrdMap<Key, Arc<Rule>>,
    /// The clauses by match hash, then priority: (hash, priority, id).
    by_match: OrdMap<(u64, u16, RuleId), ()>,
    /// Ordinary rules under a clause of the same match.
    hidden: OrdMap<Key, Arc<Rule>>,
}

impl Soft {
    /// Clauses and hidden rules.
    pub(super) fn len(&self) -> usize {
        self.rules.len() + self.hidden.len()
    }

    /// Whether there are no clauses (and so no hidden rules).
    pub(super) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The clauses of match `m`, any priority. O(log n + their number).
    fn clauses_of<'a>(&'a self, m: &'a Match) -> impl Iterator<Item = &'a Arc<Rule>> + 'a {
        let h = match_hash(m);
        self.by_match
            .range((h, 0, RuleId::MIN)..=(h, u16::MAX, RuleId::MAX))
            .filter_map(move |((_, p, id), _)| self.rules.get(&(Reverse(*p), h, *id)))
            .filter(move |r| r.matcher == *m)
    }

    /// Whether a clause of match `m` is above `priority`: an ordinary
    /// rule of that match and priority is hidden.
    pub(super) fn hides(&self, m: &Match, priority: u16) -> bool {
        !self.rules.is_empty() && self.clauses_of(m).any(|r| r.priority > priority)
    }

    /// Adds a clause, replacing (and returning) an identical one.
    pub(super) fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let old = self.remove_identical(&rule.matcher, rule.priority);
        let k = key_of(&rule);
        self.by_match.insert((k.1, rule.priority, rule.id), ());
        self.rules.insert(k, rule);
        old
    }

    /// Removes the clause `rule` if it is here.
    pub(super) fn remove(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        if self.rules.is_empty() {
            return None;
        }
        let k = key_of(rule);
        let r = self.rules.remove(&k)?;
        self.by_match.remove(&(k.1, r.priority, r.id));
        Some(r)
    }

    /// Removes the clause identical to (`m`, `priority`), whatever its id.
    pub(super) fn remove_identical(&mut self, m: &Match, priority: u16) -> Option<Arc<Rule>> {
        let id = self.find(m, priority)?.id;
        self.rules
            .remove(&(Reverse(priority), match_hash(m), id))
            .inspect(|r| {
                self.by_match.remove(&(match_hash(m), r.priority, r.id));
            })
    }

    /// The clause identical to (`m`, `priority`).
    pub(super) fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        if self.rules.is_empty() {
            return None;
        }
        let h = match_hash(m);
        self.rules
            .range((Reverse(priority), h, RuleId::MIN)..=(Reverse(priority), h, RuleId::MAX))
            .map(|(_, r)| r)
            .find(|r| r.matcher == *m)
    }

    /// Hides an ordinary rule (a clause of its match is above it).
    pub(super) fn hide(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let old = self.remove_hidden_identical(&rule.matcher, rule.priority);
        self.hidden.insert(key_of(&rule), rule);
        old
    }

    /// Removes the hidden rule `rule` if it is here.
    pub(super) fn remove_hidden(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        if self.hidden.is_empty() {
            return None;
        }
        self.hidden.remove(&key_of(rule))
    }

    /// Removes the hidden rule identical to (`m`, `priority`).
    pub(super) fn remove_hidden_identical(
        &mut self,
        m: &Match,
        priority: u16,
    ) -> Option<Arc<Rule>> {
        let k = *self.find_hidden_key(m, priority)?;
        self.hidden.remove(&k)
    }

    fn find_hidden_key(&self, m: &Match, priority: u16) -> Option<&Key> {
        if self.hidden.is_empty() {
            return None;
        }
        let h = match_hash(m);
        self.hidden
            .range((Reverse(priority), h, RuleId::MIN)..=(Reverse(priority), h, RuleId::MAX))
            .find(|(_, r)| r.matcher == *m)
            .map(|(k, _)| k)
    }

    /// The hidden rule identical to (`m`, `priority`).
    pub(super) fn find_hidden(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        let k = self.find_hidden_key(m, priority)?;
        self.hidden.get(k)
    }

    /// Whether `rule` is one of the hidden rules.
    pub(super) fn is_hidden(&self, rule: &Rule) -> bool {
        !self.hidden.is_empty() && self.hidden.contains_key(&key_of(rule))
    }

    /// The hidden rules of match `m` no clause hides any more (after a
    /// clause went): taken out, for the caller to put in sight.
    pub(super) fn unhide(&mut self, m: &Match) -> Vec<Arc<Rule>> {
        if self.hidden.is_empty() {
            return Vec::new();
        }
        let h = match_hash(m);
        let top = self.clauses_of(m).map(|r| r.priority).max();
        let free: Vec<Key> = self
            .hidden
            .iter()
            .filter(|(k, r)| k.1 == h && r.matcher == *m && top.is_none_or(|t| r.priority > t))
            .map(|(k, _)| *k)
            .collect();
        free.iter().filter_map(|k| self.hidden.remove(k)).collect()
    }

    /// The clauses, then the hidden rules.
    pub(super) fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.rules.values().chain(self.hidden.values())
    }
}

/// The conjunctions (`id`, clause, clauses) of a clause.
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

/// The rules of `map` above priority `floor` matching `key`, best first;
/// the bits that decided each go into `wc`.
fn matching<'a>(
    map: &'a OrdMap<Key, Arc<Rule>>,
    key: &FlowKey,
    wc: &mut FlowKey,
    floor: i32,
) -> Vec<&'a Arc<Rule>> {
    let mut out = Vec::new();
    for r in map.values() {
        if i32::from(r.priority) <= floor {
            break;
        }
        if r.matcher.matches(key) {
            wc.or_assign(&r.matcher.mask);
            out.push(r);
        } else {
            explain_miss(key, &r.matcher, wc);
        }
    }
    out
}

/// The result of a lookup of `key` given its best ordinary match in
/// sight `hard`: a conjunctive match above it if one is complete and its
/// `conj_id` lookup (`lookup_hard`, the ordinary rules in sight) finds a
/// rule, else the best ordinary rule, counting those the clauses hid
/// that came into sight. ORs into `wc` the bits the rules looked at
/// decided on.
pub(super) fn resolve<'a>(
    soft: &'a Soft,
    key: &FlowKey,
    wc: &mut FlowKey,
    mut hard: Option<&'a Arc<Rule>>,
    lookup_hard: impl Fn(&FlowKey, &mut FlowKey) -> Option<&'a Arc<Rule>>,
) -> Option<&'a Arc<Rule>> {
    let floor = hard.map_or(-1, |h| i32::from(h.priority));
    let clauses_hit = matching(&soft.rules, key, wc, floor);
    if clauses_hit.is_empty() {
        return hard;
    }
    // Each hidden rule that matches comes into sight below the lowest
    // clause of its match above it (all of which match too).
    let hidden: Vec<(u16, &Arc<Rule>)> = matching(&soft.hidden, key, wc, floor)
        .into_iter()
        .map(|h| {
            let under = clauses_hit
                .iter()
                .filter(|c| c.matcher == h.matcher && c.priority > h.priority)
                .map(|c| c.priority)
                .min()
                .unwrap_or(h.priority);
            (under, h)
        })
        .collect();
    let mut rest = &clauses_hit[..];
    while let Some(first) = rest.first() {
        let level = first.priority;
        if hard.is_some_and(|h| h.priority >= level) {
            break;
        }
        let n_here = rest.iter().take_while(|r| r.priority == level).count();
        let (here, lower) = rest.split_at(n_here);
        rest = lower;
        // Clauses seen per conjunction id, the bits of those absent set
        // from the start, as OVS counts them (`n & 63`: 64 clauses count
        // as complete at the first, as in OVS).
        let mut seen: Vec<(u32, u64)> = Vec::new();
        for r in here {
            for (id, clause, n) in clauses(r) {
                if usize::from(n) > n_here {
                    continue;
                }
                let i = match seen.iter().position(|s| s.0 == id) {
                    Some(i) => i,
                    None => {
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
        // None complete here: what these clauses hid comes into sight.
        for &(under, h) in &hidden {
            if under >= level && hard.is_none_or(|b| h.priority > b.priority) {
                hard = Some(h);
            }
        }
    }
    hard
}
