//! A subtable of [`super::TableIndex`]: the rules of one mask, indexed by
//! the prefixes of their values level by level (see the parent module),
//! with the key regions its mask covers and its use of the table's prefix
//! tries.

use std::cmp::Reverse;
use std::sync::Arc;

use arrayvec::ArrayVec;
use sluice_packet::key::{FlowKey, KEY_WORDS};

use super::pmap::PMap;
use super::rules::Rules;
use super::MaskId;
use crate::flow_match::Match;
use crate::rule::{Rule, RuleId};
use crate::wildcards::{prefix_through_first_diff, Kind, REGIONS};

const KEY_BYTES: usize = KEY_WORDS * 8;

/// A level's key, built on the stack for lookups.
type LevelKey = ArrayVec<u8, KEY_BYTES>;

/// A level key as the B-trees hold it: the first 16 bytes inline, so that
/// most comparisons in a node touch no other memory (a boxed key costs a
/// cache miss per comparison), and the rest, if any, boxed. Keys of one
/// level all have one length, so this orders as the bytes do. The head is
/// held as two big-endian words: integer comparisons, not a `memcmp`, and
/// 8-byte aligned (a `u128` would pad every entry to 16).
///
/// Keys are kept small (24 bytes): a B-tree node holds 32 of them inline
/// (its values, 24-byte groups, in an array beside them), an insert
/// shifts part of a node and a new version copies whole nodes, so their
/// size is what an insert costs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SplitKey {
    head: Addr,
    rest: Option<Box<Rest>>,
}

impl SplitKey {
    /// The key's bytes (one shorter than 16 bytes followed by zeros).
    fn bytes(&self) -> LevelKey {
        let mut all = LevelKey::new();
        all.try_extend_from_slice(&from_addr(&self.head).to_be_bytes())
            .expect("a key fits");
        if let Some(r) = &self.rest {
            all.try_extend_from_slice(&r.0).expect("a key fits");
        }
        all
    }
}

/// A level key to look for, as [`SplitKey`] would hold it but borrowing
/// its bytes past 16: a lookup's probes make no allocation. Made once
/// per probe (its head read whole, once), compared with
/// [`SplitKey::cmp_probe`] at every step of the walk.
struct Probe<'a> {
    head: Addr,
    tail: &'a [u8],
}

impl<'a> Probe<'a> {
    fn new(b: &'a [u8]) -> Self {
        let n = b.len().min(16);
        let mut head = [0u8; 16];
        head[..n].copy_from_slice(&b[..n]);
        Probe {
            head: addr(u128::from_be_bytes(head)),
            tail: b.get(16..).unwrap_or_default(),
        }
    }
}

impl SplitKey {
    /// How this key orders against the one `SplitKey::new` would make of
    /// the probe's bytes.
    fn cmp_probe(&self, p: &Probe<'_>) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        self.head
            .cmp(&p.head)
            .then_with(|| match (&self.rest, p.tail.is_empty()) {
                (None, true) => Ordering::Equal,
                (None, false) => Ordering::Less,
                (Some(_), true) => Ordering::Greater,
                (Some(r), false) => r.0[..].cmp(p.tail),
            })
    }
}

/// The bytes of a level key past its first 16 (behind a thin pointer).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rest(Box<[u8]>);

