//! The session against the real peer: Debian's `ovsdb-server` with Open
//! vSwitch 3.1's `vswitch.ovsschema`, driven by `ovs-vsctl` as a user
//! would. The client takes the `ovs_vswitchd` lock, monitors the tables
//! ovs-vswitchd reads, sees what ovs-vsctl writes, and writes back what
//! ovs-vswitchd writes (`ofport`, `cur_cfg`), under the lock: an
//! `ovs-vsctl` without `--no-wait` returns once `cur_cfg` reaches its
//! `next_cfg`, as with OVS.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};
use sluice_ovsdb::{Atom, Event, Uuid};
use sluice_vswitchd::db::{DbConnection, Target};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

struct Server {
    child: Child,
    dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Option<Server> {
        if !Path::new(SCHEMA).exists() {
            eprintln!("skipped: no {SCHEMA} (scripts/setup installs openvswitch-switch)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("conf.db");
        let ok = Command::new("ovsdb-tool")
            .args(["create"])
            .arg(&db)
            .arg(SCHEMA)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ovsdb-tool create");
        let child = Command::new("ovsdb-server")
            .arg(&db)
            .arg(format!(
                "--remote=punix:{}",
                dir.path().join("db.sock").display()
            ))
            .arg(format!(
                "--unixctl={}",
                dir.path().join("ovsdb-server.ctl").display()
            ))
            .arg("--no-chdir")
            .arg("-vconsole:off")
            .arg(format!(
                "--log-file={}",
                dir.path().join("ovsdb-server.log").display()
            ))
            .spawn()
            .expect("starting ovsdb-server");
        let s = Server { child, dir };
        for _ in 0..200 {
            if s.sock().exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        s.vsctl(&["--no-wait", "init"]).expect("ovs-vsctl init");
        Some(s)
    }

    fn sock(&self) -> PathBuf {
        self.dir.path().join("db.sock")
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", self.sock().display()))
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tables and columns ovs-vswitchd reads (the daemon's own list).
use sluice_vswitchd::daemon::MONITOR;

fn connect(s: &Server) -> DbConnection {
    let mut c = DbConnection::connect(&Target::Unix(s.sock()), "Open_vSwitch", None).unwrap();
    let got = c
        .wait_for(Duration::from_secs(10), |e| *e == Event::Schema)
        .unwrap();
    assert!(got.is_some(), "no schema");
    assert_eq!(c.client.schema().unwrap().version, "8.3.1");
    c.client.lock("ovs_vswitchd");
    c.client.monitor(MONITOR);
    let got = c
        .wait_for(Duration::from_secs(10), |e| {
            matches!(e, Event::Monitored(_))
        })
        .unwrap()
        .expect("the initial contents");
    assert!(got.contains(&Event::Locked(true)), "{got:?}");
    c
}

fn find(c: &DbConnection, table: &str, name: &str) -> Option<Uuid> {
    c.client
        .replica()
        .table(table)
        .find(|(_, r)| sluice_ovsdb::replica::string(r, "name") == Some(name))
        .map(|(u, _)| *u)
}

fn the_root(c: &DbConnection) -> (Uuid, i64) {
    let (u, r) = c
        .client
        .replica()
        .table("Open_vSwitch")
        .next()
        .expect("the root row");
    let next = r
        .get("next_cfg")
        .and_then(|d| d.one())
        .and_then(Atom::as_i64)
        .unwrap_or(0);
    (*u, next)
}

fn by_uuid(u: Uuid) -> Value {
    json!([["_uuid", "==", ["uuid", u.to_string()]]])
}

/// Writes cur_cfg = next_cfg under the lock, as ovs-vswitchd does once the
/// configuration is applied; waits for the reply.
fn commit_cfg(c: &mut DbConnection, extra: Vec<Value>) -> Value {
    let (root, next) = the_root(c);
    let mut ops = vec![json!({"op": "assert", "lock": "ovs_vswitchd"})];
    ops.extend(extra);
    ops.push(json!({"op": "update", "table": "Open_vSwitch", "where": by_uuid(root), "row": {"cur_cfg": next}}));
    let tag = c.client.transact(ops);
    let got = c
        .wait_for(
            Duration::from_secs(10),
            |e| matches!(e, Event::Transacted { tag: t, .. } if *t == tag),
        )
        .unwrap()
        .expect("a transaction reply");
    match got.last() {
        Some(Event::Transacted { result, .. }) => result.clone(),
        _ => unreachable!(),
    }
}

#[test]
fn ovs_vsctl_writes_the_session_sees_and_answers() {
    let Some(s) = Server::start() else { return };
    let mut c = connect(&s);
    // ovs-vsctl --no-wait: rows, no waiting for us.
    s.vsctl(&[
        "--no-wait",
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=internal",
        "ofport_request=7",
    ])
    .unwrap();
    let seen = c
        .wait_for(
            Duration::from_secs(10),
            |e| matches!(e, Event::Updated(ch) if ch.touches("Interface")),
        )
        .unwrap();
    assert!(seen.is_some(), "no update for the new rows");
    let br = find(&c, "Bridge", "br0").expect("br0 in the replica");
    let row = c.client.replica().row("Bridge", &br).unwrap();
    assert_eq!(
        sluice_ovsdb::replica::string(row, "datapath_type"),
        Some("netdev")
    );
    assert_eq!(
        sluice_ovsdb::replica::uuids(row, "ports").len(),
        2,
        "br0 and p1"
    );
    let p1 = find(&c, "Interface", "p1").expect("p1 in the replica");
    // What ovs-vswitchd writes back: the port number it chose, cur_cfg.
    let r = commit_cfg(
        &mut c,
        vec![
            json!({"op": "update", "table": "Interface", "where": by_uuid(p1), "row": {"ofport": 7}}),
        ],
    );
    assert!(
        r.as_array()
            .is_some_and(|a| a.iter().all(|o| o.get("error").is_none())),
        "{r}"
    );
    assert_eq!(s.vsctl(&["get", "Interface", "p1", "ofport"]).unwrap(), "7");
    // Without --no-wait, ovs-vsctl waits until cur_cfg catches up with the
    // next_cfg it set: we answer from another thread's point of view by
    // committing when next_cfg moves.
    let sock = s.sock();
    let vsctl = std::thread::spawn(move || {
        Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", sock.display()))
            .args([
                "--timeout=20",
                "add-port",
                "br0",
                "p2",
                "--",
                "set",
                "interface",
                "p2",
                "type=internal",
            ])
            .output()
            .unwrap()
    });
    let (_, before) = the_root(&c);
    let moved = c
        .wait_for(
            Duration::from_secs(15),
            |e| matches!(e, Event::Updated(ch) if ch.touches("Open_vSwitch")),
        )
        .unwrap();
    assert!(moved.is_some(), "next_cfg did not move");
    let (_, next) = the_root(&c);
    assert!(next > before, "next_cfg {before} -> {next}");
    commit_cfg(&mut c, vec![]);
    let out = vsctl.join().unwrap();
    assert!(
        out.status.success(),
        "ovs-vsctl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.vsctl(&["get", "Open_vSwitch", ".", "cur_cfg"]).unwrap(),
        next.to_string()
    );
}

#[test]
fn without_the_lock_a_write_is_refused() {
    let Some(s) = Server::start() else { return };
    let holder = connect(&s);
    // A second client asks for the lock: not granted while the first has it.
    let mut other = DbConnection::connect(&Target::Unix(s.sock()), "Open_vSwitch", None).unwrap();
    other
        .wait_for(Duration::from_secs(10), |e| *e == Event::Schema)
        .unwrap()
        .unwrap();
    other.client.lock("ovs_vswitchd");
    other.client.monitor(MONITOR);
    let got = other
        .wait_for(Duration::from_secs(10), |e| {
            matches!(e, Event::Monitored(_))
        })
        .unwrap()
        .unwrap();
    assert!(got.contains(&Event::Locked(false)), "{got:?}");
    let r = commit_cfg(&mut other, vec![]);
    let text = r.to_string();
    assert!(
        text.contains("not owner"),
        "the assert of a lock held elsewhere fails: {text}"
    );
    // The holder keeps it; when it goes, the other is told it has it.
    assert!(holder.client.has_lock());
    drop(holder);
    let got = other
        .wait_for(Duration::from_secs(10), |e| *e == Event::Locked(true))
        .unwrap();
    assert!(got.is_some(), "the lock passes on when its holder goes");
}

/// Open vSwitch 3.1's ovs-vswitchd on a database of its own (the dummy
/// datapath in place of every other: nothing touches the host).
struct Ovs {
    server: Server,
    vswitchd: Child,
}

impl Ovs {
    fn start() -> Option<Ovs> {
        let server = Server::start()?;
        let dir = server.dir.path();
        let bin = [
            "/usr/lib/openvswitch-switch/ovs-vswitchd",
            "/usr/sbin/ovs-vswitchd",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
        let vswitchd = Command::new(bin)
            .arg(format!("unix:{}", server.sock().display()))
            .args([
                "--enable-dummy=override",
                "--disable-system",
                "--disable-system-route",
                "--no-chdir",
                "-vconsole:off",
            ])
            .arg(format!(
                "--unixctl={}",
                dir.join("ovs-vswitchd.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                dir.join("ovs-vswitchd.log").display()
            ))
            .env("OVS_RUNDIR", dir)
            .env("OVS_LOGDIR", dir)
            .env("OVS_DBDIR", dir)
            .spawn()
            .expect("starting ovs-vswitchd");
        Some(Ovs { server, vswitchd })
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        let _ = self.vswitchd.kill();
        let _ = self.vswitchd.wait();
    }
}

/// The same ovs-vsctl commands to OVS and to the session with its
/// reconciler's port numbers: the same `ofport` in every Interface row
/// (the bridge's own interface LOCAL, requests kept, the others from a
/// cursor that does not give a freed number again at once).
#[test]
fn the_same_commands_give_the_same_ofports_as_ovs() {
    let Some(ovs) = Ovs::start() else {
        eprintln!("skipped: no ovs-vswitchd (scripts/setup installs openvswitch-switch)");
        return;
    };
    let Some(ours) = Server::start() else { return };
    let mut c = connect(&ours);
    let mut numbers = sluice_vswitchd::ofports::OfPorts::default();
    let steps: &[&[&str]] = &[
        &[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ],
        &[
            "add-port",
            "br0",
            "p1",
            "--",
            "set",
            "interface",
            "p1",
            "type=internal",
        ],
        &[
            "add-port",
            "br0",
            "p2",
            "--",
            "set",
            "interface",
            "p2",
            "type=internal",
            "ofport_request=10",
        ],
        &[
            "add-port",
            "br0",
            "p3",
            "--",
            "set",
            "interface",
            "p3",
            "type=internal",
        ],
        &["del-port", "br0", "p1"],
        &[
            "add-port",
            "br0",
            "p4",
            "--",
            "set",
            "interface",
            "p4",
            "type=internal",
        ],
        &["set", "interface", "p4", "ofport_request=20"],
    ];
    for step in steps {
        // OVS: ovs-vsctl waits until ovs-vswitchd has applied it.
        let mut with_wait = vec!["--timeout=20"];
        with_wait.extend_from_slice(step);
        ovs.server
            .vsctl(&with_wait)
            .unwrap_or_else(|e| panic!("OVS: {step:?}: {e}"));
        // Ours: the rows, then what the session reads and writes back.
        let mut no_wait = vec!["--no-wait"];
        no_wait.extend_from_slice(step);
        ours.vsctl(&no_wait).unwrap();
        c.wait_for(Duration::from_secs(10), |e| matches!(e, Event::Updated(_)))
            .unwrap()
            .expect("the update");
        // Everything ovs-vsctl wrote in that transaction came in one update.
        let d = sluice_vswitchd::desired::desired(c.client.replica());
        let b = &d.bridges["br0"];
        let ifaces: Vec<(&str, Option<i64>)> = b
            .ports
            .values()
            .flat_map(|p| {
                p.interfaces
                    .iter()
                    .map(|(n, i)| (n.as_str(), i.ofport_request))
            })
            .collect();
        let got = numbers.assign("br0", &ifaces);
        let ops: Vec<Value> = b
            .ports
            .values()
            .flat_map(|p| p.interfaces.iter())
            .map(|(n, i)| json!({"op": "update", "table": "Interface", "where": by_uuid(i.uuid), "row": {"ofport": got[n]}}))
            .collect();
        commit_cfg(&mut c, ops);
        for name in got.keys() {
            let theirs = ovs
                .server
                .vsctl(&["get", "Interface", name, "ofport"])
                .unwrap();
            let mine = ours.vsctl(&["get", "Interface", name, "ofport"]).unwrap();
            assert_eq!(mine, theirs, "after {step:?}: ofport of {name}");
        }
    }
}
