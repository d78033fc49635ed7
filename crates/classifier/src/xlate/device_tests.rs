//! Tunnels through a device (OVS's `br-phy`: an internal port with an
//! address in the kernel): bridge 0 has the tunnel port, bridge 1 the
//! device (its LOCAL port) and the physical port 1.

use std::net::IpAddr;
use std::sync::Arc;

use super::bridges_tests::second_bridge;
use super::tests::{set, tcp_key};
use super::*;
use crate::tunnel::{Device, KernelRoute, Tunnels};
use sluice_packet::tunnel::{TlvMap, TunnelConfig, TunnelKind};

const DEV_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const DEV_IP: u32 = 0x0a00_0001;
const PEER_IP: u32 = 0x0a00_0002;

fn dev_port() -> u32 {
    dp_port(1, bridges::LOCAL)
}

/// Bridge 0 (`br-int`): port 1 a VM, port 10 VXLAN to 10.0.0.2 with key
/// 42; bridge 1 (`br-phy`) with `phy`'s rules, its LOCAL port a device
/// with 10.0.0.1/24 and a kernel route to 10.0.0.0/24 by it.
fn setup(phy: &str) -> (RuleSet, Vec<Option<BridgeView>>, Arc<Tunnels>) {
    let mut r0 = set("in_port=1,actions=output:10\nin_port=10,actions=output:1\n");
    let cfg = TunnelConfig::parse(TunnelKind::Vxlan, "remote_ip=10.0.0.2,key=42", "vxlan").unwrap();
    let t = Arc::new(Tunnels::new(vec![(10, cfg)], vec![], TlvMap::default()).unwrap());
    t.set_kernel(
        vec![Device {
            port: dev_port(),
            name: "br-phy".into(),
            bridge: "br-phy".into(),
            mac: DEV_MAC,
            addrs: vec![(IpAddr::from(DEV_IP.to_be_bytes()), 24)],
        }],
        &[KernelRoute {
            prefix: "10.0.0.0".parse().unwrap(),
            len: 24,
            gw: None,
            dev: "br-phy".into(),
            prefsrc: None,
        }],
    );
    r0.set_tunnels(Some(Arc::clone(&t)));
    let mut r1 = set(phy);
    r1.share_datapath_state(&r0);
    r1.set_name("br-phy");
    let dp_ports = [1, 10, dp_port(1, 1), dev_port()];
    (r0, second_bridge(r1, &dp_ports), t)
}

fn run(r0: &RuleSet, others: &[Option<BridgeView>], key: &FlowKey) -> Translation {
    let ports0 = BridgeView::ports_of(0, &[1, 10, dp_port(1, 1), dev_port()], r0);
    let env = XlateEnv {
        rules: r0,
        ports: &ports0,
        bridges: others,
        bridge: 0,
    };
    let mut t = Translation::default();
    translate(env, key, &mut t, false);
    t
}

const PHY: &str = "in_port=LOCAL,actions=output:1\nin_port=1,actions=LOCAL\n";

fn arp_reply() -> FlowKey {
    FlowKey {
        in_port: dp_port(1, 1),
        dl_type: 0x0806,
        dl_src: PEER_MAC,
        dl_dst: DEV_MAC,
        nw_proto: 2,
        nw_src: PEER_IP,
        nw_dst: DEV_IP,
        arp_sha: PEER_MAC,
        arp_tha: DEV_MAC,
        ..Default::default()
    }
}

#[test]
fn a_tunnel_output_asks_for_its_next_hop_through_the_devices_bridge() {
    let (r0, others, t) = setup(PHY);
    let out = run(&r0, &others, &tcp_key());
    assert_eq!(out.drop, Some(XlateDrop::TunnelNoNeighbour));
    let asked = t.take_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].ofport, dev_port());
    assert!(asked[0].through_table, "into br-phy's tables, as OVS");
    let f = &asked[0].frame;
    assert_eq!(&f[6..12], &DEV_MAC, "from the device's Ethernet address");
    assert_eq!(&f[28..32], &DEV_IP.to_be_bytes(), "and its address");
}

#[test]
fn an_arp_reply_to_the_device_is_learned_and_goes_on_to_the_kernel() {
    let (r0, others, t) = setup(PHY);
    let out = run(&r0, &others, &arp_reply());
    assert_eq!(out.actions, vec![DpAction::Output(dev_port())]);
    let n = t.neighbour(IpAddr::from(PEER_IP.to_be_bytes())).unwrap();
    assert_eq!(n.mac, PEER_MAC);
    // A request (not a reply) to the device teaches nothing.
    t.flush_neighbours();
    let mut req = arp_reply();
    req.nw_proto = 1;
    run(&r0, &others, &req);
    assert!(t.neighbour(IpAddr::from(PEER_IP.to_be_bytes())).is_none());
}

