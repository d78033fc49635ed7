//! Sluice driven by a real controller between real network namespaces: an
//! os-ken MAC-learning app forwards ping and an iperf3 TCP transfer over
//! AF_PACKET ports, and forwarding recovers when the app restarts. Needs
//! root and the tools `scripts/setup` installs.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

fn l2learn(port: u16, log: &Path) -> Killed {
    osken_manager("l2learn.py", port, log)
}

fn connected(log: &Path) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("L2LEARN connected")
}

#[test]
fn an_os_ken_learning_switch_forwards_ping_and_tcp_and_survives_a_restart() {
    require_root_and(&["ip", "ping", "iperf3", "ethtool", "osken-manager"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let app = l2learn(port, &log);
    let a = Host::new("ola", Some("10.73.0.1/24"));
    let b = Host::new("olb", Some("10.73.0.2/24"));
    let sw = Sluice::start_with(
        None,
        "",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{}", b.root_if),
        ],
        &["--controller", &format!("tcp:127.0.0.1:{port}")],
    );
    wait_for("the controller", 30, || connected(&log));
    wait_for("the table-miss rule", 30, || {
        sw.ctl(&["dump-flows"])
            .contains("priority=0 actions=CONTROLLER:65535")
    });
    a.ping("10.73.0.2");
    b.ping("10.73.0.1");
    b.exec("iperf3 -s -1 -D");
    std::thread::sleep(Duration::from_millis(300));
    let out = a.exec("iperf3 -c 10.73.0.2 -t 2 -J");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    // The learned rules carry the transfer, not packet-ins.
    let flows = sw.ctl(&["dump-flows"]);
    assert!(flows.contains("priority=1,in_port=1,dl_dst="), "{flows}");
    // The controller's connection and what reached it.
    let show = sw.ctl(&["of-show"]);
    assert!(
        show.contains("OpenFlow connections: 1") && show.contains("role equal, packet-ins sent"),
        "{show}"
    );
    // The controller goes away: the rules stay (fail-mode secure) and
    // forward; it comes back, the switch reconnects, learning goes on.
    drop(app);
    a.ping("10.73.0.2");
    // Forget everything; the new app starts from an empty table.
    sw.ctl(&["del-flows"]);
    let log2 = dir.path().join("app2.log");
    let _app = l2learn(port, &log2);
    wait_for("the reconnection", 30, || connected(&log2));
    wait_for("the table-miss rule again", 30, || {
        sw.ctl(&["dump-flows"])
            .contains("priority=0 actions=CONTROLLER:65535")
    });
    a.ping("10.73.0.2");
    assert!(
        std::fs::read_to_string(&log2)
            .unwrap()
            .contains("L2LEARN packet-in"),
        "the restarted app learned again"
    );
    assert_balanced(&sw.stop());
}

/// Sends `n` UDP datagrams "TAG00000".. to 10.75.0.2:9999, one a ms.
fn send_udp(from: &Host, tag: &str, n: u32) {
    from.exec(&format!(
        "/usr/bin/python3 -c \"import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range({n}):\n    s.sendto(b'{tag}%05d' % i, ('10.75.0.2', 9999)); time.sleep(0.001)\""
    ));
}

fn capture(host: &Host, file: &Path) -> Child {
    Command::new("ip")
        .args(["netns", "exec", &host.ns, "timeout", "-s", "INT", "8"])
        .args(["tcpdump", "-i", "eth0", "-U", "-n", "-w"])
        .arg(file)
        .arg("udp port 9999")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn count(file: &Path, tag: &str) -> usize {
    let recs = sluice_port::pcap::read_all(&std::fs::read(file).unwrap()).unwrap();
    recs.iter()
        .filter(|r| r.data.windows(tag.len()).any(|w| w == tag.as_bytes()))
        .count()
}

/// OpenFlow's barrier, kept where OVS does not keep it: once the barrier
/// after a flow-mod is answered, no packet is forwarded by the rule it
/// replaced, with the EMC, SMC and megaflows on and warm. (Remove the
/// revalidation on a new rule version and the first NEW packets go by the
/// cached OLD decision: checked by hand on 2026-11-25 by taking out both
/// places that revalidate, the sweep at the top of the iteration after a
/// new version and `Caches::fresh` on use.)
#[test]
fn after_a_barrier_reply_no_packet_follows_the_old_rule() {
    require_root_and(&["ip", "tcpdump", "ethtool", "ovs-ofctl"]);
    let a = Host::new("oba", Some("10.75.0.1/24"));
    let b = Host::new("obb", Some("10.75.0.2/24"));
    let c = Host::new("obc", None);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("of.sock");
    let sw = Sluice::start_with(
        None,
        "in_port=1,udp,actions=output:2\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{}", b.root_if),
            &format!("3=afpacket:{}", c.root_if),
        ],
        &["--listen", &format!("punix:{}", sock.display())],
    );
    a.pin_neighbour("10.75.0.2", &b);
    let (cap_b, cap_c) = (dir.path().join("b.pcap"), dir.path().join("c.pcap"));
    let mut tb = capture(&b, &cap_b);
    let mut tc = capture(&c, &cap_c);
    std::thread::sleep(Duration::from_millis(800));
    send_udp(&a, "OLD", 300);
    let stats = sw.ctl(&["pmd-stats"]);
    assert!(
        !stats.contains("emc hits: 0\n"),
        "the caches carry the flow: {stats}"
    );
    // ovs-ofctl add-flow sends the flow-mod and a barrier, and returns on
    // the barrier reply.
    let out = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "add-flow"])
        .arg(format!("unix:{}", sock.display()))
        .arg("priority=40000,in_port=1,udp,actions=output:3")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    send_udp(&a, "NEW", 300);
    let _ = tb.wait();
    let _ = tc.wait();
    let (old_b, new_b) = (count(&cap_b, "OLD"), count(&cap_b, "NEW"));
    let (old_c, new_c) = (count(&cap_c, "OLD"), count(&cap_c, "NEW"));
    assert_eq!(
        new_b,
        0,
        "packets sent after the barrier reply went by the old rule\n{}\n{}",
        sw.ctl(&["dump-flows"]),
        sw.ctl(&["dump-megaflows"])
    );
    assert_eq!(old_c, 0);
    assert!(
        old_b >= 290 && new_c >= 290,
        "OLD at b {old_b}, NEW at c {new_c}"
    );
}

