//! The control plane's owner of the rule tables, ports and PMD handles
//! ([`Control`]), and the text commands of `sluice ctl` it answers
//! ([`Control::execute`]): statistics, megaflows, settings, and the rule
//! commands `ovs-ofctl` users know. A rule command returns only once every
//! datapath thread runs the new rules (see [`crate::pmd`]). The OpenFlow
//! channel (`ofchannel`) and the control socket
//! (`ctl_socket`) are its two front ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_classifier::table::{flag, Removal, Selection};
use sluice_classifier::Rule;
use sluice_classifier::{parse_flow, Require, RuleSet};
use sluice_datapath::{DatapathConfig, PortConfig};
use sluice_openflow::convert::{outputs_to, FlowModOp};
use sluice_openflow::OfError;
use sluice_port::PortSpec;

mod observe;

use crate::auto_lb::{AutoLb, Verdict};
use crate::pmd::{Placement, PmdCommand};
use crate::report::merge_ports;
use crate::rxq_assign::{assign_by_cycles, deal, Plan, Rxq};

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
    rules: Mutex<RuleSet>,
    pmds: Mutex<Vec<(Placement, Sender<PmdCommand>)>>,
    start: Instant,
    /// `--n-rxq`, for ports added at run time.
    n_rxq: Option<usize>,
    /// Held by port changes and rxq moves, one at a time (a queue in
    /// flight between two PMDs must not meet its port's removal).
    reconfig: Mutex<()>,
    /// Each rx queue's cycles at the last rebalance, by (port, queue): a
    /// rebalance weighs the load since the one before.
    rxq_cycles_base: Mutex<HashMap<(u32, u32), u64>>,
    /// Each PMD's (processing, idle) cycles at the last measurement.
    pmd_cycles_base: Mutex<Vec<(u64, u64)>>,
    port_watcher: Mutex<Option<PortWatcher>>,
    /// Ports' OpenFlow config bits set by PORT_MOD.
    port_config: Mutex<HashMap<u32, u32>>,
    of_status: Mutex<Option<Box<dyn Fn() -> String + Send + Sync>>>,
    /// The ports' specs, by number: an added port's capture files are
    /// checked against them.
    specs: Mutex<Vec<(u32, PortSpec)>>,
    /// Flow-mods applied (OpenFlow's one by one, `sluice ctl`'s a rule
    /// each) and refused, for `--metrics`.
    pub(crate) flow_mods: [AtomicU64; 2],
    /// The datapath's `vlan-limit` setting, for `trace --packet`.
    vlan_limit: AtomicUsize,
    /// Live captures (`capture`).
    captures: Arc<crate::capture::Captures>,
}

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

/// What applying flow-mods gave: each one's error, if any, by position,
/// and the rules deleted (the channel tells those that asked for
/// FLOW_REMOVED).
pub(crate) type Applied = (Vec<Option<OfError>>, Vec<Arc<Rule>>);

/// What `set` takes.
const SET_USAGE: &str =
    "tx-flush-interval=auto|US [port=N], pmd-perf-metrics=true|false, pmd-perf-log-us=US";

