//! Several bridges on one `sluice vswitchd` datapath, made by Debian's
//! `ovs-vsctl` on a stock `ovsdb-server`: two bridges, each with its own
//! rules, MAC table and port numbers, joined by a pair of patch ports as
//! OVS joins br-int and br-ex; hosts on each side ping across, in one
//! datapath pass (one megaflow per direction), both bridges' rules
//! counting the packets. Needs root.

mod support;

use support::ovs::{as_ovs_vswitchd, db_and_switch, require_ovs_tools, start_vswitchd, Db};
use support::*;

/// The `ovs-vsctl` words that add patch port `name` to `br`, its peer
/// `peer`.
fn patch_port(br: &str, name: &str, peer: &str) -> Vec<String> {
    [
        "add-port",
        br,
        name,
        "--",
        "set",
        "interface",
        name,
        "type=patch",
        &format!("options:peer={peer}"),
    ]
    .map(String::from)
    .to_vec()
}

/// Bridges `a` and `b`, h1's port on `a` (with `h1_opts`, e.g. `tag=10`)
/// and h2's on `b`, joined by patch ports `pa` (on `a`, with `pa_opts` on
/// its Port row) and `pb`: two `ovs-vsctl` transactions.
fn patched_bridges(
    db: &Db,
    (a, b): (&str, &str),
    (pa, pb): (&str, &str),
    (h1, h2): (&Host, &Host),
    h1_opts: &[&str],
    pa_opts: &[&str],
) {
    for br in [a, b] {
        db.add_br(br, &[]);
    }
    let mut ports = vec!["add-port", a, &h1.root_if];
    ports.extend(h1_opts);
    ports.extend(["--", "add-port", b, &h2.root_if]);
    db.vsctl(&ports);
    let mut both = patch_port(a, pa, pb);
    if !pa_opts.is_empty() {
        both.extend(["--", "set", "port", pa].map(String::from));
        both.extend(pa_opts.iter().map(|o| o.to_string()));
    }
    both.push("--".into());
    both.extend(patch_port(b, pb, pa));
    db.vsctl(&both.iter().map(String::as_str).collect::<Vec<_>>());
}

/// `ovs-ofctl dump-flows BR`'s n_packets of its rule holding `what`.
fn n_packets(db: &Db, br: &str, what: &str) -> u64 {
    let flows = stdout(&db.tool("ovs-ofctl", &["dump-flows", br]));
    flows
        .lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split("n_packets=").nth(1))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rule with {what} on {br}: {flows}"))
}

