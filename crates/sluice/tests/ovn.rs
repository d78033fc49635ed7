//! OVN drives Sluice: Debian's OVN 23.03 (`ovsdb-server` for the
//! northbound and southbound databases, `ovn-northd`, `ovn-controller`)
//! on one chassis whose switch is `sluice vswitchd` on a stock
//! `ovsdb-server`. ovn-controller creates `br-int` itself, speaks
//! OpenFlow 1.5 to it (bundles, Nicira's TLV table, `NXT_CT_FLUSH_ZONE`,
//! packet-in2) and programs OVN's pipeline; namespaces are the VMs, bound
//! to logical ports by `external_ids:iface-id`. A logical switch (ARP
//! answered by OVN's responder), a logical router between two switches
//! (its own ARP and ICMP answered), a stateful ACL (new connections from
//! outside refused, replies let in, an allowed TCP port), a load balancer
//! VIP with two backends over TCP (conntrack, NAT, a select group), and
//! `ovn-nbctl --wait=hv sync` returning. The same script with Open
//! vSwitch 3.1's own `ovs-vswitchd` must give the same results (the
//! test's check that it tests something), and both must hold the same
//! OpenFlow rules, as `ovs-ofctl -O OpenFlow15 dump-flows` prints them.
//! Needs root.

mod support;

use std::path::Path;
use std::process::Command;

use support::ovs::{as_ovs_vswitchd, require_ovs_tools, start_daemon, start_vswitchd, Db};
use support::*;

const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";
const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";

/// One chassis: its Open_vSwitch database, OVN's databases and daemons,
/// the switch's namespace.
struct Chassis {
    db: Db,
    sw: Host,
    _ovn: Vec<Killed>,
}

fn spawn(dir: &Path, ns: Option<&str>, prog: &str, args: &[String]) -> Killed {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, prog]);
            c
        }
        None => Command::new(prog),
    };
    c.args(args)
        .env("OVS_RUNDIR", dir)
        .env("OVS_LOGDIR", dir)
        .env("OVN_RUNDIR", dir)
        .env("OVN_LOGDIR", dir);
    Killed(c.spawn().unwrap_or_else(|e| panic!("{prog}: {e}")))
}

