//! Nicira's register actions onto the classifier's `load` and `move`,
//! both ways, with the checks Open vSwitch makes when a flow-mod adds
//! them: the field known and writable, the bits inside it, the value in
//! its bits, the prerequisites in the match.

use sluice_classifier::fields::{Field, Prereq};
use sluice_classifier::subfield::Subfield;
use sluice_classifier::{Action, Match};

use super::{mapped, oxm_of};
use crate::action::OfAction;
use crate::consts::OfError;
use crate::nxm::{ct_flag, field_of_action_header, header_of, NxAction, CT_RECIRC_NONE};
use crate::oxm::Oxm;
use sluice_classifier::ct::{Ct, CtZone};

/// The subfield of a header and bit range, checked.
fn subfield(h: u32, ofs: u16, n_bits: u16) -> Result<Subfield, OfError> {
    let field = field_of_action_header(h).ok_or(OfError::BAD_SET_ARGUMENT)?;
    if n_bits == 0 || u32::from(ofs) + u32::from(n_bits) > field.bits() {
        return Err(OfError::BAD_SET_ARGUMENT);
    }
    Ok(Subfield {
        field,
        ofs: ofs as u8,
        n_bits: n_bits as u8,
    })
}

/// A load into `NXM_OF_ARP_OP` / `OXM_OF_ARP_OP`, 16 bits on the wire
/// (`load:2->NXM_OF_ARP_OP[]`, Neutron's and OVS's ARP responders): the
/// opcode's low 8 bits, all Sluice's key holds (as OVS's `nw_proto`);
/// a value past them is refused, as OVS refuses an opcode over 255.
fn arp_op_load(h: u32, ofs: u16, n_bits: u16, value: u64) -> Result<Option<Subfield>, OfError> {
    match field_of_action_header(h) {
        Some(field) if field.name == "arp_op" && h & 0xff == 2 => {
            if n_bits == 0 || ofs + n_bits > 16 {
                return Err(OfError::BAD_SET_ARGUMENT);
            }
            if ofs >= 8 || (u128::from(value) << ofs) >> 8 != 0 {
                return Err(OfError::BAD_SET_ARGUMENT);
            }
            Ok(Some(Subfield {
                field,
                ofs: ofs as u8,
                n_bits: n_bits.min(8 - ofs) as u8,
            }))
        }
        _ => Ok(None),
    }
}

/// Whether `field` may be written under `m` (none: a group's bucket,
/// where the translation skips what the packet does not have).
fn check_writable(field: &'static Field, m: Option<&Match>) -> Result<(), OfError> {
    if matches!(field.name, "vlan_tci" | "vlan_vid" | "vlan_pcp")
        || !(field.writable || field.is_pipeline())
    {
        return Err(OfError::BAD_SET_TYPE);
    }
    holds(field.write_prereq(), m)
}

fn holds(p: Prereq, m: Option<&Match>) -> Result<(), OfError> {
    if m.is_none_or(|m| p.holds(&m.value, &m.mask)) {
        Ok(())
    } else {
        Err(OfError::MATCH_INCONSISTENT)
    }
}

