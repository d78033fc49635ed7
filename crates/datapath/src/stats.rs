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
    /// Beyond the packet-in rate the controllers take (their rate limit,
    /// applied where the packet-in would be made).
    ControllerRateLimit,
    /// Received on a port a controller set `no_recv` (or down).
    PortNoRecv,
    /// Would have gone to the controller, but came in on a port a
    /// controller set `no_packet_in`.
    PortNoPacketIn,
    /// No pool frame was free to copy the packet for an output.
    NoBuffer,
    /// A miss not translated: upcalls had used their share of the PMD's
    /// cycles while cached traffic was waiting (a miss storm).
    UpcallBudget,
    /// Above a meter's drop band.
    MeterDrop,
    /// Recirculated more often than [`crate::MAX_RECIRC_DEPTH`] in a
    /// row, or more copies waiting to recirculate than the queue holds.
    RecircLimit,
    /// A tunnel packet's outer headers were malformed, a fragment, or
    /// had flags the protocol (or Sluice) does not take.
    TunnelBadHeader,
    /// A tunnel packet's outer IPv4, UDP or GRE checksum was wrong.
    TunnelBadChecksum,
    /// A tunnel packet no tunnel port takes (remote, local address or key).
    TunnelNoPort,
    /// Encapsulated, a packet would be longer than an IPv4 datagram may be.
    TunnelTooLong,
    /// Encapsulated, a packet (or a super-frame's segment) would be longer
    /// than the underlay port's MTU: the inner MTU must leave room for
    /// the tunnel's headers (docs/tunnels.md).
    TunnelMtuExceeded,
    /// A fragment a `ct` held whose datagram never completed: its list
    /// expired and was not sent on, or the switch stopped (OVS's
    /// `frags purged`).
    FragmentPurged,
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
    DropReason::ControllerQueueFull,
    DropReason::NoBuffer,
    DropReason::UpcallBudget,
    DropReason::Xlate(XlateDrop::Fragment),
    DropReason::ControllerRateLimit,
    DropReason::PortNoRecv,
    DropReason::PortNoPacketIn,
    DropReason::Xlate(XlateDrop::NoSuchGroup),
    DropReason::Xlate(XlateDrop::Recirc),
    DropReason::RecircLimit,
    DropReason::Xlate(XlateDrop::NoSuchMeter),
    DropReason::MeterDrop,
    DropReason::Xlate(XlateDrop::TunnelNoRoute),
    DropReason::Xlate(XlateDrop::TunnelNoNeighbour),
    DropReason::Xlate(XlateDrop::TunnelArp),
    DropReason::TunnelBadHeader,
    DropReason::TunnelBadChecksum,
    DropReason::TunnelNoPort,
    DropReason::TunnelTooLong,
    DropReason::Xlate(XlateDrop::TunnelEcn),
    DropReason::FragmentPurged,
    DropReason::Xlate(XlateDrop::TunnelEgress),
    DropReason::TunnelMtuExceeded,
];

impl DropReason {
    /// Counter name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt frame",
            DropReason::Xlate(x) => x.name(),
            DropReason::ControllerQueueFull => "controller queue full",
            DropReason::ControllerRateLimit => "controller rate limit",
            DropReason::PortNoRecv => "port no_recv",
            DropReason::PortNoPacketIn => "port no_packet_in",
            DropReason::NoBuffer => "no buffer for copy",
            DropReason::UpcallBudget => "upcall budget",
            DropReason::RecircLimit => "recirculation limit",
            DropReason::MeterDrop => "meter drop",
            DropReason::TunnelBadHeader => "tunnel header invalid",
            DropReason::TunnelBadChecksum => "tunnel checksum bad",
            DropReason::TunnelNoPort => "no tunnel port",
            DropReason::TunnelTooLong => "tunnel packet too long",
            DropReason::FragmentPurged => "fragment purged",
            DropReason::TunnelMtuExceeded => "tunnel mtu exceeded",
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
            DropReason::ControllerQueueFull => 9,
            DropReason::NoBuffer => 10,
            DropReason::UpcallBudget => 11,
            DropReason::Xlate(XlateDrop::Fragment) => 12,
            DropReason::ControllerRateLimit => 13,
            DropReason::PortNoRecv => 14,
            DropReason::PortNoPacketIn => 15,
            DropReason::Xlate(XlateDrop::NoSuchGroup) => 16,
            DropReason::Xlate(XlateDrop::Recirc) => 17,
            DropReason::RecircLimit => 18,
            DropReason::Xlate(XlateDrop::NoSuchMeter) => 19,
            DropReason::MeterDrop => 20,
            DropReason::Xlate(XlateDrop::TunnelNoRoute) => 21,
            DropReason::Xlate(XlateDrop::TunnelNoNeighbour) => 22,
            DropReason::Xlate(XlateDrop::TunnelArp) => 23,
            DropReason::TunnelBadHeader => 24,
            DropReason::TunnelBadChecksum => 25,
            DropReason::TunnelNoPort => 26,
            DropReason::TunnelTooLong => 27,
            DropReason::Xlate(XlateDrop::TunnelEcn) => 28,
            DropReason::FragmentPurged => 29,
            DropReason::Xlate(XlateDrop::TunnelEgress) => 30,
            DropReason::TunnelMtuExceeded => 31,
        }
    }
}

