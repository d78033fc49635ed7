//! Sluice layer 7: how Sluice is measured.
//!
//! - [`profile`]: traffic profiles after seed 004 — 64-byte UDP/IPv4
//!   frames (size selectable) over N flows chosen round robin, uniformly
//!   at random or by a rank-based Zipf law; a churn profile (a working
//!   set of flows replaced at a set rate); a miss storm (a new 5-tuple per
//!   packet, seed 001's udpping).
//! - [`rules`]: the benchmark rule sets (port forwarding, an L3 set, an
//!   L3+L4 set with several masks).
//! - [`harness`]: runs the real datapath on in-memory replay ports into a
//!   null sink, per profile and configuration, and the I/O floor.
//! - [`plot`]: the results as a chart of Mpps against flows (SVG).
//! - [`pingpong`]: the cross-core round trip a run's band shows in.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod batching;
pub mod harness;
pub mod pingpong;
pub mod plot;
pub mod profile;
pub mod rules;
pub mod storm;
