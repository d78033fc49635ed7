//! The output stage (seed 000): one tx batch per port, collected across
//! rx bursts and handed to the port with one call when it is full, or
//! when its hold has passed since its first packet: `tx-flush-interval`
//! µs if set (0: at the end of the rx burst that filled it), else what
//! the port's own measurements call for (`auto`, the default:
//! [`crate::autobatch`]). Idle iterations, shutdown and reconfiguration
//! force a flush, so nothing waits when no more packets come. A port's
//! batch is FIFO, so per-flow order holds.

use sluice_packet::meta::OffloadMask;
use sluice_packet::offload::{self, Segmenter};
use sluice_packet::{Packet, PacketBatch, PacketPool, Slots, Unload};
use sluice_port::{Port, PortCaps};

use crate::autobatch::{KickModel, TxFlush};
use crate::stats::DpStats;

/// A port as the datapath holds it: the queue this PMD sends on (and
/// receives from), and any more rx queues of the port it polls.
pub(crate) struct PortSlot {
    pub ofport: u32,
    pub port: Box<dyn Port>,
    /// Queue number of `port` among the port's queues.
    pub qid: u32,
    /// More rx queues of this port that this PMD polls (receive only: it
    /// sends on `port`). These can move between PMDs (rxq rebalancing).
    pub extra_rxqs: Vec<RxQueue>,
    pub caps: PortCaps,
    pub txq: PacketBatch,
    pub rx_done: bool,
    /// When the queued batch must go (valid while `txq` is not empty).
    pub flush_deadline_us: u64,
    /// This port's own `tx-flush-interval`, if set.
    pub tx_flush: Option<TxFlush>,
    /// What its sends cost and how fast its packets come (measured
    /// whatever the setting; its hold is used under `auto`).
    pub kicks: KickModel,
    /// Under `auto`, the batch size sent at once, without waiting for the
    /// hold to pass or the next packet not to fit (`usize::MAX`: none).
    pub send_at: usize,
    /// Under `auto`, `flush_deadline_us` is on the PMD's time less its
    /// sending, and the batch also goes at this time on the clock,
    /// whatever the estimates say.
    pub wall_deadline_us: u64,
    /// TSC cycles spent receiving from this port and processing what came
    /// (OVS's per-rxq processing cycles, for `pmd-rxq-show`).
    pub rx_cycles: u64,
    /// Its MTU (`u32::MAX` for a port without one): an encapsulated
    /// packet longer is dropped as `tunnel mtu exceeded`, not queued.
    pub mtu: u32,
    /// OpenFlow port config: what it receives is dropped (`no_recv`).
    pub no_recv: bool,
    /// OpenFlow port config: nothing is forwarded to it (`no_fwd`).
    pub no_fwd: bool,
    /// OpenFlow port config: what it receives never goes to a controller
    /// (`no_packet_in`).
    pub no_packet_in: bool,
    /// A live capture of the port (`sluice ctl capture`).
    pub tap: Option<Box<crate::capture::Tap>>,
    /// How long its batches waited for company ([`BatchWaits`]), and
    /// when the one queued now began: the iteration's time and the PMD's
    /// time in send calls then.
    pub waits: BatchWaits,
    pub batch_began: (u64, f64),
}

/// How long a port's batches waited in their output batch before their
/// send call, from their first packet, on the clock `auto`'s hold runs
/// on: the PMD's time less its time in send calls (other ports' batches,
/// which every packet waits for whatever the setting), at the PMD's
/// iteration granularity. `auto` holds no batch past its ceiling
/// ([`crate::autobatch::CEILING_US`]) on this clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchWaits {
    /// Batches sent.
    pub batches: u64,
    /// Their waits added up (µs).
    pub total_us: u64,
    /// The longest (µs).
    pub max_us: u64,
}

impl BatchWaits {
    /// The mean wait (µs).
    pub fn mean_us(&self) -> f64 {
        self.total_us as f64 / self.batches.max(1) as f64
    }
}

/// An rx queue a PMD polls for receiving only; it can be taken from one
/// PMD's datapath and given to another's.
pub struct RxQueue {
    /// Queue number among the port's queues.
    pub qid: u32,
    /// The queue.
    pub port: Box<dyn Port>,
    /// Whether its input has ended.
    pub rx_done: bool,
    /// TSC cycles spent receiving from it and processing what came.
    pub rx_cycles: u64,
}

