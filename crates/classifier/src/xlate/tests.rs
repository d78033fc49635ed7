//! Translation tests: actions, drops, VLANs, and exact megaflow masks per field class.

use super::*;
use crate::parse::parse_flow_file;
use sluice_packet::rewrite::{ArpField, FragRewrites};

pub(super) fn set(text: &str) -> RuleSet {
    RuleSet::from_specs(&parse_flow_file(text, None).unwrap(), 0)
}

pub(super) fn run(rules: &RuleSet, key: &FlowKey) -> Translation {
    let mut t = Translation::default();
    translate(XlateEnv::single(rules, &[1, 2, 3, 4]), key, &mut t, true);
    t
}

pub(super) fn tcp_key() -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 6,
        nw_src: 0x0a00_0001,
        nw_dst: 0x0a00_0002,
        nw_ttl: 64,
        tp_src: 1000,
        tp_dst: 80,
        ..Default::default()
    }
}

#[test]
fn rewrite_then_output_commits_once() {
    let r = set(
        "tcp,tp_dst=80,actions=mod_nw_dst:10.9.9.9,mod_tp_dst:8080,dec_ttl,output:2,output:3\n",
    );
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0a09_0909, FragRewrites::Ovs),
            DpAction::SetIpTtl(63),
            DpAction::SetTpDst(8080),
            DpAction::Output(2),
            DpAction::Output(3)
        ]
    );
    assert_eq!(t.outputs, 2);
    assert_eq!(t.drop, None);
    assert_eq!(
        (t.wc.dl_type, t.wc.nw_proto, t.wc.tp_dst, t.wc.nw_ttl),
        (0xffff, 0xff, 0xffff, 0xff)
    );
    assert_eq!(t.wc.nw_src, 0, "nothing looked at nw_src");
}

#[test]
fn resubmit_sees_rewritten_fields_and_goto_misses_drop() {
    let r = set("table=0,ip,actions=mod_nw_dst:1.1.1.1,resubmit(,1),goto_table:2\ntable=1,ip,nw_dst=1.1.1.1,actions=output:4\n");
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0101_0101, FragRewrites::Ovs),
            DpAction::Output(4)
        ]
    );
    // Two rules, and table 2's miss (TABLE statistics count it).
    let hit: Vec<_> = t.rules.iter().map(|r| (r.table, r.is_counter())).collect();
    assert_eq!(hit, vec![(0, false), (1, false), (2, true)]);
    let trace = t.trace.unwrap().join("\n");
    assert!(trace.contains("2. No match."), "{trace}");
    let t = run(&set("ip,actions=goto_table:1\n"), &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::TableMiss));
    let t = run(&set("ip,actions=resubmit(,1)\n"), &tcp_key());
    assert_eq!(
        t.drop,
        Some(XlateDrop::NoOutput),
        "a resubmit miss is a no-op"
    );
}

#[test]
fn in_port_all_and_skips() {
    let r = set("actions=output:1,in_port,all\n");
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::Output(1),
            DpAction::Output(2),
            DpAction::Output(3),
            DpAction::Output(4)
        ]
    );
    let t = run(&set("actions=output:1\n"), &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::OutputToInPort));
    let t = run(&set("actions=output:9\n"), &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::NoSuchPort));
    let t = run(&RuleSet::new(), &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::TableMiss));
}

#[test]
fn dec_ttl_exception_stops_the_list() {
    let r = set("ip,actions=output:2,dec_ttl,output:3\n");
    let mut k = tcp_key();
    k.nw_ttl = 1;
    let t = run(&r, &k);
    // Output 2, then the `invalid_ttl` packet-in (made only for a
    // controller that takes it); output 3 never runs.
    let [DpAction::Output(2), DpAction::Controller(c)] = t.actions.as_slice() else {
        panic!("{:?}", t.actions)
    };
    assert_eq!(
        (c.reason, c.controller_id),
        (crate::dpaction::PacketInReason::InvalidTtl, 0)
    );
    let t = run(&set("ip,actions=dec_ttl,output:3\n"), &k);
    assert_eq!(t.drop, Some(XlateDrop::InvalidTtl));
}

