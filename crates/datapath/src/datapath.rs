//! The datapath: ports, a packet pool, the rules, the poll loop.
//!
//! Time is passed in (`now_us`), so the whole switch runs inside a test
//! with a virtual clock; the PMD threads of the command line read the cycle
//! counter once per poll iteration and derive the time from it
//! (`cycles::TscClock`, [`Datapath::poll_once_clocked`]).

use std::sync::Arc;

use sluice_classifier::action::{OFPP_LOCAL, OFPP_MAX};
use sluice_classifier::{RuleSet, XlateEnv};
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::{Port, RxStatus};

use crate::autobatch::TxFlush;
use crate::cycles;
use crate::output::{OutputStage, PortSlot, RxQueue};
use crate::pipeline::Pipeline;
use crate::stats::{DpStats, DropReason};

/// The translation environment of datapath `$dp`: bridge 0's rules and
/// ports, and the others.
macro_rules! xenv {
    ($dp:ident) => {
        XlateEnv {
            rules: &$dp.rules,
            ports: &$dp.root_ports,
            bridges: &$dp.extra,
            bridge: 0,
        }
    };
}

mod bridges;
mod config;
mod controller;
mod idle;
mod learning;
mod observe;

pub use config::{
    DatapathConfig, DpError, PortConfig, PortReport, RxqLoad, DEFAULT_SLEEP_AFTER_US,
};

/// Size of a big frame: a 64 KiB GSO super-frame with its headers and headroom.
pub const BIG_FRAME_SIZE: usize = 1 << 17;

/// Most waiting misses a poll iteration runs before it polls the ports
/// (eight batches, and no more than about 100 µs of them: the rings are
/// read between two runs of upcalls, so a burst's frames wait in the
/// queue rather than overflow a ring).
pub const WAITING_PER_ITERATION: usize = 8 * sluice_packet::BATCH_SIZE;

/// Most rx bursts an iteration takes from one live queue in a row while
/// misses wait in the upcall queue and each burst comes full (the ring
/// holds more): a burst of new flows is read ahead of its translation.
pub const BACKLOG_BURSTS: usize = 8;

/// How often rule timeouts are checked.
pub const EXPIRE_INTERVAL_US: u64 = 100_000;
/// How often caches are maintained (subtable ranking, idle megaflows).
pub const CACHE_INTERVAL_US: u64 = 1_000_000;
/// Most megaflows revalidated eagerly per housekeeping run; the rest are
/// revalidated when next hit.
pub const REVALIDATE_BUDGET: usize = 16_384;

/// A single-threaded datapath (one PMD's worth).
pub struct Datapath {
    pool: PacketPool,
    out: OutputStage,
    port_numbers: Vec<u32>,
    /// The ports forwarding may use (those not `no_fwd`), ascending: what
    /// translation sees (a `no_fwd` port is missing to it).
    fwd_numbers: Vec<u32>,
    /// Bridge 0's ports' OpenFlow numbers (its patch ports too),
    /// ascending: `fwd_numbers` with one bridge.
    root_ports: Vec<u32>,
    /// The other bridges, by index (slot 0 unused; empty with one bridge).
    extra: Vec<Option<sluice_classifier::BridgeView>>,
    /// What the datapath keeps of each of them, by index.
    extra_state: Vec<bridges::BridgeState>,
    rules: Arc<RuleSet>,
    rules_have_timeouts: bool,
    /// Bumped on every change of rules or ports: megaflows from an older
    /// epoch are revalidated before use.
    epoch: u64,
    /// Epoch the last eager revalidation ran for.
    revalidated_epoch: u64,
    pipeline: Pipeline,
    stats: DpStats,
    last_expire_us: u64,
    /// The other bridges' last look for expired rules.
    extra_expire_us: u64,
    last_cache_us: u64,
    removed_ports: Vec<PortReport>,
    recirc_gc: crate::recirc_gc::RecircGc,
    /// Whether a finite input (a capture) has come to its end.
    input_ended: bool,
    /// Packets the rx bursts may still take (`--packets`): `usize::MAX`
    /// for no limit.
    rx_budget: usize,
    /// The tunnel state's version the caches were last revalidated for
    /// (a learned neighbour or a route change redoes translations).
    tunnels_seen: u64,
    /// The bridge's port modes' version last seen.
    bridge_seen: u64,
    /// The MAC table's version last seen: the changes after it are the
    /// entries whose megaflows to revalidate.
    macs_seen: u64,
    /// Rules this thread learned that the control plane has not yet
    /// given back in a version ([`RuleSet::keep_learned`]).
    learned_mine: Vec<sluice_classifier::table::learned::Learned>,
    /// PMD performance metrics, when on.
    perf: Option<Box<crate::perf::PmdPerf>>,
    /// The iteration log's threshold, µs.
    perf_log_us: u64,
    /// This iteration leaves the ports that can wait unread (the upcall
    /// budget is spent, or misses wait for it).
    sources_wait: bool,
    /// [`DatapathConfig::sleep_after_us`].
    sleep_after_us: u32,
}

