//! OpenFlow 1.3 messages: framing, decoding of untrusted bytes into typed
//! messages and encoding back. A message this codec does not model decodes
//! as [`Message::Other`] (the channel answers `BAD_REQUEST/BAD_TYPE`).

use crate::action::{decode_instructions, Instruction};
use crate::consts::{msg, OfError, OFP13};
use crate::multipart::{MpReply, MpRequest};
use crate::oxm::{decode_match, decode_match_into, encode_match, Oxm};
use crate::wire::{be16, be32, be64, patch_u16, Rd};

/// The 8-byte header every message starts with.
pub const HEADER_LEN: usize = 8;
/// The longest message (the length field is 16 bits).
pub const MAX_LEN: usize = 65535;
/// `OFPHET_VERSIONBITMAP`.
const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

/// A message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: u8,
    /// Message type.
    pub typ: u8,
    /// Length, header included.
    pub len: u16,
    /// Transaction id.
    pub xid: u32,
}

/// How long the message at the start of `buf` is, once its header is in
/// (`None` before). A length under 8 is `BAD_LEN`: the stream cannot be
/// framed after it.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, OfError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    if len < HEADER_LEN {
        return Err(OfError::BAD_LEN);
    }
    Ok(Some(len))
}

/// The messages one after another in `buf`, each by its header's length
/// (a tail that is not a whole message comes last, as it is): what the
/// hub queues as one write is several packet-ins, each to be put in a
/// 1.4 or 1.5 peer's layout on its own.
pub fn frames(mut buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if buf.is_empty() {
            return None;
        }
        let n = match frame_len(buf) {
            Ok(Some(n)) if n <= buf.len() => n,
            _ => buf.len(),
        };
        let (m, rest) = buf.split_at(n);
        buf = rest;
        Some(m)
    })
}

/// `ofp_switch_config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` flags.
    pub flags: u16,
    /// Bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

/// `FEATURES_REPLY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Datapath id.
    pub datapath_id: u64,
    /// Packets the switch can buffer (Sluice: 0).
    pub n_buffers: u32,
    /// Tables.
    pub n_tables: u8,
    /// `OFPC_*` capabilities.
    pub capabilities: u32,
}

/// `FLOW_MOD`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowMod {
    /// Cookie (add) or cookie to select by (modify, delete).
    pub cookie: u64,
    /// Which cookie bits select.
    pub cookie_mask: u64,
    /// Table (`OFPTT_ALL` for deletes).
    pub table_id: u8,
    /// `OFPFC_*`.
    pub command: u8,
    /// Idle timeout, seconds.
    pub idle_timeout: u16,
    /// Hard timeout, seconds.
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// Buffered packet to apply the rule to (`OFP_NO_BUFFER`: none).
    pub buffer_id: u32,
    /// Delete/modify filter: rules that output to this port.
    pub out_port: u32,
    /// Delete/modify filter: rules that output to this group.
    pub out_group: u32,
    /// `OFPFF_*`.
    pub flags: u16,
    /// The match.
    pub oxms: Vec<Oxm>,
    /// The instructions.
    pub instructions: Vec<Instruction>,
}

/// `PACKET_IN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// `OFP_NO_BUFFER` from Sluice.
    pub buffer_id: u32,
    /// The packet's length before truncation.
    pub total_len: u16,
    /// `OFPR_NO_MATCH` 0, `OFPR_ACTION` 1, `OFPR_INVALID_TTL` 2.
    pub reason: u8,
    /// The table of the rule that sent it.
    pub table_id: u8,
    /// That rule's cookie.
    pub cookie: u64,
    /// The packet's pipeline fields (in_port at least).
    pub oxms: Vec<Oxm>,
    /// The packet, or its first bytes.
    pub data: Vec<u8>,
}

/// `FLOW_REMOVED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The rule's cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
    /// `OFPRR_IDLE_TIMEOUT` 0, `HARD_TIMEOUT` 1, `DELETE` 2, `GROUP_DELETE` 3.
    pub reason: u8,
    /// Its table.
    pub table_id: u8,
    /// How long it lived.
    pub duration_sec: u32,
    /// And nanoseconds.
    pub duration_nsec: u32,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Its match.
    pub oxms: Vec<Oxm>,
}

