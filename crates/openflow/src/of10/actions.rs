//! OpenFlow 1.0's actions, and Nicira's as 1.0 numbers them, read into
//! the classifier's [`Action`]s under a rule's match and written back.
//!
//! Reading follows the flow language: `SET_VLAN_VID`/`PCP` (which push a
//! tag where there is none) become `push_vlan` and the set where the
//! match does not guarantee a tag, as `mod_vlan_vid` does; the `SET_*`
//! address and port actions are the flow language's `mod_*` (acting on
//! the packets that have the field); `ENQUEUE` is `set_queue`, `output`,
//! `pop_queue`. Nicira's actions read as in 1.3, but for those 1.0 alone
//! numbers as Nicira's (`dec_ttl`, `set_queue`, `group`, MPLS) and
//! `clone`, whose nested actions are 1.0's.
//!
//! Writing is Open vSwitch's `ofpacts_put_openflow_actions` for 1.0: a
//! set-field of a field 1.0 has an action for is that action, of another
//! field `NXAST_REG_LOAD`; a `push_vlan` before a VLAN set is left to the
//! set; `goto_table` is `resubmit(,T)`; what 1.0 cannot say (meters,
//! `write_actions`, `clear_actions`, PBB, TTL copies) is left out.

use sluice_classifier::fields::{field_by_name, Field};
use sluice_classifier::{Action, Match};
use sluice_packet::wire::ethernet::ethertype;

use super::{port16, port32};
use crate::action::OfAction;
use crate::consts::OfError;
use crate::convert::{from_action, from_load, to_action};
use crate::nx::NX_VENDOR;
use crate::nxm::NxAction;
use crate::oxm::f;
use crate::wire::{patch_u16, Rd};

/// 1.0's action types.
pub mod at {
    #![allow(missing_docs)]
    pub const OUTPUT: u16 = 0;
    pub const SET_VLAN_VID: u16 = 1;
    pub const SET_VLAN_PCP: u16 = 2;
    pub const STRIP_VLAN: u16 = 3;
    pub const SET_DL_SRC: u16 = 4;
    pub const SET_DL_DST: u16 = 5;
    pub const SET_NW_SRC: u16 = 6;
    pub const SET_NW_DST: u16 = 7;
    pub const SET_NW_TOS: u16 = 8;
    pub const SET_TP_SRC: u16 = 9;
    pub const SET_TP_DST: u16 = 10;
    pub const ENQUEUE: u16 = 11;
    pub const VENDOR: u16 = 0xffff;
}

/// The Nicira subtypes 1.0 has for what 1.1 numbers itself.
mod nxast {
    pub const SET_QUEUE: u16 = 4;
    pub const DEC_TTL: u16 = 18;
    pub const PUSH_MPLS: u16 = 23;
    pub const POP_MPLS: u16 = 24;
    pub const SET_MPLS_TTL: u16 = 25;
    pub const DEC_MPLS_TTL: u16 = 26;
    pub const GROUP: u16 = 40;
    pub const CLONE: u16 = 42;
    pub const RESUBMIT_TABLE: u16 = 14;
    pub const WRITE_METADATA: u16 = 22;
}

fn fd(name: &str) -> &'static Field {
    field_by_name(name).expect("a classifier field")
}

/// Whether `m` guarantees a VLAN tag.
fn tagged(m: &Match) -> bool {
    let (v, mk) = m.get(fd("vlan_tci"));
    v & mk & 0x1000 != 0
}

