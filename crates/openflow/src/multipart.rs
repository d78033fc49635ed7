//! Multipart request and reply bodies (spec 7.3.5): descriptions, flow
//! and aggregate statistics, tables, ports.

use crate::action::{decode_instructions, Instruction};
use crate::consts::{mp, OfError};
use crate::oxm::{decode_match, encode_match, Oxm};
use crate::wire::{get_str, patch_u16, put_str, Rd};

/// `ofp_flow_stats_request` (also the aggregate request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// Table, or `OFPTT_ALL`.
    pub table_id: u8,
    /// Rules that output to this port (`OFPP_ANY`: any).
    pub out_port: u32,
    /// Rules that output to this group (`OFPG_ANY`: any).
    pub out_group: u32,
    /// Cookie to select by.
    pub cookie: u64,
    /// Which cookie bits select.
    pub cookie_mask: u64,
    /// Rules whose match is at least this (loose selection).
    pub oxms: Vec<Oxm>,
}

/// `ofp_flow_stats`: one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Seconds since added.
    pub duration_sec: u32,
    /// And nanoseconds.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// `OFPFF_*`.
    pub flags: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Match.
    pub oxms: Vec<Oxm>,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

/// `ofp_desc`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desc {
    /// Manufacturer.
    pub mfr: String,
    /// Hardware.
    pub hw: String,
    /// Software.
    pub sw: String,
    /// Serial number.
    pub serial: String,
    /// Datapath.
    pub dp: String,
}

/// `ofp_table_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Rules in it.
    pub active_count: u32,
    /// Lookups.
    pub lookup_count: u64,
    /// Lookups that matched.
    pub matched_count: u64,
}

/// `ofp_port_stats` (the counters Sluice keeps; the rest are zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    /// Port.
    pub port_no: u32,
    /// Received packets.
    pub rx_packets: u64,
    /// Sent packets.
    pub tx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Sent bytes.
    pub tx_bytes: u64,
    /// Received packets dropped.
    pub rx_dropped: u64,
    /// Packets dropped on sending.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Seconds the port has been up.
    pub duration_sec: u32,
    /// And nanoseconds.
    pub duration_nsec: u32,
}

/// `ofp_port`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortDesc {
    /// Port number.
    pub port_no: u32,
    /// MAC address.
    pub hw_addr: [u8; 6],
    /// Name (up to 15 bytes).
    pub name: String,
    /// `OFPPC_*`.
    pub config: u32,
    /// `OFPPS_*`.
    pub state: u32,
    /// Current features.
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Peer's features.
    pub peer: u32,
    /// Current speed, kbit/s.
    pub curr_speed: u32,
    /// Maximum speed, kbit/s.
    pub max_speed: u32,
}

/// A multipart request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpRequest {
    /// `OFPMP_DESC`.
    Desc,
    /// `OFPMP_FLOW`.
    Flow(FlowStatsRequest),
    /// `OFPMP_AGGREGATE`.
    Aggregate(FlowStatsRequest),
    /// `OFPMP_TABLE`.
    Table,
    /// `OFPMP_PORT_STATS` for a port (`OFPP_ANY`: all).
    PortStats(u32),
    /// `OFPMP_PORT_DESC`.
    PortDesc,
    /// Another type with its body.
    Other(u16, Vec<u8>),
}

/// A multipart reply body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpReply {
    /// `OFPMP_DESC`.
    Desc(Desc),
    /// `OFPMP_FLOW`.
    Flow(Vec<FlowStats>),
    /// `OFPMP_AGGREGATE`.
    Aggregate {
        /// Packets.
        packet_count: u64,
        /// Bytes.
        byte_count: u64,
        /// Rules.
        flow_count: u32,
    },
    /// `OFPMP_TABLE`.
    Table(Vec<TableStats>),
    /// `OFPMP_PORT_STATS`.
    PortStats(Vec<PortStats>),
    /// `OFPMP_PORT_DESC`.
    PortDesc(Vec<PortDesc>),
    /// Another type with its body.
    Other(u16, Vec<u8>),
}

fn flow_request(b: &[u8]) -> Result<FlowStatsRequest, OfError> {
    let mut r = Rd::new(b, OfError::BAD_LEN);
    let table_id = r.u8()?;
    r.skip(3)?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    r.skip(4)?;
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let oxms = decode_match(&mut r)?;
    if r.left() != 0 {
        return Err(OfError::BAD_LEN);
    }
    Ok(FlowStatsRequest {
        table_id,
        out_port,
        out_group,
        cookie,
        cookie_mask,
        oxms,
    })
}

fn put_flow_request(q: &FlowStatsRequest, out: &mut Vec<u8>) {
    out.extend_from_slice(&[q.table_id, 0, 0, 0]);
    out.extend_from_slice(&q.out_port.to_be_bytes());
    out.extend_from_slice(&q.out_group.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&q.cookie.to_be_bytes());
    out.extend_from_slice(&q.cookie_mask.to_be_bytes());
    encode_match(&q.oxms, out);
}

