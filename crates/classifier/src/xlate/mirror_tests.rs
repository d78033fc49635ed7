//! Port mirroring in the translation: ingress and egress copies, the
//! mirror's output port tagged as its VLAN mode says, one copy per
//! mirror output, VLAN selection, NORMAL leaving the output port alone,
//! and a recirculation not copying twice.

use super::normal_tests::{frame, outputs, A, BCAST};
use super::tests::{run, set};
use super::*;
use sluice_bridge::{Mirror, Mirrors, PortVlan};

/// A broadcast ARP frame from MAC A on `in_port`, tagged `vid`.
fn key(in_port: u32, vid: Option<u16>) -> FlowKey {
    frame(in_port, A, BCAST, vid)
}

fn mirror(src: &[u32], dst: &[u32], output: u32) -> Mirror {
    Mirror {
        name: format!("m{output}"),
        src: src.to_vec(),
        dst: dst.to_vec(),
        output,
        ..Mirror::default()
    }
}

fn with_mirrors(flows: &str, ms: Vec<Mirror>) -> RuleSet {
    let r = set(flows);
    r.bridge().set_mirrors(Mirrors::new(ms).unwrap());
    r
}

#[test]
fn what_a_port_receives_is_copied_before_the_rules_act() {
    let r = with_mirrors(
        "in_port=1,actions=mod_dl_src:02:00:00:00:00:0b,output:2\n",
        vec![mirror(&[1], &[], 4)],
    );
    let t = run(&r, &key(1, None));
    // The copy first, as received; then the rule's rewrite and output.
    assert_eq!(t.actions[0], DpAction::Output(4));
    assert_eq!(t.actions.last(), Some(&DpAction::Output(2)));
    assert!(t.actions.len() == 3, "{:?}", t.actions);
    // Another port's packets are not copied.
    let t = run(&r, &key(2, None));
    assert!(!t.actions.contains(&DpAction::Output(4)), "{:?}", t.actions);
}

#[test]
fn what_a_port_sends_is_copied_as_it_leaves() {
    let r = with_mirrors(
        "in_port=1,actions=output:2,mod_dl_src:02:00:00:00:00:0b,output:3\n",
        vec![mirror(&[], &[3], 4)],
    );
    let t = run(&r, &key(1, None));
    assert_eq!(outputs(&t), [2, 3, 4], "{:?}", t.actions);
}

#[test]
fn each_mirror_output_gets_one_copy() {
    // select_all, and a second mirror with the same output: one copy of
    // the packet received, none more for the two outputs.
    let all = Mirror {
        select_all: true,
        ..mirror(&[], &[], 4)
    };
    let r = with_mirrors(
        "in_port=1,actions=output:2,output:3\n",
        vec![all, mirror(&[], &[2], 4)],
    );
    let t = run(&r, &key(1, None));
    let copies = t
        .actions
        .iter()
        .filter(|a| **a == DpAction::Output(4))
        .count();
    assert_eq!(copies, 1, "{:?}", t.actions);
}

#[test]
fn normal_leaves_a_mirror_output_port_out() {
    let r = with_mirrors("actions=NORMAL\n", vec![mirror(&[1], &[], 4)]);
    let t = run(&r, &key(1, None));
    // Flooded to 2 and 3, the copy to 4 only once (not flooded there).
    assert_eq!(outputs(&t), [4, 2, 3]);
    // What the output port receives goes nowhere.
    let t = run(&r, &key(4, None));
    assert!(t.actions.is_empty(), "{:?}", t.actions);
    assert!(t.learn.is_empty());
}

#[test]
fn a_mirror_selects_by_vlan_and_tags_its_copies_for_its_output() {
    let vlan = Mirror {
        vlans: vec![10],
        ..mirror(&[1], &[], 4)
    };
    let r = with_mirrors("in_port=1,actions=output:2\n", vec![vlan]);
    r.bridge()
        .set_port(1, PortVlan::parse(&[("trunks", "10;20")]).unwrap());
    // VLAN 10 is copied, tagged (port 4 is a trunk by default).
    let t = run(&r, &key(1, Some(10)));
    assert_eq!(t.actions[0], DpAction::Output(4));
    assert_eq!(t.wc.vlan_tci[0] & tci::VID_MASK, tci::VID_MASK);
    // VLAN 20 is not.
    let t = run(&r, &key(1, Some(20)));
    assert_eq!(t.actions, [DpAction::Output(2)]);
    // An access output port gets the copy untagged.
    r.bridge()
        .set_port(4, PortVlan::parse(&[("tag", "10")]).unwrap());
    let t = run(&r, &key(1, Some(10)));
    assert_eq!(t.actions[..2], [DpAction::PopVlan, DpAction::Output(4)]);
}

#[test]
fn a_recirculated_pass_does_not_copy_again() {
    let all = Mirror {
        select_all: true,
        ..mirror(&[], &[], 4)
    };
    let r = with_mirrors(
        "table=0,in_port=1,ip,actions=ct(table=1)\ntable=1,actions=output:2\n",
        vec![all],
    );
    let mut k = key(1, None);
    k.dl_type = 0x0800;
    k.nw_proto = 17;
    let first = run(&r, &k);
    assert_eq!(first.actions[0], DpAction::Output(4), "{:?}", first.actions);
    let id = first
        .actions
        .iter()
        .find_map(|a| match a {
            DpAction::Recirc(id) => Some(*id),
            _ => None,
        })
        .expect("the ct recirculates");
    let mut again = k;
    again.recirc_id = id;
    let second = run(&r, &again);
    assert_eq!(
        second.actions,
        [DpAction::Output(2)],
        "{:?}",
        second.actions
    );
}
