//! The megaflow classifier: tuple-space search over cached translations.
//!
//! A megaflow is a translation result (datapath actions, rules to credit)
//! together with the mask of key bits the decision depended on. Megaflows
//! that share a mask live in one subtable, a hash table keyed by the
//! masked key; a lookup probes subtables in rank order (most hits first,
//! re-ranked periodically) until one holds the packet's masked key. As in
//! OVS's dpcls, the batched lookup runs subtable by subtable over every
//! packet still unmatched: hash all, then probe all.
//!
//! Limits on the number of megaflows and of masks keep a flood of
//! crafted packets from growing the table or the subtable count without
//! bound (tuple-space explosion, CVE-2019-25076): an install past a limit
//! is refused and counted, and the packet is forwarded by its translation
//! without being cached.
//!
//! Entries are addressed by [`FlowRef`] (slot and generation), so the
//! exact-match and signature caches can point at them and notice when a
//! slot has been reused.

use std::sync::Arc;

use hashbrown::HashTable;
use sluice_packet::batch::set_bits;
use sluice_packet::hash::MaskedHasher;
use sluice_packet::key::FlowKey;

use crate::dpaction::DpAction;
use crate::flow_match::Match;
use crate::rule::Rule;
use crate::xlate::XlateDrop;

/// A cached translation.
#[derive(Debug, Clone)]
pub struct Megaflow {
    /// Masked key and mask.
    pub matcher: Match,
    /// What to do with matching packets. Shared with the other megaflows
    /// of the same translation (a miss storm's flows mostly have one), so
    /// installing a megaflow need not allocate.
    pub actions: Arc<[DpAction]>,
    /// Why matching packets go nowhere, when `actions` has no output.
    pub drop: Option<XlateDrop>,
    /// Rules each matching packet is credited to (shared like `actions`).
    pub rules: Arc<[Arc<Rule>]>,
    /// Rule-set version the entry was translated or revalidated against.
    pub version: u64,
    /// Packets that hit it.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Last hit (µs).
    pub used_us: u64,
    /// Installed (µs).
    pub created_us: u64,
    /// Of `packets`: those whose own upcalls made the megaflow (the
    /// first of each flow), which OVS's datapath flow does not count (its
    /// slow path ran them): `dpctl/dump-flows` leaves them out as OVS
    /// does; the rules are credited with them.
    pub upcall_packets: u64,
    /// Of `bytes`: those of `upcall_packets`.
    pub upcall_bytes: u64,
    /// How much of `packets`/`bytes` the rules have been credited with.
    /// Rules are credited in bulk, not per batch (as OVS's revalidators
    /// push megaflow stats), so PMD threads do not fight over the cache
    /// lines of shared rule counters: see [`Megaflow::credit_rules`].
    pub credited: (u64, u64),
    /// For a per-packet select ([`DpAction::Select`]): hits per variant
    /// (packets, bytes) not yet credited to its bucket's counter.
    pub select_hits: Vec<(u64, u64)>,
    /// What its `NORMAL` translation learns, refreshed while it is hit
    /// ([`Megaflow::relearn`]).
    pub learn: sluice_bridge::macs::Learns,
    /// The rules its translation's `learn` actions build, applied again
    /// while it is hit (OVS's `XC_LEARN`: a learned rule is refreshed, or
    /// put back if it went).
    pub learned: Option<Arc<[(u16, crate::parse::FlowSpec)]>>,
    /// The NORMAL MAC table entries its decision read.
    pub mac_reads: MacReads,
    /// The `fin_timeout`s its packets (TCP FIN or RST) run: (index in
    /// `rules`, idle, hard), applied again while it is hit (OVS's
    /// `XC_FIN_TIMEOUT`).
    pub fin: Option<Arc<[(usize, u16, u16)]>>,
}

impl Megaflow {
    /// Lowers the timeouts of the rules its `fin_timeout`s name.
    pub fn apply_fin(&self) {
        for &(ix, idle, hard) in self.fin.iter().flat_map(|f| f.iter()) {
            if let Some(r) = self.rules.get(ix) {
                r.reduce_timeouts(idle, hard);
            }
        }
    }
}

