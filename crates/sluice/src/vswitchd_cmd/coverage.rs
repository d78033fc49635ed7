//! `ovs-appctl coverage/show` and `coverage/read-counter` over Sluice's
//! datapath counters, with OVS's text and its rates (`lib/coverage.c`:
//! the last 5 s, the last minute, the last hour, from 5-second slots; a
//! catch-up after a longer gap spreads the counts evenly over the slots
//! missed, as OVS's `coverage_run` does when its loop was late).
//!
//! The counters are Sluice's, named in OVS's style (OVS's own names only
//! where the event is the same: `upcall_flow_limit_hit`); every drop
//! reason is `drop_<reason>`.

use sluice_datapath::{DpStats, DROP_REASONS};

/// Milliseconds a slot covers (OVS's `COVERAGE_RUN_INTERVAL`).
const INTERVAL_MS: u64 = 5000;
/// Slots in a minute.
const MIN_LEN: usize = 12;
/// Minutes in an hour.
const HR_LEN: usize = 60;

/// Sluice's counters as coverage events: name and total.
pub(super) fn counters(s: &DpStats) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = [
        ("dp_rx_packets", s.rx_packets),
        ("dp_forwarded", s.forwarded),
        ("dp_to_controller", s.to_controller),
        ("dp_emc_hit", s.emc_hits),
        ("dp_smc_hit", s.smc_hits),
        ("dp_megaflow_hit", s.megaflow_hits),
        ("dp_upcall", s.upcalls),
        ("dp_upcall_failed", s.failed_upcalls),
        ("dp_upcall_deferred", s.upcalls_deferred),
        ("upcall_flow_limit_hit", s.flow_limit_hits),
        ("dp_mask_limit_hit", s.mask_limit_hits),
        ("dp_revalidated", s.revalidated),
        ("dp_invalidated", s.invalidated),
        ("dp_idle_expired", s.idle_expired),
        ("dp_learned", s.learned),
        ("dp_recirc_freed", s.recirc_freed),
        ("dp_output_copy", s.output_copies),
        ("dp_copy_failed", s.copy_failures),
        ("dp_sent_packets", s.sent_packets),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_string(), c))
    .collect();
    for r in DROP_REASONS {
        let name: String = r
            .name()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        v.push((format!("drop_{name}"), s.dropped[r.index()]));
    }
    v
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One counter's history.
#[derive(Debug, Clone)]
struct History {
    last_total: u64,
    min: [u64; MIN_LEN],
    hr: [u64; HR_LEN],
}

impl Default for History {
    fn default() -> Self {
        History {
            last_total: 0,
            min: [0; MIN_LEN],
            hr: [0; HR_LEN],
        }
    }
}

/// The counters' histories, as OVS's coverage module keeps them.
#[derive(Debug, Default)]
pub(super) struct Coverage {
    names: Vec<String>,
    hist: Vec<History>,
    idx: usize,
    /// When the next slot closes (None: not started).
    next_ms: Option<u64>,
}

impl Coverage {
    /// Histories that start now (every counter at zero).
    pub fn started() -> Coverage {
        let mut c = Coverage::default();
        c.run(now_ms(), &[]);
        c
    }

    /// [`Coverage::run`] at the time now.
    pub fn update(&mut self, totals: &[(String, u64)]) {
        self.run(now_ms(), totals);
    }

    /// Takes `totals` at `now_ms`: every slot that closed since the last
    /// call gets its share of the counts.
    pub fn run(&mut self, now_ms: u64, totals: &[(String, u64)]) {
        for (n, _) in totals.iter().skip(self.names.len()) {
            self.names.push(n.clone());
            self.hist.push(History::default());
        }
        let Some(next) = self.next_ms else {
            self.next_ms = Some(now_ms + INTERVAL_MS);
            for (h, (_, t)) in self.hist.iter_mut().zip(totals) {
                h.last_total = *t;
            }
            return;
        };
        if now_ms < next {
            return;
        }
        let slots = ((now_ms - next) / INTERVAL_MS + 1) as usize;
        for (h, (_, total)) in self.hist.iter_mut().zip(totals) {
            let count = total.saturating_sub(h.last_total);
            h.last_total = *total;
            let portion = count / slots as u64;
            // Past an hour of slots, only the last hour's are kept.
            let skipped = slots.saturating_sub(MIN_LEN * HR_LEN);
            let mut idx = (self.idx + skipped) % (MIN_LEN * HR_LEN);
            for j in skipped..slots {
                let (m, hr) = (idx % MIN_LEN, idx / MIN_LEN);
                h.min[m] = portion
                    + if j == slots - 1 {
                        count % slots as u64
                    } else {
                        0
                    };
                h.hr[hr] = if m == 0 {
                    h.min[m]
                } else {
                    h.hr[hr] + h.min[m]
                };
                idx = (idx + 1) % (MIN_LEN * HR_LEN);
            }
        }
        self.idx = (self.idx + slots) % (MIN_LEN * HR_LEN);
        self.next_ms = Some(now_ms + INTERVAL_MS);
    }

