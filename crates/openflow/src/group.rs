//! Groups on the wire: GROUP_MOD (section 7.3.4.2) and the GROUP,
//! GROUP_DESC and GROUP_FEATURES multipart bodies (7.3.5.9–7.3.5.11).

use crate::action::{decode_actions, encode_actions, OfAction};
use crate::consts::OfError;
use crate::wire::Rd;

/// GROUP_MOD commands.
pub mod cmd {
    #![allow(missing_docs)]
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// One bucket as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfBucket {
    /// Weight (select groups).
    pub weight: u16,
    /// Watched port (`OFPP_ANY`: none).
    pub watch_port: u32,
    /// Watched group (`OFPG_ANY`: none).
    pub watch_group: u32,
    /// Actions.
    pub actions: Vec<OfAction>,
}

/// A GROUP_MOD's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMod {
    /// ADD, MODIFY or DELETE ([`cmd`]).
    pub command: u16,
    /// `OFPGT_*`.
    pub typ: u8,
    /// The group.
    pub group_id: u32,
    /// Buckets.
    pub buckets: Vec<OfBucket>,
    /// The buckets' bytes as sent (GROUP_DESC gives them back).
    pub raw_buckets: Vec<u8>,
    /// The selection method property, where one came (OpenFlow 1.5).
    pub selection: Option<SelectionMethod>,
}

/// Netronome's selection method group property
/// (`ntr_group_prop_selection_method`), which OVS takes in OpenFlow 1.5:
/// `dp_hash` or `hash`, a parameter, and for `hash` the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectionMethod {
    /// `dp_hash` or `hash`.
    pub method: String,
    /// For `dp_hash`: the algorithm (high 32 bits) and basis (low 32).
    pub param: u64,
    /// For `hash`: the fields' OXM headers and masks, as sent.
    pub fields: Vec<u8>,
}

/// Netronome's experimenter id.
const NTR_VENDOR: u32 = 0x0000_154d;
/// `NTRT_SELECTION_METHOD`.
const NTRT_SELECTION_METHOD: u32 = 1;

/// Whether `p` starts with a selection method property.
pub fn is_selection_method(p: &[u8]) -> bool {
    p.len() >= 12
        && p[..2] == [0xff, 0xff]
        && p[4..8] == NTR_VENDOR.to_be_bytes()
        && p[8..12] == NTRT_SELECTION_METHOD.to_be_bytes()
}

/// The selection method property at the start of `p` (which
/// [`is_selection_method`]), and its padded length. A method other than
/// `dp_hash` and `hash` is refused as OVS refuses it
/// (`OFPBPC_BAD_VALUE`), as are fields without `hash`.
fn selection_method(p: &[u8]) -> Result<(SelectionMethod, usize), OfError> {
    let len = usize::from(u16::from_be_bytes([p[2], p[3]]));
    if len < 40 || len > p.len() {
        return Err(OfError::BAD_LEN);
    }
    let name = &p[16..32];
    let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    let method = String::from_utf8_lossy(&name[..end]).into_owned();
    let mut param = [0u8; 8];
    param.copy_from_slice(&p[32..40]);
    let fields = p[40..len].to_vec();
    let known = match method.as_str() {
        "hash" => true,
        "dp_hash" => fields.is_empty(),
        _ => false,
    };
    if !known {
        return Err(OfError::BAD_PROP_VALUE);
    }
    let sel = SelectionMethod {
        method,
        param: u64::from_be_bytes(param),
        fields,
    };
    Ok((sel, len.div_ceil(8) * 8))
}

/// Appends `s` as its group property.
pub fn encode_selection_method(s: &SelectionMethod, out: &mut Vec<u8>) {
    let len = 40 + s.fields.len();
    out.extend_from_slice(&[0xff, 0xff]);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&NTR_VENDOR.to_be_bytes());
    out.extend_from_slice(&NTRT_SELECTION_METHOD.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    let mut name = [0u8; 16];
    let n = s.method.len().min(15);
    name[..n].copy_from_slice(&s.method.as_bytes()[..n]);
    out.extend_from_slice(&name);
    out.extend_from_slice(&s.param.to_be_bytes());
    out.extend_from_slice(&s.fields);
    out.resize(out.len() + len.div_ceil(8) * 8 - len, 0);
}

