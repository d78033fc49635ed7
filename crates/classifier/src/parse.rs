//! The `ovs-ofctl` flow language: one rule per line.
//!
//! ```text
//! table=0,priority=100,tcp,nw_dst=10.0.0.0/8,tp_dst=80,actions=mod_nw_dst:10.1.1.1,output:2
//! ```
//!
//! Fields are separated by commas or blanks; `actions=` takes the rest of
//! the line. Errors carry the line and column of the offending token and
//! say what was expected. A file loads all-or-nothing: the first error
//! rejects the whole file. The statistics fields that `dump-flows` prints
//! (`duration`, `n_packets`, ...) are accepted and ignored, so its output
//! can be fed back in, as with `ovs-ofctl`.

use sluice_packet::key::{FRAG_ANY, FRAG_LATER};
use sluice_packet::wire::ethernet::{ethertype, tci};
use sluice_packet::wire::l4::proto;

use crate::action::{Action, OFPP_MAX};
use crate::fields::{field_by_name, mac_val, Field, Prereq, ValueKind, FIELDS};
use crate::flow_match::Match;

/// Default rule priority (OpenFlow's `OFP_DEFAULT_PRIORITY`).
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Number of OpenFlow tables (0..=254; 255 means "all" in OpenFlow).
pub const N_TABLES: usize = 255;

/// A parsed rule line (a flow-mod's body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// Table id.
    pub table: u8,
    /// Priority (higher wins).
    pub priority: u16,
    /// Opaque cookie.
    pub cookie: u64,
    /// Cookie mask, for commands that select rules by cookie (`cookie=V/M`).
    pub cookie_mask: u64,
    /// Idle timeout in seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0 = none).
    pub hard_timeout: u16,
    /// The match.
    pub matcher: Match,
    /// The actions (empty = drop).
    pub actions: Vec<Action>,
    /// Whether the line had `actions=`.
    pub has_actions: bool,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            table: 0,
            priority: DEFAULT_PRIORITY,
            cookie: 0,
            cookie_mask: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            matcher: Match::catch_all(),
            actions: Vec::new(),
            has_actions: false,
        }
    }
}

/// A flow-language error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// File name, when parsing a file.
    pub file: Option<String>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters) of the offending token.
    pub column: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
        }
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// What a line must contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Require {
    /// A rule to add: `actions=` is required.
    Actions,
    /// A rule selector (del-flows, a trace flow): `actions=` is not allowed.
    NoActions,
    /// Either.
    Any,
}

/// A token and its 0-based byte offset in the line.
#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    text: &'a str,
    at: usize,
}

struct LineCtx<'a> {
    line: &'a str,
    line_no: usize,
}

impl LineCtx<'_> {
    fn err(&self, at: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            file: None,
            line: self.line_no,
            column: self.line[..at.min(self.line.len())].chars().count() + 1,
            message: message.into(),
        }
    }
}

/// Parses one rule line (line number 1 in errors).
pub fn parse_flow(line: &str, require: Require) -> Result<FlowSpec, ParseError> {
    parse_line(line, 1, require)
}

/// Parses a flow file: one rule per line, `#` comments and blank lines
/// ignored. The first error rejects the whole file.
pub fn parse_flow_file(text: &str, file: Option<&str>) -> Result<Vec<FlowSpec>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, i + 1, Require::Actions) {
            Ok(spec) => out.push(spec),
            Err(mut e) => {
                e.file = file.map(str::to_string);
                return Err(e);
            }
        }
    }
    Ok(out)
}

fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

fn split_tokens(s: &str, base: usize) -> Vec<Tok<'_>> {
    let mut toks = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c == ',' || c.is_whitespace() {
            if let Some(st) = start.take() {
                toks.push(Tok {
                    text: &s[st..i],
                    at: base + st,
                });
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        toks.push(Tok {
            text: &s[st..],
            at: base + st,
        });
    }
    toks
}

/// Splits an action list at top-level commas (commas inside parentheses
/// belong to the action).
fn split_actions(s: &str, base: usize) -> Vec<Tok<'_>> {
    let mut toks = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                toks.push(Tok {
                    text: &s[start..i],
                    at: base + start,
                });
                start = i + 1;
            }
            _ => {}
        }
    }
    toks.push(Tok {
        text: &s[start..],
        at: base + start,
    });
    toks.into_iter()
        .map(|t| {
            let trimmed = t.text.trim_start();
            let lead = t.text.len() - trimmed.len();
            Tok {
                text: trimmed.trim_end(),
                at: t.at + lead,
            }
        })
        .collect()
}

