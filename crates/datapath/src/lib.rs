//! Sluice layer 5: the datapath.
//!
//! [`Datapath`] owns a packet pool, ports and the rules; each poll
//! iteration takes one rx burst per port through the [`pipeline`] (extract,
//! the [`cascade`] of caches, execute) into per-port output batches. Every packet ends
//! forwarded, queued for the controller, or dropped for a named
//! [`DropReason`]; [`stats::DpStats`] checks the sums.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod autobatch;
pub mod capture;
pub mod cascade;
#[allow(unsafe_code)]
pub mod cycles;
pub mod datapath;
pub mod execute;
mod fragments;
mod output;
mod packet_in;
pub mod perf;
pub mod pipeline;
pub mod probe;
mod recirc_gc;
mod recirc_queue;
pub mod stats;
mod upcall_budget;
mod upcall_queue;

pub use autobatch::TxFlush;
pub use cascade::CacheConfig;
pub use datapath::{
    Datapath, DatapathConfig, DpError, PortConfig, PortReport, RxqLoad, DEFAULT_SLEEP_AFTER_US,
};
pub use output::{BatchWaits, RxQueue};
pub use packet_in::PacketIn;
pub use probe::{CacheLevel, CacheProbe};
pub use stats::{DpStats, DropReason, DROP_REASONS};

/// Most passes a packet makes through the datapath after its first (as
/// Open vSwitch's `MAX_RECIRC_DEPTH`): a rule set that recirculates in a
/// loop drops the packet there, counted as `recirculation limit`.
pub const MAX_RECIRC_DEPTH: u32 = 6;

/// The longest `tx-flush-interval` (µs), as Open vSwitch's (one second).
pub const MAX_TX_FLUSH_INTERVAL_US: u64 = 1_000_000;

/// Checks a `tx-flush-interval` against [`MAX_TX_FLUSH_INTERVAL_US`].
pub fn check_tx_flush_interval(us: u64) -> Result<u64, String> {
    if us > MAX_TX_FLUSH_INTERVAL_US {
        return Err(format!(
            "tx-flush-interval {us}: give 0 to {MAX_TX_FLUSH_INTERVAL_US} µs"
        ));
    }
    Ok(us)
}
