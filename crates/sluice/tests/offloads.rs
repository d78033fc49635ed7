//! TCP between namespaces whose veths keep the kernel's default offloads
//! (partial checksums, 64 KB TSO super-frames), through AF_PACKET ports
//! with virtio-net headers (`vnet=on`): super-frames pass whole between
//! two vnet ports, and are cut into segments in software for an AF_XDP
//! output; a NAT rewrite (mod_nw_dst + mod_tp_dst and back) on the stream
//! keeps every checksum valid. Needs root and the tools `scripts/setup`
//! installs.

mod support;

use support::*;

/// a (port 1) talks to 10.74.0.99:5201; Sluice rewrites that to b
/// (10.74.0.2:5202) and b's answers back.
const NAT: &str = "\
priority=100,in_port=1,tcp,nw_dst=10.74.0.99,tp_dst=5201,actions=mod_nw_dst:10.74.0.2,mod_tp_dst:5202,output:2
priority=100,in_port=2,tcp,nw_src=10.74.0.2,tp_src=5202,actions=mod_nw_src:10.74.0.99,mod_tp_src:5201,output:1
priority=1,in_port=1,actions=output:2
priority=1,in_port=2,actions=output:1
";

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The IPv4 header and TCP header of a captured frame, checked to carry
/// the NAT's rewrite (to b's address and port 5202): (ip, ihl).
fn rewritten(f: &[u8]) -> (&[u8], usize) {
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 15) * 4;
    assert_eq!(&ip[16..20], &[10, 74, 0, 2], "nw_dst rewritten");
    assert_eq!(be16(ip, ihl + 2), 5202, "tp_dst rewritten");
    (ip, ihl)
}

fn csum_ok(data: &[u8], init: u32) -> bool {
    let mut s = init;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

/// Sets up a and b, Sluice between them with port spec `kind_b` on b's
/// side (`IF` stands for its interface), and
/// runs iperf3 from a to b through the NAT for 2 s. With `capture`, b
/// records what arrives (tcpdump) and the frames are returned.
fn nat_transfer(
    kind_b: &str,
    tag: &str,
    capture: bool,
    iperf_args: &str,
) -> (u64, serde_json::Value, Vec<Vec<u8>>) {
    require_root_and(&["ip", "iperf3", "ethtool", "tcpdump"]);
    let a = Host::with_offloads(&format!("{tag}a"), Some("10.74.0.1/24"));
    let tap = kind_b.starts_with("tap:");
    // A tap is made by the port and then handed to b, as to a VM.
    let (b, ifname) = if tap {
        (None, format!("t{}{tag}", std::process::id() % 10000))
    } else {
        let b = Host::with_offloads(&format!("{tag}b"), Some("10.74.0.2/24"));
        let ifname = b.root_if.clone();
        (Some(b), ifname)
    };
    let sw = Sluice::start(
        None,
        NAT,
        &[
            &format!("1=afpacket:{},vnet=on", a.root_if),
            &format!("2={}", kind_b.replace("IF", &ifname)),
        ],
    );
    let b = b.unwrap_or_else(|| Host::adopt(&format!("{tag}b"), &ifname, Some("10.74.0.2/24")));
    if kind_b.starts_with("afxdp") {
        // What b sends enters through AF_XDP, which hands over no
        // checksum state: b completes its own checksums. (a keeps every
        // offload: its super-frames are what this test is about.)
        b.exec("ethtool -K eth0 tx off");
    }
    a.pin_neighbour("10.74.0.99", &b);
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("b.pcap");
    let dump = capture.then(|| {
        let c = std::process::Command::new("ip")
            .args(["netns", "exec", &b.ns, "tcpdump", "-i", "eth0", "-U", "-n"])
            .args(["-c", "400", "-w", cap.to_str().unwrap()])
            .arg("tcp dst port 5202 and greater 1000")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(800));
        Killed(c)
    });
    b.exec("iperf3 -s -p 5202 -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = a.exec(&format!(
        "timeout 20 iperf3 -c 10.74.0.99 -p 5201 -t 2 -J {iperf_args}"
    ));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let mut frames = Vec::new();
    if let Some(mut d) = dump {
        wait_for("tcpdump to take 400 frames", 10, || {
            d.0.try_wait().ok().flatten().is_some()
        });
        frames = sluice_port::pcap::read_all(&std::fs::read(&cap).unwrap())
            .unwrap()
            .into_iter()
            .map(|r| r.data)
            .collect();
    }
    let report = sw.stop();
    eprintln!("{tag}: {bytes} bytes; {report}");
    assert_balanced(&report);
    let dp = &report["datapath"];
    assert_eq!(dp["offload failures"].as_u64(), Some(0), "{report}");
    (bytes, report, frames)
}