#[test]
fn vlan_actions() {
    let r = set("actions=mod_vlan_vid:10,output:2\n");
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            },
            DpAction::Output(2)
        ]
    );
    let mut tagged = tcp_key();
    tagged.vlan_tci[0] = 0x7005; // pcp 3, present, vid 5
    tagged.vlan_tpid[0] = 0x8100;
    let t = run(
        &set("dl_vlan=5,actions=mod_vlan_vid:10,output:2\n"),
        &tagged,
    );
    assert_eq!(
        t.actions,
        vec![DpAction::SetVlanTci(0x600a), DpAction::Output(2)]
    );
    let t = run(&set("actions=strip_vlan,output:2\n"), &tagged);
    assert_eq!(t.actions, vec![DpAction::PopVlan, DpAction::Output(2)]);
    // OVS's flow tracks two tags: two pushes onto a tag the rule did not
    // match forget that tag, and the packet leaves with the two the flow
    // knows (its own tag popped). A third push the rule knows of is refused
    // when the rule is parsed.
    let t = run(
        &set("actions=push_vlan:0x88a8,push_vlan:0x8100,output:2\n"),
        &tagged,
    );
    assert_eq!(
        t.actions,
        vec![
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0
            },
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(
        t.wc.vlan_tci[0], 0xffff,
        "the popped tag decided the actions"
    );
    // As ovs-ofctl -O OpenFlow13 encodes it, mod_vlan_vid on a rule that
    // does not match a tag pushes one, even on a tagged packet.
    let t = run(&set("actions=mod_vlan_vid:10,output:2\n"), &tagged);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            },
            DpAction::Output(2)
        ]
    );
    // A tag popped and pushed back as it was is no change.
    let t = run(
        &set("actions=strip_vlan,push_vlan:0x8100,mod_vlan_vid:5,mod_vlan_pcp:3,output:2\n"),
        &tagged,
    );
    assert_eq!(t.actions, vec![DpAction::Output(2)]);
}

/// `--push-vlan spec`: a tag pushed over a tag copies its VID and PCP (as
/// OpenFlow 1.3 says), which the decision then reads; onto an untagged
/// packet it is VID 0, PCP 0 in both modes.
#[test]
fn push_vlan_spec_mode_copies_the_outer_tag() {
    let mut r = set("actions=push_vlan:0x88a8,output:2\n");
    r.set_modes(crate::table::Modes {
        push_vlan: crate::table::PushVlan::Spec,
        ..r.modes()
    });
    let mut tagged = tcp_key();
    tagged.vlan_tci[0] = 0x7005; // pcp 3, present, vid 5
    tagged.vlan_tpid[0] = 0x8100;
    let t = run(&r, &tagged);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x6005
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(
        t.wc.vlan_tci[0], 0xffff,
        "the outer tag decided the new one"
    );
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0
            },
            DpAction::Output(2)
        ]
    );
}

#[test]
fn resubmit_loop_is_an_error() {
    let t = run(&set("actions=resubmit(,0)\n"), &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::RecursionTooDeep));
    assert!(t.actions.is_empty());
}

#[test]
fn arp_rewrite_uses_arp_fields() {
    let r = set("arp,actions=set_field:1.2.3.4->nw_dst,mod_dl_src:00:00:00:00:00:09,output:2\n");
    let k = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        nw_proto: 1,
        ..Default::default()
    };
    let t = run(&r, &k);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetEthSrc([0, 0, 0, 0, 0, 9]),
            DpAction::SetArp(ArpField::Tpa(0x0102_0304)),
            DpAction::Output(2)
        ]
    );
}

/// ARP fields are set only where they differ from the packet's (OVS's
/// masked set), and the field is then part of the megaflow.
#[test]
fn arp_sets_only_what_changes() {
    let r = set("arp,actions=set_field:10.0.0.1->arp_spa,set_field:10.0.0.9->arp_tpa,output:2\n");
    let k = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        nw_proto: 1,
        nw_src: 0x0a00_0001,
        nw_dst: 0x0a00_0002,
        ..Default::default()
    };
    let t = run(&r, &k);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetArp(ArpField::Tpa(0x0a00_0009)),
            DpAction::Output(2)
        ]
    );
    assert_eq!((t.wc.nw_src, t.wc.nw_dst), (u32::MAX, u32::MAX));
}

