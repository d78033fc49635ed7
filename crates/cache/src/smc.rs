//! The signature match cache (SMC), seed 004's DFC/CD design.
//!
//! A large way-associative table that maps a packet's hash to a megaflow
//! slot index: the hash picks a bucket of four ways, its top 16 bits are
//! the signature compared in each way. An entry is 6 bytes (signature and
//! 32-bit index) in a bucket of 32 (24 and padding), so a million entries
//! cost 8 MiB where the EMC's full keys would cost 128 MiB. A signature
//! hit is only a candidate: the caller checks that the megaflow at that
//! index is alive, current and matches the key under its mask before
//! using it. A wrong candidate costs a compare, never a wrong decision.

/// Default number of entries (OVS's `SMC_ENTRIES`, 1 << 20).
pub const DEFAULT_ENTRIES: usize = 1 << 20;
/// Ways per bucket.
pub const WAYS: usize = 4;
const EMPTY: u32 = u32::MAX;

/// A bucket: 24 bytes padded to 32, so that none straddles two cache
/// lines. (At 24, a third of them did: a lookup that missed read only the
/// signatures, in the first line, and the insert after it then waited
/// for the second line's indexes, which nothing had prefetched: about
/// 95 cycles a new flow in a burst of them.)
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Bucket {
    sig: [u16; WAYS],
    idx: [u32; WAYS],
}

const _: () =
    assert!(std::mem::size_of::<Bucket>() == 32 && 64 % std::mem::align_of::<Bucket>() == 0);

/// A signature match cache.
pub struct Smc {
    buckets: Vec<Bucket>,
    mask: u32,
    enabled: bool,
    victim: u32,
}

impl std::fmt::Debug for Smc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smc")
            .field("entries", &(self.buckets.len() * WAYS))
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl Smc {
    /// A cache of about `entries` entries (rounded to a power of two,
    /// at least one bucket); `enabled` false makes every lookup miss.
    pub fn new(entries: usize, enabled: bool) -> Self {
        let n_buckets = (entries / WAYS).max(1).next_power_of_two();
        let n_buckets = if enabled { n_buckets } else { 1 };
        Smc {
            buckets: sluice_packet::memory::huge_vec(
                n_buckets,
                Bucket {
                    sig: [0; WAYS],
                    idx: [EMPTY; WAYS],
                },
            ),
            mask: (n_buckets - 1) as u32,
            enabled,
            victim: 0,
        }
    }

    /// Whether the cache is in use.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Entries it can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// Live entries (a scan; for statistics and tests).
    pub fn occupancy(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.idx.iter().filter(|&&i| i != EMPTY).count())
            .sum()
    }

    #[inline]
    fn split(&self, hash: u32) -> (usize, u16) {
        ((hash & self.mask) as usize, (hash >> 16) as u16)
    }

    /// Hints the CPU to fetch `hash`'s bucket (call a while before
    /// [`Smc::lookup`]: a 1M-entry table lives in DRAM).
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        if self.enabled {
            let (b, _) = self.split(hash);
            sluice_packet::prefetch::read(&self.buckets[b]);
        }
    }

    /// The megaflow index cached for `hash`'s signature: a candidate.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        if !self.enabled {
            return None;
        }
        let (b, sig) = self.split(hash);
        let bucket = &self.buckets[b];
        (0..WAYS)
            .find(|&w| bucket.sig[w] == sig && bucket.idx[w] != EMPTY)
            .map(|w| bucket.idx[w])
    }

    /// Caches `hash` → megaflow `idx`: the same signature is updated in
    /// place, else an empty way is used, else a way is replaced in turn.
    pub fn insert(&mut self, hash: u32, idx: u32) {
        if !self.enabled {
            return;
        }
        let (b, sig) = self.split(hash);
        let bucket = &mut self.buckets[b];
        let way = (0..WAYS)
            .find(|&w| bucket.sig[w] == sig && bucket.idx[w] != EMPTY)
            .or_else(|| (0..WAYS).find(|&w| bucket.idx[w] == EMPTY))
            .unwrap_or_else(|| {
                self.victim = self.victim.wrapping_add(1);
                self.victim as usize % WAYS
            });
        bucket.sig[way] = sig;
        bucket.idx[way] = idx;
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        for b in &mut self.buckets {
            b.idx = [EMPTY; WAYS];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_ways_then_replacement() {
        let mut smc = Smc::new(16, true);
        assert_eq!(smc.capacity(), 16);
        // Five signatures in one bucket (same low bits).
        let h = |sig: u32| (sig << 16) | 3;
        for s in 1..=4 {
            smc.insert(h(s), s);
        }
        for s in 1..=4 {
            assert_eq!(smc.lookup(h(s)), Some(s));
        }
        smc.insert(h(5), 5);
        assert_eq!(smc.lookup(h(5)), Some(5));
        assert_eq!(
            (1..=4).filter(|&s| smc.lookup(h(s)).is_some()).count(),
            3,
            "one way replaced"
        );
        smc.insert(h(5), 50);
        assert_eq!(
            smc.lookup(h(5)),
            Some(50),
            "same signature updates in place"
        );
        assert_eq!(smc.occupancy(), 4);
        smc.clear();
        assert_eq!(smc.occupancy(), 0);
    }

    #[test]
    fn disabled_never_hits() {
        let mut smc = Smc::new(1 << 20, false);
        smc.insert(7, 1);
        assert_eq!(smc.lookup(7), None);
        assert_eq!(smc.capacity(), WAYS, "no memory when off");
    }

    #[test]
    fn default_geometry_is_eight_mib_of_whole_buckets() {
        let smc = Smc::new(DEFAULT_ENTRIES, true);
        assert_eq!(smc.capacity(), 1 << 20);
        assert_eq!(std::mem::size_of::<Bucket>(), 32);
        assert_eq!(smc.buckets.len() * std::mem::size_of::<Bucket>(), 8 << 20);
        // No bucket straddles two cache lines.
        assert_eq!(smc.buckets.as_ptr() as usize % 32, 0);
    }
}
