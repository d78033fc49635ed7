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
//! A subtable whose first address region has a prefix mask, and which is
//! the only one of its table with that prefix length on that field, can be
//! passed over without a look inside: one walk of the table's prefix trie
//! for that field ([`crate::trie`]) tells whether any of its prefixes holds
//! the packet's address, and if none does, how many leading bits prove it
//! (the same bits the walk inside would un-wildcard). An LPM-style table
//! over 20 prefix lengths then costs one trie walk and the subtables whose
//! length matched, not 20 probes.
//!
//! Every map is persistent (`im`, or shared `Arc`s copied on write): cloning
//! a table is O(1); the first change after a clone copies the list of
//! subtables (O(masks), not O(rules)) and each change then copies O(log n)
//! nodes, so a new version of a rule set of any size costs the changes it
//! holds, and readers of the old one are untouched.

use std::cmp::Reverse;
use std::sync::Arc;

use arrayvec::ArrayVec;
use im::OrdMap;
use sluice_packet::key::{FlowKey, KEY_WORDS};

use crate::flow_match::Match;
use crate::table::{Rule, RuleId};
use crate::trie::{lens_has, top, PrefixTrie, TrieMatch};
use crate::wildcards::{prefix_through_first_diff, Kind, REGIONS};

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
type TrieMemo<'a> = [Option<TrieMatch<'a, Ranked>>; N_PREFIX];

const KEY_BYTES: usize = KEY_WORDS * 8;

type MaskId = [u64; KEY_WORDS];
/// A level's key, built on the stack for lookups.
type LevelKey = ArrayVec<u8, KEY_BYTES>;

/// A level key as the B-trees hold it: the first 16 bytes inline, so that
/// most comparisons in a node touch no other memory (a boxed key costs a
/// cache miss per comparison), and the rest, if any, boxed. Keys of one
/// level all have one length, so this orders as the bytes do. The head is
/// held as two big-endian words: integer comparisons, not a `memcmp`, and
/// 8-byte aligned (a `u128` would pad every entry to 16).
///
/// Entries are kept small (24 bytes here, 24 for the group): a B-tree
/// node holds 64 of them inline, and an insert shifts half a node and a
/// new version copies whole nodes, so their size is what an insert costs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SplitKey {
    head: Addr,
    rest: Option<Box<Rest>>,
}

/// The bytes of a level key past its first 16 (behind a thin pointer).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rest(Box<[u8]>);

impl SplitKey {
    fn new(bytes: &[u8]) -> Self {
        let n = bytes.len().min(16);
        let mut head = [0u8; 16];
        head[..n].copy_from_slice(&bytes[..n]);
        let rest = (bytes.len() > 16).then(|| Box::new(Rest(Box::from(&bytes[16..]))));
        SplitKey {
            head: addr(u128::from_be_bytes(head)),
            rest,
        }
    }
}

/// A `u128` as two words, high first (ordered as the number is), 8-byte
/// aligned.
type Addr = [u64; 2];

fn addr(v: u128) -> Addr {
    [(v >> 64) as u64, v as u64]
}

fn from_addr(a: &Addr) -> u128 {
    u128::from(a[0]) << 64 | u128::from(a[1])
}

/// A key region a subtable's mask covers.
#[derive(Debug, Clone, Copy)]
struct Region {
    off: usize,
    len: usize,
    kind: Kind,
    /// For an address region: which of the table's tries is its field's.
    slot: usize,
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

