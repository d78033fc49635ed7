//! The null port: receives nothing, sends into the void (counted).

use sluice_packet::{PacketBatch, PacketPool};

use crate::{Port, PortCaps, PortStats, RxStatus};

/// Discards what it is given; never receives.
#[derive(Debug, Default)]
pub struct NullPort {
    stats: PortStats,
}

impl NullPort {
    /// A new null port.
    pub fn new() -> Self {
        NullPort::default()
    }
}

impl Port for NullPort {
    fn name(&self) -> &str {
        "null"
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
        self.stats.tx_packets += n as u64;
        self.stats.tx_bytes += batch.as_slice().iter().map(|p| p.len() as u64).sum::<u64>();
        self.stats.tx_kicks += 1;
        batch.free_all(pool);
        n
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}
