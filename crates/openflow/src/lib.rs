//! Sluice layer 6a: OpenFlow 1.3 on the wire (and 1.0 with Nicira's
//! extensions, [`of10`]).
//!
//! - [`msg`]: framing and the messages, decoded from untrusted bytes
//!   (every length checked; an error names the spec's error type and code
//!   to answer with) and encoded back.
//! - [`oxm`]: match fields; [`action`]: actions and instructions;
//!   [`nx`]: the Nicira messages Open vSwitch's tools send (TLV table);
//!   [`ct_flush`]: the connection-tracker flushes (`NXT_CT_FLUSH`);
//!   [`nxm`]: Nicira's register actions (`load`, `move`);
//!   [`multipart`]: statistics and descriptions; [`features`]: what the
//!   tables can do, as `TABLE_FEATURES` says it.
//! - [`of10`]: OpenFlow 1.0 and the Nicira flow format (NXM), what
//!   `ovs-ofctl` speaks without `-O`, onto the same operations.
//! - [`convert`]: the mapping onto the classifier's matches, actions and
//!   rules (what the flow language also produces), with the spec's
//!   prerequisite and argument checks.
//!
//! Imports `sluice-classifier` and below only.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod async_msg;
pub mod consts;
pub mod convert;
pub mod ct_flush;
pub mod features;
pub mod group;
pub mod meter;
pub mod msg;
pub mod multipart;
pub mod nx;
pub mod nxm;
pub mod of10;
pub mod of14;
pub mod of15;
pub mod oxm;
pub mod wire;

pub use consts::OfError;
pub use msg::{decode, encode, frame_len, Header, Message};
