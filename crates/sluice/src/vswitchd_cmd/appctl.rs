//! The commands `ovs-appctl` reaches on `ovs-vswitchd.PID.ctl`: OVS's
//! names, answered by Sluice's control plane (`sluice ctl`'s commands), and
//! `sluice/ctl` for all of those.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice_vswitchd::unixctl::Commands;

use super::version_text;
use crate::ctl::Control;

/// The commands `ovs-appctl` reaches.
pub struct Appctl {
    pub(super) control: Arc<Control>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) log: Option<crate::vlog::LogFile>,
    pub(super) bridges: BridgeTable,
    pub(super) ports: PortTable,
    /// `coverage/show`'s histories.
    pub(super) coverage: super::coverage::Coverage,
}

/// The bridges served, by name, each with its control plane.
pub(super) type BridgeTable = Arc<Mutex<Vec<(String, Arc<Control>)>>>;

/// The ports the reconciler made, with OVS's datapath numbers for them.
pub(super) type PortTable = Arc<Mutex<super::odp_ports::Ports>>;

/// OVS's datapath number of each port (as text), by Sluice's datapath
/// number, from [`Appctl`]'s `dp_ports`.
fn odp_numbers(ports: &BTreeMap<u32, (String, u32)>) -> BTreeMap<u32, String> {
    ports
        .iter()
        .map(|(dp, (_, odp))| (*dp, odp.to_string()))
        .collect()
}

/// OVS's netdev type of a Sluice port spec.
pub(super) fn netdev_type(spec: &str) -> &'static str {
    let kind = spec.split(':').next().unwrap_or("");
    match kind {
        "afpacket" => "system",
        "tap" => "tap",
        "afxdp" => "afxdp",
        "vhost-client" => "dpdkvhostuserclient",
        "vhost" => "dpdkvhostuser",
        "dpdk" => "dpdk",
        "vxlan" => "vxlan",
        "geneve" => "geneve",
        "gre" => "gre",
        _ => "",
    }
}

impl Appctl {
    /// Every datapath port by Sluice's datapath number: its interface's
    /// name and OVS's number for it (a patch port is none).
    fn dp_ports(&self) -> BTreeMap<u32, (String, u32)> {
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = BTreeMap::new();
        for (b, control) in self
            .bridges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let index = control.bridge_index();
            for ((pb, n), info) in ports.iter() {
                if let (true, Some(odp)) = (pb == b, info.odp) {
                    let dp = sluice_classifier::xlate::dp_port(index, *n);
                    out.insert(dp, (info.name.clone(), odp));
                }
            }
        }
        out
    }

    /// `dpctl/dump-flows`: the megaflows in ODP text, each port by OVS's
    /// number or, with `--names` (and `-m`), its name; `filter=` by name
    /// or OVS's number.
    fn dump_flows(&self, args: &[String]) -> Result<String, String> {
        let a = super::dpctl::DumpArgs::parse(args)?;
        let ports = self.dp_ports();
        let by_name: BTreeMap<u32, String> =
            ports.iter().map(|(dp, (n, _))| (*dp, n.clone())).collect();
        let by_odp = odp_numbers(&ports);
        let resolve = |p: &str| {
            ports
                .iter()
                .find(|(_, (name, odp))| name == p || p.parse() == Ok(*odp))
                .map(|(dp, _)| *dp)
        };
        let text = super::ctl(&self.control, "dump-odp-flows", &a.ctl_args(resolve)?)?;
        Ok(super::dpctl::with_names(
            &text,
            if a.names { &by_name } else { &by_odp },
        ))
    }

    /// `coverage/show` and `coverage/read-counter NAME`: the datapath's
    /// counters summed over the PMDs, their rates brought up to now.
    fn coverage(&mut self, method: &str, args: &[String]) -> Result<String, String> {
        let mut stats = sluice_datapath::DpStats::default();
        for s in self.control.snapshots()? {
            stats.add(&s.stats);
        }
        let totals = super::coverage::counters(&stats);
        self.coverage.update(&totals);
        match (method, args) {
            ("coverage/show", []) => Ok(self.coverage.show(&totals)),
            ("coverage/read-counter", [name]) => super::coverage::read_counter(&totals, name),
            _ => Err(format!("\"{method}\": wrong number of arguments")),
        }
    }

    /// `dpif/show`, in OVS's form: the datapath's hits and misses, then
    /// each bridge's ports as `NAME OFPORT/DPPORT: (TYPE)`, DPPORT the
    /// number OVS's datapath would give the port.
    fn dpif_show(&self) -> Result<String, String> {
        let snaps = self.control.snapshots()?;
        let (mut hit, mut missed) = (0u64, 0u64);
        for s in &snaps {
            hit += s.stats.emc_hits + s.stats.smc_hits + s.stats.megaflow_hits;
            missed += s.stats.upcalls;
        }
        let mut o = format!("netdev@ovs-netdev: hit:{hit} missed:{missed}\n");
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        for (b, _) in self
            .bridges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            o += &format!("  {b}:\n");
            let mut mine: Vec<(u32, &super::odp_ports::PortInfo)> = ports
                .iter()
                .filter(|((pb, _), _)| pb == b)
                .map(|((_, n), info)| (*n, info))
                .collect();
            mine.sort_by_key(|(n, _)| if *n == 0xffff_fffe { 65534 } else { *n });
            for (n, p) in mine {
                let of = if n == 0xffff_fffe { 65534 } else { n };
                // OVS's datapath number ("none": a patch port is no
                // datapath port, as OVS shows it).
                let dp = p.odp.map_or("none".to_string(), |d| d.to_string());
                o += &format!("    {} {of}/{dp}: ({})\n", p.name, p.kind);
            }
        }
        Ok(o)
    }
}

