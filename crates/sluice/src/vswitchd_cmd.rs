//! `sluice vswitchd` (or `sluice` run as `ovs-vswitchd`): Sluice as the
//! drop-in `ovs-vswitchd` on a stock `ovsdb-server`. Its command line is
//! ovs-vswitchd's; the database is read and written by
//! `sluice_vswitchd::daemon`, which drives the switch through
//! [`SluiceSwitch`]; `ovs-appctl` reaches it on
//! `RUNDIR/ovs-vswitchd.PID.ctl` ([`Appctl`]); `ovs-ofctl` reaches each
//! bridge on `RUNDIR/BRIDGE.mgmt`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use sluice_vswitchd::db::Target;
use sluice_vswitchd::reconcile::Switch;
use sluice_vswitchd::unixctl::Commands;

use crate::ctl::{Control, Request};
use crate::ofchannel::SwitchInfo;
use crate::runner::{RunOptions, Started};

/// The version line `ovs-ctl` reads (it takes the last word of the line
/// that says "Open vSwitch"): the ovs-vswitchd Sluice stands in for.
pub const OVS_VERSION_LINE: &str = "ovs-vswitchd (Open vSwitch) 3.1.0";

/// The `--help` examples.
pub const VSWITCHD_HELP: &str = "\
Sluice as ovs-vswitchd: it takes the ovs_vswitchd lock on ovsdb-server, makes
the bridges and ports the Open_vSwitch database holds (ovs-vsctl add-br,
add-port, set ...), and writes back what ovs-vswitchd writes (ofport, error,
link_state, mac_in_use, datapath_id, cur_cfg), so ovs-vsctl without --no-wait
returns when the change is made. ovs-ofctl reaches a bridge at
RUNDIR/BRIDGE.mgmt; ovs-appctl reaches the daemon through its pidfile.
One bridge is served so far (more are reported in their rows' error column).

Interface types: \"\" or system (AF_PACKET), internal and tap (a tap device;
the bridge's own is LOCAL), afxdp, dpdkvhostuser, dpdkvhostuserclient
(options:vhost-server-path), vxlan, geneve, gre, dpdk (dpdk build).

Directories as OVS: OVS_RUNDIR (/var/run/openvswitch), OVS_LOGDIR
(/var/log/openvswitch).

Examples:
  sluice vswitchd unix:/var/run/openvswitch/db.sock --pidfile --detach --log-file
      Start as Debian's ovs-ctl starts ovs-vswitchd.
  ovs-vsctl add-br br0 -- add-port br0 eth1 -- add-port br0 eth2
      Then configure it as OVS: a MAC-learning switch between eth1 and eth2.
  ovs-appctl -t ovs-vswitchd sluice/ctl pmd-stats
      Any of `sluice ctl`'s commands through ovs-appctl.";

/// ovs-vswitchd's command line.
#[derive(Args, Debug, Clone, Default)]
pub struct VswitchdArgs {
    /// The database: unix:PATH or tcp:IP:PORT (default
    /// unix:$OVS_RUNDIR/db.sock).
    pub database: Option<String>,
    /// Write the process id to FILE (default RUNDIR/ovs-vswitchd.pid),
    /// locked while the daemon runs.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub pidfile: Option<String>,
    /// Run in the background; return once the first configuration is
    /// applied.
    #[arg(long)]
    pub detach: bool,
    /// Do not change to / when detaching.
    #[arg(long)]
    pub no_chdir: bool,
    /// The ovs-appctl socket (default RUNDIR/ovs-vswitchd.PID.ctl).
    #[arg(long, value_name = "SOCKET")]
    pub unixctl: Option<PathBuf>,
    /// Log to FILE in OVS's format (default LOGDIR/ovs-vswitchd.log).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub log_file: Option<String>,
    /// OVS's log levels: -vconsole:off, -vfile:info, -vdbg, ...
    #[arg(short = 'v', long = "verbose", value_name = "SPEC", num_args = 0..=1, default_missing_value = "", require_equals = false, allow_hyphen_values = false)]
    pub verbose: Vec<String>,
    /// Accepted as OVS takes it (Sluice's memory is its own pool).
    #[arg(long)]
    pub mlockall: bool,
    /// Accepted: Sluice has no kernel datapath to disable.
    #[arg(long)]
    pub disable_system: bool,
    /// Accepted for ovs-ctl; Sluice does not restart itself (systemd
    /// does).
    #[arg(long)]
    pub monitor: bool,
    /// Accepted for ovs-ctl.
    #[arg(long)]
    pub no_self_confinement: bool,
    /// Take over a pidfile another process left.
    #[arg(long)]
    pub overwrite_pidfile: bool,
    /// Print the version (the line ovs-ctl reads) and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
}

/// `Open_vSwitch:other_config` keys read when the daemon starts (a change
/// later is logged and waits for the next start).
const START_ONLY: &[&str] = &[
    "pmd-cpu-mask",
    "emc-insert-inv-prob",
    "smc-enable",
    "vlan-limit",
];

/// The switch's configuration from `Open_vSwitch:other_config`, as
/// ovs-vswitchd reads these keys: `pmd-cpu-mask` (hex: a PMD thread on
/// each CPU set), `emc-insert-inv-prob`, `smc-enable`, `vlan-limit`,
/// `tx-flush-interval` (µs; absent: Sluice's `auto`),
/// `pmd-perf-metrics`. Returns what was applied and what was not, for the
/// log.
pub fn apply_other_config(
    cfg: &mut crate::config::Config,
    oc: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (k, v) in oc {
        let r: Result<(), String> = match k.as_str() {
            "pmd-cpu-mask" => {
                let hex = v.trim_start_matches("0x").trim_start_matches("0X");
                match u128::from_str_radix(hex, 16) {
                    Ok(0) | Err(_) => Err(format!("'{v}' is not a CPU mask (hex, e.g. 0x6)")),
                    Ok(m) => {
                        let cpus: Vec<usize> = (0..128).filter(|c| m >> c & 1 == 1).collect();
                        crate::config::check_cpus(&cpus).map(|()| cfg.pmd_cores = cpus)
                    }
                }
            }
            "emc-insert-inv-prob" => v
                .parse::<u32>()
                .map(|p| cfg.datapath.cache.emc_insert_inv_prob = p)
                .map_err(|_| format!("'{v}' is not 0 to 4294967295")),
            "smc-enable" => match v.as_str() {
                "true" | "false" => {
                    cfg.datapath.cache.smc_enabled = v == "true";
                    Ok(())
                }
                _ => Err(format!("'{v}' is not true or false")),
            },
            "vlan-limit" => v
                .parse::<usize>()
                .map(|n| cfg.datapath.vlan_limit = n)
                .map_err(|_| format!("'{v}' is not a number")),
            "tx-flush-interval" => v
                .parse::<u64>()
                .map(|us| cfg.datapath.tx_flush = sluice_datapath::TxFlush::Fixed(us))
                .map_err(|_| format!("'{v}' is not a number of µs")),
            "pmd-perf-metrics" => {
                cfg.datapath.perf_metrics = v == "true";
                Ok(())
            }
            _ => continue,
        };
        notes.push(match r {
            Ok(()) => format!("other_config:{k}={v}: applied"),
            Err(e) => format!("other_config:{k}: {e}; the default stays"),
        });
    }
    notes
}

/// The run directory: `OVS_RUNDIR`, else /var/run/openvswitch.
pub fn rundir() -> PathBuf {
    std::env::var_os("OVS_RUNDIR")
        .map_or_else(|| PathBuf::from("/var/run/openvswitch"), PathBuf::from)
}

fn logdir() -> PathBuf {
    std::env::var_os("OVS_LOGDIR")
        .map_or_else(|| PathBuf::from("/var/log/openvswitch"), PathBuf::from)
}

/// The version text (`--version`, `ovs-appctl version`).
pub fn version_text() -> String {
    format!(
        "{OVS_VERSION_LINE}\nSluice {} (a userspace switch in ovs-vswitchd's place)",
        env!("CARGO_PKG_VERSION")
    )
}

/// A bridge the switch serves.
struct BridgeSide {
    socket: Option<sluice_port::unix_listen::SocketFile>,
    /// Its controllers: the target as the row has it, the peer as the
    /// OpenFlow side names it, and the connection (dropped: it ends).
    controllers: Vec<(String, String, crate::ofchannel::ControllerLink)>,
    /// What its OpenFlow connections say of it.
    info: SwitchInfo,
}

/// The switch as the reconciler sees it: one datapath, its control plane
/// and OpenFlow side.
pub struct SluiceSwitch {
    control: Arc<Control>,
    openflow: SwitchInfo,
    rundir: PathBuf,
    bridges: BTreeMap<String, BridgeSide>,
}

impl SluiceSwitch {
    fn ctl(&self, cmd: &str, args: &[String]) -> Result<String, String> {
        self.control.execute(&Request {
            cmd: cmd.to_string(),
            args: args.to_vec(),
        })
    }
}

impl Switch for SluiceSwitch {
    fn max_bridges(&self) -> usize {
        1
    }

    fn add_bridge(&mut self, name: &str, datapath_id: u64, secure: bool) -> Result<(), String> {
        if name.is_empty() || name.contains(['/', '\0']) || name.len() > 200 {
            return Err(format!("'{name}' is not a name a socket can take"));
        }
        self.ctl("del-flows", &[])?;
        if !secure {
            self.ctl("add-flow", &["priority=0,actions=NORMAL".into()])?;
        }
        let path = self.rundir.join(format!("{name}.mgmt"));
        let mut info = self.openflow.clone();
        info.datapath_id = datapath_id;
        let target = crate::ofchannel::Target::Unix(path);
        let (_, socket) =
            crate::ofchannel::listen(&target, Arc::clone(&self.control), info.clone())
                .map_err(|e| format!("its OpenFlow socket: {e}"))?;
        self.openflow
            .hub
            .fail_secure
            .store(secure, Ordering::Relaxed);
        self.bridges.insert(
            name.to_string(),
            BridgeSide {
                socket,
                controllers: Vec::new(),
                info,
            },
        );
        Ok(())
    }

    fn del_bridge(&mut self, name: &str) {
        if let Some(b) = self.bridges.remove(name) {
            if let Some(s) = b.socket {
                s.remove();
            }
            // Its controller connections end with it.
            drop(b.controllers);
            self.openflow.hub.set_controllers(0);
            self.openflow
                .hub
                .fail_secure
                .store(false, Ordering::Relaxed);
        }
        let _ = self.ctl("del-flows", &[]);
        let _ = self.ctl("add-flow", &["priority=0,actions=NORMAL".into()]);
        let _ = self.ctl("fdb-flush", &[]);
    }

    fn can_open(&self, name: &str, spec: &str) -> Result<(), String> {
        let netdev = spec.starts_with("afpacket:") || spec.starts_with("afxdp:");
        if netdev && sluice_vswitchd::netdev::read(name).is_none() {
            return Err(format!(
                "could not open network device {name} (No such device)"
            ));
        }
        Ok(())
    }

    fn add_port(
        &mut self,
        _bridge: &str,
        ofport: u32,
        _name: &str,
        spec: &str,
    ) -> Result<(), String> {
        self.ctl("add-port", &[format!("{ofport}={spec}")])
            .map(|_| ())
    }

    fn del_port(&mut self, _bridge: &str, ofport: u32, name: &str) {
        if let Err(e) = self.ctl("del-port", &[ofport.to_string()]) {
            tracing::warn!(target: "switch", "removing port {name} ({ofport}): {e}");
        }
    }

    fn change_port(
        &mut self,
        _bridge: &str,
        ofport: u32,
        _name: &str,
        _old: &str,
        new: &str,
    ) -> Result<(), String> {
        self.ctl("set-port", &[format!("{ofport}={new}")])
            .map(|_| ())
    }

    fn set_controllers(&mut self, bridge: &str, targets: &[String]) -> BTreeMap<String, String> {
        let mut errors = BTreeMap::new();
        let Some(b) = self.bridges.get_mut(bridge) else {
            return errors;
        };
        // The old connections end (those still wanted are made again: a
        // list that changed is rare, and a new connection says HELLO).
        b.controllers.clear();
        for t in targets {
            if t.starts_with("ptcp:") || t.starts_with("punix:") || t.starts_with("pssl:") {
                errors.insert(t.clone(), "passive controller targets (ptcp:, pssl:, punix:) are not supported yet: ovs-ofctl and ovn-controller use BRIDGE.mgmt".into());
                continue;
            }
            let peer = match crate::ofchannel::parse_controller(t) {
                Ok(p) => p,
                Err(e) => {
                    errors.insert(t.clone(), e);
                    continue;
                }
            };
            if matches!(peer, crate::ofchannel::Peer::Ssl(_)) {
                errors.insert(
                    t.clone(),
                    "ssl: controllers need the SSL table, which is not read yet".into(),
                );
                continue;
            }
            let name = peer.to_string();
            match crate::ofchannel::connect_link(peer, Arc::clone(&self.control), b.info.clone()) {
                Ok(link) => b.controllers.push((t.clone(), name, link)),
                Err(e) => {
                    errors.insert(t.clone(), e);
                }
            }
        }
        self.openflow.hub.set_controllers(b.controllers.len());
        errors
    }

    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
        changed
            .iter()
            .map(|(k, v)| {
                let set = |what: String| match self.ctl("set", &[what]) {
                    Ok(_) => format!("other_config:{k}: applied"),
                    Err(e) => format!("other_config:{k}: {e}"),
                };
                match (k.as_str(), v.as_deref()) {
                    ("tx-flush-interval", Some(us)) => set(format!("tx-flush-interval={us}")),
                    ("tx-flush-interval", None) => set("tx-flush-interval=auto".into()),
                    ("pmd-perf-metrics", v) => {
                        set(format!("pmd-perf-metrics={}", v == Some("true")))
                    }
                    (k, _) if START_ONLY.contains(&k) => format!(
                        "other_config:{k} changed: Sluice applies it when ovs-vswitchd starts again"
                    ),
                    (k, _) => format!("other_config:{k} is not a key Sluice reads"),
                }
            })
            .collect()
    }

    fn statistics(&self) -> BTreeMap<u32, Vec<(String, i64)>> {
        let Ok(ports) = self.control.port_reports() else {
            return BTreeMap::new();
        };
        ports
            .into_iter()
            .map(|p| {
                let s = &p.stats;
                let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                (
                    p.ofport,
                    vec![
                        ("rx_bytes".to_string(), n(s.rx_bytes)),
                        ("rx_dropped".to_string(), n(s.rx_dropped.iter().sum())),
                        ("rx_packets".to_string(), n(s.rx_packets)),
                        ("tx_bytes".to_string(), n(s.tx_bytes)),
                        ("tx_dropped".to_string(), n(s.tx_dropped.iter().sum())),
                        ("tx_packets".to_string(), n(s.tx_packets)),
                    ],
                )
            })
            .collect()
    }

    fn connected_controllers(&self, bridge: &str) -> BTreeMap<String, String> {
        let Some(b) = self.bridges.get(bridge) else {
            return BTreeMap::new();
        };
        let peers = self.openflow.hub.peers();
        b.controllers
            .iter()
            .filter_map(|(t, name, _)| {
                peers
                    .iter()
                    .find(|(p, _)| p == name)
                    .map(|(_, role)| (t.clone(), role.to_string()))
            })
            .collect()
    }
}

