//! Open vSwitch's side of the tests of `sluice vswitchd`: a stock
//! `ovsdb-server` on a private directory (also `OVS_RUNDIR` and
//! `OVS_LOGDIR` for every tool a test runs), Debian's `ovs-vsctl`,
//! `ovs-ofctl` and `ovs-appctl` on it, and the daemon started as ovs-ctl
//! starts ovs-vswitchd.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use super::{stderr, stdout, wait_for};

pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Root, Open vSwitch's tools and its schema, as the tests that drive
/// `sluice vswitchd` with them need (`extra`: more commands).
pub fn require_ovs_tools(extra: &[&str]) {
    let mut tools = vec![
        "ip",
        "ping",
        "ovsdb-server",
        "ovsdb-tool",
        "ovs-vsctl",
        "ovs-ofctl",
        "ovs-appctl",
    ];
    tools.extend_from_slice(extra);
    super::require_root_and(&tools);
    if !Path::new(SCHEMA).exists() {
        panic!("{SCHEMA} is missing: run scripts/setup (openvswitch-switch)");
    }
}

/// ovsdb-server on a private directory, which is also OVS_RUNDIR and
/// OVS_LOGDIR for everything the test runs.
pub struct Db {
    child: Child,
    dir: tempfile::TempDir,
    /// Where ovsdb-server runs and its further options ([`Db::start_in`]).
    ns: Option<String>,
    extra: Vec<String>,
}

impl Db {
    pub fn start() -> Db {
        Db::start_in(None, &[])
    }

    /// ovsdb-server in network namespace `ns` (its unix socket is
    /// reachable from everywhere; a TCP or TLS remote in `extra` only
    /// from there), with `extra` options.
    pub fn start_in(ns: Option<&str>, extra: &[String]) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("conf.db");
        assert!(Command::new("ovsdb-tool")
            .arg("create")
            .arg(&db)
            .arg(SCHEMA)
            .status()
            .unwrap()
            .success());
        let child = Db::server(dir.path(), ns, extra);
        let d = Db {
            child,
            dir,
            ns: ns.map(str::to_string),
            extra: extra.to_vec(),
        };
        wait_for("ovsdb-server's socket", 10, || {
            d.dir.path().join("db.sock").exists()
        });
        d.vsctl(&["--no-wait", "init"]);
        d
    }

    fn server(dir: &Path, ns: Option<&str>, extra: &[String]) -> Child {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "ovsdb-server"]);
                c
            }
            None => Command::new("ovsdb-server"),
        };
        cmd.arg(dir.join("conf.db"))
            .args(extra)
            .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
            .arg(format!(
                "--unixctl={}",
                dir.join("ovsdb-server.ctl").display()
            ))
            .args(["--no-chdir", "-vconsole:off"])
            .arg(format!(
                "--log-file={}",
                dir.join("ovsdb-server.log").display()
            ))
            .spawn()
            .expect("ovsdb-server")
    }

    /// Stops ovsdb-server, runs `meanwhile`, and starts it again on the
    /// same database.
    pub fn restart(&mut self, meanwhile: impl FnOnce()) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(self.run().join("db.sock"));
        meanwhile();
        self.child = Db::server(self.run(), self.ns.as_deref(), &self.extra);
        wait_for("ovsdb-server's socket", 10, || {
            self.run().join("db.sock").exists()
        });
    }

    pub fn run(&self) -> &Path {
        self.dir.path()
    }

    pub fn tool(&self, tool: &str, args: &[&str]) -> Output {
        Command::new(tool)
            .env("OVS_RUNDIR", self.run())
            .env("OVS_LOGDIR", self.run())
            .args(args)
            .output()
            .unwrap()
    }

    /// ovs-vsctl ARGS, which must succeed: its output and its warnings.
    pub fn vsctl(&self, args: &[&str]) -> (String, String) {
        let mut all = vec![
            "--timeout=20".to_string(),
            format!("--db=unix:{}/db.sock", self.run().display()),
        ];
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = self.tool("ovs-vsctl", &all);
        assert!(out.status.success(), "ovs-vsctl {args:?}: {}", stderr(&out));
        (stdout(&out).trim().to_string(), stderr(&out))
    }

    /// `ovs-vsctl add-br BR -- set bridge BR datapath_type=netdev`, then
    /// `more` (further settings of the bridge, or `--` and more commands),
    /// in one transaction.
    pub fn add_br(&self, br: &str, more: &[&str]) -> (String, String) {
        let mut all = vec![
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ];
        all.extend_from_slice(more);
        self.vsctl(&all)
    }

    pub fn get(&self, table: &str, row: &str, column: &str) -> String {
        self.vsctl(&["get", table, row, column]).0
    }

    pub fn appctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["-t", "ovs-vswitchd"];
        all.extend(args);
        self.tool("ovs-appctl", &all)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the daemon in `ns` as ovs-ctl starts ovs-vswitchd (detached:
/// it returns once the database's configuration is applied).
pub fn start_vswitchd(db: &Db, ns: &str, bin: &Path) -> Output {
    start_daemon(db, ns, &[bin.to_str().expect("a UTF-8 path")])
}

/// Starts `daemon` (a command line: Open vSwitch's `ovs-vswitchd`, or
/// Sluice's) in namespace `ns` on `db`, as ovs-ctl starts ovs-vswitchd.
pub fn start_daemon(db: &Db, ns: &str, daemon: &[&str]) -> Output {
    start_daemon_on(
        db,
        ns,
        daemon,
        &format!("unix:{}/db.sock", db.run().display()),
    )
}

/// [`start_daemon`] with the database named `database` (`ssl:IP:PORT`,
/// ...) in place of `db`'s unix socket.
pub fn start_daemon_on(db: &Db, ns: &str, daemon: &[&str], database: &str) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(daemon)
        .arg(database)
        .args([
            "--pidfile",
            "--detach",
            "--no-chdir",
            "--log-file",
            "-vconsole:off",
        ])
        .env("OVS_RUNDIR", db.run())
        .env("OVS_LOGDIR", db.run())
        .env("OVS_DBDIR", db.run())
        .output()
        .unwrap()
}

/// A stock ovsdb-server and `sluice vswitchd` (as `ovs-vswitchd`) on
/// it, detached, in a namespace of its own named `tag`.
pub fn db_and_switch(tag: &str) -> (Db, super::Host) {
    require_ovs_tools(&[]);
    let db = Db::start();
    let sw = super::Host::new(tag, None);
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    (db, sw)
}

/// The binary under the name ovs-vswitchd (as Debian's alternatives
/// link it).
pub fn as_ovs_vswitchd(dir: &Path) -> PathBuf {
    let link = dir.join("ovs-vswitchd");
    std::os::unix::fs::symlink(super::sluice_bin(), &link).unwrap();
    link
}