/// OVS's command, its arguments, and the `sluice ctl` command that
/// answers it.
const MAPPED: &[(&str, &str, &str)] = &[
    ("dpif-netdev/pmd-stats-show", "", "pmd-stats"),
    ("dpif-netdev/pmd-stats-clear", "", "pmd-stats-clear"),
    ("dpif-netdev/pmd-rxq-show", "", "pmd-rxq-show"),
    ("dpif-netdev/pmd-perf-show", "[-nh]", "pmd-perf-show"),
    ("dpif-netdev/pmd-rxq-rebalance", "", "pmd-rxq-rebalance"),
    ("dpctl/del-flows", "", "del-megaflows"),
    ("revalidator/purge", "", "del-megaflows"),
    ("dpctl/ct-stats-show", "", "conntrack-stats"),
    (
        "dpctl/ct-set-limits",
        "[default=L] [zone=N,limit=L]...",
        "ct-set-limits",
    ),
    ("dpctl/ct-get-limits", "[zone=N[,N]...]", "ct-get-limits"),
    ("dpctl/ct-del-limits", "zone=N[,N]...", "ct-del-limits"),
    ("dpctl/ipf-get-status", "[-m|--more]", "ipf-get-status"),
    ("dpctl/ipf-set-enabled", "v4|v6", "ipf-set-enabled"),
    ("dpctl/ipf-set-disabled", "v4|v6", "ipf-set-disabled"),
    (
        "dpctl/ipf-set-min-frag",
        "v4|v6 minfrag",
        "ipf-set-min-frag",
    ),
    ("dpctl/ipf-set-max-nfrags", "maxfrags", "ipf-set-max-nfrags"),
    ("tnl/neigh/show", "", "tnl-neigh-show"),
    ("tnl/arp/show", "", "tnl-neigh-show"),
    ("tnl/ports/show", "", "tnl-ports-show"),
];

/// Commands whose first argument is a bridge.
const ON_BRIDGE: &[(&str, &str, &str)] = &[
    ("fdb/show", "BRIDGE", "fdb-show"),
    ("fdb/flush", "[BRIDGE]", "fdb-flush"),
    ("fdb/stats-show", "BRIDGE", "fdb-stats-show"),
    ("bridge/dump-flows", "BRIDGE", "dump-flows"),
    ("ofproto/trace", "BRIDGE FLOW", "trace"),
];

