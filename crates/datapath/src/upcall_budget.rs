//! How much of a PMD thread's time upcalls may take while cached traffic
//! competes for it.
//!
//! Open vSwitch's userspace datapath translates misses in the PMD thread
//! itself, so a miss storm (a new flow per packet) makes every iteration
//! long and the established flows polled in the same thread lose most of
//! their rate. Here upcalls draw on a token bucket of TSC cycles filled at
//! `share_pct` % of elapsed time: while the bucket is empty and cached
//! traffic has been seen recently, a miss is dropped (counted as `upcall
//! budget`) instead of translated, which costs a fraction of an upcall.
//! The bucket is deep enough for a burst of new flows to pass untouched,
//! and with no cached traffic around nothing is refused (work-conserving:
//! a pure storm gets every cycle).

/// Bucket depth in TSC cycles (about 5-10 ms on current CPUs): a burst of
/// several thousand new flows passes without a drop.
const DEPTH_CYCLES: i64 = 20_000_000;

/// Cached traffic seen within this many cycles (about 1 ms) counts as
/// competing.
const CONTENTION_WINDOW_CYCLES: u64 = 2_500_000;

/// The upcall budget of one datapath thread.
#[derive(Debug)]
pub(crate) struct UpcallBudget {
    share_pct: u32,
    tokens: i64,
    last_refill: u64,
    last_hit: Option<u64>,
}

impl UpcallBudget {
    /// Upcalls may take `share_pct` % of the cycles while cached traffic
    /// competes (100 or more: no limit).
    pub fn new(share_pct: u32) -> Self {
        UpcallBudget {
            share_pct,
            tokens: DEPTH_CYCLES,
            last_refill: 0,
            last_hit: None,
        }
    }

    /// Whether the budget can ever refuse.
    #[inline]
    pub fn limited(&self) -> bool {
        self.share_pct < 100
    }

    /// Records that a batch at `now` (TSC) had cache hits.
    #[inline]
    pub fn note_hits(&mut self, now: u64) {
        self.last_hit = Some(now);
    }

    /// Adds the share of the cycles since the last refill.
    pub fn refill(&mut self, now: u64) {
        if self.last_refill != 0 {
            let earned = now.saturating_sub(self.last_refill) / 100 * u64::from(self.share_pct);
            self.tokens = self
                .tokens
                .saturating_add(earned.min(DEPTH_CYCLES as u64) as i64)
                .min(DEPTH_CYCLES);
        }
        self.last_refill = now;
    }

    /// Whether a miss at `now` may be translated.
    #[inline]
    pub fn allows(&self, now: u64) -> bool {
        !self.limited()
            || self.tokens > 0
            || self
                .last_hit
                .is_none_or(|t| now.saturating_sub(t) > CONTENTION_WINDOW_CYCLES)
    }

    /// Takes what an upcall cost.
    #[inline]
    pub fn charge(&mut self, cycles: u64) {
        if self.limited() {
            self.tokens = self
                .tokens
                .saturating_sub(cycles.min(i64::MAX as u64) as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_only_when_empty_and_contended() {
        let mut b = UpcallBudget::new(10);
        b.refill(1_000);
        assert!(b.allows(1_000), "a full bucket");
        b.charge(DEPTH_CYCLES as u64 + 1);
        assert!(b.allows(1_000), "empty, but no cached traffic seen");
        b.note_hits(1_000);
        assert!(!b.allows(1_000), "empty and contended");
        // 10 % of 20,000 cycles refills 2,000: positive again.
        b.refill(21_000);
        assert!(b.allows(21_000));
        // Contention ends a window after the last hit.
        b.charge(1_000_000);
        assert!(!b.allows(21_000));
        assert!(b.allows(1_000 + CONTENTION_WINDOW_CYCLES + 1));
    }

    #[test]
    fn a_full_share_never_refuses_and_the_bucket_is_bounded() {
        let mut b = UpcallBudget::new(100);
        b.note_hits(5);
        b.charge(u64::MAX);
        assert!(b.allows(5));
        let mut c = UpcallBudget::new(50);
        c.refill(1);
        c.refill(u64::MAX);
        assert_eq!(c.tokens, DEPTH_CYCLES, "never above the depth");
    }
}