/// OVS commits no L3 or L4 rewrite to a flow whose nw_proto is 0 (found
/// by scripts/ovs-compare: an IPv6 packet whose extension chain does not
/// parse kept its source address in OVS, Sluice rewrote it).
#[test]
fn no_l3_rewrite_without_nw_proto_as_ovs() {
    let arp_op0 = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        ..Default::default()
    };
    let r = set("arp,actions=set_field:1.2.3.4->nw_dst,mod_dl_src:00:00:00:00:00:09,output:2\n");
    let t = run(&r, &arp_op0);
    assert_eq!(
        t.actions,
        vec![DpAction::SetEthSrc([0, 0, 0, 0, 0, 9]), DpAction::Output(2)]
    );
    assert_eq!(t.wc.nw_proto, 0xff, "the choice depends on nw_proto");
    let ip_proto0 = FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_ttl: 9,
        ..Default::default()
    };
    let r = set("ip,actions=mod_nw_src:1.2.3.4,dec_ttl,output:2\n");
    assert_eq!(run(&r, &ip_proto0).actions, vec![DpAction::Output(2)]);
    let v6_broken = FlowKey {
        in_port: 1,
        dl_type: 0x86dd,
        ..Default::default()
    };
    let r = set("ipv6,actions=set_field:2001:db8::1->ipv6_src,output:2\n");
    assert_eq!(run(&r, &v6_broken).actions, vec![DpAction::Output(2)]);
}

fn mask_of(text: &str, key: FlowKey) -> FlowKey {
    run(&set(text), &key).wc
}

#[test]
fn exact_masks_per_field_class() {
    let base = FlowKey {
        in_port: 1,
        ..Default::default()
    };
    // Nothing consulted but the input port (and, as OVS's xlate_wc_init
    // has them always, the pass and the EtherType).
    assert_eq!(
        mask_of("actions=output:2\n", base),
        FlowKey {
            in_port: u32::MAX,
            recirc_id: u32::MAX,
            dl_type: u16::MAX,
            ..Default::default()
        }
    );
    // L2: only the matched field.
    let k = FlowKey {
        dl_dst: [2, 0, 0, 0, 0, 9],
        ..base
    };
    let m = mask_of("dl_dst=02:00:00:00:00:09,actions=output:2\n", k);
    assert_eq!((m.dl_dst, m.dl_src, m.dl_type), ([0xff; 6], [0; 6], 0xffff));
    // Masked L2 matches keep their mask.
    let m = mask_of(
        "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=output:2\n",
        k,
    );
    assert_eq!(m.dl_dst, [1, 0, 0, 0, 0, 0]);
    // VLAN: dl_vlan matches VID and "present".
    let mut tagged = base;
    tagged.vlan_tci[0] = 0x100a;
    assert_eq!(
        mask_of("dl_vlan=10,actions=output:2\n", tagged).vlan_tci,
        [0x1fff, 0]
    );
    // IPv4 prefix: prefix plus the EtherType prerequisite.
    let ip = FlowKey {
        dl_type: 0x0800,
        nw_proto: 17,
        nw_dst: 0x0a01_0203,
        nw_ttl: 64,
        tp_dst: 53,
        ..base
    };
    let m = mask_of("ip,nw_dst=10.0.0.0/8,actions=output:2\n", ip);
    assert_eq!(
        (m.dl_type, m.nw_dst, m.nw_proto, m.tp_dst),
        (0xffff, 0xff00_0000, 0, 0)
    );
    // L4: a TCP-port rule missed by a UDP packet needs only nw_proto.
    let m = mask_of(
        "priority=9,tcp,tp_dst=53,actions=drop\npriority=1,actions=output:2\n",
        ip,
    );
    assert_eq!((m.nw_proto, m.tp_dst), (0xff, 0));
    // ...and a UDP-port rule it matches needs the port.
    let m = mask_of("udp,tp_dst=53,actions=output:2\n", ip);
    assert_eq!(
        (m.dl_type, m.nw_proto, m.tp_dst, m.tp_src),
        (0xffff, 0xff, 0xffff, 0)
    );
    // dec_ttl looks at the TTL; rewrites alone look at nothing.
    assert_eq!(mask_of("ip,actions=dec_ttl,output:2\n", ip).nw_ttl, 0xff);
    assert_eq!(
        mask_of("ip,actions=mod_nw_dst:1.1.1.1,output:2\n", ip).nw_dst,
        0
    );
    // ARP fields.
    let arp = FlowKey {
        dl_type: 0x0806,
        nw_proto: 1,
        nw_dst: 0x0a00_0001,
        ..base
    };
    let m = mask_of("arp,arp_tpa=10.0.0.1,actions=output:2\n", arp);
    assert_eq!((m.dl_type, m.nw_dst, m.nw_src), (0xffff, u32::MAX, 0));
    // IPv6 prefix.
    let mut v6 = FlowKey {
        dl_type: 0x86dd,
        ..base
    };
    v6.ipv6_dst = (0x2001_0db8u128 << 96).to_be_bytes();
    let m = mask_of("ipv6,ipv6_dst=2001:db8::/32,actions=output:2\n", v6);
    assert_eq!(u128::from_be_bytes(m.ipv6_dst), u128::MAX << 96);
    // TCP flags matched with ports: both in the mask.
    let syn = FlowKey {
        dl_type: 0x0800,
        nw_proto: 6,
        tp_dst: 80,
        tcp_flags: 0x02,
        ..base
    };
    let m = mask_of("tcp,tp_dst=80,tcp_flags=+syn,actions=drop\n", syn);
    assert_eq!((m.tp_dst, m.tcp_flags), (0xffff, 0x002));
}