#[test]
fn tcp_with_default_offloads_between_vnet_afpacket_ports_keeps_super_frames_whole() {
    let (bytes, report, _) = nat_transfer("afpacket:IF,vnet=on", "ov", false, "");
    assert!(
        bytes > 20_000_000,
        "iperf3 moved only {bytes} bytes: {report}"
    );
    let p1 = port(&report, 1);
    let p2 = port(&report, 2);
    // Super-frames in on a's side and out on b's, none cut in software.
    assert!(p1["rx_gso_packets"].as_u64().unwrap() > 100, "{report}");
    assert!(p2["tx_gso_packets"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(report["datapath"]["gso segmented"].as_u64(), Some(0));
}

#[test]
fn tcp_with_default_offloads_from_a_veth_into_a_tap_keeps_super_frames_whole() {
    // Both ways at once: a's super-frames are written into the tap, and
    // b's (the tap's kernel side sends with its offloads on, as a VM's
    // virtio-net would) are read from it.
    let (bytes, report, frames) = nat_transfer("tap:IF", "ot", true, "--bidir");
    assert!(
        bytes > 20_000_000,
        "iperf3 moved only {bytes} bytes: {report}"
    );
    let p1 = port(&report, 1);
    let p2 = port(&report, 2);
    assert!(p2["tx_gso_packets"].as_u64().unwrap() > 100, "{report}");
    assert!(p2["rx_gso_packets"].as_u64().unwrap() > 100, "{report}");
    assert!(p1["tx_gso_packets"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(report["datapath"]["gso segmented"].as_u64(), Some(0));
    // What reached b's stack: every data segment rewritten.
    assert!(frames.len() >= 100, "tcpdump saw {} frames", frames.len());
    for f in &frames {
        rewritten(f);
    }
}

#[test]
fn tcp_with_default_offloads_into_afxdp_is_segmented_in_software_with_valid_checksums() {
    let (bytes, report, frames) = nat_transfer("afxdp:IF", "ox", true, "");
    assert!(
        bytes > 5_000_000,
        "iperf3 moved only {bytes} bytes: {report}"
    );
    let dp = &report["datapath"];
    assert!(dp["gso segmented"].as_u64().unwrap() > 10, "{report}");
    assert!(dp["gso segments"].as_u64().unwrap() > dp["gso segmented"].as_u64().unwrap());
    assert!(frames.len() >= 100, "tcpdump saw {} frames", frames.len());
    for f in &frames {
        // Every segment: rewritten, wire-sized, checksums valid.
        let (ip, ihl) = rewritten(f);
        assert!(be16(ip, 2) <= 1500, "a wire-sized segment");
        assert!(csum_ok(&ip[..ihl], 0), "IPv4 header checksum");
        let tot = usize::from(be16(ip, 2));
        let pseudo = u32::from(be16(ip, 12))
            + u32::from(be16(ip, 14))
            + u32::from(be16(ip, 16))
            + u32::from(be16(ip, 18))
            + 6
            + (tot - ihl) as u32;
        assert!(csum_ok(&ip[ihl..tot], pseudo), "TCP checksum");
    }
    assert!(
        dp["gso segments"].as_u64().unwrap() >= 100,
        "segments made: {report}"
    );
}

/// A 9000-byte-MTU path: jumbo pings pass between vnet ports (their big
/// ring slots and the pool's big frames hold them) and between plain ones
/// (their ring slots sized for the interfaces' MTU); a port whose MTU is
/// set to 1500 (`mtu=1500`) counts each as the drop `too big`.
#[test]
fn jumbo_frames_pass_ports_of_mtu_9000_and_are_a_counted_drop_on_mtu_1500() {
    require_root_and(&["ip", "ping", "ethtool"]);
    for (spec_a, spec_b, tag, passes) in [
        ("afpacket:IF,vnet=on", "afpacket:IF,vnet=on", "jv", true),
        ("afpacket:IF", "afpacket:IF", "jp", true),
        ("afpacket:IF,vnet=on", "afpacket:IF,mtu=1500", "jm", false),
    ] {
        let a = Host::with_offloads(&format!("{tag}a"), Some("10.75.0.1/24"));
        let b = Host::with_offloads(&format!("{tag}b"), Some("10.75.0.2/24"));
        for h in [&a, &b] {
            h.exec("ip link set eth0 mtu 9000");
            sh(&format!("ip link set {} mtu 9000", h.root_if));
        }
        let sw = Sluice::start(
            None,
            "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
            &[
                &format!("1={}", spec_a.replace("IF", &a.root_if)),
                &format!("2={}", spec_b.replace("IF", &b.root_if)),
            ],
        );
        let ok = a
            .exec_status("ping -c 3 -i 0.2 -W 1 -M do -s 8000 10.75.0.2")
            .status
            .success();
        let report = sw.stop();
        assert_balanced(&report);
        assert_eq!(ok, passes, "{spec_a} -> {spec_b}: {report}");
        let too_big = port(&report, 2)["tx_dropped"]["too big"]
            .as_u64()
            .unwrap_or(0);
        if passes {
            assert_eq!(too_big, 0, "{report}");
            assert_eq!(port(&report, 1)["rx_dropped"]["too big"].as_u64(), Some(0));
        } else {
            assert!(too_big >= 3, "{spec_b}: {report}");
            assert_eq!(
                sh(&format!("cat /sys/class/net/{}/mtu", b.root_if)).trim(),
                "1500",
                "mtu=1500 set the interface's MTU"
            );
        }
    }
}

/// IPv6 TCP and IPv4 UDP from a host with default offloads, out through
/// AF_XDP: TCPv6 super-frames are cut in software, UDP datagrams with
/// partial checksums have them completed, and b's stack (which drops a
/// bad checksum) takes both.
#[test]
fn ipv6_tcp_and_udp_with_default_offloads_into_afxdp_arrive_valid() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
    let a = Host::with_offloads("6a", Some("10.77.0.1/24"));
    let b = Host::with_offloads("6b", Some("10.77.0.2/24"));
    // b's own checksums are complete: AF_XDP takes no checksum state in.
    b.exec("ethtool -K eth0 tx off");
    for (h, ip) in [(&a, "fd77::1"), (&b, "fd77::2")] {
        h.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.eth0.disable_ipv6=0");
        h.exec(&format!("ip addr add {ip}/64 dev eth0 nodad"));
    }
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{},vnet=on", a.root_if),
            &format!("2=afxdp:{}", b.root_if),
        ],
    );
    b.exec("iperf3 -s -p 5203 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tcp: serde_json::Value =
        serde_json::from_str(&a.exec("timeout 20 iperf3 -6 -c fd77::2 -p 5203 -t 2 -J")).unwrap();
    let tcp_bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let udp: serde_json::Value =
        serde_json::from_str(&a.exec("timeout 20 iperf3 -u -b 200M -c 10.77.0.2 -p 5203 -t 2 -J"))
            .unwrap();
    b.exec_status("pkill -f 'iperf3 -s -p 5203'");
    let report = sw.stop();
    assert_balanced(&report);
    assert!(tcp_bytes > 5_000_000, "IPv6 TCP moved {tcp_bytes}: {tcp}");
    let dp = &report["datapath"];
    assert!(dp["gso segmented"].as_u64().unwrap() > 10, "{report}");
    assert!(
        dp["checksums completed"].as_u64().unwrap() > 100,
        "{report}"
    );
    assert_eq!(dp["offload failures"].as_u64(), Some(0), "{report}");
    let sum = &udp["end"]["sum"];
    let got = sum["packets"].as_u64().unwrap_or(0) - sum["lost_packets"].as_u64().unwrap_or(0);
    assert!(
        got > 1000 && sum["lost_percent"].as_f64().unwrap_or(100.0) < 50.0,
        "UDP datagrams that reached b's socket: {udp}"
    );
}

/// TCP from hosts that keep every default offload (partial checksums)
/// into and out of AF_XDP ports, with no `ethtool -K ... tx off`: AF_XDP
/// hands over no checksum state, so Sluice recognises a checksum field
/// that holds only the pseudo-header sum and completes it (counted as
/// `checksums completed`); the receivers' stacks, which drop a bad
/// checksum, take the stream.
#[test]
fn tcp_from_hosts_with_default_offloads_through_afxdp_ports() {
    require_root_and(&["ip", "iperf3", "ethtool"]);
    let a = Host::with_offloads("xta", Some("10.78.0.1/24"));
    let b = Host::with_offloads("xtb", Some("10.78.0.2/24"));
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afxdp:{}", a.root_if),
            &format!("2=afxdp:{}", b.root_if),
        ],
    );
    b.exec("iperf3 -s -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = a.exec("timeout 20 iperf3 -c 10.78.0.2 -t 2 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let report = sw.stop();
    eprintln!(
        "afxdp, default offloads: {bytes} bytes in 2 s; port 1 {}",
        port(&report, 1)
    );
    assert_balanced(&report);
    assert!(
        bytes > 5_000_000,
        "iperf3 moved only {bytes} bytes: {report}"
    );
    let dp = &report["datapath"];
    assert!(
        dp["checksums completed"].as_u64().unwrap() > 1000,
        "{report}"
    );
    assert_eq!(dp["offload failures"].as_u64(), Some(0), "{report}");
}
