//! The datapath's side of the OpenFlow channel: the packet-ins it queued
//! (handed over, charged, limited) and the packets controllers send
//! (PACKET_OUT).

use sluice_classifier::XlateEnv;

use super::Datapath;
use crate::packet_in::PacketIn;

impl Datapath {
    /// Packet-ins waiting for an OpenFlow channel.
    pub fn packet_ins(&self) -> impl Iterator<Item = &PacketIn> {
        self.pipeline.packet_ins.queue.iter()
    }

    /// Hands the queued packet-ins to `send`, oldest first, until it
    /// refuses one (which stays first in the queue).
    pub fn hand_over_packet_ins(&mut self, mut send: impl FnMut(PacketIn) -> Result<(), PacketIn>) {
        let q = &mut self.pipeline.packet_ins.queue;
        while let Some(p) = q.pop_front() {
            if let Err(p) = send(p) {
                q.push_front(p);
                break;
            }
        }
    }

    /// Charges `cycles` spent handing packet-ins over to the packet-in
    /// share ([`crate::cascade::CacheConfig::packet_in_share_pct`]).
    pub fn charge_packet_ins(&mut self, cycles: u64) {
        if let Some(b) = &mut self.pipeline.packet_ins.budget {
            b.charge(cycles);
        }
    }

    /// Takes back packet-ins the OpenFlow channel has sent: their buffers
    /// serve the next ones (up to the queue's length of them); `batch` is
    /// left empty, its capacity kept for the next hand-over.
    pub fn recycle_packet_ins(&mut self, batch: &mut Vec<PacketIn>) {
        let q = &mut self.pipeline.packet_ins;
        for pi in batch.drain(..) {
            if q.spare.len() < q.cap {
                q.spare.push(pi.data);
            }
        }
    }

    /// Limits the packet-ins this datapath makes to `pps` a second, in
    /// bursts of up to `burst` (0: no limit). Beyond it a `controller`
    /// action makes none: the drop `controller rate limit`.
    pub fn set_packet_in_limit(&mut self, pps: f64, burst: f64) {
        let q = &mut self.pipeline.packet_ins;
        q.rate_per_us = pps / 1e6;
        q.burst = burst.max(1.0);
        q.tokens = q.burst;
    }

    /// Shares the flag the OpenFlow channel sets while a controller takes
    /// packet-ins for a TTL that ran out (none are made otherwise).
    pub fn set_invalid_ttl_flag(&mut self, wanted: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.pipeline.packet_ins.invalid_ttl = wanted;
    }

    /// Whether packet-ins wait.
    #[inline]
    pub fn has_packet_ins(&self) -> bool {
        !self.pipeline.packet_ins.queue.is_empty()
    }

    /// How many packet-ins wait.
    #[inline]
    pub fn packet_ins_waiting(&self) -> usize {
        self.pipeline.packet_ins.queue.len()
    }

    /// Forwards a packet a controller sent (PACKET_OUT) by `actions`, as
    /// if it came in on `in_port`, through the output batches (sent at
    /// once). A packet the pool has no frame for, or longer than a frame,
    /// is an error.
    pub fn packet_out(
        &mut self,
        data: &[u8],
        in_port: u32,
        actions: &[sluice_classifier::Action],
        now_us: u64,
    ) -> Result<(), String> {
        let mut pkt = self
            .pool
            .alloc_from(data)
            .ok_or_else(|| format!("no frame for a {}-byte packet", data.len()))?;
        pkt.meta.in_port = in_port;
        let env = xenv!(self);
        self.pipeline.packet_out(
            pkt,
            actions,
            env,
            &mut self.pool,
            &mut self.out,
            &mut self.stats,
            now_us,
        );
        self.apply_learned(now_us);
        self.out.flush_all(&mut self.pool, &mut self.stats);
        Ok(())
    }
}
