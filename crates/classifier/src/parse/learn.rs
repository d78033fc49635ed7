//! `learn(...)` in the flow language, as `ovs-ofctl` takes it:
//! `key=value` settings (`table`, `priority`, `idle_timeout`, ...) and
//! specs, comma-separated:
//!
//! - `FIELD[BITS]` — match the learned rule on these bits as the packet
//!   has them; `FIELD[BITS]=SRC[BITS]` — on bits of another field;
//!   `FIELD=VALUE` (or `FIELD[BITS]=INT`) — on a constant;
//! - `load:SRC[BITS]->DST[BITS]`, `load:INT->DST[BITS]` — an action;
//! - `output:FIELD[BITS]` — an action: out of the port the bits name.

use crate::fields::nxm_name;
use crate::flow_match::Match;
use crate::learn::{flag, Learn, LearnDst, LearnSpec, LearnSrc};
use crate::subfield::Subfield;

use super::values::{parse_int, parse_table, parse_value};
use super::{LineCtx, ParseError};

/// Parses the inside of `learn(...)` (`arg`, at column `at`); `cur` is
/// the rule's match as the actions before leave the packet.
pub(super) fn parse_learn(
    cx: &LineCtx,
    arg: &str,
    at: usize,
    cur: &Match,
) -> Result<Learn, ParseError> {
    let mut l = Learn::default();
    let mut off = at;
    for raw in arg.split(',') {
        let tok_at = off + (raw.len() - raw.trim_start().len());
        off += raw.len() + 1;
        let t = raw.trim();
        if t.is_empty() {
            continue;
        }
        let (name, value) = match t.find(['=', ':']) {
            Some(i) => (&t[..i], Some(&t[i + 1..])),
            None => (t, None),
        };
        let vat = tok_at + name.len() + 1;
        let num = |bits: u32, what: &str| -> Result<u128, ParseError> {
            let v =
                value.ok_or_else(|| cx.err(tok_at, format!("learn: '{name}' needs a value")))?;
            parse_int(cx, v, vat, bits, what)
        };
        match name {
            "table" => {
                let v = value.ok_or_else(|| cx.err(tok_at, "learn: 'table' needs a value"))?;
                l.table = parse_table(cx, v, vat)?;
            }
            "priority" => l.priority = num(16, "learn's priority")? as u16,
            "idle_timeout" => l.idle_timeout = num(16, "learn's idle_timeout")? as u16,
            "hard_timeout" => l.hard_timeout = num(16, "learn's hard_timeout")? as u16,
            "fin_idle_timeout" => l.fin_idle_timeout = num(16, "fin_idle_timeout")? as u16,
            "fin_hard_timeout" => l.fin_hard_timeout = num(16, "fin_hard_timeout")? as u16,
            "cookie" => l.cookie = num(64, "learn's cookie")? as u64,
            "send_flow_rem" if value.is_none() => l.flags |= flag::SEND_FLOW_REM,
            "delete_learned" if value.is_none() => l.flags |= flag::DELETE_LEARNED,
            "limit" => l.limit = num(32, "learn's limit")? as u32,
            "result_dst" => {
                let v = value.unwrap_or("");
                let sf = Subfield::parse(v).map_err(|e| cx.err(vat, e))?;
                if sf.n_bits != 1 {
                    return Err(cx.err(vat, "result_dst in 'learn' action must be a single bit"));
                }
                l.flags |= flag::WRITE_RESULT;
                l.result_dst = Some(sf);
            }
            "load" => l.specs.push(load_spec(cx, value.unwrap_or(""), vat)?),
            "output" => {
                let src = subfield(cx, value.unwrap_or(""), vat)?;
                l.specs.push(LearnSpec {
                    src: LearnSrc::Field(src),
                    dst: LearnDst::Output,
                    n_bits: src.n_bits,
                });
            }
            _ => l.specs.push(match_spec(cx, name, value, tok_at, vat)?),
        }
    }
    l.check(cur).map_err(|e| cx.err(at, e))?;
    Ok(l)
}

