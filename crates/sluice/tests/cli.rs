//! The `sluice` command as users run it.

use std::path::Path;
use std::process::{Command, Output};

use sluice_packet::build::{Frame, L4};
use sluice_port::pcap::{read_all, write_all};

mod support;
use support::{sluice, stderr, stdout};

fn write_capture(path: &Path, n: usize) {
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            Frame::ipv4(
                [10, 0, 0, 1],
                [10, 0, (i % 3) as u8, 9],
                L4::Udp {
                    src: 1000 + i as u16,
                    dst: 53,
                },
            )
            .build()
        })
        .collect();
    std::fs::write(path, write_all(&frames)).unwrap();
}

#[test]
fn run_accounts_for_every_packet_and_is_deterministic() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 1000);
    std::fs::write(
        d.path().join("r.flows"),
        "ip,nw_dst=10.0.0.0/24,actions=output:2\nip,nw_dst=10.0.1.0/24,actions=output:2,output:3\n",
    )
    .unwrap();
    let args = |out: &str| {
        vec![
            "run".to_string(),
            "--json".into(),
            "--flows".into(),
            p("r.flows"),
            "--port".into(),
            format!("1=pcap:rx={}", p("in.pcap")),
            "--port".into(),
            format!("2=pcap:tx={}", p(&format!("{out}2.pcap"))),
            "--port".into(),
            "3=null".into(),
        ]
    };
    let a: Vec<String> = args("a");
    let o = sluice(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let dp = &r["datapath"];
    assert_eq!(dp["packets received"], 1000);
    // 334 to 10.0.0/24, 333 to 10.0.1/24 (two copies each), 333 miss.
    assert_eq!(dp["forwarded"], 667);
    assert_eq!(dp["dropped"]["table miss"], 333);
    assert_eq!(dp["output copies"], 334 + 2 * 333);
    assert_eq!(dp["sent packets"], 1000);
    assert_eq!(r["ports"][1]["tx_packets"], 667);
    assert_eq!(r["ports"][2]["tx_packets"], 333);
    assert_eq!(r["rules"][0]["n_packets"], 334);
    assert_eq!(
        read_all(&std::fs::read(p("a2.pcap")).unwrap())
            .unwrap()
            .len(),
        667
    );
    // The same input through the same rules gives the same output file.
    let b: Vec<String> = args("b");
    assert!(sluice(&b.iter().map(String::as_str).collect::<Vec<_>>())
        .status
        .success());
    assert!(
        std::fs::read(p("a2.pcap")).unwrap() == std::fs::read(p("b2.pcap")).unwrap(),
        "output files differ"
    );
}