impl Datapath {
    /// A datapath with no ports.
    pub fn new(cfg: DatapathConfig, rules: Arc<RuleSet>) -> Result<Self, DpError> {
        let mut pool = PacketPool::new(cfg.pool_frames, cfg.frame_size).map_err(DpError::Pool)?;
        if cfg.big_frames > 0 {
            pool.add_big_frames(cfg.big_frames, BIG_FRAME_SIZE)
                .map_err(DpError::Pool)?;
        }
        let mut dp = Datapath {
            pool,
            out: OutputStage {
                ports: Vec::new(),
                tx_flush: cfg.tx_flush,
                sending_us: 0.0,
                pad_short: cfg.pad_short_frames,
                now_us: 0,
            },
            port_numbers: Vec::new(),
            fwd_numbers: Vec::new(),
            root_ports: Vec::new(),
            extra: Vec::new(),
            extra_state: Vec::new(),
            rules: Arc::new(RuleSet::new()),
            rules_have_timeouts: false,
            epoch: 0,
            revalidated_epoch: 0,
            pipeline: Pipeline::new(
                cfg.packet_in_queue,
                cfg.cache,
                cfg.vlan_limit,
                cfg.upcall_queue_cap(),
            ),
            stats: DpStats::default(),
            last_expire_us: 0,
            extra_expire_us: 0,
            last_cache_us: 0,
            removed_ports: Vec::new(),
            recirc_gc: Default::default(),
            input_ended: false,
            rx_budget: usize::MAX,
            tunnels_seen: 0,
            bridge_seen: 0,
            macs_seen: 0,
            learned_mine: Vec::new(),
            perf: None,
            perf_log_us: crate::perf::LOG_THRESHOLD_US,
            sources_wait: false,
            sleep_after_us: cfg.sleep_after_us,
        };
        dp.pipeline.packet_ins.pad_short = cfg.pad_short_frames;
        dp.pipeline.packet_ins.max_len = cfg.packet_in_max_len;
        dp.set_perf_metrics(cfg.perf_metrics, 0);
        dp.set_rules(rules);
        Ok(dp)
    }

    /// Adds a port under OpenFlow number `ofport`.
    pub fn add_port(&mut self, ofport: u32, port: Box<dyn Port>) -> Result<(), DpError> {
        self.add_port_queue(ofport, 0, port)
    }

    /// Adds queue `qid` of a port under OpenFlow number `ofport`: this PMD
    /// sends on it and receives from it.
    pub fn add_port_queue(
        &mut self,
        ofport: u32,
        qid: u32,
        mut port: Box<dyn Port>,
    ) -> Result<(), DpError> {
        if ofport == 0 || (ofport > OFPP_MAX && ofport != OFPP_LOCAL) {
            return Err(DpError::BadPortNumber(ofport));
        }
        let pos = match self.out.ports.binary_search_by_key(&ofport, |p| p.ofport) {
            Ok(_) => return Err(DpError::DuplicatePort(ofport)),
            Err(pos) => pos,
        };
        port.attach_pool(&mut self.pool).map_err(DpError::Port)?;
        let caps = port.caps();
        let mtu = port.mtu().unwrap_or(u32::MAX);
        self.out.ports.insert(
            pos,
            PortSlot {
                ofport,
                port,
                qid,
                extra_rxqs: Vec::new(),
                caps,
                txq: PacketBatch::new(),
                rx_done: !caps.rx,
                flush_deadline_us: 0,
                tx_flush: None,
                kicks: crate::autobatch::KickModel::default(),
                send_at: usize::MAX,
                wall_deadline_us: 0,
                rx_cycles: 0,
                mtu,
                no_recv: false,
                no_fwd: false,
                no_packet_in: false,
                tap: None,
                waits: Default::default(),
                batch_began: (0, 0.0),
            },
        );
        self.port_numbers.insert(pos, ofport);
        self.refresh_fwd();
        // all/flood and outputs to missing ports depend on the port set.
        self.epoch += 1;
        Ok(())
    }

