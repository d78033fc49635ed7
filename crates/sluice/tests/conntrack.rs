//! A stateful firewall of `ct` rules between two real hosts: what the
//! inside opens (ping, TCP and UDP through iperf3, with the kernels'
//! own window scaling and retransmissions) passes both ways, what the
//! outside opens does not; `sluice ctl dump-conntrack`,
//! `conntrack-stats` and `flush-conntrack` on the running switch. The
//! same pipelines' verdicts, packet for packet, are compared with Open
//! vSwitch by `scripts/ct-compare`. Needs root.

mod support;

use support::*;

const FIREWALL: &str = "\
table=0,priority=100,ip,actions=ct(table=1,zone=3)
table=0,priority=10,arp,in_port=1,actions=output:2
table=0,priority=10,arp,in_port=2,actions=output:1
table=1,priority=30,ct_state=+trk+inv,actions=drop
table=1,priority=20,ct_state=+trk+new,ip,in_port=1,actions=ct(commit,zone=3,exec(set_field:0x2a->ct_mark)),output:2
table=1,priority=20,ct_state=+trk+est,ct_mark=0x2a,ip,in_port=1,actions=output:2
table=1,priority=20,ct_state=+trk+est,ct_mark=0x2a,ip,in_port=2,actions=output:1
table=1,priority=20,ct_state=+trk+rel,ip,in_port=2,actions=output:1
table=1,priority=1,actions=drop
";

