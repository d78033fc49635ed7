//! The control plane's owner of the rule tables, ports and PMD handles
//! ([`Control`]), and the text commands of `sluice ctl` it answers
//! ([`Control::execute`]): statistics, megaflows, settings, and the rule
//! commands `ovs-ofctl` users know. A rule command returns only once every
//! datapath thread runs the new rules (see [`crate::pmd`]). The OpenFlow
//! channel (`sluice_ofproto::channel`, through `ctl/ofproto.rs`) and the control socket
//! (`ctl_socket`) are its two front ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_classifier::table::Removal;
use sluice_classifier::Rule;
use sluice_classifier::RuleSet;
use sluice_datapath::DatapathConfig;
use sluice_port::PortSpec;

mod bridge;
mod flows;
mod observe;
mod ofproto;
mod routes;
mod rxq;

use crate::pmd::{Placement, PmdCommand, PmdSender};
use crate::report::merge_ports;
use crate::rxq_assign::deal;

/// How long a command waits for the datapath thread.
pub(crate) const PMD_TIMEOUT: Duration = Duration::from_secs(5);

/// A request (a `sluice ctl` command).
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The command.
    pub cmd: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

/// A reply to one.
#[derive(Debug, Serialize, Deserialize)]
pub struct Response {
    /// Whether the command succeeded.
    pub ok: bool,
    /// What it printed, or the error.
    pub output: String,
}

/// The control plane's state: the authoritative rule set and the way to
/// the datapath threads.
pub struct Control {
    /// The bridge it is (its index in the datapath; 0 for the datapath's
    /// first, the stand-alone switch's one bridge).
    bridge: u16,
    /// How many bridges besides the first the datapath has (shared by
    /// every bridge's control): with none, port numbers are the
    /// datapath's as they are.
    extra_bridges: Arc<AtomicUsize>,
    /// Every bridge's rules as last published, by bridge index (shared
    /// by every bridge's control: a trace follows patch ports).
    published: Arc<Mutex<Vec<Option<Arc<RuleSet>>>>>,
    rules: Arc<Mutex<RuleSet>>,
    /// The datapath's first bridge's rules, on the others' controls: they
    /// hold the datapath's tunnel state (tunnel ports of every bridge,
    /// by datapath number).
    first: Option<Arc<Mutex<RuleSet>>>,
    pmds: Arc<Mutex<PmdSenders>>,
    start: Instant,
    /// `--n-rxq`, for ports added at run time.
    n_rxq: Option<usize>,
    /// Held by port changes and rxq moves, one at a time (a queue in
    /// flight between two PMDs must not meet its port's removal).
    reconfig: Arc<Mutex<()>>,
    /// Each rx queue's cycles at the last rebalance, by (port, queue): a
    /// rebalance weighs the load since the one before.
    rxq_cycles_base: Mutex<HashMap<(u32, u32), u64>>,
    /// Each PMD's (processing, idle) cycles at the last measurement.
    pmd_cycles_base: Mutex<Vec<(u64, u64)>>,
    port_watcher: Mutex<Option<PortWatcher>>,
    /// Ports' OpenFlow config bits set by PORT_MOD.
    port_config: Mutex<HashMap<u32, u32>>,
    /// Ports of the bridge that are no datapath port (patch ports): their
    /// numbers and names, for the controllers' port descriptions.
    patch_names: Mutex<Vec<(u32, String)>>,
    of_status: Mutex<Option<Box<dyn Fn() -> String + Send + Sync>>>,
    /// The ports' specs, by number: an added port's capture files are
    /// checked against them.
    specs: Arc<Mutex<Vec<(u32, PortSpec)>>>,
    /// Flow-mods applied (OpenFlow's one by one, `sluice ctl`'s a rule
    /// each) and refused, for `--metrics`.
    pub(crate) flow_mods: [AtomicU64; 2],
    /// The datapath's `vlan-limit` setting, for `trace --packet`.
    vlan_limit: AtomicUsize,
    /// Live captures (`capture`).
    captures: Arc<crate::capture::Captures>,
    /// Routes and neighbours given by hand (`ovs/route/add`,
    /// `tnl/neigh/set`), shared by every bridge's control: kept whatever
    /// the tunnels, given to the tunnel state when there is one.
    manual: Arc<Mutex<crate::tunnels::Manual>>,
}

