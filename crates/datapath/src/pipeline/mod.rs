//! One rx batch's way through the datapath.
//!
//! Stages, each over the whole batch (VPP/OVS style):
//! 1. **extract**: key, layer offsets and hash for every packet, once
//!    (a port-given hash is reused); runts are dropped;
//! 2. **EMC**, then **SMC**, then the **megaflow** classifier (batched,
//!    subtable by subtable) for the packets still unmatched, each level
//!    feeding the levels above it on a hit;
//! 3. **upcall** for the rest, in arrival order: one translation per
//!    distinct flow (a key already installed by an earlier miss of the
//!    same batch is found by a second megaflow lookup, seed 001);
//! 4. **execute**: packets grouped by the flow that matched them, groups
//!    in order of first arrival, packets in arrival order inside a group —
//!    so a flow's packets leave in the order they came whatever cache
//!    level each hit (OVS commit 9b4f08cd fixed this ordering bug);
//! 5. **credit**: each group's packets and bytes to its megaflow and
//!    rules, once per batch;
//! 6. **recirculate**: packets a `recirc` action sent back (after a pop
//!    that exposed headers the key did not hold) go through stages 1–5
//!    again as batches of their own, their recirculation id in the key,
//!    up to [`crate::MAX_RECIRC_DEPTH`] passes.
//!
//! Uses: `meta.in_port`, `meta.hash`. Sets: `meta` offsets, packet bytes.

mod direct;
mod upcall;
mod waiting;

use waiting::Wait;

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::DpAction;
use sluice_classifier::megaflow::FlowRef;
use sluice_classifier::{Translation, XlateDrop, XlateEnv};
use sluice_packet::batch::set_bits;
use sluice_packet::extract::{extract_with_shape, vlan_limit, KeyShape};
use sluice_packet::{FlowKey, Packet, PacketBatch, PacketPool, Slots, BATCH_SIZE};

use crate::cascade::{cref, fref, CacheConfig, Caches};
use crate::execute::{execute, Ctx, RecircQueue};
use crate::output::OutputStage;
use crate::packet_in::PacketInQueue;
use crate::stats::{DpStats, DropReason};
use crate::upcall_budget::UpcallBudget;
use crate::upcall_queue::{UpcallQueue, Waiting};

/// Entries of [`Pipeline`]'s group index (a power of two, twice a batch).
const GROUP_INDEX_SIZE: usize = 2 * BATCH_SIZE;

/// Which flow a packet of the batch follows, packed in one word so that
/// grouping a batch compares integers: a megaflow is `gen << 32 | idx`
/// (slot indexes stay below 2^31), a per-batch translation sets bit 31.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target(u64);

/// [`Target`] unpacked.
enum TargetKind {
    /// Not classified (yet), or dropped before classification.
    None,
    /// An installed megaflow.
    Mega(FlowRef),
    /// A translation that could not be installed (limits), kept for this batch.
    Temp(u8),
}

impl Target {
    const NONE: Target = Target(u64::MAX);
    const TEMP: u64 = 1 << 31;

    #[inline]
    fn mega(r: FlowRef) -> Self {
        debug_assert!(
            u64::from(r.idx) < Self::TEMP,
            "megaflow slot index below 2^31"
        );
        Target(u64::from(r.gen) << 32 | u64::from(r.idx))
    }

    #[inline]
    fn temp(t: u8) -> Self {
        Target(Self::TEMP | u64::from(t))
    }

    /// The target's entry in the group index.
    #[inline]
    fn index_slot(self) -> usize {
        self.0 as usize & (GROUP_INDEX_SIZE - 1)
    }

    #[inline]
    fn kind(self) -> TargetKind {
        if self == Self::NONE {
            TargetKind::None
        } else if self.0 & Self::TEMP != 0 {
            TargetKind::Temp(self.0 as u8)
        } else {
            TargetKind::Mega(FlowRef {
                idx: self.0 as u32,
                gen: (self.0 >> 32) as u32,
            })
        }
    }
}

