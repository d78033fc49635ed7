//! OpenFlow 1.5 as far as Sluice speaks it (ovn-controller offers 1.5
//! and nothing else). Most of 1.5's messages are 1.4's, which are 1.3's
//! but for ports ([`crate::of14`]); what 1.5 changed is converted here,
//! both ways, so that one codec (1.3's) serves every version:
//!
//! - in: a flow-mod's and a group bucket's actions (1.5's `COPY_FIELD`
//!   becomes Nicira's `NXAST_REG_MOVE`, a masked `SET_FIELD` Nicira's
//!   `NXAST_REG_LOAD`s (`NXAST_REG_LOAD2` where the field has no NXM
//!   header), as OVS writes them for 1.3, the `METER` action at the head of the actions the
//!   1.3 meter instruction; inside `ct(exec(...))` and `clone(...)` too),
//!   a packet-out's match (its `in_port` into 1.3's field, every other
//!   field a `set_field` ahead of the actions: the packet starts the
//!   pipeline with them), a group-mod's buckets (ids and properties) and
//!   the bodies 1.5 gave the group and port description requests;
//! - out: flow statistics and flow-removed (1.5's flow description with
//!   OXS statistics), aggregate statistics (OXS), group descriptions (1.5's
//!   buckets with ids, the bucket's index, and properties).
//!
//! What 1.5 added and Sluice does not convert is refused, never misread:
//! the `INSERT_BUCKET`, `REMOVE_BUCKET` and `ADD_OR_MOD` group commands
//! (`GROUP_MOD_FAILED/BAD_COMMAND`), a `METER` action after another
//! action, 1.5's new multipart types. A group's `selection_method`
//! property (Netronome's extension, as OVS reads it) is kept:
//! [`crate::group::SelectionMethod`].
//!
//! No I/O: frames in, frames out.

use crate::consts::{mp, msg, OfError};
use crate::of14::{self, OFP14};

/// OpenFlow 1.5's wire version.
pub const OFP15: u8 = 0x06;

