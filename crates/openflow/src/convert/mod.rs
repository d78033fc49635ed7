//! OpenFlow 1.3 matches, actions and instructions mapped onto the
//! classifier's [`Match`] and [`Action`]s, both ways, with the spec's
//! checks: prerequisites (`BAD_PREREQ`), values and masks, settable fields,
//! output ports, forward-only `goto_table`.

use sluice_classifier::fields::{field_by_name, Field, Prereq, IN_PORT16};
use sluice_classifier::group::{Bucket, Group, GroupError, GroupType, SelectMethod};
use sluice_classifier::meter::{BandKind, Meter, MeterError};
use sluice_classifier::table::Selection;
use sluice_classifier::{Action, FlowSpec, Match, Rule};
use std::sync::Arc;

use crate::action::{Instruction, OfAction};
use crate::consts::{fm, port, OfError, TABLE_ALL};
use crate::msg::FlowMod;
use crate::multipart::FlowStats;
use crate::oxm::{f, Oxm};

mod learn;
mod nx;
pub(crate) use nx::from_load;

/// Each OXM field Sluice matches on: its classifier field and the
/// prerequisite OpenFlow 1.3 gives it (spec table 12). In the order a match
/// lists them (prerequisites first).
const MAP: &[(u8, &str, Prereq)] = &[
    (f::NX_CT_STATE, "ct_state", Prereq::None),
    (f::NX_CT_ZONE, "ct_zone", Prereq::None),
    (f::NX_CT_MARK, "ct_mark", Prereq::None),
    (f::NX_CT_LABEL, "ct_label", Prereq::None),
    (f::NX_CT_NW_SRC, "ct_nw_src", Prereq::CtIpv4),
    (f::NX_CT_NW_DST, "ct_nw_dst", Prereq::CtIpv4),
    (f::NX_CT_IPV6_SRC, "ct_ipv6_src", Prereq::CtIpv6),
    (f::NX_CT_IPV6_DST, "ct_ipv6_dst", Prereq::CtIpv6),
    (f::NX_CT_NW_PROTO, "ct_nw_proto", Prereq::Ct),
    (f::NX_CT_TP_SRC, "ct_tp_src", Prereq::Ct),
    (f::NX_CT_TP_DST, "ct_tp_dst", Prereq::Ct),
    (f::NX_CONJ_ID, "conj_id", Prereq::None),
    (f::NX_PKT_MARK, "pkt_mark", Prereq::None),
    (f::IN_PORT, "in_port", Prereq::None),
    (f::METADATA, "metadata", Prereq::None),
    (f::TUNNEL_ID, "tun_id", Prereq::None),
    (f::ETH_DST, "dl_dst", Prereq::None),
    (f::ETH_SRC, "dl_src", Prereq::None),
    (f::ETH_TYPE, "dl_type", Prereq::None),
    (f::VLAN_VID, "vlan_vid", Prereq::None),
    (f::VLAN_PCP, "vlan_pcp", Prereq::Vlan),
    (f::IP_DSCP, "ip_dscp", Prereq::Ip),
    (f::IP_ECN, "ip_ecn", Prereq::Ip),
    (f::IP_PROTO, "nw_proto", Prereq::Ip),
    (f::NX_IP_TTL, "nw_ttl", Prereq::Ip),
    (f::NX_IP_FRAG, "nw_frag", Prereq::Ip),
    (f::IPV4_SRC, "nw_src", Prereq::Ipv4),
    (f::IPV4_DST, "nw_dst", Prereq::Ipv4),
    (f::TCP_SRC, "tcp_src", Prereq::Tcp),
    (f::TCP_DST, "tcp_dst", Prereq::Tcp),
    (f::NX_TCP_FLAGS, "tcp_flags", Prereq::Tcp),
    (f::UDP_SRC, "udp_src", Prereq::Udp),
    (f::UDP_DST, "udp_dst", Prereq::Udp),
    (f::SCTP_SRC, "sctp_src", Prereq::Sctp),
    (f::SCTP_DST, "sctp_dst", Prereq::Sctp),
    (f::ICMPV4_TYPE, "icmp_type", Prereq::Icmp4),
    (f::ICMPV4_CODE, "icmp_code", Prereq::Icmp4),
    (f::ARP_OP, "arp_op", Prereq::Arp),
    (f::ARP_SPA, "arp_spa", Prereq::Arp),
    (f::ARP_TPA, "arp_tpa", Prereq::Arp),
    (f::ARP_SHA, "arp_sha", Prereq::Arp),
    (f::ARP_THA, "arp_tha", Prereq::Arp),
    (f::IPV6_SRC, "ipv6_src", Prereq::Ipv6),
    (f::IPV6_DST, "ipv6_dst", Prereq::Ipv6),
    (f::IPV6_FLABEL, "ipv6_label", Prereq::Ipv6),
    (f::ICMPV6_TYPE, "icmpv6_type", Prereq::Icmp6),
    (f::ICMPV6_CODE, "icmpv6_code", Prereq::Icmp6),
    (f::IPV6_ND_TARGET, "nd_target", Prereq::Nd),
    (f::IPV6_ND_SLL, "nd_sll", Prereq::Nd),
    (f::IPV6_ND_TLL, "nd_tll", Prereq::Nd),
    (f::IPV6_EXTHDR, "ipv6_exthdr", Prereq::Ipv6),
    (f::MPLS_LABEL, "mpls_label", Prereq::Mpls),
    (f::MPLS_TC, "mpls_tc", Prereq::Mpls),
    (f::MPLS_BOS, "mpls_bos", Prereq::Mpls),
    (f::PBB_ISID, "pbb_isid", Prereq::Pbb),
    (f::NX_TUN_SRC, "tun_src", Prereq::None),
    (f::NX_TUN_DST, "tun_dst", Prereq::None),
    (f::NX_TUN_IPV6_SRC, "tun_ipv6_src", Prereq::None),
    (f::NX_TUN_IPV6_DST, "tun_ipv6_dst", Prereq::None),
    (f::NX_TUN_METADATA0, "tun_metadata0", Prereq::None),
    (f::NX_TUN_METADATA1, "tun_metadata1", Prereq::None),
    (f::NX_TUN_METADATA2, "tun_metadata2", Prereq::None),
    (f::NX_TUN_METADATA3, "tun_metadata3", Prereq::None),
    (f::NX_TUN_FLAGS, "tun_flags", Prereq::None),
    (f::ONF_ACTSET_OUTPUT, "actset_output", Prereq::None),
    (f::NX_REG0, "reg0", Prereq::None),
    (f::NX_REG0 + 1, "reg1", Prereq::None),
    (f::NX_REG0 + 2, "reg2", Prereq::None),
    (f::NX_REG0 + 3, "reg3", Prereq::None),
    (f::NX_REG0 + 4, "reg4", Prereq::None),
    (f::NX_REG0 + 5, "reg5", Prereq::None),
    (f::NX_REG0 + 6, "reg6", Prereq::None),
    (f::NX_REG0 + 7, "reg7", Prereq::None),
    (f::NX_REG0 + 8, "reg8", Prereq::None),
    (f::NX_REG0 + 9, "reg9", Prereq::None),
    (f::NX_REG0 + 10, "reg10", Prereq::None),
    (f::NX_REG0 + 11, "reg11", Prereq::None),
    (f::NX_REG0 + 12, "reg12", Prereq::None),
    (f::NX_REG0 + 13, "reg13", Prereq::None),
    (f::NX_REG0 + 14, "reg14", Prereq::None),
    (f::NX_REG0 + 15, "reg15", Prereq::None),
];

