//! Tunnels between real hosts: Sluice against the Linux kernel's own VXLAN
//! device over IPv4 (ping and iperf3 TCP both ways, the underlay's frames
//! captured and checked) and IPv6 (ping both ways), and two Sluice switches joined by an underlay veth with
//! Geneve and GRE (traffic kept apart per VNI). The kernel here has VXLAN
//! but no Geneve or GRE device: those are checked Sluice to Sluice and
//! against Open vSwitch (`tunnels_ovs.rs`). Needs root.

mod support;

use support::*;

/// Pings until one answer comes (the first packets wait for ARP on the
/// underlay and inside the tunnel), then three must all come back.
fn ping_ok(from: &Host, to: &str) {
    wait_for(
        &format!("a first answer from {to} in {}", from.ns),
        15,
        || {
            from.exec_status(&format!("ping -c 1 -W 1 {to}"))
                .status
                .success()
        },
    );
    from.ping(to);
}

/// Stops a switch and checks every packet is accounted for and none was
/// refused as a bad tunnel packet.
fn stopped_clean(sw: Sluice) {
    let report = sw.stop();
    assert_balanced(&report);
    let dropped = &report["datapath"]["dropped"];
    for bad in [
        "tunnel header invalid",
        "tunnel checksum bad",
        "no tunnel port",
    ] {
        assert_eq!(dropped[bad].as_u64().unwrap_or(0), 0, "{bad}: {report}");
    }
}

fn ping_fails(from: &Host, to: &str) {
    let out = from.exec_status(&format!("ping -c 2 -i 0.2 -W 1 {to}"));
    assert!(
        !out.status.success(),
        "{to} answered {} across VNIs",
        from.ns
    );
}