/// Reads a 1.0 action list under the rule's match `m`.
pub fn decode(b: &[u8], m: &Match) -> Result<Vec<Action>, OfError> {
    let mut out = Vec::with_capacity((b.len() / 8).min(16));
    let mut tags = u8::from(tagged(m));
    let mut r = Rd::new(b, OfError::BAD_ACTION_LEN);
    while r.left() > 0 {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 || len - 4 > r.left() {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let body = r.take(len - 4)?;
        let mut a = Rd::new(body, OfError::BAD_ACTION_LEN);
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(OfError::BAD_ACTION_LEN)
            }
        };
        let legacy = |name: &'static str, action: &'static str, value: u128| Action::SetField {
            field: fd(name),
            value,
            legacy: Some(action),
        };
        let act = match typ {
            at::OUTPUT => {
                fixed(8)?;
                let port = port32(a.u16()?);
                let max_len = a.u16()?;
                to_action(&OfAction::Output { port, max_len }, m)?
            }
            at::SET_VLAN_VID | at::SET_VLAN_PCP => {
                fixed(8)?;
                let v = a.u16()?;
                let set = if typ == at::SET_VLAN_VID {
                    if v > 0x0fff {
                        return Err(OfError::BAD_ARGUMENT);
                    }
                    Action::ModVlanVid(v)
                } else {
                    let pcp = (v >> 8) as u8;
                    if pcp > 7 {
                        return Err(OfError::BAD_ARGUMENT);
                    }
                    Action::ModVlanPcp(pcp)
                };
                if tags == 0 {
                    out.push(Action::PushVlan(ethertype::VLAN_8021Q));
                    tags = 1;
                }
                set
            }
            at::STRIP_VLAN => {
                fixed(8)?;
                tags = tags.saturating_sub(1);
                Action::PopVlan
            }
            at::SET_DL_SRC | at::SET_DL_DST => {
                fixed(16)?;
                let mac = crate::wire::be_uint(a.take(6)?);
                if typ == at::SET_DL_SRC {
                    legacy("dl_src", "mod_dl_src", mac)
                } else {
                    legacy("dl_dst", "mod_dl_dst", mac)
                }
            }
            at::SET_NW_SRC | at::SET_NW_DST => {
                fixed(8)?;
                let ip = u128::from(a.u32()?);
                if typ == at::SET_NW_SRC {
                    legacy("nw_src", "mod_nw_src", ip)
                } else {
                    legacy("nw_dst", "mod_nw_dst", ip)
                }
            }
            at::SET_NW_TOS => {
                fixed(8)?;
                let tos = a.u8()?;
                if tos & 3 != 0 {
                    return Err(OfError::BAD_ARGUMENT);
                }
                legacy("nw_tos", "mod_nw_tos", u128::from(tos))
            }
            at::SET_TP_SRC | at::SET_TP_DST => {
                fixed(8)?;
                let p = u128::from(a.u16()?);
                if typ == at::SET_TP_SRC {
                    legacy("tp_src", "mod_tp_src", p)
                } else {
                    legacy("tp_dst", "mod_tp_dst", p)
                }
            }
            at::ENQUEUE => {
                fixed(16)?;
                let port = port32(a.u16()?);
                a.skip(6)?;
                let queue = a.u32()?;
                out.push(Action::SetQueue(queue));
                out.push(to_action(&OfAction::Output { port, max_len: 0 }, m)?);
                Action::PopQueue
            }
            at::VENDOR => vendor(body, len, m)?,
            _ => return Err(OfError::BAD_ACTION_TYPE),
        };
        out.push(act);
    }
    Ok(out)
}

/// A Nicira action in a 1.0 list (`body`: from the vendor id on).
fn vendor(body: &[u8], len: usize, m: &Match) -> Result<Action, OfError> {
    let mut a = Rd::new(body, OfError::BAD_ACTION_LEN);
    if a.u32()? != NX_VENDOR {
        return Err(OfError::BAD_ACTION_EXPERIMENTER);
    }
    let sub = a.u16()?;
    let simple = |want: usize| {
        if len == want {
            Ok(())
        } else {
            Err(OfError::BAD_ACTION_LEN)
        }
    };
    let of = |o: OfAction| to_action(&o, m);
    Ok(match sub {
        nxast::SET_QUEUE => {
            simple(16)?;
            a.skip(2)?;
            Action::SetQueue(a.u32()?)
        }
        nxast::DEC_TTL => {
            simple(16)?;
            Action::DecTtl
        }
        nxast::PUSH_MPLS => {
            simple(16)?;
            of(OfAction::PushMpls(a.u16()?))?
        }
        nxast::POP_MPLS => {
            simple(16)?;
            of(OfAction::PopMpls(a.u16()?))?
        }
        nxast::SET_MPLS_TTL => {
            simple(16)?;
            Action::SetMplsTtl(a.u8()?)
        }
        nxast::DEC_MPLS_TTL => {
            simple(16)?;
            Action::DecMplsTtl
        }
        nxast::GROUP => {
            simple(16)?;
            a.skip(2)?;
            of(OfAction::Group(a.u32()?))?
        }
        nxast::WRITE_METADATA => {
            simple(32)?;
            a.skip(6)?;
            let value = a.u64()?;
            let mask = a.u64()?;
            Action::WriteMetadata {
                value: value & mask,
                mask,
            }
        }
        nxast::CLONE => {
            if len < 16 {
                return Err(OfError::BAD_ACTION_LEN);
            }
            a.skip(6)?;
            // (What the clone does to tags stays in it.)
            Action::Clone(decode(a.rest(), m)?)
        }
        _ => match NxAction::decode(body)? {
            Some(nx) => of(OfAction::Nx(nx))?,
            None => return Err(OfError::BAD_EXPERIMENTER_TYPE),
        },
    })
}

