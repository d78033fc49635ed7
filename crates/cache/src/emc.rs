//! The exact-match cache (EMC).
//!
//! Open vSwitch's first-level cache: a direct-mapped table of full flow
//! keys, looked up with the packet's hash at two candidate positions (two
//! hash segments), each hit confirmed by comparing the whole key. It is
//! per thread, so no locks. Inserting on every miss would let a stream of
//! one-packet flows evict the long-lived ones, so insertion happens with
//! probability 1/`insert_inv_prob` (OVS's `emc-insert-inv-prob`, default
//! 100; 1 = always, 0 = the EMC is off).
//!
//! Geometry: 8192 entries of 128 bytes (key, hash, target) = 1 MiB. The
//! first words of the key share the entry's first cache line with its
//! hash and target, so a *short* key (IPv4, ARP: every word past L4 zero,
//! [`FlowKey::is_short`]) is looked up, compared and prefetched on one
//! line. The tunnel metadata of a packet that came out of a tunnel and
//! the connection tracking state of one a `ct` action saw
//! ([`TAIL_WORDS`]) are kept beside the entries, in a table of their own
//! read only for entries that have some: other traffic never touches it,
//! and its entries stay two lines.

use sluice_packet::key::{SHORT_KEY_WORDS, TAIL_WORDS};
use sluice_packet::FlowKey;

use crate::CacheRef;

/// Default number of entries (OVS's `EM_FLOW_HASH_ENTRIES`).
pub const DEFAULT_ENTRIES: usize = 8192;
/// Default inverse insertion probability (OVS's default).
pub const DEFAULT_INSERT_INV_PROB: u32 = 100;
/// Bits of the hash used per candidate position.
const SEG_SHIFT: u32 = 13;

/// One entry; the fields a mismatch is found by come first, so a
/// lookup that misses reads one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    hash: u32,
    live: bool,
    /// Whether `key` is short: then it equals a short key when their
    /// first words do.
    short: bool,
    /// Whether the key has tunnel metadata (in [`Emc`]'s `tails`).
    tail: bool,
    target: CacheRef,
    /// The key's words before the tunnel metadata (the metadata word
    /// after it is zero in every packet's key, which is all the EMC
    /// holds): the entry stays two lines.
    key: [u64; WORDS],
}

/// Words of a key an entry keeps: those before the OpenFlow metadata
/// word (zero in every packet's key, which is all the EMC holds) and the
/// tunnel metadata after it.
const WORDS: usize = TAIL_WORDS.start - 1;
/// Words of tunnel metadata and connection tracking state.
const TAIL: usize = TAIL_WORDS.end - TAIL_WORDS.start;
const _: () = assert!(std::mem::offset_of!(FlowKey, metadata) == WORDS * 8);

/// A key's tunnel metadata words.
#[inline(always)]
fn tail_of(key: &FlowKey) -> [u64; TAIL] {
    let k = key.words();
    std::array::from_fn(|i| k[TAIL_WORDS.start + i])
}

/// No tunnel metadata.
static NO_TAIL: [u64; TAIL] = [0; TAIL];

/// Whether an entry (its words and, when it has some, its tunnel
/// metadata) is `key` (whose metadata must be zero), word by word
/// without branches: an entry without tunnel metadata compares the key's
/// tunnel words with zeros, so the tunnel table is read only for entries
/// that have some.
#[inline(always)]
fn same(e: &Entry, tail: &[u64; TAIL], key: &FlowKey) -> bool {
    let k = key.words();
    let t = if e.tail { tail } else { &NO_TAIL };
    let mut diff = k[WORDS];
    for (w, kw) in e.key.iter().zip(&k[..WORDS]) {
        diff |= w ^ kw;
    }
    for (w, kw) in t.iter().zip(&k[TAIL_WORDS]) {
        diff |= w ^ kw;
    }
    diff == 0
}

/// [`same`] for a short key and entry: their first words alone.
#[inline(always)]
fn same_short(words: &[u64; WORDS], key: &FlowKey) -> bool {
    let k = key.words();
    let mut diff = 0;
    for i in 0..SHORT_KEY_WORDS {
        diff |= words[i] ^ k[i];
    }
    diff == 0
}

fn words_of(key: &FlowKey) -> [u64; WORDS] {
    let mut w = [0; WORDS];
    w.copy_from_slice(&key.words()[..WORDS]);
    w
}

const _: () = assert!(std::mem::size_of::<Entry>() == 128);
// A short key's words lie in the entry's first line.
const _: () = assert!(std::mem::offset_of!(Entry, key) + SHORT_KEY_WORDS * 8 <= 64);

/// An exact-match cache.
pub struct Emc {
    entries: Vec<Entry>,
    /// Per entry, its key's tunnel metadata (when `tail` says it has any).
    tails: Vec<[u64; TAIL]>,
    mask: u32,
    insert_inv_prob: u32,
    rng: u32,
    sweep_pos: usize,
}

