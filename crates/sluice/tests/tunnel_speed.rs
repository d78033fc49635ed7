//! TCP through a VXLAN tunnel with the veths' default offloads, against
//! a floor (a regression guard, not the benchmark: `bench/tunnel-tcp`).
//! The far end is the kernel's VXLAN device in a namespace whose eth0 is
//! Sluice's underlay tap: where the kernel has UDP-tunnel GSO for taps
//! (Linux 6.17 on) a 64 KB TCP super-frame crosses the tunnel whole in
//! both directions (one outer header pushed, one popped), so TCP keeps
//! the plain forward's speed. Alone in its test binary: the floor is
//! measured with no other test running. Needs root.

mod support;

use support::*;

/// The floor, Gbit/s, each direction (alone on this 2-core VM: 10-12).
const FLOOR_GBPS: f64 = 4.0;

fn iperf3_gbps(client: &Host, server: &Host, to: &str) -> f64 {
    server.exec("iperf3 -s -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = client.exec(&format!("timeout 30 iperf3 -c {to} -t 1 -J"));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
        / 1e9
}

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

#[test]
fn vxlan_tcp_through_a_tap_underlay_keeps_super_frames_whole() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
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
    let there = iperf3_gbps(&a, &far, "192.168.73.2");
    let back = iperf3_gbps(&far, &a, "192.168.73.1");
    eprintln!("VXLAN TCP: {there:.2} Gbit/s into the tunnel, {back:.2} out of it");
    let report = sw.stop();
    assert_balanced(&report);
    let dp = &report["datapath"];
    for bad in [
        "tunnel header invalid",
        "tunnel checksum bad",
        "no tunnel port",
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
    let ports = report["ports"].as_array().unwrap();
    let underlay = ports.iter().find(|p| p["number"] == 2).unwrap();
    // Super-frames went to the kernel whole and came from it whole.
    assert!(
        dp["gso encapsulated"].as_u64().unwrap() > 1000,
        "super-frames were cut before the tunnel: {report}"
    );
    assert_eq!(dp["gso segmented"], 0, "{report}");
    assert!(
        underlay["tx_gso_packets"].as_u64().unwrap() > 1000
            && underlay["rx_gso_packets"].as_u64().unwrap() > 1000,
        "{underlay}"
    );
    assert!(
        there >= FLOOR_GBPS && back >= FLOOR_GBPS,
        "VXLAN TCP {there:.2} Gbit/s into the tunnel, {back:.2} out of it (floor {FLOOR_GBPS})"
    );
}