/// A 16-byte Nicira action: `arg` at `ofs` after the 10-byte header.
fn nx_simple(out: &mut Vec<u8>, subtype: u16, ofs: usize, arg: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&at::VENDOR.to_be_bytes());
    out.extend_from_slice(&16u16.to_be_bytes());
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    out.resize(start + ofs, 0);
    out.extend_from_slice(arg);
    out.resize(start + 16, 0);
}

/// An 8-byte 1.0 action of `typ` with `arg` (2 or 4 bytes).
fn std8(out: &mut Vec<u8>, typ: u16, arg: &[u8]) {
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&8u16.to_be_bytes());
    out.extend_from_slice(arg);
    out.resize(out.len() + 4 - arg.len(), 0);
}

fn output(out: &mut Vec<u8>, port: u32, max_len: u16) {
    let mut arg = port16(port).to_be_bytes().to_vec();
    arg.extend_from_slice(&max_len.to_be_bytes());
    std8(out, at::OUTPUT, &arg);
}

/// The 1.0 action of a set of `field`, if 1.0 has one.
fn legacy_set(out: &mut Vec<u8>, field: &Field, value: u128) -> bool {
    match field.name {
        "dl_src" | "dl_dst" => {
            let typ = if field.name == "dl_src" {
                at::SET_DL_SRC
            } else {
                at::SET_DL_DST
            };
            out.extend_from_slice(&typ.to_be_bytes());
            out.extend_from_slice(&16u16.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes()[10..]);
            out.extend_from_slice(&[0; 6]);
        }
        "nw_src" => std8(out, at::SET_NW_SRC, &(value as u32).to_be_bytes()),
        "nw_dst" => std8(out, at::SET_NW_DST, &(value as u32).to_be_bytes()),
        "nw_tos" => std8(out, at::SET_NW_TOS, &[value as u8 & 0xfc]),
        "ip_dscp" => std8(out, at::SET_NW_TOS, &[(value as u8) << 2]),
        "tp_src" | "tcp_src" | "udp_src" | "sctp_src" => {
            std8(out, at::SET_TP_SRC, &(value as u16).to_be_bytes())
        }
        "tp_dst" | "tcp_dst" | "udp_dst" | "sctp_dst" => {
            std8(out, at::SET_TP_DST, &(value as u16).to_be_bytes())
        }
        _ => return false,
    }
    true
}

