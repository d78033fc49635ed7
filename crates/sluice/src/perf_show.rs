//! `sluice ctl pmd-perf-show`, in the form of OVS's `ovs-appctl
//! dpif-netdev/pmd-perf-show`: per PMD, what it did since its performance
//! metrics were turned on or cleared, its histograms, and on request its
//! last seconds and its suspicious iterations.

use sluice_datapath::perf::{Log2Histogram, PmdPerf, LOG2_BINS};
use sluice_datapath::DpStats;

use crate::pmd::PerfSnapshot;

/// What `pmd-perf-show` is asked to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShowOptions {
    /// The histograms (`-nh` leaves them out, as OVS).
    pub histograms: bool,
    /// The last N one-second slices (0: none).
    pub seconds: usize,
    /// The last N suspicious iterations (0: none).
    pub iterations: usize,
}

impl Default for ShowOptions {
    fn default() -> Self {
        ShowOptions {
            histograms: true,
            seconds: 0,
            iterations: 0,
        }
    }
}

/// How `pmd-perf-show` is called.
pub const USAGE: &str = "pmd-perf-show [-nh] [--seconds [N]] [--iteration-log [N]]";

impl ShowOptions {
    /// Reads `pmd-perf-show`'s arguments.
    pub fn parse(args: &[&str]) -> Result<ShowOptions, String> {
        let mut o = ShowOptions::default();
        let mut it = args.iter().peekable();
        while let Some(&a) = it.next() {
            let mut count = |default: usize, most: usize| -> Result<usize, String> {
                match it.peek().map(|v| v.parse::<usize>()) {
                    Some(Ok(n)) if (1..=most).contains(&n) => {
                        it.next();
                        Ok(n)
                    }
                    Some(Ok(n)) => Err(format!("{a} {n}: give 1 to {most}")),
                    _ => Ok(default),
                }
            };
            match a {
                "-nh" | "--no-histograms" => o.histograms = false,
                "-s" | "--seconds" => o.seconds = count(60, 60)?,
                "-it" | "--iteration-log" => {
                    o.iterations = count(20, sluice_datapath::perf::LOG_ENTRIES)?
                }
                _ => return Err(format!("'{a}': usage: {USAGE}")),
            }
        }
        Ok(o)
    }
}

/// The text for one PMD.
pub fn show(s: &PerfSnapshot, o: &ShowOptions) -> String {
    let Some(p) = &s.perf else {
        return format!("{}:\n  pmd-perf-metrics is off\n", s.placement);
    };
    let d = diff(&s.stats, &p.base);
    let secs = s.now_us.saturating_sub(p.since_us) as f64 / 1e6;
    let us_per_cycle = sluice_datapath::cycles::us_per_cycle();
    let iterations = p.cycles_per_it.count();
    let busy_its = p.pkts_per_it.count();
    let used = (d.processing_cycles + d.idle_cycles).max(1) as f64;
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    let mut out = format!("{}:\n\n  Measurement duration: {secs:.3} s\n", s.placement);
    let mut line = |k: &str, v: u64, more: String| {
        out += &format!("  {k:<22}{v:>14}  ({more})\n");
    };
    line(
        "Iterations:",
        iterations,
        format!(
            "{:.2} us/it",
            used * us_per_cycle / iterations.max(1) as f64
        ),
    );
    line(
        "- idle iterations:",
        iterations - busy_its,
        format!(
            "{:5.1} % of used cycles",
            100.0 * d.idle_cycles as f64 / used
        ),
    );
    line(
        "- busy iterations:",
        busy_its,
        format!(
            "{:5.1} % of used cycles",
            100.0 * d.processing_cycles as f64 / used
        ),
    );
    line(
        "Rx packets:",
        d.rx_packets,
        format!(
            "{:.0} Kpps, {:.0} cycles/pkt",
            d.rx_packets as f64 / secs.max(1e-9) / 1e3,
            d.processing_cycles as f64 / d.rx_packets.max(1) as f64
        ),
    );
    let passes = d.rx_packets + d.recirculations;
    line(
        "Datapath passes:",
        passes,
        format!(
            "{:.2} passes/pkt",
            passes as f64 / d.rx_packets.max(1) as f64
        ),
    );
    line(
        "- EMC hits:",
        d.emc_hits,
        format!("{:5.1} %", pct(d.emc_hits, passes)),
    );
    line(
        "- SMC hits:",
        d.smc_hits,
        format!("{:5.1} %", pct(d.smc_hits, passes)),
    );
    line(
        "- Megaflow hits:",
        d.megaflow_hits,
        format!(
            "{:5.1} %, {:.2} subtbl lookups/hit",
            pct(d.megaflow_hits, passes),
            d.subtable_lookups as f64 / d.megaflow_hits.max(1) as f64
        ),
    );
    let timed = p.cycles_per_upcall.count();
    line(
        "- Upcalls:",
        d.upcalls,
        format!(
            "{:5.1} %, {:.1} us/upcall",
            pct(d.upcalls, passes),
            p.cycles_per_upcall.sum as f64 * us_per_cycle / timed.max(1) as f64
        ),
    );
    line(
        "- Lost upcalls:",
        d.failed_upcalls,
        format!("{:5.1} %", pct(d.failed_upcalls, passes)),
    );
    line(
        "Tx packets:",
        d.sent_packets,
        format!("{:.0} Kpps", d.sent_packets as f64 / secs.max(1e-9) / 1e3),
    );
    line(
        "Tx batches:",
        d.sent_batches,
        format!(
            "{:.2} pkts/batch",
            d.sent_packets as f64 / d.sent_batches.max(1) as f64
        ),
    );
    if o.histograms {
        out += "\n  Histograms (value up to; count; share):\n";
        out += &log2_text("cycles/it", &p.cycles_per_it);
        out += &log2_text("packets/it (busy)", &p.pkts_per_it);
        out += &sizes_text("packets/rx batch", &d.rx_batch_sizes);
        out += &sizes_text("packets/tx batch", &d.tx_batch_sizes);
        out += &log2_text("cycles/upcall", &p.cycles_per_upcall);
        out += &log2_text("us/upcall", &p.us_per_upcall);
    }
    if o.seconds > 0 {
        out += &seconds_text(p, o.seconds);
    }
    if o.iterations > 0 {
        out += &log_text(p, o.iterations, us_per_cycle);
    }
    out
}