/// The classifier action of a Nicira register action.
pub(super) fn to_action(nx: &NxAction, m: Option<&Match>) -> Result<Action, OfError> {
    Ok(match *nx {
        NxAction::RegLoad {
            dst,
            ofs,
            n_bits,
            value,
        } => {
            if n_bits < 64 && value >> n_bits != 0 {
                return Err(OfError::BAD_ARGUMENT);
            }
            let sf = arp_op_load(dst, ofs, n_bits, value)?
                .map_or_else(|| subfield(dst, ofs, n_bits), Ok)?;
            check_writable(sf.field, m)?;
            Action::Load {
                field: sf.field,
                value: sf.place(u128::from(value)),
                mask: sf.mask(),
            }
        }
        NxAction::RegMove {
            src,
            dst,
            src_ofs,
            dst_ofs,
            n_bits,
        } => {
            let src = subfield(src, src_ofs, n_bits)?;
            let dst = subfield(dst, dst_ofs, n_bits)?;
            holds(src.field.prereq, m)?;
            check_writable(dst.field, m)?;
            Action::Move { src, dst }
        }
        NxAction::Stack {
            pop,
            field,
            ofs,
            n_bits,
        } => {
            let sf = subfield(field, ofs, n_bits)?;
            if pop {
                check_writable(sf.field, m)?;
            } else {
                holds(sf.field.prereq, m)?;
            }
            Action::Stack { pop, sf }
        }
        NxAction::CtClear => Action::CtClear,
        NxAction::DecTtlIds(ref ids) => Action::DecTtlIds(ids.clone()),
        NxAction::FinTimeout { idle, hard } => Action::FinTimeout { idle, hard },
        NxAction::Bundle {
            algorithm,
            fields,
            basis,
            ref members,
            dst,
        } => {
            use sluice_classifier::bundle::{Bundle, BundleAlgorithm};
            let dst = match dst {
                Some((h, ofs, n_bits)) => {
                    let sf = subfield(h, ofs, n_bits)?;
                    check_writable(sf.field, m)?;
                    Some(sf)
                }
                None => None,
            };
            if members.iter().any(|&p| p == 0 || p >= 0xff00) {
                return Err(OfError::BAD_OUT_PORT);
            }
            Action::Bundle(Box::new(Bundle {
                fields: sluice_classifier::multipath::HashFields::of_code(fields)
                    .ok_or(OfError::BAD_ARGUMENT)?,
                basis,
                algorithm: BundleAlgorithm::of_code(algorithm).ok_or(OfError::BAD_ARGUMENT)?,
                members: members.iter().map(|&p| u32::from(p)).collect(),
                dst,
            }))
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
            use sluice_classifier::multipath::{Algorithm, HashFields, Multipath};
            let sf = subfield(dst, ofs, n_bits)?;
            check_writable(sf.field, m)?;
            let fields = HashFields::of_code(fields).ok_or(OfError::BAD_ARGUMENT)?;
            let algorithm = Algorithm::of_code(algorithm).ok_or(OfError::BAD_ARGUMENT)?;
            // The destination must hold every link (OVS's multipath_check).
            if n_bits < 16 && u32::from(max_link) >= 1 << n_bits {
                return Err(OfError::BAD_ARGUMENT);
            }
            Action::Multipath(Box::new(Multipath {
                fields,
                basis,
                algorithm,
                max_link,
                arg,
                dst: sf,
            }))
        }
        NxAction::CheckPktLarger { pkt_len, ofs, dst } => {
            let dst = subfield(dst, ofs, 1)?;
            check_writable(dst.field, m)?;
            Action::CheckPktLarger { len: pkt_len, dst }
        }
        NxAction::Controller {
            max_len,
            id,
            reason,
            ref userdata,
            meter_id,
            pause,
        } => {
            let reason = sluice_classifier::dpaction::PacketInReason::of_code(reason)
                .ok_or(OfError::BAD_ARGUMENT)?;
            let plain = reason == sluice_classifier::dpaction::PacketInReason::Action
                && id == 0
                && userdata.is_empty()
                && meter_id.is_none()
                && !pause;
            Action::Controller {
                max_len,
                opts: (!plain).then(|| {
                    Box::new(sluice_classifier::action::ControllerOpts {
                        reason,
                        id,
                        userdata: userdata.clone(),
                        meter_id,
                        pause,
                    })
                }),
            }
        }
        NxAction::OutputReg {
            src, ofs, n_bits, ..
        } => {
            let src = subfield(src, ofs, n_bits)?;
            holds(src.field.prereq, m)?;
            Action::OutputReg(src)
        }
        NxAction::Note(ref bytes) => Action::Note(bytes.clone()),
        NxAction::PopQueue => Action::PopQueue,
        NxAction::Sample(s) => Action::Sample(s),
        NxAction::Conjunction {
            id,
            clause,
            n_clauses,
        } => Action::Conjunction {
            id,
            clause: clause + 1,
            n_clauses,
        },
        NxAction::Learn(ref l) => Action::Learn(Box::new(super::learn::to_learn(l, m)?)),
        NxAction::Resubmit { in_port, table } => Action::Resubmit {
            // Any port, reserved ones too (OVN's pinctrl resubmits its
            // health checks and IGMP queries as from CONTROLLER), as OVS
            // takes them.
            in_port: (in_port != IN_PORT16).then(|| sluice_classifier::fields::port32(in_port)),
            table: (table != 255).then_some(table),
        },
        NxAction::Clone(ref actions) => {
            let inner = actions
                .iter()
                .map(|a| super::to_action_in(a, m))
                .collect::<Result<Vec<_>, _>>()?;
            if inner.iter().any(Action::refused_in_clone) {
                return Err(OfError::BAD_ARGUMENT);
            }
            Action::Clone(inner)
        }
        // Only inside NXAST_CT.
        NxAction::Nat(_) => return Err(OfError::BAD_ARGUMENT),
        NxAction::Ct {
            flags,
            zone_src,
            zone_imm,
            table,
            alg,
            ref actions,
        } => {
            if alg != 0 || flags & !(ct_flag::COMMIT | ct_flag::FORCE) != 0 {
                return Err(OfError::BAD_ARGUMENT);
            }
            let mut ct = Ct {
                commit: flags & ct_flag::COMMIT != 0,
                force: flags & ct_flag::FORCE != 0,
                table: (table != CT_RECIRC_NONE).then_some(table),
                zone: None,
                mark: None,
                label: None,
                mark_move: None,
                label_move: None,
                nat: None,
            };
            if zone_src == 0 {
                ct.zone = (zone_imm != 0).then_some(CtZone::Imm(zone_imm));
            } else {
                let sf = subfield(zone_src, zone_imm >> 6, (zone_imm & 0x3f) + 1)?;
                if sf.n_bits != 16 {
                    return Err(OfError::BAD_ARGUMENT);
                }
                ct.zone = Some(CtZone::Field(sf));
            }
            for (i, a) in actions.iter().enumerate() {
                // `nat` first (as ovs-ofctl sends it), then exec: sets of
                // ct_mark and ct_label, whole or masked.
                let (name, v, mk) = match a {
                    OfAction::Nx(NxAction::Nat(n)) if i == 0 => {
                        ct.nat = Some(*n);
                        continue;
                    }
                    OfAction::SetField(o) => {
                        let (fd, _) = mapped(o.field).ok_or(OfError::BAD_SET_TYPE)?;
                        (fd.name, o.value, o.mask.unwrap_or(fd.full_mask()))
                    }
                    OfAction::Nx(NxAction::RegLoad {
                        dst,
                        ofs,
                        n_bits,
                        value,
                    }) => {
                        let sf = subfield(*dst, *ofs, *n_bits)?;
                        (sf.field.name, sf.place(u128::from(*value)), sf.mask())
                    }
                    OfAction::Nx(NxAction::RegMove {
                        src,
                        dst,
                        src_ofs,
                        dst_ofs,
                        n_bits,
                    }) => {
                        let s = subfield(*src, *src_ofs, *n_bits)?;
                        let d = subfield(*dst, *dst_ofs, *n_bits)?;
                        holds(s.field.prereq, m)?;
                        ct.set_move(s, d).map_err(|_| OfError::BAD_ARGUMENT)?;
                        continue;
                    }
                    _ => return Err(OfError::BAD_ARGUMENT),
                };
                match name {
                    "ct_mark" => {
                        let (pv, pm) = ct.mark.unwrap_or((0, 0));
                        ct.mark =
                            Some(((pv & !(mk as u32)) | (v as u32 & mk as u32), pm | mk as u32));
                    }
                    "ct_label" => {
                        let (pv, pm) = ct.label.unwrap_or((0, 0));
                        ct.label = Some(((pv & !mk) | (v & mk), pm | mk));
                    }
                    _ => return Err(OfError::BAD_ARGUMENT),
                }
            }
            if ct.sets_mark_or_label() && !ct.commit {
                return Err(OfError::BAD_ARGUMENT);
            }
            // A zone from a field names bits the match must have.
            if let Some(CtZone::Field(sf)) = ct.zone {
                holds(sf.field.prereq, m)?;
            }
            Action::Ct(ct)
        }
        NxAction::RegLoad2(o) => {
            let (fd, _) = mapped(o.field).ok_or(OfError::BAD_SET_TYPE)?;
            let full = fd.full_mask();
            let mask = o.mask.unwrap_or(full);
            if o.value & !full != 0 || mask & !full != 0 {
                return Err(OfError::BAD_SET_ARGUMENT);
            }
            check_writable(fd, m)?;
            Action::Load {
                field: fd,
                value: o.value & mask,
                mask,
            }
        }
    })
}

