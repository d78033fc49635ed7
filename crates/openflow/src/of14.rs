//! OpenFlow 1.4 as far as Sluice speaks it: the messages whose layout 1.4
//! kept from 1.3 (most of them) pass with their version byte changed;
//! the port structure, which 1.4 gave a length and properties, is
//! converted both ways ([`upgrade`], [`downgrade`]); bundles
//! (`BUNDLE_CONTROL`, `BUNDLE_ADD_MESSAGE`) are parsed here
//! ([`Bundle`]) and kept by the channel. What 1.4 changed and Sluice does
//! not convert (asynchronous configuration with properties, the queue
//! and table descriptions, flow monitors) is refused
//! ([`downgrade`]'s error), never misread.
//!
//! No I/O: frames in, frames out.

use std::borrow::Cow;

use crate::consts::{msg, OfError, OFP13};

/// OpenFlow 1.4's wire version.
pub const OFP14: u8 = 0x05;

/// `OFPT_BUNDLE_CONTROL`.
pub const BUNDLE_CONTROL: u8 = 33;
/// `OFPT_BUNDLE_ADD_MESSAGE`.
pub const BUNDLE_ADD_MESSAGE: u8 = 34;

/// Bundle control types (`ofp_bundle_ctrl_type`).
pub mod bundle_ctrl {
    /// Open a bundle.
    pub const OPEN_REQUEST: u16 = 0;
    /// Its reply.
    pub const OPEN_REPLY: u16 = 1;
    /// Close a bundle (no more messages).
    pub const CLOSE_REQUEST: u16 = 2;
    /// Its reply.
    pub const CLOSE_REPLY: u16 = 3;
    /// Apply a bundle's messages.
    pub const COMMIT_REQUEST: u16 = 4;
    /// Its reply.
    pub const COMMIT_REPLY: u16 = 5;
    /// Drop a bundle.
    pub const DISCARD_REQUEST: u16 = 6;
    /// Its reply.
    pub const DISCARD_REPLY: u16 = 7;
}

/// `OFPBF_ATOMIC`.
pub const BUNDLE_ATOMIC: u16 = 1;
/// `OFPBF_ORDERED`.
pub const BUNDLE_ORDERED: u16 = 2;

/// `OFPMP_PORT_STATS`.
const MP_PORT_STATS: u16 = 4;
/// `OFPMP_PORT_DESC`.
const MP_PORT_DESC: u16 = 13;
/// 1.4's new multipart types (table and queue descriptions, flow
/// monitors), which Sluice does not answer.
const MP_NEW_IN_14: [u16; 3] = [14, 15, 16];

/// A bundle message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bundle<'a> {
    /// `BUNDLE_CONTROL`.
    Control {
        /// The bundle.
        id: u32,
        /// [`bundle_ctrl`].
        typ: u16,
        /// [`BUNDLE_ATOMIC`], [`BUNDLE_ORDERED`].
        flags: u16,
    },
    /// `BUNDLE_ADD_MESSAGE`.
    Add {
        /// The bundle.
        id: u32,
        /// Its flags.
        flags: u16,
        /// The message added, whole (its own header).
        inner: &'a [u8],
    },
}

/// Parses a `BUNDLE_CONTROL` or `BUNDLE_ADD_MESSAGE` (properties after
/// the body are passed over).
pub fn parse_bundle(frame: &[u8]) -> Result<Bundle<'_>, OfError> {
    if frame.len() < 16 {
        return Err(OfError::BAD_LEN);
    }
    let id = u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
    let a = u16::from_be_bytes([frame[12], frame[13]]);
    let b = u16::from_be_bytes([frame[14], frame[15]]);
    match frame[1] {
        BUNDLE_CONTROL => Ok(Bundle::Control {
            id,
            typ: a,
            flags: b,
        }),
        BUNDLE_ADD_MESSAGE => {
            let rest = &frame[16..];
            if rest.len() < 8 {
                return Err(OfError::BUNDLE_MSG_BAD_LEN);
            }
            let n = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            if n < 8 || n > rest.len() {
                return Err(OfError::BUNDLE_MSG_BAD_LEN);
            }
            if rest[4..8] != frame[4..8] {
                return Err(OfError::BUNDLE_MSG_BAD_XID);
            }
            Ok(Bundle::Add {
                id,
                flags: b,
                inner: &rest[..n],
            })
        }
        _ => Err(OfError::BAD_TYPE),
    }
}

/// A `BUNDLE_CONTROL` reply.
pub fn bundle_reply(id: u32, typ: u16, flags: u16, xid: u32) -> Vec<u8> {
    let mut v = vec![OFP14, BUNDLE_CONTROL, 0, 16];
    v.extend_from_slice(&xid.to_be_bytes());
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&typ.to_be_bytes());
    v.extend_from_slice(&flags.to_be_bytes());
    v
}

