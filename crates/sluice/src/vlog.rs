//! The log of `sluice vswitchd` as ovs-vswitchd writes its own: lines in
//! OVS's vlog form in `--log-file`
//! (`2026-12-05T17:15:09.123Z|00042|switch|INFO|message`), reopened on
//! `ovs-appctl vlog/reopen` (after logrotate moved it), and on the console
//! in Sluice's usual form. The levels come from OVS's `-v` specs:
//! `-vconsole:off`, `-vfile:info`, `-vconsole:emer`, `-vdbg`, ...

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// One destination's levels: a default and Sluice's modules (its log
/// targets, `crate::log::TARGETS`) set apart from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestLevels {
    /// Every module not named.
    pub default: LevelFilter,
    /// Modules at a level of their own.
    pub modules: BTreeMap<String, LevelFilter>,
}

impl DestLevels {
    fn at(default: LevelFilter) -> Self {
        DestLevels {
            default,
            modules: BTreeMap::new(),
        }
    }

    /// Module `m`'s level.
    pub fn of(&self, m: &str) -> LevelFilter {
        self.modules.get(m).copied().unwrap_or(self.default)
    }

    /// Sets `module`'s level (None: every module's, as OVS's `ANY`).
    fn set(&mut self, module: Option<&str>, v: LevelFilter) {
        match module {
            None => *self = DestLevels::at(v),
            Some(m) if v == self.default => {
                self.modules.remove(m);
            }
            Some(m) => {
                self.modules.insert(m.to_string(), v);
            }
        }
    }

    /// The filter that lets through what these levels allow.
    fn filter(&self) -> Targets {
        Targets::new()
            .with_default(self.default)
            .with_targets(self.modules.iter().map(|(m, v)| (m.clone(), *v)))
    }
}

/// The levels of the two destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels {
    /// Standard error's.
    pub console: DestLevels,
    /// `--log-file`'s.
    pub file: DestLevels,
}

impl Default for Levels {
    fn default() -> Self {
        Levels {
            console: DestLevels::at(LevelFilter::INFO),
            file: DestLevels::at(LevelFilter::INFO),
        }
    }
}

fn level(word: &str) -> Option<LevelFilter> {
    Some(match word {
        "off" => LevelFilter::OFF,
        "emer" | "err" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "dbg" | "debug" => LevelFilter::DEBUG,
        _ => return None,
    })
}

/// Sluice's modules: its log targets.
fn is_module(w: &str) -> bool {
    crate::log::TARGETS.iter().any(|(t, _)| *t == w)
}

/// Reads OVS's `-v`/`--verbose` specs: words joined by `:`, in any
/// order, each a DESTINATION (`console`, `file`; `syslog` is not kept:
/// Sluice does not write to syslog), a LEVEL (`off`, `emer`, `err`,
/// `warn`, `info`, `dbg`) or a MODULE (one of Sluice's, `crate::log::
/// TARGETS`, at its own level; `ANY` or none: every module). OVS's
/// module names that Sluice has not (`dpif_netdev`, `bridge`, ...) are
/// taken and change nothing. An empty spec (`-v`) is `dbg` everywhere.
pub fn parse_specs(specs: &[String]) -> Result<Levels, String> {
    parse_specs_over(Levels::default(), specs)
}

