//! Sluice layer 4: ports.
//!
//! A port moves packets in bursts: [`Port::rx_burst`] fills a batch with
//! frames taken from the caller's pool, [`Port::tx_burst`] consumes a whole
//! batch (every packet is either sent or counted as a drop with a reason)
//! and gives the frames back. One virtual call per burst, never per packet.
//! Backends whose send costs a syscall or a doorbell queue inside
//! `tx_burst` and settle in [`Port::flush`].
//!
//! Backends: [`pcap`] files, in-memory [`replay`] (for benchmarks and
//! `pcap:...,loop`), [`null`] sink, in-memory [`capture`] (for tests), and
//! live ports: [`afpacket`] (TPACKET_V2 rings), [`afxdp`] (XDP sockets
//! whose UMEM is the packet pool), [`tap`] and [`stream`]
//! (Open vSwitch's netdev-dummy framing over unix sockets). Ports whose
//! device ring can fill keep an [`egress`] queue (seed 002).
//! Imports only `sluice-packet`. `unsafe` appears only at the OS boundary
//! ([`sys`], [`kernel_net`], [`afpacket`], [`afxdp`], [`xdp_prog`]) and in the guest memory of
//! [`vhost`] ports (`vhost::guest`, [`vhost::split`]), each block commented.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod afpacket;
pub mod afxdp;
pub mod capture;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod egress;
pub mod kernel_net;
pub mod link;
pub mod null;
pub mod pcap;
pub mod pcap_port;
pub mod replay;
pub mod rtnetlink;
pub mod spec;
pub mod stream;
pub mod sys;
pub mod tap;
pub mod tunnel_port;
pub mod unix_listen;
pub mod vhost;
pub mod xdp_prog;
pub mod xdp_send;

use sluice_packet::{PacketBatch, PacketPool};

pub use spec::{open_port, open_port_queues, PortSpec, UnderlayAddr};

/// What an rx burst found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxStatus {
    /// This many packets were appended to the batch (may be 0 when the
    /// batch was already full).
    Received(usize),
    /// Nothing to receive right now.
    Idle,
    /// A finite source is used up: nothing will ever arrive again.
    Exhausted,
}

impl RxStatus {
    /// The status of a burst that received `n` packets, where `ended` says
    /// the source can never deliver more.
    pub fn of_burst(n: usize, ended: bool) -> Self {
        match (n, ended) {
            (0, true) => RxStatus::Exhausted,
            (0, false) => RxStatus::Idle,
            (n, _) => RxStatus::Received(n),
        }
    }
}

/// How many [`PortDrop`] reasons there are.
pub const N_PORT_DROPS: usize = 9;

/// Why a port dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortDrop {
    /// No free frame in the pool to receive into.
    NoBuffer,
    /// Frame larger than a pool frame (rx) or than the port takes (tx).
    TooBig,
    /// The device queue was full.
    QueueFull,
    /// The backend failed (I/O error).
    Error,
    /// The port cannot send (receive-only).
    NotWritable,
    /// The kernel's receive ring was full (AF_PACKET, AF_XDP): counted by
    /// the kernel, reported here.
    KernelRingFull,
    /// Nothing to send to: a stream port with no peer connected.
    NotConnected,
    /// A virtio-net header asked for what cannot be done (UFO, offsets
    /// past the frame's end), or a segment could not be made.
    BadOffload,
    /// A guest broke the virtio rules (a descriptor outside its memory or
    /// with the wrong direction): its queue is stopped until it resets it.
    GuestFault,
}

impl PortDrop {
    /// Every reason, for reports.
    pub const ALL: [PortDrop; N_PORT_DROPS] = [
        PortDrop::NoBuffer,
        PortDrop::TooBig,
        PortDrop::QueueFull,
        PortDrop::Error,
        PortDrop::NotWritable,
        PortDrop::KernelRingFull,
        PortDrop::NotConnected,
        PortDrop::BadOffload,
        PortDrop::GuestFault,
    ];

    /// Short counter name.
    pub fn name(self) -> &'static str {
        match self {
            PortDrop::NoBuffer => "no buffer",
            PortDrop::TooBig => "too big",
            PortDrop::QueueFull => "queue full",
            PortDrop::Error => "error",
            PortDrop::NotWritable => "not writable",
            PortDrop::KernelRingFull => "kernel ring full",
            PortDrop::NotConnected => "not connected",
            PortDrop::BadOffload => "bad offload",
            PortDrop::GuestFault => "guest fault",
        }
    }

    /// Its place in [`PortStats::rx_dropped`] and `tx_dropped` (and in
    /// [`PortDrop::ALL`]).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Whether `pkt` fits on a link of MTU `mtu`: what follows its Ethernet