/// The commands `ovs-appctl` reaches.
pub struct Appctl {
    control: Arc<Control>,
    stop: Arc<AtomicBool>,
    log: Option<crate::vlog::LogFile>,
    bridges: Arc<Mutex<Vec<String>>>,
    ports: PortTable,
}

/// The ports the reconciler made: (bridge, switch port number) → (interface
/// name, OVS's interface type as `dpif/show` prints it).
type PortTable = Arc<Mutex<BTreeMap<(String, u32), (String, String)>>>;

/// OVS's netdev type of a Sluice port spec.
fn netdev_type(spec: &str) -> &'static str {
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
    /// `dpif/show`, in OVS's form: the datapath's hits and misses, then
    /// each bridge's ports as `NAME OFPORT/DPPORT: (TYPE)`.
    fn dpif_show(&self) -> Result<String, String> {
        let snaps = self.control.snapshots()?;
        let (mut hit, mut missed) = (0u64, 0u64);
        for s in &snaps {
            hit += s.stats.emc_hits + s.stats.smc_hits + s.stats.megaflow_hits;
            missed += s.stats.upcalls;
        }
        let mut o = format!("netdev@ovs-netdev: hit:{hit} missed:{missed}\n");
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        for b in self
            .bridges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            o += &format!("  {b}:\n");
            let mut mine: Vec<(u32, &String, &String)> = ports
                .iter()
                .filter(|((pb, _), _)| pb == b)
                .map(|((_, n), (name, t))| (*n, name, t))
                .collect();
            mine.sort_by_key(|(n, _, _)| if *n == 0xffff_fffe { 65534 } else { *n });
            for (n, name, t) in mine {
                let of = if n == 0xffff_fffe { 65534 } else { n };
                o += &format!("    {name} {of}/{n}: ({t})\n");
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
    ("dpctl/dump-flows", "", "dump-megaflows"),
    ("dpctl/dump-conntrack", "[zone=N]", "dump-conntrack"),
    ("dpctl/flush-conntrack", "[zone=N]", "flush-conntrack"),
    ("dpctl/ct-stats-show", "", "conntrack-stats"),
    ("dpctl/ct-set-maxconns", "N", "ct-set-maxconns"),
    ("tnl/neigh/show", "", "tnl-neigh-show"),
    ("tnl/neigh/flush", "", "tnl-neigh-flush"),
    ("tnl/ports/show", "", "tnl-ports-show"),
    ("ovs/route/show", "", "tnl-route-show"),
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
            ("sluice/ctl", "COMMAND [ARG...]"),
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
        let ctl = |cmd: &str, args: &[String]| {
            self.control.execute(&Request {
                cmd: cmd.to_string(),
                args: args.to_vec(),
            })
        };
        Some(match method {
            "version" => Ok(version_text()),
            "dpif/show" => self.dpif_show(),
            "exit" => {
                self.stop.store(true, Ordering::Relaxed);
                Ok(String::new())
            }
            "vlog/reopen" => match &self.log {
                Some(l) => l.reopen().map(|()| String::new()),
                None => Err("Logging to file not configured".into()),
            },
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
                        Some((b, rest)) if served.contains(b) => {
                            let rest = if c == &"trace" {
                                vec![rest.join(" ")]
                            } else {
                                rest.to_vec()
                            };
                            ctl(c, &rest)
                        }
                        Some((b, _)) => Err(format!("no such bridge {b}")),
                        None if m == "fdb/flush" => ctl(c, &[]),
                        None => Err(format!("{m}: which bridge?")),
                    }
                } else {
                    return None;
                }
            }
        })
    }
}