    /// Sends a frame the switch makes itself (an ARP request for a tunnel
    /// next hop) out of port `ofport`, after what is queued there.
    fn send_frame(&mut self, ofport: u32, frame: &[u8], now_us: u64) {
        let Some(idx) = self.out.index_of(ofport) else {
            return;
        };
        let Some(p) = self.pool.alloc_from(frame) else {
            self.stats.copy_failures += 1;
            return;
        };
        self.out
            .enqueue(idx, p, &mut self.pool, &mut self.stats, now_us);
        self.out.flush_port(idx, &mut self.pool, &mut self.stats);
    }

    fn refresh_fwd(&mut self) {
        self.fwd_numbers = self
            .out
            .ports
            .iter()
            .filter(|s| !s.no_fwd)
            .map(|s| s.ofport)
            .collect();
        self.refresh_views();
    }

    /// Sets a port's OpenFlow config: `no_recv` drops what it receives
    /// (counted, `port no_recv`), `no_fwd` takes it out of forwarding (an
    /// output to it is an output to a missing port; flooding passes it
    /// by), `no_packet_in` keeps what it receives from the controllers
    /// (counted, `port no_packet_in`). Cached decisions are revalidated
    /// (the epoch moves).
    pub fn set_port_config(&mut self, ofport: u32, config: PortConfig) -> Result<(), DpError> {
        let i = self
            .out
            .index_of(ofport)
            .ok_or(DpError::NoSuchPort(ofport))?;
        let slot = &mut self.out.ports[i];
        slot.no_recv = config.no_recv;
        slot.no_fwd = config.no_fwd;
        slot.no_packet_in = config.no_packet_in;
        self.refresh_fwd();
        self.epoch += 1;
        Ok(())
    }

    /// Adds rx queue `q` of port `ofport` (which this PMD already has): it
    /// is polled for receiving from the next iteration on, and keeps the
    /// cycles it brings (measured where it was before). On failure the
    /// queue comes back with the error.
    pub fn add_rxq(&mut self, ofport: u32, mut q: RxQueue) -> Result<(), (DpError, RxQueue)> {
        let Some(i) = self.out.index_of(ofport) else {
            return Err((DpError::NoSuchPort(ofport), q));
        };
        if let Err(e) = q.port.attach_pool(&mut self.pool) {
            return Err((DpError::Port(e), q));
        }
        self.out.ports[i].extra_rxqs.push(q);
        Ok(())
    }

    /// Takes rx queue `qid` of port `ofport` away (to hand it to another
    /// PMD), with its cycles. Everything this PMD has queued for output is
    /// sent first, so packets of a flow that arrive on the queue's next
    /// PMD cannot overtake those this one still holds. The queue a PMD
    /// sends on is not taken.
    pub fn take_rxq(&mut self, ofport: u32, qid: u32) -> Result<RxQueue, DpError> {
        let i = self
            .out
            .index_of(ofport)
            .ok_or(DpError::NoSuchPort(ofport))?;
        let q = self.out.ports[i]
            .extra_rxqs
            .iter()
            .position(|q| q.qid == qid)
            .ok_or(DpError::NoSuchRxq(ofport, qid))?;
        self.out.flush_all(&mut self.pool, &mut self.stats);
        for slot in &mut self.out.ports {
            if slot.port.tx_pending() > 0 {
                slot.port.flush(&mut self.pool).map_err(DpError::Port)?;
            }
        }
        Ok(self.out.ports[i].extra_rxqs.remove(q))
    }

