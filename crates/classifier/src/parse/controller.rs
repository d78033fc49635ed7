//! `controller(...)` in the flow language, as `ovs-ofctl` takes it:
//! `reason=no_match|action|invalid_ttl|action_set|group|packet_out`,
//! `max_len=N`, `id=N` (the controllers that said this id get it),
//! `userdata=HEX` (bytes separated by dots, or none), comma-separated.
//! `pause` and `meter_id` (continuations, the controller meter) are
//! refused: Sluice has neither.

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
            "pause" | "meter_id" => {
                return Err(cx.err(tok_at, format!("controller's {key} is not supported: Sluice has no continuations and no controller meter")));
            }
            _ => {
                return Err(cx.err(tok_at, format!("unknown controller setting '{key}': expected reason, max_len, id or userdata")));
            }
        }
    }
    let plain = o.reason == PacketInReason::Action && o.id == 0 && o.userdata.is_empty();
    Ok(Action::Controller {
        max_len,
        opts: (!plain).then(|| Box::new(o)),
    })
}