/// OVS's fragment handling: in `normal` (the default) a fragment's L4
/// fields read as 0 to the tables, so a rule on icmp_type=8 does not take
/// an ICMP echo first fragment (the case from the OVS comparison);
/// `nx-match` matches them as they are; `drop` drops every fragment.
#[test]
fn fragment_handling_modes_as_ovs() {
    let mut r = set(
        "priority=63338,icmp,nw_frag=first,nw_src=10.122.10.18,icmp_type=8,actions=output:2\n\
                     priority=1,ip,actions=output:3\n",
    );
    let key = FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 1,
        nw_src: 0x0a7a_0a12,
        nw_frag: sluice_packet::key::FRAG_ANY,
        tp_src: 8,
        ..Default::default()
    };
    assert_eq!(r.modes().frag_handling, FragHandling::Normal);
    let t = run(&r, &key);
    assert_eq!(t.actions, vec![DpAction::Output(3)], "{:?}", t.trace);
    assert_eq!(t.wc.nw_frag, 0xff, "the decision depends on nw_frag");
    r.set_modes(crate::table::Modes {
        frag_handling: FragHandling::NxMatch,
        ..r.modes()
    });
    assert_eq!(run(&r, &key).actions, vec![DpAction::Output(2)]);
    r.set_modes(crate::table::Modes {
        frag_handling: FragHandling::Drop,
        ..r.modes()
    });
    let t = run(&r, &key);
    assert_eq!((t.outputs, t.drop), (0, Some(XlateDrop::Fragment)));
    // Not a fragment: every mode matches the L4 fields.
    let whole = FlowKey { nw_frag: 0, ..key };
    let t = run(&r, &whole);
    assert_eq!(
        t.actions,
        vec![DpAction::Output(3)],
        "nw_frag=first does not match a whole packet"
    );
    // A non-IP packet's megaflow must not take IP fragments in drop mode
    // (found by scripts/ovs-compare: an ARP packet's flow forwarded the
    // fragments that followed on its port).
    let arp = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        ..Default::default()
    };
    let t = run(&set("priority=1,actions=output:3\n"), &arp);
    assert_eq!(t.wc.nw_frag, 0, "other modes do not look");
    let mut catch_all = set("priority=1,actions=output:3\n");
    catch_all.set_modes(crate::table::Modes {
        frag_handling: FragHandling::Drop,
        ..catch_all.modes()
    });
    let t = run(&catch_all, &arp);
    assert_eq!(t.actions, vec![DpAction::Output(3)]);
    assert_ne!(t.wc.nw_frag & sluice_packet::key::FRAG_ANY, 0);
}