/// Fields a match or set-field may name that a match is never given
/// back as: the wider registers, which cover the 32-bit ones (a match is
/// listed as those, as `ovs-ofctl` prints it).
const MAP_IN_ONLY: &[(u8, &str, Prereq)] = &[
    (f::TCP_FLAGS, "tcp_flags", Prereq::Tcp),
    // NXM_OF_IN_PORT over OXM: what OVS's 1.5 `set_field:...->in_port`
    // sends (its 16-bit in_port has no OXM header of its own).
    (f::NX_IN_PORT16, "in_port16", Prereq::None),
    (f::PKT_REG0, "xreg0", Prereq::None),
    (f::PKT_REG0 + 1, "xreg1", Prereq::None),
    (f::PKT_REG0 + 2, "xreg2", Prereq::None),
    (f::PKT_REG0 + 3, "xreg3", Prereq::None),
    (f::PKT_REG0 + 4, "xreg4", Prereq::None),
    (f::PKT_REG0 + 5, "xreg5", Prereq::None),
    (f::PKT_REG0 + 6, "xreg6", Prereq::None),
    (f::PKT_REG0 + 7, "xreg7", Prereq::None),
    (f::NX_XXREG0, "xxreg0", Prereq::None),
    (f::NX_XXREG0 + 1, "xxreg1", Prereq::None),
    (f::NX_XXREG0 + 2, "xxreg2", Prereq::None),
    (f::NX_XXREG0 + 3, "xxreg3", Prereq::None),
];

/// Every OXM field Sluice matches on, with its classifier field's name.
pub fn matched_fields() -> Vec<(u8, &'static str)> {
    MAP.iter().map(|&(f, n, _)| (f, n)).collect()
}