/// A translation not installed as a megaflow, valid for one batch.
#[derive(Default)]
struct TempFlow {
    key: FlowKey,
    xlate: Translation,
}

struct Group {
    target: Target,
    pkts: ArrayVec<u8, BATCH_SIZE>,
    bytes: u64,
    /// Where the flow's packets go when that is simple enough for
    /// [`Pipeline::output_directly`].
    fate: Option<Fate>,
}

/// A flow whose packets need no per-flow execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Its only action is one output, to this port index.
    Port(usize),
    /// It has no output: dropped for this reason.
    Drop(DropReason),
    /// A select group whose every bucket is one output: each packet's
    /// port is chosen by its hash ([`direct`]).
    PerPacket,
}

/// Upcall timings a pipeline keeps between two takes by the datapath (at
/// the end of each iteration): more in one iteration go untimed.
pub(crate) const UPCALL_SAMPLES: usize = 1024;

/// Per-thread batch-processing state, allocated once.
pub(crate) struct Pipeline {
    /// VLAN tags to parse (the vlan-limit setting resolved).
    vlans: usize,
    keys: [FlowKey; BATCH_SIZE],
    hashes: [u32; BATCH_SIZE],
    /// Packets whose keys are short ([`FlowKey::is_short`]): hashed and
    /// looked up in the EMC on their first words.
    short: u32,
    /// Packets the exact-match and signature caches are left out for: a
    /// pass after a `ct` that found no connection for the packet
    /// ([`sluice_conntrack::CtResult::unseen`]). Its key (the pass, the
    /// state the tracker gave) cannot be in them, and a later packet of a
    /// connection committed now has another state: a lookup would be a
    /// miss (a cache line from memory, for each of the two caches) and an
    /// insert an entry nothing reads. Connection setups pay both.
    uncached: u32,
    targets: [Target; BATCH_SIZE],
    found: [Option<FlowRef>; BATCH_SIZE],
    /// SMC candidates (megaflow slot indexes) of the packets.
    smc_idx: [u32; BATCH_SIZE],
    slots: Slots,
    /// Index into `groups` of each packet.
    group_of: [u8; BATCH_SIZE],
    temps: Vec<TempFlow>,
    n_temps: usize,
    groups: Vec<Group>,
    /// Where the group of a target is, by the low bits of the target (a
    /// megaflow's slot index: slots are handed out densely, so flows of
    /// one batch rarely share them). A batch of many flows finds a
    /// packet's group, or learns that it has none yet, with one probe
    /// instead of a search through the groups. Empty between batches.
    group_index: [(Target, u8); GROUP_INDEX_SIZE],
    pub caches: Caches,
    pub packet_ins: PacketInQueue,
    upcall_budget: UpcallBudget,
    /// Misses waiting for the budget ([`crate::upcall_queue`]).
    pub(crate) waiting: UpcallQueue,
    /// Whether each upcall's cycles are kept in `upcall_cycles`
    /// (`pmd-perf-metrics`).
    pub time_upcalls: bool,
    /// Cycles of the upcalls since the datapath last took them (at most
    /// its capacity: no allocation here).
    pub upcall_cycles: Vec<u64>,
    /// Packets of the current batch that wait for the upcall budget:
    /// they leave the batch for `waiting`.
    defer: u32,
    /// Of them, the misses (the rest wait behind their flow).
    defer_miss: u32,
    /// This pass's packets whose upcall made the megaflow they follow,
    /// and their lengths: counted apart in it (OVS's datapath flow does
    /// not count the packet its upcall ran).
    upcalled: u32,
    upcalled_len: [u16; BATCH_SIZE],
    /// In a drain pass, where each packet was in the queue.
    drain_slots: [usize; BATCH_SIZE],
    /// The batch comes from a source that can wait
    /// ([`sluice_port::PortCaps::rx_can_wait`]): its misses are
    /// translated now (the source is read later instead), and its hits
    /// are not competition the budget protects.
    exempt: bool,
    /// The batch is a drain of `waiting`: its packets were counted when
    /// received.
    draining: bool,
    /// The batch filled its burst from a live device ([`Pipeline::process`]).
    backlog: bool,
    /// Packets waiting to pass through again (`recirc` actions).
    recirc: RecircQueue,
    /// Whether the batch being processed is a recirculation pass, and the
    /// recirculation ids of its packets.
    in_recirc: bool,
    recirc_ids: [u32; BATCH_SIZE],
    /// Where the recirculated packets' tunnel metadata is in
    /// `recirc.cur_tun` (`NO_TUN` for those from no tunnel).
    recirc_tun: [u16; BATCH_SIZE],
    /// Their connection tracking state.
    recirc_ct: [sluice_conntrack::CtResult; BATCH_SIZE],
    /// Packets of the batch whose fate is counted already (recirculated
    /// copies of a packet that has another).
    counted: u32,
}