fn bucket(r: &mut Rd<'_>) -> Result<OfBucket, OfError> {
    let len = usize::from(r.u16()?);
    if len < 16 || len % 8 != 0 {
        return Err(OfError::GROUP_BAD_BUCKET);
    }
    let mut b = Rd::new(r.take(len - 2)?, OfError::GROUP_BAD_BUCKET);
    let weight = b.u16()?;
    let watch_port = b.u32()?;
    let watch_group = b.u32()?;
    b.skip(4)?;
    Ok(OfBucket {
        weight,
        watch_port,
        watch_group,
        actions: decode_actions(b.rest())?,
    })
}

/// Reads a GROUP_MOD body (after the 8-byte header).
pub fn decode_group_mod(body: &[u8]) -> Result<GroupMod, OfError> {
    let mut r = Rd::new(body, OfError::BAD_LEN);
    let command = r.u16()?;
    let typ = r.u8()?;
    r.skip(1)?;
    let group_id = r.u32()?;
    let rest = r.rest();
    // The buckets, then (from a 1.5 group-mod, crate::of15) the
    // selection method property.
    let mut at = 0;
    while at + 2 <= rest.len() && !is_selection_method(&rest[at..]) {
        let len = usize::from(u16::from_be_bytes([rest[at], rest[at + 1]]));
        if len < 16 || len % 8 != 0 {
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        at += len;
    }
    let raw = rest.get(..at).ok_or(OfError::GROUP_BAD_BUCKET)?;
    let mut br = Rd::new(raw, OfError::GROUP_BAD_BUCKET);
    let mut buckets = Vec::new();
    while br.left() > 0 {
        buckets.push(bucket(&mut br)?);
    }
    let selection = if at < rest.len() {
        if !is_selection_method(&rest[at..]) {
            // A tail too short for a bucket's length.
            return Err(OfError::GROUP_BAD_BUCKET);
        }
        let (sel, used) = selection_method(&rest[at..])?;
        if rest[at..].len() > used && rest[at + used..].iter().any(|&b| b != 0) {
            return Err(OfError::BAD_LEN);
        }
        Some(sel)
    } else {
        None
    };
    Ok(GroupMod {
        command,
        typ,
        group_id,
        buckets,
        raw_buckets: raw.to_vec(),
        selection,
    })
}

/// Appends buckets.
pub fn encode_buckets(buckets: &[OfBucket], out: &mut Vec<u8>) {
    for b in buckets {
        let start = out.len();
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&b.weight.to_be_bytes());
        out.extend_from_slice(&b.watch_port.to_be_bytes());
        out.extend_from_slice(&b.watch_group.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        encode_actions(&b.actions, out);
        let len = (out.len() - start) as u16;
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// A GROUP_MOD body.
pub fn encode_group_mod(g: &GroupMod) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&g.command.to_be_bytes());
    out.extend_from_slice(&[g.typ, 0]);
    out.extend_from_slice(&g.group_id.to_be_bytes());
    encode_buckets(&g.buckets, &mut out);
    if let Some(s) = &g.selection {
        encode_selection_method(s, &mut out);
    }
    out
}

/// One GROUP_DESC reply entry, the buckets as bytes.
pub fn desc_entry(typ: u8, group_id: u32, buckets: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&((8 + buckets.len()) as u16).to_be_bytes());
    out.extend_from_slice(&[typ, 0]);
    out.extend_from_slice(&group_id.to_be_bytes());
    out.extend_from_slice(buckets);
}

/// A group's counters for a GROUP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    /// The group.
    pub group_id: u32,
    /// Rules that send to it.
    pub ref_count: u32,
    /// Packets through it.
    pub packet_count: u64,
    /// Their bytes.
    pub byte_count: u64,
    /// Age, seconds.
    pub duration_sec: u32,
    /// And nanoseconds.
    pub duration_nsec: u32,
    /// (packets, bytes) per bucket.
    pub buckets: Vec<(u64, u64)>,
}

impl GroupStats {
    /// Appends the entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&((40 + 16 * self.buckets.len()) as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        out.extend_from_slice(&self.ref_count.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.packet_count.to_be_bytes());
        out.extend_from_slice(&self.byte_count.to_be_bytes());
        out.extend_from_slice(&self.duration_sec.to_be_bytes());
        out.extend_from_slice(&self.duration_nsec.to_be_bytes());
        for (p, b) in &self.buckets {
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
    }
}

/// The group id a GROUP multipart request asks for (`OFPG_ALL`: all).
pub fn stats_request(body: &[u8]) -> Result<u32, OfError> {
    let mut r = Rd::new(body, OfError::BAD_LEN);
    let id = r.u32()?;
    r.skip(4)?;
    if r.left() != 0 {
        return Err(OfError::BAD_LEN);
    }
    Ok(id)
}

