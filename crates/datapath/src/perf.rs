//! PMD performance metrics, as OVS's `pmd-perf-metrics` and
//! `dpif-netdev/pmd-perf-show`: per iteration its cycles and packets, per
//! upcall its cycles, in histograms; the last 60 seconds in one-second
//! slices; and a log of suspicious iterations (longer than a threshold)
//! with what each did. Off unless asked for (`--pmd-perf-metrics`,
//! `sluice ctl set pmd-perf-metrics=true`): on, it costs two counter
//! snapshots and a few additions per iteration and one counter read per
//! upcall. The packets per rx and per tx batch are counted always, in
//! [`crate::DpStats`] (an addition per batch).

use std::collections::VecDeque;

use crate::stats::DpStats;

/// Bins of a [`Log2Histogram`]: 0, 1, 2-3, 4-7, ..., 2^39 and more.
pub const LOG2_BINS: usize = 41;

/// A histogram of values in power-of-two bins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log2Histogram {
    /// Counts: bin 0 holds 0, bin `i` values from 2^(i-1) to 2^i - 1, the
    /// last everything above.
    pub bins: [u64; LOG2_BINS],
    /// Sum of the values (for the mean).
    pub sum: u64,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Log2Histogram {
            bins: [0; LOG2_BINS],
            sum: 0,
        }
    }
}

impl Log2Histogram {
    /// Counts `v`.
    #[inline]
    pub fn add(&mut self, v: u64) {
        let bin = (64 - v.leading_zeros() as usize).min(LOG2_BINS - 1);
        self.bins[bin] += 1;
        self.sum = self.sum.wrapping_add(v);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The largest value bin `i` holds (the last: `u64::MAX`).
    pub fn upper(i: usize) -> u64 {
        match i {
            0 => 0,
            i if i >= LOG2_BINS - 1 => u64::MAX,
            i => (1u64 << i) - 1,
        }
    }
}

/// One second of a PMD's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slice {
    /// The second (of the switch clock) it covers.
    pub second: u64,
    /// Iterations.
    pub iterations: u64,
    /// Iterations that received packets.
    pub busy_iterations: u64,
    /// Cycles of all iterations.
    pub cycles: u64,
    /// Cycles of the busy ones.
    pub busy_cycles: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Upcalls made.
    pub upcalls: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Send calls.
    pub tx_batches: u64,
}

/// A suspicious iteration: longer than the log's threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoggedIteration {
    /// When it ended (switch clock, µs).
    pub at_us: u64,
    /// Its cycles.
    pub cycles: u64,
    /// Packets received in it.
    pub rx_packets: u64,
    /// Upcalls made in it.
    pub upcalls: u64,
    /// Packets sent in it.
    pub tx_packets: u64,
    /// Send calls made in it.
    pub tx_batches: u64,
}

/// Slices kept: the last 60 whole seconds and the current one.
pub const SLICES: usize = 61;
/// Suspicious iterations kept (the latest).
pub const LOG_ENTRIES: usize = 128;
/// The default threshold of the iteration log, µs (OVS's
/// `pmd-perf-log-set -us` default).
pub const LOG_THRESHOLD_US: u64 = 250;

/// One PMD's performance metrics since they were turned on or cleared.
#[derive(Debug, Clone)]
pub struct PmdPerf {
    /// Switch clock when the measurement began, µs.
    pub since_us: u64,
    /// The datapath counters then (what `pmd-perf-show` reports is the
    /// difference).
    pub base: DpStats,
    /// Cycles per iteration, and per busy iteration.
    pub cycles_per_it: Log2Histogram,
    /// Packets received per iteration (busy ones).
    pub pkts_per_it: Log2Histogram,
    /// Cycles per upcall.
    pub cycles_per_upcall: Log2Histogram,
    /// Upcall latency, µs (the same upcalls, on the clock).
    pub us_per_upcall: Log2Histogram,
    /// The last seconds, oldest first.
    pub slices: VecDeque<Slice>,
    /// Suspicious iterations, oldest first.
    pub log: VecDeque<LoggedIteration>,
    /// Iterations longer than this are logged, in cycles.
    pub log_threshold_cycles: u64,
    /// ... the same in µs, as set.
    pub log_threshold_us: u64,
    /// Iterations over the threshold since the start (also those the log
    /// no longer holds).
    pub logged_total: u64,
    /// Counters at the start of the current iteration: upcalls, packets
    /// and batches sent.
    at_start: (u64, u64, u64),
}

impl PmdPerf {
    /// Metrics starting now (`now_us`), from counters `stats`.
    pub fn new(now_us: u64, stats: &DpStats, log_threshold_us: u64) -> Self {
        PmdPerf {
            since_us: now_us,
            base: stats.clone(),
            cycles_per_it: Log2Histogram::default(),
            pkts_per_it: Log2Histogram::default(),
            cycles_per_upcall: Log2Histogram::default(),
            us_per_upcall: Log2Histogram::default(),
            slices: VecDeque::with_capacity(SLICES),
            log: VecDeque::with_capacity(LOG_ENTRIES),
            log_threshold_cycles: (log_threshold_us as f64 / crate::cycles::us_per_cycle()) as u64,
            log_threshold_us,
            logged_total: 0,
            at_start: (stats.upcalls, stats.sent_packets, stats.sent_batches),
        }
    }