/// `PORT_MOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMod {
    /// The port.
    pub port_no: u32,
    /// Its hardware address, as the controller knows it.
    pub hw_addr: [u8; 6],
    /// `OFPPC_*` bits to set.
    pub config: u32,
    /// Which bits `config` sets.
    pub mask: u32,
    /// Features to advertise (0: unchanged).
    pub advertise: u32,
}

/// `PACKET_OUT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    /// A buffered packet (`OFP_NO_BUFFER`: the data is in the message).
    pub buffer_id: u32,
    /// The port the packet is taken to come in on (or `OFPP_CONTROLLER`).
    pub in_port: u32,
    /// The actions to apply.
    pub actions: Vec<crate::action::OfAction>,
    /// The packet.
    pub data: Vec<u8>,
}

/// A message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `HELLO` with the versions offered (bit n = version n; from the
    /// version bitmap element, or the header's version alone).
    Hello {
        /// Version bitmap.
        versions: u32,
    },
    /// `ERROR` with the start of the offending message.
    Error {
        /// Type and code.
        err: OfError,
        /// Data.
        data: Vec<u8>,
    },
    /// `ECHO_REQUEST`.
    EchoRequest(Vec<u8>),
    /// `ECHO_REPLY`.
    EchoReply(Vec<u8>),
    /// `FEATURES_REQUEST`.
    FeaturesRequest,
    /// `FEATURES_REPLY`.
    FeaturesReply(Features),
    /// `GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `FLOW_MOD`.
    FlowMod(FlowMod),
    /// `PACKET_IN`.
    PacketIn(PacketIn),
    /// `PACKET_OUT`.
    PacketOut(PacketOut),
    /// `FLOW_REMOVED`.
    FlowRemoved(FlowRemoved),
    /// `PORT_MOD`.
    PortMod(PortMod),
    /// `PORT_STATUS`: reason (`OFPPR_ADD` 0, `DELETE` 1, `MODIFY` 2) and
    /// the port.
    PortStatus(u8, crate::multipart::PortDesc),
    /// `MULTIPART_REQUEST`.
    MultipartRequest {
        /// `OFPMPF_REQ_MORE`.
        flags: u16,
        /// Body.
        body: MpRequest,
    },
    /// `MULTIPART_REPLY`.
    MultipartReply {
        /// `OFPMPF_REPLY_MORE`.
        flags: u16,
        /// Body.
        body: MpReply,
    },
    /// `ROLE_REQUEST` (role, generation_id).
    RoleRequest(u32, u64),
    /// `ROLE_REPLY` (role, generation_id).
    RoleReply(u32, u64),
    /// `GET_ASYNC_REQUEST`.
    GetAsyncRequest,
    /// `GET_ASYNC_REPLY`: packet-in, port-status and flow-removed reason
    /// masks, each for master/equal then slave.
    GetAsyncReply([u32; 6]),
    /// `SET_ASYNC`, the same masks.
    SetAsync([u32; 6]),
    /// `BARRIER_REQUEST`.
    BarrierRequest,
    /// `BARRIER_REPLY`.
    BarrierReply,
    /// Any other type, with its body.
    Other {
        /// Type.
        typ: u8,
        /// Body.
        body: Vec<u8>,
    },
}

/// Decodes one whole message (`frame` is exactly its length). On failure
/// the header, when it could be read, comes with the error to answer.
pub fn decode(frame: &[u8]) -> Result<(Header, Message), (Option<Header>, OfError)> {
    let (h, mut r) = header(frame)?;
    let m = body(&h, &mut r).map_err(|e| (Some(h), e))?;
    Ok((h, m))
}

/// The header of a frame, checked against it, and a reader at its body.
fn header(frame: &[u8]) -> Result<(Header, Rd<'_>), (Option<Header>, OfError)> {
    let mut r = Rd::new(frame, OfError::BAD_LEN);
    let a: [u8; 8] = r.array().map_err(|e| (None, e))?;
    let h = Header {
        version: a[0],
        typ: a[1],
        len: be16(&a, 2),
        xid: be32(&a, 4),
    };
    if usize::from(h.len) != frame.len() {
        return Err((Some(h), OfError::BAD_LEN));
    }
    if h.typ != msg::HELLO && h.version != OFP13 {
        return Err((Some(h), OfError::BAD_VERSION));
    }
    Ok((h, r))
}

