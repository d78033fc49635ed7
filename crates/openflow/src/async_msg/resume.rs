//! Continuations: what a `controller(pause)` packet-in carries
//! (`NXPINT_CONTINUATION`) and `NXT_RESUME` hands back, with the packet
//! and its pipeline fields as the controller left them (ovn-controller's
//! pinctrl pauses DHCP, DNS, ND and ICMP error packets this way). The
//! continuation is opaque to the controller (a nested property, as OVS
//! writes it: its value after four bytes of padding): Sluice's names a
//! frozen translation state by id, and the run of the switch that froze
//! it.

use crate::consts::OfError;
use crate::oxm::Oxm;
use crate::wire::Rd;

use super::prop;

/// `NXT_RESUME`'s subtype.
pub const NXT_RESUME: u32 = 28;

/// A continuation: a frozen state's id, and the switch run's nonce (a
/// continuation from another run of the switch, whose ids mean other
/// states, is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continuation {
    /// The frozen state.
    pub id: u32,
    /// The switch run's.
    pub nonce: u64,
}

/// The continuation's bytes: a tag, the id, the nonce.
const TAG: &[u8; 4] = b"SLc1";

impl Continuation {
    /// Its 16 bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(TAG);
        b[4..8].copy_from_slice(&self.id.to_be_bytes());
        b[8..].copy_from_slice(&self.nonce.to_be_bytes());
        b
    }

    /// Reads one (`None`: not Sluice's).
    pub fn of_bytes(b: &[u8]) -> Option<Continuation> {
        if b.len() != 16 || &b[..4] != TAG {
            return None;
        }
        Some(Continuation {
            id: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            nonce: u64::from_be_bytes(b[8..16].try_into().ok()?),
        })
    }
}

/// An `NXT_RESUME`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The packet, as the controller sends it back.
    pub packet: Vec<u8>,
    /// Its pipeline fields (registers, metadata, in_port...), as the
    /// controller left them.
    pub metadata: Vec<Oxm>,
    /// The continuation.
    pub continuation: Continuation,
}

/// Reads an `NXT_RESUME`'s body after the vendor id and subtype: the
/// packet-in2 properties; the packet and a continuation of Sluice's are
/// needed, the metadata read as OXM fields, the others passed over.
pub fn decode_resume(props: &[u8]) -> Result<Resume, OfError> {
    let mut r = Rd::new(props, OfError::BAD_LEN);
    let (mut packet, mut metadata, mut cont) = (None, Vec::new(), None);
    while r.left() > 0 {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(OfError::BAD_LEN);
        }
        let v = r.take(len - 4)?;
        r.skip(((len + 7) & !7).saturating_sub(len).min(r.left()))?;
        match typ {
            prop::PACKET => packet = Some(v.to_vec()),
            prop::METADATA => {
                let mut m = Rd::new(v, OfError::BAD_MATCH_LEN);
                while m.left() > 0 {
                    metadata.push(Oxm::decode(&mut m)?);
                }
            }
            // Nested: four bytes of padding, then the value.
            prop::CONTINUATION => {
                let v = v.get(4..).ok_or(OfError::BAD_PACKET)?;
                cont = Some(Continuation::of_bytes(v).ok_or(OfError::BAD_PACKET)?);
            }
            _ => {}
        }
    }
    Ok(Resume {
        packet: packet.ok_or(OfError::BAD_PACKET)?,
        metadata,
        continuation: cont.ok_or(OfError::BAD_PACKET)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(t: u16, v: &[u8], out: &mut Vec<u8>) {
        super::super::put_prop(out, t, v);
    }

    #[test]
    fn a_resume_gives_back_the_packet_its_fields_and_the_continuation() {
        let c = Continuation { id: 7, nonce: 99 };
        assert_eq!(Continuation::of_bytes(&c.to_bytes()), Some(c));
        let mut b = Vec::new();
        prop(prop::PACKET, b"a frame", &mut b);
        let mut md = Vec::new();
        Oxm::exact(crate::oxm::f::NX_REG0 + 3, 5).encode(&mut md);
        prop(prop::METADATA, &md, &mut b);
        prop(prop::USERDATA, &[1, 2], &mut b);
        let mut nested = vec![0; 4];
        nested.extend_from_slice(&c.to_bytes());
        prop(prop::CONTINUATION, &nested, &mut b);
        let r = decode_resume(&b).unwrap();
        assert_eq!(r.packet, b"a frame");
        assert_eq!(r.metadata, vec![Oxm::exact(crate::oxm::f::NX_REG0 + 3, 5)]);
        assert_eq!(r.continuation, c);
        // Another switch's continuation, or none: refused.
        let mut other = Vec::new();
        prop(prop::PACKET, b"x", &mut other);
        prop(prop::CONTINUATION, &[0; 20], &mut other);
        assert_eq!(decode_resume(&other), Err(OfError::BAD_PACKET));
        assert!(decode_resume(&b[..8]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_panicking(v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = decode_resume(&v);
        }
    }
}
