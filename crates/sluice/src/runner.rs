//! `sluice run`: build a datapath from a configuration, forward until the
//! inputs are drained (or a stop condition), and hand back the counters.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_classifier::action::Action;
use sluice_classifier::{parse_flow_file_parallel, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig, DpStats, PortReport, RxQueue};
use sluice_port::{open_port_queues, Port};

use crate::auto_lb;
use crate::config::Config;
use crate::ctl::Control;
use crate::pmd::{self, Placement, PmdHandle, Shared};
use crate::report::merge_ports;
use crate::rxq_assign::{deal, queue_count};

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
    /// Accept OpenFlow connections on these (`--listen`).
    pub listen: Vec<sluice_ofproto::channel::Target>,
    /// Connect to these OpenFlow controllers (`--controller`).
    pub controllers: Vec<sluice_ofproto::channel::Peer>,
    /// `--fail-mode standalone` (else secure).
    pub fail_standalone: bool,
    /// Packet-ins per second per controller (0: no limit).
    pub controller_rate_limit: u32,
    /// The OpenFlow datapath id (`--datapath-id`; default: random).
    pub datapath_id: Option<u64>,
    /// Key, certificate and CA for `ssl:`/`pssl:`.
    pub tls: sluice_ofproto::tls::TlsFiles,
    /// Serve Prometheus metrics on this address (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// OpenFlow listeners come later, from the caller (`sluice
    /// vswitchd`: one per bridge): the switch holds its PMDs and makes
    /// its OpenFlow side though none is given now.
    pub openflow_later: bool,
    /// Told once the switch runs: its control plane and OpenFlow side,
    /// for a caller that drives it (`sluice vswitchd`).
    pub on_start: Option<std::sync::mpsc::SyncSender<Started>>,
}

/// A running switch's handles (see [`RunOptions::on_start`]).
pub struct Started {
    /// The control plane (`sluice ctl`'s commands).
    pub control: Arc<Control>,
    /// The OpenFlow side, to listen with (`sluice_ofproto::channel::listen`).
    pub openflow: Option<sluice_ofproto::channel::SwitchInfo>,
}

impl RunOptions {
    /// Whether an OpenFlow controller may connect (`--controller`,
    /// `--listen`).
    pub fn openflow(&self) -> bool {
        !self.listen.is_empty() || !self.controllers.is_empty() || self.openflow_later
    }

    /// What ends a PMD's run.
    pub fn limits(&self) -> pmd::Limits {
        pmd::Limits {
            duration: self.duration,
            packets: self.packets,
            hold: self.ctl.is_some() || self.openflow(),
        }
    }
}

/// What a finished run leaves behind.
pub struct RunOutcome {
    /// Datapath counters, summed over the PMDs.
    pub stats: DpStats,
    /// Each PMD's own counters.
    pub per_pmd: Vec<(Placement, DpStats)>,
    /// Port counters (summed over each port's queues).
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
    Ok(RuleSet::from_specs(&read_rules(path)?, 0))
}

/// Reads and parses a flow file (all-or-nothing) on every core: for
/// loading before anything forwards. What a rule kept differs from its
/// line (a field dropped from the match, as Open vSwitch does) is said on
/// stderr with its line and column.
pub fn read_rules(path: &Path) -> Result<Vec<sluice_classifier::parse::FlowSpec>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read flow file {}: {e}", path.display()))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (specs, warnings) =
        parse_flow_file_parallel(&text, Some(&path.display().to_string()), threads)
            .map_err(|e| e.to_string())?;
    for w in warnings {
        tracing::warn!(target: "switch", "{w}");
    }
    Ok(specs)
}

