//! One OpenFlow rule: its match, actions, timeouts and flags, and the
//! counters the datapath credits. The rule tables ([`crate::table`]), the
//! classifier index ([`crate::tss`]), groups and meters all hold rules;
//! this module depends on none of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::action::Action;
use crate::flow_match::Match;

/// A rule's identity, unique within a switch's lifetime.
pub type RuleId = u64;

/// Per-rule counters, updated by datapath threads.
#[derive(Debug, Default)]
pub struct RuleStats {
    /// Packets that hit the rule.
    pub packets: AtomicU64,
    /// Bytes of those packets.
    pub bytes: AtomicU64,
    /// Last time (µs on the switch clock) a packet hit the rule.
    pub last_used_us: AtomicU64,
    /// Last time the rule was changed or a `learn` action refreshed it
    /// (µs; 0: never since it was added): its hard timeout counts from
    /// here, as OVS's `rule->modified`.
    pub modified_us: AtomicU64,
    /// The timeouts a `fin_timeout` action lowered them to (idle in the
    /// high 16 bits, hard in the low; 0: not lowered), as OVS's
    /// `ofproto_rule_reduce_timeouts` changes the rule's own.
    pub fin: std::sync::atomic::AtomicU32,
}

/// One OpenFlow rule.
#[derive(Debug)]
pub struct Rule {
    /// Identity.
    pub id: RuleId,
    /// Table.
    pub table: u8,
    /// Priority.
    pub priority: u16,
    /// Cookie.
    pub cookie: u64,
    /// Idle timeout, seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout, seconds (0 = none).
    pub hard_timeout: u16,
    /// Match.
    pub matcher: Match,
    /// Actions (empty = drop).
    pub actions: std::sync::Arc<[Action]>,
    /// When the rule was added (µs on the switch clock).
    pub created_us: u64,
    /// OpenFlow flow-mod flags ([`flag`]).
    pub flags: u16,
    /// The OpenFlow instructions it was added with, as sent
    /// (`FlowSpec::of_instructions` in `crate::parse`).
    pub of_instructions: Option<Arc<[u8]>>,
    /// Counters.
    pub stats: RuleStats,
}

impl Rule {
    /// A counter that is credited as rules are (a cached decision holds it
    /// among its rules) but is in no table: a table's misses
    /// ([`TableCounters`]), a group's or a bucket's packets.
    pub fn counter() -> Rule {
        Rule {
            id: COUNTER_IDS,
            table: 0,
            priority: 0,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            matcher: Match::catch_all(),
            actions: Default::default(),
            created_us: 0,
            flags: 0,
            of_instructions: None,
            stats: RuleStats::default(),
        }
    }

    /// Whether this is a [`Rule::counter`], in no table.
    pub fn is_counter(&self) -> bool {
        self.id >= COUNTER_IDS
    }

    /// Adds `packets`/`bytes` hits seen at `now_us`.
    #[inline]
    pub fn credit(&self, packets: u64, bytes: u64, now_us: u64) {
        self.stats.packets.fetch_add(packets, Ordering::Relaxed);
        self.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.stats.last_used_us.fetch_max(now_us, Ordering::Relaxed);
    }

