//! `sluice vswitchd` as ovs-vswitchd, driven only by Debian's Open vSwitch
//! tools: a stock `ovsdb-server` on a private run directory, `ovs-vsctl`
//! to make the bridge and its ports, `ovs-ofctl` on the bridge's `.mgmt`
//! socket, `ovs-appctl` through the pidfile. The switch runs in a
//! namespace of its own with its ports' veths; hosts in two more ping
//! through it. Needs root.

mod support;

use std::path::Path;
use std::process::Command;

use support::ovs::{as_ovs_vswitchd, require_ovs_tools, start_daemon, start_vswitchd, Db};
use support::*;

/// A namespace for the switch (`tag`) and two hosts (`tag1`, `tag2`:
/// 10.`net`.0.1 and .2) whose veths' other ends are in it.
fn switch_and_hosts(tag: &str, net: u8) -> (Host, Host, Host) {
    let sw = Host::new(tag, None);
    let h1 = Host::new(&format!("{tag}1"), Some(&format!("10.{net}.0.1/24")));
    let h2 = Host::new(&format!("{tag}2"), Some(&format!("10.{net}.0.2/24")));
    for h in [&h1, &h2] {
        sh(&format!("ip link set {} netns {}", h.root_if, sw.ns));
    }
    (sw, h1, h2)
}

