//! A cheap cycle counter, as OVS counts PMD cycles: the TSC on x86_64, a
//! nanosecond clock elsewhere; and [`TscClock`], microseconds derived
//! from it, so a poll iteration reads one counter for both its cycles and
//! its time.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

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
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// µs per counter cycle (`1e6 / hz()`).
#[inline]
pub fn us_per_cycle() -> f64 {
    static US: OnceLock<f64> = OnceLock::new();
    *US.get_or_init(|| 1e6 / hz())
}

/// The cycle counter's rate in Hz, measured once per process against the
/// monotonic clock (over 20 ms). The TSC of the CPUs Sluice is built for
/// (x86-64-v3) is invariant: one rate, never stopped, in step across
/// cores (Linux shows `constant_tsc nonstop_tsc`).
pub fn hz() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let (t0, c0) = (Instant::now(), now());
        std::thread::sleep(Duration::from_millis(20));
        let (c1, t1) = (now(), Instant::now());
        let hz = c1.wrapping_sub(c0) as f64 / (t1 - t0).as_secs_f64();
        if hz.is_finite() && hz > 1e6 {
            hz
        } else {
            1e9
        }
    })
}

/// Microseconds since an origin, derived from the cycle counter: a poll
/// iteration reads the counter once and gets its time from the same
/// reading (reading the system clock as well costs about as much as
/// looking a packet up; OVS reads both). Agrees with the `Instant` it was
/// made from to within the rate's measurement error (a few ppm).
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    origin_cycles: u64,
    origin_us: u64,
    /// Microseconds per cycle, as a 32.32 fixed-point number.
    us_per_cycle_q32: u64,
}

impl TscClock {
    /// A clock that counts microseconds since `origin` (which may lie in
    /// the past: several threads built from one `Instant` agree).
    pub fn new(origin: Instant) -> Self {
        let us_per_cycle_q32 = ((1u64 << 32) as f64 * 1e6 / hz()) as u64;
        // Read the counter and the clock together: the closest of a few
        // tries, in case the thread was preempted between the two reads.
        let (mut origin_cycles, mut origin_us, mut gap) = (0, 0, u64::MAX);
        for _ in 0..4 {
            let c0 = now();
            let us = origin.elapsed().as_micros() as u64;
            let c1 = now();
            if c1.wrapping_sub(c0) < gap {
                (origin_cycles, origin_us, gap) = (c0, us, c1.wrapping_sub(c0));
            }
        }
        TscClock {
            origin_cycles,
            origin_us,
            us_per_cycle_q32,
        }
    }

    /// The time (µs since the origin) at counter reading `cycles`.
    #[inline]
    pub fn us_at(&self, cycles: u64) -> u64 {
        let delta = u128::from(cycles.wrapping_sub(self.origin_cycles));
        self.origin_us + ((delta * u128::from(self.us_per_cycle_q32)) >> 32) as u64
    }

    /// The time now (µs since the origin).
    #[inline]
    pub fn now_us(&self) -> u64 {
        self.us_at(now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

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

    #[test]
    fn tsc_clock_follows_the_monotonic_clock() {
        let origin = Instant::now() - Duration::from_millis(5);
        let clock = super::TscClock::new(origin);
        let (a, ta) = (clock.now_us(), origin.elapsed().as_micros() as u64);
        assert!(a >= 5_000, "{a} µs since an origin 5 ms ago");
        std::thread::sleep(Duration::from_millis(50));
        let (b, tb) = (clock.now_us(), origin.elapsed().as_micros() as u64);
        // The same 50 ms on both clocks, give or take what a loaded
        // machine's preemption between two reads adds; never backwards.
        assert!(b > a, "tsc clock went from {a} to {b} µs");
        assert!(
            (b - a).abs_diff(tb - ta) < 10_000,
            "tsc clock advanced {} µs, monotonic clock {} µs",
            b - a,
            tb - ta
        );
    }
}