fn find_actions(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("actions") {
        let at = from + i;
        let before_ok = at == 0 || matches!(line.as_bytes()[at - 1], b',' | b' ' | b'\t');
        let rest = line[at + 7..].trim_start();
        if before_ok && (rest.starts_with('=') || rest.starts_with(':')) {
            return Some(at);
        }
        from = at + 7;
    }
    None
}

const IGNORED_STATS: &[&str] = &[
    "duration",
    "n_packets",
    "n_bytes",
    "idle_age",
    "hard_age",
    "packet_count",
    "byte_count",
];

fn parse_line(line: &str, line_no: usize, require: Require) -> Result<FlowSpec, ParseError> {
    let cx = LineCtx { line, line_no };
    let mut spec = FlowSpec::default();
    let (match_part, actions) = match find_actions(line) {
        Some(at) => {
            let eq = at + 7 + (line[at + 7..].len() - line[at + 7..].trim_start().len());
            (&line[..at], Some((&line[eq + 1..], eq + 1, at)))
        }
        None => (line, None),
    };
    let mut mp = MatchParser {
        cx: &cx,
        m: Match::catch_all(),
        named: Vec::new(),
    };
    for tok in split_tokens(match_part, 0) {
        let (name, value) = match tok.text.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (tok.text, None),
        };
        let vat = tok.at + name.len() + 1;
        let need = |v| need_value(&cx, v, name, tok.at);
        match name {
            "table" => spec.table = parse_table(&cx, need(value)?, vat)?,
            "priority" => spec.priority = parse_int(&cx, need(value)?, vat, 16, "priority")? as u16,
            "cookie" => {
                let v = need(value)?;
                let (c, m) = match v.split_once('/') {
                    Some((c, m)) => (c, Some(m)),
                    None => (v, None),
                };
                spec.cookie = parse_int(&cx, c, vat, 64, "cookie")? as u64;
                spec.cookie_mask = match m {
                    Some("-1") => u64::MAX,
                    Some(m) => parse_int(&cx, m, vat + c.len() + 1, 64, "cookie mask")? as u64,
                    None => u64::MAX,
                };
            }
            "idle_timeout" => {
                spec.idle_timeout = parse_int(&cx, need(value)?, vat, 16, "idle_timeout")? as u16
            }
            "hard_timeout" => {
                spec.hard_timeout = parse_int(&cx, need(value)?, vat, 16, "hard_timeout")? as u16
            }
            n if IGNORED_STATS.contains(&n) => {}
            _ => mp.field(name, value, tok.at, vat)?,
        }
    }
    mp.check_prereqs()?;
    spec.matcher = mp.m;
    match (actions, require) {
        (Some((_, _, at)), Require::NoActions) => {
            return Err(cx.err(at, "actions are not allowed here: give only match fields"));
        }
        (None, Require::Actions) => {
            return Err(cx.err(
                line.len(),
                "missing 'actions=...' (use 'actions=drop' to drop)",
            ));
        }
        (Some((text, base, _)), _) => {
            spec.actions = parse_actions(&cx, text, base, &spec)?;
            spec.has_actions = true;
        }
        (None, _) => {}
    }
    Ok(spec)
}

fn need_value<'a>(
    cx: &LineCtx,
    v: Option<&'a str>,
    name: &str,
    at: usize,
) -> Result<&'a str, ParseError> {
    v.ok_or_else(|| cx.err(at, format!("'{name}' needs a value ('{name}=...')")))
}