#[test]
fn two_bridges_joined_by_patch_ports_forward_in_one_pass() {
    require_ovs_tools(&[]);
    let db = Db::start();
    let sw = Host::new("vbr", None);
    let h1 = Host::new("vbr1", Some("10.79.0.1/24"));
    let h2 = Host::new("vbr2", Some("10.79.0.2/24"));
    for h in [&h1, &h2] {
        sh(&format!("ip link set {} netns {}", h.root_if, sw.ns));
    }
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));

    let id = std::process::id() % 10000;
    let (a, b) = (format!("va{id}"), format!("vb{id}"));
    let (pa, pb) = (format!("pa{id}"), format!("pb{id}"));
    patched_bridges(&db, (&a, &b), (&pa, &pb), (&h1, &h2), &[], &[]);
    // Each bridge numbers its own ports from 1.
    let of = |i: &str| db.get("Interface", i, "ofport");
    let mut na = [of(&h1.root_if), of(&pa)];
    let mut nb = [of(&h2.root_if), of(&pb)];
    na.sort();
    nb.sort();
    assert_eq!(
        (na, nb),
        (["1".into(), "2".into()], ["1".into(), "2".into()])
    );
    for br in [&a, &b] {
        assert_eq!(db.get("Bridge", br, "datapath_id").len(), 18);
        assert_eq!(
            db.get("Interface", br, "ofport"),
            "65534",
            "{}",
            db.get("Interface", br, "error")
        );
    }
    assert_eq!(db.get("Interface", &pa, "error"), "[]");
    // Controllers are told of patch ports, as OVS's ovs-ofctl show lists
    // them (OpenFlow 1.0's features reply, 1.3's port description).
    for v in ["OpenFlow10", "OpenFlow13"] {
        let show = stdout(&db.tool("ovs-ofctl", &["-O", v, "show", &a]));
        assert!(
            show.contains(&format!(" {}({pa}): addr:", of(&pa))),
            "{v}: {show}"
        );
    }

    // NORMAL on each side, across the patch.
    h1.ping("10.79.0.2");
    // Each bridge learned the far host on its patch port.
    let fdb_a = stdout(&db.appctl(&["fdb/show", &a]));
    let fdb_b = stdout(&db.appctl(&["fdb/show", &b]));
    let on = |fdb: &str, port: &str, mac: &str| {
        fdb.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.first() == Some(&port) && w.get(2) == Some(&mac)
        })
    };
    assert!(on(&fdb_a, &of(&pa), &h2.mac()), "{fdb_a}");
    assert!(on(&fdb_b, &of(&pb), &h1.mac()), "{fdb_b}");
    assert!(on(&fdb_a, &of(&h1.root_if), &h1.mac()), "{fdb_a}");
    // One pass: a megaflow in from h1's port goes straight out of h2's
    // port of the other bridge (by OVS's datapath numbers, one numbering
    // over both bridges), no recirculation.
    let dp = stdout(&db.appctl(&["dpif/show"]));
    let dp_of = |name: &str| -> String {
        dp.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.split(['/', ':']).nth(1))
            .unwrap_or_else(|| panic!("{name} in dpif/show: {dp}"))
            .to_string()
    };
    assert_eq!(dp_of(&pa), "none", "{dp}");
    assert!(
        dp.contains(&format!("    {pa} {}/none: (patch: peer={pb})\n", of(&pa))),
        "{dp}"
    );
    let (in1, out2) = (dp_of(&h1.root_if), dp_of(&h2.root_if));
    assert_ne!(out2, of(&h2.root_if), "a datapath number of its own: {dp}");
    let flows = stdout(&db.appctl(&["dpctl/dump-flows"]));
    assert!(
        flows
            .lines()
            .any(|l| l.starts_with(&format!("recirc_id(0),in_port({in1}),"))
                && l.contains(&format!("dst={}", h2.mac()))
                && l.ends_with(&format!("actions:{out2}"))),
        "in {in1}, out {out2}:\n{flows}"
    );
    assert!(!flows.contains("recirc("), "{flows}");
    // By name, as OVS's system tests ask: only h1's port's megaflows,
    // their ports named.
    let named = stdout(&db.appctl(&[
        "dpctl/dump-flows",
        "--names",
        &format!("filter=in_port={}", h1.root_if),
    ]));
    let lines: Vec<&str> = named.lines().filter(|l| l.contains("actions:")).collect();
    assert!(!lines.is_empty(), "{named}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(&format!("in_port({})", h1.root_if))),
        "{named}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with(&format!("actions:{}", h2.root_if))),
        "{named}"
    );
    let unknown = db.appctl(&["dpctl/dump-flows", "filter=in_port=no-such-port"]);
    assert!(!unknown.status.success(), "{unknown:?}");
    // ofproto/trace follows the patch port into the other bridge, as
    // OVS's does.
    let tr = stdout(&db.appctl(&[
        "ofproto/trace",
        &a,
        &format!(
            "in_port={},dl_src={},dl_dst={}",
            of(&h1.root_if),
            h1.mac(),
            h2.mac()
        ),
    ]));
    // (Named as OVS names them, the first and the one the patch leads
    // to, indented under the patch port's output.)
    assert!(tr.contains(&format!("bridge(\"{a}\")\n")), "{tr}");
    assert!(tr.contains(&format!("    bridge(\"{b}\")\n")), "{tr}");
    assert!(tr.contains(&format!("Datapath actions: {out2}\n")), "{tr}");
    // Both bridges' NORMAL rules counted the packets.
    assert!(n_packets(&db, &a, "actions=NORMAL") >= 2);
    assert!(n_packets(&db, &b, "actions=NORMAL") >= 2);

    // Bridge.protocols: OpenFlow 1.3 alone refuses ovs-ofctl's 1.0, as
    // OVS does; back to every version when cleared.
    db.vsctl(&["set", "bridge", &a, "protocols=OpenFlow13"]);
    let r = db.tool("ovs-ofctl", &["show", &a]);
    assert!(
        !r.status.success() && stderr(&r).contains("version negotiation failed"),
        "{}",
        stderr(&r)
    );
    assert!(db
        .tool("ovs-ofctl", &["-O", "OpenFlow13", "show", &a])
        .status
        .success());
    assert!(db.tool("ovs-ofctl", &["show", &b]).status.success());
    db.vsctl(&["clear", "bridge", &a, "protocols"]);
    assert!(db.tool("ovs-ofctl", &["show", &a]).status.success());

    // Each bridge's rules are its own: a drop on the second stops the
    // pings; the first's rules are untouched.
    let r = db.tool(
        "ovs-ofctl",
        &["add-flow", &b, "priority=10,icmp,actions=drop"],
    );
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(!h1.pings("10.79.0.2"));
    assert!(!stdout(&db.tool("ovs-ofctl", &["dump-flows", &a])).contains("priority=10"));
    assert!(db
        .tool("ovs-ofctl", &["del-flows", &b, "icmp"])
        .status
        .success());
    h1.exec("ip neigh flush all");
    h1.ping("10.79.0.2");

    // Unlinked (one end gone), nothing crosses; linked again, it does.
    db.vsctl(&["del-port", &b, &pb]);
    assert!(!h1.pings("10.79.0.2"));
    db.vsctl(
        &patch_port(&b, &pb, &pa)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    h1.exec("ip neigh flush all");
    h1.ping("10.79.0.2");

    // A bad peer is OVS's error; the bridge goes on.
    let (_, warn) = db.vsctl(&[
        "add-port",
        &a,
        "px",
        "--",
        "set",
        "interface",
        "px",
        "type=patch",
    ]);
    assert!(
        warn.contains("Error detected while setting up 'px'"),
        "{warn}"
    );
    assert_eq!(
        db.get("Interface", "px", "error"),
        "\"px: patch type requires valid 'peer' argument\""
    );

    // The second bridge removed: the first forwards on alone.
    db.vsctl(&["del-br", &b]);
    assert!(!h1.pings("10.79.0.2"));
    assert!(db.appctl(&["fdb/show", &a]).status.success());
    let log = std::fs::read_to_string(db.run().join("ovs-vswitchd.log")).unwrap();
    assert!(
        !log.lines()
            .any(|l| l.contains("|WARN|") || l.contains("|ERR|")),
        "{log}"
    );
    assert!(db.appctl(&["exit"]).status.success());
}

