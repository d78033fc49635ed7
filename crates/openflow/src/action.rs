//! OpenFlow 1.3 actions (spec 7.2.5) and instructions (7.2.4).

use crate::consts::OfError;
use crate::nxm::NxAction;
use crate::oxm::Oxm;
use crate::wire::{pad8, patch_u16, Rd};

/// Action types.
pub mod at {
    #![allow(missing_docs)]
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Instruction types.
pub mod it {
    #![allow(missing_docs)]
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// One action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfAction {
    /// `OFPAT_OUTPUT`.
    Output {
        /// Port number (or a reserved port).
        port: u32,
        /// Bytes to send to the controller.
        max_len: u16,
    },
    /// `OFPAT_PUSH_VLAN` with its ethertype.
    PushVlan(u16),
    /// `OFPAT_POP_VLAN`.
    PopVlan,
    /// `OFPAT_DEC_NW_TTL`.
    DecNwTtl,
    /// `OFPAT_SET_NW_TTL` with the TTL.
    SetNwTtl(u8),
    /// `OFPAT_GROUP` with the group id.
    Group(u32),
    /// `OFPAT_SET_FIELD`.
    SetField(Oxm),
    /// `OFPAT_COPY_TTL_OUT`.
    CopyTtlOut,
    /// `OFPAT_COPY_TTL_IN`.
    CopyTtlIn,
    /// `OFPAT_SET_MPLS_TTL` with the TTL.
    SetMplsTtl(u8),
    /// `OFPAT_DEC_MPLS_TTL`.
    DecMplsTtl,
    /// `OFPAT_PUSH_MPLS` with its ethertype.
    PushMpls(u16),
    /// `OFPAT_POP_MPLS` with the ethertype of what follows.
    PopMpls(u16),
    /// `OFPAT_PUSH_PBB` with its ethertype.
    PushPbb(u16),
    /// `OFPAT_POP_PBB`.
    PopPbb,
    /// `OFPAT_SET_QUEUE`.
    SetQueue(u32),
    /// A Nicira register action (`load`, `move`; [`crate::nxm`]).
    Nx(NxAction),
    /// Any other type, well formed: its type and body (refused later with
    /// `BAD_ACTION/BAD_TYPE`, or passed through).
    Other(u16, Vec<u8>),
}

impl OfAction {
    /// Reads one action.
    pub fn decode(r: &mut Rd<'_>) -> Result<OfAction, OfError> {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 || len - 4 > r.left() {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let body = r.take(len - 4)?;
        let mut b = Rd::new(body, OfError::BAD_ACTION_LEN);
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(OfError::BAD_ACTION_LEN)
            }
        };
        Ok(match typ {
            at::OUTPUT => {
                fixed(16)?;
                let port = b.u32()?;
                let max_len = b.u16()?;
                OfAction::Output { port, max_len }
            }
            at::PUSH_VLAN => {
                fixed(8)?;
                OfAction::PushVlan(b.u16()?)
            }
            at::POP_VLAN => {
                fixed(8)?;
                OfAction::PopVlan
            }
            at::COPY_TTL_OUT => {
                fixed(8)?;
                OfAction::CopyTtlOut
            }
            at::COPY_TTL_IN => {
                fixed(8)?;
                OfAction::CopyTtlIn
            }
            at::SET_MPLS_TTL => {
                fixed(8)?;
                OfAction::SetMplsTtl(b.u8()?)
            }
            at::DEC_MPLS_TTL => {
                fixed(8)?;
                OfAction::DecMplsTtl
            }
            at::PUSH_MPLS => {
                fixed(8)?;
                OfAction::PushMpls(b.u16()?)
            }
            at::POP_MPLS => {
                fixed(8)?;
                OfAction::PopMpls(b.u16()?)
            }
            at::PUSH_PBB => {
                fixed(8)?;
                OfAction::PushPbb(b.u16()?)
            }
            at::POP_PBB => {
                fixed(8)?;
                OfAction::PopPbb
            }
            at::DEC_NW_TTL => {
                fixed(8)?;
                OfAction::DecNwTtl
            }
            at::SET_NW_TTL => {
                fixed(8)?;
                OfAction::SetNwTtl(b.u8()?)
            }
            at::GROUP => {
                fixed(8)?;
                OfAction::Group(b.u32()?)
            }
            at::SET_QUEUE => {
                fixed(8)?;
                OfAction::SetQueue(b.u32()?)
            }
            at::SET_FIELD => {
                let o = Oxm::decode(&mut b).map_err(|e| {
                    if e == OfError::BAD_FIELD {
                        OfError::BAD_SET_TYPE
                    } else {
                        OfError::BAD_SET_LEN
                    }
                })?;
                if o.mask.is_some() {
                    return Err(OfError::BAD_SET_ARGUMENT);
                }
                // What follows the field is padding.
                if b.left() >= 8 {
                    return Err(OfError::BAD_SET_LEN);
                }
                OfAction::SetField(o)
            }
            at::EXPERIMENTER => match NxAction::decode(body)? {
                Some(nx) => OfAction::Nx(nx),
                None => OfAction::Other(typ, body.to_vec()),
            },
            t => OfAction::Other(t, body.to_vec()),
        })
    }

    /// Appends the action.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let typ = match self {
            OfAction::Output { .. } => at::OUTPUT,
            OfAction::PushVlan(_) => at::PUSH_VLAN,
            OfAction::PopVlan => at::POP_VLAN,
            OfAction::DecNwTtl => at::DEC_NW_TTL,
            OfAction::SetNwTtl(_) => at::SET_NW_TTL,
            OfAction::Group(_) => at::GROUP,
            OfAction::SetQueue(_) => at::SET_QUEUE,
            OfAction::SetField(_) => at::SET_FIELD,
            OfAction::CopyTtlOut => at::COPY_TTL_OUT,
            OfAction::CopyTtlIn => at::COPY_TTL_IN,
            OfAction::SetMplsTtl(_) => at::SET_MPLS_TTL,
            OfAction::DecMplsTtl => at::DEC_MPLS_TTL,
            OfAction::PushMpls(_) => at::PUSH_MPLS,
            OfAction::PopMpls(_) => at::POP_MPLS,
            OfAction::PushPbb(_) => at::PUSH_PBB,
            OfAction::PopPbb => at::POP_PBB,
            OfAction::Nx(_) => at::EXPERIMENTER,
            OfAction::Other(t, _) => *t,
        };
        out.extend_from_slice(&typ.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        match self {
            OfAction::Output { port, max_len } => {
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            OfAction::PushVlan(t)
            | OfAction::PushMpls(t)
            | OfAction::PopMpls(t)
            | OfAction::PushPbb(t) => {
                out.extend_from_slice(&t.to_be_bytes());
                out.extend_from_slice(&[0; 2]);
            }
            OfAction::PopVlan
            | OfAction::DecNwTtl
            | OfAction::CopyTtlOut
            | OfAction::CopyTtlIn
            | OfAction::DecMplsTtl
            | OfAction::PopPbb => out.extend_from_slice(&[0; 4]),
            OfAction::SetNwTtl(t) | OfAction::SetMplsTtl(t) => {
                out.extend_from_slice(&[*t, 0, 0, 0])
            }
            OfAction::Group(g) | OfAction::SetQueue(g) => out.extend_from_slice(&g.to_be_bytes()),
            OfAction::SetField(o) => o.encode(out),
            OfAction::Nx(nx) => nx.encode(out),
            OfAction::Other(_, body) => out.extend_from_slice(body),
        }
        pad8(out, start);
        let len = out.len() - start;
        patch_u16(out, start + 2, len as u16);
    }
}