/// The entries of NORMAL's MAC table a cached decision read: a change of
/// one of them (a MAC learned, moved, aged) revalidates it, and only it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MacReads {
    /// None (no NORMAL, or to a multicast address).
    #[default]
    None,
    /// One (VLAN, MAC).
    One(sluice_bridge::macs::Key),
    /// More than one (NORMAL twice): any change revalidates it.
    Many,
}

impl MacReads {
    /// What a translation's reads make.
    pub fn of(reads: &[sluice_bridge::macs::Key]) -> MacReads {
        match reads {
            [] => MacReads::None,
            [k] => MacReads::One(*k),
            [k, rest @ ..] if rest.iter().all(|r| r == k) => MacReads::One(*k),
            _ => MacReads::Many,
        }
    }
}

impl Megaflow {
    /// What to learn again if it was hit since `since_us`: what keeps a
    /// MAC that only this megaflow's packets carry from aging out, as
    /// OVS's revalidators push the xlate cache's `XC_NORMAL` entries with
    /// the stats.
    pub fn relearn(&self, since_us: u64) -> sluice_bridge::macs::Learns {
        if self.hit_since(since_us) {
            self.learn
        } else {
            sluice_bridge::macs::Learns::NONE
        }
    }

    /// Whether a packet hit it after `since_us`.
    pub fn hit_since(&self, since_us: u64) -> bool {
        self.used_us > since_us && self.packets > 0
    }

    /// Credits `rules` with the hits not credited yet. Runs before the
    /// megaflow is removed or its rules change, periodically, and before
    /// anyone reads rule counters.
    pub fn credit_rules(&mut self) {
        let (p, b) = (self.packets - self.credited.0, self.bytes - self.credited.1);
        if p > 0 {
            for r in self.rules.iter() {
                r.credit(p, b, self.used_us);
            }
            self.credited = (self.packets, self.bytes);
        }
        if let [DpAction::Select(sel)] = &*self.actions {
            for (c, (p, b)) in sel.counters.iter().zip(&mut self.select_hits) {
                if *p > 0 {
                    c.credit(*p, *b, self.used_us);
                    (*p, *b) = (0, 0);
                }
            }
        }
    }
}

/// Most megaflows a table holds whatever its limit: slot indexes stay
/// below 2^31 (the datapath packs a reference into one word with a flag
/// bit; 2^31 megaflows would need hundreds of GB anyway).
pub const MAX_SLOTS: usize = 1 << 31;

/// Where a megaflow lives: slot and the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowRef {
    /// Slot index.
    pub idx: u32,
    /// Generation of the slot when the reference was taken.
    pub gen: u32,
}

/// Why an install was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallError {
    /// The table holds `max_flows` megaflows.
    FlowLimit,
    /// The table holds `max_masks` distinct masks.
    MaskLimit,
}

/// Table limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegaflowLimits {
    /// Most megaflows (OVS's default `flow-limit` is 200000).
    pub max_flows: usize,
    /// Most distinct masks, i.e. subtables.
    pub max_masks: usize,
}

impl Default for MegaflowLimits {
    fn default() -> Self {
        MegaflowLimits {
            max_flows: 200_000,
            max_masks: 512,
        }
    }
}

struct Slot {
    gen: u32,
    subtable: u32,
    flow: Option<Megaflow>,
}

/// The hash a subtable is found by, of its mask.
#[inline]
fn mask_hash(mask: &FlowKey) -> u64 {
    u64::from(mask.hash())
}

struct Subtable {
    mask: FlowKey,
    /// The mask's hash prepared: what a lookup hashes a key with (the
    /// same hash as `hash64_masked` of the mask).
    hasher: MaskedHasher,
    entries: HashTable<u32>,
    hits: u64,
}

/// The megaflow table of one datapath thread.
pub struct MegaflowTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    subtables: Vec<Subtable>,
    /// Live subtable ids, most hits first.
    order: Vec<u32>,
    /// Live subtable ids by their mask's hash: an install finds its
    /// subtable in O(1), not by comparing every mask.
    by_mask: HashTable<u32>,
    free_subtables: Vec<u32>,
    limits: MegaflowLimits,
    n_flows: usize,
}

