//! `sluice gen` and `sluice bench`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use sluice_bench::harness::{io_floor, run_case, table, BenchResult};
use sluice_bench::profile::{churn_profile, flows_profile, miss_storm_profile, Distribution};
use sluice_bench::rules::RuleSetKind;
use sluice_bench::storm::storm_mix;
use sluice_datapath::CacheConfig;
use sluice_port::pcap::PcapWriter;
use sluice_port::replay::Frames;

/// Arguments of `sluice gen`.
#[derive(Args)]
pub struct GenArgs {
    /// Output file: a pcap, or a flow file with --rules.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Write a benchmark rule set instead of traffic: port-forward, l3, l3l4,
    /// ct-firewall, ct-established, normal, routes:N (N-1 host routes the traffic misses,
    /// and a catch-all) or prefixes:N (N-1 routes the traffic hits over 20
    /// prefix lengths).
    #[arg(long, value_name = "KIND")]
    rules: Option<RuleSetKind>,
    /// Traffic profile: flows (N flows by --dist), churn, miss-storm.
    #[arg(long, default_value = "flows")]
    profile: String,
    /// Distinct flows (for churn: the working set).
    #[arg(long, default_value_t = 1000)]
    flows: u64,
    /// How packets pick flows: rr, uniform, zipf, zipf:EXPONENT.
    #[arg(long, default_value = "rr")]
    dist: Distribution,
    /// Packets to write.
    #[arg(long, default_value_t = 100_000)]
    packets: u64,
    /// Frame size in bytes (64 to 1518).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Churn: new flows per second of traffic.
    #[arg(long, default_value_t = 200_000)]
    new_flows_per_sec: u64,
    /// Churn: packet rate the timestamps assume.
    #[arg(long, default_value_t = 10_000_000)]
    pps: u64,
    /// Random seed (profiles are reproducible).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Each flow from its own source MAC (02:00 and its source IP), for
    /// the normal rule set: NORMAL learns one MAC per flow.
    #[arg(long)]
    macs: bool,
    /// Flows in pairs, each odd flow the reply of the even one before it
    /// (addresses and ports swapped): connections answered both ways, for
    /// the ct-established rule set.
    #[arg(long)]
    replies: bool,
}

fn profile_frames(a: &GenArgs) -> Result<Frames, String> {
    if !(64..=1518).contains(&a.size) {
        return Err(format!("--size {}: frames are 64 to 1518 bytes", a.size));
    }
    if a.flows == 0 || a.packets == 0 {
        return Err("--flows and --packets must be at least 1".into());
    }
    if a.flows > MAX_FLOWS {
        return Err(format!(
            "--flows {}: at most {MAX_FLOWS} (flows differ in 24 bits of their addresses)",
            a.flows
        ));
    }
    if a.packets > MAX_GEN_PACKETS {
        return Err(format!(
            "--packets {}: at most {MAX_GEN_PACKETS} (a profile is made in memory)",
            a.packets
        ));
    }
    match a.profile.as_str() {
        "flows" => Ok(flows_profile(a.flows, a.dist, a.packets, a.size, a.seed)),
        "churn" => Ok(churn_profile(
            a.flows,
            a.new_flows_per_sec,
            a.pps,
            a.packets,
            a.size,
            a.seed,
        )),
        "miss-storm" => Ok(miss_storm_profile(a.packets, a.size)),
        p => Err(format!(
            "--profile {p}: expected flows, churn or miss-storm"
        )),
    }
}

/// The most flows a profile has: flows differ in 24 bits of their
/// addresses ([`sluice_bench::profile::flow_frame`]).
const MAX_FLOWS: u64 = 1 << 24;
/// The most packets `sluice gen` writes (a profile is made in memory).
const MAX_GEN_PACKETS: u64 = 100_000_000;
/// The most PMD threads a benchmark row may run.
const MAX_BENCH_PMDS: usize = 64;