fn parse_table(cx: &LineCtx, v: &str, at: usize) -> Result<u8, ParseError> {
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

fn parse_int(cx: &LineCtx, v: &str, at: usize, bits: u32, what: &str) -> Result<u128, ParseError> {
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

fn parse_ipv4(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
    v.parse::<std::net::Ipv4Addr>()
        .map(|a| u32::from(a) as u128)
        .map_err(|_| {
            cx.err(
                at,
                format!("'{v}' is not an IPv4 address (expected e.g. 10.0.0.1) for {what}"),
            )
        })
}

fn parse_ipv6(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
    v.parse::<std::net::Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| {
            cx.err(
                at,
                format!("'{v}' is not an IPv6 address (expected e.g. 2001:db8::1) for {what}"),
            )
        })
}

fn parse_mac(cx: &LineCtx, v: &str, at: usize, what: &str) -> Result<u128, ParseError> {
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
fn parse_value(cx: &LineCtx, field: &Field, v: &str, at: usize) -> Result<u128, ParseError> {
    match field.kind {
        ValueKind::Int(bits) => parse_int(cx, v, at, bits as u32, field.name),
        ValueKind::Mac => parse_mac(cx, v, at, field.name),
        ValueKind::Ipv4 => parse_ipv4(cx, v, at, field.name),
        ValueKind::Ipv6 => parse_ipv6(cx, v, at, field.name),
    }
}

/// Parses `value[/mask]` (prefix lengths for addresses).
fn parse_masked(
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
        if len == 0 {
            0
        } else {
            field.full_mask() & !(field.full_mask() >> len)
        }
    } else {
        parse_value(cx, field, mask, mat)?
    };
    Ok((value, mask))
}

struct MatchParser<'a> {
    cx: &'a LineCtx<'a>,
    m: Match,
    /// Fields the line named, with their offsets, for prerequisite checks.
    named: Vec<(&'static Field, usize)>,
}

const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", ethertype::IPV4, None),
    ("ipv4", ethertype::IPV4, None),
    ("ipv6", ethertype::IPV6, None),
    ("arp", ethertype::ARP, None),
    ("rarp", ethertype::RARP, None),
    ("tcp", ethertype::IPV4, Some(proto::TCP)),
    ("udp", ethertype::IPV4, Some(proto::UDP)),
    ("sctp", ethertype::IPV4, Some(proto::SCTP)),
    ("icmp", ethertype::IPV4, Some(proto::ICMP)),
    ("tcp6", ethertype::IPV6, Some(proto::TCP)),
    ("udp6", ethertype::IPV6, Some(proto::UDP)),
    ("sctp6", ethertype::IPV6, Some(proto::SCTP)),
    ("icmp6", ethertype::IPV6, Some(proto::ICMPV6)),
];

const TCP_FLAG_NAMES: &[(&str, u16)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

fn f(name: &str) -> &'static Field {
    field_by_name(name).expect("built-in field")
}

