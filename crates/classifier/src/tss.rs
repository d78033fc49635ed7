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
//! left wildcarded. For address regions each level also keeps the rules'
//! distinct values, so that only the prefix down to the first bit where the
//! closest one differs is un-wildcarded. The mask is the one the linear
//! scan ([`crate::wildcards::explain_miss`] for each rule passed over) gives
//! for the rules probed, so megaflows stay as wide.
//!
//! Every map is persistent (`im`): cloning a table is O(1) and a change
//! copies O(log n) nodes, so a new version of a rule set of any size costs
//! the changes it holds, and readers of the old one are untouched.

use std::cmp::Reverse;
use std::sync::Arc;

use arrayvec::ArrayVec;
use im::{HashMap as PMap, OrdMap};
use sluice_packet::key::{FlowKey, KEY_WORDS};

use crate::flow_match::Match;
use crate::table::{Rule, RuleId};
use crate::wildcards::{prefix_through_first_diff, Kind, REGIONS};

const KEY_BYTES: usize = KEY_WORDS * 8;

type MaskId = [u64; KEY_WORDS];
/// A level's key, built on the stack for lookups.
type LevelKey = ArrayVec<u8, KEY_BYTES>;

/// A level key as the B-trees hold it: the first 16 bytes inline, so that
/// most comparisons in a node touch no other memory (a boxed key costs a
/// cache miss per comparison), and the rest, if any, boxed. Keys of one
/// level all have one length, so this orders as the bytes do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SplitKey {
    head: [u8; 16],
    rest: Option<Box<[u8]>>,
}

impl SplitKey {
    fn new(bytes: &[u8]) -> Self {
        let n = bytes.len().min(16);
        let mut head = [0u8; 16];
        head[..n].copy_from_slice(&bytes[..n]);
        let rest = (bytes.len() > 16).then(|| Box::from(&bytes[16..]));
        SplitKey { head, rest }
    }
}

/// A key region a subtable's mask covers.
#[derive(Debug, Clone, Copy)]
struct Region {
    off: usize,
    len: usize,
    kind: Kind,
}

impl Region {
    fn is_prefix(&self) -> bool {
        self.kind != Kind::Whole
    }

    /// The region of `bytes` as a number (address regions only).
    fn value(&self, bytes: &[u8]) -> u128 {
        let b = &bytes[self.off..self.off + self.len];
        match self.kind {
            Kind::PrefixU32 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u128,
            _ => {
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                u128::from_be_bytes(a)
            }
        }
    }

    fn bits(&self) -> u32 {
        self.len as u32 * 8
    }

