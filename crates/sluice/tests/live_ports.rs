//! Sluice between real network namespaces: veth pairs, AF_PACKET and tap
//! ports, real `ping`, `iperf3` and `tcpdump`, and exact packet accounting.
//! Needs root (CI runs as root) and the tools `scripts/setup` installs.

mod support;

use sluice_packet::build::{Frame, L4};
use support::*;

const FORWARD: &str = "in_port=1,actions=output:2\nin_port=2,actions=output:1\n";

/// A host tag unique per port kind, so both kinds can run at once.
fn tag(kind: &str, t: &str) -> String {
    format!("{}{t}", &kind[2..3])
}

fn ping_both_ways_and_an_iperf3_tcp_transfer(kind: &str) {
    require_root_and(&["ip", "ping", "iperf3", "ethtool"]);
    let a = Host::new(&tag(kind, "pa"), Some("10.71.0.1/24"));
    let b = Host::new(&tag(kind, "pb"), Some("10.71.0.2/24"));
    let sw = Sluice::start(
        None,
        FORWARD,
        &[
            &format!("1={kind}:{}", a.root_if),
            &format!("2={kind}:{}", b.root_if),
        ],
    );
    a.ping("10.71.0.2");
    b.ping("10.71.0.1");
    b.exec("iperf3 -s -1 -D");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = a.exec("iperf3 -c 10.71.0.2 -t 2 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    let dump = sw.ctl(&["dump-ports"]);
    assert!(dump.contains("packets per kick"), "{dump}");
    let report = sw.stop();
    assert_balanced(&report);
    let p1 = port(&report, 1);
    assert!(p1["rx_packets"].as_u64().unwrap() > 1000);
    assert!(p1["tx_kicks"].as_u64().unwrap() > 0);
}

fn mac_of(host: &Host) -> [u8; 6] {
    let text = host.mac();
    let mut mac = [0u8; 6];
    for (m, part) in mac.iter_mut().zip(text.split(':')) {
        *m = u8::from_str_radix(part, 16).unwrap();
    }
    mac
}

/// This kernel may lack 802.1Q interfaces, so the trunk host is a
/// namespace that captures (tcpdump) and injects (Sluice's pcap sender)
/// tagged frames; the access host is a real IP stack that must answer the
/// untagged echo requests Sluice makes of the tagged ones.
fn vlan_push_and_pop_between_access_and_trunk(kind: &str) {
    require_root_and(&["ip", "ping", "tcpdump", "ethtool"]);
    let access = Host::new(&tag(kind, "va"), Some("10.72.0.1/24"));
    let trunk = Host::new(&tag(kind, "vt"), None);
    let (amac, tmac) = (mac_of(&access), mac_of(&trunk));
    access.pin_neighbour("10.72.0.2", &trunk);
    let sw = Sluice::start(
        None,
        "in_port=1,actions=mod_vlan_vid:100,output:2\n\
         in_port=2,dl_vlan=100,actions=strip_vlan,output:1\n\
         priority=0,actions=drop\n",
        &[
            &format!("1={kind}:{}", access.root_if),
            &format!("2={kind}:{}", trunk.root_if),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("trunk.pcap");
    let mut dump = std::process::Command::new("ip")
        .args(["netns", "exec", &trunk.ns, "timeout", "20"])
        .args(["tcpdump", "-i", "eth0", "-U", "-n", "-c", "9"])
        .args(["-w", cap.to_str().unwrap(), "vlan 100 and icmp"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    // access -> trunk: three echo requests leave tagged (nobody answers).
    let _ = access.exec_status("ping -c 3 -i 0.2 -W 1 10.72.0.2");
    // trunk -> access: three tagged echo requests; the access host answers
    // only if Sluice took the tag off, and its replies come back tagged.
    let request = Frame::ipv4([10, 72, 0, 2], [10, 72, 0, 1], L4::Icmp { ty: 8, code: 0 })
        .macs(tmac, amac)
        .vlan(0x8100, 100)
        .build();
    let pcap = dir.path().join("tagged.pcap");
    std::fs::write(&pcap, sluice_port::pcap::write_all(&vec![request; 3])).unwrap();
    run_to_end(
        Some(&trunk.ns),
        "in_port=1,actions=output:2\n",
        &[&format!("1=pcap:rx={}", pcap.display()), "2=afpacket:eth0"],
        "--packets 3",
        dir.path(),
    );
    assert!(dump.wait().unwrap().success());
    let recs = sluice_port::pcap::read_all(&std::fs::read(&cap).unwrap()).unwrap();
    let mut types = Vec::new();
    for r in &recs {
        assert_eq!(&r.data[12..14], &[0x81, 0x00], "tagged");
        assert_eq!(u16::from_be_bytes([r.data[14], r.data[15]]) & 0xfff, 100);
        types.push(r.data[18 + 20]);
    }
    types.sort_unstable();
    // 3 requests from access, our 3 injected requests (8, seen leaving) and
    // the 3 replies (0): the replies prove
    // the pop on the way in and the push on the way out.
    assert_eq!(
        types.iter().filter(|t| **t == 0).count(),
        3,
        "echo replies came back tagged: {types:?}"
    );
    let report = sw.stop();
    assert_balanced(&report);
}

fn header_rewrite_is_seen_by_tcpdump_on_the_far_side(kind: &str) {
    require_root_and(&["ip", "ping", "tcpdump", "ethtool"]);
    let a = Host::new(&tag(kind, "ra"), Some("10.73.0.1/24"));
    let b = Host::new(&tag(kind, "rb"), Some("10.73.0.2/24"));
    let sw = Sluice::start(
        None,
        "in_port=1,icmp,actions=mod_nw_tos:184,output:2\n\
         in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1={kind}:{}", a.root_if),
            &format!("2={kind}:{}", b.root_if),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("far.pcap");
    // tcpdump in b, on its eth0: what arrives after Sluice rewrote it.
    let mut dump = std::process::Command::new("ip")
        .args([
            "netns", "exec", &b.ns, "tcpdump", "-i", "eth0", "-U", "-n", "-c", "3",
        ])
        .args(["-w", cap.to_str().unwrap(), "icmp[icmptype] == icmp-echo"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    a.ping("10.73.0.2");
    let st = dump.wait().unwrap();
    assert!(st.success());
    let recs = sluice_port::pcap::read_all(&std::fs::read(&cap).unwrap()).unwrap();
    assert_eq!(recs.len(), 3);
    for r in &recs {
        let ip = &r.data[14..34];
        assert_eq!(ip[1], 184, "DSCP 46 (EF) written by mod_nw_tos");
        // The IPv4 header checksum still verifies (incremental update).
        let sum: u32 = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        assert_eq!((folded & 0xffff) + (folded >> 16), 0xffff, "IPv4 checksum");
    }
    assert_balanced(&sw.stop());
}

/// What crossed a middle switch: see [`send_across`].
struct Crossing {
    /// Frames host a's sender put on the wire.
    sent: u64,
    /// Frames the far switch captured in host b.
    seen: Vec<Vec<u8>>,
    /// The middle switch's report.
    mid: serde_json::Value,
    /// The far switch's report.
    far: serde_json::Value,
}

impl Crossing {
    /// Every drop the two switches named on the way from a to b.
    fn named_drops(&self) -> u64 {
        let (mid, far) = (&self.mid, &self.far);
        drops(port(mid, 1), "rx_dropped")
            + dp_drops(mid)
            + drops(port(mid, 2), "tx_dropped")
            + drops(port(far, 1), "rx_dropped")
            + dp_drops(far)
    }

    /// sent = seen on the far side + named drops.
    fn assert_exact(&self) {
        let (seen, named) = (self.seen.len() as u64, self.named_drops());
        assert_eq!(
            self.sent,
            seen + named,
            "sent {} = seen {seen} + Sluice's named drops {named}\nmiddle: {}\nfar: {}",
            self.sent,
            self.mid,
            self.far
        );
    }
}

/// Sends `frames` with Sluice's own pcap sender onto host a's eth0,
/// through the running `middle` switch, to a Sluice in host b that captures
/// what its rules `far_flows` pass on; then stops both switches.
fn send_across(
    a: &Host,
    b: &Host,
    middle: Sluice,
    far_flows: &str,
    frames: &[Vec<u8>],
    dir: &std::path::Path,
) -> Crossing {
    let pcap = dir.join("in.pcap");
    std::fs::write(&pcap, sluice_port::pcap::write_all(frames)).unwrap();
    let far_cap = dir.join("far.pcap");
    let far = Sluice::start(
        Some(&b.ns),
        far_flows,
        &[
            "1=afpacket:eth0",
            &format!("2=pcap:tx={}", far_cap.display()),
        ],
    );
    let n = frames.len() as u64;
    let sent = run_to_end(
        Some(&a.ns),
        "in_port=1,actions=output:2\n",
        &[&format!("1=pcap:rx={}", pcap.display()), "2=afpacket:eth0"],
        &format!("--packets {n}"),
        dir,
    );
    // `--packets` counts what every port receives, eth0's few stray frames
    // too: the capture gave what is left of the n, and all of it went out.
    let sent_n = port(&sent, 2)["tx_packets"].as_u64().unwrap();
    let read = port(&sent, 1)["rx_packets"].as_u64().unwrap();
    assert_eq!(read + port(&sent, 2)["rx_packets"].as_u64().unwrap(), n);
    assert_eq!(sent_n + drops(port(&sent, 2), "tx_dropped"), read);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mid = middle.stop();
    let far = far.stop();
    let seen = sluice_port::pcap::read_all(&std::fs::read(&far_cap).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect();
    Crossing {
        sent: sent_n,
        seen,
        mid,
        far,
    }
}

fn exact_accounting_on_a_replayed_capture(kind: &str) {
    require_root_and(&["ip", "ethtool"]);
    let a = Host::new(&tag(kind, "xa"), None);
    let b = Host::new(&tag(kind, "xb"), None);
    let dir = tempfile::tempdir().unwrap();
    // 20,000 UDP packets over 200 flows; one flow in ten goes to port 7,
    // which the middle switch drops by rule.
    let n = 20_000u64;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let f = (i % 200) as u16;
            let dst = if f.is_multiple_of(10) { 7 } else { 9 };
            Frame::ipv4(
                [10, 74, 0, 1],
                [10, 74, 0, 2],
                L4::Udp { src: 1000 + f, dst },
            )
            .build()
        })
        .collect();
    let by_rule = frames.iter().filter(|f| f[37] == 7).count() as u64;
    let middle = Sluice::start(
        None,
        "priority=40000,udp,tp_dst=7,actions=drop\nin_port=1,actions=output:2\n",
        &[
            &format!("1={kind}:{}", a.root_if),
            &format!("2={kind}:{}", b.root_if),
        ],
    );
    let c = send_across(
        &a,
        &b,
        middle,
        "in_port=1,actions=output:2\n",
        &frames,
        dir.path(),
    );
    c.assert_exact();
    let (mid, far) = (&c.mid, &c.far);
    // The rule dropped its packets; only those the kernel already dropped
    // for a full ring (counted above) never reached it.
    let ring_drops = drops(port(mid, 1), "rx_dropped");
    assert!(dp_drops(mid) <= by_rule && dp_drops(mid) + ring_drops >= by_rule);
    if ring_drops == 0 {
        assert_eq!(dp_drops(mid), by_rule, "the drop rule's packets");
    }
    assert_balanced(mid);
    assert_balanced(far);
}

/// Two PMD threads on four AF_PACKET sockets per port (a fanout group
/// spreads flows over them; each PMD sends on one and polls two, after an
/// rxq rebalance): ping works, every packet is accounted for, both PMDs
/// carry traffic, and each flow keeps its order.
#[test]
fn afpacket_two_pmds_share_ports_by_fanout_keeping_flow_order() {
    require_root_and(&["ip", "ping", "ethtool"]);
    let cpus = sluice_port::sys::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 CPUs, this process may use {cpus:?}");
        return;
    }
    let cores = format!("{},{}", cpus[0], cpus[1]);
    let a = Host::new("pa", Some("10.77.0.1/24"));
    let b = Host::new("pb", Some("10.77.0.2/24"));
    let dir = tempfile::tempdir().unwrap();
    let middle = Sluice::start_with(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{}", b.root_if),
        ],
        &["--pmd-cores", &cores, "--n-rxq", "4"],
    );
    a.ping("10.77.0.2");
    b.ping("10.77.0.1");
    let rxq = middle.ctl(&["pmd-rxq-show"]);
    assert!(
        rxq.contains("pmd thread 0") && rxq.contains("pmd thread 1"),
        "{rxq}"
    );
    assert_eq!(rxq.matches("queue-id:").count(), 8, "4 per port: {rxq}");
    // Whatever the pings' load moves, flows keep their order below.
    let moved = middle.ctl(&["pmd-rxq-rebalance"]);
    assert!(moved.contains("rx queues; load by PMD"), "{moved}");
    // 20,000 UDP packets over 64 flows, each carrying its sequence number.
    let n = 20_000u32;
    let (mac_a, mac_b) = (mac_of(&a), mac_of(&b));
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let f = (i % 64) as u16;
            Frame::ipv4(
                [10, 77, 0, 1],
                [10, 77, 0, 2],
                L4::Udp {
                    src: 2000 + f,
                    dst: 9,
                },
            )
            .macs(mac_a, mac_b)
            .payload(&i.to_be_bytes())
            .build()
        })
        .collect();
    let c = send_across(
        &a,
        &b,
        middle,
        "udp,actions=output:2\n",
        &frames,
        dir.path(),
    );
    c.assert_exact();
    let (mid, far) = (&c.mid, &c.far);
    let pmds = mid["pmds"].as_array().unwrap();
    assert_eq!(pmds.len(), 2);
    for p in pmds {
        assert!(
            p["packets received"].as_u64().unwrap() > 1000,
            "both PMDs carry traffic: {pmds:?}"
        );
    }
    let mut last = std::collections::HashMap::new();
    for f in &c.seen {
        let (flow, seq) = (
            u16::from_be_bytes([f[34], f[35]]),
            u32::from_be_bytes([f[42], f[43], f[44], f[45]]),
        );
        if let Some(prev) = last.insert(flow, seq) {
            assert!(seq > prev, "flow {flow}: {seq} after {prev}");
        }
    }
    assert_balanced(mid);
    assert_balanced(far);
}

/// Keeps every CPU busy until dropped.
struct BusyCpus {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyCpus {
    fn start(n: usize) -> BusyCpus {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyCpus { stop, threads }
    }
}

impl Drop for BusyCpus {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A switch starting up receives only what its own interfaces receive:
/// never a frame of another interface of its namespace, never one it sent
/// itself. Two PMDs share each port through a fanout group (the start-up
/// with the most steps: socket, rings, bind, group join), both CPUs are
/// busy, host a floods port 1 all along, and a foreign host floods an
/// interface beside the switch's. Host b never sends, so port 2 must
/// receive nothing; the rule takes only host a's frames, so a foreign frame
/// would be a table miss.
#[test]
fn afpacket_start_up_takes_no_foreign_or_own_frames() {
    require_root_and(&["ip", "ethtool"]);
    let cpus = sluice_port::sys::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 CPUs, this process may use {cpus:?}");
        return;
    }
    let cores = format!("{},{}", cpus[0], cpus[1]);
    let a = Host::new("sa", None);
    let b = Host::new("sb", None);
    let c = Host::new("sc", None);
    sh(&format!("ip link set {} up", c.root_if));
    let dir = tempfile::tempdir().unwrap();
    let flood = |host: &Host, net: u8| {
        let frames: Vec<Vec<u8>> = (0..256u16)
            .map(|i| {
                Frame::ipv4([10, net, 0, 1], [10, net, 0, 2], L4::Udp { src: i, dst: 9 }).build()
            })
            .collect();
        let pcap = dir.path().join(format!("flood{net}.pcap"));
        std::fs::write(&pcap, sluice_port::pcap::write_all(&frames)).unwrap();
        Sluice::start(
            Some(&host.ns),
            "in_port=1,actions=output:2\n",
            &[
                &format!("1=pcap:rx={},loop", pcap.display()),
                "2=afpacket:eth0",
            ],
        )
    };
    let from_a = flood(&a, 81);
    let foreign = flood(&c, 82);
    let _busy = BusyCpus::start(cpus.len());
    let mut received = 0;
    for round in 0..8 {
        let middle = Sluice::start_with(
            None,
            "priority=100,ip,nw_src=10.81.0.1,actions=output:2\n",
            &[
                &format!("1=afpacket:{}", a.root_if),
                &format!("2=afpacket:{}", b.root_if),
            ],
            &["--pmd-cores", &cores, "--n-rxq", "4"],
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        let r = middle.stop();
        let (p1, p2) = (port(&r, 1), port(&r, 2));
        assert_eq!(
            (p2["rx_packets"].as_u64(), drops(p2, "rx_dropped")),
            (Some(0), 0),
            "round {round}: port 2's far side never sends: {r}"
        );
        assert_eq!(
            r["datapath"]["dropped"]["table miss"].as_u64(),
            Some(0),
            "round {round}: a frame that is not host a's: {r}"
        );
        received += p1["rx_packets"].as_u64().unwrap();
        assert_balanced(&r);
    }
    drop(foreign);
    drop(from_a);
    assert!(received > 0, "host a's flood reached the switch");
}

#[test]
fn tap_port_carries_ping_to_a_namespace() {
    require_root_and(&["ip", "ping", "ethtool"]);
    let b = Host::new("tb", Some("10.75.0.2/24"));
    let tap = format!("t{}tap", std::process::id() % 10000);
    let sw = Sluice::start(
        None,
        FORWARD,
        &[
            &format!("1=tap:{tap}"),
            &format!("2=afpacket:{}", b.root_if),
        ],
    );
    // The tap's kernel side goes into a namespace of the test's own (the
    // root namespace's addresses are the machine's): Sluice keeps its
    // file descriptor, which works across namespaces.
    let t = Host::adopt("tt", &tap, Some("10.75.0.1/24"));
    let out = t.exec_status("ping -c 3 -i 0.2 -W 2 10.75.0.2");
    assert!(
        out.status.success(),
        "ping over the tap: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = sw.stop();
    assert_balanced(&report);
    assert!(port(&report, 1)["rx_packets"].as_u64().unwrap() >= 3);
    assert!(
        !t.exec("ip -o link show").contains("eth0"),
        "the tap goes away with the port"
    );
    assert!(
        !sh(&format!("ip -o link show {tap} 2>/dev/null || true")).contains(&tap),
        "and is not back in the root namespace"
    );
}

#[test]
fn ports_added_and_removed_at_run_time() {
    require_root_and(&["ip", "ping", "ethtool"]);
    let a = Host::new("da", Some("10.76.0.1/24"));
    let b = Host::new("db", Some("10.76.0.2/24"));
    let sw = Sluice::start(None, FORWARD, &[&format!("1=afpacket:{}", a.root_if)]);
    let lost = a.exec_status("ping -c 1 -W 1 10.76.0.2");
    assert!(!lost.status.success(), "no port 2 yet");
    // An AF_XDP port joins the running datapath: its UMEM is registered
    // on the running PMD's pool.
    let added = sw.ctl(&["add-port", &format!("2=afxdp:{}", b.root_if)]);
    assert!(added.contains("added port 2"), "{added}");
    a.ping("10.76.0.2");
    let removed = sw.ctl(&["del-port", "2"]);
    assert!(removed.contains("removed port 2"), "{removed}");
    let lost = a.exec_status("ping -c 1 -W 1 10.76.0.2");
    assert!(!lost.status.success(), "port 2 is gone");
    let bad = sw.ctl_status(&["del-port", "2"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no port 2"));
    let bad = sw.ctl_status(&["add-port", "3=afpacket:no-such-if9"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no network interface"));
    let report = sw.stop();
    assert_balanced(&report);
    let p2 = port(&report, 2);
    assert!(p2["spec"].as_str().unwrap().ends_with("(removed)"));
    assert!(p2["tx_packets"].as_u64().unwrap() >= 3);
}

#[test]
fn afpacket_ping_both_ways_and_an_iperf3_tcp_transfer() {
    ping_both_ways_and_an_iperf3_tcp_transfer("afpacket");
}

#[test]
fn afxdp_ping_both_ways_and_an_iperf3_tcp_transfer() {
    ping_both_ways_and_an_iperf3_tcp_transfer("afxdp");
}

#[test]
fn afpacket_vlan_push_and_pop_between_access_and_trunk() {
    vlan_push_and_pop_between_access_and_trunk("afpacket");
}

#[test]
fn afxdp_vlan_push_and_pop_between_access_and_trunk() {
    vlan_push_and_pop_between_access_and_trunk("afxdp");
}

#[test]
fn afpacket_header_rewrite_is_seen_by_tcpdump_on_the_far_side() {
    header_rewrite_is_seen_by_tcpdump_on_the_far_side("afpacket");
}

#[test]
fn afxdp_header_rewrite_is_seen_by_tcpdump_on_the_far_side() {
    header_rewrite_is_seen_by_tcpdump_on_the_far_side("afxdp");
}

#[test]
fn afpacket_exact_accounting_on_a_replayed_capture() {
    exact_accounting_on_a_replayed_capture("afpacket");
}

#[test]
fn afxdp_exact_accounting_on_a_replayed_capture() {
    exact_accounting_on_a_replayed_capture("afxdp");
}

/// `sluice xdp-send` (frames sent from inside the kernel, XDP live frames)
/// into an AF_XDP port: every frame it sent is received or counted as a
/// kernel ring drop, and the frames make the flows asked for.
#[test]
fn xdp_send_reaches_an_afxdp_port_as_distinct_flows() {
    require_root_and(&["ip", "ethtool"]);
    let a = Host::new("xs", None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\n",
        &[
            &format!("1=afxdp:{}", a.root_if),
            &format!("2=pcap:tx={}", out.display()),
        ],
    );
    let run = a.exec_status(&format!(
        "{} xdp-send eth0 --flows 10 --count 300 --burst 100 --seconds 0",
        sluice_bin()
    ));
    let err = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() && err.contains("this kernel refuses XDP live frames") {
        // (Seen on a 6.18 VM kernel locked down from its configuration:
        // the program loads, its test run is refused with EPERM even to
        // root.)
        eprintln!("skipped: {}", err.trim());
        return;
    }
    assert!(run.status.success(), "xdp-send failed: {err}");
    let sent = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(sent.starts_with("300 frames out of eth0"), "{sent}");
    // "rx packets: N, bytes: B, dropped: D (...)" of port 1.
    let seen = |dump: &str| -> u64 {
        let line = dump
            .split("port 1 (")
            .nth(1)
            .and_then(|rest| rest.lines().find(|l| l.contains("rx packets:")))
            .unwrap_or("");
        let num = |key: &str| -> u64 {
            line.split(key).nth(1).map_or(0, |t| {
                t.trim()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
                    .parse()
                    .unwrap_or(0)
            })
        };
        num("rx packets:") + num("dropped:")
    };
    wait_for("the frames to arrive", 10, || {
        seen(&sw.ctl(&["dump-ports"])) >= 300
    });
    let report = sw.stop();
    assert_balanced(&report);
    let p1 = port(&report, 1);
    let rx = p1["rx_packets"].as_u64().unwrap();
    assert_eq!(rx + drops(p1, "rx_dropped"), 300, "{p1}");
    let bytes = std::fs::read(&out).unwrap();
    let frames = sluice_port::pcap::read_all(&bytes).unwrap();
    assert_eq!(frames.len() as u64, rx);
    let sports: std::collections::BTreeSet<[u8; 2]> =
        frames.iter().map(|r| [r.data[34], r.data[35]]).collect();
    assert_eq!(sports.len(), 10.min(frames.len()), "UDP source ports");
}