/// [`decode`] of a FLOW_MOD frame into `fm`, whose buffers it reuses
/// (no allocation for the match). `last` holds the instruction bytes of
/// the flow-mod decoded into `fm` before: when this one's are the same,
/// `fm.instructions` are kept as they are, not decoded again. Returns
/// whether they were. Errors are [`decode`]'s (the same code reads the
/// message); another type of message is `BAD_TYPE`.
pub fn decode_flow_mod_into(
    frame: &[u8],
    fm: &mut FlowMod,
    last: &mut Vec<u8>,
) -> Result<bool, OfError> {
    let (h, mut r) = header(frame).map_err(|(_, e)| e)?;
    if h.typ != msg::FLOW_MOD {
        return Err(OfError::BAD_TYPE);
    }
    flow_mod_into(&mut r, fm, Some(last))
}

fn body(h: &Header, r: &mut Rd<'_>) -> Result<Message, OfError> {
    let empty = |r: &Rd<'_>, m: Message| {
        if r.left() == 0 {
            Ok(m)
        } else {
            Err(OfError::BAD_LEN)
        }
    };
    Ok(match h.typ {
        msg::HELLO => Message::Hello {
            versions: hello_versions(h.version, r.rest()),
        },
        msg::ERROR => {
            let typ = r.u16()?;
            let code = r.u16()?;
            let mut data = r.rest();
            // A Nicira experimenter error: its id goes (encode puts it
            // back); another experimenter's stays in the data.
            if typ == crate::nx::ERROR_EXPERIMENTER
                && data.get(..4) == Some(&crate::nx::NX_VENDOR.to_be_bytes()[..])
            {
                data = &data[4..];
            }
            Message::Error {
                err: OfError { typ, code },
                data: data.to_vec(),
            }
        }
        msg::ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
        msg::ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
        msg::FEATURES_REQUEST => empty(r, Message::FeaturesRequest)?,
        msg::FEATURES_REPLY => {
            let datapath_id = r.u64()?;
            let n_buffers = r.u32()?;
            let n_tables = r.u8()?;
            r.skip(3)?;
            let capabilities = r.u32()?;
            r.skip(4)?;
            empty(
                r,
                Message::FeaturesReply(Features {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    capabilities,
                }),
            )?
        }
        msg::GET_CONFIG_REQUEST => empty(r, Message::GetConfigRequest)?,
        msg::GET_CONFIG_REPLY | msg::SET_CONFIG => {
            let c = SwitchConfig {
                flags: r.u16()?,
                miss_send_len: r.u16()?,
            };
            if h.typ == msg::SET_CONFIG {
                empty(r, Message::SetConfig(c))?
            } else {
                empty(r, Message::GetConfigReply(c))?
            }
        }
        msg::FLOW_MOD => {
            let mut fm = FlowMod::default();
            flow_mod_into(r, &mut fm, None)?;
            Message::FlowMod(fm)
        }
        msg::PACKET_IN => {
            let buffer_id = r.u32()?;
            let total_len = r.u16()?;
            let reason = r.u8()?;
            let table_id = r.u8()?;
            let cookie = r.u64()?;
            let oxms = decode_match(r)?;
            r.skip(2)?;
            Message::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id,
                cookie,
                oxms,
                data: r.rest().to_vec(),
            })
        }
        msg::FLOW_REMOVED => {
            let cookie = r.u64()?;
            let priority = r.u16()?;
            let reason = r.u8()?;
            let table_id = r.u8()?;
            let duration_sec = r.u32()?;
            let duration_nsec = r.u32()?;
            let idle_timeout = r.u16()?;
            let hard_timeout = r.u16()?;
            let packet_count = r.u64()?;
            let byte_count = r.u64()?;
            let oxms = decode_match(r)?;
            empty(
                r,
                Message::FlowRemoved(FlowRemoved {
                    cookie,
                    priority,
                    reason,
                    table_id,
                    duration_sec,
                    duration_nsec,
                    idle_timeout,
                    hard_timeout,
                    packet_count,
                    byte_count,
                    oxms,
                }),
            )?
        }
        msg::PORT_MOD => {
            let port_no = r.u32()?;
            r.skip(4)?;
            let mut hw_addr = [0u8; 6];
            hw_addr.copy_from_slice(r.take(6)?);
            r.skip(2)?;
            let config = r.u32()?;
            let mask = r.u32()?;
            let advertise = r.u32()?;
            r.skip(4)?;
            empty(
                r,
                Message::PortMod(PortMod {
                    port_no,
                    hw_addr,
                    config,
                    mask,
                    advertise,
                }),
            )?
        }
        msg::PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            let p = crate::multipart::PortDesc::decode(r)?;
            empty(r, Message::PortStatus(reason, p))?
        }
        msg::PACKET_OUT => {
            let buffer_id = r.u32()?;
            let in_port = r.u32()?;
            let actions_len = usize::from(r.u16()?);
            r.skip(6)?;
            let acts = r.take(actions_len).map_err(|_| OfError::BAD_LEN)?;
            Message::PacketOut(PacketOut {
                buffer_id,
                in_port,
                actions: crate::action::decode_actions(acts)?,
                data: r.rest().to_vec(),
            })
        }
        msg::MULTIPART_REQUEST => {
            let typ = r.u16()?;
            let flags = r.u16()?;
            r.skip(4)?;
            // A part of a request in parts is read whole when it is.
            let body = if flags & crate::consts::mp::MORE != 0 {
                MpRequest::Other(typ, r.rest().to_vec())
            } else {
                MpRequest::decode(typ, r.rest())?
            };
            Message::MultipartRequest { flags, body }
        }
        msg::MULTIPART_REPLY => {
            let typ = r.u16()?;
            let flags = r.u16()?;
            r.skip(4)?;
            Message::MultipartReply {
                flags,
                body: MpReply::decode(typ, r.rest())?,
            }
        }
        msg::ROLE_REQUEST | msg::ROLE_REPLY => {
            let role = r.u32()?;
            r.skip(4)?;
            let gen = r.u64()?;
            if h.typ == msg::ROLE_REQUEST {
                empty(r, Message::RoleRequest(role, gen))?
            } else {
                empty(r, Message::RoleReply(role, gen))?
            }
        }
        msg::GET_ASYNC_REQUEST => empty(r, Message::GetAsyncRequest)?,
        msg::GET_ASYNC_REPLY | msg::SET_ASYNC => {
            let mut m = [0u32; 6];
            for v in &mut m {
                *v = r.u32()?;
            }
            if h.typ == msg::SET_ASYNC {
                empty(r, Message::SetAsync(m))?
            } else {
                empty(r, Message::GetAsyncReply(m))?
            }
        }
        msg::BARRIER_REQUEST => empty(r, Message::BarrierRequest)?,
        msg::BARRIER_REPLY => empty(r, Message::BarrierReply)?,
        typ => Message::Other {
            typ,
            body: r.rest().to_vec(),
        },
    })
}