/// A subfield a `learn` may name: one with an NXM or OXM header (OVS
/// refuses the rest, e.g. OpenFlow 1.0's `dl_vlan`).
fn subfield(cx: &LineCtx, s: &str, at: usize) -> Result<Subfield, ParseError> {
    let sf = Subfield::parse(s).map_err(|e| cx.err(at, format!("learn: {e}")))?;
    if nxm_name(sf.field) == sf.field.name {
        return Err(cx.err(
            at,
            format!("learn: field '{}' has no NXM or OXM form: use another name for it (e.g. vlan_tci for dl_vlan)", sf.field.name),
        ));
    }
    Ok(sf)
}

/// `FIELD[BITS]`, `FIELD[BITS]=SRC[BITS]`, `FIELD=VALUE`.
fn match_spec(
    cx: &LineCtx,
    name: &str,
    value: Option<&str>,
    at: usize,
    vat: usize,
) -> Result<LearnSpec, ParseError> {
    if Subfield::parse(name).is_err() {
        return Err(cx.err(
            at,
            format!("learn: unknown keyword or field '{name}': expected table=, priority=, idle_timeout=, hard_timeout=, cookie=, send_flow_rem, delete_learned, load:..., output:... or a field to match"),
        ));
    }
    let dst = subfield(cx, name, at)?;
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(LearnSpec {
            src: LearnSrc::Field(dst),
            dst: LearnDst::Match(dst),
            n_bits: dst.n_bits,
        });
    };
    if let Ok(src) = Subfield::parse(v) {
        if src.n_bits != dst.n_bits {
            return Err(cx.err(
                vat,
                format!(
                    "learn: bit widths of {dst} ({}) and {src} ({}) differ",
                    dst.n_bits, src.n_bits
                ),
            ));
        }
        return Ok(LearnSpec {
            src: LearnSrc::Field(subfield(cx, v, vat)?),
            dst: LearnDst::Match(dst),
            n_bits: dst.n_bits,
        });
    }
    let imm = if dst.is_whole() {
        if v.contains('/') {
            return Err(cx.err(
                vat,
                format!("learn: {name}={v}: wildcards not allowed here"),
            ));
        }
        parse_value(cx, dst.field, v, vat)?
    } else {
        parse_int(cx, v, vat, u32::from(dst.n_bits), &format!("learn's {dst}"))?
    };
    Ok(LearnSpec {
        src: LearnSrc::Imm(imm),
        dst: LearnDst::Match(dst),
        n_bits: dst.n_bits,
    })
}

/// `load:SRC[BITS]->DST[BITS]` or `load:INT->DST[BITS]`.
fn load_spec(cx: &LineCtx, v: &str, at: usize) -> Result<LearnSpec, ParseError> {
    let Some((src, dst)) = v.split_once("->") else {
        return Err(cx.err(at, format!("learn: missing '->' in load:{v}")));
    };
    if src.trim().is_empty() {
        return Err(cx.err(at, format!("learn: missing source before '->' in load:{v}")));
    }
    let dat = at + src.len() + 2;
    let d = subfield(cx, dst, dat)?;
    let starts_numeric = src
        .trim()
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit());
    if starts_numeric {
        let imm = parse_int(
            cx,
            src.trim(),
            at,
            u32::from(d.n_bits),
            &format!("learn's load into {d}"),
        )?;
        return Ok(LearnSpec {
            src: LearnSrc::Imm(imm),
            dst: LearnDst::Load(d),
            n_bits: d.n_bits,
        });
    }
    let s = subfield(cx, src, at)?;
    if s.n_bits != d.n_bits {
        return Err(cx.err(
            at,
            format!(
                "learn: source field {s} is {} bits wide but destination {d} is {} bits wide",
                s.n_bits, d.n_bits
            ),
        ));
    }
    Ok(LearnSpec {
        src: LearnSrc::Field(s),
        dst: LearnDst::Load(d),
        n_bits: d.n_bits,
    })
}