/// Reads actions until `b` ends.
pub fn decode_actions(b: &[u8]) -> Result<Vec<OfAction>, OfError> {
    let mut r = Rd::new(b, OfError::BAD_ACTION_LEN);
    // An action takes 8 bytes or more: room for all, up to a bound.
    let mut out = Vec::with_capacity((b.len() / 8).min(16));
    while r.left() > 0 {
        out.push(OfAction::decode(&mut r)?);
    }
    Ok(out)
}

/// Appends actions.
pub fn encode_actions(actions: &[OfAction], out: &mut Vec<u8>) {
    for a in actions {
        a.encode(out);
    }
}

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// `OFPIT_GOTO_TABLE`.
    GotoTable(u8),
    /// `OFPIT_WRITE_METADATA`.
    WriteMetadata {
        /// Value.
        value: u64,
        /// Mask.
        mask: u64,
    },
    /// `OFPIT_WRITE_ACTIONS`.
    WriteActions(Vec<OfAction>),
    /// `OFPIT_APPLY_ACTIONS`.
    ApplyActions(Vec<OfAction>),
    /// `OFPIT_CLEAR_ACTIONS`.
    ClearActions,
    /// `OFPIT_METER`.
    Meter(u32),
    /// Another type (experimenter): refused with `UNKNOWN_INST`.
    Other(u16),
}