fn iperf3_bytes(client: &Host, server: &Host, to: &str) -> u64 {
    server.exec("iperf3 -s -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = client.exec(&format!("timeout 30 iperf3 -c {to} -t 2 -J"));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    j["end"]["sum_received"]["bytes"].as_u64().unwrap()
}

/// A root-namespace veth pair (both ends Sluice's), removed on drop.
struct Wire(String, String);

impl Wire {
    fn new(tag: &str) -> Wire {
        let id = std::process::id() % 10000;
        let (a, b) = (format!("s{id}{tag}0"), format!("s{id}{tag}1"));
        let _ = sh_status(&format!("ip link del {a} 2>/dev/null"));
        sh(&format!(
            "ip link add {a} type veth peer name {b} && \
             sysctl -qw net.ipv6.conf.{a}.disable_ipv6=1 && \
             sysctl -qw net.ipv6.conf.{b}.disable_ipv6=1 && \
             ip link set {a} up && ip link set {b} up"
        ));
        Wire(a, b)
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = sh_status(&format!("ip link del {} 2>/dev/null", self.0));
    }
}

/// The outer headers of the VXLAN frames around ICMP in a capture: (UDP
/// source port, VNI, UDP checksum right and present, IPv4 checksum right).
fn vxlan_frames(pcap: &std::path::Path) -> Vec<(u16, u32, bool, bool)> {
    let bytes = std::fs::read(pcap).unwrap();
    let frames = sluice_port::pcap::read_all(&bytes).unwrap();
    let sum = |b: &[u8], acc: u32| sluice_packet::wire::checksum::sum(acc, b);
    let fin = sluice_packet::wire::checksum::finish;
    frames
        .iter()
        .map(|r| &r.data)
        .filter(|d| {
            d.len() > 98
                && d[12..14] == [8, 0]
                && d[23] == 17
                && d[36..38] == [0x12, 0xb5]
                && d[62..64] == [8, 0]
                && d[73] == 1
        })
        .map(|d| {
            let ip_ok = fin(sum(&d[14..34], 0)) == 0;
            let udp_len = u16::from_be_bytes([d[38], d[39]]);
            let src = u32::from_be_bytes([d[26], d[27], d[28], d[29]]);
            let dst = u32::from_be_bytes([d[30], d[31], d[32], d[33]]);
            let ps = sluice_packet::wire::checksum::pseudo_v4(src, dst, 17, udp_len);
            let present = d[40..42] != [0, 0];
            let udp_ok = present && fin(sum(&d[34..34 + udp_len as usize], ps)) == 0;
            let vni = u32::from_be_bytes([0, d[46], d[47], d[48]]);
            (u16::from_be_bytes([d[34], d[35]]), vni, udp_ok, ip_ok)
        })
        .collect()
}

/// The simplest form, exactly as docs/live-ports.md writes it: a host behind
/// Sluice, an underlay port with an address, a VXLAN port to a fixed
/// peer, two rules. The far end is the kernel's VXLAN device (which
/// checks the outer checksums Sluice writes with csum=true). Offloads on
/// on the host side: TSO super-frames are cut before encapsulation.
#[test]
fn vxlan_to_the_kernel_carries_ping_and_iperf3_both_ways() {
    require_root_and(&["ip", "ping", "iperf3", "tcpdump"]);
    let a = Host::with_offloads("tva", Some("192.168.71.1/24"));
    let far = Host::new("tvf", Some("10.91.0.2/24"));
    far.exec(
        "ip link add vx42 type vxlan id 42 dstport 4789 remote 10.91.0.1 local 10.91.0.2 dev eth0",
    );
    far.exec("ip addr add 192.168.71.2/24 dev vx42");
    far.exec("ip link set vx42 up");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{},ip=10.91.0.1/24", far.root_if),
            "10=vxlan:remote_ip=10.91.0.2,key=42,csum=true",
        ],
    );
    ping_ok(&a, "192.168.71.2");
    ping_ok(&far, "192.168.71.1");
    let neigh = sw.ctl(&["tnl-neigh-show"]);
    assert!(neigh.contains("10.91.0.2"), "{neigh}");
    // What Sluice puts on the underlay, as the far side's tcpdump sees it.
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("underlay.pcap");
    let mut dump = std::process::Command::new("ip")
        .args([
            "netns", "exec", &far.ns, "timeout", "20", "tcpdump", "-i", "eth0", "-U", "-n", "-c",
            "3",
        ])
        .arg("-w")
        .arg(&cap)
        .args([
            "udp",
            "dst",
            "port",
            "4789",
            "and",
            "src",
            "host",
            "10.91.0.1",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    ping_ok(&a, "192.168.71.2");
    let _ = dump.wait();
    let frames = vxlan_frames(&cap);
    assert!(frames.len() >= 3, "{frames:?}");
    for f in &frames {
        assert_eq!(f.1, 42, "VNI");
        assert!(
            f.2 && f.3,
            "outer checksums (UDP present and right, IPv4 right): {f:?}"
        );
        assert!((32768..61000).contains(&f.0), "UDP source port {}", f.0);
    }
    assert!(
        frames.iter().all(|f| f.0 == frames[0].0),
        "one inner flow (the pings), one source port: {frames:?}"
    );
    let there = iperf3_bytes(&a, &far, "192.168.71.2");
    assert!(
        there > 5_000_000,
        "iperf3 to the kernel's side moved {there} bytes"
    );
    let back = iperf3_bytes(&far, &a, "192.168.71.1");
    assert!(
        back > 5_000_000,
        "iperf3 from the kernel's side moved {back} bytes"
    );
    // An inner packet that leaves no room for the tunnel's 50 bytes on the
    // 1500-byte underlay (1500 bytes of IP, DF) is dropped where it is
    // encapsulated, each counted as `tunnel mtu exceeded`; one that
    // leaves room (1450) passes.
    let big = a.exec_status("ping -c 3 -i 0.2 -W 1 -M do -s 1472 192.168.71.2");
    assert!(!big.status.success(), "1500-byte pings crossed");
    a.exec("ping -c 2 -i 0.2 -W 2 -M do -s 1422 192.168.71.2");
    let report = sw.stop();
    assert_balanced(&report);
    let dropped = &report["datapath"]["dropped"];
    assert_eq!(dropped["tunnel mtu exceeded"].as_u64(), Some(3), "{report}");
    let underlay = port(&report, 2);
    assert_eq!(
        underlay["tx_dropped"]["too big"].as_u64(),
        Some(0),
        "{underlay}"
    );
}

/// The underlay address the kernel's, on an internal (tap) port, as
/// Open vSwitch's `br-phy`: no `ip=`; the kernel's route to the peer
/// leaves by the tap, the kernel answers ARP for its address, Sluice
/// asks for the peer through the tap's rules and learns it from the
/// reply going to the tap. The switch runs in a namespace of its own
/// (the tap's address and route are that namespace's).
#[test]
fn vxlan_through_an_internal_port_with_the_kernels_address() {
    require_root_and(&["ip", "ping"]);
    let sw_ns = Host::new("tks", None);
    let a = Host::new("tka", Some("192.168.72.1/24"));
    let far = Host::new("tkf", Some("10.92.0.2/24"));
    far.exec(
        "ip link add vx42 type vxlan id 42 dstport 4789 remote 10.92.0.1 local 10.92.0.2 dev eth0",
    );
    far.exec("ip addr add 192.168.72.2/24 dev vx42");
    far.exec("ip link set vx42 up");
    for h in [&a, &far] {
        sh(&format!("ip link set {} netns {}", h.root_if, sw_ns.ns));
        // (The kernel would answer ARP for the tap's address on this
        // port too, with the port's MAC: docs/vswitchd.md.)
        sw_ns.exec(&format!(
            "sysctl -qw net.ipv4.conf.{}.arp_ignore=1",
            h.root_if
        ));
    }
    let tap = format!("k{}phy", std::process::id() % 10000);
    let sw = Sluice::start(
        Some(&sw_ns.ns),
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n\
         in_port=3,actions=output:2\nin_port=2,actions=output:3\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{}", far.root_if),
            &format!("3=tap:{tap}"),
            "10=vxlan:remote_ip=10.92.0.2,key=42",
        ],
    );
    sw_ns.exec(&format!("ip addr add 10.92.0.1/24 dev {tap}"));
    ping_ok(&a, "192.168.72.2");
    ping_ok(&far, "192.168.72.1");
    let neigh = sw.ctl(&["tnl-neigh-show"]);
    assert!(neigh.contains("10.92.0.2"), "{neigh}");
    let routes = sw.ctl(&["tnl-route-show"]);
    assert!(
        routes.contains(&format!("Cached: 10.92.0.0/24 dev {tap} SRC 10.92.0.1")),
        "{routes}"
    );
    stopped_clean(sw);
}

