//! One frame sent out of several ports (a flood, as every L2 controller
//! programs for ARP): every port gets its copy, on every live port kind,
//! with and without header changes between the outputs, and every copy is
//! accounted for (#35).

mod support;
use support::{assert_balanced, port, require_root_and, Host, Sluice};

/// A tag unique per port kind, so both kinds can run at once.
fn tag(kind: &str, t: &str) -> String {
    format!("{}{t}", &kind[2..3])
}

/// `n` hosts (tag `t`, addresses 10.SUBNET.0.i/24), host i on port i of
/// kind `kind`: the hosts and the port specs.
fn hosts_on_ports(kind: &str, t: &str, n: usize, subnet: u8) -> (Vec<Host>, Vec<String>) {
    let hosts: Vec<Host> = (1..=n)
        .map(|i| {
            Host::new(
                &tag(kind, &format!("{t}{i}")),
                Some(&format!("10.{subnet}.0.{i}/24")),
            )
        })
        .collect();
    let specs = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{}={kind}:{}", i + 1, h.root_if))
        .collect();
    (hosts, specs)
}

/// Four hosts on four ports of `kind`, every frame flooded to all four
/// (the copy to its own input port dropped, counted): every host reaches
/// every other.
fn flood_reaches_every_host(kind: &str, flows: &str) {
    flood_reaches_every_host_as(kind, "f", flows)
}

fn flood_reaches_every_host_as(kind: &str, t: &str, flows: &str) {
    require_root_and(&["ip", "ping", "ethtool"]);
    let (hosts, specs) = hosts_on_ports(kind, t, 4, 77);
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let sw = Sluice::start(None, flows, &specs);
    let mut failed = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        for j in 1..=4 {
            if j == i + 1 {
                continue;
            }
            let out = h.exec_status(&format!("ping -c 1 -W 2 10.77.0.{j}"));
            if !out.status.success() {
                failed.push(format!("{} -> 10.77.0.{j}", i + 1));
            }
        }
    }
    let report = sw.stop();
    assert!(
        failed.is_empty(),
        "{kind}: pings failed: {failed:?}\n{report}"
    );
    assert_balanced(&report);
    for n in 1..=4u64 {
        let p = port(&report, n);
        assert!(
            p["tx_packets"].as_u64().unwrap() > 0,
            "{kind}: port {n} sent nothing: {p}"
        );
    }
}

const FLOOD: &str = "priority=1,actions=output:1,output:2,output:3,output:4\n";
/// A header change between the outputs (each copy is the packet as the
/// actions before it made it): a VLAN tag pushed for ports 3 and 4 and
/// popped again, as a learning switch with VLANs does.
const FLOOD_REWRITING: &str =
    "priority=1,actions=output:1,output:2,push_vlan:0x8100,set_field:4106->vlan_vid,pop_vlan,output:3,output:4\n";

#[test]
fn afpacket_flood_reaches_every_host() {
    flood_reaches_every_host("afpacket", FLOOD);
}

#[test]
fn afxdp_flood_reaches_every_host() {
    flood_reaches_every_host("afxdp", FLOOD);
}

#[test]
fn afxdp_flood_with_header_changes_between_outputs() {
    flood_reaches_every_host_as("afxdp", "r", FLOOD_REWRITING);
}

/// Sixteen ports of `kind` and one ARP request from the first host: each
/// of the other fifteen ports sends its copy, and no copy goes unmade.
fn flood_to_sixteen_ports(kind: &str) {
    require_root_and(&["ip", "ping", "ethtool"]);
    let (hosts, specs) = hosts_on_ports(kind, "s", 16, 79);
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let flood: String = format!(
        "priority=1,actions={}\n",
        (1..=16)
            .map(|i| format!("output:{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let sw = Sluice::start(None, &flood, &specs);
    let out = hosts[0].exec_status("ping -c 1 -W 2 10.79.0.16");
    let report = sw.stop();
    assert!(out.status.success(), "{kind}: ping over 16 ports\n{report}");
    assert_balanced(&report);
    assert_eq!(
        report["datapath"]["copies not made"].as_u64(),
        Some(0),
        "{kind}: {report}"
    );
    for n in 2..=16u64 {
        assert!(
            port(&report, n)["tx_packets"].as_u64().unwrap() >= 1,
            "{kind}: port {n} sent no copy: {}",
            port(&report, n)
        );
    }
}

#[test]
fn afpacket_flood_to_sixteen_ports() {
    flood_to_sixteen_ports("afpacket");
}

#[test]
fn afxdp_flood_to_sixteen_ports() {
    flood_to_sixteen_ports("afxdp");
}