impl RxQueue {
    /// A queue not polled yet.
    pub fn new(qid: u32, port: Box<dyn Port>) -> Self {
        RxQueue {
            qid,
            rx_done: !port.caps().rx,
            port,
            rx_cycles: 0,
        }
    }
}

/// Ports, by ascending OpenFlow number, with their output batches.
#[derive(Default)]
pub(crate) struct OutputStage {
    pub ports: Vec<PortSlot>,
    /// `tx-flush-interval` for ports without their own.
    pub tx_flush: TxFlush,
    /// µs this PMD has spent in send calls (as the ports' models
    /// estimate them): `auto`'s holds run on the PMD's time less this, so
    /// a batch waits for company while the PMD receives, not while it
    /// sends other ports' batches (which every packet would wait for
    /// whatever the setting).
    pub sending_us: f64,
    /// Pad frames shorter than [`MIN_FRAME`] when sent.
    pub pad_short: bool,
    /// The switch time of the current iteration, µs (for captures).
    pub now_us: u64,
}

/// The shortest Ethernet frame on the wire, less its FCS.
pub const MIN_FRAME: usize = 60;

/// Pads every frame of `b` shorter than [`MIN_FRAME`] with zeros (one with
/// no room behind it in its buffer is left as it is).
#[cold]
fn pad_short_frames(b: &mut PacketBatch) {
    for p in b.as_mut_slice() {
        let n = p.len();
        if n < MIN_FRAME && p.tailroom() >= MIN_FRAME - n {
            p.set_len(MIN_FRAME);
            p.data_mut()[n..].fill(0);
        }
    }
}

impl OutputStage {
    /// Index of the port numbered `ofport`.
    #[inline]
    pub fn index_of(&self, ofport: u32) -> Option<usize> {
        self.ports.binary_search_by_key(&ofport, |p| p.ofport).ok()
    }

    /// Queues `pkt` for port `idx` at time `now_us`, sending the queue
    /// first if it is full.
    #[inline]
    pub fn enqueue(
        &mut self,
        idx: usize,
        pkt: Packet,
        pool: &mut PacketPool,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        self.make_room(idx, pool, stats, now_us);
        let _ = self.ports[idx].txq.push(pkt);
        stats.output_copies += 1;
        self.send_if_worth(idx, pool, stats);
    }

    /// Queues slot `i`'s packet for port `idx`, as [`OutputStage::enqueue`]
    /// does, moving it straight from the slot's memory (see [`Slots`]).
    /// False when the slot is empty.
    #[inline]
    pub fn enqueue_slot(
        &mut self,
        idx: usize,
        slots: &mut Slots,
        i: usize,
        pool: &mut PacketPool,
        stats: &mut DpStats,
        now_us: u64,
    ) -> bool {
        if slots.is_empty_at(i) {
            return false;
        }
        self.make_room(idx, pool, stats, now_us);
        let moved = slots.move_to(i, &mut self.ports[idx].txq);
        debug_assert!(moved, "a packet to move and room for it");
        stats.output_copies += 1;
        self.send_if_worth(idx, pool, stats);
        true
    }

    /// Sends port `idx`'s batch if it holds what `auto` waits for.
    #[inline]
    fn send_if_worth(&mut self, idx: usize, pool: &mut PacketPool, stats: &mut DpStats) {
        if self.ports[idx].txq.len() >= self.ports[idx].send_at {
            self.flush_port(idx, pool, stats);
        }
    }

    /// Queues the packet at the front of `src` for port `idx`, as
    /// [`OutputStage::enqueue`] does, moving it straight from the rx
    /// batch's memory (see [`Unload`]).
    #[inline]
    pub fn enqueue_front(
        &mut self,
        idx: usize,
        src: &mut Unload<'_>,
        pool: &mut PacketPool,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        self.make_room(idx, pool, stats, now_us);
        let moved = src.move_to(&mut self.ports[idx].txq);
        debug_assert!(moved, "a packet to move and room for it");
        stats.output_copies += 1;
        self.send_if_worth(idx, pool, stats);
    }

    /// Readies port `idx`'s queue for one more packet at `now_us`: sends
    /// it first if it is full, and starts its flush time if it is empty.
    #[inline]
    fn make_room(&mut self, idx: usize, pool: &mut PacketPool, stats: &mut DpStats, now_us: u64) {
        if self.ports[idx].txq.is_full() {
            self.flush_port(idx, pool, stats);
        }
        self.start_deadline(idx, stats, now_us);
    }