/// The versions a HELLO offers: its bitmap element's first word when
/// there is one (a malformed element list is ignored, as the spec asks),
/// else every version up to the header's.
fn hello_versions(version: u8, elems: &[u8]) -> u32 {
    let mut r = Rd::new(elems, OfError::BAD_LEN);
    while r.left() >= 4 {
        let (Ok(typ), Ok(len)) = (r.u16(), r.u16()) else {
            break;
        };
        let len = usize::from(len);
        if len < 4 {
            break;
        }
        let Ok(b) = r.take(len - 4) else { break };
        let _ = r.skip((8 - len % 8) % 8);
        if typ == HELLO_ELEM_VERSIONBITMAP && b.len() >= 4 {
            return u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    if version >= 31 {
        u32::MAX
    } else {
        (1u32 << (version + 1)) - 1
    }
}

/// Reads a flow-mod's body into `fm`. With `last` (the instruction bytes
/// of the flow-mod in `fm` before), instructions equal to those are not
/// decoded again; returns whether they were equal.
fn flow_mod_into(
    r: &mut Rd<'_>,
    fm: &mut FlowMod,
    last: Option<&mut Vec<u8>>,
) -> Result<bool, OfError> {
    // The fixed part, read at once (then the match).
    let a: [u8; 40] = r.array()?;
    fm.cookie = be64(&a, 0);
    fm.cookie_mask = be64(&a, 8);
    fm.table_id = a[16];
    fm.command = a[17];
    fm.idle_timeout = be16(&a, 18);
    fm.hard_timeout = be16(&a, 20);
    fm.priority = be16(&a, 22);
    fm.buffer_id = be32(&a, 24);
    fm.out_port = be32(&a, 28);
    fm.out_group = be32(&a, 32);
    fm.flags = be16(&a, 36);
    decode_match_into(r, &mut fm.oxms)?;
    let raw = r.rest();
    match last {
        Some(last) if last[..] == *raw => Ok(true),
        Some(last) => {
            // Forgotten first: if these do not decode, `fm` no longer
            // holds the instructions of `last`.
            last.clear();
            fm.instructions.clear();
            fm.instructions = decode_instructions(raw)?;
            last.extend_from_slice(raw);
            Ok(false)
        }
        None => {
            fm.instructions = decode_instructions(raw)?;
            Ok(false)
        }
    }
}

/// The type number of a message.
pub fn type_of(m: &Message) -> u8 {
    match m {
        Message::Hello { .. } => msg::HELLO,
        Message::Error { .. } => msg::ERROR,
        Message::EchoRequest(_) => msg::ECHO_REQUEST,
        Message::EchoReply(_) => msg::ECHO_REPLY,
        Message::FeaturesRequest => msg::FEATURES_REQUEST,
        Message::FeaturesReply(_) => msg::FEATURES_REPLY,
        Message::GetConfigRequest => msg::GET_CONFIG_REQUEST,
        Message::GetConfigReply(_) => msg::GET_CONFIG_REPLY,
        Message::SetConfig(_) => msg::SET_CONFIG,
        Message::FlowMod(_) => msg::FLOW_MOD,
        Message::PacketIn(_) => msg::PACKET_IN,
        Message::PacketOut(_) => msg::PACKET_OUT,
        Message::FlowRemoved(_) => msg::FLOW_REMOVED,
        Message::PortStatus(..) => msg::PORT_STATUS,
        Message::PortMod(_) => msg::PORT_MOD,
        Message::MultipartRequest { .. } => msg::MULTIPART_REQUEST,
        Message::MultipartReply { .. } => msg::MULTIPART_REPLY,
        Message::RoleRequest(..) => msg::ROLE_REQUEST,
        Message::RoleReply(..) => msg::ROLE_REPLY,
        Message::GetAsyncRequest => msg::GET_ASYNC_REQUEST,
        Message::GetAsyncReply(_) => msg::GET_ASYNC_REPLY,
        Message::SetAsync(_) => msg::SET_ASYNC,
        Message::BarrierRequest => msg::BARRIER_REQUEST,
        Message::BarrierReply => msg::BARRIER_REPLY,
        Message::Other { typ, .. } => *typ,
    }
}

/// Encodes `m` with transaction id `xid` (OpenFlow 1.3), appending to
/// `out`. A body that would pass 65,535 bytes is cut there (callers split
/// multipart replies before: [`crate::multipart`]).
pub fn encode(m: &Message, xid: u32, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[OFP13, type_of(m), 0, 0]);
    out.extend_from_slice(&xid.to_be_bytes());
    match m {
        Message::Hello { versions } => {
            out.extend_from_slice(&HELLO_ELEM_VERSIONBITMAP.to_be_bytes());
            out.extend_from_slice(&8u16.to_be_bytes());
            out.extend_from_slice(&versions.to_be_bytes());
        }
        Message::Error { err, data } => {
            out.extend_from_slice(&err.typ.to_be_bytes());
            out.extend_from_slice(&err.code.to_be_bytes());
            if err.typ == crate::nx::ERROR_EXPERIMENTER {
                // ofp_error_experimenter_msg: the experimenter's id next.
                out.extend_from_slice(&crate::nx::NX_VENDOR.to_be_bytes());
            }
            out.extend_from_slice(data);
        }
        Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
        Message::FeaturesRequest
        | Message::GetConfigRequest
        | Message::GetAsyncRequest
        | Message::BarrierRequest
        | Message::BarrierReply => {}
        Message::RoleRequest(role, gen) | Message::RoleReply(role, gen) => {
            out.extend_from_slice(&role.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&gen.to_be_bytes());
        }
        Message::GetAsyncReply(m) | Message::SetAsync(m) => {
            for v in m {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        Message::FeaturesReply(f) => {
            out.extend_from_slice(&f.datapath_id.to_be_bytes());
            out.extend_from_slice(&f.n_buffers.to_be_bytes());
            out.extend_from_slice(&[f.n_tables, 0, 0, 0]);
            out.extend_from_slice(&f.capabilities.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
        }
        Message::GetConfigReply(c) | Message::SetConfig(c) => {
            out.extend_from_slice(&c.flags.to_be_bytes());
            out.extend_from_slice(&c.miss_send_len.to_be_bytes());
        }
        Message::FlowMod(f) => {
            out.extend_from_slice(&f.cookie.to_be_bytes());
            out.extend_from_slice(&f.cookie_mask.to_be_bytes());
            out.extend_from_slice(&[f.table_id, f.command]);
            out.extend_from_slice(&f.idle_timeout.to_be_bytes());
            out.extend_from_slice(&f.hard_timeout.to_be_bytes());
            out.extend_from_slice(&f.priority.to_be_bytes());
            out.extend_from_slice(&f.buffer_id.to_be_bytes());
            out.extend_from_slice(&f.out_port.to_be_bytes());
            out.extend_from_slice(&f.out_group.to_be_bytes());
            out.extend_from_slice(&f.flags.to_be_bytes());
            out.extend_from_slice(&[0; 2]);
            encode_match(&f.oxms, out);
            for i in &f.instructions {
                i.encode(out);
            }
        }
        Message::PacketIn(p) => {
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&p.total_len.to_be_bytes());
            out.extend_from_slice(&[p.reason, p.table_id]);
            out.extend_from_slice(&p.cookie.to_be_bytes());
            encode_match(&p.oxms, out);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&p.data);
        }
        Message::PortMod(m) => {
            out.extend_from_slice(&m.port_no.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&m.hw_addr);
            out.extend_from_slice(&[0; 2]);
            out.extend_from_slice(&m.config.to_be_bytes());
            out.extend_from_slice(&m.mask.to_be_bytes());
            out.extend_from_slice(&m.advertise.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
        }
        Message::PortStatus(reason, p) => {
            out.extend_from_slice(&[*reason, 0, 0, 0, 0, 0, 0, 0]);
            p.encode(out);
        }
        Message::FlowRemoved(f) => {
            out.extend_from_slice(&f.cookie.to_be_bytes());
            out.extend_from_slice(&f.priority.to_be_bytes());
            out.extend_from_slice(&[f.reason, f.table_id]);
            out.extend_from_slice(&f.duration_sec.to_be_bytes());
            out.extend_from_slice(&f.duration_nsec.to_be_bytes());
            out.extend_from_slice(&f.idle_timeout.to_be_bytes());
            out.extend_from_slice(&f.hard_timeout.to_be_bytes());
            out.extend_from_slice(&f.packet_count.to_be_bytes());
            out.extend_from_slice(&f.byte_count.to_be_bytes());
            encode_match(&f.oxms, out);
        }
        Message::PacketOut(p) => {
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&p.in_port.to_be_bytes());
            let at = out.len();
            out.extend_from_slice(&[0; 8]);
            crate::action::encode_actions(&p.actions, out);
            let n = (out.len() - at - 8) as u16;
            patch_u16(out, at, n);
            out.extend_from_slice(&p.data);
        }
        Message::MultipartRequest { flags, body } => {
            out.extend_from_slice(&body.typ().to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            body.encode(out);
        }
        Message::MultipartReply { flags, body } => {
            out.extend_from_slice(&body.typ().to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            body.encode(out);
        }
        Message::Other { body, .. } => out.extend_from_slice(body),
    }
    out.truncate(start + MAX_LEN);
    let len = out.len() - start;
    patch_u16(out, start + 2, len as u16);
}

/// The message `m` alone, encoded.
pub fn to_bytes(m: &Message, xid: u32) -> Vec<u8> {
    let mut v = Vec::new();
    encode(m, xid, &mut v);
    v
}

/// An `ERROR` answering `offending` (its first 64 bytes, as the spec asks).
pub fn error_reply(err: OfError, offending: &[u8]) -> Message {
    Message::Error {
        err,
        data: offending[..offending.len().min(64)].to_vec(),
    }
}