    /// Installs a new rule set.
    /// It is in force when this returns: every packet processed afterwards
    /// is forwarded by the new rules (cached decisions from before are
    /// revalidated before they serve a packet).
    /// Rules this thread learned and the control plane had not taken when
    /// it made `rules` stay in force.
    pub fn set_rules(&mut self, rules: Arc<RuleSet>) {
        let rules = bridges::with_mine(rules, &mut self.learned_mine);
        self.install_rules(rules);
    }

    /// Puts `rules` in force as they are.
    fn install_rules(&mut self, rules: Arc<RuleSet>) {
        self.rules_have_timeouts = rules.has_timeouts();
        let patches_changed = rules.patch_ports() != self.rules.patch_ports();
        self.rules = rules;
        self.epoch += 1;
        if patches_changed {
            self.refresh_views();
        }
    }

    /// Sets `tx-flush-interval` for port `ofport`, or for every port
    /// without its own setting when `None`. Queued batches are sent first,
    /// so no packet waits under the old setting.
    pub fn set_tx_flush_interval(
        &mut self,
        ofport: Option<u32>,
        f: TxFlush,
    ) -> Result<(), DpError> {
        self.out.flush_all(&mut self.pool, &mut self.stats);
        match ofport {
            None => self.out.tx_flush = f,
            Some(n) => {
                let i = self.out.index_of(n).ok_or(DpError::NoSuchPort(n))?;
                self.out.ports[i].tx_flush = Some(f);
            }
        }
        Ok(())
    }

    /// The current epoch (bumped by every rule or port change).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The rules in force.
    pub fn rules(&self) -> &Arc<RuleSet> {
        &self.rules
    }

    /// One poll iteration at time `now_us`: one rx burst from every port,
    /// each processed and its outputs flushed. Returns packets received.
    pub fn poll_once(&mut self, now_us: u64) -> usize {
        self.poll_at(cycles::now(), now_us)
    }

    /// [`Datapath::poll_once`] with its time taken from `clock`: one
    /// counter read gives both the iteration's start cycle and its time.
    pub fn poll_once_clocked(&mut self, clock: &cycles::TscClock) -> usize {
        let start = cycles::now();
        self.poll_at(start, clock.us_at(start))
    }

    /// One poll iteration that started at cycle `start`. The counter is
    /// read once more after each rx burst that brought packets (that
    /// queue's cycles end there and the next queue's begin) and once at
    /// the end (as OVS's PMD counts busy and idle cycles per iteration).
    fn poll_at(&mut self, start: u64, now_us: u64) -> usize {
        if let Some(p) = &mut self.perf {
            p.begin(&self.stats);
        }
        self.out.now_us = now_us;
        // Rule changes (timeouts now, flow-mods later) take effect at the
        // top of an iteration, before any packet of it is classified.
        self.housekeeping(now_us);
        // Misses that waited for the upcall budget go before new ones.
        let resumed = if self.pipeline.waiting.is_empty() {
            0
        } else {
            self.drain_waiting(now_us, WAITING_PER_ITERATION, false)
        };
        self.sources_wait = self.pipeline.sources_wait(start);
        let mut received = 0;
        let mut mark = start;
        for pi in 0..self.out.ports.len() {
            received += self.poll_backlogged(pi, None, now_us, &mut mark);
            for q in 0..self.out.ports[pi].extra_rxqs.len() {
                received += self.poll_backlogged(pi, Some(q), now_us, &mut mark);
            }
        }
        if received + resumed == 0 {
            // Nothing more is coming now: nothing may wait.
            self.out.flush_all(&mut self.pool, &mut self.stats);
        } else {
            self.out.flush_due(&mut self.pool, &mut self.stats, now_us);
        }
        // Packets waiting inside ports (behind a full device ring, or sent
        // but not yet completed) are moved on every iteration (seed 003).
        for slot in &mut self.out.ports {
            if slot.port.tx_pending() > 0 {
                slot.port.tx_drain(&mut self.pool);
            }
        }
        self.stats.iterations += 1;
        let spent = cycles::now().wrapping_sub(start);
        if received + resumed > 0 {
            self.stats.processing_cycles += spent;
        } else {
            self.stats.idle_cycles += spent;
        }
        if let Some(p) = &mut self.perf {
            for c in self.pipeline.upcall_cycles.drain(..) {
                p.upcall(c);
            }
            p.end(now_us, spent, received as u64, &self.stats);
        }
        received
    }

