//! The switch's log: `tracing` events written to stderr by
//! `tracing-subscriber`, one line each, filtered by level and by part of
//! the switch (`--log openflow=debug`, `SLUICE_LOG`).
//!
//! Lines keep the form they have always had: `sluice: MESSAGE` for
//! information, `sluice: warning: ...`, `sluice: error: ...`, and for
//! the debug levels `sluice: debug: TARGET: ...`. The targets are the
//! parts of the switch: [`TARGETS`].

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The parts of the switch that log, as `--log` names them.
pub const TARGETS: &[(&str, &str)] = &[
    ("switch", "start, stop, ports, warnings"),
    ("openflow", "controllers and connections, messages at debug"),
    ("ctl", "control socket commands, at debug"),
    ("pmd", "PMD threads: rx queue moves (pmd-auto-lb)"),
    ("port", "ports: vhost-user guests waiting, link changes"),
    ("capture", "live captures"),
    ("tunnel", "tunnel devices and routes through internal ports"),
    ("reconnect", "sluice vswitchd's database connection"),
    ("vswitchd", "sluice vswitchd's start"),
];

/// How `--log` is written.
pub const SYNTAX: &str = "LEVEL or TARGET=LEVEL, comma-separated (levels: error, warn, info, debug, trace, off; targets: switch, openflow, ctl, pmd, port, capture, tunnel, reconnect, vswitchd), e.g. openflow=debug";

/// The filter for `spec` (`None`: `info`): what is not named stays at
/// `info`.
pub fn filter(spec: Option<&str>) -> Result<EnvFilter, String> {
    let spec = spec.unwrap_or("").trim();
    let full = if spec.is_empty() {
        "info".to_string()
    } else {
        format!("info,{spec}")
    };
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let level = part.rsplit_once('=').map_or(part, |(_, l)| l);
        if level
            .parse::<tracing::level_filters::LevelFilter>()
            .is_err()
        {
            return Err(format!("'{part}': {SYNTAX}"));
        }
    }
    EnvFilter::builder()
        .parse(&full)
        .map_err(|e| format!("'{spec}': {e}; {SYNTAX}"))
}

/// Installs the log for this process (once; later calls do nothing).
pub fn init(spec: Option<&str>) -> Result<(), String> {
    let filter = filter(spec)?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(Lines)
        .try_init();
    Ok(())
}

/// `sluice: [level: [target: ]]message key=value ...`
pub(crate) struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let m = event.metadata();
        write!(w, "sluice: ")?;
        match *m.level() {
            Level::ERROR => write!(w, "error: ")?,
            Level::WARN => write!(w, "warning: ")?,
            Level::INFO => {}
            Level::DEBUG => write!(w, "debug: {}: ", m.target())?,
            Level::TRACE => write!(w, "trace: {}: ", m.target())?,
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        for good in [
            None,
            Some(""),
            Some("debug"),
            Some("openflow=debug"),
            Some("warn,ctl=trace"),
            Some("off"),
        ] {
            assert!(filter(good).is_ok(), "{good:?}");
        }
        for bad in ["openflow=loud", "verbose", "openflow=debug,=x"] {
            let e = filter(Some(bad)).unwrap_err();
            assert!(e.contains("LEVEL or TARGET=LEVEL"), "{bad}: {e}");
        }
    }
}
