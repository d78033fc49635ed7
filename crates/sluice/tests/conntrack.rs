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