impl MpRequest {
    /// The multipart type.
    pub fn typ(&self) -> u16 {
        match self {
            MpRequest::Desc => mp::DESC,
            MpRequest::Flow(_) => mp::FLOW,
            MpRequest::Aggregate(_) => mp::AGGREGATE,
            MpRequest::Table => mp::TABLE,
            MpRequest::PortStats(_) => mp::PORT_STATS,
            MpRequest::PortDesc => mp::PORT_DESC,
            MpRequest::Other(t, _) => *t,
        }
    }

    /// Reads the body of a request of type `typ`.
    pub fn decode(typ: u16, b: &[u8]) -> Result<MpRequest, OfError> {
        let none = |m| {
            if b.is_empty() {
                Ok(m)
            } else {
                Err(OfError::BAD_LEN)
            }
        };
        Ok(match typ {
            mp::DESC => none(MpRequest::Desc)?,
            mp::FLOW => MpRequest::Flow(flow_request(b)?),
            mp::AGGREGATE => MpRequest::Aggregate(flow_request(b)?),
            mp::TABLE => none(MpRequest::Table)?,
            mp::PORT_STATS => {
                let mut r = Rd::new(b, OfError::BAD_LEN);
                let port = r.u32()?;
                r.skip(4)?;
                if r.left() != 0 {
                    return Err(OfError::BAD_LEN);
                }
                MpRequest::PortStats(port)
            }
            mp::PORT_DESC => none(MpRequest::PortDesc)?,
            t => MpRequest::Other(t, b.to_vec()),
        })
    }

    /// Appends the body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MpRequest::Desc | MpRequest::Table | MpRequest::PortDesc => {}
            MpRequest::Flow(q) | MpRequest::Aggregate(q) => put_flow_request(q, out),
            MpRequest::PortStats(p) => {
                out.extend_from_slice(&p.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            MpRequest::Other(_, b) => out.extend_from_slice(b),
        }
    }
}

impl FlowStats {
    /// Appends one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0, self.table_id, 0]);
        out.extend_from_slice(&self.duration_sec.to_be_bytes());
        out.extend_from_slice(&self.duration_nsec.to_be_bytes());
        out.extend_from_slice(&self.priority.to_be_bytes());
        out.extend_from_slice(&self.idle_timeout.to_be_bytes());
        out.extend_from_slice(&self.hard_timeout.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.packet_count.to_be_bytes());
        out.extend_from_slice(&self.byte_count.to_be_bytes());
        encode_match(&self.oxms, out);
        for i in &self.instructions {
            i.encode(out);
        }
        let len = out.len() - start;
        patch_u16(out, start, len as u16);
    }

    fn decode(r: &mut Rd<'_>) -> Result<FlowStats, OfError> {
        let len = usize::from(r.u16()?);
        if len < 56 {
            return Err(OfError::BAD_LEN);
        }
        let mut b = Rd::new(r.take(len - 2)?, OfError::BAD_LEN);
        let table_id = b.u8()?;
        b.skip(1)?;
        let duration_sec = b.u32()?;
        let duration_nsec = b.u32()?;
        let priority = b.u16()?;
        let idle_timeout = b.u16()?;
        let hard_timeout = b.u16()?;
        let flags = b.u16()?;
        b.skip(4)?;
        let cookie = b.u64()?;
        let packet_count = b.u64()?;
        let byte_count = b.u64()?;
        let oxms = decode_match(&mut b)?;
        let instructions = decode_instructions(b.rest())?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie,
            packet_count,
            byte_count,
            oxms,
            instructions,
        })
    }
}

