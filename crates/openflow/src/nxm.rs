//! Nicira's register actions, as Open vSwitch's tools send them in
//! OpenFlow 1.3 (experimenter actions of Nicira's id): `NXAST_REG_LOAD`
//! (`load:`), `NXAST_REG_LOAD2` (a masked `set_field`, by OXM) and
//! `NXAST_REG_MOVE` (`move:`), with the 32-bit NXM headers they name
//! fields by (class, field number, length).

use sluice_classifier::fields::{field_by_name, Field, IN_PORT16};

use crate::consts::OfError;
use crate::nx::NX_VENDOR;
use crate::oxm::Oxm;
use crate::wire::Rd;

mod controller;
mod learn;
mod nat;
pub use learn::{NxLearn, NxLearnDst, NxLearnSpec, NxLearnSrc};

/// Nicira action subtypes.
pub mod subtype {
    /// `NXAST_REG_MOVE`.
    pub const REG_MOVE: u16 = 6;
    /// `NXAST_STACK_PUSH`.
    pub const STACK_PUSH: u16 = 27;
    /// `NXAST_STACK_POP`.
    pub const STACK_POP: u16 = 28;
    /// `NXAST_NOTE`.
    pub const NOTE: u16 = 8;
    /// `NXAST_OUTPUT_REG`.
    pub const OUTPUT_REG: u16 = 15;
    /// `NXAST_REG_LOAD`.
    pub const REG_LOAD: u16 = 7;
    /// `NXAST_REG_LOAD2`.
    pub const REG_LOAD2: u16 = 33;
    /// `NXAST_CT`.
    pub const CT: u16 = 35;
    /// `NXAST_NAT` (only inside `NXAST_CT`).
    pub const NAT: u16 = 36;
    /// `NXAST_CLONE`.
    pub const CLONE: u16 = 42;
    /// `NXAST_LEARN`.
    pub const LEARN: u16 = 16;
    /// `NXAST_LEARN2` (with a limit and result_dst).
    pub const LEARN2: u16 = 45;
    /// `NXAST_POP_QUEUE`.
    pub const POP_QUEUE: u16 = 5;
    /// `NXAST_SAMPLE`.
    pub const SAMPLE: u16 = 29;
    /// `NXAST_SAMPLE2` (with a sampling port).
    pub const SAMPLE2: u16 = 38;
    /// `NXAST_SAMPLE3` (with a direction).
    pub const SAMPLE3: u16 = 41;
    /// `NXAST_CONJUNCTION`.
    pub const CONJUNCTION: u16 = 34;
    /// `NXAST_RESUBMIT` (a port, the current table).
    pub const RESUBMIT: u16 = 1;
    /// `NXAST_RESUBMIT_TABLE`.
    pub const RESUBMIT_TABLE: u16 = 14;
    /// `NXAST_CT_CLEAR`.
    pub const CT_CLEAR: u16 = 43;
    /// `NXAST_MULTIPATH`.
    pub const MULTIPATH: u16 = 10;
    /// `NXAST_DEC_TTL_CNT_IDS`.
    pub const DEC_TTL_CNT_IDS: u16 = 21;
    /// `NXAST_FIN_TIMEOUT`.
    pub const FIN_TIMEOUT: u16 = 19;
    /// `NXAST_BUNDLE`.
    pub const BUNDLE: u16 = 12;
    /// `NXAST_BUNDLE_LOAD`.
    pub const BUNDLE_LOAD: u16 = 13;
    /// `NXAST_CONTROLLER` (max_len, controller id, reason).
    pub const CONTROLLER: u16 = 20;
    /// `NXAST_CONTROLLER2` (the same, and userdata, as properties).
    pub const CONTROLLER2: u16 = 37;
    /// `NXAST_CHECK_PKT_LARGER`.
    pub const CHECK_PKT_LARGER: u16 = 49;
}

/// `NXAST_CT`'s flags.
pub mod ct_flag {
    /// `NX_CT_F_COMMIT`.
    pub const COMMIT: u16 = 1;
    /// `NX_CT_F_FORCE`.
    pub const FORCE: u16 = 2;
}

/// `NXAST_NAT`'s flags (`NX_NAT_F_*`).
pub mod nat_flag {
    /// Source NAT.
    pub const SRC: u16 = 1;
    /// Destination NAT.
    pub const DST: u16 = 2;
    /// `persistent`.
    pub const PERSISTENT: u16 = 4;
    /// `hash`.
    pub const PROTO_HASH: u16 = 8;
    /// `random`.
    pub const PROTO_RANDOM: u16 = 16;
}

/// `NXAST_CT`'s table when it recirculates to none.
pub const CT_RECIRC_NONE: u8 = 255;