/// header and VLAN tags is at most `mtu` bytes. A GSO super-frame fits
/// when its segments will (`gso_size` plus headers is checked where it is
/// cut, by the kernel or by the datapath: [`segments_fit_mtu`]).
#[inline]
pub fn fits_mtu(pkt: &sluice_packet::Packet, mtu: u32) -> bool {
    pkt.meta.offload.gso() != 0 || l2_fits(pkt.data(), pkt.len(), mtu)
}

/// Whether every frame `pkt` goes on the wire as fits on a link of MTU
/// `mtu`, a super-frame judged by its longest segment (its headers, the
/// outer ones of a tunnelled one included, and `gso_size` of payload).
#[inline]
pub fn segments_fit_mtu(pkt: &sluice_packet::Packet, mtu: u32) -> bool {
    l2_fits(
        pkt.data(),
        sluice_packet::offload::longest_segment(pkt),
        mtu,
    )
}

/// Whether a frame of `len` bytes that starts as `d` carries at most `mtu`
/// bytes after its Ethernet header and VLAN tags.
#[inline]
fn l2_fits(d: &[u8], len: usize, mtu: u32) -> bool {
    let mut l2 = 14;
    if len <= mtu as usize + l2 {
        return true;
    }
    while d.len() >= l2 + 4 && matches!(u16::from_be_bytes([d[l2 - 2], d[l2 - 1]]), 0x8100 | 0x88a8)
    {
        l2 += 4;
    }
    len <= mtu as usize + l2
}

/// Counters a port keeps about itself.
///
/// Aligned to 128 bytes (a cache line and the pair the adjacent-line
/// prefetcher fetches with it): a port that holds its counters is aligned
/// so too, and rounded up to whole lines, so no two ports' counters, nor a
/// port's and anything else on the heap, share a line. Ports are opened on
/// one thread and polled by several PMD threads; one shared line, written
/// by two PMDs every burst, cost a fifth of the rate (`sluice bench
/// --pmds 2`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[repr(align(128))]
pub struct PortStats {
    /// Packets handed to the datapath.
    pub rx_packets: u64,
    /// Bytes of those.
    pub rx_bytes: u64,
    /// Frames that arrived but could not be handed over, by reason.
    pub rx_dropped: [u64; N_PORT_DROPS],
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets given to `tx_burst` but not sent, by reason.
    pub tx_dropped: [u64; N_PORT_DROPS],
    /// Send calls made to the backend (syscalls, doorbells, wakeups).
    pub tx_kicks: u64,
    /// Packets that went through the egress queue's priority band.
    pub tx_high_priority: u64,
    /// Received GSO super-frames (among `rx_packets`), from a port that
    /// takes virtio-net headers.
    pub rx_gso_packets: u64,
    /// GSO super-frames sent whole (among `tx_packets`), segmented by the
    /// kernel or the device.
    pub tx_gso_packets: u64,
    /// Received packets copied out of the device's buffer into a pool
    /// frame (a DPDK port: chained mbufs; every other packet is used in
    /// place).
    pub rx_copied: u64,
    /// Sent packets copied into a device buffer (a DPDK port: packets that
    /// came from another kind of port; its own go out in place).
    pub tx_copied: u64,
    /// Received packets whose TCP/UDP checksum field held only the
    /// pseudo-header sum (a sender's checksum offload, which an AF_XDP port
    /// is not told of): marked for completion
    /// ([`sluice_packet::partial_csum`]).
    pub rx_csum_partial: u64,
}

impl PortStats {
    /// Adds another queue's counters to these (a port opened for several
    /// PMD threads reports the sum over its queues).
    pub fn add(&mut self, o: &PortStats) {
        let PortStats {
            rx_packets,
            rx_bytes,
            rx_dropped,
            tx_packets,
            tx_bytes,
            tx_dropped,
            tx_kicks,
            tx_high_priority,
            rx_gso_packets,
            tx_gso_packets,
            rx_copied,
            tx_copied,
            rx_csum_partial,
        } = o;
        self.rx_csum_partial += rx_csum_partial;
        self.rx_copied += rx_copied;
        self.tx_copied += tx_copied;
        self.rx_gso_packets += rx_gso_packets;
        self.tx_gso_packets += tx_gso_packets;
        self.rx_packets += rx_packets;
        self.rx_bytes += rx_bytes;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        self.tx_kicks += tx_kicks;
        self.tx_high_priority += tx_high_priority;
        for (a, b) in self.rx_dropped.iter_mut().zip(rx_dropped) {
            *a += b;
        }
        for (a, b) in self.tx_dropped.iter_mut().zip(tx_dropped) {
            *a += b;
        }
    }

