//! `sluice vswitchd` (or `sluice` run as `ovs-vswitchd`): Sluice as the
//! drop-in `ovs-vswitchd` on a stock `ovsdb-server`. Its command line is
//! ovs-vswitchd's; the database is read and written by
//! `sluice_vswitchd::daemon`, which drives the switch through
//! [`SluiceSwitch`]; `ovs-appctl` reaches it on
//! `RUNDIR/ovs-vswitchd.PID.ctl` ([`Appctl`]); `ovs-ofctl` reaches each
//! bridge on `RUNDIR/BRIDGE.mgmt`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use sluice_vswitchd::db::Target;

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
    /// The database: unix:PATH, tcp:IP:PORT or ssl:IP:PORT (default
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
    /// With an ssl: database: the switch's private key (PEM), as
    /// ovs-vswitchd's -p. (OpenFlow's ssl: and pssl: take theirs from
    /// the SSL table, as OVS's.)
    #[arg(short = 'p', long, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// With an ssl: database: the switch's certificate (PEM), as -c.
    #[arg(short = 'c', long, value_name = "FILE")]
    pub certificate: Option<PathBuf>,
    /// With an ssl: database: the CA the server's certificate must chain
    /// to (PEM), as -C.
    #[arg(short = 'C', long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Take over a pidfile another process left.
    #[arg(long)]
    pub overwrite_pidfile: bool,
    /// Print the version (the line ovs-ctl reads) and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
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

/// Runs `sluice ctl`'s command `cmd` on the switch's control plane.
fn ctl(control: &crate::ctl::Control, cmd: &str, args: &[String]) -> Result<String, String> {
    control.execute(&crate::ctl::Request {
        cmd: cmd.to_string(),
        args: args.to_vec(),
    })
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

/// How an `ssl:` database is reached: TLS with the key, certificate
/// and CA of the command line (each needed; read once, at start). None
/// for other targets.
fn db_tls(
    target: &Target,
    a: &VswitchdArgs,
) -> Result<Option<sluice_vswitchd::db::TlsConnect>, String> {
    if !matches!(target, Target::Ssl(_)) {
        return Ok(None);
    }
    let files = sluice_ofproto::tls::TlsFiles {
        private_key: a.private_key.clone(),
        certificate: a.certificate.clone(),
        ca_cert: a.ca_cert.clone(),
    };
    if files.private_key.is_none() || files.certificate.is_none() || files.ca_cert.is_none() {
        return Err(format!(
            "{target}: an ssl: database needs --private-key, --certificate and --ca-cert"
        ));
    }
    let tls = Arc::new(files.load().map_err(|e| format!("{target}: {e}"))?);
    Ok(Some(Arc::new(move |tcp, peer: &str| {
        sluice_ofproto::tls::connect(&tls, tcp, peer)
    })))
}

/// `exit --cleanup` asked for: the internal ports' taps go with the
/// daemon.
static CLEANUP: AtomicBool = AtomicBool::new(false);

/// Runs the daemon until `exit`, SIGTERM or Ctrl-C (after which, as OVS,
/// the internal ports' taps stay; `exit --cleanup` removes them).
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
    let tls = db_tls(&target, &a)?;
    let started_with =
        sluice_vswitchd::daemon::read_other_config(&target, tls.as_ref(), Duration::from_secs(5));
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
    // The datapath stops when the daemon has wound down (not at once on
    // `exit` or a signal): the taps' fate is settled first.
    let run_stop = Arc::new(AtomicBool::new(false));
    let datapath_stop = Arc::clone(&run_stop);
    let runner = std::thread::Builder::new()
        .name("datapath".into())
        .stack_size(sluice_classifier::xlate::STACK_BYTES)
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
        coverage: coverage::Coverage::started(),
    };
    let sock = a
        .unixctl
        .clone()
        .unwrap_or_else(|| rundir.join(format!("ovs-vswitchd.{}.ctl", std::process::id())));
    let _unixctl =
        sluice_vswitchd::unixctl_server::UnixctlServer::start(&sock, Arc::new(Mutex::new(appctl)))
            .map_err(|e| format!("--unixctl {}: {e}", sock.display()))?;
    // OVS's own first line (scripts and OVS's tests look for it), then
    // what runs in its place.
    tracing::info!(target: "vswitchd", "{OVS_VERSION_LINE} (Sluice {}): database {target}, ovs-appctl at {}{}", env!("CARGO_PKG_VERSION"), sock.display(),
        pidfile.as_ref().map(|p| format!(", pidfile {}", p.path().display())).unwrap_or_default());
    let mut sw = SluiceSwitch::new(started.control, openflow, rundir.clone());
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
                tls,
            },
            &mut published,
            &stop,
            &mut ready,
        )
    };
    // As OVS, the internal ports' taps stay for the next start unless
    // `exit --cleanup` (from here on, as the bridges and ports close).
    if !CLEANUP.load(Ordering::SeqCst) {
        sluice_port::tap::keep_persistent_taps();
    }
    // Bridges' sockets go with the daemon; the ports are closed as the
    // datapath ends.
    let names: Vec<String> = sw.bridges.keys().cloned().collect();
    for n in names {
        drop(sw.bridges.remove(&n));
    }
    stop.store(true, Ordering::Relaxed);
    datapath_stop.store(true, Ordering::Relaxed);
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
/// The log's levels, once installed (for `vlog/set`, `vlog/list`).
pub static LEVELS: Mutex<Option<Arc<crate::vlog::LevelHandles>>> = Mutex::new(None);
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
    let handles = crate::vlog::init(levels, file)?;
    *LEVELS.lock().map_err(|_| "the log levels")? = Some(Arc::new(handles));
    Ok(true)
}

mod appctl;
mod capabilities;
mod coverage;
mod dp_features;
mod dpctl;
mod dpctl_ct;
mod odp_ports;
mod other_config;
mod ovs_route;
mod switch;

pub use appctl::Appctl;
use appctl::PortTable;
pub use other_config::apply_other_config;
use switch::Published;
pub use switch::SluiceSwitch;
