//! Which cache level of a datapath thread would serve a packet now,
//! looked up without changing anything (no revalidation, no insertion,
//! no counter): what `sluice ctl trace` adds to a trace of the live rules.

use sluice_classifier::dpaction::format_dp_actions;
use sluice_classifier::megaflow::{FlowRef, Megaflow};
use sluice_packet::FlowKey;

use crate::cascade::Caches;

/// The level that would serve a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheLevel {
    /// The exact-match cache.
    Emc,
    /// The signature match cache.
    Smc,
    /// The megaflow classifier.
    Megaflow,
    /// None: an upcall would translate it.
    Miss,
}

impl CacheLevel {
    /// Its name as `pmd-stats` counts its hits.
    pub fn name(self) -> &'static str {
        match self {
            CacheLevel::Emc => "emc hit",
            CacheLevel::Smc => "smc hit",
            CacheLevel::Megaflow => "megaflow hit",
            CacheLevel::Miss => "miss (upcall)",
        }
    }
}

/// What one datapath thread's caches hold for a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheProbe {
    /// The level that would serve it.
    pub level: CacheLevel,
    /// The megaflow it would use, as `dump-megaflows` prints it.
    pub megaflow: Option<String>,
    /// The megaflow predates the rules in force: it is translated again
    /// before use, and dropped if the rules now decide otherwise.
    pub stale: bool,
}

impl Caches {
    /// Looks `key` up as the cascade would, changing nothing. The EMC and
    /// SMC are probed with the software hashes of the key (a port that
    /// hands over a hardware hash places its packets by that one, so for
    /// them the probe may name a later level than the one that serves).
    pub fn probe(&self, key: &FlowKey, epoch: u64, now_us: u64) -> CacheProbe {
        let hashes = [key.hash(), key.hash_short()];
        let found = |r: FlowRef| self.megaflows.get(r).map(|f| (r, f));
        let emc = self.emc.enabled().then(|| {
            self.emc
                .lookup(key, hashes[0])
                .or_else(|| self.emc.lookup_short(key, hashes[1]))
        });
        let hit = emc
            .flatten()
            .and_then(|c| found(crate::cascade::fref(c)))
            .map(|(_, f)| (CacheLevel::Emc, f));
        let hit = hit.or_else(|| {
            if !self.smc.enabled() {
                return None;
            }
            hashes.iter().find_map(|&h| {
                let (_, f) = self.megaflows.get_slot(self.smc.lookup(h)?)?;
                key.matches(&f.matcher.value, &f.matcher.mask)
                    .then_some((CacheLevel::Smc, f))
            })
        });
        let hit = hit.or_else(|| {
            self.megaflows
                .iter()
                .find(|(_, f)| key.matches(&f.matcher.value, &f.matcher.mask))
                .map(|(_, f)| (CacheLevel::Megaflow, f))
        });
        match hit {
            Some((level, f)) => CacheProbe {
                level,
                megaflow: Some(megaflow_line(f, now_us)),
                stale: f.version != epoch,
            },
            None => CacheProbe {
                level: CacheLevel::Miss,
                megaflow: None,
                stale: false,
            },
        }
    }
}

/// A megaflow as `ovs-appctl dpctl/dump-flows` prints it: its match and
/// actions in ODP text ([`sluice_classifier::odp_text`]; `verbose`:
/// `-m`), then its counters.
pub fn megaflow_odp_line(f: &Megaflow, now_us: u64, verbose: bool) -> String {
    use sluice_classifier::odp_text::{format_odp_actions, format_odp_match};
    // Without the packets its upcalls ran, as OVS's datapath counts.
    let packets = f.packets.saturating_sub(f.upcall_packets);
    let used = if packets == 0 {
        "never".to_string()
    } else {
        used(f, now_us)
    };
    format!(
        "{}, packets:{packets}, bytes:{}, used:{used}, actions:{}",
        format_odp_match(&f.matcher, verbose),
        f.bytes.saturating_sub(f.upcall_bytes),
        format_odp_actions(&f.actions, &f.matcher)
    )
}

/// When a megaflow was last hit, as OVS says it: `never`, or seconds ago.
fn used(f: &Megaflow, now_us: u64) -> String {
    if f.packets == 0 {
        "never".to_string()
    } else {
        format!("{:.3}s", now_us.saturating_sub(f.used_us) as f64 / 1e6)
    }
}

/// A megaflow as `dump-megaflows` prints it.
pub fn megaflow_line(f: &Megaflow, now_us: u64) -> String {
    let used = used(f, now_us);
    let m = f.matcher.to_string();
    format!(
        "{}, packets:{}, bytes:{}, used:{used}, actions:{}",
        if m.is_empty() {
            "(match all)".to_string()
        } else {
            m
        },
        f.packets,
        f.bytes,
        format_dp_actions(&f.actions)
    )
}