/// A `load`: one `NXAST_REG_LOAD` per run of the mask's bits (at most
/// 64 each), as `ovs-ofctl` sends one; a field with no NXM header
/// (`tun_metadata`) by `NXAST_REG_LOAD2` with a masked OXM.
pub(crate) fn from_load(field: &'static Field, value: u128, mask: u128) -> Vec<OfAction> {
    let Some(h) = header_of(field) else {
        return load2(field, value, mask).into_iter().collect();
    };
    Subfield::runs(field, mask)
        .map(|sf| {
            OfAction::Nx(NxAction::RegLoad {
                dst: h,
                ofs: sf.ofs.into(),
                n_bits: sf.n_bits.into(),
                value: ((value & sf.mask()) >> sf.ofs) as u64,
            })
        })
        .collect()
}

fn load2(field: &'static Field, value: u128, mask: u128) -> Option<OfAction> {
    Some(OfAction::Nx(NxAction::RegLoad2(Oxm {
        field: oxm_of(field)?,
        value: value & mask,
        mask: (mask != field.full_mask()).then_some(mask),
    })))
}

/// A `ct` action, as `NXAST_CT` (its exec's sets as set-fields, masked
/// ones as loads, as `ovs-ofctl` sends them).
pub(super) fn from_ct(ct: &Ct) -> Vec<OfAction> {
    let (zone_src, zone_imm) = match ct.zone {
        None => (0, 0),
        Some(CtZone::Imm(z)) => (0, z),
        Some(CtZone::Field(sf)) => match header_of(sf.field) {
            Some(h) => (h, u16::from(sf.ofs) << 6 | (u16::from(sf.n_bits) - 1)),
            None => return Vec::new(),
        },
    };
    let mut actions = Vec::new();
    if let Some(n) = ct.nat {
        actions.push(OfAction::Nx(NxAction::Nat(n)));
    }
    let field = |n: &str| sluice_classifier::fields::field_by_name(n).expect("a ct field");
    if let Some((v, m)) = ct.mark {
        actions.extend(set_or_load(field("ct_mark"), v.into(), m.into()));
    }
    if let Some((v, m)) = ct.label {
        actions.extend(set_or_load(field("ct_label"), v, m));
    }
    for (src, dst) in [ct.mark_move, ct.label_move].into_iter().flatten() {
        if let (Some(s), Some(d)) = (header_of(src.field), header_of(dst.field)) {
            actions.push(OfAction::Nx(NxAction::RegMove {
                src: s,
                dst: d,
                src_ofs: src.ofs.into(),
                dst_ofs: dst.ofs.into(),
                n_bits: src.n_bits.into(),
            }));
        }
    }
    let mut flags = 0;
    if ct.commit {
        flags |= ct_flag::COMMIT;
    }
    if ct.force {
        flags |= ct_flag::FORCE;
    }
    vec![OfAction::Nx(NxAction::Ct {
        flags,
        zone_src,
        zone_imm,
        table: ct.table.unwrap_or(CT_RECIRC_NONE),
        alg: 0,
        actions,
    })]
}