impl Pipeline {
    pub fn new(
        packet_in_cap: usize,
        cache: CacheConfig,
        vlan_setting: usize,
        waiting_cap: usize,
    ) -> Self {
        Pipeline {
            vlans: vlan_limit(vlan_setting),
            keys: [FlowKey::default(); BATCH_SIZE],
            hashes: [0; BATCH_SIZE],
            short: 0,
            uncached: 0,
            targets: [Target::NONE; BATCH_SIZE],
            found: [None; BATCH_SIZE],
            smc_idx: [0; BATCH_SIZE],
            slots: Slots::new(),
            group_of: [0; BATCH_SIZE],
            temps: (0..BATCH_SIZE).map(|_| TempFlow::default()).collect(),
            n_temps: 0,
            groups: Vec::with_capacity(BATCH_SIZE),
            group_index: [(Target::NONE, 0); GROUP_INDEX_SIZE],
            caches: Caches::new(cache),
            upcall_budget: UpcallBudget::new(cache.upcall_share_pct),
            time_upcalls: false,
            upcall_cycles: Vec::with_capacity(UPCALL_SAMPLES),
            waiting: UpcallQueue::new(waiting_cap),
            defer: 0,
            defer_miss: 0,
            upcalled: 0,
            upcalled_len: [0; BATCH_SIZE],
            drain_slots: [0; BATCH_SIZE],
            exempt: false,
            draining: false,
            backlog: false,
            recirc: RecircQueue::new(),
            in_recirc: false,
            recirc_ids: [0; BATCH_SIZE],
            recirc_tun: [crate::recirc_queue::NO_TUN; BATCH_SIZE],
            recirc_ct: [Default::default(); BATCH_SIZE],
            counted: 0,
            packet_ins: PacketInQueue {
                cap: packet_in_cap,
                budget: (cache.packet_in_share_pct < 100)
                    .then(|| UpcallBudget::new(cache.packet_in_share_pct)),
                ..Default::default()
            },
        }
    }

    /// Processes one rx batch to the output queues; `now_cycles` is a
    /// recent cycle-counter reading (the burst's start). `can_wait`: the
    /// batch's source can wait ([`sluice_port::PortCaps::rx_can_wait`]),
    /// so none of its misses waits in the queue. `backlog`: the batch
    /// filled a burst from a live device, so more frames wait in its ring:
    /// its misses wait in the queue (while it has room) so that the ring
    /// is read before they are translated and overflows less.
    #[allow(clippy::too_many_arguments)]
    pub fn process(
        &mut self,
        batch: &mut PacketBatch,
        env: XlateEnv<'_>,
        epoch: u64,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
        now_cycles: u64,
        can_wait: bool,
        backlog: bool,
    ) {
        self.exempt = can_wait;
        self.backlog = backlog && !can_wait;
        self.pass(batch, env, epoch, pool, out, stats, now_us, now_cycles);
        if !self.recirc.next.is_empty() {
            self.recirculate(env, epoch, pool, out, stats, now_us, now_cycles);
        }
        self.exempt = false;
        self.backlog = false;
    }

