//! `sluice bench --batching`: issue 40's scenarios for output batching,
//! each run with `tx-flush-interval` 0, 10, 25, 50, 100 µs and `auto`.
//!
//! One PMD (this thread, pinned to the last CPU it may use) forwards
//! 64-byte UDP frames from a source port to one or sixteen sink ports.
//! A sink's send call burns a set number of TSC cycles, as a kick does
//! (a syscall, a doorbell, a guest's eventfd), and stamps each packet's
//! wait: from the moment the source handed it to the datapath to the
//! send call that took it. The source gives frames as fast as the PMD
//! takes them, or at a set rate (with a 1,024-frame ring: what the PMD
//! does not take in time is lost there, as at a NIC, and counted).
//!
//! Per scenario and setting: the rate delivered, packets per kick, and
//! the wait's p50, p99 and maximum.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::cycles::{self, TscClock};
use sluice_datapath::{Datapath, DatapathConfig, TxFlush};
use sluice_packet::build::{Frame, L4};
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::{Port, PortCaps, PortStats, RxStatus};

/// How the source gives frames.
#[derive(Debug, Clone, Copy)]
pub enum Schedule {
    /// As fast as the PMD takes them.
    Full,
    /// At this many packets a second.
    Rate(f64),
    /// `low` and `high` packets a second, alternating every `period_ms`.
    Alternate {
        /// The low rate.
        low: f64,
        /// The high rate.
        high: f64,
        /// How long each lasts.
        period_ms: u64,
    },
}

impl Schedule {
    /// Packets due `secs` after the start.
    fn due(&self, secs: f64) -> u64 {
        match *self {
            Schedule::Full => u64::MAX,
            Schedule::Rate(pps) => (secs * pps) as u64,
            Schedule::Alternate {
                low,
                high,
                period_ms,
            } => {
                let p = period_ms as f64 / 1000.0;
                let whole = (secs / p).floor();
                let pairs = (whole / 2.0).floor();
                let mut n = pairs * p * (low + high);
                let rest = secs - pairs * 2.0 * p;
                n += rest.min(p) * low + (rest - p).max(0.0) * high;
                // (A hair over: 0.15 s at 100 and 1000 pps is 60, not 59.99.)
                (n + 1e-6) as u64
            }
        }
    }
}

/// One scenario of the issue.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What it is.
    pub name: &'static str,
    /// Sink ports (the source's flows spread over them evenly).
    pub outputs: u32,
    /// TSC cycles each send call to a sink costs (0: the sinks are
    /// AF_PACKET ports on veth pairs, whose send is a real syscall into
    /// the kernel).
    pub kick_cycles: u64,
    /// How the source gives frames.
    pub schedule: Schedule,
}

/// The scenarios 1 to 4, the first also on real ports (needs
/// root: 16 veth pairs, IPv6 off, no addresses, deleted after); 5, a
/// kernel guest's iperf3 through a vhost-user port, is `bench/vm-iperf
/// --intervals "0 50 auto"`.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "16 ports, 2,000-cycle kicks, full rate",
            outputs: 16,
            kick_cycles: 2_000,
            schedule: Schedule::Full,
        },
        Scenario {
            name: "16 ports, 20,000-cycle kicks, full rate",
            outputs: 16,
            kick_cycles: 20_000,
            schedule: Schedule::Full,
        },
        Scenario {
            name: "16 AF_PACKET ports on veth pairs, full rate",
            outputs: 16,
            kick_cycles: 0,
            schedule: Schedule::Full,
        },
        Scenario {
            name: "1 port, 2,000-cycle kicks, full rate",
            outputs: 1,
            kick_cycles: 2_000,
            schedule: Schedule::Full,
        },
        Scenario {
            name: "lone packets, 1 kpps, 20,000-cycle kicks",
            outputs: 1,
            kick_cycles: 20_000,
            schedule: Schedule::Rate(1_000.0),
        },
        Scenario {
            name: "bursty: 0.1 / 1 Mpps every 100 ms, 16 ports, 20,000-cycle kicks",
            outputs: 16,
            kick_cycles: 20_000,
            schedule: Schedule::Alternate {
                low: 100_000.0,
                high: 1_000_000.0,
                period_ms: 100,
            },
        },
    ]
}