impl Instruction {
    /// Reads one instruction.
    pub fn decode(r: &mut Rd<'_>) -> Result<Instruction, OfError> {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 || len - 4 > r.left() {
            return Err(OfError::BAD_INST_LEN);
        }
        let mut b = Rd::new(r.take(len - 4)?, OfError::BAD_INST_LEN);
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(OfError::BAD_INST_LEN)
            }
        };
        Ok(match typ {
            it::GOTO_TABLE => {
                fixed(8)?;
                Instruction::GotoTable(b.u8()?)
            }
            it::WRITE_METADATA => {
                fixed(24)?;
                b.skip(4)?;
                let value = b.u64()?;
                let mask = b.u64()?;
                Instruction::WriteMetadata { value, mask }
            }
            it::WRITE_ACTIONS | it::APPLY_ACTIONS => {
                b.skip(4)?;
                let acts = decode_actions(b.rest())?;
                if typ == it::WRITE_ACTIONS {
                    Instruction::WriteActions(acts)
                } else {
                    Instruction::ApplyActions(acts)
                }
            }
            it::CLEAR_ACTIONS => {
                fixed(8)?;
                Instruction::ClearActions
            }
            it::METER => {
                fixed(8)?;
                Instruction::Meter(b.u32()?)
            }
            t => Instruction::Other(t),
        })
    }

    /// Appends the instruction.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let typ = match self {
            Instruction::GotoTable(_) => it::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => it::WRITE_METADATA,
            Instruction::WriteActions(_) => it::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => it::APPLY_ACTIONS,
            Instruction::ClearActions => it::CLEAR_ACTIONS,
            Instruction::Meter(_) => it::METER,
            Instruction::Other(t) => *t,
        };
        out.extend_from_slice(&typ.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        match self {
            Instruction::GotoTable(t) => out.extend_from_slice(&[*t, 0, 0, 0]),
            Instruction::WriteMetadata { value, mask } => {
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(&value.to_be_bytes());
                out.extend_from_slice(&mask.to_be_bytes());
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.extend_from_slice(&[0; 4]);
                encode_actions(a, out);
            }
            Instruction::ClearActions | Instruction::Other(_) => out.extend_from_slice(&[0; 4]),
            Instruction::Meter(m) => out.extend_from_slice(&m.to_be_bytes()),
        }
        let len = out.len() - start;
        patch_u16(out, start + 2, len as u16);
    }
}

/// Reads instructions until `b` ends.
pub fn decode_instructions(b: &[u8]) -> Result<Vec<Instruction>, OfError> {
    let mut r = Rd::new(b, OfError::BAD_INST_LEN);
    let mut out = Vec::with_capacity((b.len() / 8).min(4));
    while r.left() > 0 {
        out.push(Instruction::decode(&mut r)?);
    }
    Ok(out)
}
