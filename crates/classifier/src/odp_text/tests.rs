//! Each expected line is Open vSwitch 3.1's own, from `ovs-appctl
//! dpctl/dump-flows` on `../shared/tools/ovs-sandbox` (rules and packets
//! in the test's comment) or, for `tnl_push`, from OVS's
//! `tests/tunnel-push-pop.at`; the megaflow is built with the same match
//! and actions.

use std::sync::Arc;

use sluice_packet::key::{FlowKey, CS_ESTABLISHED, CS_NEW, CS_TRACKED, FRAG_ANY, FRAG_LATER};
use sluice_packet::tunnel::{HeaderParams, TnlHeader, TunnelKind};

use super::*;
use crate::dpaction::DpAction;

/// A match of the fields `set` sets in both the key and (all ones) the
/// mask, and `partial` with its own mask.
fn exact(set: impl Fn(&mut FlowKey)) -> Match {
    let mut value = FlowKey::default();
    set(&mut value);
    let mut mask = FlowKey::default();
    // Every field `set` touches, all ones: set it on a key of all ones
    // and keep the bytes that differ from a default key's.
    let mut probe = FlowKey::default();
    set(&mut probe);
    let mut ones = FlowKey::default();
    for w in ones.words_mut().iter_mut() {
        *w = u64::MAX;
    }
    set(&mut ones);
    let (p, o, d) = (
        probe.words(),
        ones.words(),
        FlowKey::default().words().to_owned(),
    );
    for (i, m) in mask.words_mut().iter_mut().enumerate() {
        // A field is set when the key's bytes changed from default, or
        // (set to all zeros) when the all-ones key's did.
        let mut bits = 0u64;
        for byte in 0..8 {
            let sh = byte * 8;
            let changed = (p[i] >> sh) & 0xff != (d[i] >> sh) & 0xff || (o[i] >> sh) & 0xff != 0xff;
            if changed {
                bits |= 0xff << sh;
            }
        }
        *m = bits;
    }
    Match { value, mask }
}

fn base(k: &mut FlowKey) {
    k.recirc_id = 0;
    k.in_port = 1;
    k.dl_type = 0x0800;
    k.nw_frag = 0;
}

#[test]
fn a_destination_match_is_printed_as_ovs_prints_it() {
    // ip,in_port=1,nw_dst=10.0.0.2,actions=output:2; a UDP packet.
    let m = exact(|k| {
        base(k);
        k.nw_dst = 0x0a00_0002;
    });
    assert_eq!(
        format_odp_match(&m, false),
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(dst=10.0.0.2,frag=no)"
    );
    assert_eq!(format_odp_actions(&[DpAction::Output(2)], &m), "2");
    assert_eq!(format_odp_actions(&[], &m), "drop");
}

#[test]
fn a_partial_mask_and_a_transport_port() {
    // tcp,in_port=1,tp_dst=80,actions=ct(table=1,zone=5) beside a rule
    // on nw_dst=10.0.0.2: the megaflow of a packet to 10.0.0.9.
    let mut m = exact(|k| {
        base(k);
        k.nw_proto = 6;
        k.tp_dst = 80;
    });
    m.value.nw_dst = 0x0a00_0008;
    m.mask.nw_dst = 0xffff_fff8;
    assert_eq!(
        format_odp_match(&m, false),
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
         ipv4(dst=10.0.0.8/255.255.255.248,proto=6,frag=no),tcp(dst=80)"
    );
    let ct = sluice_conntrack::CtRequest {
        zone: 5,
        ..Default::default()
    };
    assert_eq!(
        format_odp_actions(&[DpAction::Ct(ct), DpAction::Recirc(1)], &m),
        "ct(zone=5),recirc(0x1)"
    );
}

#[test]
fn a_vlan_tag_puts_the_rest_in_encap() {
    // in_port=3,dl_vlan=100: a tagged UDP packet.
    let m = exact(|k| {
        base(k);
        k.in_port = 3;
        k.vlan_tci[0] = 0x1000 | 100;
        k.vlan_tpid[0] = 0x8100;
    });
    let mut m = m;
    // The TCI's priority bits not matched.
    m.mask.vlan_tci[0] = 0x1fff;
    m.mask.vlan_tpid[0] = 0;
    assert_eq!(
        format_odp_match(&m, false),
        "recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=100),\
         encap(eth_type(0x0800),ipv4(frag=no))"
    );
}

#[test]
fn arp_and_ethernet_addresses() {
    // arp,in_port=1,actions=NORMAL: a broadcast request.
    let m = exact(|k| {
        k.recirc_id = 0;
        k.in_port = 1;
        k.dl_src = [2, 0, 0, 0, 0, 1];
        k.dl_dst = [0xff; 6];
        k.dl_type = 0x0806;
        k.nw_src = 0x0a00_0001;
        k.nw_dst = 0x0a00_0002;
        k.nw_proto = 1;
    });
    assert_eq!(
        format_odp_match(&m, false),
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),\
         eth(src=02:00:00:00:00:01,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),\
         arp(sip=10.0.0.1,tip=10.0.0.2,op=1)"
    );
}