/// `sluice gen`.
pub fn gen(a: GenArgs) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", a.output.display());
    if let Some(kind) = a.rules {
        if kind.needs_install() {
            return Err(format!(
                "--rules {}: its group, meter or tunnel port cannot be written to a flow file (OpenFlow adds groups and meters: ovs-ofctl add-group / add-meter; a tunnel port is a --port); sluice bench installs it itself",
                kind.name()
            ));
        }
        std::fs::write(&a.output, kind.flows()).map_err(err)?;
        println!("{}: {} rule set", a.output.display(), kind.name());
        return Ok(());
    }
    let mut frames = profile_frames(&a)?;
    if a.macs {
        frames = sluice_bench::rules::with_flow_macs(&frames);
    }
    if a.replies {
        frames = sluice_bench::rules::with_replies(&frames);
    }
    let f = std::fs::File::create(&a.output).map_err(err)?;
    let mut w = PcapWriter::new(std::io::BufWriter::new(f)).map_err(err)?;
    for i in 0..frames.len() {
        // Capture timestamps start at 1 s: 0 means "unknown" to the ports.
        w.write(1_000_000_000 + frames.timestamp(i), frames.get(i))
            .map_err(err)?;
    }
    w.flush().map_err(err)?;
    let shape = match a.profile.as_str() {
        "miss-storm" => "a new flow per packet".to_string(),
        "churn" => format!(
            "{} flows live, {} new per second",
            a.flows, a.new_flows_per_sec
        ),
        _ => format!("{} flows, {}", a.flows, a.dist),
    };
    println!(
        "{}: {} packets, profile {}, {shape}, {} bytes",
        a.output.display(),
        frames.len(),
        a.profile,
        a.size
    );
    Ok(())
}

/// Arguments of `sluice bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Rule sets to measure: port-forward, patch-forward (the same across
    /// two bridges joined by a patch port), table-forward (patch-forward's
    /// two rules in two tables of one bridge), l3, l3l4, select-group (port
    /// forwarding through a select group of two buckets), meter (through
    /// a meter no traffic reaches), vxlan-encap and vxlan-decap (into and
    /// out of a VXLAN port, VNI 42, over an underlay port with an
    /// address), ct-firewall (every packet through the connection tracker,
    /// committed while new: the profiles' UDP is never replied to, so
    /// every packet is new, as OVS tracks it), ct-established (the same
    /// rules, the flows in pairs that answer each other: every packet
    /// after a connection's first two is established), normal (OVS's
    /// default bridge: MAC learning, each flow from its own MAC),
    /// routes:N, prefixes:N.
    #[arg(long, value_delimiter = ',', default_value = "port-forward,l3,l3l4")]
    rules: Vec<RuleSetKind>,
    /// Flow counts.
    #[arg(long, value_delimiter = ',', default_value = "8,100,10000,1000000")]
    flows: Vec<u64>,
    /// Distributions.
    #[arg(long, value_delimiter = ',', default_value = "rr,uniform,zipf")]
    dist: Vec<Distribution>,
    /// Cache configurations: default, no-emc, no-smc, megaflow-only, emc-always, exact-megaflows (no wildcards: one upcall per new flow, like ovs-appctl upcall/disable-megaflows).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    config: Vec<String>,
    /// Packets per row.
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    /// tx-flush-interval for every row: auto (the switch's default) or µs.
    #[arg(long, default_value = "auto", value_parser = sluice_datapath::TxFlush::parse)]
    tx_flush_interval: sluice_datapath::TxFlush,
    /// PMD thread counts to measure each row with (e.g. 1,2): each PMD is
    /// pinned to its own CPU and polls its own rx queue (flows dealt over
    /// the queues by hash, as RSS does); the table then shows how the rate
    /// scales.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pmds: Vec<usize>,
    /// Also run the miss storm (a new flow per packet) per rule set and
    /// configuration, and measure established flows beside a storm that
    /// needs an upcall per packet (megaflows off), with upcalls held to
    /// their default share of the cycles and with no limit.
    #[arg(long)]
    miss_storm: bool,
    /// Rate (Mpps) the established flows are offered at beside the storm.
    #[arg(long, value_name = "MPPS", default_value_t = 2.0)]
    storm_established_mpps: f64,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Measure output batching instead, issue 40's scenarios: 1 and 2,
    /// 16 ports with 2,000- and 20,000-cycle kicks; 3, 16 AF_PACKET ports
    /// on veth pairs (root); 4, 1 port at full rate; 5, lone packets at
    /// 1 kpps; 6, a rate that changes tenfold every 100 ms. Each with
    /// tx-flush-interval 0, 10, 25, 50, 100 µs and auto: the rate, packets
    /// per kick and each packet's wait (p50, p99, max). The other options
    /// but --json are not used.
    #[arg(long)]
    batching: bool,
    /// With --batching: seconds per scenario and setting.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// With --batching: only these scenarios (numbered from 1, in the
    /// order above).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<usize>,
    /// Also draw Mpps against flows, one line per rule set and
    /// distribution, into FILE.svg or FILE.png (PNG through rsvg-convert,
    /// which scripts/setup installs).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Draw a bench/compare-ovs results file (its tables: bench/results/
    /// compare-ovs-*.txt) instead of measuring: OVS-DPDK and Sluice on the
    /// same I/O side by side per profile, the testpmd floor over each
    /// pair, into --plot FILE (.svg or .png).
    #[arg(long, value_name = "RESULTS", requires = "plot")]
    compare_chart: Option<PathBuf>,
    /// Measure the cross-core round trip instead: one cache line bounced
    /// between CPUs A and B 20,000 times (after as many untimed), each
    /// round trip timed on the TSC; prints the median, the 10th and 90th
    /// percentiles and the band (fast below 384 cycles, slow above), as
    /// bench/pvp does before each run.
    #[arg(long, value_name = "A,B", value_delimiter = ',', num_args = 1)]
    pingpong: Vec<usize>,
}