/// The commands, for `sluice ctl --help` and errors.
pub const COMMANDS: &str = "\
  pmd-stats                  datapath counters per PMD (like dpif-netdev/pmd-stats-show)
  pmd-stats-clear            zero them
  pmd-rxq-show               which PMD polls which rx queue, and each queue's share of its cycles
  dump-megaflows             the megaflows (like dpctl/dump-flows)
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
        pmds: Vec<(Placement, Sender<PmdCommand>)>,
        start: Instant,
        n_rxq: Option<usize>,
    ) -> Self {
        // Rules the PMDs learn come here (adopt_learned).
        rules.take_learned();
        Control {
            rules: Mutex::new(rules),
            pmds: Mutex::new(pmds),
            start,
            n_rxq,
            reconfig: Mutex::new(()),
            rxq_cycles_base: Mutex::new(HashMap::new()),
            pmd_cycles_base: Mutex::new(Vec::new()),
            port_watcher: Mutex::new(None),
            port_config: Mutex::new(HashMap::new()),
            of_status: Mutex::new(None),
            specs: Mutex::new(Vec::new()),
            flow_mods: [AtomicU64::new(0), AtomicU64::new(0)],
            vlan_limit: AtomicUsize::new(DatapathConfig::default().vlan_limit),
            captures: Arc::default(),
        }
    }

    /// Tells it the datapath's `vlan-limit` setting (0: every tag).
    pub fn set_vlan_limit(&self, setting: usize) {
        self.vlan_limit.store(setting, Ordering::Relaxed);
    }

    /// Tells it the ports the switch started with.
    pub fn set_port_specs(&self, specs: Vec<(u32, PortSpec)>) {
        *self.specs.lock().expect("specs") = specs;
    }

    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
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

    /// Makes the tunnel state that of `specs` (keeping what the old one
    /// learned) and publishes it.
    fn refresh_tunnels(&self, specs: &[(u32, PortSpec)]) -> Result<(), String> {
        let mut rules = self.rules.lock().expect("rules");
        let new = crate::tunnels::from_ports(specs, &rules.tlv_map())?;
        if let (Some(n), Some(o)) = (&new, rules.tunnels()) {
            n.adopt(o);
        }
        rules.set_tunnels(new);
        self.publish(&rules)
    }

    fn tunnels(&self) -> Option<Arc<sluice_classifier::tunnel::Tunnels>> {
        self.rules.lock().expect("rules").tunnels().cloned()
    }

    /// Publishes `rules` and waits until every datapath thread runs them.
    fn publish(&self, rules: &RuleSet) -> Result<(), String> {
        let snapshot = Arc::new(rules.clone());
        self.ask_all(|tx| PmdCommand::SetRules(Arc::clone(&snapshot), tx))
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
                let (n, spec) = crate::config::parse_port_arg(&arg)?;
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
                        .set_port(n, vlan.clone());
                }
                self.port_changed(PortChange::Added, n, &spec.to_string());
                Ok(format!(
                    "added port {n} ({spec}){}",
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
                let mut rules = self.rules.lock().expect("rules");
                let (answer, new) = crate::tunnels::tlv_command(c, &rest, &rules.tlv_map())?;
                if let Some(map) = new {
                    rules.set_tlv_map(map)?;
                    self.publish(&rules)?;
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
            "del-port" => {
                let _reconfig = self.reconfig.lock().expect("reconfig");
                let [n] = rest.as_slice() else {
                    return Err("del-port needs a port number".into());
                };
                let n: u32 = n
                    .parse()
                    .map_err(|_| format!("'{n}' is not a port number"))?;
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
                self.rules.lock().expect("rules").bridge().remove_port(n);
                if let Some(p) = merged.first() {
                    self.port_changed(PortChange::Deleted, n, &p.name);
                }
                Ok(format!(
                    "removed port {n}\n{}",
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

    /// `pmd-rxq-rebalance`: measures each rx queue's load since the last
    /// rebalance, plans with [`assign_by_cycles`], and moves the queues
    /// (each PMD giving one up sends what it has queued first).
    fn rebalance(&self) -> Result<String, String> {
        let (rxqs, busy) = self.measure_load()?;
        let plan = assign_by_cycles(&rxqs, busy.len());
        self.apply_moves(&plan)
    }

    /// One look of `pmd-auto-lb` (see [`crate::auto_lb`]): measures, plans
    /// and moves the queues only if `params` judge it worth it. Returns
    /// what moved, or `None` when nothing did.
    pub(crate) fn auto_rebalance(&self, params: &AutoLb) -> Result<Option<String>, String> {
        let _reconfig = self.reconfig.lock().expect("reconfig");
        let (rxqs, busy) = self.measure_load()?;
        let plan = assign_by_cycles(&rxqs, busy.len());
        match params.judge(&busy, &plan) {
            Verdict::Rebalance(gain) => {
                let busy: Vec<String> = busy.iter().map(|b| format!("{b:.0} %")).collect();
                Ok(Some(format!(
                    "PMDs busy {}; moving queues lowers the busiest PMD's load by {gain:.0} %\n{}",
                    busy.join(", "),
                    self.apply_moves(&plan)?
                )))
            }
            Verdict::NotOverloaded(_) | Verdict::TooLittleGain(_) => Ok(None),
        }
    }

    /// Each rx queue's load and each PMD's busy share (% of its cycles
    /// spent on packets) since the last measurement, which this one
    /// becomes.
    fn measure_load(&self) -> Result<(Vec<Rxq>, Vec<f64>), String> {
        let snaps = self.ask_all(PmdCommand::Stats)?;
        // Below the base: the counters were cleared since.
        let since = |now: u64, seen: u64| if now >= seen { now - seen } else { now };
        let mut base = self.rxq_cycles_base.lock().expect("rxq cycles");
        let mut pmd_base = self.pmd_cycles_base.lock().expect("pmd cycles");
        pmd_base.resize(snaps.len(), (0, 0));
        let mut rxqs = Vec::new();
        let mut busy = Vec::with_capacity(snaps.len());
        for (pmd, snap) in snaps.iter().enumerate() {
            for p in snap.ports.iter().filter(|p| p.receives) {
                for q in &p.rxqs {
                    let seen = base.get(&(p.ofport, q.qid)).copied().unwrap_or(0);
                    rxqs.push(Rxq {
                        ofport: p.ofport,
                        qid: q.qid,
                        pmd,
                        load: since(q.rx_cycles, seen),
                        movable: !q.home,
                    });
                    base.insert((p.ofport, q.qid), q.rx_cycles);
                }
            }
            let (proc_seen, idle_seen) = pmd_base[pmd];
            let st = &snap.stats;
            let processing = since(st.processing_cycles, proc_seen);
            let idle = since(st.idle_cycles, idle_seen);
            pmd_base[pmd] = (st.processing_cycles, st.idle_cycles);
            busy.push(processing as f64 * 100.0 / (processing + idle).max(1) as f64);
        }
        Ok((rxqs, busy))
    }

    /// Moves the queues `plan` names and says what moved.
    fn apply_moves(&self, plan: &Plan) -> Result<String, String> {
        let total = plan.before.iter().sum::<u64>().max(1) as f64;
        let share = |l: u64| l as f64 * 100.0 / total;
        let mut out = String::new();
        for m in &plan.moves {
            let q = self.ask_one(m.from, |tx| PmdCommand::TakeRxq(m.ofport, m.qid, tx))??;
            if let Err(refused) = self.ask_one(m.to, |tx| PmdCommand::AddRxq(m.ofport, q, tx))? {
                // Back where it was, so the queue is still polled.
                let back =
                    self.ask_one(m.from, |tx| PmdCommand::AddRxq(m.ofport, refused.queue, tx))?;
                return Err(format!(
                    "port {} queue {}: pmd {} refused it ({}){}",
                    m.ofport,
                    m.qid,
                    m.to,
                    refused.error,
                    if back.is_ok() {
                        "; it stays on pmd ".to_string() + &m.from.to_string()
                    } else {
                        "; it could not go back and is closed".to_string()
                    }
                ));
            }
            out += &format!(
                "port {} queue-id {}: pmd {} -> pmd {} ({:.0} % of the measured load)\n",
                m.ofport,
                m.qid,
                m.from,
                m.to,
                share(m.load)
            );
        }
        let loads = |l: &[u64]| {
            l.iter()
                .enumerate()
                .map(|(i, &x)| format!("pmd {i} {:.0} %", share(x)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out += &format!(
            "moved {} rx queues; load by PMD before: {}; after (estimated): {}",
            plan.moves.len(),
            loads(&plan.before),
            loads(&plan.after)
        );
        Ok(out)
    }

    /// Applies OpenFlow flow-mods as one new version of the rules (a burst
    /// read together costs one copy of the rule set, not one per message)
    /// and returns once every PMD runs it. Each op's error, if any, by
    /// position.
    /// Also returns the rules deleted that asked for FLOW_REMOVED.
    /// The ops come one at a time (decoded as they are applied: a burst of
    /// ten thousand is not held as a list of flow specs).
    pub(crate) fn apply_flow_mods(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String> {
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let now = self.now_us();
        let mut removed = Vec::new();
        let errs = ops
            .into_iter()
            .map(|op| match op {
                Err(e) => Some(e),
                Ok(
                    FlowModOp::Add(spec)
                    | FlowModOp::Modify(spec, _)
                    | FlowModOp::ModifyOrAdd(spec, _),
                ) if next.refusal(&spec.actions).is_some() => {
                    next.refusal(&spec.actions).map(of_refusal)
                }
                Ok(FlowModOp::Add(spec)) => {
                    if spec.flags & flag::CHECK_OVERLAP != 0 && next.overlaps(&spec) {
                        return Some(OfError::OVERLAP);
                    }
                    next.add_owned(spec, now);
                    None
                }
                Ok(FlowModOp::Modify(spec, how)) => {
                    next.modify(&spec, how, !spec.table_given);
                    None
                }
                Ok(FlowModOp::ModifyOrAdd(spec, how)) => {
                    if next.modify(&spec, how, !spec.table_given) == 0 {
                        next.add_owned(spec, now);
                    }
                    None
                }
                Ok(FlowModOp::Delete {
                    spec,
                    how,
                    all_tables,
                    out_port,
                }) => {
                    let gone = next.delete_if(&spec, how, all_tables, |r| outputs_to(r, out_port));
                    removed.extend(gone);
                    None
                }
            })
            .collect::<Vec<_>>();
        let refused = errs.iter().filter(|e| e.is_some()).count() as u64;
        self.flow_mods[0].fetch_add(errs.len() as u64 - refused, Ordering::Relaxed);
        self.flow_mods[1].fetch_add(refused, Ordering::Relaxed);
        if next.version() != rules.version() {
            self.publish(&next)?;
            *rules = next;
        }
        Ok((errs, removed))
    }

    /// The error that refuses a packet-out's `actions`, if the rule set
    /// refuses them ([`RuleSet::refusal`]).
    pub(crate) fn refusal(&self, actions: &[sluice_classifier::Action]) -> Option<OfError> {
        let rules = self.rules.lock().expect("rules");
        rules.refusal(actions).map(of_refusal)
    }

    /// Which fields set_field may write (`--set-field`).
    pub(crate) fn set_field_mode(&self) -> sluice_classifier::table::SetFieldMode {
        self.rules.lock().expect("rules").modes().set_field
    }

    /// Changes the rule set with `f` (a group change) and, when it made a
    /// new version, publishes it to every PMD before returning.
    pub(crate) fn change_rules<T>(
        &self,
        f: impl FnOnce(&mut RuleSet) -> Result<T, OfError>,
    ) -> Result<Result<T, OfError>, String> {
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let out = f(&mut next);
        if out.is_ok() && next.version() != rules.version() {
            self.publish(&next)?;
            *rules = next;
        }
        Ok(out)
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

    /// Every port's counters, summed over the PMDs.
    /// (Without the cache occupancy a full snapshot scans for: a PMD
    /// answers this in microseconds.)
    pub(crate) fn port_reports(&self) -> Result<Vec<sluice_datapath::PortReport>, String> {
        let per_pmd = self.ask_all(PmdCommand::PortReports)?;
        Ok(merge_ports(&per_pmd))
    }

    /// Forwards a controller's packet by `actions` as if it came in on
    /// `in_port`, on the first PMD, through its output batches.
    pub(crate) fn packet_out(
        &self,
        data: Vec<u8>,
        in_port: u32,
        actions: Vec<sluice_classifier::Action>,
    ) -> Result<(), String> {
        self.ask_one(0, |tx| PmdCommand::PacketOut(data, in_port, actions, tx))?
    }

    /// A port's OpenFlow config bits (0 unless a PORT_MOD set some).
    pub(crate) fn port_config(&self, ofport: u32) -> u32 {
        self.port_config
            .lock()
            .expect("port config")
            .get(&ofport)
            .copied()
            .unwrap_or(0)
    }

    /// Sets a port's OpenFlow config: `down` and `no_recv` drop what it
    /// receives, `down` and `no_fwd` take it out of forwarding,
    /// `no_packet_in` keeps what it receives from the controllers; in
    /// force on every PMD when this returns. `config` is the whole new
    /// set of bits (as port descriptions show them).
    pub(crate) fn set_port_config(
        &self,
        ofport: u32,
        config: u32,
        dp: PortConfig,
    ) -> Result<(), String> {
        let _reconfig = self.reconfig.lock().expect("reconfig");
        for r in self.ask_all(|tx| PmdCommand::SetPortConfig(ofport, dp, tx))? {
            r?;
        }
        self.port_config
            .lock()
            .expect("port config")
            .insert(ofport, config);
        let name = self
            .port_reports()?
            .into_iter()
            .find(|p| p.ofport == ofport)
            .map(|p| p.name)
            .unwrap_or_default();
        self.port_changed(PortChange::Modified, ofport, &name);
        Ok(())
    }

    /// What `of-show` prints (the OpenFlow channel's connections).
    pub(crate) fn on_of_show(&self, f: Box<dyn Fn() -> String + Send + Sync>) {
        *self.of_status.lock().expect("of status") = Some(f);
    }

    /// Calls `f` on every port added, removed or changed from now on (the OpenFlow
    /// channel's PORT_STATUS).
    pub(crate) fn on_port_change(&self, f: PortWatcher) {
        *self.port_watcher.lock().expect("port watcher") = Some(f);
    }

    /// Tells the port watcher (the OpenFlow channel's PORT_STATUS) of a
    /// change to port `ofport`.
    pub(crate) fn port_changed(&self, how: PortChange, ofport: u32, name: &str) {
        if let Some(f) = self.port_watcher.lock().expect("port watcher").as_ref() {
            f(how, ofport, name);
        }
    }

    /// Microseconds since the switch started.
    pub(crate) fn uptime_us(&self) -> u64 {
        self.now_us()
    }

    /// A flow command of `sluice ctl`, counted in [`Control::flow_mods`]:
    /// each rule it names applied, or the command refused.
    fn flow_mod(&self, cmd: &str, args: &[&str], strict: bool) -> Result<String, String> {
        let done = self.change_by_command(cmd, args, strict);
        match &done {
            Ok((_, n)) => self.flow_mods[0].fetch_add(*n, Ordering::Relaxed),
            Err(_) => self.flow_mods[1].fetch_add(1, Ordering::Relaxed),
        };
        done.map(|(said, _)| said)
    }

    fn change_by_command(
        &self,
        cmd: &str,
        args: &[&str],
        strict: bool,
    ) -> Result<(String, u64), String> {
        let how = if strict {
            Selection::Strict
        } else {
            Selection::Loose
        };
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let now = self.now_us();
        // Rules the rule set refuses (a missing group or meter, a field
        // kept read-only) are refused, the whole command with them.
        let admit = |specs: &[sluice_classifier::parse::FlowSpec]| -> Result<(), String> {
            match specs.iter().find_map(|s| next.refusal(&s.actions)) {
                Some(r) => Err(r.to_string()),
                None => Ok(()),
            }
        };
        let out = match cmd {
            "add-flow" => {
                let line = args.join(" ");
                let (spec, warnings) =
                    sluice_classifier::parse_flow_with_warnings(&line, Require::Actions)
                        .map_err(|e| e.to_string())?;
                admit(std::slice::from_ref(&spec))?;
                next.add(&spec, now);
                (format!("{}added 1 rule", warning_lines(&warnings)), 1)
            }
            "add-flows" | "replace-flows" => {
                let [name, text] = args else {
                    return Err(format!("{cmd} needs a file"));
                };
                let (specs, warnings) =
                    sluice_classifier::parse_flow_file_with_warnings(text, Some(name))
                        .map_err(|e| e.to_string())?;
                admit(&specs)?;
                let said = warning_lines(&warnings);
                if cmd == "add-flows" {
                    for s in &specs {
                        next.add(s, now);
                    }
                    (format!("{said}added {} rules", specs.len()), specs.len())
                } else {
                    let (kept, added, removed) = next.replace_with(&specs, now);
                    (
                        format!("{said}kept {kept}, added {added}, removed {removed} rules"),
                        specs.len(),
                    )
                }
            }
            "mod-flows" => {
                let spec =
                    parse_flow(&args.join(" "), Require::Actions).map_err(|e| e.to_string())?;
                admit(std::slice::from_ref(&spec))?;
                let n = next.modify(&spec, how, !spec.table_given);
                (format!("modified {n} rules"), 1)
            }
            _ => {
                let line = args.join(" ");
                let spec = parse_flow(&line, Require::NoActions).map_err(|e| e.to_string())?;
                let n = next.delete(&spec, how, !spec.table_given).len();
                (format!("deleted {n} rules"), 1)
            }
        };
        self.publish(&next)?;
        *rules = next;
        Ok((out.0, out.1 as u64))
    }
}

/// Parse warnings (a field dropped from a match), a line each.
fn warning_lines(warnings: &[sluice_classifier::ParseError]) -> String {
    warnings.iter().map(|w| format!("warning: {w}\n")).collect()
}

/// The OpenFlow error for what a rule set refuses.
pub(crate) fn of_refusal(r: sluice_classifier::table::Refusal) -> OfError {
    use sluice_classifier::table::Refusal;
    match r {
        Refusal::MissingGroup(_) => OfError::BAD_OUT_GROUP,
        Refusal::MissingMeter(_) => OfError::METER_UNKNOWN,
        Refusal::ReadOnly(_) => OfError::BAD_SET_TYPE,
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
