//! The `sluice` command as users run it.

use std::process::Command;

use sluice_port::pcap::read_all;

mod support;
use support::{sluice, stderr, stdout, write_capture};

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
    // No flow file: a learning switch (one NORMAL rule), said so.
    let o = sluice(&["run", "--port", "1=null"]);
    assert!(
        o.status.success()
            && stderr(&o).contains("no flow file: one rule, priority=0,actions=NORMAL"),
        "{}",
        stderr(&o)
    );
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
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
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
    assert!(
        svg.contains("port-forward rr") && svg.contains("port-forward zipf"),
        "a line per distribution"
    );
    assert_eq!(svg.matches("<circle").count(), 4, "a point per row");
    let o = sluice(&["bench", "--plot", "chart.gif"]);
    assert!(stderr(&o).contains(".svg or .png"), "{}", stderr(&o));
    // A bench/compare-ovs results file drawn: a pair of bars a profile.
    let results = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/results/compare-ovs-2026-11-25-same-io.txt"
    );
    let cmp = d.path().join("cmp.svg");
    let o = sluice(&[
        "bench",
        "--compare-chart",
        results,
        "--plot",
        &cmp.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("chart of 25 profiles"),
        "{}",
        stderr(&o)
    );
    let svg = std::fs::read_to_string(&cmp).unwrap();
    assert!(svg.contains("l3l4 zipf 1000000") && svg.contains("I/O floor"));
    let o = sluice(&[
        "bench",
        "--compare-chart",
        &chart.display().to_string(),
        "--plot",
        &cmp.display().to_string(),
    ]);
    assert!(stderr(&o).contains("nothing to plot"), "{}", stderr(&o));
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
            "for '--seconds <SECONDS>': 0: give a number of seconds, more than 0",
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
        (
            vec!["lo", "--seconds=-1"],
            "for '--seconds <SECONDS>': -1: give a number of seconds, 0 or more",
        ),
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
