//! TCP through a VXLAN tunnel with the veths' default offloads, against
//! a floor (a regression guard, not the benchmark: `bench/tunnel-tcp`).
//! The far end is the kernel's VXLAN device in a namespace whose eth0 is
//! Sluice's underlay tap: where the kernel has UDP-tunnel GSO for taps
//! (Linux 6.17 on) a 64 KB TCP super-frame crosses the tunnel whole in
//! both directions (one outer header pushed, one popped), so TCP keeps
//! the plain forward's speed. The same through Geneve with Sluice at both
//! ends of the tunnel and a router between them; and TCP through the
//! connection tracker (a stateful firewall: `ct(commit)` one way, `+est`
//! back), whose super-frames are tracked whole. Alone in its test binary
//! (and its tests one after the other): the floor is measured with no
//! other test running. Needs root.

mod support;

use support::*;

/// The floor, Gbit/s, each direction (alone on this 2-core VM: 10-12).
const FLOOR_GBPS: f64 = 4.0;

/// Received rate of a 1 s iperf3 run from `client` to `server` at `to`
/// (with `reverse`, `-R`: the server sends, on the connection the client
/// opened).
fn iperf3_gbps(client: &Host, server: &Host, to: &str, reverse: bool) -> f64 {
    server.exec("iperf3 -s -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let r = if reverse { " -R" } else { "" };
    let out = client.exec(&format!("timeout 30 iperf3 -c {to} -t 1{r} -J"));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
        / 1e9
}

/// Held by each test: one at a time.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether this kernel's taps take UDP-tunnel GSO (6.17 on).
fn kernel_has_tap_tunnel_gso() -> bool {
    let r = sh("uname -r");
    let mut v = r
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    (major, minor) >= (6, 17)
}

/// Checks a tunnel run's report: every packet accounted for, no tunnel
/// packet refused, no offload failed; where the kernel has UDP-tunnel GSO
/// for taps, super-frames encapsulated whole, none cut, the underlay
/// ports (`underlays`) carrying super-frames both ways, and the TCP rates
/// each way (`gbps`, Gbit/s) at the floor.
fn check(report: &serde_json::Value, underlays: &[u64], what: &str, gbps: (f64, f64)) {
    assert_balanced(report);
    let dp = &report["datapath"];
    for bad in [
        "tunnel header invalid",
        "tunnel checksum bad",
        "no tunnel port",
        "tunnel mtu exceeded",
    ] {
        assert_eq!(
            dp["dropped"][bad].as_u64().unwrap_or(0),
            0,
            "{bad}: {report}"
        );
    }
    assert_eq!(dp["offload failures"], 0, "{report}");
    if !kernel_has_tap_tunnel_gso() {
        eprintln!("kernel before 6.17: no UDP-tunnel GSO on taps, the floor is not checked");
        return;
    }
    assert!(
        dp["gso encapsulated"].as_u64().unwrap() > 1000,
        "super-frames were cut before the tunnel: {report}"
    );
    assert_eq!(dp["gso segmented"], 0, "{report}");
    for &n in underlays {
        let p = port(report, n);
        assert!(
            p["tx_gso_packets"].as_u64().unwrap() > 1000
                && p["rx_gso_packets"].as_u64().unwrap() > 1000,
            "{p}"
        );
    }
    let (there, back) = gbps;
    assert!(
        there >= FLOOR_GBPS && back >= FLOOR_GBPS,
        "{what} {there:.2} Gbit/s there, {back:.2} back (floor {FLOOR_GBPS})"
    );
}

#[test]
fn vxlan_tcp_through_a_tap_underlay_keeps_super_frames_whole() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let id = std::process::id() % 10000;
    let tap = format!("s{id}vxu");
    let a = Host::with_offloads("tsa", Some("192.168.73.1/24"));
    // Room for the 50 bytes of VXLAN on the underlay's 1500.
    a.exec("ip link set eth0 mtu 1450");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=tap:{tap},ip=10.92.0.1/24"),
            "10=vxlan:remote_ip=10.92.0.2,key=7,csum=true",
        ],
    );
    let far = Host::adopt("tsf", &tap, Some("10.92.0.2/24"));
    far.exec(
        "ip link add vx7 type vxlan id 7 dstport 4789 remote 10.92.0.1 local 10.92.0.2 dev eth0 udpcsum",
    );
    far.exec("ip addr add 192.168.73.2/24 dev vx7");
    far.exec("ip link set vx7 up");
    wait_for("a first ping answer through the tunnel", 15, || {
        a.exec_status("ping -c 1 -W 1 192.168.73.2")
            .status
            .success()
    });
    let there = iperf3_gbps(&a, &far, "192.168.73.2", false);
    let back = iperf3_gbps(&far, &a, "192.168.73.1", false);
    eprintln!("VXLAN TCP: {there:.2} Gbit/s into the tunnel, {back:.2} out of it");
    check(&sw.stop(), &[2], "VXLAN TCP", (there, back));
}

