//! NORMAL between real hosts: a switch given no flow file learns MACs and
//! switches (first packets flooded, then unicast: a third host sees only
//! the floods); access ports of two VLANs kept apart; a trunk carrying
//! both, tagged. Needs root.

mod support;

use support::*;

/// `tcpdump` on `host`'s eth0 for `secs`, into a file; its lines after.
struct Capture {
    file: String,
}

impl Capture {
    fn start(host: &Host, dir: &std::path::Path, secs: u32) -> Capture {
        let file = dir.join(format!("{}.pcap", host.ns)).display().to_string();
        host.exec(&format!(
            "bash -c 'timeout {secs} tcpdump -n -e -U -i eth0 -w {file} >/dev/null 2>&1 &'"
        ));
        // tcpdump is listening once its file exists.
        wait_for("tcpdump", 10, || std::path::Path::new(&file).exists());
        std::thread::sleep(std::time::Duration::from_millis(200));
        Capture { file }
    }

    fn lines(&self, secs: u32) -> Vec<String> {
        std::thread::sleep(std::time::Duration::from_secs(u64::from(secs)));
        sh(&format!("tcpdump -n -e -r {} 2>/dev/null", self.file))
            .lines()
            .map(String::from)
            .collect()
    }
}

#[test]
fn a_switch_with_no_flow_file_learns_and_switches() {
    require_root_and(&["ip", "ping", "tcpdump"]);
    let hosts: Vec<Host> = (1..=4)
        .map(|i| Host::new(&format!("nl{i}"), Some(&format!("10.76.0.{i}/24"))))
        .collect();
    let specs: Vec<String> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{}=afpacket:{}", i + 1, h.root_if))
        .collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let sw = Sluice::start_without_flows(&specs, &[]);
    let dir = tempfile::tempdir().unwrap();
    // The fourth host listens while the first pings the second: it sees
    // the ARP request (broadcast, flooded) and nothing of the rest (the
    // reply goes to the learned port, the pings too).
    let cap = Capture::start(&hosts[3], dir.path(), 4);
    hosts[0].ping("10.76.0.2");
    let seen = cap.lines(4);
    assert!(
        !seen.is_empty()
            && seen
                .iter()
                .all(|l| l.contains("ARP") && l.contains("Request who-has 10.76.0.2")),
        "the third host saw more than the flood: {seen:#?}"
    );
    // Everyone reaches everyone.
    for (i, h) in hosts.iter().enumerate() {
        for j in 1..=4 {
            if j != i + 1 {
                h.ping(&format!("10.76.0.{j}"));
            }
        }
    }
    let fdb = sw.ctl(&["fdb-show"]);
    assert_eq!(fdb.lines().count(), 5, "four MACs learned: {fdb}");
    for (i, h) in hosts.iter().enumerate() {
        let mac = h.mac();
        assert!(
            fdb.lines()
                .any(|l| l.contains(&mac)
                    && l.split_whitespace().next() == Some(&(i + 1).to_string())),
            "{mac} on port {}: {fdb}",
            i + 1
        );
    }
    assert!(sw
        .ctl(&["fdb-stats-show"])
        .contains("Current/maximum MAC entries in the table: 4/8192"));
    assert_eq!(sw.ctl(&["fdb-flush"]), "table successfully flushed\n");
    // Flushed, it learns again (from new packets, and from the megaflows
    // hit since, as OVS's revalidators relearn).
    hosts[2].ping("10.76.0.4");
    // (Relearning from the megaflows hit comes with their revalidation,
    // after the pings: waited for, not read at once.)
    let relearned = || {
        let fdb = sw.ctl(&["fdb-show"]);
        hosts[2..].iter().all(|h| fdb.contains(&h.mac()))
    };
    wait_for("the flushed MACs learned again", 10, relearned);
    assert_balanced(&sw.stop());
}

#[test]
fn access_ports_keep_vlans_apart_and_a_trunk_carries_both_tagged() {
    require_root_and(&["ip", "ping", "tcpdump"]);
    // Hosts 1 and 2 on VLAN 10, 3 and 4 on VLAN 20, all in one subnet
    // (only the VLANs keep them apart); 5 on a trunk of both, listening.
    let hosts: Vec<Host> = (1..=5)
        .map(|i| {
            Host::new(
                &format!("nv{i}"),
                (i < 5).then(|| format!("10.77.0.{i}/24")).as_deref(),
            )
        })
        .collect();
    let mode = ["tag=10", "tag=10", "tag=20", "tag=20", "trunks=10;20"];
    let specs: Vec<String> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{}=afpacket:{},{}", i + 1, h.root_if, mode[i]))
        .collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let sw = Sluice::start_without_flows(&specs, &[]);
    let dir = tempfile::tempdir().unwrap();
    let cap = Capture::start(&hosts[4], dir.path(), 6);
    hosts[0].ping("10.77.0.2");
    hosts[2].ping("10.77.0.4");
    let across = hosts[0].exec_status("ping -c 2 -i 0.2 -W 1 10.77.0.3");
    assert!(!across.status.success(), "VLAN 10 reached VLAN 20");
    let seen = cap.lines(5);
    let tagged = |vid: u32, who: &str| {
        seen.iter()
            .any(|l| l.contains(&format!("vlan {vid},")) && l.contains(&format!("who-has {who}")))
    };
    assert!(
        tagged(10, "10.77.0.2"),
        "VLAN 10's flood on the trunk: {seen:#?}"
    );
    assert!(
        tagged(20, "10.77.0.4"),
        "VLAN 20's flood on the trunk: {seen:#?}"
    );
    assert!(
        seen.iter()
            .all(|l| l.contains("vlan 10,") || l.contains("vlan 20,")),
        "untagged on the trunk: {seen:#?}"
    );
    let fdb = sw.ctl(&["fdb-show"]);
    assert!(
        fdb.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("10")),
        "{fdb}"
    );
    assert!(
        fdb.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("20")),
        "{fdb}"
    );
    assert_balanced(&sw.stop());
}
