//! `sluice vswitchd`'s route table as OVS users reach it through
//! `ovs-appctl`: the kernel's routes of the switch's namespace, followed
//! over rtnetlink (any device's, as OVS's `ovs/route/show` lists them:
//! what OVS's `system-route.at` checks), and routes and neighbours given
//! by hand before the switch has any tunnel (as OVS's userspace tunnel
//! guide gives them). Debian's tools on a stock `ovsdb-server`; root.

mod support;

use support::ovs::db_and_switch;
use support::*;

#[test]
fn kernel_routes_and_routes_by_hand_as_ovs_lists_them() {
    let (db, sw) = db_and_switch("vrt");
    let appctl = |args: &[&str]| {
        let o = db.appctl(args);
        (stdout(&o), stderr(&o))
    };
    let show = || appctl(&["ovs/route/show"]).0;

    // A device the switch does not have: its routes come and go with
    // its address, told by rtnetlink.
    sw.exec("ip tuntap add name p1-route mode tap");
    sw.exec("ip link set p1-route up");
    sw.exec("ip addr add 10.0.0.17/24 dev p1-route");
    wait_for("p1-route's routes", 10, || {
        let mut mine: Vec<String> = show()
            .lines()
            .filter(|l| l.contains("p1-route"))
            .map(str::to_string)
            .collect();
        mine.sort();
        mine == [
            "Cached: 10.0.0.0/24 dev p1-route SRC 10.0.0.17",
            "Cached: 10.0.0.17/32 dev p1-route SRC 10.0.0.17 local",
        ]
    });
    sw.exec("ip addr del 10.0.0.17/24 dev p1-route");
    wait_for("p1-route's routes to go", 10, || {
        !show().contains("p1-route")
    });

    // A bridge with an address on its internal port, no tunnel: a route
    // and a neighbour by hand are taken, shown, looked up, taken away.
    let br = format!("vr{}", std::process::id() % 10000);
    db.add_br(&br, &[]);
    sw.exec(&format!("ip addr add 10.0.1.1/24 dev {br}"));
    sw.exec(&format!("ip link set {br} up"));
    let add = appctl(&["ovs/route/add", "10.0.1.92/24", &br]);
    assert_eq!(add, ("OK\n".to_string(), String::new()));
    assert!(
        show().contains(&format!("User: 10.0.1.0/24 dev {br} SRC 10.0.1.1\n")),
        "{}",
        show()
    );
    assert_eq!(
        appctl(&["ovs/route/lookup", "10.0.1.5"]).0,
        format!("src 10.0.1.1\ngateway ::\ndev {br}\n")
    );
    let set = appctl(&["tnl/arp/set", &br, "10.0.1.2", "aa:55:00:00:00:02"]);
    assert_eq!(set.0, "OK\n");
    // OVS's errors.
    let bad = appctl(&["ovs/route/add", "10.7.0.0/16", &br]);
    assert!(
        bad.1.starts_with("Error while inserting route.\n"),
        "{bad:?}"
    );
    let bad = appctl(&["tnl/neigh/set", &br, "10.0.1.300", "aa:55:00:00:00:02"]);
    assert!(bad.1.starts_with("bad IP address\n"), "{bad:?}");
    assert_eq!(appctl(&["ovs/route/del", "10.0.1.0/24"]).0, "OK\n");
    assert!(appctl(&["ovs/route/del", "10.0.1.0/24"])
        .1
        .starts_with("Not found\n"));
    assert!(!show().contains("User:"));

    assert!(db.appctl(&["exit", "--cleanup"]).status.success());
    sw.exec("ip link del p1-route");
}