    /// An iteration begins, with counters `stats`.
    #[inline]
    pub fn begin(&mut self, stats: &DpStats) {
        self.at_start = (stats.upcalls, stats.sent_packets, stats.sent_batches);
    }

    /// An iteration that took `cycles` and received `rx` packets ended at
    /// `now_us`, leaving counters `stats`.
    pub fn end(&mut self, now_us: u64, cycles: u64, rx: u64, stats: &DpStats) {
        let upcalls = stats.upcalls - self.at_start.0;
        let tx_packets = stats.sent_packets - self.at_start.1;
        let tx_batches = stats.sent_batches - self.at_start.2;
        self.cycles_per_it.add(cycles);
        if rx > 0 {
            self.pkts_per_it.add(rx);
        }
        let second = now_us / 1_000_000;
        if self.slices.back().is_none_or(|s| s.second != second) {
            if self.slices.len() == SLICES {
                self.slices.pop_front();
            }
            self.slices.push_back(Slice {
                second,
                ..Slice::default()
            });
        }
        if let Some(s) = self.slices.back_mut() {
            s.iterations += 1;
            s.cycles += cycles;
            if rx > 0 {
                s.busy_iterations += 1;
                s.busy_cycles += cycles;
            }
            s.rx_packets += rx;
            s.upcalls += upcalls;
            s.tx_packets += tx_packets;
            s.tx_batches += tx_batches;
        }
        if cycles > self.log_threshold_cycles {
            self.logged_total += 1;
            if self.log.len() == LOG_ENTRIES {
                self.log.pop_front();
            }
            self.log.push_back(LoggedIteration {
                at_us: now_us,
                cycles,
                rx_packets: rx,
                upcalls,
                tx_packets,
                tx_batches,
            });
        }
    }

    /// An upcall that took `cycles`.
    #[inline]
    pub fn upcall(&mut self, cycles: u64) {
        self.cycles_per_upcall.add(cycles);
        self.us_per_upcall
            .add((cycles as f64 * crate::cycles::us_per_cycle()) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_bins() {
        let mut h = Log2Histogram::default();
        for v in [0, 1, 2, 3, 4, 1023, 1024, u64::MAX] {
            h.add(v);
        }
        assert_eq!(&h.bins[..4], &[1, 1, 2, 1]);
        assert_eq!((h.bins[10], h.bins[11], h.bins[LOG2_BINS - 1]), (1, 1, 1));
        assert_eq!(h.count(), 8);
        assert_eq!(
            (
                Log2Histogram::upper(0),
                Log2Histogram::upper(3),
                Log2Histogram::upper(40)
            ),
            (0, 7, u64::MAX)
        );
        // Each value is in the bin whose bounds hold it.
        for v in [5u64, 100, 65_535, 1 << 30] {
            let mut one = Log2Histogram::default();
            one.add(v);
            let i = one.bins.iter().position(|&c| c == 1).unwrap();
            assert!(
                v <= Log2Histogram::upper(i) && v > Log2Histogram::upper(i - 1),
                "{v}"
            );
        }
    }

    #[test]
    fn iterations_add_up_in_histograms_slices_and_log() {
        let mut stats = DpStats::default();
        let threshold_us = 100;
        let mut p = PmdPerf::new(0, &stats, threshold_us);
        let long = p.log_threshold_cycles + 1;
        let mut n = 0;
        for i in 0..3_000u64 {
            p.begin(&stats);
            let rx = i % 3;
            stats.upcalls += rx / 2;
            stats.sent_packets += rx;
            stats.sent_batches += u64::from(rx > 0);
            let cycles = if i % 1000 == 7 { long } else { 500 + i };
            // 1,000 iterations a second: three slices.
            p.end(i * 1000, cycles, rx, &stats);
            n += 1;
        }
        assert_eq!(p.cycles_per_it.count(), n);
        assert_eq!(p.pkts_per_it.count(), 2000, "busy iterations only");
        let slices: u64 = p.slices.iter().map(|s| s.iterations).sum();
        assert_eq!(slices, n);
        assert_eq!(p.slices.len(), 3);
        assert_eq!(p.slices.iter().map(|s| s.rx_packets).sum::<u64>(), 3000);
        assert_eq!(
            p.slices.iter().map(|s| s.upcalls).sum::<u64>(),
            stats.upcalls
        );
        assert_eq!(p.log.len(), 3);
        assert!(p.log.iter().all(|l| l.cycles == long));
        assert_eq!(p.log[1].at_us, 1_007_000);
    }

    #[test]
    fn the_log_and_slices_keep_the_latest() {
        let stats = DpStats::default();
        let mut p = PmdPerf::new(0, &stats, 0);
        for s in 0..100u64 {
            p.begin(&stats);
            p.end(s * 1_000_000, 10, 0, &stats);
        }
        for i in 0..(LOG_ENTRIES as u64 + 10) {
            p.begin(&stats);
            p.end(100_000_000 + i, 10, 0, &stats);
        }
        assert_eq!(p.slices.len(), SLICES);
        assert_eq!(p.slices.back().unwrap().second, 100);
        assert_eq!(p.log.len(), LOG_ENTRIES);
        assert_eq!(p.logged_total, 100 + LOG_ENTRIES as u64 + 10);
        assert_eq!(
            p.log.back().unwrap().at_us,
            100_000_000 + LOG_ENTRIES as u64 + 9
        );
    }
}
