//! What a careless or hostile local user could do to a running switch
//! through its sockets and options, and what a run must not lose (#35):
//! sockets that replace only stale sockets and are owner-only from the
//! start, capture files that are not both read and written, rule timeouts
//! in every mode, a switch with no input that waits for ports, and an
//! exact `--packets`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{
    ctl_at, free_port, sluice, sluice_bin, stderr, stdout, write_capture, RunningSwitch,
};

fn wait_for_path(p: &Path) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} did not appear",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_socket_option_never_replaces_a_file() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    std::fs::write(d.path().join("r.flows"), "actions=drop\n").unwrap();
    for (i, (option, value)) in [
        ("--ctl", p("precious.txt")),
        ("--listen", format!("punix:{}", p("precious.txt"))),
        ("--port", format!("3=stream:punix:{}", p("precious.txt"))),
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(d.path().join("precious.txt"), format!("precious {i}\n")).unwrap();
        let o = sluice(&[
            "run",
            "--flows",
            &p("r.flows"),
            "--port",
            "1=null",
            option,
            &value,
            "--duration",
            "0.5",
        ]);
        assert!(!o.status.success(), "{option} {value} ran");
        assert!(
            stderr(&o).contains("is a regular file: not replacing it"),
            "{option}: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("precious.txt")).unwrap(),
            format!("precious {i}\n"),
            "{option} left the file as it was"
        );
    }
}

#[test]
fn sockets_are_owner_only_whatever_the_umask_and_removed_at_exit() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s);
    std::fs::write(p("r.flows"), "actions=drop\n").unwrap();
    // A stale socket (nobody listens) where the control socket goes is
    // replaced.
    drop(std::os::unix::net::UnixListener::bind(p("c.sock")).unwrap());
    let line = format!(
        "umask 000; exec {} run --flows {} --port 1=null --ctl {} --listen punix:{} --port 3=stream:punix:{} --duration 3",
        sluice_bin(),
        p("r.flows").display(),
        p("c.sock").display(),
        p("of.sock").display(),
        p("st.sock").display()
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(&line)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for s in ["c.sock", "of.sock", "st.sock"] {
        wait_for_path(&p(s));
    }
    // Its control socket answers (it replaced the stale one).
    let o = ctl_at(&p("c.sock").display().to_string(), &["pmd-stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for s in ["c.sock", "of.sock", "st.sock"] {
        let m = std::fs::symlink_metadata(p(s)).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o777, 0o600, "{s} is owner-only");
    }
    // Nothing of the private directories it binds in is left.
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".sl")), "{names:?}");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in ["c.sock", "of.sock", "st.sock"] {
        assert!(!p(s).exists(), "{s} removed at exit");
    }
}

