//! Tunnels as Open vSwitch's userspace datapath makes them, configured
//! only through Debian's `ovs-vsctl` on a stock `ovsdb-server`: two
//! chassis, each a network namespace running its own switch, a VM
//! (namespace) on `br-int`, a Geneve or VXLAN port on `br-int`, and the
//! underlay on `br-phy`: the physical port a veth to the other chassis,
//! the address on `br-phy`'s internal port in the kernel. Routes come
//! from the namespace's kernel table, the next hop is found by ARP
//! through `br-phy`. Sluice to Sluice (Geneve, then the same port turned
//! VXLAN at run time), and Sluice to Open vSwitch 3.1's own
//! `ovs-vswitchd` (Geneve, then VXLAN; and with the underlay in a VLAN:
//! the address on an internal port of `br-phy` tagged 20, the uplink a
//! trunk, as OVS-DPDK deployments set their tunnel endpoint). Needs root.

mod support;

use support::ovs::{as_ovs_vswitchd, require_ovs_tools, start_daemon, start_vswitchd, Db};
use support::*;

/// One chassis: its database, its switch's namespace and its VM.
struct Chassis {
    db: Db,
    sw: Host,
    vm: Host,
}

impl Chassis {
    /// The namespaces and database of chassis `tag`, its VM at `vm_ip`.
    fn new(tag: &str, vm_ip: &str) -> Chassis {
        let db = Db::start();
        let sw = Host::new(tag, None);
        let vm = Host::new(&format!("{tag}v"), Some(vm_ip));
        sh(&format!("ip link set {} netns {}", vm.root_if, sw.ns));
        // (Open vSwitch does not bring a system port up.)
        sw.exec(&format!("ip link set {} up", vm.root_if));
        Chassis { db, sw, vm }
    }

    /// Starts `daemon` (None: Sluice as `ovs-vswitchd`) and configures
    /// br-int (the VM, tunnel port `tun0` of `kind` to `remote`) and
    /// br-phy (`uplink`, address `addr` in the kernel).
    fn configure(&self, daemon: Option<&str>, uplink: &str, addr: &str, kind: &str, remote: &str) {
        self.configure_in(daemon, uplink, addr, kind, remote, false);
    }

    /// [`Chassis::configure`], with `vlan` the underlay address on
    /// internal port `vl20` of `br-phy`, tagged 20 (the uplink stays a
    /// trunk of every VLAN), as OVS-DPDK deployments set their tunnel
    /// endpoint.
    fn configure_in(
        &self,
        daemon: Option<&str>,
        uplink: &str,
        addr: &str,
        kind: &str,
        remote: &str,
        vlan: bool,
    ) {
        let out = match daemon {
            None => {
                let bin = as_ovs_vswitchd(self.db.run());
                start_vswitchd(&self.db, &self.sw.ns, &bin)
            }
            Some(d) => start_daemon(&self.db, &self.sw.ns, &[d]),
        };
        assert!(out.status.success(), "start: {}", stderr(&out));
        let db = &self.db;
        db.add_br(
            "br-int",
            &[
                "--",
                "add-port",
                "br-int",
                &self.vm.root_if,
                "--",
                "add-port",
                "br-int",
                "tun0",
                "--",
                "set",
                "interface",
                "tun0",
                &format!("type={kind}"),
                &format!("options:remote_ip={remote}"),
            ],
        );
        db.add_br("br-phy", &["--", "add-port", "br-phy", uplink]);
        let dev = if vlan {
            db.vsctl(&[
                "add-port",
                "br-phy",
                "vl20",
                "tag=20",
                "--",
                "set",
                "interface",
                "vl20",
                "type=internal",
            ]);
            assert_eq!(db.get("Interface", "vl20", "error"), "[]");
            wait_for("vl20 in the kernel", 10, || {
                self.sw.exec_status("ip link show vl20").status.success()
            });
            "vl20"
        } else {
            "br-phy"
        };
        self.sw.exec(&format!("ip addr add {addr} dev {dev}"));
        self.sw.exec(&format!("ip link set {dev} up"));
        assert_eq!(db.get("Interface", "tun0", "error"), "[]");
    }

