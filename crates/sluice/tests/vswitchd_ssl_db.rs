//! `sluice vswitchd ssl:IP:PORT`: the daemon's own connection to a stock
//! `ovsdb-server` over TLS (`--remote=pssl:`), with the key, certificate
//! and CA given as ovs-vswitchd's `-p`, `-c`, `-C`; a certificate of
//! another CA is refused by the server. Root, openssl.

mod support;

use std::process::Command;

use support::ovs::{as_ovs_vswitchd, require_ovs_tools, start_daemon_on, Db};
use support::*;

#[test]
fn the_database_over_tls() {
    require_ovs_tools(&["openssl"]);
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    let f = |n: &str| pki.path().join(n).display().to_string();
    let sw = Host::new("vtl", None);
    let port = 17000 + std::process::id() % 1000;
    // The server in the switch's namespace (its pssl: listener is there),
    // its own key and certificate of the CA the switch trusts.
    let db = Db::start_in(
        Some(&sw.ns),
        &[
            format!("--remote=pssl:{port}:127.0.0.1"),
            format!("--private-key={}", f("ctl.key")),
            format!("--certificate={}", f("ctl.pem")),
            format!("--ca-cert={}", f("ca.pem")),
        ],
    );
    let bin = as_ovs_vswitchd(db.run());
    let bin_name = bin.to_str().expect("a UTF-8 path");
    let start = |key: &str, cert: &str| {
        let (key, cert, ca) = (f(key), f(cert), f("ca.pem"));
        let daemon = [bin_name, "-p", &key, "-c", &cert, "-C", &ca];
        start_daemon_on(&db, &sw.ns, &daemon, &format!("ssl:127.0.0.1:{port}"))
    };
    // Without the files: refused at once, saying which.
    let bare = Command::new("ip")
        .args(["netns", "exec", &sw.ns])
        .arg(&bin)
        .arg(format!("ssl:127.0.0.1:{port}"))
        .env("OVS_RUNDIR", db.run())
        .output()
        .unwrap();
    assert!(!bare.status.success());
    assert!(
        stderr(&bare).contains("--private-key, --certificate and --ca-cert"),
        "{}",
        stderr(&bare)
    );

    let out = start("sw.key", "sw.pem");
    assert!(out.status.success(), "start: {}", stderr(&out));
    // ovs-vsctl (over the unix socket) waits for cur_cfg: the switch read
    // the bridge over TLS and wrote back.
    let br = format!("vt{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    assert_eq!(db.get("Interface", &br, "ofport"), "65534");
    assert!(db.appctl(&["exit", "--cleanup"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });

    // A certificate of another CA: the server refuses the session; the
    // daemon keeps trying and writes nothing (its --detach waits for a
    // first configuration that does not come).
    let log = db.run().join("ovs-vswitchd.log");
    let _ = std::fs::remove_file(&log);
    let other = format!("vu{}", std::process::id() % 10000);
    db.vsctl(&[
        "--no-wait",
        "add-br",
        &other,
        "--",
        "set",
        "bridge",
        &other,
        "datapath_type=netdev",
    ]);
    std::thread::scope(|s| {
        s.spawn(|| start("intruder.key", "intruder.pem"));
        wait_for("the refused session in the log", 20, || {
            std::fs::read_to_string(&log)
                .is_ok_and(|l| l.contains(&format!("ssl:127.0.0.1:{port}: database connection")))
        });
        std::thread::sleep(std::time::Duration::from_secs(1));
        assert_eq!(db.get("Interface", &other, "ofport"), "[]");
        let _ = Command::new("pkill")
            .args(["-f", &format!("ssl:127.0.0.1:{port}")])
            .status();
    });
}