/// Geneve with Sluice at both ends: one switch holds both tunnel ports,
/// host a's end on underlay tap 1 and host b's on tap 2, and a namespace
/// routes between the two taps, so each super-frame leaves Sluice
/// encapsulated into a kernel that routes it (whole: both taps take
/// UDP-tunnel GSO) and comes back to be decapsulated.
#[test]
fn geneve_tcp_between_two_sluice_tunnel_ends_keeps_super_frames_whole() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let id = std::process::id() % 10000;
    let (t1, t2) = (format!("s{id}gu1"), format!("s{id}gu2"));
    let a = Host::with_offloads("tga", Some("192.168.74.1/24"));
    let b = Host::with_offloads("tgb", Some("192.168.74.2/24"));
    // Room for the 50 bytes of Geneve (no options) on the taps' 1500.
    a.exec("ip link set eth0 mtu 1450");
    b.exec("ip link set eth0 mtu 1450");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n\
         in_port=4,actions=output:11\nin_port=11,actions=output:4\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=tap:{t1},ip=10.93.0.1/24"),
            &format!("3=tap:{t2},ip=10.94.0.1/24"),
            &format!("4=afpacket:{}", b.root_if),
            "10=geneve:remote_ip=10.94.0.1,key=8,csum=true",
            "11=geneve:remote_ip=10.93.0.1,key=8,csum=true",
        ],
    );
    let router = Host::adopt("tgr", &t1, Some("10.93.0.2/24"));
    router.exec("sysctl -qw net.ipv4.ip_forward=1");
    sh(&format!("ip link set {t2} netns {}", router.ns));
    router.exec(&format!("ip link set {t2} name eth1"));
    router.exec("ip addr add 10.94.0.2/24 dev eth1");
    router.exec("ip link set eth1 up");
    // Each end's remote is the switch's own address on the other tap: a
    // host route sends it through the router, not out of that tap.
    sw.ctl(&["tnl-route-add", "10.94.0.1/32", "10.93.0.2"]);
    sw.ctl(&["tnl-route-add", "10.93.0.1/32", "10.94.0.2"]);
    wait_for("a first ping answer through the tunnel", 15, || {
        a.exec_status("ping -c 1 -W 1 192.168.74.2")
            .status
            .success()
    });
    let there = iperf3_gbps(&a, &b, "192.168.74.2", false);
    let back = iperf3_gbps(&b, &a, "192.168.74.1", false);
    eprintln!("Geneve TCP, Sluice at both ends: {there:.2} Gbit/s a to b, {back:.2} b to a");
    check(&sw.stop(), &[2, 3], "Geneve TCP", (there, back));
}

/// TCP through a stateful firewall (`ct(commit)` from a, only `+trk+est`
/// back) between a veth and a tap, the veths' offloads on: every
/// super-frame tracked whole (none cut), each direction at the floor,
/// every packet accounted for, and the far side unable to start a
/// connection.
#[test]
fn tcp_through_the_connection_tracker_keeps_super_frames_whole() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let id = std::process::id() % 10000;
    let tap = format!("s{id}fwt");
    let a = Host::with_offloads("tfa", Some("192.168.75.1/24"));
    let sw = Sluice::start(
        None,
        "arp,in_port=1,actions=output:2\narp,in_port=2,actions=output:1\n\
         ip,in_port=1,actions=ct(commit),output:2\nip,in_port=2,actions=ct(table=1)\n\
         table=1,ct_state=+trk+est,ip,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=tap:{tap}"),
        ],
    );
    let far = Host::adopt("tff", &tap, Some("192.168.75.2/24"));
    wait_for("a first ping answer through the firewall", 15, || {
        a.exec_status("ping -c 1 -W 1 192.168.75.2")
            .status
            .success()
    });
    // From the far side nothing new gets in (its echo request is a
    // connection of its own, +new).
    assert!(!far
        .exec_status("ping -c 1 -W 1 192.168.75.1")
        .status
        .success());
    let there = iperf3_gbps(&a, &far, "192.168.75.2", false);
    // The far side sends, on the connection a opened.
    let back = iperf3_gbps(&a, &far, "192.168.75.2", true);
    eprintln!("TCP through the firewall: {there:.2} Gbit/s a to far, {back:.2} back");
    let report = sw.stop();
    assert_balanced(&report);
    let dp = &report["datapath"];
    assert_eq!(dp["gso segmented"], 0, "super-frames were cut: {report}");
    assert_eq!(dp["offload failures"], 0, "{report}");
    let t = port(&report, 2);
    assert!(t["tx_gso_packets"].as_u64().unwrap() > 1000, "{t}");
    assert!(
        there >= FLOOR_GBPS && back >= FLOOR_GBPS,
        "TCP through the firewall {there:.2} Gbit/s there, {back:.2} back (floor {FLOOR_GBPS})"
    );
}