/// [`parse_specs`] over levels already in force (`vlog/set`).
pub fn parse_specs_over(mut l: Levels, specs: &[String]) -> Result<Levels, String> {
    for spec in specs {
        if spec.is_empty() {
            l = Levels {
                console: DestLevels::at(LevelFilter::DEBUG),
                file: DestLevels::at(LevelFilter::DEBUG),
            };
            continue;
        }
        let (mut console, mut file, mut syslog, mut lvl) = (false, false, false, None);
        // None: every module; Some(None): one OVS has and Sluice not.
        let mut module: Option<Option<&str>> = None;
        for word in spec.split([':', ',']) {
            match word {
                "console" => console = true,
                "file" => file = true,
                "syslog" => syslog = true,
                "ANY" | "any" | "" => {}
                "pattern" => break,
                w => match level(w) {
                    Some(v) => lvl = Some(v),
                    None if is_module(w) => module = Some(Some(w)),
                    // OVS's module names (bridge, ofproto, dpif_netdev, ...)
                    // are many; any word of letters and '_' is taken as one.
                    None if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => {
                        module = Some(None)
                    }
                    None => return Err(format!("-v{spec}: '{w}' is neither a destination (console, file, syslog), a level (off, emer, err, warn, info, dbg) nor a module")),
                },
            }
        }
        let Some(v) = lvl else { continue };
        let m = match module {
            Some(None) => continue,
            Some(Some(m)) => Some(m),
            None => None,
        };
        let all = !console && !file && !syslog;
        if console || all {
            l.console.set(m, v);
        }
        if file || all {
            l.file.set(m, v);
        }
    }
    Ok(l)
}

/// The log file, reopened on request.
#[derive(Clone)]
pub struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<Option<File>>>,
}