/// (NXM class, field number, length in bytes, classifier field): what
/// `NXM_OF_*`, `NXM_NX_*` and `OXM_OF_*` headers name (OVS's
/// `meta-flow.h`). One entry per classifier field, the header OVS sends
/// for it first.
const HEADERS: &[(u16, u8, u8, &str)] = &[
    (0x0000, 0, 2, "in_port16"),
    (0x0000, 1, 6, "dl_dst"),
    (0x0000, 2, 6, "dl_src"),
    (0x0000, 3, 2, "dl_type"),
    (0x0000, 4, 2, "vlan_tci"),
    (0x0000, 5, 1, "nw_tos"),
    (0x0000, 6, 1, "nw_proto"),
    (0x0000, 7, 4, "nw_src"),
    (0x0000, 8, 4, "nw_dst"),
    (0x0000, 9, 2, "tcp_src"),
    (0x0000, 10, 2, "tcp_dst"),
    (0x0000, 11, 2, "udp_src"),
    (0x0000, 12, 2, "udp_dst"),
    (0x0000, 13, 1, "icmp_type"),
    (0x0000, 14, 1, "icmp_code"),
    (0x0000, 15, 2, "arp_op"),
    (0x0000, 16, 4, "arp_spa"),
    (0x0000, 17, 4, "arp_tpa"),
    (0x0001, 16, 8, "tun_id"),
    (0x0001, 17, 6, "arp_sha"),
    (0x0001, 18, 6, "arp_tha"),
    (0x0001, 19, 16, "ipv6_src"),
    (0x0001, 20, 16, "ipv6_dst"),
    (0x0001, 21, 1, "icmpv6_type"),
    (0x0001, 22, 1, "icmpv6_code"),
    (0x0001, 23, 16, "nd_target"),
    (0x0001, 24, 6, "nd_sll"),
    (0x0001, 25, 6, "nd_tll"),
    (0x0001, 26, 1, "nw_frag"),
    (0x0001, 27, 4, "ipv6_label"),
    (0x0001, 28, 1, "ip_ecn"),
    (0x0001, 29, 1, "nw_ttl"),
    (0x0001, 30, 1, "mpls_ttl"),
    (0x0001, 31, 4, "tun_src"),
    (0x0001, 32, 4, "tun_dst"),
    (0x0001, 34, 2, "tcp_flags"),
    (0x0001, 104, 2, "tun_flags"),
    // Variable length: OVS names them with their largest (124 bytes).
    (0x0001, 40, 124, "tun_metadata0"),
    (0x0001, 41, 124, "tun_metadata1"),
    (0x0001, 42, 124, "tun_metadata2"),
    (0x0001, 43, 124, "tun_metadata3"),
    (0x0001, 109, 16, "tun_ipv6_src"),
    (0x0001, 110, 16, "tun_ipv6_dst"),
    (0x0001, 105, 4, "ct_state"),
    (0x0001, 106, 2, "ct_zone"),
    (0x0001, 107, 4, "ct_mark"),
    (0x0001, 108, 16, "ct_label"),
    (0x0001, 119, 1, "ct_nw_proto"),
    (0x0001, 120, 4, "ct_nw_src"),
    (0x0001, 121, 4, "ct_nw_dst"),
    (0x0001, 122, 16, "ct_ipv6_src"),
    (0x0001, 123, 16, "ct_ipv6_dst"),
    (0x0001, 124, 2, "ct_tp_src"),
    (0x0001, 125, 2, "ct_tp_dst"),
    (0x0001, 37, 4, "conj_id"),
    (0x0001, 33, 4, "pkt_mark"),
    (0x0001, 0, 4, "reg0"),
    (0x0001, 1, 4, "reg1"),
    (0x0001, 2, 4, "reg2"),
    (0x0001, 3, 4, "reg3"),
    (0x0001, 4, 4, "reg4"),
    (0x0001, 5, 4, "reg5"),
    (0x0001, 6, 4, "reg6"),
    (0x0001, 7, 4, "reg7"),
    (0x0001, 8, 4, "reg8"),
    (0x0001, 9, 4, "reg9"),
    (0x0001, 10, 4, "reg10"),
    (0x0001, 11, 4, "reg11"),
    (0x0001, 12, 4, "reg12"),
    (0x0001, 13, 4, "reg13"),
    (0x0001, 14, 4, "reg14"),
    (0x0001, 15, 4, "reg15"),
    (0x0001, 111, 16, "xxreg0"),
    (0x0001, 112, 16, "xxreg1"),
    (0x0001, 113, 16, "xxreg2"),
    (0x0001, 114, 16, "xxreg3"),
    (0x8001, 0, 8, "xreg0"),
    (0x8001, 1, 8, "xreg1"),
    (0x8001, 2, 8, "xreg2"),
    (0x8001, 3, 8, "xreg3"),
    (0x8001, 4, 8, "xreg4"),
    (0x8001, 5, 8, "xreg5"),
    (0x8001, 6, 8, "xreg6"),
    (0x8001, 7, 8, "xreg7"),
    (0x8000, 0, 4, "in_port"),
    (0x8000, 2, 8, "metadata"),
    (0x8000, 6, 2, "vlan_vid"),
    (0x8000, 7, 1, "vlan_pcp"),
    (0x8000, 8, 1, "ip_dscp"),
    (0x8000, 17, 2, "sctp_src"),
    (0x8000, 18, 2, "sctp_dst"),
    (0x8000, 34, 4, "mpls_label"),
    (0x8000, 35, 1, "mpls_tc"),
    (0x8000, 36, 1, "mpls_bos"),
    (0x8000, 37, 3, "pbb_isid"),
    (0x8000, 39, 2, "ipv6_exthdr"),
];