    /// [`Datapath::poll_rxq`], again while misses wait in the upcall queue
    /// and a live device's burst comes full (at most [`BACKLOG_BURSTS`]).
    fn poll_backlogged(
        &mut self,
        pi: usize,
        q: Option<usize>,
        now_us: u64,
        mark: &mut u64,
    ) -> usize {
        let mut received = self.poll_rxq(pi, q, now_us, mark);
        let mut bursts = 1;
        while received == bursts * sluice_packet::BATCH_SIZE
            && bursts < BACKLOG_BURSTS
            && !self.pipeline.waiting.is_empty()
            && self.pipeline.waiting.len() < self.pipeline.waiting.capacity() / 2
            && !self.out.ports[pi].caps.rx_can_wait
        {
            received += self.poll_rxq(pi, q, now_us, mark);
            bursts += 1;
        }
        received
    }

    /// One rx burst from port `pi`'s own queue (`q` = None) or its extra
    /// rx queue `q`, processed, with the outputs that are due flushed.
    /// `mark` is the cycle the burst started at; a burst that brings
    /// packets is charged the cycles since and moves the mark on (an idle
    /// burst's few cycles go to the next busy queue, so idle polls cost
    /// no counter read).
    fn poll_rxq(&mut self, pi: usize, q: Option<usize>, now_us: u64, mark: &mut u64) -> usize {
        let slot = &mut self.out.ports[pi];
        let ofport = slot.ofport;
        let no_recv = slot.no_recv;
        let (port, rx_done) = match q {
            None => (&mut slot.port, &mut slot.rx_done),
            Some(q) => {
                let r = &mut slot.extra_rxqs[q];
                (&mut r.port, &mut r.rx_done)
            }
        };
        if *rx_done || self.rx_budget == 0 {
            return 0;
        }
        let can_wait = slot.caps.rx_can_wait;
        if can_wait && self.sources_wait {
            // Read later, when the budget allows: nothing is lost.
            return 0;
        }
        let mut batch = PacketBatch::with_room(self.rx_budget);
        let status = port.rx_burst(&mut self.pool, &mut batch, ofport);
        batch.unlimit();
        self.rx_budget = self.rx_budget.saturating_sub(batch.len());
        if !batch.is_empty() {
            DpStats::count_batch(&mut self.stats.rx_batch_sizes, batch.len());
        }
        match status {
            RxStatus::Received(_) if no_recv => {
                self.tap_rx(pi, ofport, &batch, now_us);
                let received = batch.len();
                self.stats.rx_packets += received as u64;
                self.stats.dropped[DropReason::PortNoRecv.index()] += received as u64;
                for p in batch.drain() {
                    self.stats.rx_bytes += p.len() as u64;
                    self.pool.free(p);
                }
                received
            }
            RxStatus::Received(_) => {
                self.tap_rx(pi, ofport, &batch, now_us);
                let received = batch.len();
                let backlog = received == sluice_packet::BATCH_SIZE;
                let env = xenv!(self);
                self.pipeline.process(
                    &mut batch,
                    env,
                    self.epoch,
                    &mut self.pool,
                    &mut self.out,
                    &mut self.stats,
                    now_us,
                    *mark,
                    can_wait,
                    backlog,
                );
                self.see_bridge();
                self.apply_learned(now_us);
                // Batches whose time has come go now (all of them when
                // tx-flush-interval is 0: the end of the rx burst).
                self.out.flush_due(&mut self.pool, &mut self.stats, now_us);
                let end = cycles::now();
                let spent = end.wrapping_sub(*mark);
                *mark = end;
                let slot = &mut self.out.ports[pi];
                match q {
                    None => slot.rx_cycles += spent,
                    Some(q) => slot.extra_rxqs[q].rx_cycles += spent,
                }
                received
            }
            RxStatus::Exhausted => {
                *rx_done = true;
                self.input_ended = true;
                0
            }
            RxStatus::Idle => 0,
        }
    }