impl MatchParser<'_> {
    /// Sets a field, refusing to contradict an earlier exact setting.
    fn set(
        &mut self,
        field: &'static Field,
        v: u128,
        m: u128,
        at: usize,
    ) -> Result<(), ParseError> {
        let (old_v, old_m) = self.m.get(field);
        let overlap = old_m & m & field.full_mask();
        if overlap != 0 && (old_v & overlap) != (v & overlap) {
            return Err(self.cx.err(
                at,
                format!("{} is matched twice with different values", field.name),
            ));
        }
        self.m.set(field, v | old_v, m | old_m);
        Ok(())
    }

    fn field(
        &mut self,
        name: &str,
        value: Option<&str>,
        at: usize,
        vat: usize,
    ) -> Result<(), ParseError> {
        let cx = self.cx;
        if let Some(&(_, dl, nw)) = SHORTHANDS.iter().find(|s| s.0 == name) {
            if value.is_some() {
                return Err(cx.err(at, format!("'{name}' is a shorthand and takes no value")));
            }
            self.set(f("dl_type"), dl as u128, 0xffff, at)?;
            if let Some(p) = nw {
                self.set(f("nw_proto"), p as u128, 0xff, at)?;
            }
            return Ok(());
        }
        let Some(v) = value else {
            return Err(cx.err(at, unknown_field_message(name)));
        };
        match name {
            "dl_vlan" => {
                let n = parse_int(cx, v, vat, 16, "dl_vlan")?;
                if n == 0xffff {
                    // OpenFlow 1.0's OFP_VLAN_NONE: no tag.
                    self.set(f("vlan_tci"), 0, 0xffff, at)
                } else if n > 4095 {
                    Err(cx.err(
                        vat,
                        format!("dl_vlan {n} is out of range (0 to 4095, or 0xffff for untagged)"),
                    ))
                } else {
                    self.set(f("vlan_tci"), n | tci::PRESENT as u128, 0x1fff, at)
                }
            }
            "dl_vlan_pcp" | "vlan_pcp" => {
                let p = parse_int(cx, v, vat, 3, name)?;
                self.set(f("vlan_tci"), (p << 13) | tci::PRESENT as u128, 0xf000, at)
            }
            "nw_frag" => {
                let (fv, fm) = match v {
                    "no" => (0, FRAG_ANY | FRAG_LATER),
                    "yes" => (FRAG_ANY, FRAG_ANY),
                    "first" => (FRAG_ANY, FRAG_ANY | FRAG_LATER),
                    "later" => (FRAG_ANY | FRAG_LATER, FRAG_ANY | FRAG_LATER),
                    "not_later" => (0, FRAG_LATER),
                    _ => {
                        return Err(cx.err(
                            vat,
                            format!(
                            "'{v}' is not a fragment type: use no, yes, first, later or not_later"
                        ),
                        ))
                    }
                };
                self.named.push((f("nw_frag"), at));
                self.set(f("nw_frag"), fv as u128, fm as u128, at)
            }
            "tcp_flags" if v.starts_with('+') || v.starts_with('-') => {
                let (mut fv, mut fm) = (0u128, 0u128);
                let mut rest = v;
                let mut off = vat;
                while !rest.is_empty() {
                    let sign = rest.as_bytes()[0];
                    if sign != b'+' && sign != b'-' {
                        return Err(cx.err(off, "expected '+flag' or '-flag' in tcp_flags"));
                    }
                    let end = rest[1..]
                        .find(['+', '-'])
                        .map(|i| i + 1)
                        .unwrap_or(rest.len());
                    let name = &rest[1..end];
                    let Some(&(_, bit)) = TCP_FLAG_NAMES.iter().find(|(n, _)| *n == name) else {
                        return Err(cx.err(off, format!("unknown TCP flag '{name}': use fin, syn, rst, psh, ack, urg, ece, cwr or ns")));
                    };
                    fm |= bit as u128;
                    if sign == b'+' {
                        fv |= bit as u128;
                    }
                    off += end;
                    rest = &rest[end..];
                }
                self.named.push((f("tcp_flags"), at));
                self.set(f("tcp_flags"), fv, fm, at)
            }
            _ => {
                let Some(field) = field_by_name(name) else {
                    return Err(cx.err(at, unknown_field_message(name)));
                };
                let (fv, fm) = parse_masked(cx, field, v, vat)?;
                if field.name == "nw_tos" && fv & 3 != 0 {
                    return Err(cx.err(vat, format!("nw_tos {fv} has ECN bits set: nw_tos matches DSCP bits only (a multiple of 4); use ip_ecn for ECN")));
                }
                if fv & !field.full_mask() != 0 || fm & !field.full_mask() != 0 {
                    return Err(cx.err(vat, format!("value too large for {}", field.name)));
                }
                self.named.push((field, at));
                if field.name == "in_port" && fv > OFPP_MAX as u128 {
                    return Err(cx.err(vat, format!("in_port {fv} is not a valid port number")));
                }
                self.set(field, fv, fm, at)
            }
        }
    }

    /// Checks each named field's prerequisite against the whole match, so
    /// that field order in the line does not matter.
    fn check_prereqs(&self) -> Result<(), ParseError> {
        for &(field, at) in &self.named {
            if !field.prereq.holds(&self.m.value, &self.m.mask) && field.prereq != Prereq::Vlan {
                return Err(self.cx.err(
                    at,
                    format!("{} requires {}", field.name, field.prereq.describe()),
                ));
            }
        }
        Ok(())
    }
}

fn unknown_field_message(name: &str) -> String {
    let mut names: Vec<&str> = FIELDS
        .iter()
        .flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()))
        .collect();
    names.extend([
        "table",
        "priority",
        "cookie",
        "idle_timeout",
        "hard_timeout",
        "dl_vlan",
        "dl_vlan_pcp",
        "actions",
    ]);
    names.extend(SHORTHANDS.iter().map(|s| s.0));
    let best = names.iter().map(|n| (edit_distance(n, name), *n)).min();
    let hint = match best {
        Some((d, n)) if d <= 2 => format!(" (did you mean '{n}'?)"),
        _ => String::new(),
    };
    format!("unknown field '{name}'{hint}: expected a match field such as in_port, dl_dst, nw_dst, tp_dst, a shorthand such as ip or tcp, or table, priority, cookie, idle_timeout, hard_timeout, actions")
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn parse_port(cx: &LineCtx, v: &str, at: usize) -> Result<Action, ParseError> {
    match v.to_ascii_lowercase().as_str() {
        "in_port" => return Ok(Action::InPort),
        "all" => return Ok(Action::All),
        "flood" => return Ok(Action::Flood),
        "controller" => return Ok(Action::Controller { max_len: 65535 }),
        "normal" => {
            return Err(cx.err(
                at,
                "NORMAL (MAC-learning switch) is not supported: Sluice forwards by explicit rules",
            ))
        }
        "local" => {
            return Err(cx.err(
                at,
                "LOCAL is not supported: Sluice has no bridge-internal port",
            ))
        }
        _ => {}
    }
    let p = parse_int(cx, v, at, 32, "output port")? as u32;
    if p == 0 || p > OFPP_MAX {
        return Err(cx.err(
            at,
            format!("{p} is not a valid output port (1 to {OFPP_MAX})"),
        ));
    }
    Ok(Action::Output(p))
}

