//! Sluice layer 1: the packet.
//!
//! Packet buffers live in pre-allocated pools ([`pool`]) and travel in
//! fixed-capacity batches ([`batch`]); zero-copy header views ([`wire`])
//! read and write them; [`extract`] turns bytes into a fixed-size
//! [`FlowKey`](key::FlowKey) and records layer offsets in the packet's
//! metadata so later stages never parse again; [`rewrite`] applies header
//! changes with incremental checksum updates.
//!
//! Nothing here allocates per packet. This crate imports no other Sluice
//! crate.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
pub mod build;
pub mod copy;
pub mod encap;
pub mod extract;
pub mod hash;
pub mod key;
#[allow(unsafe_code)]
pub mod memory;
pub mod meta;
pub mod ndisc;
pub mod offload;
pub mod partial_csum;
#[allow(unsafe_code)]
pub mod pool;
#[allow(unsafe_code)]
pub mod prefetch;
pub mod rewrite;
#[allow(unsafe_code)]
pub mod slots;
pub mod tunnel;
pub mod wire;

pub use batch::{Fill, PacketBatch, Unload, BATCH_SIZE};
pub use key::FlowKey;
pub use meta::PacketMeta;
pub use pool::{Packet, PacketPool};
pub use slots::Slots;
