//! The output stage: one tx batch per port, collected across a whole rx
//! burst and handed to the port with one call when full or at the end of
//! the burst (seed 000, with `tx-flush-interval` = 0).

use sluice_packet::{Packet, PacketBatch, PacketPool};
use sluice_port::{Port, PortCaps};

use crate::stats::DpStats;

/// A port as the datapath holds it.
pub(crate) struct PortSlot {
    pub ofport: u32,
    pub port: Box<dyn Port>,
    pub caps: PortCaps,
    pub txq: PacketBatch,
    pub rx_done: bool,
}

/// Ports, by ascending OpenFlow number, with their output batches.
#[derive(Default)]
pub(crate) struct OutputStage {
    pub ports: Vec<PortSlot>,
}

impl OutputStage {
    /// Index of the port numbered `ofport`.
    #[inline]
    pub fn index_of(&self, ofport: u32) -> Option<usize> {
        self.ports.binary_search_by_key(&ofport, |p| p.ofport).ok()
    }

    /// Queues `pkt` for port `idx`, sending the queue first if it is full.
    #[inline]
    pub fn enqueue(&mut self, idx: usize, pkt: Packet, pool: &mut PacketPool, stats: &mut DpStats) {
        if self.ports[idx].txq.is_full() {
            self.flush_port(idx, pool, stats);
        }
        let _ = self.ports[idx].txq.push(pkt);
        stats.output_copies += 1;
    }

    /// Sends port `idx`'s queue.
    pub fn flush_port(&mut self, idx: usize, pool: &mut PacketPool, stats: &mut DpStats) {
        let slot = &mut self.ports[idx];
        let n = slot.txq.len();
        if n == 0 {
            return;
        }
        let sent = slot.port.tx_burst(pool, &mut slot.txq);
        debug_assert!(slot.txq.is_empty(), "tx_burst must consume the whole batch");
        stats.sent_packets += sent as u64;
        stats.tx_dropped += (n - sent) as u64;
        stats.sent_batches += 1;
    }

    /// Sends every non-empty queue.
    pub fn flush_all(&mut self, pool: &mut PacketPool, stats: &mut DpStats) {
        for i in 0..self.ports.len() {
            self.flush_port(i, pool, stats);
        }
    }
}