/// The settings each scenario is run with.
pub fn settings() -> Vec<TxFlush> {
    let mut v: Vec<TxFlush> = [0, 10, 25, 50, 100].map(TxFlush::Fixed).to_vec();
    v.push(TxFlush::Auto);
    v
}

/// One scenario under one setting.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The setting.
    pub setting: TxFlush,
    /// Packets the sinks took, a second (millions).
    pub mpps: f64,
    /// Packets per send call.
    pub per_kick: f64,
    /// The wait from the source to the send call: median, 99th
    /// percentile, longest (µs).
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Longest.
    pub max_us: f64,
    /// The longest a batch waited in its output batch for company, on
    /// the clock `auto`'s hold runs on (the PMD's time less its send
    /// calls; [`sluice_datapath::BatchWaits`]), µs.
    pub held_max_us: u64,
    /// Frames the source lost because the PMD did not take them in time.
    pub source_lost: u64,
    /// Packets delivered.
    pub packets: u64,
}

/// Waits in 50 ns steps up to 10 ms, and the longest.
struct Waits {
    buckets: Vec<u64>,
    max_ns: u64,
    packets: u64,
    kicks: u64,
}

const STEP_NS: u64 = 50;

impl Waits {
    fn new() -> Self {
        Waits {
            buckets: vec![0; 200_001],
            max_ns: 0,
            packets: 0,
            kicks: 0,
        }
    }

    fn add(&mut self, ns: u64) {
        let i = ((ns / STEP_NS) as usize).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    fn quantile_us(&self, q: f64) -> f64 {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return ((i as u64 + 1) * STEP_NS) as f64 / 1000.0;
            }
        }
        self.max_ns as f64 / 1000.0
    }
}

/// Nanoseconds on the TSC, from the run's start.
#[derive(Clone, Copy)]
struct Ns {
    origin: u64,
    per_cycle: f64,
}

impl Ns {
    fn now(&self) -> u64 {
        (cycles::now().wrapping_sub(self.origin) as f64 * self.per_cycle) as u64
    }
}

struct Source {
    frames: Vec<Vec<u8>>,
    next: usize,
    schedule: Schedule,
    ns: Ns,
    taken: u64,
    lost: Arc<Mutex<u64>>,
    stats: PortStats,
}

/// Frames the source's ring holds before it loses them.
const RING: u64 = 1024;

impl Port for Source {
    fn name(&self) -> &str {
        "source"
    }
    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: false,
            finite_rx: false,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: false,
        }
    }
    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let now = self.ns.now();
        let mut budget = batch.remaining() as u64;
        if !matches!(self.schedule, Schedule::Full) {
            let due = self.schedule.due(now as f64 / 1e9);
            let waiting = due.saturating_sub(self.taken);
            if waiting > RING {
                *self.lost.lock().unwrap() += waiting - RING;
                self.taken += waiting - RING;
            }
            budget = budget.min(waiting.min(RING));
        }
        let first = batch.len();
        let got = pool.alloc_bulk(batch, budget as usize);
        for p in &mut batch.as_mut_slice()[first..first + got] {
            let f = &self.frames[self.next];
            self.next = (self.next + 1) % self.frames.len();
            p.fill_from(f);
            p.meta.in_port = in_port;
            p.meta.rx_ts_ns = now;
        }
        self.taken += got as u64;
        self.stats.rx_packets += got as u64;
        RxStatus::of_burst(got, false)
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        batch.free_all(pool);
        0
    }
    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}

struct Sink {
    kick_cycles: u64,
    ns: Ns,
    waits: Arc<Mutex<Waits>>,
    stats: PortStats,
}

impl Port for Sink {
    fn name(&self) -> &str {
        "sink"
    }
    fn caps(&self) -> PortCaps {
        PortCaps::SINK
    }
    fn rx_burst(&mut self, _: &mut PacketPool, _: &mut PacketBatch, _: u32) -> RxStatus {
        RxStatus::Exhausted
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let now = self.ns.now();
        let n = batch.len();
        {
            let mut w = self.waits.lock().unwrap();
            for p in batch.as_slice() {
                w.add(now.saturating_sub(p.meta.rx_ts_ns));
            }
            w.packets += n as u64;
            w.kicks += 1;
        }
        // The kick.
        let t0 = cycles::now();
        while cycles::now().wrapping_sub(t0) < self.kick_cycles {
            std::hint::spin_loop();
        }
        self.stats.tx_packets += n as u64;
        self.stats.tx_kicks += 1;
        batch.free_all(pool);
        n
    }
    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}