    /// `coverage/show`'s text for `totals` (as last given to [`run`]).
    pub fn show(&self, totals: &[(String, u64)]) -> String {
        let mut o = format!(
            "Event coverage, avg rate over last: {} seconds, last minute, last hour,  hash={:08x}:\n",
            INTERVAL_MS / 1000,
            hash(totals)
        );
        let mut never = 0;
        for (i, (name, total)) in totals.iter().enumerate() {
            if *total == 0 {
                never += 1;
                continue;
            }
            let h = self.hist.get(i).cloned().unwrap_or_default();
            let last = h.min[(self.idx + MIN_LEN * HR_LEN - 1) % MIN_LEN] as f64 * 1000.0
                / INTERVAL_MS as f64;
            let minute = h.min.iter().sum::<u64>() as f64 / 60.0;
            let hour = h.hr.iter().sum::<u64>() as f64 / 3600.0;
            o += &format!(
                "{name:<24} {last:5.1}/sec {minute:9.3}/sec {hour:13.4}/sec   total: {total}\n"
            );
        }
        o += &format!("{never} events never hit\n");
        o
    }
}

/// A hash of which counters have equal totals, by rank (what OVS's
/// `coverage_hash` hashes: the same events in the same order give the
/// same value, to spot a repeated report).
fn hash(totals: &[(String, u64)]) -> u32 {
    let mut hit: Vec<&(String, u64)> = totals.iter().filter(|(_, t)| *t > 0).collect();
    hit.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut h: u32 = 0x811c_9dc5;
    let mut mix = |b: u8| h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    let mut rank = 0u8;
    let mut prev = None;
    for (name, t) in hit {
        if prev != Some(*t) {
            rank = rank.wrapping_add(1);
            prev = Some(*t);
        }
        mix(rank);
        name.bytes().for_each(&mut mix);
    }
    h
}

/// `coverage/read-counter NAME`: the total, or OVS's error.
pub(super) fn read_counter(totals: &[(String, u64)], name: &str) -> Result<String, String> {
    totals
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| format!("{t}\n"))
        .ok_or_else(|| "No such counter".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> Vec<(String, u64)> {
        vec![("a".into(), n), ("b".into(), 0)]
    }

    #[test]
    fn rates_as_ovs_computes_them() {
        let mut c = Coverage::default();
        c.run(0, &t(0));
        // 50 events in the first slot: 10/sec over the last 5 s.
        c.run(5000, &t(50));
        let s = c.show(&t(50));
        assert!(
            s.starts_with(
                "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash="
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "a                         10.0/sec     0.833/sec        0.0139/sec   total: 50\n"
            ),
            "{s}"
        );
        assert!(s.ends_with("1 events never hit\n"), "{s}");
        // 60 more over the next minute, shown late: spread over 12 slots.
        c.run(65_000, &t(110));
        let s = c.show(&t(110));
        assert!(
            s.contains(
                "a                          1.0/sec     1.000/sec        0.0306/sec   total: 110\n"
            ),
            "{s}"
        );
        assert_eq!(read_counter(&t(110), "a").unwrap(), "110\n");
        assert_eq!(read_counter(&t(110), "z").unwrap_err(), "No such counter");
        // Hours later: one catch-up, nothing panics, old counts gone.
        c.run(9_000_000, &t(110));
        assert!(c
            .show(&t(110))
            .contains("  0.0/sec     0.000/sec        0.0000/sec   total: 110"));
    }

    #[test]
    fn every_drop_reason_is_a_counter() {
        let mut s = DpStats::default();
        s.dropped[sluice_datapath::DropReason::MeterDrop.index()] = 3;
        let c = counters(&s);
        assert!(c.contains(&("drop_meter_drop".to_string(), 3)));
        assert_eq!(c.len(), 19 + DROP_REASONS.len());
    }
}
