//! The benchmark harness: the real datapath (the code `sluice run` uses)
//! on an in-memory replay port (which copies each frame into a pool frame,
//! as DPDK's `net_pcap` with `infinite_rx=1` does) into a null sink.
//! Rates are wall-clock over the whole run; cycles are TSC cycles spent in
//! iterations that received packets. Results drift on shared machines:
//! compare rows of one run, not runs.

use std::sync::Arc;
use std::time::Instant;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::cycles::TscClock;
use sluice_datapath::{CacheConfig, Datapath, DatapathConfig, DpStats};
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::null::NullPort;
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::{Port, RxStatus};

use crate::rules::RuleSetKind;

/// One measured row.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Rule set.
    pub rules: RuleSetKind,
    /// Profile label (distribution or profile name).
    pub profile: String,
    /// Distinct flows in the profile.
    pub flows: u64,
    /// Cache configuration label.
    pub config: String,
    /// PMD threads.
    pub pmds: usize,
    /// Packets received.
    pub packets: u64,
    /// Million packets per second (wall clock).
    pub mpps: f64,
    /// TSC cycles per packet.
    pub cycles_per_pkt: f64,
    /// EMC hit share (%).
    pub emc_pct: f64,
    /// SMC hit share (%).
    pub smc_pct: f64,
    /// Megaflow hit share (%).
    pub megaflow_pct: f64,
    /// Upcall share (%), installed or not.
    pub upcall_pct: f64,
    /// New megaflows installed per second.
    pub setups_per_sec: f64,
    /// `avg. packets per output batch`.
    pub pkts_per_batch: f64,
    /// Megaflows and masks at the end.
    pub megaflows: (usize, usize),
}

/// A named cache configuration.
pub fn cache_config(name: &str) -> Result<CacheConfig, String> {
    let d = CacheConfig::default();
    Ok(match name {
        "default" => d,
        "no-emc" => CacheConfig {
            emc_insert_inv_prob: 0,
            ..d
        },
        "no-smc" => CacheConfig {
            smc_enabled: false,
            ..d
        },
        "megaflow-only" => CacheConfig {
            emc_insert_inv_prob: 0,
            smc_enabled: false,
            ..d
        },
        "emc-always" => CacheConfig {
            emc_insert_inv_prob: 1,
            ..d
        },
        "exact-megaflows" => CacheConfig {
            megaflows: false,
            ..d
        },
        _ => {
            return Err(format!(
                "'{name}': expected default, no-emc, no-smc, megaflow-only, emc-always or exact-megaflows"
            ))
        }
    })
}

/// Packets each PMD runs before it starts measuring: 5 % of its share,
/// between 1,024 and 200,000, in whole bursts (the replay port fills every
/// burst, so exactly this many are received before the measured part).
fn warm_up(share: u64) -> u64 {
    let burst = sluice_packet::BATCH_SIZE as u64;
    (share / 20).clamp(1_024, 200_000) / burst * burst
}