/// Appends `actions` as 1.0 and Nicira actions.
pub fn encode(actions: &[Action], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < actions.len() {
        let a = &actions[i];
        i += 1;
        // set_queue, output, pop_queue: what ENQUEUE reads as.
        if let [Action::SetQueue(q), o, Action::PopQueue, ..] = &actions[i - 1..] {
            if let [OfAction::Output { port, .. }] = from_action(o).as_slice() {
                out.extend_from_slice(&at::ENQUEUE.to_be_bytes());
                out.extend_from_slice(&16u16.to_be_bytes());
                out.extend_from_slice(&port16(*port).to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                out.extend_from_slice(&q.to_be_bytes());
                i += 2;
                continue;
            }
        }
        match a {
            // The VLAN set after it pushes in 1.0.
            Action::PushVlan(_)
                if matches!(
                    actions.get(i),
                    Some(Action::ModVlanVid(_) | Action::ModVlanPcp(_))
                ) => {}
            Action::ModVlanVid(v) => std8(out, at::SET_VLAN_VID, &v.to_be_bytes()),
            Action::ModVlanPcp(p) => std8(out, at::SET_VLAN_PCP, &[*p]),
            Action::PopVlan => std8(out, at::STRIP_VLAN, &[]),
            Action::SetField { field, value, .. } => set_field(out, field, *value, None),
            Action::GotoTable(t) => {
                nx_simple(out, nxast::RESUBMIT_TABLE, 10, &[0xff, 0xf8, *t]);
            }
            Action::Clone(inner) => {
                let start = out.len();
                nx_simple(out, nxast::CLONE, 16, &[]);
                encode(inner, out);
                let len = out.len() - start;
                patch_u16(out, start + 2, len as u16);
            }
            Action::WriteMetadata { value, mask } => {
                let start = out.len();
                nx_simple(out, nxast::WRITE_METADATA, 16, &[]);
                out.extend_from_slice(&value.to_be_bytes());
                out.extend_from_slice(&mask.to_be_bytes());
                patch_u16(out, start + 2, 32);
            }
            a => from_action(a).iter().for_each(|o| encode_of(o, out)),
        }
    }
}

/// A set of `field` (bits `mask`, all when none) as 1.0 says it: the 1.0
/// action for the field when there is one, else `NXAST_REG_LOAD`s.
fn set_field(out: &mut Vec<u8>, field: &'static Field, value: u128, mask: Option<u128>) {
    if mask.is_none() && legacy_set(out, field, value) {
        return;
    }
    from_load(field, value, mask.unwrap_or(field.full_mask()))
        .iter()
        .for_each(|o| encode_of(o, out));
}

/// One OpenFlow action (1.3's form) as 1.0 says it.
fn encode_of(o: &OfAction, out: &mut Vec<u8>) {
    match o {
        OfAction::Output { port, max_len } => output(out, *port, *max_len),
        OfAction::SetField(x) if x.field == f::VLAN_VID => std8(
            out,
            at::SET_VLAN_VID,
            &(x.value as u16 & 0x0fff).to_be_bytes(),
        ),
        OfAction::SetField(x) => {
            if let Some((field, _)) = crate::convert::mapped(x.field) {
                set_field(out, field, x.value, x.mask);
            }
        }
        OfAction::SetNwTtl(t) => set_field(out, fd("nw_ttl"), u128::from(*t), None),
        OfAction::PopVlan => std8(out, at::STRIP_VLAN, &[]),
        OfAction::DecNwTtl => nx_simple(out, nxast::DEC_TTL, 10, &[]),
        OfAction::Group(g) => nx_simple(out, nxast::GROUP, 12, &g.to_be_bytes()),
        OfAction::SetQueue(q) => nx_simple(out, nxast::SET_QUEUE, 12, &q.to_be_bytes()),
        OfAction::PushMpls(t) => nx_simple(out, nxast::PUSH_MPLS, 10, &t.to_be_bytes()),
        OfAction::PopMpls(t) => nx_simple(out, nxast::POP_MPLS, 10, &t.to_be_bytes()),
        OfAction::SetMplsTtl(t) => nx_simple(out, nxast::SET_MPLS_TTL, 10, &[*t]),
        OfAction::DecMplsTtl => nx_simple(out, nxast::DEC_MPLS_TTL, 10, &[]),
        OfAction::Nx(NxAction::Ct {
            flags,
            zone_src,
            zone_imm,
            table,
            alg,
            actions,
        }) => {
            // The sets in its exec, as loads.
            let mut inner = Vec::new();
            for a in actions {
                match a {
                    OfAction::SetField(x) => match crate::convert::mapped(x.field) {
                        Some((field, _)) => inner.extend(from_load(
                            field,
                            x.value,
                            x.mask.unwrap_or(field.full_mask()),
                        )),
                        None => inner.push(a.clone()),
                    },
                    a => inner.push(a.clone()),
                }
            }
            OfAction::Nx(NxAction::Ct {
                flags: *flags,
                zone_src: *zone_src,
                zone_imm: *zone_imm,
                table: *table,
                alg: *alg,
                actions: inner,
            })
            .encode(out);
        }
        OfAction::Nx(NxAction::Clone(inner)) => {
            let start = out.len();
            nx_simple(out, nxast::CLONE, 16, &[]);
            inner.iter().for_each(|o| encode_of(o, out));
            let len = out.len() - start;
            patch_u16(out, start + 2, len as u16);
        }
        OfAction::Nx(_) => o.encode(out),
        // No 1.0 form (Open vSwitch has none either), or pushed by the
        // VLAN set that follows.
        OfAction::PushVlan(_)
        | OfAction::CopyTtlOut
        | OfAction::CopyTtlIn
        | OfAction::PushPbb(_)
        | OfAction::PopPbb
        | OfAction::Other(..) => {}
    }
}
