//! Rx queues and PMD threads: which PMD polls which queue, moving queues by
//! their measured load (`pmd-rxq-rebalance`, `--pmd-auto-lb`).

use std::path::Path;

use sluice_packet::build::{Frame, L4};

mod support;
use support::{sluice, stderr, stdout, RunningSwitch};

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
