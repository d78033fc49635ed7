//! OpenFlow 1.3 numbers (spec 1.3.5, section 7): message types, reserved
//! ports and tables, error types and codes, multipart types.

/// The protocol version this codec speaks.
pub const OFP13: u8 = 0x04;

/// Message types (`ofp_type`).
pub mod msg {
    #![allow(missing_docs)]
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
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
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

/// A message type's name, as the spec writes it, for logs: OpenFlow
/// 1.3's (`version` 4), or 1.0's where they differ (`VENDOR`,
/// `STATS_REQUEST`, ...); `type N` for one neither has.
pub fn message_name(version: u8, typ: u8) -> String {
    let v10 = version != OFP13;
    let name = match typ {
        0 => "HELLO",
        1 => "ERROR",
        2 => "ECHO_REQUEST",
        3 => "ECHO_REPLY",
        4 if v10 => "VENDOR",
        4 => "EXPERIMENTER",
        5 => "FEATURES_REQUEST",
        6 => "FEATURES_REPLY",
        7 => "GET_CONFIG_REQUEST",
        8 => "GET_CONFIG_REPLY",
        9 => "SET_CONFIG",
        10 => "PACKET_IN",
        11 => "FLOW_REMOVED",
        12 => "PORT_STATUS",
        13 => "PACKET_OUT",
        14 => "FLOW_MOD",
        15 if v10 => "PORT_MOD",
        15 => "GROUP_MOD",
        16 if v10 => "STATS_REQUEST",
        16 => "PORT_MOD",
        17 if v10 => "STATS_REPLY",
        17 => "TABLE_MOD",
        18 if v10 => "BARRIER_REQUEST",
        18 => "MULTIPART_REQUEST",
        19 if v10 => "BARRIER_REPLY",
        19 => "MULTIPART_REPLY",
        20 if v10 => "QUEUE_GET_CONFIG_REQUEST",
        20 => "BARRIER_REQUEST",
        21 if v10 => "QUEUE_GET_CONFIG_REPLY",
        21 => "BARRIER_REPLY",
        22 if !v10 => "QUEUE_GET_CONFIG_REQUEST",
        23 if !v10 => "QUEUE_GET_CONFIG_REPLY",
        24 if !v10 => "ROLE_REQUEST",
        25 if !v10 => "ROLE_REPLY",
        26 if !v10 => "GET_ASYNC_REQUEST",
        27 if !v10 => "GET_ASYNC_REPLY",
        28 if !v10 => "SET_ASYNC",
        29 if !v10 => "METER_MOD",
        _ => return format!("type {typ}"),
    };
    name.to_string()
}

/// Reserved port numbers (`ofp_port_no`).
pub mod port {
    #![allow(missing_docs)]
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// Controller roles (`ofp_controller_role`).
pub mod role {
    #![allow(missing_docs)]
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// Port config bits (`ofp_port_config`) Sluice acts on.
pub mod portc {
    #![allow(missing_docs)]
    pub const PORT_DOWN: u32 = 1 << 0;
    pub const NO_RECV: u32 = 1 << 2;
    pub const NO_FWD: u32 = 1 << 5;
    pub const NO_PACKET_IN: u32 = 1 << 6;
    /// `OFPPS_LINK_DOWN` (port state).
    pub const LINK_DOWN: u32 = 1 << 0;
    /// `OFPPS_LIVE` (port state): the port is up and can forward.
    pub const LIVE: u32 = 1 << 2;
}

/// `OFPTT_ALL`: every table (deletes and statistics).
pub const TABLE_ALL: u8 = 0xff;
/// `OFPG_ANY`: no group filter.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// `OFP_NO_BUFFER`.
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// Multipart types (`ofp_multipart_type`).
pub mod mp {
    #![allow(missing_docs)]
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    /// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`.
    pub const MORE: u16 = 1;
}

/// Flow-mod commands and flags.
pub mod fm {
    #![allow(missing_docs)]
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const MODIFY_STRICT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const DELETE_STRICT: u8 = 4;
    pub const SEND_FLOW_REM: u16 = 1;
    pub const CHECK_OVERLAP: u16 = 2;
    pub const RESET_COUNTS: u16 = 4;
    pub const NO_PKT_COUNTS: u16 = 8;
    pub const NO_BYT_COUNTS: u16 = 16;
}

/// An OpenFlow error: its type and code (section 7.4.4), as an ERROR
/// message carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfError {
    /// `ofp_error_type`.
    pub typ: u16,
    /// The type's code.
    pub code: u16,
}

macro_rules! errors {
    ($($name:ident = ($t:expr, $c:expr), $doc:literal;)*) => {
        impl OfError {
            $(#[doc = $doc] pub const $name: OfError = OfError { typ: $t, code: $c };)*

            /// The spec's name of this error, for logs and tests.
            pub fn name(self) -> String {
                match (self.typ, self.code) {
                    $(($t, $c) => stringify!($name).to_string(),)*
                    (t, c) => format!("error type {t} code {c}"),
                }
            }
        }
    };
}

errors! {
    HELLO_INCOMPATIBLE = (0, 0), "HELLO_FAILED/INCOMPATIBLE: no common version.";
    BAD_VERSION = (1, 0), "BAD_REQUEST/BAD_VERSION.";
    BAD_TYPE = (1, 1), "BAD_REQUEST/BAD_TYPE: a message type not supported.";
    BAD_MULTIPART = (1, 2), "BAD_REQUEST/BAD_MULTIPART: a multipart type not supported.";
    BAD_EXPERIMENTER = (1, 3), "BAD_REQUEST/BAD_EXPERIMENTER.";
    BAD_SUBTYPE = (1, 4), "BAD_REQUEST/BAD_EXP_TYPE: an experimenter message type not supported.";
    NXTTMFC_BAD_COMMAND = (0xffff, 16), "Nicira NXTTMFC_BAD_COMMAND: a TLV table mod command not known.";
    NXTTMFC_BAD_OPT_LEN = (0xffff, 17), "Nicira NXTTMFC_BAD_OPT_LEN: an option length not held.";
    NXTTMFC_BAD_FIELD_IDX = (0xffff, 18), "Nicira NXTTMFC_BAD_FIELD_IDX: a tun_metadata field past those held.";
    NXTTMFC_TABLE_FULL = (0xffff, 19), "Nicira NXTTMFC_TABLE_FULL.";
    NXTTMFC_ALREADY_MAPPED = (0xffff, 20), "Nicira NXTTMFC_ALREADY_MAPPED: the field is mapped.";
    NXTTMFC_DUP_ENTRY = (0xffff, 21), "Nicira NXTTMFC_DUP_ENTRY: the option is mapped to another field.";
    BAD_LEN = (1, 6), "BAD_REQUEST/BAD_LEN: a length that does not add up.";
    BUNDLE_UNKNOWN = (17, 0), "BUNDLE_FAILED/UNKNOWN (OpenFlow 1.4).";
    BUNDLE_BAD_ID = (17, 2), "BUNDLE_FAILED/BAD_ID: no bundle of that id.";
    BUNDLE_EXIST = (17, 3), "BUNDLE_FAILED/BUNDLE_EXIST: a bundle of that id is open.";
    BUNDLE_CLOSED = (17, 4), "BUNDLE_FAILED/BUNDLE_CLOSED: the bundle is closed.";
    BUNDLE_OUT_OF_BUNDLES = (17, 5), "BUNDLE_FAILED/OUT_OF_BUNDLES.";
    BUNDLE_BAD_TYPE = (17, 6), "BUNDLE_FAILED/BAD_TYPE: not a bundle control type.";
    BUNDLE_BAD_FLAGS = (17, 7), "BUNDLE_FAILED/BAD_FLAGS: flags other than the bundle's.";
    BUNDLE_MSG_BAD_LEN = (17, 8), "BUNDLE_FAILED/MSG_BAD_LEN: the inner message's length does not add up.";
    BUNDLE_MSG_BAD_XID = (17, 9), "BUNDLE_FAILED/MSG_BAD_XID: the inner message's xid is not the outer's.";
    BUNDLE_MSG_UNSUP = (17, 10), "BUNDLE_FAILED/MSG_UNSUP: a message a bundle does not take.";
    BUNDLE_MSG_TOO_MANY = (17, 12), "BUNDLE_FAILED/MSG_TOO_MANY.";
    BUNDLE_MSG_FAILED = (17, 13), "BUNDLE_FAILED/MSG_FAILED: a message of the bundle failed; nothing was applied.";
    BUFFER_UNKNOWN = (1, 8), "BAD_REQUEST/BUFFER_UNKNOWN: Sluice keeps no packet buffers.";
    BAD_TABLE_ID = (1, 9), "BAD_REQUEST/BAD_TABLE_ID.";
    IS_SLAVE = (1, 10), "BAD_REQUEST/IS_SLAVE.";
    BAD_PORT = (1, 11), "BAD_REQUEST/BAD_PORT.";
    BAD_PACKET = (1, 12), "BAD_REQUEST/BAD_PACKET.";
    MULTIPART_BUFFER_OVERFLOW = (1, 13), "BAD_REQUEST/MULTIPART_BUFFER_OVERFLOW: a request in parts grew past 1 MiB.";
    BAD_ACTION_TYPE = (2, 0), "BAD_ACTION/BAD_TYPE: an action not supported.";
    BAD_ACTION_LEN = (2, 1), "BAD_ACTION/BAD_LEN.";
    BAD_ACTION_EXPERIMENTER = (2, 2), "BAD_ACTION/BAD_EXPERIMENTER.";
    BAD_EXPERIMENTER_TYPE = (2, 3), "BAD_ACTION/BAD_EXPERIMENTER_TYPE: an experimenter action not supported.";
    BAD_OUT_PORT = (2, 4), "BAD_ACTION/BAD_OUT_PORT.";
    BAD_ARGUMENT = (2, 5), "BAD_ACTION/BAD_ARGUMENT.";
    BAD_OUT_GROUP = (2, 9), "BAD_ACTION/BAD_OUT_GROUP.";
    MATCH_INCONSISTENT = (2, 10), "BAD_ACTION/MATCH_INCONSISTENT: an action the match does not allow.";
    BAD_SET_TYPE = (2, 13), "BAD_ACTION/BAD_SET_TYPE: set_field of a field not settable.";
    BAD_SET_LEN = (2, 14), "BAD_ACTION/BAD_SET_LEN.";
    BAD_SET_ARGUMENT = (2, 15), "BAD_ACTION/BAD_SET_ARGUMENT.";
    UNKNOWN_INST = (3, 0), "BAD_INSTRUCTION/UNKNOWN_INST.";
    UNSUP_INST = (3, 1), "BAD_INSTRUCTION/UNSUP_INST: an instruction not supported.";
    BAD_INST_TABLE_ID = (3, 2), "BAD_INSTRUCTION/BAD_TABLE_ID: goto_table not forward.";
    BAD_INST_LEN = (3, 7), "BAD_INSTRUCTION/BAD_LEN.";
    BAD_MATCH_TYPE = (4, 0), "BAD_MATCH/BAD_TYPE: not an OXM match.";
    BAD_MATCH_LEN = (4, 1), "BAD_MATCH/BAD_LEN.";
    BAD_FIELD = (4, 6), "BAD_MATCH/BAD_FIELD: a field not supported.";
    BAD_VALUE = (4, 7), "BAD_MATCH/BAD_VALUE.";
    BAD_MASK = (4, 8), "BAD_MATCH/BAD_MASK: a mask on a field that takes none, or value bits outside it.";
    BAD_PREREQ = (4, 9), "BAD_MATCH/BAD_PREREQ: a field without its prerequisite.";
    DUP_FIELD = (4, 10), "BAD_MATCH/DUP_FIELD.";
    FLOW_MOD_UNKNOWN = (5, 0), "FLOW_MOD_FAILED/UNKNOWN.";
    TABLE_FULL = (5, 1), "FLOW_MOD_FAILED/TABLE_FULL.";
    FLOW_MOD_BAD_TABLE_ID = (5, 2), "FLOW_MOD_FAILED/BAD_TABLE_ID.";
    OVERLAP = (5, 3), "FLOW_MOD_FAILED/OVERLAP.";
    BAD_TIMEOUT = (5, 5), "FLOW_MOD_FAILED/BAD_TIMEOUT.";
    BAD_COMMAND = (5, 6), "FLOW_MOD_FAILED/BAD_COMMAND.";
    BAD_FLAGS = (5, 7), "FLOW_MOD_FAILED/BAD_FLAGS.";
    BAD_PROP_LEN = (14, 1), "BAD_PROPERTY/BAD_LEN (OpenFlow 1.4+): a property's length does not add up.";
    BAD_PROP_EXPERIMENTER = (14, 5), "BAD_PROPERTY/BAD_EXPERIMENTER (OpenFlow 1.4+): an experimenter property of id 0.";
    NXBRC_MUST_BE_ZERO = (0xffff, 4), "Nicira NXBRC_MUST_BE_ZERO: padding that must be zero is not.";
    BAD_PROP_VALUE = (14, 2), "BAD_PROPERTY/BAD_VALUE (OpenFlow 1.4+): a property's value not taken (a selection method other than dp_hash and hash).";
    GROUP_EXISTS = (6, 0), "GROUP_MOD_FAILED/GROUP_EXISTS.";
    INVALID_GROUP = (6, 1), "GROUP_MOD_FAILED/INVALID_GROUP: an id above OFPG_MAX.";
    GROUP_LOOP = (6, 7), "GROUP_MOD_FAILED/LOOP: the buckets lead back to the group.";
    UNKNOWN_GROUP = (6, 8), "GROUP_MOD_FAILED/UNKNOWN_GROUP.";
    GROUP_BAD_TYPE = (6, 10), "GROUP_MOD_FAILED/BAD_TYPE.";
    GROUP_BAD_COMMAND = (6, 11), "GROUP_MOD_FAILED/BAD_COMMAND.";
    GROUP_BAD_BUCKET = (6, 12), "GROUP_MOD_FAILED/BAD_BUCKET.";
    GROUP_BAD_WATCH = (6, 13), "GROUP_MOD_FAILED/BAD_WATCH.";
    METER_UNKNOWN_ERR = (12, 0), "METER_MOD_FAILED/UNKNOWN.";
    METER_EXISTS = (12, 1), "METER_MOD_FAILED/METER_EXISTS.";
    METER_INVALID = (12, 2), "METER_MOD_FAILED/INVALID_METER: 0, or an id above OFPM_MAX.";
    METER_UNKNOWN = (12, 3), "METER_MOD_FAILED/UNKNOWN_METER.";
    METER_BAD_COMMAND = (12, 4), "METER_MOD_FAILED/BAD_COMMAND.";
    METER_BAD_FLAGS = (12, 5), "METER_MOD_FAILED/BAD_FLAGS.";
    METER_BAD_RATE = (12, 6), "METER_MOD_FAILED/BAD_RATE.";
    METER_BAD_BURST = (12, 7), "METER_MOD_FAILED/BAD_BURST.";
    METER_BAD_BAND = (12, 8), "METER_MOD_FAILED/BAD_BAND.";
    METER_BAD_BAND_VALUE = (12, 9), "METER_MOD_FAILED/BAD_BAND_VALUE.";
    PORT_MOD_BAD_PORT = (7, 0), "PORT_MOD_FAILED/BAD_PORT.";
    PORT_MOD_BAD_HW_ADDR = (7, 1), "PORT_MOD_FAILED/BAD_HW_ADDR.";
    PORT_MOD_BAD_CONFIG = (7, 2), "PORT_MOD_FAILED/BAD_CONFIG: a config bit Sluice does not act on.";
    SWITCH_CONFIG_BAD_FLAGS = (10, 0), "SWITCH_CONFIG_FAILED/BAD_FLAGS.";
    ROLE_STALE = (11, 0), "ROLE_REQUEST_FAILED/STALE: an older generation_id.";
    ROLE_BAD_ROLE = (11, 2), "ROLE_REQUEST_FAILED/BAD_ROLE.";
    TABLE_FEATURES_EPERM = (13, 5), "TABLE_FEATURES_FAILED/EPERM: the tables' features cannot be changed.";
}

impl std::fmt::Display for OfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::error::Error for OfError {}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn message_names_by_version() {
        assert_eq!(message_name(OFP13, msg::FLOW_MOD), "FLOW_MOD");
        assert_eq!(
            message_name(OFP13, msg::MULTIPART_REQUEST),
            "MULTIPART_REQUEST"
        );
        assert_eq!(message_name(OFP13, msg::METER_MOD), "METER_MOD");
        assert_eq!(message_name(1, 16), "STATS_REQUEST");
        assert_eq!(message_name(1, 4), "VENDOR");
        assert_eq!(message_name(1, 29), "type 29");
        assert_eq!(message_name(OFP13, 200), "type 200");
    }
}
