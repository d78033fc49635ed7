//! Translation with tunnels: ARP and IPv6 ND on an underlay answered and
//! learned from, tunnel packets popped, outputs to tunnel ports
//! encapsulated (or dropped, named, while the next hop is unknown), ECN
//! across the tunnel.

use std::net::IpAddr;
use std::sync::Arc;

use super::*;
use crate::parse::parse_flow_file;
use crate::tunnel::{Tunnels, Underlay};
use sluice_packet::rewrite::ArpField;
use sluice_packet::tunnel::{TunnelConfig, TunnelKind};
use sluice_packet::wire::icmp::nd;

const UNDER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const UNDER_IP: u32 = 0x0a5a_0001;
const PEER_IP: u32 = 0x0a5a_0002;
const UNDER_IP6: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const PEER_IP6: [u8; 16] = [0xfd, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn v4(a: u32) -> IpAddr {
    IpAddr::from(a.to_be_bytes())
}

fn rules_with(text: &str, tunnel: &str, ip: IpAddr, prefix: u8) -> RuleSet {
    let mut r = RuleSet::from_specs(&parse_flow_file(text, None).unwrap(), 0);
    let (k, a) = tunnel.split_once(':').unwrap();
    let cfg = TunnelConfig::parse(TunnelKind::from_name(k).unwrap(), a, tunnel).unwrap();
    let t = Tunnels::new(
        vec![(10, cfg)],
        vec![Underlay {
            ofport: 2,
            ip,
            prefix,
            mac: UNDER_MAC,
        }],
        sluice_packet::tunnel::TlvMap::default(),
    )
    .unwrap();
    r.set_tunnels(Some(Arc::new(t)));
    r
}

fn rules(text: &str) -> RuleSet {
    rules_with(text, "vxlan:remote_ip=10.90.0.2,key=42", v4(UNDER_IP), 24)
}

fn rules6(text: &str) -> RuleSet {
    rules_with(
        text,
        "vxlan:remote_ip=fd90::2,key=42",
        IpAddr::from(UNDER_IP6),
        64,
    )
}

/// An ICMPv6 neighbour solicitation (`ty` 135) or advertisement (136) on
/// the underlay.
fn nd_key(ty: u8, src: [u8; 16], dst: [u8; 16], target: [u8; 16]) -> FlowKey {
    let mut k = FlowKey {
        in_port: 2,
        dl_type: 0x86dd,
        dl_src: PEER_MAC,
        nw_proto: 58,
        nw_ttl: 255,
        tp_src: u16::from(ty),
        ipv6_src: src,
        ipv6_dst: dst,
        nd_target: target,
        ..Default::default()
    };
    if ty == nd::SOLICIT {
        k.arp_sha = PEER_MAC;
    } else {
        k.arp_tha = PEER_MAC;
    }
    k
}

fn run(rules: &RuleSet, key: &FlowKey) -> Translation {
    let mut t = Translation::default();
    translate(XlateEnv::single(rules, &[1, 2, 10]), key, &mut t, true);
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
        r.tunnels().unwrap().neighbour(v4(PEER_IP)).unwrap().mac,
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
    from_tunnel.tun_family = 4;
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

#[test]
fn a_neighbour_solicitation_for_the_underlay_address_is_answered_and_teaches() {
    let r = rules6(FLOWS);
    let group = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1];
    let t = run(&r, &nd_key(nd::SOLICIT, PEER_IP6, group, UNDER_IP6));
    assert_eq!(
        t.actions,
        vec![
            DpAction::NdAdvert {
                mac: UNDER_MAC,
                ip: UNDER_IP6
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(
        (t.wc.nd_target, t.wc.ipv6_src, t.wc.arp_sha),
        ([0xff; 16], [0xff; 16], [0xff; 6])
    );
    let tun = r.tunnels().unwrap();
    assert_eq!(tun.neighbour(IpAddr::from(PEER_IP6)).unwrap().mac, PEER_MAC);
    // For another address: the tables' (here: drop).
    let other = run(&r, &nd_key(nd::SOLICIT, PEER_IP6, group, PEER_IP6));
    assert_eq!(other.drop, Some(XlateDrop::NoOutput));
    // Duplicate address detection (from ::) is taken, not answered.
    let dad = run(&r, &nd_key(nd::SOLICIT, [0; 16], group, UNDER_IP6));
    assert_eq!((dad.outputs, dad.drop), (0, Some(XlateDrop::TunnelArp)));
    // An advertisement to the switch teaches where its target is.
    tun.flush_neighbours();
    let na = run(&r, &nd_key(nd::ADVERT, PEER_IP6, UNDER_IP6, PEER_IP6));
    assert_eq!((na.outputs, na.drop), (0, Some(XlateDrop::TunnelArp)));
    assert_eq!(tun.neighbour(IpAddr::from(PEER_IP6)).unwrap().mac, PEER_MAC);
}

#[test]
fn an_output_to_an_ipv6_tunnel_solicits_then_encapsulates_in_ipv6() {
    let r = rules6(FLOWS);
    let host = udp(1, 0x0a00_0002, 80);
    assert_eq!(run(&r, &host).drop, Some(XlateDrop::TunnelNoNeighbour));
    let asked = r.tunnels().unwrap().take_requests();
    assert_eq!(asked.len(), 1, "one neighbour solicitation");
    let f = &asked[0].frame;
    assert_eq!(
        &f[0..6],
        &[0x33, 0x33, 0xff, 0, 0, 2],
        "solicited-node group"
    );
    assert_eq!(&f[12..14], &[0x86, 0xdd]);
    assert_eq!((f[20], f[21]), (58, 255), "ICMPv6, hop limit 255");
    assert_eq!(f[54], nd::SOLICIT);
    assert_eq!(&f[62..78], &PEER_IP6, "target");
    run(&r, &nd_key(nd::ADVERT, PEER_IP6, UNDER_IP6, PEER_IP6));
    let t = run(&r, &host);
    let [DpAction::TnlOutput { header, port: 2 }] = &t.actions[..] else {
        panic!("{:?}", t.actions);
    };
    assert!(header.is_ipv6());
    let b = header.bytes();
    assert_eq!(b.len(), 70);
    assert_eq!(&b[0..6], &PEER_MAC);
    assert_eq!((&b[22..38], &b[38..54]), (&UNDER_IP6[..], &PEER_IP6[..]));
    assert_eq!(&b[66..69], &[0, 0, 42], "VNI");
    // No megaflow of the encapsulation reads the IPv6 tunnel words.
    assert!(!t.wc.reads_tun_wide());
}

#[test]
fn ipv6_tunnel_packets_for_the_switch_are_popped() {
    let r = rules6(FLOWS);
    let mut k = FlowKey {
        in_port: 2,
        dl_type: 0x86dd,
        dl_dst: UNDER_MAC,
        nw_proto: 17,
        nw_ttl: 64,
        ipv6_src: PEER_IP6,
        ipv6_dst: UNDER_IP6,
        tp_src: 40000,
        tp_dst: 4789,
        ..Default::default()
    };
    let t = run(&r, &k);
    assert!(matches!(&t.actions[..], [DpAction::TnlPop(rx)] if rx.kind == TunnelKind::Vxlan));
    assert_eq!((t.wc.ipv6_dst, t.wc.tp_dst), ([0xff; 16], 0xffff));
    k.ipv6_dst = PEER_IP6;
    assert_eq!(run(&r, &k).drop, Some(XlateDrop::NoOutput));
    // What came out is matched by its tunnel's IPv6 addresses.
    let r = rules6("in_port=10,tun_ipv6_src=fd90::2,actions=output:1\nin_port=10,actions=drop\n");
    let mut inner = udp(10, 0x0a00_0002, 80);
    inner.tun_family = 6;
    inner.tun_ipv6_src = PEER_IP6;
    inner.tun_ipv6_dst = UNDER_IP6;
    inner.tunnel_id = 42;
    let t = run(&r, &inner);
    assert_eq!(t.actions, vec![DpAction::Output(1)]);
    assert!(t.wc.reads_tun_wide());
    inner.tun_ipv6_src[15] = 9;
    assert_eq!(run(&r, &inner).drop, Some(XlateDrop::NoOutput));
}

#[test]
fn geneve_outputs_carry_the_mapped_fields_the_flow_has() {
    let mut r = RuleSet::from_specs(
        &parse_flow_file(
            "in_port=1,actions=set_field:0x10002->tun_metadata0,output:10\nin_port=2,actions=drop\n",
            None,
        )
        .unwrap(),
        0,
    );
    let mut tlv = sluice_packet::tunnel::TlvMap::default();
    tlv.add(&sluice_packet::tunnel::TlvEntry::parse_list(
        "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata1",
    ).unwrap())
    .unwrap();
    let (k, a) = ("geneve", "remote_ip=10.90.0.2,key=5");
    let cfg = TunnelConfig::parse(TunnelKind::from_name(k).unwrap(), a, k).unwrap();
    let t = Tunnels::new(
        vec![(10, cfg)],
        vec![Underlay {
            ofport: 2,
            ip: v4(UNDER_IP),
            prefix: 24,
            mac: UNDER_MAC,
        }],
        tlv,
    )
    .unwrap();
    t.set_neighbour(2, v4(PEER_IP), PEER_MAC).unwrap();
    r.set_tunnels(Some(Arc::new(t)));
    let out = run(&r, &udp(1, 0x0a00_0002, 80));
    let [DpAction::TnlOutput { header, .. }] = &out.actions[..] else {
        panic!("{:?}", out.actions);
    };
    let b = header.bytes();
    // Geneve at 42: 2 words of options (tun_metadata0 only: 1 is not set),
    // critical; the option after the VNI word.
    assert_eq!((b[42], b[43]), (2, 0x40));
    assert_eq!(&b[50..58], &[1, 2, 0x80, 1, 0, 1, 0, 2]);
    assert_eq!(
        out.wc.tun_metadata_present, 0xff,
        "which fields are set was read"
    );
    // A packet that already came with tun_metadata1 sends both.
    let mut from = udp(1, 0x0a00_0002, 80);
    from.tun_metadata_present = 0b10;
    from.tun_metadata[1] = 7;
    let out = run(&r, &from);
    let [DpAction::TnlOutput { header, .. }] = &out.actions[..] else {
        panic!("{:?}", out.actions);
    };
    assert_eq!(header.bytes()[42], 5, "4 + 8 bytes of data, two headers");
    assert_eq!(header.bytes()[43], 0x40, "critical, not OAM");
    // tun_flags=+oam: Geneve's O bit.
    from.tun_flags = sluice_packet::key::TUN_FLAG_OAM;
    let out = run(&r, &from);
    let [DpAction::TnlOutput { header, .. }] = &out.actions[..] else {
        panic!("{:?}", out.actions);
    };
    assert_eq!(header.bytes()[43], 0xc0, "OAM and critical");
    assert_eq!(out.wc.tun_metadata[1], u64::MAX);
}
