//! Translation of the Nicira actions that pick or tell: `controller(...)`
//! with its settings, `multipath`, `bundle`/`bundle_load` (against values
//! Open vSwitch's trace gave), `dec_ttl(ids)`.

use super::*;
use crate::dpaction::PacketInReason;
use crate::parse::parse_flow_file;

use super::tests::{run, set, tcp_key};

/// The packet-ins a translation makes: reason, controller id, max_len.
fn packet_ins(t: &Translation) -> Vec<(PacketInReason, u16, u16)> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            DpAction::Controller(c) => Some((c.reason, c.controller_id, c.max_len)),
            _ => None,
        })
        .collect()
}

/// `controller(...)`: printed as ovs-ofctl prints it (the defaults left
/// out, plain CONTROLLER:N when all are), its reason and id in the
/// packet-in; a table-miss rule's plain one is NO_MATCH; bad settings
/// refused.
#[test]
fn controller_options_reach_the_packet_in() {
    let r = set("priority=5,tcp,actions=controller(reason=invalid_ttl,max_len=100,id=3,userdata=01.02),controller(max_len=9)\npriority=0,actions=controller\n");
    let shown: Vec<String> = r
        .rules()
        .map(|x| crate::action::format_actions(&x.actions))
        .collect();
    assert!(
        shown.contains(
            &"controller(reason=invalid_ttl,max_len=100,id=3,userdata=01.02),CONTROLLER:9".into()
        ),
        "{shown:?}"
    );
    let t = run(&r, &tcp_key());
    let got = packet_ins(&t);
    assert_eq!(
        got,
        [
            (PacketInReason::InvalidTtl, 3, 100),
            (PacketInReason::Action, 0, 9)
        ]
    );
    let mut udp = tcp_key();
    udp.nw_proto = 17;
    let t = run(&r, &udp);
    assert_eq!(
        (packet_ins(&t), t.actions.len()),
        (vec![(PacketInReason::ExplicitMiss, 0, u16::MAX)], 1)
    );
    for bad in [
        "actions=controller(reason=bored)",
        "actions=controller(userdata=1)",
    ] {
        assert!(parse_flow_file(bad, None).is_err(), "{bad}");
    }
    // Plain settings are the plain action.
    let r = set("actions=controller(reason=action,max_len=7,id=0)\n");
    assert_eq!(
        crate::action::format_actions(&r.rules().next().unwrap().actions),
        "CONTROLLER:7"
    );
}

/// `controller(pause)` (OVN's DHCP, DNS, ICMP errors): the packet goes to
/// the controller alone, the rest of the translation (the rest of the
/// list, and of each list that led there) frozen under the id the
/// packet-in carries as its continuation.
#[test]
fn a_pause_freezes_the_rest_as_the_packet_in_s_continuation() {
    let r = set(
        "priority=5,tcp,actions=load:7->NXM_NX_REG1[],resubmit(,1),output:3
table=1,actions=controller(userdata=0a.0b,pause),load:1->NXM_NX_REG2[],output:2
",
    );
    assert!(
        crate::action::format_actions(&r.rules().nth(1).unwrap().actions)
            .starts_with("controller(userdata=0a.0b,pause)")
    );
    let t = run(&r, &tcp_key());
    let [DpAction::Controller(c)] = t.actions.as_slice() else {
        panic!("{:?}", t.actions)
    };
    let id = c.meta.continuation.expect("a continuation");
    let state = r.recirc().get(id).expect("the frozen state");
    assert_eq!(
        crate::action::format_actions(&state.actions),
        "load:0x1->NXM_NX_REG2[],output:2,output:3"
    );
    assert_eq!(state.regs[1], 7);
    // The same packet again: the same state.
    let again = run(&r, &tcp_key());
    let [DpAction::Controller(c2)] = again.actions.as_slice() else {
        panic!()
    };
    assert_eq!(c2.meta.continuation, Some(id));
}