fn set_or_load(field: &'static Field, value: u128, mask: u128) -> Vec<OfAction> {
    if mask == field.full_mask() {
        let Some(n) = oxm_of(field) else {
            return Vec::new();
        };
        vec![OfAction::SetField(Oxm::exact(n, value))]
    } else {
        from_load(field, value, mask)
    }
}

/// An `output:FIELD`, as `NXAST_OUTPUT_REG` (none if the field has no
/// NXM header).
pub(super) fn from_output_reg(src: &Subfield) -> Vec<OfAction> {
    let Some(h) = header_of(src.field) else {
        return Vec::new();
    };
    vec![OfAction::Nx(NxAction::OutputReg {
        src: h,
        ofs: src.ofs.into(),
        n_bits: src.n_bits.into(),
        max_len: u16::MAX,
    })]
}

/// A `move`, as `NXAST_REG_MOVE` (none if a side has no NXM header).
pub(super) fn from_move(src: &Subfield, dst: &Subfield) -> Vec<OfAction> {
    let (Some(s), Some(d)) = (header_of(src.field), header_of(dst.field)) else {
        return Vec::new();
    };
    vec![OfAction::Nx(NxAction::RegMove {
        src: s,
        dst: d,
        src_ofs: src.ofs.into(),
        dst_ofs: dst.ofs.into(),
        n_bits: src.n_bits.into(),
    })]
}

