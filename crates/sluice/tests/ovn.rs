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
//! VIP with two backends over TCP (conntrack, NAT, a select group), OVN's
//! native DHCP (pinctrl's pause and `NXT_RESUME`), and `ovn-nbctl
//! --wait=hv sync` returning. Then two chassis, each a
//! namespace with its own switch and ovn-controller, over Geneve through
//! `br-phy`: a logical switch and router across them, TCP at a VM MTU of
//! 1400, a switch restarted and the overlay back; both chassis Sluice,
//! then one Sluice and one Open vSwitch. The same script with Open
//! vSwitch 3.1's own `ovs-vswitchd` must give the same results (the
//! test's check that it tests something), and both must hold the same
//! OpenFlow rules, as `ovs-ofctl -O OpenFlow15 dump-flows` prints them.
//! Needs root.

mod support;

use std::path::Path;

use support::ovn::{Central, Chassis};
use support::*;

const OVS: &str = "/usr/sbin/ovs-vswitchd";

/// A router `lr1` joining logical switches `ls1` (10.84.1.0/24) and
/// `ls2` (10.84.2.0/24).
fn router(central: &Central, on: &[&Chassis]) {
    central.nbctl(&["ls-add", "ls1"], on);
    central.nbctl(&["ls-add", "ls2"], on);
    central.nbctl(&["lr-add", "lr1"], on);
    for (ls, mac, ip) in [
        ("ls1", "00:00:00:00:f1:fe", "10.84.1.254/24"),
        ("ls2", "00:00:00:00:f2:fe", "10.84.2.254/24"),
    ] {
        let lrp = format!("lr1-{ls}");
        let lsp = format!("{ls}-lr1");
        central.nbctl(&["lrp-add", "lr1", &lrp, mac, ip], on);
        central.nbctl(
            &[
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
            ],
            on,
        );
    }
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
    let central = Central::start();
    let mut c = Chassis::new(tag, daemon);
    c.join(&central);
    let nbctl = |args: &[&str]| central.nbctl(args, &[&c]);
    router(&central, &[&c]);
    let vm1 = c.vm(
        &central,
        (&format!("{tag}1"), "ls1", "vm1"),
        "f0:00:00:84:01:01",
        "10.84.1.1",
        "10.84.1.254",
    );
    let vm2 = c.vm(
        &central,
        (&format!("{tag}2"), "ls1", "vm2"),
        "f0:00:00:84:01:02",
        "10.84.1.2",
        "10.84.1.254",
    );
    let vm3 = c.vm(
        &central,
        (&format!("{tag}3"), "ls2", "vm3"),
        "f0:00:00:84:02:03",
        "10.84.2.3",
        "10.84.2.254",
    );
    let vm4 = c.vm(
        &central,
        (&format!("{tag}4"), "ls2", "vm4"),
        "f0:00:00:84:02:04",
        "10.84.2.4",
        "10.84.2.254",
    );
    // --wait=hv returns once ovn-controller has the flows installed.
    nbctl(&["--wait=hv", "sync"]);
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
    // OVN's native DHCP: ovn-controller's pinctrl pauses the request
    // (`controller(userdata=...,pause)`), adds the options and resumes it
    // (`NXT_RESUME`); the pipeline turns it into the reply.
    let dhcp = nbctl(&["dhcp-options-create", "10.84.1.0/24"]);
    assert!(dhcp.trim().is_empty(), "{dhcp}");
    let uuid = nbctl(&[
        "--bare",
        "--columns=_uuid",
        "find",
        "dhcp_options",
        "cidr=\"10.84.1.0/24\"",
    ]);
    let uuid = uuid.trim();
    nbctl(&[
        "dhcp-options-set-options",
        uuid,
        "lease_time=3600",
        "router=10.84.1.254",
        "server_id=10.84.1.254",
        "server_mac=c0:ff:ee:00:00:01",
    ]);
    nbctl(&["lsp-set-dhcpv4-options", "vm2", uuid]);
    nbctl(&["--wait=hv", "sync"]);
    let lease = vm2.exec_status("busybox udhcpc -i eth0 -f -q -n -t 5 -T 1 -s /bin/true");
    let said = format!("{}{}", stdout(&lease), stderr(&lease));
    check(
        "DHCP gives vm2 its address",
        said.contains("lease of 10.84.1.2 obtained"),
    );

    // The router's own address: its ARP and ICMP responders.
    check("ping the router's port", vm1.pings("10.84.1.254"));
    check("ping across the router", vm1.pings("10.84.2.3"));
    check("ping back across the router", vm4.pings("10.84.1.2"));

    // A stateful ACL on ls2: to vm3 only TCP to `ports` opens a
    // connection; the replies of what it starts come back.
    let acl = |ports: &str| {
        let allow = format!("outport == \"vm3\" && ip4 && tcp.dst == {ports}");
        nbctl(&[
            "acl-add",
            "ls2",
            "to-lport",
            "1001",
            &allow,
            "allow-related",
        ]);
        let all = "outport == \"vm3\" && ip4";
        nbctl(&["acl-add", "ls2", "to-lport", "1000", all, "drop"]);
        nbctl(&["--wait=hv", "sync"]);
    };
    acl("5201");
    // (Open vSwitch revalidates its datapath flows in the background: a
    // ping may still pass for a moment after --wait=hv returns; refused
    // soon after, then for good.)
    let refused = (0..10).any(|_| !vm1.pings("10.84.2.3")) && !vm1.pings("10.84.2.3");
    check("the ACL refuses a new ping in", refused);
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
    nbctl(&["acl-del", "ls2"]);

    // A load balancer on ls1: a VIP, two backends on ls2 over TCP.
    nbctl(&[
        "lb-add",
        "lb1",
        "10.84.9.100:80",
        "10.84.2.3:8080,10.84.2.4:8080",
        "tcp",
    ]);
    nbctl(&["ls-lb-add", "ls1", "lb1"]);
    nbctl(&["--wait=hv", "sync"]);
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

    // The ACL again beside the load balancer (to vm3, TCP 5201 and the
    // backends' 8080 open new connections): the whole pipeline, whose
    // rules both switches must hold.
    acl("{5201, 8080}");
    check(
        "the VIP serves through the ACL",
        (0..3).all(|_| vm1.exec_status(fetch).status.success()),
    );
    if let (Some(dir), Some(_)) = (std::env::var_os("SLUICE_OVN_DUMP"), daemon) {
        dump_pipeline(&c, Path::new(&dir), &[&vm1, &vm2, &vm3, &vm4]);
    }

    let rules = c.rules(&central);
    let log = c.logs();
    drop((vm1, vm2, vm3, vm4));
    (Seen { checks, rules }, log)
}