    /// Writes `v` (a number as [`Region::value`] reads it) OR'ed into `bytes`.
    fn or_value(&self, bytes: &mut [u8], v: u128) {
        let old = self.value(bytes);
        let b = &mut bytes[self.off..self.off + self.len];
        match self.kind {
            Kind::PrefixU32 => b.copy_from_slice(&((old | v) as u32).to_ne_bytes()),
            _ => b.copy_from_slice(&(old | v).to_be_bytes()),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Group {
    /// Rules whose values agree with this group's key.
    count: u32,
    /// When the next region is an address: its distinct values among
    /// these rules, with counts.
    next: Option<OrdMap<u128, u32>>,
    /// At the last level: the rules, best first (priority, then age).
    rules: Vec<Arc<Rule>>,
}

#[derive(Debug, Clone)]
struct Subtable {
    mask: FlowKey,
    regions: Arc<[Region]>,
    root: Group,
    /// Level `j`: groups by the values of the first `j+1` regions. B-trees
    /// (nodes at least half full) rather than hash tries, whose sparse
    /// nodes cost kilobytes per handful of entries.
    levels: Vec<OrdMap<SplitKey, Group>>,
    prios: OrdMap<u16, u32>,
}

fn order_key(r: &Rule) -> (Reverse<u16>, RuleId) {
    (Reverse(r.priority), r.id)
}

impl Subtable {
    fn new(mask: &FlowKey) -> Self {
        let m = bytemuck::bytes_of(mask);
        let regions: Vec<Region> = REGIONS
            .iter()
            .filter(|&&(off, len, _)| m[off..off + len].iter().any(|&b| b != 0))
            .map(|&(off, len, kind)| Region { off, len, kind })
            .collect();
        let mut levels = Vec::with_capacity(regions.len());
        levels.resize_with(regions.len(), OrdMap::new);
        let root = Group {
            next: regions
                .first()
                .filter(|r| r.is_prefix())
                .map(|_| OrdMap::new()),
            ..Group::default()
        };
        Subtable {
            mask: *mask,
            regions: regions.into(),
            root,
            levels,
            prios: OrdMap::new(),
        }
    }

    fn max_priority(&self) -> Option<u16> {
        self.prios.get_max().map(|(p, _)| *p)
    }

    fn is_empty(&self) -> bool {
        self.root.count == 0
    }

    /// The rule's masked value bytes.
    fn values(&self, m: &Match) -> FlowKey {
        m.value.masked(&self.mask)
    }

    /// Counts value `v` in (or out of) a group's distinct next-region values.
    fn bump(next: &mut Option<OrdMap<u128, u32>>, v: Option<u128>, up: bool) {
        let (Some(n), Some(v)) = (next, v) else {
            return;
        };
        let c = n.entry(v).or_insert(0);
        if up {
            *c += 1;
        } else {
            *c -= 1;
            if *c == 0 {
                n.remove(&v);
            }
        }
    }

    /// Region `j`'s value in `vb`, if that region is an address (whose
    /// distinct values the group before it keeps).
    fn prefix_value(&self, j: usize, vb: &[u8]) -> Option<u128> {
        self.regions
            .get(j)
            .filter(|r| r.is_prefix())
            .map(|r| r.value(vb))
    }

    /// The key of each level for the value bytes `vb`: level `j`'s is the
    /// values of regions `0..=j`.
    fn level_keys(&self, vb: &[u8]) -> ArrayVec<SplitKey, { REGIONS.len() }> {
        let mut key = LevelKey::new();
        let mut keys = ArrayVec::new();
        for r in self.regions.iter() {
            key.try_extend_from_slice(&vb[r.off..r.off + r.len])
                .expect("regions fit in a key");
            keys.push(SplitKey::new(&key));
        }
        keys
    }

    fn insert(&mut self, rule: Arc<Rule>) {
        let v = self.values(&rule.matcher);
        let vb = bytemuck::bytes_of(&v);
        *self.prios.entry(rule.priority).or_insert(0) += 1;
        self.root.count += 1;
        let v0 = self.prefix_value(0, vb);
        Self::bump(&mut self.root.next, v0, true);
        let keys = self.level_keys(vb);
        for (j, k) in keys.iter().enumerate() {
            let nv = self.prefix_value(j + 1, vb);
            let g = self.levels[j].entry(k.clone()).or_insert_with(|| Group {
                next: nv.map(|_| OrdMap::new()),
                ..Group::default()
            });
            g.count += 1;
            Self::bump(&mut g.next, nv, true);
        }
        let last = match keys.last() {
            None => &mut self.root,
            Some(k) => self.levels[keys.len() - 1]
                .get_mut(k)
                .expect("just inserted"),
        };
        let pos = last
            .rules
            .partition_point(|x| order_key(x) < order_key(&rule));
        last.rules.insert(pos, rule);
    }

    /// Removes the rule with this id (whose match is `m`), if present.
    fn remove(&mut self, m: &Match, id: RuleId) -> Option<Arc<Rule>> {
        let v = self.values(m);
        let vb = bytemuck::bytes_of(&v);
        let keys = self.level_keys(vb);
        let last = match keys.last() {
            Some(k) => self.levels[keys.len() - 1].get_mut(k)?,
            None => &mut self.root,
        };
        let pos = last.rules.iter().position(|r| r.id == id)?;
        let rule = last.rules.remove(pos);
        self.root.count -= 1;
        let v0 = self.prefix_value(0, vb);
        Self::bump(&mut self.root.next, v0, false);
        for (j, k) in keys.iter().enumerate() {
            let nv = self.prefix_value(j + 1, vb);
            let g = self.levels[j]
                .get_mut(k)
                .expect("every level holds the rule");
            g.count -= 1;
            if g.count == 0 {
                self.levels[j].remove(k);
            } else {
                Self::bump(&mut g.next, nv, false);
            }
        }
        let c = self
            .prios
            .get_mut(&rule.priority)
            .expect("priority counted");
        *c -= 1;
        if *c == 0 {
            self.prios.remove(&rule.priority);
        }
        Some(rule)
    }

    /// The rule of this subtable with exactly this match and priority.
    fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        let v = self.values(m);
        let keys = self.level_keys(bytemuck::bytes_of(&v));
        let last = match keys.last() {
            Some(k) => self.levels[keys.len() - 1].get(k)?,
            None => &self.root,
        };
        last.rules.iter().find(|r| r.priority == priority)
    }

    /// The best rule matching `key` here, OR-ing into `wc` the bits that
    /// show which of this subtable's rules the key misses.
    fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let k = key.masked(&self.mask);
        let kb = bytemuck::bytes_of(&k);
        let mb = bytemuck::bytes_of(&self.mask);
        let mut prev = &self.root;
        let mut lk = LevelKey::new();
        for (j, r) in self.regions.iter().enumerate() {
            lk.try_extend_from_slice(&kb[r.off..r.off + r.len])
                .expect("regions fit in a key");
            let g = self.levels[j].get(&SplitKey::new(&lk));
            if g.map_or(0, |g| g.count) < prev.count {
                Self::explain(r, prev, kb, mb, wc);
            }
            prev = g?;
        }
        prev.rules.first()
    }

    /// Un-wildcards what proves the rules of `prev` that differ from the
    /// key in region `r` miss it.
    fn explain(r: &Region, prev: &Group, kb: &[u8], mb: &[u8], wc: &mut FlowKey) {
        let w = bytemuck::bytes_of_mut(wc);
        let Some(next) = prev.next.as_ref().filter(|_| r.is_prefix()) else {
            for i in r.off..r.off + r.len {
                w[i] |= mb[i];
            }
            return;
        };
        // The closest values below and above (get_prev/get_next walk the
        // tree without the allocation a range iterator makes).
        let x = r.value(kb);
        let below = x
            .checked_sub(1)
            .and_then(|b| next.get_prev(&b))
            .map(|(v, _)| *v);
        let above = x
            .checked_add(1)
            .and_then(|a| next.get_next(&a))
            .map(|(v, _)| *v);
        let mut bits = 0u128;
        for v in [below, above].into_iter().flatten() {
            bits |= prefix_through_first_diff(x ^ v, r.bits());
        }
        r.or_value(w, bits & r.value(mb));
    }
}

/// The rules of one table, indexed for lookup and for flow-mods.
#[derive(Debug, Clone, Default)]
pub struct TableIndex {
    order: OrdMap<(Reverse<u16>, RuleId), Arc<Rule>>,
    subtables: PMap<MaskId, Subtable>,
    /// (highest priority, mask) of every subtable, highest first.
    probe: Arc<Vec<(u16, MaskId)>>,
}

impl TableIndex {
    /// Number of rules.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the table has no rules.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Number of distinct masks (subtables).
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// The rules, highest priority first; among equals, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.order.values()
    }