/// Every PMD's placement and the way to send it commands.
type PmdSenders = Vec<(Placement, PmdSender)>;

/// A port change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChange {
    /// Added (`add-port`).
    Added,
    /// Removed (`del-port`).
    Deleted,
    /// Its config (PORT_MOD) or its link changed.
    Modified,
}

/// What is told of port changes: how, the port number and its name.
pub type PortWatcher = Box<dyn Fn(PortChange, u32, &str) + Send + Sync>;

/// What `set` takes.
const SET_USAGE: &str =
    "tx-flush-interval=auto|US [port=N], pmd-perf-metrics=true|false, pmd-perf-log-us=US";

/// The commands, for `sluice ctl --help` and errors.
pub const COMMANDS: &str = "\
  pmd-stats                  datapath counters per PMD (like dpif-netdev/pmd-stats-show)
  pmd-stats-clear            zero them
  pmd-rxq-show               which PMD polls which rx queue, and each queue's share of its cycles
  dump-megaflows             the megaflows (like dpctl/dump-flows)
  del-megaflows              remove them all (like dpctl/del-flows)
  capture PORT FILE [--rx|--tx|--both] [--count N] [--filter MATCH]
                             write what a port receives and/or sends to a pcap file (like ovs-tcpdump -w)
  capture-stop PORT          end it (the file is then complete)
  capture-show               the captures, with frames captured, written and dropped
  trace FLOW | trace --packet HEX --in-port N
                             how the live rules handle a packet (like ofproto/trace), and
                             which cache level of each PMD would serve it now, with its megaflow
  pmd-perf-show [-nh] [--seconds [N]] [--iteration-log [N]]
                             PMD performance metrics (like dpif-netdev/pmd-perf-show), once on
  set tx-flush-interval=auto|US [port=N]
  set pmd-perf-metrics=true|false    PMD performance metrics on or off (OVS's pmd-perf-metrics)
  set pmd-perf-log-us=US     iterations longer than this go to pmd-perf-show's log (250)
  dump-flows                 the rules with their counters
  add-flow FLOW              add a rule (ovs-ofctl syntax)
  add-flows FILE             add the rules of a file
  mod-flows [--strict] FLOW  change the actions of matching rules
  del-flows [--strict] [FLOW]  delete matching rules (all without FLOW)
  replace-flows FILE         make the rules those of FILE, keeping the counters of unchanged ones
  dump-ports                 every port's counters: packets, drops by reason, kicks
  add-port N=SPEC            open a port and add it as number N (e.g. 3=afpacket:veth3)
  del-port N                 send what port N has queued, then remove it
  set-port N=SPEC            change port N's MTU and VLAN options in place (the rest of SPEC as it is)
  pmd-rxq-rebalance          move rx queues between PMDs by their load since the last rebalance
  of-show                    OpenFlow connections: role, packet-ins sent and dropped (queue full, rate limit)
  tnl-ports-show             tunnel ports and underlay ports (with their addresses)
  tnl-neigh-show             the tunnel neighbour (ARP/ND) cache (like tnl/neigh/show)
  tnl-neigh-set PORT IP MAC  set a neighbour on underlay PORT by hand (like tnl/neigh/set)
  tnl-neigh-flush            forget every neighbour (they are asked for again)
  tnl-route-show             routes to tunnel peers (like ovs/route/show)
  tnl-route-add PREFIX/LEN [GW]  route PREFIX to tunnel peers via GW (on an underlay's subnet)
  tnl-route-del PREFIX/LEN   remove a route added by hand
  add-tlv-map MAPPINGS       Geneve options as fields: '{class=C,type=T,len=4|8}->tun_metadataN'
  del-tlv-map [MAPPINGS]     remove mappings (all without MAPPINGS)
  dump-tlv-map               the Geneve option mappings (like ovs-ofctl dump-tlv-map)
  dump-conntrack [zone=N]    tracked connections (like dpctl/dump-conntrack)
  flush-conntrack [zone=N]   forget tracked connections (like dpctl/flush-conntrack)
  conntrack-stats            connections by protocol and the tracker's counters (like dpctl/ct-stats-show)
  ct-set-maxconns N          most connections tracked (default 3000000, as OVS)
  ct-set-limits [default=N] [zone=Z,limit=N]...  most connections per zone (0: none)
  ct-get-limits [zone=Z[,Z...]]  the limits and each zone's count (like dpctl/ct-get-limits)
  ct-del-limits zone=Z[,Z...]    back to the default limit
  ct-set-timeout-policy zone=N ATTR=SECS[,...]  a zone's timeouts (OVS's add-zone-tp attributes:
                             tcp_syn_sent tcp_syn_recv tcp_established tcp_fin_wait tcp_time_wait
                             tcp_close udp_first udp_single udp_multiple icmp_first icmp_reply)
  ct-get-timeout-policy zone=N | ct-del-timeout-policy zone=N  show it, or back to the defaults
  fdb-show [br0]             MACs NORMAL learned: port, VLAN, MAC, age (like fdb/show)
  fdb-flush [br0]            forget every learned MAC (like fdb/flush)
  fdb-stats-show [br0]       the MAC table's size and counters (like fdb/stats-show)
  ipf-get-status [-m]        fragment reassembly before tracking: settings, counters (-m: lists held)
  ipf-set-enabled v4|v6      reassemble fragments before tracking (the default, as OVS)
  ipf-set-disabled v4|v6     track fragments as they are (each +inv)
  ipf-set-min-frag v4|v6 N   smallest fragment but the last taken (default 1200 / 1280 bytes; at least 400)
  ipf-set-max-nfrags N       most fragments held at once (default 1000; at most 5000)";

/// The version after `rules`, to change: a copy holding what the PMDs'
/// `learn` actions added since (every version the control plane makes
/// takes them).
fn next_version(rules: &RuleSet) -> RuleSet {
    let mut next = rules.clone();
    next.adopt_learned();
    next
}

impl Control {
    /// Control state for datapath threads running `rules`.
    pub fn new(
        rules: RuleSet,
        pmds: Vec<(Placement, PmdSender)>,
        start: Instant,
        n_rxq: Option<usize>,
    ) -> Self {
        // Rules the PMDs learn come here (adopt_learned).
        rules.take_learned();
        Control {
            bridge: 0,
            extra_bridges: Arc::default(),
            published: Arc::new(Mutex::new(vec![Some(Arc::new(rules.clone()))])),
            rules: Arc::new(Mutex::new(rules)),
            first: None,
            pmds: Arc::new(Mutex::new(pmds)),
            start,
            n_rxq,
            reconfig: Arc::default(),
            rxq_cycles_base: Mutex::new(HashMap::new()),
            pmd_cycles_base: Mutex::new(Vec::new()),
            port_watcher: Mutex::new(None),
            port_config: Mutex::new(HashMap::new()),
            patch_names: Mutex::default(),
            of_status: Mutex::new(None),
            specs: Arc::default(),
            flow_mods: [AtomicU64::new(0), AtomicU64::new(0)],
            vlan_limit: AtomicUsize::new(DatapathConfig::default().vlan_limit),
            captures: Arc::default(),
            manual: Arc::default(),
        }
    }

    /// Tells it the datapath's `vlan-limit` setting (0: every tag).
    pub fn set_vlan_limit(&self, setting: usize) {
        self.vlan_limit.store(setting, Ordering::Relaxed);
    }

    /// The datapath's `vlan-limit` setting (0: every tag).
    pub fn vlan_limit(&self) -> usize {
        self.vlan_limit.load(Ordering::Relaxed)
    }

    /// The bridge's own state (`NORMAL`'s MAC table and VLAN modes, its
    /// mirrors), the same whatever rule version runs.
    pub fn bridge_state(&self) -> Arc<sluice_bridge::Bridge> {
        Arc::clone(self.rules.lock().expect("rules").bridge())
    }

    /// Tells it the ports the switch started with.
    pub fn set_port_specs(&self, specs: Vec<(u32, PortSpec)>) {
        *self.specs.lock().expect("specs") = specs;
    }

    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// `dump-odp-flows [-m] [--filter MATCH]`: the megaflows in ODP text
    /// as `ovs-appctl dpctl/dump-flows` prints them, under a line naming
    /// each PMD that has any (OVS's `flow-dump from pmd on cpu core: N`);
    /// with a filter (a match in the flow language, `in_port` a datapath
    /// port number), those whose key it matches.
    fn dump_odp_flows(&self, args: &[&str]) -> Result<String, String> {
        const USAGE: &str = "dump-odp-flows [-m] [--filter MATCH]";
        let mut verbose = false;
        let mut filter = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match *a {
                "-m" | "--more" => verbose = true,
                "--filter" => {
                    let Some(f) = it.next() else {
                        return Err(format!("--filter: which match? usage: {USAGE}"));
                    };
                    let spec =
                        sluice_classifier::parse_flow(f, sluice_classifier::Require::NoActions)
                            .map_err(|e| format!("--filter '{f}': {e}"))?;
                    filter = Some(Box::new(spec.matcher));
                }
                other => return Err(format!("'{other}': usage: {USAGE}")),
            }
        }
        let placements: Vec<crate::pmd::Placement> = self
            .pmds
            .lock()
            .expect("pmd senders")
            .iter()
            .map(|(p, _)| *p)
            .collect();
        let per_pmd = self.ask_all(|tx| PmdCommand::DumpOdpFlows(verbose, filter.clone(), tx))?;
        let mut out = String::new();
        for (p, flows) in placements.iter().zip(per_pmd) {
            if flows.is_empty() {
                continue;
            }
            match p.core {
                Some(c) => out += &format!("flow-dump from pmd on cpu core: {c}\n"),
                None => out += &format!("flow-dump from pmd thread {}:\n", p.index),
            }
            for f in flows {
                out += &f;
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// Sends every PMD the command `make` builds for it (by PMD index) and
    /// waits for all the answers, in PMD order. The PMDs work on it at
    /// once, not one after the other.
    fn ask_each<T>(
        &self,
        mut make: impl FnMut(usize, Sender<T>) -> PmdCommand,
    ) -> Result<Vec<T>, String> {
        let pmds = self.pmds.lock().expect("pmd senders");
        let mut waiting = Vec::with_capacity(pmds.len());
        for (i, (_, pmd)) in pmds.iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            pmd.send(make(i, tx))
                .map_err(|_| "the datapath has stopped".to_string())?;
            waiting.push(rx);
        }
        waiting
            .into_iter()
            .map(|rx| {
                rx.recv_timeout(PMD_TIMEOUT)
                    .map_err(|_| "the datapath did not answer".to_string())
            })
            .collect()
    }

    /// Asks PMD `i` alone.
    fn ask_one<T>(
        &self,
        i: usize,
        make: impl FnOnce(Sender<T>) -> PmdCommand,
    ) -> Result<T, String> {
        let (tx, rx) = mpsc::channel();
        self.pmds
            .lock()
            .expect("pmd senders")
            .get(i)
            .ok_or_else(|| format!("no datapath thread {i}"))?
            .1
            .send(make(tx))
            .map_err(|_| "the datapath has stopped".to_string())?;
        rx.recv_timeout(PMD_TIMEOUT)
            .map_err(|_| "the datapath did not answer".to_string())
    }

    /// [`ask_each`](Self::ask_each) with the same command for every PMD.
    fn ask_all<T>(&self, make: impl Fn(Sender<T>) -> PmdCommand) -> Result<Vec<T>, String> {
        self.ask_each(|_, tx| make(tx))
    }

    /// Makes the datapath's tunnel state that of `specs` (every bridge's
    /// ports, by datapath number), keeping what the old one learned, and
    /// publishes it.
    fn refresh_tunnels(&self, specs: &[(u32, PortSpec)]) -> Result<(), String> {
        let mut rules = self.first_rules().lock().expect("rules");
        let new = crate::tunnels::from_ports(specs, &rules.tlv_map())?;
        if let (Some(n), Some(o)) = (&new, rules.tunnels()) {
            n.adopt(o);
        }
        rules.set_tunnels(new);
        self.publish_first(&rules)
    }

    /// The datapath's tunnel state (the first bridge's rules hold it).
    pub(crate) fn tunnels(&self) -> Option<Arc<sluice_classifier::tunnel::Tunnels>> {
        self.first_rules().lock().expect("rules").tunnels().cloned()
    }

    /// The datapath's first bridge's rules (this bridge's, on it).
    fn first_rules(&self) -> &Mutex<RuleSet> {
        self.first.as_deref().unwrap_or(&self.rules)
    }

    /// Publishes the first bridge's rules `rules` (from any bridge).
    fn publish_first(&self, rules: &RuleSet) -> Result<(), String> {
        if self.bridge == 0 {
            return self.publish(rules);
        }
        let snapshot = Arc::new(rules.clone());
        self.record_published_at(0, Some(Arc::clone(&snapshot)));
        self.ask_all(|tx| PmdCommand::SetRules(Arc::clone(&snapshot), tx))
            .map(|_| ())
    }

    /// Publishes `rules` and waits until every datapath thread runs them.
    fn publish(&self, rules: &RuleSet) -> Result<(), String> {
        let snapshot = Arc::new(rules.clone());
        self.record_published(Some(Arc::clone(&snapshot)));
        match self.bridge {
            0 => self.ask_all(|tx| PmdCommand::SetRules(Arc::clone(&snapshot), tx)),
            b => self.ask_all(|tx| PmdCommand::SetBridgeRules(b, Some(Arc::clone(&snapshot)), tx)),
        }
        .map(|_| ())
    }

    /// Runs one command.
    pub fn execute(&self, req: &Request) -> Result<String, String> {
        let strict = req.args.iter().any(|a| a == "--strict");
        let rest: Vec<&str> = req
            .args
            .iter()
            .map(String::as_str)
            .filter(|a| *a != "--strict")
            .collect();
        match req.cmd.as_str() {
            "pmd-stats" => Ok(self
                .ask_all(PmdCommand::Stats)?
                .iter()
                .map(crate::pmd_show::pmd_stats)
                .collect()),
            "pmd-stats-clear" => self.ask_all(PmdCommand::ClearStats).map(|_| String::new()),
            "pmd-rxq-show" => Ok(self
                .ask_all(PmdCommand::Stats)?
                .iter()
                .map(crate::pmd_show::rxq_show)
                .collect()),
            "trace" => self.trace(&rest),
            "dump-megaflows" => {
                let per_pmd = self.ask_all(PmdCommand::DumpMegaflows)?;
                Ok(per_pmd.concat().join("\n"))
            }
            "dump-odp-flows" => self.dump_odp_flows(&rest),
            // As `ovs-appctl dpctl/del-flows`: nothing printed.
            "del-megaflows" => self
                .ask_all(PmdCommand::PurgeMegaflows)
                .map(|_| String::new()),
            "capture" => self.capture(&rest),
            "capture-stop" => {
                let [port] = rest.as_slice() else {
                    return Err("capture-stop PORT".into());
                };
                let port: u32 = port
                    .parse()
                    .map_err(|_| format!("'{port}' is not a port number"))?;
                if !self.captures.has(port) {
                    return Err(format!("port {port} is not being captured"));
                }
                self.ask_all(|tx| PmdCommand::RemoveTap(port, tx))?;
                self.captures.stop(port)
            }
            "capture-show" => Ok(self.captures.show()),
            "pmd-perf-show" => {
                let o = crate::perf_show::ShowOptions::parse(&rest)?;
                Ok(self
                    .ask_all(PmdCommand::Perf)?
                    .iter()
                    .map(|s| crate::perf_show::show(s, &o))
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
            "set" => self.set(&rest),
            "dump-ports" => {
                let snaps = self.ask_all(PmdCommand::Stats)?;
                let per_pmd: Vec<_> = snaps.into_iter().map(|s| s.ports).collect();
                Ok(merge_ports(&per_pmd)
                    .iter()
                    .map(crate::report::port_text)
                    .collect())
            }
            "add-port" => {
                let _reconfig = self.reconfig.lock().expect("reconfig");
                let arg = rest.join(" ");
                let (ofport, spec) = crate::config::parse_port_arg(&arg)?;
                // (The datapath's number: `ofport` on the first bridge.)
                let n = self.dp_port_checked(ofport, &spec)?;
                let mut specs = self.specs.lock().expect("specs");
                {
                    let mut all: Vec<(u32, &PortSpec)> =
                        specs.iter().map(|(m, s)| (*m, s)).collect();
                    all.push((n, &spec));
                    sluice_port::spec::check_files(&all)?;
                }
                let tunnel_change = matches!(spec, PortSpec::Tunnel(_) | PortSpec::Underlay { .. });
                if tunnel_change {
                    let mut all = specs.clone();
                    all.push((n, spec.clone()));
                    let tlv = self.rules.lock().expect("rules").tlv_map();
                    crate::tunnels::from_ports(&all, &tlv)?;
                }
                let n_pmds = self.pmds.lock().expect("pmd senders").len();
                let count = crate::rxq_assign::queue_count(self.n_rxq, &spec, n_pmds)?;
                let queues =
                    sluice_port::open_port_queues(&spec, count).map_err(|e| e.to_string())?;
                let dealt = deal(queues, n_pmds)?;
                let mut own = dealt.own.into_iter();
                let added = self.ask_each(|qid, tx| {
                    PmdCommand::AddPort(n, qid as u32, own.next().expect("one per PMD"), tx)
                })?;
                let mut failed = added.iter().find_map(|r| r.clone().err());
                if failed.is_none() {
                    for (pmd, q) in dealt.extra {
                        let r = self.ask_one(pmd, |tx| PmdCommand::AddRxq(n, q, tx))?;
                        if let Err(e) = r {
                            failed = Some(e.error);
                            break;
                        }
                    }
                }
                if let Some(e) = failed {
                    // All PMDs or none: take it back where it went in.
                    for (i, _) in added.iter().enumerate().filter(|(_, r)| r.is_ok()) {
                        let _ = self.ask_one(i, |tx| PmdCommand::DelPort(n, tx));
                    }
                    return Err(e);
                }
                specs.push((n, spec.clone()));
                if tunnel_change {
                    self.refresh_tunnels(&specs)?;
                }
                drop(specs);
                if let PortSpec::Bridged { vlan, .. } = &spec {
                    self.rules
                        .lock()
                        .expect("rules")
                        .bridge()
                        .set_port(ofport, vlan.clone());
                }
                self.port_changed(PortChange::Added, ofport, &spec.to_string());
                Ok(format!(
                    "added port {ofport} ({spec}){}",
                    if count > n_pmds {
                        format!(" with {count} rx queues")
                    } else {
                        String::new()
                    }
                ))
            }
            c if c.starts_with("tnl-") => {
                crate::tunnels::command(c, &rest, self.tunnels().as_deref())
            }
            c @ ("fdb-show" | "fdb-flush" | "fdb-stats-show") => {
                let bridge = Arc::clone(self.rules.lock().expect("rules").bridge());
                fdb_command(c, &rest, &bridge)
            }
            c @ ("dump-conntrack"
            | "flush-conntrack"
            | "conntrack-stats"
            | "ct-set-maxconns"
            | "ct-set-limits"
            | "ct-get-limits"
            | "ct-del-limits"
            | "ct-set-timeout-policy"
            | "ct-get-timeout-policy"
            | "ct-del-timeout-policy"
            | "ipf-get-status"
            | "ipf-set-enabled"
            | "ipf-set-disabled"
            | "ipf-set-min-frag"
            | "ipf-set-max-nfrags") => {
                let ct = Arc::clone(self.rules.lock().expect("rules").conntrack());
                crate::ctcmd::command(c, &rest, &ct)
            }
            c @ ("add-tlv-map" | "del-tlv-map" | "dump-tlv-map") => {
                // One map for the datapath, as its tunnel state.
                let (answer, new) = crate::tunnels::tlv_command(c, &rest, &self.tlv_map())?;
                if let Some(map) = new {
                    self.change_tlv_map(|m| {
                        *m = map;
                        Ok(())
                    })?
                    .map_err(|e| format!("{c}: {e}"))?;
                }
                Ok(answer)
            }
            "of-show" => match self.of_status.lock().expect("of status").as_ref() {
                Some(f) => Ok(f()),
                None => Err("no OpenFlow channel: start with --controller or --listen".into()),
            },
            "pmd-rxq-rebalance" => {
                let _reconfig = self.reconfig.lock().expect("reconfig");
                self.rebalance()
            }
            "set-port" => {
                let _reconfig = self.reconfig.lock().expect("reconfig");
                let (n, new) = crate::config::parse_port_arg(&rest.join(" "))?;
                self.set_port(n, new)
            }
            "del-port" => {
                let _reconfig = self.reconfig.lock().expect("reconfig");
                let [n] = rest.as_slice() else {
                    return Err("del-port needs a port number".into());
                };
                let ofport: u32 = n
                    .parse()
                    .map_err(|_| format!("'{n}' is not a port number"))?;
                let n = self.dp_port(ofport);
                {
                    // Translations stop using it before it goes.
                    let specs = self.specs.lock().expect("specs");
                    if specs.iter().any(|(m, s)| {
                        *m == n && matches!(s, PortSpec::Tunnel(_) | PortSpec::Underlay { .. })
                    }) {
                        let rest: Vec<_> = specs.iter().filter(|(m, _)| *m != n).cloned().collect();
                        self.refresh_tunnels(&rest)?;
                    }
                }
                let reports = self
                    .ask_all(|tx| PmdCommand::DelPort(n, tx))?
                    .into_iter()
                    .map(|r| r.map(|p| vec![p]))
                    .collect::<Result<Vec<_>, _>>()?;
                let merged = merge_ports(&reports);
                self.specs.lock().expect("specs").retain(|(m, _)| *m != n);
                // Its capture ends with it (the taps went with the port).
                if self.captures.has(n) {
                    let _ = self.captures.stop(n);
                }
                // Its VLAN mode and the MACs learned on it go with it.
                self.rules
                    .lock()
                    .expect("rules")
                    .bridge()
                    .remove_port(ofport);
                if let Some(p) = merged.first() {
                    self.port_changed(PortChange::Deleted, ofport, &p.name);
                }
                Ok(format!(
                    "removed port {ofport}\n{}",
                    merged
                        .iter()
                        .map(crate::report::port_text)
                        .collect::<String>()
                ))
            }
            "dump-flows" => {
                // Rule counters are pushed from the megaflows in bulk:
                // bring them up to date first.
                self.ask_all(PmdCommand::CreditRules)?;
                let rules = self.rules.lock().expect("rules");
                let now = self.now_us();
                Ok(rules
                    .iter()
                    .map(|r| r.dump(now))
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
            "add-flow" | "add-flows" | "replace-flows" | "mod-flows" | "del-flows" => {
                self.flow_mod(&req.cmd, &rest, strict)
            }
            other => Err(format!("unknown command '{other}'; commands:\n{COMMANDS}")),
        }
    }

    /// `set-port`: port `n` becomes `new` in place, where only its MTU and
    /// VLAN options differ (the port, its queues and its interface stay).
    fn set_port(&self, ofport: u32, new: PortSpec) -> Result<String, String> {
        let n = self.dp_port(ofport);
        let mut specs = self.specs.lock().expect("specs");
        let Some(old) = specs.iter().find(|(m, _)| *m == n).map(|(_, s)| s.clone()) else {
            return Err(format!("no port {ofport}"));
        };
        let ((old_base, old_vlan), (new_base, new_vlan)) = (old.split_vlan(), new.split_vlan());
        if old_base.with_mtu(None) != new_base.with_mtu(None) {
            return Err(format!(
                "port {ofport} is {old}: only its mtu and VLAN options (tag, trunks, vlan_mode) change in place"
            ));
        }
        let mut done = Vec::new();
        if let Some(m) = new.mtu().filter(|m| Some(*m) != old.mtu()) {
            for r in self.ask_all(|tx| PmdCommand::SetMtu(n, m, tx))? {
                r?;
            }
            done.push(format!("mtu {m}"));
        }
        if old_vlan != new_vlan {
            let v = new_vlan.cloned().unwrap_or_default();
            self.rules
                .lock()
                .expect("rules")
                .bridge()
                .set_port(ofport, v);
            done.push("VLAN mode".to_string());
        }
        // An mtu option taken away leaves the interface's MTU as it is.
        let kept = if new.mtu().is_none() && old.mtu().is_some() {
            new.with_mtu(old.mtu())
        } else {
            new
        };
        for (m, s) in specs.iter_mut() {
            if *m == n {
                *s = kept.clone();
            }
        }
        Ok(if done.is_empty() {
            format!("port {ofport}: nothing to change ({kept})")
        } else {
            format!("port {ofport}: {} changed ({kept})", done.join(" and "))
        })
    }

    /// Removes the rules whose idle or hard timeout has passed (their use
    /// brought up to date from the PMDs first), publishes the new version,
    /// and returns them with why.
    /// Removes expired connections from the tracker.
    pub(crate) fn sweep_conntrack(&self) {
        let (ct, bridge) = {
            let r = self.rules.lock().expect("rules");
            (Arc::clone(r.conntrack()), Arc::clone(r.bridge()))
        };
        ct.sweep(ct.now_ms());
        // NORMAL's MAC table ages too (what went, the PMDs revalidate).
        bridge.macs.run(bridge.now_ms());
    }

    /// Fails open (every packet NORMAL above table 0's rules) or stops,
    /// publishing the change.
    pub(crate) fn set_fail_open(&self, open: bool) -> Result<(), String> {
        self.change_rules(|r| {
            r.set_fail_open(open);
            Ok(())
        })
        .map(|_| ())
    }

    /// Puts the rules the PMDs' `learn` actions added into the rules and
    /// publishes them (the PMD that learned one has it already): every
    /// new version takes them ([`next_version`]).
    pub(crate) fn adopt_learned(&self) -> Result<(), String> {
        self.change_rules(|_| Ok(())).map(|_| ())
    }

    pub(crate) fn expire_rules(&self) -> Result<Vec<(Arc<Rule>, Removal)>, String> {
        if !self.rules.lock().expect("rules").has_timeouts() {
            return Ok(Vec::new());
        }
        self.ask_all(PmdCommand::CreditRules)?;
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let gone = next.expire_with_reasons(self.now_us());
        if !gone.is_empty() {
            self.publish(&next)?;
            *rules = next;
        }
        Ok(gone)
    }

    /// Runs `f` on the rules with their counters brought up to date, and
    /// the switch clock.
    pub(crate) fn with_rules<T>(&self, f: impl FnOnce(&RuleSet, u64) -> T) -> Result<T, String> {
        self.ask_all(PmdCommand::CreditRules)?;
        let rules = self.rules.lock().expect("rules");
        Ok(f(&rules, self.now_us()))
    }

    /// Every PMD's full snapshot (counters, ports, cache occupancy), in
    /// PMD order.
    pub(crate) fn snapshots(&self) -> Result<Vec<crate::pmd::PmdSnapshot>, String> {
        self.ask_all(PmdCommand::Stats)
    }

    /// Flow-mods applied and refused so far.
    pub(crate) fn flow_mod_counts(&self) -> [u64; 2] {
        self.flow_mods.each_ref().map(|c| c.load(Ordering::Relaxed))
    }
}

/// `fdb-show`, `fdb-flush`, `fdb-stats-show` (as `ovs-appctl fdb/show
/// br0`...): Sluice is one bridge, `br0`; a bridge name given must be it.
fn fdb_command(cmd: &str, args: &[&str], b: &sluice_bridge::Bridge) -> Result<String, String> {
    match args {
        [] | ["br0"] => {}
        [name] => {
            return Err(format!(
                "no such bridge '{name}' (Sluice is one bridge, br0)"
            ))
        }
        _ => return Err(format!("{cmd} takes at most a bridge name")),
    }
    Ok(match cmd {
        "fdb-show" => b.macs.show(b.now_ms()),
        "fdb-flush" => {
            b.macs.flush();
            "table successfully flushed\n".into()
        }
        _ => b.macs.stats("br0"),
    })
}