/// OpenFlow 1.0's `OFPP_IN_PORT`, in a resubmit: the packet's own port.
const IN_PORT16: u16 = 0xfff8;

/// `NXAST_CHECK_PKT_LARGER` of a `check_pkt_larger` (none for a
/// destination with no NXM header).
pub(super) fn from_check_pkt_larger(len: u16, dst: &Subfield) -> Vec<OfAction> {
    let Some(h) = header_of(dst.field) else {
        return Vec::new();
    };
    vec![OfAction::Nx(NxAction::CheckPktLarger {
        pkt_len: len,
        ofs: dst.ofs.into(),
        dst: h,
    })]
}

/// `NXAST_MULTIPATH` of a `multipath` (none for a destination with no
/// NXM header).
pub(super) fn from_multipath(mp: &sluice_classifier::multipath::Multipath) -> Vec<OfAction> {
    let Some(dst) = header_of(mp.dst.field) else {
        return Vec::new();
    };
    vec![OfAction::Nx(NxAction::Multipath {
        fields: mp.fields as u16,
        basis: mp.basis,
        algorithm: mp.algorithm as u16,
        max_link: mp.max_link,
        arg: mp.arg,
        ofs: mp.dst.ofs.into(),
        n_bits: mp.dst.n_bits.into(),
        dst,
    })]
}

/// `NXAST_BUNDLE(_LOAD)` of a `bundle` (none for a destination with no
/// NXM header).
pub(super) fn from_bundle(b: &sluice_classifier::bundle::Bundle) -> Vec<OfAction> {
    let dst = match &b.dst {
        Some(d) => match header_of(d.field) {
            Some(h) => Some((h, u16::from(d.ofs), u16::from(d.n_bits))),
            None => return Vec::new(),
        },
        None => None,
    };
    vec![OfAction::Nx(NxAction::Bundle {
        algorithm: b.algorithm as u16,
        fields: b.fields as u16,
        basis: b.basis,
        members: b.members.iter().map(|&p| p as u16).collect(),
        dst,
    })]
}