/// Runs `packets` packets of `frames` (looped) through `pmds` datapaths,
/// one thread each, pinned to the CPUs this process may use in order
/// (as `sluice run --pmd-cores` does): the frames are dealt over one
/// replay rx queue per PMD by flow hash (RSS), each PMD with its own
/// caches and its own null sink queue, and `packets / pmds` packets each,
/// measured after a warm-up (as `bench/compare-ovs` lets OVS warm up before
/// it clears OVS's counters).
#[allow(clippy::too_many_arguments)]
pub fn run_case(
    rules: RuleSetKind,
    frames: &Frames,
    flows: u64,
    profile: &str,
    config: &str,
    packets: u64,
    tx_flush: sluice_datapath::TxFlush,
    pmds: usize,
) -> Result<BenchResult, String> {
    let pmds = pmds.max(1);
    let specs = parse_flow_file(&rules.flows(), Some(&rules.name())).map_err(|e| e.to_string())?;
    let cfg = DatapathConfig {
        cache: cache_config(config)?,
        tx_flush,
        ..Default::default()
    };
    let mut ruleset = RuleSet::from_specs(&specs, 0);
    rules.install(&mut ruleset)?;
    // A second bridge, for the sets that cross a patch port.
    let second = match rules.second_bridge() {
        Some(text) => {
            let specs = parse_flow_file(text, Some("second bridge")).map_err(|e| e.to_string())?;
            let mut r = RuleSet::from_specs(&specs, 0);
            r.share_datapath_state(&ruleset);
            let [_, patches] = rules.patch_ports();
            r.set_patch_ports(patches);
            Some(Arc::new(r))
        }
        None => None,
    };
    let ruleset = Arc::new(ruleset);
    let sink = rules.sink_port();
    let traffic = rules.traffic(frames)?;
    let frames = &traffic;
    let tunnel = rules.tunnel();
    let cpus = sluice_port::sys::allowed_cpus().map_err(|e| format!("CPU affinity: {e}"))?;
    let queues = if pmds == 1 {
        vec![frames.clone()]
    } else {
        frames.split_by_flow(pmds)
    };
    // The clock `sluice run`'s PMD threads use.
    let origin = Instant::now();
    // Every PMD warms up (caches filled, CPU clock up, pages touched), then
    // all start measuring together.
    let ready = std::sync::Barrier::new(pmds);
    let finished: Vec<Result<(Datapath, Instant, Instant), String>> = std::thread::scope(|s| {
        let threads: Vec<_> = queues
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let cpu = cpus[i % cpus.len()];
                let (ready, ruleset, tunnel, second) = (&ready, &ruleset, &tunnel, &second);
                // An even share each; the first PMDs take the remainder;
                // plus the warm-up, which is not measured.
                let share = packets / pmds as u64 + u64::from((i as u64) < packets % pmds as u64);
                s.spawn(move || {
                    // Pinning is best effort here: a benchmark still runs
                    // where affinity cannot be set.
                    let _ = sluice_port::sys::pin_to_cpu(cpu);
                    // Built on its own thread, as `sluice run` builds its
                    // PMDs': no two PMDs' hot state share a cache line.
                    let built = build_pmd(cfg, ruleset, q, share, tunnel.as_ref(), sink).map(
                        |(mut dp, warm)| {
                            if let Some(r) = second {
                                dp.set_bridge_rules(1, Some(Arc::clone(r)));
                            }
                            (dp, warm)
                        },
                    );
                    let (mut dp, warm) = match built {
                        Ok(b) => b,
                        Err(e) => {
                            // Every thread reaches the barrier, even one
                            // that failed, so none waits for it forever.
                            ready.wait();
                            return Err(e);
                        }
                    };
                    let clock = TscClock::new(origin);
                    while dp.stats().rx_packets < warm && !dp.rx_exhausted() {
                        dp.poll_once_clocked(&clock);
                    }
                    let warmed = dp.finish();
                    dp.clear_stats();
                    ready.wait();
                    warmed.map_err(|e| e.to_string())?;
                    let start = Instant::now();
                    dp.run_clocked(&clock, |_| false)
                        .map_err(|e| e.to_string())?;
                    Ok((dp, start, Instant::now()))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a PMD thread panicked".into()))
            })
            .collect()
    });
    let finished = finished.into_iter().collect::<Result<Vec<_>, String>>()?;
    let first = finished
        .iter()
        .map(|f| f.1)
        .min()
        .expect("one PMD at least");
    let last = finished
        .iter()
        .map(|f| f.2)
        .max()
        .expect("one PMD at least");
    let secs = (last - first).as_secs_f64();
    let mut st = DpStats::default();
    let (mut mf, mut masks) = (0, 0);
    for (dp, _, _) in finished {
        let one = dp.stats();
        if !one.rx_balanced() || !one.tx_balanced() {
            return Err(format!("accounting does not balance: {one:?}"));
        }
        st.add(one);
        let (a, b, _, _) = dp.cache_occupancy();
        mf += a;
        masks = masks.max(b);
    }
    let st = &st;
    // Shares of the lookups: one per datapath pass (a decapsulated
    // packet makes two).
    let n = (st.rx_packets + st.recirculations).max(1) as f64;
    let pct = |x: u64| x as f64 * 100.0 / n;
    Ok(BenchResult {
        rules,
        profile: profile.to_string(),
        flows,
        config: config.to_string(),
        pmds,
        packets: st.rx_packets,
        mpps: st.rx_packets as f64 / secs / 1e6,
        cycles_per_pkt: st.cycles_per_packet(),
        emc_pct: pct(st.emc_hits),
        smc_pct: pct(st.smc_hits),
        megaflow_pct: pct(st.megaflow_hits),
        upcall_pct: pct(st.upcalls + st.failed_upcalls),
        setups_per_sec: st.upcalls as f64 / secs,
        pkts_per_batch: st.packets_per_batch(),
        megaflows: (mf, masks),
    })
}