#[test]
fn conntrack_state_and_zone() {
    // table=1,ct_state=+trk+new,tcp / ct_state=+trk+est,tcp,ct_zone=5:
    // the second pass of a packet neither new nor established.
    let mut m = exact(|k| {
        base(k);
        k.recirc_id = 1;
        k.ct_zone = 5;
    });
    m.value.ct_state = CS_TRACKED;
    m.mask.ct_state = CS_TRACKED | CS_NEW | CS_ESTABLISHED;
    assert_eq!(
        format_odp_match(&m, false),
        "ct_state(-new-est+trk),ct_zone(0x5),recirc_id(0x1),in_port(1),\
         packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)"
    );
    let commit = sluice_conntrack::CtRequest {
        zone: 5,
        commit: true,
        mark: Some((1, 0xff)),
        ..Default::default()
    };
    assert_eq!(
        format_odp_actions(&[DpAction::Ct(commit), DpAction::Output(2)], &m),
        "ct(commit,zone=5,mark=0x1/0xff),2"
    );
}

#[test]
fn rewrites_of_one_header_are_one_set() {
    // udp,in_port=1,actions=mod_nw_src:10.0.0.5,dec_ttl,
    // mod_dl_dst:02:00:00:00:00:09,mod_tp_dst:99,mod_vlan_vid:5,output:2
    let m = exact(|k| {
        base(k);
        k.nw_proto = 17;
    });
    let acts = [
        DpAction::SetEthDst([2, 0, 0, 0, 0, 9]),
        DpAction::SetIpTtl(63),
        DpAction::SetIpv4Src(0x0a00_0005, Default::default()),
        DpAction::SetTpDst(99),
        DpAction::PushVlan {
            tpid: 0x8100,
            tci: 0x1000 | 5,
        },
        DpAction::Output(2),
    ];
    assert_eq!(
        format_odp_actions(&acts, &m),
        "set(eth(dst=02:00:00:00:00:09)),set(ipv4(src=10.0.0.5,ttl=63)),set(udp(dst=99)),\
         push_vlan(vid=5,pcp=0),2"
    );
}

#[test]
fn fragments_and_verbose() {
    let mut m = exact(|k| {
        base(k);
        k.nw_proto = 17;
        k.tp_dst = 53;
    });
    m.value.nw_frag = FRAG_ANY | FRAG_LATER;
    // A later fragment has no transport header to show.
    let s = format_odp_match(&m, false);
    assert!(s.ends_with("ipv4(proto=17,frag=later)"), "{s}");
    m.value.nw_frag = 0;
    let v = format_odp_match(&m, true);
    assert!(
        v.starts_with(
            "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),\
             ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(1),packet_type(ns=0,id=0),\
             eth(src=00:00:00:00:00:00/00:00:00:00:00:00,dst=00:00:00:00:00:00/00:00:00:00:00:00),\
             eth_type(0x0800),ipv4(src=0.0.0.0/0.0.0.0,dst=0.0.0.0/0.0.0.0,proto=17,tos=0/0,ttl=0/0,frag=no),\
             udp(src=0/0,dst=53)"
        ),
        "{v}"
    );
}

#[test]
fn a_tunnel_push_is_its_header_field_by_field() {
    // OVS's tests/tunnel-push-pop.at: "tnl_push(tnl_port(4789),header(
    // size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,
    // dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,
    // ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),
    // vxlan(flags=0x8000000,vni=0x7b)),out_port(100))"; Sluice names the
    // tunnel's port (it has no datapath port of its own).
    let h = TnlHeader::build(&HeaderParams {
        kind: TunnelKind::Vxlan,
        eth_src: [0xaa, 0x55, 0xaa, 0x55, 0, 0],
        eth_dst: [0xf8, 0xbc, 0x12, 0x44, 0x34, 0xb6],
        ip_src: "1.1.2.88".parse().unwrap(),
        ip_dst: "1.1.2.92".parse().unwrap(),
        tos: 0,
        ttl: 64,
        df: true,
        key: Some(123),
        dst_port: 4789,
        csum: false,
        opts: Default::default(),
        oam: false,
    });
    let m = exact(base);
    let a = DpAction::TnlOutput {
        header: Arc::new(h),
        port: 100,
    };
    assert_eq!(
        format_odp_actions(&[a], &m),
        "tnl_push(tnl_port(vxlan_sys_4789),header(size=50,type=4,\
         eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),\
         ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),\
         udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b)),out_port(100))"
    );
}

#[test]
fn flags_are_named_as_ovs_names_them() {
    assert_eq!(flags(CT_STATE_NAMES, 0x21, '|'), "new|trk");
    assert_eq!(flags(CT_STATE_NAMES, 0, '|'), "0");
    assert_eq!(flags_masked(TCP_FLAG_NAMES, 0x2, 0x12, 0xfff), "+syn-ack");
    assert_eq!(flags_masked(TCP_FLAG_NAMES, 0x2, 0xfff, 0xfff), "syn");
    assert_eq!(actions::put_hex(&[0, 0, 1, 2]), "0x102");
    assert_eq!(actions::put_hex(&[0, 0]), "0");
    assert_eq!(cx(0), "0");
    assert_eq!(cx(5), "0x5");
}

#[test]
fn a_tunnel_attribute_only_for_what_a_tunnel_gave() {
    // Every megaflow of a bridge with tunnels checks for OAM frames: no
    // tunnel attribute for that alone (OVS has none for a packet from no
    // tunnel).
    let mut m = exact(base);
    m.mask.tun_flags = sluice_packet::key::TUN_FLAG_OAM;
    assert!(!format_odp_match(&m, false).contains("tunnel"));
    m.value.tunnel_id = 42;
    m.mask.tunnel_id = u64::MAX;
    m.value.tun_dst = 0x0a00_0002;
    m.mask.tun_dst = u32::MAX;
    assert!(
        format_odp_match(&m, false).starts_with("tunnel(tun_id=0x2a,dst=10.0.0.2,flags(-oam)),"),
        "{}",
        format_odp_match(&m, false)
    );
}