/// Writes a chart (SVG text) to `path` (.svg, or .png through
/// `rsvg-convert`).
fn write_svg(path: &Path, svg: String) -> Result<(), String> {
    let png = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()));
    }
    let tmp = path.with_extension("svg.tmp");
    std::fs::write(&tmp, svg).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let out = std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(path)
        .arg(&tmp)
        .output();
    let _ = std::fs::remove_file(&tmp);
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "rsvg-convert failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "--plot {}: PNG needs rsvg-convert ({e}); install librsvg2-bin (scripts/setup does) or give a .svg file",
            path.display()
        )),
    }
}

/// `sluice bench --batching`.
fn bench_batching(a: &BenchArgs) -> Result<(), String> {
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err(format!(
            "--seconds {}: give more than 0, at most 3600",
            a.seconds
        ));
    }
    let n = sluice_bench::batching::scenarios().len();
    if let Some(s) = a.scenarios.iter().find(|&&s| !(1..=n).contains(&s)) {
        return Err(format!(
            "--scenarios {s}: the scenarios are numbered 1 to {n}"
        ));
    }
    let rows = sluice_bench::batching::run_all(a.seconds, &a.scenarios, |s, f| {
        eprintln!("sluice bench: {s}, tx-flush-interval {f}");
    })?;
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "scenario": r.scenario,
                    "tx_flush_interval": r.setting.to_string(),
                    "mpps": r.mpps,
                    "packets_per_kick": r.per_kick,
                    "wait_p50_us": r.p50_us,
                    "wait_p99_us": r.p99_us,
                    "wait_max_us": r.max_us,
                    "lost_at_source": r.source_lost,
                    "packets": r.packets,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", sluice_bench::batching::table(&rows));
    }
    Ok(())
}