impl LogFile {
    fn open(path: &Path) -> std::io::Result<File> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    }

    /// Opens (appends to) `path`.
    pub fn create(path: &Path) -> Result<LogFile, String> {
        let f = Self::open(path).map_err(|e| format!("--log-file {}: {e}", path.display()))?;
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(Some(f))),
        })
    }

    /// Opens the path again (`vlog/reopen`).
    pub fn reopen(&self) -> Result<(), String> {
        let f = Self::open(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
        Ok(())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One write into the file.
pub struct LogFileWriter(Arc<Mutex<Option<File>>>);

impl Write for LogFileWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_mut() {
            Some(f) => f.write_all(buf).map(|()| buf.len()),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = LogFileWriter;
    fn make_writer(&'a self) -> LogFileWriter {
        LogFileWriter(Arc::clone(&self.file))
    }
}

/// Civil date and time (UTC) of a Unix time in milliseconds.
pub fn utc(ms: u64) -> String {
    let (days, rem) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// OVS's vlog line: `TIME|SEQ|MODULE|LEVEL|message`.
struct VlogLines {
    seq: AtomicU64,
    /// Milliseconds in the time (the file's format; the console's has
    /// whole seconds, as OVS's).
    millis: bool,
}

impl<S, N> FormatEvent<S, N> for VlogLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let n = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let m = event.metadata();
        let lvl = match *m.level() {
            Level::ERROR => "ERR",
            Level::WARN => "WARN",
            Level::INFO => "INFO",
            Level::DEBUG | Level::TRACE => "DBG",
        };
        let t = utc(ms);
        let t = if self.millis {
            t
        } else {
            format!("{}Z", &t[..19])
        };
        write!(w, "{t}|{n:05}|{}|{lvl}|", m.target())?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The levels in force, changed at run time by `ovs-appctl vlog/set`.
pub struct LevelHandles {
    console: Reload,
    file: Option<Reload>,
    now: Mutex<Levels>,
}

/// Sets one destination's levels.
type Reload = Box<dyn Fn(&DestLevels) -> Result<(), String> + Send + Sync>;

impl LevelHandles {
    /// `vlog/set SPEC...`: the specs as `-v` takes them, over the levels in
    /// force.
    pub fn set(&self, specs: &[String]) -> Result<(), String> {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        let new = parse_specs_over(now.clone(), specs)?;
        (self.console)(&new.console)?;
        if let Some(f) = &self.file {
            f(&new.file)?;
        }
        *now = new;
        Ok(())
    }

    /// `vlog/list`, in OVS's table: each module (Sluice's log targets)
    /// with its console, syslog and file levels.
    pub fn list(&self) -> String {
        let now = self.now.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let name = |l: LevelFilter| match l {
            LevelFilter::OFF => "OFF",
            LevelFilter::ERROR => "ERR",
            LevelFilter::WARN => "WARN",
            LevelFilter::INFO => "INFO",
            _ => "DBG",
        };
        let mut o = String::from(
            "                 console    syslog    file\n                 -------    ------    ------\n",
        );
        for (t, _) in crate::log::TARGETS {
            o += &format!(
                "{t:<19}{:<11}{:<10}{}\n",
                name(now.console.of(t)),
                "OFF",
                name(
                    self.file
                        .as_ref()
                        .map_or(LevelFilter::OFF, |_| now.file.of(t))
                )
            );
        }
        o
    }
}

/// Installs the log: the console at `levels.console` (OVS's console lines
/// on stderr) and, when given, `file` at `levels.file` (OVS's lines); returns
/// the handles `vlog/set` changes them through.
pub fn init(levels: Levels, file: Option<LogFile>) -> Result<LevelHandles, String> {
    let (console_filter, console_handle) =
        tracing_subscriber::reload::Layer::new(levels.console.filter());
    // OVS's console format (`%D{%Y-%m-%dT%H:%M:%SZ}|%05N|%c%T|%p|%m`):
    // what a daemon says before it detaches is read by scripts (and by
    // OVS's tests, which allow OVS's own first lines only).
    let console = tracing_subscriber::fmt::layer()
        .event_format(VlogLines {
            seq: AtomicU64::new(0),
            millis: false,
        })
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(console_filter);
    let (file, file_handle) = match file {
        Some(f) => {
            let (filter, handle) = tracing_subscriber::reload::Layer::new(levels.file.filter());
            let layer = tracing_subscriber::fmt::layer()
                .event_format(VlogLines {
                    seq: AtomicU64::new(0),
                    millis: true,
                })
                .with_writer(f)
                .with_ansi(false)
                .with_filter(filter);
            let reload: Reload = Box::new(move |l: &DestLevels| {
                handle
                    .reload(l.filter())
                    .map_err(|e| format!("the file's level: {e}"))
            });
            (Some(layer), Some(reload))
        }
        None => (None, None),
    };
    let sub = tracing_subscriber::registry().with(console).with(file);
    tracing::subscriber::set_global_default(sub).map_err(|e| format!("the log: {e}"))?;
    Ok(LevelHandles {
        console: Box::new(move |l: &DestLevels| {
            console_handle
                .reload(l.filter())
                .map_err(|e| format!("the console's level: {e}"))
        }),
        file: file_handle,
        now: Mutex::new(levels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ovs_verbosity_specs() {
        let v = |s: &[&str]| parse_specs(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(v(&[]).unwrap(), Levels::default());
        // What ovs-ctl gives ovs-vswitchd.
        let l = v(&["console:emer", "syslog:err", "file:info"]).unwrap();
        assert_eq!(
            (l.console.default, l.file.default),
            (LevelFilter::ERROR, LevelFilter::INFO)
        );
        assert_eq!(
            v(&["console:off"]).unwrap().console.default,
            LevelFilter::OFF
        );
        assert_eq!(v(&["dbg"]).unwrap().file.default, LevelFilter::DEBUG);
        assert_eq!(v(&[""]).unwrap().console.default, LevelFilter::DEBUG);
        assert_eq!(v(&["syslog:dbg"]).unwrap(), Levels::default());
        assert!(v(&["console:l0ud!"]).unwrap_err().contains("neither"));
        // A module of Sluice's at its own level, in either order, one
        // destination or both; OVS's own module names change nothing.
        let l = v(&["openflow:file:dbg", "console:tunnel:warn"]).unwrap();
        assert_eq!(l.file.of("openflow"), LevelFilter::DEBUG);
        assert_eq!(l.console.of("openflow"), LevelFilter::INFO);
        assert_eq!(l.console.of("tunnel"), LevelFilter::WARN);
        assert_eq!(l.file.of("switch"), LevelFilter::INFO);
        assert_eq!(v(&["dpif_netdev:dbg"]).unwrap(), Levels::default());
        // ANY (or no module) sets every module, as OVS's.
        let l = v(&["openflow:dbg", "ANY:file:warn"]).unwrap();
        assert_eq!(l.file.of("openflow"), LevelFilter::WARN);
        assert_eq!(l.console.of("openflow"), LevelFilter::DEBUG);
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_796_490_909_123), "2026-12-05T17:15:09.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