impl PortStats {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            0,
            0,
            0,
            0,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.duration_sec.to_be_bytes());
        out.extend_from_slice(&self.duration_nsec.to_be_bytes());
    }

    fn decode(r: &mut Rd<'_>) -> Result<PortStats, OfError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut c = [0u64; 12];
        for v in &mut c {
            *v = r.u64()?;
        }
        Ok(PortStats {
            port_no,
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }
}

impl PortDesc {
    /// Appends the 64-byte `ofp_port`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&[0; 2]);
        put_str(out, &self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Reads a 64-byte `ofp_port`.
    pub fn decode(r: &mut Rd<'_>) -> Result<PortDesc, OfError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(r.take(6)?);
        r.skip(2)?;
        let name = get_str(r.take(16)?);
        let mut v = [0u32; 8];
        for x in &mut v {
            *x = r.u32()?;
        }
        Ok(PortDesc {
            port_no,
            hw_addr,
            name,
            config: v[0],
            state: v[1],
            curr: v[2],
            advertised: v[3],
            supported: v[4],
            peer: v[5],
            curr_speed: v[6],
            max_speed: v[7],
        })
    }
}

/// Reads entries until `b` ends.
fn all<T>(
    b: &[u8],
    mut one: impl FnMut(&mut Rd<'_>) -> Result<T, OfError>,
) -> Result<Vec<T>, OfError> {
    let mut r = Rd::new(b, OfError::BAD_LEN);
    let mut v = Vec::new();
    while r.left() > 0 {
        v.push(one(&mut r)?);
    }
    Ok(v)
}

impl MpReply {
    /// The multipart type.
    pub fn typ(&self) -> u16 {
        match self {
            MpReply::Desc(_) => mp::DESC,
            MpReply::Flow(_) => mp::FLOW,
            MpReply::Aggregate { .. } => mp::AGGREGATE,
            MpReply::Table(_) => mp::TABLE,
            MpReply::PortStats(_) => mp::PORT_STATS,
            MpReply::PortDesc(_) => mp::PORT_DESC,
            MpReply::Other(t, _) => *t,
        }
    }

    /// Reads the body of a reply of type `typ`.
    pub fn decode(typ: u16, b: &[u8]) -> Result<MpReply, OfError> {
        Ok(match typ {
            mp::DESC => {
                let mut r = Rd::new(b, OfError::BAD_LEN);
                MpReply::Desc(Desc {
                    mfr: get_str(r.take(256)?),
                    hw: get_str(r.take(256)?),
                    sw: get_str(r.take(256)?),
                    serial: get_str(r.take(32)?),
                    dp: get_str(r.take(256)?),
                })
            }
            mp::FLOW => MpReply::Flow(all(b, FlowStats::decode)?),
            mp::AGGREGATE => {
                let mut r = Rd::new(b, OfError::BAD_LEN);
                let packet_count = r.u64()?;
                let byte_count = r.u64()?;
                let flow_count = r.u32()?;
                MpReply::Aggregate {
                    packet_count,
                    byte_count,
                    flow_count,
                }
            }
            mp::TABLE => MpReply::Table(all(b, |r| {
                let table_id = r.u8()?;
                r.skip(3)?;
                Ok(TableStats {
                    table_id,
                    active_count: r.u32()?,
                    lookup_count: r.u64()?,
                    matched_count: r.u64()?,
                })
            })?),
            mp::PORT_STATS => MpReply::PortStats(all(b, PortStats::decode)?),
            mp::PORT_DESC => MpReply::PortDesc(all(b, PortDesc::decode)?),
            t => MpReply::Other(t, b.to_vec()),
        })
    }

    /// Appends the body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MpReply::Desc(d) => {
                put_str(out, &d.mfr, 256);
                put_str(out, &d.hw, 256);
                put_str(out, &d.sw, 256);
                put_str(out, &d.serial, 32);
                put_str(out, &d.dp, 256);
            }
            MpReply::Flow(v) => v.iter().for_each(|f| f.encode(out)),
            MpReply::Aggregate {
                packet_count,
                byte_count,
                flow_count,
            } => {
                out.extend_from_slice(&packet_count.to_be_bytes());
                out.extend_from_slice(&byte_count.to_be_bytes());
                out.extend_from_slice(&flow_count.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            MpReply::Table(v) => {
                for t in v {
                    out.extend_from_slice(&[t.table_id, 0, 0, 0]);
                    out.extend_from_slice(&t.active_count.to_be_bytes());
                    out.extend_from_slice(&t.lookup_count.to_be_bytes());
                    out.extend_from_slice(&t.matched_count.to_be_bytes());
                }
            }
            MpReply::PortStats(v) => v.iter().for_each(|p| p.encode(out)),
            MpReply::PortDesc(v) => v.iter().for_each(|p| p.encode(out)),
            MpReply::Other(_, b) => out.extend_from_slice(b),
        }
    }
}

/// Multipart replies of type `typ` holding the already-encoded `entries`,
/// each message under 64 KiB, all but the last with `REPLY_MORE`: a dump
/// of any size fits the 16-bit length.
pub fn split_reply(typ: u16, xid: u32, entries: impl Iterator<Item = Vec<u8>>) -> Vec<Vec<u8>> {
    const ROOM: usize = crate::msg::MAX_LEN - 16;
    let mut msgs = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let start = |v: &mut Vec<u8>| {
        v.extend_from_slice(&[
            crate::consts::OFP13,
            crate::consts::msg::MULTIPART_REPLY,
            0,
            0,
        ]);
        v.extend_from_slice(&xid.to_be_bytes());
        v.extend_from_slice(&typ.to_be_bytes());
        v.extend_from_slice(&[0; 6]);
    };
    start(&mut cur);
    for e in entries {
        if cur.len() + e.len() > ROOM && cur.len() > 16 {
            patch_u16(&mut cur, 10, mp::MORE);
            let l = cur.len() as u16;
            patch_u16(&mut cur, 2, l);
            msgs.push(std::mem::take(&mut cur));
            start(&mut cur);
        }
        cur.extend_from_slice(&e);
    }
    let l = cur.len() as u16;
    patch_u16(&mut cur, 2, l);
    msgs.push(cur);
    msgs
}