/// `multipath` picks the link Open vSwitch 3.1 picks: each field set and
/// algorithm on three packets, the values OVS's ofproto/trace printed for
/// them (`scripts/ovs-compare` generates multipath too).
#[test]
fn multipath_links_are_ovs_links() {
    let r = set("actions=multipath(symmetric_l4,1024,hrw,8,0,NXM_NX_REG0[0..2]),multipath(symmetric_l3l4,7,modulo_n,5,0,NXM_NX_REG1[0..2]),multipath(symmetric_l3l4+udp,99,hash_threshold,6,0,NXM_NX_REG2[0..3]),multipath(eth_src,3,iter_hash,13,20,NXM_NX_REG3[0..3]),multipath(nw_src,5,hrw,100,0,NXM_NX_REG4[0..7]),multipath(nw_dst,0,modulo_n,1000,0,NXM_NX_REG5[0..15]),multipath(symmetric_l3,65535,iter_hash,3,0,NXM_NX_REG6[0..1]),output:2\n");
    let mut tcp = tcp_key();
    tcp.dl_src = [0, 0, 0, 0, 0, 1];
    tcp.dl_dst = [0, 0, 0, 0, 0, 2];
    tcp.tp_src = 1234;
    let udp6 = FlowKey {
        in_port: 1,
        dl_src: [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f],
        dl_dst: [0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa],
        vlan_tci: [0x1000 | 100, 0],
        dl_type: 0x86dd,
        nw_proto: 17,
        nw_ttl: 64,
        ipv6_src: 0xfd00_0000_0000_0000_0000_0000_0000_0001u128.to_be_bytes(),
        ipv6_dst: 0x2001_0db8_0000_0000_0000_0000_0000_0099u128.to_be_bytes(),
        tp_src: 53,
        tp_dst: 4000,
        ..Default::default()
    };
    let arp = FlowKey {
        in_port: 1,
        dl_src: [0, 0, 0, 0, 0, 3],
        dl_dst: [0xff; 6],
        dl_type: 0x0806,
        nw_src: 0xc0a8_0101,
        nw_dst: 0xc0a8_0102,
        ..Default::default()
    };
    for (key, want) in [
        (tcp, [4, 1, 4, 1, 0x44, 0x17, 0]),
        (udp6, [4, 3, 3, 0, 0x37, 0x1a7, 2]),
        (arp, [1, 2, 2, 0xa, 0x2a, 0, 2]),
    ] {
        let t = run(&r, &key);
        let trace = t.trace.unwrap().join("\n");
        let got: Vec<u128> = trace
            .lines()
            .filter_map(|l| l.split(" is now ").nth(1))
            .map(|v| {
                let v = v.trim();
                match v.strip_prefix("0x") {
                    Some(h) => u128::from_str_radix(h, 16).unwrap(),
                    None => v.parse().unwrap(),
                }
            })
            .collect();
        assert_eq!(got, want, "{trace}");
    }
    // The megaflow holds what was hashed.
    let t = run(&r, &tcp);
    assert_eq!(
        (t.wc.nw_src, t.wc.tp_dst, t.wc.dl_src),
        (u32::MAX, 0xffff, [0xff; 6])
    );
    // Too few bits for the links, and an unknown algorithm.
    for bad in [
        "actions=multipath(eth_src,0,modulo_n,9,0,NXM_NX_REG0[0..2])",
        "actions=multipath(eth_src,0,random,2,0,NXM_NX_REG0[])",
        "actions=multipath(eth_src,0,hrw,0,0,NXM_NX_REG0[])",
    ] {
        assert!(parse_flow_file(bad, None).is_err(), "{bad}");
    }
}

/// `bundle` and `bundle_load` pick the member Open vSwitch 3.1 picks
/// (its ofproto/trace of the same rules and packet), among the members
/// that are ports of the switch; none up loads OFPP_NONE.
#[test]
fn bundle_members_are_ovs_members() {
    let r = set("table=0,actions=bundle_load(symmetric_l4,7,hrw,ofport,NXM_NX_REG0[],members:2,3,4,7),bundle_load(eth_src,0,active_backup,ofport,NXM_NX_REG1[],members:9,3,2),bundle_load(nw_dst,5,hrw,ofport,NXM_NX_REG2[0..15],members:2,3),bundle_load(symmetric_l3,9,hrw,ofport,NXM_NX_REG3[],members:8,9),resubmit(,1)\ntable=1,actions=bundle(symmetric_l3l4+udp,3,hrw,ofport,members:2,3,4)\n");
    let mut tcp = tcp_key();
    tcp.dl_src = [0, 0, 0, 0, 0, 1];
    tcp.dl_dst = [0, 0, 0, 0, 0, 2];
    tcp.tp_src = 1234;
    let t = run(&r, &tcp);
    let trace = t.trace.unwrap().join("\n");
    let got: Vec<&str> = trace
        .lines()
        .filter_map(|l| l.split(" is now ").nth(1))
        .collect();
    assert_eq!(got, ["0x2", "0x3", "0x3", "0xffff"], "{trace}");
    assert_eq!(t.actions, [DpAction::Output(2)]);
    let shown: Vec<String> = r
        .rules()
        .map(|x| crate::action::format_actions(&x.actions))
        .collect();
    assert!(shown.contains(&"bundle(symmetric_l3l4+udp,3,hrw,ofport,members:2,3,4)".into()));
    for bad in [
        "actions=bundle(eth_src,0,hrw,ofport,members:0)",
        "actions=bundle(eth_src,0,random,ofport,members:1)",
        "actions=bundle(eth_src,0,hrw,port,members:1)",
        "actions=bundle_load(eth_src,0,hrw,ofport,members:1)",
    ] {
        assert!(parse_flow_file(bad, None).is_err(), "{bad}");
    }
}