/// The GROUP_FEATURES reply body: all four types; select by weight,
/// liveness and chaining; `max_groups` per type; and the actions buckets
/// take (every action Sluice takes: output, TTLs, push/pop VLAN, MPLS and
/// PBB, group, set_field).
pub fn features_body() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0b1111u32.to_be_bytes());
    // OFPGFC_SELECT_WEIGHT | SELECT_LIVENESS | CHAINING | CHAINING_CHECKS
    out.extend_from_slice(&0b1111u32.to_be_bytes());
    for _ in 0..4 {
        out.extend_from_slice(&crate::group::MAX_GROUPS.to_be_bytes());
    }
    let actions = crate::features::action_bitmap();
    for _ in 0..4 {
        out.extend_from_slice(&actions.to_be_bytes());
    }
    out
}

/// Most groups per type, as GROUP_FEATURES states it.
pub const MAX_GROUPS: u32 = 0xffff_ff00;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_mods_round_trip_and_bad_buckets_are_refused() {
        let g = GroupMod {
            command: cmd::ADD,
            typ: 1,
            group_id: 7,
            buckets: vec![
                OfBucket {
                    weight: 3,
                    watch_port: 2,
                    watch_group: u32::MAX,
                    actions: vec![OfAction::Output {
                        port: 2,
                        max_len: 0xffe5,
                    }],
                },
                OfBucket {
                    weight: 1,
                    watch_port: u32::MAX,
                    watch_group: u32::MAX,
                    actions: vec![
                        OfAction::PopVlan,
                        OfAction::Output {
                            port: 3,
                            max_len: 0,
                        },
                    ],
                },
            ],
            raw_buckets: Vec::new(),
            selection: None,
        };
        let b = encode_group_mod(&g);
        let back = decode_group_mod(&b).unwrap();
        assert_eq!(back.buckets, g.buckets);
        assert_eq!((back.command, back.typ, back.group_id), (0, 1, 7));
        assert_eq!(back.raw_buckets, b[8..]);
        // A bucket length past the end, or below its header.
        let mut bad = b.clone();
        bad[8..10].copy_from_slice(&200u16.to_be_bytes());
        assert!(decode_group_mod(&bad).is_err());
        bad[8..10].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(decode_group_mod(&bad), Err(OfError::GROUP_BAD_BUCKET));
        assert!(decode_group_mod(&b[..5]).is_err());

        // With a selection method after the buckets (OVS's dp_hash, the
        // algorithm in the parameter's high word).
        let with = GroupMod {
            selection: Some(SelectionMethod {
                method: "dp_hash".into(),
                param: 1 << 32 | 7,
                fields: Vec::new(),
            }),
            ..g.clone()
        };
        let wb = encode_group_mod(&with);
        assert_eq!(wb.len(), b.len() + 40);
        let back = decode_group_mod(&wb).unwrap();
        assert_eq!(back.selection, with.selection);
        assert_eq!(back.buckets, g.buckets);
        assert_eq!(back.raw_buckets, b[8..]);
        // A method OVS does not know; fields without `hash`; bytes after.
        let mut other = wb.clone();
        other[b.len() + 16..b.len() + 23].copy_from_slice(b"nothash");
        assert_eq!(decode_group_mod(&other), Err(OfError::BAD_PROP_VALUE));
        // A byte after the buckets: no bucket, no property.
        let mut odd = b.clone();
        odd.push(0);
        assert_eq!(decode_group_mod(&odd), Err(OfError::GROUP_BAD_BUCKET));
        let mut long = wb.clone();
        long.extend_from_slice(&[1; 8]);
        assert_eq!(decode_group_mod(&long), Err(OfError::BAD_LEN));
        let mut short = wb.clone();
        short[b.len() + 2..b.len() + 4].copy_from_slice(&30u16.to_be_bytes());
        assert_eq!(decode_group_mod(&short), Err(OfError::BAD_LEN));
    }

    #[test]
    fn stats_entries_have_their_lengths() {
        let mut out = Vec::new();
        GroupStats {
            group_id: 1,
            ref_count: 2,
            packet_count: 3,
            byte_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            buckets: vec![(7, 8)],
        }
        .encode(&mut out);
        assert_eq!(out.len(), 56);
        assert_eq!(u16::from_be_bytes([out[0], out[1]]), 56);
        let mut d = Vec::new();
        desc_entry(0, 9, &[1; 16], &mut d);
        assert_eq!(d.len(), 24);
        assert_eq!(features_body().len(), 40);
        assert_eq!(
            stats_request(&[0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0]),
            Ok(0xffff_fffc)
        );
    }
}