/// `sluice bench`.
pub fn bench(a: BenchArgs) -> Result<(), String> {
    if a.batching {
        return bench_batching(&a);
    }
    if !a.pingpong.is_empty() {
        let [x, y] = a.pingpong[..] else {
            return Err("--pingpong A,B: give two CPUs".into());
        };
        let r = sluice_bench::pingpong::measure(x, y, 20_000, sluice_port::sys::pin_to_cpu)?;
        println!(
            "cross-core round trip CPU {x} <-> {y}: median {} cycles (p10 {}, p90 {}) over {} round trips: {} band",
            r.median,
            r.p10,
            r.p90,
            r.rounds,
            r.band()
        );
        return Ok(());
    }
    if let Some(p) = &a.plot {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !ext.eq_ignore_ascii_case("svg") && !ext.eq_ignore_ascii_case("png") {
            return Err(format!(
                "--plot {}: give a file ending in .svg or .png",
                p.display()
            ));
        }
    }
    if let (Some(results), Some(p)) = (&a.compare_chart, &a.plot) {
        let text = std::fs::read_to_string(results)
            .map_err(|e| format!("--compare-chart {}: {e}", results.display()))?;
        let rows = sluice_bench::plot::compare_rows(&text);
        let title = format!(
            "OVS-DPDK and Sluice on the same DPDK vdevs, one core ({})",
            results
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        );
        let svg = sluice_bench::plot::compare_svg(&rows, &title)
            .map_err(|e| format!("--compare-chart {}: {e}", results.display()))?;
        write_svg(p, svg)?;
        eprintln!(
            "sluice: chart of {} profiles written to {}",
            rows.len(),
            p.display()
        );
        return Ok(());
    }
    if let Some(p) = &a.plot {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext.is_empty() {
            return Err(format!(
                "--plot {}: give a file ending in .svg or .png",
                p.display()
            ));
        }
    }
    if let Some(n) = a.pmds.iter().find(|&&n| !(1..=MAX_BENCH_PMDS).contains(&n)) {
        return Err(format!(
            "--pmds {n}: give PMD counts of 1 to {MAX_BENCH_PMDS}"
        ));
    }
    if let Some(f) = a.flows.iter().find(|&&f| !(1..=MAX_FLOWS).contains(&f)) {
        return Err(format!("--flows {f}: give 1 to {MAX_FLOWS} flows"));
    }
    if a.packets == 0 {
        return Err("--packets: give 1 or more".into());
    }
    if !(a.storm_established_mpps.is_finite()
        && a.storm_established_mpps > 0.0
        && a.storm_established_mpps <= 1000.0)
    {
        return Err(format!(
            "--storm-established-mpps {}: give more than 0, at most 1000",
            a.storm_established_mpps
        ));
    }
    let cpus = sluice_port::sys::allowed_cpus().map_err(|e| format!("CPU affinity: {e}"))?;
    if let Some(&n) = a.pmds.iter().find(|&&n| n > cpus.len()) {
        eprintln!(
            "sluice: warning: --pmds {n} on {} CPUs: PMDs will share CPUs and not scale",
            cpus.len()
        );
    }
    let total = a.flows.len() * a.dist.len() * a.rules.len() * a.config.len() * a.pmds.len()
        + if a.miss_storm {
            a.rules.len() * a.config.len()
        } else {
            0
        };
    let mut results: Vec<BenchResult> = Vec::new();
    let mut floor = 0.0f64;
    let mut done = 0;
    let progress = |done: usize, what: &str| {
        eprint!("\r\x1b[2K[{done}/{total}] {what}");
        let _ = std::io::stderr().flush();
    };
    for &flows in &a.flows {
        for &dist in &a.dist {
            // Enough frames to loop over: every flow once (round robin) or a
            // long random draw.
            let len = match dist {
                Distribution::RoundRobin => flows.max(32),
                _ => flows.clamp(1 << 16, 1 << 20),
            };
            progress(done, &format!("generating {flows} flows {dist}"));
            let frames = flows_profile(flows, dist, len, 64, 1);
            floor = floor.max(io_floor(&frames, a.packets.min(2_000_000)));
            for &rules in &a.rules {
                for config in &a.config {
                    for &pmds in &a.pmds {
                        progress(
                            done,
                            &format!("{} {dist} {flows} {config} {pmds} pmd", rules.name()),
                        );
                        results.push(run_case(
                            rules,
                            &frames,
                            flows,
                            &dist.to_string(),
                            config,
                            a.packets,
                            a.tx_flush_interval,
                            pmds,
                        )?);
                        done += 1;
                    }
                }
            }
        }
    }
    if a.miss_storm {
        let frames = miss_storm_profile(a.packets.min(1 << 20), 64);
        for &rules in &a.rules {
            for config in &a.config {
                progress(done, &format!("{} miss storm {config}", rules.name()));
                results.push(run_case(
                    rules,
                    &frames,
                    frames.len() as u64,
                    "miss-storm",
                    config,
                    frames.len() as u64,
                    a.tx_flush_interval,
                    1,
                )?);
                done += 1;
            }
        }
    }
    let mut mixes = Vec::new();
    if a.miss_storm {
        let established = flows_profile(8, Distribution::RoundRobin, 64, 64, 1);
        let storm = miss_storm_profile(1 << 21, 64);
        let pps = (a.storm_established_mpps * 1e6) as u64;
        for share in [CacheConfig::default().upcall_share_pct, 100] {
            progress(
                done,
                &format!("established flows in a storm, upcall share {share}%"),
            );
            let cache = CacheConfig {
                upcall_share_pct: share,
                ..CacheConfig::default()
            };
            mixes.push((
                share,
                storm_mix(&established, &storm, pps, cache, 1.0, cpus.first().copied())?,
            ));
        }
    }
    eprint!("\r\x1b[2K");
    if let Some(p) = &a.plot {
        let title = format!(
            "sluice bench: 64-byte frames, {} packets per point",
            a.packets
        );
        write_svg(p, sluice_bench::plot::svg(&results, &title)?)?;
        eprintln!("sluice: chart written to {}", p.display());
    }
    if a.json {
        let rows: Vec<_> = results
            .iter()
            .map(|r| {
                json!({
                    "rules": r.rules.name(), "profile": r.profile, "flows": r.flows, "config": r.config, "pmds": r.pmds,
                    "packets": r.packets, "mpps": r.mpps, "cycles/pkt": r.cycles_per_pkt,
                    "emc hits %": r.emc_pct, "smc hits %": r.smc_pct, "megaflow hits %": r.megaflow_pct,
                    "upcalls %": r.upcall_pct, "flow setups/s": r.setups_per_sec,
                    "avg. packets per output batch": r.pkts_per_batch, "megaflows": r.megaflows.0, "masks": r.megaflows.1,
                })
            })
            .collect();
        let storm_rows: Vec<_> = mixes
            .iter()
            .map(|(share, m)| {
                json!({
                    "upcall share %": share, "established offered pps": m.offered_pps,
                    "established alone pps": m.alone_pps, "established during pps": m.during_pps,
                    "flow setups/s": m.setups_per_sec, "refused/s": m.refused_per_sec,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "io_floor_mpps": floor, "rows": rows, "storm": storm_rows })
            )
            .expect("json")
        );
    } else {
        print!("{}", table(&results));
        println!("I/O floor (replay port -> null port, no lookup): {floor:.2} Mpps");
        for r in results.iter().filter(|r| r.profile == "miss-storm") {
            println!(
                "{} miss storm ({}): {:.0} flow setups/s",
                r.rules.name(),
                r.config,
                r.setups_per_sec
            );
        }
        for (share, m) in &mixes {
            println!(
                "established 8 flows offered {:.2} Mpps beside a miss storm (megaflows off, upcall share {share}%): {:.2} Mpps alone, {:.2} Mpps during ({:.0}%); {:.0} setups/s, {:.0} storm packets/s refused",
                m.offered_pps / 1e6,
                m.alone_pps / 1e6,
                m.during_pps / 1e6,
                100.0 * m.during_pps / m.alone_pps.max(1.0),
                m.setups_per_sec,
                m.refused_per_sec
            );
        }
        for line in scaling(&results) {
            println!("{line}");
        }
        println!(
            "({} packets per row, 64-byte frames, each PMD thread pinned to its own CPU; compare rows of one run)",
            a.packets
        );
    }
    Ok(())
}

/// "N PMDs vs 1" for every row measured with several PMD counts.
fn scaling(results: &[BenchResult]) -> Vec<String> {
    let mut lines = Vec::new();
    for one in results.iter().filter(|r| r.pmds == 1) {
        for more in results.iter().filter(|r| {
            r.pmds > 1
                && r.rules == one.rules
                && r.profile == one.profile
                && r.flows == one.flows
                && r.config == one.config
        }) {
            lines.push(format!(
                "{} {} {} flows {}: {} PMDs {:.2} Mpps vs 1 PMD {:.2} Mpps = {:.2}x",
                one.rules.name(),
                one.profile,
                one.flows,
                one.config,
                more.pmds,
                more.mpps,
                one.mpps,
                more.mpps / one.mpps.max(1e-9)
            ));
        }
    }
    lines
}