    /// Runs misses that waited for the upcall budget (all of them with
    /// `force`), at most about `max`; returns how many ran.
    fn drain_waiting(&mut self, now_us: u64, max: usize, force: bool) -> usize {
        let env = xenv!(self);
        let n = self.pipeline.drain_waiting(
            env,
            self.epoch,
            &mut self.pool,
            &mut self.out,
            &mut self.stats,
            now_us,
            max,
            force,
        );
        if n > 0 {
            self.see_bridge();
            self.apply_learned(now_us);
            self.out.flush_due(&mut self.pool, &mut self.stats, now_us);
        }
        n
    }

    /// Misses waiting for the upcall budget now.
    pub fn upcalls_waiting(&self) -> usize {
        self.pipeline.waiting.len()
    }

    /// Hands a received batch to port `pi`'s capture, if it has one.
    #[inline]
    fn tap_rx(&mut self, pi: usize, ofport: u32, batch: &PacketBatch, now_us: u64) {
        if let Some(tap) = &mut self.out.ports[pi].tap {
            tap.take(true, ofport, batch.as_slice().iter(), now_us);
        }
    }

    fn housekeeping(&mut self, now_us: u64) {
        if let Some(t) = self.rules.tunnels() {
            // Two atomic loads an iteration; a Vec that allocates nothing
            // when no request waits.
            let (v, requests) = (t.version(), t.take_requests());
            if v != self.tunnels_seen {
                self.tunnels_seen = v;
                self.epoch += 1;
            }
            for r in requests {
                if r.through_table {
                    // Into the device's bridge as if the kernel sent it
                    // (OVS's compose_table_xlate): its rules flood it.
                    let table = [sluice_classifier::Action::Resubmit {
                        in_port: None,
                        table: Some(0),
                    }];
                    if self.packet_out(&r.frame, r.ofport, &table, now_us).is_err() {
                        self.stats.copy_failures += 1;
                    }
                } else {
                    self.send_frame(r.ofport, &r.frame, now_us);
                }
            }
        }
        self.see_bridge();
        self.expire_extra(now_us);
        if self.rules_have_timeouts
            && now_us.saturating_sub(self.last_expire_us) >= EXPIRE_INTERVAL_US
        {
            self.last_expire_us = now_us;
            // Idle timeouts read the rules' last use: bring it up to date.
            self.credit_rules();
            let mut next = (*self.rules).clone();
            if !next.expire(now_us).is_empty() {
                self.install_rules(Arc::new(next));
            }
        }
        // What hit megaflows' `learn` actions refresh.
        self.apply_learned(now_us);
        let changed = self.revalidated_epoch != self.epoch;
        if changed || now_us.saturating_sub(self.last_cache_us) >= CACHE_INTERVAL_US {
            self.last_cache_us = now_us;
            self.revalidated_epoch = self.epoch;
            self.credit_rules();
            let env = xenv!(self);
            self.pipeline.caches.housekeeping(
                env,
                self.epoch,
                now_us,
                REVALIDATE_BUDGET,
                &mut self.stats,
            );
            self.stats.recirc_freed += self
                .recirc_gc
                .pass(self.rules.recirc_shared(), &self.pipeline.caches.megaflows)
                as u64;
            // Fragments whose list expired long ago and no `ct` sent on.
            crate::fragments::purge(self.rules.conntrack(), false, &mut self.stats);
            // Captures that have all they wanted let their writer finish.
            for slot in &mut self.out.ports {
                if slot.tap.as_ref().is_some_and(|t| t.finished()) {
                    slot.tap = None;
                }
            }
        }
    }

    /// The installed megaflows, formatted like `ovs-appctl dpctl/dump-flows`.
    pub fn dump_megaflows(&self, now_us: u64) -> Vec<String> {
        self.pipeline
            .caches
            .megaflows
            .iter()
            .map(|(_, f)| crate::probe::megaflow_line(f, now_us))
            .collect()
    }

    /// The installed megaflows in Open vSwitch's ODP text, as `ovs-appctl
    /// dpctl/dump-flows` prints them (`verbose`: its `-m`); with a
    /// `filter`, only those whose key it matches (its `filter=`: on the
    /// bits the megaflow matches, the others being zero in its key).
    pub fn dump_megaflows_odp(
        &self,
        now_us: u64,
        verbose: bool,
        filter: Option<&sluice_classifier::flow_match::Match>,
    ) -> Vec<String> {
        self.pipeline
            .caches
            .megaflows
            .iter()
            .filter(|(_, f)| filter.is_none_or(|m| m.matches(&f.matcher.value)))
            .map(|(_, f)| crate::probe::megaflow_odp_line(f, now_us, verbose))
            .collect()
    }

