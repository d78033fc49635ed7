//! Meters on the wire: METER_MOD (section 7.3.4.4) and the METER,
//! METER_CONFIG and METER_FEATURES multipart bodies (7.3.5.12–7.3.5.14).

use crate::consts::OfError;
use crate::wire::Rd;

/// METER_MOD commands.
pub mod cmd {
    #![allow(missing_docs)]
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// Band types.
pub mod band {
    #![allow(missing_docs)]
    pub const DROP: u16 = 1;
    pub const DSCP_REMARK: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// One band as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfBand {
    /// [`band`] type.
    pub typ: u16,
    /// Rate.
    pub rate: u32,
    /// Burst size.
    pub burst: u32,
    /// DSCP remark: the precedence step (0 for other types).
    pub prec_level: u8,
}

/// A METER_MOD's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterMod {
    /// ADD, MODIFY or DELETE ([`cmd`]).
    pub command: u16,
    /// `OFPMF_*`.
    pub flags: u16,
    /// The meter.
    pub meter_id: u32,
    /// Bands.
    pub bands: Vec<OfBand>,
}

/// Reads bands until `b` ends (each 16 bytes; an experimenter band's
/// length may be longer, a multiple of 8).
fn bands(b: &[u8]) -> Result<Vec<OfBand>, OfError> {
    let mut r = Rd::new(b, OfError::METER_BAD_BAND);
    let mut out = Vec::new();
    while r.left() > 0 {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 16 || len % 8 != 0 {
            return Err(OfError::METER_BAD_BAND);
        }
        let mut body = Rd::new(r.take(len - 4)?, OfError::METER_BAD_BAND);
        let rate = body.u32()?;
        let burst = body.u32()?;
        let prec_level = if typ == band::DSCP_REMARK {
            body.u8()?
        } else {
            0
        };
        out.push(OfBand {
            typ,
            rate,
            burst,
            prec_level,
        });
    }
    Ok(out)
}

/// Appends bands.
pub fn encode_bands(b: &[OfBand], out: &mut Vec<u8>) {
    for x in b {
        out.extend_from_slice(&x.typ.to_be_bytes());
        out.extend_from_slice(&16u16.to_be_bytes());
        out.extend_from_slice(&x.rate.to_be_bytes());
        out.extend_from_slice(&x.burst.to_be_bytes());
        out.extend_from_slice(&[x.prec_level, 0, 0, 0]);
    }
}

/// Reads a METER_MOD body (after the 8-byte header).
pub fn decode_meter_mod(body: &[u8]) -> Result<MeterMod, OfError> {
    let mut r = Rd::new(body, OfError::BAD_LEN);
    let command = r.u16()?;
    let flags = r.u16()?;
    let meter_id = r.u32()?;
    Ok(MeterMod {
        command,
        flags,
        meter_id,
        bands: bands(r.rest())?,
    })
}

/// A METER_MOD body.
pub fn encode_meter_mod(m: &MeterMod) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&m.command.to_be_bytes());
    out.extend_from_slice(&m.flags.to_be_bytes());
    out.extend_from_slice(&m.meter_id.to_be_bytes());
    encode_bands(&m.bands, &mut out);
    out
}

/// The meter id a METER or METER_CONFIG request asks for (`OFPM_ALL`:
/// all): the same body as a GROUP request's (an id and 4 bytes of pad).
pub use crate::group::stats_request;

/// A meter's counters for a METER reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterStats {
    /// The meter.
    pub meter_id: u32,
    /// Rules that use it.
    pub flow_count: u32,
    /// Packets that reached it.
    pub packet_in_count: u64,
    /// Their bytes.
    pub byte_in_count: u64,
    /// Age, seconds.
    pub duration_sec: u32,
    /// And nanoseconds.
    pub duration_nsec: u32,
    /// (packets, bytes) each band applied to.
    pub bands: Vec<(u64, u64)>,
}

impl MeterStats {
    /// Appends the entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.meter_id.to_be_bytes());
        out.extend_from_slice(&((40 + 16 * self.bands.len()) as u16).to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&self.flow_count.to_be_bytes());
        out.extend_from_slice(&self.packet_in_count.to_be_bytes());
        out.extend_from_slice(&self.byte_in_count.to_be_bytes());
        out.extend_from_slice(&self.duration_sec.to_be_bytes());
        out.extend_from_slice(&self.duration_nsec.to_be_bytes());
        for (p, b) in &self.bands {
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
    }
}

/// One METER_CONFIG reply entry.
pub fn config_entry(flags: u16, meter_id: u32, b: &[OfBand], out: &mut Vec<u8>) {
    out.extend_from_slice(&((8 + 16 * b.len()) as u16).to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&meter_id.to_be_bytes());
    encode_bands(b, out);
}

/// The METER_FEATURES reply body: `max_meter` meters, drop and DSCP
/// remark bands, every flag, `max_bands` bands a meter, no colours.
pub fn features_body(max_meter: u32, max_bands: u8) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&max_meter.to_be_bytes());
    out.extend_from_slice(&(1u32 << band::DROP | 1 << band::DSCP_REMARK).to_be_bytes());
    out.extend_from_slice(&0xfu32.to_be_bytes());
    out.extend_from_slice(&[max_bands, 0, 0, 0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_mods_round_trip_and_bad_bands_are_refused() {
        let m = MeterMod {
            command: cmd::ADD,
            flags: 2 | 4,
            meter_id: 9,
            bands: vec![
                OfBand {
                    typ: band::DROP,
                    rate: 1000,
                    burst: 10,
                    prec_level: 0,
                },
                OfBand {
                    typ: band::DSCP_REMARK,
                    rate: 500,
                    burst: 5,
                    prec_level: 1,
                },
            ],
        };
        let b = encode_meter_mod(&m);
        assert_eq!(b.len(), 8 + 32);
        assert_eq!(decode_meter_mod(&b).unwrap(), m);
        let mut bad = b.clone();
        bad[10..12].copy_from_slice(&12u16.to_be_bytes());
        assert_eq!(decode_meter_mod(&bad), Err(OfError::METER_BAD_BAND));
        bad[10..12].copy_from_slice(&200u16.to_be_bytes());
        assert!(decode_meter_mod(&bad).is_err());
        assert!(decode_meter_mod(&b[..5]).is_err());
        assert!(decode_meter_mod(&b[..20]).is_err());
    }

    #[test]
    fn stats_and_config_entries_have_their_lengths() {
        let mut out = Vec::new();
        MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            bands: vec![(7, 8)],
        }
        .encode(&mut out);
        assert_eq!(out.len(), 56);
        assert_eq!(u16::from_be_bytes([out[4], out[5]]), 56);
        let mut c = Vec::new();
        config_entry(
            1,
            3,
            &[OfBand {
                typ: 1,
                rate: 2,
                burst: 0,
                prec_level: 0,
            }],
            &mut c,
        );
        assert_eq!((c.len(), u16::from_be_bytes([c[0], c[1]])), (24, 24));
        assert_eq!(features_body(10, 8).len(), 16);
    }
}