/// An ICMP type or code set on an IPv4 later fragment: OVS writes both
/// (the flow's: 0 for the one not set) into the payload (found by
/// scripts/ovs-compare); `--frag-rewrites correct` writes nothing.
#[test]
fn icmp_set_on_a_later_fragment_as_ovs() {
    let later = FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 1,
        nw_frag: sluice_packet::key::FRAG_ANY | sluice_packet::key::FRAG_LATER,
        ..Default::default()
    };
    let mut r = set("icmp,actions=set_field:1->icmp_code,output:2\n");
    assert_eq!(
        run(&r, &later).actions,
        vec![
            DpAction::SetIcmpInLaterFragment { ty: 0, code: 1 },
            DpAction::Output(2)
        ]
    );
    // Nothing set, nothing written (an L3 rewrite alone leaves it alone).
    let ttl = set("icmp,actions=mod_nw_ttl:9,output:2\n");
    assert_eq!(
        run(&ttl, &later).actions,
        vec![DpAction::SetIpTtl(9), DpAction::Output(2)]
    );
    r.set_modes(crate::table::Modes {
        frag_rewrites: FragRewrites::Correct,
        ..r.modes()
    });
    assert_eq!(run(&r, &later).actions, vec![DpAction::Output(2)]);
    let whole = FlowKey {
        nw_frag: 0,
        tp_src: 8,
        ..later
    };
    assert_eq!(
        run(&r, &whole).actions,
        vec![DpAction::SetIcmpCode(1), DpAction::Output(2)]
    );
}

/// OpenFlow 1.0 actions act per packet as OVS's translation does (found by
/// scripts/ovs-compare loading rules by OpenFlow 1.0): mod_nw_src on IPv4
/// only (not on ARP), mod_tp_dst on any IP packet but a later fragment (the
/// ICMP code on ICMP), nothing elsewhere.
#[test]
fn openflow10_actions_act_per_packet() {
    let r = set("actions=mod_nw_src:1.2.3.4,mod_tp_dst:80,output:2\n");
    let arp = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        nw_proto: 1,
        ..Default::default()
    };
    assert_eq!(run(&r, &arp).actions, vec![DpAction::Output(2)]);
    let icmp = FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 1,
        tp_src: 8,
        ..Default::default()
    };
    assert_eq!(
        run(&r, &icmp).actions,
        vec![
            DpAction::SetIpv4Src(0x0102_0304, FragRewrites::Ovs),
            DpAction::SetIcmpCode(80),
            DpAction::Output(2)
        ]
    );
    let v6 = FlowKey {
        in_port: 1,
        dl_type: 0x86dd,
        nw_proto: 6,
        tp_dst: 443,
        ..Default::default()
    };
    assert_eq!(
        run(&r, &v6).actions,
        vec![DpAction::SetTpDst(80), DpAction::Output(2)]
    );
}

#[test]
fn the_action_set_runs_when_the_pipeline_ends_one_of_each_kind() {
    let r = set("priority=10,ip,actions=write_actions(output:3),goto_table:1\n\
         table=1,priority=5,ip,nw_dst=10.0.0.2,actions=write_actions(set_field:10.9.9.9->ip_dst,output:2)\n\
         table=1,priority=5,ip,nw_dst=10.0.0.3,actions=clear_actions\n\
         table=1,priority=1,ip,actions=dec_ttl\n");
    let mut k = tcp_key();
    // The later output replaces the earlier; the set-field runs before it.
    let t = run(&r, &k);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0a09_0909, FragRewrites::Ovs),
            DpAction::Output(2)
        ]
    );
    // Cleared: nothing left to do.
    k.nw_dst = 0x0a00_0003;
    let t = run(&r, &k);
    assert!(t.actions.is_empty());
    assert_eq!(t.drop, Some(XlateDrop::NoOutput));
    // Applied at once, then the set written in table 0 at the end.
    k.nw_dst = 0x0a00_0004;
    let t = run(&r, &k);
    assert_eq!(t.actions, vec![DpAction::SetIpTtl(63), DpAction::Output(3)]);
}

