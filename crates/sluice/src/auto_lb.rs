//! Automatic rx-queue rebalancing, as Open vSwitch's `pmd-auto-lb`: every
//! interval the control plane looks at each PMD's busy share and each rx
//! queue's load since the last look; when a PMD was overloaded and moving
//! queues (planned as `pmd-rxq-rebalance` plans them) would lower the
//! busiest PMD's load enough, the queues move. Otherwise nothing happens,
//! so a balanced or lightly loaded switch never churns.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::pmd::Shared;
use crate::rxq_assign::Plan;

/// When to rebalance without being asked. The defaults are OVS's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoLb {
    /// How often the load is looked at (OVS's `pmd-auto-lb-rebal-interval`,
    /// 1 minute).
    pub interval: Duration,
    /// A PMD that spent at least this share (%) of its cycles on packets
    /// over an interval is overloaded (`pmd-auto-lb-load-threshold`, 95).
    pub load_threshold_pct: u32,
    /// Queues move only if that lowers the busiest PMD's load by at least
    /// this much (%) (`pmd-auto-lb-improvement-threshold`, 25).
    pub improvement_pct: u32,
}

impl Default for AutoLb {
    fn default() -> Self {
        AutoLb {
            interval: Duration::from_secs(60),
            load_threshold_pct: 95,
            improvement_pct: 25,
        }
    }
}

/// What a look at the load concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// No PMD reached the load threshold (the busiest one's share, %).
    NotOverloaded(f64),
    /// Moving would not lower the peak by the improvement threshold
    /// (the gain it would bring, %).
    TooLittleGain(f64),
    /// Move the planned queues (the expected gain, %).
    Rebalance(f64),
}

impl AutoLb {
    /// Checked settings: an interval of at least 0.1 s, a load threshold
    /// of 1-100 %, an improvement threshold of 0-100 %.
    pub fn new(
        interval_s: f64,
        load_threshold_pct: u32,
        improvement_pct: u32,
    ) -> Result<Self, String> {
        // At most a billion seconds (config::MAX_SECONDS): more cannot be
        // added to a clock.
        if !(interval_s.is_finite() && (0.1..=1e9).contains(&interval_s)) {
            return Err(format!(
                "pmd-auto-lb interval {interval_s}: give 0.1 to 1e9 seconds"
            ));
        }
        if !(1..=100).contains(&load_threshold_pct) {
            return Err(format!(
                "pmd-auto-lb load threshold {load_threshold_pct}: give 1 to 100 (%)"
            ));
        }
        if improvement_pct > 100 {
            return Err(format!(
                "pmd-auto-lb improvement threshold {improvement_pct}: give 0 to 100 (%)"
            ));
        }
        Ok(AutoLb {
            interval: Duration::from_secs_f64(interval_s),
            load_threshold_pct,
            improvement_pct,
        })
    }

    /// Whether to carry out `plan`, given each PMD's busy share (%) over
    /// the interval it was measured on.
    pub fn judge(&self, busy_pct: &[f64], plan: &Plan) -> Verdict {
        let busiest = busy_pct.iter().copied().fold(0.0, f64::max);
        if busiest < f64::from(self.load_threshold_pct) {
            return Verdict::NotOverloaded(busiest);
        }
        let peak = |l: &[u64]| l.iter().copied().max().unwrap_or(0);
        let (before, after) = (peak(&plan.before), peak(&plan.after));
        let gain = if plan.moves.is_empty() || before == 0 {
            0.0
        } else {
            before.saturating_sub(after) as f64 * 100.0 / before as f64
        };
        if plan.moves.is_empty() || gain < f64::from(self.improvement_pct) {
            Verdict::TooLittleGain(gain)
        } else {
            Verdict::Rebalance(gain)
        }
    }
}

/// Starts the thread that calls `rebalance` every `params.interval` (the
/// control plane's measure-judge-move, which moves queues only when
/// [`AutoLb::judge`] says so), logging each rebalance (and any failure) on
/// stderr. It ends once the PMDs stop.
pub fn spawn(
    params: AutoLb,
    shared: Arc<Shared>,
    mut rebalance: impl FnMut(&AutoLb) -> Result<Option<String>, String> + Send + 'static,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("pmd-auto-lb".into())
        .spawn(move || {
            let stopped = || shared.stop.load(Ordering::Relaxed);
            let mut next = Instant::now() + params.interval;
            while !stopped() {
                let now = Instant::now();
                if now < next {
                    // Short naps, so the thread ends soon after the PMDs.
                    std::thread::sleep((next - now).min(Duration::from_millis(50)));
                    continue;
                }
                next = now + params.interval;
                match rebalance(&params) {
                    Ok(Some(report)) => tracing::info!(target: "pmd", "pmd-auto-lb: {report}"),
                    Ok(None) => {}
                    Err(e) if !stopped() => tracing::warn!(target: "pmd", "pmd-auto-lb: {e}"),
                    Err(_) => {}
                }
            }
        })
        .expect("spawning the pmd-auto-lb thread")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rxq_assign::Move;

    fn plan(before: Vec<u64>, after: Vec<u64>, moves: usize) -> Plan {
        let m = Move {
            ofport: 1,
            qid: 2,
            from: 0,
            to: 1,
            load: 1,
        };
        Plan {
            moves: vec![m; moves],
            before,
            after,
        }
    }

    #[test]
    fn rebalances_only_an_overloaded_switch_that_gains_enough() {
        let p = AutoLb::default();
        // PMD 0 busy, PMD 1 idle; moving halves the peak.
        let halve = plan(vec![100, 0], vec![50, 50], 1);
        assert_eq!(p.judge(&[99.0, 1.0], &halve), Verdict::Rebalance(50.0));
        // The same plan while no PMD reaches 95 %: nothing moves.
        assert_eq!(p.judge(&[80.0, 1.0], &halve), Verdict::NotOverloaded(80.0));
        // Overloaded, but the move would gain 10 % of the peak: not enough.
        let small = plan(vec![100, 80], vec![90, 90], 1);
        assert_eq!(
            p.judge(&[100.0, 100.0], &small),
            Verdict::TooLittleGain(10.0)
        );
        // Balanced already: nothing planned, nothing gained.
        let none = plan(vec![100, 100], vec![100, 100], 0);
        assert_eq!(p.judge(&[100.0, 100.0], &none), Verdict::TooLittleGain(0.0));
        // Lower thresholds let the small move through.
        let eager = AutoLb::new(1.0, 50, 5).unwrap();
        assert_eq!(eager.judge(&[60.0, 60.0], &small), Verdict::Rebalance(10.0));
    }

    #[test]
    fn settings_are_checked() {
        assert!(AutoLb::new(0.05, 95, 25)
            .unwrap_err()
            .contains("0.1 to 1e9 seconds"));
        assert!(AutoLb::new(f64::NAN, 95, 25).is_err());
        assert!(AutoLb::new(1e300, 95, 25).is_err());
        assert!(AutoLb::new(60.0, 0, 25).unwrap_err().contains("1 to 100"));
        assert!(AutoLb::new(60.0, 101, 25).is_err());
        assert!(AutoLb::new(60.0, 95, 101).unwrap_err().contains("0 to 100"));
        assert_eq!(AutoLb::new(60.0, 95, 25).unwrap(), AutoLb::default());
    }
}