impl std::fmt::Debug for Emc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emc")
            .field("entries", &self.entries.len())
            .field("insert_inv_prob", &self.insert_inv_prob)
            .finish()
    }
}

impl Emc {
    /// A cache of `entries` (rounded up to a power of two) inserting with
    /// probability 1/`insert_inv_prob` (0: disabled).
    pub fn new(entries: usize, insert_inv_prob: u32) -> Self {
        let n = entries.max(2).next_power_of_two();
        let empty = Entry {
            key: [0; WORDS],
            hash: 0,
            target: CacheRef::default(),
            live: false,
            short: false,
            tail: false,
        };
        let entries = sluice_packet::memory::huge_vec(n, empty);
        Emc {
            entries,
            tails: vec![[0; TAIL]; n],
            mask: (n - 1) as u32,
            insert_inv_prob,
            rng: 0x2545_f491,
            sweep_pos: 0,
        }
    }

    /// Whether the cache is in use.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.insert_inv_prob != 0
    }

    /// Number of entries.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Live entries (a scan; for statistics and tests).
    pub fn occupancy(&self) -> usize {
        self.entries.iter().filter(|e| e.live).count()
    }

    #[inline]
    fn positions(&self, hash: u32) -> [usize; 2] {
        [
            (hash & self.mask) as usize,
            ((hash >> SEG_SHIFT) & self.mask) as usize,
        ]
    }

    /// Hints the CPU to fetch the entries `hash` can be at (call a while
    /// before [`Emc::lookup`], e.g. a batch ahead).
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        // Both lines: a hit compares the whole key, which reaches into the
        // second.
        for p in self.positions(hash) {
            sluice_packet::prefetch::read_lines(&self.entries[p], std::mem::size_of::<Entry>());
        }
    }

    /// [`Emc::prefetch`] for a short key: its lookup reads only the
    /// first line of each candidate.
    #[inline]
    pub fn prefetch_short(&self, hash: u32) {
        for p in self.positions(hash) {
            sluice_packet::prefetch::read_lines(&self.entries[p], 64);
        }
    }

    /// The target cached for exactly `key`.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, hash: u32) -> Option<CacheRef> {
        for p in self.positions(hash) {
            let e = &self.entries[p];
            if e.live && e.hash == hash && same(e, &self.tails[p], key) {
                return Some(e.target);
            }
        }
        None
    }

    /// [`Emc::lookup`] of a short key ([`FlowKey::is_short`]): only short
    /// entries can hold it, and they are compared on their first words.
    #[inline]
    pub fn lookup_short(&self, key: &FlowKey, hash: u32) -> Option<CacheRef> {
        for p in self.positions(hash) {
            let e = &self.entries[p];
            if e.live && e.short && e.hash == hash && same_short(&e.key, key) {
                return Some(e.target);
            }
        }
        None
    }

    /// Caches `key` → `target` unconditionally: the same key is updated in
    /// place; otherwise a dead candidate is used, else the one with the
    /// lower hash is replaced (a cheap pseudo-random choice, as OVS does).
    pub fn insert(&mut self, key: &FlowKey, hash: u32, target: CacheRef) {
        let [a, b] = self.positions(hash);
        for p in [a, b] {
            let e = &mut self.entries[p];
            if e.live && e.hash == hash && same(e, &self.tails[p], key) {
                e.target = target;
                return;
            }
        }
        let (ea, eb) = (&self.entries[a], &self.entries[b]);
        let victim = if !ea.live {
            a
        } else if !eb.live || eb.hash < ea.hash {
            b
        } else {
            a
        };
        debug_assert_eq!(key.metadata, 0, "the EMC holds packets' keys");
        debug_assert_eq!(
            key.regs,
            [0; sluice_packet::key::N_REGS],
            "the EMC holds packets' keys"
        );
        let tail = tail_of(key);
        let has_tail = tail != [0; TAIL];
        if has_tail {
            self.tails[victim] = tail;
        }
        self.entries[victim] = Entry {
            key: words_of(key),
            hash,
            target,
            live: true,
            short: key.is_short(),
            tail: has_tail,
        };
    }

    /// Inserts with probability 1/`insert_inv_prob`.
    #[inline]
    pub fn probabilistic_insert(&mut self, key: &FlowKey, hash: u32, target: CacheRef) {
        match self.insert_inv_prob {
            0 => {}
            1 => self.insert(key, hash, target),
            n => {
                // xorshift32: cheap, good enough to spread insertions.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 17;
                self.rng ^= self.rng << 5;
                if self.rng.is_multiple_of(n) {
                    self.insert(key, hash, target);
                }
            }
        }
    }

    /// Forgets the entry for `key`, if any.
    pub fn remove(&mut self, key: &FlowKey, hash: u32) {
        for p in self.positions(hash) {
            let e = &mut self.entries[p];
            if e.live && e.hash == hash && same(e, &self.tails[p], key) {
                e.live = false;
            }
        }
    }

    /// Checks the next `n` entries (round robin) and drops those whose
    /// target `alive` rejects, so dead entries do not linger.
    pub fn sweep(&mut self, n: usize, mut alive: impl FnMut(CacheRef) -> bool) {
        for _ in 0..n.min(self.entries.len()) {
            let e = &mut self.entries[self.sweep_pos];
            if e.live && !alive(e.target) {
                e.live = false;
            }
            self.sweep_pos = (self.sweep_pos + 1) & self.mask as usize;
        }
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        for e in &mut self.entries {
            e.live = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            in_port: 1,
            nw_src: i,
            ..Default::default()
        }
    }

    fn r(i: u32) -> CacheRef {
        CacheRef { idx: i, gen: 1 }
    }

    #[test]
    fn keys_from_tunnels_hit_on_their_tunnel_metadata_too() {
        let mut emc = Emc::new(64, 1);
        let plain = key(7);
        let mut tun = plain;
        tun.tunnel_id = 42;
        tun.tun_src = 0x0a5a_0002;
        tun.tun_dst = 0x0a5a_0001;
        // The same hash forced for all three: only the key tells them apart.
        let h = plain.hash();
        emc.insert(&tun, h, r(1));
        assert_eq!(emc.lookup(&tun, h), Some(r(1)));
        assert_eq!(
            emc.lookup(&plain, h),
            None,
            "no tunnel metadata: another packet"
        );
        let mut other = tun;
        other.tunnel_id = 43;
        assert_eq!(emc.lookup(&other, h), None, "another VNI");
        emc.insert(&plain, h, r(2));
        assert_eq!(emc.lookup(&plain, h), Some(r(2)));
        assert_eq!(emc.lookup(&tun, h), Some(r(1)), "both held");
        emc.remove(&tun, h);
        assert_eq!(emc.lookup(&tun, h), None);
        assert_eq!(emc.lookup(&plain, h), Some(r(2)));
    }

    #[test]
    fn hit_needs_the_whole_key() {
        let mut emc = Emc::new(64, 1);
        let k = key(7);
        emc.insert(&k, k.hash(), r(3));
        assert_eq!(emc.lookup(&k, k.hash()), Some(r(3)));
        // Same hash, different key (forced): no hit.
        assert_eq!(emc.lookup(&key(8), k.hash()), None);
        emc.insert(&k, k.hash(), r(4));
        assert_eq!(emc.lookup(&k, k.hash()), Some(r(4)), "updated in place");
        assert_eq!(emc.occupancy(), 1);
        emc.remove(&k, k.hash());
        assert_eq!(emc.lookup(&k, k.hash()), None);
    }

    #[test]
    fn short_lookup_finds_exactly_the_short_key() {
        let mut emc = Emc::new(64, 1);
        let k = key(7);
        assert!(k.is_short());
        emc.insert(&k, k.hash(), r(3));
        assert_eq!(emc.lookup_short(&k, k.hash()), Some(r(3)));
        assert_eq!(emc.lookup_short(&key(8), k.hash()), None);
        // A long key whose first words are k's, under k's hash: the full
        // lookup does not take k for it, and k's short lookup does not
        // take it for k.
        let mut long = k;
        long.ipv6_dst[15] = 1;
        assert_eq!(emc.lookup(&long, k.hash()), None);
        let mut emc = Emc::new(64, 1);
        emc.insert(&long, k.hash(), r(5));
        assert_eq!(emc.lookup_short(&k, k.hash()), None);
        assert_eq!(emc.lookup(&long, k.hash()), Some(r(5)));
    }

    #[test]
    fn two_candidates_keep_two_colliding_keys() {
        let mut emc = Emc::new(8192, 1);
        // Keys with the same first position but different second ones.
        let (a, b) = (key(1), key(2));
        let (ha, hb) = (0x0000_1005u32, 0x0004_0005u32);
        emc.insert(&a, ha, r(1));
        emc.insert(&b, hb, r(2));
        assert_eq!(emc.lookup(&a, ha), Some(r(1)));
        assert_eq!(emc.lookup(&b, hb), Some(r(2)));
    }

    #[test]
    fn insertion_probability() {
        let mut emc = Emc::new(1 << 16, 100);
        for i in 0..100_000 {
            let k = key(i);
            emc.probabilistic_insert(&k, k.hash(), r(i));
        }
        let n = emc.occupancy();
        assert!((500..1500).contains(&n), "about 1 in 100 inserted: {n}");
        let mut off = Emc::new(64, 0);
        off.probabilistic_insert(&key(1), key(1).hash(), r(1));
        assert_eq!(off.occupancy(), 0);
        assert!(!off.enabled());
    }

    #[test]
    fn sweep_drops_dead_targets() {
        let mut emc = Emc::new(16, 1);
        for i in 0..8 {
            let k = key(i);
            emc.insert(&k, k.hash(), r(i));
        }
        let before = emc.occupancy();
        emc.sweep(16, |t| t.idx % 2 == 0);
        assert!(emc.occupancy() < before);
        assert!((0..8).all(|i| emc
            .lookup(&key(i), key(i).hash())
            .is_none_or(|t| t.idx % 2 == 0)));
    }
}
