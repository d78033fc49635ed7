//! Sluice layer 5: the datapath.
//!
//! [`Datapath`] owns a packet pool, ports and the rules; each poll
//! iteration takes one rx burst per port through the [`pipeline`] (extract,
//! classify, execute) into per-port output batches. Every packet ends
//! forwarded, queued for the controller, or dropped for a named
//! [`DropReason`](stats::DropReason); [`stats::DpStats`] checks the sums.

#![warn(missing_docs)]
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod cycles;
pub mod datapath;
mod output;
pub mod pipeline;
pub mod stats;

pub use datapath::{Datapath, DatapathConfig, DpError, PortReport};
pub use pipeline::PacketIn;
pub use stats::{DpStats, DropReason, DROP_REASONS};
