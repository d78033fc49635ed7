//! What `sluice run` prints when it is done: per-port counters, the
//! datapath's fate of every packet with drop reasons, OVS-style PMD
//! statistics and the rules with their counters (as `dump-flows`).

use std::fmt::Write;
use std::time::Duration;

use serde_json::{json, Value};
use sluice_classifier::RuleSet;
use sluice_datapath::{DpStats, PortReport, DROP_REASONS};
use sluice_port::PortDrop;

use crate::pmd::Placement;

/// Everything a report shows.
pub struct RunSummary<'a> {
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Datapath counters (summed over the PMDs).
    pub stats: &'a DpStats,
    /// Each PMD's own counters.
    pub per_pmd: &'a [(Placement, DpStats)],
    /// Port counters.
    pub ports: &'a [PortReport],
    /// Rules with their counters.
    pub rules: &'a RuleSet,
    /// Switch clock at the end (µs), for rule durations.
    pub now_us: u64,
    /// Packet-ins waiting for a controller.
    pub packet_ins: usize,
    /// (megaflows, masks, EMC entries, SMC entries) in use.
    pub cache_occupancy: (usize, usize, usize, usize),
    /// Megaflows to list, when asked for.
    pub megaflows: Option<&'a [String]>,
}

fn pct(n: u64, of: u64) -> String {
    if of == 0 {
        "0.00 %".into()
    } else {
        format!("{:.2} %", n as f64 * 100.0 / of as f64)
    }
}

fn rate(n: u64, d: Duration) -> String {
    let s = d.as_secs_f64();
    if s <= 0.0 {
        return "-".into();
    }
    let r = n as f64 / s;
    if r >= 1e6 {
        format!("{:.2} Mpps", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} kpps", r / 1e3)
    } else {
        format!("{r:.0} pps")
    }
}

fn drops_line(drops: &[u64]) -> String {
    let parts: Vec<String> = PortDrop::ALL
        .iter()
        .zip(drops)
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{}: {n}", r.name()))
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        format!("{} ({})", drops.iter().sum::<u64>(), parts.join(", "))
    }
}

/// A switch's ports from the reports of its PMDs (each PMD holds one
/// queue of every port): counters summed per port number, in port order.
pub fn merge_ports(per_pmd: &[Vec<PortReport>]) -> Vec<PortReport> {
    let mut merged: Vec<PortReport> = Vec::new();
    for p in per_pmd.iter().flatten() {
        match merged.binary_search_by_key(&p.ofport, |m| m.ofport) {
            Ok(i) => {
                let m = &mut merged[i];
                m.stats.add(&p.stats);
                m.rxqs.extend_from_slice(&p.rxqs);
                for w in &p.warnings {
                    if !m.warnings.contains(w) {
                        m.warnings.push(w.clone());
                    }
                }
            }
            Err(i) => merged.insert(i, p.clone()),
        }
    }
    merged
}

/// A port's output batching: the `tx-flush-interval` in force, the hold
/// `auto` chose, and what its sends were measured to cost (none for a
/// port that has sent nothing).
pub fn batching_text(p: &PortReport) -> Option<String> {
    let k = &p.kicks;
    if k.calls == 0 {
        return None;
    }
    let setting = match p.tx_flush {
        sluice_datapath::TxFlush::Auto => format!("auto (holding {} µs)", k.hold_us),
        sluice_datapath::TxFlush::Fixed(us) => format!("{us} µs"),
    };
    let w = &p.batch_waits;
    Some(format!(
        "tx-flush-interval: {setting}, send call: {:.0} cycles + {:.1} a packet, {:.3} packets/µs, \
         {} batches, waited {:.1} µs on average, {} µs at most",
        k.per_call_cycles,
        k.per_packet_cycles,
        k.rate_per_us,
        w.batches,
        w.mean_us(),
        w.max_us
    ))
}

