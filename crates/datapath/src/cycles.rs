//! A cheap cycle counter, as OVS counts PMD cycles: the TSC on x86_64, a
//! nanosecond clock elsewhere.

/// Reads the cycle counter.
#[inline]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions and touches no memory; it is
        // available on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counter_advances() {
        let a = super::now();
        let mut x = 0u64;
        for i in 0..10_000 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(super::now() > a);
    }
}
