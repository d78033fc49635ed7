//! OpenFlow 1.0 with Open vSwitch's Nicira extensions: what `ovs-ofctl`
//! speaks when it is given no `-O` (its HELLO offers 1.0 alone), and what
//! older controllers speak.
//!
//! A 1.0 connection starts in the standard flow format (`ofp10_match`,
//! [`match10`]); `NXT_SET_FLOW_FORMAT` switches it to NXM ([`nxm_match`]),
//! in which flow-mods come as `NXT_FLOW_MOD` and flow dumps as
//! `NXST_FLOW`, and `NXT_FLOW_MOD_TABLE_ID` lets a flow-mod name its table
//! (in the command's high byte). Actions are OpenFlow 1.0's and Nicira's
//! ([`actions`]); what they mean is the classifier's, as from the flow
//! language. [`flow_mod`] reads flow-mods into the same operations
//! OpenFlow 1.3's make, [`stats`] the statistics requests and replies.
//!
//! Numbers are OpenFlow 1.0.0's (`openflow-1.0.h` as Open vSwitch keeps
//! it) and Nicira's (`nicira-ext.h`).

use crate::consts::OfError;
use crate::nx::NX_VENDOR;
use crate::wire::patch_u16;

pub mod actions;
pub mod flow_mod;
pub mod match10;
pub mod nxm_match;
pub mod stats;

/// The version byte.
pub const OFP10: u8 = 0x01;

/// Message types (`ofp10_type`).
pub mod t {
    #![allow(missing_docs)]
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const VENDOR: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const PORT_MOD: u8 = 15;
    pub const STATS_REQUEST: u8 = 16;
    pub const STATS_REPLY: u8 = 17;
    pub const BARRIER_REQUEST: u8 = 18;
    pub const BARRIER_REPLY: u8 = 19;
}

/// Nicira vendor message subtypes (`nicira_type`).
pub mod nxt {
    #![allow(missing_docs)]
    pub const ROLE_REQUEST: u32 = 10;
    pub const ROLE_REPLY: u32 = 11;
    pub const SET_FLOW_FORMAT: u32 = 12;
    pub const FLOW_MOD: u32 = 13;
    pub const FLOW_MOD_TABLE_ID: u32 = 15;
    pub const SET_PACKET_IN_FORMAT: u32 = 16;
    pub const SET_CONTROLLER_ID: u32 = 20;
}

/// `NXT_SET_FLOW_FORMAT`'s formats.
pub mod format {
    /// `NXFF_OPENFLOW10`: `ofp10_match`.
    pub const OPENFLOW10: u32 = 0;
    /// `NXFF_NXM`.
    pub const NXM: u32 = 2;
}

/// The `OFPP_*` numbers of 1.0 (16 bits) from `0xff00` up map to 1.1's
/// (32 bits) from `0xffffff00` up (the classifier's, which `actset_output`
/// keeps in 16 bits).
pub use sluice_classifier::fields::{port16, port32};

/// The 8-byte header, then `body`, as one message of `typ`.
pub fn message(typ: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&[OFP10, typ, 0, 0]);
    out.extend_from_slice(&xid.to_be_bytes());
    out.extend_from_slice(body);
    let len = out.len().min(usize::from(u16::MAX)) as u16;
    patch_u16(&mut out, 2, len);
    out
}

/// A Nicira vendor message of `subtype` with `body` after the subtype.
pub fn nx_message(subtype: u32, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + body.len());
    b.extend_from_slice(&NX_VENDOR.to_be_bytes());
    b.extend_from_slice(&subtype.to_be_bytes());
    b.extend_from_slice(body);
    message(t::VENDOR, xid, &b)
}

/// `NXET_VENDOR`: the error type that carries a Nicira-numbered error in
/// 1.0 (`NXVC_VENDOR_ERROR`, then vendor, type and code).
const NXET_VENDOR: u16 = 0xb0c2;

/// How 1.0 numbers an error Sluice names by its 1.3 numbers: OpenFlow
/// 1.0's own type and code where it has one, else Open vSwitch's Nicira
/// numbering (`ofp-errors.h`, `NX1.0(...)`); `None` for what neither can
/// say (sent as `NXBRC_UNENCODABLE_ERROR`).
fn triplet(e: OfError) -> Option<(bool, u16, u16)> {
    let std = |t, c| Some((false, t, c));
    let nx = |t, c| Some((true, t, c));
    match (e.typ, e.code) {
        (0, c) => std(0, c),
        (1, c @ 0..=8) => std(1, c),
        (1, 9) => nx(1, 512),
        (1, 10) => std(1, 5),
        (1, 11) => nx(1, 514),
        (2, c @ 0..=8) => std(2, c),
        (2, 9) => nx(2, 9),
        (2, 10) => nx(1, 522),
        (2, 13) => nx(1, 523),
        (2, 14) => nx(1, 524),
        (2, 15) => nx(1, 525),
        (4, 5) => nx(1, 262),
        (4, 6) => nx(0, 263),
        (4, 7) => nx(1, 258),
        (4, 8) => nx(1, 259),
        (4, 9) => nx(1, 260),
        (4, 10) => nx(1, 261),
        // A match that does not parse: NXBRC_NXM_INVALID.
        (4, 0 | 1) => nx(1, 256),
        (5, 1) => std(3, 0),
        (5, 2) => nx(5, 257),
        (5, 3) => std(3, 1),
        (5, 4) => std(3, 2),
        (5, 6) => std(3, 4),
        (5, 7) => nx(3, 258),
        (6, c) => nx(6, c),
        (7, c @ 0..=1) => std(4, c),
        _ => None,
    }
}

