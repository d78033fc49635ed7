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

use crate::action::Action;
use crate::flow_match::Match;

mod actions;
mod controller;
mod learn;
mod matches;
mod values;

use actions::parse_actions;
use matches::MatchParser;
use values::{need_value, parse_int, parse_table};

/// Default rule priority (OpenFlow's `OFP_DEFAULT_PRIORITY`).
pub use crate::rule::DEFAULT_PRIORITY;

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
    pub actions: std::sync::Arc<[Action]>,
    /// Whether the line had `actions=`.
    pub has_actions: bool,
    /// Whether the line named a table (commands that select rules use
    /// every table when it did not, as `ovs-ofctl del-flows` does).
    pub table_given: bool,
    /// OpenFlow flow-mod flags ([`crate::rule::flag`]).
    pub flags: u16,
    /// The OpenFlow 1.3 instructions as a controller sent them (a
    /// flow-mod's), which flow statistics give back as they came: they
    /// hold what the action list does not keep (an output's `max_len`).
    /// `None` for rules written in the flow language.
    pub of_instructions: Option<std::sync::Arc<[u8]>>,
    /// For a rule a `learn` with `limit=N` builds: N (the table may hold
    /// at most N rules of the rule's cookie); 0 otherwise.
    pub learn_limit: u32,
    /// The cookie a modify gives the rules it changes: an OpenFlow 1.0 or
    /// Nicira flow-mod's own cookie, as Open vSwitch takes it (all ones:
    /// none). `None` (1.3, the flow language): they keep theirs.
    pub new_cookie: Option<u64>,
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
            actions: Default::default(),
            has_actions: false,
            table_given: false,
            flags: 0,
            of_instructions: None,
            learn_limit: 0,
            new_cookie: None,
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
    parse_line(line, 1, require, &mut Vec::new())
}

/// [`parse_flow`], with the warnings: what the rule kept differs from
/// the line (a field dropped from the match, as Open vSwitch does).
pub fn parse_flow_with_warnings(
    line: &str,
    require: Require,
) -> Result<(FlowSpec, Vec<ParseError>), ParseError> {
    let mut warn = Vec::new();
    let spec = parse_line(line, 1, require, &mut warn)?;
    Ok((spec, warn))
}

/// Parses a flow file: one rule per line, `#` comments and blank lines
/// ignored. The first error rejects the whole file.
pub fn parse_flow_file(text: &str, file: Option<&str>) -> Result<Vec<FlowSpec>, ParseError> {
    parse_flow_file_with_warnings(text, file).map(|(specs, _)| specs)
}

/// [`parse_flow_file`], with the warnings in file order (see
/// [`parse_flow_with_warnings`]).
pub fn parse_flow_file_with_warnings(
    text: &str,
    file: Option<&str>,
) -> Result<(Vec<FlowSpec>, Vec<ParseError>), ParseError> {
    let mut warn = Vec::new();
    let specs = parse_lines(text, 1, &mut warn).map_err(|e| in_file(e, file))?;
    Ok((specs, warn.into_iter().map(|w| in_file(w, file)).collect()))
}

fn in_file(mut e: ParseError, file: Option<&str>) -> ParseError {
    e.file = file.map(str::to_string);
    e
}

/// [`parse_flow_file`] on up to `threads` threads, each parsing a run of
/// whole lines: the same rules in the same order, and the same error (the
/// first in the file). For loading big files before anything else runs; a
/// switch that is forwarding parses on its control thread alone, so that
/// the parse never takes a core from a PMD thread.
pub fn parse_flow_file_parallel(
    text: &str,
    file: Option<&str>,
    threads: usize,
) -> Result<(Vec<FlowSpec>, Vec<ParseError>), ParseError> {
    /// Below this, one thread is as quick.
    const MIN_CHUNK: usize = 1 << 20;
    let n = threads.clamp(1, 16).min(text.len() / MIN_CHUNK).max(1);
    if n == 1 {
        return parse_flow_file_with_warnings(text, file);
    }
    // Cut at the newline after each n-th of the text; each run knows the
    // number of its first line.
    let mut runs = Vec::with_capacity(n);
    let (mut start, mut line) = (0, 1);
    for k in 1..=n {
        let end = if k == n {
            text.len()
        } else {
            let at = (text.len() * k / n).max(start);
            text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
        };
        let run = &text[start..end];
        runs.push((run, line));
        line += run.matches('\n').count();
        start = end;
    }
    // Collected in file order: the first run's error is the file's first.
    type Run = (Vec<FlowSpec>, Vec<ParseError>);
    let parsed: Result<Vec<Run>, ParseError> = std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|&(run, first)| {
                s.spawn(move || {
                    let mut warn = Vec::new();
                    parse_lines(run, first, &mut warn).map(|specs| (specs, warn))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a parse thread does not panic"))
            .collect()
    });
    let runs = parsed.map_err(|e| in_file(e, file))?;
    let mut specs = Vec::with_capacity(runs.iter().map(|r| r.0.len()).sum());
    let mut warn = Vec::new();
    for (s, w) in runs {
        specs.extend(s);
        warn.extend(w.into_iter().map(|w| in_file(w, file)));
    }
    Ok((specs, warn))
}

/// Parses the lines of `text`, the first numbered `first`.
fn parse_lines(
    text: &str,
    first: usize,
    warn: &mut Vec<ParseError>,
) -> Result<Vec<FlowSpec>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line, first + i, Require::Actions, warn)?);
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

/// Where `actions=` (or `action=`, which `ovs-ofctl` takes too) starts,
/// and the keyword's length.
fn find_actions(line: &str) -> Option<(usize, usize)> {
    let lower = line.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("action") {
        let at = from + i;
        let len = if lower[at..].starts_with("actions") {
            7
        } else {
            6
        };
        let before_ok = at == 0 || matches!(line.as_bytes()[at - 1], b',' | b' ' | b'\t');
        let rest = line[at + len..].trim_start();
        if before_ok && (rest.starts_with('=') || rest.starts_with(':')) {
            return Some((at, len));
        }
        from = at + len;
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

fn parse_line(
    line: &str,
    line_no: usize,
    require: Require,
    warn: &mut Vec<ParseError>,
) -> Result<FlowSpec, ParseError> {
    let cx = LineCtx { line, line_no };
    let mut spec = FlowSpec::default();
    let (match_part, actions) = match find_actions(line) {
        Some((at, len)) => {
            let eq = at + len + (line[at + len..].len() - line[at + len..].trim_start().len());
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
            "table" => {
                spec.table = parse_table(&cx, need(value)?, vat)?;
                spec.table_given = true;
            }
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
    mp.check_prereqs(warn)?;
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
            spec.actions = parse_actions(&cx, text, base, &spec)?.into();
            spec.has_actions = true;
        }
        (None, _) => {}
    }
    Ok(spec)
}

#[cfg(test)]
mod tests;