/// The classifier field and prerequisite of an OXM field: a table by field
/// number, made once (a flow-mod's match looks up each of its fields).
pub(crate) fn mapped(field: u8) -> Option<(&'static Field, Prereq)> {
    type ByField = [Option<(&'static Field, Prereq)>; 256];
    static BY_FIELD: std::sync::OnceLock<ByField> = std::sync::OnceLock::new();
    let table = BY_FIELD.get_or_init(|| {
        let mut t: ByField = [None; 256];
        for &(f, name, p) in MAP.iter().chain(MAP_IN_ONLY) {
            let fd = if name == IN_PORT16.name {
                &IN_PORT16
            } else {
                field_by_name(name).expect("a classifier field")
            };
            t[usize::from(f)] = Some((fd, p));
        }
        t
    });
    table.get(usize::from(field)).copied().flatten()
}

/// A resumed packet's pipeline fields (`NXT_RESUME`'s metadata): its
/// input port, if given, and a `set_field` (a `load` of the bits, for a
/// masked one) for each field the pipeline may write (registers,
/// metadata, tunnel fields, `pkt_mark`); the connection tracking fields,
/// which are the tracker's, are left out.
pub fn resume_fields(oxms: &[Oxm]) -> (Option<u32>, Vec<Action>) {
    let mut in_port = None;
    let mut sets = Vec::new();
    for o in oxms {
        if o.field == f::IN_PORT {
            in_port = Some(o.value as u32);
            continue;
        }
        let Some((fd, _)) = mapped(o.field) else {
            continue;
        };
        if !(fd.is_pipeline() && fd.writable) {
            continue;
        }
        // OVS sends a packet register half set as the half, masked.
        sets.push(match o.mask {
            None => Action::SetField {
                field: fd,
                value: o.value,
                legacy: None,
            },
            Some(mask) => Action::Load {
                field: fd,
                value: o.value & mask,
                mask,
            },
        });
    }
    (in_port, sets)
}

/// The OXM field (Sluice's number) of a classifier field, if OpenFlow
/// can carry it.
pub(crate) fn oxm_of(field: &Field) -> Option<u8> {
    MAP.iter()
        .chain(MAP_IN_ONLY)
        .find(|m| m.1 == field.name)
        .map(|m| m.0)
}

/// The match of an OXM list. Fields Sluice does not match on yet are
/// `BAD_FIELD`; a value past the field's width `BAD_VALUE`; a field whose
/// prerequisite the match lacks `BAD_PREREQ`.
pub fn to_match(oxms: &[Oxm]) -> Result<Match, OfError> {
    let mut m = Match::catch_all();
    for o in oxms {
        // Ethernet packets are all Sluice forwards: packet_type=(0,0) says
        // nothing more (OVS sends it), any other type matches nothing.
        if o.field == f::PACKET_TYPE {
            if o.value != 0 {
                return Err(OfError::BAD_VALUE);
            }
            continue;
        }
        let (fd, _) = mapped(o.field).ok_or(OfError::BAD_FIELD)?;
        let full = fd.full_mask();
        // (Overlapping registers, `reg0` and `xreg0`, are taken in turn,
        // the later one's bits winning, as OVS does.)
        if o.value & !full != 0 {
            return Err(OfError::BAD_VALUE);
        }
        let mask = match o.mask {
            None => full,
            Some(mk) if mk & !full != 0 => return Err(OfError::BAD_MASK),
            Some(_) if !fd.maskable => return Err(OfError::BAD_MASK),
            Some(mk) => mk,
        };
        m.set(fd, o.value, mask);
    }
    // Prerequisites are checked on the whole match: OpenFlow does not ask
    // for them to come first. (A second pass over the list rather than a
    // list of them: no allocation per flow-mod.)
    let unmet = oxms
        .iter()
        .filter_map(|o| mapped(o.field))
        .any(|(_, pre)| !pre.holds(&m.value, &m.mask));
    if unmet {
        return Err(OfError::BAD_PREREQ);
    }
    Ok(m)
}

/// The OXM list of a match: every field it matches that OpenFlow 1.3 can
/// say (a flow-file rule may also match fields it cannot, such as `nw_ttl`;
/// those are left out).
pub fn from_match(m: &Match) -> Vec<Oxm> {
    let mut out = Vec::new();
    for &(field, name, pre) in MAP {
        let fd = field_by_name(name).expect("a classifier field");
        let (v, mk) = m.get(fd);
        if mk == 0 || !pre.holds(&m.value, &m.mask) {
            continue;
        }
        out.push(Oxm {
            field,
            value: v,
            mask: (mk != fd.full_mask()).then_some(mk),
        });
    }
    out
}

/// The classifier action of an OpenFlow action under match `m`.
pub fn to_action(a: &OfAction, m: &Match) -> Result<Action, OfError> {
    to_action_in(a, Some(m))
}

/// The classifier action of an OpenFlow action; under a match (whose
/// prerequisites a set-field or set-TTL must have), or in a group's
/// bucket (none: the translation skips what the packet does not have).
pub(super) fn to_action_in(a: &OfAction, m: Option<&Match>) -> Result<Action, OfError> {
    let holds = |p: sluice_classifier::fields::Prereq| m.is_none_or(|m| p.holds(&m.value, &m.mask));
    Ok(match a {
        OfAction::SetQueue(q) => Action::SetQueue(*q),
        OfAction::Output { port: p, max_len } => match *p {
            0 => return Err(OfError::BAD_OUT_PORT),
            p if p <= port::MAX => Action::Output(p),
            port::IN_PORT => Action::InPort,
            port::LOCAL => Action::Output(port::LOCAL),
            port::ALL => Action::All,
            port::FLOOD => Action::Flood,
            port::NORMAL => Action::Normal,
            port::CONTROLLER => Action::controller(*max_len),
            _ => return Err(OfError::BAD_OUT_PORT),
        },
        OfAction::PushVlan(t) => {
            if *t != 0x8100 && *t != 0x88a8 {
                return Err(OfError::BAD_ARGUMENT);
            }
            Action::PushVlan(*t)
        }
        OfAction::PopVlan => Action::PopVlan,
        OfAction::DecNwTtl => Action::DecTtl,
        OfAction::PushMpls(t) => {
            if !sluice_packet::wire::ethernet::is_mpls(*t) {
                return Err(OfError::BAD_ARGUMENT);
            }
            Action::PushMpls(*t)
        }
        OfAction::PopMpls(t) => {
            if !holds(Prereq::Mpls) {
                return Err(OfError::MATCH_INCONSISTENT);
            }
            Action::PopMpls(*t)
        }
        OfAction::PushPbb(t) => {
            if *t != sluice_packet::wire::ethernet::ethertype::PBB {
                return Err(OfError::BAD_ARGUMENT);
            }
            Action::PushPbb(*t)
        }
        OfAction::PopPbb => {
            if !holds(Prereq::Pbb) {
                return Err(OfError::MATCH_INCONSISTENT);
            }
            Action::PopPbb
        }
        OfAction::SetMplsTtl(t) => Action::SetMplsTtl(*t),
        OfAction::DecMplsTtl => Action::DecMplsTtl,
        OfAction::CopyTtlOut => Action::CopyTtlOut,
        OfAction::CopyTtlIn => Action::CopyTtlIn,
        OfAction::Group(g) => {
            if *g > sluice_classifier::group::GROUP_MAX {
                return Err(OfError::BAD_OUT_GROUP);
            }
            Action::Group(*g)
        }
        OfAction::SetNwTtl(ttl) => {
            let fd = field_by_name("nw_ttl").expect("a classifier field");
            if !holds(fd.write_prereq()) {
                return Err(OfError::MATCH_INCONSISTENT);
            }
            Action::SetField {
                field: fd,
                value: u128::from(*ttl),
                legacy: Some("mod_nw_ttl"),
            }
        }
        OfAction::SetField(o) => {
            let (fd, _) = mapped(o.field).ok_or(OfError::BAD_SET_TYPE)?;
            // The fields Open vSwitch keeps read-only convert; the rule set
            // refuses them in its mode (`RuleSet::read_only_write`).
            if !fd.spec_writable() {
                return Err(OfError::BAD_SET_TYPE);
            }
            if o.value & !fd.full_mask() != 0 {
                return Err(OfError::BAD_SET_ARGUMENT);
            }
            if !holds(fd.write_prereq()) {
                return Err(OfError::MATCH_INCONSISTENT);
            }
            match o.field {
                f::VLAN_VID => Action::ModVlanVid(o.value as u16 & 0x0fff),
                f::VLAN_PCP => Action::ModVlanPcp(o.value as u8),
                _ => Action::SetField {
                    field: fd,
                    value: o.value,
                    legacy: None,
                },
            }
        }
        OfAction::Nx(nx) => nx::to_action(nx, m)?,
        OfAction::Other(..) => return Err(OfError::BAD_ACTION_TYPE),
    })
}

/// The OpenFlow actions of a classifier action (none: not expressible;
/// a `load` of several runs of bits is several).
pub fn from_action(a: &Action) -> Vec<OfAction> {
    let set = |field: u8, value: u128| OfAction::SetField(Oxm::exact(field, value));
    vec![match a {
        Action::Load { field, value, mask } => return nx::from_load(field, *value, *mask),
        Action::Move { src, dst } => return nx::from_move(src, dst),
        Action::Stack { pop, sf } => match crate::nxm::header_of(sf.field) {
            Some(field) => OfAction::Nx(crate::nxm::NxAction::Stack {
                pop: *pop,
                field,
                ofs: sf.ofs.into(),
                n_bits: sf.n_bits.into(),
            }),
            None => return Vec::new(),
        },
        Action::Ct(ct) => return nx::from_ct(ct),
        Action::CtClear => OfAction::Nx(crate::nxm::NxAction::CtClear),
        Action::OutputReg(src) => return nx::from_output_reg(src),
        Action::Note(bytes) => OfAction::Nx(crate::nxm::NxAction::Note(bytes.clone())),
        Action::Learn(l) => learn::from_learn(l),
        Action::Multipath(mp) => return nx::from_multipath(mp),
        Action::CheckPktLarger { len, dst } => return nx::from_check_pkt_larger(*len, dst),
        Action::Bundle(b) => return nx::from_bundle(b),
        Action::Sample(s) => OfAction::Nx(crate::nxm::NxAction::Sample(*s)),
        Action::SetQueue(q) => OfAction::SetQueue(*q),
        Action::PopQueue => OfAction::Nx(crate::nxm::NxAction::PopQueue),
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => OfAction::Nx(crate::nxm::NxAction::Conjunction {
            id: *id,
            clause: clause - 1,
            n_clauses: *n_clauses,
        }),
        Action::Clone(inner) => OfAction::Nx(crate::nxm::NxAction::Clone(
            inner.iter().flat_map(from_action).collect(),
        )),
        Action::Output(p) => OfAction::Output {
            port: *p,
            max_len: 0,
        },
        Action::InPort => OfAction::Output {
            port: port::IN_PORT,
            max_len: 0,
        },
        Action::All => OfAction::Output {
            port: port::ALL,
            max_len: 0,
        },
        Action::Flood => OfAction::Output {
            port: port::FLOOD,
            max_len: 0,
        },
        Action::Normal => OfAction::Output {
            port: port::NORMAL,
            max_len: 0,
        },
        Action::Controller {
            max_len,
            opts: None,
        } => OfAction::Output {
            port: port::CONTROLLER,
            max_len: *max_len,
        },
        Action::Controller {
            max_len,
            opts: Some(o),
        } => OfAction::Nx(crate::nxm::NxAction::Controller {
            max_len: *max_len,
            id: o.id,
            reason: o.reason.code(),
            userdata: o.userdata.clone(),
            meter_id: o.meter_id,
            pause: o.pause,
        }),
        Action::SetField { field, value, .. } if field.name == "nw_ttl" => {
            OfAction::SetNwTtl(*value as u8)
        }
        Action::SetField { field, value, .. } => {
            let Some(f) = oxm_of(field) else {
                return Vec::new();
            };
            set(f, *value)
        }
        Action::ModVlanVid(v) => set(f::VLAN_VID, u128::from(*v | 0x1000)),
        Action::ModVlanPcp(p) => set(f::VLAN_PCP, u128::from(*p)),
        Action::PushVlan(t) => OfAction::PushVlan(*t),
        Action::PopVlan => OfAction::PopVlan,
        Action::DecTtl => OfAction::DecNwTtl,
        Action::DecTtlIds(ids) => OfAction::Nx(crate::nxm::NxAction::DecTtlIds(ids.clone())),
        Action::FinTimeout { idle, hard } => OfAction::Nx(crate::nxm::NxAction::FinTimeout {
            idle: *idle,
            hard: *hard,
        }),
        Action::Group(g) => OfAction::Group(*g),
        Action::PushMpls(t) => OfAction::PushMpls(*t),
        Action::PopMpls(t) => OfAction::PopMpls(*t),
        Action::SetMplsTtl(t) => OfAction::SetMplsTtl(*t),
        Action::DecMplsTtl => OfAction::DecMplsTtl,
        Action::CopyTtlOut => OfAction::CopyTtlOut,
        Action::CopyTtlIn => OfAction::CopyTtlIn,
        Action::PushPbb(t) => OfAction::PushPbb(*t),
        Action::PopPbb => OfAction::PopPbb,
        // An instruction, not an action (from_actions places it).
        Action::Meter(_) => return Vec::new(),
        Action::Resubmit { in_port, table } => nx::from_resubmit(*in_port, *table),
        Action::GotoTable(_)
        | Action::WriteActions(_)
        | Action::WriteMetadata { .. }
        | Action::ClearActions => return Vec::new(),
    }]
}

/// The classifier's meter of a METER_MOD (ADD or MODIFY) at `now_us`.
pub fn to_meter(mm: &crate::meter::MeterMod, now_us: u64) -> Result<Meter, OfError> {
    use crate::meter::band;
    let mut bands = Vec::with_capacity(mm.bands.len());
    for b in &mm.bands {
        let kind = match b.typ {
            band::DROP => BandKind::Drop,
            band::DSCP_REMARK => BandKind::DscpRemark(b.prec_level),
            _ => return Err(OfError::METER_BAD_BAND),
        };
        bands.push((kind, b.rate, b.burst));
    }
    Meter::new(mm.meter_id, mm.flags, &bands, now_us).map_err(meter_error)
}

/// The METER_MOD_FAILED error of a refused meter.
pub fn meter_error(e: MeterError) -> OfError {
    match e {
        MeterError::Exists => OfError::METER_EXISTS,
        MeterError::Invalid => OfError::METER_INVALID,
        MeterError::Unknown => OfError::METER_UNKNOWN,
        MeterError::BadFlags => OfError::METER_BAD_FLAGS,
        MeterError::BadRate => OfError::METER_BAD_RATE,
        MeterError::BadBurst => OfError::METER_BAD_BURST,
        MeterError::BadBand => OfError::METER_BAD_BAND,
        MeterError::BadBandValue => OfError::METER_BAD_BAND_VALUE,
    }
}

/// A meter's bands as METER_CONFIG gives them back.
pub fn meter_bands(m: &Meter) -> Vec<crate::meter::OfBand> {
    m.bands
        .iter()
        .map(|b| crate::meter::OfBand {
            typ: b.kind.number(),
            rate: b.rate,
            burst: b.burst,
            prec_level: match b.kind {
                BandKind::DscpRemark(p) => p,
                BandKind::Drop => 0,
            },
        })
        .collect()
}

/// The action list of a rule in `table` with match `m` and these
/// instructions, in the order OpenFlow runs them whatever their order in
/// the message: apply-actions, clear-actions, write-actions, goto-table.
pub fn to_actions(ins: &[Instruction], table: u8, m: &Match) -> Result<Vec<Action>, OfError> {
    let mut out = Vec::with_capacity(4);
    // The match as the actions so far leave the packet's type (pushes and
    // pops of MPLS and PBB change it), for the prerequisites of the
    // actions after them (as Open vSwitch checks action lists).
    let mut cur = *m;
    let mut goto = None;
    let mut meter = None;
    let mut clear = false;
    let mut write = None;
    let mut metadata = None;
    let mut seen = 0u32;
    for i in ins {
        let kind = match i {
            Instruction::GotoTable(_) => 1,
            Instruction::WriteMetadata { .. } => 2,
            Instruction::WriteActions(_) => 3,
            Instruction::ApplyActions(_) => 4,
            Instruction::ClearActions => 5,
            Instruction::Meter(_) => 6,
            Instruction::Other(_) => return Err(OfError::UNKNOWN_INST),
        };
        if seen & 1 << kind != 0 {
            return Err(OfError::UNSUP_INST);
        }
        seen |= 1 << kind;
        match i {
            Instruction::ApplyActions(acts) => {
                for a in acts {
                    let a = to_action(a, &cur)?;
                    retype(&mut cur, &a);
                    out.push(a);
                }
            }
            Instruction::GotoTable(t) => {
                if *t <= table || *t == TABLE_ALL {
                    return Err(OfError::BAD_INST_TABLE_ID);
                }
                goto = Some(*t);
            }
            Instruction::ClearActions => clear = true,
            Instruction::WriteActions(acts) => {
                let mut set: Vec<Action> = Vec::new();
                // The set runs pops and pushes before its set-fields
                // (spec 5.10): those are checked against the packet's type
                // after all of them, the pops against the type before.
                let mut after = cur;
                for a in acts {
                    if let Ok(a) = to_action(a, &cur) {
                        retype(&mut after, &a);
                    }
                }
                for a in acts {
                    let under = match a {
                        OfAction::PopMpls(_) | OfAction::PopPbb => &cur,
                        _ => &after,
                    };
                    let a = to_action(a, under)?;
                    // One action of each kind in a set (spec 5.10).
                    if set.iter().any(|b| same_kind(b, &a)) {
                        return Err(OfError::BAD_ARGUMENT);
                    }
                    set.push(a);
                }
                write = Some(set);
            }
            Instruction::WriteMetadata { value, mask } => {
                metadata = Some(Action::WriteMetadata {
                    value: *value & *mask,
                    mask: *mask,
                });
            }
            Instruction::Meter(id) => {
                if *id == 0 || *id > sluice_classifier::meter::METER_MAX {
                    return Err(OfError::METER_INVALID);
                }
                meter = Some(Action::Meter(*id));
            }
            Instruction::Other(_) => return Err(OfError::UNKNOWN_INST),
        }
    }
    if let Some(m) = meter {
        // The meter runs before the apply-actions.
        out.insert(0, m);
    }
    if clear {
        out.push(Action::ClearActions);
    }
    out.extend(write.map(Action::WriteActions));
    out.extend(metadata);
    out.extend(goto.map(Action::GotoTable));
    // Conjunction clauses go with notes only (OVS: NXBAC_BAD_CONJUNCTION).
    let conj = |a: &Action| matches!(a, Action::Conjunction { .. });
    if out.iter().any(conj)
        && out
            .iter()
            .any(|a| !conj(a) && !matches!(a, Action::Note(_)))
    {
        return Err(OfError::BAD_ARGUMENT);
    }
    Ok(out)
}

/// `m` as action `a` leaves the packet's EtherType.
fn retype(m: &mut Match, a: &Action) {
    let dl_type = || mapped(f::ETH_TYPE).expect("a classifier field").0;
    match a {
        Action::PushMpls(t) | Action::PopMpls(t) | Action::PushPbb(t) => {
            m.set(dl_type(), u128::from(*t), 0xffff)
        }
        // The customer frame's type is not known before it is parsed.
        Action::PopPbb => m.set(dl_type(), 0, 0),
        _ => {}
    }
}

/// Whether two actions are of one kind in an action set.
fn same_kind(a: &Action, b: &Action) -> bool {
    let kind = |x: &Action| match x {
        Action::Output(_)
        | Action::InPort
        | Action::All
        | Action::Flood
        | Action::Normal
        | Action::OutputReg(_)
        | Action::Controller { .. } => "output".to_string(),
        Action::SetField { field, .. } => field.name.to_string(),
        Action::ModVlanVid(_) => "vlan_vid".into(),
        Action::ModVlanPcp(_) => "vlan_pcp".into(),
        other => format!("{:?}", std::mem::discriminant(other)),
    };
    kind(a) == kind(b)
}

/// The classifier's group of a GROUP_MOD (ADD or MODIFY) at `now_us`.
pub fn to_group(gm: &crate::group::GroupMod, now_us: u64) -> Result<Group, OfError> {
    let kind = GroupType::from_number(gm.typ).ok_or(OfError::GROUP_BAD_TYPE)?;
    if gm.group_id > sluice_classifier::group::GROUP_MAX {
        return Err(OfError::INVALID_GROUP);
    }
    let mut buckets = Vec::with_capacity(gm.buckets.len());
    for b in &gm.buckets {
        if kind != GroupType::Select && b.weight != 0 {
            // Weights are for select groups (OVS refuses them elsewhere).
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        let actions = b
            .actions
            .iter()
            .map(|a| to_action_in(a, None))
            .collect::<Result<Vec<_>, _>>()?;
        buckets.push(Bucket {
            weight: b.weight,
            watch_port: b.watch_port,
            watch_group: b.watch_group,
            actions,
            counter: Arc::new(Rule::counter()),
        });
    }
    Ok(Group {
        id: gm.group_id,
        kind,
        buckets,
        of_buckets: Some(gm.raw_buckets.clone().into()),
        counter: Arc::new(Rule::counter()),
        created_us: now_us,
        slots: Default::default(),
        selection: match &gm.selection {
            None => SelectMethod::Unset,
            Some(s) if s.method == "dp_hash" => SelectMethod::DpHash(s.param),
            Some(_) => SelectMethod::Hash,
        },
    })
}

/// The OpenFlow error of a refused group change.
pub fn group_error(e: GroupError) -> OfError {
    match e {
        GroupError::Exists => OfError::GROUP_EXISTS,
        GroupError::Invalid => OfError::INVALID_GROUP,
        GroupError::Unknown => OfError::UNKNOWN_GROUP,
        GroupError::Loop => OfError::GROUP_LOOP,
        GroupError::BadType => OfError::GROUP_BAD_TYPE,
        GroupError::BadWatch => OfError::GROUP_BAD_WATCH,
    }
}

/// The buckets of a group as OpenFlow bytes: as the controller sent them,
/// or encoded from the classifier's actions.
pub fn group_buckets(g: &Group) -> Vec<u8> {
    if let Some(b) = &g.of_buckets {
        return b.to_vec();
    }
    let buckets: Vec<crate::group::OfBucket> = g
        .buckets
        .iter()
        .map(|b| crate::group::OfBucket {
            weight: b.weight,
            watch_port: b.watch_port,
            watch_group: b.watch_group,
            actions: b.actions.iter().flat_map(from_action).collect(),
        })
        .collect();
    let mut out = Vec::new();
    crate::group::encode_buckets(&buckets, &mut out);
    out
}

/// The instructions of a rule's action list.
pub fn from_actions(actions: &[Action]) -> Vec<Instruction> {
    let mut apply = Vec::new();
    let mut goto = None;
    let mut clear = false;
    let mut write = None;
    let mut metadata = None;
    let mut meter = None;
    for a in actions {
        match a {
            Action::Meter(m) => meter = Some(Instruction::Meter(*m)),
            Action::GotoTable(t) => goto = Some(*t),
            &Action::WriteMetadata { value, mask } => {
                metadata = Some(Instruction::WriteMetadata { value, mask })
            }
            Action::ClearActions => clear = true,
            Action::WriteActions(set) => {
                write = Some(set.iter().flat_map(from_action).collect::<Vec<_>>())
            }
            a => apply.extend(from_action(a)),
        }
    }
    let mut out: Vec<Instruction> = meter.into_iter().collect();
    if !apply.is_empty() {
        out.push(Instruction::ApplyActions(apply));
    }
    if clear {
        out.push(Instruction::ClearActions);
    }
    out.extend(write.map(Instruction::WriteActions));
    out.extend(metadata);
    out.extend(goto.map(Instruction::GotoTable));
    out
}

/// What a flow-mod asks of the rule tables.
#[derive(Debug, Clone)]
pub enum FlowModOp {
    /// Add (or replace the identical) rule.
    Add(FlowSpec),
    /// Change the actions of the selected rules (in OpenFlow 1.3 a modify
    /// that selects nothing adds nothing).
    Modify(FlowSpec, Selection),
    /// OpenFlow 1.0's modify: as [`FlowModOp::Modify`], but a modify that
    /// selects nothing adds the rule (in the spec's table; in every table
    /// when the spec names none, `table_given` false).
    ModifyOrAdd(FlowSpec, Selection),
    /// Delete the selected rules (`all_tables` for `OFPTT_ALL`), those
    /// that output to `out_port` only, unless it is `OFPP_ANY`.
    Delete {
        /// Selection.
        spec: FlowSpec,
        /// Strict or loose.
        how: Selection,
        /// `OFPTT_ALL`.
        all_tables: bool,
        /// Output port filter.
        out_port: u32,
    },
}

/// Reads the flow-mods of one connection: decodes each into buffers kept
/// from one message to the next (no allocation for its match), and, when
/// its instructions are the bytes of the one before (a controller
/// installing many flows mostly sends the same), neither decodes them
/// again nor keeps another copy of them: its rule shares the one before's
/// ([`FlowSpec::of_instructions`]).
#[derive(Debug, Default)]
pub struct FlowModReader {
    fm: FlowMod,
    /// The instruction bytes of `fm`, as they came.
    raw: Vec<u8>,
    /// `fm`'s instructions encoded, once a rule has asked for them.
    encoded: Option<std::sync::Arc<[u8]>>,
    /// `fm`'s actions in a table, when they do not depend on the match (no
    /// set-field, set-TTL or pop, whose prerequisites the match must
    /// have): the rules of the next flow-mods with these instructions in
    /// that table share them.
    actions: Option<(u8, std::sync::Arc<[Action]>)>,
}

impl FlowModReader {
    /// Decodes a FLOW_MOD frame as [`crate::msg::decode`] does (the same
    /// errors); another type of message is `BAD_TYPE`.
    pub fn read(&mut self, frame: &[u8]) -> Result<&FlowMod, OfError> {
        let same = crate::msg::decode_flow_mod_into(frame, &mut self.fm, &mut self.raw);
        if same != Ok(true) {
            self.encoded = None;
            self.actions = None;
        }
        same?;
        Ok(&self.fm)
    }

    /// The operation of the flow-mod last read ([`flow_mod_op`]).
    pub fn op(&mut self, n_tables: u8) -> Result<FlowModOp, OfError> {
        let (fm, encoded, shared) = (&self.fm, &mut self.encoded, &mut self.actions);
        op_of(
            fm,
            to_match(&fm.oxms),
            n_tables,
            |m, table| match shared {
                Some((t, a)) if *t == table => Ok(std::sync::Arc::clone(a)),
                _ => {
                    let a: std::sync::Arc<[Action]> =
                        to_actions(&fm.instructions, table, m)?.into();
                    if !match_dependent(&fm.instructions) {
                        *shared = Some((table, std::sync::Arc::clone(&a)));
                    }
                    Ok(a)
                }
            },
            || {
                Some(std::sync::Arc::clone(
                    encoded.get_or_insert_with(|| encode_instructions(fm)),
                ))
            },
        )
    }
}

/// Whether what instructions convert to (or the error they get) depends
/// on the match: whether an action in them has prerequisites the match
/// must have.
fn match_dependent(ins: &[Instruction]) -> bool {
    ins.iter().any(|i| match i {
        Instruction::ApplyActions(acts) | Instruction::WriteActions(acts) => acts.iter().any(|a| {
            matches!(
                a,
                OfAction::PopMpls(_)
                    | OfAction::PopPbb
                    | OfAction::SetNwTtl(_)
                    | OfAction::SetField(_)
            )
        }),
        _ => false,
    })
}

/// A flow-mod's instructions as a rule keeps them.
fn encode_instructions(fm: &FlowMod) -> std::sync::Arc<[u8]> {
    let mut b = Vec::with_capacity(64);
    for i in &fm.instructions {
        i.encode(&mut b);
    }
    b.into()
}

/// The operation of a flow-mod, checked.
pub fn flow_mod_op(fm: &FlowMod, n_tables: u8) -> Result<FlowModOp, OfError> {
    op_of(
        fm,
        to_match(&fm.oxms),
        n_tables,
        |m, table| to_actions(&fm.instructions, table, m).map(Into::into),
        || Some(encode_instructions(fm)),
    )
}

/// [`flow_mod_op`], with what its rule keeps of the instructions from
/// `instructions`.
pub(crate) fn op_of(
    fm: &FlowMod,
    matcher: Result<Match, OfError>,
    n_tables: u8,
    actions: impl FnOnce(&Match, u8) -> Result<std::sync::Arc<[Action]>, OfError>,
    instructions: impl FnOnce() -> Option<std::sync::Arc<[u8]>>,
) -> Result<FlowModOp, OfError> {
    if fm.buffer_id != crate::consts::NO_BUFFER && fm.command <= fm::MODIFY_STRICT {
        return Err(OfError::BUFFER_UNKNOWN);
    }
    let deleting = matches!(fm.command, fm::DELETE | fm::DELETE_STRICT);
    let all_tables = fm.table_id == TABLE_ALL;
    if (all_tables && !deleting) || (!all_tables && fm.table_id >= n_tables) {
        return Err(OfError::FLOW_MOD_BAD_TABLE_ID);
    }
    let matcher = matcher?;
    let table = if all_tables { 0 } else { fm.table_id };
    let actions = if deleting {
        Default::default()
    } else {
        actions(&matcher, table)?
    };
    // Made where the operation is returned (a spec built first and moved
    // in would be copied, its match whole, once more per flow-mod).
    let spec = move || FlowSpec {
        table,
        priority: fm.priority,
        cookie: fm.cookie,
        cookie_mask: if fm.command == fm::ADD {
            0
        } else {
            fm.cookie_mask
        },
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        matcher,
        has_actions: !deleting,
        actions,
        table_given: !all_tables,
        flags: fm.flags,
        of_instructions: if deleting { None } else { instructions() },
        learn_limit: 0,
        new_cookie: None,
    };
    Ok(match fm.command {
        fm::ADD => FlowModOp::Add(spec()),
        fm::MODIFY => FlowModOp::Modify(spec(), Selection::Loose),
        fm::MODIFY_STRICT => FlowModOp::Modify(spec(), Selection::Strict),
        fm::DELETE | fm::DELETE_STRICT => FlowModOp::Delete {
            spec: spec(),
            how: if fm.command == fm::DELETE {
                Selection::Loose
            } else {
                Selection::Strict
            },
            all_tables,
            out_port: fm.out_port,
        },
        _ => return Err(OfError::BAD_COMMAND),
    })
}

/// The flow statistics entry of a rule, at `now_us` on the switch clock.
pub fn flow_stats(r: &Rule, now_us: u64) -> FlowStats {
    let (packets, bytes) = r.counters();
    let age = now_us.saturating_sub(r.created_us);
    FlowStats {
        table_id: r.table,
        duration_sec: (age / 1_000_000) as u32,
        duration_nsec: (age % 1_000_000 * 1000) as u32,
        priority: r.priority,
        idle_timeout: r.timeouts().0,
        hard_timeout: r.timeouts().1,
        flags: r.flags,
        cookie: r.cookie,
        packet_count: packets,
        byte_count: bytes,
        oxms: from_match(&r.matcher),
        // As the controller sent them, when it did (they decode: they were
        // encoded from decoded instructions).
        instructions: r
            .of_instructions
            .as_deref()
            .and_then(|b| crate::action::decode_instructions(b).ok())
            .unwrap_or_else(|| from_actions(&r.actions)),
    }
}

/// The FLOW_REMOVED message of a rule gone for `why` at `now_us`.
pub fn flow_removed(
    r: &Rule,
    why: sluice_classifier::table::Removal,
    now_us: u64,
) -> crate::msg::FlowRemoved {
    use sluice_classifier::table::Removal;
    let (packets, bytes) = r.counters();
    let age = now_us.saturating_sub(r.created_us);
    crate::msg::FlowRemoved {
        cookie: r.cookie,
        priority: r.priority,
        reason: match why {
            Removal::Idle => 0,
            Removal::Hard => 1,
            Removal::Delete => 2,
        },
        table_id: r.table,
        duration_sec: (age / 1_000_000) as u32,
        duration_nsec: (age % 1_000_000 * 1000) as u32,
        idle_timeout: r.timeouts().0,
        hard_timeout: r.timeouts().1,
        packet_count: packets,
        byte_count: bytes,
        oxms: from_match(&r.matcher),
    }
}

/// Whether a rule outputs to `out_port` (`OFPP_ANY`: every rule does).
pub fn outputs_to(r: &Rule, out_port: u32) -> bool {
    out_port == port::ANY
        || r.actions.iter().any(|a| match a {
            Action::Output(p) => *p == out_port,
            Action::InPort => out_port == port::IN_PORT,
            Action::All => out_port == port::ALL,
            Action::Flood => out_port == port::FLOOD,
            Action::Normal => out_port == port::NORMAL,
            Action::Controller { .. } => out_port == port::CONTROLLER,
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tunnel addresses travel as Open vSwitch's Nicira fields
    /// (class NXM_1, numbers 31, 32, 109, 110), in matches and set-fields,
    /// both ways; a basic-class field with one of Sluice's own numbers for
    /// them is not one of them.
    #[test]
    fn tunnel_addresses_travel_as_nicira_fields() {
        let bytes = |oxms: &[Oxm]| {
            let mut b = Vec::new();
            crate::oxm::encode_match(oxms, &mut b);
            b
        };
        let m = to_match(&[
            Oxm::exact(f::NX_TUN_SRC, 0x0a00_0001),
            Oxm {
                field: f::NX_TUN_IPV6_DST,
                value: 0xfd90 << 112,
                mask: Some(0xffff << 112),
            },
        ])
        .unwrap();
        let back = from_match(&m);
        let b = bytes(&back);
        // OFPMT_OXM, length; then class 0x0001, field 31 (no mask), 4 bytes.
        assert_eq!(&b[4..8], &[0x00, 0x01, 31 << 1, 4]);
        assert_eq!(&b[8..12], &[10, 0, 0, 1]);
        assert_eq!(&b[12..16], &[0x00, 0x01, 110 << 1 | 1, 32]);
        let again = crate::oxm::decode_match(&mut crate::wire::Rd::new(&b, OfError::BAD_MATCH_LEN))
            .unwrap();
        assert_eq!(again, back);
        let a = to_action(
            &OfAction::SetField(Oxm::exact(f::NX_TUN_DST, 0x0a00_0002)),
            &m,
        )
        .unwrap();
        assert_eq!(a.to_string(), "set_field:10.0.0.2->tun_dst");
        assert_eq!(
            from_action(&a),
            vec![OfAction::SetField(Oxm::exact(f::NX_TUN_DST, 0x0a00_0002))]
        );
        // tun_metadata: as many bytes as the value needs, as OVS sends it.
        let meta = bytes(&[Oxm::exact(f::NX_TUN_METADATA0, 0x10002)]);
        assert_eq!(&meta[4..11], &[0x00, 0x01, 40 << 1, 3, 1, 0, 2]);
        let back =
            crate::oxm::decode_match(&mut crate::wire::Rd::new(&meta, OfError::BAD_MATCH_LEN))
                .unwrap();
        assert_eq!(back, [Oxm::exact(f::NX_TUN_METADATA0, 0x10002)]);
        // Basic class, number 64: no field.
        let mut bad = bytes(&[Oxm::exact(f::NX_TUN_SRC, 1)]);
        bad[4..6].copy_from_slice(&crate::oxm::OXM_BASIC.to_be_bytes());
        bad[6] = 64 << 1;
        assert_eq!(
            crate::oxm::decode_match(&mut crate::wire::Rd::new(&bad, OfError::BAD_MATCH_LEN)),
            Err(OfError::BAD_FIELD)
        );
    }

    /// OpenFlow's SET_NW_TTL is the flow language's mod_nw_ttl (a set of
    /// nw_ttl) and goes back as SET_NW_TTL; it needs an IP match, as in
    /// Open vSwitch (MATCH_INCONSISTENT otherwise).
    #[test]
    fn set_nw_ttl_round_trips_and_needs_an_ip_match() {
        let ip = to_match(&[Oxm::exact(f::ETH_TYPE, 0x86dd)]).unwrap();
        let a = to_action(&OfAction::SetNwTtl(7), &ip).unwrap();
        assert_eq!(a.to_string(), "mod_nw_ttl:7");
        assert_eq!(from_action(&a), vec![OfAction::SetNwTtl(7)]);
        let any = to_match(&[]).unwrap();
        assert_eq!(
            to_action(&OfAction::SetNwTtl(7), &any),
            Err(OfError::MATCH_INCONSISTENT)
        );
    }
}