/// A veth pair, the first end for a port, IPv6 off on both (no address
/// of any kind in the root namespace), deleted on drop.
struct Veth(String);

impl Veth {
    fn new(i: u32) -> Result<Veth, String> {
        let (a, b) = (format!("sbat{i}a"), format!("sbat{i}b"));
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &a])
            .output();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip link add {a} type veth peer name {b} && \
                 sysctl -qw net.ipv6.conf.{a}.disable_ipv6=1 net.ipv6.conf.{b}.disable_ipv6=1 && \
                 ip link set {a} up && ip link set {b} up"
            ))
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        if !out.status.success() {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", &a])
                .output();
            return Err(format!(
                "veth pair {a}/{b} (the AF_PACKET scenario needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Veth(a))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .output();
    }
}

/// Runs `s` under `setting` for `seconds`.
pub fn run(s: &Scenario, setting: TxFlush, seconds: f64) -> Result<Row, String> {
    let mut rules = String::new();
    for i in 0..s.outputs {
        rules += &format!("udp,tp_src={},actions=output:{}\n", 1000 + i, 2 + i);
    }
    let specs = parse_flow_file(&rules, None).map_err(|e| e.to_string())?;
    let cfg = DatapathConfig {
        tx_flush: setting,
        ..Default::default()
    };
    let mut dp =
        Datapath::new(cfg, Arc::new(RuleSet::from_specs(&specs, 0))).map_err(|e| e.to_string())?;
    let ns = Ns {
        origin: cycles::now(),
        per_cycle: 1e9 / cycles::hz(),
    };
    let frames = (0..s.outputs)
        .map(|i| {
            Frame::ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                L4::Udp {
                    src: 1000 + i as u16,
                    dst: 53,
                },
            )
            .min_len(60)
            .build()
        })
        .collect();
    let lost = Arc::new(Mutex::new(0u64));
    dp.add_port(
        1,
        Box::new(Source {
            frames,
            next: 0,
            schedule: s.schedule,
            ns,
            taken: 0,
            lost: Arc::clone(&lost),
            stats: PortStats::default(),
        }),
    )
    .map_err(|e| e.to_string())?;
    let waits = Arc::new(Mutex::new(Waits::new()));
    let mut veths = Vec::new();
    for i in 0..s.outputs {
        let port: Box<dyn Port> = if s.kick_cycles == 0 {
            let v = Veth::new(i)?;
            let spec: sluice_port::PortSpec = format!("afpacket:{}", v.0).parse()?;
            veths.push(v);
            sluice_port::spec::open_port(&spec).map_err(|e| e.to_string())?
        } else {
            Box::new(Sink {
                kick_cycles: s.kick_cycles,
                ns,
                waits: Arc::clone(&waits),
                stats: PortStats::default(),
            })
        };
        dp.add_port(2 + i, port).map_err(|e| e.to_string())?;
    }
    let clock = TscClock::new(Instant::now());
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        dp.poll_once_clocked(&clock);
    }
    let secs = start.elapsed().as_secs_f64();
    dp.finish().map_err(|e| e.to_string())?;
    let mut w = waits.lock().unwrap();
    let held_max_us = dp
        .port_reports()
        .iter()
        .filter(|r| r.ofport >= 2)
        .map(|r| r.batch_waits.max_us)
        .max()
        .unwrap_or(0);
    if s.kick_cycles == 0 {
        // Real ports: what they sent and their kicks (their waits are not
        // stamped).
        for r in dp.port_reports().iter().filter(|r| r.ofport >= 2) {
            w.packets += r.stats.tx_packets;
            w.kicks += r.stats.tx_kicks;
        }
    }
    drop(veths);
    let lost = *lost.lock().unwrap();
    Ok(Row {
        scenario: s.name,
        setting,
        mpps: w.packets as f64 / secs / 1e6,
        per_kick: w.packets as f64 / w.kicks.max(1) as f64,
        p50_us: w.quantile_us(0.5),
        p99_us: w.quantile_us(0.99),
        max_us: w.max_ns as f64 / 1000.0,
        held_max_us,
        source_lost: lost,
        packets: w.packets,
    })
}