/// Gives the rules the configured choices where OVS and OpenFlow differ,
/// and refuses a rule the rule set refuses ([`RuleSet::refusal`]): one
/// that writes a field the configuration keeps read-only, or sends to a
/// group or uses a meter (none exists before a controller adds it).
pub fn set_rule_modes(rules: &mut RuleSet, cfg: &Config) -> Result<(), String> {
    rules.set_modes(sluice_classifier::table::Modes {
        frag_handling: cfg.frag_handling,
        frag_rewrites: cfg.frag_rewrites,
        push_vlan: cfg.push_vlan,
        push_mpls: cfg.push_mpls,
        set_field: cfg.set_field,
        select_hash: cfg.select_hash,
    });
    rules.conntrack().set_nat_alone(cfg.ct_nat_alone);
    // Every rule checked in no order (O(n): `iter` would sort a million
    // rules by priority first); the one named is the first `iter` would
    // have reached, by table, priority and age.
    let first = rules
        .rules()
        .filter_map(|r| rules.refusal(&r.actions).map(|e| (r, e)))
        .min_by_key(|(r, _)| (r.table, std::cmp::Reverse(r.priority), r.id));
    if let Some((r, refused)) = first {
        let m = r.matcher.to_string();
        return Err(format!(
            "rule 'table={},priority={}{}{} actions={}': {}",
            r.table,
            r.priority,
            if m.is_empty() { "" } else { "," },
            m,
            sluice_classifier::action::format_actions(&r.actions),
            refused
        ));
    }
    Ok(())
}

