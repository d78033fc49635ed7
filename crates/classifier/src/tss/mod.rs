//! One OpenFlow table's classifier: tuple space search.
//!
//! Rules are grouped in subtables by mask; a lookup probes the subtables
//! in order of their highest priority and stops at the first whose highest
//! priority is below the best match so far, so its cost is bounded by the
//! number of distinct masks, not of rules.
//!
//! Within a subtable the rules are also indexed by prefixes of their
//! values: level `j` groups them by their values in the mask's first `j+1`
//! key regions (in the order of [`crate::wildcards`]), with a count. A
//! lookup walks the levels with the packet's values; a region where the
//! count drops is one where some rules differ from the packet, and its
//! bits go into the megaflow mask; a region where no rule drops out is
//! left wildcarded. For an address region only the prefix down to the
//! first bit where the closest value among the group's rules differs is
//! un-wildcarded: level keys hold addresses as big-endian numbers, so
//! those values are the next level's keys that extend the group's, and
//! the closest are the neighbours of the packet's own key there (no map
//! of values to keep beside the levels). The mask is the one the linear
//! scan ([`crate::wildcards::explain_miss`] for each rule passed over) gives
//! for the rules probed, so megaflows stay as wide.
//!
//! A subtable whose first address region has a prefix mask, and which is
//! the only one of its table with that prefix length on that field, can be
//! passed over without a look inside: one walk of the table's prefix trie
//! for that field ([`crate::trie`]) tells whether any of its prefixes holds
//! the packet's address, and if none does, how many leading bits prove it
//! (the same bits the walk inside would un-wildcard). An LPM-style table
//! over 20 prefix lengths then costs one trie walk and the subtables whose
//! length matched, not 20 probes.
//!
//! A field's trie is kept only once two or more prefix lengths of it are
//! in use in the table (and then until none is): for a table of one
//! prefix length, host routes say, the subtable's own walk answers as
//! fast as the trie would, and keeping the trie would cost every flow-mod
//! a walk of twenty levels and two allocations (a quarter of an add). The
//! trie is built from the rules when the second length comes, O(n) once.
//!
//! Every map is persistent (a subtable's levels are B-trees of our own,
//! `pmap.rs`; the rest `im` maps or shared `Arc`s copied on write):
//! cloning a table is O(1); the first change after a clone copies the
//! list of subtables (O(masks), not O(rules)) and each change then copies
//! O(log n) nodes, so a new version of a rule set of any size costs the
//! changes it holds, and readers of the old one are untouched.

use std::cmp::Reverse;
use std::sync::Arc;

use arrayvec::ArrayVec;
use im::OrdMap;
use sluice_packet::key::{FlowKey, KEY_WORDS};

use crate::flow_match::Match;
use crate::rule::{Rule, RuleId};
use crate::trie::{lens_has, top, PrefixTrie, TrieMatch};
use crate::wildcards::{Kind, REGIONS};

pub mod conj;
mod pmap;
mod rules;
mod subtable;
use subtable::{Region, Subtable, TrieUse};