/// Reconciler glue: the switch, with the served bridges published for
/// the commands that name one.
struct Published<'a> {
    sw: &'a mut SluiceSwitch,
    names: Arc<Mutex<Vec<String>>>,
    ports: PortTable,
}

impl Published<'_> {
    fn publish(&self) {
        *self.names.lock().unwrap_or_else(|p| p.into_inner()) =
            self.sw.bridges.keys().cloned().collect();
    }
}

impl Switch for Published<'_> {
    fn max_bridges(&self) -> usize {
        self.sw.max_bridges()
    }
    fn add_bridge(&mut self, name: &str, id: u64, secure: bool) -> Result<(), String> {
        let r = self.sw.add_bridge(name, id, secure);
        self.publish();
        r
    }
    fn del_bridge(&mut self, name: &str) {
        self.sw.del_bridge(name);
        self.publish();
    }
    fn can_open(&self, name: &str, spec: &str) -> Result<(), String> {
        self.sw.can_open(name, spec)
    }
    fn add_port(&mut self, b: &str, n: u32, name: &str, spec: &str) -> Result<(), String> {
        self.sw.add_port(b, n, name, spec)?;
        self.ports.lock().unwrap_or_else(|p| p.into_inner()).insert(
            (b.to_string(), n),
            (name.to_string(), netdev_type(spec).to_string()),
        );
        Ok(())
    }
    fn del_port(&mut self, b: &str, n: u32, name: &str) {
        self.sw.del_port(b, n, name);
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(b.to_string(), n));
    }
    fn change_port(
        &mut self,
        b: &str,
        n: u32,
        name: &str,
        old: &str,
        new: &str,
    ) -> Result<(), String> {
        self.sw.change_port(b, n, name, old, new)
    }
    fn set_controllers(&mut self, b: &str, t: &[String]) -> BTreeMap<String, String> {
        self.sw.set_controllers(b, t)
    }
    fn connected_controllers(&self, b: &str) -> BTreeMap<String, String> {
        self.sw.connected_controllers(b)
    }
    fn statistics(&self) -> BTreeMap<u32, Vec<(String, i64)>> {
        self.sw.statistics()
    }
    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
        self.sw.set_other_config(changed)
    }
}