    /// Counts an rx drop.
    pub fn rx_drop(&mut self, why: PortDrop, n: u64) {
        self.rx_dropped[why.index()] += n;
    }

    /// Counts a tx drop.
    pub fn tx_drop(&mut self, why: PortDrop, n: u64) {
        self.tx_dropped[why.index()] += n;
    }

    /// Total rx drops.
    pub fn rx_dropped_total(&self) -> u64 {
        self.rx_dropped.iter().sum()
    }

    /// Total tx drops.
    pub fn tx_dropped_total(&self) -> u64 {
        self.tx_dropped.iter().sum()
    }

    /// rx drops for one reason.
    pub fn rx_dropped_by(&self, why: PortDrop) -> u64 {
        self.rx_dropped[why.index()]
    }

    /// tx drops for one reason.
    pub fn tx_dropped_by(&self, why: PortDrop) -> u64 {
        self.tx_dropped[why.index()]
    }
}

/// What a port can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCaps {
    /// It can receive.
    pub rx: bool,
    /// It can send.
    pub tx: bool,
    /// Its receive side ends (a file): the switch can drain it and stop.
    pub finite_rx: bool,
    /// It sets `meta.hash` on received packets.
    pub rx_hash: bool,
    /// It sends packets with offload requests as they are (a virtio-net
    /// header goes with them): the datapath need not complete their
    /// checksums or segment them first.
    pub tx_offload: bool,
    /// Its frames can be left where they are and received later, nothing
    /// lost (a capture file, frames in memory, a vhost-user guest's ring,
    /// whose guest waits for room): the datapath reads it later rather
    /// than drop new flows for the upcall budget. False for a device that
    /// drops what its ring cannot hold (a NIC, AF_PACKET, AF_XDP, tap).
    pub rx_can_wait: bool,
}

impl PortCaps {
    /// A port that only sends, with no offloads (a sink: the null and
    /// capture ports, test and benchmark sinks).
    pub const SINK: PortCaps = PortCaps {
        rx: false,
        tx: true,
        finite_rx: true,
        rx_hash: false,
        tx_offload: false,
        rx_can_wait: false,
    };

    /// It receives forever (a loop or a live device): a run over it ends
    /// only on a stop condition.
    pub fn endless_rx(&self) -> bool {
        self.rx && !self.finite_rx
    }
}

/// An error that stops a port.
#[derive(Debug)]
pub struct PortError {
    /// Which port (its spec).
    pub port: String,
    /// What failed.
    pub message: String,
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "port {}: {}", self.port, self.message)
    }
}

impl std::error::Error for PortError {}

/// Problems a live port ran into that did not stop it, for the report:
/// only the first `cap`, so a device failing on every send cannot grow
/// memory without bound.
#[derive(Debug, Clone, Default)]
pub(crate) struct Warnings {
    list: Vec<String>,
    cap: usize,
}

impl Warnings {
    /// Keeps at most `cap` warnings.
    pub(crate) fn new(cap: usize) -> Self {
        Warnings {
            list: Vec::new(),
            cap,
        }
    }

    /// Records `w` unless `cap` are already kept.
    pub(crate) fn note(&mut self, w: String) {
        if self.list.len() < self.cap {
            self.list.push(w);
        }
    }

    /// The warnings kept.
    pub(crate) fn to_vec(&self) -> Vec<String> {
        self.list.clone()
    }
}

/// A switch port backend.
pub trait Port: Send {
    /// A short description (the spec it was opened from).
    fn name(&self) -> &str;

    /// What it can do.
    fn caps(&self) -> PortCaps;

    /// Appends up to `batch.remaining()` received packets, their frames
    /// taken from `pool`. Sets `meta.in_port` to `in_port`.
    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus;

    /// A file descriptor that `poll(2)` reports readable (`POLLIN`) when
    /// [`rx_burst`](Self::rx_burst) would find something, so that an idle
    /// PMD thread can sleep in the kernel until traffic comes instead of
    /// polling (a socket or a tap device). `None` (the default: DPDK,
    /// vhost-user, files, frames in memory): the port has to be polled,
    /// and a PMD that reads it never sleeps.
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Binds the port to the datapath's packet pool, once, when it joins the
    /// datapath (AF_XDP registers the pool as its UMEM here).
    fn attach_pool(&mut self, _pool: &mut PacketPool) -> Result<(), PortError> {
        Ok(())
    }

