//! The benchmark harness: the real datapath (the code `sluice run` uses)
//! on an in-memory replay port (which copies each frame into a pool frame,
//! as DPDK's `net_pcap` with `infinite_rx=1` does) into a null sink.
//! Rates are wall-clock over the whole run; cycles are TSC cycles spent in
//! iterations that received packets. Results drift on shared machines:
//! compare rows of one run, not runs.

use std::sync::Arc;
use std::time::Instant;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{CacheConfig, Datapath, DatapathConfig};
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
        _ => {
            return Err(format!(
                "'{name}': expected default, no-emc, no-smc, megaflow-only or emc-always"
            ))
        }
    })
}

/// Runs `packets` packets of `frames` (looped) through the datapath.
#[allow(clippy::too_many_arguments)]
pub fn run_case(
    rules: RuleSetKind,
    frames: &Frames,
    flows: u64,
    profile: &str,
    config: &str,
    packets: u64,
    tx_flush_us: u64,
) -> Result<BenchResult, String> {
    let specs = parse_flow_file(&rules.flows(), Some(rules.name())).map_err(|e| e.to_string())?;
    let cfg = DatapathConfig {
        cache: cache_config(config)?,
        tx_flush_interval_us: tx_flush_us,
        ..Default::default()
    };
    let mut dp =
        Datapath::new(cfg, Arc::new(RuleSet::from_specs(&specs, 0))).map_err(|e| e.to_string())?;
    dp.add_port(
        1,
        Box::new(ReplayPort::new("replay", frames.clone(), true).with_limit(packets)),
    )
    .map_err(|e| e.to_string())?;
    dp.add_port(2, Box::new(NullPort::new()))
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    dp.run(|| start.elapsed().as_micros() as u64, |_| false)
        .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let st = dp.stats();
    if !st.rx_balanced() || !st.tx_balanced() {
        return Err(format!("accounting does not balance: {st:?}"));
    }
    let n = st.rx_packets.max(1) as f64;
    let pct = |x: u64| x as f64 * 100.0 / n;
    let (mf, masks, _, _) = dp.cache_occupancy();
    Ok(BenchResult {
        rules,
        profile: profile.to_string(),
        flows,
        config: config.to_string(),
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
        "{:<13} {:<14} {:>8} {:<13} {:>7} {:>10} {:>6} {:>6} {:>6} {:>8} {:>10} {:>9}\n",
        "rules",
        "profile",
        "flows",
        "config",
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
            "{:<13} {:<14} {:>8} {:<13} {:>7.2} {:>10.0} {:>6.1} {:>6.1} {:>6.1} {:>8.2} {:>10.1} {:>9}\n",
            r.rules.name(),
            r.profile,
            r.flows,
            r.config,
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

    #[test]
    fn a_small_case_runs_and_balances() {
        let frames = flows_profile(100, Distribution::Zipf(1.0), 2000, 64, 1);
        for rules in RuleSetKind::ALL {
            let r = run_case(rules, &frames, 100, "zipf", "default", 5000, 0).unwrap();
            assert_eq!(r.packets, 5000);
            assert!((r.emc_pct + r.smc_pct + r.megaflow_pct + r.upcall_pct - 100.0).abs() < 1e-6);
        }
        assert!(io_floor(&frames, 5000) > 0.0);
        assert!(cache_config("nope").is_err());
    }
}
