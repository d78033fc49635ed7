//! Sluice's per-bridge OpenFlow side (as Open vSwitch's `ofproto`): the
//! connections to controllers and the listeners `ovs-ofctl` reaches
//! ([`channel`], over [`target`]s, TLS by [`tls`]), the packet-ins'
//! way from the PMDs to the controllers with roles and rate limits
//! ([`hub`]), and the requests a bridge answers: flow-mods and bundles,
//! groups ([`groups`]), meters ([`meters`]), multiparts ([`multipart`]),
//! the Geneve TLV table ([`tlv`]), conntrack flushes ([`ct`]).
//!
//! The bridge itself (its rule set, ports and PMDs) is behind
//! [`Backend`]: the command line's switch and each bridge of `sluice
//! vswitchd` implement it. Below this crate: the OpenFlow codec, the
//! classifier's rule sets, the datapath's reports and the ports' sockets.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod channel;
mod ct;
mod groups;
pub mod hub;
pub mod loglimit;
mod meters;
mod multipart;
pub mod target;
pub mod tls;
mod tlv;

pub use backend::{Backend, BackendExt};
