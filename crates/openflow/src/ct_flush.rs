//! Nicira's connection-tracker flushes, decoded as Open vSwitch 3.1
//! decodes them (`lib/ofp-ct.c`, `ofproto.c`): `NXT_CT_FLUSH_ZONE` (one
//! zone) and `NXT_CT_FLUSH` (the connections a partial tuple names, in a
//! zone or in all; what ovn-controller sends when a load balancer loses a
//! backend, once the switch says `ct_flush`).
//!
//! Both take the message body after the Nicira vendor id and subtype.

use sluice_conntrack::{FlushMatch, FlushTuple};

use crate::consts::OfError;

/// `NXT_CT_FLUSH_ZONE`'s subtype.
pub const NXT_CT_FLUSH_ZONE: u32 = 29;
/// `NXT_CT_FLUSH`'s subtype.
pub const NXT_CT_FLUSH: u32 = 32;

/// Outer properties (`enum nx_ct_flush_tlv_type`).
mod prop {
    pub const ORIG_TUPLE: u16 = 0;
    pub const REPLY_TUPLE: u16 = 1;
    pub const ZONE_ID: u16 = 2;
}

/// Properties inside a tuple (`enum nx_ct_flush_tuple_tlv_type`).
mod tuple_prop {
    pub const SRC: u16 = 0;
    pub const DST: u16 = 1;
    pub const SRC_PORT: u16 = 2;
    pub const DST_PORT: u16 = 3;
    pub const ICMP_ID: u16 = 4;
    pub const ICMP_TYPE: u16 = 5;
    pub const ICMP_CODE: u16 = 6;
}

/// A decoded `NXT_CT_FLUSH`: the zone, if one was given (else every
/// zone, or zone 0 for a whole five-tuple, as OVS), and which
/// connections, in the tracker's own form (as `nat(...)` decodes into
/// its `Nat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtFlush {
    /// The zone.
    pub zone: Option<u16>,
    /// The connections.
    pub matching: FlushMatch,
}

/// Nicira's `NXBRC_MUST_BE_ZERO` (padding not zero).
pub const MUST_BE_ZERO: OfError = OfError::NXBRC_MUST_BE_ZERO;

/// The zone of an `NXT_CT_FLUSH_ZONE` body (`struct nx_zone_id`: six
/// zero bytes, then the zone); `None` if it is not 8 bytes.
pub fn decode_zone(body: &[u8]) -> Option<u16> {
    let z: [u8; 8] = body.try_into().ok()?;
    Some(u16::from_be_bytes([z[6], z[7]]))
}

/// One property: its type and payload, and the bytes after it (`data`
/// from the property on). `ofpprop_pull`: 8-byte padding, the type
/// 0xffff an experimenter's (its id not 0).
fn pull(data: &[u8]) -> Result<(u16, &[u8], &[u8]), OfError> {
    if data.len() < 4 {
        return Err(OfError::BAD_PROP_LEN);
    }
    let ty = u16::from_be_bytes([data[0], data[1]]);
    let len = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let padded = len.div_ceil(8) * 8;
    if len < 4 || padded > data.len() {
        return Err(OfError::BAD_PROP_LEN);
    }
    if ty == 0xffff {
        if len < 12 {
            return Err(OfError::BAD_PROP_LEN);
        }
        if data[4..8] == [0; 4] {
            return Err(OfError::BAD_PROP_EXPERIMENTER);
        }
    }
    Ok((ty, &data[4..len], &data[padded..]))
}

fn be16(p: &[u8]) -> Result<u16, OfError> {
    match p {
        [a, b, ..] => Ok(u16::from_be_bytes([*a, *b])),
        _ => Err(OfError::BAD_PROP_LEN),
    }
}

