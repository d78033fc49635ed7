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
//!    rules, once per batch.
//!
//! Uses: `meta.in_port`, `meta.hash`. Sets: `meta` offsets, packet bytes.

use arrayvec::ArrayVec;
use sluice_classifier::megaflow::FlowRef;
use sluice_classifier::{Translation, XlateEnv};
use sluice_packet::batch::set_bits;
use sluice_packet::extract::extract;
use sluice_packet::{FlowKey, Packet, PacketBatch, PacketPool, BATCH_SIZE};

use crate::cascade::{cref, fref, CacheConfig, Caches};
use crate::execute::{execute, PacketInQueue};
use crate::output::OutputStage;
use crate::stats::{DpStats, DropReason};

/// Which flow a packet of the batch follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Not classified (yet), or dropped before classification.
    None,
    /// An installed megaflow.
    Mega(FlowRef),
    /// A translation that could not be installed (limits), kept for this batch.
    Temp(u8),
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
}

/// Per-thread batch-processing state, allocated once.
pub(crate) struct Pipeline {
    keys: [FlowKey; BATCH_SIZE],
    hashes: [u32; BATCH_SIZE],
    targets: [Target; BATCH_SIZE],
    found: [Option<FlowRef>; BATCH_SIZE],
    slots: [Option<Packet>; BATCH_SIZE],
    temps: Vec<TempFlow>,
    n_temps: usize,
    groups: Vec<Group>,
    pub caches: Caches,
    pub packet_ins: PacketInQueue,
}

impl Pipeline {
    pub fn new(packet_in_cap: usize, cache: CacheConfig) -> Self {
        Pipeline {
            keys: [FlowKey::default(); BATCH_SIZE],
            hashes: [0; BATCH_SIZE],
            targets: [Target::None; BATCH_SIZE],
            found: [None; BATCH_SIZE],
            slots: std::array::from_fn(|_| None),
            temps: (0..BATCH_SIZE).map(|_| TempFlow::default()).collect(),
            n_temps: 0,
            groups: Vec::with_capacity(BATCH_SIZE),
            caches: Caches::new(cache),
            packet_ins: PacketInQueue {
                cap: packet_in_cap,
                ..Default::default()
            },
        }
    }