    /// Runs the packets `recirc` actions sent back, pass after pass, each
    /// pass in batches, until none is left or [`crate::MAX_RECIRC_DEPTH`]
    /// passes are done (the rest are dropped, counted).
    #[allow(clippy::too_many_arguments)]
    fn recirculate(
        &mut self,
        env: XlateEnv<'_>,
        epoch: u64,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
        now_cycles: u64,
    ) {
        let mut depth = 0;
        while !self.recirc.next.is_empty() {
            depth += 1;
            std::mem::swap(&mut self.recirc.cur, &mut self.recirc.next);
            std::mem::swap(&mut self.recirc.cur_tun, &mut self.recirc.next_tun);
            if depth > crate::MAX_RECIRC_DEPTH {
                let cur = &mut self.recirc.cur;
                for (p, fate) in cur.pkts.drain(..).zip(cur.fates.iter()) {
                    if *fate {
                        stats.dropped[DropReason::RecircLimit.index()] += 1;
                    }
                    pool.free(p);
                }
                let n = cur.ids.len();
                cur.drop_front_info(n);
                self.recirc.cur_tun.clear();
                continue;
            }
            while !self.recirc.cur.is_empty() {
                let mut batch = PacketBatch::new();
                let n = self.recirc.cur.len().min(BATCH_SIZE);
                self.counted = 0;
                let cur = &mut self.recirc.cur;
                self.recirc_ids[..n].copy_from_slice(&cur.ids[..n]);
                self.recirc_tun[..n].copy_from_slice(&cur.tuns[..n]);
                self.recirc_ct[..n].copy_from_slice(&cur.cts[..n]);
                for (k, &fate) in cur.fates[..n].iter().enumerate() {
                    if !fate {
                        self.counted |= 1 << k;
                    }
                }
                batch.append_from_vec(&mut cur.pkts, n);
                cur.drop_front_info(n);
                stats.recirculations += n as u64;
                self.in_recirc = true;
                self.pass(&mut batch, env, epoch, pool, out, stats, now_us, now_cycles);
                self.in_recirc = false;
                self.counted = 0;
            }
            self.recirc.cur_tun.clear();
        }
    }