/// `ovs-ofctl --bundle` (OpenFlow 1.4 bundles, where `Bridge.protocols`
/// names OpenFlow14, as OVS's tests and ovn-controller's bridges do):
/// the flows of a bundle are applied together, and none of them when one
/// is refused.
#[test]
fn a_bundle_of_flows_is_applied_all_or_nothing() {
    require_ovs_tools(&[]);
    let db = Db::start();
    let sw = Host::new("vbu", None);
    let bin = as_ovs_vswitchd(db.run());
    let out = start_vswitchd(&db, &sw.ns, &bin);
    assert!(out.status.success(), "start: {}", stderr(&out));
    let br = format!("bu{}", std::process::id() % 10000);
    db.add_br(
        &br,
        &[
            "fail-mode=secure",
            "protocols=OpenFlow10,OpenFlow13,OpenFlow14",
        ],
    );
    let flows = db.run().join("flows.txt");
    std::fs::write(
        &flows,
        "priority=10,ip,actions=drop\npriority=20,arp,actions=NORMAL\n",
    )
    .unwrap();
    let f = flows.to_str().unwrap();
    let add = db.tool("ovs-ofctl", &["--bundle", "add-flows", &br, f]);
    assert!(add.status.success(), "{}", stderr(&add));
    let dump = stdout(&db.tool("ovs-ofctl", &["dump-flows", &br]));
    assert!(dump.contains("priority=10,ip actions=drop"), "{dump}");
    assert!(dump.contains("priority=20,arp actions=NORMAL"), "{dump}");
    // One refused (a group that is not there): none is applied.
    std::fs::write(
        &flows,
        "priority=30,tcp,actions=drop\npriority=31,udp,actions=group:7\n",
    )
    .unwrap();
    let add = db.tool("ovs-ofctl", &["--bundle", "add-flows", &br, f]);
    assert!(!add.status.success());
    let dump = stdout(&db.tool("ovs-ofctl", &["dump-flows", &br]));
    assert!(!dump.contains("priority=30"), "{dump}");
    // 1.4 is spoken only where the row asks for it.
    let v14 = stdout(&db.tool("ovs-ofctl", &["-O", "OpenFlow14", "dump-flows", &br]));
    assert!(v14.contains("priority=20,arp actions=NORMAL"), "{v14}");
    let show = db.tool("ovs-ofctl", &["-O", "OpenFlow14", "show", &br]);
    assert!(stdout(&show).contains("LOCAL"), "{}", stderr(&show));
    // A bundle opened in the same write as the HELLO is read as 1.4's.
    {
        use std::io::{Read, Write};
        let mut c =
            std::os::unix::net::UnixStream::connect(db.run().join(format!("{br}.mgmt"))).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut both = vec![5, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x20];
        both.extend_from_slice(&[5, 33, 0, 16, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3]);
        c.write_all(&both).unwrap();
        let mut read_msg = || {
            let mut h = [0u8; 8];
            c.read_exact(&mut h).unwrap();
            let mut body = vec![0u8; usize::from(u16::from_be_bytes([h[2], h[3]])) - 8];
            c.read_exact(&mut body).unwrap();
            (h, body)
        };
        let (hello, _) = read_msg();
        assert_eq!(hello[1], 0, "HELLO first");
        let (h, body) = read_msg();
        assert_eq!(
            (h[0], h[1]),
            (5, 33),
            "a 1.4 BUNDLE_CONTROL: {h:?} {body:?}"
        );
        assert_eq!(&body[4..6], &[0, 1], "OPEN_REPLY");
    }
    assert!(db.appctl(&["exit"]).status.success());
}

