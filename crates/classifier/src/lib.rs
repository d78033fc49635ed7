//! Sluice layer 2: the classifier.
//!
//! - [`fields`]: every matchable field by its `ovs-ofctl` name, mapped onto
//!   the fixed-size flow key, with Open vSwitch's prerequisites.
//! - [`flow_match`]: a match is a masked key.
//! - [`parse`]: the `ovs-ofctl` flow language, with positioned errors.
//! - [`rule`]: one OpenFlow rule and its counters.
//! - [`table`]: versioned OpenFlow rule tables, flow-mods and the
//!   reference lookup; [`tss`]: their classifier (tuple space search),
//!   with [`trie`]: prefix tries on the address fields.
//! - [`group`]: OpenFlow groups (all, select, indirect, fast failover).
//! - [`xlate`]: translation of a key through the tables into flat
//!   [`dpaction`]s, rules to credit and the wildcard mask.
//!
//! Imports only `sluice-packet` (and `im` for persistent maps).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod bundle;
pub mod ct;
pub mod dpaction;
pub mod fields;
pub mod flow_match;
pub mod frag;
pub mod group;
pub mod learn;
pub mod megaflow;
pub mod meter;
pub mod multipath;
pub mod odp_text;
pub mod ovs_hash;
pub mod parse;
pub mod patch;
pub mod recirc;
pub mod rule;
pub mod subfield;
pub mod table;
pub mod trie;
pub mod tss;
pub mod tunnel;
pub mod wildcards;
pub mod xlate;

pub use action::Action;
pub use dpaction::DpAction;
pub use flow_match::Match;
pub use frag::FragHandling;
pub use parse::{
    parse_flow, parse_flow_file, parse_flow_file_parallel, parse_flow_file_with_warnings,
    parse_flow_with_warnings, FlowSpec, ParseError, Require,
};
pub use table::{Rule, RuleSet};
pub use xlate::{
    resolve_select, translate, translate_actions, BridgeView, PatchPort, Translation, XlateDrop,
    XlateEnv,
};
