//! Which PMD polls which rx queue.
//!
//! Every PMD sends on one queue of each port and polls it too: that queue
//! stays (OVS would call it pinned). A port opened with more rx queues
//! than PMDs (`--n-rxq`) has further queues, dealt round-robin at start;
//! `sluice ctl pmd-rxq-rebalance` moves them by measured load the way
//! OVS's `pmd-rxq-assign=cycles` does: the queues, busiest first, each go
//! to the PMD with the least load so far, counting the load of the queues
//! that stay.

use sluice_datapath::RxQueue;
use sluice_port::Port;
use sluice_port::PortSpec;

/// An rx queue as the assignment sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rxq {
    /// Port number.
    pub ofport: u32,
    /// Queue number among the port's queues.
    pub qid: u32,
    /// The PMD (index) polling it now.
    pub pmd: usize,
    /// Its measured load (TSC cycles over the measuring interval).
    pub load: u64,
    /// Whether it may move (the queue a PMD sends on may not).
    pub movable: bool,
}

/// Moving one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Port number.
    pub ofport: u32,
    /// Queue number.
    pub qid: u32,
    /// From this PMD.
    pub from: usize,
    /// To this one.
    pub to: usize,
    /// The queue's load.
    pub load: u64,
}

/// An assignment: the moves it takes and each PMD's load before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Queues that change PMD.
    pub moves: Vec<Move>,
    /// Load per PMD now.
    pub before: Vec<u64>,
    /// Load per PMD once the moves are made (as measured, so an estimate).
    pub after: Vec<u64>,
}

/// The queues ranked by measured load, each given to the least loaded PMD
/// (the loads of fixed queues counted first). A queue stays where it is
/// when that PMD is among the least loaded, so equal loads move nothing;
/// and when the result would not lower the busiest PMD's load, nothing
/// moves at all (greedy is not always optimal: a rebalance never makes
/// the peak worse).
pub fn assign_by_cycles(rxqs: &[Rxq], n_pmds: usize) -> Plan {
    let mut before = vec![0u64; n_pmds];
    let mut after = vec![0u64; n_pmds];
    for q in rxqs {
        before[q.pmd] += q.load;
        if !q.movable {
            after[q.pmd] += q.load;
        }
    }
    let mut movable: Vec<&Rxq> = rxqs.iter().filter(|q| q.movable).collect();
    movable.sort_by_key(|q| (std::cmp::Reverse(q.load), q.ofport, q.qid));
    let mut moves = Vec::new();
    for q in movable {
        let least = *after.iter().min().expect("at least one PMD");
        // An idle queue gains nothing by moving.
        let to = if after[q.pmd] == least || q.load == 0 {
            q.pmd
        } else {
            after
                .iter()
                .position(|&l| l == least)
                .expect("the minimum is there")
        };
        after[to] += q.load;
        if to != q.pmd {
            moves.push(Move {
                ofport: q.ofport,
                qid: q.qid,
                from: q.pmd,
                to,
                load: q.load,
            });
        }
    }
    let peak = |loads: &[u64]| loads.iter().copied().max().unwrap_or(0);
    if peak(&after) >= peak(&before) {
        return Plan {
            moves: Vec::new(),
            after: before.clone(),
            before,
        };
    }
    Plan {
        moves,
        before,
        after,
    }
}

/// One port's queues as the PMDs get them when the port opens.
pub struct Dealt {
    /// Queue i is PMD i's own: it sends on it and polls it.
    pub own: Vec<Box<dyn Port>>,
    /// The rest (queue ids from `own.len()` on), dealt round-robin as rx
    /// queues that can move: (PMD, queue).
    pub extra: Vec<(usize, RxQueue)>,
}

/// Deals a port's queues over `n_pmds` PMDs (see [`Dealt`]); every PMD
/// needs one of its own.
pub fn deal(queues: Vec<Box<dyn Port>>, n_pmds: usize) -> Result<Dealt, String> {
    if queues.len() < n_pmds {
        return Err(format!("{} queues for {n_pmds} PMD threads", queues.len()));
    }
    let mut own = Vec::with_capacity(n_pmds);
    let mut extra = Vec::new();
    for (qid, q) in queues.into_iter().enumerate() {
        if qid < n_pmds {
            own.push(q);
        } else {
            extra.push((qid % n_pmds, RxQueue::new(qid as u32, q)));
        }
    }
    Ok(Dealt { own, extra })
}

