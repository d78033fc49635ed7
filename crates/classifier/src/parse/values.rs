//! Field values: integers, addresses with prefixes or masks, MACs.

use crate::fields::{mac_val, Field, ValueKind};

use super::{LineCtx, ParseError, N_TABLES};

pub(super) fn need_value<'a>(
    cx: &LineCtx,
    v: Option<&'a str>,
    name: &str,
    at: usize,
) -> Result<&'a str, ParseError> {
    v.ok_or_else(|| cx.err(at, format!("'{name}' needs a value ('{name}=...')")))
}

pub(super) fn parse_table(cx: &LineCtx, v: &str, at: usize) -> Result<u8, ParseError> {
    let t = parse_int(cx, v, at, 8, "table")?;
    if t as usize >= N_TABLES {
        return Err(cx.err(
            at,
            format!(
                "table {t} is out of range: tables are 0 to {}",
                N_TABLES - 1
            ),
        ));
    }
    Ok(t as u8)
}

pub(super) fn parse_int(
    cx: &LineCtx,
    v: &str,
    at: usize,
    bits: u32,
    what: &str,
) -> Result<u128, ParseError> {
    let parsed = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u128::from_str_radix(h, 16)
    } else {
        v.parse::<u128>()
    };
    let n = parsed.map_err(|_| {
        cx.err(
            at,
            format!("'{v}' is not a number: {what} takes a decimal or 0x-hex integer"),
        )
    })?;
    let max = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if n > max {
        return Err(cx.err(at, format!("{n} is too large for {what} (at most {max})")));
    }
    Ok(n)
}

pub(super) fn parse_ipv4(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
    v.parse::<std::net::Ipv4Addr>()
        .map(|a| u32::from(a) as u128)
        .map_err(|_| {
            cx.err(
                at,
                format!("'{v}' is not an IPv4 address (expected e.g. 10.0.0.1) for {what}"),
            )
        })
}

pub(super) fn parse_ipv6(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
    v.parse::<std::net::Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| {
            cx.err(
                at,
                format!("'{v}' is not an IPv6 address (expected e.g. 2001:db8::1) for {what}"),
            )
        })
}

pub(super) fn parse_mac(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
    let bad = || {
        cx.err(
            at,
            format!("'{v}' is not a MAC address (expected e.g. 00:11:22:33:44:55) for {what}"),
        )
    };
    let parts: Vec<&str> = v.split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        mac[i] = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac_val(&mac))
}

/// Parses a field value (no mask).
pub(super) fn parse_value(
    cx: &LineCtx,
    field: &Field,
    v: &str,
    at: usize,
) -> Result<u128, ParseError> {
    match field.kind {
        // OVS's tunnel flags by name (`set_field:oam->tun_flags`).
        ValueKind::Int(_) if field.name == "tun_flags" && matches!(v, "oam" | "+oam") => Ok(1),
        ValueKind::Int(_) if field.name == "tun_flags" && v == "-oam" => Ok(0),
        // Reserved ports by name, as OVS reads them (`set_field:ANY->in_port`,
        // which OVN writes before a resubmit that may send a packet back
        // where it came from; NONE is OpenFlow 1.0's ANY).
        ValueKind::Int(_)
            if field.name == "in_port" && !v.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            let name = if v.eq_ignore_ascii_case("none") {
                "ANY"
            } else {
                v
            };
            match crate::fields::reserved_port(name) {
                Some(p) => Ok(u128::from(p)),
                None => Err(cx.err(at, format!("in_port={v}: not a port (a number, or IN_PORT, TABLE, NORMAL, FLOOD, ALL, CONTROLLER, LOCAL, ANY)"))),
            }
        }
        ValueKind::Int(_) if field.name == "actset_output" => {
            if let Some(&(p, _)) = crate::fields::PORT_NAMES
                .iter()
                .find(|(_, n)| n.eq_ignore_ascii_case(v))
            {
                return Ok(u128::from(p));
            }
            let p = parse_int(cx, v, at, 32, field.name)? as u32;
            if (0xff00..0xffff_fff7).contains(&p) {
                return Err(cx.err(at, format!("actset_output={v}: not a port (a number below 0xff00, or UNSET, IN_PORT, TABLE, NORMAL, FLOOD, ALL, CONTROLLER, LOCAL, ANY)")));
            }
            Ok(u128::from(p))
        }
        ValueKind::Int(bits) => parse_int(cx, v, at, bits as u32, field.name),
        ValueKind::Mac => parse_mac(cx, v, at, field.name),
        ValueKind::Ipv4 => parse_ipv4(cx, v, at, field.name),
        ValueKind::Ipv6 => parse_ipv6(cx, v, at, field.name),
    }
}

/// Parses `value[/mask]` (prefix lengths for addresses).
pub(super) fn parse_masked(
    cx: &LineCtx,
    field: &Field,
    v: &str,
    at: usize,
) -> Result<(u128, u128), ParseError> {
    let Some((val, mask)) = v.split_once('/') else {
        return Ok((parse_value(cx, field, v, at)?, field.full_mask()));
    };
    if !field.maskable {
        return Err(cx.err(
            at,
            format!("{} cannot be masked: give an exact value", field.name),
        ));
    }
    let value = parse_value(cx, field, val, at)?;
    let mat = at + val.len() + 1;
    let is_addr = matches!(field.kind, ValueKind::Ipv4 | ValueKind::Ipv6);
    let mask = if is_addr && !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
        let len: u32 = mask.parse().map_err(|_| cx.err(mat, "bad prefix length"))?;
        if len > field.bits() {
            return Err(cx.err(
                mat,
                format!("prefix length {len} is longer than {} bits", field.bits()),
            ));
        }
        // checked: a /128 shifts a u128 by 128 (which wrapped to a shift
        // by 0 and so to an empty mask in release builds).
        field.full_mask() & !field.full_mask().checked_shr(len).unwrap_or(0)
    } else {
        parse_value(cx, field, mask, mat)?
    };
    Ok((value, mask))
}

/// Bytes written as hex digits, optionally separated by dots
/// (`01.02.ab`, as `note:` and `userdata=` take them); `None` for an odd
/// count or a non-hex character.
pub(super) fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    let hex: String = s.chars().filter(|c| *c != '.').collect();
    if !hex.len().is_multiple_of(2) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits"))
            .collect(),
    )
}