#[test]
fn text_report_names_drop_reasons() {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 30);
    std::fs::write(
        d.path().join("r.flows"),
        "ip,nw_dst=10.0.0.9,actions=drop\n",
    )
    .unwrap();
    let o = sluice(&[
        "run",
        "--flows",
        &d.path().join("r.flows").display().to_string(),
        "--port",
        &format!("1=pcap:rx={}", d.path().join("in.pcap").display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("packets received: 30"), "{out}");
    assert!(out.contains("action drop: 10"), "{out}");
    assert!(out.contains("table miss: 20"), "{out}");
    assert!(out.contains("n_packets=10"), "{out}");
}

#[test]
fn bad_flow_file_names_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.flows");
    std::fs::write(
        &f,
        "in_port=1,actions=output:2\nin_port=2,tp_dst=80,actions=output:1\n",
    )
    .unwrap();
    let o = sluice(&[
        "run",
        "--flows",
        &f.display().to_string(),
        "--port",
        "1=null",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:2:11: tp_dst requires", f.display())),
        "{e}"
    );
    let o = sluice(&["check", &f.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn clear_errors_for_bad_invocations() {
    let o = sluice(&["run", "--port", "1=eth0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown port type"), "{}", stderr(&o));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.flows");
    std::fs::write(&f, "actions=drop\n").unwrap();
    let o = sluice(&["run", "--flows", &f.display().to_string()]);
    assert!(stderr(&o).contains("no ports"), "{}", stderr(&o));
    let o = sluice(&[
        "run",
        "--flows",
        &f.display().to_string(),
        "--port",
        "1=pcap:rx=/nonexistent.pcap",
    ]);
    assert!(stderr(&o).contains("/nonexistent.pcap"), "{}", stderr(&o));
    let o = sluice(&["run", "--port", "1=null"]);
    assert!(stderr(&o).contains("no rules"), "{}", stderr(&o));
    let not_pcap = d.path().join("x.pcap");
    std::fs::write(&not_pcap, b"hello world, this is not a capture").unwrap();
    let o = sluice(&[
        "run",
        "--flows",
        &f.display().to_string(),
        "--port",
        &format!("1=pcap:rx={}", not_pcap.display()),
    ]);
    assert!(stderr(&o).contains("not a pcap file"), "{}", stderr(&o));
}

#[test]
fn trace_shows_tables_and_datapath_actions() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.flows");
    std::fs::write(&f, "priority=100,tcp,nw_dst=10.0.0.0/24,actions=mod_nw_dst:10.1.1.1,goto_table:1\ntable=1,ip,nw_dst=10.1.1.1,actions=output:2\n").unwrap();
    let o = sluice(&[
        "trace",
        "--flows",
        &f.display().to_string(),
        "in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("0. tcp,nw_dst=10.0.0.0/24, priority 100"),
        "{out}"
    );
    assert!(
        out.contains("Datapath actions: set(ipv4(dst=10.1.1.1)),2"),
        "{out}"
    );
    let o = sluice(&[
        "trace",
        "--flows",
        &f.display().to_string(),
        "in_port=1,udp,nw_dst=9.9.9.9",
    ]);
    assert!(
        stdout(&o).contains("Drop reason: table miss"),
        "{}",
        stdout(&o)
    );
    let o = sluice(&[
        "trace",
        "--flows",
        &f.display().to_string(),
        "in_port=1,tcp,bogus=1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown field 'bogus'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn config_file_and_help() {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 10);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "flows = \"r.flows\"\n[[ports]]\nnumber = 1\nspec = \"pcap:rx=in.pcap\"\n[[ports]]\nnumber = 2\nspec = \"pcap:tx=out.pcap\"\n",
    )
    .unwrap();
    let o = sluice(&[
        "run",
        "--json",
        "--config",
        &d.path().join("s.toml").display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_all(&std::fs::read(d.path().join("out.pcap")).unwrap())
            .unwrap()
            .len(),
        10
    );
    let h = stdout(&sluice(&["run", "--help"]));
    assert!(
        h.contains("pcap:rx=FILE,loop") && h.contains("[[ports]]"),
        "{h}"
    );
    let h = stdout(&sluice(&["--help"]));
    assert!(h.contains("Examples:"), "{h}");
}

#[test]
fn demo_runs_and_balances() {
    let o = sluice(&["demo", "--packets", "5000", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["datapath"]["packets received"], 10_000);
    let dropped: u64 = r["datapath"]["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        r["datapath"]["forwarded"].as_u64().unwrap() + dropped,
        10_000
    );
}

#[test]
fn looping_input_stops_on_packet_count() {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 7);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    let o = sluice(&[
        "run",
        "--json",
        "--packets",
        "1000",
        "--flows",
        &d.path().join("r.flows").display().to_string(),
        "--port",
        &format!("1=pcap:rx={},loop", d.path().join("in.pcap").display()),
        "--port",
        "2=null",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let n = r["datapath"]["packets received"].as_u64().unwrap();
    assert!(
        (1000..1000 + 32).contains(&n),
        "stops within one burst of the limit: {n}"
    );
    assert_eq!(r["datapath"]["sent packets"].as_u64().unwrap(), n);
}

/// `VmLck` of process `pid` (kB), from /proc.
fn locked_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmLck:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn mlockall_locks_the_switch_memory_while_it_runs() {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 7);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "--mlockall",
            "--json",
            "--duration",
            "3",
            "--flows",
            &d.path().join("r.flows").display().to_string(),
            "--port",
            &format!("1=pcap:rx={},loop", d.path().join("in.pcap").display()),
            "--port",
            "2=null",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut locked = 0;
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        locked = locked.max(locked_kb(pid).unwrap_or(0));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Locked (root has CAP_IPC_LOCK), or else warned about and run anyway.
    if stderr(&o).contains("mlockall failed") {
        assert_eq!(locked, 0);
    } else {
        assert!(stderr(&o).is_empty(), "{}", stderr(&o));
        // At least the megaflow table's reservation and the packet pool.
        assert!(locked > 50_000, "VmLck {locked} kB");
    }
}

#[test]
fn gen_writes_profiles_and_rule_sets() {
    let d = tempfile::tempdir().unwrap();
    let pcap = d.path().join("z.pcap");
    let o = sluice(&[
        "gen",
        "-o",
        &pcap.display().to_string(),
        "--flows",
        "50",
        "--dist",
        "zipf",
        "--packets",
        "500",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = read_all(&std::fs::read(&pcap).unwrap()).unwrap();
    assert_eq!(recs.len(), 500);
    assert!(recs.iter().all(|r| r.data.len() == 64));
    let distinct: std::collections::HashSet<&Vec<u8>> = recs.iter().map(|r| &r.data).collect();
    assert!(
        distinct.len() <= 50 && distinct.len() > 10,
        "{}",
        distinct.len()
    );
    let rules = d.path().join("r.flows");
    assert!(
        sluice(&["gen", "--rules", "l3l4", "-o", &rules.display().to_string()])
            .status
            .success()
    );
    assert!(sluice(&["check", &rules.display().to_string()])
        .status
        .success());
    // The generated pair runs through `sluice run`.
    let o = sluice(&[
        "run",
        "--json",
        "--flows",
        &rules.display().to_string(),
        "--port",
        &format!("1=pcap:rx={}", pcap.display()),
        "--port",
        "2=null",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sluice(&["gen", "-o", &pcap.display().to_string(), "--size", "20"]);
    assert!(stderr(&o).contains("64 to 1518"), "{}", stderr(&o));
}

#[test]
fn several_pmds_share_the_work_and_the_accounting() {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 64);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    let flows = d.path().join("r.flows").display().to_string();
    let input = format!("1=pcap:rx={},loop", d.path().join("in.pcap").display());
    let cpus = sluice_port::sys::allowed_cpus().unwrap();
    let two = format!("{},{}", cpus[0], cpus[cpus.len() - 1]);
    // Stopped by time, not by a packet count: with both CPUs busy (other
    // tests' busy-polling PMDs) one PMD can wait tens of milliseconds to be
    // scheduled, long enough for the other to take a whole count alone.
    let run = |cores: &str, out: &str| {
        sluice(&[
            "run",
            "--json",
            "--duration",
            "1",
            "--flows",
            &flows,
            "--port",
            &input,
            "--port",
            out,
            "--pmd-cores",
            cores,
        ])
    };
    if cpus.len() >= 2 {
        let o = run(&two, "2=null");
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let n = r["datapath"]["packets received"].as_u64().unwrap();
        assert!(n > 0, "{n}");
        assert_eq!(r["datapath"]["sent packets"].as_u64().unwrap(), n);
        let pmds = r["pmds"].as_array().unwrap();
        assert_eq!(pmds.len(), 2);
        let per: Vec<u64> = pmds
            .iter()
            .map(|p| p["packets received"].as_u64().unwrap())
            .collect();
        assert!(per.iter().all(|&k| k > 0), "both PMDs work: {per:?}");
        assert_eq!(per.iter().sum::<u64>(), n);
        assert_eq!(
            r["ports"][0]["rx_packets"].as_u64().unwrap(),
            n,
            "one port, summed over its queues"
        );
    }
    let o = run(&format!("{},{}", cpus[0], cpus[0]), "2=null");
    assert!(stderr(&o).contains("given twice"), "{}", stderr(&o));
    let o = run("100000", "2=null");
    assert!(stderr(&o).contains("not available"), "{}", stderr(&o));
    let o = run("x", "2=null");
    assert!(stderr(&o).contains("not a CPU"), "{}", stderr(&o));
    if cpus.len() >= 2 {
        let out = format!("2=pcap:tx={}", d.path().join("o.pcap").display());
        let o = run(&two, &out);
        assert!(stderr(&o).contains("has one queue"), "{}", stderr(&o));
    }
}

#[test]
fn bench_prints_rows_and_the_io_floor() {
    let o = sluice(&[
        "bench",
        "--rules",
        "port-forward,l3l4",
        "--flows",
        "8",
        "--dist",
        "rr",
        "--packets",
        "20000",
        "--miss-storm",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["rows"].as_array().unwrap().len(), 4);
    assert!(r["io_floor_mpps"].as_f64().unwrap() > 0.0);
    assert_eq!(r["rows"][0]["packets"], 20000);
    let o = sluice(&[
        "bench",
        "--rules",
        "l3",
        "--flows",
        "8",
        "--dist",
        "rr",
        "--packets",
        "5000",
        "--pmds",
        "1,2",
    ]);
    assert!(stdout(&o).contains("I/O floor"), "{}", stdout(&o));
    assert!(stdout(&o).contains("2 PMDs"), "{}", stdout(&o));
    assert!(stdout(&o).contains("cycles/pkt"));
    let d = tempfile::tempdir().unwrap();
    let chart = d.path().join("chart.svg");
    let o = sluice(&[
        "bench",
        "--rules",
        "port-forward",
        "--flows",
        "8,100",
        "--dist",
        "rr,zipf",
        "--packets",
        "5000",
        "--plot",
        &chart.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert_eq!(
        svg.matches("<polyline").count(),
        2,
        "a line per distribution"
    );
    let o = sluice(&["bench", "--plot", "chart.gif"]);
    assert!(stderr(&o).contains(".svg or .png"), "{}", stderr(&o));
}

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

/// Writes `in.pcap` (flows that all hash to rx queues 0 and 2 of 4) and
/// `r.flows` (everything to port 2) into `dir`.
fn traffic_for_queues_0_and_2(dir: &Path) {
    let frames: Vec<Vec<u8>> = (0..2000u16)
        .map(|i| {
            Frame::ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                L4::Udp {
                    src: 1000 + i,
                    dst: 9,
                },
            )
            .build()
        })
        .filter(|f| (sluice_port::replay::rss_hash(f) % 4).is_multiple_of(2))
        .take(64)
        .collect();
    let on = |q: u32| {
        frames
            .iter()
            .filter(|f| sluice_port::replay::rss_hash(f) % 4 == q)
            .count()
    };
    assert!(on(0) > 0 && on(2) > 0);
    std::fs::write(dir.join("in.pcap"), sluice_port::pcap::write_all(&frames)).unwrap();
    std::fs::write(dir.join("r.flows"), "actions=output:2\n").unwrap();
}

/// Which PMD section of `pmd-rxq-show` lists port 1's queue `q`.
fn pmd_of(show: &str, q: u32) -> Option<String> {
    let mut pmd = None;
    for line in show.lines() {
        if let Some(rest) = line.strip_prefix("pmd thread ") {
            pmd = rest.split_whitespace().next().map(str::to_string);
        } else if line.contains("port: 1 ") && line.contains(&format!("queue-id: {q:>2} ")) {
            return pmd.clone();
        }
    }
    None
}

/// A running switch with two PMDs (on the first two CPUs this process may
/// use) and `--n-rxq 4`, reading [`traffic_for_queues_0_and_2`] in a loop
/// for `duration` seconds, everything to a null port 2, with `extra`
/// flags; and its `--pmd-cores` list. `None`, with a note, on a machine
/// with fewer than two CPUs.
fn two_pmds_on_queues_0_and_2(
    dir: &Path,
    duration: &str,
    extra: &[&str],
) -> Option<(RunningSwitch, String)> {
    let cpus = sluice_port::sys::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 CPUs, this process may use {cpus:?}");
        return None;
    }
    traffic_for_queues_0_and_2(dir);
    let p = |s: &str| dir.join(s).display().to_string();
    let cores = format!("{},{}", cpus[0], cpus[1]);
    let (flows, input) = (p("r.flows"), format!("1=pcap:rx={},loop", p("in.pcap")));
    let mut args = vec!["--duration", duration, "--flows", &flows, "--n-rxq", "4"];
    args.extend(["--pmd-cores", &cores]);
    args.extend_from_slice(extra);
    args.extend(["--port", &input, "--port", "2=null"]);
    let run = RunningSwitch::start(&p("s.ctl"), &args);
    Some((run, cores))
}

/// `--n-rxq 4` on two PMDs: queues 0 and 1 are the PMDs' own, 2 and 3 are
/// dealt round-robin. The capture's flows all hash to queues 0 and 2, so
/// PMD 0 does all the work until `pmd-rxq-rebalance` moves queue 2 to
/// PMD 1; then both work, and every packet is still accounted for.
#[test]
fn rx_queues_move_between_pmds_by_measured_load() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let Some((run, cores)) = two_pmds_on_queues_0_and_2(d.path(), "6", &[]) else {
        return;
    };
    let ctl = |args: &[&str]| {
        let o = run.ctl(args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let show = ctl(&["pmd-rxq-show"]);
    for (q, pmd) in [(0, "0"), (1, "1"), (2, "0"), (3, "1")] {
        assert_eq!(pmd_of(&show, q).as_deref(), Some(pmd), "{show}");
    }
    let moved = ctl(&["pmd-rxq-rebalance"]);
    assert!(
        moved.contains("port 1 queue-id 2: pmd 0 -> pmd 1"),
        "{moved}"
    );
    assert!(moved.contains("moved 1 rx queues"), "{moved}");
    let show = ctl(&["pmd-rxq-show"]);
    assert_eq!(pmd_of(&show, 2).as_deref(), Some("1"), "{show}");
    // Balanced now: a second rebalance leaves everything where it is.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(ctl(&["pmd-rxq-rebalance"]).contains("moved 0 rx queues"));
    let r = run.finish();
    let n = r["datapath"]["packets received"].as_u64().unwrap();
    assert_eq!(r["datapath"]["sent packets"].as_u64().unwrap(), n);
    assert_eq!(r["ports"][0]["rx_packets"].as_u64().unwrap(), n);
    let per: Vec<u64> = r["pmds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["packets received"].as_u64().unwrap())
        .collect();
    assert!(per[1] > 0, "PMD 1 works once queue 2 is its: {per:?}");
    let o = sluice(&[
        "run",
        "--flows",
        &p("r.flows"),
        "--n-rxq",
        "1",
        "--pmd-cores",
        &cores,
        "--port",
        "2=null",
    ]);
    assert!(
        stderr(&o).contains("at least one rx queue per PMD"),
        "{}",
        stderr(&o)
    );
}

/// The same switch with `--pmd-auto-lb` and no command: PMD 0 is
/// overloaded while PMD 1 idles, so within an interval or two queue 2
/// moves to PMD 1 on its own (logged on stderr); from then on both PMDs
/// are busy and no move would gain enough, so it stays there.
#[test]
fn pmd_auto_lb_moves_a_queue_off_an_overloaded_pmd_once() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let extra = ["--pmd-auto-lb", "--pmd-auto-lb-interval", "0.5"];
    let Some((run, _)) = two_pmds_on_queues_0_and_2(d.path(), "5", &extra) else {
        return;
    };
    let show = || {
        let o = run.ctl(&["pmd-rxq-show"]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let t0 = std::time::Instant::now();
    while pmd_of(&show(), 2).as_deref() != Some("1") {
        assert!(
            t0.elapsed().as_secs() < 4,
            "queue 2 never moved:\n{}",
            show()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (r, err) = run.finish_with_stderr();
    assert_eq!(
        err.matches("sluice: pmd-auto-lb: PMDs busy").count(),
        1,
        "one rebalance, then none: {err}"
    );
    assert!(err.contains("port 1 queue-id 2: pmd 0 -> pmd 1"), "{err}");
    let n = r["datapath"]["packets received"].as_u64().unwrap();
    assert_eq!(r["datapath"]["sent packets"].as_u64().unwrap(), n);
    let per: Vec<u64> = r["pmds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["packets received"].as_u64().unwrap())
        .collect();
    assert!(per[1] > 0, "PMD 1 works once queue 2 is its: {per:?}");
    // Settings without the switch itself are refused, as are bad values.
    for (args, want) in [
        (vec!["--pmd-auto-lb-interval", "5"], "add --pmd-auto-lb"),
        (
            vec!["--pmd-auto-lb", "--pmd-auto-lb-load-threshold", "0"],
            "1 to 100",
        ),
    ] {
        let flows = p("r.flows");
        let mut a = vec!["run", "--flows", &flows, "--port", "2=null"];
        a.extend(args);
        let o = sluice(&a);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
    }
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
    run.finish();
}

/// A `sluice run --json --ctl SOCK ARGS` in the background.
struct RunningSwitch {
    child: std::process::Child,
    sock: String,
}

impl RunningSwitch {
    /// Starts it and waits for its control socket.
    fn start(sock: &str, args: &[&str]) -> RunningSwitch {
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--json", "--ctl", sock])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !Path::new(sock).exists() {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the control socket did not appear"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        RunningSwitch {
            child,
            sock: sock.to_string(),
        }
    }

    /// `sluice ctl --ctl SOCK ARGS`.
    fn ctl(&self, args: &[&str]) -> Output {
        ctl_at(&self.sock, args)
    }

    /// Waits for the end of the run; its JSON report.
    fn finish(self) -> serde_json::Value {
        self.finish_with_stderr().0
    }

    /// Waits for the end of the run; its JSON report and what it logged.
    fn finish_with_stderr(self) -> (serde_json::Value, String) {
        let out = self.child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (serde_json::from_slice(&out.stdout).unwrap(), err)
    }
}

/// `sluice ctl --ctl SOCK ARGS`.
fn ctl_at(sock: &str, args: &[&str]) -> Output {
    let mut a = vec!["ctl", "--ctl", sock];
    a.extend_from_slice(args);
    sluice(&a)
}

#[test]
fn io_floor_forwards_everything_it_receives_and_refuses_what_it_cannot_measure() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_capture(&input, 64);
    let rx = format!("1=pcap:rx={},loop", input.display());
    let o = sluice(&[
        "io-floor",
        "--port",
        &rx,
        "--port",
        "2=null",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let num = |word: &str| -> u64 {
        let after = out
            .split(word)
            .nth(1)
            .unwrap_or_else(|| panic!("no '{word}' in {out}"));
        after
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(num("received") > 1000, "{out}");
    assert_eq!(num("received"), num("sent"), "{out}");
    assert!(out.contains("cycles/pkt"), "{out}");
    for (args, why) in [
        (
            vec!["--port", &rx, "--port", "2=null", "--to", "3"],
            "--to 3: no such port",
        ),
        (vec!["--port", "2=null"], "no port that receives"),
        (
            vec!["--port", &rx, "--port", "2=null", "--seconds", "0"],
            "--seconds must be above 0",
        ),
    ] {
        let mut a = vec!["io-floor"];
        a.extend(args);
        let o = sluice(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}");
        assert!(stderr(&o).contains(why), "{a:?}: {}", stderr(&o));
    }
    let once = format!("1=pcap:rx={}", input.display());
    let o = sluice(&["io-floor", "--port", &once, "--port", "2=null"]);
    assert!(stderr(&o).contains("endless input"), "{}", stderr(&o));
}

/// `sluice xdp-send` refuses what it cannot send, with the reason.
#[test]
fn xdp_send_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pcap");
    // A pcap header and no records.
    let mut hdr = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    hdr.extend([0u8; 8]);
    hdr.extend(65535u32.to_le_bytes());
    hdr.extend(1u32.to_le_bytes());
    std::fs::write(&empty, hdr).unwrap();
    let e = empty.display().to_string();
    for (args, why) in [
        (vec!["lo", "--size", "10"], "--size must be 60 to"),
        (vec!["lo", "--flows", "0"], "--flows must be 1 to 60000"),
        (vec!["lo", "--burst", "0"], "--burst must be at least 1"),
        (vec!["lo", "--seconds=-1"], "--seconds must be 0 or more"),
        (vec!["lo", "--pcap", &e], "the capture is empty"),
        (vec!["nosuchif0"], "no network interface 'nosuchif0'"),
    ] {
        let mut a = vec!["xdp-send"];
        a.extend(args);
        let o = sluice(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}");
        assert!(stderr(&o).contains(why), "{a:?}: {}", stderr(&o));
    }
}