/// A 1.4 message as Sluice's 1.3 code reads it: the version byte changed,
/// a port modification's Ethernet property moved back into its body, a
/// table modification's properties left out. Errors for what 1.4
/// changed and Sluice does not convert.
pub fn downgrade(frame: &[u8]) -> Result<Cow<'_, [u8]>, OfError> {
    if frame.len() < 8 {
        return Err(OfError::BAD_LEN);
    }
    match frame[1] {
        msg::GET_ASYNC_REQUEST | msg::SET_ASYNC => Err(OfError::BAD_TYPE),
        msg::MULTIPART_REQUEST if frame.len() >= 10 => {
            let t = u16::from_be_bytes([frame[8], frame[9]]);
            if MP_NEW_IN_14.contains(&t) {
                return Err(OfError::BAD_MULTIPART);
            }
            Ok(Cow::Owned(with_version(frame, OFP13)))
        }
        msg::PORT_MOD => {
            // 1.3: port_no, pad, hw_addr, pad, config, mask, advertise,
            // pad (40); 1.4: the first 32 the same, then properties.
            if frame.len() < 32 {
                return Err(OfError::BAD_LEN);
            }
            let mut v = frame[..32].to_vec();
            let mut advertise = [0u8; 4];
            let mut props = &frame[32..];
            while props.len() >= 4 {
                let typ = u16::from_be_bytes([props[0], props[1]]);
                let len = usize::from(u16::from_be_bytes([props[2], props[3]]));
                if len < 4 || len > props.len() {
                    return Err(OfError::BAD_LEN);
                }
                if typ == 0 && len >= 8 {
                    advertise.copy_from_slice(&props[4..8]);
                }
                props = props.get(len.div_ceil(8) * 8..).unwrap_or(&[]);
            }
            v.extend_from_slice(&advertise);
            v.extend_from_slice(&[0; 4]);
            v[0] = OFP13;
            v[2..4].copy_from_slice(&40u16.to_be_bytes());
            Ok(Cow::Owned(v))
        }
        msg::TABLE_MOD if frame.len() > 16 => {
            let mut v = frame[..16].to_vec();
            v[0] = OFP13;
            v[2..4].copy_from_slice(&16u16.to_be_bytes());
            Ok(Cow::Owned(v))
        }
        _ => Ok(Cow::Owned(with_version(frame, OFP13))),
    }
}

/// A message Sluice's 1.3 code wrote, as a 1.4 peer reads it: the
/// version byte changed, ports (port status, port description) and port
/// statistics in 1.4's layout with properties.
pub fn upgrade(frame: &[u8]) -> Vec<u8> {
    if frame.len() < 8 || frame[0] != OFP13 {
        return frame.to_vec();
    }
    let mut out = match frame[1] {
        msg::PORT_STATUS if frame.len() >= 16 + 64 => {
            let mut v = frame[..16].to_vec();
            port_13_to_14(&frame[16..16 + 64], &mut v);
            v
        }
        msg::MULTIPART_REPLY if frame.len() >= 16 => {
            let t = u16::from_be_bytes([frame[8], frame[9]]);
            let body = &frame[16..];
            let mut v = frame[..16].to_vec();
            match t {
                MP_PORT_DESC if body.len().is_multiple_of(64) => {
                    for p in body.chunks_exact(64) {
                        port_13_to_14(p, &mut v);
                    }
                    v
                }
                MP_PORT_STATS if body.len().is_multiple_of(112) => {
                    for s in body.chunks_exact(112) {
                        port_stats_13_to_14(s, &mut v);
                    }
                    v
                }
                _ => frame.to_vec(),
            }
        }
        _ => frame.to_vec(),
    };
    out[0] = OFP14;
    let n = out.len().min(usize::from(u16::MAX)) as u16;
    out[2..4].copy_from_slice(&n.to_be_bytes());
    out
}

fn with_version(frame: &[u8], v: u8) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[0] = v;
    f
}

/// A 1.3 `ofp_port` (64 bytes) as 1.4's (40 bytes and an Ethernet
/// property of 32).
fn port_13_to_14(p: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&p[0..4]);
    out.extend_from_slice(&72u16.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&p[8..40]);
    // OFPPDPT_ETHERNET: type 0, length 32, pad, then curr, advertised,
    // supported, peer, curr_speed, max_speed.
    out.extend_from_slice(&[0, 0, 0, 32, 0, 0, 0, 0]);
    out.extend_from_slice(&p[40..64]);
}