impl Chassis {
    /// Starts the switch (`daemon` None: Sluice as `ovs-vswitchd`), the
    /// northbound and southbound databases, ovn-northd and ovn-controller.
    fn start(tag: &str, daemon: Option<&str>) -> Chassis {
        require_ovs_tools(&["ovn-northd", "ovn-controller", "ovn-nbctl"]);
        for s in [NB_SCHEMA, SB_SCHEMA] {
            assert!(
                Path::new(s).exists(),
                "{s} is missing: run scripts/setup (ovn-central)"
            );
        }
        let db = Db::start();
        let sw = Host::new(tag, None);
        let out = match daemon {
            None => start_vswitchd(&db, &sw.ns, &as_ovs_vswitchd(db.run())),
            Some(d) => start_daemon(&db, &sw.ns, &[d]),
        };
        assert!(out.status.success(), "start: {}", stderr(&out));
        let dir = db.run().to_path_buf();
        let mut ovn = Vec::new();
        for (name, schema) in [("nb", NB_SCHEMA), ("sb", SB_SCHEMA)] {
            let file = dir.join(format!("{name}.db"));
            sh(&format!("ovsdb-tool create {} {schema}", file.display()));
            ovn.push(spawn(
                &dir,
                None,
                "ovsdb-server",
                &[
                    file.display().to_string(),
                    format!("--remote=punix:{}/{name}.sock", dir.display()),
                    format!("--unixctl={}/{name}.ctl", dir.display()),
                    "--no-chdir".into(),
                    "-vconsole:off".into(),
                    format!("--log-file={}/{name}.log", dir.display()),
                ],
            ));
        }
        wait_for("OVN's databases", 10, || {
            dir.join("nb.sock").exists() && dir.join("sb.sock").exists()
        });
        ovn.push(spawn(
            &dir,
            None,
            "ovn-northd",
            &[
                format!("--ovnnb-db=unix:{}/nb.sock", dir.display()),
                format!("--ovnsb-db=unix:{}/sb.sock", dir.display()),
                format!("--unixctl={}/northd.ctl", dir.display()),
                "--no-chdir".into(),
                "-vconsole:off".into(),
                format!("--log-file={}/northd.log", dir.display()),
            ],
        ));
        db.vsctl(&[
            "set",
            "open",
            ".",
            "external_ids:system-id=hv1",
            &format!("external_ids:ovn-remote=unix:{}/sb.sock", dir.display()),
            "external_ids:ovn-encap-type=geneve",
            "external_ids:ovn-encap-ip=172.31.84.1",
            "external_ids:ovn-bridge-datapath-type=netdev",
        ]);
        ovn.push(spawn(
            &dir,
            Some(&sw.ns),
            "ovn-controller",
            &[
                format!("unix:{}/db.sock", dir.display()),
                "--no-chdir".into(),
                "-vconsole:off".into(),
                format!("--log-file={}/ovn-controller.log", dir.display()),
            ],
        ));
        // ovn-controller makes br-int itself.
        let t = std::time::Instant::now();
        while !db
            .tool("ovs-vsctl", &["br-exists", "br-int"])
            .status
            .success()
        {
            if t.elapsed().as_secs() > 20 {
                let log = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                panic!(
                    "no br-int from ovn-controller:\n{}\n{}",
                    log("ovn-controller.log"),
                    log("ovs-vswitchd.log")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Chassis { db, sw, _ovn: ovn }
    }

    fn nbctl(&self, args: &[&str]) -> String {
        let out = Command::new("ovn-nbctl")
            .arg(format!("--db=unix:{}/nb.sock", self.db.run().display()))
            .arg("--timeout=30")
            .args(args)
            .output()
            .unwrap();
        if !out.status.success() {
            let log = |f: &str| std::fs::read_to_string(self.db.run().join(f)).unwrap_or_default();
            panic!(
                "ovn-nbctl {args:?}: {}\n{}\n{}",
                stderr(&out),
                log("ovn-controller.log"),
                log("ovs-vswitchd.log")
            );
        }
        stdout(&out)
    }

    /// VM `tag` (a namespace) with `mac`, `ip`/24 and gateway `gw`, its
    /// veth a port of br-int bound to logical port `lsp` of `ls`.
    fn vm(&self, tag: &str, ls: &str, lsp: &str, mac: &str, ip: &str, gw: &str) -> Host {
        let vm = Host::new(tag, None);
        vm.exec(&format!("ip link set eth0 address {mac}"));
        vm.exec(&format!("ip addr add {ip}/24 dev eth0"));
        vm.exec(&format!("ip route add default via {gw}"));
        sh(&format!("ip link set {} netns {}", vm.root_if, self.sw.ns));
        self.sw.exec(&format!("ip link set {} up", vm.root_if));
        self.nbctl(&[
            "lsp-add",
            ls,
            lsp,
            "--",
            "lsp-set-addresses",
            lsp,
            &format!("{mac} {ip}"),
        ]);
        self.db.vsctl(&[
            "add-port",
            "br-int",
            &vm.root_if,
            "--",
            "set",
            "interface",
            &vm.root_if,
            &format!("external_ids:iface-id={lsp}"),
        ]);
        vm
    }

    /// `ovs-ofctl -O OpenFlow15 dump-flows br-int`, normalised: no
    /// cookies or statistics; what ovn-northd and ovn-controller choose
    /// anew each run named, not shown (northd's service monitor MAC, the
    /// conntrack zones ovn-controller gives ports and the router's NAT:
    /// what loads `reg11`, `reg12` and `reg13`); sorted.
    fn rules(&self) -> Vec<String> {
        let out = self.db.tool(
            "ovs-ofctl",
            &["-O", "OpenFlow15", "dump-flows", "br-int", "--no-stats"],
        );
        assert!(out.status.success(), "dump-flows: {}", stderr(&out));
        let mac = self.nbctl(&["get", "NB_Global", ".", "options:svc_monitor_mac"]);
        let mac = mac.trim().trim_matches('"').to_string();
        let zone = |l: &str, reg: &str| -> String {
            let mut out = String::new();
            let mut rest = l;
            let tail = format!("->{reg}");
            while let Some(at) = rest.find(&tail) {
                let head = &rest[..at];
                let start = head
                    .rfind("set_field:")
                    .map_or(at, |s| s + "set_field:".len());
                out += &rest[..start];
                out += "ZONE";
                out += &tail;
                rest = &rest[at + tail.len()..];
            }
            out + rest
        };
        let mut v: Vec<String> = stdout(&out)
            .lines()
            .map(|l| {
                let l = l.trim();
                let l = match l.split_once(", ") {
                    Some((c, rest)) if c.starts_with("cookie=") => rest,
                    _ => l,
                };
                let l = format!("{},", l.replace(&mac, "SVC_MONITOR_MAC"));
                let l = ["reg11,", "reg12,", "reg13,"]
                    .iter()
                    .fold(l, |l, r| zone(&l, r));
                unordered(&learned_cookie(l.trim_end_matches(',')))
            })
            .collect();
        v.sort();
        v
    }
}

/// A `learn`'s cookie (its logical flow's, which ovn-northd makes anew
/// each run) as `COOKIE`.
fn learned_cookie(l: &str) -> String {
    let Some(at) = l.find("learn(") else {
        return l.to_string();
    };
    let (head, tail) = l.split_at(at);
    let Some(c) = tail.find("cookie=") else {
        return l.to_string();
    };
    let value_end = tail[c..].find(',').map_or(tail.len(), |e| c + e);
    format!("{head}{}cookie=COOKIE{}", &tail[..c], &tail[value_end..])
}

/// A multicast group's outputs (`...,resubmit(,41)` each, in the order
/// ovn-controller's hash of the ports gives) sorted.
fn unordered(l: &str) -> String {
    const EACH: &str = ",resubmit(,41)";
    let Some((head, actions)) = l.split_once(" actions=") else {
        return l.to_string();
    };
    if actions.matches(EACH).count() < 2 {
        return l.to_string();
    }
    let mut parts: Vec<&str> = actions
        .split(EACH)
        .map(|p| p.trim_start_matches(','))
        .collect();
    let last = parts.pop().unwrap_or("");
    parts.sort();
    format!(
        "{head} actions={}{EACH},{last}",
        parts.join(",resubmit(,41),")
    )
}

/// What one run saw: each check's result, and the rules installed.
#[derive(Debug, PartialEq)]
struct Seen {
    checks: Vec<(&'static str, bool)>,
    rules: Vec<String>,
}

/// The logical topology and its checks, on the switch `daemon` runs
/// (None: Sluice).
fn run(tag: &str, daemon: Option<&str>) -> (Seen, String) {
    let c = Chassis::start(tag, daemon);
    c.nbctl(&["ls-add", "ls1"]);
    c.nbctl(&["ls-add", "ls2"]);
    c.nbctl(&["lr-add", "lr1"]);
    for (ls, mac, ip) in [
        ("ls1", "00:00:00:00:f1:fe", "10.84.1.254/24"),
        ("ls2", "00:00:00:00:f2:fe", "10.84.2.254/24"),
    ] {
        let lrp = format!("lr1-{ls}");
        let lsp = format!("{ls}-lr1");
        c.nbctl(&["lrp-add", "lr1", &lrp, mac, ip]);
        c.nbctl(&[
            "lsp-add",
            ls,
            &lsp,
            "--",
            "lsp-set-type",
            &lsp,
            "router",
            "--",
            "lsp-set-addresses",
            &lsp,
            "router",
            "--",
            "lsp-set-options",
            &lsp,
            &format!("router-port={lrp}"),
        ]);
    }
    let vm1 = c.vm(
        &format!("{tag}1"),
        "ls1",
        "vm1",
        "f0:00:00:84:01:01",
        "10.84.1.1",
        "10.84.1.254",
    );
    let vm2 = c.vm(
        &format!("{tag}2"),
        "ls1",
        "vm2",
        "f0:00:00:84:01:02",
        "10.84.1.2",
        "10.84.1.254",
    );
    let vm3 = c.vm(
        &format!("{tag}3"),
        "ls2",
        "vm3",
        "f0:00:00:84:02:03",
        "10.84.2.3",
        "10.84.2.254",
    );
    let vm4 = c.vm(
        &format!("{tag}4"),
        "ls2",
        "vm4",
        "f0:00:00:84:02:04",
        "10.84.2.4",
        "10.84.2.254",
    );
    // --wait=hv returns once ovn-controller has the flows installed.
    c.nbctl(&["--wait=hv", "sync"]);
    let mut checks = Vec::new();
    let mut check = |what: &'static str, ok: bool| checks.push((what, ok));

    // A logical switch: the ARP for vm2 answered by OVN's responder
    // (a reply looped back to the port it came in on), then a ping.
    check("ping on a logical switch", vm1.pings("10.84.1.2"));
    check(
        "ARP answered for vm2",
        vm1.exec("ip neigh show 10.84.1.2")
            .contains("f0:00:00:84:01:02"),
    );
    // The router's own address: its ARP and ICMP responders.
    check("ping the router's port", vm1.pings("10.84.1.254"));
    check("ping across the router", vm1.pings("10.84.2.3"));
    check("ping back across the router", vm4.pings("10.84.1.2"));

    // A stateful ACL on ls2: to vm3 only TCP port 5201 opens a
    // connection; the replies of what it starts come back.
    c.nbctl(&[
        "acl-add",
        "ls2",
        "to-lport",
        "1001",
        "outport == \"vm3\" && ip4 && tcp.dst == 5201",
        "allow-related",
    ]);
    c.nbctl(&[
        "acl-add",
        "ls2",
        "to-lport",
        "1000",
        "outport == \"vm3\" && ip4",
        "drop",
    ]);
    c.nbctl(&["--wait=hv", "sync"]);
    check("the ACL refuses a new ping in", !vm1.pings("10.84.2.3"));
    check(
        "the ACL lets the replies of a ping out in",
        vm3.pings("10.84.1.1"),
    );
    vm3.exec("sh -c 'iperf3 -s -1 -D -p 5201 >/dev/null 2>&1'");
    std::thread::sleep(std::time::Duration::from_millis(300));
    check(
        "the ACL allows TCP to port 5201",
        vm1.exec_status("timeout 10 iperf3 -c 10.84.2.3 -p 5201 -t 1")
            .status
            .success(),
    );
    c.nbctl(&["acl-del", "ls2"]);

    // A load balancer on ls1: a VIP, two backends on ls2 over TCP.
    c.nbctl(&[
        "lb-add",
        "lb1",
        "10.84.9.100:80",
        "10.84.2.3:8080,10.84.2.4:8080",
        "tcp",
    ]);
    c.nbctl(&["ls-lb-add", "ls1", "lb1"]);
    c.nbctl(&["--wait=hv", "sync"]);
    for b in [&vm3, &vm4] {
        b.exec("sh -c 'cd /tmp && python3 -m http.server 8080 >/dev/null 2>&1 &'");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let fetch = "python3 -c \"import urllib.request as u; print(u.urlopen('http://10.84.9.100/', timeout=3).status)\"";
    let mut served = 0;
    for _ in 0..6 {
        let out = vm1.exec_status(fetch);
        if out.status.success() {
            served += 1;
        } else {
            eprintln!(
                "{tag}: the VIP: {}",
                stderr(&out).lines().last().unwrap_or("")
            );
        }
    }
    if served < 6 {
        for cmd in [&["dpctl/dump-flows"][..], &["dpctl/dump-conntrack"]] {
            eprintln!("{tag} {cmd:?}:\n{}", stdout(&c.db.appctl(cmd)));
        }
    }
    check("the VIP serves every request", served == 6);
    let groups =
        c.db.tool("ovs-ofctl", &["-O", "OpenFlow15", "dump-groups", "br-int"]);
    check(
        "the VIP is a select group",
        stdout(&groups).contains("type=select"),
    );

    let rules = c.rules();
    let log = std::fs::read_to_string(c.db.run().join("ovn-controller.log")).unwrap_or_default();
    drop((vm1, vm2, vm3, vm4));
    (Seen { checks, rules }, log)
}

#[test]
fn ovn_programs_sluice_as_it_programs_open_vswitch() {
    let (ovs, ovs_log) = run("ovo", Some("/usr/sbin/ovs-vswitchd"));
    for (what, ok) in &ovs.checks {
        assert!(ok, "with Open vSwitch: {what}\n{ovs_log}");
    }
    let (sluice, log) = run("ovs", None);
    for (what, ok) in &sluice.checks {
        assert!(ok, "with Sluice: {what}\n{log}");
    }
    // ovn-controller saw no OpenFlow error from Sluice.
    assert!(!log.contains("OpenFlow error"), "{log}");
    // The same rules.
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|r| !b.contains(r)).cloned().collect()
    };
    let (o, s) = (
        only(&ovs.rules, &sluice.rules),
        only(&sluice.rules, &ovs.rules),
    );
    assert!(
        o.is_empty() && s.is_empty(),
        "rules only Open vSwitch holds:\n{}\nrules only Sluice holds:\n{}",
        o.join("\n"),
        s.join("\n")
    );
}