/// Ports the rules name (in matches and outputs), for warnings and traces.
pub fn ports_named_by(rules: &RuleSet) -> Vec<u32> {
    let mut ports = Vec::new();
    for r in rules.iter() {
        if r.matcher.mask.in_port != 0 {
            ports.push(r.matcher.value.in_port);
        }
        let written = r.actions.iter().filter_map(|a| match a {
            Action::WriteActions(set) => Some(set.iter()),
            _ => None,
        });
        for a in r.actions.iter().chain(written.flatten()) {
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

/// The PMD placements a configuration asks for: one per `pmd_cores`
/// entry, pinned there, or a single unpinned PMD when none is given.
pub fn placements(cfg: &Config) -> Result<Vec<Placement>, String> {
    if cfg.pmd_cores.is_empty() {
        return Ok(vec![Placement::default()]);
    }
    let allowed = sluice_port::sys::allowed_cpus().map_err(|e| format!("CPU affinity: {e}"))?;
    let mut seen = Vec::new();
    for &c in &cfg.pmd_cores {
        if !allowed.contains(&c) {
            return Err(format!(
                "--pmd-cores: CPU {c} is not available to this process (available: {})",
                allowed
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if seen.contains(&c) {
            return Err(format!("--pmd-cores: CPU {c} is given twice"));
        }
        seen.push(c);
    }
    Ok(cfg
        .pmd_cores
        .iter()
        .enumerate()
        .map(|(index, &c)| Placement {
            index,
            core: Some(c),
        })
        .collect())
}

/// The ports one PMD's datapath starts with: queues it sends on (and
/// polls), and further rx queues it polls.
#[derive(Default)]
pub struct PmdPorts {
    /// (OpenFlow port, queue id, queue): queue `i` of every port goes to
    /// PMD `i`.
    pub own: Vec<(u32, u32, Box<dyn Port>)>,
    /// (OpenFlow port, rx queue) beyond one per PMD.
    pub extra: Vec<(u32, RxQueue)>,
}

impl PmdPorts {
    /// A datapath with these ports and the per-port tx-flush-intervals
    /// of `port_tx_flush`.
    pub fn build(
        self,
        cfg: DatapathConfig,
        rules: Arc<RuleSet>,
        port_tx_flush: &[(u32, sluice_datapath::TxFlush)],
    ) -> Result<Datapath, String> {
        // AF_XDP sockets lend pool frames to their fill rings: a pool too
        // small for them leaves no frame to copy a packet into.
        let xdp = self
            .own
            .iter()
            .map(|(_, _, q)| q.name())
            .chain(self.extra.iter().map(|(_, q)| q.port.name()))
            .filter(|n| n.starts_with("afxdp:"))
            .count();
        let mut cfg = cfg;
        cfg.pool_frames = cfg
            .pool_frames
            .max(sluice_port::afxdp::pool_frames_for(xdp));
        let mut dp = Datapath::new(cfg, rules).map_err(|e| e.to_string())?;
        for (ofport, qid, q) in self.own {
            dp.add_port_queue(ofport, qid, q)
                .map_err(|e| format!("port {ofport}: {e}"))?;
        }
        for (ofport, q) in self.extra {
            dp.add_rxq(ofport, q)
                .map_err(|(e, _)| format!("port {ofport}: {e}"))?;
        }
        for &(n, f) in port_tx_flush {
            dp.set_tx_flush_interval(Some(n), f)
                .map_err(|e| format!("tx-flush-interval for port {n}: {e}"))?;
        }
        Ok(dp)
    }
}

/// Deals every port's queues over `n_pmds` PMDs as [`deal`] says.
pub fn deal_ports(
    ports: Vec<(u32, Vec<Box<dyn Port>>)>,
    n_pmds: usize,
) -> Result<Vec<PmdPorts>, String> {
    let mut pmds: Vec<PmdPorts> = (0..n_pmds).map(|_| PmdPorts::default()).collect();
    for (ofport, queues) in ports {
        let dealt = deal(queues, n_pmds).map_err(|e| format!("port {ofport}: {e}"))?;
        for (qid, (pmd, q)) in pmds.iter_mut().zip(dealt.own).enumerate() {
            pmd.own.push((ofport, qid as u32, q));
        }
        for (i, q) in dealt.extra {
            pmds[i].extra.push((ofport, q));
        }
    }
    Ok(pmds)
}

/// Runs one datapath per PMD of `placements` (see [`placements`]) over
/// already-opened ports (each port given as at least one queue per PMD,
/// see [`sluice_port::open_port_queues`] and [`deal_ports`]), each on its
/// own thread, with a control socket when `opts.ctl` names one.
pub fn run_ports(
    cfg: &Config,
    placements: &[Placement],
    rules: RuleSet,
    ports: Vec<(u32, Vec<Box<dyn Port>>)>,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<RunOutcome, String> {
    let n_pmds = placements.len();
    // TLS for ssl:/pssl:, read before any thread starts: a bad key file
    // stops the run before it has begun.
    let uses_tls = opts
        .listen
        .iter()
        .any(|t| matches!(t, sluice_ofproto::channel::Target::Ssl(_)))
        || opts
            .controllers
            .iter()
            .any(|p| matches!(p, sluice_ofproto::channel::Peer::Ssl(_)));
    let tls = uses_tls
        .then(|| opts.tls.load().map(Arc::new))
        .transpose()?;
    let mut warnings = Vec::new();
    let numbers: Vec<u32> = ports.iter().map(|(n, _)| *n).collect();
    for p in ports_named_by(&rules) {
        if !numbers.contains(&p) {
            warnings.push(format!("the rules name port {p}, which is not configured: outputs to it are skipped and counted as 'output to missing port'"));
        }
    }
    // Memory for connections, ready before a PMD tracks any (now if a
    // rule already tracks connections, else when the first one comes).
    rules.conntrack().set_prealloc(
        cfg.ct_prealloc
            .unwrap_or(sluice_conntrack::DEFAULT_PREALLOC),
    );
    let control_rules = rules.clone();
    let rules = Arc::new(rules);
    let endless = ports
        .iter()
        .any(|(_, queues)| queues.iter().any(|q| q.caps().endless_rx()));
    let dealt = deal_ports(ports, n_pmds)?;
    if endless && opts.duration.is_none() && opts.packets.is_none() {
        warnings.push(
            "an input never ends (a loop or a live interface): stop with Ctrl-C, or give --duration or --packets".into(),
        );
    }
    for w in &warnings {
        tracing::warn!(target: "switch", "{w}");
    }
    let start = Instant::now();
    let shared = Arc::new(Shared {
        stop,
        // An OpenFlow listener is an input that goes on until the switch
        // is stopped: a controller may add ports' traffic at any time.
        busy: AtomicUsize::new(n_pmds + usize::from(opts.openflow())),
        ..Shared::default()
    });
    // Packet-ins from every PMD to the OpenFlow channel.
    let (pin_tx, pin_rx) = if opts.openflow() {
        let (tx, rx) = std::sync::mpsc::sync_channel(sluice_ofproto::hub::PACKET_IN_QUEUE);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    // Each PMD builds its own datapath on its own thread (see pmd::spawn).
    let mut pmds: Vec<PmdHandle> = Vec::with_capacity(n_pmds);
    // Whether a controller takes packet-ins for a TTL that ran out: the
    // OpenFlow channel sets it, the PMDs read it.
    let invalid_ttl = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for (ports, &placement) in dealt.into_iter().zip(placements) {
        let (dp_cfg, rules) = (cfg.datapath, Arc::clone(&rules));
        let flush = cfg.port_tx_flush.clone();
        // A controller rate limit is also each PMD's share of it where the
        // packet-ins are made, so that what would be dropped later costs
        // no copy.
        let pin_limit = opts.controller_rate_limit;
        let ttl_flag = Arc::clone(&invalid_ttl);
        let build = move || {
            let mut dp = ports.build(dp_cfg, rules, &flush)?;
            dp.set_invalid_ttl_flag(ttl_flag);
            if pin_limit > 0 {
                let share = f64::from(pin_limit) / n_pmds as f64;
                dp.set_packet_in_limit(share, (share / 4.0).max(25.0));
            }
            Ok(dp)
        };
        match pmd::spawn(
            build,
            placement,
            start,
            opts.limits(),
            Arc::clone(&shared),
            pin_tx.clone(),
        ) {
            Ok(p) => pmds.push(p),
            Err(e) => {
                return Err(stop_all(&shared, pmds, e));
            }
        }
    }
    // As ovs-vswitchd: the threads that are not PMDs (control, OpenFlow
    // connections, packet-in distribution) keep off the PMDs' cores when
    // there are others, so that they never take a PMD's time.
    let pmd_cores: Vec<usize> = pmds.iter().filter_map(|p| p.placement.core).collect();
    if !pmd_cores.is_empty() {
        if let Ok(all) = sluice_port::sys::allowed_cpus() {
            let others: Vec<usize> = all.into_iter().filter(|c| !pmd_cores.contains(c)).collect();
            if !others.is_empty() {
                let _ = sluice_port::sys::pin_to_cpus(&others);
            }
        }
    }
    let senders = pmds
        .iter()
        .map(|p| (p.placement, p.commands.clone()))
        .collect();
    let control = Arc::new(Control::new(control_rules, senders, start, cfg.n_rxq));
    control.set_port_specs(cfg.ports.clone());
    control.set_vlan_limit(cfg.datapath.vlan_limit);
    let control_captures = control.captures();
    // Timeouts are the control plane's: it removes timed-out rules from
    // the rules it owns, in every mode (a flow file's or `sluice ctl`'s
    // rules time out as a controller's do), and tells the controllers
    // (FLOW_REMOVED) when there are any.
    let of_hub = opts.openflow().then(|| {
        Arc::new(sluice_ofproto::hub::Hub::with_invalid_ttl_flag(
            opts.controller_rate_limit,
            Arc::clone(&invalid_ttl),
        ))
    });
    {
        let mut tender = crate::tend::Tender::new(
            Arc::clone(&control),
            of_hub.clone(),
            opts.fail_standalone,
            true,
        );
        let stop = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("expire".into())
            .stack_size(sluice_classifier::xlate::STACK_BYTES)
            .spawn(move || {
                while !stop.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(crate::tend::TICK);
                    tender.once();
                }
            })
            .map_err(|e| format!("rule expiry thread: {e}"))?;
    }
    // Prometheus metrics: a sample of the PMDs' snapshots and the control
    // plane's counters at each scrape.
    let _metrics = match opts.metrics {
        Some(addr) => {
            let (control, hub) = (Arc::clone(&control), of_hub.clone());
            let render: crate::metrics_http::Render = Arc::new(move || {
                crate::metrics::Sample::read(&control, hub.as_ref()).map(|s| s.render())
            });
            match crate::metrics_http::serve(addr, render) {
                Ok(server) => {
                    tracing::info!(
                        target: "switch",
                        "metrics on http://{}/metrics (Prometheus, OpenMetrics text)",
                        server.addr
                    );
                    Some(server)
                }
                Err(e) => {
                    return Err(stop_all(&shared, pmds, format!("--metrics {e}")));
                }
            }
        }
        None => None,
    };
    let mut of_sockets = Vec::new();
    let mut of_info = None;
    if let Some(hub) = of_hub {
        if let Some(rx) = pin_rx {
            hub.spawn(rx)
                .map_err(|e| format!("packet-in thread: {e}"))?;
        }
        let info = sluice_ofproto::channel::SwitchInfo::new(
            opts.datapath_id.unwrap_or_else(random_datapath_id),
            hub,
            tls,
        );
        // (`sluice vswitchd` gives each bridge its own id and fail mode,
        // and says so itself.)
        if !opts.openflow_later {
            tracing::info!(
                target: "openflow",
                "OpenFlow datapath id {:016x}, fail-mode {}",
                info.datapath_id,
                if opts.fail_standalone {
                    "standalone: a switch given no flow file starts with priority=0,actions=NORMAL until a controller changes it; with --controller and none connected for 15 s it fails open (every packet NORMAL) until one connects"
                } else {
                    "secure: with no controller connected the rules stay as they are"
                }
            );
        }
        crate::tend::wire_openflow(&control, &info.hub);
        info.hub.set_controllers(opts.controllers.len());
        for peer in &opts.controllers {
            sluice_ofproto::channel::connect(peer.clone(), control.clone(), info.clone())
                .map_err(|e| format!("--controller {peer}: {e}"))?;
        }
        of_info = Some(info.clone());
        for t in &opts.listen {
            match sluice_ofproto::channel::listen(t, control.clone(), info.clone()) {
                Ok((name, file)) => {
                    tracing::info!(
                        target: "openflow",
                        "OpenFlow 1.3 on {name} ('ovs-ofctl -O OpenFlow13 dump-flows {name}')"
                    );
                    of_sockets.extend(file);
                }
                Err(e) => {
                    return Err(stop_all(&shared, pmds, format!("--listen: {e}")));
                }
            }
        }
    }
    // The control socket last: once it is there, so is everything a
    // script may reach next (the OpenFlow listeners, the metrics).
    let socket = match &opts.ctl {
        Some(path) => match crate::ctl_socket::serve(path, Arc::clone(&control)) {
            Ok(f) => {
                tracing::info!(
                    target: "switch",
                    "control socket {} ('sluice ctl --ctl {} pmd-stats')",
                    f.file.path().display(),
                    f.file.path().display()
                );
                Some(f)
            }
            Err(e) => {
                return Err(stop_all(&shared, pmds, format!("control socket: {e}")));
            }
        },
        None => None,
    };
    if let Some(tx) = &opts.on_start {
        let _ = tx.send(Started {
            control: Arc::clone(&control),
            openflow: of_info,
        });
    }
    let auto_lb = match cfg.auto_lb {
        Some(params) if n_pmds > 1 => Some(auto_lb::spawn(params, Arc::clone(&shared), move |p| {
            control.auto_rebalance(p)
        })),
        Some(_) => {
            tracing::warn!(target: "switch", "pmd-auto-lb with one PMD thread has nothing to balance (give --pmd-cores two or more CPUs); it stays off");
            None
        }
        None => None,
    };
    let captures = control_captures;
    let mut finished = Vec::with_capacity(n_pmds);
    let mut first_error = None;
    for p in pmds {
        let placement = p.placement;
        match p.join() {
            Ok(dp) => finished.push((placement, dp)),
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                first_error.get_or_insert(e);
            }
        }
    }
    // A command carried out just as the run ended still gets its reply.
    if let Some(s) = &socket {
        s.quiesce(Duration::from_secs(2));
    }
    // Live captures end with the run: the taps go, the files are written
    // to the end.
    for (_, dp) in &mut finished {
        dp.remove_taps();
    }
    for line in captures.finish_all() {
        tracing::info!(target: "capture", "capture of {line}");
    }
    // Only the sockets this run bound, if they are still there.
    for f in socket.iter().map(|s| &s.file).chain(&of_sockets) {
        f.remove();
    }
    if let Some(t) = auto_lb {
        // The PMDs set `stop` as they end, which ends it too.
        shared.stop.store(true, Ordering::Relaxed);
        let _ = t.join();
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let elapsed = start.elapsed();
    let now_us = start.elapsed().as_micros() as u64;
    let mut stats = DpStats::default();
    let mut per_pmd = Vec::with_capacity(n_pmds);
    let mut occupancy = (0, 0, 0, 0);
    let mut megaflows = Vec::new();
    let mut packet_ins = 0;
    for (placement, dp) in &finished {
        let st = dp.stats();
        if !st.rx_balanced() || !st.tx_balanced() {
            return Err(format!(
                "internal error: packet accounting does not balance on {placement}: {st:?}"
            ));
        }
        stats.add(st);
        per_pmd.push((*placement, st.clone()));
        let (a, b, c, d) = dp.cache_occupancy();
        occupancy = (
            occupancy.0 + a,
            occupancy.1 + b,
            occupancy.2 + c,
            occupancy.3 + d,
        );
        if opts.dump_megaflows {
            megaflows.extend(dp.dump_megaflows(now_us));
        }
        packet_ins += dp.packet_ins().count();
    }
    let live: Vec<_> = finished.iter().map(|(_, dp)| dp.port_reports()).collect();
    let removed: Vec<_> = finished
        .iter()
        .map(|(_, dp)| dp.removed_ports().to_vec())
        .collect();
    let mut ports = merge_ports(&live);
    ports.extend(merge_ports(&removed).into_iter().map(|mut p| {
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
        per_pmd,
        ports,
        // The first PMD's rules, with what any PMD learned that the
        // control plane had not yet taken.
        rules: {
            let mut r = (**finished[0].1.rules()).clone();
            if r.adopt_learned() > 0 {
                Arc::new(r)
            } else {
                Arc::clone(finished[0].1.rules())
            }
        },
        elapsed,
        now_us,
        packet_ins,
        warnings: late,
        cache_occupancy: occupancy,
        megaflows: opts.dump_megaflows.then_some(megaflows),
    })
}

/// `sluice run`: opens the configured ports and runs.
pub fn run(
    cfg: &Config,
    stop_after: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<RunOutcome, String> {
    if cfg.ports.is_empty() {
        return Err("no ports: give at least one --port N=SPEC, e.g. --port 1=pcap:rx=in.pcap --port 2=pcap:tx=out.pcap".into());
    }
    let mut rules = match &cfg.flows {
        Some(flows) => load_rules(flows)?,
        // As `ovs-vsctl add-br` makes a bridge: one rule, NORMAL (a
        // learning switch), unless a controller in secure fail mode is to
        // give the rules (then a miss drops until it does).
        None if !stop_after.openflow() || stop_after.fail_standalone => {
            tracing::info!(target: "switch", "no flow file: one rule, priority=0,actions=NORMAL (a MAC-learning switch, as ovs-vsctl add-br makes a bridge)");
            default_rules()
        }
        None => RuleSet::new(),
    };
    for (n, spec) in &cfg.ports {
        if let sluice_port::PortSpec::Bridged { vlan, .. } = spec {
            rules.bridge().set_port(*n, vlan.clone());
        }
    }
    if let Some(s) = cfg.mac_aging_time {
        rules.bridge().macs.set_idle_secs(s);
    }
    if let Some(n) = cfg.mac_table_size {
        rules.bridge().macs.set_max(n);
    }
    set_rule_modes(&mut rules, cfg)?;
    rules.set_tunnels(crate::tunnels::from_ports(&cfg.ports, &cfg.tlv_map)?);
    let placements = placements(cfg)?;
    let specs: Vec<(u32, &sluice_port::PortSpec)> =
        cfg.ports.iter().map(|(n, s)| (*n, s)).collect();
    sluice_port::spec::check_files(&specs)?;
    let mut ports = Vec::new();
    for (n, spec) in &cfg.ports {
        let count = queue_count(cfg.n_rxq, spec, placements.len())?;
        let queues = open_port_queues(spec, count).map_err(|e| format!("port {n}: {e}"))?;
        ports.push((*n, queues));
    }
    run_ports(cfg, &placements, rules, ports, stop_after, stop)
}

/// The rules of a switch given none: `priority=0,actions=NORMAL`.
pub fn default_rules() -> RuleSet {
    let specs = sluice_classifier::parse_flow_file("priority=0,actions=NORMAL\n", None)
        .expect("the default rule parses");
    RuleSet::from_specs(&specs, 0)
}

/// A datapath id for a switch not given one: 48 bits from the clock and
/// the process id (as OVS's random fallback, the top 16 bits zero).
/// Stops the PMD threads started so far (a later part of the start-up
/// failed) and waits for them; gives back `error`.
fn stop_all(shared: &Shared, pmds: Vec<PmdHandle>, error: String) -> String {
    shared.stop.store(true, Ordering::Relaxed);
    for p in pmds {
        let _ = p.join();
    }
    error
}

fn random_datapath_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ u64::from(std::process::id()) << 24).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16
}