/// 1.3's port statistics (112 bytes) as 1.4's (80 bytes and an Ethernet
/// property of 40).
fn port_stats_13_to_14(s: &[u8], out: &mut Vec<u8>) {
    // 1.3: port_no, pad[4], rx/tx packets, rx/tx bytes, rx/tx dropped,
    // rx/tx errors (8 words from 8), rx_frame_err, rx_over_err,
    // rx_crc_err, collisions (from 72), duration_sec, duration_nsec
    // (from 104).
    out.extend_from_slice(&120u16.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&s[0..4]);
    out.extend_from_slice(&s[104..112]);
    out.extend_from_slice(&s[8..72]);
    // OFPPSPT_ETHERNET: type 0, length 40, pad, then the four counters.
    out.extend_from_slice(&[0, 0, 0, 40, 0, 0, 0, 0]);
    out.extend_from_slice(&s[72..104]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(v: u8, t: u8, len: u16, xid: u32) -> Vec<u8> {
        let mut h = vec![v, t];
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(&xid.to_be_bytes());
        h
    }

    #[test]
    fn bundle_messages_parse_and_check_the_inner_message() {
        let mut open = header(OFP14, BUNDLE_CONTROL, 16, 7);
        open.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 3]);
        assert_eq!(
            parse_bundle(&open).unwrap(),
            Bundle::Control {
                id: 9,
                typ: bundle_ctrl::OPEN_REQUEST,
                flags: BUNDLE_ATOMIC | BUNDLE_ORDERED
            }
        );
        let inner = header(OFP14, msg::BARRIER_REQUEST, 8, 7);
        let mut add = header(OFP14, BUNDLE_ADD_MESSAGE, 24, 7);
        add.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 3]);
        add.extend_from_slice(&inner);
        assert_eq!(
            parse_bundle(&add).unwrap(),
            Bundle::Add {
                id: 9,
                flags: 3,
                inner: &inner
            }
        );
        let mut bad_xid = add.clone();
        bad_xid[16 + 7] = 8;
        assert_eq!(parse_bundle(&bad_xid), Err(OfError::BUNDLE_MSG_BAD_XID));
        let mut bad_len = add.clone();
        bad_len[16 + 3] = 40;
        assert_eq!(parse_bundle(&bad_len), Err(OfError::BUNDLE_MSG_BAD_LEN));
        assert_eq!(parse_bundle(&add[..12]), Err(OfError::BAD_LEN));
        let r = bundle_reply(9, bundle_ctrl::OPEN_REPLY, 3, 7);
        assert_eq!(r.len(), 16);
        assert_eq!(&r[..8], &header(OFP14, BUNDLE_CONTROL, 16, 7)[..]);
    }

    #[test]
    fn ports_take_1_4s_layout_and_come_back() {
        let mut p13 = vec![0u8; 64];
        p13[3] = 2; // port 2
        p13[8..14].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        p13[16..19].copy_from_slice(b"eth");
        p13[36..40].copy_from_slice(&4u32.to_be_bytes()); // state LIVE
        p13[60..64].copy_from_slice(&10_000_000u32.to_be_bytes()); // max_speed
        let mut status = header(OFP13, msg::PORT_STATUS, 80, 1);
        status.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
        status.extend_from_slice(&p13);
        let up = upgrade(&status);
        assert_eq!(up[0], OFP14);
        assert_eq!(up.len(), 16 + 72);
        assert_eq!(u16::from_be_bytes([up[2], up[3]]), 88);
        let p14 = &up[16..];
        assert_eq!(&p14[0..4], &[0, 0, 0, 2]);
        assert_eq!(&p14[4..6], &72u16.to_be_bytes());
        assert_eq!(&p14[8..14], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&p14[16..19], b"eth");
        assert_eq!(&p14[36..40], &4u32.to_be_bytes());
        assert_eq!(&p14[40..44], &[0, 0, 0, 32], "the Ethernet property");
        assert_eq!(&p14[68..72], &10_000_000u32.to_be_bytes());

        // A port modification with its Ethernet property, back to 1.3's.
        let mut pm = header(OFP14, msg::PORT_MOD, 40, 3);
        pm.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0]);
        pm.extend_from_slice(&1u32.to_be_bytes()); // config PORT_DOWN
        pm.extend_from_slice(&1u32.to_be_bytes()); // mask
        pm.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0x20]);
        let down = downgrade(&pm).unwrap();
        assert_eq!(down.len(), 40);
        assert_eq!(down[0], OFP13);
        assert_eq!(&down[32..36], &[0, 0, 0, 0x20], "advertise");
    }

    #[test]
    fn what_1_4_changed_and_sluice_does_not_convert_is_refused() {
        let f = header(OFP14, msg::GET_ASYNC_REQUEST, 8, 1);
        assert_eq!(downgrade(&f), Err(OfError::BAD_TYPE));
        let mut mp = header(OFP14, msg::MULTIPART_REQUEST, 16, 1);
        mp.extend_from_slice(&[0, 14, 0, 0, 0, 0, 0, 0]);
        assert_eq!(downgrade(&mp), Err(OfError::BAD_MULTIPART));
        let barrier = header(OFP14, msg::BARRIER_REQUEST, 8, 1);
        assert_eq!(downgrade(&barrier).unwrap()[0], OFP13);
        assert_eq!(upgrade(&header(OFP13, msg::BARRIER_REPLY, 8, 1))[0], OFP14);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_convert_without_panicking(v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse_bundle(&v);
            let _ = downgrade(&v);
            let _ = upgrade(&v);
        }
    }
}
