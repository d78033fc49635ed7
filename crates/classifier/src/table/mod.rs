//! OpenFlow rule tables: rules with priorities in up to 255 tables, the
//! flow-mod operations that change them, and the reference lookup.
//!
//! A [`RuleSet`] is a value: changing rules means building a new set (rules
//! are shared through `Arc`, so a copy costs a pointer per rule) and
//! publishing it with a higher version. Datapath threads read a published
//! set without locks; per-rule counters are atomics added once per batch.
//!
//! Each table is a [`TableIndex`] (tuple space search over persistent
//! maps): lookups cost the number of distinct masks, not of rules; adding or
//! removing a rule costs O(log n); cloning a set costs O(tables), so a
//! version per batch of changes copies nothing else. [`RuleSet::lookup_linear`]
//! is the plain scan over priority-ordered rules, the reference the index is
//! tested against: keep it obviously correct. Among overlapping rules of
//! equal priority (which OpenFlow leaves undefined) the one added first wins.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sluice_packet::key::FlowKey;

use crate::action::Action;
use crate::flow_match::Match;
use crate::group::Group;
use crate::parse::{FlowSpec, N_TABLES};
use crate::tss::TableIndex;
use crate::wildcards::explain_miss;

mod admit;
mod groups;
pub mod learned;
mod meters;
mod modes;
pub use crate::rule::{flag, Removal, Rule, RuleId, RuleStats};
pub use admit::Refusal;
pub use modes::{Modes, PushMpls, PushVlan, SelectHash, SetFieldMode};

/// How a flow-mod selects existing rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Same table (unless all tables), same match and same priority.
    Strict,
    /// Every rule at least as specific as the selector's match.
    Loose,
}

/// OpenFlow's per-table counters (TABLE statistics: lookups and
/// matches, as OVS keeps them), shared by every version of a rule set.
///
/// Matches are the rules' own counters (each packet a rule matched is
/// credited to it, from the caches in bulk) plus those of rules since
/// removed. Misses are counted the same way: a lookup that misses in table
/// `t` credits table `t`'s miss counter, a rule that is in no table
/// ([`Rule::is_counter`]), so cached decisions count them too.
#[derive(Debug)]
pub struct TableCounters {
    misses: Vec<Arc<Rule>>,
    retired: Vec<AtomicU64>,
}

