//! Translation with tunnels: ARP on an underlay answered and learned from,
//! tunnel packets popped, outputs to tunnel ports encapsulated (or
//! dropped, named, while the next hop is unknown), ECN across the tunnel.

use std::sync::Arc;

use super::*;
use crate::parse::parse_flow_file;
use crate::tunnel::{Tunnels, Underlay};
use sluice_packet::rewrite::ArpField;
use sluice_packet::tunnel::{TunnelConfig, TunnelKind};

const UNDER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const UNDER_IP: u32 = 0x0a5a_0001;
const PEER_IP: u32 = 0x0a5a_0002;

fn rules(text: &str) -> RuleSet {
    let mut r = RuleSet::from_specs(&parse_flow_file(text, None).unwrap(), 0);
    let cfg = |s: &str| {
        let (k, a) = s.split_once(':').unwrap();
        TunnelConfig::parse(TunnelKind::from_name(k).unwrap(), a, s).unwrap()
    };
    let t = Tunnels::new(
        vec![(10, cfg("vxlan:remote_ip=10.90.0.2,key=42"))],
        vec![Underlay {
            ofport: 2,
            ip: UNDER_IP,
            prefix: 24,
            mac: UNDER_MAC,
        }],
    )
    .unwrap();
    r.set_tunnels(Some(Arc::new(t)));
    r
}

fn run(rules: &RuleSet, key: &FlowKey) -> Translation {
    let mut t = Translation::default();
    translate(
        XlateEnv {
            rules,
            ports: &[1, 2, 10],
        },
        key,
        &mut t,
        true,
    );
    t
}

fn arp(op: u8, spa: u32, tpa: u32) -> FlowKey {
    FlowKey {
        in_port: 2,
        dl_type: 0x0806,
        dl_src: PEER_MAC,
        nw_proto: op,
        nw_src: spa,
        nw_dst: tpa,
        arp_sha: PEER_MAC,
        ..Default::default()
    }
}

fn udp(in_port: u32, dst: u32, tp_dst: u16) -> FlowKey {
    FlowKey {
        in_port,
        dl_type: 0x0800,
        dl_dst: UNDER_MAC,
        nw_proto: 17,
        nw_src: PEER_IP,
        nw_dst: dst,
        nw_ttl: 64,
        tp_src: 40000,
        tp_dst,
        ..Default::default()
    }
}

const FLOWS: &str =
    "in_port=1,actions=output:10\nin_port=10,actions=output:1\nin_port=2,actions=drop\n";

#[test]
fn an_arp_request_for_the_underlay_address_is_answered_and_teaches_the_sender() {
    let r = rules(FLOWS);
    let t = run(&r, &arp(1, PEER_IP, UNDER_IP));
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetArp(ArpField::Op(2)),
            DpAction::SetArp(ArpField::Tha(PEER_MAC)),
            DpAction::SetArp(ArpField::Tpa(PEER_IP)),
            DpAction::SetArp(ArpField::Sha(UNDER_MAC)),
            DpAction::SetArp(ArpField::Spa(UNDER_IP)),
            DpAction::SetEthDst(PEER_MAC),
            DpAction::SetEthSrc(UNDER_MAC),
            DpAction::Output(2),
        ]
    );
    // The decision read who asked (answered and learned) and for what.
    assert_eq!(
        (t.wc.nw_src, t.wc.nw_dst, t.wc.nw_proto),
        (u32::MAX, u32::MAX, 0xff)
    );
    assert_eq!((t.wc.arp_sha, t.wc.dl_src), ([0xff; 6], [0xff; 6]));
    assert_eq!(
        r.tunnels().unwrap().neighbour(PEER_IP).unwrap().mac,
        PEER_MAC
    );
    // A request for another address is the tables' (here: drop).
    let other = run(&r, &arp(1, PEER_IP, 0x0a5a_0009));
    assert_eq!(other.drop, Some(XlateDrop::NoOutput));
    // A reply to the switch is taken: learned, not forwarded.
    let reply = run(&r, &arp(2, PEER_IP, UNDER_IP));
    assert_eq!((reply.outputs, reply.drop), (0, Some(XlateDrop::TunnelArp)));
}

#[test]
fn an_output_to_a_tunnel_port_waits_for_the_neighbour_then_encapsulates() {
    let r = rules(FLOWS);
    let mut host = udp(1, 0x0a00_0002, 80);
    host.nw_tos = 0x03; // congestion experienced
    let t = run(&r, &host);
    assert_eq!(t.drop, Some(XlateDrop::TunnelNoNeighbour));
    let asked = r.tunnels().unwrap().take_requests();
    assert_eq!(asked.len(), 1, "one ARP request for the next hop");
    assert_eq!(asked[0].ofport, 2);
    // The reply comes; the same packet now goes.
    run(&r, &arp(2, PEER_IP, UNDER_IP));
    let t = run(&r, &host);
    let [DpAction::TnlOutput { header, port: 2 }] = &t.actions[..] else {
        panic!("{:?}", t.actions);
    };
    let b = header.bytes();
    assert_eq!((&b[0..6], &b[6..12]), (&PEER_MAC[..], &UNDER_MAC[..]));
    assert_eq!(b[15], 0x02, "CE inside: ECT(0) outside, as OVS");
    assert_eq!(&b[46..49], &[0, 0, 42], "VNI");
    assert_eq!(t.wc.nw_tos & 3, 3, "the ECN bits were read");
    assert_eq!(t.outputs, 1);
}

#[test]
fn tunnel_packets_for_the_switch_are_popped_others_go_to_the_tables() {
    let r = rules(FLOWS);
    let t = run(&r, &udp(2, UNDER_IP, 4789));
    assert!(matches!(&t.actions[..], [DpAction::TnlPop(rx)] if rx.kind == TunnelKind::Vxlan));
    assert_eq!(
        (t.wc.nw_dst, t.wc.tp_dst, t.wc.nw_frag),
        (u32::MAX, 0xffff, 0xff)
    );
    for other in [udp(2, UNDER_IP, 4790), udp(2, PEER_IP, 4789)] {
        let t = run(&r, &other);
        assert_eq!(t.drop, Some(XlateDrop::NoOutput), "{other:?}");
    }
    let mut not_for_us = udp(2, UNDER_IP, 4789);
    not_for_us.dl_dst = [2, 0, 0, 0, 0, 9];
    assert_eq!(run(&r, &not_for_us).drop, Some(XlateDrop::NoOutput));
}

#[test]
fn congestion_outside_marks_an_ect_packet_and_drops_a_not_ect_one() {
    let r = rules(FLOWS);
    let mut from_tunnel = udp(10, 0x0a00_0002, 80);
    from_tunnel.tun_src = PEER_IP;
    from_tunnel.tun_dst = UNDER_IP;
    from_tunnel.tunnel_id = 42;
    from_tunnel.tun_tos = 0x03;
    from_tunnel.nw_tos = 0x01;
    let t = run(&r, &from_tunnel);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpTos {
                tos: 0x03,
                mask: 0x03
            },
            DpAction::Output(1)
        ]
    );
    from_tunnel.nw_tos = 0;
    assert_eq!(run(&r, &from_tunnel).drop, Some(XlateDrop::TunnelEcn));
    from_tunnel.tun_tos = 0x02;
    assert_eq!(run(&r, &from_tunnel).actions, vec![DpAction::Output(1)]);
}