/// An `OFPT_ERROR` in 1.0 for `e`, with the first bytes of the offending
/// message (64 at most, as OpenFlow 1.0 asks).
pub fn error(e: OfError, xid: u32, offending: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + 64);
    match triplet(e) {
        Some((false, typ, code)) => {
            b.extend_from_slice(&typ.to_be_bytes());
            b.extend_from_slice(&code.to_be_bytes());
        }
        other => {
            // NXBRC_UNENCODABLE_ERROR for what has no 1.0 number.
            let (typ, code) = other.map_or((1, 521), |(_, t, c)| (t, c));
            b.extend_from_slice(&NXET_VENDOR.to_be_bytes());
            b.extend_from_slice(&0u16.to_be_bytes());
            b.extend_from_slice(&NX_VENDOR.to_be_bytes());
            b.extend_from_slice(&typ.to_be_bytes());
            b.extend_from_slice(&code.to_be_bytes());
        }
    }
    b.extend_from_slice(&offending[..offending.len().min(64)]);
    message(t::ERROR, xid, &b)
}

/// A port as `ofp10_phy_port` describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Port {
    /// Its number (1.0's 16 bits).
    pub port_no: u16,
    /// Its interface's Ethernet address (zeros: none).
    pub hw_addr: [u8; 6],
    /// Its name (15 bytes at most on the wire).
    pub name: String,
    /// `OFPPC_*` (1.0's bits are 1.3's for those Sluice sets).
    pub config: u32,
    /// `OFPPS_LINK_DOWN` (1) or not.
    pub state: u32,
}

impl Port {
    /// Appends the 48-byte `ofp10_phy_port`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&self.hw_addr);
        crate::wire::put_str(out, &self.name, 16);
        out.extend_from_slice(&self.config.to_be_bytes());
        out.extend_from_slice(&self.state.to_be_bytes());
        // curr, advertised, supported, peer: no features known.
        out.extend_from_slice(&[0; 16]);
    }
}

/// `OFPT_FEATURES_REPLY`: the datapath id, tables, capabilities (flow,
/// table and port statistics), the 1.0 actions Sluice takes, the ports.
pub fn features_reply(xid: u32, datapath_id: u64, n_tables: u8, ports: &[Port]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + 48 * ports.len());
    b.extend_from_slice(&datapath_id.to_be_bytes());
    // No buffers.
    b.extend_from_slice(&0u32.to_be_bytes());
    b.push(n_tables);
    b.extend_from_slice(&[0; 3]);
    b.extend_from_slice(&(1u32 | 2 | 4).to_be_bytes());
    // OUTPUT .. SET_TP_DST and ENQUEUE: bits 0..=11.
    b.extend_from_slice(&0x0fffu32.to_be_bytes());
    for p in ports {
        p.encode(&mut b);
    }
    message(t::FEATURES_REPLY, xid, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_map_between_16_and_32_bits() {
        for (p16, p32) in [
            (1u16, 1u32),
            (0xfeff, 0xfeff),
            (0xfff8, crate::consts::port::IN_PORT),
            (0xfffd, crate::consts::port::CONTROLLER),
            (0xffff, crate::consts::port::ANY),
        ] {
            assert_eq!(port32(p16), p32);
            assert_eq!(port16(p32), p16);
        }
        assert_eq!(port16(0x1_0000), 0xffff);
    }

    /// Errors 1.0 numbers itself keep its numbers; the others travel as
    /// Open vSwitch's Nicira vendor errors, as `ovs-ofctl` decodes them.
    #[test]
    fn errors_in_their_1_0_numbers() {
        let e = error(OfError::BAD_OUT_PORT, 7, b"abc");
        assert_eq!(&e[..4], &[1, t::ERROR, 0, 15]);
        assert_eq!(&e[8..12], &[0, 2, 0, 4]);
        assert_eq!(&e[12..], b"abc");
        let e = error(OfError::BAD_PREREQ, 7, b"");
        assert_eq!(&e[8..12], &[0xb0, 0xc2, 0, 0]);
        assert_eq!(&e[12..20], &[0, 0, 0x23, 0x20, 0, 1, 1, 4]);
        let e = error(OfError::OVERLAP, 7, b"");
        assert_eq!(&e[8..12], &[0, 3, 0, 1]);
        // Nothing in 1.0 for a meter error: NXBRC_UNENCODABLE_ERROR.
        let e = error(OfError::METER_UNKNOWN, 7, b"");
        assert_eq!(&e[16..20], &[0, 1, 0x02, 0x09]);
    }
}