/// `now - base`, counter by counter (for those `show` prints).
fn diff(now: &DpStats, base: &DpStats) -> DpStats {
    let mut d = now.clone();
    let sub = |a: &mut u64, b: u64| *a = a.saturating_sub(b);
    sub(&mut d.rx_packets, base.rx_packets);
    sub(&mut d.recirculations, base.recirculations);
    sub(&mut d.emc_hits, base.emc_hits);
    sub(&mut d.smc_hits, base.smc_hits);
    sub(&mut d.megaflow_hits, base.megaflow_hits);
    sub(&mut d.subtable_lookups, base.subtable_lookups);
    sub(&mut d.upcalls, base.upcalls);
    sub(&mut d.failed_upcalls, base.failed_upcalls);
    sub(&mut d.sent_packets, base.sent_packets);
    sub(&mut d.sent_batches, base.sent_batches);
    sub(&mut d.processing_cycles, base.processing_cycles);
    sub(&mut d.idle_cycles, base.idle_cycles);
    sub(&mut d.sleeps, base.sleeps);
    sub(&mut d.sleep_us, base.sleep_us);
    for (a, b) in d.rx_batch_sizes.iter_mut().zip(&base.rx_batch_sizes) {
        sub(a, *b);
    }
    for (a, b) in d.tx_batch_sizes.iter_mut().zip(&base.tx_batch_sizes) {
        sub(a, *b);
    }
    d
}

/// The value at or under which share `q` of a histogram's counts lie
/// (its bins' upper bounds).
fn quantile(h: &Log2Histogram, q: f64) -> u64 {
    let n = h.count();
    let want = (q * n as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, c) in h.bins.iter().enumerate() {
        seen += c;
        if seen >= want {
            return Log2Histogram::upper(i);
        }
    }
    0
}

fn log2_text(name: &str, h: &Log2Histogram) -> String {
    let n = h.count();
    if n == 0 {
        return format!("    {name}: none\n");
    }
    let mut o = format!(
        "    {name}: {n} counted, mean {:.1}, p50 <= {}, p99 <= {}\n",
        h.sum as f64 / n as f64,
        quantile(h, 0.5),
        quantile(h, 0.99)
    );
    for i in 0..LOG2_BINS {
        let c = h.bins[i];
        if c > 0 {
            let upper = match Log2Histogram::upper(i) {
                u64::MAX => "more".to_string(),
                u => u.to_string(),
            };
            o += &format!(
                "      {upper:>14} {c:>14} {:6.2} %\n",
                100.0 * c as f64 / n as f64
            );
        }
    }
    o
}

fn sizes_text(name: &str, sizes: &[u64; 32]) -> String {
    let n: u64 = sizes.iter().sum();
    if n == 0 {
        return format!("    {name}: none\n");
    }
    let mean = sizes
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u64 + 1) * c)
        .sum::<u64>() as f64
        / n as f64;
    let mut o = format!("    {name}: {n} counted, mean {mean:.2}\n");
    for (i, &c) in sizes.iter().enumerate() {
        if c > 0 {
            o += &format!(
                "      {:>14} {c:>14} {:6.2} %\n",
                i + 1,
                100.0 * c as f64 / n as f64
            );
        }
    }
    o
}