fn default_in(dir: &Path, given: Option<&str>, name: &str) -> Option<PathBuf> {
    given.map(|g| {
        if g.is_empty() {
            dir.join(name)
        } else {
            PathBuf::from(g)
        }
    })
}

/// Runs the daemon until `exit`, SIGTERM or Ctrl-C.
pub fn vswitchd(a: VswitchdArgs, stop: Arc<AtomicBool>) -> Result<(), String> {
    let rundir = rundir();
    let target = Target::parse(
        a.database
            .as_deref()
            .unwrap_or(&format!("unix:{}", rundir.join("db.sock").display())),
    )?;
    // The pidfile before anything runs: a second daemon stops here.
    let pidfile = match default_in(&rundir, a.pidfile.as_deref(), "ovs-vswitchd.pid") {
        Some(p) => {
            if a.overwrite_pidfile {
                let _ = std::fs::remove_file(&p);
            }
            Some(sluice_vswitchd::process::Pidfile::create(&p)?)
        }
        None => None,
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<Started>(1);
    let opts = RunOptions {
        openflow_later: true,
        fail_standalone: true,
        on_start: Some(tx),
        ..RunOptions::default()
    };
    // What only a start applies (PMD placement, the caches), read from
    // the database before the datapath starts.
    let mut cfg = crate::config::Config::default();
    let started_with = sluice_vswitchd::daemon::read_other_config(&target, Duration::from_secs(5));
    match &started_with {
        Some(oc) => {
            for note in apply_other_config(&mut cfg, oc) {
                tracing::info!(target: "switch", "{note}");
            }
        }
        None => {
            tracing::info!(target: "switch", "{target}: no configuration within 5 s: the datapath starts with its defaults")
        }
    }
    let placements = match crate::runner::placements(&cfg) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(target: "switch", "other_config:pmd-cpu-mask: {e}; one PMD thread, not pinned");
            cfg.pmd_cores.clear();
            crate::runner::placements(&cfg)?
        }
    };
    let run_stop = Arc::clone(&stop);
    let runner = std::thread::Builder::new()
        .name("datapath".into())
        .spawn(move || {
            crate::runner::run_ports(
                &cfg,
                &placements,
                crate::runner::default_rules(),
                Vec::new(),
                &opts,
                run_stop,
            )
        })
        .map_err(|e| format!("the datapath thread: {e}"))?;
    let started = match rx.recv() {
        Ok(s) => s,
        Err(_) => {
            return Err(match runner.join() {
                Ok(Err(e)) => e,
                _ => "the datapath ended before it started".into(),
            })
        }
    };
    let openflow = started.openflow.ok_or("the OpenFlow side did not start")?;
    let bridges = Arc::new(Mutex::new(Vec::new()));
    let ports = PortTable::default();
    let appctl = Appctl {
        ports: Arc::clone(&ports),
        control: Arc::clone(&started.control),
        stop: Arc::clone(&stop),
        log: LOG.lock().ok().and_then(|l| l.clone()),
        bridges: Arc::clone(&bridges),
    };
    let sock = a
        .unixctl
        .clone()
        .unwrap_or_else(|| rundir.join(format!("ovs-vswitchd.{}.ctl", std::process::id())));
    let _unixctl =
        sluice_vswitchd::unixctl_server::UnixctlServer::start(&sock, Arc::new(Mutex::new(appctl)))
            .map_err(|e| format!("--unixctl {}: {e}", sock.display()))?;
    tracing::info!(target: "switch", "ovs-vswitchd (Sluice {}) started: database {target}, ovs-appctl at {}{}", env!("CARGO_PKG_VERSION"), sock.display(),
        pidfile.as_ref().map(|p| format!(", pidfile {}", p.path().display())).unwrap_or_default());
    let mut sw = SluiceSwitch {
        control: started.control,
        openflow,
        rundir: rundir.clone(),
        bridges: BTreeMap::new(),
    };
    let result = {
        let mut published = Published {
            sw: &mut sw,
            names: bridges,
            ports,
        };
        let mut detached = DETACHED.lock().ok().and_then(|mut d| d.take());
        let mut ready = move || {
            if let Some(d) = detached.as_mut() {
                d.ready();
            }
            detached = None;
        };
        sluice_vswitchd::daemon::run(
            &sluice_vswitchd::daemon::Options {
                target,
                rundir,
                started_with,
            },
            &mut published,
            &stop,
            &mut ready,
        )
    };
    // Bridges' sockets go with the daemon; the ports are closed as the
    // datapath ends.
    let names: Vec<String> = sw.bridges.keys().cloned().collect();
    for n in names {
        if let Some(b) = sw.bridges.remove(&n) {
            if let Some(s) = b.socket {
                s.remove();
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let outcome = runner
        .join()
        .map_err(|_| "the datapath thread panicked".to_string())?;
    tracing::info!(target: "switch", "ovs-vswitchd (Sluice) exiting");
    drop(pidfile);
    result?;
    outcome.map(|_| ())
}

/// The log file, once opened (for `vlog/reopen`).
pub static LOG: Mutex<Option<crate::vlog::LogFile>> = Mutex::new(None);
/// The `--detach` handle, taken by the daemon once.
pub static DETACHED: Mutex<Option<sluice_vswitchd::process::Detached>> = Mutex::new(None);

/// What happens before any thread starts: `--detach`'s fork, the working
/// directory, and the log. Returns false when nothing more is to be done
/// (`--version`).
pub fn prepare(a: &VswitchdArgs) -> Result<bool, String> {
    if a.version {
        println!("{}", version_text());
        return Ok(false);
    }
    let levels = crate::vlog::parse_specs(&a.verbose)?;
    let file = match default_in(&logdir(), a.log_file.as_deref(), "ovs-vswitchd.log") {
        Some(p) => Some(crate::vlog::LogFile::create(&p)?),
        None => None,
    };
    if a.detach {
        let d = sluice_vswitchd::process::detach()?;
        *DETACHED.lock().map_err(|_| "the detach handle")? = Some(d);
        if !a.no_chdir {
            std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;
        }
    }
    *LOG.lock().map_err(|_| "the log")? = file.clone();
    crate::vlog::init(levels, file)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_config_keys_as_ovs_vswitchd_reads_them() {
        let mut cfg = crate::config::Config::default();
        let oc: BTreeMap<String, String> = [
            ("pmd-cpu-mask", "0x1"),
            ("emc-insert-inv-prob", "0"),
            ("smc-enable", "false"),
            ("vlan-limit", "2"),
            ("tx-flush-interval", "50"),
            ("pmd-perf-metrics", "true"),
            ("hw-offload", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let notes = apply_other_config(&mut cfg, &oc);
        assert_eq!(notes.len(), 6, "{notes:?}");
        assert_eq!(cfg.pmd_cores, vec![0]);
        assert_eq!(cfg.datapath.cache.emc_insert_inv_prob, 0);
        assert!(!cfg.datapath.cache.smc_enabled);
        assert_eq!(cfg.datapath.vlan_limit, 2);
        assert_eq!(cfg.datapath.tx_flush, sluice_datapath::TxFlush::Fixed(50));
        assert!(cfg.datapath.perf_metrics);
        let bad: BTreeMap<String, String> = [("pmd-cpu-mask", "zz"), ("smc-enable", "maybe")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut cfg = crate::config::Config::default();
        let notes = apply_other_config(&mut cfg, &bad);
        assert!(
            notes.iter().all(|n| n.contains("the default stays")),
            "{notes:?}"
        );
        assert!(cfg.pmd_cores.is_empty());
    }
}