/// One port's counters as `sluice ctl dump-ports` and the run report show
/// them: packets, bytes, drops by reason, sends (kicks) and packets per kick.
pub fn port_text(p: &PortReport) -> String {
    let ps = &p.stats;
    let mut o = String::new();
    let _ = writeln!(o, "  port {} ({}):", p.ofport, p.name);
    let _ = writeln!(
        o,
        "    rx packets: {}, bytes: {}, dropped: {}",
        ps.rx_packets,
        ps.rx_bytes,
        drops_line(&ps.rx_dropped)
    );
    let _ = writeln!(
        o,
        "    tx packets: {}, bytes: {}, dropped: {}",
        ps.tx_packets,
        ps.tx_bytes,
        drops_line(&ps.tx_dropped)
    );
    if ps.tx_kicks > 0 {
        let _ = writeln!(
            o,
            "    tx kicks: {}, packets per kick: {:.2}, priority band: {}",
            ps.tx_kicks,
            ps.tx_packets as f64 / ps.tx_kicks as f64,
            ps.tx_high_priority
        );
    }
    if let Some(b) = batching_text(p) {
        let _ = writeln!(o, "    {b}");
    }
    if ps.rx_gso_packets + ps.tx_gso_packets > 0 {
        let _ = writeln!(
            o,
            "    gso packets: rx {}, tx {} (super-frames with virtio-net headers)",
            ps.rx_gso_packets, ps.tx_gso_packets
        );
    }
    if ps.rx_csum_partial > 0 {
        let _ = writeln!(
            o,
            "    rx partial checksums: {} (only the pseudo-header sum: completed on the way out)",
            ps.rx_csum_partial
        );
    }
    if ps.rx_copied + ps.tx_copied > 0 {
        let _ = writeln!(
            o,
            "    copied: rx {}, tx {} (between device buffers and pool frames)",
            ps.rx_copied, ps.tx_copied
        );
    }
    for w in &p.warnings {
        let _ = writeln!(o, "    warning: {w}");
    }
    o
}

/// The `sleeps` line's value (`pmd-stats` and the report), for a PMD
/// that slept at all.
pub fn sleeps_text(st: &DpStats) -> Option<String> {
    (st.sleeps > 0).then(|| format!("{} ({:.3} s asleep)", st.sleeps, st.sleep_us as f64 / 1e6))
}