    /// Takes every packet of `batch`, leaving the batch empty: each is sent,
    /// queued inside the port (an egress queue behind a full device ring),
    /// or refused and counted in the port's drops by reason. Returns how many
    /// it took (sent or queued); the caller counts the rest as refused.
    /// Frames go back to `pool` once sent or dropped.
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize;

    /// Packets taken by `tx_burst` that still wait inside the port (in an
    /// egress queue or a device ring not yet completed).
    fn tx_pending(&self) -> usize {
        0
    }

    /// Moves waiting packets on (reclaims completions, refills the device
    /// ring, kicks). The datapath calls it every poll iteration while
    /// [`tx_pending`](Self::tx_pending) is not 0, so nothing waits for more
    /// traffic to come (seed 003's periodic drain).
    fn tx_drain(&mut self, _pool: &mut PacketPool) {}

    /// Pushes out everything still queued (files, rings), at shutdown or
    /// removal; what cannot be sent is counted as dropped.
    fn flush(&mut self, _pool: &mut PacketPool) -> Result<(), PortError> {
        Ok(())
    }

    /// The offload requests the port takes with a packet now (those it
    /// does not, the datapath carries out before the packet goes): all of
    /// them or none, by [`PortCaps::tx_offload`], unless the port says
    /// otherwise (a vhost-user port: what the guest's driver accepted).
    fn tx_offloads(&self) -> sluice_packet::meta::OffloadMask {
        if self.caps().tx_offload {
            sluice_packet::meta::OffloadMask::ALL
        } else {
            sluice_packet::meta::OffloadMask::NONE
        }
    }

    /// The port's own counters.
    fn stats(&self) -> PortStats;

    /// Its MTU, where it has one (an interface's, as read when it was
    /// opened or last set through [`Port::set_mtu`]): what the datapath
    /// checks an encapsulated packet against before queueing it here.
    fn mtu(&self) -> Option<u32> {
        None
    }

    /// Changes the MTU in place (the interface's and what the port sends),
    /// keeping the port as it is: what `ovs-vsctl set interface X
    /// mtu_request=N` asks. Ports that cannot (no interface, or buffers
    /// sized by the MTU they would outgrow) say so, and are made again.
    fn set_mtu(&mut self, mtu: u32) -> Result<(), PortError> {
        Err(PortError {
            port: self.name().to_string(),
            message: format!("cannot change its MTU to {mtu} in place"),
        })
    }

    /// A problem the port ran into that did not stop it (e.g. a truncated
    /// capture), for the final report.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::build::{Frame, L4};
    use sluice_packet::meta::Offload;

    #[test]
    fn the_mtu_counts_what_follows_the_ethernet_header_and_vlan_tags() {
        let mut pool = PacketPool::new(8, 2048).unwrap();
        pool.add_big_frames(2, 1 << 17).unwrap();
        let udp = |pad: usize| {
            Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
                .payload(&vec![0; pad])
        };
        // IPv4 20 + UDP 8 + payload: exactly 1500 fits, 1501 does not.
        for (frame, fits) in [
            (udp(1472).build(), true),
            (udp(1473).build(), false),
            (udp(1472).vlan(0x8100, 7).build(), true),
            (udp(1472).vlan(0x88a8, 7).vlan(0x8100, 7).build(), true),
            (udp(1473).vlan(0x8100, 7).build(), false),
        ] {
            let pkt = pool.alloc_from(&frame).unwrap();
            assert_eq!(fits_mtu(&pkt, 1500), fits, "{} bytes", frame.len());
            pool.free(pkt);
        }
        // A super-frame is judged by its segments, where it is cut.
        let mut gso = pool.alloc_from(&udp(9000).build()).unwrap();
        assert!(!fits_mtu(&gso, 1500));
        gso.meta.offload.flags |= Offload::GSO_UDP_L4;
        gso.meta.offload.gso_size = 1472;
        gso.meta.l3_ofs = 14;
        gso.meta.l3_type = 0x0800;
        gso.meta.l4_ofs = 34;
        gso.meta.l4_proto = 17;
        assert!(fits_mtu(&gso, 1500));
        assert!(segments_fit_mtu(&gso, 1500));
        gso.meta.offload.gso_size = 1473;
        assert!(fits_mtu(&gso, 1500));
        assert!(!segments_fit_mtu(&gso, 1500), "a 1501-byte segment");
        assert!(segments_fit_mtu(&gso, 1501));
        // Its last segment may be short; the longest is what counts.
        gso.meta.offload.gso_size = 8000;
        assert!(!segments_fit_mtu(&gso, 8027));
        assert!(segments_fit_mtu(&gso, 8028));
        pool.free(gso);
    }
}
