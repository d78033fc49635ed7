//! Asynchronous messages in the form each connection asked for, as Open
//! vSwitch sends them: a packet-in as OpenFlow 1.3's or 1.0's
//! `OFPT_PACKET_IN`, Nicira's `NXT_PACKET_IN` or `NXT_PACKET_IN2` (the one
//! that carries a `controller` action's userdata; what `ovs-ofctl monitor`
//! asks for), chosen by `NXT_SET_PACKET_IN_FORMAT`; a flow removed as 1.0's
//! `OFPT_FLOW_REMOVED` or, in the NXM flow format, `NXT_FLOW_REMOVED`; a
//! port status as 1.0's.

use sluice_classifier::fields::field_by_name;
use sluice_classifier::Match;

use crate::consts::NO_BUFFER;
use crate::msg::{FlowRemoved, Message, PacketIn};
use crate::nx::NX_VENDOR;
use crate::of10::{self, OFP10};

/// `NXT_PACKET_IN`'s subtype.
pub const NXT_PACKET_IN: u32 = 17;
/// `NXT_PACKET_IN2`'s subtype.
pub const NXT_PACKET_IN2: u32 = 30;
/// `NXT_FLOW_REMOVED`'s subtype.
pub const NXT_FLOW_REMOVED: u32 = 14;

/// `NXPINT_*`: the properties of `NXT_PACKET_IN2`.
mod prop {
    pub const PACKET: u16 = 0;
    pub const FULL_LEN: u16 = 1;
    pub const TABLE_ID: u16 = 3;
    pub const COOKIE: u16 = 4;
    pub const REASON: u16 = 5;
    pub const METADATA: u16 = 6;
    pub const USERDATA: u16 = 7;
    pub const CONTINUATION: u16 = 8;
}

mod resume;
pub use resume::{decode_resume, Continuation, Resume, NXT_RESUME};

/// How a connection takes its packet-ins (`NXPIF_*`, set by
/// `NXT_SET_PACKET_IN_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinFormat {
    /// The connection's version's `OFPT_PACKET_IN` (`NXPIF_STANDARD`).
    #[default]
    Standard,
    /// `NXT_PACKET_IN` (`NXPIF_NXT_PACKET_IN`).
    Nxt,
    /// `NXT_PACKET_IN2` (`NXPIF_NXT_PACKET_IN2`).
    Nxt2,
}

impl PinFormat {
    /// The format of an `NXPIF_*` number.
    pub fn of_wire(n: u32) -> Option<PinFormat> {
        match n {
            0 => Some(PinFormat::Standard),
            1 => Some(PinFormat::Nxt),
            2 => Some(PinFormat::Nxt2),
            _ => None,
        }
    }

    /// Its `NXPIF_*` number.
    pub fn wire(self) -> u8 {
        self as u8
    }
}

/// One packet-in, whatever its form.
#[derive(Debug, Clone, Copy)]
pub struct PinData<'a> {
    /// `OFPR_*` as 1.0 and 1.3 number them (0 no match, 1 action, 2
    /// invalid TTL).
    pub reason: u8,
    /// The table of the rule that sent it.
    pub table_id: u8,
    /// That rule's cookie.
    pub cookie: u64,
    /// The packet's input port (32-bit numbering).
    pub in_port: u32,
    /// Its length before truncation.
    pub total_len: usize,
    /// The packet, or its first bytes.
    pub data: &'a [u8],
    /// Its pipeline fields (in_port aside).
    pub fields: &'a Match,
    /// The `controller` action's userdata (`NXT_PACKET_IN2` only).
    pub userdata: &'a [u8],
    /// A paused translation's continuation (`NXT_PACKET_IN2` only).
    pub continuation: Option<Continuation>,
}

impl PinData<'_> {
    /// The fields with in_port.
    fn with_in_port(&self) -> Match {
        let mut m = *self.fields;
        m.set_exact(
            field_by_name("in_port").expect("in_port"),
            u128::from(self.in_port),
        );
        m
    }

    fn total16(&self) -> u16 {
        self.total_len.min(usize::from(u16::MAX)) as u16
    }
}