/// The human-readable report.
pub fn text(s: &RunSummary) -> String {
    let st = s.stats;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} packets in {:.3} s ({})",
        st.rx_packets,
        s.elapsed.as_secs_f64(),
        rate(st.rx_packets, s.elapsed)
    );
    let _ = writeln!(o, "\nports:");
    for p in s.ports {
        o += &port_text(p);
    }
    let _ = writeln!(o, "\ndatapath:");
    let _ = writeln!(o, "  packets received: {}", st.rx_packets);
    let _ = writeln!(o, "    forwarded: {}", st.forwarded);
    let _ = writeln!(o, "    to controller: {}", st.to_controller);
    let _ = writeln!(o, "    dropped: {}", st.dropped_total());
    for r in DROP_REASONS {
        let n = st.dropped_by(r);
        if n > 0 {
            let _ = writeln!(o, "      {}: {n}", r.name());
        }
    }
    if st.ct_frags_held > 0 {
        // Each went on (counted above where it went) or is still held.
        let _ = writeln!(
            o,
            "    fragments held for reassembly by ct: {} (went on: {}, held now: {})",
            st.ct_frags_held,
            st.ct_frags_released,
            st.frags_held_now()
        );
    }
    let _ = writeln!(
        o,
        "  output copies: {} (sent: {}, refused by ports: {}, copies not made: {})",
        st.output_copies, st.sent_packets, st.tx_dropped, st.copy_failures
    );
    if st.gso_segmented + st.csum_completed + st.offload_failures > 0 {
        let _ = writeln!(
            o,
            "  software offloads: {} super-frames cut into {} segments, {} checksums completed, {} failed",
            st.gso_segmented, st.gso_segments, st.csum_completed, st.offload_failures
        );
    }
    if st.gso_encapsulated > 0 {
        let _ = writeln!(
            o,
            "  super-frames encapsulated whole: {}",
            st.gso_encapsulated
        );
    }
    if s.packet_ins > 0 || st.packet_ins > 0 {
        let _ = writeln!(
            o,
            "  packet-ins queued: {} (no OpenFlow channel is connected)",
            s.packet_ins
        );
    }
    let c = st.classified();
    let _ = writeln!(o, "  emc hits: {} ({})", st.emc_hits, pct(st.emc_hits, c));
    let _ = writeln!(o, "  smc hits: {} ({})", st.smc_hits, pct(st.smc_hits, c));
    let _ = writeln!(
        o,
        "  megaflow hits: {} ({})",
        st.megaflow_hits,
        pct(st.megaflow_hits, c)
    );
    let _ = writeln!(
        o,
        "  avg. subtable lookups per megaflow hit: {:.2}",
        st.subtable_lookups_per_hit()
    );
    let _ = writeln!(
        o,
        "  miss with success upcall: {} ({})",
        st.upcalls,
        pct(st.upcalls, c)
    );
    let _ = writeln!(
        o,
        "  miss with failed upcall: {} ({})",
        st.failed_upcalls,
        pct(st.failed_upcalls, c)
    );
    if st.failed_upcalls > 0 {
        let _ = writeln!(
            o,
            "    refused at the flow limit: {}, at the mask limit: {} (forwarded uncached)",
            st.flow_limit_hits, st.mask_limit_hits
        );
    }
    if st.upcalls_deferred > 0 {
        let _ = writeln!(
            o,
            "  misses that waited for the upcall budget: {} ({} waiting now)",
            st.upcalls_deferred,
            st.upcalls_waiting()
        );
    }
    let (mf, masks, emc, smc) = s.cache_occupancy;
    let _ = writeln!(
        o,
        "  megaflows: {mf} (masks: {masks}), emc entries: {emc}, smc entries: {smc}"
    );
    let _ = writeln!(
        o,
        "  megaflows revalidated: {}, invalidated: {}, idle expired: {}",
        st.revalidated, st.invalidated, st.idle_expired
    );
    if st.recirc_freed > 0 {
        let _ = writeln!(o, "  recirculation states freed: {}", st.recirc_freed);
    }
    if st.learned > 0 {
        let _ = writeln!(o, "  rules learned: {}", st.learned);
    }
    let _ = writeln!(o, "  sent batches: {}", st.sent_batches);
    let _ = writeln!(
        o,
        "  avg. packets per output batch: {:.2}",
        st.packets_per_batch()
    );
    let _ = writeln!(o, "  iterations: {}", st.iterations);
    let total = (st.idle_cycles + st.processing_cycles).max(1) as f64;
    let _ = writeln!(
        o,
        "  idle cycles: {} ({:.2} %)",
        st.idle_cycles,
        st.idle_cycles as f64 * 100.0 / total
    );
    let _ = writeln!(
        o,
        "  processing cycles: {} ({:.2} %)",
        st.processing_cycles,
        st.processing_cycles as f64 * 100.0 / total
    );
    if let Some(t) = sleeps_text(st) {
        let _ = writeln!(o, "  sleeps: {t}");
    }
    let _ = writeln!(o, "  cycles/pkt: {:.1}", st.cycles_per_packet());
    if s.per_pmd.len() > 1 {
        for (placement, p) in s.per_pmd {
            let total = (p.idle_cycles + p.processing_cycles).max(1) as f64;
            let _ = writeln!(
                o,
                "  {placement}: packets received: {}, processing cycles: {:.2} %, cycles/pkt: {:.1}",
                p.rx_packets,
                p.processing_cycles as f64 * 100.0 / total,
                p.cycles_per_packet()
            );
        }
    }
    if let Some(mfs) = s.megaflows {
        let _ = writeln!(o, "\nmegaflows:");
        for m in mfs {
            let _ = writeln!(o, "  {m}");
        }
    }
    let ct = s.rules.conntrack();
    if !ct.is_empty() {
        let _ = writeln!(
            o,
            "\nconntrack: {} connections (sluice ctl dump-conntrack lists them)",
            ct.len()
        );
    }
    let _ = writeln!(o, "\nrules:");
    if s.rules.is_empty() {
        let _ = writeln!(o, "  (none: every packet is a table miss)");
    }
    for r in s.rules.iter() {
        let _ = writeln!(o, "{}", r.dump(s.now_us));
    }
    o
}