/// An address property; updates `v6` as `ofpprop_pull_ipv6` does.
fn addr(p: &[u8], v6: &mut Option<bool>) -> Result<[u8; 16], OfError> {
    let a: [u8; 16] = p
        .get(..16)
        .and_then(|a| a.try_into().ok())
        .ok_or(OfError::BAD_PROP_LEN)?;
    let this = (a != [0; 16]).then(|| a[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
    if let (Some(had), Some(now)) = (*v6, this) {
        if had != now {
            return Err(OfError::BAD_PROP_VALUE);
        }
    }
    *v6 = this;
    Ok(a)
}

/// A tuple property's nested properties (after 8 bytes: the property
/// header padded, `ofpprop_parse_nested`).
fn tuple(payload: &[u8], t: &mut FlushTuple, v6: &mut Option<bool>) -> Result<(), OfError> {
    // `payload` starts 4 bytes into the property: 4 more to skip.
    let mut rest = payload.get(4..).ok_or(OfError::BAD_PROP_LEN)?;
    while !rest.is_empty() {
        let (ty, p, next) = pull(rest)?;
        match ty {
            tuple_prop::SRC => t.src = addr(p, v6)?,
            tuple_prop::DST => t.dst = addr(p, v6)?,
            tuple_prop::SRC_PORT | tuple_prop::ICMP_ID => t.sport = be16(p)?,
            tuple_prop::DST_PORT => t.dport = be16(p)?,
            tuple_prop::ICMP_TYPE => {
                t.dport = (t.dport & 0xff00) | u16::from(*p.first().ok_or(OfError::BAD_PROP_LEN)?)
            }
            tuple_prop::ICMP_CODE => {
                t.dport =
                    (t.dport & 0x00ff) | u16::from(*p.first().ok_or(OfError::BAD_PROP_LEN)?) << 8
            }
            _ => {}
        }
        rest = next;
    }
    Ok(())
}

/// Decodes an `NXT_CT_FLUSH` body: `struct nx_ct_flush` (the protocol,
/// seven zero bytes) and properties; unknown ones are skipped, as OVS
/// does.
pub fn decode(body: &[u8]) -> Result<CtFlush, OfError> {
    if body.len() < 8 {
        return Err(OfError::BAD_LEN);
    }
    if body[1..8] != [0; 7] {
        return Err(MUST_BE_ZERO);
    }
    let mut f = CtFlush::default();
    let m = &mut f.matching;
    m.proto = body[0];
    let mut rest = &body[8..];
    while !rest.is_empty() {
        let (ty, p, next) = pull(rest)?;
        match ty {
            prop::ORIG_TUPLE => tuple(p, &mut m.orig, &mut m.v6)?,
            prop::REPLY_TUPLE => tuple(p, &mut m.reply, &mut m.v6)?,
            prop::ZONE_ID => f.zone = Some(be16(p)?),
            _ => {}
        }
        rest = next;
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    /// OVS 3.1's `tests/ofp-print.at` messages, from the body on.
    #[test]
    fn ovs_ofp_print_cases() {
        assert_eq!(decode_zone(&hex("00 00 00 00 00 00 00 0d")), Some(13));
        let none = decode(&hex("06 00 00 00 00 00 00 00")).unwrap();
        assert_eq!(
            none,
            CtFlush {
                zone: None,
                matching: FlushMatch {
                    proto: 6,
                    ..FlushMatch::default()
                },
            }
        );
        let zone = decode(&hex("06 00 00 00 00 00 00 00 00 02 00 08 00 0d 00 00")).unwrap();
        assert_eq!(zone.zone, Some(13));
        let orig = decode(&hex("06 00 00 00 00 00 00 00 \
             00 00 00 48 00 00 00 00 \
             00 00 00 14 00 00 00 00 00 00 00 00 00 00 ff ff 0a 0a 00 01 00 00 00 00 \
             00 01 00 14 00 00 00 00 00 00 00 00 00 00 ff ff 0a 0a 00 02 00 00 00 00 \
             00 02 00 08 00 50 00 00 \
             00 03 00 08 1f 90 00 00 \
             00 02 00 08 00 0d 00 00"))
        .unwrap();
        let mapped = |d: u8| {
            let mut a = [0; 16];
            a[10..].copy_from_slice(&[0xff, 0xff, 10, 10, 0, d]);
            a
        };
        assert_eq!(
            orig,
            CtFlush {
                zone: Some(13),
                matching: FlushMatch {
                    proto: 6,
                    v6: Some(false),
                    orig: FlushTuple {
                        src: mapped(1),
                        dst: mapped(2),
                        sport: 80,
                        dport: 8080,
                    },
                    reply: FlushTuple::default(),
                },
            }
        );
    }

    #[test]
    fn errors_as_ovs() {
        assert_eq!(decode(&hex("06 00 00")), Err(OfError::BAD_LEN));
        assert_eq!(decode(&hex("06 00 00 01 00 00 00 00")), Err(MUST_BE_ZERO));
        // A property longer than the message.
        assert_eq!(
            decode(&hex("06 00 00 00 00 00 00 00 00 02 00 10 00 0d 00 00")),
            Err(OfError::BAD_PROP_LEN)
        );
        // An IPv4 source and an IPv6 destination.
        assert_eq!(
            decode(&hex(
                "06 00 00 00 00 00 00 00 \
                 00 00 00 38 00 00 00 00 \
                 00 00 00 14 00 00 00 00 00 00 00 00 00 00 ff ff 0a 0a 00 01 00 00 00 00 \
                 00 01 00 14 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00"
            )),
            Err(OfError::BAD_PROP_VALUE)
        );
        // An experimenter property with id 0.
        assert_eq!(
            decode(&hex(
                "06 00 00 00 00 00 00 00 ff ff 00 10 00 00 00 00 00 00 00 01 00 00 00 00"
            )),
            Err(OfError::BAD_PROP_EXPERIMENTER)
        );
        // Unknown properties are skipped.
        assert_eq!(
            decode(&hex("11 00 00 00 00 00 00 00 00 09 00 08 01 02 03 04"))
                .unwrap()
                .matching
                .proto,
            17
        );
    }

    #[test]
    fn icmp_type_and_code_share_the_port() {
        let f = decode(&hex("01 00 00 00 00 00 00 00 \
             00 00 00 20 00 00 00 00 \
             00 04 00 06 12 34 00 00 \
             00 05 00 05 08 00 00 00 \
             00 06 00 05 03 00 00 00"))
        .unwrap();
        assert_eq!(f.matching.orig.sport, 0x1234);
        assert_eq!(f.matching.orig.dport, 0x0308);
    }

    proptest! {
        /// Any bytes decode to a flush or an error, never a panic.
        #[test]
        fn decode_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&body);
            let _ = decode_zone(&body);
        }

        /// Property streams built from parts always decode.
        #[test]
        fn well_formed_properties_decode(zone in any::<u16>(), sport in 1u16.., dport in 1u16.., a in any::<[u8; 4]>()) {
            let mut b = vec![6, 0, 0, 0, 0, 0, 0, 0];
            let mut nested = Vec::new();
            let mut src = [0u8; 24];
            src[..4].copy_from_slice(&[0, 0, 0, 20]);
            src[14..16].copy_from_slice(&[0xff, 0xff]);
            src[16..20].copy_from_slice(&a);
            nested.extend_from_slice(&src);
            nested.extend_from_slice(&[0, 2, 0, 6]);
            nested.extend_from_slice(&sport.to_be_bytes());
            nested.extend_from_slice(&[0, 0]);
            nested.extend_from_slice(&[0, 3, 0, 6]);
            nested.extend_from_slice(&dport.to_be_bytes());
            nested.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&((8 + nested.len()) as u16).to_be_bytes());
            b.extend_from_slice(&[0; 4]);
            b.extend_from_slice(&nested);
            b.extend_from_slice(&[0, 2, 0, 6]);
            b.extend_from_slice(&zone.to_be_bytes());
            b.extend_from_slice(&[0, 0]);
            let f = decode(&b).unwrap();
            prop_assert_eq!(f.zone, Some(zone));
            prop_assert_eq!(f.matching.orig.sport, sport);
            prop_assert_eq!(f.matching.orig.dport, dport);
            prop_assert_eq!(&f.matching.orig.src[12..], &a[..]);
            // Mapped (::ffff:a.b.c.d): IPv4, even 0.0.0.0.
            prop_assert_eq!(f.matching.v6, Some(false));
        }
    }
}
