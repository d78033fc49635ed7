//! `controller(...)` in the flow language, as `ovs-ofctl` takes it:
//! `reason=no_match|action|invalid_ttl|action_set|group|packet_out`,
//! `max_len=N`, `id=N` (the controllers that said this id get it),
//! `userdata=HEX` (bytes separated by dots, or none), `meter_id=N` (the
//! packet-ins go through meter N), comma-separated. `pause`
//! (continuations) is refused: Sluice has none.

use crate::action::{Action, ControllerOpts, PacketInReason};

use super::values::parse_int;
use super::{LineCtx, ParseError};

/// Parses the inside of `controller(...)` (`arg`, at column `at`).
pub(super) fn parse_controller(cx: &LineCtx, arg: &str, at: usize) -> Result<Action, ParseError> {
    let mut max_len = 65535u16;
    let mut o = ControllerOpts {
        reason: PacketInReason::Action,
        id: 0,
        userdata: Vec::new(),
        meter_id: None,
        pause: false,
    };
    let mut off = at;
    for raw in arg.split(',') {
        let tok_at = off + (raw.len() - raw.trim_start().len());
        off += raw.len() + 1;
        let tok = raw.trim();
        let (key, value) = tok.split_once('=').unwrap_or((tok, ""));
        match key {
            "" => {}
            "max_len" => max_len = parse_int(cx, value, tok_at, 16, "controller's max_len")? as u16,
            "id" => o.id = parse_int(cx, value, tok_at, 16, "controller's id")? as u16,
            "reason" => {
                o.reason = PacketInReason::ALL
                    .iter()
                    .find(|r| r.2 == value)
                    .map(|r| r.0)
                    .ok_or_else(|| {
                        cx.err(tok_at, format!("unknown reason '{value}': expected no_match, action, invalid_ttl, action_set, group or packet_out"))
                    })?;
            }
            "userdata" => {
                o.userdata = super::values::hex_bytes(value).ok_or_else(|| {
                    cx.err(
                        tok_at,
                        format!("userdata={value}: expected hex bytes, e.g. userdata=01.02.ab"),
                    )
                })?;
            }
            "meter_id" => {
                let m = parse_int(cx, value, tok_at, 32, "controller's meter_id")? as u32;
                if m == 0 || m > crate::meter::METER_MAX {
                    return Err(cx.err(
                        tok_at,
                        format!(
                            "meter_id={value}: expected a meter from 1 to {}",
                            crate::meter::METER_MAX
                        ),
                    ));
                }
                o.meter_id = Some(m);
            }
            "pause" => o.pause = true,
            _ => {
                return Err(cx.err(tok_at, format!("unknown controller setting '{key}': expected reason, max_len, id, userdata, pause or meter_id")));
            }
        }
    }
    let plain = o.reason == PacketInReason::Action
        && o.id == 0
        && o.userdata.is_empty()
        && o.meter_id.is_none()
        && !o.pause;
    Ok(Action::Controller {
        max_len,
        opts: (!plain).then(|| Box::new(o)),
    })
}