impl Default for TableCounters {
    fn default() -> Self {
        TableCounters {
            misses: (0..=u8::MAX)
                .map(|t| {
                    Arc::new(Rule {
                        table: t,
                        ..Rule::counter()
                    })
                })
                .collect(),
            retired: (0..=u8::MAX).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// A versioned set of rule tables.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    tables: Vec<TableIndex>,
    counters: Arc<TableCounters>,
    /// The group table (OpenFlow groups), versioned with the rules.
    pub(crate) groups: im::OrdMap<u32, Arc<Group>>,
    pub(crate) version: u64,
    /// Where rule ids come from, shared by every version made from this
    /// one (a datapath thread's copy that learned a rule and the control
    /// plane's never hand out one id twice).
    ids: Arc<AtomicU64>,
    /// Rules `learn` actions added, waiting for the control plane
    /// ([`learned`]), shared by every version.
    learn_queue: Arc<learned::LearnQueue>,
    /// The last learned rule (its sequence number) this version holds.
    learned_seq: u64,
    /// Where Open vSwitch and OpenFlow 1.3 (or the RFCs) differ.
    modes: Modes,
    /// Rules with an idle or hard timeout (the datapath looks for expired
    /// rules only when there are some).
    timed: usize,
    /// The meter table, versioned with the rules ([`crate::meter`]).
    pub(crate) meters: im::OrdMap<u32, Arc<crate::meter::Meter>>,
    /// Translation states frozen for recirculation, shared by every
    /// version (a state holds its own actions, not references to rules).
    recirc: Arc<crate::recirc::RecircTable>,
    /// The connection tracker `ct` actions consult, shared by every
    /// version (its connections outlive any rule).
    conntrack: Arc<sluice_conntrack::Conntrack>,
    /// The bridge NORMAL switches by (its MAC table and VLAN port modes),
    /// carried from version to version like the tracker.
    bridge: Arc<sluice_bridge::Bridge>,
    /// Tunnel ports, underlays, routes and neighbours, shared by every
    /// version ([`crate::tunnel`]); `None` without tunnels.
    tunnels: Option<Arc<crate::tunnel::Tunnels>>,
    /// Fail-open (a standalone switch whose controllers have been gone
    /// too long): OVS's hidden rule above table 0's, `actions=NORMAL`.
    fail_open: Option<Arc<Rule>>,
    /// The bridge's patch ports, by number ([`crate::patch`]).
    patches: Arc<[crate::patch::PatchPort]>,
    /// The bridge's name, for traces (`sluice` unless named).
    name: Arc<str>,
}

/// The ids a delete of `id` takes from `map`: every one for `all`, else
/// `id` if it is there.
pub(crate) fn doomed<V: Clone>(map: &im::OrdMap<u32, V>, id: u32, all: u32) -> Vec<u32> {
    if id == all {
        map.keys().copied().collect()
    } else if map.contains_key(&id) {
        vec![id]
    } else {
        Vec::new()
    }
}

impl RuleSet {
    /// An empty set (every lookup misses).
    pub fn new() -> Self {
        RuleSet {
            tables: Vec::new(),
            counters: Arc::default(),
            groups: im::OrdMap::new(),
            version: 1,
            ids: Arc::new(AtomicU64::new(1)),
            learn_queue: Arc::default(),
            learned_seq: 0,
            modes: Modes::default(),
            timed: 0,
            meters: im::OrdMap::new(),
            recirc: Arc::default(),
            conntrack: Arc::default(),
            bridge: Arc::default(),
            tunnels: None,
            fail_open: None,
            patches: Arc::from([]),
            name: Arc::from("sluice"),
        }
    }

    /// The bridge's name, as traces show it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Names the bridge (for traces).
    pub fn set_name(&mut self, name: &str) {
        if *self.name != *name {
            self.name = Arc::from(name);
            self.version += 1;
        }
    }

    /// The bridge's patch ports, ascending by number.
    #[inline]
    pub fn patch_ports(&self) -> &[crate::patch::PatchPort] {
        &self.patches
    }

    /// Makes `patches` the bridge's patch ports (a new version).
    pub fn set_patch_ports(&mut self, mut patches: Vec<crate::patch::PatchPort>) {
        patches.sort_unstable();
        patches.dedup_by_key(|p| p.port);
        self.patches = Arc::from(patches);
        self.version += 1;
    }

    /// Makes this bridge's rules share the datapath-wide state of
    /// `first`'s (the first bridge's): the connection tracker, the frozen
    /// recirculation states and the tunnels, as one datapath has one of
    /// each whatever its bridges.
    pub fn share_datapath_state(&mut self, first: &RuleSet) {
        self.conntrack = Arc::clone(&first.conntrack);
        self.recirc = Arc::clone(&first.recirc);
        self.tunnels = first.tunnels.clone();
        self.version += 1;
    }

    /// The fail-open rule, when the switch fails open.
    #[inline]
    pub fn fail_open(&self) -> Option<&Arc<Rule>> {
        self.fail_open.as_ref()
    }

    /// Fails open (every packet NORMAL, above every rule of table 0, as
    /// OVS's hidden `priority=0xf0f0f0,actions=NORMAL`) or stops (a new
    /// version when it changes).
    pub fn set_fail_open(&mut self, open: bool) {
        if open == self.fail_open.is_some() {
            return;
        }
        self.fail_open = open.then(|| {
            Arc::new(Rule {
                actions: Arc::from([Action::Normal]),
                ..Rule::counter()
            })
        });
        self.version += 1;
    }

    /// The connection tracker.
    #[inline]
    pub fn conntrack(&self) -> &Arc<sluice_conntrack::Conntrack> {
        &self.conntrack
    }

    /// The bridge state `NORMAL` reads and learns into.
    pub fn bridge(&self) -> &Arc<sluice_bridge::Bridge> {
        &self.bridge
    }

    /// The tunnel state translations read, if there are tunnels.
    #[inline]
    pub fn tunnels(&self) -> Option<&Arc<crate::tunnel::Tunnels>> {
        self.tunnels.as_ref()
    }

    /// Sets the tunnel state (a new version).
    pub fn set_tunnels(&mut self, t: Option<Arc<crate::tunnel::Tunnels>>) {
        self.tunnels = t.filter(|t| !t.is_empty());
        self.version += 1;
    }

    /// The Geneve options' mapping onto `tun_metadata` fields (empty
    /// without tunnel state).
    pub fn tlv_map(&self) -> sluice_packet::tunnel::TlvMap {
        self.tunnels
            .as_ref()
            .map(|t| t.tlv().clone())
            .unwrap_or_default()
    }

    /// Makes `map` the Geneve options' mapping, the tunnel ports, underlays
    /// and what was learned kept (a new version: cached decisions are
    /// redone).
    pub fn set_tlv_map(&mut self, map: sluice_packet::tunnel::TlvMap) -> Result<(), String> {
        use crate::tunnel::Tunnels;
        let new = match &self.tunnels {
            Some(t) => t.with_tlv(map)?,
            None => Tunnels::new(Vec::new(), Vec::new(), map)?,
        };
        self.set_tunnels(Some(Arc::new(new)));
        Ok(())
    }

    /// The frozen translation states of recirculations.
    pub fn recirc(&self) -> &crate::recirc::RecircTable {
        &self.recirc
    }

    /// The same, shared (every version made from this one holds it).
    pub fn recirc_shared(&self) -> &Arc<crate::recirc::RecircTable> {
        &self.recirc
    }

    /// Whether a rule has an idle or hard timeout (O(1)).
    pub fn has_timeouts(&self) -> bool {
        self.timed > 0
    }

    /// Whether a rule may time out: it has a timeout, or a `fin_timeout`
    /// action may give it one.
    fn timed(r: &Rule) -> usize {
        usize::from(
            r.idle_timeout != 0
                || r.hard_timeout != 0
                || r.actions.iter().any(|a| match a {
                    crate::Action::FinTimeout { .. } => true,
                    crate::Action::Clone(inner) => inner
                        .iter()
                        .any(|a| matches!(a, crate::Action::FinTimeout { .. })),
                    _ => false,
                }),
        )
    }

    fn take_out(&mut self, r: &Rule) {
        if self.tables[r.table as usize].remove(r).is_some() {
            self.timed -= Self::timed(r);
        }
    }

    /// Removes `r` for good: its matches stay in its table's count.
    pub(crate) fn retire(&mut self, r: &Rule) {
        self.take_out(r);
        self.counters.retired[usize::from(r.table)].fetch_add(r.counters().0, Ordering::Relaxed);
    }

    /// Table `t`'s miss counter, for translations to credit.
    pub fn miss_counter(&self, t: u8) -> &Arc<Rule> {
        &self.counters.misses[usize::from(t)]
    }

    /// Retires every rule `uses` picks (those of a deleted group or
    /// meter), as one new version. Returns them.
    pub(crate) fn retire_users(&mut self, uses: impl Fn(&Rule) -> bool) -> Vec<Arc<Rule>> {
        let mut rules = self.picked(uses);
        for r in &rules {
            self.retire(r);
        }
        self.version += 1;
        let learned = self.delete_learned(&rules);
        rules.extend(learned);
        rules
    }

    /// Table `t`'s (rules, lookups, matches): the rules in it, packets
    /// looked up in it, and those a rule matched, since the set was made.
    /// One pass over the table's rules.
    pub fn table_counts(&self, t: u8) -> (u32, u64, u64) {
        let (rules, hits) = self
            .table_rules(t)
            .fold((0u32, 0u64), |(n, p), r| (n + 1, p + r.counters().0));
        let matched = hits + self.counters.retired[usize::from(t)].load(Ordering::Relaxed);
        (rules, matched + self.miss_counter(t).counters().0, matched)
    }

    /// Where Open vSwitch and OpenFlow 1.3 (or the RFCs) differ: the
    /// choices this set translates with.
    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// Changes those choices (a new version; rules already in the set are
    /// not checked again against [`Modes::set_field`]).
    pub fn set_modes(&mut self, modes: Modes) {
        self.modes = modes;
        self.version += 1;
    }

    /// In Open vSwitch's mode, the first field Open vSwitch keeps
    /// read-only (`eth_type`, `ip_proto`, `mpls_bos`) that `actions`
    /// (their action set included) write: a rule, bucket or packet-out
    /// with it is refused (`ip_proto is read-only`, OpenFlow's
    /// `BAD_SET_TYPE`). `None` in the spec's mode.
    pub fn read_only_write(&self, actions: &[Action]) -> Option<&'static crate::fields::Field> {
        if self.modes.set_field == SetFieldMode::Spec {
            return None;
        }
        crate::action::fields_written(actions).find(|f| f.read_only_in_ovs())
    }

    /// A set holding `specs`, added in order (a later identical rule
    /// replaces an earlier one, as repeated `add-flow` does).
    ///
    /// The rules get their ids (their age) in file order but go into the
    /// indexes sorted by table, mask and values, as the indexes order
    /// them: each insert then walks to where the previous one went, whose
    /// nodes are still in cache, instead of to a random place in a
    /// structure of a gigabyte. The result is the same as adding them in
    /// order (a property test checks it).
    pub fn from_specs(specs: &[FlowSpec], now_us: u64) -> Self {
        let mut set = RuleSet::new();
        let order = Self::load_order(specs);
        let base = set.alloc_ids(specs.len());
        // In key order the specs are read at random places (file order is
        // another): each a cache miss, and then another for its actions'
        // reference count. Both are fetched ahead, the spec 2×AHEAD rules
        // before its turn, its actions AHEAD before.
        const AHEAD: usize = 8;
        for (k, &i) in order.iter().enumerate() {
            if let Some(&j) = order.get(k + 2 * AHEAD) {
                let s = &specs[j as usize];
                sluice_packet::prefetch::read_lines(s, std::mem::size_of::<FlowSpec>());
            }
            if let Some(&j) = order.get(k + AHEAD) {
                // (The count sits just before the actions in the Arc's
                // allocation: its line, and the actions' own.)
                let a = Arc::as_ptr(&specs[j as usize].actions).cast::<u8>();
                sluice_packet::prefetch::read_addr(a.wrapping_sub(16));
                sluice_packet::prefetch::read_addr(a);
            }
            let s = &specs[i as usize];
            set.put(Arc::new(Self::rule_of(s, base + RuleId::from(i), now_us)));
        }
        set.version += specs.len() as u64;
        set
    }

    /// The order [`RuleSet::from_specs`] adds `specs` in: by table, mask
    /// and values; ties (identical rules) in file order, so the later
    /// one replaces. The keys are computed on up to four threads for a
    /// large set (each reads a whole match: most of the cost).
    fn load_order(specs: &[FlowSpec]) -> Vec<u32> {
        type Key = (u8, (u64, u128), u32);
        let key = |i: usize| -> Key {
            let s = &specs[i];
            (s.table, crate::tss::load_order_key(&s.matcher), i as u32)
        };
        const PER_THREAD: usize = 50_000;
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
            .min(specs.len() / PER_THREAD)
            .max(1);
        let mut keys: Vec<Key> = Vec::with_capacity(specs.len());
        if threads == 1 {
            keys.extend((0..specs.len()).map(key));
        } else {
            let chunk = specs.len().div_ceil(threads);
            std::thread::scope(|s| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| {
                        let range = t * chunk..((t + 1) * chunk).min(specs.len());
                        s.spawn(move || range.map(key).collect::<Vec<Key>>())
                    })
                    .collect();
                for p in parts {
                    keys.extend(p.join().expect("key thread"));
                }
            });
        }
        keys.sort_unstable();
        keys.into_iter().map(|(_, _, i)| i).collect()
    }

    pub(crate) fn rule_of(spec: &FlowSpec, id: RuleId, now_us: u64) -> Rule {
        Self::rule_with(spec, spec.actions.clone(), id, now_us)
    }

    /// The rule of `spec` with `actions` (its own, cloned or moved out).
    fn rule_with(spec: &FlowSpec, actions: Arc<[Action]>, id: RuleId, now_us: u64) -> Rule {
        Rule {
            id,
            table: spec.table,
            priority: spec.priority,
            cookie: spec.cookie,
            idle_timeout: spec.idle_timeout,
            hard_timeout: spec.hard_timeout,
            matcher: spec.matcher,
            actions,
            created_us: now_us,
            flags: spec.flags,
            of_instructions: spec.of_instructions.clone(),
            stats: RuleStats::default(),
        }
    }

    /// The version; every change increments it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.tables.iter().map(TableIndex::len).sum()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rules of one table, highest priority first (oldest first among equals).
    pub fn table(&self, t: u8) -> impl Iterator<Item = &Arc<Rule>> {
        self.tables
            .get(t as usize)
            .into_iter()
            .flat_map(TableIndex::iter)
    }

    /// Rules of one table in no particular order.
    fn table_rules(&self, t: u8) -> impl Iterator<Item = &Arc<Rule>> {
        self.tables
            .get(t as usize)
            .into_iter()
            .flat_map(TableIndex::rules)
    }

    /// Where [`RuleSet::iter`] puts a rule: by table, then priority, then
    /// age.
    fn set_order(r: &Rule) -> (u8, std::cmp::Reverse<u16>, RuleId) {
        (r.table, std::cmp::Reverse(r.priority), r.id)
    }

    /// Every rule in no particular order (O(n), where [`RuleSet::iter`]
    /// sorts them).
    pub fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.tables.iter().flat_map(TableIndex::rules)
    }

    /// The index of one table, if it has ever held rules.
    pub fn table_index(&self, t: u8) -> Option<&TableIndex> {
        self.tables.get(t as usize)
    }

    /// Every rule, by table then priority.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.tables.iter().flat_map(TableIndex::iter)
    }

    /// Whether a rule of `spec`'s table and priority overlaps its match
    /// (some packet could match both): OpenFlow's CHECK_OVERLAP. O(rules
    /// of the table), paid only by flow-mods that ask.
    pub fn overlaps(&self, spec: &FlowSpec) -> bool {
        let (v, m) = (spec.matcher.value.words(), spec.matcher.mask.words());
        self.table_rules(spec.table)
            .filter(|r| r.priority == spec.priority)
            .any(|r| {
                let (rv, rm) = (r.matcher.value.words(), r.matcher.mask.words());
                (0..v.len()).all(|i| (v[i] ^ rv[i]) & m[i] & rm[i] == 0)
            })
    }

    /// Removes the rules timed out at `now_us`, with why.
    pub fn expire_with_reasons(&mut self, now_us: u64) -> Vec<(Arc<Rule>, Removal)> {
        if self.timed == 0 {
            return Vec::new();
        }
        let mut gone: Vec<(Arc<Rule>, Removal)> = self
            .rules()
            .filter_map(|r| r.timed_out(now_us).map(|why| (Arc::clone(r), why)))
            .collect();
        gone.sort_unstable_by_key(|(r, _)| Self::set_order(r));
        for (r, _) in &gone {
            self.retire(r);
        }
        if !gone.is_empty() {
            self.version += 1;
            let rules: Vec<Arc<Rule>> = gone.iter().map(|(r, _)| Arc::clone(r)).collect();
            let learned = self.delete_learned(&rules);
            gone.extend(learned.into_iter().map(|r| (r, Removal::Delete)));
        }
        gone
    }

    /// Adds a rule (OpenFlow ADD): an existing rule with the same table,
    /// priority and match is replaced, counters reset.
    pub fn add(&mut self, spec: &FlowSpec, now_us: u64) -> RuleId {
        self.add_rule(|id| Self::rule_of(spec, id, now_us))
    }

    /// [`add`](Self::add) taking the spec, whose actions the rule keeps
    /// (a flow-mod's: no copy of its action list).
    pub fn add_owned(&mut self, mut spec: FlowSpec, now_us: u64) -> RuleId {
        let actions = std::mem::take(&mut spec.actions);
        self.add_rule(|id| Self::rule_with(&spec, actions, id, now_us))
    }

    fn add_rule(&mut self, rule: impl FnOnce(RuleId) -> Rule) -> RuleId {
        let id = self.alloc_ids(1);
        self.put(Arc::new(rule(id)));
        self.version += 1;
        id
    }

    /// `n` fresh rule ids, the first returned.
    fn alloc_ids(&self, n: usize) -> RuleId {
        self.ids.fetch_add(n as RuleId, Ordering::Relaxed)
    }

    /// Puts a rule into its table, in place of the rule with the same
    /// priority and match if there is one (OpenFlow's "identical").
    fn put(&mut self, rule: Arc<Rule>) {
        let t = rule.table as usize;
        if crate::action::tracks_connections(&rule.actions) {
            // Memory for connections before any packet needs it.
            self.conntrack.make_ready();
        }
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, TableIndex::default);
        }
        self.timed += Self::timed(&rule);
        let id = rule.id;
        if let Some(old) = self.tables[t].insert(rule) {
            self.timed -= Self::timed(&old);
            // A modify (the same id) takes the old rule's counters; an add
            // in its place leaves its matches in the table's count.
            if old.id != id {
                self.counters.retired[t].fetch_add(old.counters().0, Ordering::Relaxed);
            }
        }
    }

    fn selected(rule: &Rule, sel: &FlowSpec, how: Selection, all_tables: bool) -> bool {
        if !all_tables && rule.table != sel.table {
            return false;
        }
        if rule.cookie & sel.cookie_mask != sel.cookie & sel.cookie_mask {
            return false;
        }
        match how {
            Selection::Strict => rule.priority == sel.priority && rule.matcher == sel.matcher,
            Selection::Loose => rule.matcher.is_within(&sel.matcher),
        }
    }

    /// The rules a flow-mod selects: one lookup for a strict selection in
    /// one table, a scan otherwise.
    fn select(&self, sel: &FlowSpec, how: Selection, all_tables: bool) -> Vec<Arc<Rule>> {
        if how == Selection::Strict && !all_tables {
            return self
                .tables
                .get(sel.table as usize)
                .and_then(|t| t.find(&sel.matcher, sel.priority))
                .filter(|r| Self::selected(r, sel, how, all_tables))
                .into_iter()
                .cloned()
                .collect();
        }
        self.picked(|r| Self::selected(r, sel, how, all_tables))
    }

    /// The rules `pick` takes, in [`RuleSet::iter`]'s order: a scan in no
    /// order, then the few taken sorted (they are deleted, and reported,
    /// by table and priority).
    fn picked(&self, pick: impl Fn(&Rule) -> bool) -> Vec<Arc<Rule>> {
        let mut picked: Vec<Arc<Rule>> = self.rules().filter(|r| pick(r)).cloned().collect();
        picked.sort_unstable_by_key(|r| Self::set_order(r));
        picked
    }

    /// Removes the selected rules (OpenFlow DELETE / DELETE_STRICT) and
    /// returns them. `all_tables` ignores the selector's table.
    pub fn delete(&mut self, sel: &FlowSpec, how: Selection, all_tables: bool) -> Vec<Arc<Rule>> {
        self.delete_if(sel, how, all_tables, |_| true)
    }

    /// [`delete`](Self::delete) of the selected rules `pick` also takes
    /// (OpenFlow's `out_port` filter).
    pub fn delete_if(
        &mut self,
        sel: &FlowSpec,
        how: Selection,
        all_tables: bool,
        pick: impl Fn(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        let mut gone = self.select(sel, how, all_tables);
        gone.retain(|r| pick(r));
        // A table losing every rule (`del-flows` with no match) is emptied
        // at once, not rule by rule through its indexes.
        let mut per_table = vec![0usize; self.tables.len()];
        for r in &gone {
            per_table[usize::from(r.table)] += 1;
        }
        for (t, &n) in per_table.iter().enumerate() {
            if n > 0 && n == self.tables[t].len() {
                self.tables[t] = TableIndex::default();
            }
        }
        for r in &gone {
            let t = usize::from(r.table);
            if self.tables[t].is_empty() {
                // Emptied above: what retire does but the removal.
                self.timed -= Self::timed(r);
                self.counters.retired[t].fetch_add(r.counters().0, Ordering::Relaxed);
            } else {
                self.retire(r);
            }
        }
        if !gone.is_empty() {
            self.version += 1;
            let learned = self.delete_learned(&gone);
            gone.extend(learned);
        }
        gone
    }

    /// Replaces the actions of the selected rules (OpenFlow MODIFY /
    /// MODIFY_STRICT), keeping their counters. Returns how many changed.
    pub fn modify(&mut self, sel: &FlowSpec, how: Selection, all_tables: bool) -> usize {
        let chosen = self.select(sel, how, all_tables);
        for r in &chosen {
            let new = Rule {
                id: r.id,
                table: r.table,
                priority: r.priority,
                cookie: sel
                    .new_cookie
                    .filter(|&c| c != u64::MAX)
                    .unwrap_or(r.cookie),
                idle_timeout: r.idle_timeout,
                hard_timeout: r.hard_timeout,
                matcher: r.matcher,
                actions: sel.actions.clone(),
                created_us: r.created_us,
                flags: r.flags,
                of_instructions: sel.of_instructions.clone(),
                stats: RuleStats::default(),
            };
            if sel.flags & flag::RESET_COUNTS == 0 {
                let (p, b) = r.counters();
                new.credit(p, b, r.stats.last_used_us.load(Ordering::Relaxed));
            }
            self.put(Arc::new(new));
        }
        if !chosen.is_empty() {
            self.version += 1;
        }
        chosen.len()
    }

    /// The rule set `specs` describe, as `ovs-ofctl replace-flows` makes it:
    /// rules identical to one already here (table, priority, match,
    /// actions, cookie, timeouts) are kept with their counters; the others
    /// are new. Returns (kept, added, removed).
    pub fn replace_with(&mut self, specs: &[FlowSpec], now_us: u64) -> (usize, usize, usize) {
        type Identity = (
            u8,
            u16,
            [u64; sluice_packet::key::KEY_WORDS],
            [u64; sluice_packet::key::KEY_WORDS],
        );
        let ident = |t: u8, p: u16, m: &Match| (t, p, *m.value.words(), *m.mask.words());
        let old: std::collections::HashMap<Identity, Arc<Rule>> = self
            .rules()
            .map(|r| (ident(r.table, r.priority, &r.matcher), Arc::clone(r)))
            .collect();
        let n_old = old.len();
        let mut next = RuleSet {
            tables: Vec::new(),
            counters: Arc::clone(&self.counters),
            groups: self.groups.clone(),
            version: self.version + 1,
            ids: Arc::clone(&self.ids),
            learn_queue: Arc::clone(&self.learn_queue),
            learned_seq: self.learned_seq,
            modes: self.modes,
            timed: 0,
            meters: self.meters.clone(),
            recirc: Arc::clone(&self.recirc),
            conntrack: Arc::clone(&self.conntrack),
            bridge: Arc::clone(&self.bridge),
            tunnels: self.tunnels.clone(),
            fail_open: self.fail_open.clone(),
            patches: Arc::clone(&self.patches),
            name: Arc::clone(&self.name),
        };
        let (mut kept, mut added) = (0, 0);
        let mut kept_ids = std::collections::HashSet::new();
        for s in specs {
            let same = old
                .get(&ident(s.table, s.priority, &s.matcher))
                .filter(|r| {
                    r.actions == s.actions
                        && r.cookie == s.cookie
                        && r.idle_timeout == s.idle_timeout
                        && r.hard_timeout == s.hard_timeout
                });
            match same {
                Some(r) => {
                    kept_ids.insert(r.id);
                    next.put(Arc::clone(r));
                    kept += 1;
                }
                None => {
                    next.add(s, now_us);
                    added += 1;
                }
            }
        }
        let removed = n_old - kept;
        // What the rules that go matched stays in their tables' counts.
        for r in old.values() {
            if !kept_ids.contains(&r.id) {
                self.counters.retired[usize::from(r.table)]
                    .fetch_add(r.counters().0, Ordering::Relaxed);
            }
        }
        next.version += 1;
        *self = next;
        (kept, added, removed)
    }

    /// Removes rules whose idle or hard timeout has passed at `now_us`.
    pub fn expire(&mut self, now_us: u64) -> Vec<Arc<Rule>> {
        self.expire_with_reasons(now_us)
            .into_iter()
            .map(|(r, _)| r)
            .collect()
    }

    /// The highest-priority rule of table `t` matching `key` (the oldest
    /// among equals), through the table's index. ORs into `wc` the bits
    /// that decided the result ([`TableIndex::lookup`]).
    pub fn lookup(&self, t: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        self.tables.get(t as usize)?.lookup(key, wc)
    }

    /// Brings into the cache what lookups of `keys` in table `t` will
    /// read of its prefix tries ([`TableIndex::warm`]).
    pub fn warm<'k>(&self, t: u8, keys: impl Iterator<Item = &'k FlowKey> + Clone) {
        if let Some(ix) = self.tables.get(t as usize) {
            ix.warm(keys);
        }
    }

    /// Reference lookup: the highest-priority rule of table `t` matching
    /// `key`. ORs into `wc` the bits that decided the result: the whole
    /// mask of the rule that matched, and for each rule before it just
    /// enough bits to prove it missed ([`explain_miss`]).
    /// Conjunctive matches as [`TableIndex::lookup`] resolves them, with
    /// this scan for the ordinary rules.
    pub fn lookup_linear(&self, t: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let hard = self.lookup_linear_hard(t, key, wc);
        match self.tables.get(usize::from(t)) {
            Some(ix) => {
                ix.resolve_conjunctions(key, wc, hard, |k, w| self.lookup_linear_hard(t, k, w))
            }
            None => hard,
        }
    }

    fn lookup_linear_hard(&self, t: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule>> {
        let ix = self.tables.get(usize::from(t))?;
        for r in self
            .table(t)
            .filter(|r| !crate::tss::conj::is_soft(r) && !ix.is_hidden(r))
        {
            if r.matcher.matches(key) {
                wc.or_assign(&r.matcher.mask);
                return Some(r);
            }
            explain_miss(key, &r.matcher, wc);
        }
        None
    }

    /// Number of tables that hold rules (the highest used table + 1).
    pub fn n_tables(&self) -> usize {
        self.tables.len().min(N_TABLES)
    }
}

#[cfg(test)]
mod tests;