    /// Removes every megaflow (`dpctl/del-flows`, `revalidator/purge`),
    /// their hits credited to their rules first; the EMC's and SMC's
    /// entries for them are stale from then on. The next packet of each
    /// flow is an upcall. Returns how many went.
    pub fn purge_megaflows(&mut self) -> usize {
        let m = &mut self.pipeline.caches.megaflows;
        let n = m.len();
        m.clear();
        n
    }

    /// (megaflows, masks, EMC entries in use, SMC entries in use).
    pub fn cache_occupancy(&self) -> (usize, usize, usize, usize) {
        let c = &self.pipeline.caches;
        (
            c.megaflows.len(),
            c.megaflows.n_masks(),
            c.emc.occupancy(),
            c.smc.occupancy(),
        )
    }

    /// Limits what the rx bursts take from now on to `n` packets in all
    /// (`None`: no limit), so that a run stops at exactly `--packets`.
    pub fn set_rx_budget(&mut self, n: Option<usize>) {
        self.rx_budget = n.unwrap_or(usize::MAX);
    }

    /// What is left of the [`set_rx_budget`](Self::set_rx_budget) limit.
    pub fn rx_budget(&self) -> usize {
        self.rx_budget
    }

    /// Whether some finite input (a capture read to its end) has ended:
    /// false for a datapath whose ports never could receive, or whose
    /// live ports were removed.
    pub fn input_ended(&self) -> bool {
        self.input_ended
    }

    /// Whether every port that receives has run out of input.
    pub fn rx_exhausted(&self) -> bool {
        self.out
            .ports
            .iter()
            .all(|p| p.rx_done && p.extra_rxqs.iter().all(|q| q.rx_done))
    }

    /// Polls until every finite input is drained (`now` gives the time),
    /// or until `stop` says so. Then sends everything queued.
    pub fn run(
        &mut self,
        mut now: impl FnMut() -> u64,
        stop: impl FnMut(&DpStats) -> bool,
    ) -> Result<(), DpError> {
        self.run_with(|dp| dp.poll_once(now()), stop)
    }

    /// [`Datapath::run`] with each iteration's time taken from `clock`
    /// ([`Datapath::poll_once_clocked`]), as the PMD threads poll.
    pub fn run_clocked(
        &mut self,
        clock: &cycles::TscClock,
        stop: impl FnMut(&DpStats) -> bool,
    ) -> Result<(), DpError> {
        self.run_with(|dp| dp.poll_once_clocked(clock), stop)
    }

    /// Calls `poll` until every finite input is drained or `stop` says
    /// so, then sends everything queued.
    fn run_with(
        &mut self,
        mut poll: impl FnMut(&mut Self) -> usize,
        mut stop: impl FnMut(&DpStats) -> bool,
    ) -> Result<(), DpError> {
        while !self.rx_exhausted() && !stop(&self.stats) {
            poll(self);
        }
        self.finish()
    }

    /// Credits the rules with every megaflow hit not yet credited. Rule
    /// counters lag the datapath by up to a housekeeping interval (1 s)
    /// otherwise; call this before reading them (`dump-flows`, reports).
    pub fn credit_rules(&mut self) {
        self.pipeline.caches.megaflows.credit_all_rules();
    }

    /// Sends every queued packet and flushes every port, and credits the
    /// rules with every hit.
    pub fn finish(&mut self) -> Result<(), DpError> {
        // Misses still waiting for the budget run now: nothing competes.
        let now_us = self.out.now_us;
        self.drain_waiting(now_us, usize::MAX, true);
        self.credit_rules();
        // Fragments still waiting for the rest of their datagram go now,
        // counted.
        crate::fragments::purge(self.rules.conntrack(), true, &mut self.stats);
        self.out.flush_all(&mut self.pool, &mut self.stats);
        for slot in &mut self.out.ports {
            slot.port.flush(&mut self.pool).map_err(DpError::Port)?;
            for q in &mut slot.extra_rxqs {
                q.port.flush(&mut self.pool).map_err(DpError::Port)?;
            }
        }
        Ok(())
    }