/// One PMD's datapath: the replay queue `q` in on port 1, with `share`
/// measured packets plus the warm-up (returned), a null sink on port
/// `sink`, and for the tunnel sets their tunnel port.
fn build_pmd(
    cfg: DatapathConfig,
    ruleset: &Arc<RuleSet>,
    q: Frames,
    share: u64,
    tunnel: Option<&sluice_packet::tunnel::TunnelConfig>,
    sink: u32,
) -> Result<(Datapath, u64), String> {
    let mut dp = Datapath::new(cfg, Arc::clone(ruleset)).map_err(|e| e.to_string())?;
    let warm = warm_up(share);
    dp.add_port(
        1,
        Box::new(ReplayPort::new("replay", q, true).with_limit(share + warm)),
    )
    .map_err(|e| e.to_string())?;
    dp.add_port(sink, Box::new(NullPort::new()))
        .map_err(|e| e.to_string())?;
    if let Some(c) = tunnel {
        dp.add_port(
            crate::rules::TUNNEL_PORT,
            Box::new(sluice_port::tunnel_port::TunnelPort::new(c)),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok((dp, warm))
}

/// The I/O floor: the same replay port and null sink with no datapath in
/// between (receive a burst, send it). Mpps.
pub fn io_floor(frames: &Frames, packets: u64) -> f64 {
    let mut pool = PacketPool::new(4096, 2048).expect("pool");
    let mut rx = ReplayPort::new("replay", frames.clone(), true).with_limit(packets);
    let mut tx = NullPort::new();
    let mut batch = PacketBatch::new();
    let mut n = 0u64;
    let start = Instant::now();
    while let RxStatus::Received(k) = rx.rx_burst(&mut pool, &mut batch, 1) {
        n += k as u64;
        tx.tx_burst(&mut pool, &mut batch);
    }
    n as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// Formats results as a table like seed 004's.
pub fn table(results: &[BenchResult]) -> String {
    let mut o = format!(
        "{:<14} {:<14} {:>8} {:<15} {:>4} {:>7} {:>10} {:>6} {:>6} {:>6} {:>8} {:>10} {:>9}\n",
        "rules",
        "profile",
        "flows",
        "config",
        "pmds",
        "Mpps",
        "cycles/pkt",
        "emc%",
        "smc%",
        "mf%",
        "upcall%",
        "pkts/batch",
        "mf/masks"
    );
    for r in results {
        o += &format!(
            "{:<14} {:<14} {:>8} {:<15} {:>4} {:>7.2} {:>10.0} {:>6.1} {:>6.1} {:>6.1} {:>8.2} {:>10.1} {:>9}\n",
            r.rules.name(),
            r.profile,
            r.flows,
            r.config,
            r.pmds,
            r.mpps,
            r.cycles_per_pkt,
            r.emc_pct,
            r.smc_pct,
            r.megaflow_pct,
            r.upcall_pct,
            r.pkts_per_batch,
            format!("{}/{}", r.megaflows.0, r.megaflows.1)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{flows_profile, Distribution};

    /// The tunnel sets go through their tunnel: every packet out of port
    /// 2, the decapsulated ones after a second pass (so the cache shares
    /// are of passes and still add up).
    #[test]
    fn the_tunnel_sets_encapsulate_and_decapsulate() {
        let frames = flows_profile(8, Distribution::RoundRobin, 32, 64, 1);
        for rules in [RuleSetKind::VxlanEncap, RuleSetKind::VxlanDecap] {
            let r = run_case(
                rules,
                &frames,
                8,
                "rr",
                "default",
                4000,
                sluice_datapath::TxFlush::Auto,
                1,
            )
            .unwrap();
            assert_eq!(r.packets, 4000, "{}", rules.name());
            assert!(r.mpps > 0.0);
            let shares = r.emc_pct + r.smc_pct + r.megaflow_pct + r.upcall_pct;
            assert!((shares - 100.0).abs() < 1e-6, "{}: {shares}", rules.name());
            assert_eq!(
                r.megaflows.0,
                if rules == RuleSetKind::VxlanDecap {
                    2
                } else {
                    1
                }
            );
        }
    }

    #[test]
    fn a_small_case_runs_and_balances() {
        let frames = flows_profile(100, Distribution::Zipf(1.0), 2000, 64, 1);
        for rules in RuleSetKind::ALL {
            let r = run_case(
                rules,
                &frames,
                100,
                "zipf",
                "default",
                5000,
                sluice_datapath::TxFlush::Auto,
                1,
            )
            .unwrap();
            assert_eq!(r.packets, 5000);
            let two = run_case(
                rules,
                &frames,
                100,
                "zipf",
                "default",
                5001,
                sluice_datapath::TxFlush::Auto,
                2,
            )
            .unwrap();
            assert_eq!(two.packets, 5001, "shares add up over PMDs");
            assert!((r.emc_pct + r.smc_pct + r.megaflow_pct + r.upcall_pct - 100.0).abs() < 1e-6);
        }
        assert!(io_floor(&frames, 5000) > 0.0);
        assert!(cache_config("nope").is_err());
    }
}