#[test]
fn ovs_vsctl_ofctl_and_appctl_drive_it() {
    require_ovs_tools(&[]);
    let mut db = Db::start();
    let (sw, h1, h2) = switch_and_hosts("vsw", 77);
    let bin = as_ovs_vswitchd(db.run());
    // ovs-ctl reads the version as the last word of the line that says
    // "Open vSwitch".
    let v = Command::new(&bin).arg("--version").output().unwrap();
    let lines: Vec<&str> = std::str::from_utf8(&v.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("Open vSwitch"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].rsplit(' ').next(), Some("3.1.0"));

    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let pid: u32 = std::fs::read_to_string(db.run().join("ovs-vswitchd.pid"))
        .expect("the pidfile")
        .trim()
        .parse()
        .unwrap();
    // A second daemon finds the pidfile locked and says by whom.
    let second = start_vswitchd(&db, &sw.ns, &bin);
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains(&format!("locked by process {pid}")),
        "{}",
        stderr(&second)
    );

    // The bridge and its ports, as a user makes them; ovs-vsctl waits for
    // the switch (no --no-wait) and reports a port it could not make.
    let br = format!("vb{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    let (_, warn) = db.vsctl(&[
        "add-port",
        &br,
        &h1.root_if,
        "--",
        "add-port",
        &br,
        &h2.root_if,
        "--",
        "add-port",
        &br,
        "nosuch0",
    ]);
    assert!(
        warn.contains("Error detected while setting up 'nosuch0'")
            && warn.contains("No such device"),
        "{warn}"
    );
    assert_eq!(db.get("Interface", &br, "ofport"), "65534");
    // Numbers 1 and 2, in the order OVS would give them (its hash of the
    // names, which hold this process's id).
    let p1 = db.get("Interface", &h1.root_if, "ofport");
    let p2 = db.get("Interface", &h2.root_if, "ofport");
    let mut both = [p1.clone(), p2.clone()];
    both.sort();
    assert_eq!(both, ["1", "2"]);
    // An MTU asked for is set in place: the same interface (ifindex), the
    // port's traffic going on.
    let ifindex = db.get("Interface", &h1.root_if, "ifindex");
    db.vsctl(&["set", "interface", &h1.root_if, "mtu_request=1400"]);
    wait_for("the mtu column", 10, || {
        db.get("Interface", &h1.root_if, "mtu") == "1400"
    });
    assert_eq!(db.get("Interface", &h1.root_if, "ifindex"), ifindex);
    assert!(sw
        .exec(&format!("ip link show {}", h1.root_if))
        .contains("mtu 1400"));
    h1.ping("10.77.0.2");
    assert_eq!(db.get("Interface", "nosuch0", "ofport"), "-1");
    assert_eq!(db.get("Interface", &h1.root_if, "link_state"), "up");
    assert_eq!(db.get("Bridge", &br, "datapath_version"), "\"<built-in>\"");
    assert_eq!(
        db.get("Bridge", &br, "datapath_id").len(),
        18,
        "16 hex digits, quoted"
    );
    assert_eq!(
        db.get("Open_vSwitch", ".", "cur_cfg"),
        db.get("Open_vSwitch", ".", "next_cfg")
    );
    // The bridge's own port is in the switch's namespace, as OVS's is.
    assert!(sw
        .exec_status(&format!("ip link show {br}"))
        .status
        .success());

    // NORMAL by default: the hosts reach each other; the switch learned
    // them.
    h1.ping("10.77.0.2");
    let fdb = db.appctl(&["fdb/show", &br]);
    assert!(fdb.status.success(), "{}", stderr(&fdb));
    assert!(stdout(&fdb).contains(&h2.mac()), "{}", stdout(&fdb));
    // The counters, on OVS's period (5 s).
    wait_for("Interface:statistics", 12, || {
        db.vsctl(&[
            "--if-exists",
            "get",
            "interface",
            &h1.root_if,
            "statistics:rx_packets",
        ])
        .0
        .parse::<u64>()
        .is_ok_and(|n| n >= 3)
    });
    // ovs-ofctl show names each port's interface and its address.
    let show = stdout(&db.tool("ovs-ofctl", &["show", &br]));
    let mac = sw.exec(&format!("cat /sys/class/net/{}/address", h1.root_if));
    assert!(
        show.contains(&format!("{p1}({}): addr:{}", h1.root_if, mac.trim())),
        "{show}"
    );
    // dpif/show in OVS's form.
    let dp = stdout(&db.appctl(&["dpif/show"]));
    assert!(dp.starts_with("netdev@ovs-netdev: hit:"), "{dp}");
    assert!(dp.contains(&format!("  {br}:\n")), "{dp}");
    // Datapath numbers as OVS's gives them: the bridge's own port first
    // (1), then each port the lowest free.
    assert!(
        dp.contains(&format!("    {} {p1}/2: (system)\n", h1.root_if))
            || dp.contains(&format!("    {} {p1}/3: (system)\n", h1.root_if)),
        "{dp}"
    );
    assert!(dp.contains(&format!("    {br} 65534/1: (tap)\n")), "{dp}");
    // Idle, with only a tap and AF_PACKET sockets to read, the datapath
    // thread sleeps (as OVS's main thread does with such ports) instead of
    // taking a core: its CPU over a quiet second, in clock ticks.
    let pid = std::fs::read_to_string(db.run().join("ovs-vswitchd.pid")).unwrap();
    let ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap();
        let f: Vec<u64> = stat
            .rsplit(") ")
            .next()
            .unwrap()
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|v| v.parse().unwrap())
            .collect();
        f[0] + f[1]
    };
    let before = ticks();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let used = ticks() - before;
    assert!(used < 30, "{used} ticks of CPU in an idle second");
    let pmd = stdout(&db.appctl(&["dpif-netdev/pmd-stats-show"]));
    assert!(pmd.contains("  sleeps: "), "{pmd}");
    let v = db.appctl(&["version"]);
    assert!(stdout(&v).starts_with("ovs-vswitchd (Open vSwitch) 3.1.0"));
    // The log's levels at run time, as OVS's tests set them.
    assert!(db.appctl(&["vlog/set", "file:dbg"]).status.success());
    let list = stdout(&db.appctl(&["vlog/list"]));
    assert!(list.contains("console    syslog    file"), "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("openflow") && l.trim_end().ends_with("DBG")),
        "{list}"
    );
    assert_eq!(
        db.appctl(&["vlog/set", "file:l0ud!"]).status.code(),
        Some(2)
    );
    assert!(db.appctl(&["vlog/set", "file:info"]).status.success());
    // One module at a level of its own, as OVS's `vlog/set MODULE:DEST:LEVEL`.
    assert!(db.appctl(&["vlog/set", "tunnel:file:dbg"]).status.success());
    let list = stdout(&db.appctl(&["vlog/list"]));
    let row = |m: &str| {
        list.lines()
            .find(|l| l.starts_with(m))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(row("tunnel"), ["tunnel", "OFF", "OFF", "DBG"], "{list}");
    assert_eq!(
        row("openflow"),
        ["openflow", "OFF", "OFF", "INFO"],
        "{list}"
    );
    assert!(db.appctl(&["vlog/set", "ANY:file:info"]).status.success());
    // The datapath's counters as OVS's coverage events.
    let cov = stdout(&db.appctl(&["coverage/show"]));
    assert!(
        cov.starts_with("Event coverage, avg rate over last: 5 seconds"),
        "{cov}"
    );
    assert!(cov.contains("dp_rx_packets "), "{cov}");
    let rx = stdout(&db.appctl(&["coverage/read-counter", "dp_rx_packets"]));
    assert!(rx.trim().parse::<u64>().is_ok_and(|n| n > 0), "{rx}");
    let bad = db.appctl(&["fdb/show", "nosuchbr"]);
    assert_eq!(bad.status.code(), Some(2), "ovs-appctl exits 2 on an error");
    // The datapath's features as OVS's system tests read and set them.
    let feats = stdout(&db.appctl(&["dpif/show-dp-features", &br]));
    assert!(feats.contains("\nConntrack clear: Yes\n"), "{feats}");
    assert!(feats.contains("\nMPLS Label add: No\n"), "{feats}");
    let off = db.appctl(&["dpif/set-dp-features", &br, "trunc", "false"]);
    assert!(off.status.success(), "{}", stderr(&off));
    let on = db.appctl(&["dpif/set-dp-features", &br, "ct_clear", "false"]);
    assert_eq!(on.status.code(), Some(2), "{}", stderr(&on));

    // ovs-ofctl, OpenFlow 1.0 as it offers by default, on BRIDGE.mgmt.
    let of = db.tool(
        "ovs-ofctl",
        &[
            "add-flow",
            &br,
            &format!("priority=10,in_port={p1},actions=drop"),
        ],
    );
    assert!(of.status.success(), "{}", stderr(&of));
    assert!(!h1.pings("10.77.0.2"), "port 1's traffic is dropped");
    let flows = db.tool("ovs-ofctl", &["dump-flows", &br]);
    assert!(
        stdout(&flows).contains(&format!("in_port={p1} actions=drop")),
        "{}",
        stdout(&flows)
    );
    assert!(db
        .tool("ovs-ofctl", &["del-flows", &br, &format!("in_port={p1}")])
        .status
        .success());
    assert!(h1.pings("10.77.0.2"));

    // A VLAN tag set on a port at run time keeps the hosts apart; removed,
    // they meet again. The port keeps its number.
    db.vsctl(&["set", "port", &h1.root_if, "tag=10"]);
    assert!(!h1.pings("10.77.0.2"), "VLAN 10 and untagged are apart");
    db.vsctl(&["remove", "port", &h1.root_if, "tag", "10"]);
    assert!(h1.pings("10.77.0.2"));
    assert_eq!(db.get("Interface", &h1.root_if, "ofport"), p1);

    // Restarted, it finds the same ports under the same numbers; the
    // bridge's internal port (a persistent tap, as OVS's) keeps the
    // address given it in the kernel meanwhile.
    sw.exec(&format!("ip addr add 192.0.2.77/24 dev {br}"));
    let out = db.appctl(&["exit"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
    assert!(sw
        .exec(&format!("ip -br addr show {br}"))
        .contains("192.0.2.77/24"));
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "restart: {}", stderr(&out));
    assert_eq!(db.get("Interface", &h2.root_if, "ofport"), p2);
    assert!(sw
        .exec(&format!("ip -br addr show {br}"))
        .contains("192.0.2.77/24"));
    h1.ping("10.77.0.2");

    // ovsdb-server restarts: the datapath goes on meanwhile; the daemon
    // connects again, and a change made after is applied (ovs-vsctl,
    // waiting for it, returns).
    db.restart(|| h1.ping("10.77.0.2"));
    db.vsctl(&["set", "port", &h2.root_if, "tag=20"]);
    assert!(!h1.pings("10.77.0.2"));
    db.vsctl(&["remove", "port", &h2.root_if, "tag", "20"]);
    h1.ping("10.77.0.2");

    // An internal port moved into a namespace of its own, as container
    // set-ups do with OVS: its tap goes on carrying the namespace's
    // traffic.
    let h3 = Host::new("vh3", None);
    db.vsctl(&[
        "add-port",
        &br,
        "vint3",
        "--",
        "set",
        "interface",
        "vint3",
        "type=internal",
    ]);
    sw.exec(&format!("ip link set vint3 netns {}", h3.ns));
    h3.exec("ip addr add 10.77.0.3/24 dev vint3");
    h3.exec("ip link set vint3 up");
    h1.ping("10.77.0.3");
    db.vsctl(&["del-port", &br, "vint3"]);

    // Ports and the bridge go as ovs-vsctl removes them.
    db.vsctl(&["del-port", &br, &h2.root_if]);
    assert!(!h1.pings("10.77.0.2"));
    db.vsctl(&["del-br", &br]);
    assert!(
        !db.run().join(format!("{br}.mgmt")).exists(),
        "its OpenFlow socket goes with it"
    );
    let log = std::fs::read_to_string(db.run().join("ovs-vswitchd.log")).unwrap();
    // (The second daemon's refusal is the one error expected.)
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| {
            (l.contains("|WARN|") || l.contains("|ERR|")) && !l.contains("is locked by process")
        })
        .collect();
    assert!(
        warnings.is_empty(),
        "a clean run logs no warning: {warnings:?}"
    );
    // `exit --cleanup` takes the internal ports' taps with it.
    assert!(db.appctl(&["exit", "--cleanup"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
    assert!(!sw
        .exec_status(&format!("ip link show {br}"))
        .status
        .success());
}

#[test]
fn a_controller_set_by_ovs_vsctl_drives_a_secure_bridge() {
    require_root_and(&["ip", "ping", "ovsdb-server", "ovs-vsctl", "osken-manager"]);
    let db = Db::start();
    let (sw, h1, h2) = switch_and_hosts("vcs", 78);
    let bin = as_ovs_vswitchd(db.run());
    // Read at the start, as ovs-vswitchd reads it: the PMD on CPU 0.
    db.vsctl(&[
        "--no-wait",
        "set",
        "Open_vSwitch",
        ".",
        "other_config:pmd-cpu-mask=0x1",
    ]);
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let stats = stdout(&db.appctl(&["dpif-netdev/pmd-stats-show"]));
    assert!(stats.contains("pmd thread 0 core_id 0:"), "{stats}");
    // At run time: tx-flush-interval applies at once.
    db.vsctl(&[
        "set",
        "Open_vSwitch",
        ".",
        "other_config:tx-flush-interval=50",
    ]);
    let log = std::fs::read_to_string(db.run().join("ovs-vswitchd.log")).unwrap();
    assert!(
        log.contains("other_config:pmd-cpu-mask=0x1: applied"),
        "{log}"
    );
    assert!(
        log.contains("other_config:tx-flush-interval: applied"),
        "{log}"
    );
    let br = format!("vc{}", std::process::id() % 10000);
    db.vsctl(&["add-br", &br, "--", "set-fail-mode", &br, "secure"]);
    db.vsctl(&[
        "add-port",
        &br,
        &h1.root_if,
        "--",
        "add-port",
        &br,
        &h2.root_if,
    ]);
    // Secure and no controller: no rules, nothing passes.
    assert!(!h1.pings("10.78.0.2"));
    // A controller in the switch's namespace (os-ken, an L2 learning app).
    let port = 6653 + std::process::id() % 1000;
    let log = db.run().join("osken.log");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/osken/l2learn.py");
    let _ctl = Killed(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &sw.ns,
                "osken-manager",
                "--ofp-tcp-listen-port",
            ])
            .arg(port.to_string())
            .arg(app)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    let target = format!("tcp:127.0.0.1:{port}");
    db.vsctl(&["set-controller", &br, &target]);
    wait_for("the controller's connection", 20, || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("L2LEARN connected")
    });
    let dpid = db
        .get("Bridge", &br, "datapath_id")
        .trim_matches('"')
        .to_string();
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(&format!("dpid={dpid}")),
        "the controller sees the datapath id the row holds"
    );
    wait_for("the table-miss rule", 20, || {
        stdout(&db.tool("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &br]))
            .contains("actions=CONTROLLER")
    });
    // (The pings refused before left the host's neighbour entry FAILED,
    // which the kernel may not ask for again at once.)
    h1.exec("ip neigh flush all");
    if !h1.pings("10.78.0.2") {
        // What the controller, the OpenFlow side and the datapath saw.
        panic!(
            "no ping through the controller's rules\ncontroller: {}\n{}\n{}\n{}\nports: {}\nneighbours: {}\nlog: {}",
            std::fs::read_to_string(&log).unwrap(),
            stdout(&db.appctl(&["sluice/ctl", "of-show"])),
            stdout(&db.appctl(&["sluice/ctl", "pmd-stats"])),
            stdout(&db.appctl(&["sluice/ctl", "dump-flows"])),
            stdout(&db.appctl(&["sluice/ctl", "dump-ports"])),
            h1.exec("ip neigh"),
            std::fs::read_to_string(db.run().join("ovs-vswitchd.log")).unwrap()
        );
    }
    h1.ping("10.78.0.2");
    wait_for("is_connected", 10, || {
        db.get("Controller", &br, "is_connected") == "true"
    });
    assert_eq!(db.get("Controller", &br, "role"), "other");
    // Removed: the connection ends and, as OVS's connmgr does when a
    // bridge's last controller goes, its flows are flushed: a secure
    // bridge then passes nothing; back to standalone, NORMAL again.
    db.vsctl(&["del-controller", &br]);
    assert!(db.vsctl(&["list", "Controller"]).0.is_empty());
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", &br]));
    assert_eq!(flows.lines().count(), 1, "flushed: {flows}");
    assert!(!h1.pings("10.78.0.2"));
    db.vsctl(&["del-fail-mode", &br]);
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", &br]));
    assert!(flows.contains("priority=0 actions=NORMAL"), "{flows}");
    h1.exec("ip neigh flush all");
    h1.ping("10.78.0.2");
    assert!(db.appctl(&["exit"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
}

/// Passive controller targets (`ptcp:`, `punix:`), as `ovs-vsctl
/// set-controller` writes them: the bridge listens there, `ovs-ofctl`
/// reaches it through them, and a target taken out of the row stops
/// listening (its socket file gone) while the others stay.
#[test]
fn passive_controller_targets_listen_until_they_are_removed() {
    require_ovs_tools(&[]);
    let db = Db::start();
    let sw = Host::new("vpt", None);
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let br = format!("vp{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    let port = 16000 + std::process::id() % 1000;
    let tcp = format!("tcp:127.0.0.1:{port}");
    let sock = db.run().join("passive.sock");
    let unix = format!("unix:{}", sock.display());
    db.vsctl(&[
        "set-controller",
        &br,
        &format!("ptcp:{port}:127.0.0.1"),
        &format!("punix:{}", sock.display()),
    ]);
    // The listener is in the switch's namespace; ovs-ofctl goes there.
    let ofctl_tcp = |args: &[&str]| {
        let mut all = vec!["netns", "exec", &sw.ns, "ovs-ofctl"];
        all.extend_from_slice(args);
        Command::new("ip").args(&all).output().unwrap()
    };
    let added = ofctl_tcp(&["add-flow", &tcp, "priority=7,udp,actions=drop"]);
    assert!(added.status.success(), "{}", stderr(&added));
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", &unix]));
    assert!(flows.contains("priority=7,udp actions=drop"), "{flows}");
    // The same bridge as its .mgmt socket.
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", &br]));
    assert!(flows.contains("priority=7,udp actions=drop"), "{flows}");
    // The unix target taken out: its socket goes, TCP stays.
    db.vsctl(&["set-controller", &br, &format!("ptcp:{port}:127.0.0.1")]);
    wait_for("the unix listener to close", 10, || !sock.exists());
    assert!(!db.tool("ovs-ofctl", &["show", &unix]).status.success());
    let shown = ofctl_tcp(&["show", &tcp]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    // A target that cannot be is refused with the reason in the row.
    db.vsctl(&["set-controller", &br, "ptcp:99999"]);
    wait_for("the error in the Controller row", 10, || {
        db.get("Controller", &br, "status")
            .contains("is not a TCP port")
    });
    assert!(!ofctl_tcp(&["show", &tcp]).status.success());
    db.vsctl(&["del-controller", &br]);
    assert!(db.appctl(&["exit"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
}

/// The `SSL` table, as `ovs-vsctl set-ssl` writes it: a `pssl:`
/// controller target listens only once the key, certificate and CA are
/// there (before, the row's status says what is missing), serves
/// `ovs-ofctl` over TLS with a certificate of that CA, and refuses one of
/// another CA.
#[test]
fn the_ssl_table_secures_pssl_controllers() {
    require_ovs_tools(&["openssl"]);
    let pki = tempfile::tempdir().unwrap();
    support::make_pki(pki.path());
    let p = |s: &str| pki.path().join(s).display().to_string();
    let db = Db::start();
    let sw = Host::new("vsl", None);
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let br = format!("vs{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    let port = 17000 + std::process::id() % 1000;
    db.vsctl(&["set-controller", &br, &format!("pssl:{port}:127.0.0.1")]);
    wait_for("the SSL table named in the Controller row", 10, || {
        db.get("Controller", &br, "status").contains("set-ssl")
    });
    db.vsctl(&["set-ssl", &p("sw.key"), &p("sw.pem"), &p("ca.pem")]);
    let ofctl_ssl = |who: &str| {
        Command::new("ip")
            .args(["netns", "exec", &sw.ns, "timeout", "10", "ovs-ofctl"])
            .args([
                "-p",
                &p(&format!("{who}.key")),
                "-c",
                &p(&format!("{who}.pem")),
            ])
            .args(["-C", &p("ca.pem"), "show", &format!("ssl:127.0.0.1:{port}")])
            .output()
            .unwrap()
    };
    wait_for("ovs-ofctl over TLS", 10, || {
        ofctl_ssl("ctl").status.success()
    });
    let shown = ofctl_ssl("ctl");
    assert!(
        stdout(&shown).contains("OFPT_FEATURES_REPLY"),
        "{}",
        stdout(&shown)
    );
    assert!(!ofctl_ssl("intruder").status.success());
    // Still serving after the refused peer.
    assert!(ofctl_ssl("ctl").status.success());
    db.vsctl(&["del-ssl"]);
    wait_for("the listener to close without the SSL table", 10, || {
        !ofctl_ssl("ctl").status.success()
    });
    assert!(db.appctl(&["exit"]).status.success());
}

/// Port mirroring as `ovs-vsctl`'s manual sets it up: a `Mirror` row
/// with a port's traffic both ways copied to a third port, on which the
/// copies (and only they) arrive; cleared, none.
#[test]
fn a_mirror_made_by_ovs_vsctl_copies_a_ports_traffic() {
    require_ovs_tools(&["tcpdump"]);
    let db = Db::start();
    let (sw, h1, h2) = switch_and_hosts("vmr", 79);
    let h3 = Host::new("vmr3", None);
    sh(&format!("ip link set {} netns {}", h3.root_if, sw.ns));
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let br = format!("vm{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    for h in [&h1, &h2, &h3] {
        db.vsctl(&["add-port", &br, &h.root_if]);
    }
    h1.ping("10.79.0.2");
    db.vsctl(&[
        "--",
        "--id=@p",
        "get",
        "port",
        &h1.root_if,
        "--",
        "--id=@o",
        "get",
        "port",
        &h3.root_if,
        "--",
        "--id=@m",
        "create",
        "mirror",
        "name=m0",
        "select-src-port=@p",
        "select-dst-port=@p",
        "output-port=@o",
        "--",
        "set",
        "bridge",
        &br,
        "mirrors=@m",
    ]);
    // What reaches h3 while h1 pings h2 three times.
    let seen = |h3: &Host| -> String {
        let cap = db.run().join(format!("{}.txt", h3.ns));
        let mut dump = Command::new("ip")
            .args([
                "netns", "exec", &h3.ns, "tcpdump", "-l", "-n", "-i", "eth0", "icmp",
            ])
            .stdout(std::fs::File::create(&cap).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        h1.exec("ping -c 3 -i 0.2 -W 1 10.79.0.2");
        std::thread::sleep(std::time::Duration::from_millis(500));
        let _ = dump.kill();
        let _ = dump.wait();
        std::fs::read_to_string(&cap).unwrap()
    };
    let copies = seen(&h3);
    assert_eq!(copies.matches("ICMP echo request").count(), 3, "{copies}");
    assert_eq!(copies.matches("ICMP echo reply").count(), 3, "{copies}");
    let log = std::fs::read_to_string(db.run().join("ovs-vswitchd.log")).unwrap();
    assert!(log.contains(&format!("bridge {br}: mirrors [m0]")), "{log}");
    // Gone: nothing more reaches h3 (NORMAL knows both hosts).
    db.vsctl(&["clear", "bridge", &br, "mirrors"]);
    let copies = seen(&h3);
    assert!(!copies.contains("ICMP"), "{copies}");
    assert!(db.appctl(&["exit"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
}

/// The rows ovs-vswitchd writes back, as text to compare.
fn written_rows(db: &Db) -> String {
    let list = |table: &str, columns: &str| {
        let mut lines: Vec<String> = db
            .vsctl(&[
                &format!("--columns={columns}"),
                "--format=csv",
                "list",
                table,
            ])
            .0
            .lines()
            .map(String::from)
            .collect();
        lines.sort();
        lines.join("\n")
    };
    format!(
        "{}\n{}\ncur_cfg={} next_cfg={} dpdk_initialized={}",
        list(
            "Interface",
            "name,type,ofport,error,admin_state,link_state,link_speed,duplex,mtu,ofport_request,status"
        ),
        list("Bridge", "name,datapath_version,fail_mode"),
        db.get("Open_vSwitch", ".", "cur_cfg"),
        db.get("Open_vSwitch", ".", "next_cfg"),
        db.get("Open_vSwitch", ".", "dpdk_initialized"),
    )
}

/// The same ovs-vsctl commands, given to `daemon` in a namespace of its
/// own with veths vA, vB and vC: the rows written back, and what
/// ovs-vsctl warned of.
fn run_script(tag: &str, daemon: &[&str]) -> (String, Vec<String>) {
    let db = Db::start();
    let ns = Host::new(tag, None);
    for v in ["vA", "vB", "vC"] {
        ns.exec(&format!("ip link add {v} type veth peer name p{v}"));
        ns.exec(&format!("ip link set {v} up"));
        ns.exec(&format!("ip link set p{v} up"));
    }
    let out = start_daemon(&db, &ns.ns, daemon);
    assert!(out.status.success(), "{daemon:?}: {}", stderr(&out));
    let mut warnings = Vec::new();
    let script: &[&[&str]] = &[
        // The bridge with two ports in one transaction: OVS numbers them
        // in the order of its shash of port names, not of the command.
        &[
            "add-br",
            "brX",
            "--",
            "set",
            "bridge",
            "brX",
            "datapath_type=netdev",
            "--",
            "add-port",
            "brX",
            "vA",
            "--",
            "add-port",
            "brX",
            "vB",
        ],
        &["add-port", "brX", "nosuch0"],
        // Six internal ports at once.
        &[
            "add-port",
            "brX",
            "i1",
            "--",
            "set",
            "interface",
            "i1",
            "type=internal",
            "--",
            "add-port",
            "brX",
            "i2",
            "--",
            "set",
            "interface",
            "i2",
            "type=internal",
            "--",
            "add-port",
            "brX",
            "i3",
            "--",
            "set",
            "interface",
            "i3",
            "type=internal",
            "--",
            "add-port",
            "brX",
            "i4",
            "--",
            "set",
            "interface",
            "i4",
            "type=internal",
            "--",
            "add-port",
            "brX",
            "i5",
            "--",
            "set",
            "interface",
            "i5",
            "type=internal",
            "--",
            "add-port",
            "brX",
            "i6",
            "--",
            "set",
            "interface",
            "i6",
            "type=internal",
        ],
        &["set", "interface", "vB", "ofport_request=7"],
        &[
            "add-port",
            "brX",
            "int1",
            "--",
            "set",
            "interface",
            "int1",
            "type=internal",
        ],
        &[
            "add-port",
            "brX",
            "t0",
            "--",
            "set",
            "interface",
            "t0",
            "type=tap",
        ],
        &["del-port", "brX", "vA"],
        &["add-port", "brX", "vC", "--", "set", "port", "vC", "tag=5"],
        &[
            "add-port",
            "brX",
            "bad1",
            "--",
            "set",
            "interface",
            "bad1",
            "type=frobnicate",
        ],
        &["set-fail-mode", "brX", "secure"],
        // What ovn-controller does to learn what the datapath can do.
        &[
            "--",
            "--id=@dp",
            "create",
            "Datapath",
            "datapath_version=0",
            "--",
            "set",
            "Open_vSwitch",
            ".",
            "datapaths:netdev=@dp",
        ],
    ];
    let ofport = |name: &str| db.get("Interface", name, "ofport");
    let i_ports = |db: &Db| {
        let mut v: Vec<i64> = (1..=6)
            .map(|k| {
                db.get("Interface", &format!("i{k}"), "ofport")
                    .parse()
                    .unwrap()
            })
            .collect();
        v.sort();
        v
    };
    for (k, cmd) in script.iter().enumerate() {
        let (_, w) = db.vsctl(cmd);
        warnings.extend(
            w.lines()
                .filter(|l| l.contains("Error detected"))
                .map(String::from),
        );
        match k {
            // Names OVS's shash keeps in buckets of their own: the order
            // is its hash order, the same whatever the rows' UUIDs.
            0 => warnings.push(format!(
                "after add-br: vA={} vB={}",
                ofport("vA"),
                ofport("vB")
            )),
            // Names that share a bucket come in the order of their rows'
            // UUIDs, which two databases do not share: the numbers as a
            // set.
            2 => warnings.push(format!("six at once took {:?}", i_ports(&db))),
            _ => {}
        }
    }
    warnings.push(format!("the six at the end: {:?}", i_ports(&db)));
    // The Datapath row's capabilities: the same keys as OVS writes (their
    // values say what each switch has: docs/vswitchd.md), and the same
    // VLAN depth and hash.
    let dp = db
        .vsctl(&["get", "Open_vSwitch", ".", "datapaths:netdev"])
        .0;
    let caps = db.vsctl(&["get", "Datapath", dp.trim(), "capabilities"]).0;
    let caps: Vec<(String, String)> = caps
        .trim()
        .trim_matches(['{', '}'])
        .split(", ")
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect();
    warnings.push(format!(
        "capabilities: {:?}",
        caps.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
    ));
    for key in ["max_vlan_headers", "max_hash_alg", "recirc", "ct_state"] {
        let v = caps.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        warnings.push(format!("{key}={v:?}"));
    }
    // The flows OVS's connmgr leaves: set-fail-mode secure with no
    // controller flushed them (NORMAL too).
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", "brX"]));
    warnings.push(format!(
        "flows: {:?}",
        flows
            .lines()
            .skip(1)
            .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    ));
    let rows = written_rows(&db)
        .lines()
        .map(|l| match l.split_once(",internal,") {
            Some((name, rest)) if name.len() == 2 && name.starts_with('i') => {
                let rest = rest.split_once(',').map_or("", |(_, r)| r);
                format!("{name},internal,*,{rest}")
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(db.appctl(&["exit"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
    (rows, warnings)
}

#[test]
fn the_rows_written_back_are_those_of_ovs() {
    require_root_and(&["ip", "ovsdb-server", "ovs-vsctl", "ovs-vswitchd"]);
    let ovs = run_script("vdo", &["ovs-vswitchd"]);
    let sluice = run_script("vds", &[sluice_bin(), "vswitchd"]);
    assert_eq!(
        sluice.1, ovs.1,
        "ovs-vsctl's warnings and the numbers on the way"
    );
    assert_eq!(sluice.0, ovs.0, "the rows written back");
    assert!(
        ovs.1.iter().any(|w| w == "max_vlan_headers=Some(\"1\")")
            && ovs.1.iter().any(|w| w.contains("\"ct_zero_snat\"")),
        "OVS wrote the Datapath row's capabilities: {:?}",
        ovs.1
    );
    // What the script left: the numbers as OVS gives them.
    for want in [
        "vB,\"\"\"\"\"\",7,[],up,up,10000000000,full,1500,7",
        "vC,\"\"\"\"\"\",12,",
        "int1,internal,10,[],down,down",
    ] {
        assert!(ovs.0.contains(want), "{want} in {}", ovs.0);
    }
}