/// The same over an IPv6 underlay: Sluice answers the kernel's neighbour
/// solicitations for its address and solicits the kernel's; the kernel's
/// VXLAN device checks the UDP checksums Sluice writes by default over
/// IPv6 (it refuses zero ones unless told otherwise).
#[test]
fn vxlan_over_ipv6_to_the_kernel_carries_ping_both_ways() {
    require_root_and(&["ip", "ping"]);
    let a = Host::new("t6a", Some("192.168.76.1/24"));
    let far = Host::new("t6f", None);
    far.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=0");
    far.exec("sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0");
    far.exec("ip -6 addr add fd91::2/64 dev eth0 nodad");
    far.exec(
        "ip link add vx42 type vxlan id 42 dstport 4789 remote fd91::1 local fd91::2 dev eth0",
    );
    far.exec("ip addr add 192.168.76.2/24 dev vx42");
    far.exec("ip link set vx42 up");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{},ip=fd91::1/64", far.root_if),
            "10=vxlan:remote_ip=fd91::2,key=42",
        ],
    );
    ping_ok(&a, "192.168.76.2");
    ping_ok(&far, "192.168.76.1");
    let neigh = sw.ctl(&["tnl-neigh-show"]);
    assert!(neigh.contains("fd91::2"), "{neigh}");
    // The kernel learned Sluice's address by asking it.
    let theirs = far.exec("ip -6 neigh show dev eth0");
    assert!(theirs.contains("fd91::1"), "{theirs}");
    stopped_clean(sw);
}