/// Number of drop counters.
pub const N_DROP_REASONS: usize = 32;

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
    /// Fragments a `ct` held for reassembly (their fate comes later,
    /// with their datagram's, maybe on another thread).
    pub ct_frags_held: u64,
    /// Held fragments that went on (or were purged): counted again as
    /// forwarded or dropped where they went.
    pub ct_frags_released: u64,
    /// Dropped packets, by [`DropReason::index`].
    pub dropped: [u64; N_DROP_REASONS],
    /// `emc hits`.
    pub emc_hits: u64,
    /// `smc hits`.
    pub smc_hits: u64,
    /// `megaflow hits`.
    pub megaflow_hits: u64,
    /// Subtables probed by megaflow lookups (for `avg. subtable lookups
    /// per megaflow hit`).
    pub subtable_lookups: u64,
    /// `miss with success upcall`: translations installed as megaflows.
    pub upcalls: u64,
    /// `miss with failed upcall`: translations that could not be installed
    /// (flow or mask limit); the packets were still forwarded by them.
    pub failed_upcalls: u64,
    /// Misses put in the upcall queue to wait for the upcall budget
    /// (a packet that waits twice counts twice).
    pub upcalls_deferred: u64,
    /// Waiting misses taken from the queue to run; `upcalls_deferred -
    /// upcalls_resumed` wait now.
    pub upcalls_resumed: u64,
    /// Installs refused at the megaflow limit.
    pub flow_limit_hits: u64,
    /// Installs refused at the mask (subtable) limit.
    pub mask_limit_hits: u64,
    /// Megaflows revalidated after a rule or port change and kept.
    pub revalidated: u64,
    /// Megaflows removed by revalidation (the decision changed).
    pub invalidated: u64,
    /// Megaflows removed for being idle.
    pub idle_expired: u64,
    /// Rules `learn` actions added or changed (refreshes not counted).
    pub learned: u64,
    /// Megaflows marked for revalidation because a NORMAL MAC table entry
    /// their decision read changed.
    pub revalidation_marks: u64,
    /// Recirculation states freed after this thread's passes found no
    /// cache using them ([`sluice_classifier::recirc`]).
    pub recirc_freed: u64,
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
    /// Packets a controller sent in (PACKET_OUT); counted in `rx_packets`
    /// too, so that received = forwarded + to controller + dropped holds.
    pub packet_outs: u64,
    /// `packet recirculations`: passes through the datapath after the
    /// first (a `recirc` action sent the packet, or a copy, back in).
    /// Not in `rx_packets`: a recirculated packet's fate is counted once.
    pub recirculations: u64,
    /// `iterations` of the poll loop.
    pub iterations: u64,
    /// `processing cycles`: cycles spent in iterations that received packets.
    pub processing_cycles: u64,
    /// `idle cycles`: cycles spent in iterations that received nothing.
    pub idle_cycles: u64,
    /// `sleeps`: times the thread, idle, slept in `poll(2)` until a port
    /// had something or a command came (in neither cycle count).
    pub sleeps: u64,
    /// Microseconds it slept.
    pub sleep_us: u64,
    /// GSO super-frames cut into segments in software, for ports that take
    /// no offload requests (each then counts as its segments in
    /// `output_copies`).
    pub gso_segmented: u64,
    /// Segments those made.
    pub gso_segments: u64,
    /// GSO super-frames given one UDP tunnel header whole (cut after it,
    /// each segment with the outer headers, by the sending port or the
    /// kernel behind a tap), instead of being cut before encapsulation.
    pub gso_encapsulated: u64,
    /// Partial L4 checksums completed in software.
    pub csum_completed: u64,
    /// Copies whose offload request could not be carried out (malformed,
    /// or no frame for a segment); counted in `tx_dropped` too.
    pub offload_failures: u64,
    /// Rx bursts that brought packets, by how many (index `n - 1`):
    /// `pmd-perf-show`'s packets per rx batch.
    pub rx_batch_sizes: [u64; 32],
    /// Send calls by packets given (index `n - 1`): packets per tx batch.
    pub tx_batch_sizes: [u64; 32],
}

