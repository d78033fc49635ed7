//! What a datapath is made with ([`DatapathConfig`], [`PortConfig`]),
//! what it refuses ([`DpError`]) and what it reports of its ports
//! ([`PortReport`], [`RxqLoad`]).

use sluice_classifier::action::OFPP_MAX;
use sluice_packet::pool::{PoolError, DEFAULT_FRAME_SIZE};
use sluice_port::{PortError, PortStats};

use crate::autobatch::TxFlush;
use crate::cascade::CacheConfig;

/// A port's OpenFlow config bits the datapath acts on (PORT_MOD).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortConfig {
    /// What it receives is dropped (`no_recv`, or the port is down).
    pub no_recv: bool,
    /// Nothing is forwarded to it (`no_fwd`, or the port is down).
    pub no_fwd: bool,
    /// What it receives is never sent to a controller (`no_packet_in`).
    pub no_packet_in: bool,
}

/// Datapath sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatapathConfig {
    /// Frames in the packet pool (16,384: room for misses that wait for
    /// the upcall budget, [`DatapathConfig::upcall_queue_cap`]; frames are
    /// taken last-freed first, so the ones in use stay few and warm).
    pub pool_frames: usize,
    /// Bytes per frame (a power of two; 2048 holds a 1518-byte frame).
    pub frame_size: usize,
    /// Big frames (128 KiB each) for packets larger than a frame: GSO
    /// super-frames from vnet-header ports, jumbo frames. Their memory is
    /// only touched when used. 0: none, such packets are dropped as `too big`.
    pub big_frames: usize,
    /// Packet-ins kept for the controller before new ones are dropped.
    pub packet_in_queue: usize,
    /// The flow caches.
    pub cache: CacheConfig,
    /// How long a port's output batch may wait for more packets (OVS's
    /// `tx-flush-interval`): measured per port (`auto`, the default:
    /// [`crate::autobatch`]) or at most N µs (0: to the end of each rx
    /// burst, OVS's default).
    pub tx_flush: TxFlush,
    /// VLAN tags parsed into the flow key, as Open vSwitch's
    /// `other_config:vlan-limit`: 1 (OVS's default) parses the outer tag
    /// only, so a second tag's TPID is the EtherType and no L3 field is
    /// keyed; 2, or 0 (no limit), parses both tags a key holds.
    pub vlan_limit: usize,
    /// Pad frames shorter than 60 bytes with zeros to 60 when they are
    /// sent, as an Ethernet NIC does on the wire (false, as Open vSwitch:
    /// a frame leaves as short as its actions made it, e.g. after a pop).
    pub pad_short_frames: bool,
    /// Cut a packet-in to its `controller` action's `max_len`, as
    /// OpenFlow says (false, as Open vSwitch 3.1, which sends the whole
    /// packet whatever the action's `max_len`).
    pub packet_in_max_len: bool,
    /// Keep PMD performance metrics ([`crate::perf`], OVS's
    /// `pmd-perf-metrics`; off, as OVS).
    pub perf_metrics: bool,
    /// Microseconds with nothing received after which a PMD thread whose
    /// ports all have a file descriptor to wait on (tap, AF_PACKET,
    /// AF_XDP, stream sockets: [`sluice_port::Port::rx_fd`]) sleeps in
    /// `poll(2)` until one is readable or a command comes, as Open
    /// vSwitch's main thread polls such ports. 0: it never sleeps. A PMD
    /// with a DPDK, vhost-user or file port always polls.
    pub sleep_after_us: u32,
}

/// [`DatapathConfig::sleep_after_us`]'s default: long enough that a busy
/// port's gaps (a TCP stream's, a request and its answer) never put the
/// thread to sleep, short enough that a quiet switch is asleep at once.
pub const DEFAULT_SLEEP_AFTER_US: u32 = 200;

impl DatapathConfig {
    /// Misses that may wait for the upcall budget at once: the pool's
    /// frames less what receiving and sending need (a quarter, at least
    /// 1,024). 12,288 with the default pool: a burst of 10,000 new flows
    /// waits whole.
    pub fn upcall_queue_cap(&self) -> usize {
        self.pool_frames
            .saturating_sub((self.pool_frames / 4).max(1024))
    }
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig {
            pool_frames: 16384,
            frame_size: DEFAULT_FRAME_SIZE,
            big_frames: 512,
            packet_in_queue: 1024,
            cache: CacheConfig::default(),
            tx_flush: TxFlush::Auto,
            vlan_limit: sluice_packet::extract::DEFAULT_VLAN_LIMIT,
            pad_short_frames: false,
            packet_in_max_len: false,
            perf_metrics: false,
            sleep_after_us: DEFAULT_SLEEP_AFTER_US,
        }
    }
}

/// Why a datapath could not be set up.
#[derive(Debug)]
pub enum DpError {
    /// The packet pool.
    Pool(PoolError),
    /// Two ports with one number.
    DuplicatePort(u32),
    /// A port number outside 1..=0xffffff00.
    BadPortNumber(u32),
    /// A port failed.
    Port(PortError),
    /// No port has this number.
    NoSuchPort(u32),
    /// This PMD does not poll that rx queue of the port (or it is the
    /// queue it sends on, which stays).
    NoSuchRxq(u32, u32),
}

impl std::fmt::Display for DpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DpError::Pool(e) => write!(f, "packet pool: {e}"),
            DpError::DuplicatePort(n) => write!(f, "port number {n} is used twice"),
            DpError::BadPortNumber(n) => {
                write!(f, "port number {n} is out of range (1 to {OFPP_MAX})")
            }
            DpError::Port(e) => write!(f, "{e}"),
            DpError::NoSuchPort(n) => write!(f, "no port {n}"),
            DpError::NoSuchRxq(n, q) => {
                write!(f, "this PMD has no movable rx queue {q} of port {n}")
            }
        }
    }
}

impl std::error::Error for DpError {}

/// A port's numbers for reports.
#[derive(Debug, Clone)]
pub struct PortReport {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Spec / name.
    pub name: String,
    /// Counters.
    pub stats: PortStats,
    /// Problems that did not stop it.
    pub warnings: Vec<String>,
    /// Whether the port receives (has an rx queue to poll).
    pub receives: bool,
    /// The rx queues this PMD polls, each with its cycles (the first is
    /// the queue it also sends on).
    pub rxqs: Vec<RxqLoad>,
    /// Its `tx-flush-interval` in force.
    pub tx_flush: TxFlush,
    /// What its sends cost and the hold `auto` chose (measured whatever
    /// the setting).
    pub kicks: crate::autobatch::KickReport,
    /// How long its batches waited for company.
    pub batch_waits: crate::output::BatchWaits,
}

/// One rx queue's load on a PMD, for `pmd-rxq-show` and rebalancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxqLoad {
    /// Queue number among the port's queues.
    pub qid: u32,
    /// TSC cycles spent receiving from it and processing what came.
    pub rx_cycles: u64,
    /// Whether it is the queue this PMD also sends on (it stays with the
    /// PMD; the others can move).
    pub home: bool,
}
