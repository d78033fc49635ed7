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
    let raw = r.rest();
    let mut br = Rd::new(raw, OfError::GROUP_BAD_BUCKET);
    let mut buckets = Vec::new();
    while br.left() > 0 {
        buckets.push(bucket(&mut br)?);
    }
    Ok(GroupMod {
        command,
        typ,
        group_id,
        buckets,
        raw_buckets: raw.to_vec(),
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
