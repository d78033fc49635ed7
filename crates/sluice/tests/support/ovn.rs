//! OVN's side of the tests of `sluice vswitchd` under OVN: Debian's OVN
//! 23.03 on private directories. [`Central`] is the northbound and
//! southbound databases and `ovn-northd`; a [`Chassis`] is a switch's
//! namespace with its own `ovsdb-server`, the switch (Sluice as
//! `ovs-vswitchd`, or Open vSwitch's own) and its `ovn-controller`.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use super::ovs::{as_ovs_vswitchd, require_ovs_tools, start_daemon, start_vswitchd, Db};
use super::{sh, stderr, stdout, Host, Killed};

pub const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";
pub const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";

/// Runs `prog ARGS` (in namespace `ns`, if given) with the run and log
/// directories `dir`, killed when the guard drops.
pub fn spawn(dir: &Path, ns: Option<&str>, prog: &str, args: &[String]) -> Killed {
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

fn log(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

/// The northbound and southbound databases and ovn-northd.
pub struct Central {
    dir: tempfile::TempDir,
    _procs: Vec<Killed>,
}

impl Central {
    pub fn start() -> Central {
        require_ovs_tools(&["ovn-northd", "ovn-controller", "ovn-nbctl"]);
        for s in [NB_SCHEMA, SB_SCHEMA] {
            assert!(
                Path::new(s).exists(),
                "{s} is missing: run scripts/setup (ovn-central)"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut procs = Vec::new();
        for (name, schema) in [("nb", NB_SCHEMA), ("sb", SB_SCHEMA)] {
            let file = d.join(format!("{name}.db"));
            sh(&format!("ovsdb-tool create {} {schema}", file.display()));
            procs.push(spawn(
                d,
                None,
                "ovsdb-server",
                &[
                    file.display().to_string(),
                    format!("--remote=punix:{}/{name}.sock", d.display()),
                    format!("--unixctl={}/{name}.ctl", d.display()),
                    "--no-chdir".into(),
                    "-vconsole:off".into(),
                    format!("--log-file={}/{name}.log", d.display()),
                ],
            ));
        }
        super::wait_for("OVN's databases", 10, || {
            d.join("nb.sock").exists() && d.join("sb.sock").exists()
        });
        procs.push(spawn(
            d,
            None,
            "ovn-northd",
            &[
                format!("--ovnnb-db=unix:{}/nb.sock", d.display()),
                format!("--ovnsb-db=unix:{}/sb.sock", d.display()),
                format!("--unixctl={}/northd.ctl", d.display()),
                "--no-chdir".into(),
                "-vconsole:off".into(),
                format!("--log-file={}/northd.log", d.display()),
            ],
        ));
        Central { dir, _procs: procs }
    }

    /// The southbound database, as ovn-controller's `ovn-remote`.
    pub fn sb(&self) -> String {
        format!("unix:{}/sb.sock", self.dir.path().display())
    }

    /// `ovn-nbctl ARGS`, which must succeed (else the panic shows the
    /// chassis' logs).
    pub fn nbctl(&self, args: &[&str], chassis: &[&Chassis]) -> String {
        let out = Command::new("ovn-nbctl")
            .arg(format!("--db=unix:{}/nb.sock", self.dir.path().display()))
            .arg("--timeout=30")
            .args(args)
            .output()
            .unwrap();
        if !out.status.success() {
            let logs: String = chassis.iter().map(|c| c.logs()).collect();
            panic!("ovn-nbctl {args:?}: {}\n{logs}", stderr(&out));
        }
        stdout(&out)
    }
}

/// One chassis.
pub struct Chassis {
    pub db: Db,
    pub sw: Host,
    controller: Option<Killed>,
    /// Its `system-id`.
    pub name: String,
    encap_ip: String,
    sb: String,
}

impl Chassis {
    /// The namespace and database of chassis `tag`, its switch started
    /// (`daemon` None: Sluice as `ovs-vswitchd`).
    pub fn new(tag: &str, daemon: Option<&str>) -> Chassis {
        let db = Db::start();
        let sw = Host::new(tag, None);
        let out = match daemon {
            None => start_vswitchd(&db, &sw.ns, &as_ovs_vswitchd(db.run())),
            Some(d) => start_daemon(&db, &sw.ns, &[d]),
        };
        assert!(out.status.success(), "start: {}", stderr(&out));
        Chassis {
            db,
            sw,
            controller: None,
            name: format!("hv-{tag}"),
            encap_ip: "172.31.84.1".into(),
            sb: String::new(),
        }
    }

    /// Tunnels to other chassis leave from `ip` (an address the test
    /// puts on br-phy), before [`Chassis::join`].
    pub fn encap_ip(&mut self, ip: &str) {
        self.encap_ip = ip.into();
    }

    /// Points the chassis at `central` and starts its ovn-controller,
    /// which makes br-int.
    pub fn join(&mut self, central: &Central) {
        self.sb = central.sb();
        self.db.vsctl(&[
            "set",
            "open",
            ".",
            &format!("external_ids:system-id={}", self.name),
            &format!("external_ids:ovn-remote={}", self.sb),
            "external_ids:ovn-encap-type=geneve",
            &format!("external_ids:ovn-encap-ip={}", self.encap_ip),
            "external_ids:ovn-bridge-datapath-type=netdev",
        ]);
        self.start_controller();
    }

    fn start_controller(&mut self) {
        let dir = self.db.run().to_path_buf();
        self.controller = Some(spawn(
            &dir,
            Some(&self.sw.ns),
            "ovn-controller",
            &[
                format!("unix:{}/db.sock", dir.display()),
                "--no-chdir".into(),
                "-vconsole:off".into(),
                format!("--log-file={}/ovn-controller.log", dir.display()),
            ],
        ));
        let t = std::time::Instant::now();
        while !self
            .db
            .tool("ovs-vsctl", &["br-exists", "br-int"])
            .status
            .success()
        {
            if t.elapsed().as_secs() > 20 {
                panic!("no br-int from ovn-controller:\n{}", self.logs());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Stops the switch and starts it again (`daemon` as at first), its
    /// ovn-controller going on.
    pub fn restart_switch(&self, daemon: Option<&str>) {
        let out = self.db.appctl(&["exit"]);
        assert!(out.status.success(), "exit: {}", stderr(&out));
        let pid = self.db.run().join("ovs-vswitchd.pid");
        super::wait_for("the switch to exit", 20, || !pid.exists());
        let out = match daemon {
            None => {
                let link = self.db.run().join("ovs-vswitchd");
                start_vswitchd(&self.db, &self.sw.ns, &link)
            }
            Some(d) => start_daemon(&self.db, &self.sw.ns, &[d]),
        };
        assert!(out.status.success(), "restart: {}", stderr(&out));
    }

    /// The switch's and ovn-controller's logs.
    pub fn logs(&self) -> String {
        let d = self.db.run();
        format!(
            "== {} ovn-controller.log\n{}\n== ovs-vswitchd.log\n{}",
            self.name,
            log(d, "ovn-controller.log"),
            log(d, "ovs-vswitchd.log")
        )
    }

    pub fn controller_log(&self) -> String {
        log(self.db.run(), "ovn-controller.log")
    }

    /// VM `tag` (a namespace) with `mac`, `ip`/24 and gateway `gw`, its
    /// veth a port of br-int bound to logical port `lsp` of `ls`.
    pub fn vm(
        &self,
        central: &Central,
        vm: (&str, &str, &str),
        mac: &str,
        ip: &str,
        gw: &str,
    ) -> Host {
        let (tag, ls, lsp) = vm;
        let h = Host::new(tag, None);
        h.exec(&format!("ip link set eth0 address {mac}"));
        h.exec(&format!("ip addr add {ip}/24 dev eth0"));
        h.exec(&format!("ip route add default via {gw}"));
        sh(&format!("ip link set {} netns {}", h.root_if, self.sw.ns));
        self.sw.exec(&format!("ip link set {} up", h.root_if));
        central.nbctl(
            &[
                "lsp-add",
                ls,
                lsp,
                "--",
                "lsp-set-addresses",
                lsp,
                &format!("{mac} {ip}"),
            ],
            &[self],
        );
        self.db.vsctl(&[
            "add-port",
            "br-int",
            &h.root_if,
            "--",
            "set",
            "interface",
            &h.root_if,
            &format!("external_ids:iface-id={lsp}"),
        ]);
        h
    }

    /// `ovs-ofctl -O OpenFlow15 dump-flows br-int`, normalised: no
    /// cookies or statistics; what ovn-northd and ovn-controller choose
    /// anew each run named, not shown (northd's service monitor MAC, the
    /// conntrack zones ovn-controller gives ports and the router's NAT:
    /// what loads `reg11`, `reg12` and `reg13`; a `learn`'s cookie); a
    /// multicast group's outputs sorted; sorted.
    pub fn rules(&self, central: &Central) -> Vec<String> {
        let out = self.db.tool(
            "ovs-ofctl",
            &["-O", "OpenFlow15", "dump-flows", "br-int", "--no-stats"],
        );
        assert!(out.status.success(), "dump-flows: {}", stderr(&out));
        let mac = central.nbctl(
            &["get", "NB_Global", ".", "options:svc_monitor_mac"],
            &[self],
        );
        let mac = mac.trim().trim_matches('"').to_string();
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

/// `set_field:V->REG,` as `set_field:ZONE->REG,`.
fn zone(l: &str, reg: &str) -> String {
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