impl std::fmt::Debug for MegaflowTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MegaflowTable")
            .field("flows", &self.n_flows)
            .field("masks", &self.order.len())
            .finish()
    }
}

impl MegaflowTable {
    /// An empty table.
    pub fn new(limits: MegaflowLimits) -> Self {
        // Room for the flow limit (up to 256k slots) reserved up front but
        // not touched, advised for huge pages: a miss storm then fills it
        // without copying it as it grows or faulting per 4 KiB.
        let mut slots = Vec::with_capacity(limits.max_flows.min(1 << 18));
        sluice_packet::memory::advise_huge_pages(slots.spare_capacity_mut());
        MegaflowTable {
            slots,
            free: Vec::new(),
            subtables: Vec::new(),
            order: Vec::new(),
            by_mask: HashTable::new(),
            free_subtables: Vec::new(),
            limits,
            n_flows: 0,
        }
    }

    /// Number of megaflows.
    pub fn len(&self) -> usize {
        self.n_flows
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n_flows == 0
    }

    /// Number of distinct masks (subtables).
    pub fn n_masks(&self) -> usize {
        self.order.len()
    }

    /// The limits.
    pub fn limits(&self) -> MegaflowLimits {
        self.limits
    }

    /// The megaflow `r` refers to, if it is still there.
    #[inline]
    pub fn get(&self, r: FlowRef) -> Option<&Megaflow> {
        let s = self.slots.get(r.idx as usize)?;
        if s.gen == r.gen {
            s.flow.as_ref()
        } else {
            None
        }
    }

    /// Mutable access to the megaflow `r` refers to.
    #[inline]
    pub fn get_mut(&mut self, r: FlowRef) -> Option<&mut Megaflow> {
        let s = self.slots.get_mut(r.idx as usize)?;
        if s.gen == r.gen {
            s.flow.as_mut()
        } else {
            None
        }
    }

    /// Hints the CPU to fetch slot `idx`'s megaflow (its generation, match
    /// and version), e.g. between an SMC lookup and its verification.
    #[inline]
    pub fn prefetch_slot(&self, idx: u32) {
        if let Some(s) = self.slots.get(idx as usize) {
            sluice_packet::prefetch::read_lines(s, std::mem::size_of::<Slot>().min(320));
        }
    }

    /// The megaflow in slot `idx` (whatever its generation), for callers
    /// that verify the match themselves (the signature cache).
    #[inline]
    pub fn get_slot(&self, idx: u32) -> Option<(FlowRef, &Megaflow)> {
        let s = self.slots.get(idx as usize)?;
        s.flow.as_ref().map(|f| (FlowRef { idx, gen: s.gen }, f))
    }

    fn probe(&self, st: &Subtable, hash: u64, key: &FlowKey) -> Option<u32> {
        st.entries
            .find(hash, |&idx| {
                let f = self.slots[idx as usize]
                    .flow
                    .as_ref()
                    .expect("indexed slots hold flows");
                key.matches_dp(&f.matcher.value, &f.matcher.mask)
            })
            .copied()
    }

    /// Looks up one key. Adds the number of subtables probed to `probes`.
    pub fn lookup(&mut self, key: &FlowKey, probes: &mut u64) -> Option<FlowRef> {
        for oi in 0..self.order.len() {
            let sid = self.order[oi] as usize;
            let st = &self.subtables[sid];
            let h = st.hasher.hash(key.words());
            if let Some(idx) = self.probe(st, h, key) {
                // A hit counts the subtables it took, as OVS's
                // `lookups_match` (a miss counts none).
                *probes += oi as u64 + 1;
                self.subtables[sid].hits += 1;
                return Some(FlowRef {
                    idx,
                    gen: self.slots[idx as usize].gen,
                });
            }
        }
        None
    }

