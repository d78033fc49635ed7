//! Nicira experimenter messages Open vSwitch's tools and controllers send
//! in OpenFlow 1.3: the TLV table of Geneve options (`NXT_TLV_TABLE_MOD`,
//! `NXT_TLV_TABLE_REQUEST`, `NXT_TLV_TABLE_REPLY`: what `ovs-ofctl
//! add-tlv-map`, `dump-tlv-map` and `ovn-controller` use), and their
//! errors (experimenter errors of Nicira's id).

use crate::consts::OfError;
use crate::wire::{be16, Rd};

/// Nicira's experimenter id (`NX_VENDOR_ID`).
pub const NX_VENDOR: u32 = 0x0000_2320;
/// `ofp_error_type` of experimenter errors.
pub const ERROR_EXPERIMENTER: u16 = 0xffff;

/// Nicira message subtypes.
pub mod subtype {
    /// `NXT_TLV_TABLE_MOD`.
    pub const TLV_TABLE_MOD: u32 = 24;
    /// `NXT_TLV_TABLE_REQUEST`.
    pub const TLV_TABLE_REQUEST: u32 = 25;
    /// `NXT_TLV_TABLE_REPLY`.
    pub const TLV_TABLE_REPLY: u32 = 26;
}

/// `NXTTMC_*`: what a TLV table mod does.
pub mod command {
    /// Add mappings.
    pub const ADD: u16 = 0;
    /// Delete the mappings of the fields listed.
    pub const DELETE: u16 = 1;
    /// Delete every mapping.
    pub const CLEAR: u16 = 2;
}

// Nicira errors are experimenter errors (type `ERROR_EXPERIMENTER`,
// experimenter `NX_VENDOR`): `OfError::NXTTMFC_*` and the like, which
// `msg::encode` sends with the experimenter id.

/// The body of a Nicira message of `subtype` after its vendor id and
/// subtype (`body`: an experimenter or vendor message's, from the vendor
/// id on), if it is one.
pub fn nx_body(body: &[u8], subtype: u32) -> Option<&[u8]> {
    (body.len() >= 8 && body[..4] == NX_VENDOR.to_be_bytes() && body[4..8] == subtype.to_be_bytes())
        .then(|| &body[8..])
}

/// One `nx_tlv_map`: option class, type and length, and the
/// `tun_metadata` field index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlvMapping {
    /// Option class.
    pub class: u16,
    /// Option type.
    pub ty: u8,
    /// Data length in bytes.
    pub len: u8,
    /// `tun_metadata<index>`.
    pub index: u16,
}

/// A Nicira message, by subtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NxMessage {
    /// `NXT_TLV_TABLE_MOD`.
    TlvTableMod {
        /// [`command`].
        command: u16,
        /// The mappings.
        maps: Vec<TlvMapping>,
    },
    /// `NXT_TLV_TABLE_REQUEST`.
    TlvTableRequest,
}

/// Reads the body of an `EXPERIMENTER` message (after the 8-byte header):
/// experimenter id, subtype, then the subtype's body. Another
/// experimenter is `BAD_EXPERIMENTER`, another Nicira subtype
/// `BAD_SUBTYPE`.
pub fn decode(body: &[u8]) -> Result<NxMessage, OfError> {
    let mut r = Rd::new(body, OfError::BAD_LEN);
    if r.u32()? != NX_VENDOR {
        return Err(OfError::BAD_EXPERIMENTER);
    }
    match r.u32()? {
        subtype::TLV_TABLE_MOD => {
            let command = r.u16()?;
            r.skip(6)?;
            if !r.left().is_multiple_of(8) {
                return Err(OfError::BAD_LEN);
            }
            let mut maps = Vec::with_capacity(r.left() / 8);
            while r.left() > 0 {
                let m: [u8; 8] = r.array()?;
                maps.push(TlvMapping {
                    class: be16(&m, 0),
                    ty: m[2],
                    len: m[3],
                    index: be16(&m, 4),
                });
            }
            Ok(NxMessage::TlvTableMod { command, maps })
        }
        subtype::TLV_TABLE_REQUEST if r.left() == 0 => Ok(NxMessage::TlvTableRequest),
        subtype::TLV_TABLE_REQUEST => Err(OfError::BAD_LEN),
        _ => Err(OfError::BAD_SUBTYPE),
    }
}

/// The body of an `NXT_TLV_TABLE_REPLY` (after the 8-byte header): the
/// option space and field count the switch has, then its mappings.
pub fn tlv_table_reply(max_option_space: u32, max_fields: u16, maps: &[TlvMapping]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + 8 * maps.len());
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&subtype::TLV_TABLE_REPLY.to_be_bytes());
    out.extend_from_slice(&max_option_space.to_be_bytes());
    out.extend_from_slice(&max_fields.to_be_bytes());
    out.extend_from_slice(&[0; 10]);
    for m in maps {
        out.extend_from_slice(&m.class.to_be_bytes());
        out.extend_from_slice(&[m.ty, m.len]);
        out.extend_from_slice(&m.index.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(subtype: u32, rest: &[u8]) -> Vec<u8> {
        let mut b = NX_VENDOR.to_be_bytes().to_vec();
        b.extend_from_slice(&subtype.to_be_bytes());
        b.extend_from_slice(rest);
        b
    }

    #[test]
    fn tlv_table_messages_decode_and_encode() {
        let mut rest = vec![0, 0, 0, 0, 0, 0, 0, 0];
        rest.extend_from_slice(&[0x01, 0x02, 0x80, 4, 0, 0, 0, 0]);
        assert_eq!(
            decode(&body(subtype::TLV_TABLE_MOD, &rest)),
            Ok(NxMessage::TlvTableMod {
                command: command::ADD,
                maps: vec![TlvMapping {
                    class: 0x102,
                    ty: 0x80,
                    len: 4,
                    index: 0
                }]
            })
        );
        assert_eq!(
            decode(&body(subtype::TLV_TABLE_MOD, &rest[..12])),
            Err(OfError::BAD_LEN)
        );
        assert_eq!(
            decode(&body(subtype::TLV_TABLE_REQUEST, &[])),
            Ok(NxMessage::TlvTableRequest)
        );
        assert_eq!(decode(&body(99, &[])), Err(OfError::BAD_SUBTYPE));
        let mut other = body(subtype::TLV_TABLE_REQUEST, &[]);
        other[3] = 1;
        assert_eq!(decode(&other), Err(OfError::BAD_EXPERIMENTER));
        assert_eq!(decode(&[0, 0]), Err(OfError::BAD_LEN));
        let reply = tlv_table_reply(
            256,
            64,
            &[TlvMapping {
                class: 0xffff,
                ty: 1,
                len: 8,
                index: 3,
            }],
        );
        assert_eq!(reply.len(), 24 + 8);
        assert_eq!(&reply[24..], &[0xff, 0xff, 1, 8, 0, 3, 0, 0]);
    }
}
