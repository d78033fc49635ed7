//! Established flows during a miss storm (issue target: they keep at least
//! 80 % of their rate while a storm of new flows is set up beside them).
//!
//! One datapath thread polls two replay ports: port 1 offers established
//! flows at a fixed rate into a bounded ring (as traffic on a wire: what
//! the switch does not take in time is lost), port 3 offers a new flow
//! per packet as fast as it is taken. Megaflows are off, so every storm
//! packet needs an upcall. The established rate delivered (out of port 2)
//! is measured alone and with the storm, over the same time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{CacheConfig, Datapath, DatapathConfig, DpStats, DropReason};
use sluice_port::null::NullPort;
use sluice_port::replay::{Frames, ReplayPort};

/// What one storm measurement found.
#[derive(Debug, Clone, PartialEq)]
pub struct StormMix {
    /// Established packets offered per second.
    pub offered_pps: f64,
    /// Established packets forwarded per second, alone.
    pub alone_pps: f64,
    /// Established packets forwarded per second, during the storm.
    pub during_pps: f64,
    /// Flows set up per second during the storm.
    pub setups_per_sec: f64,
    /// Storm packets dropped by the upcall budget, per second.
    pub refused_per_sec: f64,
}

const RULES: &str = "in_port=1,actions=output:2\nin_port=3,actions=output:4\n";

/// Ring of the paced established port (a NIC's usual rx ring).
const RING: u64 = 4096;

/// Runs the established frames at `offered_pps` for `secs` seconds, alone
/// and then beside a storm of `storm` new flows, with `cache` (whose
/// megaflows are turned off). Pinned to `cpu` when given.
pub fn storm_mix(
    established: &Frames,
    storm: &Frames,
    offered_pps: u64,
    cache: CacheConfig,
    secs: f64,
    cpu: Option<usize>,
) -> Result<StormMix, String> {
    // Room for every storm flow: the storm is of setups, not of failed
    // installs at the flow limit.
    let cache = CacheConfig {
        megaflows: false,
        megaflow: sluice_classifier::megaflow::MegaflowLimits {
            max_flows: cache
                .megaflow
                .max_flows
                .max(storm.len() + established.len()),
            ..cache.megaflow
        },
        ..cache
    };
    let run = |with_storm: bool| -> Result<(f64, DpStats, f64), String> {
        let specs = parse_flow_file(RULES, Some("storm")).map_err(|e| e.to_string())?;
        let cfg = DatapathConfig {
            cache,
            pool_frames: 8192,
            ..Default::default()
        };
        let mut dp = Datapath::new(cfg, Arc::new(RuleSet::from_specs(&specs, 0)))
            .map_err(|e| e.to_string())?;
        let e =
            ReplayPort::new("established", established.clone(), true).with_rate(offered_pps, RING);
        dp.add_port(1, Box::new(e)).map_err(|e| e.to_string())?;
        dp.add_port(2, Box::new(NullPort::new()))
            .map_err(|e| e.to_string())?;
        if with_storm {
            dp.add_port(
                3,
                Box::new(ReplayPort::new("storm", storm.clone(), false).live()),
            )
            .map_err(|e| e.to_string())?;
            dp.add_port(4, Box::new(NullPort::new()))
                .map_err(|e| e.to_string())?;
        }
        std::thread::scope(|s| {
            s.spawn(move || {
                if let Some(c) = cpu {
                    let _ = sluice_port::sys::pin_to_cpu(c);
                }
                let start = Instant::now();
                let limit = Duration::from_secs_f64(secs);
                while start.elapsed() < limit {
                    dp.poll_once(start.elapsed().as_micros() as u64);
                }
                let elapsed = start.elapsed().as_secs_f64();
                dp.finish().map_err(|e| e.to_string())?;
                let st = dp.stats().clone();
                if !st.rx_balanced() || !st.tx_balanced() {
                    return Err(format!("accounting does not balance: {st:?}"));
                }
                let sent = dp
                    .port_reports()
                    .iter()
                    .find(|p| p.ofport == 2)
                    .map_or(0, |p| p.stats.tx_packets);
                Ok((sent as f64 / elapsed, st, elapsed))
            })
            .join()
            .unwrap_or_else(|_| Err("the storm thread panicked".into()))
        })
    };
    let (alone_pps, _, _) = run(false)?;
    let (during_pps, st, elapsed) = run(true)?;
    Ok(StormMix {
        offered_pps: offered_pps as f64,
        alone_pps,
        during_pps,
        setups_per_sec: st.upcalls as f64 / elapsed,
        refused_per_sec: st.dropped_by(DropReason::UpcallBudget) as f64 / elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{flows_profile, miss_storm_profile, Distribution};

    #[test]
    fn a_short_mix_runs_and_accounts() {
        let est = flows_profile(8, Distribution::RoundRobin, 64, 64, 1);
        let storm = miss_storm_profile(20_000, 64);
        let m = storm_mix(&est, &storm, 100_000, CacheConfig::default(), 0.05, None).unwrap();
        assert!(m.alone_pps > 0.0 && m.during_pps > 0.0, "{m:?}");
        assert!(m.setups_per_sec > 0.0, "{m:?}");
    }
}
