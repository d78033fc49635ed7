//! `sluice ctl capture` on a running switch: what it writes is what the
//! port sent, byte for byte and in order (the port's own output file is
//! the peer here), it stops at `--count`, an rx capture takes what the
//! port receives, a filter picks flows, and the switch forwards every
//! packet whatever the capture does.

mod support;
use support::{ctl_at, stderr, stdout, wait_for, write_capture, RunningSwitch};

fn frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    sluice_port::pcap::read_all(&std::fs::read(path).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect()
}

#[test]
fn capture_writes_what_the_port_sends() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 300);
    write_capture(&d.path().join("loop.pcap"), 3);
    std::fs::write(
        d.path().join("r.flows"),
        "in_port=1,actions=output:2,output:3\nin_port=4,actions=drop\n",
    )
    .unwrap();
    let sock = p("s.ctl");
    let run = RunningSwitch::start(
        &sock,
        &[
            "--flows",
            &p("r.flows"),
            "--port",
            &format!("2=pcap:tx={}", p("out2.pcap")),
            "--port",
            &format!("3=pcap:tx={}", p("out3.pcap")),
            "--port",
            &format!("4=pcap:rx={},loop", p("loop.pcap")),
        ],
    );
    let ctl = |args: &[&str]| {
        let o = ctl_at(&sock, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    assert!(ctl(&["capture", "2", &p("cap2.pcap"), "--tx"]).contains("capturing port 2"));
    ctl(&["capture", "3", &p("cap3.pcap"), "--count", "100"]);
    // Port 4 receives its loop over and over: 50 of its frames, and of
    // the UDP frames to port 9 only those with source port 1001.
    ctl(&[
        "capture",
        "4",
        &p("cap4.pcap"),
        "--rx",
        "--count",
        "50",
        "--filter",
        "udp,tp_src=1001",
    ]);
    // Traffic only now: every frame port 1 receives goes to 2 and 3.
    ctl(&["add-port", &format!("1=pcap:rx={}", p("in.pcap"))]);
    wait_for("the capture to be forwarded", 20, || {
        let s = ctl(&["capture-show"]);
        s.contains("port 2 (tx)")
            && s.contains("300 written")
            && s.contains("port 4 (rx)")
            && s.contains("50 written")
    });
    let shown = ctl(&["capture-show"]);
    assert!(
        shown.contains("port 3 (rx and tx)")
            && shown.contains(": done, 100 frames captured, 100 written"),
        "{shown}"
    );
    assert!(
        shown.contains("port 2 (tx)") && shown.contains(": running, 300 frames captured"),
        "{shown}"
    );
    let stopped = ctl(&["capture-stop", "2"]);
    assert!(
        stopped.contains("stopped, 300 frames captured, 300 written, 0 dropped"),
        "{stopped}"
    );
    let bad = ctl_at(&sock, &["capture-stop", "2"]);
    assert!(
        stderr(&bad).contains("port 2 is not being captured"),
        "{}",
        stderr(&bad)
    );
    let (report, err) = run.stop_with_stderr();
    support::assert_balanced(&report);
    assert!(
        err.contains("sluice: capture of port 3"),
        "captures end with the switch: {err}"
    );
    let (sent2, sent3) = (
        frames(&d.path().join("out2.pcap")),
        frames(&d.path().join("out3.pcap")),
    );
    assert_eq!(sent2.len(), 300);
    assert_eq!(
        frames(&d.path().join("cap2.pcap")),
        sent2,
        "byte for byte, in order"
    );
    assert_eq!(
        frames(&d.path().join("cap3.pcap")),
        sent3[..100].to_vec(),
        "the first 100"
    );
    let looped = frames(&d.path().join("loop.pcap"));
    let cap4 = frames(&d.path().join("cap4.pcap"));
    assert_eq!(cap4.len(), 50);
    assert!(
        cap4.iter().all(|f| *f == looped[1]),
        "only the frame from port 1001"
    );
}

#[test]
fn capture_refuses_what_it_cannot_do() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("loop.pcap"), 3);
    std::fs::write(d.path().join("r.flows"), "actions=drop\n").unwrap();
    let sock = p("s.ctl");
    let run = RunningSwitch::start(
        &sock,
        &[
            "--flows",
            &p("r.flows"),
            "--port",
            &format!("1=pcap:rx={},loop", p("loop.pcap")),
        ],
    );
    for (args, said) in [
        (vec!["capture", "9", &p("x.pcap")], "no port 9"),
        (vec!["capture", "1", &p("")], "not a regular file"),
        (vec!["capture", "1"], "give a port and a file"),
        (
            vec!["capture", "1", &p("x.pcap"), "--filter", "nw_dst=1.2.3.4"],
            "--filter",
        ),
        (vec!["capture-stop", "1"], "port 1 is not being captured"),
    ] {
        let o = ctl_at(&sock, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(said), "{args:?}: {}", stderr(&o));
    }
    let o = ctl_at(&sock, &["capture", "1", &p("a.pcap")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let again = ctl_at(&sock, &["capture", "1", &p("b.pcap")]);
    assert!(
        stderr(&again).contains("port 1 is being captured already"),
        "{}",
        stderr(&again)
    );
    // Removing the port ends its capture.
    assert!(ctl_at(&sock, &["del-port", "1"]).status.success());
    assert!(stdout(&ctl_at(&sock, &["capture-show"])).contains("no captures"));
    assert!(!frames(&d.path().join("a.pcap")).is_empty());
    run.stop_with_stderr();
}

/// On veth ports: the capture of port 2's echo requests equals, byte for
/// byte, what tcpdump in the far host's namespace received; the capture
/// of port 1's receive side holds the same requests as host a sent them.
#[test]
fn capture_equals_what_the_peer_received() {
    support::require_root_and(&["ip", "ping", "tcpdump", "ethtool"]);
    let a = support::Host::new("capa", Some("10.74.0.1/24"));
    let b = support::Host::new("capb", Some("10.74.0.2/24"));
    let sw = support::Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", a.root_if),
            &format!("2=afpacket:{}", b.root_if),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).display().to_string();
    let echo = ["--filter", "icmp,icmp_type=8", "--count", "3"];
    let mut args = vec!["capture", "2"];
    let tx_file = p("tx2.pcap");
    args.extend([tx_file.as_str(), "--tx"]);
    args.extend(echo);
    sw.ctl(&args);
    let rx_file = p("rx1.pcap");
    let mut args = vec!["capture", "1", rx_file.as_str(), "--rx"];
    args.extend(echo);
    sw.ctl(&args);
    let far = dir.path().join("far.pcap");
    let mut dump = std::process::Command::new("ip")
        .args([
            "netns", "exec", &b.ns, "tcpdump", "-i", "eth0", "-U", "-n", "-c", "3",
        ])
        .args(["-w", far.to_str().unwrap(), "icmp[icmptype] == icmp-echo"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    a.ping("10.74.0.2");
    assert!(dump.wait().unwrap().success());
    wait_for("both captures to end", 10, || {
        sw.ctl(&["capture-show"])
            .matches(": done, 3 frames captured, 3 written")
            .count()
            == 2
    });
    sw.ctl(&["capture-stop", "1"]);
    sw.ctl(&["capture-stop", "2"]);
    let seen = frames(&far);
    assert_eq!(seen.len(), 3);
    assert_eq!(
        frames(&dir.path().join("tx2.pcap")),
        seen,
        "what port 2 sent is what b received"
    );
    assert_eq!(
        frames(&dir.path().join("rx1.pcap")),
        seen,
        "unchanged on the way"
    );
    support::assert_balanced(&sw.stop());
}