fn field_named(name: &str) -> Option<&'static Field> {
    if name == IN_PORT16.name {
        Some(&IN_PORT16)
    } else {
        field_by_name(name)
    }
}

/// OpenFlow's own (`OXM_OF_*`) headers of fields [`HEADERS`] names by
/// their `NXM_*` header: what OpenFlow 1.5's `COPY_FIELD` and OVS's
/// actions in 1.5 name them by (read, never written).
const OXM_ALIASES: &[(u8, u8, &str)] = &[
    (3, 6, "dl_dst"),
    (4, 6, "dl_src"),
    (5, 2, "dl_type"),
    (9, 1, "ip_ecn"),
    (10, 1, "nw_proto"),
    (11, 4, "nw_src"),
    (12, 4, "nw_dst"),
    (13, 2, "tcp_src"),
    (14, 2, "tcp_dst"),
    (15, 2, "udp_src"),
    (16, 2, "udp_dst"),
    (19, 1, "icmp_type"),
    (20, 1, "icmp_code"),
    (21, 2, "arp_op"),
    (22, 4, "arp_spa"),
    (23, 4, "arp_tpa"),
    (24, 6, "arp_sha"),
    (25, 6, "arp_tha"),
    (26, 16, "ipv6_src"),
    (27, 16, "ipv6_dst"),
    (28, 4, "ipv6_label"),
    (29, 1, "icmpv6_type"),
    (30, 1, "icmpv6_code"),
    (31, 16, "nd_target"),
    (32, 6, "nd_sll"),
    (33, 6, "nd_tll"),
    (38, 8, "tun_id"),
    (42, 2, "tcp_flags"),
];

/// The classifier field an action's 32-bit NXM header names (`move`,
/// `load`, `push`...): as [`field_of_header`], and a `tun_metadata` field
/// by the length its mapping gives it (what OVS writes there) as by its
/// largest.
pub fn field_of_action_header(h: u32) -> Option<&'static Field> {
    let (class, field, len) = ((h >> 16) as u16, (h >> 9) as u8 & 0x7f, h as u8);
    if class == 0x0001 && (40..=43).contains(&field) && (1..=124).contains(&len) {
        return field_of_header((h & !0xff) | 124);
    }
    field_of_header(h)
}

/// The classifier field a 32-bit NXM header names (its mask bit
/// ignored), if Sluice has it; OpenFlow's own header of a field is taken
/// as its NXM one.
pub fn field_of_header(h: u32) -> Option<&'static Field> {
    let (class, field, len) = ((h >> 16) as u16, (h >> 9) as u8 & 0x7f, h as u8);
    let name = match HEADERS
        .iter()
        .find(|e| e.0 == class && e.1 == field && e.2 == len)
    {
        Some(e) => e.3,
        None if class == 0x8000 => OXM_ALIASES.iter().find(|e| e.0 == field && e.1 == len)?.2,
        None => return None,
    };
    field_named(name)
}

/// The NXM header of a classifier field (`None` for a field with none:
/// `tp_src`/`tp_dst` are named as TCP's, as `move:` parses them).
pub fn header_of(field: &Field) -> Option<u32> {
    let name = match field.name {
        "tp_src" => "tcp_src",
        "tp_dst" => "tcp_dst",
        n => n,
    };
    let &(class, f, len, _) = HEADERS.iter().find(|e| e.3 == name)?;
    Some(u32::from(class) << 16 | u32::from(f) << 9 | u32::from(len))
}