/// `NXAST_RESUBMIT(_TABLE)` of the classifier's `resubmit`.
pub(super) fn from_resubmit(in_port: Option<u32>, table: Option<u8>) -> OfAction {
    OfAction::Nx(NxAction::Resubmit {
        in_port: in_port.map_or(IN_PORT16, |p| match p {
            0xffff_ff00.. => sluice_classifier::fields::port16(p),
            p => u16::try_from(p).unwrap_or(IN_PORT16),
        }),
        table: table.unwrap_or(255),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{from_action, to_action, to_match};
    use crate::oxm::f;

    fn parsed(line: &str) -> Vec<Action> {
        sluice_classifier::parse::parse_flow_file(line, None).unwrap()[0]
            .actions
            .to_vec()
    }

    /// A resubmit as from a reserved port (OVN's pinctrl sends its health
    /// checks and IGMP queries with `resubmit(CONTROLLER,38)`) goes over
    /// the wire in 16 bits and comes back the same.
    #[test]
    fn resubmits_from_reserved_ports_round_trip() {
        let any = to_match(&[]).unwrap();
        for line in [
            "actions=resubmit(CONTROLLER,38)",
            "actions=resubmit(LOCAL,2),resubmit:ANY",
            "actions=resubmit(,7),resubmit(3,4),resubmit(in_port,5)",
        ] {
            let acts = parsed(line);
            let wire: Vec<OfAction> = acts.iter().flat_map(from_action).collect();
            let back: Vec<Action> = wire.iter().map(|o| to_action(o, &any).unwrap()).collect();
            assert_eq!(back, acts, "{line}");
        }
        assert_eq!(
            sluice_classifier::action::format_actions(&parsed("actions=resubmit(CONTROLLER,38)")),
            "resubmit(CONTROLLER,38)"
        );
        assert!(matches!(
            from_action(&parsed("actions=resubmit(CONTROLLER,38)")[0])[0],
            OfAction::Nx(NxAction::Resubmit {
                in_port: 0xfffd,
                table: 38
            })
        ));
    }

    #[test]
    fn loads_and_moves_round_trip_through_nicira_actions() {
        let tcp = to_match(&[Oxm::exact(f::ETH_TYPE, 0x0800), Oxm::exact(f::IP_PROTO, 6)]).unwrap();
        for line in [
            "tcp,actions=load:0x5->NXM_NX_REG0[0..15],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
            "tcp,actions=set_field:0x10/0x101->reg2,load:0->NXM_NX_XXREG0[]",
            "tcp,actions=move:NXM_NX_REG0[0..3]->NXM_OF_TCP_DST[4..7],load:1->OXM_OF_PKT_REG3[63]",
            "tcp,actions=load:0->NXM_OF_IN_PORT[],load:5->OXM_OF_METADATA[0..7]",
            "tcp,actions=load:0x7->tun_metadata0[0..7]",
            "tcp,actions=ct(commit,zone=5,exec(set_field:0x1->ct_mark,set_field:0x2/0x3->ct_label)),ct(table=11,zone=NXM_NX_REG0[0..15]),ct_clear",
        ] {
            let acts = parsed(line);
            let back: Vec<Action> = acts
                .iter()
                .flat_map(from_action)
                .map(|o| to_action(&o, &tcp).unwrap())
                .collect();
            assert_eq!(
                sluice_classifier::action::format_actions(&back),
                sluice_classifier::action::format_actions(&acts),
                "{line}"
            );
        }
    }

    #[test]
    fn bad_register_actions_get_ovs_errors() {
        let any = to_match(&[]).unwrap();
        let reg0 = 0x0001_0004;
        let load_under = |m: &Match, dst, ofs, n_bits, value| {
            to_action(
                &OfAction::Nx(NxAction::RegLoad {
                    dst,
                    ofs,
                    n_bits,
                    value,
                }),
                m,
            )
        };
        let load = |dst, ofs, n_bits, value| load_under(&any, dst, ofs, n_bits, value);
        assert_eq!(
            load(reg0, 30, 4, 1),
            Err(OfError::BAD_SET_ARGUMENT),
            "past the field"
        );
        assert_eq!(
            load(reg0, 0, 4, 16),
            Err(OfError::BAD_ARGUMENT),
            "value too wide"
        );
        assert_eq!(
            load(0x0001_7f04, 0, 4, 1),
            Err(OfError::BAD_SET_ARGUMENT),
            "unknown field"
        );
        // tcp_dst without a TCP match; tcp_flags not writable.
        assert_eq!(load(0x0000_1402, 0, 4, 1), Err(OfError::MATCH_INCONSISTENT));
        assert_eq!(load(0x0001_4402, 0, 4, 1), Err(OfError::BAD_SET_TYPE));
        // NXM_OF_ARP_OP is 16 bits on the wire, the opcode's low 8 in
        // the key: `load:2->NXM_OF_ARP_OP[]` (Neutron's ARP responder) is
        // a load of those 8; an opcode past 255 is refused.
        let arp = to_match(&[crate::oxm::Oxm::exact(crate::oxm::f::ETH_TYPE, 0x0806)]).unwrap();
        let arp_load = |dst, ofs, n_bits, value| load_under(&arp, dst, ofs, n_bits, value);
        for h in [0x0000_1e02, 0x8000_2a02] {
            let Ok(Action::Load { field, value, mask }) = arp_load(h, 0, 16, 2) else {
                panic!("{h:#x}")
            };
            assert_eq!((field.name, value, mask), ("arp_op", 2, 0xff));
            assert_eq!(arp_load(h, 0, 16, 0x102), Err(OfError::BAD_SET_ARGUMENT));
        }
        let mv = OfAction::Nx(NxAction::RegMove {
            src: 0x0000_1202,
            dst: reg0,
            src_ofs: 0,
            dst_ofs: 0,
            n_bits: 16,
        });
        assert_eq!(
            to_action(&mv, &any),
            Err(OfError::MATCH_INCONSISTENT),
            "tcp_src unmatched"
        );
    }
}
