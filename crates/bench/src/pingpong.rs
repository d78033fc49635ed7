//! The cross-core round trip: one cache line bounced between two CPUs,
//! each waiting for the other's write before it writes again, timed on
//! the TSC. On this VM it falls into bands from one launch to the next
//! (a median under 256 cycles in some, 512-1,024 in others: where the
//! hypervisor put the two vCPUs), and so does everything that hands data
//! from one core to the other, a vhost-user guest's ring included: the
//! PVP benchmark (`bench/pvp`) measures it before each run and says which
//! band the run was in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The shared word, alone on its 128 bytes (its line and the one the
/// adjacent-line prefetcher pairs with it).
#[repr(align(128))]
struct Line(AtomicU64);

/// What the round trips took, TSC cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundTrip {
    /// The median.
    pub median: u64,
    /// The 10th percentile.
    pub p10: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// How many were timed.
    pub rounds: usize,
}

impl RoundTrip {
    /// The band a run is in: `fast` below 384 cycles, `slow` at or above
    /// (between the two bands measured here, 2026-12-02).
    pub fn band(&self) -> &'static str {
        if self.median < 384 {
            "fast"
        } else {
            "slow"
        }
    }
}

/// Bounces a line between CPUs `a` and `b` `rounds` times (after as many
/// untimed ones) and times each round trip from `a`. `pin` pins the
/// calling thread to a CPU.
pub fn measure(
    a: usize,
    b: usize,
    rounds: usize,
    pin: fn(usize) -> std::io::Result<()>,
) -> Result<RoundTrip, String> {
    if a == b {
        return Err(format!("CPU {a} twice: give two CPUs"));
    }
    if rounds == 0 {
        return Err("no rounds to time".into());
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let other = Arc::clone(&line);
    // Untimed rounds first, then the timed: A writes 2i+1, B 2i+2.
    let total = 2 * rounds as u64;
    let last = 2 * total;
    let echo = std::thread::Builder::new()
        .name("pingpong".into())
        .spawn(move || -> Result<(), String> {
            pin(b).map_err(|e| format!("CPU {b}: {e}"))?;
            let mut seen = 0;
            while seen < last {
                let v = other.0.load(Ordering::Acquire);
                if v == u64::MAX {
                    return Ok(());
                }
                if v % 2 == 1 && v > seen {
                    other.0.store(v + 1, Ordering::Release);
                    seen = v + 1;
                } else {
                    std::hint::spin_loop();
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let timed = (|| {
        pin(a).map_err(|e| format!("CPU {a}: {e}"))?;
        let mut samples = Vec::with_capacity(rounds);
        for i in 0..total {
            let t0 = sluice_datapath::cycles::now();
            line.0.store(2 * i + 1, Ordering::Release);
            let mut spins = 0u64;
            while line.0.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
                spins += 1;
                // The other side gone (it could not pin itself)?
                if spins.is_multiple_of(1 << 20) && echo.is_finished() {
                    return Err("the other CPU stopped answering".to_string());
                }
            }
            if i >= rounds as u64 {
                samples.push(sluice_datapath::cycles::now().wrapping_sub(t0));
            }
        }
        Ok(samples)
    })();
    if timed.is_err() {
        line.0.store(u64::MAX, Ordering::Release);
    }
    let echoed = echo.join().map_err(|_| "the echo thread panicked")?;
    // Its error first: it says why it stopped answering.
    echoed?;
    let mut samples = timed?;
    samples.sort_unstable();
    let at = |q: usize| samples[(samples.len() - 1) * q / 100];
    Ok(RoundTrip {
        median: at(50),
        p10: at(10),
        p90: at(90),
        rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_pin(_: usize) -> std::io::Result<()> {
        Ok(())
    }

    #[test]
    fn round_trips_are_timed_and_banded() {
        // Unpinned (the test may have one CPU): the protocol and the
        // statistics, not the figure.
        let r = measure(0, 1, 2000, no_pin).unwrap();
        assert_eq!(r.rounds, 2000);
        assert!(r.p10 <= r.median && r.median <= r.p90, "{r:?}");
        assert!(r.median > 0);
        assert!(measure(1, 1, 10, no_pin).is_err());
        assert!(measure(0, 1, 0, no_pin).is_err());
        let slow = RoundTrip { median: 600, ..r };
        assert_eq!(slow.band(), "slow");
        assert_eq!(RoundTrip { median: 200, ..r }.band(), "fast");
    }
}