pub(super) fn group(
    id: u32,
    kind: crate::group::GroupType,
    buckets: &[(&str, u16, u32)],
) -> crate::group::Group {
    use crate::group::{Bucket, Group, GROUP_ANY};
    Group {
        id,
        kind,
        buckets: buckets
            .iter()
            .map(|&(acts, weight, watch_port)| Bucket {
                weight,
                watch_port,
                watch_group: GROUP_ANY,
                actions: crate::parse::parse_flow(
                    &format!("actions={acts}"),
                    crate::parse::Require::Actions,
                )
                .unwrap()
                .actions
                .to_vec(),
                counter: Arc::new(Rule::counter()),
            })
            .collect(),
        of_buckets: None,
        counter: Arc::new(Rule::counter()),
        created_us: 0,
        slots: Default::default(),
        selection: Default::default(),
    }
}

/// An `all` group runs every bucket on the packet as it reached the group:
/// a bucket's rewrite is undone for the next bucket and after the group.
#[test]
fn all_group_buckets_each_see_the_packet_as_it_came() {
    use crate::group::{GroupType, PORT_ANY};
    let mut r = set("ip,actions=group:1,output:4\n");
    r.add_group(group(
        1,
        GroupType::All,
        &[
            ("mod_nw_dst:9.9.9.9,output:2", 0, PORT_ANY),
            ("output:3", 0, PORT_ANY),
        ],
    ))
    .unwrap();
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0909_0909, FragRewrites::Ovs),
            DpAction::Output(2),
            DpAction::SetIpv4Dst(0x0a00_0002, FragRewrites::Ovs),
            DpAction::Output(3),
            DpAction::Output(4),
        ]
    );
    // The rule, the group and both buckets are credited.
    assert_eq!(t.rules.iter().filter(|r| r.is_counter()).count(), 3);
}

/// Fast failover takes the first bucket whose watch port exists; indirect
/// its one bucket; select one bucket by flow, the same for both
/// directions; a missing group is the counted drop `no such group`.
#[test]
fn failover_indirect_select_and_missing_groups() {
    use crate::group::{GroupType, PORT_ANY};
    let mut r = set("ip,actions=group:1\n");
    r.add_group(group(
        1,
        GroupType::FastFailover,
        &[("output:2", 0, 7), ("output:3", 0, 3), ("output:4", 0, 4)],
    ))
    .unwrap();
    assert_eq!(run(&r, &tcp_key()).actions, vec![DpAction::Output(3)]);
    r.modify_group(group(1, GroupType::Indirect, &[("output:4", 0, PORT_ANY)]))
        .unwrap();
    assert_eq!(run(&r, &tcp_key()).actions, vec![DpAction::Output(4)]);
    r.modify_group(group(
        1,
        GroupType::Select,
        &[
            ("output:2", 1, PORT_ANY),
            ("output:3", 1, PORT_ANY),
            ("output:4", 1, PORT_ANY),
        ],
    ))
    .unwrap();
    // Chosen per packet by the datapath: one list per bucket, and the
    // megaflow does not read the hashed fields.
    let mut k = tcp_key();
    let there = run(&r, &k);
    let [DpAction::Select(sel)] = there.actions.as_slice() else {
        panic!("a per-packet select: {:?}", there.actions);
    };
    assert_eq!(sel.variants.len(), 3);
    assert_eq!(there.wc.tp_src, 0, "the megaflow does not read the ports");
    assert_eq!(there.wc.nw_src, 0);
    let picked = crate::resolve_select(&there.actions, &k).to_vec();
    (k.nw_src, k.nw_dst, k.tp_src, k.tp_dst) = (k.nw_dst, k.nw_src, k.tp_dst, k.tp_src);
    assert_eq!(
        crate::resolve_select(&there.actions, &k),
        picked.as_slice(),
        "both directions alike"
    );
    let spread: std::collections::BTreeSet<String> = (0..64u16)
        .map(|p| {
            let mut k = tcp_key();
            k.tp_src = 1000 + p;
            format!("{:?}", crate::resolve_select(&there.actions, &k))
        })
        .collect();
    assert_eq!(spread.len(), 3, "flows spread over the buckets");
    // A bucket that pushes a tag: chosen at translation, by the same hash
    // and slots, and the megaflow reads what the hash read.
    r.modify_group(group(
        1,
        GroupType::Select,
        &[
            ("push_vlan:0x8100,output:2", 1, PORT_ANY),
            ("output:3", 1, PORT_ANY),
            ("output:4", 1, PORT_ANY),
        ],
    ))
    .unwrap();
    for p in 0..64u16 {
        let mut k = tcp_key();
        k.tp_src = 1000 + p;
        let t = run(&r, &k);
        assert_eq!(t.wc.tp_src, 0xffff, "the hash reads the ports");
        assert_eq!(t.outputs, 1);
        let port = |acts: &[DpAction]| {
            acts.iter().find_map(|a| match a {
                DpAction::Output(p) => Some(*p),
                _ => None,
            })
        };
        assert_eq!(
            port(&t.actions),
            port(crate::resolve_select(&there.actions, &k)),
            "the same bucket either way"
        );
    }
    assert!(r
        .delete_group(1)
        .iter()
        .any(|x| *x.actions == [Action::Group(1)]));
    let r = set("ip,actions=group:5\n");
    assert_eq!(run(&r, &tcp_key()).drop, Some(XlateDrop::NoSuchGroup));
}

