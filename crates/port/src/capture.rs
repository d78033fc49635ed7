//! An in-memory capture port for tests: what it sends is kept in a shared
//! list the test reads afterwards.

use std::sync::{Arc, Mutex};

use sluice_packet::{PacketBatch, PacketPool};

use crate::{Port, PortCaps, PortStats, RxStatus};

/// Frames a [`CapturePort`] sent, in order.
pub type Captured = Arc<Mutex<Vec<Vec<u8>>>>;

/// Keeps a copy of every frame it sends. One lock per burst (tests only).
#[derive(Debug)]
pub struct CapturePort {
    frames: Captured,
    stats: PortStats,
}

impl CapturePort {
    /// A capture port and the handle to read what it sent.
    pub fn new() -> (Self, Captured) {
        let frames: Captured = Arc::default();
        (
            CapturePort {
                frames: Arc::clone(&frames),
                stats: PortStats::default(),
            },
            frames,
        )
    }
}

impl Port for CapturePort {
    fn name(&self) -> &str {
        "capture"
    }

    fn caps(&self) -> PortCaps {
        PortCaps::SINK
    }

    fn rx_burst(
        &mut self,
        _pool: &mut PacketPool,
        _batch: &mut PacketBatch,
        _in_port: u32,
    ) -> RxStatus {
        RxStatus::Exhausted
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let n = batch.len();
        let mut frames = self.frames.lock().expect("capture lock");
        for p in batch.drain() {
            self.stats.tx_bytes += p.len() as u64;
            frames.push(p.data().to_vec());
            pool.free(p);
        }
        self.stats.tx_packets += n as u64;
        self.stats.tx_kicks += 1;
        n
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}
