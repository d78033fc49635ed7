//! Sluice layer 3: the flow caches in front of the megaflow classifier.
//!
//! - [`emc`]: exact-match cache. Small, per thread, full-key compare,
//!   probabilistic insertion so that a flood of new flows does not thrash it.
//! - [`smc`]: signature match cache (seed 004's DFC/CD design). Large,
//!   way-associative, 16-bit signatures and an index into the megaflow
//!   table; a hit is a candidate the caller verifies against the
//!   megaflow's mask and key.
//!
//! Both hold plain indexes ([`CacheRef`]), not the flows: the datapath
//! resolves and validates them, so a cache can never serve a stale or
//! wrong decision on its own. Imports only `sluice-packet`.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod emc;
pub mod smc;

/// What a cache entry points at: a megaflow slot and its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CacheRef {
    /// Slot index in the megaflow table.
    pub idx: u32,
    /// The slot's generation when the entry was made.
    pub gen: u32,
}
