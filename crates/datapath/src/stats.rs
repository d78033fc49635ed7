//! Datapath counters, named as Open vSwitch names them, and the drop
//! reasons: every packet the datapath receives ends up forwarded, sent to
//! the controller queue, or dropped for exactly one named reason.

use sluice_classifier::XlateDrop;

/// Why the datapath dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than an Ethernet header.
    Runt,
    /// A translation decided so (table miss, `drop`, TTL, ...).
    Xlate(XlateDrop),
    /// The controller queue was full.
    ControllerQueueFull,
    /// No pool frame was free to copy the packet for an output.
    NoBuffer,
}

/// Every drop reason, in report order.
pub const DROP_REASONS: [DropReason; N_DROP_REASONS] = [
    DropReason::Runt,
    DropReason::Xlate(XlateDrop::TableMiss),
    DropReason::Xlate(XlateDrop::NoOutput),
    DropReason::Xlate(XlateDrop::OutputToInPort),
    DropReason::Xlate(XlateDrop::NoSuchPort),
    DropReason::Xlate(XlateDrop::InvalidTtl),
    DropReason::Xlate(XlateDrop::RecursionTooDeep),
    DropReason::Xlate(XlateDrop::TooManyResubmits),
    DropReason::Xlate(XlateDrop::TooManyActions),
    DropReason::Xlate(XlateDrop::TooManyVlans),
    DropReason::ControllerQueueFull,
    DropReason::NoBuffer,
];

impl DropReason {
    /// Counter name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt frame",
            DropReason::Xlate(x) => x.name(),
            DropReason::ControllerQueueFull => "controller queue full",
            DropReason::NoBuffer => "no buffer for copy",
        }
    }

    /// Index into [`DpStats::dropped`].
    pub fn index(self) -> usize {
        match self {
            DropReason::Runt => 0,
            DropReason::Xlate(XlateDrop::TableMiss) => 1,
            DropReason::Xlate(XlateDrop::NoOutput) => 2,
            DropReason::Xlate(XlateDrop::OutputToInPort) => 3,
            DropReason::Xlate(XlateDrop::NoSuchPort) => 4,
            DropReason::Xlate(XlateDrop::InvalidTtl) => 5,
            DropReason::Xlate(XlateDrop::RecursionTooDeep) => 6,
            DropReason::Xlate(XlateDrop::TooManyResubmits) => 7,
            DropReason::Xlate(XlateDrop::TooManyActions) => 8,
            DropReason::Xlate(XlateDrop::TooManyVlans) => 9,
            DropReason::ControllerQueueFull => 10,
            DropReason::NoBuffer => 11,
        }
    }
}

/// Number of drop counters.
pub const N_DROP_REASONS: usize = 12;

/// Counters of one datapath thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DpStats {
    /// `packets received`: packets taken from ports.
    pub rx_packets: u64,
    /// Bytes of those.
    pub rx_bytes: u64,
    /// Packets sent out of at least one port.
    pub forwarded: u64,
    /// Packets whose only destination was the controller queue.
    pub to_controller: u64,
    /// Dropped packets, by [`DropReason::index`].
    pub dropped: [u64; N_DROP_REASONS],
    /// `upcalls`: translations through the rule tables (one per distinct
    /// flow key per batch while there are no caches).
    pub upcalls: u64,
    /// Copies handed to output queues (a flooded packet counts once per port).
    pub output_copies: u64,
    /// Copies that could not be made (pool empty); each is also a lost copy.
    pub copy_failures: u64,
    /// `sent packets`: copies the ports accepted.
    pub sent_packets: u64,
    /// Copies the ports refused (see each port's tx drops for why).
    pub tx_dropped: u64,
    /// `sent batches`: tx bursts handed to ports.
    pub sent_batches: u64,
    /// Packet-ins queued for the OpenFlow channel.
    pub packet_ins: u64,
    /// `iterations` of the poll loop.
    pub iterations: u64,
    /// `processing cycles`: cycles spent in iterations that received packets.
    pub processing_cycles: u64,
    /// `idle cycles`: cycles spent in iterations that received nothing.
    pub idle_cycles: u64,
}

impl DpStats {
    /// Total drops.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Drops for one reason.
    pub fn dropped_by(&self, r: DropReason) -> u64 {
        self.dropped[r.index()]
    }

    /// Whether every received packet is accounted for:
    /// received = forwarded + to controller + dropped.
    pub fn rx_balanced(&self) -> bool {
        self.rx_packets == self.forwarded + self.to_controller + self.dropped_total()
    }

    /// Whether every output copy is accounted for (after a final flush):
    /// copies = sent + refused by ports.
    pub fn tx_balanced(&self) -> bool {
        self.output_copies == self.sent_packets + self.tx_dropped
    }

    /// `avg. packets per output batch`.
    pub fn packets_per_batch(&self) -> f64 {
        if self.sent_batches == 0 {
            0.0
        } else {
            (self.sent_packets + self.tx_dropped) as f64 / self.sent_batches as f64
        }
    }

    /// `cycles/pkt` (processing cycles per received packet).
    pub fn cycles_per_packet(&self) -> f64 {
        if self.rx_packets == 0 {
            0.0
        } else {
            self.processing_cycles as f64 / self.rx_packets as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_indexes_are_distinct_and_in_order() {
        for (i, r) in DROP_REASONS.iter().enumerate() {
            assert_eq!(r.index(), i, "{}", r.name());
        }
    }
}