#[test]
fn a_stateful_firewall_lets_the_inside_out_and_keeps_the_outside_out() {
    require_root_and(&["ip", "ping", "iperf3"]);
    let inside = Host::new("ctin", Some("10.74.0.1/24"));
    let outside = Host::new("ctout", Some("10.74.0.2/24"));
    let sw = Sluice::start(
        None,
        FIREWALL,
        &[
            &format!("1=afpacket:{}", inside.root_if),
            &format!("2=afpacket:{}", outside.root_if),
        ],
    );
    inside.ping("10.74.0.2");
    let from_outside = outside.exec_status("ping -c 2 -i 0.2 -W 1 10.74.0.1");
    assert!(
        !from_outside.status.success(),
        "the outside's ping got through"
    );

    // TCP opened from inside: a real transfer, both kernels' windows
    // scaled, every segment in the tracker's window.
    outside.exec("iperf3 -s -1 -D -p 5201");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = inside.exec("timeout 30 iperf3 -c 10.74.0.2 -p 5201 -t 2 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    // UDP from inside: the replies (iperf3's results) come back.
    outside.exec("iperf3 -s -1 -D -p 5202");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = inside.exec("timeout 30 iperf3 -c 10.74.0.2 -p 5202 -u -b 20M -t 1 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        j["end"]["sum"]["packets"].as_u64().unwrap_or(0) > 100,
        "UDP through the firewall: {j}"
    );

    // TCP opened from outside: the SYN is new from the outside, dropped.
    inside.exec("iperf3 -s -1 -D -p 5203");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let refused = outside.exec_status("timeout 3 bash -c 'echo hi > /dev/tcp/10.74.0.1/5203'");
    assert!(
        !refused.status.success(),
        "a connection from outside was let in"
    );
    let _ = inside.exec_status("pkill -f 'iperf3 -s -1 -D -p 5203'");

    let dump = sw.ctl(&["dump-conntrack"]);
    assert!(
        dump.lines()
            .any(|l| l.starts_with("tcp,orig=(src=10.74.0.1,dst=10.74.0.2,")
                && l.contains("dport=5201),reply=(src=10.74.0.2,dst=10.74.0.1,sport=5201,")
                && l.contains(",zone=3,mark=42,protoinfo=(state=")),
        "{dump}"
    );
    assert!(
        dump.contains("icmp,orig=(src=10.74.0.1,dst=10.74.0.2,id="),
        "{dump}"
    );
    assert!(
        dump.contains("udp,orig=(src=10.74.0.1,dst=10.74.0.2,"),
        "{dump}"
    );
    assert!(
        !dump.contains("orig=(src=10.74.0.2"),
        "nothing from outside is committed: {dump}"
    );
    let stats = sw.ctl(&["conntrack-stats"]);
    assert!(
        stats.contains("TCP: ") && stats.contains("ICMP: 1"),
        "{stats}"
    );
    assert!(sw.ctl(&["dump-conntrack", "zone=4"]).trim().is_empty());
    // A zone limit: what is held counts against it, a full zone commits
    // no more (the ping from inside then gets no reply: its reply is not
    // established).
    let held = dump.lines().filter(|l| !l.is_empty()).count();
    sw.ctl(&["ct-set-limits", &format!("zone=3,limit={held}")]);
    assert_eq!(
        sw.ctl(&["ct-get-limits", "zone=3"]).trim_end(),
        format!("default limit=0\nzone=3,limit={held},count={held}")
    );
    let full = inside.exec_status("ping -c 2 -i 0.2 -W 1 -p 99 10.74.0.2");
    assert!(
        !full.status.success(),
        "a full zone committed a new connection"
    );
    assert!(sw.ctl(&["conntrack-stats"]).contains("(zone limit)"));
    sw.ctl(&["ct-del-limits", "zone=3"]);
    sw.ctl(&["flush-conntrack", "zone=3"]);
    assert!(sw.ctl(&["dump-conntrack"]).trim().is_empty());
    // After the flush the inside's next ping is new again, and passes.
    inside.ping("10.74.0.2");

    let report = sw.stop();
    assert_balanced(&report);
}

/// SNAT (the inside's connections leave as 10.75.0.100) and DNAT (the
/// outside reaches the inside's servers at 10.75.0.200 port 80) on one
/// segment: the far side's neighbour entry for each translated address
/// is the switch's inside host.
const NAT: &str = "\
table=0,priority=10,arp,in_port=1,actions=output:2
table=0,priority=10,arp,in_port=2,actions=output:1
table=0,priority=100,ip,actions=ct(table=1,zone=5,nat)
table=1,priority=30,ct_state=+trk+inv,actions=drop
table=1,priority=20,ct_state=+trk+new,ip,in_port=1,nw_dst=10.75.0.2,actions=ct(commit,zone=5,nat(src=10.75.0.100)),output:2
table=1,priority=20,ct_state=+trk+new,tcp,in_port=2,nw_dst=10.75.0.200,tp_dst=80,actions=ct(commit,zone=5,nat(dst=10.75.0.1:5201)),output:1
table=1,priority=20,ct_state=+trk+new,udp,in_port=2,nw_dst=10.75.0.200,tp_dst=80,actions=ct(commit,zone=5,nat(dst=10.75.0.1:5201)),output:1
table=1,priority=10,ct_state=+trk+est,ip,in_port=1,actions=output:2
table=1,priority=10,ct_state=+trk+est,ip,in_port=2,actions=output:1
table=1,priority=10,ct_state=+trk+rel,ip,in_port=1,actions=output:2
table=1,priority=10,ct_state=+trk+rel,ip,in_port=2,actions=output:1
table=1,priority=1,actions=drop
";

/// The address an iperf3 server's JSON log says its client came from.
fn iperf_peer(host: &Host, log: &str) -> String {
    let text = host.exec(&format!("cat {log}"));
    let j: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    j["start"]["connected"][0]["remote_host"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn snat_and_dnat_between_real_hosts_and_no_entry_left_behind() {
    require_root_and(&["ip", "ping", "iperf3", "python3"]);
    let inside = Host::new("natin", Some("10.75.0.1/24"));
    let outside = Host::new("natout", Some("10.75.0.2/24"));
    outside.pin_neighbour("10.75.0.100", &inside);
    outside.pin_neighbour("10.75.0.200", &inside);
    let sw = Sluice::start(
        None,
        NAT,
        &[
            &format!("1=afpacket:{}", inside.root_if),
            &format!("2=afpacket:{}", outside.root_if),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let log = |n: &str| dir.path().join(n).display().to_string();

    // SNAT: ping, TCP and UDP from inside reach the outside from .100.
    inside.ping("10.75.0.2");
    outside.exec(&format!(
        "iperf3 -s -1 -D -J -p 5201 --logfile {}",
        log("tcp.json")
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = inside.exec("timeout 30 iperf3 -c 10.75.0.2 -p 5201 -t 2 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    wait_for("the iperf3 server's log", 10, || {
        outside
            .exec_status(&format!("grep -q sum_received {}", log("tcp.json")))
            .status
            .success()
    });
    assert_eq!(iperf_peer(&outside, &log("tcp.json")), "10.75.0.100");
    outside.exec(&format!(
        "iperf3 -s -1 -D -J -p 5202 --logfile {}",
        log("udp.json")
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = inside.exec("timeout 30 iperf3 -c 10.75.0.2 -p 5202 -u -b 20M -t 1 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        j["end"]["sum"]["packets"].as_u64().unwrap_or(0) > 100,
        "UDP through SNAT: {j}"
    );
    // Datagrams bigger than the MTU: the kernel fragments them, the
    // switch reassembles each before tracking and translates every
    // fragment (the server could not put one back together otherwise).
    let big = inside.exec_status("ping -c 3 -i 0.2 -W 2 -s 3000 10.75.0.2");
    assert!(
        String::from_utf8_lossy(&big.stdout).contains("3 received"),
        "fragmented ping through SNAT: {}",
        String::from_utf8_lossy(&big.stdout)
    );
    outside.exec(&format!(
        "iperf3 -s -1 -D -J -p 5203 --logfile {}",
        log("frag.json")
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = inside.exec("timeout 30 iperf3 -c 10.75.0.2 -p 5203 -u -l 4000 -b 4M -t 1 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sent = j["end"]["sum"]["packets"].as_u64().unwrap_or(0);
    let lost = j["end"]["sum"]["lost_packets"].as_u64().unwrap_or(u64::MAX);
    assert!(
        sent > 50 && lost * 10 < sent,
        "fragmented UDP through SNAT: {sent} sent, {lost} lost"
    );
    let ipf = sw.ctl(&["ipf-get-status"]);
    let completed: u64 = ipf
        .lines()
        .find_map(|l| l.trim().strip_prefix("v4 frags completed: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(completed >= 3 * sent, "{ipf}");

    // DNAT: the outside's TCP and UDP to .200:80 reach the inside's
    // server on 5201, which sees the outside's own address; the outside
    // sees the replies come from .200:80.
    inside.exec(&format!(
        "iperf3 -s -1 -D -J -p 5201 --logfile {}",
        log("dnat.json")
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = outside.exec("timeout 30 iperf3 -c 10.75.0.200 -p 80 -t 1 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        j["end"]["sum_received"]["bytes"].as_u64().unwrap() > 100_000,
        "{j}"
    );
    assert_eq!(j["start"]["connected"][0]["remote_host"], "10.75.0.200");
    wait_for("the iperf3 server's log", 10, || {
        inside
            .exec_status(&format!("grep -q sum_received {}", log("dnat.json")))
            .status
            .success()
    });
    assert_eq!(iperf_peer(&inside, &log("dnat.json")), "10.75.0.2");
    inside.exec("iperf3 -s -1 -D -p 5201");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = outside.exec("timeout 30 iperf3 -c 10.75.0.200 -p 80 -u -b 10M -t 1 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        j["end"]["sum"]["packets"].as_u64().unwrap_or(0) > 100,
        "UDP through DNAT: {j}"
    );
    // Nothing reaches the inside unless translated to it.
    let refused = outside.exec_status("timeout 3 bash -c 'echo hi > /dev/tcp/10.75.0.1/5201'");
    assert!(
        !refused.status.success(),
        "an untranslated connection got in"
    );

    let dump = sw.ctl(&["dump-conntrack"]);
    assert!(
        dump.lines()
            .any(|l| l.starts_with("tcp,orig=(src=10.75.0.1,dst=10.75.0.2,")
                && l.contains("reply=(src=10.75.0.2,dst=10.75.0.100,sport=5201,")),
        "{dump}"
    );
    assert!(
        dump.lines().any(
            |l| l.starts_with("tcp,orig=(src=10.75.0.2,dst=10.75.0.200,")
                && l.contains("dport=80),reply=(src=10.75.0.1,dst=10.75.0.2,sport=5201,")
        ),
        "{dump}"
    );
    sw.ctl(&["flush-conntrack"]);

    // 10,000 short TCP connections through SNAT, one after the other (a
    // server that answers and closes): every one through, and past their
    // timeouts the sweep leaves no entry or reply tuple behind. (The
    // zone's closing timeouts cut to 2 s, as OVS's zone timeout policy
    // would: TIME_WAIT's default 30 s is waited for by no one here.)
    sw.ctl(&[
        "ct-set-timeout-policy",
        "zone=5",
        "tcp_fin_wait=2,tcp_time_wait=2,tcp_close=2",
    ]);
    const N: usize = 10_000;
    outside.exec(
        "python3 -c \"
import socket, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('10.75.0.2', 7000)); s.listen(512)
if os.fork(): os._exit(0)
while True:
    c, _ = s.accept(); c.sendall(b'x'); c.close()
\" >/dev/null 2>&1",
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let got = inside.exec(&format!(
        "python3 -c \"
import socket
n = 0
for i in range({N}):
    c = socket.create_connection(('10.75.0.2', 7000), timeout=5)
    n += c.recv(1) == b'x'
    c.close()
print(n)
\""
    ));
    assert_eq!(got.trim(), N.to_string(), "connections through SNAT");
    let stats = sw.ctl(&["conntrack-stats"]);
    // Its rules track connections: the default's memory was made ready.
    assert!(
        stats.contains("Memory ready for: 131072 connections (ct-prealloc 131072)"),
        "{stats}"
    );
    let held = |stats: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix("Translated (NAT reply tuples held): "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{stats}"))
    };
    // One reply tuple per connection held: every live one has its tuple,
    // and there are no more tuples than connections made. (`Total` counts
    // the live connections; an expired one keeps its entry and its tuple
    // until the sweep, so under load, when making the 10,000 took longer
    // than the 2 s timeouts, more are held than are live. A client port
    // the kernel reuses reopens its closed connection: fewer than N.)
    let total: u64 = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("Total: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    let tuples = held(&stats);
    assert!(
        0 < total && total <= tuples && tuples <= N as u64,
        "{stats}"
    );
    let _ = outside.exec_status("pkill -f 'bind..10.75.0.2., 7000'");
    wait_for("the sweep of the closed connections", 60, || {
        held(&sw.ctl(&["conntrack-stats"])) == 0
    });
    let stats = sw.ctl(&["conntrack-stats"]);
    assert!(stats.contains("Total: 0"), "{stats}");

    let report = sw.stop();
    assert_balanced(&report);
}

/// `ovs-ofctl ct-flush-zone` and `ct-flush` (Nicira's
/// `NXT_CT_FLUSH_ZONE` and `NXT_CT_FLUSH`, what ovn-controller sends when
/// it gives a zone a new port and when a load balancer loses a backend)
/// on a running switch: the zone's connections go, then the one a whole
/// tuple names, then those a partial tuple names in any zone.
#[test]
fn ovs_ofctl_flushes_by_zone_and_by_tuple() {
    require_root_and(&["ovs-ofctl"]);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("of.sock");
    let sw = Sluice::start_with(
        None,
        "priority=0,actions=drop\n",
        &["1=null"],
        &["--listen", &format!("punix:{}", sock.display())],
    );
    let target = format!("unix:{}", sock.display());
    wait_for("the OpenFlow socket", 10, || sock.exists());
    for (sport, zone) in [(1000, 5), (1001, 5), (1000, 6), (1002, 7)] {
        let f = sluice_packet::build::Frame::ipv4(
            [10, 1, 1, 1],
            [10, 1, 1, 2],
            sluice_packet::build::L4::Tcp {
                src: sport,
                dst: 80,
                flags: 0x02,
            },
        )
        .build();
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        ofctl_ok(&[
            "packet-out",
            &target,
            &format!("in_port=1,packet={hex},actions=ct(commit,zone={zone})"),
        ]);
    }
    let held = |sw: &Sluice| -> Vec<(u16, u16)> {
        let mut v: Vec<(u16, u16)> = sw
            .ctl(&["dump-conntrack"])
            .lines()
            .filter_map(|l| {
                let port = l.split("sport=").nth(1)?.split(',').next()?.parse().ok()?;
                let zone = l.split("zone=").nth(1)?.split(',').next()?.parse().ok()?;
                Some((port, zone))
            })
            .collect();
        v.sort_unstable();
        v
    };
    wait_for("four connections", 10, || held(&sw).len() == 4);
    let (ok, out) = ofctl10(&["ct-flush-zone", &target, "6"]);
    assert!(ok, "{out}");
    assert_eq!(held(&sw), [(1000, 5), (1001, 5), (1002, 7)]);
    let tuple = "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=6,ct_tp_src=1000,ct_tp_dst=80";
    let (ok, out) = ofctl10(&["ct-flush", &target, "zone=5", tuple]);
    assert!(ok, "{out}");
    assert_eq!(held(&sw), [(1001, 5), (1002, 7)]);
    // Every connection to 10.1.1.2 port 80, in any zone.
    let (ok, out) = ofctl10(&[
        "ct-flush",
        &target,
        "ct_nw_dst=10.1.1.2,ct_nw_proto=6,ct_tp_dst=80",
    ]);
    assert!(ok, "{out}");
    assert!(held(&sw).is_empty());
    assert_balanced(&sw.stop());
}
