//! Sluice's OVSDB protocol (RFC 7047), without I/O: what the drop-in
//! `ovs-vswitchd` speaks to a stock `ovsdb-server`. Bytes in, events and
//! bytes out, so that every part is tested and fuzzed without a server:
//!
//! - [`framing`]: JSON texts out of a byte stream, wherever reads cut it;
//! - [`message`]: JSON-RPC requests, notifications and replies;
//! - [`datum`]: OVSDB values (atoms, sets, maps, UUIDs) in their JSON form;
//! - [`schema`]: each column's shape, which `update2` diffs depend on;
//! - [`replica`]: the monitored tables, kept by `update`/`update2`;
//! - [`client`]: a session: schema, lock, `monitor_cond` (or `monitor`),
//!   `transact`, `echo` both ways.

pub mod client;
pub mod datum;
pub mod framing;
pub mod message;
pub mod replica;
pub mod schema;

pub use client::{Client, Event, SessionError};
pub use datum::{Atom, Datum, Uuid};
pub use replica::{Changed, Replica, Row};
pub use schema::{Schema, Shape};
