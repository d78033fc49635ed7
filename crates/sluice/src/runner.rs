//! `sluice run`: build a datapath from a configuration, forward until the
//! inputs are drained (or a stop condition), and hand back the counters.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_classifier::action::Action;
use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DpStats, PortReport};
use sluice_port::{open_port, Port};

use crate::config::Config;
use crate::ctl::{self, Control};
use crate::pmd::{self, PmdCommand};

/// How to run: when to stop a run with endless input, what to report.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this wall time.
    pub duration: Option<Duration>,
    /// Stop after receiving this many packets.
    pub packets: Option<u64>,
    /// Keep the megaflows for the report (like `dpctl/dump-flows`).
    pub dump_megaflows: bool,
    /// Serve `sluice ctl` on this unix socket while running.
    pub ctl: Option<std::path::PathBuf>,
}

/// What a finished run leaves behind.
pub struct RunOutcome {
    /// Datapath counters.
    pub stats: DpStats,
    /// Port counters.
    pub ports: Vec<PortReport>,
    /// Rules with their counters.
    pub rules: Arc<RuleSet>,
    /// Wall time.
    pub elapsed: Duration,
    /// Switch clock at the end (µs).
    pub now_us: u64,
    /// Packet-ins left queued.
    pub packet_ins: usize,
    /// Warnings to show the user.
    pub warnings: Vec<String>,
    /// (megaflows, masks, EMC entries, SMC entries) in use at the end.
    pub cache_occupancy: (usize, usize, usize, usize),
    /// The megaflows at the end, when asked for.
    pub megaflows: Option<Vec<String>>,
}

/// Reads and parses a flow file (all-or-nothing).
pub fn load_rules(path: &Path) -> Result<RuleSet, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read flow file {}: {e}", path.display()))?;
    let specs =
        parse_flow_file(&text, Some(&path.display().to_string())).map_err(|e| e.to_string())?;
    Ok(RuleSet::from_specs(&specs, 0))
}

/// Ports the rules name (in matches and outputs), for warnings and traces.
pub fn ports_named_by(rules: &RuleSet) -> Vec<u32> {
    let mut ports = Vec::new();
    for r in rules.iter() {
        if r.matcher.mask.in_port != 0 {
            ports.push(r.matcher.value.in_port);
        }
        for a in &r.actions {
            match a {
                Action::Output(p) => ports.push(*p),
                Action::Resubmit {
                    in_port: Some(p), ..
                } => ports.push(*p),
                _ => {}
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Runs a datapath over already-opened ports, on its own thread, with a
/// control socket when `opts.ctl` names one.
pub fn run_ports(
    cfg: &Config,
    rules: RuleSet,
    ports: Vec<(u32, Box<dyn Port>)>,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<RunOutcome, String> {
    let mut warnings = Vec::new();
    let numbers: Vec<u32> = ports.iter().map(|(n, _)| *n).collect();
    for p in ports_named_by(&rules) {
        if !numbers.contains(&p) {
            warnings.push(format!("the rules name port {p}, which is not configured: outputs to it are skipped and counted as 'output to missing port'"));
        }
    }
    let control_rules = rules.clone();
    let mut dp = Datapath::new(cfg.datapath, Arc::new(rules)).map_err(|e| e.to_string())?;
    for (n, port) in ports {
        dp.add_port(n, port).map_err(|e| e.to_string())?;
    }
    for &(n, us) in &cfg.port_tx_flush_us {
        dp.set_tx_flush_interval(Some(n), us)
            .map_err(|e| format!("tx-flush-interval for port {n}: {e}"))?;
    }
    if dp.has_endless_input() && opts.duration.is_none() && opts.packets.is_none() {
        warnings.push(
            "an input never ends (a loop or a live interface): stop with Ctrl-C, or give --duration or --packets".into(),
        );
    }
    for w in &warnings {
        eprintln!("sluice: warning: {w}");
    }
    let start = Instant::now();
    let pmd = pmd::spawn(dp, start, opts, stop);
    let socket = match &opts.ctl {
        Some(path) => {
            let control = Arc::new(Control::new(control_rules, pmd.commands.clone(), start));
            match ctl::serve(path, control) {
                Ok(p) => {
                    eprintln!(
                        "sluice: control socket {} ('sluice ctl --ctl {} pmd-stats')",
                        p.display(),
                        p.display()
                    );
                    Some(p)
                }
                Err(e) => {
                    let _ = pmd.commands.send(PmdCommand::Stop);
                    let _ = pmd.join();
                    return Err(format!("control socket: {e}"));
                }
            }
        }
        None => None,
    };
    let dp = pmd.join()?;
    if let Some(p) = socket {
        let _ = std::fs::remove_file(p);
    }
    let elapsed = start.elapsed();
    let now_us = start.elapsed().as_micros() as u64;
    let stats = dp.stats().clone();
    if !stats.rx_balanced() || !stats.tx_balanced() {
        return Err(format!(
            "internal error: packet accounting does not balance: {stats:?}"
        ));
    }
    let mut ports = dp.port_reports();
    ports.extend(dp.removed_ports().iter().cloned().map(|mut p| {
        p.name += " (removed)";
        p
    }));
    let late = ports
        .iter()
        .flat_map(|p| {
            p.warnings
                .iter()
                .map(move |w| format!("port {}: {w}", p.ofport))
        })
        .collect();
    Ok(RunOutcome {
        stats,
        ports,
        rules: Arc::clone(dp.rules()),
        elapsed,
        now_us,
        packet_ins: dp.packet_ins().count(),
        warnings: late,
        cache_occupancy: dp.cache_occupancy(),
        megaflows: opts.dump_megaflows.then(|| dp.dump_megaflows(now_us)),
    })
}

/// `sluice run`: opens the configured ports and runs.
pub fn run(
    cfg: &Config,
    stop_after: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<RunOutcome, String> {
    let Some(flows) = &cfg.flows else {
        return Err("no rules: give --flows FILE (an ovs-ofctl flow file), or 'flows = \"FILE\"' in the config".into());
    };
    if cfg.ports.is_empty() {
        return Err("no ports: give at least one --port N=SPEC, e.g. --port 1=pcap:rx=in.pcap --port 2=pcap:tx=out.pcap".into());
    }
    let rules = load_rules(flows)?;
    let mut ports = Vec::new();
    for (n, spec) in &cfg.ports {
        ports.push((*n, open_port(spec).map_err(|e| format!("port {n}: {e}"))?));
    }
    run_ports(cfg, rules, ports, stop_after, stop)
}