#[test]
fn rule_timeouts_fire_with_only_a_control_socket() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 20);
    // A flow file's own rule with a hard timeout, and one added by ctl.
    std::fs::write(
        d.path().join("r.flows"),
        "priority=1,actions=drop\npriority=9,hard_timeout=1,actions=output:3\n",
    )
    .unwrap();
    let sock = p("s.ctl");
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "4",
            "--flows",
            &p("r.flows"),
            "--port",
            &format!("1=pcap:rx={},loop", p("in.pcap")),
            "--port",
            "2=null",
            "--port",
            "3=null",
        ],
    );
    let o = run.ctl(&["add-flow", "priority=11,hard_timeout=1,actions=output:2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&run.ctl(&["dump-flows"])).contains("priority=11"));
    std::thread::sleep(Duration::from_millis(2200));
    let flows = stdout(&run.ctl(&["dump-flows"]));
    assert!(
        !flows.contains("priority=11"),
        "hard timeout fired: {flows}"
    );
    assert!(
        !flows.contains("priority=9"),
        "the flow file's too: {flows}"
    );
    assert!(flows.contains("priority=1 "), "{flows}");
    let r = run.finish();
    support::assert_balanced(&r);
}

#[test]
fn a_switch_with_a_control_socket_and_no_input_waits_for_ports() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    write_capture(&d.path().join("in.pcap"), 5);
    let sock = p("s.ctl");
    let t0 = Instant::now();
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "2",
            "--flows",
            &p("r.flows"),
            "--port",
            "1=null",
            "--port",
            "2=null",
        ],
    );
    std::thread::sleep(Duration::from_millis(600));
    // Still there: a port can be added, and its packets go through.
    let o = run.ctl(&["add-port", &format!("5=pcap:rx={},loop", p("in.pcap"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = run.finish();
    // It ran until --duration, not until the ports it started with ended.
    assert!(
        t0.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t0.elapsed()
    );
    let got = r["datapath"]["packets received"].as_u64().unwrap();
    assert!(got > 0);
    assert_eq!(support::port(&r, 2)["tx_packets"].as_u64(), Some(got));

    // With nothing that could ever end, --duration ends it.
    let t0 = Instant::now();
    let run = RunningSwitch::start(
        &p("t.ctl"),
        &[
            "--duration",
            "1.5",
            "--flows",
            &p("r.flows"),
            "--port",
            "1=null",
        ],
    );
    let _ = run.finish();
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn packets_stops_at_exactly_n() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 7);
    std::fs::write(d.path().join("r.flows"), "actions=output:3\n").unwrap();
    for (n, extra) in [
        ("1", vec![]),
        ("5", vec![]),
        ("33", vec![]),
        ("1000", vec![]),
        // Two inputs over two PMDs share the count.
        (
            "4099",
            vec![
                "--port".to_string(),
                format!("2=pcap:rx={},loop", p("in.pcap")),
                "--pmd-cores".to_string(),
                "0,1".to_string(),
            ],
        ),
    ] {
        let mut a = vec![
            "run".to_string(),
            "--json".into(),
            "--packets".into(),
            n.into(),
            "--flows".into(),
            p("r.flows"),
            "--port".into(),
            format!("1=pcap:rx={},loop", p("in.pcap")),
            "--port".into(),
            "3=null".into(),
        ];
        a.extend(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = sluice(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let got = r["datapath"]["packets received"].as_u64().unwrap();
        assert_eq!(got.to_string(), n, "--packets {n}");
        assert_eq!(r["datapath"]["sent packets"].as_u64(), Some(got));
    }
}

#[test]
fn a_capture_is_never_written_while_it_is_read() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let f = d.path().join("f.pcap");
    write_capture(&f, 1000);
    let before = std::fs::read(&f).unwrap();
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    std::os::unix::fs::symlink(&f, d.path().join("alias.pcap")).unwrap();
    for tx in [p("f.pcap"), p("alias.pcap"), format!("{}/./f.pcap", p(""))] {
        let o = sluice(&[
            "run",
            "--flows",
            &p("r.flows"),
            "--port",
            &format!("1=pcap:rx={}", p("f.pcap")),
            "--port",
            &format!("2=pcap:tx={tx}"),
        ]);
        assert_eq!(o.status.code(), Some(2), "tx={tx}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is the file of port 1's rx="),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read(&f).unwrap(),
            before,
            "tx={tx}: the capture is intact"
        );
    }
    // Two ports writing one new file.
    let o = sluice(&[
        "run",
        "--flows",
        &p("r.flows"),
        "--port",
        &format!("1=pcap:rx={}", p("f.pcap")),
        "--port",
        &format!("2=pcap:tx={}", p("out.pcap")),
        "--port",
        &format!("3=pcap:tx={}", p("out.pcap")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Nor through sluice ctl add-port on a running switch.
    let sock = p("s.ctl");
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "1",
            "--flows",
            &p("r.flows"),
            "--port",
            &format!("1=pcap:rx={},loop", p("f.pcap")),
            "--port",
            "2=null",
        ],
    );
    let o = run.ctl(&["add-port", &format!("3=pcap:tx={}", p("alias.pcap"))]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is the file of port 1's rx="),
        "{}",
        stderr(&o)
    );
    let _ = run.finish();
    assert_eq!(std::fs::read(&f).unwrap(), before);
}

fn nr_hugepages() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// bench/compare-ovs reserves hugepages through bench/lib/hugepages.sh:
/// what was there before comes back on success, failure and a signal.
#[test]
fn benchmark_hugepages_go_back_to_what_they_were() {
    use std::os::unix::process::CommandExt;
    support::require_root_and(&["bash"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let before = nr_hugepages();
    let want = before + 8;
    for (how, code) in [("ok", Some(0)), ("fail", Some(1)), ("term", Some(143))] {
        let script = format!(
            ". bench/lib/hugepages.sh; reserve_hugepages {want}; case {how} in ok) ;; fail) exit 1 ;; term) sleep 60 ;; esac"
        );
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(&root)
            .process_group(0)
            .spawn()
            .unwrap();
        if how == "term" {
            let t0 = Instant::now();
            while nr_hugepages() < want {
                assert!(t0.elapsed() < Duration::from_secs(10), "no reservation");
                std::thread::sleep(Duration::from_millis(10));
            }
            // As Ctrl-C or a service manager would: the whole group.
            support::sh(&format!("kill -TERM -{}", child.id()));
        }
        let st = child.wait().unwrap();
        assert_eq!(st.code(), code, "{how}");
        assert_eq!(nr_hugepages(), before, "{how}: hugepages as they were");
    }
}

/// Whether the switch has closed a connection (a read sees the end, or a
/// reset), looking without waiting.
fn is_closed(s: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {} // its HELLO, or an echo request
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn the_openflow_listener_bounds_idle_connections() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    std::fs::write(d.path().join("r.flows"), "actions=drop\n").unwrap();
    let port = free_port();
    let sock = p("s.ctl");
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "20",
            "--flows",
            &p("r.flows"),
            "--port",
            "1=null",
            "--listen",
            &format!("ptcp:{port}"),
        ],
    );
    let addr = format!("127.0.0.1:{port}");
    // 150 peers that connect and say nothing.
    let connecting = std::time::Instant::now();
    let mut idle: Vec<std::net::TcpStream> = (0..150)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let connected_in = connecting.elapsed();
    // Those past the bound are closed at once.
    std::thread::sleep(Duration::from_millis(500));
    let shut = idle.iter_mut().map(is_closed).filter(|&c| c).count();
    assert_eq!(shut, 150 - 128, "closed at once");
    let show = stdout(&run.ctl(&["of-show"]));
    assert!(show.contains("refused (too many open) 22"), "{show}");
    // The rest are closed for sending no HELLO, freeing their slots.
    std::thread::sleep(Duration::from_secs(6));
    let show = stdout(&run.ctl(&["of-show"]));
    assert!(show.contains("closed (no HELLO in time) 128"), "{show}");
    assert!(show.contains("listeners: 0 open"), "{show}");
    // A real client is served again.
    let (ok, out) = support::ofctl(&["dump-flows", &format!("tcp:{addr}")]);
    assert!(ok, "{out}");
    assert!(out.contains("actions=drop"), "{out}");
    let (_, err) = run.stop_with_stderr();
    // At most 20 lines a second: the 22 refusals come within the time the
    // peers took to connect, so they touch that many one-second windows
    // of the limit, plus one (a machine under load can take more than a
    // second to accept 150 connections).
    let refusals = err.matches("refused").count();
    let windows = connected_in.as_secs() as usize + 1;
    assert!(
        refusals <= 20 * windows,
        "the log is rate-limited: {refusals} lines in {connected_in:?}"
    );
}

/// A capture added with `sluice ctl add-port` may drain, and so end the
/// run, before the command's reply is written: the reply still comes.
#[test]
fn a_command_gets_its_reply_when_the_run_ends_under_it() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    write_capture(&d.path().join("in.pcap"), 5);
    for i in 0..40 {
        let sock = p(&format!("s{i}.ctl"));
        let run = RunningSwitch::start(
            &sock,
            &[
                "--duration",
                "20",
                "--flows",
                &p("r.flows"),
                "--port",
                "1=null",
                "--port",
                "2=null",
            ],
        );
        let t0 = Instant::now();
        let o = run.ctl(&["add-port", &format!("5=pcap:rx={}", p("in.pcap"))]);
        assert!(o.status.success(), "try {i}: {}", stderr(&o));
        assert!(stdout(&o).contains("added port 5"), "{}", stdout(&o));
        let r = run.finish();
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the drained capture ended the run"
        );
        assert_eq!(r["datapath"]["packets received"].as_u64(), Some(5));
    }
}
