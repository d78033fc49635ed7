//! A tunnel port (`vxlan:`, `geneve:`, `gre:`) as the datapath's port
//! list holds it. It has no I/O of its own: translation turns an output to
//! it into an encapsulation sent out of an underlay port, and packets
//! decapsulated on an underlay port come in under its number. Anything
//! handed to it directly (which translation never does) is dropped,
//! counted.

use sluice_packet::tunnel::TunnelConfig;
use sluice_packet::{PacketBatch, PacketPool};

use crate::{Port, PortCaps, PortDrop, PortStats, RxStatus};

/// See the module documentation.
#[derive(Debug)]
pub struct TunnelPort {
    name: String,
    stats: PortStats,
}

impl TunnelPort {
    /// The port for `cfg`.
    pub fn new(cfg: &TunnelConfig) -> Self {
        TunnelPort {
            name: cfg.to_string(),
            stats: PortStats::default(),
        }
    }
}

impl Port for TunnelPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: false,
            tx: true,
            finite_rx: true,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: false,
        }
    }

    fn rx_burst(&mut self, _: &mut PacketPool, _: &mut PacketBatch, _: u32) -> RxStatus {
        RxStatus::Exhausted
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        self.stats
            .tx_drop(PortDrop::NotWritable, batch.len() as u64);
        batch.free_all(pool);
        0
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::tunnel::{Endpoint, TunnelKind};

    #[test]
    fn frames_handed_to_it_are_counted_drops() {
        let mut pool = PacketPool::new(8, 2048).unwrap();
        let mut p = TunnelPort::new(&TunnelConfig::new(TunnelKind::Vxlan, Endpoint::Flow));
        let mut b = PacketBatch::new();
        let _ = b.push(pool.alloc_from(&[0u8; 60]).unwrap());
        assert_eq!(p.tx_burst(&mut pool, &mut b), 0);
        assert_eq!(p.stats().tx_dropped_by(PortDrop::NotWritable), 1);
        assert_eq!(pool.available(), 8);
    }
}