/// A Nicira register action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NxAction {
    /// `NXAST_FIN_TIMEOUT`: `fin_timeout(idle_timeout=,hard_timeout=)`.
    FinTimeout {
        /// Idle timeout.
        idle: u16,
        /// Hard timeout.
        hard: u16,
    },
    /// `NXAST_DEC_TTL_CNT_IDS`: `dec_ttl(ID,...)`.
    DecTtlIds(Vec<u16>),
    /// `NXAST_BUNDLE` (no `dst`) / `NXAST_BUNDLE_LOAD`.
    Bundle {
        /// `NX_BD_ALG_*`.
        algorithm: u16,
        /// `NX_HASH_FIELDS_*`.
        fields: u16,
        /// The hash's basis.
        basis: u16,
        /// The member ports (16 bits).
        members: Vec<u16>,
        /// `bundle_load`'s destination: NXM header, lowest bit, bits.
        dst: Option<(u32, u16, u16)>,
    },
    /// `NXAST_MULTIPATH`: a hash of `fields` picks a link into bits of
    /// `dst`.
    Multipath {
        /// `NX_HASH_FIELDS_*`.
        fields: u16,
        /// The hash's basis.
        basis: u16,
        /// `NX_MP_ALG_*`.
        algorithm: u16,
        /// The highest link.
        max_link: u16,
        /// `iter_hash`'s modulo.
        arg: u32,
        /// Lowest bit of `dst` written.
        ofs: u16,
        /// Bits written.
        n_bits: u16,
        /// NXM header of the field.
        dst: u32,
    },
    /// `NXAST_CONTROLLER` / `NXAST_CONTROLLER2`: a packet-in with these
    /// settings (`controller(...)`); the second form when there is
    /// userdata.
    Controller {
        /// Bytes of the packet.
        max_len: u16,
        /// The controllers' id.
        id: u16,
        /// `OFPR_*`.
        reason: u8,
        /// Bytes for the controller.
        userdata: Vec<u8>,
        /// The controller meter (`NXAC2PT_METER_ID`).
        meter_id: Option<u32>,
        /// `NXAC2PT_PAUSE`: a continuation.
        pause: bool,
    },
    /// `NXAST_REG_LOAD`: `value` into bits `ofs..ofs + n_bits` of the
    /// field `dst` names.
    RegLoad {
        /// NXM header of the field.
        dst: u32,
        /// Lowest bit.
        ofs: u16,
        /// Bits (1 to 64).
        n_bits: u16,
        /// The value (in the low `n_bits`).
        value: u64,
    },
    /// `NXAST_REG_LOAD2`: an OXM, maybe masked (the bits to write).
    RegLoad2(Oxm),
    /// `NXAST_CT`: the `ct` action.
    Ct {
        /// [`ct_flag`]s.
        flags: u16,
        /// NXM header of the zone's field (0: `zone_imm` is the zone).
        zone_src: u32,
        /// The zone, or the field's `ofs << 6 | (n_bits - 1)`.
        zone_imm: u16,
        /// The table to go on in ([`CT_RECIRC_NONE`]: none).
        table: u8,
        /// `alg` (0: none).
        alg: u16,
        /// The nested actions (`exec(...)`), as OpenFlow actions.
        actions: Vec<crate::action::OfAction>,
    },
    /// `NXAST_CT_CLEAR`.
    CtClear,
    /// `NXAST_NAT`: a `ct` action's `nat(...)`.
    Nat(sluice_conntrack::Nat),
    /// `NXAST_OUTPUT_REG`: out of the port `n_bits` bits of `src` at
    /// `ofs` hold.
    OutputReg {
        /// NXM header of the field.
        src: u32,
        /// Lowest bit.
        ofs: u16,
        /// Bits.
        n_bits: u16,
        /// Bytes to the controller, for `CONTROLLER`.
        max_len: u16,
    },
    /// `NXAST_CHECK_PKT_LARGER`: 1 into bit `ofs` of `dst` for a packet
    /// longer than `pkt_len`, else 0.
    CheckPktLarger {
        /// The length compared with.
        pkt_len: u16,
        /// The bit written.
        ofs: u16,
        /// NXM header of the field.
        dst: u32,
    },
    /// `NXAST_NOTE`: bytes that do nothing (with their padding).
    Note(Vec<u8>),
    /// `NXAST_CLONE`: actions on a copy of the packet.
    Clone(Vec<crate::action::OfAction>),
    /// `NXAST_LEARN`.
    Learn(NxLearn),
    /// `NXAST_POP_QUEUE`.
    PopQueue,
    /// `NXAST_SAMPLE`, `SAMPLE2` or `SAMPLE3` (by what it carries).
    Sample(sluice_classifier::action::Sample),
    /// `NXAST_CONJUNCTION`: clause `clause` (from 0) of `n_clauses` of
    /// conjunction `id`.
    Conjunction {
        /// The conjunction.
        id: u32,
        /// The clause, from 0.
        clause: u8,
        /// How many.
        n_clauses: u8,
    },
    /// `NXAST_RESUBMIT` (`table` 255) or `NXAST_RESUBMIT_TABLE`: look up
    /// again as if from `in_port` (0xfff8, `OFPP_IN_PORT`: the packet's
    /// own) in `table` (255: the current one).
    Resubmit {
        /// OpenFlow 1.0 port number.
        in_port: u16,
        /// The table.
        table: u8,
    },
    /// `NXAST_STACK_PUSH` (`push:FIELD[BITS]`) and `NXAST_STACK_POP`
    /// (`pop:`): bits of a field onto, or from, the packet's stack.
    Stack {
        /// Pop (else push).
        pop: bool,
        /// NXM header of the field.
        field: u32,
        /// Lowest bit.
        ofs: u16,
        /// Bits.
        n_bits: u16,
    },
    /// `NXAST_REG_MOVE`: `n_bits` bits from `src` at `src_ofs` to `dst`
    /// at `dst_ofs`.
    RegMove {
        /// NXM header of the source.
        src: u32,
        /// NXM header of the destination.
        dst: u32,
        /// Lowest source bit.
        src_ofs: u16,
        /// Lowest destination bit.
        dst_ofs: u16,
        /// Bits.
        n_bits: u16,
    },
}

