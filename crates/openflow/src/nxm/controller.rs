//! `NXAST_CONTROLLER2`: `controller(...)` with userdata, its settings as
//! properties, read and written as Open vSwitch does.

use crate::consts::OfError;
use crate::wire::Rd;

use super::{subtype, NxAction};

/// `NXAST_CONTROLLER2`'s property types (`NXAC2PT_*`).
mod ac2pt {
    pub const MAX_LEN: u16 = 0;
    pub const CONTROLLER_ID: u16 = 1;
    pub const REASON: u16 = 2;
    pub const USERDATA: u16 = 3;
    pub const PAUSE: u16 = 4;
    pub const METER_ID: u16 = 5;
}

/// `NXAST_CONTROLLER2`'s properties (after the 16-byte header): max_len,
/// controller id, reason, userdata, pause, meter_id; an unknown property
/// is refused.
pub(super) fn decode_controller2(b: &mut Rd<'_>) -> Result<NxAction, OfError> {
    b.skip(6)?;
    let (mut max_len, mut id, mut reason, mut userdata) = (u16::MAX, 0, 1, Vec::new());
    let mut meter_id = None;
    let mut pause = false;
    while b.left() > 0 {
        let typ = b.u16()?;
        let len = usize::from(b.u16()?);
        if len < 4 {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let v = b.take(len - 4)?;
        b.skip((8 - len % 8) % 8)?;
        // A number's property holds 4 bytes: the value, then padding (OVS
        // counts the padding in the length).
        let fixed = |n: usize| {
            if v.len() == n || v.len() == 4 {
                Ok(())
            } else {
                Err(OfError::BAD_ACTION_LEN)
            }
        };
        match typ {
            ac2pt::MAX_LEN => {
                fixed(2)?;
                max_len = u16::from_be_bytes([v[0], v[1]]);
            }
            ac2pt::CONTROLLER_ID => {
                fixed(2)?;
                id = u16::from_be_bytes([v[0], v[1]]);
            }
            ac2pt::REASON => {
                fixed(1)?;
                reason = v[0];
            }
            ac2pt::USERDATA => userdata = v.to_vec(),
            ac2pt::METER_ID => {
                if v.len() != 4 {
                    return Err(OfError::BAD_ACTION_LEN);
                }
                let m = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
                // NX_CTLR_NO_METER: none.
                meter_id = (m != 0).then_some(m);
            }
            ac2pt::PAUSE => pause = true,
            _ => return Err(OfError::BAD_ARGUMENT),
        }
    }
    Ok(NxAction::Controller {
        max_len,
        id,
        reason,
        userdata,
        meter_id,
        pause,
    })
}

/// `NXAST_CONTROLLER2` after the vendor id: what is not the default, as
/// OVS writes it (a number's property counts its padding; the reason's
/// does not).
pub(super) fn encode_controller2(
    max_len: u16,
    id: u16,
    reason: u8,
    userdata: &[u8],
    meter_id: Option<u32>,
    pause: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&subtype::CONTROLLER2.to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    // What is not the default, as OVS writes it.
    let mut prop = |typ: u16, v: &[u8]| {
        let start = out.len();
        out.extend_from_slice(&typ.to_be_bytes());
        out.extend_from_slice(&((4 + v.len()) as u16).to_be_bytes());
        out.extend_from_slice(v);
        crate::wire::pad8(out, start);
    };
    let [m0, m1] = max_len.to_be_bytes();
    if max_len != u16::MAX {
        prop(ac2pt::MAX_LEN, &[m0, m1, 0, 0]);
    }
    let [i0, i1] = id.to_be_bytes();
    if id != 0 {
        prop(ac2pt::CONTROLLER_ID, &[i0, i1, 0, 0]);
    }
    if reason != 1 {
        prop(ac2pt::REASON, &[reason]);
    }
    if !userdata.is_empty() {
        prop(ac2pt::USERDATA, userdata);
    }
    if pause {
        prop(ac2pt::PAUSE, &[]);
    }
    if let Some(m) = meter_id {
        prop(ac2pt::METER_ID, &m.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `controller(userdata=01.02.03,max_len=64)` as ovs-ofctl 3.1 sends
    /// it (NXAST_CONTROLLER2: max_len and userdata properties), both ways.
    #[test]
    fn controller2_as_ovs_sends_it() {
        let wire = [
            0xff, 0xff, 0, 32, 0, 0, 0x23, 0x20, 0, 37, 0, 0, 0, 0, 0, 0, // header
            0, 0, 0, 8, 0, 64, 0, 0, // NXAC2PT_MAX_LEN (padding counted)
            0, 3, 0, 7, 1, 2, 3, 0, // NXAC2PT_USERDATA
        ];
        let a = NxAction::decode(&wire[4..]).unwrap().unwrap();
        assert_eq!(
            a,
            NxAction::Controller {
                max_len: 64,
                id: 0,
                reason: 1,
                userdata: vec![1, 2, 3],
                meter_id: None,
                pause: false,
            }
        );
        let mut out = Vec::new();
        crate::action::OfAction::Nx(a).encode(&mut out);
        assert_eq!(out, wire);
        // controller(reason=no_match,id=2,userdata=aa.bb): the reason's
        // property counts one byte, the id's four.
        let wire = [
            0xff, 0xff, 0, 40, 0, 0, 0x23, 0x20, 0, 37, 0, 0, 0, 0, 0, 0, // header
            0, 1, 0, 8, 0, 2, 0, 0, // NXAC2PT_CONTROLLER_ID
            0, 2, 0, 5, 0, 0, 0, 0, // NXAC2PT_REASON
            0, 3, 0, 6, 0xaa, 0xbb, 0, 0, // NXAC2PT_USERDATA
        ];
        let a = NxAction::decode(&wire[4..]).unwrap().unwrap();
        let mut out = Vec::new();
        crate::action::OfAction::Nx(a).encode(&mut out);
        assert_eq!(out, wire);
    }
}
