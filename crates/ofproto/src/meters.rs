//! The OpenFlow channel's meter messages: METER_MOD, and the METER,
//! METER_CONFIG and METER_FEATURES multiparts, on the control's rule set
//! (meters are versioned with the rules, as groups: a change is in force
//! on every PMD before anything after it is answered).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_classifier::meter::{MAX_BANDS, METER_ALL, METER_MAX};
use sluice_classifier::Rule;
use sluice_openflow::consts::mp;
use sluice_openflow::convert::{meter_bands, meter_error, to_meter};
use sluice_openflow::meter::{
    cmd, config_entry, decode_meter_mod, features_body, stats_request, MeterStats,
};
use sluice_openflow::OfError;

use crate::backend::{Backend, BackendExt};

/// Applies a METER_MOD body. Returns the rules a delete took with it (those
/// that used a deleted meter), for FLOW_REMOVED.
pub(crate) fn meter_mod(
    control: &dyn Backend,
    body: &[u8],
) -> Result<Result<Vec<Arc<Rule>>, OfError>, String> {
    let mm = match decode_meter_mod(body) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    let now = control.uptime_us();
    control.change_rules(|rules| match mm.command {
        cmd::ADD | cmd::MODIFY => {
            let m = to_meter(&mm, now)?;
            let done = if mm.command == cmd::ADD {
                rules.add_meter(m)
            } else {
                rules.modify_meter(m)
            };
            done.map(|()| Vec::new()).map_err(meter_error)
        }
        cmd::DELETE => {
            if (mm.meter_id == 0 || mm.meter_id > METER_MAX) && mm.meter_id != METER_ALL {
                return Err(OfError::METER_INVALID);
            }
            Ok(rules.delete_meter(mm.meter_id))
        }
        _ => Err(OfError::METER_BAD_COMMAND),
    })
}

/// A reply's entries, or the error to answer with.
type Entries = Result<Vec<Vec<u8>>, OfError>;

/// The entries of a METER or METER_CONFIG reply, or METER_FEATURES's one
/// body (`None`: not a meter multipart).
pub(crate) fn meter_multipart(
    control: &dyn Backend,
    typ: u16,
    body: &[u8],
) -> Result<Option<Entries>, String> {
    match typ {
        mp::METER_FEATURES if body.is_empty() => {
            Ok(Some(Ok(vec![features_body(METER_MAX, MAX_BANDS as u8)])))
        }
        mp::METER_CONFIG | mp::METER => {
            let want = match stats_request(body) {
                Ok(w) => w,
                Err(e) => return Ok(Some(Err(e))),
            };
            control.with_rules(|rules, now| {
                let mut out = Vec::new();
                for m in rules.meters().filter(|m| want == METER_ALL || m.id == want) {
                    let mut e = Vec::new();
                    if typ == mp::METER_CONFIG {
                        config_entry(m.flags, m.id, &meter_bands(m), &mut e);
                    } else {
                        let age = now.saturating_sub(m.created_us);
                        MeterStats {
                            meter_id: m.id,
                            flow_count: rules.meter_users(m.id).count() as u32,
                            packet_in_count: m.packets.load(Ordering::Relaxed),
                            byte_in_count: m.bytes.load(Ordering::Relaxed),
                            duration_sec: (age / 1_000_000) as u32,
                            duration_nsec: (age % 1_000_000 * 1000) as u32,
                            bands: m
                                .bands
                                .iter()
                                .map(|b| {
                                    (
                                        b.packets.load(Ordering::Relaxed),
                                        b.bytes.load(Ordering::Relaxed),
                                    )
                                })
                                .collect(),
                        }
                        .encode(&mut e);
                    }
                    out.push(e);
                }
                Some(Ok(out))
            })
        }
        mp::METER_FEATURES => Ok(Some(Err(OfError::BAD_LEN))),
        _ => Ok(None),
    }
}
