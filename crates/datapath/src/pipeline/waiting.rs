//! Misses waiting for the upcall budget ([`crate::upcall_queue`]): which
//! of a batch's packets wait, keeping each flow's order, and the runs of
//! waiting packets between two reads of the rings.

use arrayvec::ArrayVec;
use sluice_classifier::XlateEnv;
use sluice_packet::batch::set_bits;
use sluice_packet::{PacketBatch, PacketPool, BATCH_SIZE};

use super::Pipeline;
use crate::output::OutputStage;
use crate::stats::DpStats;

/// How long one poll iteration may run waiting misses once it ran a batch
/// of them (about 40-100 µs): the rings are read between two such runs.
const DRAIN_CYCLES: u64 = 250_000;

/// Whether a batch's misses may wait in the upcall queue, and must.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wait {
    /// They may (a live device's first pass, or a drain of the queue).
    pub may: bool,
    /// They wait even when the budget could pay: others wait before them,
    /// or their device's ring holds more.
    pub first: bool,
    /// Places left in the queue.
    pub room: usize,
}

impl Pipeline {
    /// Whether sources that can wait are left unread now: misses wait in
    /// the queue (they go first), or the budget is spent while traffic
    /// that cannot wait competes.
    #[inline]
    pub fn sources_wait(&self, now_cycles: u64) -> bool {
        !self.waiting.is_empty()
            || (self.upcall_budget.limited() && !self.upcall_budget.allows(now_cycles))
    }

    /// Runs waiting packets, oldest first, a batch at a time while the
    /// budget allows (every one of them with `force`: the datapath's end),
    /// at most about `max` packets and [`DRAIN_CYCLES`]. While the budget
    /// refuses, only the packets that wait behind their flow run (misses
    /// are passed over, [`crate::upcall_queue`]). Returns how many ran.
    #[allow(clippy::too_many_arguments)]
    pub fn drain_waiting(
        &mut self,
        env: XlateEnv<'_>,
        epoch: u64,
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
        max: usize,
        force: bool,
    ) -> usize {
        let start = crate::cycles::now();
        let limited = self.upcall_budget.limited();
        let mut refused = false;
        if !force && limited {
            self.upcall_budget.refill(start);
            refused = !self.upcall_budget.allows(start);
        }
        let mut ran = 0;
        let mut empty_walks = 0;
        while !self.waiting.is_empty() {
            // Only packets that wait behind their flow are left (their
            // misses have run): all of them go now, whatever `max` and
            // the time, or a flow that arrives as fast as a drain takes
            // it (a device whose ring is always full) would wait behind
            // itself for ever, every packet run twice.
            let only_held = self.waiting.held() == self.waiting.len();
            if ran >= max && !only_held {
                break;
            }
            if refused && self.waiting.held() == 0 {
                // Nothing but misses, and no budget for them.
                break;
            }
            let now = crate::cycles::now();
            if !force && ran > 0 && !only_held && now.wrapping_sub(start) > DRAIN_CYCLES {
                // The rings are read again before more upcalls.
                break;
            }
            let mut batch = PacketBatch::new();
            let mut slots = [0usize; BATCH_SIZE];
            let n = self.waiting.take(BATCH_SIZE, refused, |slot, w| {
                slots[batch.len()] = slot;
                let _ = batch.push(w.pkt);
            });
            if n == 0 {
                // The walk came to the end: at the datapath's end, walk
                // again until nothing is left.
                empty_walks += 1;
                if force && empty_walks < 3 {
                    continue;
                }
                break;
            }
            empty_walks = 0;
            self.drain_slots = slots;
            stats.upcalls_resumed += n as u64;
            ran += n;
            self.draining = true;
            self.exempt = force;
            self.pass(&mut batch, env, epoch, pool, out, stats, now_us, now);
            if self.defer_miss != 0 {
                // The budget ran out inside the batch: the rest of this
                // walk runs only what needs none.
                refused = true;
            }
            self.waiting.end_drain();
            if !self.recirc.next.is_empty() {
                self.recirculate(env, epoch, pool, out, stats, now_us, now);
            }
            self.draining = false;
            self.exempt = false;
        }
        ran
    }

    /// Packets of a flow with an earlier packet waiting wait too, behind
    /// it, whatever matched them: those after a packet of the batch that
    /// waits, and with `behind` those of a flow with a packet in the
    /// queue. While the queue has room for them: a full queue forwards
    /// them rather than drop a packet a cache matched.
    pub(super) fn keep_flow_order(&mut self, classified: u32, behind: bool) {
        let mut room = self
            .waiting
            .capacity()
            .saturating_sub(self.waiting.len() + self.defer.count_ones() as usize);
        let mut waiting = ArrayVec::<u32, BATCH_SIZE>::new();
        for i in set_bits(classified) {
            let h = self.hashes[i];
            if self.defer & (1 << i) != 0 {
                waiting.push(h);
            } else if room > 0 && (waiting.contains(&h) || (behind && self.waiting.holds_flow(h))) {
                self.defer |= 1 << i;
                waiting.push(h);
                room -= 1;
            }
        }
    }
}