#[test]
fn once_known_the_tunnel_leaves_by_the_port_the_devices_bridge_chooses() {
    let (r0, others, t) = setup(PHY);
    run(&r0, &others, &arp_reply());
    let out = run(&r0, &others, &tcp_key());
    let [DpAction::TnlOutput { header, port }] = out.actions.as_slice() else {
        panic!("{:?}", out.actions);
    };
    assert_eq!(*port, dp_port(1, 1), "br-phy's port 1");
    let b = header.bytes();
    assert_eq!(&b[0..6], &PEER_MAC);
    assert_eq!(&b[6..12], &DEV_MAC);
    assert_eq!(&b[26..30], &DEV_IP.to_be_bytes());
    assert_eq!(&b[30..34], &PEER_IP.to_be_bytes());
    assert_eq!(
        out.wc.dl_dst, [0; 6],
        "br-phy's decision is not the megaflow's"
    );
    assert!(t.take_requests().len() <= 1);
}

#[test]
fn a_tunnel_packet_to_the_device_is_decapsulated_instead_of_output() {
    let (r0, others, _t) = setup(PHY);
    let key = FlowKey {
        in_port: dp_port(1, 1),
        dl_type: 0x0800,
        dl_src: PEER_MAC,
        dl_dst: DEV_MAC,
        nw_proto: 17,
        nw_src: PEER_IP,
        nw_dst: DEV_IP,
        nw_ttl: 64,
        tp_src: 40000,
        tp_dst: 4789,
        ..Default::default()
    };
    let out = run(&r0, &others, &key);
    assert!(
        matches!(out.actions.as_slice(), [DpAction::TnlPop(r)] if r.kind == TunnelKind::Vxlan),
        "{:?}",
        out.actions
    );
    // Another UDP port, or another destination MAC: to the kernel.
    let mut other = key;
    other.tp_dst = 53;
    assert_eq!(
        run(&r0, &others, &other).actions,
        vec![DpAction::Output(dev_port())]
    );
    other = key;
    other.dl_dst = [2, 0, 0, 0, 0, 9];
    assert_eq!(
        run(&r0, &others, &other).actions,
        vec![DpAction::Output(dev_port())]
    );
}

#[test]
fn rewrites_of_the_encapsulated_packet_are_refused_by_name() {
    let (r0b, othersb, tb) = setup(
        "in_port=LOCAL,actions=mod_dl_dst:02:00:00:00:00:99,output:1\nin_port=1,actions=LOCAL\n",
    );
    run(&r0b, &othersb, &arp_reply());
    assert!(tb.neighbour(IpAddr::from(PEER_IP.to_be_bytes())).is_some());
    let out = run(&r0b, &othersb, &tcp_key());
    assert_eq!(out.drop, Some(XlateDrop::TunnelEgress));
    assert!(out.actions.is_empty());
}

/// A VLAN tag the underlay's bridge gives the encapsulated packet (the
/// device an access port, the uplink a trunk) goes into the pushed
/// header; an output after the tag is stripped gets the header as it
/// was.
#[test]
fn a_vlan_on_the_uplink_is_part_of_the_pushed_header() {
    let (r0b, othersb, _) = setup(
        "in_port=LOCAL,actions=mod_vlan_vid:5,output:1,strip_vlan,output:1\nin_port=1,actions=LOCAL\n",
    );
    run(&r0b, &othersb, &arp_reply());
    let out = run(&r0b, &othersb, &tcp_key());
    let [DpAction::TnlOutput {
        header: tagged,
        port: p1,
    }, DpAction::TnlOutput {
        header: plain,
        port: p3,
    }] = out.actions.as_slice()
    else {
        panic!("{:?}", out.actions);
    };
    assert_eq!(
        (*p1, *p3),
        (dp_port(1, 1), dp_port(1, 1)),
        "{:?}",
        out.actions
    );
    assert_eq!(tagged.vlans().collect::<Vec<_>>(), [(0x8100, 5)]);
    assert_eq!(plain.vlans().count(), 0);
    assert_eq!(tagged.len(), plain.len() + 4);
    assert_eq!(tagged.ip_dst(), plain.ip_dst());
}