    /// Changes port `ofport`'s MTU in place (its queue on this PMD and the
    /// rx queues it polls besides).
    pub fn set_port_mtu(&mut self, ofport: u32, mtu: u32) -> Result<(), DpError> {
        let i = self
            .out
            .index_of(ofport)
            .ok_or(DpError::NoSuchPort(ofport))?;
        let slot = &mut self.out.ports[i];
        slot.port.set_mtu(mtu).map_err(DpError::Port)?;
        slot.mtu = slot.port.mtu().unwrap_or(u32::MAX);
        for q in &mut slot.extra_rxqs {
            q.port.set_mtu(mtu).map_err(DpError::Port)?;
        }
        Ok(())
    }

    /// Removes port `ofport` at run time: its queued output is sent first
    /// and the port flushed (nothing waits, nothing is lost silently), then
    /// it is closed. Cached decisions that output to it are revalidated
    /// (the epoch moves). Returns its final report.
    pub fn remove_port(&mut self, ofport: u32) -> Result<PortReport, DpError> {
        let i = self
            .out
            .index_of(ofport)
            .ok_or(DpError::NoSuchPort(ofport))?;
        self.out.flush_port(i, &mut self.pool, &mut self.stats);
        let mut slot = self.out.ports.remove(i);
        self.port_numbers.remove(i);
        self.refresh_fwd();
        self.epoch += 1;
        let mut flushed = slot.port.flush(&mut self.pool);
        for q in &mut slot.extra_rxqs {
            flushed = flushed.and(q.port.flush(&mut self.pool));
        }
        self.removed_ports
            .push(slot_report(&slot, self.out.tx_flush));
        flushed.map_err(DpError::Port)?;
        Ok(self.removed_ports.last().cloned().expect("just pushed"))
    }

    /// Reports of ports removed at run time (their counters at removal),
    /// so that a run's accounting still adds up.
    pub fn removed_ports(&self) -> &[PortReport] {
        &self.removed_ports
    }

    /// Counters.
    pub fn stats(&self) -> &DpStats {
        &self.stats
    }

    /// Zeroes the datapath counters and the rx queues' cycle counts
    /// (`pmd-stats-clear`). Ports and rules keep their counters.
    pub fn clear_stats(&mut self) {
        self.stats = DpStats::default();
        if let Some(p) = &mut self.perf {
            // The metrics start again with the counters (from the time
            // the caller gives with `set_perf_metrics`, or the old start).
            let since = p.since_us;
            **p = crate::perf::PmdPerf::new(since, &self.stats, self.perf_log_us);
        }
        for slot in &mut self.out.ports {
            slot.rx_cycles = 0;
            for q in &mut slot.extra_rxqs {
                q.rx_cycles = 0;
            }
        }
    }

    /// Every port's counters.
    pub fn port_reports(&self) -> Vec<PortReport> {
        let default = self.out.tx_flush;
        self.out
            .ports
            .iter()
            .map(|s| slot_report(s, default))
            .collect()
    }

    /// Frames free in the pool (all of them once the datapath is idle and
    /// flushed: a check that nothing leaked).
    pub fn pool_available(&self) -> (usize, usize) {
        (self.pool.available(), self.pool.capacity())
    }
}

/// A port's report: its queues' counters summed, each rx queue's cycles.
fn slot_report(s: &PortSlot, default_flush: TxFlush) -> PortReport {
    let mut stats = s.port.stats();
    let mut warnings = s.port.warnings();
    let mut rxqs = vec![RxqLoad {
        qid: s.qid,
        rx_cycles: s.rx_cycles,
        home: true,
    }];
    for q in &s.extra_rxqs {
        stats.add(&q.port.stats());
        warnings.extend(q.port.warnings());
        rxqs.push(RxqLoad {
            qid: q.qid,
            rx_cycles: q.rx_cycles,
            home: false,
        });
    }
    PortReport {
        ofport: s.ofport,
        name: s.port.name().to_string(),
        stats,
        warnings,
        receives: s.caps.rx,
        rxqs,
        tx_flush: s.tx_flush.unwrap_or(default_flush),
        kicks: s.kicks.report(),
        batch_waits: s.waits,
    }
}