/// `dec_ttl(ids)` decrements as `dec_ttl` does, and prints as ovs-ofctl
/// prints it (`dec_ttl(0)` stays written out, as in OVS).
#[test]
fn dec_ttl_with_controller_ids() {
    let r = set("ip,actions=dec_ttl(1,2),output:2\nipv6,actions=dec_ttl(0),output:3\n");
    let t = run(&r, &tcp_key());
    assert_eq!(t.actions, [DpAction::SetIpTtl(63), DpAction::Output(2)]);
    let mut shown: Vec<String> = r
        .rules()
        .map(|x| crate::action::format_actions(&x.actions))
        .collect();
    shown.sort();
    assert_eq!(shown, ["dec_ttl(0),output:3", "dec_ttl(1,2),output:2"]);
    let mut k = tcp_key();
    k.nw_ttl = 1;
    let t = run(&r, &k);
    assert_eq!(t.drop, Some(XlateDrop::InvalidTtl));
    // The TTL ran out: a whole-packet `invalid_ttl` packet-in for each
    // id (the datapath makes them only for a controller that takes
    // them), and no output.
    let pins = packet_ins(&t);
    assert_eq!(
        pins,
        [
            (PacketInReason::InvalidTtl, 1, u16::MAX),
            (PacketInReason::InvalidTtl, 2, u16::MAX)
        ]
    );
    assert!(!t.actions.iter().any(|a| matches!(a, DpAction::Output(_))));
}

/// `dec_ttl()` (how ovs-ofctl dumps OVN's decrement with no controller
/// ids) reads back as OVS reads it: plain `dec_ttl`.
#[test]
fn dec_ttl_with_empty_parentheses_is_plain_dec_ttl() {
    let r = set("ip,actions=dec_ttl(),output:2\n");
    let shown: Vec<String> = r
        .rules()
        .map(|x| crate::action::format_actions(&x.actions))
        .collect();
    assert_eq!(shown, ["dec_ttl,output:2"]);
    assert_eq!(
        run(&r, &tcp_key()).actions,
        [DpAction::SetIpTtl(63), DpAction::Output(2)]
    );
}

/// A packet-in carries the pipeline fields that are not zero when it is
/// sent (registers, metadata, pkt_mark) and the action's userdata.
#[test]
fn a_packet_in_carries_the_pipeline_fields_and_userdata() {
    let r = set("actions=load:5->NXM_NX_REG0[],load:0x77->NXM_NX_REG7[],set_field:3->pkt_mark,write_metadata:0x10,goto_table:1\ntable=1,actions=controller(userdata=01.02.03)\n");
    let t = run(&r, &tcp_key());
    let [DpAction::Controller(c)] = t.actions.as_slice() else {
        panic!("{:?}", t.actions)
    };
    let meta = &c.meta;
    assert_eq!(meta.userdata, [1, 2, 3]);
    let f = |n: &str| meta.fields.get(crate::fields::field_by_name(n).unwrap());
    assert_eq!(f("reg0"), (5, 0xffff_ffff));
    assert_eq!(f("reg7"), (0x77, 0xffff_ffff));
    assert_eq!(f("metadata"), (0x10, u128::from(u64::MAX)));
    assert_eq!(f("pkt_mark"), (3, 0xffff_ffff));
    // Zero ones are left out.
    assert_eq!(f("reg1"), (0, 0));
    assert_eq!(f("tun_id"), (0, 0));
}