    /// The value moved to the top of a `u128`, as the tries hold it.
    fn left(&self, bytes: &[u8]) -> u128 {
        self.value(bytes) << (128 - self.bits())
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
    /// these rules, with counts (behind a pointer: most groups have none).
    next: Option<Arc<OrdMap<Addr, u32>>>,
    /// At the last level: the rules, best first (priority, then age).
    /// Shared: a B-tree node copied for a new version copies a pointer
    /// per group, not its list.
    rules: Arc<Vec<Arc<Rule>>>,
}

/// A subtable's use of its table's prefix trie.
#[derive(Debug, Clone, Copy)]
struct TrieUse {
    /// Index of the address region in the subtable's regions.
    region: usize,
    /// The trie (by [`Region::slot`]).
    slot: usize,
    /// The mask's prefix length on that field.
    plen: u32,
    /// Whether no other subtable has this prefix length on this field (only
    /// then are the trie's prefixes of that length this subtable's).
    alone: bool,
    /// The mask over the regions before the address region.
    pre_mask: FlowKey,
}

/// What lets a lookup pass a subtable over by its trie alone: every rule
/// has the values `value` under `TrieUse::pre_mask` (one group before the
/// address region), and the subtable is alone with its prefix length.
#[derive(Debug, Clone)]
struct TrieGate {
    slot: usize,
    plen: u32,
    region: Region,
    /// Whether the address is the subtable's last region: then the trie's
    /// rules for a matched prefix are the subtable's rules for the packet.
    last: bool,
    /// The words of the key the regions before the address are in: index,
    /// mask and the rules' value.
    pre: ArrayVec<(u8, u64, u64), PRE_WORDS>,
}

/// At most this many key words before the address region for a gate.
const PRE_WORDS: usize = 4;

impl TrieGate {
    fn agrees(&self, key: &FlowKey) -> bool {
        let k = key.words();
        self.pre.iter().all(|&(i, m, v)| k[i as usize] & m == v)
    }
}

#[derive(Debug, Clone)]
struct Subtable {
    mask: FlowKey,
    /// Highest priority of its rules (kept with every change).
    maxp: u16,
    regions: Arc<[Region]>,
    trie: Option<TrieUse>,
    /// Set while the trie alone can pass this subtable over.
    gate: Option<TrieGate>,
    root: Group,
    /// Level `j`: groups by the values of the first `j+1` regions. B-trees
    /// (nodes at least half full) rather than hash tries, whose sparse
    /// nodes cost kilobytes per handful of entries.
    levels: Vec<OrdMap<SplitKey, Group>>,
    prios: OrdMap<u16, u32>,
}

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

impl Subtable {
    fn new(mask: &FlowKey) -> Self {
        let m = bytemuck::bytes_of(mask);
        let mut slot = 0;
        let regions: Vec<Region> = REGIONS
            .iter()
            .filter_map(|&(off, len, kind)| {
                let r = Region {
                    off,
                    len,
                    kind,
                    slot,
                };
                slot += usize::from(kind != Kind::Whole);
                m[off..off + len].iter().any(|&b| b != 0).then_some(r)
            })
            .collect();
        // The first address region, if its mask is a prefix.
        let trie = regions.iter().position(Region::is_prefix).and_then(|j| {
            let r = &regions[j];
            let v = r.left(m);
            let plen = v.leading_ones();
            let mut pre_mask = FlowKey::default();
            let pm = bytemuck::bytes_of_mut(&mut pre_mask);
            for p in &regions[..j] {
                pm[p.off..p.off + p.len].copy_from_slice(&m[p.off..p.off + p.len]);
            }
            (v.count_ones() == plen).then_some(TrieUse {
                region: j,
                slot: r.slot,
                plen,
                alone: false,
                pre_mask,
            })
        });
        let mut levels = Vec::with_capacity(regions.len());
        levels.resize_with(regions.len(), OrdMap::new);
        let root = Group {
            next: regions
                .first()
                .filter(|r| r.is_prefix())
                .map(|_| Arc::new(OrdMap::new())),
            ..Group::default()
        };
        Subtable {
            mask: *mask,
            maxp: 0,
            regions: regions.into(),
            trie,
            gate: None,
            root,
            levels,
            prios: OrdMap::new(),
        }
    }

    fn mask_id(&self) -> &MaskId {
        self.mask.words()
    }

    /// Where the probe order puts it: highest priority first.
    fn probe_key(&self) -> (Reverse<u16>, &MaskId) {
        (Reverse(self.maxp), self.mask_id())
    }

