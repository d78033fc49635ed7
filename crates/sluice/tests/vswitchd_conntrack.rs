//! The connection tracker of `sluice vswitchd` as OVS users reach it:
//! zone timeout policies written by `ovs-vsctl add-zone-tp` (the
//! `Datapath`, `CT_Zone` and `CT_Timeout_Policy` rows), and `ovs-appctl
//! dpctl/ct-*` with OVS 3.1's arguments and error lines, through
//! Debian's tools on a stock `ovsdb-server`. Needs root.

mod support;

use support::ovs::db_and_switch;
use support::*;

#[test]
fn zone_timeout_policies_and_dpctl_ct_commands_as_ovs() {
    // (The switch's namespace lives as long as the test.)
    let (db, _sw) = db_and_switch("vct");
    let br = format!("vc{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    let policy = |zone: &str| {
        let o = db.appctl(&["sluice/ctl", "ct-get-timeout-policy", zone]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // The netdev datapath's row, as OVS's tests make it, then a policy
    // for zone 5 (and one for zone 6 to take away later).
    db.vsctl(&[
        "--",
        "--id=@m",
        "create",
        "Datapath",
        "datapath_version=0",
        "--",
        "set",
        "Open_vSwitch",
        ".",
        "datapaths:netdev=@m",
    ]);
    for (zone, secs) in [("5", "1"), ("6", "7")] {
        db.vsctl(&[
            "--may-exist",
            "add-zone-tp",
            "netdev",
            &format!("zone={zone}"),
            &format!("udp_first={secs}"),
            &format!("icmp_reply={secs}"),
        ]);
    }
    let z5 = policy("zone=5");
    assert!(z5.contains("    udp_first=1\n"), "{z5}");
    assert!(z5.contains("    icmp_reply=1\n"), "{z5}");
    assert!(z5.contains("    tcp_established=86400 (default)\n"), "{z5}");
    assert!(policy("zone=6").contains("    udp_first=7\n"));
    assert!(policy("zone=7").contains("    udp_first=60 (default)\n"));
    // Taken away: the defaults again; the other zone keeps its own.
    db.vsctl(&["del-zone-tp", "netdev", "zone=6"]);
    assert!(policy("zone=6").contains("    udp_first=60 (default)\n"));
    assert!(policy("zone=5").contains("    udp_first=1\n"));

    // dpctl/ct-*: OVS's answers and errors, word for word (scripts and
    // OVS's own tests match them), each error a line of its own before
    // ovs-appctl's.
    let set = db.appctl(&["dpctl/ct-set-maxconns", "10"]);
    assert_eq!(stdout(&set), "setting maxconns successful\n");
    assert_eq!(stdout(&db.appctl(&["dpctl/ct-get-maxconns"])), "10\n");
    assert_eq!(stdout(&db.appctl(&["dpctl/ct-get-nconns"])), "0\n");
    let bad = db.appctl(&["dpctl/ct-set-maxconns", "one-bad-dp"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        stderr(&bad),
        "ovs-vswitchd: maxconns missing or malformed (Invalid argument)\n\
         ovs-appctl: ovs-vswitchd: server returned an error\n"
    );
    let nodp = db.appctl(&["dpctl/ct-get-nconns", "one-bad-dp"]);
    assert!(stderr(&nodp).starts_with("ovs-vswitchd: datapath not found (Invalid argument)\n"));
    let tuple = db.appctl(&[
        "dpctl/flush-conntrack",
        "zone=5",
        "ct_nw_proto=17,ct_tp_src=1",
    ]);
    assert!(tuple.status.success(), "{}", stderr(&tuple));
    let wrong = db.appctl(&["dpctl/flush-conntrack", "ct_tp_src=1"]);
    assert!(stderr(&wrong)
        .starts_with("ovs-vswitchd: port is set without protocol (Invalid argument)\n"));

    assert!(db.appctl(&["exit"]).status.success());
}