/// A patch port's VLAN mode, as `ovs-vsctl set port` gives any port:
/// h1 is on VLAN 10 of bridge A (an access port), A's patch port an
/// access port of VLAN 10 too, so frames cross untagged to bridge B where
/// h2 is a plain port: they ping. The patch port moved to VLAN 20, h1's
/// frames do not reach it; back on 10, they do.
#[test]
fn a_patch_ports_vlan_mode_is_normals() {
    let (db, sw) = db_and_switch("vpv");
    let h1 = Host::new("vpv1", Some("10.78.0.1/24"));
    let h2 = Host::new("vpv2", Some("10.78.0.2/24"));
    for h in [&h1, &h2] {
        sh(&format!("ip link set {} netns {}", h.root_if, sw.ns));
    }
    let id = std::process::id() % 10000;
    let (a, b) = (format!("wa{id}"), format!("wb{id}"));
    let (pa, pb) = (format!("qa{id}"), format!("qb{id}"));
    patched_bridges(
        &db,
        (&a, &b),
        (&pa, &pb),
        (&h1, &h2),
        &["tag=10"],
        &["tag=10"],
    );
    assert_eq!(db.get("Interface", &pa, "error"), "[]");
    h1.ping("10.78.0.2");
    db.vsctl(&["set", "port", &pa, "tag=20"]);
    let _ = h1.exec_status("ip neigh flush dev eth0");
    assert!(
        !h1.pings("10.78.0.2"),
        "VLAN 10 reached a VLAN 20 patch port"
    );
    db.vsctl(&["set", "port", &pa, "tag=10"]);
    h1.ping("10.78.0.2");
    assert!(db.appctl(&["exit", "--cleanup"]).status.success());
}