impl NxAction {
    /// Reads the body of an experimenter action (after type and length):
    /// `Ok(None)` for one of another experimenter or subtype.
    pub fn decode(body: &[u8]) -> Result<Option<NxAction>, OfError> {
        let mut b = Rd::new(body, OfError::BAD_ACTION_LEN);
        if b.u32()? != NX_VENDOR {
            return Ok(None);
        }
        let len = body.len() + 4;
        Ok(Some(match b.u16()? {
            subtype::REG_LOAD => {
                if len != 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let ofs_nbits = b.u16()?;
                let dst = b.u32()?;
                let value = u64::from(b.u32()?) << 32 | u64::from(b.u32()?);
                NxAction::RegLoad {
                    dst,
                    ofs: ofs_nbits >> 6,
                    n_bits: (ofs_nbits & 0x3f) + 1,
                    value,
                }
            }
            st @ (subtype::STACK_PUSH | subtype::STACK_POP) => {
                if len != 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let ofs = b.u16()?;
                let field = b.u32()?;
                let n_bits = b.u16()?;
                NxAction::Stack {
                    pop: st == subtype::STACK_POP,
                    field,
                    ofs,
                    n_bits,
                }
            }
            subtype::REG_MOVE => {
                if len != 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let n_bits = b.u16()?;
                let src_ofs = b.u16()?;
                let dst_ofs = b.u16()?;
                let src = b.u32()?;
                let dst = b.u32()?;
                NxAction::RegMove {
                    src,
                    dst,
                    src_ofs,
                    dst_ofs,
                    n_bits,
                }
            }
            subtype::OUTPUT_REG => {
                if len != 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let ofs_nbits = b.u16()?;
                let src = b.u32()?;
                let max_len = b.u16()?;
                if b.take(6)?.iter().any(|&z| z != 0) {
                    return Err(OfError::BAD_ARGUMENT);
                }
                NxAction::OutputReg {
                    src,
                    ofs: ofs_nbits >> 6,
                    n_bits: (ofs_nbits & 0x3f) + 1,
                    max_len,
                }
            }
            subtype::CHECK_PKT_LARGER => {
                if len != 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let pkt_len = b.u16()?;
                let ofs = b.u16()?;
                let dst = b.u32()?;
                // An experimenter OXM's 8-byte header names no field
                // Sluice has; the rest is padding (OVS: MUST_BE_ZERO).
                if dst >> 16 == 0xffff || b.take(6)?.iter().any(|&z| z != 0) {
                    return Err(OfError::BAD_ARGUMENT);
                }
                NxAction::CheckPktLarger { pkt_len, ofs, dst }
            }
            subtype::NOTE => NxAction::Note(b.take(b.left())?.to_vec()),
            subtype::LEARN => NxAction::Learn(NxLearn::decode(&mut b, false)?),
            subtype::LEARN2 => NxAction::Learn(NxLearn::decode(&mut b, true)?),
            subtype::POP_QUEUE => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                NxAction::PopQueue
            }
            sub @ (subtype::SAMPLE | subtype::SAMPLE2 | subtype::SAMPLE3) => {
                let two = sub != subtype::SAMPLE;
                if len != if two { 32 } else { 24 } {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let probability = b.u16()?;
                let (collector_set_id, obs_domain_id, obs_point_id) =
                    (b.u32()?, b.u32()?, b.u32()?);
                let (mut sampling_port, mut direction) = (None, 0);
                if two {
                    let p = b.u16()?;
                    // OFPP_NONE: no sampling port.
                    sampling_port = (p != 0xffff).then_some(u32::from(p));
                    direction = b.take(1)?[0];
                    if b.take(5)?.iter().any(|&z| z != 0)
                        || direction > 2
                        || (sub == subtype::SAMPLE2 && direction != 0)
                    {
                        return Err(OfError::BAD_ARGUMENT);
                    }
                }
                if probability == 0 {
                    return Err(OfError::BAD_ARGUMENT);
                }
                NxAction::Sample(sluice_classifier::action::Sample {
                    probability,
                    collector_set_id,
                    obs_domain_id,
                    obs_point_id,
                    sampling_port,
                    direction,
                })
            }
            subtype::CONJUNCTION => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let clause = b.take(1)?[0];
                let n_clauses = b.take(1)?[0];
                if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
                    return Err(OfError::BAD_ARGUMENT);
                }
                NxAction::Conjunction {
                    id: b.u32()?,
                    clause,
                    n_clauses,
                }
            }
            subtype::RESUBMIT | subtype::RESUBMIT_TABLE => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let with_table = body[4..6] == subtype::RESUBMIT_TABLE.to_be_bytes();
                let in_port = b.u16()?;
                let table = b.take(1)?[0];
                let pad = b.take(3)?;
                if with_table && pad.iter().any(|&z| z != 0) {
                    return Err(OfError::BAD_ARGUMENT);
                }
                NxAction::Resubmit {
                    in_port,
                    table: if with_table { table } else { 255 },
                }
            }
            subtype::CLONE => {
                if len < 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                b.skip(6)?;
                let rest = b.take(b.left())?;
                NxAction::Clone(crate::action::decode_actions(rest)?)
            }
            subtype::REG_LOAD2 => {
                let o = Oxm::decode(&mut b).map_err(|e| {
                    if e == OfError::BAD_FIELD {
                        OfError::BAD_SET_TYPE
                    } else {
                        OfError::BAD_SET_LEN
                    }
                })?;
                // What follows the OXM is padding.
                if b.left() >= 8 {
                    return Err(OfError::BAD_SET_LEN);
                }
                NxAction::RegLoad2(o)
            }
            subtype::CT => {
                if len < 24 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let flags = b.u16()?;
                let zone_src = b.u32()?;
                let zone_imm = b.u16()?;
                let table = b.take(4)?[0];
                let alg = b.u16()?;
                let rest = b.take(b.left())?;
                NxAction::Ct {
                    flags,
                    zone_src,
                    zone_imm,
                    table,
                    alg,
                    actions: crate::action::decode_actions(rest)?,
                }
            }
            subtype::CT_CLEAR => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                NxAction::CtClear
            }
            subtype::CONTROLLER => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                NxAction::Controller {
                    max_len: b.u16()?,
                    id: b.u16()?,
                    reason: b.u8()?,
                    userdata: Vec::new(),
                    meter_id: None,
                    pause: false,
                }
            }
            subtype::CONTROLLER2 => controller::decode_controller2(&mut b)?,
            subtype::BUNDLE | subtype::BUNDLE_LOAD => {
                let load = body[4..6] == subtype::BUNDLE_LOAD.to_be_bytes();
                let algorithm = b.u16()?;
                let fields = b.u16()?;
                let basis = b.u16()?;
                // The member type: NXM_OF_IN_PORT, the only one there is.
                if b.u32()? != 0x0000_0002 {
                    return Err(OfError::BAD_ARGUMENT);
                }
                let n = usize::from(b.u16()?);
                let ofs_nbits = b.u16()?;
                let dst = b.u32()?;
                b.skip(4)?;
                if b.left() < 2 * n || b.left() >= 2 * n + 8 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let members = (0..n).map(|_| b.u16()).collect::<Result<Vec<_>, _>>()?;
                NxAction::Bundle {
                    algorithm,
                    fields,
                    basis,
                    members,
                    dst: load.then_some((dst, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1)),
                }
            }
            subtype::FIN_TIMEOUT => {
                if len != 16 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                NxAction::FinTimeout {
                    idle: b.u16()?,
                    hard: b.u16()?,
                }
            }
            subtype::DEC_TTL_CNT_IDS => {
                let n = usize::from(b.u16()?);
                b.skip(4)?;
                if b.left() < 2 * n || b.left() >= 2 * n + 8 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                NxAction::DecTtlIds((0..n).map(|_| b.u16()).collect::<Result<_, _>>()?)
            }
            subtype::MULTIPATH => {
                if len != 32 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let fields = b.u16()?;
                let basis = b.u16()?;
                b.skip(2)?;
                let algorithm = b.u16()?;
                let max_link = b.u16()?;
                let arg = b.u32()?;
                b.skip(2)?;
                let ofs_nbits = b.u16()?;
                NxAction::Multipath {
                    fields,
                    basis,
                    algorithm,
                    max_link,
                    arg,
                    ofs: ofs_nbits >> 6,
                    n_bits: (ofs_nbits & 0x3f) + 1,
                    dst: b.u32()?,
                }
            }
            subtype::NAT => NxAction::Nat(nat::decode_nat(&mut b)?),
            _ => return Err(OfError::BAD_EXPERIMENTER_TYPE),
        }))
    }

    /// Appends the body (after type and length; the caller pads).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&NX_VENDOR.to_be_bytes());
        match self {
            NxAction::RegLoad {
                dst,
                ofs,
                n_bits,
                value,
            } => {
                out.extend_from_slice(&subtype::REG_LOAD.to_be_bytes());
                out.extend_from_slice(&(ofs << 6 | (n_bits - 1)).to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
                out.extend_from_slice(&value.to_be_bytes());
            }
            NxAction::Stack {
                pop,
                field,
                ofs,
                n_bits,
            } => {
                let st = if *pop {
                    subtype::STACK_POP
                } else {
                    subtype::STACK_PUSH
                };
                out.extend_from_slice(&st.to_be_bytes());
                out.extend_from_slice(&ofs.to_be_bytes());
                out.extend_from_slice(&field.to_be_bytes());
                out.extend_from_slice(&n_bits.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::RegMove {
                src,
                dst,
                src_ofs,
                dst_ofs,
                n_bits,
            } => {
                out.extend_from_slice(&subtype::REG_MOVE.to_be_bytes());
                for v in [n_bits, src_ofs, dst_ofs] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.extend_from_slice(&src.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
            }
            NxAction::RegLoad2(o) => {
                out.extend_from_slice(&subtype::REG_LOAD2.to_be_bytes());
                o.encode(out);
            }
            NxAction::Ct {
                flags,
                zone_src,
                zone_imm,
                table,
                alg,
                actions,
            } => {
                out.extend_from_slice(&subtype::CT.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(&zone_src.to_be_bytes());
                out.extend_from_slice(&zone_imm.to_be_bytes());
                out.extend_from_slice(&[*table, 0, 0, 0]);
                out.extend_from_slice(&alg.to_be_bytes());
                crate::action::encode_actions(actions, out);
            }
            NxAction::CtClear => {
                out.extend_from_slice(&subtype::CT_CLEAR.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::FinTimeout { idle, hard } => {
                out.extend_from_slice(&subtype::FIN_TIMEOUT.to_be_bytes());
                out.extend_from_slice(&idle.to_be_bytes());
                out.extend_from_slice(&hard.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
            }
            NxAction::DecTtlIds(ids) => {
                out.extend_from_slice(&subtype::DEC_TTL_CNT_IDS.to_be_bytes());
                out.extend_from_slice(&(ids.len() as u16).to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                for id in ids {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
            NxAction::Bundle {
                algorithm,
                fields,
                basis,
                members,
                dst,
            } => {
                let sub = if dst.is_some() {
                    subtype::BUNDLE_LOAD
                } else {
                    subtype::BUNDLE
                };
                out.extend_from_slice(&sub.to_be_bytes());
                out.extend_from_slice(&algorithm.to_be_bytes());
                out.extend_from_slice(&fields.to_be_bytes());
                out.extend_from_slice(&basis.to_be_bytes());
                out.extend_from_slice(&0x0000_0002u32.to_be_bytes());
                out.extend_from_slice(&(members.len() as u16).to_be_bytes());
                let (h, ofs, n_bits) = dst.unwrap_or((0, 0, 1));
                let ofs_nbits = if dst.is_some() {
                    ofs << 6 | (n_bits - 1)
                } else {
                    0
                };
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&h.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                for m in members {
                    out.extend_from_slice(&m.to_be_bytes());
                }
            }
            NxAction::Multipath {
                fields,
                basis,
                algorithm,
                max_link,
                arg,
                ofs,
                n_bits,
                dst,
            } => {
                out.extend_from_slice(&subtype::MULTIPATH.to_be_bytes());
                out.extend_from_slice(&fields.to_be_bytes());
                out.extend_from_slice(&basis.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&algorithm.to_be_bytes());
                out.extend_from_slice(&max_link.to_be_bytes());
                out.extend_from_slice(&arg.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&(ofs << 6 | (n_bits - 1)).to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
            }
            NxAction::Controller {
                max_len,
                id,
                reason,
                userdata,
                meter_id: None,
                pause: false,
            } if userdata.is_empty() => {
                out.extend_from_slice(&subtype::CONTROLLER.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&[*reason, 0]);
            }
            NxAction::Controller {
                max_len,
                id,
                reason,
                userdata,
                meter_id,
                pause,
            } => controller::encode_controller2(
                *max_len, *id, *reason, userdata, *meter_id, *pause, out,
            ),
            NxAction::OutputReg {
                src,
                ofs,
                n_bits,
                max_len,
            } => {
                out.extend_from_slice(&subtype::OUTPUT_REG.to_be_bytes());
                out.extend_from_slice(&(ofs << 6 | (n_bits - 1)).to_be_bytes());
                out.extend_from_slice(&src.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::CheckPktLarger { pkt_len, ofs, dst } => {
                out.extend_from_slice(&subtype::CHECK_PKT_LARGER.to_be_bytes());
                out.extend_from_slice(&pkt_len.to_be_bytes());
                out.extend_from_slice(&ofs.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::Note(bytes) => {
                out.extend_from_slice(&subtype::NOTE.to_be_bytes());
                out.extend_from_slice(bytes);
            }
            NxAction::Clone(actions) => {
                out.extend_from_slice(&subtype::CLONE.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                crate::action::encode_actions(actions, out);
            }
            NxAction::Nat(n) => nat::encode_nat(n, out),
            NxAction::Learn(l) => {
                let sub = if l.is_learn2() {
                    subtype::LEARN2
                } else {
                    subtype::LEARN
                };
                out.extend_from_slice(&sub.to_be_bytes());
                l.encode(out);
            }
            NxAction::PopQueue => {
                out.extend_from_slice(&subtype::POP_QUEUE.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::Sample(s) => {
                // As OVS encodes it: SAMPLE3 with a direction, SAMPLE2
                // with a sampling port, else SAMPLE.
                let sub = if s.direction != 0 {
                    subtype::SAMPLE3
                } else if s.sampling_port.is_some() {
                    subtype::SAMPLE2
                } else {
                    subtype::SAMPLE
                };
                out.extend_from_slice(&sub.to_be_bytes());
                out.extend_from_slice(&s.probability.to_be_bytes());
                for v in [s.collector_set_id, s.obs_domain_id, s.obs_point_id] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                if sub != subtype::SAMPLE {
                    let p = s.sampling_port.map_or(0xffff, |p| p as u16);
                    out.extend_from_slice(&p.to_be_bytes());
                    out.extend_from_slice(&[s.direction, 0, 0, 0, 0, 0]);
                }
            }
            NxAction::Conjunction {
                id,
                clause,
                n_clauses,
            } => {
                out.extend_from_slice(&subtype::CONJUNCTION.to_be_bytes());
                out.extend_from_slice(&[*clause, *n_clauses]);
                out.extend_from_slice(&id.to_be_bytes());
            }
            NxAction::Resubmit { in_port, table } => {
                // As ovs-ofctl: the plain form when no table is named.
                let sub = if *table == 255 {
                    subtype::RESUBMIT
                } else {
                    subtype::RESUBMIT_TABLE
                };
                out.extend_from_slice(&sub.to_be_bytes());
                out.extend_from_slice(&in_port.to_be_bytes());
                out.extend_from_slice(&[*table, 0, 0, 0]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An action names `tun_metadata0` by its mapped length (what OVS
    /// writes in ovn-controller's `move`s) or by 124; a match's NXM
    /// entry of another length is not taken for it; OpenFlow's own
    /// header of a field (1.5's `COPY_FIELD`) is its NXM one's.
    #[test]
    fn actions_name_tun_metadata_by_any_length() {
        let by = |len: u32| 0x0001_5000 | len;
        for len in [4, 8, 124] {
            assert_eq!(
                field_of_action_header(by(len)).map(|f| f.name),
                Some("tun_metadata0")
            );
        }
        assert_eq!(field_of_action_header(by(0)), None);
        assert!(field_of_header(by(4)).is_none());
        // OXM_OF_ETH_SRC (class 0x8000, field 4, 6 bytes) is dl_src.
        assert_eq!(field_of_header(0x8000_0806).map(|f| f.name), Some("dl_src"));
    }

    #[test]
    fn headers_name_fields_both_ways() {
        for &(class, f, len, name) in HEADERS {
            let field = field_named(name).unwrap_or_else(|| panic!("{name}"));
            let h = u32::from(class) << 16 | u32::from(f) << 9 | u32::from(len);
            assert_eq!(field_of_header(h).map(|x| x.name), Some(name));
            assert_eq!(
                field_of_header(h | 0x100).map(|x| x.name),
                Some(name),
                "mask bit"
            );
            assert_eq!(header_of(field), Some(h), "{name}");
            assert!(u32::from(len) * 8 >= field.bits(), "{name} fits its header");
        }
    }

    /// `check_pkt_larger(1500)->NXM_NX_REG0[5]` as `ovs-ofctl -mmmmm
    /// parse-flow` shows Open vSwitch 3.1 encoding it.
    #[test]
    fn check_pkt_larger_is_ovs_bytes() {
        let a = NxAction::CheckPktLarger {
            pkt_len: 1500,
            ofs: 5,
            dst: 0x0001_0004,
        };
        let ovs = [
            0, 0, 0x23, 0x20, 0, 0x31, 0x05, 0xdc, 0, 5, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0,
        ];
        let mut body = Vec::new();
        a.encode(&mut body);
        assert_eq!(body, ovs);
        assert_eq!(NxAction::decode(&ovs), Ok(Some(a)));
        let mut bad = ovs;
        bad[19] = 1;
        assert_eq!(NxAction::decode(&bad), Err(OfError::BAD_ARGUMENT));
    }

    #[test]
    fn actions_round_trip() {
        for a in [
            NxAction::RegLoad {
                dst: 0x0001_0004,
                ofs: 8,
                n_bits: 8,
                value: 0xab,
            },
            NxAction::RegMove {
                src: 0x0000_0406,
                dst: 0x0001_0004,
                src_ofs: 0,
                dst_ofs: 0,
                n_bits: 32,
            },
            NxAction::Stack {
                pop: false,
                field: 0x0000_0002,
                ofs: 0,
                n_bits: 16,
            },
            NxAction::Stack {
                pop: true,
                field: 0x0001_0004,
                ofs: 4,
                n_bits: 8,
            },
        ] {
            let mut body = Vec::new();
            a.encode(&mut body);
            assert_eq!(body.len() + 4, 24);
            assert_eq!(NxAction::decode(&body), Ok(Some(a)));
        }
        let mut body = NX_VENDOR.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 99, 0, 0, 0, 0]);
        assert_eq!(NxAction::decode(&body), Err(OfError::BAD_EXPERIMENTER_TYPE));
        assert_eq!(NxAction::decode(&[0, 0, 0, 1, 0, 7]), Ok(None));
        assert!(NxAction::decode(&NX_VENDOR.to_be_bytes()).is_err());
    }
}
