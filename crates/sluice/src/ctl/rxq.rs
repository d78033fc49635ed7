//! Moving rx queues between PMDs: `pmd-rxq-rebalance` and `pmd-auto-lb`'s
//! rebalancing, from each queue's measured load.

use super::Control;
use crate::auto_lb::{AutoLb, Verdict};
use crate::pmd::PmdCommand;
use crate::rxq_assign::{assign_by_cycles, Plan, Rxq};

impl Control {
    /// `pmd-rxq-rebalance`: measures each rx queue's load since the last
    /// rebalance, plans with [`assign_by_cycles`], and moves the queues
    /// (each PMD giving one up sends what it has queued first).
    pub(super) fn rebalance(&self) -> Result<String, String> {
        let (rxqs, busy) = self.measure_load()?;
        let plan = assign_by_cycles(&rxqs, busy.len());
        self.apply_moves(&plan)
    }

    /// One look of `pmd-auto-lb` (see [`crate::auto_lb`]): measures, plans
    /// and moves the queues only if `params` judge it worth it. Returns
    /// what moved, or `None` when nothing did.
    pub(crate) fn auto_rebalance(&self, params: &AutoLb) -> Result<Option<String>, String> {
        let _reconfig = self.reconfig.lock().expect("reconfig");
        let (rxqs, busy) = self.measure_load()?;
        let plan = assign_by_cycles(&rxqs, busy.len());
        match params.judge(&busy, &plan) {
            Verdict::Rebalance(gain) => {
                let busy: Vec<String> = busy.iter().map(|b| format!("{b:.0} %")).collect();
                Ok(Some(format!(
                    "PMDs busy {}; moving queues lowers the busiest PMD's load by {gain:.0} %\n{}",
                    busy.join(", "),
                    self.apply_moves(&plan)?
                )))
            }
            Verdict::NotOverloaded(_) | Verdict::TooLittleGain(_) => Ok(None),
        }
    }

    /// Each rx queue's load and each PMD's busy share (% of its cycles
    /// spent on packets) since the last measurement, which this one
    /// becomes.
    fn measure_load(&self) -> Result<(Vec<Rxq>, Vec<f64>), String> {
        let snaps = self.ask_all(PmdCommand::Stats)?;
        // Below the base: the counters were cleared since.
        let since = |now: u64, seen: u64| if now >= seen { now - seen } else { now };
        let mut base = self.rxq_cycles_base.lock().expect("rxq cycles");
        let mut pmd_base = self.pmd_cycles_base.lock().expect("pmd cycles");
        pmd_base.resize(snaps.len(), (0, 0));
        let mut rxqs = Vec::new();
        let mut busy = Vec::with_capacity(snaps.len());
        for (pmd, snap) in snaps.iter().enumerate() {
            for p in snap.ports.iter().filter(|p| p.receives) {
                for q in &p.rxqs {
                    let seen = base.get(&(p.ofport, q.qid)).copied().unwrap_or(0);
                    rxqs.push(Rxq {
                        ofport: p.ofport,
                        qid: q.qid,
                        pmd,
                        load: since(q.rx_cycles, seen),
                        movable: !q.home,
                    });
                    base.insert((p.ofport, q.qid), q.rx_cycles);
                }
            }
            let (proc_seen, idle_seen) = pmd_base[pmd];
            let st = &snap.stats;
            let processing = since(st.processing_cycles, proc_seen);
            let idle = since(st.idle_cycles, idle_seen);
            pmd_base[pmd] = (st.processing_cycles, st.idle_cycles);
            busy.push(processing as f64 * 100.0 / (processing + idle).max(1) as f64);
        }
        Ok((rxqs, busy))
    }

    /// Moves the queues `plan` names and says what moved.
    fn apply_moves(&self, plan: &Plan) -> Result<String, String> {
        let total = plan.before.iter().sum::<u64>().max(1) as f64;
        let share = |l: u64| l as f64 * 100.0 / total;
        let mut out = String::new();
        for m in &plan.moves {
            let q = self.ask_one(m.from, |tx| PmdCommand::TakeRxq(m.ofport, m.qid, tx))??;
            if let Err(refused) = self.ask_one(m.to, |tx| PmdCommand::AddRxq(m.ofport, q, tx))? {
                // Back where it was, so the queue is still polled.
                let back =
                    self.ask_one(m.from, |tx| PmdCommand::AddRxq(m.ofport, refused.queue, tx))?;
                return Err(format!(
                    "port {} queue {}: pmd {} refused it ({}){}",
                    m.ofport,
                    m.qid,
                    m.to,
                    refused.error,
                    if back.is_ok() {
                        "; it stays on pmd ".to_string() + &m.from.to_string()
                    } else {
                        "; it could not go back and is closed".to_string()
                    }
                ));
            }
            out += &format!(
                "port {} queue-id {}: pmd {} -> pmd {} ({:.0} % of the measured load)\n",
                m.ofport,
                m.qid,
                m.from,
                m.to,
                share(m.load)
            );
        }
        let loads = |l: &[u64]| {
            l.iter()
                .enumerate()
                .map(|(i, &x)| format!("pmd {i} {:.0} %", share(x)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out += &format!(
            "moved {} rx queues; load by PMD before: {}; after (estimated): {}",
            plan.moves.len(),
            loads(&plan.before),
            loads(&plan.after)
        );
        Ok(out)
    }
}