fn parse_actions(
    cx: &LineCtx,
    text: &str,
    base: usize,
    spec: &FlowSpec,
) -> Result<Vec<Action>, ParseError> {
    let toks = split_actions(text, base);
    if toks.len() == 1 && (toks[0].text.is_empty() || toks[0].text.eq_ignore_ascii_case("drop")) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    // Whether the packet is known to carry a VLAN tag at this point of the
    // action list (for set_field on VLAN fields, as OVS checks).
    let m = &spec.matcher;
    let mut vlan_known = Prereq::Vlan.holds(&m.value, &m.mask);
    for tok in &toks {
        let t = tok.text;
        if t.is_empty() {
            return Err(cx.err(tok.at, "empty action: remove the extra comma"));
        }
        if t.eq_ignore_ascii_case("drop") {
            return Err(cx.err(tok.at, "'drop' must be the only action"));
        }
        if let Some(Action::GotoTable(_)) = out.last() {
            return Err(cx.err(tok.at, "goto_table must be the last action"));
        }
        let (name, arg, arg_at) = split_action(t, tok.at);
        let need = || {
            arg.ok_or_else(|| cx.err(tok.at, format!("'{name}' needs an argument ('{name}:...')")))
        };
        let setf = |fname: &'static str,
                    legacy: &'static str,
                    parse: &dyn Fn() -> Result<u128, ParseError>|
         -> Result<Action, ParseError> {
            let field = f(fname);
            check_action_prereq(cx, field, m, tok.at, legacy)?;
            Ok(Action::SetField {
                field,
                value: parse()?,
                legacy: Some(legacy),
            })
        };
        let a = match name.to_ascii_lowercase().as_str() {
            "output" => parse_port(cx, need()?, arg_at)?,
            "in_port" | "all" | "flood" | "normal" | "local" if arg.is_none() => parse_port(cx, name, tok.at)?,
            "controller" => match arg {
                None => Action::Controller { max_len: 65535 },
                Some(a) => {
                    let a = a.strip_prefix("max_len=").unwrap_or(a);
                    Action::Controller { max_len: parse_int(cx, a, arg_at, 16, "controller max_len")? as u16 }
                }
            },
            "mod_dl_src" => setf("dl_src", "mod_dl_src", &|| parse_mac(cx, need()?, arg_at, "mod_dl_src"))?,
            "mod_dl_dst" => setf("dl_dst", "mod_dl_dst", &|| parse_mac(cx, need()?, arg_at, "mod_dl_dst"))?,
            "mod_nw_src" => {
                check_ipv4_action(cx, m, tok.at, "mod_nw_src")?;
                setf("nw_src", "mod_nw_src", &|| parse_ipv4(cx, need()?, arg_at, "mod_nw_src"))?
            }
            "mod_nw_dst" => {
                check_ipv4_action(cx, m, tok.at, "mod_nw_dst")?;
                setf("nw_dst", "mod_nw_dst", &|| parse_ipv4(cx, need()?, arg_at, "mod_nw_dst"))?
            }
            "mod_nw_tos" => setf("nw_tos", "mod_nw_tos", &|| {
                let v = parse_int(cx, need()?, arg_at, 8, "mod_nw_tos")?;
                if v & 3 != 0 {
                    return Err(cx.err(arg_at, format!("{v} is not a valid TOS: mod_nw_tos sets DSCP bits only (a multiple of 4)")));
                }
                Ok(v)
            })?,
            "mod_nw_ecn" => setf("ip_ecn", "mod_nw_ecn", &|| parse_int(cx, need()?, arg_at, 2, "mod_nw_ecn"))?,
            "mod_nw_ttl" => setf("nw_ttl", "mod_nw_ttl", &|| parse_int(cx, need()?, arg_at, 8, "mod_nw_ttl"))?,
            "mod_tp_src" => setf("tp_src", "mod_tp_src", &|| parse_int(cx, need()?, arg_at, 16, "mod_tp_src"))?,
            "mod_tp_dst" => setf("tp_dst", "mod_tp_dst", &|| parse_int(cx, need()?, arg_at, 16, "mod_tp_dst"))?,
            "dec_ttl" => Action::DecTtl,
            "mod_vlan_vid" | "set_vlan_vid" => {
                let v = parse_int(cx, need()?, arg_at, 16, name)?;
                if v > 4095 {
                    return Err(cx.err(arg_at, format!("VLAN id {v} is out of range (0 to 4095)")));
                }
                vlan_known = true;
                Action::ModVlanVid(v as u16)
            }
            "mod_vlan_pcp" | "set_vlan_pcp" => {
                vlan_known = true;
                Action::ModVlanPcp(parse_int(cx, need()?, arg_at, 3, name)? as u8)
            }
            "push_vlan" => {
                let tpid = parse_int(cx, need()?, arg_at, 16, "push_vlan")? as u16;
                if tpid != ethertype::VLAN_8021Q && tpid != ethertype::VLAN_8021AD {
                    return Err(cx.err(arg_at, format!("push_vlan takes 0x8100 or 0x88a8, not {tpid:#06x}")));
                }
                vlan_known = true;
                Action::PushVlan(tpid)
            }
            "strip_vlan" | "pop_vlan" if arg.is_none() => {
                vlan_known = false;
                Action::PopVlan
            }
            "set_field" => {
                let a = need()?;
                let Some((val, fname)) = a.split_once("->") else {
                    return Err(cx.err(arg_at, "set_field needs 'VALUE->FIELD', e.g. set_field:10.0.0.1->ip_dst"));
                };
                let fat = arg_at + val.len() + 2;
                let Some(field) = field_by_name(fname.trim()) else {
                    return Err(cx.err(fat, unknown_field_message(fname.trim())));
                };
                if !field.writable {
                    return Err(cx.err(fat, format!("{} cannot be set", field.name)));
                }
                let value = parse_value(cx, field, val.trim(), arg_at)?;
                if field.prereq == Prereq::Vlan || field.name == "vlan_vid" {
                    if !vlan_known {
                        return Err(cx.err(tok.at, format!("set_field on {} needs a VLAN tag: match one (e.g. dl_vlan=10) or push_vlan first", field.name)));
                    }
                } else {
                    check_action_prereq(cx, field, m, tok.at, "set_field")?;
                }
                if field.name == "nw_tos" && value & 3 != 0 {
                    return Err(cx.err(arg_at, format!("{value} is not a valid TOS: nw_tos sets DSCP bits only")));
                }
                Action::SetField { field, value, legacy: None }
            }
            "resubmit" => parse_resubmit(cx, t, arg, arg_at)?,
            "goto_table" => {
                let tid = parse_table(cx, need()?, arg_at)?;
                if tid <= spec.table {
                    return Err(cx.err(arg_at, format!("goto_table:{tid} must go to a later table than this rule's table {}", spec.table)));
                }
                Action::GotoTable(tid)
            }
            _ if name.bytes().all(|b| b.is_ascii_digit()) && arg.is_none() => parse_port(cx, name, tok.at)?,
            _ => {
                return Err(cx.err(tok.at, format!(
                    "unknown action '{name}': expected output:N, in_port, all, flood, controller, drop, mod_dl_src/dst, mod_nw_src/dst, mod_nw_tos, mod_tp_src/dst, dec_ttl, mod_vlan_vid, mod_vlan_pcp, push_vlan, strip_vlan, set_field:V->F, resubmit(,T) or goto_table:T"
                )))
            }
        };
        out.push(a);
    }
    Ok(out)
}