/// Groups refuse loops and unknown references; a delete takes the rules
/// that send to the group.
#[test]
fn group_changes_are_checked() {
    use crate::group::{GroupError, GroupType, PORT_ANY};
    let mut r = RuleSet::new();
    assert_eq!(
        r.add_group(group(1, GroupType::All, &[("group:2", 0, PORT_ANY)])),
        Err(GroupError::Unknown)
    );
    r.add_group(group(2, GroupType::All, &[("output:2", 0, PORT_ANY)]))
        .unwrap();
    r.add_group(group(1, GroupType::All, &[("group:2", 0, PORT_ANY)]))
        .unwrap();
    assert_eq!(
        r.add_group(group(2, GroupType::All, &[])),
        Err(GroupError::Exists)
    );
    assert_eq!(
        r.modify_group(group(2, GroupType::All, &[("group:1", 0, PORT_ANY)])),
        Err(GroupError::Loop)
    );
    assert_eq!(r.missing_group(&[Action::Group(3)]), Some(3));
    assert_eq!(r.missing_group(&[Action::Group(1)]), None);
    let v = r.version();
    assert!(r.delete_group(crate::group::GROUP_ALL).is_empty());
    assert!(r.version() > v && r.groups().next().is_none());
}

fn mpls_key(lse: u32) -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_type: 0x8847,
        ipv6_label: lse,
        ..Default::default()
    }
}

#[test]
fn mpls_ttl_actions_rewrite_the_whole_entry_and_depend_on_it() {
    let lse = 100 << 12 | 3 << 9 | 0x100 | 64;
    let r = set("mpls,actions=set_mpls_ttl(127),output:2\n");
    let t = run(&r, &mpls_key(lse));
    assert_eq!(
        t.actions,
        vec![DpAction::SetMplsLse(lse & !0xff | 127), DpAction::Output(2)]
    );
    assert_eq!(
        t.wc.ipv6_label, !0xff,
        "the label, TC and BoS written are the packet's"
    );
    let r = set("mpls,actions=dec_mpls_ttl,output:2\n");
    let t = run(&r, &mpls_key(lse));
    assert_eq!(
        t.actions,
        vec![DpAction::SetMplsLse(lse - 1), DpAction::Output(2)]
    );
    assert_eq!(t.wc.ipv6_label, u32::MAX);
    let t = run(&r, &mpls_key(lse & !0xff | 1));
    assert_eq!(t.drop, Some(XlateDrop::InvalidTtl));
}