/// The same report as JSON, for scripts.
pub fn json(s: &RunSummary) -> Value {
    let st = s.stats;
    let drops: serde_json::Map<String, Value> = DROP_REASONS
        .iter()
        .map(|r| (r.name().to_string(), json!(st.dropped_by(*r))))
        .collect();
    let port_drops = |d: &[u64]| -> Value {
        PortDrop::ALL
            .iter()
            .zip(d)
            .map(|(r, n)| (r.name().to_string(), json!(n)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let ct = s.rules.conntrack();
    let mut v = json!({
        "elapsed_s": s.elapsed.as_secs_f64(),
        // The tracked connections at the end, as dump-conntrack lists them.
        "conntrack": ct.dump(None, ct.now_ms()),
        // NORMAL's MAC table at the end, as fdb-show lists it.
        "fdb": s.rules.bridge().macs.show(s.rules.bridge().now_ms()).lines().skip(1).collect::<Vec<_>>(),
        "ports": s.ports.iter().map(|p| json!({
            "number": p.ofport,
            "spec": p.name,
            "rx_packets": p.stats.rx_packets,
            "rx_bytes": p.stats.rx_bytes,
            "rx_dropped": port_drops(&p.stats.rx_dropped),
            "tx_packets": p.stats.tx_packets,
            "tx_bytes": p.stats.tx_bytes,
            "tx_dropped": port_drops(&p.stats.tx_dropped),
            "tx_kicks": p.stats.tx_kicks,
            "tx_high_priority": p.stats.tx_high_priority,
            "rx_gso_packets": p.stats.rx_gso_packets,
            "rx_csum_partial": p.stats.rx_csum_partial,
            "tx_gso_packets": p.stats.tx_gso_packets,
            "rx_copied": p.stats.rx_copied,
            "tx_copied": p.stats.tx_copied,
            "warnings": p.warnings,
        })).collect::<Vec<_>>(),
        "datapath": {
            "packets received": st.rx_packets,
            "forwarded": st.forwarded,
            "to controller": st.to_controller,
            "dropped": drops,
            "ct fragments held": st.ct_frags_held,
            "ct fragments released": st.ct_frags_released,
            "output copies": st.output_copies,
            "sent packets": st.sent_packets,
            "refused by ports": st.tx_dropped,
            "copies not made": st.copy_failures,
            "gso segmented": st.gso_segmented,
            "gso segments": st.gso_segments,
            "checksums completed": st.csum_completed,
            "offload failures": st.offload_failures,
            "packet-ins queued": s.packet_ins,
            "emc hits": st.emc_hits,
            "smc hits": st.smc_hits,
            "megaflow hits": st.megaflow_hits,
            "avg. subtable lookups per megaflow hit": st.subtable_lookups_per_hit(),
            "miss with success upcall": st.upcalls,
            "miss with failed upcall": st.failed_upcalls,
            "megaflows": s.cache_occupancy.0,
            "masks": s.cache_occupancy.1,
            "emc entries": s.cache_occupancy.2,
            "smc entries": s.cache_occupancy.3,
            "megaflows revalidated": st.revalidated,
            "megaflows invalidated": st.invalidated,
            "megaflows idle expired": st.idle_expired,
            "rules learned": st.learned,
            "recirculation states freed": st.recirc_freed,
            "sent batches": st.sent_batches,
            "avg. packets per output batch": st.packets_per_batch(),
            "iterations": st.iterations,
            "idle cycles": st.idle_cycles,
            "processing cycles": st.processing_cycles,
            "cycles/pkt": st.cycles_per_packet(),
        },
        "pmds": s.per_pmd.iter().map(|(placement, p)| json!({
            "pmd": placement.index,
            "core": placement.core,
            "packets received": p.rx_packets,
            "idle cycles": p.idle_cycles,
            "processing cycles": p.processing_cycles,
            "cycles/pkt": p.cycles_per_packet(),
        })).collect::<Vec<_>>(),
        "megaflows": s.megaflows,
        "rules": s.rules.iter().map(|r| {
            let (p, b) = r.counters();
            json!({
                "table": r.table,
                "priority": r.priority,
                "cookie": format!("{:#x}", r.cookie),
                "match": r.matcher.to_string(),
                "actions": sluice_classifier::action::format_actions(&r.actions),
                "n_packets": p,
                "n_bytes": b,
            })
        }).collect::<Vec<_>>(),
    });
    // Beside the rest (one json! of them all is past the macro's depth).
    v["datapath"]["upcalls deferred"] = json!(st.upcalls_deferred);
    v["datapath"]["upcalls waiting"] = json!(st.upcalls_waiting());
    v["datapath"]["gso encapsulated"] = json!(st.gso_encapsulated);
    v
}