    /// Sets or clears the gate after a change: open while the subtable is
    /// alone with its prefix length and its rules agree before the address.
    fn regate(&mut self) {
        let open = self
            .trie
            .filter(|t| t.alone && (t.region == 0 || self.levels[t.region - 1].len() == 1));
        if open.is_some() == self.gate.is_some() {
            // Unchanged: while open, the one group before the address (and
            // so the gate's values) stays the same.
            return;
        }
        self.gate = open.and_then(|t| {
            let any = self.levels.last()?.get_min()?.1.rules.first()?;
            let value = any.matcher.value.masked(&t.pre_mask);
            let mut pre = ArrayVec::new();
            for (i, (&m, &v)) in t.pre_mask.words().iter().zip(value.words()).enumerate() {
                if m != 0 {
                    pre.try_push((i as u8, m, v)).ok()?;
                }
            }
            Some(TrieGate {
                slot: t.slot,
                plen: t.plen,
                region: self.regions[t.region],
                last: t.region + 1 == self.regions.len(),
                pre,
            })
        });
    }

    /// The rule's prefix in this subtable's trie, if it uses one.
    fn trie_prefix(&self, m: &Match) -> Option<(usize, u128, u32)> {
        let t = self.trie?;
        let v = self.values(m);
        let r = &self.regions[t.region];
        Some((t.slot, r.left(bytemuck::bytes_of(&v)), t.plen))
    }

    fn is_empty(&self) -> bool {
        self.root.count == 0
    }

    /// The rule's masked value bytes.
    fn values(&self, m: &Match) -> FlowKey {
        m.value.masked(&self.mask)
    }