/// Appends the packet-in `p` for a connection of `version` (1.0 or 1.3)
/// that asked for `format`.
pub fn packet_in(version: u8, format: PinFormat, p: &PinData<'_>, out: &mut Vec<u8>) {
    match (format, version) {
        (PinFormat::Standard, OFP10) => {
            let mut b = Vec::with_capacity(10 + p.data.len());
            b.extend_from_slice(&NO_BUFFER.to_be_bytes());
            b.extend_from_slice(&p.total16().to_be_bytes());
            b.extend_from_slice(&of10::port16(p.in_port).to_be_bytes());
            b.extend_from_slice(&[p.reason, 0]);
            b.extend_from_slice(p.data);
            out.extend_from_slice(&of10::message(of10::t::PACKET_IN, 0, &b));
        }
        (PinFormat::Standard, _) => {
            let m = PacketIn {
                buffer_id: NO_BUFFER,
                total_len: p.total16(),
                reason: p.reason,
                table_id: p.table_id,
                cookie: p.cookie,
                oxms: crate::convert::from_match(&p.with_in_port()),
                data: p.data.to_vec(),
            };
            crate::msg::encode(&Message::PacketIn(m), 0, out);
        }
        (PinFormat::Nxt, _) => {
            let mut b = Vec::with_capacity(64 + p.data.len());
            b.extend_from_slice(&NO_BUFFER.to_be_bytes());
            b.extend_from_slice(&p.total16().to_be_bytes());
            b.extend_from_slice(&[p.reason, p.table_id]);
            b.extend_from_slice(&p.cookie.to_be_bytes());
            let len_at = b.len();
            b.extend_from_slice(&[0; 8]);
            let n = of10::nxm_match::encode(&p.with_in_port(), 0, 0, &mut b);
            b[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
            pad8(&mut b, n);
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(p.data);
            nx_frame(version, NXT_PACKET_IN, &b, out);
        }
        (PinFormat::Nxt2, _) => {
            let mut b = Vec::with_capacity(96 + p.data.len() + p.userdata.len());
            put_prop(&mut b, prop::PACKET, p.data);
            if p.data.len() != p.total_len {
                put_prop(&mut b, prop::FULL_LEN, &(p.total_len as u32).to_be_bytes());
            }
            put_prop(&mut b, prop::TABLE_ID, &[p.table_id]);
            if p.cookie != u64::MAX {
                // A 64-bit value starts 8-aligned: four zeros before it
                // (Open vSwitch's `ofpprop_put_be64`).
                let mut v = [0u8; 12];
                v[4..].copy_from_slice(&p.cookie.to_be_bytes());
                put_prop(&mut b, prop::COOKIE, &v);
            }
            put_prop(&mut b, prop::REASON, &[p.reason]);
            let mut md = Vec::with_capacity(64);
            if version == OFP10 {
                of10::nxm_match::encode(&p.with_in_port(), 0, 0, &mut md);
            } else {
                for o in crate::convert::from_match(&p.with_in_port()) {
                    o.encode(&mut md);
                }
            }
            put_prop(&mut b, prop::METADATA, &md);
            if !p.userdata.is_empty() {
                put_prop(&mut b, prop::USERDATA, p.userdata);
            }
            if let Some(c) = p.continuation {
                // A nested property, as OVS puts it: its value 8-aligned
                // (four bytes of padding after the header).
                let mut v = [0u8; 20];
                v[4..].copy_from_slice(&c.to_bytes());
                put_prop(&mut b, prop::CONTINUATION, &v);
            }
            nx_frame(version, NXT_PACKET_IN2, &b, out);
        }
    }
}

/// A flow removed for a 1.0 connection: `NXT_FLOW_REMOVED` with an NXM
/// match when it uses that flow format, else `OFPT_FLOW_REMOVED` with a
/// 1.0 match (what a 1.0 match cannot say is left out of it).
pub fn flow_removed10(fr: &FlowRemoved, m: &Match, nxm: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(96);
    if nxm {
        b.extend_from_slice(&fr.cookie.to_be_bytes());
        b.extend_from_slice(&fr.priority.to_be_bytes());
        // The table id plus one (0: none said), as Open vSwitch sends it.
        b.extend_from_slice(&[fr.reason, fr.table_id.wrapping_add(1)]);
        b.extend_from_slice(&fr.duration_sec.to_be_bytes());
        b.extend_from_slice(&fr.duration_nsec.to_be_bytes());
        b.extend_from_slice(&fr.idle_timeout.to_be_bytes());
        let len_at = b.len();
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&fr.packet_count.to_be_bytes());
        b.extend_from_slice(&fr.byte_count.to_be_bytes());
        let n = of10::nxm_match::encode(m, 0, 0, &mut b);
        b[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
        pad8(&mut b, n);
        return of10::nx_message(NXT_FLOW_REMOVED, 0, &b);
    }
    b.extend_from_slice(&of10::match10::encode(m));
    b.extend_from_slice(&fr.cookie.to_be_bytes());
    b.extend_from_slice(&fr.priority.to_be_bytes());
    b.extend_from_slice(&[fr.reason, 0]);
    b.extend_from_slice(&fr.duration_sec.to_be_bytes());
    b.extend_from_slice(&fr.duration_nsec.to_be_bytes());
    b.extend_from_slice(&fr.idle_timeout.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&fr.packet_count.to_be_bytes());
    b.extend_from_slice(&fr.byte_count.to_be_bytes());
    of10::message(of10::t::FLOW_REMOVED, 0, &b)
}

/// A port status for a 1.0 connection (reason 0 add, 1 delete, 2
/// modify).
pub fn port_status10(reason: u8, port: &of10::Port) -> Vec<u8> {
    let mut b = vec![reason, 0, 0, 0, 0, 0, 0, 0];
    port.encode(&mut b);
    of10::message(of10::t::PORT_STATUS, 0, &b)
}

/// Appends a Nicira message of `subtype` (its body after the subtype) in
/// `version`'s header: 1.0's vendor and 1.3's experimenter messages are
/// the same shape, type 4.
fn nx_frame(version: u8, subtype: u32, body: &[u8], out: &mut Vec<u8>) {
    let len = (16 + body.len()).min(usize::from(u16::MAX)) as u16;
    out.extend_from_slice(&[version, 4]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    out.extend_from_slice(body);
}

/// Zeros after `n` bytes of match, to a multiple of 8.
fn pad8(b: &mut Vec<u8>, n: usize) {
    b.resize(b.len() + (n.next_multiple_of(8) - n), 0);
}

/// One `NXT_PACKET_IN2` property: type, length (header and value), the
/// value, zeros to a multiple of 8.
fn put_prop(b: &mut Vec<u8>, typ: u16, value: &[u8]) {
    let len = 4 + value.len();
    b.extend_from_slice(&typ.to_be_bytes());
    b.extend_from_slice(&(len as u16).to_be_bytes());
    b.extend_from_slice(value);
    b.resize(b.len() + (len.next_multiple_of(8) - len), 0);
}

#[cfg(test)]
mod tests;
