//! Every numeric option of every subcommand, fed huge, negative, NaN,
//! infinite, empty and non-ASCII values, ends in a clear error (exit 2,
//! naming the option) or runs: never a panic (exit 101) or an abort (a
//! signal). The real binary runs each case, a few at a time, each with a
//! deadline after which it counts as running and is killed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proptest::prelude::*;

mod support;
use support::{sluice_bin, write_capture};

/// Values no numeric option should crash on.
const HOSTILE: &[&str] = &[
    "18446744073709551616",
    "18446744073709551615",
    "9223372036854775807",
    "4294967296",
    "99999999999999",
    "1e300",
    "-1e300",
    "-1",
    "-0",
    "0",
    "NaN",
    "inf",
    "-inf",
    "",
    " ",
    "é",
    "１",
    "1é",
    "0x10",
    "1e-300",
];

/// A command line with a slot for the value under test.
struct Case {
    /// The arguments before the option.
    base: Vec<String>,
    /// The option (`--duration`), or `None` for a positional value.
    option: &'static str,
    /// Arguments after it.
    after: Vec<String>,
}

/// Every numeric option of every subcommand, each with a base command line
/// that ends quickly when the value is good.
fn cases(dir: &Path) -> Vec<Case> {
    let p = |s: &str| dir.join(s).display().to_string();
    let flows = p("r.flows");
    let input = format!("1=pcap:rx={}", p("in.pcap"));
    let looping = format!("1=pcap:rx={},loop", p("in.pcap"));
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let run = v(&[
        "run", "--flows", &flows, "--port", &looping, "--port", "2=null",
    ]);
    let mut c = Vec::new();
    let mut add = |base: &[String], option: &'static str, after: &[String]| {
        c.push(Case {
            base: base.to_vec(),
            option,
            after: after.to_vec(),
        })
    };
    let short = v(&["--duration", "0.3"]);
    for o in [
        "--packets",
        "--controller-rate-limit",
        "--n-rxq",
        "--pmd-auto-lb-load-threshold",
        "--pmd-auto-lb-improvement-threshold",
        "--emc-insert-inv-prob",
        "--upcall-share",
        "--packet-in-share",
        "--flow-limit",
        "--mask-limit",
        "--tx-flush-interval",
        "--vlan-limit",
        "--pmd-cores",
        "--datapath-id",
    ] {
        add(&run, o, &short);
    }
    add(&run, "--duration", &[]);
    add(
        &run,
        "--pmd-auto-lb-interval",
        &v(&["--pmd-auto-lb", "--duration", "0.3"]),
    );
    add(
        &run,
        "--tx-flush-interval",
        &v(&["--duration", "0.3", "--tx-flush-interval", "2=5"]),
    );
    let mut port_n = run.clone();
    port_n.truncate(3);
    add(&port_n, "--port", &v(&["--duration", "0.3"]));
    let demo = v(&["demo", "--packets", "1000", "--flow-count", "8"]);
    for o in [
        "--packets",
        "--flow-count",
        "--emc-insert-inv-prob",
        "--flow-limit",
        "--mask-limit",
        "--upcall-share",
    ] {
        add(&demo, o, &[]);
    }
    let trace = v(&[
        "trace",
        "--flows",
        &flows,
        "--packet",
        "ffffffffffff00000000000108060001",
    ]);
    add(&trace, "--in-port", &[]);
    add(&trace, "--ports", &v(&["--in-port", "1"]));
    add(&trace, "--vlan-limit", &v(&["--in-port", "1"]));
    let gen = v(&[
        "gen",
        "-o",
        &p("gen.pcap"),
        "--packets",
        "100",
        "--flows",
        "10",
    ]);
    for o in [
        "--flows",
        "--packets",
        "--size",
        "--new-flows-per-sec",
        "--pps",
        "--seed",
    ] {
        add(&gen, o, &[]);
    }
    add(&gen, "--flows", &v(&["--dist", "zipf"]));
    add(&gen, "--flows", &v(&["--profile", "churn"]));
    add(&gen, "--dist", &[]);
    let zipf = v(&["gen", "-o", &p("gen.pcap"), "--packets", "100", "--dist"]);
    add(&zipf, "zipf:", &[]);
    let bench = v(&[
        "bench",
        "--rules",
        "port-forward",
        "--flows",
        "8",
        "--dist",
        "rr",
        "--packets",
        "20000",
    ]);
    for o in [
        "--flows",
        "--packets",
        "--tx-flush-interval",
        "--pmds",
        "--storm-established-mpps",
    ] {
        add(&bench, o, &[]);
    }
    add(&bench, "--rules", &[]);
    let floor = v(&["io-floor", "--port", &input, "--port", "2=null"]);
    let quick = v(&["--seconds", "0.1", "--warmup", "0"]);
    for o in ["--to", "--pool-frames"] {
        add(&floor, o, &quick);
    }
    add(&floor, "--seconds", &v(&["--warmup", "0"]));
    add(&floor, "--warmup", &v(&["--seconds", "0.1"]));
    let xdp = v(&["xdp-send", "nosuchif0", "--seconds", "0.1"]);
    for o in ["--flows", "--size", "--seconds", "--count", "--burst"] {
        add(&xdp, o, &[]);
    }
    let ctl = v(&["ctl", "--ctl", &p("nobody.sock"), "set"]);
    add(&ctl, "tx-flush-interval=", &[]);
    add(&v(&["check"]), "--vlan-limit", std::slice::from_ref(&flows));
    c
}