    /// Counts value `v` in (or out of) a group's distinct next-region values.
    fn bump(next: &mut Option<Arc<OrdMap<Addr, u32>>>, v: Option<u128>, up: bool) {
        let (Some(n), Some(v)) = (next, v) else {
            return;
        };
        let n = Arc::make_mut(n);
        let v = addr(v);
        if up {
            // A value new to the group is the common case: one walk.
            if let Some(c) = n.insert(v, 1) {
                n.insert(v, c + 1);
            }
            return;
        }
        let c = n.get_mut(&v).expect("a counted value");
        *c -= 1;
        if *c == 0 {
            n.remove(&v);
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

    /// Adds a rule, or, when the subtable has one with the same match and
    /// priority (OpenFlow's "identical"), puts it in that one's place and
    /// returns the one it replaced. The level that holds the rules is
    /// looked at first, so finding an identical rule costs no walk of its
    /// own, and a new key is inserted with its group whole (one walk).
    fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let v = self.values(&rule.matcher);
        let vb = bytemuck::bytes_of(&v);
        let mut keys = self.level_keys(vb);
        match keys.pop() {
            Some(k) => {
                let level = self.levels.last_mut().expect("a level per region");
                // Inserted first: a key new to the level (an add's common
                // case) then costs one walk, not a look-up and an insert.
                let fresh = Group {
                    count: 1,
                    next: None,
                    rules: Arc::new(vec![Arc::clone(&rule)]),
                };
                if let Some(mut g) = level.insert(k.clone(), fresh) {
                    // The key was there: the rule joins its group.
                    let put = Self::put_rule(&mut g, &rule);
                    level.insert(k, g);
                    if let Err(old) = put {
                        // An identical rule replaced: nothing else moves.
                        return Some(old);
                    }
                }
                self.root.count += 1;
                let v0 = self.prefix_value(0, vb);
                Self::bump(&mut self.root.next, v0, true);
                for (j, k) in keys.into_iter().enumerate() {
                    let nv = self.prefix_value(j + 1, vb);
                    let level = &mut self.levels[j];
                    match level.get_mut(&k) {
                        Some(g) => {
                            g.count += 1;
                            Self::bump(&mut g.next, nv, true);
                        }
                        None => {
                            let next = nv.map(|v| Arc::new(OrdMap::unit(addr(v), 1)));
                            level.insert(
                                k,
                                Group {
                                    count: 1,
                                    next,
                                    ..Group::default()
                                },
                            );
                        }
                    }
                }
            }
            // No region: the root holds the rules.
            None => {
                if let Err(old) = Self::put_rule(&mut self.root, &rule) {
                    return Some(old);
                }
            }
        }
        *self.prios.entry(rule.priority).or_insert(0) += 1;
        self.maxp = self.maxp.max(rule.priority);
        None
    }

    /// Puts `rule` into the group that holds its match's rules: in the
    /// place of the one with its priority, which is returned as `Err` (the
    /// count unchanged), or else in best-first order, counted.
    fn put_rule(g: &mut Group, rule: &Arc<Rule>) -> Result<(), Arc<Rule>> {
        let rules = Arc::make_mut(&mut g.rules);
        let identical =
            |r: &&mut Arc<Rule>| r.priority == rule.priority && r.matcher == rule.matcher;
        if let Some(same) = rules.iter_mut().find(identical) {
            return Err(std::mem::replace(same, Arc::clone(rule)));
        }
        let pos = rules.partition_point(|x| order_key(x) < order_key(rule));
        rules.insert(pos, Arc::clone(rule));
        g.count += 1;
        Ok(())
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
        let rule = Arc::make_mut(&mut last.rules).remove(pos);
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
            self.maxp = self.prios.get_max().map_or(0, |(p, _)| *p);
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
            .and_then(|b| next.get_prev(&addr(b)))
            .map(|(v, _)| from_addr(v));
        let above = x
            .checked_add(1)
            .and_then(|a| next.get_next(&addr(a)))
            .map(|(v, _)| from_addr(v));
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
    /// The subtables in probe order: highest priority first.
    probe: Arc<Vec<Subtable>>,
    /// Where each mask's subtable is in `probe`.
    pos: Arc<hashbrown::HashMap<MaskId, usize>>,
    /// One prefix trie per address field.
    tries: [PrefixTrie<Ranked>; N_PREFIX],
    /// Subtables using each (trie, prefix length).
    trie_users: OrdMap<(usize, u32), u32>,
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
        self.probe.len()
    }

    /// The rules, highest priority first; among equals, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.order.values()
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

    /// Counts a subtable in or out of its (trie, length), and marks whether
    /// the one left alone with it may use the trie.
    fn count_trie_user(&mut self, t: TrieUse, up: bool) {
        let key = (t.slot, t.plen);
        let c = self.trie_users.entry(key).or_insert(0);
        if up {
            *c += 1;
        } else {
            *c -= 1;
        }
        let n = *c;
        if n == 0 {
            self.trie_users.remove(&key);
        }
        for st in Arc::make_mut(&mut self.probe).iter_mut() {
            if let Some(u) = st.trie.as_mut().filter(|u| (u.slot, u.plen) == key) {
                u.alone = n == 1;
                st.regate();
            }
        }
    }

    /// Adds a rule; a rule with the same match and priority (OpenFlow's
    /// "identical") is replaced in its place, and returned.
    pub fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
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
        let st = &mut Arc::make_mut(&mut self.probe)[i];
        let before = (st.maxp, st.is_empty());
        let prefix = st.trie_prefix(&rule.matcher);
        let replaced = st.insert(Arc::clone(&rule));
        if let Some(old) = &replaced {
            // Same match and priority: the same place in every index.
            if let Some((slot, v, plen)) = prefix {
                self.tries[slot].remove(v, plen, &Ranked(Arc::clone(old)));
            }
            self.order.remove(&order_key(old));
        } else {
            st.regate();
            if (st.maxp, st.is_empty()) != before {
                self.reposition(i);
            }
        }
        if let Some((slot, v, plen)) = prefix {
            self.tries[slot].insert(v, plen, Ranked(Arc::clone(&rule)));
        }
        self.order.insert(order_key(&rule), rule);
        replaced
    }

    /// Removes a rule of this table.
    pub fn remove(&mut self, rule: &Rule) -> Option<Arc<Rule>> {
        let mid = *rule.matcher.mask.words();
        let i = *self.pos.get(&mid)?;
        let probe = Arc::make_mut(&mut self.probe);
        let st = &mut probe[i];
        let before = st.maxp;
        let gone = st.remove(&rule.matcher, rule.id)?;
        if let Some((slot, v, plen)) = st.trie_prefix(&gone.matcher) {
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
        self.order.remove(&order_key(&gone));
        Some(gone)
    }

    /// The rule with exactly this match and priority (OpenFlow's "identical").
    pub fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
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
    /// rules it passed over miss.
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let mut best: Option<&Arc<Rule>> = None;
        let mut memo: TrieMemo = Default::default();
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
                let m = memo[g.slot].get_or_insert_with(|| {
                    self.tries[g.slot].lookup(g.region.left(bytemuck::bytes_of(key)))
                });
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