impl DpStats {
    /// Adds another thread's counters to these (for totals over PMDs).
    pub fn add(&mut self, o: &DpStats) {
        for (a, b) in self.dropped.iter_mut().zip(&o.dropped) {
            *a += b;
        }
        for (a, b) in self.rx_batch_sizes.iter_mut().zip(&o.rx_batch_sizes) {
            *a += b;
        }
        for (a, b) in self.tx_batch_sizes.iter_mut().zip(&o.tx_batch_sizes) {
            *a += b;
        }
        let DpStats {
            rx_packets,
            rx_bytes,
            forwarded,
            to_controller,
            ct_frags_held,
            ct_frags_released,
            dropped: _,
            emc_hits,
            smc_hits,
            megaflow_hits,
            subtable_lookups,
            upcalls,
            failed_upcalls,
            upcalls_deferred,
            upcalls_resumed,
            flow_limit_hits,
            mask_limit_hits,
            revalidated,
            invalidated,
            idle_expired,
            learned,
            revalidation_marks,
            recirc_freed,
            output_copies,
            copy_failures,
            sent_packets,
            tx_dropped,
            sent_batches,
            packet_ins,
            packet_outs,
            recirculations,
            iterations,
            processing_cycles,
            idle_cycles,
            sleeps,
            sleep_us,
            gso_segmented,
            gso_segments,
            gso_encapsulated,
            csum_completed,
            offload_failures,
            rx_batch_sizes: _,
            tx_batch_sizes: _,
        } = o;
        self.gso_segmented += gso_segmented;
        self.gso_segments += gso_segments;
        self.gso_encapsulated += gso_encapsulated;
        self.csum_completed += csum_completed;
        self.offload_failures += offload_failures;
        self.rx_packets += rx_packets;
        self.rx_bytes += rx_bytes;
        self.forwarded += forwarded;
        self.to_controller += to_controller;
        self.ct_frags_held += ct_frags_held;
        self.ct_frags_released += ct_frags_released;
        self.emc_hits += emc_hits;
        self.smc_hits += smc_hits;
        self.megaflow_hits += megaflow_hits;
        self.subtable_lookups += subtable_lookups;
        self.upcalls += upcalls;
        self.failed_upcalls += failed_upcalls;
        self.upcalls_deferred += upcalls_deferred;
        self.upcalls_resumed += upcalls_resumed;
        self.flow_limit_hits += flow_limit_hits;
        self.mask_limit_hits += mask_limit_hits;
        self.revalidated += revalidated;
        self.invalidated += invalidated;
        self.idle_expired += idle_expired;
        self.learned += learned;
        self.revalidation_marks += revalidation_marks;
        self.recirc_freed += recirc_freed;
        self.output_copies += output_copies;
        self.copy_failures += copy_failures;
        self.sent_packets += sent_packets;
        self.tx_dropped += tx_dropped;
        self.sent_batches += sent_batches;
        self.packet_ins += packet_ins;
        self.packet_outs += packet_outs;
        self.recirculations += recirculations;
        self.iterations += iterations;
        self.processing_cycles += processing_cycles;
        self.idle_cycles += idle_cycles;
        self.sleeps += sleeps;
        self.sleep_us += sleep_us;
    }

    /// Counts a batch of `n` (1 to 32) in `sizes`.
    #[inline]
    pub fn count_batch(sizes: &mut [u64; 32], n: usize) {
        sizes[n.clamp(1, 32) - 1] += 1;
    }

    /// Total drops.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Drops for one reason.
    pub fn dropped_by(&self, r: DropReason) -> u64 {
        self.dropped[r.index()]
    }

    /// Whether every received packet is accounted for:
    /// received = forwarded + to controller + dropped + fragments held
    /// now (see [`crate::fragments`]; over all threads).
    pub fn rx_balanced(&self) -> bool {
        self.rx_packets + self.ct_frags_released + self.upcalls_resumed
            == self.forwarded
                + self.to_controller
                + self.dropped_total()
                + self.ct_frags_held
                + self.upcalls_deferred
    }

    /// Misses waiting for the upcall budget now (by these counters).
    pub fn upcalls_waiting(&self) -> u64 {
        self.upcalls_deferred.saturating_sub(self.upcalls_resumed)
    }

    /// Fragments held for reassembly now (by these counters).
    pub fn frags_held_now(&self) -> u64 {
        self.ct_frags_held.saturating_sub(self.ct_frags_released)
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

    /// `avg. subtable lookups per megaflow hit`.
    pub fn subtable_lookups_per_hit(&self) -> f64 {
        if self.megaflow_hits == 0 {
            0.0
        } else {
            self.subtable_lookups as f64 / self.megaflow_hits as f64
        }
    }

    /// Packets that went through the cache cascade (all but runts).
    pub fn classified(&self) -> u64 {
        self.emc_hits + self.smc_hits + self.megaflow_hits + self.upcalls + self.failed_upcalls
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

    #[test]
    fn totals_over_threads_add_every_counter() {
        let mut a = DpStats {
            rx_packets: 3,
            forwarded: 2,
            idle_cycles: 7,
            ..Default::default()
        };
        a.dropped[DropReason::NoBuffer.index()] = 1;
        let b = a.clone();
        a.add(&b);
        assert_eq!((a.rx_packets, a.forwarded, a.idle_cycles), (6, 4, 14));
        assert_eq!(a.dropped_by(DropReason::NoBuffer), 2);
    }
}
