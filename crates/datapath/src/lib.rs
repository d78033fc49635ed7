//! Sluice layer 5: the datapath.
//!
//! [`Datapath`] owns a packet pool, ports and the rules; each poll
//! iteration takes one rx burst per port through the [`pipeline`] (extract,
//! the [`cascade`] of caches, execute) into per-port output batches. Every packet ends
//! forwarded, queued for the controller, or dropped for a named
//! [`DropReason`]; [`stats::DpStats`] checks the sums.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod cascade;
#[allow(unsafe_code)]
pub mod cycles;
pub mod datapath;
pub mod execute;
mod output;
pub mod pipeline;
mod recirc_gc;
pub mod stats;
mod upcall_budget;

pub use cascade::CacheConfig;
pub use datapath::{Datapath, DatapathConfig, DpError, PortConfig, PortReport, RxqLoad};
pub use execute::PacketIn;
pub use output::RxQueue;
pub use stats::{DpStats, DropReason, DROP_REASONS};

/// Most passes a packet makes through the datapath after its first (as
/// Open vSwitch's `MAX_RECIRC_DEPTH`): a rule set that recirculates in a
/// loop drops the packet there, counted as `recirculation limit`.
pub const MAX_RECIRC_DEPTH: u32 = 6;