    fn reprobe(&mut self) {
        let mut p: Vec<(u16, MaskId)> = self
            .subtables
            .iter()
            .filter_map(|(m, s)| s.max_priority().map(|p| (p, *m)))
            .collect();
        p.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        self.probe = Arc::new(p);
    }

    /// Adds a rule (the caller has removed any rule it replaces).
    pub fn insert(&mut self, rule: Arc<Rule>) {
        let mid = *rule.matcher.mask.words();
        self.order.insert(order_key(&rule), Arc::clone(&rule));
        let st = self
            .subtables
            .entry(mid)
            .or_insert_with(|| Subtable::new(&rule.matcher.mask));
        let before = st.max_priority();
        st.insert(rule);
        if st.max_priority() != before {
            self.reprobe();
        }
    }

    /// Removes a rule of this table.
    pub fn remove(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        let mid = *rule.matcher.mask.words();
        let st = self.subtables.get_mut(&mid)?;
        let before = st.max_priority();
        let gone = st.remove(&rule.matcher, rule.id)?;
        let changed = st.max_priority() != before;
        if st.is_empty() {
            self.subtables.remove(&mid);
        }
        if changed {
            self.reprobe();
        }
        self.order.remove(&order_key(&gone));
        Some(gone)
    }

    /// The rule with exactly this match and priority (OpenFlow's "identical").
    pub fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        self.subtables.get(m.mask.words())?.find(m, priority)
    }

    /// The highest-priority rule matching `key` (the oldest among equals),
    /// OR-ing into `wc` the bits that decided it: the whole mask of the
    /// rule found, and for every subtable probed the bits that prove the
    /// rules it passed over miss.
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let mut best: Option<&Arc<Rule>> = None;
        for (maxp, mid) in self.probe.iter() {
            if best.is_some_and(|b| *maxp < b.priority) {
                break;
            }
            let Some(r) = self.subtables.get(mid).and_then(|s| s.lookup(key, wc)) else {
                continue;
            };
            if best.is_none_or(|b| order_key(r) < order_key(b)) {
                best = Some(r);
            }
        }
        if let Some(b) = best {
            wc.or_assign(&b.matcher.mask);
        }
        best
    }
}