    /// Looks up `keys[i]` for every bit `i` set in `todo`, subtable by
    /// subtable. Fills `out[i]` for hits and returns the bitmask of hits.
    /// Adds to `probes` the subtables each hit took (its subtable's place in
    /// the ranking, from 1), as OVS counts them for `avg. subtable lookups
    /// per megaflow hit`; a miss adds nothing.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        mut todo: u32,
        out: &mut [Option<FlowRef>],
        probes: &mut u64,
    ) -> u32 {
        let mut hits = 0u32;
        let mut hashes = [0u64; 32];
        for oi in 0..self.order.len() {
            if todo == 0 {
                break;
            }
            let sid = self.order[oi] as usize;
            let st = &self.subtables[sid];
            // Phase 1: hash every packet still unmatched under this mask.
            for i in set_bits(todo) {
                hashes[i] = st.hasher.hash(keys[i].words());
            }
            // Phase 2: probe.
            let mut found = 0u32;
            for i in set_bits(todo) {
                if let Some(idx) = self.probe(st, hashes[i], &keys[i]) {
                    out[i] = Some(FlowRef {
                        idx,
                        gen: self.slots[idx as usize].gen,
                    });
                    found |= 1 << i;
                }
            }
            self.subtables[sid].hits += found.count_ones() as u64;
            *probes += (oi as u64 + 1) * u64::from(found.count_ones());
            hits |= found;
            todo &= !found;
        }
        hits
    }

    /// The megaflow with exactly this match, if installed.
    pub fn find_exact(&self, m: &Match) -> Option<FlowRef> {
        let sid = self.subtable_for(&m.mask)?;
        let idx = self.find_in(sid, m.value.hash64_masked(&m.mask), m)?;
        Some(FlowRef {
            idx,
            gen: self.slots[idx as usize].gen,
        })
    }

    /// The live subtable of `mask`.
    fn subtable_for(&self, mask: &FlowKey) -> Option<u32> {
        let subtables = &self.subtables;
        self.by_mask
            .find(mask_hash(mask), |&s| subtables[s as usize].mask == *mask)
            .copied()
    }

    /// The subtable megaflow `r` is in, while it is installed.
    pub fn subtable_of(&self, r: FlowRef) -> Option<u32> {
        let s = self.slots.get(r.idx as usize)?;
        (s.gen == r.gen && s.flow.is_some()).then_some(s.subtable)
    }

    /// Looks up one key in the subtables `sids` only (those an earlier
    /// miss of a batch installed into, when nothing else changed since the
    /// key missed every subtable). Adds the subtables a hit took to
    /// `probes`, as [`MegaflowTable::lookup`].
    pub fn lookup_in(&mut self, key: &FlowKey, sids: &[u32], probes: &mut u64) -> Option<FlowRef> {
        for (k, &sid) in sids.iter().enumerate() {
            let st = &self.subtables[sid as usize];
            if st.entries.is_empty() {
                continue;
            }
            let h = st.hasher.hash(key.words());
            if let Some(idx) = self.probe(st, h, key) {
                *probes += k as u64 + 1;
                self.subtables[sid as usize].hits += 1;
                return Some(FlowRef {
                    idx,
                    gen: self.slots[idx as usize].gen,
                });
            }
        }
        None
    }

    /// The slot of the megaflow with exactly match `m` in subtable `sid`,
    /// `h` being `m`'s hash.
    fn find_in(&self, sid: u32, h: u64, m: &Match) -> Option<u32> {
        self.subtables[sid as usize]
            .entries
            .find(h, |&idx| {
                self.slots[idx as usize]
                    .flow
                    .as_ref()
                    .is_some_and(|f| f.matcher == *m)
            })
            .copied()
    }

    /// Installs a megaflow. An entry with the same match is replaced.
    pub fn insert(&mut self, flow: Megaflow) -> Result<FlowRef, InstallError> {
        // One hash for both the search for the same match and the insert.
        let h = flow.matcher.value.hash64_masked(&flow.matcher.mask);
        let existing = self.subtable_for(&flow.matcher.mask);
        if let Some(idx) = existing.and_then(|sid| self.find_in(sid, h, &flow.matcher)) {
            let slot = &mut self.slots[idx as usize];
            slot.flow = Some(flow);
            return Ok(FlowRef { idx, gen: slot.gen });
        }
        if self.n_flows >= self.limits.max_flows.min(MAX_SLOTS) {
            return Err(InstallError::FlowLimit);
        }
        let sid = match existing {
            Some(s) => s,
            None => {
                if self.order.len() >= self.limits.max_masks {
                    return Err(InstallError::MaskLimit);
                }
                let st = Subtable {
                    mask: flow.matcher.mask,
                    hasher: MaskedHasher::new(
                        flow.matcher.mask.words(),
                        flow.matcher.mask.reads_wide(),
                    ),
                    entries: HashTable::new(),
                    hits: 0,
                };
                let sid = match self.free_subtables.pop() {
                    Some(s) => {
                        self.subtables[s as usize] = st;
                        s
                    }
                    None => {
                        self.subtables.push(st);
                        (self.subtables.len() - 1) as u32
                    }
                };
                // New masks go last until ranking says otherwise.
                self.order.push(sid);
                let subtables = &self.subtables;
                self.by_mask
                    .insert_unique(mask_hash(&flow.matcher.mask), sid, |&s| {
                        mask_hash(&subtables[s as usize].mask)
                    });
                sid
            }
        };
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    gen: 0,
                    subtable: 0,
                    flow: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        slot.gen = slot.gen.wrapping_add(1);
        slot.subtable = sid;
        slot.flow = Some(flow);
        let gen = slot.gen;
        let slots = &self.slots;
        self.subtables[sid as usize]
            .entries
            .insert_unique(h, idx, |&i| {
                let f = slots[i as usize]
                    .flow
                    .as_ref()
                    .expect("indexed slots hold flows");
                f.matcher.value.hash64_masked(&f.matcher.mask)
            });
        self.n_flows += 1;
        Ok(FlowRef { idx, gen })
    }

    /// Removes a megaflow; references to it stop resolving.
    pub fn remove(&mut self, r: FlowRef) -> Option<Megaflow> {
        let s = self.slots.get_mut(r.idx as usize)?;
        if s.gen != r.gen || s.flow.is_none() {
            return None;
        }
        let mut flow = s.flow.take().expect("checked");
        // Its hits count for its rules even though it goes.
        flow.credit_rules();
        s.gen = s.gen.wrapping_add(1);
        let sid = s.subtable;
        self.free.push(r.idx);
        self.n_flows -= 1;
        let st = &mut self.subtables[sid as usize];
        let h = flow.matcher.value.hash64_masked(&flow.matcher.mask);
        if let Ok(e) = st.entries.find_entry(h, |&i| i == r.idx) {
            e.remove();
        }
        if st.entries.is_empty() {
            self.order.retain(|&o| o != sid);
            let mh = mask_hash(&self.subtables[sid as usize].mask);
            if let Ok(e) = self.by_mask.find_entry(mh, |&s| s == sid) {
                e.remove();
            }
            self.free_subtables.push(sid);
            self.subtables[sid as usize].entries = HashTable::new();
        }
        Some(flow)
    }

    /// Removes every megaflow for which `keep` says false; returns how many.
    pub fn retain(&mut self, mut keep: impl FnMut(FlowRef, &Megaflow) -> bool) -> usize {
        let doomed: Vec<FlowRef> = self
            .iter()
            .filter(|(r, f)| !keep(*r, f))
            .map(|(r, _)| r)
            .collect();
        for r in &doomed {
            self.remove(*r);
        }
        doomed.len()
    }

    /// Credits every megaflow's rules with its hits so far (see
    /// [`Megaflow::credit_rules`]).
    pub fn credit_all_rules(&mut self) {
        for s in &mut self.slots {
            if let Some(f) = s.flow.as_mut() {
                f.credit_rules();
            }
        }
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        let all: Vec<FlowRef> = self.iter().map(|(r, _)| r).collect();
        for r in all {
            self.remove(r);
        }
    }

    /// Re-sorts subtables by hits since the last call (most first) and
    /// resets the counts.
    pub fn rank(&mut self) {
        let subtables = &self.subtables;
        self.order
            .sort_by_key(|&s| std::cmp::Reverse(subtables[s as usize].hits));
        for &s in &self.order {
            self.subtables[s as usize].hits = 0;
        }
    }

    /// Every megaflow.
    pub fn iter(&self) -> impl Iterator<Item = (FlowRef, &Megaflow)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.flow.as_ref().map(|f| {
                (
                    FlowRef {
                        idx: i as u32,
                        gen: s.gen,
                    },
                    f,
                )
            })
        })
    }

    /// Masks in probe order.
    pub fn masks(&self) -> impl Iterator<Item = &FlowKey> {
        self.order.iter().map(|&s| &self.subtables[s as usize].mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::field_by_name;

    fn mf(fields: &[(&str, u128, u128)], out: u32) -> Megaflow {
        let mut m = Match::catch_all();
        for (n, v, k) in fields {
            m.set(field_by_name(n).unwrap(), *v, *k);
        }
        Megaflow {
            matcher: m,
            actions: Arc::from([DpAction::Output(out)]),
            drop: None,
            rules: Arc::from([]),
            version: 1,
            packets: 0,
            bytes: 0,
            used_us: 0,
            created_us: 0,
            upcall_packets: 0,
            upcall_bytes: 0,
            credited: (0, 0),
            select_hits: Vec::new(),
            learn: sluice_bridge::macs::Learns::NONE,
            learned: None,
            mac_reads: MacReads::None,
            fin: None,
        }
    }

    fn key(dst: u32, port: u16) -> FlowKey {
        FlowKey {
            in_port: 1,
            dl_type: 0x0800,
            nw_proto: 6,
            nw_dst: dst,
            tp_dst: port,
            ..Default::default()
        }
    }

    #[test]
    fn subtable_per_mask_and_lookup() {
        let mut t = MegaflowTable::new(MegaflowLimits::default());
        let a = t
            .insert(mf(
                &[
                    ("in_port", 1, u128::MAX),
                    ("nw_dst", 0x0a00_0000, 0xff00_0000),
                ],
                2,
            ))
            .unwrap();
        t.insert(mf(
            &[
                ("in_port", 1, u128::MAX),
                ("nw_dst", 0x0b00_0000, 0xff00_0000),
            ],
            3,
        ))
        .unwrap();
        t.insert(mf(&[("in_port", 1, u128::MAX), ("tp_dst", 80, 0xffff)], 4))
            .unwrap();
        assert_eq!((t.len(), t.n_masks()), (3, 2));
        let mut probes = 0;
        assert_eq!(t.lookup(&key(0x0a01_0101, 1), &mut probes), Some(a));
        assert!(t.lookup(&key(0x0c00_0001, 1), &mut probes).is_none());
        let r = t.lookup(&key(0x0c00_0001, 80), &mut probes).unwrap();
        assert_eq!(*t.get(r).unwrap().actions, [DpAction::Output(4)]);
    }

    #[test]
    fn batch_lookup_matches_single_lookups() {
        let mut t = MegaflowTable::new(MegaflowLimits::default());
        for i in 0..20u32 {
            t.insert(mf(&[("nw_dst", (i as u128) << 24, 0xff00_0000)], i))
                .unwrap();
            t.insert(mf(
                &[
                    ("tp_dst", 1000 + i as u128, 0xffff),
                    ("nw_dst", 0xc800_0000, 0xff00_0000),
                ],
                100 + i,
            ))
            .unwrap();
        }
        let keys: Vec<FlowKey> = (0..32u32)
            .map(|i| {
                key(
                    if i % 3 == 0 {
                        0xc800_0000
                    } else {
                        (i % 25) << 24
                    },
                    1000 + (i % 22) as u16,
                )
            })
            .collect();
        let mut out = [None; 32];
        let mut probes = 0;
        let hits = t.lookup_batch(&keys, u32::MAX, &mut out, &mut probes);
        let mut single_probes = 0;
        for (i, k) in keys.iter().enumerate() {
            let single = t.lookup(k, &mut single_probes);
            assert_eq!(out[i], single, "packet {i}");
            assert_eq!(hits & (1 << i) != 0, single.is_some());
        }
        assert_eq!(probes, single_probes, "the same subtable count either way");
    }

    /// `avg. subtable lookups per megaflow hit` as OVS counts it, by hand:
    /// three masks ranked A (busiest), B, C; hits in A, in C, in C and
    /// in B take 1 + 3 + 3 + 2 = 9 subtables, and the two misses none:
    /// 9 / 4 = 2.25 a hit (counting every probe would give 9 + 2 * 3 = 15).
    #[test]
    fn subtable_lookups_count_the_hits_only() {
        let mut t = MegaflowTable::new(MegaflowLimits::default());
        t.insert(mf(&[("nw_dst", 0x0a00_0000, 0xff00_0000)], 1))
            .unwrap();
        t.insert(mf(&[("tp_dst", 80, 0xffff)], 2)).unwrap();
        t.insert(mf(&[("in_port", 7, u128::MAX)], 3)).unwrap();
        // Rank A (nw_dst), then B (tp_dst), then C (in_port).
        for _ in 0..3 {
            t.lookup(&key(0x0a00_0001, 1), &mut 0);
        }
        for _ in 0..2 {
            t.lookup(&key(0x0100_0000, 80), &mut 0);
        }
        t.rank();
        let in_c = |nw: u32| {
            let mut k = key(nw, 1);
            k.in_port = 7;
            k
        };
        let keys = [
            key(0x0a00_0002, 1),   // A
            in_c(0x0200_0000),     // C
            in_c(0x0300_0000),     // C
            key(0x0400_0000, 80),  // B
            key(0x0500_0000, 81),  // miss
            key(0x0600_0000, 443), // miss
        ];
        let mut out = [None; 32];
        let mut probes = 0;
        let hits = t.lookup_batch(&keys, 0b11_1111, &mut out, &mut probes);
        assert_eq!(hits, 0b00_1111);
        assert_eq!(probes, 9);
        let mut one_by_one = 0;
        for k in &keys {
            t.lookup(k, &mut one_by_one);
        }
        assert_eq!(one_by_one, 9);
    }

    #[test]
    fn limits_are_enforced() {
        let mut t = MegaflowTable::new(MegaflowLimits {
            max_flows: 3,
            max_masks: 2,
        });
        t.insert(mf(&[("nw_dst", 1, u128::MAX)], 1)).unwrap();
        t.insert(mf(&[("tp_dst", 1, u128::MAX)], 1)).unwrap();
        assert_eq!(
            t.insert(mf(&[("tp_src", 1, u128::MAX)], 1)).unwrap_err(),
            InstallError::MaskLimit
        );
        t.insert(mf(&[("nw_dst", 2, u128::MAX)], 1)).unwrap();
        assert_eq!(
            t.insert(mf(&[("nw_dst", 3, u128::MAX)], 1)).unwrap_err(),
            InstallError::FlowLimit
        );
        // Same match replaces, even at the limit.
        t.insert(mf(&[("nw_dst", 2, u128::MAX)], 9)).unwrap();
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn removal_invalidates_references_and_empty_subtables_go() {
        let mut t = MegaflowTable::new(MegaflowLimits::default());
        let a = t.insert(mf(&[("tp_dst", 80, 0xffff)], 1)).unwrap();
        assert!(t.remove(a).is_some());
        assert!(t.get(a).is_none());
        assert_eq!(t.n_masks(), 0);
        let b = t.insert(mf(&[("tp_dst", 81, 0xffff)], 2)).unwrap();
        assert_eq!(b.idx, a.idx, "slot reused");
        assert_ne!(b.gen, a.gen, "with a new generation");
        assert!(t.get(a).is_none());
        assert!(t.lookup(&key(0, 80), &mut 0).is_none());
    }

    #[test]
    fn ranking_puts_the_busiest_subtable_first() {
        let mut t = MegaflowTable::new(MegaflowLimits::default());
        t.insert(mf(&[("nw_dst", 0x0a00_0000, 0xff00_0000)], 1))
            .unwrap();
        t.insert(mf(&[("tp_dst", 80, 0xffff)], 2)).unwrap();
        for _ in 0..5 {
            t.lookup(&key(0x0100_0000, 80), &mut 0);
        }
        t.rank();
        assert_eq!(t.masks().next().unwrap().tp_dst, 0xffff);
        let mut probes = 0;
        t.lookup(&key(0x0100_0000, 80), &mut probes);
        assert_eq!(probes, 1);
    }
}