impl SplitKey {
    /// The key of `bytes` (the probe for them, its tail owned).
    fn new(bytes: &[u8]) -> Self {
        let p = Probe::new(bytes);
        SplitKey {
            head: p.head,
            rest: (bytes.len() > 16).then(|| Box::new(Rest(Box::from(p.tail)))),
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

/// The keys of every level for one rule's values: the bytes of the
/// last level's key and where each level's ends (the keys themselves
/// made when asked: a list of them all would be moved around whole).
struct LevelKeys {
    bytes: LevelKey,
    ends: ArrayVec<u8, { REGIONS.len() }>,
}

impl LevelKeys {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Level `j`'s key.
    fn key(&self, j: usize) -> SplitKey {
        SplitKey::new(self.level(j))
    }

    /// Level `j`'s key bytes.
    fn level(&self, j: usize) -> &[u8] {
        &self.bytes[..usize::from(self.ends[j])]
    }
}

/// A key region a subtable's mask covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Region {
    pub(super) off: usize,
    pub(super) len: usize,
    pub(super) kind: Kind,
    /// For an address region: which of the table's tries is its field's.
    pub(super) slot: usize,
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

    /// Appends the region of `bytes & mask` to a level key: as they are,
    /// but a host-order address as big-endian, so that keys order
    /// addresses as numbers (a group's next addresses are then neighbours
    /// among the next level's keys). A lookup's key is masked region by
    /// region this way (no masked copy of the whole key made). Returns the
    /// bytes appended as a big-endian number when there are at most 16 of
    /// them (what a probe's head is made of, kept in a register: a read of
    /// the bytes just written, narrower than the reads, would wait for the
    /// stores).
    #[inline]
    fn push_key(&self, bytes: &[u8], mask: &[u8], key: &mut LevelKey) -> Option<u128> {
        if self.is_prefix() {
            let v = self.value(bytes) & self.value(mask);
            self.push_value(v, key);
            return Some(v);
        }
        let (b, m) = (
            &bytes[self.off..self.off + self.len],
            &mask[self.off..self.off + self.len],
        );
        let mut v = 0u128;
        for (b, m) in b.iter().zip(m) {
            let x = b & m;
            key.push(x);
            v = v << 8 | u128::from(x);
        }
        (self.len <= 16).then_some(v)
    }

    /// Appends address `v` (a number, as [`Region::value`] reads it) as
    /// [`Region::push_key`] would.
    fn push_value(&self, v: u128, key: &mut LevelKey) {
        let be = v.to_be_bytes();
        key.try_extend_from_slice(&be[16 - self.len..])
            .expect("regions fit in a key");
    }

    /// The address the bytes of a level key hold at `at` (as
    /// [`Region::push_value`] wrote it).
    fn key_value(&self, key: &[u8], at: usize) -> u128 {
        let mut a = [0u8; 16];
        a[16 - self.len..].copy_from_slice(&key[at..at + self.len]);
        u128::from_be_bytes(a)
    }

    /// The largest address the region holds.
    fn max_value(&self) -> u128 {
        u128::MAX >> (128 - self.bits())
    }

    pub(super) fn bits(&self) -> u32 {
        self.len as u32 * 8
    }

    /// The value moved to the top of a `u128`, as the tries hold it.
    pub(super) fn left(&self, bytes: &[u8]) -> u128 {
        self.value(bytes) << (128 - self.bits())
    }

    /// Writes `v` (a number as [`Region::value`] reads it) OR'ed into `bytes`.
    pub(super) fn or_value(&self, bytes: &mut [u8], v: u128) {
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
    /// Rules whose values agree with this group's key. (When the next
    /// region is an address, its distinct values among these rules are
    /// the next level's keys that extend this group's: neighbours there,
    /// as keys order addresses as numbers.)
    count: u32,
    /// At the last level: the rules, best first (priority, then age).
    rules: Rules,
}

/// A subtable's use of its table's prefix trie.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrieUse {
    /// Index of the address region in the subtable's regions.
    pub(super) region: usize,
    /// The trie (by [`Region::slot`]).
    pub(super) slot: usize,
    /// The mask's prefix length on that field.
    pub(super) plen: u32,
    /// Whether the trie is kept and no other subtable has this prefix
    /// length on this field (only then are the trie's prefixes of that
    /// length this subtable's).
    pub(super) alone: bool,
    /// The mask over the regions before the address region.
    pre_mask: FlowKey,
}

/// What lets a lookup pass a subtable over by its trie alone: every rule
/// has the values `value` under `TrieUse::pre_mask` (one group before the
/// address region), and the subtable is alone with its prefix length.
#[derive(Debug, Clone)]
pub(super) struct TrieGate {
    pub(super) slot: usize,
    pub(super) plen: u32,
    pub(super) region: Region,
    /// Whether the address is the subtable's last region: then the trie's
    /// rules for a matched prefix are the subtable's rules for the packet.
    pub(super) last: bool,
    /// The words of the key the regions before the address are in: index,
    /// mask and the rules' value.
    pre: ArrayVec<(u8, u64, u64), PRE_WORDS>,
}

/// At most this many key words before the address region for a gate.
const PRE_WORDS: usize = 4;

impl TrieGate {
    pub(super) fn agrees(&self, key: &FlowKey) -> bool {
        let k = key.words();
        self.pre.iter().all(|&(i, m, v)| k[i as usize] & m == v)
    }
}

#[derive(Debug, Clone)]
pub(super) struct Subtable {
    mask: FlowKey,
    /// Highest priority of its rules (kept with every change).
    pub(super) maxp: u16,
    regions: Arc<[Region]>,
    pub(super) trie: Option<TrieUse>,
    /// Set while the trie alone can pass this subtable over.
    pub(super) gate: Option<TrieGate>,
    root: Group,
    /// Level `j`: groups by the values of the first `j+1` regions.
    /// B-trees ([`PMap`], nodes full or at least half full) rather than
    /// hash tries, whose sparse nodes cost kilobytes per handful of
    /// entries.
    levels: Vec<PMap<SplitKey, Group>>,
    /// How many rules of each priority.
    prios: PMap<u16, u32>,
}

impl Subtable {
    pub(super) fn new(mask: &FlowKey) -> Self {
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
        levels.resize_with(regions.len(), PMap::new);
        let root = Group::default();
        Subtable {
            mask: *mask,
            maxp: 0,
            regions: regions.into(),
            trie,
            gate: None,
            root,
            levels,
            prios: PMap::new(),
        }
    }

    pub(super) fn mask_id(&self) -> &MaskId {
        self.mask.words()
    }

    /// Where the probe order puts it: highest priority first.
    pub(super) fn probe_key(&self) -> (Reverse<u16>, &MaskId) {
        (Reverse(self.maxp), self.mask_id())
    }

    /// Sets or clears the gate after a change: open while the subtable is
    /// alone with its prefix length and its rules agree before the address.
    pub(super) fn regate(&mut self) {
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
    pub(super) fn trie_prefix(&self, m: &Match) -> Option<(usize, u128, u32)> {
        let t = self.trie?;
        let v = self.values(m);
        let r = &self.regions[t.region];
        Some((t.slot, r.left(bytemuck::bytes_of(&v)), t.plen))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.root.count == 0
    }

    /// The rule's masked value bytes.
    fn values(&self, m: &Match) -> FlowKey {
        m.value.masked(&self.mask)
    }

    /// The key of each level for the value bytes `vb`: level `j`'s is the
    /// values of regions `0..=j`.
    fn level_keys(&self, vb: &[u8]) -> LevelKeys {
        let mut keys = LevelKeys {
            bytes: LevelKey::new(),
            ends: ArrayVec::new(),
        };
        for r in self.regions.iter() {
            r.push_key(vb, bytemuck::bytes_of(&self.mask), &mut keys.bytes);
            keys.ends.push(keys.bytes.len() as u8);
        }
        keys
    }

    /// Adds a rule, or, when the subtable has one with the same match and
    /// priority (OpenFlow's "identical"), puts it in that one's place and
    /// returns the one it replaced. The level that holds the rules is
    /// looked at first, so finding an identical rule costs no walk of its
    /// own; each level costs one walk, finding its group or making it.
    pub(super) fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let v = self.values(&rule.matcher);
        let vb = bytemuck::bytes_of(&v);
        let keys = self.level_keys(vb);
        match keys.len().checked_sub(1).map(|last| (last, keys.key(last))) {
            Some((last, k)) => {
                let level = self.levels.last_mut().expect("a level per region");
                // One walk finds the group or makes it.
                let (g, had) = level.entry(k, Group::default);
                if let Err(old) = Self::put_rule(g, &rule) {
                    // An identical rule replaced: nothing else moves.
                    return Some(old);
                }
                debug_assert!(had || g.count == 1);
                self.root.count += 1;
                for j in 0..last {
                    self.levels[j].entry(keys.key(j), Group::default).0.count += 1;
                }
            }
            // No region: the root holds the rules.
            None => {
                if let Err(old) = Self::put_rule(&mut self.root, &rule) {
                    return Some(old);
                }
            }
        }
        *self.prios.entry(rule.priority, || 0).0 += 1;
        self.maxp = self.maxp.max(rule.priority);
        None
    }

    /// Puts `rule` into the group that holds its match's rules: in the
    /// place of the one with its priority, which is returned as `Err` (the
    /// count unchanged), or else in best-first order, counted.
    fn put_rule(g: &mut Group, rule: &Arc<Rule>) -> Result<(), Arc<Rule>> {
        g.rules.put(rule)?;
        g.count += 1;
        Ok(())
    }

    /// Removes the rule with this id (whose match is `m`), if present.
    pub(super) fn remove(&mut self, m: &Match, id: RuleId) -> Option<Arc<Rule>> {
        let v = self.values(m);
        let vb = bytemuck::bytes_of(&v);
        let keys = self.level_keys(vb);
        let n = keys.len();
        let last = match n.checked_sub(1) {
            Some(j) => self.levels[j].get_mut(&keys.key(j))?,
            None => &mut self.root,
        };
        let rule = last.rules.remove(id)?;
        self.root.count -= 1;
        for j in 0..n {
            let k = keys.key(j);
            let g = self.levels[j]
                .get_mut(&k)
                .expect("every level holds the rule");
            g.count -= 1;
            if g.count == 0 {
                self.levels[j].remove(&k);
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

    /// Its rules, in no particular order.
    pub(super) fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        // The last level's groups hold them, or the root when there is
        // no level.
        let last = self.levels.last();
        let root = last.is_none().then_some(&self.root);
        last.into_iter()
            .flat_map(PMap::values)
            .chain(root)
            .flat_map(|g| g.rules.iter())
    }

    /// The rule of this subtable with exactly this match and priority.
    pub(super) fn find(&self, m: &Match, priority: u16) -> Option<&Arc<Rule>> {
        self.same_match(m).find(|r| r.priority == priority)
    }

    /// The rules of this subtable with exactly this match, best first.
    pub(super) fn same_match(&self, m: &Match) -> impl Iterator<Item = &Arc<Rule>> {
        let v = self.values(m);
        let keys = self.level_keys(bytemuck::bytes_of(&v));
        let last = match keys.len().checked_sub(1) {
            Some(j) => {
                let p = Probe::new(keys.level(j));
                self.levels[j].get_by(|x| x.cmp_probe(&p))
            }
            None => Some(&self.root),
        };
        last.into_iter().flat_map(|g| g.rules.iter())
    }

    /// The best rule matching `key` here, OR-ing into `wc` the bits that
    /// show which of this subtable's rules the key misses.
    pub(super) fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let kb = bytemuck::bytes_of(key);
        let mb = bytemuck::bytes_of(&self.mask);
        let mut prev = &self.root;
        let mut lk = LevelKey::new();
        // The level key's first 16 bytes as a number, built as the
        // regions are appended (`None` once a region is too long for it).
        let mut head = Some(0u128);
        for (j, r) in self.regions.iter().enumerate() {
            let at = lk.len();
            let v = r.push_key(kb, mb, &mut lk);
            head = head.zip(v).map(|(h, v)| match at {
                0..16 if r.len > 0 => h | (v << (128 - r.bits())) >> (8 * at),
                _ => h,
            });
            let p = match head {
                Some(h) => Probe {
                    head: addr(h),
                    tail: lk.get(16..).unwrap_or_default(),
                },
                None => Probe::new(&lk),
            };
            let g = self.levels[j].get_by(|x| x.cmp_probe(&p));
            if g.map_or(0, |g| g.count) < prev.count {
                self.explain(j, &lk[..at], kb, mb, wc);
            }
            prev = g?;
        }
        prev.rules.first()
    }

    /// Un-wildcards what proves the rules of the group keyed `pre` at
    /// level `j - 1` (the root for `j` 0) that differ from the key in
    /// region `j` miss it: the whole region, or for an address, its bits
    /// down to the first where the closest value of those rules differs
    /// (those values are the level-`j` keys that extend `pre`, ordered as
    /// numbers: the closest are the neighbours of the key's own).
    /// (`kb` is the key unmasked.)
    fn explain(&self, j: usize, pre: &[u8], kb: &[u8], mb: &[u8], wc: &mut FlowKey) {
        let r = &self.regions[j];
        let w = bytemuck::bytes_of_mut(wc);
        if !r.is_prefix() {
            for i in r.off..r.off + r.len {
                w[i] |= mb[i];
            }
            return;
        }
        let level = &self.levels[j];
        let x = r.value(kb) & r.value(mb);
        let probe = |v: u128| {
            let mut k = LevelKey::new();
            k.try_extend_from_slice(pre).expect("regions fit in a key");
            r.push_value(v, &mut k);
            k
        };
        let ours = |k: &SplitKey| {
            let b = k.bytes();
            b.starts_with(pre).then(|| r.key_value(&b, pre.len()))
        };
        // (Probed by bytes: no key made, so no allocation for one past 16
        // bytes.)
        let below = x
            .checked_sub(1)
            .map(probe)
            .and_then(|b| {
                let p = Probe::new(&b);
                level.get_prev_by(|k| k.cmp_probe(&p))
            })
            .and_then(|(k, _)| ours(k));
        let above = (x < r.max_value())
            .then(|| probe(x + 1))
            .and_then(|b| {
                let p = Probe::new(&b);
                level.get_next_by(|k| k.cmp_probe(&p))
            })
            .and_then(|(k, _)| ours(k));
        let mut bits = 0u128;
        for v in [below, above].into_iter().flatten() {
            bits |= prefix_through_first_diff(x ^ v, r.bits());
        }
        r.or_value(w, bits & r.value(mb));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A key orders against bytes as against the key they make, and
        /// keys of one length order as their bytes do (past 16 bytes too).
        #[test]
        fn keys_order_as_their_bytes(
            (a, b) in (0usize..40).prop_flat_map(|n| (
                prop::collection::vec(0u8..3, n),
                prop::collection::vec(0u8..3, n),
            )),
        ) {
            let (ka, kb) = (SplitKey::new(&a), SplitKey::new(&b));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(ka.cmp_probe(&Probe::new(&b)), a.cmp(&b));
            prop_assert_eq!(ka.cmp_probe(&Probe::new(&a)), std::cmp::Ordering::Equal);
            prop_assert_eq!(&ka.bytes()[..a.len()], &a[..]);
        }
    }
}