/// OVS rewrites ARP fields in ARP packets only: a RARP packet keeps its
/// own (its MAC rewrite still goes), as `commit_set_nw_action` switches
/// on the EtherType (found by ovs-compare, seed 45 case 113).
#[test]
fn rarp_keeps_its_arp_fields() {
    let rules = set(
        "arp,actions=set_field:2->arp_op,mod_dl_src:33:33:00:00:00:01,output:2\n\
                     rarp,actions=set_field:2->arp_op,mod_dl_src:33:33:00:00:00:01,output:2\n",
    );
    let key = |dl_type| FlowKey {
        in_port: 1,
        dl_type,
        nw_proto: 1,
        ..Default::default()
    };
    let arp = run(&rules, &key(0x0806));
    assert!(
        arp.actions.iter().any(|a| matches!(a, DpAction::SetArp(_))),
        "{:?}",
        arp.actions
    );
    let rarp = run(&rules, &key(0x8035));
    assert!(
        !rarp
            .actions
            .iter()
            .any(|a| matches!(a, DpAction::SetArp(_))),
        "{:?}",
        rarp.actions
    );
    assert!(rarp
        .actions
        .iter()
        .any(|a| matches!(a, DpAction::SetEthSrc(_))));
}

/// `pkt_mark`: set in one table, matched in the next; no byte changes,
/// nothing in the megaflow (every packet arrives unmarked).
#[test]
fn pkt_mark_carries_between_tables() {
    let rules = set("table=0,actions=set_field:5->pkt_mark,resubmit(,1)\n\
                     table=1,pkt_mark=5,actions=output:2\n\
                     table=1,priority=0,actions=output:3\n");
    let t = run(&rules, &tcp_key());
    assert_eq!(
        t.actions.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["2"]
    );
    assert_eq!(t.wc.pkt_mark, 0);
    let printed = crate::parse::parse_flow(
        "pkt_mark=0x5/0xff,actions=load:0x3->NXM_NX_PKT_MARK[0..3]",
        crate::parse::Require::Actions,
    )
    .unwrap();
    assert_eq!(printed.matcher.to_string(), "pkt_mark=0x5/0xff");
    assert_eq!(
        crate::action::format_actions(&printed.actions),
        "load:0x3->NXM_NX_PKT_MARK[0..3]"
    );
}

/// A tag set after a resubmit popped the packet's tag, as OVS 3.1 gives it
/// (issue 60): a set of vlan_vid with OFPVID_PRESENT (and mod_vlan_vid,
/// which ovs-ofctl -O OpenFlow13 sends as one) makes the tag again with
/// PCP 0; a set of vlan_pcp on the untagged packet is skipped.
#[test]
fn a_tag_set_after_a_pop_is_pushed_again_as_ovs() {
    let mut tagged = tcp_key();
    tagged.dl_type = 0x86dd;
    tagged.vlan_tci[0] = 0x7064; // pcp 3, present, vid 100
    tagged.vlan_tpid[0] = 0x8100;
    let pop = "table=1,priority=10,vlan_tci=0x1000/0x1000,actions=strip_vlan\n";
    for set_vid in ["set_field:8190->vlan_vid", "mod_vlan_vid:4094"] {
        let r = set(&format!(
            "table=0,priority=10,vlan_tci=0x1000/0x1000,actions=resubmit(,1),{set_vid},output:2\n{pop}"
        ));
        // OVS: pop_vlan,push_vlan(vid=4094,pcp=0),2; the same bytes as
        // the tag rewritten in place (one tag before and after, 0x8100).
        assert_eq!(
            run(&r, &tagged).actions,
            vec![DpAction::SetVlanTci(4094), DpAction::Output(2)],
            "{set_vid}"
        );
    }
    // OVS: pop_vlan,2
    let r = set(&format!(
        "table=0,priority=10,vlan_tci=0x1000/0x1000,actions=resubmit(,1),set_field:5->vlan_pcp,output:2\n{pop}"
    ));
    assert_eq!(
        run(&r, &tagged).actions,
        vec![DpAction::PopVlan, DpAction::Output(2)]
    );
}