/// `OFPAT_SET_FIELD`.
const SET_FIELD: u16 = 25;
/// `OFPAT15_COPY_FIELD`.
const COPY_FIELD: u16 = 28;
/// `OFPAT15_METER`.
const METER: u16 = 29;
/// `OFPAT_EXPERIMENTER`.
const EXPERIMENTER: u16 = 0xffff;
/// Nicira's experimenter id.
const NX_VENDOR: u32 = 0x0000_2320;
/// Nicira action subtypes this conversion writes or looks into.
const NXAST_REG_MOVE: u16 = 6;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_REG_LOAD2: u16 = 33;
const NXAST_CT: u16 = 35;
const NXAST_CLONE: u16 = 42;
/// Instruction types.
const IT_WRITE_ACTIONS: u16 = 3;
const IT_APPLY_ACTIONS: u16 = 4;
const IT_METER: u16 = 6;
/// `OFPP_CONTROLLER`.
const PORT_CONTROLLER: u32 = 0xffff_fffd;
/// `OFPP_ANY`, `OFPG_ANY`.
const ANY: u32 = 0xffff_ffff;
/// `OFPGT_SELECT`, `OFPGT_FF`.
const GROUP_SELECT: u8 = 1;
const GROUP_FF: u8 = 3;
/// The first multipart type new in 1.5 (`OFPMP_FLOW_STATS`; then
/// `CONTROLLER_STATUS`, `BUNDLE_FEATURES`).
const MP_NEW_IN_15: u16 = 17;
/// OXS statistics headers (class `0x8002`, field, length).
const OXS_DURATION: u32 = 0x8002_0008;
const OXS_FLOW_COUNT: u32 = 0x8002_0604;
const OXS_PACKET_COUNT: u32 = 0x8002_0808;
const OXS_BYTE_COUNT: u32 = 0x8002_0a08;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn set16(b: &mut [u8], at: usize, v: usize) {
    let v = u16::try_from(v).unwrap_or(u16::MAX);
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn pad8(v: &mut Vec<u8>, from: usize) {
    while !(v.len() - from).is_multiple_of(8) {
        v.push(0);
    }
}

/// A 1.5 message as Sluice's 1.3 code reads it (then 1.4's conversion:
/// ports, table-mod). Errors for what 1.5 changed and Sluice does not
/// convert.
pub fn downgrade(frame: &[u8]) -> Result<Vec<u8>, OfError> {
    if frame.len() < 8 {
        return Err(OfError::BAD_LEN);
    }
    let mut v = match frame[1] {
        msg::FLOW_MOD => flow_mod(frame)?,
        msg::PACKET_OUT => packet_out(frame)?,
        msg::GROUP_MOD => group_mod(frame)?,
        msg::MULTIPART_REQUEST if frame.len() >= 16 => match be16(frame, 8) {
            // 1.5 gave these requests a body (a group or port to ask
            // for); all are answered.
            mp::GROUP_DESC | mp::PORT_DESC => frame[..16].to_vec(),
            t if (MP_NEW_IN_15..EXPERIMENTER).contains(&t) => return Err(OfError::BAD_MULTIPART),
            _ => frame.to_vec(),
        },
        _ => frame.to_vec(),
    };
    v[0] = OFP14;
    let n = v.len();
    set16(&mut v, 2, n);
    of14::downgrade(&v).map(|c| c.into_owned())
}

/// Where the padded match that starts at `at` ends.
fn match_end(frame: &[u8], at: usize) -> Result<usize, OfError> {
    if frame.len() < at + 4 {
        return Err(OfError::BAD_LEN);
    }
    let len = usize::from(be16(frame, at + 2));
    let end = at + len.div_ceil(8) * 8;
    if len < 4 || end > frame.len() {
        return Err(OfError::BAD_MATCH_LEN);
    }
    Ok(end)
}

fn flow_mod(frame: &[u8]) -> Result<Vec<u8>, OfError> {
    // Header, then 40 bytes (cookie ... importance), then the match.
    let m = match_end(frame, 48)?;
    let mut v = frame[..m].to_vec();
    instructions(&frame[m..], &mut v)?;
    Ok(v)
}

/// Converts an instruction list; a `METER` action heading the
/// apply-actions becomes 1.3's meter instruction, first.
fn instructions(mut ins: &[u8], out: &mut Vec<u8>) -> Result<(), OfError> {
    let mut meter = None;
    let mut rest = Vec::with_capacity(ins.len() + 16);
    while !ins.is_empty() {
        if ins.len() < 4 {
            return Err(OfError::BAD_INST_LEN);
        }
        let (typ, len) = (be16(ins, 0), usize::from(be16(ins, 2)));
        if len < 4 || len > ins.len() {
            return Err(OfError::BAD_INST_LEN);
        }
        let (i, tail) = ins.split_at(len);
        ins = tail;
        match typ {
            IT_WRITE_ACTIONS | IT_APPLY_ACTIONS if len >= 8 => {
                let start = rest.len();
                rest.extend_from_slice(&i[..8]);
                if let Some(m) = actions(&i[8..], &mut rest, typ == IT_APPLY_ACTIONS)? {
                    meter = Some(m);
                }
                let n = rest.len() - start;
                set16(&mut rest, start + 2, n);
            }
            _ => rest.extend_from_slice(i),
        }
    }
    if let Some(m) = meter {
        out.extend_from_slice(&IT_METER.to_be_bytes());
        out.extend_from_slice(&8u16.to_be_bytes());
        out.extend_from_slice(&m.to_be_bytes());
    }
    out.extend_from_slice(&rest);
    Ok(())
}

/// Converts an action list into `out`; returns the meter of a `METER`
/// action heading it (where `meter_first` allows one).
fn actions(mut acts: &[u8], out: &mut Vec<u8>, meter_first: bool) -> Result<Option<u32>, OfError> {
    let mut meter = None;
    let mut first = true;
    while !acts.is_empty() {
        if acts.len() < 4 {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let (typ, len) = (be16(acts, 0), usize::from(be16(acts, 2)));
        if len < 8 || !len.is_multiple_of(8) || len > acts.len() {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let (a, tail) = acts.split_at(len);
        acts = tail;
        match typ {
            COPY_FIELD => copy_field(a, out)?,
            METER if len == 8 && first && meter_first => meter = Some(be32(a, 4)),
            METER => return Err(OfError::BAD_ACTION_TYPE),
            SET_FIELD if a[6] & 1 == 1 => masked_set_field(a, out)?,
            EXPERIMENTER if len >= 16 && be32(a, 4) == NX_VENDOR => {
                let nested_at = match be16(a, 8) {
                    NXAST_CT => 24,
                    NXAST_CLONE => 16,
                    _ => 0,
                };
                if nested_at == 0 || len < nested_at {
                    out.extend_from_slice(a);
                } else {
                    let start = out.len();
                    out.extend_from_slice(&a[..nested_at]);
                    actions(&a[nested_at..], out, false)?;
                    let n = out.len() - start;
                    set16(out, start + 2, n);
                }
            }
            _ => out.extend_from_slice(a),
        }
        first = false;
    }
    Ok(meter)
}

/// The length of the OXM header at `at` (8 for an experimenter's).
fn oxm_header_len(a: &[u8], at: usize) -> Result<usize, OfError> {
    if a.len() < at + 4 {
        return Err(OfError::BAD_ACTION_LEN);
    }
    Ok(if be16(a, at) == EXPERIMENTER { 8 } else { 4 })
}

/// `COPY_FIELD` (n_bits, src_offset, dst_offset, pad, src and dst OXM
/// headers) as `NXAST_REG_MOVE` (the same after Nicira's header).
fn copy_field(a: &[u8], out: &mut Vec<u8>) -> Result<(), OfError> {
    let s = oxm_header_len(a, 12)?;
    let d = oxm_header_len(a, 12 + s)?;
    if a.len() < 12 + s + d {
        return Err(OfError::BAD_ACTION_LEN);
    }
    let start = out.len();
    out.extend_from_slice(&EXPERIMENTER.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&NXAST_REG_MOVE.to_be_bytes());
    out.extend_from_slice(&a[4..10]);
    out.extend_from_slice(&a[12..12 + s + d]);
    pad8(out, start);
    let n = out.len() - start;
    set16(out, start + 2, n);
    Ok(())
}

/// A masked `SET_FIELD` as OVS writes it for 1.3: `NXAST_REG_LOAD`s,
/// one a run of the mask's ones (at most 64 bits each), for a field with
/// an NXM header; `NXAST_REG_LOAD2` (Nicira's header, then the same OXM)
/// for the others.
fn masked_set_field(a: &[u8], out: &mut Vec<u8>) -> Result<(), OfError> {
    let oxm_len = 4 + usize::from(a[7]);
    if a.len() < 4 + oxm_len {
        return Err(OfError::BAD_SET_LEN);
    }
    let oxm = &a[4..4 + oxm_len];
    let size = usize::from(oxm[3]) / 2;
    if matches!(be16(oxm, 0), 0x0000 | 0x0001) && (1..=16).contains(&size) {
        let header = (be32(oxm, 0) & !0x1ff) | size as u32;
        let num = |b: &[u8]| b.iter().fold(0u128, |x, &y| x << 8 | u128::from(y));
        let (value, mask) = (num(&oxm[4..4 + size]), num(&oxm[4 + size..4 + 2 * size]));
        let bits = 8 * size as u32;
        let mut ofs = 0;
        while ofs < bits {
            if mask >> ofs & 1 == 0 {
                ofs += 1;
                continue;
            }
            let mut n = 0;
            while ofs + n < bits && n < 64 && mask >> (ofs + n) & 1 == 1 {
                n += 1;
            }
            let v = (value >> ofs) as u64 & if n == 64 { u64::MAX } else { (1 << n) - 1 };
            out.extend_from_slice(&EXPERIMENTER.to_be_bytes());
            out.extend_from_slice(&24u16.to_be_bytes());
            out.extend_from_slice(&NX_VENDOR.to_be_bytes());
            out.extend_from_slice(&NXAST_REG_LOAD.to_be_bytes());
            out.extend_from_slice(&((ofs as u16) << 6 | (n as u16 - 1)).to_be_bytes());
            out.extend_from_slice(&header.to_be_bytes());
            out.extend_from_slice(&v.to_be_bytes());
            ofs += n;
        }
        return Ok(());
    }
    reg_load2(oxm, out);
    Ok(())
}

fn reg_load2(oxm: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&EXPERIMENTER.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&NXAST_REG_LOAD2.to_be_bytes());
    out.extend_from_slice(oxm);
    pad8(out, start);
    let n = out.len() - start;
    set16(out, start + 2, n);
}

/// A `SET_FIELD` of one OXM (unmasked).
fn set_field(oxm: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&SET_FIELD.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(oxm);
    pad8(out, start);
    let n = out.len() - start;
    set16(out, start + 2, n);
}

/// 1.5's packet-out (buffer, actions' length, pad, match, actions,
/// packet) as 1.3's (buffer, in_port, actions' length, pad, actions,
/// packet): the match's `in_port` into its field, its other fields as
/// `set_field`s ahead of the actions.
fn packet_out(frame: &[u8]) -> Result<Vec<u8>, OfError> {
    if frame.len() < 16 {
        return Err(OfError::BAD_LEN);
    }
    let acts_len = usize::from(be16(frame, 12));
    let m = match_end(frame, 16)?;
    let acts = frame.get(m..m + acts_len).ok_or(OfError::BAD_LEN)?;
    let data = &frame[m + acts_len..];
    let mut in_port = PORT_CONTROLLER;
    let mut sets = Vec::new();
    let match_len = usize::from(be16(frame, 18));
    let mut oxms = &frame[20..16 + match_len];
    while !oxms.is_empty() {
        if oxms.len() < 4 {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let n = 4 + usize::from(oxms[3]);
        if n > oxms.len() {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let (oxm, tail) = oxms.split_at(n);
        oxms = tail;
        let (class, field, masked) = (be16(oxm, 0), oxm[2] >> 1, oxm[2] & 1 == 1);
        match (class, field) {
            // OXM_OF_IN_PORT.
            (0x8000, 0) if n == 8 => in_port = be32(oxm, 4),
            // packet_type Ethernet: what every packet-out is.
            (0x8000, 44) if n == 8 && be32(oxm, 4) == 0 => {}
            _ if masked => reg_load2(oxm, &mut sets),
            _ => set_field(oxm, &mut sets),
        }
    }
    let mut converted = Vec::with_capacity(acts.len() + 16);
    actions(acts, &mut converted, false)?;
    let mut v = frame[..12].to_vec();
    v.extend_from_slice(&in_port.to_be_bytes());
    v.extend_from_slice(
        &u16::try_from(sets.len() + converted.len())
            .map_err(|_| OfError::BAD_LEN)?
            .to_be_bytes(),
    );
    v.extend_from_slice(&[0; 6]);
    v.extend_from_slice(&sets);
    v.extend_from_slice(&converted);
    v.extend_from_slice(data);
    Ok(v)
}

/// 1.5's group-mod (command, type, pad, group, buckets' length, pad,
/// command bucket, buckets with ids and properties, group properties) as
/// 1.3's (command, type, pad, group, buckets with weight and watches).
fn group_mod(frame: &[u8]) -> Result<Vec<u8>, OfError> {
    if frame.len() < 24 {
        return Err(OfError::BAD_LEN);
    }
    let command = be16(frame, 8);
    if command > 2 {
        return Err(OfError::GROUP_BAD_COMMAND);
    }
    let typ = frame[10];
    let n = usize::from(be16(frame, 16));
    let mut buckets = frame.get(24..24 + n).ok_or(OfError::BAD_LEN)?;
    let mut v = frame[..16].to_vec();
    while !buckets.is_empty() {
        if buckets.len() < 8 {
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        let len = usize::from(be16(buckets, 0));
        let acts_len = usize::from(be16(buckets, 2));
        if len < 8 + acts_len || len > buckets.len() {
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        let (b, tail) = buckets.split_at(len);
        buckets = tail;
        let mut weight = u16::from(typ == GROUP_SELECT);
        let (mut watch_port, mut watch_group) = (ANY, ANY);
        let mut props = &b[8 + acts_len..];
        while props.len() >= 4 {
            let (pt, pl) = (be16(props, 0), usize::from(be16(props, 2)));
            if pl < 4 || pl > props.len() {
                return Err(OfError::GROUP_BAD_BUCKET);
            }
            match pt {
                0 if pl >= 6 => weight = be16(props, 4),
                1 if pl >= 8 => watch_port = be32(props, 4),
                2 if pl >= 8 => watch_group = be32(props, 4),
                _ => {}
            }
            props = props.get(pl.div_ceil(8) * 8..).unwrap_or(&[]);
        }
        let start = v.len();
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&weight.to_be_bytes());
        v.extend_from_slice(&watch_port.to_be_bytes());
        v.extend_from_slice(&watch_group.to_be_bytes());
        v.extend_from_slice(&[0; 4]);
        actions(&b[8..8 + acts_len], &mut v, false)?;
        let n = v.len() - start;
        set16(&mut v, start, n);
    }
    // The group's properties: Netronome's selection method (OVS's
    // `selection_method=dp_hash|hash`) follows the 1.3 buckets as it
    // came, where the 1.3 decoder takes it (crate::group); others are
    // ignored, as OVS ignores unknown group properties.
    let mut props = &frame[24 + n..];
    while props.len() >= 4 {
        let pl = usize::from(be16(props, 2));
        if pl < 4 || pl > props.len() {
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        let padded = pl.div_ceil(8) * 8;
        if crate::group::is_selection_method(props) {
            v.extend_from_slice(&props[..pl]);
            v.resize(v.len() + padded - pl, 0);
        }
        props = props.get(padded..).unwrap_or(&[]);
    }
    Ok(v)
}

/// A message Sluice's 1.3 code wrote, as a 1.5 peer reads it (1.4's
/// ports, then 1.5's flow statistics, flow-removed, aggregate statistics
/// and group descriptions).
pub fn upgrade(frame: &[u8]) -> Vec<u8> {
    let v = of14::upgrade(frame);
    if v.len() < 8 || v[0] != OFP14 {
        return v;
    }
    let split = match v[1] {
        msg::MULTIPART_REPLY if v.len() >= 16 => match be16(&v, 8) {
            mp::FLOW => flow_stats(&v),
            mp::GROUP_DESC => group_desc(&v),
            _ => None,
        },
        _ => None,
    };
    if let Some(entries) = split {
        return in_parts(&v[..16], &entries);
    }
    let converted = match v[1] {
        msg::MULTIPART_REPLY if v.len() >= 16 && be16(&v, 8) == mp::AGGREGATE => aggregate(&v),
        msg::FLOW_REMOVED => flow_removed(&v),
        _ => None,
    };
    let mut out = converted.unwrap_or(v);
    out[0] = OFP15;
    let n = out.len();
    set16(&mut out, 2, n);
    out
}

/// Appends OXS statistics: duration, packets, bytes (left out where
/// 1.3's was all ones: not counted), flows.
fn oxs(out: &mut Vec<u8>, duration: Option<u64>, packets: u64, bytes: u64, flows: Option<u32>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut put = |h: u32, v: &[u8]| {
        out.extend_from_slice(&h.to_be_bytes());
        out.extend_from_slice(v);
    };
    if let Some(d) = duration {
        put(OXS_DURATION, &d.to_be_bytes());
    }
    if packets != u64::MAX {
        put(OXS_PACKET_COUNT, &packets.to_be_bytes());
    }
    if bytes != u64::MAX {
        put(OXS_BYTE_COUNT, &bytes.to_be_bytes());
    }
    if let Some(f) = flows {
        put(OXS_FLOW_COUNT, &f.to_be_bytes());
    }
    let n = out.len() - start;
    set16(out, start + 2, n);
    pad8(out, start);
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// 1.3's flow statistics (48 bytes, match, instructions) as 1.5's flow
/// description (24 bytes, match, OXS statistics, instructions).
fn flow_stats(v: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut entries = Vec::new();
    let mut body = &v[16..];
    while !body.is_empty() {
        if body.len() < 56 {
            return None;
        }
        let len = usize::from(be16(body, 0));
        if len < 56 || len > body.len() {
            return None;
        }
        let (e, tail) = body.split_at(len);
        body = tail;
        let m = match_end(e, 48).ok()?;
        let mut out = Vec::with_capacity(e.len() + 32);
        let start = 0;
        out.extend_from_slice(&[0, 0, 0, 0, e[2], 0]);
        out.extend_from_slice(&e[12..20]); // priority, idle, hard, flags
        out.extend_from_slice(&[0, 0]); // importance
        out.extend_from_slice(&e[24..32]); // cookie
        out.extend_from_slice(&e[48..m]);
        let duration = u64::from(be32(e, 4)) << 32 | u64::from(be32(e, 8));
        oxs(&mut out, Some(duration), be64(e, 32), be64(e, 40), None);
        instructions_up(&e[m..], &mut out)?;
        let n = out.len() - start;
        set16(&mut out, start, n);
        entries.push(out);
    }
    Some(entries)
}

/// A multipart reply of `entries` under the header `head` (16 bytes) in
/// 1.5's framing: as many messages as 64 KiB needs, `REPLY_MORE` on all
/// but the last (which keeps the flag the reply had).
fn in_parts(head: &[u8], entries: &[Vec<u8>]) -> Vec<u8> {
    const ROOM: usize = u16::MAX as usize;
    let more = be16(head, 10);
    let mut out = Vec::new();
    let open = |out: &mut Vec<u8>| {
        let at = out.len();
        out.extend_from_slice(head);
        out[at] = OFP15;
        at
    };
    let close = |out: &mut Vec<u8>, at: usize, flags: u16| {
        let n = out.len() - at;
        set16(out, at + 2, n);
        out[at + 10..at + 12].copy_from_slice(&flags.to_be_bytes());
    };
    let mut at = open(&mut out);
    for e in entries {
        if out.len() - at + e.len() > ROOM && out.len() - at > 16 {
            close(&mut out, at, more | 1);
            at = open(&mut out);
        }
        out.extend_from_slice(e);
    }
    close(&mut out, at, more);
    out
}

/// 1.3's aggregate statistics (packets, bytes, flows, pad) as OXS.
fn aggregate(v: &[u8]) -> Option<Vec<u8>> {
    if v.len() < 16 + 24 {
        return None;
    }
    let mut out = v[..16].to_vec();
    oxs(&mut out, None, be64(v, 16), be64(v, 24), Some(be32(v, 32)));
    Some(out)
}

/// 1.3's flow-removed as 1.5's (table, reason, priority, timeouts,
/// cookie, match, OXS statistics).
fn flow_removed(v: &[u8]) -> Option<Vec<u8>> {
    let m = match_end(v, 48).ok()?;
    let mut out = v[..8].to_vec();
    out.extend_from_slice(&[v[19], v[18]]);
    out.extend_from_slice(&v[16..18]); // priority
    out.extend_from_slice(&v[28..32]); // idle, hard
    out.extend_from_slice(&v[8..16]); // cookie
    out.extend_from_slice(&v[48..m]);
    let duration = u64::from(be32(v, 20)) << 32 | u64::from(be32(v, 24));
    oxs(&mut out, Some(duration), be64(v, 32), be64(v, 40), None);
    Some(out)
}

/// 1.3's group descriptions as 1.5's: buckets with ids (their index)
/// and their weight (select groups) and watches (where set) as
/// properties.
fn group_desc(v: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut entries = Vec::new();
    let mut body = &v[16..];
    while !body.is_empty() {
        if body.len() < 8 {
            return None;
        }
        let len = usize::from(be16(body, 0));
        if len < 8 || len > body.len() {
            return None;
        }
        let (e, tail) = body.split_at(len);
        body = tail;
        let mut out = Vec::with_capacity(e.len() + 64);
        let start = 0;
        out.extend_from_slice(&[0, 0, e[2], 0]);
        out.extend_from_slice(&e[4..8]);
        out.extend_from_slice(&[0; 8]);
        let mut buckets = &e[8..];
        let mut id = 0u32;
        while !buckets.is_empty() {
            if buckets.len() < 16 {
                return None;
            }
            let bl = usize::from(be16(buckets, 0));
            if bl < 16 || bl > buckets.len() {
                return None;
            }
            let (b, rest) = buckets.split_at(bl);
            buckets = rest;
            let bs = out.len();
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&id.to_be_bytes());
            actions_up(&b[16..], &mut out)?;
            let acts_len = out.len() - bs - 8;
            set16(&mut out, bs + 2, acts_len);
            if e[2] == GROUP_SELECT {
                out.extend_from_slice(&[0, 0, 0, 8]);
                out.extend_from_slice(&b[2..4]);
                out.extend_from_slice(&[0, 0]);
            }
            if e[2] == GROUP_FF || be32(b, 4) != ANY {
                out.extend_from_slice(&[0, 1, 0, 8]);
                out.extend_from_slice(&b[4..8]);
            }
            if e[2] == GROUP_FF || be32(b, 8) != ANY {
                out.extend_from_slice(&[0, 2, 0, 8]);
                out.extend_from_slice(&b[8..12]);
            }
            let n = out.len() - bs;
            set16(&mut out, bs, n);
            id += 1;
        }
        let buckets_len = out.len() - start - 16;
        set16(&mut out, start + 8, buckets_len);
        let n = out.len() - start;
        set16(&mut out, start, n);
        entries.push(out);
    }
    Some(entries)
}

/// 1.3's instructions as 1.5's: the meter instruction becomes the
/// `METER` action heading the apply-actions; Nicira's register actions,
/// which OVS reads in 1.0-1.4 only, become 1.5's.
fn instructions_up(mut ins: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut meter = None;
    let mut applied = false;
    while !ins.is_empty() {
        if ins.len() < 4 {
            return None;
        }
        let (typ, len) = (be16(ins, 0), usize::from(be16(ins, 2)));
        if len < 4 || len > ins.len() {
            return None;
        }
        let (i, tail) = ins.split_at(len);
        ins = tail;
        match typ {
            IT_METER if len == 8 => meter = Some(be32(i, 4)),
            IT_WRITE_ACTIONS | IT_APPLY_ACTIONS if len >= 8 => {
                let start = out.len();
                out.extend_from_slice(&i[..8]);
                if typ == IT_APPLY_ACTIONS {
                    applied = true;
                    if let Some(m) = meter.take() {
                        meter_action(m, out);
                    }
                }
                actions_up(&i[8..], out)?;
                let n = out.len() - start;
                set16(out, start + 2, n);
            }
            _ => {
                if !applied {
                    if let Some(m) = meter.take() {
                        apply_meter(m, out);
                    }
                }
                out.extend_from_slice(i)
            }
        }
    }
    if let Some(m) = meter {
        apply_meter(m, out);
    }
    Some(())
}

fn meter_action(m: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 29, 0, 8]);
    out.extend_from_slice(&m.to_be_bytes());
}

/// Apply-actions of one `METER` action.
fn apply_meter(m: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 4, 0, 16, 0, 0, 0, 0]);
    meter_action(m, out);
}

/// 1.3's actions as 1.5's: `NXAST_REG_LOAD2` a masked `SET_FIELD`,
/// `NXAST_REG_LOAD` a `SET_FIELD`, `NXAST_REG_MOVE` a `COPY_FIELD`
/// (inside `ct(exec(...))` and `clone(...)` too).
fn actions_up(mut acts: &[u8], out: &mut Vec<u8>) -> Option<()> {
    while !acts.is_empty() {
        if acts.len() < 4 {
            return None;
        }
        let len = usize::from(be16(acts, 2));
        if len < 8 || len > acts.len() {
            return None;
        }
        let (a, tail) = acts.split_at(len);
        acts = tail;
        if be16(a, 0) != EXPERIMENTER || len < 16 || be32(a, 4) != NX_VENDOR {
            out.extend_from_slice(a);
            continue;
        }
        let start = out.len();
        match be16(a, 8) {
            NXAST_REG_LOAD2 => {
                let oxm_len = 4 + usize::from(*a.get(13)?);
                out.extend_from_slice(&SET_FIELD.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(a.get(10..10 + oxm_len)?);
            }
            NXAST_REG_LOAD if len == 24 => {
                let ofs_nbits = be16(a, 10);
                let (ofs, n_bits) = (u32::from(ofs_nbits >> 6), u32::from(ofs_nbits & 0x3f) + 1);
                let h = be32(a, 12);
                let size = (h & 0xff) as usize;
                if !(1..=16).contains(&size) || ofs + n_bits > 8 * size as u32 {
                    out.extend_from_slice(a);
                    continue;
                }
                let value = u128::from(be64(a, 16)) << ofs;
                let mask = (u128::MAX >> (128 - n_bits)) << ofs;
                let whole = mask == u128::MAX >> (128 - 8 * size);
                out.extend_from_slice(&SET_FIELD.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                let h = if whole {
                    h
                } else {
                    (h & !0xff) | 0x100 | (2 * size) as u32
                };
                out.extend_from_slice(&h.to_be_bytes());
                out.extend_from_slice(&value.to_be_bytes()[16 - size..]);
                if !whole {
                    out.extend_from_slice(&mask.to_be_bytes()[16 - size..]);
                }
            }
            NXAST_REG_MOVE if len == 24 => {
                out.extend_from_slice(&COPY_FIELD.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&a[10..16]);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&a[16..24]);
            }
            sub @ (NXAST_CT | NXAST_CLONE) => {
                let at = if sub == NXAST_CT { 24 } else { 16 };
                out.extend_from_slice(a.get(..at)?);
                actions_up(&a[at..], out)?;
            }
            _ => {
                out.extend_from_slice(a);
                continue;
            }
        }
        pad8(out, start);
        let n = out.len() - start;
        set16(out, start + 2, n);
    }
    Some(())
}

#[cfg(test)]
#[path = "of15_tests.rs"]
mod tests;
