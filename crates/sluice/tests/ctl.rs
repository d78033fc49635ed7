//! `sluice ctl`: changing a running switch's rules, and clients of the
//! control socket that must not hold each other up.

use std::path::Path;

mod support;
use support::{ctl_at, stderr, stdout, wait_for, write_capture, RunningSwitch};

#[test]
fn ctl_changes_rules_of_a_running_switch() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 50);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    let sock = p("s.ctl");
    let input = format!("1=pcap:rx={},loop", p("in.pcap"));
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "3",
            "--flows",
            &p("r.flows"),
            "--port",
            &input,
            "--port",
            "2=null",
            "--port",
            "3=null",
        ],
    );
    let ctl = |args: &[&str]| ctl_at(&sock, args);
    let o = ctl(&["pmd-stats"]);
    assert!(
        o.status.success() && stdout(&o).contains("packets received"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = ctl(&["add-flow", "priority=40000,actions=output:3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&ctl(&["dump-flows"])).contains("priority=40000 actions=output:3"));
    let bad = ctl(&["add-flow", "tp_dst=80,actions=drop"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("tp_dst requires"), "{}", stderr(&bad));
    // A group or meter that does not exist is refused, as ovs-ofctl's
    // add-flow is (BAD_OUT_GROUP, METER_UNKNOWN), and nothing is added.
    for (action, said) in [
        ("group:7", "group 7 does not exist"),
        ("meter:3,output:2", "meter 3 does not exist"),
    ] {
        let bad = ctl(&["add-flow", &format!("priority=41000,actions={action}")]);
        assert_eq!(bad.status.code(), Some(2));
        assert!(stderr(&bad).contains(said), "{}", stderr(&bad));
    }
    assert!(!stdout(&ctl(&["dump-flows"])).contains("priority=41000"));
    assert!(ctl(&["set", "tx-flush-interval=20"]).status.success());
    let r = run.finish();
    assert!(
        r["ports"][2]["tx_packets"].as_u64().unwrap() > 0,
        "port 3 got traffic after the change"
    );
    assert!(!Path::new(&sock).exists(), "socket removed at exit");
    let o = ctl(&["pmd-stats"]);
    assert!(
        stderr(&o).contains("is `sluice run --ctl"),
        "{}",
        stderr(&o)
    );
}

/// Idle or half-sent control connections never hold up another client:
/// 200 clients connect and send nothing, one sends half a request, one a
/// line far too long; `sluice ctl pmd-stats` still answers at once.
#[test]
fn idle_control_clients_do_not_block_others() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 50);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    let sock = p("s.ctl");
    let input = format!("1=pcap:rx={},loop", p("in.pcap"));
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "8",
            "--flows",
            &p("r.flows"),
            "--port",
            &input,
            "--port",
            "2=null",
        ],
    );
    // The socket file appears before the server thread accepts: wait for
    // a first answer.
    let t0 = std::time::Instant::now();
    while !run.ctl(&["pmd-stats"]).status.success() {
        assert!(
            t0.elapsed().as_secs() < 10,
            "no answer on the control socket"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut idle: Vec<UnixStream> = (0..200)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let mut half = UnixStream::connect(&sock).unwrap();
    half.write_all(b"{\"cmd\": \"pmd-st").unwrap();
    idle.push(half);
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let o = run.ctl(&["pmd-stats"]);
        let took = t.elapsed();
        assert!(
            o.status.success() && stdout(&o).contains("packets received"),
            "{}",
            stderr(&o)
        );
        assert!(
            took < std::time::Duration::from_millis(900),
            "pmd-stats took {took:?}"
        );
    }
    // A request beyond the size limit is refused with a reason.
    let mut long = UnixStream::connect(&sock).unwrap();
    let junk = vec![b'x'; (64 << 20) + (64 << 10) + 1];
    let _ = long.write_all(&junk);
    let mut answer = String::new();
    long.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _ = long.read_to_string(&mut answer);
    assert!(answer.contains("longer than"), "{answer}");
    drop(idle);
    let o = run.ctl(&["pmd-stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    run.stop_with_stderr();
}

#[test]
fn ctl_sets_timeout_policies_and_reassembly_and_refuses_nonsense() {
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("s.ctl").display().to_string();
    let flows = d.path().join("r.flows");
    std::fs::write(&flows, "actions=drop\n").unwrap();
    let run = RunningSwitch::start(
        &sock,
        &[
            "--duration",
            "2",
            "--flows",
            &flows.display().to_string(),
            "--port",
            "1=null",
        ],
    );
    let ctl = |args: &[&str]| ctl_at(&sock, args);
    let ok = |args: &[&str]| {
        let o = ctl(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    let refused = |args: &[&str], said: &str| {
        let o = ctl(args);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(stderr(&o).contains(said), "{args:?}: {}", stderr(&o));
    };
    ok(&[
        "ct-set-timeout-policy",
        "zone=5",
        "udp_first=10,icmp_reply=3",
        "tcp_established=600",
    ]);
    let shown = ok(&["ct-get-timeout-policy", "zone=5"]);
    assert!(shown.contains("    udp_first=10\n"), "{shown}");
    assert!(shown.contains("    tcp_established=600\n"), "{shown}");
    assert!(shown.contains("    udp_multiple=30 (default)\n"), "{shown}");
    ok(&["ct-del-timeout-policy", "zone=5"]);
    assert!(ok(&["ct-get-timeout-policy", "zone=5"]).contains("    udp_first=60 (default)\n"));
    refused(
        &["ct-set-timeout-policy", "zone=5", "udp_frist=3"],
        "udp_first",
    );
    refused(
        &["ct-set-timeout-policy", "zone=5", "udp_first=0"],
        "at least 1",
    );
    refused(&["ct-set-timeout-policy", "udp_first=3"], "zone=N");
    refused(&["ct-get-timeout-policy"], "zone=N");
    assert_eq!(
        ok(&["ipf-set-enabled", "v6"]),
        "enabling fragmentation reassembly successful\n"
    );
    refused(&["ipf-set-disabled", "v5"], "v4 for IPv4 or v6 for IPv6");
    refused(&["ipf-set-min-frag", "v4", "399"], "at least 400");
    refused(&["ipf-set-max-nfrags", "5001"], "at most 5000");
    refused(&["ipf-get-status", "-x"], "-m");
    ok(&["ipf-set-disabled", "v4"]);
    assert!(ok(&["ipf-get-status"]).contains("        v4 enabled: 0\n"));
    run.finish();
}

/// A switch of `flows` forwarding a capture of `frames` frames in a loop
/// from port 1 (port 2 a null port), with `extra` arguments, for 20 s at
/// most; its control socket `NAME.ctl` in `dir`.
fn looping_switch(
    dir: &Path,
    name: &str,
    frames: usize,
    flows: &str,
    extra: &[&str],
) -> (RunningSwitch, String) {
    let pcap = dir.join(format!("{name}.pcap"));
    write_capture(&pcap, frames);
    let rules = dir.join(format!("{name}.flows"));
    std::fs::write(&rules, flows).unwrap();
    let sock = dir.join(format!("{name}.ctl")).display().to_string();
    let (rules, input) = (
        rules.display().to_string(),
        format!("1=pcap:rx={},loop", pcap.display()),
    );
    let mut args = vec![
        "--duration",
        "20",
        "--flows",
        &rules,
        "--port",
        &input,
        "--port",
        "2=null",
    ];
    args.extend_from_slice(extra);
    (RunningSwitch::start(&sock, &args), sock)
}

/// `sluice ctl ARGS` on `sock`, which must succeed: its output.
fn ctl_ok(sock: &str, args: &[&str]) -> String {
    let o = ctl_at(sock, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// `sluice ctl trace` on a running switch: the trace equals `sluice
/// trace` of the same rules; the caches say which level serves the
/// packet now (the EMC for a frame the switch forwards over and over, a
/// miss for a flow it never sees) and, after a rule change, that the
/// megaflow is translated again before use.
#[test]
fn ctl_trace_follows_the_live_rules_and_caches() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let flows = "priority=10,udp,actions=resubmit(,1)\npriority=0,actions=drop\ntable=1,ip,nw_dst=10.0.0.0/8,actions=output:2\n";
    let (run, sock) = looping_switch(d.path(), "r", 1, flows, &[]);
    let ctl = |args: &[&str]| ctl_ok(&sock, args);
    // The same trace as `sluice trace` of the flow file.
    // TCP: the capture's frames are UDP, so no cache holds this flow.
    let flow = "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.9,nw_ttl=64,tp_src=1000,tp_dst=80";
    let live = ctl(&["trace", flow]);
    let offline = stdout(&support::sluice(&["trace", "--flows", &p("r.flows"), flow]));
    let (traced, caches) = live.split_once("\nCaches now").expect("a caches section");
    assert_eq!(
        traced.trim_end_matches('\n'),
        offline.trim_end_matches('\n'),
        "live and offline traces differ"
    );
    assert!(caches.contains("pmd thread 0: miss (upcall)"), "{caches}");
    // The frame the capture holds, as the datapath sees it: served by
    // the EMC (after 100 packets at most, with OVS's 1-in-100 insertion).
    let frame = std::fs::read(d.path().join("r.pcap")).unwrap();
    let hex: String = frame[40..].iter().map(|b| format!("{b:02x}")).collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let seen = ctl(&["trace", "--packet", &hex, "--in-port", "1"]);
    assert!(seen.contains("Datapath actions: 2"), "{seen}");
    assert!(seen.contains("pmd thread 0: emc hit\n    megaflow: udp,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no, packets:"), "{seen}");
    // A rule change: the trace shows the new rules at once, the cache
    // the megaflow to translate again.
    ctl(&["add-flow", "table=1,priority=40000,ip,actions=drop"]);
    let after = ctl(&["trace", "--packet", &hex, "--in-port", "1"]);
    assert!(after.contains("Datapath actions: drop"), "{after}");
    // Either the packets since have revalidated it (the decision reads
    // only bits it matches: kept, its actions now drop) or none has yet.
    assert!(
        after
            .contains("emc hit (the rules changed since it was made: translated again before use)")
            || after.contains(
                "emc hit\n    megaflow: udp,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no, packets:"
            ) && after.trim_end().ends_with("actions:drop"),
        "{after}"
    );
    let bad = ctl_at(&sock, &["trace", "--packet", &hex]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("--packet needs --in-port"),
        "{}",
        stderr(&bad)
    );
    run.stop_with_stderr();
}

/// `pmd-perf-show` on a switch run with `--pmd-perf-metrics`: the
/// histograms add up to the iterations counted (and, with one port, the
/// busy iterations to the rx batches), the one-second slices too; off,
/// on again and `pmd-stats-clear` start it afresh.
#[test]
fn pmd_perf_show_adds_up() {
    let d = tempfile::tempdir().unwrap();
    let (run, sock) = looping_switch(
        d.path(),
        "r",
        5,
        "actions=output:2\n",
        &["--pmd-perf-metrics"],
    );
    let ctl = |args: &[&str]| ctl_ok(&sock, args);
    let number = |text: &str, what: &str| -> u64 {
        let at = text
            .find(what)
            .unwrap_or_else(|| panic!("no '{what}' in {text}"))
            + what.len();
        text[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let t = ctl(&["pmd-perf-show", "--seconds", "--iteration-log", "5"]);
    let its = number(&t, "Iterations:");
    assert!(its > 0, "{t}");
    assert_eq!(number(&t, "cycles/it:"), its, "{t}");
    let busy = number(&t, "- busy iterations:");
    assert_eq!(number(&t, "packets/it (busy):"), busy, "{t}");
    assert_eq!(
        number(&t, "packets/rx batch:"),
        busy,
        "one port: one rx batch a busy iteration\n{t}"
    );
    assert_eq!(
        number(&t, "packets/tx batch:"),
        number(&t, "Tx batches:"),
        "{t}"
    );
    assert_eq!(number(&t, "Rx packets:"), number(&t, "Tx packets:"), "{t}");
    // The slices: every iteration counted in one (all within 60 s).
    let slices = t
        .split("Last ")
        .nth(1)
        .unwrap()
        .split("Iterations over")
        .next()
        .unwrap();
    let in_slices: u64 = slices
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    assert_eq!(in_slices, its, "{t}");
    assert!(t.contains("Iterations over 250 us:"), "{t}");
    // Off, then on again: afresh.
    ctl(&["set", "pmd-perf-metrics=false"]);
    assert!(ctl(&["pmd-perf-show"]).contains("pmd-perf-metrics is off"));
    ctl(&["set", "pmd-perf-metrics=true", "pmd-perf-log-us=1"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let again = ctl(&["pmd-perf-show", "-nh"]);
    assert!(!again.contains("Histograms"), "{again}");
    let d2 = again.split("Measurement duration: ").nth(1).unwrap();
    let secs: f64 = d2.split_whitespace().next().unwrap().parse().unwrap();
    assert!(secs < 1.0, "afresh: {again}");
    ctl(&["pmd-stats-clear"]);
    let cleared = ctl(&["pmd-perf-show", "-it"]);
    assert!(number(&cleared, "Iterations:") < its, "{cleared}");
    assert!(cleared.contains("Iterations over 1 us:"), "{cleared}");
    for (bad, said) in [
        (&["pmd-perf-show", "--seconds", "99"][..], "give 1 to 60"),
        (&["set", "pmd-perf-metrics=yes"], "give true or false"),
    ] {
        let o = ctl_at(&sock, bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains(said), "{}", stderr(&o));
    }
    run.stop_with_stderr();
}

/// `--log`: a target at debug writes its debug lines (here every control
/// command), `warn` silences the information lines, a bad level is an
/// error before anything starts.
#[test]
fn log_levels_by_target() {
    let d = tempfile::tempdir().unwrap();
    let (run, sock) = looping_switch(d.path(), "a", 5, "actions=drop\n", &["--log", "ctl=debug"]);
    ctl_ok(&sock, &["dump-flows"]);
    let (_, err) = run.stop_with_stderr();
    assert!(err.contains("sluice: debug: ctl: dump-flows"), "{err}");
    assert!(
        err.contains("sluice: control socket"),
        "info stays on: {err}"
    );
    let (run, sock) = looping_switch(d.path(), "b", 5, "actions=drop\n", &["--log", "warn"]);
    ctl_ok(&sock, &["dump-flows"]);
    let (_, err) = run.stop_with_stderr();
    assert!(
        !err.contains("control socket") && !err.contains("debug"),
        "{err}"
    );
    let o = support::sluice(&["run", "--port", "1=null", "--log", "openflow=loud"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--log 'openflow=loud': LEVEL or TARGET=LEVEL"),
        "{}",
        stderr(&o)
    );
}

/// `del-megaflows` (`ovs-appctl dpctl/del-flows`, `revalidator/purge`):
/// every megaflow goes, its hits credited to its rule, and the flow's
/// next packet is an upcall again.
#[test]
fn ctl_del_megaflows_empties_the_cache_and_keeps_the_counters() {
    let d = tempfile::tempdir().unwrap();
    let (run, sock) = looping_switch(d.path(), "p", 1, "udp,actions=output:2\n", &[]);
    let ctl = |args: &[&str]| ctl_ok(&sock, args);
    let upcalls = || -> u64 {
        ctl(&["pmd-stats"])
            .lines()
            .filter_map(|l| l.trim().strip_prefix("miss with success upcall: "))
            .map(|n| n.parse::<u64>().unwrap())
            .sum()
    };
    wait_for("the megaflow", 10, || {
        ctl(&["dump-megaflows"]).lines().count() == 1
    });
    let first = upcalls();
    let rule_packets = || -> u64 {
        let dump = ctl(&["dump-flows"]);
        let n = dump.split("n_packets=").nth(1).expect("a rule's counters");
        n.split(',').next().unwrap().parse().unwrap()
    };
    let before = rule_packets();
    assert_eq!(ctl(&["del-megaflows"]), "");
    // The looping frame comes back through an upcall.
    wait_for("another upcall", 10, || upcalls() > first);
    assert!(rule_packets() >= before);
    run.stop_with_stderr();
}