/// Two Sluice switches, one underlay wire, Geneve with `key=flow`: the
/// rules choose the VNI (100 for one pair of hosts, 200 for the other)
/// and deliver by it, so the pairs reach each other and nothing else.
fn two_switches(kind: &str, tag: &str, net: u8) {
    require_root_and(&["ip", "ping"]);
    let w = Wire::new(&format!("{tag}w"));
    let a1 = Host::new(&format!("{tag}a1"), Some(&format!("192.168.{net}.1/24")));
    let a2 = Host::new(&format!("{tag}a2"), Some(&format!("192.168.{net}.1/24")));
    let b1 = Host::new(&format!("{tag}b1"), Some(&format!("192.168.{net}.2/24")));
    let b2 = Host::new(&format!("{tag}b2"), Some(&format!("192.168.{net}.3/24")));
    let flows = "in_port=1,actions=set_field:100->tun_id,output:10\n\
                 in_port=2,actions=set_field:200->tun_id,output:10\n\
                 in_port=10,tun_id=100,actions=output:1\n\
                 in_port=10,tun_id=200,actions=output:2\n";
    let side = |h1: &Host, h2: &Host, wire: &str, me: u8, peer: u8| {
        Sluice::start(
            None,
            flows,
            &[
                &format!("1=afpacket:{}", h1.root_if),
                &format!("2=afpacket:{}", h2.root_if),
                &format!("3=afpacket:{wire},ip=10.{net}.0.{me}/24"),
                &format!("10={kind}:remote_ip=10.{net}.0.{peer},key=flow"),
            ],
        )
    };
    let sa = side(&a1, &a2, &w.0, 1, 2);
    let sb = side(&b1, &b2, &w.1, 2, 1);
    ping_ok(&a1, &format!("192.168.{net}.2"));
    ping_ok(&b2, &format!("192.168.{net}.1"));
    // VNI 100 holds a1 and b1 only; VNI 200 a2 and b2.
    ping_fails(&a1, &format!("192.168.{net}.3"));
    ping_fails(&b1, &format!("192.168.{net}.9"));
    if kind == "geneve" {
        // The underlay's state from the control socket, and ports at run
        // time: a tunnel port added keeps what was learned.
        sa.ctl(&["tnl-route-add", "10.200.0.0/16", &format!("10.{net}.0.2")]);
        let routes = sa.ctl(&["tnl-route-show"]);
        assert!(
            routes.contains(&format!("User: 10.200.0.0/16 dev port 3 GW 10.{net}.0.2")),
            "{routes}"
        );
        sa.ctl(&[
            "tnl-neigh-set",
            "3",
            &format!("10.{net}.0.9"),
            "02:00:00:00:00:09",
        ]);
        assert!(
            sa.ctl_status(&["tnl-neigh-set", "1", "10.1.1.1", "02:00:00:00:00:09"])
                .status
                .code()
                != Some(0)
        );
        sa.ctl(&[
            "add-port",
            &format!("11=vxlan:remote_ip=10.{net}.0.2,key=5"),
        ]);
        let shown = sa.ctl(&["tnl-ports-show"]);
        assert!(
            shown.contains(&format!(
                "tunnel port 11: vxlan:remote_ip=10.{net}.0.2,key=5"
            )),
            "{shown}"
        );
        let neigh = sa.ctl(&["tnl-neigh-show"]);
        assert!(
            neigh.contains(&format!("10.{net}.0.2 ")) && neigh.contains("02:00:00:00:00:09"),
            "{neigh}"
        );
        sa.ctl(&["del-port", "11"]);
        ping_ok(&a1, &format!("192.168.{net}.2"));
        // Geneve options mapped at run time: the same traffic still flows
        // (these rules set no option), the map reads back as set.
        let tlv = "{class=0x102,type=0x80,len=4}->tun_metadata0";
        sa.ctl(&["add-tlv-map", tlv]);
        sb.ctl(&["add-tlv-map", tlv]);
        let dump = sa.ctl(&["dump-tlv-map"]);
        assert!(
            dump.contains(" 0x0102 0x80  4       tun_metadata0"),
            "{dump}"
        );
        assert!(
            sa.ctl_status(&["add-tlv-map", "{class=1,type=1,len=4}->tun_metadata0"])
                .status
                .code()
                != Some(0),
            "tun_metadata0 is taken"
        );
        ping_ok(&b2, &format!("192.168.{net}.1"));
    }
    let shown = sa.ctl(&["tnl-ports-show"]);
    assert!(
        shown.contains(&format!(
            "tunnel port 10: {kind}:remote_ip=10.{net}.0.2,key=flow"
        )),
        "{shown}"
    );
    for r in [sa.stop(), sb.stop()] {
        assert_balanced(&r);
        assert!(port(&r, 3)["tx_packets"].as_u64().unwrap() > 0);
    }
}

#[test]
fn geneve_between_two_switches_keeps_vnis_apart() {
    two_switches("geneve", "tg", 72);
}

#[test]
fn gre_between_two_switches_keeps_keys_apart() {
    two_switches("gre", "tr", 73);
}

#[test]
fn vxlan_over_afxdp_underlays_between_two_switches() {
    require_root_and(&["ip", "ping"]);
    let w = Wire::new("txw");
    let a = Host::new("txa", Some("192.168.74.1/24"));
    let b = Host::new("txb", Some("192.168.74.2/24"));
    let flows = "in_port=1,actions=output:10\nin_port=10,actions=output:1\n";
    let side = |h: &Host, wire: &str, me: u8, peer: u8| {
        Sluice::start(
            None,
            flows,
            &[
                &format!("1=afxdp:{}", h.root_if),
                &format!("2=afxdp:{wire},ip=10.74.0.{me}/24"),
                &format!("10=vxlan:remote_ip=10.74.0.{peer},key=7"),
            ],
        )
    };
    let sa = side(&a, &w.0, 1, 2);
    let sb = side(&b, &w.1, 2, 1);
    ping_ok(&a, "192.168.74.2");
    ping_ok(&b, "192.168.74.1");
    assert_balanced(&sa.stop());
    assert_balanced(&sb.stop());
}