/// How many queues to open a port with: `n_rxq` (`--n-rxq`, at least one
/// per PMD) for ports that can have several, one per PMD otherwise.
pub fn queue_count(n_rxq: Option<usize>, spec: &PortSpec, n_pmds: usize) -> Result<usize, String> {
    match n_rxq {
        Some(n) if n < n_pmds => Err(format!(
            "--n-rxq {n}: give at least one rx queue per PMD thread ({n_pmds})"
        )),
        Some(n) if spec.multi_queue() => Ok(n),
        _ => Ok(n_pmds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(ofport: u32, qid: u32, pmd: usize, load: u64, movable: bool) -> Rxq {
        Rxq {
            ofport,
            qid,
            pmd,
            load,
            movable,
        }
    }

    #[test]
    fn busy_queues_spread_over_the_pmds() {
        // PMD 0 polls its own queue and two busy extra ones; PMD 1 is idle.
        let rxqs = [
            q(1, 0, 0, 10, false),
            q(1, 1, 1, 10, false),
            q(1, 2, 0, 50, true),
            q(1, 3, 0, 40, true),
        ];
        let plan = assign_by_cycles(&rxqs, 2);
        assert_eq!(plan.before, vec![100, 10]);
        // 50 stays on PMD 0 (both PMDs carry 10 so far), 40 goes to 1.
        assert_eq!(plan.after, vec![60, 50]);
        assert_eq!(
            plan.moves,
            vec![Move {
                ofport: 1,
                qid: 3,
                from: 0,
                to: 1,
                load: 40
            }]
        );
    }

    #[test]
    fn balanced_queues_stay_put() {
        let rxqs = [
            q(1, 0, 0, 10, false),
            q(1, 1, 1, 10, false),
            q(1, 2, 0, 30, true),
            q(1, 3, 1, 30, true),
        ];
        assert!(assign_by_cycles(&rxqs, 2).moves.is_empty());
        // And with no load measured at all.
        let idle = [q(1, 2, 0, 0, true), q(1, 3, 1, 0, true)];
        assert!(assign_by_cycles(&idle, 2).moves.is_empty());
    }

    #[test]
    fn a_plan_that_would_not_lower_the_peak_moves_nothing() {
        // 3+3 | 2+2+2 is best; greedy would give 3+2+2 | 3+2.
        let rxqs = [
            q(1, 0, 0, 0, false),
            q(1, 1, 1, 0, false),
            q(1, 2, 0, 3, true),
            q(1, 3, 0, 3, true),
            q(1, 4, 1, 2, true),
            q(1, 5, 1, 2, true),
            q(1, 6, 1, 2, true),
        ];
        let plan = assign_by_cycles(&rxqs, 2);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.after, plan.before);
    }

    #[test]
    fn fixed_queues_never_move() {
        let rxqs = [q(1, 0, 0, 1000, false), q(1, 1, 1, 0, false)];
        let plan = assign_by_cycles(&rxqs, 2);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.after, vec![1000, 0]);
    }

    #[test]
    fn queues_are_dealt_round_robin_first() {
        let null = || Box::new(sluice_port::null::NullPort::new()) as Box<dyn Port>;
        let d = deal((0..6).map(|_| null()).collect(), 2).unwrap();
        assert_eq!(d.own.len(), 2);
        assert_eq!(
            d.extra
                .iter()
                .map(|(pmd, q)| (*pmd, q.qid))
                .collect::<Vec<_>>(),
            vec![(0, 2), (1, 3), (0, 4), (1, 5)]
        );
        assert!(deal(vec![null()], 2).is_err(), "one queue each at least");
    }

    proptest! {
        /// Loads are conserved, fixed queues stay, the busiest PMD carries
        /// no more than before, and a plan that moves anything keeps the
        /// greedy bound (the average plus the largest movable queue).
        #[test]
        fn a_plan_conserves_load_and_never_makes_the_peak_worse(
            loads in proptest::collection::vec((0u64..1000, any::<bool>(), 0usize..3), 1..12),
        ) {
            let n = 3;
            let rxqs: Vec<Rxq> = loads
                .iter()
                .enumerate()
                .map(|(i, &(load, movable, pmd))| q(1, i as u32, pmd, load, movable))
                .collect();
            let plan = assign_by_cycles(&rxqs, n);
            prop_assert_eq!(plan.before.iter().sum::<u64>(), plan.after.iter().sum::<u64>());
            for m in &plan.moves {
                let src = rxqs.iter().find(|r| r.qid == m.qid).unwrap();
                prop_assert!(src.movable);
                prop_assert_eq!(src.pmd, m.from);
            }
            let fixed_peak = (0..n)
                .map(|p| rxqs.iter().filter(|r| !r.movable && r.pmd == p).map(|r| r.load).sum::<u64>())
                .max()
                .unwrap();
            let biggest = rxqs.iter().filter(|r| r.movable).map(|r| r.load).max().unwrap_or(0);
            let avg = plan.after.iter().sum::<u64>() / n as u64;
            let peak = *plan.after.iter().max().unwrap();
            prop_assert!(peak <= *plan.before.iter().max().unwrap());
            if !plan.moves.is_empty() {
                prop_assert!(peak <= fixed_peak.max(avg + biggest));
            }
        }
    }
}
