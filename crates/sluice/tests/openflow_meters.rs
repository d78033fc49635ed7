//! OpenFlow meters through `ovs-ofctl -O OpenFlow13` against a running
//! Sluice: add-meter, dump-meters, meter-stats, `meter:N` in flows, the
//! packets above a drop band dropped and counted, the spec's errors,
//! del-meters taking the flows that used the meter.

mod support;

use support::*;

#[test]
fn meters_from_ovs_ofctl_limit_count_and_go_with_their_flows() {
    let dir = tempfile::tempdir().unwrap();
    let p2 = dir.path().join("p2.pcap");
    let sw = OfSwitch::start(dir.path(), &[format!("2=pcap:tx={}", p2.display())]);
    let t = sw.target.clone();
    let run = ofctl_ok;
    // One packet a second, a burst of three.
    run(&[
        "add-meter",
        &t,
        "meter=1,pktps,burst,band=type=drop,rate=1,burst_size=3",
    ]);
    let dump = run(&["dump-meters", &t]);
    assert!(
        dump.contains("meter=1 pktps burst bands=")
            && dump.contains("type=drop rate=1 burst_size=3"),
        "{dump}"
    );
    let features = run(&["meter-features", &t]);
    assert!(features.contains("drop dscp_remark"), "{features}");
    // The spec's errors.
    let (ok, out) = ofctl(&["add-meter", &t, "meter=1,pktps,band=type=drop,rate=5"]);
    assert!(!ok && out.contains("METER_EXISTS"), "{out}");
    let (ok, out) = ofctl(&["add-flow", &t, "priority=5,actions=meter:9,output:2"]);
    assert!(!ok && out.contains("UNKNOWN_METER"), "{out}");
    run(&["add-flow", &t, "in_port=1,actions=meter:1,output:2"]);
    assert!(run(&["dump-flows", &t]).contains("actions=meter:1,output:2"));
    // Ten packets through the tables at once: the burst passes.
    let frame = "0202020202020101010101010800450000240000000040110000c0a80001c0a800020035003500100000deadbeefcafe";
    for _ in 0..10 {
        run(&["packet-out", &t, "1", "table", frame]);
    }
    let stats = run(&["meter-stats", &t]);
    assert!(
        stats.contains("flow_count:1")
            && stats.contains("packet_in_count:10")
            && stats.contains("0: packet_count:7"),
        "{stats}"
    );
    // Deleting the meter takes the flow that used it.
    run(&["del-meters", &t, "meter=1"]);
    assert!(!run(&["dump-flows", &t]).contains("meter:1"));
    assert!(!run(&["dump-meters", &t]).contains("meter=1"));
    sw.stop();
    assert_eq!(
        pcap_frames(&p2),
        3,
        "the burst went out, the rest was dropped"
    );
}