#[test]
fn a_live_port_whose_link_goes_down_and_up_is_told_to_the_controller() {
    require_root_and(&["ip", "ethtool", "ovs-ofctl"]);
    let a = Host::new("lka", None);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("of.sock");
    let target = format!("unix:{}", sock.display());
    let _sw = Sluice::start_with(
        None,
        "",
        &[&format!("1=afpacket:{}", a.root_if), "2=null"],
        &["--listen", &format!("punix:{}", sock.display())],
    );
    let show = || {
        let out = Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "show", &target])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let port1_state = || {
        let s = show();
        let at = s.find(&format!("1({})", a.root_if)).expect("port 1 shown");
        s[at..].lines().nth(2).unwrap_or("").trim().to_string()
    };
    assert_eq!(port1_state(), "state:      LIVE");
    // The monitor writes what it saw when it ends: it ends after the
    // link went down and up.
    let mon = Monitor::start(dir.path(), &target, "0", 8);
    std::thread::sleep(Duration::from_millis(1000));
    // The peer in the namespace goes down: the root end loses carrier.
    a.exec("ip link set eth0 down");
    wait_for("port 1 shown LINK_DOWN", 5, || {
        port1_state() == "state:      LINK_DOWN"
    });
    std::thread::sleep(Duration::from_millis(1000));
    a.exec("ip link set eth0 up");
    wait_for("port 1 shown LIVE", 5, || {
        port1_state() == "state:      LIVE"
    });
    let seen = mon.seen();
    let mods: Vec<&str> = seen
        .split("OFPT_PORT_STATUS")
        .skip(1)
        .filter(|m| m.contains(&format!("MOD: 1({})", a.root_if)))
        .collect();
    assert!(
        mods.len() == 2 && mods[0].contains("LINK_DOWN") && mods[1].contains("state:      LIVE"),
        "{seen}"
    );
}