/// Runs every scenario (or those numbered in `only`, from 1) under every
/// setting, `seconds` each, on this
/// thread pinned to the last CPU it may use; `progress` is told each
/// row before it runs.
pub fn run_all(
    seconds: f64,
    only: &[usize],
    mut progress: impl FnMut(&str, TxFlush),
) -> Result<Vec<Row>, String> {
    let cpus = sluice_port::sys::allowed_cpus().map_err(|e| format!("CPU affinity: {e}"))?;
    if let Some(&cpu) = cpus.last() {
        let _ = sluice_port::sys::pin_to_cpu(cpu);
    }
    let mut rows = Vec::new();
    for (i, s) in scenarios().into_iter().enumerate() {
        if !only.is_empty() && !only.contains(&(i + 1)) {
            continue;
        }
        for f in settings() {
            progress(s.name, f);
            rows.push(run(&s, f, seconds)?);
        }
    }
    Ok(rows)
}

/// The rows as a table, scenario by scenario, with each scenario's best
/// fixed setting and how `auto` compares with it.
pub fn table(rows: &[Row]) -> String {
    let mut o = String::new();
    let mut i = 0;
    while i < rows.len() {
        let name = rows[i].scenario;
        let group: Vec<&Row> = rows[i..]
            .iter()
            .take_while(|r| r.scenario == name)
            .collect();
        i += group.len();
        o += &format!("{name}\n");
        o += "  interval  Mpps     pkts/kick  p50 µs   p99 µs   max µs    held max µs  lost at source\n";
        for r in &group {
            let set = match r.setting {
                TxFlush::Auto => "auto".to_string(),
                TxFlush::Fixed(us) => format!("{us} µs"),
            };
            if r.max_us == 0.0 {
                // Real ports: no waits stamped.
                o += &format!(
                    "  {set:<8}  {:<7.3}  {:<9.1}  {:<7}  {:<7}  {:<8}  {:<11}  {}\n",
                    r.mpps, r.per_kick, "-", "-", "-", r.held_max_us, r.source_lost
                );
            } else {
                o += &format!(
                    "  {set:<8}  {:<7.3}  {:<9.1}  {:<7.2}  {:<7.2}  {:<8.1}  {:<11}  {}\n",
                    r.mpps, r.per_kick, r.p50_us, r.p99_us, r.max_us, r.held_max_us, r.source_lost
                );
            }
        }
        let best = group
            .iter()
            .filter(|r| r.setting != TxFlush::Auto)
            .max_by(|a, b| a.mpps.total_cmp(&b.mpps));
        let auto = group.iter().find(|r| r.setting == TxFlush::Auto);
        if let (Some(b), Some(a)) = (best, auto) {
            o += &format!(
                "  best fixed: {} ({:.3} Mpps); auto: {:.1} % of it\n",
                b.setting,
                b.mpps,
                100.0 * a.mpps / b.mpps.max(1e-9)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_count_what_is_due() {
        assert_eq!(Schedule::Rate(1000.0).due(2.5), 2500);
        let alt = Schedule::Alternate {
            low: 100.0,
            high: 1000.0,
            period_ms: 100,
        };
        assert_eq!(alt.due(0.05), 5);
        assert_eq!(alt.due(0.1), 10);
        assert_eq!(alt.due(0.15), 60);
        assert_eq!(alt.due(0.2), 110);
        assert_eq!(alt.due(0.25), 115);
    }

    #[test]
    fn waits_give_quantiles() {
        let mut w = Waits::new();
        for ns in 1..=100u64 {
            w.add(ns * 1000);
        }
        assert!(
            (w.quantile_us(0.5) - 50.05).abs() < 0.1,
            "{}",
            w.quantile_us(0.5)
        );
        assert!((w.quantile_us(0.99) - 99.05).abs() < 0.1);
        assert_eq!(w.max_ns, 100_000);
    }

    /// A short run of every scenario under auto: packets flow and the
    /// numbers are sane (the benchmark itself is `sluice bench --batching`).
    #[test]
    fn every_scenario_runs() {
        let root = std::fs::read_to_string("/proc/self/status")
            .map(|t| {
                t.lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false);
        for s in scenarios() {
            if s.kick_cycles == 0 && !root {
                continue;
            }
            let r = run(&s, TxFlush::Auto, 0.05).unwrap();
            assert!(r.packets > 0, "{}", s.name);
            assert!(r.per_kick >= 1.0 && r.p50_us <= r.max_us, "{r:?}");
        }
    }
}
