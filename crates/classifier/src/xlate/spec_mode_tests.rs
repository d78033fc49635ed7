//! Where OpenFlow 1.3 and Open vSwitch differ: `--set-field spec`
//! (set_field on the fields Open vSwitch keeps read-only: eth_type,
//! ip_proto, mpls_bos) and `--push-mpls spec` (a label pushed onto a packet
//! that is not IP gets TTL 0).

use super::*;
use crate::parse::parse_flow_file;
use crate::table::{PushMpls, SetFieldMode};
use sluice_packet::rewrite::FragRewrites;

fn run(rules: &RuleSet, key: &FlowKey) -> Translation {
    let mut t = Translation::default();
    translate(XlateEnv::single(rules, &[1, 2]), key, &mut t, false);
    t
}

const RULES: &str = "\
priority=3,tcp,actions=set_field:17->ip_proto,mod_tp_dst:99,output:2
priority=2,arp,actions=set_field:0x8848->eth_type,output:2
priority=1,mpls,actions=write_actions(set_field:0->mpls_bos,output:2)
";

#[test]
fn read_only_fields_are_refused_in_ovs_mode_and_written_in_spec_mode() {
    let mut r = RuleSet::from_specs(&parse_flow_file(RULES, None).unwrap(), 0);
    // Open vSwitch's mode (the default): every one of them is refused,
    // in an action set too.
    let refused: Vec<_> = r
        .iter()
        .map(|x| r.read_only_write(&x.actions).map(|f| f.name))
        .collect();
    assert_eq!(
        refused,
        [Some("nw_proto"), Some("dl_type"), Some("mpls_bos")]
    );
    let other = parse_flow_file("ip,actions=set_field:1->ip_dscp,output:2", None).unwrap();
    assert!(r.read_only_write(&other[0].actions).is_none());

    r.set_modes(crate::table::Modes {
        set_field: SetFieldMode::Spec,
        ..r.modes()
    });
    assert!(r.iter().all(|x| r.read_only_write(&x.actions).is_none()));

    // ip_proto after the port rewrite (which acts on the header there is).
    let tcp = FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 6,
        nw_ttl: 64,
        tp_dst: 80,
        ..Default::default()
    };
    assert_eq!(
        run(&r, &tcp).actions,
        [
            DpAction::SetTpDst(99),
            DpAction::SetIpProto(17, FragRewrites::Ovs),
            DpAction::Output(2)
        ]
    );
    let arp = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        ..Default::default()
    };
    assert_eq!(
        run(&r, &arp).actions,
        [DpAction::SetEthType(0x8848), DpAction::Output(2)]
    );
    // Bottom of stack cleared in the whole label entry (label 5, TTL 9).
    let mpls = FlowKey {
        in_port: 1,
        dl_type: 0x8847,
        ipv6_label: 5 << 12 | 0x100 | 9,
        ..Default::default()
    };
    assert_eq!(
        run(&r, &mpls).actions,
        [DpAction::SetMplsLse(5 << 12 | 9), DpAction::Output(2)]
    );
}

#[test]
fn push_mpls_onto_arp_has_ttl_64_as_ovs_or_0_as_the_spec() {
    let mut r = RuleSet::from_specs(
        &parse_flow_file("arp,actions=push_mpls:0x8847,output:2", None).unwrap(),
        0,
    );
    let arp = FlowKey {
        in_port: 1,
        dl_type: 0x0806,
        ..Default::default()
    };
    let lse = |r: &RuleSet| match run(r, &arp).actions[0] {
        DpAction::PushMpls { lse, .. } => lse,
        ref a => panic!("{a:?}"),
    };
    // Label 0, bottom of stack, TTL 64 / 0.
    assert_eq!(lse(&r), 0x100 | 64);
    r.set_modes(crate::table::Modes {
        push_mpls: PushMpls::Spec,
        ..r.modes()
    });
    assert_eq!(lse(&r), 0x100);
}