/// How one run ended.
enum Ended {
    Code(i32),
    Signal(i32),
    /// Still running at the deadline (killed by the test): it runs.
    Running,
}

fn run_case(args: &[String], deadline: Duration) -> (Ended, String) {
    let mut child = Command::new(sluice_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            use std::os::unix::process::ExitStatusExt;
            return match (st.code(), st.signal()) {
                (Some(c), _) => (Ended::Code(c), err),
                (None, Some(s)) => (Ended::Signal(s), err),
                _ => (Ended::Code(-1), err),
            };
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (Ended::Running, String::new());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Builds the command line of `case` with `value`.
fn line(case: &Case, value: &str) -> Vec<String> {
    let mut a = case.base.clone();
    match case.option {
        o if o.ends_with(':') || o.ends_with('=') => {
            // A value inside a word: --dist zipf:V, set tx-flush-interval=V.
            a.push(format!("{o}{value}"));
        }
        "--port" => a.extend(["--port".to_string(), format!("{value}=null")]),
        o => a.extend([o.to_string(), value.to_string()]),
    }
    a.extend(case.after.iter().cloned());
    a
}

/// What is wrong with how a run ended, if anything.
fn verdict(args: &[String], ended: &Ended, err: &str) -> Option<String> {
    match ended {
        Ended::Code(101) => Some(format!("panicked: {args:?}\n{err}")),
        Ended::Signal(s) => Some(format!("killed by signal {s}: {args:?}\n{err}")),
        Ended::Code(c) if *c != 0 && err.contains("panicked") => {
            Some(format!("exit {c} after a panic: {args:?}\n{err}"))
        }
        Ended::Code(2) if err.trim().is_empty() => {
            Some(format!("refused without a word: {args:?}"))
        }
        _ => None,
    }
}

fn fixture() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write_capture(&d.path().join("in.pcap"), 50);
    std::fs::write(d.path().join("r.flows"), "actions=output:2\n").unwrap();
    d
}

#[test]
fn no_numeric_option_panics_or_aborts_on_hostile_values() {
    let d = fixture();
    let cases = cases(d.path());
    let work: Vec<Vec<String>> = cases
        .iter()
        .flat_map(|c| HOSTILE.iter().map(move |v| line(c, v)))
        .collect();
    let next = Mutex::new(work.into_iter());
    let bad = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let Some(args) = next.lock().unwrap().next() else {
                    break;
                };
                let (ended, err) = run_case(&args, Duration::from_secs(5));
                if let Some(v) = verdict(&args, &ended, &err) {
                    bad.lock().unwrap().push(v);
                }
            });
        }
    });
    let bad = bad.into_inner().unwrap();
    assert!(
        bad.is_empty(),
        "{} bad endings:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn a_bad_value_is_an_error_that_names_the_option() {
    let d = fixture();
    let p = |s: &str| d.path().join(s).display().to_string();
    let flows = p("r.flows");
    for (args, said) in [
        (vec!["--duration", "1e300"], "--duration"),
        (vec!["--duration", "NaN"], "--duration"),
        (vec!["--duration", "-1"], "--duration"),
        (vec!["--pmd-cores", "0-1000000000000"], "does not exist"),
        (
            vec!["--tx-flush-interval", "18446744073709551615"],
            "--tx-flush-interval",
        ),
        (vec!["--n-rxq", "99999999999999"], "--n-rxq"),
    ] {
        let mut a = vec!["run", "--flows", &flows, "--port", "2=null"];
        a.extend(args.iter().copied());
        let o = support::sluice(&a);
        let err = support::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(said), "{a:?}: {err}");
    }
    let o = support::sluice(&[
        "trace",
        "--flows",
        &flows,
        "--in-port",
        "1",
        "--packet",
        "aéb",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        support::stderr(&o).contains("not a hex digit"),
        "{}",
        support::stderr(&o)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Arbitrary text (any Unicode, huge digit strings, signs, exponents)
    /// as the value of options that take numbers: an error or a run,
    /// never a crash.
    #[test]
    fn arbitrary_text_as_a_number_never_crashes(
        which in 0usize..6,
        value in prop_oneof![
            "\\PC{0,12}",
            "[-+]?[0-9]{1,40}(\\.[0-9]{0,5})?([eE][-+]?[0-9]{1,4})?",
        ],
    ) {
        let d = fixture();
        let flows = d.path().join("r.flows").display().to_string();
        let out = d.path().join("g.pcap").display().to_string();
        let args: Vec<String> = match which {
            0 => vec!["run", "--flows", &flows, "--port", "2=null", "--duration", &value],
            1 => vec!["run", "--flows", &flows, "--port", "2=null", "--duration", "0.2", "--pmd-cores", &value],
            2 => vec!["run", "--flows", &flows, "--port", "2=null", "--duration", "0.2", "--flow-limit", &value],
            3 => vec!["gen", "-o", &out, "--packets", "10", "--flows", &value, "--dist", "zipf"],
            4 => vec!["gen", "-o", &out, "--flows", "10", "--packets", &value],
            _ => vec!["trace", "--flows", &flows, "--in-port", "1", "--packet", &value],
        }
        .into_iter()
        .map(String::from)
        .collect();
        let (ended, err) = run_case(&args, Duration::from_secs(5));
        prop_assert!(verdict(&args, &ended, &err).is_none(), "{}", verdict(&args, &ended, &err).unwrap());
    }
}