impl Commands for Appctl {
    fn list(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = [
            ("version", ""),
            ("dpif/show", ""),
            ("exit", "[--cleanup]"),
            ("vlog/reopen", ""),
            ("vlog/set", "[SPEC...]"),
            ("vlog/list", ""),
            ("sluice/ctl", "COMMAND [ARG...]"),
            (
                "ovs/route/add",
                "ip_addr/prefix_len out_br_name [gw] [pkt_mark=mark]",
            ),
            ("ovs/route/del", "ip_addr/prefix_len [pkt_mark=mark]"),
            ("ovs/route/show", ""),
            ("ovs/route/lookup", "ip_addr [pkt_mark=mark]"),
            ("tnl/neigh/set", "BRIDGE IP MAC"),
            ("tnl/arp/set", "BRIDGE IP MAC"),
            ("tnl/neigh/flush", ""),
            ("tnl/arp/flush", ""),
            ("dpif/show-dp-features", "bridge"),
            ("revalidator/wait", ""),
            ("dpif/set-dp-features", "bridge [feature [value]]"),
            (
                "dpctl/dump-flows",
                "[-m] [--names | --no-names] [dp] [filter=MATCH]",
            ),
            ("coverage/show", ""),
            ("coverage/read-counter", "COUNTER"),
            ("dpctl/dump-conntrack", "[dp] [zone=N]"),
            (
                "dpctl/flush-conntrack",
                "[dp] [zone=N] [ct-orig-tuple [ct-reply-tuple]]",
            ),
            ("dpctl/ct-set-maxconns", "[dp] maxconns"),
            ("dpctl/ct-get-maxconns", "[dp]"),
            ("dpctl/ct-get-nconns", "[dp]"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        for (c, a, _) in MAPPED.iter().chain(ON_BRIDGE) {
            v.push((c.to_string(), a.to_string()));
        }
        v.sort();
        v
    }

    fn call(&mut self, method: &str, args: &[String]) -> Option<Result<String, String>> {
        let ctl = |cmd: &str, args: &[String]| super::ctl(&self.control, cmd, args);
        if let Some(r) = super::dpctl_ct::call(method, args, || self.control.conntrack()) {
            return Some(r);
        }
        if let Some(r) = super::ovs_route::call(method, args, &self.control) {
            return Some(r);
        }
        if method == "coverage/show" || method == "coverage/read-counter" {
            return Some(self.coverage(method, args));
        }
        Some(match method {
            "version" => Ok(version_text()),
            "dpif/show" => self.dpif_show(),
            "exit" => {
                // As OVS: without --cleanup the internal ports' taps stay
                // (persistent, with their addresses) for the next start.
                if args.iter().any(|a| a == "--cleanup") {
                    super::CLEANUP.store(true, Ordering::SeqCst);
                }
                self.stop.store(true, Ordering::Relaxed);
                Ok(String::new())
            }
            "vlog/set" | "vlog/list" => {
                let levels = super::LEVELS.lock().ok().and_then(|l| l.clone());
                match (method, levels) {
                    (_, None) => Err("the log is not set up".into()),
                    ("vlog/list", Some(l)) => Ok(l.list()),
                    (_, Some(l)) => l.set(args).map(|()| String::new()),
                }
            }
            "vlog/reopen" => match &self.log {
                Some(l) => l.reopen().map(|()| String::new()),
                None => Err("Logging to file not configured".into()),
            },
            "tnl/neigh/flush" | "tnl/arp/flush" => {
                // What was set by hand goes too, as from OVS's cache.
                self.control.neighbours_forget_manual();
                ctl("tnl-neigh-flush", args)
            }
            "dpctl/dump-flows" => self.dump_flows(args),
            // Sluice revalidates a megaflow when its next packet finds it
            // stale, not in a revalidator thread: nothing to wait for
            // but every PMD having taken the last change (a round trip).
            "revalidator/wait" => ctl("pmd-stats", &[]).map(|_| String::new()),
            "dpif/show-dp-features" | "dpif/set-dp-features" => {
                let bridge = match method {
                    "dpif/show-dp-features" => args.last(),
                    _ => args.first(),
                };
                let served = bridge.is_some_and(|b| {
                    self.bridges
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .iter()
                        .any(|(n, _)| n == b)
                });
                if !served {
                    Err("no such bridge".into())
                } else {
                    let caps = super::capabilities::capabilities(self.control.vlan_limit());
                    match method {
                        "dpif/show-dp-features" => Ok(super::dp_features::show(&caps)),
                        _ => super::dp_features::set(&caps, &args[1..]),
                    }
                }
            }
            "sluice/ctl" => match args.split_first() {
                Some((c, rest)) => ctl(c, rest),
                None => Err("sluice/ctl COMMAND [ARG...]: which command?".into()),
            },
            m => {
                if let Some((_, _, c)) = MAPPED.iter().find(|(o, _, _)| *o == m) {
                    ctl(c, args)
                } else if let Some((_, _, c)) = ON_BRIDGE.iter().find(|(o, _, _)| *o == m) {
                    let served = self
                        .bridges
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    match args.split_first() {
                        Some((b, rest)) => match served.iter().find(|(n, _)| n == b) {
                            Some((_, control)) => {
                                if c == &"trace" {
                                    // Its datapath actions with OVS's
                                    // port numbers, as dpif/show has them.
                                    let by_odp = odp_numbers(&self.dp_ports());
                                    super::ctl(control, c, &[rest.join(" ")]).map(|t| {
                                        t.lines()
                                            .map(|l| match l.starts_with("Datapath actions:") {
                                                true => super::dpctl::with_names(l, &by_odp),
                                                false => format!("{l}\n"),
                                            })
                                            .collect()
                                    })
                                } else {
                                    super::ctl(control, c, rest)
                                }
                            }
                            None => Err(format!("no such bridge {b}")),
                        },
                        // Every bridge's.
                        None if m == "fdb/flush" => served
                            .iter()
                            .map(|(_, control)| super::ctl(control, c, &[]))
                            .collect::<Result<Vec<_>, _>>()
                            .map(|_| "table successfully flushed\n".to_string()),
                        None => Err(format!("{m}: which bridge?")),
                    }
                } else {
                    return None;
                }
            }
        })
    }
}