/// Writes what OVN installed into Open vSwitch's br-int to `dir`, for
/// `scripts/ovn-compare` and `bench/ovn-pipeline`: the rules
/// (`pipeline.flows`, as `ovs-ofctl add-flows` reads them back), groups,
/// meters, the Geneve option map, and `ports.txt` (each VM's ofport, MAC
/// and address, and the router ports').
fn dump_pipeline(c: &Chassis, dir: &Path, vms: &[&Host]) {
    std::fs::create_dir_all(dir).unwrap();
    let of = |args: &[&str]| {
        let mut all = vec!["-O", "OpenFlow15"];
        all.extend(args);
        all.push("br-int");
        let out = c.db.tool("ovs-ofctl", &all);
        assert!(out.status.success(), "ovs-ofctl {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let body = |text: String| -> String {
        // The reply's heading line ("OFPST_FLOW reply ...") dropped.
        text.lines()
            .filter(|l| !l.starts_with("OFP") && !l.starts_with("NXST") && !l.trim().is_empty())
            .map(|l| format!("{}\n", l.trim()))
            .collect()
    };
    let files = [
        (
            "pipeline.flows",
            of(&["--no-stats", "--no-names", "dump-flows"]),
        ),
        ("pipeline.groups", of(&["--no-names", "dump-groups"])),
        ("pipeline.meters", of(&["dump-meters"])),
        ("pipeline.tlv", of(&["dump-tlv-map"])),
    ];
    for (name, text) in files {
        let keep = if name == "pipeline.tlv" {
            text
        } else {
            body(text)
        };
        std::fs::write(dir.join(name), keep).unwrap();
    }
    let mut ports = String::from("# name ofport mac ip (the VMs, from the test's namespaces)\n");
    for (i, vm) in vms.iter().enumerate() {
        let (ofport, _) = c.db.vsctl(&["get", "interface", &vm.root_if, "ofport"]);
        let link = vm.exec("ip -o link show eth0");
        let mac = link
            .split("link/ether ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("");
        let addr = vm.exec("ip -o -4 addr show eth0");
        let ip = addr
            .split("inet ")
            .nth(1)
            .and_then(|t| t.split('/').next())
            .unwrap_or("");
        ports.push_str(&format!("vm{} {ofport} {mac} {ip}\n", i + 1));
    }
    std::fs::write(dir.join("ports.txt"), ports).unwrap();
}

#[test]
fn ovn_programs_sluice_as_it_programs_open_vswitch() {
    let (ovs, ovs_log) = run("ovo", Some(OVS));
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

/// Pings `to` from `vm` until two are answered, for up to ten tries (the
/// first may go while a tunnel's next hop is being found).
fn pings_soon(vm: &Host, to: &str) -> bool {
    (0..10).any(|_| vm.pings(to))
}

/// Two chassis, each a namespace with its own database, switch and
/// ovn-controller, the underlay a veth between them with its address on
/// `br-phy` (as OVS's userspace tunnels have it): vm1 (ls1) on chassis a,
/// vm2 (ls1) and vm3 (ls2) on chassis b, the router between the
/// switches. ovn-controller makes the Geneve ports itself
/// (`options:key=flow`, `csum=true`, the other chassis' `remote_ip`).
fn across(tag: &str, daemons: [Option<&str>; 2]) -> (Vec<(&'static str, bool)>, String) {
    let central = Central::start();
    let mut a = Chassis::new(&format!("{tag}a"), daemons[0]);
    let mut b = Chassis::new(&format!("{tag}b"), daemons[1]);
    let id = std::process::id() % 10000;
    let (ua, ub) = (format!("u{id}{tag}a"), format!("u{id}{tag}b"));
    sh(&format!(
        "ip link add {ua} netns {} type veth peer name {ub} netns {}",
        a.sw.ns, b.sw.ns
    ));
    for (c, u, ip) in [(&mut a, &ua, "172.31.85.1"), (&mut b, &ub, "172.31.85.2")] {
        // (The kernel would answer ARP for br-phy's address on the
        // uplink too, with the uplink's MAC: docs/tunnels.md.)
        c.sw.exec(&format!("sysctl -qw net.ipv4.conf.{u}.arp_ignore=1"));
        c.sw.exec(&format!("ip link set {u} up"));
        c.db.add_br("br-phy", &["--", "add-port", "br-phy", u]);
        c.sw.exec(&format!("ip addr add {ip}/24 dev br-phy"));
        c.sw.exec("ip link set br-phy up");
        c.encap_ip(ip);
        c.join(&central);
    }
    router(&central, &[&a, &b]);
    let vm1 = a.vm(
        &central,
        (&format!("{tag}1"), "ls1", "vm1"),
        "f0:00:00:85:01:01",
        "10.84.1.1",
        "10.84.1.254",
    );
    let vm2 = b.vm(
        &central,
        (&format!("{tag}2"), "ls1", "vm2"),
        "f0:00:00:85:01:02",
        "10.84.1.2",
        "10.84.1.254",
    );
    let vm3 = b.vm(
        &central,
        (&format!("{tag}3"), "ls2", "vm3"),
        "f0:00:00:85:02:03",
        "10.84.2.3",
        "10.84.2.254",
    );
    central.nbctl(&["--wait=hv", "sync"], &[&a, &b]);
    let diag = || {
        for c in [&a, &b] {
            eprintln!("{} {}", c.name, c.db.vsctl(&["show"]).0);
            eprintln!("{} {}", c.name, c.sw.exec("ip -br addr"));
            for cmd in [
                &["tnl/ports/show"][..],
                &["ovs/route/show"],
                &["tnl/neigh/show"],
                &["dpctl/dump-flows"],
            ] {
                eprintln!("{} {cmd:?}:\n{}", c.name, stdout(&c.db.appctl(cmd)));
            }
        }
    };
    let mut checks = Vec::new();
    let across = pings_soon(&vm1, "10.84.1.2");
    if !across {
        diag();
    }
    checks.push(("ping across the chassis", across));
    checks.push(("ping back across the chassis", vm2.pings("10.84.1.1")));
    let routed = pings_soon(&vm1, "10.84.2.3");
    if !routed {
        diag();
        let port = a.db.get("Interface", &vm1.root_if, "ofport");
        let trace = a.db.appctl(&[
            "ofproto/trace",
            "br-int",
            &format!("in_port={port},icmp,dl_src=f0:00:00:85:01:01,dl_dst=00:00:00:00:f1:fe,nw_src=10.84.1.1,nw_dst=10.84.2.3,nw_ttl=64,icmp_type=8"),
        ]);
        let t = stdout(&trace);
        let lines: Vec<&str> = t.lines().collect();
        eprintln!(
            "trace:\n{}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        );
    }
    checks.push(("ping across the chassis and the router", routed));
    // TCP with a VM MTU of 1400 (Geneve's headers and options fit the
    // underlay's 1500).
    for vm in [&vm1, &vm2] {
        vm.exec("ip link set eth0 mtu 1400");
    }
    vm2.exec("sh -c 'iperf3 -s -1 -D -p 5201 >/dev/null 2>&1'");
    std::thread::sleep(std::time::Duration::from_millis(300));
    checks.push((
        "TCP across the chassis at MTU 1400",
        vm1.exec_status("timeout 15 iperf3 -c 10.84.1.2 -p 5201 -t 2")
            .status
            .success(),
    ));
    // A chassis' switch restarted: the overlay comes back.
    a.restart_switch(daemons[0]);
    let back = (0..3).any(|_| pings_soon(&vm1, "10.84.1.2"));
    if !back {
        diag();
    }
    checks.push(("the overlay back after a switch restart", back));
    let logs = a.logs() + &b.logs();
    drop((vm1, vm2, vm3));
    (checks, logs)
}

#[test]
fn ovn_across_two_chassis_over_geneve() {
    let (ovs, ovs_logs) = across("gvo", [Some(OVS), Some(OVS)]);
    for (what, ok) in &ovs {
        assert!(ok, "with Open vSwitch: {what}\n{ovs_logs}");
    }
    let (sluice, logs) = across("gvs", [None, None]);
    for (what, ok) in &sluice {
        assert!(ok, "with Sluice: {what}\n{logs}");
    }
    assert!(!logs.contains("OpenFlow error"), "{logs}");
    // A mixed pair: Sluice on chassis a (the one restarted), Open vSwitch
    // on b; the overlay is the same Geneve both ways.
    let (mixed, logs) = across("gvm", [None, Some(OVS)]);
    for (what, ok) in &mixed {
        assert!(ok, "Sluice with Open vSwitch: {what}\n{logs}");
    }
}