    /// One pass of a batch through the stages.
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &mut self,
        batch: &mut PacketBatch,
        env: XlateEnv<'_>,
        epoch: u64,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
        now_cycles: u64,
    ) {
        let classified = self.extract(batch, stats);
        let mut todo = self.emc_stage(classified, env, epoch, stats);
        todo = self.smc_stage(todo, env, epoch, stats);
        todo = self.megaflow_stage(todo, env, epoch, stats);
        let limited = self.upcall_budget.limited();
        // Cached traffic in this batch from a source that cannot wait:
        // upcalls now compete with it.
        let live = !self.exempt && !self.draining;
        if classified & !todo != 0 && limited && live {
            self.upcall_budget.note_hits(now_cycles);
        }
        self.defer = 0;
        self.defer_miss = 0;
        self.upcalled = 0;
        // A miss of a new batch waits while earlier ones wait (they go
        // first), or behind a backlog in its device's ring; a
        // recirculation finishes what its first pass began.
        let may_wait = !self.exempt && !self.in_recirc;
        let fresh = may_wait && !self.draining;
        // A backlog may fill half the queue; the other half is for
        // misses the budget refuses.
        let backlog = self.backlog && self.waiting.len() < self.waiting.capacity() / 2;
        let wait = Wait {
            may: may_wait,
            first: fresh && (backlog || !self.waiting.is_empty()),
            room: if may_wait {
                self.waiting.capacity().saturating_sub(self.waiting.len())
            } else {
                0
            },
        };
        let behind = fresh && !self.waiting.is_empty();
        if todo != 0 {
            self.upcall_stage(todo, wait, env, epoch, now_us, stats);
        }
        if self.defer != 0 || behind {
            self.keep_flow_order(classified, behind);
        }
        let forwarded = stats.forwarded;
        self.execute_groups(
            batch,
            classified & !self.defer,
            env.rules,
            pool,
            out,
            stats,
            now_us,
        );
        // Forwarding in this batch: packet-ins now compete with it.
        if stats.forwarded != forwarded {
            if let Some(b) = &mut self.packet_ins.budget {
                b.note_hits(now_cycles);
            }
        }
    }

    /// Runs a packet a controller sent (PACKET_OUT) through `actions`, as
    /// if it came in on its `meta.in_port`, to the same output batches.
    #[allow(clippy::too_many_arguments)]
    pub fn packet_out(
        &mut self,
        mut pkt: Packet,
        actions: &[sluice_classifier::Action],
        env: XlateEnv<'_>,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        stats.rx_packets += 1;
        stats.rx_bytes += pkt.len() as u64;
        stats.packet_outs += 1;
        let (data, meta) = pkt.data_and_meta_mut();
        let mut key = FlowKey::default();
        if extract_with_shape(data, meta.in_port, self.vlans, meta, &mut key).is_err() {
            stats.dropped[DropReason::Runt.index()] += 1;
            pool.free(pkt);
            return;
        }
        sluice_classifier::translate_actions(env, &key, actions, &mut self.caches.xlate);
        // A packet-out runs with side effects, as in OVS: NORMAL learns.
        crate::cascade::learn_macs(&self.caches.xlate.learn, env);
        if let Some(learned) = crate::cascade::learned_of(&self.caches.xlate) {
            // And `learn` actions (the datapath applies them next).
            self.caches.pending_learn.push(learned);
        }
        // And `fin_timeout`s.
        let _ = crate::cascade::fin_of(&self.caches.xlate);
        // Rules it went through (output:TABLE) count it, as in OVS.
        let len = pkt.len() as u64;
        for r in &self.caches.xlate.rules {
            r.credit(1, len, now_us);
        }
        let _ = self.slots.put(0, pkt);
        let hash = [key.hash()];
        let mut cx = Ctx {
            slots: &mut self.slots,
            pool,
            out,
            stats,
            packet_ins: &mut self.packet_ins,
            recirc: &mut self.recirc,
            now_us,
            counted: 0,
            rules: env.rules,
            keys: std::slice::from_ref(&key),
            hashes: &hash,
        };
        execute(
            &self.caches.xlate.actions,
            self.caches.xlate.drop,
            &[0],
            &mut cx,
        );
        if let Some(p) = self.slots.take(0) {
            pool.free(p);
        }
        if !self.recirc.released.is_empty() {
            self.run_released(env.rules, pool, out, stats, now_us);
        }
        if !self.recirc.next.is_empty() {
            self.recirculate(env, 0, pool, out, stats, now_us, crate::cycles::now());
        }
    }

    /// Keys, offsets and hashes for the whole batch, in place. Returns the
    /// packets to classify; runts are left out (and dropped at execution).
    fn extract(&mut self, batch: &mut PacketBatch, stats: &mut DpStats) -> u32 {
        let mut todo = 0u32;
        let mut short = 0u32;
        // Keys out of an IPv4 tunnel without options, their inner headers
        // short and no connection state: hashed by those words alone.
        let mut tun_short = 0u32;
        let mut uncached = 0u32;
        let mut bytes = 0u64;
        for (i, pkt) in batch.as_mut_slice().iter_mut().enumerate() {
            bytes += pkt.len() as u64;
            let (data, meta) = pkt.data_and_meta_mut();
            let key = &mut self.keys[i];
            let shape = extract_with_shape(data, meta.in_port, self.vlans, meta, key);
            let shape = match shape {
                // The pass is part of the key (and makes it not short).
                Ok(inner) if self.in_recirc => {
                    key.recirc_id = self.recirc_ids[i];
                    // (Extraction left the tunnel words zero.)
                    if let Some(t) = self.recirc.cur_tun.get(usize::from(self.recirc_tun[i])) {
                        t.write_key(key);
                        // (An outer IPv4 destination: family 4, as
                        // `write_key` sets it, never an IPv6 tunnel.)
                        if inner == KeyShape::Short
                            && t.opts.present == 0
                            && t.dst != 0
                            && self.recirc_ct[i] == sluice_conntrack::CtResult::NONE
                        {
                            tun_short |= 1 << i;
                        }
                    }
                    self.recirc_ct[i].write_key(key);
                    if self.recirc_ct[i].unseen {
                        uncached |= 1 << i;
                    }
                    Ok(KeyShape::Unknown)
                }
                s => s,
            };
            match shape {
                Ok(KeyShape::Short) => {
                    todo |= 1 << i;
                    short |= 1 << i;
                }
                // A recirculated key is never short: it has a pass id or,
                // from a tunnel, tunnel metadata (and reading it back just
                // after its narrow stores would wait for them).
                Ok(KeyShape::Unknown) if self.in_recirc => todo |= 1 << i,
                Ok(KeyShape::Unknown) => {
                    todo |= 1 << i;
                    if key.is_short() {
                        short |= 1 << i;
                    }
                }
                Err(_) => {}
            }
        }
        self.short = short;
        self.uncached = uncached;
        // Hashing in a second pass reads keys whose stores have settled (a
        // key read right after its field-by-field stores stalls) and lets
        // the multiplies of many keys overlap.
        let emc = self.caches.emc.enabled();
        for (i, pkt) in batch.as_slice().iter().enumerate() {
            let meta = &pkt.meta;
            let is_short = short & (1 << i) != 0;
            let hash = if meta.has_hash != 0 {
                meta.hash
            } else if is_short {
                self.keys[i].hash_short()
            } else if tun_short & (1 << i) != 0 {
                self.keys[i].hash_tunnel()
            } else {
                self.keys[i].hash()
            };
            self.hashes[i] = hash;
            if emc && uncached & (1 << i) == 0 {
                if is_short {
                    self.caches.emc.prefetch_short(hash);
                } else {
                    self.caches.emc.prefetch(hash);
                }
            }
        }
        if !self.in_recirc && !self.draining {
            stats.rx_packets += batch.len() as u64;
            stats.rx_bytes += bytes;
        }
        todo
    }

    fn emc_stage(
        &mut self,
        mut todo: u32,
        env: XlateEnv<'_>,
        epoch: u64,
        stats: &mut DpStats,
    ) -> u32 {
        if !self.caches.emc.enabled() {
            for i in set_bits(todo & !self.uncached) {
                self.caches.smc.prefetch(self.hashes[i]);
            }
            return todo;
        }
        for i in set_bits(todo & !self.uncached) {
            let (key, hash) = (&self.keys[i], self.hashes[i]);
            let hit = if self.short & (1 << i) != 0 {
                self.caches.emc.lookup_short(key, hash)
            } else {
                self.caches.emc.lookup(key, hash)
            };
            if let Some(c) = hit {
                let r = fref(c);
                if self.caches.fresh(r, env, epoch, stats) {
                    self.targets[i] = Target::mega(r);
                    stats.emc_hits += 1;
                    todo &= !(1 << i);
                    continue;
                }
            }
            // A miss: its SMC bucket is read after this loop.
            self.caches.smc.prefetch(self.hashes[i]);
        }
        todo
    }

    fn smc_stage(
        &mut self,
        mut todo: u32,
        env: XlateEnv<'_>,
        epoch: u64,
        stats: &mut DpStats,
    ) -> u32 {
        if !self.caches.smc.enabled() {
            return todo;
        }
        // Candidates first, fetching their megaflows, then verification.
        let mut candidates = 0u32;
        for i in set_bits(todo & !self.uncached) {
            if let Some(idx) = self.caches.smc.lookup(self.hashes[i]) {
                self.caches.megaflows.prefetch_slot(idx);
                self.smc_idx[i] = idx;
                candidates |= 1 << i;
            }
        }
        for i in set_bits(candidates) {
            // A signature hit is a candidate: verify the key under the mask.
            let Some((r, f)) = self.caches.megaflows.get_slot(self.smc_idx[i]) else {
                continue;
            };
            if !self.keys[i].matches_dp(&f.matcher.value, &f.matcher.mask) {
                continue;
            }
            if self.caches.fresh(r, env, epoch, stats) {
                self.targets[i] = Target::mega(r);
                stats.smc_hits += 1;
                todo &= !(1 << i);
                self.caches
                    .emc
                    .probabilistic_insert(&self.keys[i], self.hashes[i], cref(r));
            }
        }
        todo
    }

    fn megaflow_stage(
        &mut self,
        todo: u32,
        env: XlateEnv<'_>,
        epoch: u64,
        stats: &mut DpStats,
    ) -> u32 {
        if todo == 0 || self.caches.megaflows.is_empty() {
            return todo;
        }
        let mut probes = 0;
        let hits =
            self.caches
                .megaflows
                .lookup_batch(&self.keys, todo, &mut self.found, &mut probes);
        stats.subtable_lookups += probes;
        let mut left = todo;
        for i in set_bits(hits) {
            let r = self.found[i].expect("hit bits have refs");
            if self.caches.fresh(r, env, epoch, stats) {
                self.targets[i] = Target::mega(r);
                stats.megaflow_hits += 1;
                left &= !(1 << i);
                if self.uncached & (1 << i) == 0 {
                    self.caches.smc.insert(self.hashes[i], r.idx);
                    self.caches
                        .emc
                        .probabilistic_insert(&self.keys[i], self.hashes[i], cref(r));
                }
            }
        }
        left
    }

    /// Moves the packets to their flows' actions and credits the flows;
    /// frees the runts (the packets not in `classified`).
    #[allow(clippy::too_many_arguments)]
    fn execute_groups(
        &mut self,
        batch: &mut PacketBatch,
        classified: u32,
        rules: &sluice_classifier::RuleSet,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        self.group_packets(batch, classified);
        // A recirculation pass has packets whose fate is counted already:
        // `execute` knows them; packets that wait leave the batch here.
        if self.in_recirc
            || self.defer != 0
            || !self.output_directly(batch, classified, rules, pool, out, stats, now_us)
        {
            for (i, p) in batch.drain().enumerate() {
                if self.defer & (1 << i) != 0 {
                    let w = Waiting {
                        pkt: p,
                        hash: self.hashes[i],
                        missed: self.defer_miss & (1 << i) != 0,
                    };
                    if self.draining {
                        // Back where it was in the queue.
                        self.waiting.put_back(self.drain_slots[i], w);
                        stats.upcalls_deferred += 1;
                        continue;
                    }
                    match self.waiting.push(w) {
                        Ok(()) => stats.upcalls_deferred += 1,
                        Err(p) => {
                            // The queue is full: a miss storm.
                            stats.dropped[DropReason::UpcallBudget.index()] += 1;
                            pool.free(p);
                        }
                    }
                } else if classified & (1 << i) == 0 {
                    if self.counted & (1 << i) == 0 {
                        stats.dropped[DropReason::Runt.index()] += 1;
                    }
                    pool.free(p);
                } else {
                    let _ = self.slots.put(i, p);
                }
            }
            let mut cx = Ctx {
                slots: &mut self.slots,
                pool,
                out,
                stats,
                packet_ins: &mut self.packet_ins,
                recirc: &mut self.recirc,
                now_us,
                counted: self.counted,
                rules,
                keys: &self.keys,
                hashes: &self.hashes,
            };
            for g in &self.groups {
                let (actions, drop) = actions_of(&self.caches, &self.temps, g.target);
                execute(actions, drop, &g.pkts, &mut cx);
            }
        }
        for g in &self.groups {
            let n = g.pkts.len() as u64;
            match g.target.kind() {
                TargetKind::Mega(r) => {
                    // The rules are credited from the megaflow's counters
                    // in bulk (Megaflow::credit_rules), not here.
                    let f = self.caches.megaflows.get_mut(r).expect("still live");
                    f.packets += n;
                    f.bytes += g.bytes;
                    f.used_us = now_us;
                    if self.upcalled != 0 {
                        for &i in &g.pkts {
                            if self.upcalled & (1 << i) != 0 {
                                f.upcall_packets += 1;
                                f.upcall_bytes += u64::from(self.upcalled_len[i as usize]);
                            }
                        }
                    }
                }
                TargetKind::Temp(t) => {
                    for rule in &self.temps[t as usize].xlate.rules {
                        rule.credit(n, g.bytes, now_us);
                    }
                }
                TargetKind::None => unreachable!("every extracted packet is classified"),
            }
        }
        if !self.recirc.released.is_empty() {
            self.run_released(rules, pool, out, stats, now_us);
        }
    }

    /// Runs the fragments `ct` actions let go ([`crate::fragments`]).
    fn run_released(
        &mut self,
        rules: &sluice_classifier::RuleSet,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        crate::fragments::run_released(&mut crate::fragments::Scratch {
            slots: &mut self.slots,
            keys: &mut self.keys,
            hashes: &mut self.hashes,
            pool,
            out,
            stats,
            packet_ins: &mut self.packet_ins,
            recirc: &mut self.recirc,
            rules,
            now_us,
        });
    }

    /// Groups the classified packets by the flow they follow: groups in
    /// order of first arrival, packets in arrival order inside a group.
    fn group_packets(&mut self, batch: &PacketBatch, classified: u32) {
        self.groups.clear();
        // Consecutive packets often follow the same flow: try the group
        // of the one before first, then the index.
        let mut last = usize::MAX;
        let pkts = batch.as_slice();
        for i in set_bits(classified) {
            let t = self.targets[i];
            debug_assert!(t != Target::NONE, "every classified packet has a flow");
            let g = match self.groups.get(last) {
                Some(g) if g.target == t => last,
                _ => {
                    let slot = t.index_slot();
                    let (it, ig) = self.group_index[slot];
                    let found = if it == t {
                        Some(ig as usize)
                    } else if it == Target::NONE {
                        // Every group is indexed or shares a taken entry:
                        // a free entry means no group yet.
                        None
                    } else {
                        // The entry is another flow's: search.
                        self.groups.iter().position(|g| g.target == t)
                    };
                    match found {
                        Some(g) => g,
                        None => {
                            self.groups.push(Group {
                                target: t,
                                pkts: ArrayVec::new(),
                                bytes: 0,
                                fate: None,
                            });
                            let g = self.groups.len() - 1;
                            if it == Target::NONE {
                                self.group_index[slot] = (t, g as u8);
                            }
                            g
                        }
                    }
                }
            };
            last = g;
            self.group_of[i] = g as u8;
            let g = &mut self.groups[g];
            g.pkts.push(i as u8);
            g.bytes += pkts[i].len() as u64;
            if self.upcalled & (1 << i) != 0 {
                self.upcalled_len[i] = pkts[i].len().min(usize::from(u16::MAX)) as u16;
            }
        }
        // Empty the index for the next batch.
        for g in &self.groups {
            self.group_index[g.target.index_slot()] = (Target::NONE, 0);
        }
    }
}

/// The actions (and the reason for no output) of the flow `target` names.
fn actions_of<'a>(
    caches: &'a Caches,
    temps: &'a [TempFlow],
    target: Target,
) -> (&'a [DpAction], Option<XlateDrop>) {
    match target.kind() {
        TargetKind::Mega(r) => {
            let f = caches.megaflows.get(r).expect("targets are live");
            (&f.actions, f.drop)
        }
        TargetKind::Temp(t) => {
            let x = &temps[t as usize].xlate;
            (&x.actions, x.drop)
        }
        TargetKind::None => unreachable!("every extracted packet is classified"),
    }
}

#[cfg(test)]
mod tests;