    /// Sets port `idx`'s flush time when its queue is empty, i.e. before
    /// its first packet goes in (under `auto`, the measuring window is
    /// moved on there too: once per batch, not per packet).
    #[inline]
    fn start_deadline(&mut self, idx: usize, stats: &DpStats, now_us: u64) {
        let default = self.tx_flush;
        let slot = &mut self.ports[idx];
        if slot.txq.is_empty() {
            slot.batch_began = (now_us, self.sending_us);
            let less_sending = self.sending_us as u64;
            (slot.flush_deadline_us, slot.send_at) = match slot.tx_flush.unwrap_or(default) {
                TxFlush::Fixed(us) => (now_us + us, usize::MAX),
                TxFlush::Auto => {
                    let pmd = crate::autobatch::PmdTime {
                        busy_cycles: stats.processing_cycles,
                        rx_packets: stats.rx_packets,
                    };
                    slot.kicks.tick(now_us, pmd);
                    let hold = slot.kicks.hold_us();
                    slot.wall_deadline_us = now_us + hold * crate::autobatch::WALL_FACTOR;
                    let due = now_us.saturating_sub(less_sending) + hold;
                    (due, slot.kicks.target())
                }
            };
        }
    }

    /// Queues every packet of `batch` for port `idx`, in order, as
    /// [`OutputStage::enqueue`] would one by one.
    #[inline]
    pub fn enqueue_all(
        &mut self,
        idx: usize,
        batch: &mut PacketBatch,
        pool: &mut PacketPool,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        if self.ports[idx].txq.remaining() < batch.len() {
            // Rare (a batch queued behind an earlier one with a flush
            // interval): one by one, flushing when full.
            for p in batch.drain() {
                self.enqueue(idx, p, pool, stats, now_us);
            }
            return;
        }
        self.start_deadline(idx, stats, now_us);
        stats.output_copies += batch.len() as u64;
        self.ports[idx].txq.append(batch);
        self.send_if_worth(idx, pool, stats);
    }

    /// Sends the queues whose flush time has come.
    pub fn flush_due(&mut self, pool: &mut PacketPool, stats: &mut DpStats, now_us: u64) {
        for i in 0..self.ports.len() {
            let slot = &self.ports[i];
            // (A setting changes only with every batch sent: the setting
            // in force is the one the deadline was set under.)
            let auto = slot.tx_flush.unwrap_or(self.tx_flush) == TxFlush::Auto;
            let due = if auto {
                slot.flush_deadline_us <= now_us.saturating_sub(self.sending_us as u64)
                    || slot.wall_deadline_us <= now_us
            } else {
                slot.flush_deadline_us <= now_us
            };
            if !slot.txq.is_empty() && due {
                self.flush_port(i, pool, stats);
            }
        }
    }

    /// Sends port `idx`'s queue.
    pub fn flush_port(&mut self, idx: usize, pool: &mut PacketPool, stats: &mut DpStats) {
        let slot = &mut self.ports[idx];
        let n = slot.txq.len();
        if n == 0 {
            return;
        }
        if self.pad_short {
            pad_short_frames(&mut slot.txq);
        }
        let (began, sending) = slot.batch_began;
        let others = (self.sending_us - sending).max(0.0) as u64;
        let waited = self.now_us.saturating_sub(began).saturating_sub(others);
        let w = &mut slot.waits;
        w.batches += 1;
        w.total_us += waited;
        w.max_us = w.max_us.max(waited);
        // A capture sees the frames as given to the port (a GSO
        // super-frame whole, as tcpdump on the interface does).
        if let Some(tap) = &mut slot.tap {
            tap.take(false, slot.ofport, slot.txq.as_slice().iter(), self.now_us);
        }
        if slot.txq.as_slice().iter().any(|p| p.meta.offload.pending()) {
            let takes = slot.port.tx_offloads();
            if slot
                .txq
                .as_slice()
                .iter()
                .any(|p| !takes.takes(&p.meta.offload))
            {
                return flush_resolving(slot, pool, stats, takes);
            }
        }
        // One send in eight is timed (every one of the first 64): the
        // model's averages need no more, and a cheap port's send is not
        // made dearer by two counter reads each time.
        let timed = slot.kicks.wants_sample();
        let t0 = if timed { crate::cycles::now() } else { 0 };
        let sent = slot.port.tx_burst(pool, &mut slot.txq);
        if timed {
            slot.kicks.sent(n, crate::cycles::now().wrapping_sub(t0));
        }
        slot.kicks.count(n);
        self.sending_us += slot.kicks.cycles_for(n) * crate::cycles::us_per_cycle();
        debug_assert!(slot.txq.is_empty(), "tx_burst must consume the whole batch");
        stats.sent_packets += sent as u64;
        stats.tx_dropped += (n - sent) as u64;
        stats.sent_batches += 1;
        DpStats::count_batch(&mut stats.tx_batch_sizes, n);
    }