/// Address regions (prefix kinds) of [`REGIONS`]: each has a trie per table.
const N_PREFIX: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < REGIONS.len() {
        if !matches!(REGIONS[i].2, Kind::Whole) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// A rule as the tries hold it: ordered best first (priority, then age).
#[derive(Debug, Clone)]
struct Ranked(Arc<Rule>);

impl PartialEq for Ranked {
    fn eq(&self, o: &Self) -> bool {
        self.0.id == o.0.id
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ranked {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        order_key(&self.0).cmp(&order_key(&o.0))
    }
}

/// One lookup's trie walks, made when first needed.
/// The tries' answers of one lookup, by slot, made as a gate first asks
/// (filled in order: a lookup that asks none writes only its length, and
/// a table without gates never touches the rest of it).
type TrieMemo<'a> = ArrayVec<(usize, TrieMatch<'a, Ranked>), N_PREFIX>;

type MaskId = [u64; KEY_WORDS];

/// The address region of each trie, by slot.
fn slot_regions() -> impl Iterator<Item = Region> {
    REGIONS
        .iter()
        .filter(|r| r.2 != Kind::Whole)
        .enumerate()
        .map(|(slot, &(off, len, kind))| Region {
            off,
            len,
            kind,
            slot,
        })
}

/// A key that clusters rules as the indexes hold them, for bulk loads:
/// by mask (one subtable; a fingerprint, as only grouping matters), then
/// by the first 16 bytes of the masked values region after region,
/// addresses as numbers (the order of the prefix tries and of the groups'
/// address values; the levels' B-trees then see runs of neighbouring
/// keys). Fixed-size, so that sorting a million takes no allocation.
pub(crate) fn load_order_key(m: &Match) -> (u64, u128) {
    let fingerprint = m.mask.words().iter().fold(0u64, |h, &w| {
        (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95)
    });
    let v = m.value.masked(&m.mask);
    let vb = bytemuck::bytes_of(&v);
    let mb = bytemuck::bytes_of(&m.mask);
    let mut head = [0u8; 16];
    let mut n = 0;
    // The subtable's regions: those its mask covers (as `Subtable::new`).
    for &(off, len, kind) in REGIONS {
        if n == head.len() {
            break;
        }
        if mb[off..off + len].iter().all(|&b| b == 0) {
            continue;
        }
        let b = &vb[off..off + len];
        let be;
        let b = match kind {
            Kind::PrefixU32 => {
                be = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_be_bytes();
                &be[..]
            }
            _ => b,
        };
        let take = b.len().min(head.len() - n);
        head[n..n + take].copy_from_slice(&b[..take]);
        n += take;
    }
    (fingerprint, u128::from_be_bytes(head))
}

fn order_key(r: &Rule) -> (Reverse<u16>, RuleId) {
    (Reverse(r.priority), r.id)
}

/// The rules of one table, indexed for lookup and for flow-mods.
#[derive(Debug, Clone, Default)]
pub struct TableIndex {
    /// Number of rules. (No index in priority order: the subtables hold
    /// the rules, and the few who want them in that order, dumps, sort
    /// them; a flow-mod then costs one B-tree insert fewer.)
    n: usize,
    /// The subtables in probe order: highest priority first.
    probe: Arc<Vec<Subtable>>,
    /// Where each mask's subtable is in `probe`.
    pos: Arc<hashbrown::HashMap<MaskId, usize>>,
    /// One prefix trie per address field.
    tries: [PrefixTrie<Ranked>; N_PREFIX],
    /// Subtables using each (trie, prefix length).
    trie_users: OrdMap<(usize, u32), u32>,
    /// Whether each trie is kept: since its field has had two prefix
    /// lengths in use, until it has none (see the module's notes).
    kept: [bool; N_PREFIX],
    /// The clauses of conjunctive matches, apart ([`conj`]).
    soft: conj::Soft,
}

impl TableIndex {
    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n + self.soft.len()
    }

    /// Whether the table has no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of distinct masks (subtables).
    pub fn n_subtables(&self) -> usize {
        self.probe.len()
    }

    /// The rules, highest priority first; among equals, oldest first
    /// (sorted for the call: O(n log n); [`TableIndex::rules`] when the
    /// order does not matter).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        let mut all: Vec<&Arc<Rule>> = self.rules().collect();
        all.sort_unstable_by_key(|r| order_key(r));
        all.into_iter()
    }

    /// The rules in no particular order (subtable by subtable, then the
    /// clauses of conjunctions), O(n).
    pub fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.probe
            .iter()
            .flat_map(Subtable::rules)
            .chain(self.soft.rules())
    }

    /// Moves the subtable at `i` to its place in the probe order (after its
    /// highest priority changed), keeping `pos`.
    fn reposition(&mut self, i: usize) {
        let probe = Arc::make_mut(&mut self.probe);
        let st = probe.remove(i);
        let j = probe.partition_point(|s| s.probe_key() < st.probe_key());
        probe.insert(j, st);
        self.reindex(i.min(j), i.max(j) + 1);
    }

    /// Records in `pos` where the subtables at `from..to` now are.
    fn reindex(&mut self, from: usize, to: usize) {
        let pos = Arc::make_mut(&mut self.pos);
        for (k, s) in self.probe.iter().enumerate().take(to).skip(from) {
            pos.insert(*s.mask_id(), k);
        }
    }

    /// Counts a subtable in or out of its (trie, length); starts keeping
    /// the trie when its field gets a second length (and stops when it
    /// has none); marks which subtables may use it: those alone with their
    /// length on a kept trie.
    fn count_trie_user(&mut self, t: TrieUse, up: bool) {
        let key = (t.slot, t.plen);
        let c = self.trie_users.entry(key).or_insert(0);
        if up {
            *c += 1;
        } else {
            *c -= 1;
        }
        if *c == 0 {
            self.trie_users.remove(&key);
        }
        let lens = self
            .trie_users
            .range((t.slot, 0)..=(t.slot, u32::MAX))
            .count();
        if lens >= 2 && !self.kept[t.slot] {
            self.kept[t.slot] = true;
            self.build_trie(t.slot);
        } else if lens == 0 {
            self.kept[t.slot] = false;
            self.tries[t.slot] = PrefixTrie::default();
        }
        let kept = self.kept[t.slot];
        for st in Arc::make_mut(&mut self.probe).iter_mut() {
            if let Some(u) = st.trie.as_mut().filter(|u| u.slot == t.slot) {
                u.alone = kept && self.trie_users.get(&(u.slot, u.plen)) == Some(&1);
                st.regate();
            }
        }
    }

    /// Puts the prefixes of every rule of the subtables using trie `slot`
    /// into it (when it starts being kept).
    fn build_trie(&mut self, slot: usize) {
        for st in self.probe.iter() {
            if st.trie.is_none_or(|u| u.slot != slot) {
                continue;
            }
            for r in st.rules() {
                if let Some((s, v, plen)) = st.trie_prefix(&r.matcher) {
                    self.tries[s].insert(v, plen, Ranked(Arc::clone(r)));
                }
            }
        }
    }

    /// The rule's prefix in the trie of subtable `st`, if it uses one and
    /// that trie is kept.
    fn kept_prefix(&self, st: &Subtable, m: &Match) -> Option<(usize, u128, u32)> {
        st.trie_prefix(m).filter(|&(slot, ..)| self.kept[slot])
    }

    /// Adds a rule; a rule with the same match and priority (OpenFlow's
    /// "identical") is replaced in its place, and returned.
    pub fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let (m, p) = (rule.matcher, rule.priority);
        if conj::is_soft(&rule) {
            // An ordinary rule of this match and priority goes; those
            // of lower priority go out of sight (OVS's list of a match
            // shows its best first).
            let mut old = self.find_hard(&m, p).cloned();
            if let Some(o) = &old {
                self.remove_hard(o);
            }
            old = self.soft.remove_hidden_identical(&m, p).or(old);
            let below: Vec<Arc<Rule>> = self
                .hard_same_match(&m)
                .filter(|r| r.priority < p)
                .cloned()
                .collect();
            for r in below {
                self.remove_hard(&r);
                self.soft.hide(r);
            }
            return self.soft.insert(rule).or(old);
        }
        let old_clause = self.soft.remove_identical(&m, p);
        if old_clause.is_some() {
            self.bring_into_sight(&m);
        }
        let replaced = if self.soft.hides(&m, p) {
            self.soft.hide(rule)
        } else {
            self.insert_hard(rule)
        };
        replaced.or(old_clause)
    }

    /// The hidden rules of match `m` no clause hides any more, back in
    /// the search.
    fn bring_into_sight(&mut self, m: &Match) {
        for r in self.soft.unhide(m) {
            self.insert_hard(r);
        }
    }

    /// The ordinary rules in sight with exactly this match.
    fn hard_same_match<'a>(&'a self, m: &'a Match) -> impl Iterator<Item = &'a Arc<Rule>> + 'a {
        self.pos
            .get(m.mask.words())
            .into_iter()
            .flat_map(move |&i| self.probe[i].same_match(m))
    }

    /// [`TableIndex::insert`] of an ordinary rule.
    fn insert_hard(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let mid = *rule.matcher.mask.words();
        let i = match self.pos.get(&mid) {
            Some(&i) => i,
            None => {
                let st = Subtable::new(&rule.matcher.mask);
                let t = st.trie;
                let probe = Arc::make_mut(&mut self.probe);
                probe.push(st);
                Arc::make_mut(&mut self.pos).insert(mid, probe.len() - 1);
                if let Some(t) = t {
                    self.count_trie_user(t, true);
                }
                self.probe.len() - 1
            }
        };
        let prefix = self.kept_prefix(&self.probe[i], &rule.matcher);
        let st = &mut Arc::make_mut(&mut self.probe)[i];
        let before = (st.maxp, st.is_empty());
        let replaced = st.insert(Arc::clone(&rule));
        if let Some(old) = &replaced {
            // Same match and priority: the same place in every index.
            if let Some((slot, v, plen)) = prefix {
                self.tries[slot].remove(v, plen, &Ranked(Arc::clone(old)));
            }
        } else {
            self.n += 1;
            st.regate();
            if (st.maxp, st.is_empty()) != before {
                self.reposition(i);
            }
        }
        if let Some((slot, v, plen)) = prefix {
            self.tries[slot].insert(v, plen, Ranked(Arc::clone(&rule)));
        }
        replaced
    }

    /// Removes a rule of this table.
    pub fn remove(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        if let Some(r) = self.soft.remove(rule) {
            self.bring_into_sight(&r.matcher);
            return Some(r);
        }
        self.soft
            .remove_hidden(rule)
            .or_else(|| self.remove_hard(rule))
    }

    /// Whether `rule` is an ordinary rule a clause of its match hides
    /// (for the reference lookup).
    pub fn is_hidden(&self, rule: &Rule) -> bool {
        self.soft.is_hidden(rule)
    }

    fn remove_hard(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        let mid = *rule.matcher.mask.words();
        let i = *self.pos.get(&mid)?;
        // (The removed rule's match is `rule`'s: the same prefix.)
        let prefix = self.kept_prefix(&self.probe[i], &rule.matcher);
        let probe = Arc::make_mut(&mut self.probe);
        let st = &mut probe[i];
        let before = st.maxp;
        let gone = st.remove(&rule.matcher, rule.id)?;
        if let Some((slot, v, plen)) = prefix {
            self.tries[slot].remove(v, plen, &Ranked(Arc::clone(&gone)));
        }
        st.regate();
        if st.is_empty() {
            let t = st.trie;
            probe.remove(i);
            Arc::make_mut(&mut self.pos).remove(&mid);
            self.reindex(i, self.probe.len());
            if let Some(t) = t {
                self.count_trie_user(t, false);
            }
        } else if st.maxp != before {
            self.reposition(i);
        }
        self.n -= 1;
        Some(gone)
    }

    /// The rule with exactly this match and priority (OpenFlow's "identical").
    pub fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        self.soft
            .find(m, priority)
            .or_else(|| self.soft.find_hidden(m, priority))
            .or_else(|| self.find_hard(m, priority))
    }

    fn find_hard(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        let i = *self.pos.get(m.mask.words())?;
        self.probe[i].find(m, priority)
    }

    /// Brings into the cache what the lookups of `keys` (up to a batch of
    /// 32) will read of the prefix tries: call it before looking up a
    /// batch of misses one by one.
    pub fn warm<'k>(&self, keys: impl Iterator<Item = &'k FlowKey> + Clone) {
        for (slot, r) in slot_regions().enumerate() {
            if !self.tries[slot].is_empty() {
                self.tries[slot].warm(
                    keys.clone().map(|k| r.left(bytemuck::bytes_of(k))),
                    // The rule a prefix leads to: the lookup reads it.
                    |r: &Ranked| sluice_packet::prefetch::read(&*r.0),
                );
            }
        }
    }

    /// The highest-priority rule matching `key` (the oldest among equals),
    /// OR-ing into `wc` the bits that decided it: the whole mask of the
    /// rule found, and for every subtable probed the bits that prove the
    /// rules it passed over miss. Above it, a conjunctive match
    /// ([`conj`]) wins.
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let hard = self.lookup_hard(key, wc);
        if self.soft.is_empty() {
            return hard;
        }
        conj::resolve(&self.soft, key, wc, hard, |k, w| self.lookup_hard(k, w))
    }

    /// The result of a lookup whose best ordinary match is `hard`, with
    /// the table's conjunctions ([`conj`]) and `lookup_hard` for the
    /// `conj_id` lookup: the reference lookup's way to the same.
    pub fn resolve_conjunctions<'a>(
        &'a self,
        key: &FlowKey,
        wc: &mut FlowKey,
        hard: Option<&'a Arc<Rule>>,
        lookup_hard: impl Fn(&FlowKey, &mut FlowKey) -> Option<&'a Arc<Rule>>,
    ) -> Option<&'a Arc<Rule>> {
        conj::resolve(&self.soft, key, wc, hard, lookup_hard)
    }

    /// [`TableIndex::lookup`] among the ordinary rules.
    fn lookup_hard(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let mut best: Option<&Arc<Rule>> = None;
        let mut memo = TrieMemo::new();
        // Subtables answered from the trie's rules, without their walk.
        let mut answered = ArrayVec::<(usize, RuleId), 8>::new();
        for (i, st) in self.probe.iter().enumerate() {
            if best.is_some_and(|b| st.maxp < b.priority) {
                break;
            }
            let mut found = None;
            if let Some(g) = st.gate.as_ref().filter(|g| g.agrees(key)) {
                // The packet agrees with every rule here before the
                // address: the trie says whether any has its prefix, and
                // if none has, which bits prove it (those the walk inside
                // would un-wildcard).
                let m = match memo.iter().position(|(slot, _)| *slot == g.slot) {
                    Some(i) => &memo[i].1,
                    None => {
                        let m = self.tries[g.slot].lookup(g.region.left(bytemuck::bytes_of(key)));
                        memo.push((g.slot, m));
                        &memo[memo.len() - 1].1
                    }
                };
                if !lens_has(m.matched, g.plen) {
                    let bits = top(u32::from(m.proof[g.plen as usize]));
                    g.region
                        .or_value(bytemuck::bytes_of_mut(wc), bits >> (128 - g.region.bits()));
                    continue;
                }
                // With the address last, the prefix's rules are this
                // subtable's rules for the packet, best first.
                if g.last && !answered.is_full() {
                    found = m.items(g.plen).and_then(|r| r.first()).map(|r| &r.0);
                    if let Some(r) = found {
                        answered.push((i, r.id));
                    }
                }
            }
            let Some(r) = found.or_else(|| st.lookup(key, wc)) else {
                continue;
            };
            if best.is_none_or(|b| order_key(r) < order_key(b)) {
                best = Some(r);
            }
        }
        if let Some(b) = best {
            wc.or_assign(&b.matcher.mask);
            // A subtable answered from the trie whose rule lost: its walk
            // adds the bits that prove its other rules miss (the winner's
            // mask holds them when it is the one that won).
            for &(i, id) in &answered {
                if id != b.id {
                    self.probe[i].lookup(key, wc);
                }
            }
        }
        best
    }
}
