//! The values of single settings, from a flag or a configuration key:
//! parsed and range-checked, each with an error that says what is expected.

use sluice_datapath::TxFlush;
use sluice_port::PortSpec;

use crate::auto_lb::AutoLb;

/// The `pmd-auto-lb` settings from their separate keys (or flags):
/// `None` when it is off; an error for a setting given while it is off.
pub fn auto_lb_settings(
    on: bool,
    interval_s: Option<f64>,
    load_threshold_pct: Option<u32>,
    improvement_pct: Option<u32>,
) -> Result<Option<AutoLb>, String> {
    if !on {
        if interval_s.is_some() || load_threshold_pct.is_some() || improvement_pct.is_some() {
            return Err("pmd-auto-lb settings given, but pmd-auto-lb is off (set pmd_auto_lb = true, or --pmd-auto-lb)".into());
        }
        return Ok(None);
    }
    let d = AutoLb::default();
    AutoLb::new(
        interval_s.unwrap_or(d.interval.as_secs_f64()),
        load_threshold_pct.unwrap_or(d.load_threshold_pct),
        improvement_pct.unwrap_or(d.improvement_pct),
    )
    .map(Some)
}

/// Parses `--tx-flush-interval`: `auto` or `US` for every port, or
/// `N=auto` / `N=US` for port N.
pub fn parse_flush_arg(s: &str) -> Result<(Option<u32>, TxFlush), String> {
    let (port, v) = match s.split_once('=') {
        Some((p, v)) => {
            let p = p
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("'{s}': port '{p}' is not a port number"))?;
            (Some(p), v)
        }
        None => (None, s),
    };
    Ok((port, TxFlush::parse(v).map_err(|e| format!("'{s}': {e}"))?))
}

/// The CPUs this machine has (numbered 0 to N-1): from
/// /sys/devices/system/cpu/possible, else the CPUs this process may use.
pub fn cpu_count() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|t| {
            t.trim()
                .split(',')
                .filter_map(|r| r.rsplit('-').next()?.trim().parse::<usize>().ok())
                .max()
        })
        .map(|last| last + 1)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Parses a CPU list as given to `--pmd-cores`: `0,1`, `2-5`, `0,2-3`;
/// every CPU must exist on this machine (see [`check_cpus`]).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    parse_cpu_list_within(s, cpu_count())
}

/// [`parse_cpu_list`] on a machine of `n` CPUs.
pub fn parse_cpu_list_within(s: &str, n: usize) -> Result<Vec<usize>, String> {
    let num = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("'{s}': '{v}' is not a CPU number (expected e.g. 0,1 or 2-5)"))
    };
    let exists = |c: usize| existing_cpu(c, n).map_err(|e| format!("'{s}': {e}"));
    let mut cpus = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("'{s}': range {a}-{b} runs backwards"));
                }
                // Checked before the range is expanded: 0-1000000000000
                // is an error, not eight terabytes of CPU numbers.
                exists(b)?;
                cpus.extend(a..=b);
            }
            None => cpus.push(exists(num(part)?)?),
        }
    }
    Ok(cpus)
}

/// Checks that every CPU of a list (a configuration file's `pmd_cores`)
/// exists on this machine.
pub fn check_cpus(cpus: &[usize]) -> Result<(), String> {
    let n = cpu_count();
    cpus.iter()
        .try_for_each(|&c| existing_cpu(c, n).map(|_| ()))
}

/// CPU `c` on a machine of `n` CPUs, or why it cannot be used.
fn existing_cpu(c: usize, n: usize) -> Result<usize, String> {
    if c < n {
        Ok(c)
    } else {
        Err(format!(
            "CPU {c} does not exist (this machine has CPUs 0-{})",
            n - 1
        ))
    }
}

/// The most rx queues a port may have.
pub const MAX_RXQ: usize = 128;

/// Checks an `n_rxq` (`--n-rxq`): 1 to [`MAX_RXQ`].
pub fn check_n_rxq(n: usize) -> Result<usize, String> {
    if !(1..=MAX_RXQ).contains(&n) {
        return Err(format!("n_rxq {n}: give 1 to {MAX_RXQ} queues"));
    }
    Ok(n)
}

/// The longest time any option takes, in seconds (about 31 years): more
/// cannot be added to a clock.
pub const MAX_SECONDS: f64 = 1e9;

/// Checks a number of seconds: finite, not negative, at most
/// [`MAX_SECONDS`], and above 0 unless `zero_ok`.
pub fn check_seconds(v: f64, zero_ok: bool) -> Result<f64, String> {
    let lowest = if zero_ok { "0 or more" } else { "more than 0" };
    if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
        return Err(format!("{v}: give a number of seconds, {lowest}"));
    }
    if v > MAX_SECONDS {
        return Err(format!("{v}: at most {MAX_SECONDS:e} seconds"));
    }
    Ok(v)
}

/// Parses a number of seconds above 0 (`--duration 2.5`).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    seconds_of(s, false)
}

/// Parses a number of seconds, 0 allowed.
pub fn parse_seconds_or_zero(s: &str) -> Result<f64, String> {
    seconds_of(s, true)
}

fn seconds_of(s: &str, zero_ok: bool) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    check_seconds(v, zero_ok)
}

/// `ovs` (a packet-in carries the whole packet, as Open vSwitch 3.1) or
/// `spec` (up to its `controller` action's `max_len`): whether packet-ins
/// are cut.
pub fn parse_packet_in_max_len(s: &str) -> Result<bool, String> {
    match s {
        "ovs" => Ok(false),
        "spec" => Ok(true),
        _ => Err(format!(
            "unknown packet_in_max_len mode '{s}' (ovs or spec)"
        )),
    }
}

/// `mac-aging-time`: 15 to 3600 s, as OVS clamps it (refused outside
/// here, not clamped silently).
pub fn check_mac_aging(s: u64) -> Result<u64, String> {
    if (15..=3600).contains(&s) {
        Ok(s)
    } else {
        Err(format!(
            "mac_aging_time {s}: 15 to 3600 seconds (OVS's range)"
        ))
    }
}

/// `mac-table-size`: at least 1.
pub fn check_mac_table_size(n: usize) -> Result<usize, String> {
    if n >= 1 {
        Ok(n)
    } else {
        Err("mac_table_size 0: at least 1 entry".into())
    }
}

/// Parses `N=SPEC` as given to `--port`.
pub fn parse_port_arg(s: &str) -> Result<(u32, PortSpec), String> {
    let Some((n, spec)) = s.split_once('=') else {
        return Err(format!("'{s}': expected N=SPEC, e.g. 1=pcap:rx=in.pcap"));
    };
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("'{s}': port number '{n}' is not a number"))?;
    Ok((n, spec.trim().parse()?))
}