fn check_ipv4_action(cx: &LineCtx, m: &Match, at: usize, name: &str) -> Result<(), ParseError> {
    if Prereq::Ipv4.holds(&m.value, &m.mask) || Prereq::Arp.holds(&m.value, &m.mask) {
        Ok(())
    } else {
        Err(cx.err(
            at,
            format!("{name} requires the rule to match IPv4 ('ip') or ARP"),
        ))
    }
}

fn check_action_prereq(
    cx: &LineCtx,
    field: &Field,
    m: &Match,
    at: usize,
    action: &str,
) -> Result<(), ParseError> {
    if field.prereq.holds(&m.value, &m.mask) {
        Ok(())
    } else {
        Err(cx.err(
            at,
            format!(
                "{action} on {} requires the rule to match {}",
                field.name,
                field.prereq.describe()
            ),
        ))
    }
}

/// Splits `name:arg` or `name(arg)`; returns the argument's offset.
fn split_action(t: &str, at: usize) -> (&str, Option<&str>, usize) {
    if let Some(i) = t.find(['(', ':']) {
        let name = &t[..i];
        if t.as_bytes()[i] == b'(' {
            let inner = t[i + 1..].strip_suffix(')').unwrap_or(&t[i + 1..]);
            return (name, Some(inner), at + i + 1);
        }
        return (name, Some(&t[i + 1..]), at + i + 1);
    }
    (t, None, at)
}