fn seconds_text(p: &PmdPerf, n: usize) -> String {
    let mut o = format!(
        "\n  Last {} seconds (one a line, the current one last):\n    {:>8} {:>12} {:>6} {:>12} {:>10} {:>10} {:>12} {:>10}\n",
        n.min(p.slices.len()),
        "second",
        "iterations",
        "busy%",
        "rx packets",
        "cyc/pkt",
        "upcalls",
        "tx packets",
        "pkts/batch"
    );
    let skip = p.slices.len().saturating_sub(n);
    for s in p.slices.iter().skip(skip) {
        o += &format!(
            "    {:>8} {:>12} {:>6.1} {:>12} {:>10.0} {:>10} {:>12} {:>10.2}\n",
            s.second,
            s.iterations,
            100.0 * s.busy_cycles as f64 / s.cycles.max(1) as f64,
            s.rx_packets,
            s.busy_cycles as f64 / s.rx_packets.max(1) as f64,
            s.upcalls,
            s.tx_packets,
            s.tx_packets as f64 / s.tx_batches.max(1) as f64,
        );
    }
    o
}

fn log_text(p: &PmdPerf, n: usize, us_per_cycle: f64) -> String {
    let mut o = format!(
        "\n  Iterations over {} us: {} since the start, the last {} kept:\n    {:>14} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8}\n",
        p.log_threshold_us,
        p.logged_total,
        p.log.len(),
        "at (s)",
        "cycles",
        "us",
        "rx",
        "upcalls",
        "tx",
        "batches"
    );
    let skip = p.log.len().saturating_sub(n);
    for l in p.log.iter().skip(skip) {
        o += &format!(
            "    {:>14.6} {:>12} {:>10.1} {:>8} {:>8} {:>8} {:>8}\n",
            l.at_us as f64 / 1e6,
            l.cycles,
            l.cycles as f64 * us_per_cycle,
            l.rx_packets,
            l.upcalls,
            l.tx_packets,
            l.tx_batches
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmd::Placement;

    #[test]
    fn options() {
        assert_eq!(ShowOptions::parse(&[]).unwrap(), ShowOptions::default());
        let o = ShowOptions::parse(&["-nh", "--seconds", "--iteration-log", "5"]).unwrap();
        assert_eq!((o.histograms, o.seconds, o.iterations), (false, 60, 5));
        let o = ShowOptions::parse(&["-s", "10", "-it"]).unwrap();
        assert_eq!((o.seconds, o.iterations), (10, 20));
        for bad in [&["-s", "61"][..], &["-it", "0"], &["--bogus"], &["7"]] {
            assert!(ShowOptions::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// The histograms add up to the iterations and batches counted.
    #[test]
    fn histograms_add_up() {
        let mut stats = DpStats::default();
        let mut p = PmdPerf::new(0, &stats, 1_000_000);
        for i in 0..1000u64 {
            p.begin(&stats);
            let rx = i % 4;
            stats.rx_packets += rx;
            if rx > 0 {
                DpStats::count_batch(&mut stats.rx_batch_sizes, rx as usize);
                DpStats::count_batch(&mut stats.tx_batch_sizes, rx as usize);
                stats.sent_packets += rx;
                stats.sent_batches += 1;
            }
            stats.iterations += 1;
            p.end(i * 100, 1000 + i, rx, &stats);
        }
        let snap = PerfSnapshot {
            placement: Placement::default(),
            stats: stats.clone(),
            perf: Some(Box::new(p)),
            now_us: 100_000,
        };
        let text = show(
            &snap,
            &ShowOptions {
                seconds: 60,
                iterations: 5,
                ..ShowOptions::default()
            },
        );
        assert!(
            text.contains("Iterations:                     1000"),
            "{text}"
        );
        assert!(
            text.contains("- busy iterations:               750"),
            "{text}"
        );
        assert!(text.contains("cycles/it: 1000 counted"), "{text}");
        assert!(
            text.contains("packets/it (busy): 750 counted, mean 2.0"),
            "{text}"
        );
        assert!(
            text.contains("packets/rx batch: 750 counted, mean 2.00"),
            "{text}"
        );
        assert!(
            text.contains("packets/tx batch: 750 counted, mean 2.00"),
            "{text}"
        );
        assert!(
            text.contains("Tx batches:                      750  (2.00 pkts/batch)"),
            "{text}"
        );
        assert!(text.contains("Last 1 seconds"), "{text}");
        let off = show(
            &PerfSnapshot { perf: None, ..snap },
            &ShowOptions::default(),
        );
        assert!(off.contains("pmd-perf-metrics is off"));
    }
}