    /// Processes one rx batch to the output queues.
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
    ) {
        let classified = self.extract(batch, stats);
        let mut todo = self.emc_stage(classified, env, epoch, stats);
        todo = self.smc_stage(todo, env, epoch, stats);
        todo = self.megaflow_stage(todo, env, epoch, stats);
        self.upcall_stage(todo, env, epoch, now_us, stats);
        self.execute_groups(batch, classified, pool, out, stats, now_us);
    }

    /// Keys, offsets and hashes for the whole batch, in place. Returns the
    /// packets to classify; runts are left out (and dropped at execution).
    fn extract(&mut self, batch: &mut PacketBatch, stats: &mut DpStats) -> u32 {
        let mut todo = 0u32;
        let mut bytes = 0u64;
        for (i, pkt) in batch.as_mut_slice().iter_mut().enumerate() {
            bytes += pkt.len() as u64;
            let (data, meta) = pkt.data_and_meta_mut();
            let key = &mut self.keys[i];
            if extract(data, meta.in_port, meta, key).is_ok() {
                self.hashes[i] = if meta.has_hash { meta.hash } else { key.hash() };
                todo |= 1 << i;
            }
        }
        stats.rx_packets += batch.len() as u64;
        stats.rx_bytes += bytes;
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
            return todo;
        }
        for i in set_bits(todo) {
            if let Some(c) = self.caches.emc.lookup(&self.keys[i], self.hashes[i]) {
                let r = fref(c);
                if self.caches.fresh(r, env, epoch, stats) {
                    self.targets[i] = Target::Mega(r);
                    stats.emc_hits += 1;
                    todo &= !(1 << i);
                }
            }
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
        for i in set_bits(todo) {
            let Some(idx) = self.caches.smc.lookup(self.hashes[i]) else {
                continue;
            };
            // A signature hit is a candidate: verify the key under the mask.
            let Some((r, f)) = self.caches.megaflows.get_slot(idx) else {
                continue;
            };
            if !self.keys[i].matches(&f.matcher.value, &f.matcher.mask) {
                continue;
            }
            if self.caches.fresh(r, env, epoch, stats) {
                self.targets[i] = Target::Mega(r);
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
                self.targets[i] = Target::Mega(r);
                stats.megaflow_hits += 1;
                left &= !(1 << i);
                self.caches.smc.insert(self.hashes[i], r.idx);
                self.caches
                    .emc
                    .probabilistic_insert(&self.keys[i], self.hashes[i], cref(r));
            }
        }
        left
    }

    fn upcall_stage(
        &mut self,
        todo: u32,
        env: XlateEnv<'_>,
        epoch: u64,
        now_us: u64,
        stats: &mut DpStats,
    ) {
        self.n_temps = 0;
        let mut installed = false;
        for i in set_bits(todo) {
            let key = self.keys[i];
            // An earlier miss of this batch may have installed a megaflow
            // that covers this packet too.
            if installed {
                let mut probes = 0;
                let again = self.caches.megaflows.lookup(&key, &mut probes);
                stats.subtable_lookups += probes;
                if let Some(r) = again.filter(|&r| self.caches.fresh(r, env, epoch, stats)) {
                    self.targets[i] = Target::Mega(r);
                    stats.megaflow_hits += 1;
                    continue;
                }
            }
            if let Some(t) = self.temps[..self.n_temps].iter().position(|t| t.key == key) {
                // A miss forwarded by an uncached translation: counted like
                // the one that made it.
                self.targets[i] = Target::Temp(t as u8);
                stats.failed_upcalls += 1;
                continue;
            }
            match self
                .caches
                .upcall(&key, self.hashes[i], env, epoch, now_us, stats)
            {
                Ok(r) => {
                    self.targets[i] = Target::Mega(r);
                    installed = true;
                }
                Err(_) => {
                    // Forward by the translation without caching it.
                    let t = &mut self.temps[self.n_temps];
                    t.key = key;
                    std::mem::swap(&mut t.xlate, &mut self.caches.xlate);
                    self.targets[i] = Target::Temp(self.n_temps as u8);
                    self.n_temps += 1;
                }
            }
        }
    }

    /// Moves the packets to their flows' actions, group by group; frees
    /// the runts (the packets not in `classified`).
    fn execute_groups(
        &mut self,
        batch: &mut PacketBatch,
        classified: u32,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        self.groups.clear();
        // Consecutive packets usually follow the same flow: try the group
        // of the one before first.
        let mut last = usize::MAX;
        for (i, p) in batch.drain().enumerate() {
            if classified & (1 << i) == 0 {
                stats.dropped[DropReason::Runt.index()] += 1;
                pool.free(p);
                continue;
            }
            let t = self.targets[i];
            let len = p.len() as u64;
            self.slots[i] = Some(p);
            let g = match self.groups.get(last) {
                Some(g) if g.target == t => last,
                _ => match self.groups.iter().position(|g| g.target == t) {
                    Some(g) => g,
                    None => {
                        self.groups.push(Group {
                            target: t,
                            pkts: ArrayVec::new(),
                            bytes: 0,
                        });
                        self.groups.len() - 1
                    }
                },
            };
            last = g;
            let g = &mut self.groups[g];
            g.pkts.push(i as u8);
            g.bytes += len;
        }
        for g in &self.groups {
            let n = g.pkts.len() as u64;
            match g.target {
                Target::Mega(r) => {
                    let f = self
                        .caches
                        .megaflows
                        .get(r)
                        .expect("targets are live megaflows");
                    execute(
                        &f.actions,
                        f.drop,
                        &g.pkts,
                        &mut self.slots,
                        pool,
                        out,
                        stats,
                        &mut self.packet_ins,
                        now_us,
                    );
                    // The rules are credited from the megaflow's counters
                    // in bulk (Megaflow::credit_rules), not here.
                    let f = self.caches.megaflows.get_mut(r).expect("still live");
                    f.packets += n;
                    f.bytes += g.bytes;
                    f.used_us = now_us;
                }
                Target::Temp(t) => {
                    let x = &self.temps[t as usize].xlate;
                    execute(
                        &x.actions,
                        x.drop,
                        &g.pkts,
                        &mut self.slots,
                        pool,
                        out,
                        stats,
                        &mut self.packet_ins,
                        now_us,
                    );
                    for rule in &x.rules {
                        rule.credit(n, g.bytes, now_us);
                    }
                }
                Target::None => unreachable!("every extracted packet is classified"),
            }
        }
    }
}
