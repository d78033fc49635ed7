//! OpenFlow groups through `ovs-ofctl -O OpenFlow13` against a running
//! Sluice: add-group, dump-groups, dump-group-stats, group actions in
//! flows and packet-outs, the spec's errors, del-groups taking the flows
//! that used them.

mod support;

use support::*;

#[test]
fn groups_from_ovs_ofctl_forward_count_and_go_with_their_flows() {
    let dir = tempfile::tempdir().unwrap();
    let (p2, p3) = (dir.path().join("p2.pcap"), dir.path().join("p3.pcap"));
    let sw = OfSwitch::start(
        dir.path(),
        &[
            format!("2=pcap:tx={}", p2.display()),
            format!("3=pcap:tx={}", p3.display()),
        ],
    );
    let t = sw.target.clone();
    let run = ofctl_ok;
    run(&[
        "add-group",
        &t,
        "group_id=1,type=all,bucket=output:2,bucket=output:3",
    ]);
    run(&[
        "add-group",
        &t,
        "group_id=2,type=select,bucket=weight:1,output:2,bucket=weight:3,output:3",
    ]);
    let dump = run(&["dump-groups", &t]);
    assert!(
        dump.contains("group_id=1,type=all,bucket=actions=output:2,bucket=actions=output:3"),
        "{dump}"
    );
    assert!(dump.contains("group_id=2,type=select"), "{dump}");
    // The spec's errors: an id that exists, a flow to a group that does not.
    let (ok, out) = ofctl(&["add-group", &t, "group_id=1,type=all,bucket=output:2"]);
    assert!(!ok && out.contains("GROUP_EXISTS"), "{out}");
    let (ok, out) = ofctl(&["add-flow", &t, "priority=5,actions=group:9"]);
    assert!(!ok && out.contains("BAD_OUT_GROUP"), "{out}");
    run(&["add-flow", &t, "in_port=1,actions=group:1"]);
    // One frame through group 1 by a packet-out: a copy out of each port.
    let frame = "0202020202020101010101010800450000240000000040110000c0a80001c0a800020035003500100000deadbeefcafe";
    run(&["packet-out", &t, "CONTROLLER", "group:1", frame]);
    // A packet-out to a group that does not exist is refused, as OVS
    // refuses it, and sends nothing.
    let (ok, out) = ofctl(&["packet-out", &t, "CONTROLLER", "group:9", frame]);
    assert!(!ok && out.contains("BAD_OUT_GROUP"), "{out}");
    let stats = run(&["dump-group-stats", &t]);
    let line = stats
        .lines()
        .find(|l| l.contains("group_id=1"))
        .unwrap_or("");
    assert!(
        line.contains("ref_count=1") && line.contains("packet_count=1"),
        "{stats}"
    );
    assert!(
        line.contains("bucket0:packet_count=1") && line.contains("bucket1:packet_count=1"),
        "{stats}"
    );
    // Deleting the group takes the flow that sent to it.
    run(&["del-groups", &t, "group_id=1"]);
    let flows = run(&["dump-flows", &t]);
    assert!(!flows.contains("group:1"), "{flows}");
    assert!(!run(&["dump-groups", &t]).contains("group_id=1,"));
    // Stopped, the capture ports have written what they sent.
    sw.stop();
    assert_eq!(
        (pcap_frames(&p2), pcap_frames(&p3)),
        (1, 1),
        "a copy out of each port"
    );
}
