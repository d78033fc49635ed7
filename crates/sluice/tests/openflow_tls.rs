//! OpenFlow over TLS (#35): `pssl:` serving `ovs-ofctl` over `ssl:` (its
//! `-p/-c/-C`), `ssl:` to an os-ken controller listening for switches over
//! SSL, and peers whose certificates do not chain to the CA refused and
//! logged. The certificates are made by `openssl` for each test.

use std::path::Path;
use std::process::{Command, Stdio};

mod support;
use support::{free_port, make_pki, ofctl, sluice, stderr, wait_for, Killed, RunningSwitch};

/// `ovs-ofctl -O OpenFlow13 -p KEY -c CERT -C CA ARGS`.
fn ofctl_ssl(dir: &Path, who: &str, args: &[&str]) -> (bool, String) {
    let p = |s: &str| dir.join(s).display().to_string();
    let out = Command::new("timeout")
        .args(["10", "ovs-ofctl", "-O", "OpenFlow13"])
        .args([
            "-p",
            &p(&format!("{who}.key")),
            "-c",
            &p(&format!("{who}.pem")),
        ])
        .args(["-C", &p("ca.pem")])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn pssl_serves_ovs_ofctl_and_refuses_a_certificate_of_another_ca() {
    let d = tempfile::tempdir().unwrap();
    make_pki(d.path());
    let p = |s: &str| d.path().join(s).display().to_string();
    std::fs::write(d.path().join("r.flows"), "priority=5,actions=drop\n").unwrap();
    let port = free_port();
    let run = RunningSwitch::start(
        &p("s.ctl"),
        &[
            "--duration",
            "15",
            "--flows",
            &p("r.flows"),
            "--port",
            "1=null",
            "--port",
            "2=null",
            "--listen",
            &format!("pssl:{port}"),
            "--private-key",
            &p("sw.key"),
            "--certificate",
            &p("sw.pem"),
            "--ca-cert",
            &p("ca.pem"),
        ],
    );
    let target = format!("ssl:127.0.0.1:{port}");
    let (ok, out) = ofctl_ssl(d.path(), "ctl", &["dump-flows", &target]);
    assert!(ok && out.contains("priority=5 actions=drop"), "{out}");
    let (ok, out) = ofctl_ssl(
        d.path(),
        "ctl",
        &["add-flow", &target, "priority=9,ip,actions=output:2"],
    );
    assert!(ok, "{out}");
    let (_, out) = ofctl_ssl(d.path(), "ctl", &["dump-flows", &target]);
    assert!(out.contains("priority=9,ip actions=output:2"), "{out}");
    // A certificate from another CA: refused, nothing changes.
    let (ok, out) = ofctl_ssl(
        d.path(),
        "intruder",
        &["add-flow", &target, "priority=99,actions=drop"],
    );
    assert!(!ok, "{out}");
    // Plain TCP to the TLS port gets nothing either.
    let (ok, _) = ofctl(&["dump-flows", &format!("tcp:127.0.0.1:{port}")]);
    assert!(!ok);
    let (_, out) = ofctl_ssl(d.path(), "ctl", &["dump-flows", &target]);
    assert!(!out.contains("priority=99"), "{out}");
    let dump = support::stdout(&run.ctl(&["dump-flows"]));
    assert!(dump.contains("priority=9,ip actions=output:2"), "{dump}");
    assert!(!dump.contains("priority=99"), "{dump}");
    let (_, err) = run.stop_with_stderr();
    assert!(
        err.contains("refused: invalid peer certificate"),
        "the refusal is logged: {err}"
    );
}

/// os-ken listening for switches over SSL with `who`'s certificate,
/// running tests/osken/marker.py (one rule on each switch that connects).
fn osken_ssl(dir: &Path, who: &str, port: u16, log: &Path) -> Killed {
    let p = |s: &str| dir.join(s).display().to_string();
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/osken/marker.py");
    Killed(
        Command::new("osken-manager")
            .args(["--ofp-ssl-listen-port", &port.to_string()])
            .args(["--ofp-tcp-listen-port", &free_port().to_string()])
            .args(["--ctl-privkey", &p(&format!("{who}.key"))])
            .args(["--ctl-cert", &p(&format!("{who}.pem"))])
            .args(["--ca-certs", &p("ca.pem")])
            .arg(app)
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("osken-manager runs (scripts/setup installs python3-os-ken)"),
    )
}

#[test]
fn ssl_reaches_an_os_ken_controller_and_refuses_an_impostor() {
    let d = tempfile::tempdir().unwrap();
    make_pki(d.path());
    let p = |s: &str| d.path().join(s).display().to_string();
    let (good, bad) = (free_port(), free_port());
    let (good_log, bad_log) = (d.path().join("good.log"), d.path().join("bad.log"));
    let _ctl = osken_ssl(d.path(), "ctl", good, &good_log);
    let _impostor = osken_ssl(d.path(), "intruder", bad, &bad_log);
    let sock = p("of.sock");
    let run = RunningSwitch::start(
        &p("s.ctl"),
        &[
            "--duration",
            "12",
            "--port",
            "1=null",
            "--port",
            "2=null",
            "--datapath-id",
            "00000000000000ab",
            "--controller",
            &format!("ssl:127.0.0.1:{good}"),
            "--controller",
            &format!("ssl:127.0.0.1:{bad}"),
            "--listen",
            &format!("punix:{sock}"),
            "--private-key",
            &p("sw.key"),
            "--certificate",
            &p("sw.pem"),
            "--ca-cert",
            &p("ca.pem"),
        ],
    );
    let target = format!("unix:{sock}");
    wait_for("the controller's rule over TLS", 30, || {
        Path::new(&sock).exists()
            && ofctl(&["dump-flows", &target])
                .1
                .contains("priority=42,ip,nw_dst=10.1.0.0/16 actions=output:2")
    });
    assert!(std::fs::read_to_string(&good_log)
        .unwrap()
        .contains("MARKER connected dpid=00000000000000ab"));
    // The impostor's certificate does not chain to the CA: it never gets
    // the switch.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(!std::fs::read_to_string(&bad_log)
        .unwrap_or_default()
        .contains("MARKER connected"));
    let (_, err) = run.stop_with_stderr();
    assert!(
        err.contains(&format!("ssl:127.0.0.1:{bad}")) && err.contains("invalid peer certificate"),
        "the impostor is refused and logged: {err}"
    );
}

#[test]
fn ssl_without_its_files_is_an_error_that_names_them() {
    let o = sluice(&[
        "run",
        "--port",
        "1=null",
        "--listen",
        "pssl:6653",
        "--duration",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("need --private-key, --certificate and --ca-cert"),
        "{}",
        stderr(&o)
    );
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("none.pem").display().to_string();
    let o = sluice(&[
        "run",
        "--port",
        "1=null",
        "--controller",
        "ssl:127.0.0.1",
        "--private-key",
        &missing,
        "--certificate",
        &missing,
        "--ca-cert",
        &missing,
        "--duration",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--certificate"), "{}", stderr(&o));
}