fn parse_resubmit(
    cx: &LineCtx,
    t: &str,
    arg: Option<&str>,
    at: usize,
) -> Result<Action, ParseError> {
    let Some(arg) = arg else {
        return Err(cx.err(at, "resubmit needs a port or table: resubmit:PORT, resubmit(,TABLE) or resubmit(PORT,TABLE)"));
    };
    let (p, tbl) = if t.contains('(') {
        match arg.split_once(',') {
            Some((p, tbl)) => (p.trim(), tbl.trim()),
            None => (arg.trim(), ""),
        }
    } else {
        (arg.trim(), "")
    };
    let in_port = if p.is_empty() || p.eq_ignore_ascii_case("in_port") {
        None
    } else {
        Some(parse_int(cx, p, at, 32, "resubmit port")? as u32)
    };
    let table = if tbl.is_empty() {
        None
    } else {
        Some(parse_table(cx, tbl, at + p.len() + 1)?)
    };
    if in_port.is_none() && table.is_none() && !p.eq_ignore_ascii_case("in_port") {
        return Err(cx.err(at, "resubmit needs a port or a table"));
    }
    Ok(Action::Resubmit { in_port, table })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> FlowSpec {
        parse_flow(s, Require::Actions).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> ParseError {
        parse_flow(s, Require::Actions).expect_err(s)
    }

    #[test]
    fn full_line() {
        let s = ok("table=1, priority=100,cookie=0x10,idle_timeout=5,hard_timeout=60,tcp,in_port=3,nw_src=10.0.0.0/8,tp_dst=80 actions=mod_nw_dst:1.2.3.4,output:2");
        assert_eq!(
            (
                s.table,
                s.priority,
                s.cookie,
                s.idle_timeout,
                s.hard_timeout
            ),
            (1, 100, 0x10, 5, 60)
        );
        assert_eq!(
            s.matcher.to_string(),
            "tcp,in_port=3,nw_src=10.0.0.0/8,tp_dst=80"
        );
        assert_eq!(s.actions.len(), 2);
        assert_eq!(s.actions[1], Action::Output(2));
        assert_eq!(
            crate::action::format_actions(&s.actions),
            "mod_nw_dst:1.2.3.4,output:2"
        );
    }

    #[test]
    fn every_match_field_parses() {
        for line in [
            "dl_src=00:11:22:33:44:55,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
            "dl_type=0x88cc,actions=drop",
            "dl_vlan=10,dl_vlan_pcp=3,actions=drop",
            "vlan_tci=0x1000/0x1000,actions=drop",
            "dl_vlan=0xffff,actions=drop",
            "ip,nw_tos=184,nw_ttl=1,ip_ecn=3,actions=drop",
            "ip,ip_dscp=46,actions=drop",
            "ip,nw_frag=later,actions=drop",
            "ip,nw_proto=0,actions=drop",
            "tcp,tcp_flags=+syn-ack,actions=drop",
            "tcp,tcp_flags=0x002/0x012,actions=drop",
            "udp,tp_src=0x1000/0xf000,actions=drop",
            "sctp,sctp_dst=9,actions=drop",
            "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=::1,ipv6_label=0x12345,actions=drop",
            "icmp,icmp_type=8,icmp_code=0,actions=drop",
            "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,actions=drop",
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_sha=00:00:00:00:00:01,arp_tha=00:00:00:00:00:02,actions=drop",
            "arp,nw_src=10.0.0.1,actions=drop",
            "tcp6,tp_dst=443,actions=drop",
            "udp6,actions=drop",
            "rarp,actions=drop",
        ] {
            ok(line);
        }
    }

    #[test]
    fn every_action_parses() {
        let s = ok("ip,dl_vlan=5,actions=output:1,2,in_port,all,flood,controller,controller:64,mod_dl_src:00:00:00:00:00:01,mod_dl_dst:00:00:00:00:00:02,mod_nw_src:1.1.1.1,mod_nw_dst:2.2.2.2,mod_nw_tos:8,dec_ttl,mod_vlan_vid:7,mod_vlan_pcp:2,push_vlan:0x88a8,strip_vlan,pop_vlan,set_field:9->ip_dscp,resubmit(,3),resubmit:4,resubmit(5,6),goto_table:9");
        assert_eq!(s.actions.len(), 23);
        assert_eq!(s.actions[22], Action::GotoTable(9));
        assert_eq!(
            s.actions[19],
            Action::Resubmit {
                in_port: None,
                table: Some(3)
            }
        );
        let s = ok("tcp,actions=mod_tp_src:1,mod_tp_dst:2,set_field:3->tcp_dst");
        assert_eq!(s.actions.len(), 3);
        assert_eq!(ok("actions=drop").actions, vec![]);
        assert_eq!(ok("actions=").actions, vec![]);
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = err("in_port=1,tp_dst=80,actions=drop");
        assert_eq!(e.column, 11);
        assert!(e.message.contains("tp_dst requires"), "{}", e.message);
        let e = err("in_port=1,nw_dts=1.2.3.4,actions=drop");
        assert_eq!(e.column, 11);
        assert!(e.message.contains("did you mean 'nw_dst'"), "{}", e.message);
        let e = err("ip,nw_src=1.2.3,actions=drop");
        assert_eq!(e.column, 11);
        assert!(e.message.contains("IPv4 address"));
        let e = err("actions=output:2,bogus");
        assert_eq!(e.column, 18);
        let e = err("in_port=1");
        assert!(e.message.contains("missing 'actions="));
        assert!(err("actions=output:2,drop").message.contains("only action"));
        assert!(err("actions=mod_nw_src:1.2.3.4")
            .message
            .contains("requires"));
        assert!(err("ip,actions=mod_nw_tos:5")
            .message
            .contains("not a valid TOS"));
        assert!(err("actions=set_field:5->vlan_vid")
            .message
            .contains("VLAN tag"));
        assert!(err("table=2,actions=goto_table:1")
            .message
            .contains("later table"));
        assert!(err("actions=goto_table:1,output:1")
            .message
            .contains("last action"));
        assert!(err("tcp,udp,actions=drop").message.contains("twice"));
        assert!(err("priority=70000,actions=drop")
            .message
            .contains("too large"));
        assert!(err("actions=NORMAL").message.contains("not supported"));
        assert!(err("table=255,actions=drop")
            .message
            .contains("out of range"));
        assert!(err("tcp,in_port=1/1,actions=drop")
            .message
            .contains("cannot be masked"));
        assert!(err("actions=output:0")
            .message
            .contains("valid output port"));
    }

    #[test]
    fn file_is_all_or_nothing_with_positions() {
        let text = "# comment\n\nin_port=1,actions=output:2\n  in_port=2,actions=outptu:1\n";
        let e = parse_flow_file(text, Some("f.flows")).unwrap_err();
        assert_eq!((e.line, e.column), (4, 21));
        assert_eq!(e.to_string().split(':').next(), Some("f.flows"));
        let specs =
            parse_flow_file("in_port=1,actions=output:2 # to 2\nactions=drop\n", None).unwrap();
        assert_eq!(specs.len(), 2);
    }

    #[test]
    fn dump_flows_output_reads_back() {
        let s = ok(" cookie=0x0, duration=1.5s, table=0, n_packets=3, n_bytes=180, priority=5,ip actions=output:2");
        assert_eq!(
            (s.priority, s.actions.clone()),
            (5, vec![Action::Output(2)])
        );
    }

    #[test]
    fn selectors_take_no_actions() {
        let s = parse_flow("tcp,nw_dst=10.0.0.1,tp_dst=80", Require::NoActions).unwrap();
        assert_eq!(s.matcher.value.tp_dst, 80);
        assert!(parse_flow("actions=drop", Require::NoActions).is_err());
    }
}