    fn appctl(&self, args: &[&str]) -> String {
        let out = self.db.appctl(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Nothing at WARN or above in Sluice's log.
    fn log_is_clean(&self) {
        let log = std::fs::read_to_string(self.db.run().join("ovs-vswitchd.log")).unwrap();
        assert!(
            !log.lines()
                .any(|l| l.contains("|WARN|") || l.contains("|ERR|")),
            "{log}"
        );
    }
}

/// Two chassis joined by an underlay veth (`ua` in a's namespace, `ub`
/// in b's).
fn two_chassis(tag: &str) -> (Chassis, Chassis, String, String) {
    require_ovs_tools(&[]);
    let a = Chassis::new(&format!("{tag}a"), "10.83.0.1/24");
    let b = Chassis::new(&format!("{tag}b"), "10.83.0.2/24");
    let id = std::process::id() % 10000;
    let (ua, ub) = (format!("u{id}{tag}a"), format!("u{id}{tag}b"));
    sh(&format!(
        "ip link add {ua} netns {} type veth peer name {ub} netns {}",
        a.sw.ns, b.sw.ns
    ));
    for (c, u) in [(&a, &ua), (&b, &ub)] {
        c.sw.exec(&format!("ethtool -K {u} tx off tso off gso off"));
        // The kernel also sees what arrives on the physical port: with
        // Linux's defaults it answers ARP there for br-phy's address,
        // with the port's MAC, and the peer may keep that one (as with
        // OVS). A physical port of br-phy answers nothing itself.
        c.sw.exec(&format!("sysctl -qw net.ipv4.conf.{u}.arp_ignore=1"));
        c.sw.exec(&format!("ip link set {u} up"));
    }
    (a, b, ua, ub)
}

/// The VMs ping each other (the first pings may go while the next hop
/// is being resolved: retried).
fn vms_ping(a: &Chassis, b: &Chassis) {
    let mut ok = false;
    for _ in 0..10 {
        let _ = a.vm.exec_status("ip neigh flush dev eth0");
        if a.vm.pings("10.83.0.2") {
            ok = true;
            break;
        }
    }
    if !ok {
        let mut what = String::new();
        for (name, c) in [("a", a), ("b", b)] {
            for cmd in [
                &["ovs/route/show"][..],
                &["tnl/neigh/show"],
                &["tnl/ports/show", "-v"],
                &["dpctl/dump-flows"],
            ] {
                what += &format!("{name} {cmd:?}:\n{}\n", stdout(&c.db.appctl(cmd)));
            }
            what += &c.sw.exec("ip -br addr");
            what += &c.sw.exec("ip -br link");
            what += &c.sw.exec("ip neigh");
        }
        panic!("the VMs do not reach each other:\n{what}");
    }
    a.vm.ping("10.83.0.2");
    b.vm.ping("10.83.0.1");
}

#[test]
fn geneve_and_vxlan_between_two_sluice_chassis_through_br_phy() {
    let (a, b, ua, ub) = two_chassis("tn");
    a.configure(None, &ua, "172.31.83.1/24", "geneve", "172.31.83.2");
    b.configure(None, &ub, "172.31.83.2/24", "geneve", "172.31.83.1");

    // The route from the kernel's table, through br-phy's device.
    wait_for("the kernel's route to br-phy", 10, || {
        a.appctl(&["ovs/route/show"])
            .contains("Cached: 172.31.83.0/24 dev br-phy SRC 172.31.83.1")
    });
    // A route added by hand, as OVS's, and taken away.
    assert_eq!(
        a.appctl(&["ovs/route/add", "192.0.2.0/24", "br-phy", "172.31.83.2"])
            .trim(),
        "OK"
    );
    assert!(a
        .appctl(&["ovs/route/show"])
        .contains("User: 192.0.2.0/24 dev br-phy GW 172.31.83.2 SRC 172.31.83.1"));
    a.appctl(&["ovs/route/del", "192.0.2.0/24"]);
    assert!(!a.appctl(&["ovs/route/show"]).contains("192.0.2.0"));
    vms_ping(&a, &b);
    // The peer's address learned from its ARP reply through br-phy.
    let neigh = a.appctl(&["tnl/neigh/show"]);
    assert!(
        neigh
            .lines()
            .any(|l| l.starts_with("172.31.83.2 ") && l.trim_end().ends_with("br-phy")),
        "{neigh}"
    );
    // One set by hand, as OVS's tnl/neigh/set, shown by its bridge.
    assert_eq!(
        a.appctl(&[
            "tnl/neigh/set",
            "br-phy",
            "172.31.83.9",
            "02:00:00:00:83:09"
        ])
        .trim(),
        "OK"
    );
    let neigh = a.appctl(&["tnl/neigh/show"]);
    assert!(
        neigh.lines().any(|l| l.starts_with("172.31.83.9 ")
            && l.contains("02:00:00:00:83:09")
            && l.trim_end().ends_with("br-phy")),
        "{neigh}"
    );
    // One pass out (the push straight to the uplink's datapath port),
    // and a pop on the way in.
    let flows = a.appctl(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("tnl_push(tnl_port(genev_sys_6081),header("),
        "{flows}"
    );
    assert!(flows.contains("tnl_pop(genev_sys_6081)"), "{flows}");

    // The same port turned VXLAN at run time, on both sides.
    for c in [&a, &b] {
        c.db.vsctl(&["set", "interface", "tun0", "type=vxlan"]);
        assert_eq!(c.db.get("Interface", "tun0", "error"), "[]");
    }
    vms_ping(&a, &b);
    let flows = a.appctl(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("tnl_push(tnl_port(vxlan_sys_4789),header("),
        "{flows}"
    );

    // A trace shows the way through br-phy.
    let trace = a.appctl(&[
        "ofproto/trace",
        "br-int",
        &format!(
            "in_port={},dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,ip,nw_src=10.83.0.1,nw_dst=10.83.0.2",
            a.db.get("Interface", &a.vm.root_if, "ofport")
        ),
    ]);
    assert!(trace.contains("via br-phy"), "{trace}");
    assert!(trace.contains("bridge(\"br-phy\")"), "{trace}");
    for c in [&a, &b] {
        c.log_is_clean();
        assert!(c.db.appctl(&["exit"]).status.success());
    }
}

#[test]
fn geneve_between_sluice_and_open_vswitch_through_br_phy() {
    let (a, b, ua, ub) = two_chassis("to");
    a.configure(None, &ua, "172.31.84.1/24", "geneve", "172.31.84.2");
    b.configure(
        Some("/usr/sbin/ovs-vswitchd"),
        &ub,
        "172.31.84.2/24",
        "geneve",
        "172.31.84.1",
    );
    vms_ping(&a, &b);
    let neigh = a.appctl(&["tnl/neigh/show"]);
    assert!(neigh.contains("172.31.84.2 "), "{neigh}");
    // Open vSwitch learned Sluice's side the same way.
    let theirs = b.appctl(&["tnl/neigh/show"]);
    assert!(theirs.contains("172.31.84.1 "), "{theirs}");
    // VXLAN the same way.
    for c in [&a, &b] {
        c.db.vsctl(&["set", "interface", "tun0", "type=vxlan"]);
    }
    vms_ping(&a, &b);
    assert!(a
        .appctl(&["dpctl/dump-flows"])
        .contains("tnl_push(tnl_port(vxlan_sys_4789),header("));
    a.log_is_clean();
    for c in [&a, &b] {
        assert!(c.db.appctl(&["exit"]).status.success());
    }
}

#[test]
fn vxlan_between_sluice_and_open_vswitch_with_the_underlay_in_a_vlan() {
    let (a, b, ua, ub) = two_chassis("tv");
    a.configure_in(None, &ua, "172.31.85.1/24", "vxlan", "172.31.85.2", true);
    b.configure_in(
        Some("/usr/sbin/ovs-vswitchd"),
        &ub,
        "172.31.85.2/24",
        "vxlan",
        "172.31.85.1",
        true,
    );
    // Open vSwitch's side takes only frames in VLAN 20 to its tunnel
    // endpoint: the VMs reach each other only if Sluice's encapsulated
    // frames leave tagged, and Sluice's pops what comes in tagged.
    vms_ping(&a, &b);
    let flows = a.appctl(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("tnl_push(tnl_port(vxlan_sys_4789),header(")
            && flows.contains("vlan(vid=20,pcp=0)"),
        "{flows}"
    );
    assert!(flows.contains("tnl_pop(vxlan_sys_4789)"), "{flows}");
    // Each side learned the other's address through the tagged port,
    // named as OVS names it.
    let ours = a.appctl(&["tnl/neigh/show"]);
    let theirs = b.appctl(&["tnl/neigh/show"]);
    let line = |t: &str, ip: &str| {
        t.lines()
            .find(|l| l.starts_with(ip))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
    };
    let (o, t) = (line(&ours, "172.31.85.2 "), line(&theirs, "172.31.85.1 "));
    assert!(o.is_some() && o == t, "ours:\n{ours}\ntheirs:\n{theirs}");
    // Geneve the same way.
    for c in [&a, &b] {
        c.db.vsctl(&["set", "interface", "tun0", "type=geneve"]);
    }
    vms_ping(&a, &b);
    a.log_is_clean();
    for c in [&a, &b] {
        assert!(c.db.appctl(&["exit"]).status.success());
    }
}