/// `fin_timeout`: the megaflow of any packet through it says whether the
/// packet is TCP (so another protocol's megaflow never serves a FIN), and
/// a TCP one the FIN and RST bits; only a FIN or RST records the change.
#[test]
fn fin_timeout_megaflows_tell_fin_and_rst_apart() {
    let r = set("actions=fin_timeout(idle_timeout=5),output:2\n");
    let mut udp = tcp_key();
    udp.nw_proto = 17;
    let t = run(&r, &udp);
    assert_eq!(
        (t.wc.dl_type, t.wc.nw_proto, t.wc.tcp_flags),
        (0xffff, 0xff, 0)
    );
    assert!(t.fin_timeouts.is_empty());
    let t = run(&r, &tcp_key());
    assert_eq!(t.wc.tcp_flags, 0x005);
    assert!(t.fin_timeouts.is_empty());
    let mut fin = tcp_key();
    fin.tcp_flags = 0x011;
    let t = run(&r, &fin);
    assert_eq!(t.fin_timeouts, [(0, 5, 0)]);
}

/// `actset_output`: the tables see the action set's output port (as
/// `write_actions(output:N)` left it), `UNSET` without one or with a
/// group beside it; the megaflow never matches it (no packet carries it),
/// and `ovs-ofctl`'s names for ports read and print back.
#[test]
fn actset_output_is_the_action_sets_output_port() {
    let mut r = set("table=0,udp,actions=write_actions(output:2),goto_table:1
table=0,tcp,actions=goto_table:1
table=0,sctp,actions=write_actions(output:3,group:1),goto_table:1
table=1,priority=5,actset_output=2,actions=load:1->NXM_NX_REG1[],output:4
table=1,priority=4,actset_output=UNSET,actions=output:1
table=1,priority=3,actions=output:3
");
    use crate::group::{GroupType, PORT_ANY};
    r.add_group(super::tests::group(
        1,
        GroupType::All,
        &[("output:3", 0, PORT_ANY)],
    ))
    .unwrap();
    let mut udp = tcp_key();
    udp.nw_proto = 17;
    let t = run(&r, &udp);
    assert_eq!(t.actions, [DpAction::Output(4), DpAction::Output(2)]);
    assert_eq!(t.wc.actset_output, 0, "not in the megaflow");
    let mut from2 = tcp_key();
    from2.in_port = 2;
    let t = run(&r, &from2);
    assert_eq!(t.actions, [DpAction::Output(1)]);
    let mut sctp = from2;
    sctp.nw_proto = 132;
    let t = run(&r, &sctp);
    // A group beside the output: UNSET (and the set runs the group).
    assert_eq!(t.actions, [DpAction::Output(1), DpAction::Output(3)]);
    let shown: Vec<String> = r.rules().map(|x| x.matcher.to_string()).collect();
    assert!(shown.contains(&"actset_output=2".to_string()), "{shown:?}");
    assert!(
        shown.contains(&"actset_output=UNSET".to_string()),
        "{shown:?}"
    );
    let m = crate::parse_flow(
        "actset_output=local,actions=drop",
        crate::parse::Require::Actions,
    )
    .unwrap()
    .matcher;
    assert_eq!(m.to_string(), "actset_output=LOCAL");
    assert!(crate::parse_flow(
        "actset_output=0xff05,actions=drop",
        crate::parse::Require::Actions
    )
    .is_err());
    assert!(crate::parse_flow(
        "actset_output=2/3,actions=drop",
        crate::parse::Require::Actions
    )
    .is_err());
}

/// `set_field:V->metadata` (and a masked one, a load) writes the pipeline's
/// metadata as `write_metadata` does, as Open vSwitch takes it; the
/// megaflow never matches metadata.
#[test]
fn set_field_writes_metadata() {
    let r = set(
        "table=0,actions=set_field:0x10->metadata,set_field:0x3/0x3->metadata,goto_table:1
table=1,metadata=0x13,actions=output:2
table=1,priority=0,actions=output:3
",
    );
    let t = run(&r, &tcp_key());
    assert_eq!(t.actions, [DpAction::Output(2)]);
    assert_eq!(t.wc.metadata, 0);
}
