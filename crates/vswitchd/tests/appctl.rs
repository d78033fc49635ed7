//! The unixctl socket against the real client: Debian's `ovs-appctl`.

use std::process::Command;
use std::sync::{Arc, Mutex};

use sluice_vswitchd::unixctl::Commands;
use sluice_vswitchd::unixctl_server::UnixctlServer;

struct Daemon {
    calls: usize,
}

impl Commands for Daemon {
    fn list(&self) -> Vec<(String, String)> {
        vec![
            ("version".into(), String::new()),
            ("calls".into(), String::new()),
        ]
    }
    fn call(&mut self, method: &str, _args: &[String]) -> Option<Result<String, String>> {
        self.calls += 1;
        match method {
            "version" => Some(Ok("ovs-vswitchd (Open vSwitch) 3.1.0\n".into())),
            "calls" => Some(Ok(format!("{}\n", self.calls))),
            _ => None,
        }
    }
}

fn appctl(sock: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("ovs-appctl")
        .arg("-t")
        .arg(sock)
        .args(args)
        .output()
        .expect("ovs-appctl (scripts/setup installs openvswitch-switch)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ovs_appctl_runs_commands_and_is_told_of_unknown_ones() {
    if Command::new("ovs-appctl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no ovs-appctl");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("ovs-vswitchd.ctl");
    let _server = UnixctlServer::start(&sock, Arc::new(Mutex::new(Daemon { calls: 0 }))).unwrap();
    let (ok, out, _) = appctl(&sock, &["version"]);
    assert!(ok);
    assert_eq!(out, "ovs-vswitchd (Open vSwitch) 3.1.0\n");
    let (ok, out, _) = appctl(&sock, &["list-commands"]);
    assert!(
        ok && out.contains("version") && out.contains("list-commands"),
        "{out}"
    );
    let (ok, _, err) = appctl(&sock, &["frob", "x"]);
    assert!(!ok);
    assert!(err.contains("\"frob\" is not a valid command"), "{err}");
    // A client that connects and says nothing holds up no one.
    let _silent = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let (ok, out, _) = appctl(&sock, &["calls"]);
    assert!(ok && out.trim().parse::<usize>().unwrap() >= 2, "{out}");
}