    /// (packets, bytes) so far.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.stats.packets.load(Ordering::Relaxed),
            self.stats.bytes.load(Ordering::Relaxed),
        )
    }

    /// Formats the rule as `ovs-ofctl dump-flows` does.
    pub fn dump(&self, now_us: u64) -> String {
        let (p, b) = self.counters();
        let dur = now_us.saturating_sub(self.created_us) as f64 / 1e6;
        let mut s = format!(
            " cookie={:#x}, duration={dur:.3}s, table={}, n_packets={p}, n_bytes={b}, ",
            self.cookie, self.table
        );
        let (idle, hard) = self.timeouts();
        if idle != 0 {
            s += &format!("idle_timeout={idle}, ");
        }
        if hard != 0 {
            s += &format!("hard_timeout={hard}, ");
        }
        // As OVS's flow formatting: the default priority goes unsaid.
        let mut parts = Vec::new();
        if self.priority != DEFAULT_PRIORITY {
            parts.push(format!("priority={}", self.priority));
        }
        let m = self.matcher.to_string();
        if !m.is_empty() {
            parts.push(m);
        }
        s += &parts.join(",");
        if parts.is_empty() {
            // "n_bytes=0, " then the actions, as OVS writes a rule that
            // matches everything at the default priority.
            s.truncate(s.trim_end().len());
        }
        s + " actions=" + &crate::action::format_actions(&self.actions)
    }

    /// Marks the rule changed at `now_us` (a `learn` refreshing it): its
    /// hard timeout starts again.
    pub fn touch(&self, now_us: u64) {
        self.stats.modified_us.fetch_max(now_us, Ordering::Relaxed);
    }

    /// The idle and hard timeouts in force: the rule's own, lowered by
    /// what `fin_timeout` actions did ([`Rule::reduce_timeouts`]).
    pub fn timeouts(&self) -> (u16, u16) {
        let fin = self.stats.fin.load(Ordering::Relaxed);
        let lower = |own: u16, max: u16| {
            if max != 0 && (own == 0 || own > max) {
                max
            } else {
                own
            }
        };
        (
            lower(self.idle_timeout, (fin >> 16) as u16),
            lower(self.hard_timeout, fin as u16),
        )
    }

    /// `fin_timeout(idle_timeout=I,hard_timeout=H)` on a TCP FIN or RST:
    /// each timeout becomes at most the given one (0: left alone; a rule
    /// with none gets it), as OVS's `reduce_timeout`.
    pub fn reduce_timeouts(&self, idle: u16, hard: u16) {
        let _ = self
            .stats
            .fin
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let (oi, oh) = ((old >> 16) as u16, old as u16);
                let pick = |o: u16, n: u16| if n != 0 && (o == 0 || o > n) { n } else { o };
                let new = u32::from(pick(oi, idle)) << 16 | u32::from(pick(oh, hard));
                (new != old).then_some(new)
            });
    }

    /// Whether the rule has timed out at `now_us`.
    pub fn expired(&self, now_us: u64) -> bool {
        self.timed_out(now_us).is_some()
    }
}

/// OpenFlow flow-mod flags (`OFPFF_*`) a rule keeps.
pub mod flag {
    /// Tell the controllers when the rule goes (FLOW_REMOVED).
    pub const SEND_FLOW_REM: u16 = 1;
    /// Refuse an add that overlaps a rule of the same priority.
    pub const CHECK_OVERLAP: u16 = 2;
    /// A modify zeroes the counters.
    pub const RESET_COUNTS: u16 = 4;
}

/// Why a rule went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Its idle timeout passed.
    Idle,
    /// Its hard timeout passed.
    Hard,
    /// A delete flow-mod.
    Delete,
}

impl Rule {
    /// Why the rule has timed out at `now_us` (the hard timeout first), if
    /// it has.
    pub fn timed_out(&self, now_us: u64) -> Option<Removal> {
        let modified = self
            .stats
            .modified_us
            .load(Ordering::Relaxed)
            .max(self.created_us);
        let (idle_timeout, hard_timeout) = self.timeouts();
        let hard = hard_timeout != 0 && now_us >= modified + hard_timeout as u64 * 1_000_000;
        if hard {
            return Some(Removal::Hard);
        }
        let last = self
            .stats
            .last_used_us
            .load(Ordering::Relaxed)
            .max(self.created_us);
        let idle = idle_timeout != 0 && now_us >= last + idle_timeout as u64 * 1_000_000;
        idle.then_some(Removal::Idle)
    }
}

/// OpenFlow's default priority (`OFP_DEFAULT_PRIORITY`).
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Ids of counters (table misses, groups, buckets: [`Rule::counter`]):
/// past any rule's.
const COUNTER_IDS: RuleId = RuleId::MAX - 1024;
