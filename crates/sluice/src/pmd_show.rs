//! What `sluice ctl pmd-stats` and `pmd-rxq-show` print per PMD thread,
//! in the form of `ovs-appctl dpif-netdev/pmd-stats-show` and
//! `pmd-rxq-show`.

use crate::pmd::PmdSnapshot;

/// `pmd-stats` for one PMD, as `ovs-appctl dpif-netdev/pmd-stats-show`.
pub fn pmd_stats(s: &PmdSnapshot) -> String {
    let st = &s.stats;
    let total = (st.idle_cycles + st.processing_cycles).max(1) as f64;
    let (mf, masks, emc, smc) = s.occupancy;
    let mut o = format!("{}:\n", s.placement);
    let mut line = |k: &str, v: String| {
        o += &format!("  {k}: {v}\n");
    };
    line("packets received", st.rx_packets.to_string());
    line("packet recirculations", st.recirculations.to_string());
    let passes = (st.rx_packets + st.recirculations) as f64 / st.rx_packets.max(1) as f64;
    line("avg. datapath passes per packet", format!("{passes:.2}"));
    line("emc hits", st.emc_hits.to_string());
    line("smc hits", st.smc_hits.to_string());
    line("megaflow hits", st.megaflow_hits.to_string());
    line(
        "avg. subtable lookups per megaflow hit",
        format!("{:.2}", st.subtable_lookups_per_hit()),
    );
    line("miss with success upcall", st.upcalls.to_string());
    line("miss with failed upcall", st.failed_upcalls.to_string());
    line(
        "misses that waited for the upcall budget",
        format!(
            "{} ({} waiting now)",
            st.upcalls_deferred,
            st.upcalls_waiting()
        ),
    );
    line("sent packets", st.sent_packets.to_string());
    line("sent batches", st.sent_batches.to_string());
    line(
        "avg. packets per output batch",
        format!("{:.2}", st.packets_per_batch()),
    );
    line("iterations", st.iterations.to_string());
    line(
        "idle cycles",
        format!(
            "{} ({:.2}%)",
            st.idle_cycles,
            st.idle_cycles as f64 * 100.0 / total
        ),
    );
    line(
        "processing cycles",
        format!(
            "{} ({:.2}%)",
            st.processing_cycles,
            st.processing_cycles as f64 * 100.0 / total
        ),
    );
    if let Some(t) = crate::report::sleeps_text(st) {
        line("sleeps", t);
    }
    line("cycles/pkt", format!("{:.1}", st.cycles_per_packet()));
    line("dropped", st.dropped_total().to_string());
    line(
        "megaflows",
        format!("{mf} (masks: {masks}), emc entries: {emc}, smc entries: {smc}"),
    );
    // Each port's output batching on this PMD: packets per kick, the
    // hold in force and what a send costs.
    for p in &s.ports {
        if let Some(b) = crate::report::batching_text(p) {
            let ps = &p.stats;
            let per_kick = ps.tx_packets as f64 / ps.tx_kicks.max(1) as f64;
            o += &format!("  port {}: {per_kick:.2} packets per kick, {b}\n", p.ofport);
        }
    }
    o
}

/// One PMD's rx queues and their share of its cycles, like OVS's
/// `dpif-netdev/pmd-rxq-show` (`pmd usage` is the share of all the PMD's
/// cycles since the last `pmd-stats-clear` spent receiving from that
/// queue and processing what came).
/// `pmd-rxq-show` for one PMD, as `ovs-appctl dpif-netdev/pmd-rxq-show`.
pub fn rxq_show(s: &PmdSnapshot) -> String {
    let total = (s.stats.idle_cycles + s.stats.processing_cycles).max(1) as f64;
    let mut o = format!("{}:\n", s.placement);
    let mut polled = 0u64;
    for p in s.ports.iter().filter(|p| p.receives) {
        for q in &p.rxqs {
            polled += q.rx_cycles;
            o += &format!(
                "  port: {:<3} {:<32} queue-id: {:>2}  pmd usage: {:>3.0} %\n",
                p.ofport,
                p.name,
                q.qid,
                q.rx_cycles as f64 * 100.0 / total
            );
        }
    }
    let overhead = s.stats.processing_cycles.saturating_sub(polled);
    o += &format!("  overhead: {:>3.0} %\n", overhead as f64 * 100.0 / total);
    o
}