    /// Sends every non-empty queue.
    pub fn flush_all(&mut self, pool: &mut PacketPool, stats: &mut DpStats) {
        for i in 0..self.ports.len() {
            self.flush_port(i, pool, stats);
        }
    }
}

/// Hands `batch` to the slot's port, counting what it took.
fn send(slot: &mut PortSlot, batch: &mut PacketBatch, pool: &mut PacketPool, stats: &mut DpStats) {
    let n = batch.len();
    if n == 0 {
        return;
    }
    slot.kicks.count(n);
    let sent = slot.port.tx_burst(pool, batch);
    debug_assert!(batch.is_empty(), "tx_burst must consume the whole batch");
    stats.sent_packets += sent as u64;
    stats.tx_dropped += (n - sent) as u64;
    stats.sent_batches += 1;
    DpStats::count_batch(&mut stats.tx_batch_sizes, n);
}

/// Sends the slot's queue to a port that takes no offload requests (seed
/// 004's software fallback): super-frames are cut into segments and
/// partial checksums completed first, in queue order. A super-frame
/// counts as its segments among the output copies.
#[cold]
fn flush_resolving(
    slot: &mut PortSlot,
    pool: &mut PacketPool,
    stats: &mut DpStats,
    takes: OffloadMask,
) {
    let mut queued = std::mem::take(&mut slot.txq);
    let mut out = PacketBatch::new();
    for mut pkt in queued.drain() {
        if !takes.takes(&pkt.meta.offload) {
            if offload::needs_segmenting(&pkt) {
                let (made, failed) = segment_into(slot, &mut out, &pkt, pool, stats);
                pool.free(pkt);
                stats.gso_segmented += 1;
                stats.gso_segments += made;
                // The copy became `made` segments, plus the lost rest if it failed.
                stats.output_copies += made + u64::from(failed) - 1;
                stats.offload_failures += u64::from(failed);
                stats.tx_dropped += u64::from(failed);
                continue;
            }
            let had_csum = pkt.meta.offload.needs_csum();
            if offload::complete_csum(&mut pkt).is_err() {
                stats.offload_failures += 1;
                stats.tx_dropped += 1;
                pool.free(pkt);
                continue;
            }
            stats.csum_completed += u64::from(had_csum);
            // A GSO mark left on a packet that fits one segment: nothing to cut.
            pkt.meta.offload = sluice_packet::meta::Offload::NONE;
        }
        push_out(slot, &mut out, pkt, pool, stats);
    }
    send(slot, &mut out, pool, stats);
    slot.txq = queued;
}

/// Queues `pkt` in `out`, sending `out` first if it is full.
fn push_out(
    slot: &mut PortSlot,
    out: &mut PacketBatch,
    pkt: Packet,
    pool: &mut PacketPool,
    stats: &mut DpStats,
) {
    if out.is_full() {
        send(slot, out, pool, stats);
    }
    let _ = out.push(pkt);
}

/// Cuts super-frame `pkt` into `out` (sent as it fills); returns the
/// segments made and whether the rest could not be.
fn segment_into(
    slot: &mut PortSlot,
    out: &mut PacketBatch,
    pkt: &Packet,
    pool: &mut PacketPool,
    stats: &mut DpStats,
) -> (u64, bool) {
    let Ok(mut seg) = Segmenter::new(pkt) else {
        return (0, true);
    };
    let mut made = 0;
    loop {
        match seg.next_segment(pkt, pool) {
            None => return (made, false),
            Some(Err(_)) => return (made, true),
            Some(Ok(s)) => {
                push_out(slot, out, s, pool, stats);
                made += 1;
            }
        }
    }
}
