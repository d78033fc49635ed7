//! NORMAL: learning, flooding, VLAN port modes, and the megaflow bits its
//! decisions read.

use super::tests::{run, set};
use super::*;
use sluice_bridge::PortVlan;

pub(super) const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
pub(super) const BCAST: [u8; 6] = [0xff; 6];

pub(super) fn frame(in_port: u32, src: [u8; 6], dst: [u8; 6], vid: Option<u16>) -> FlowKey {
    let mut k = FlowKey {
        in_port,
        dl_src: src,
        dl_dst: dst,
        dl_type: 0x0806,
        ..Default::default()
    };
    if let Some(v) = vid {
        k.vlan_tci[0] = tci::PRESENT | v;
        k.vlan_tpid[0] = 0x8100;
    }
    k
}

fn bridge(modes: &[(u32, &[(&str, &str)])]) -> RuleSet {
    let r = set("actions=NORMAL\n");
    for (p, opts) in modes {
        r.bridge().set_port(*p, PortVlan::parse(opts).unwrap());
    }
    r
}

pub(super) fn outputs(t: &Translation) -> Vec<u32> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            DpAction::Output(p) => Some(*p),
            _ => None,
        })
        .collect()
}

#[test]
fn unknown_destinations_flood_and_learned_ones_go_to_their_port() {
    let r = bridge(&[]);
    let t = run(&r, &frame(1, A, B, None));
    assert_eq!(outputs(&t), [2, 3, 4], "flooded but to the input port");
    let l = t.learn.first().expect("the source is to be learned");
    assert_eq!((l.mac, l.vlan, l.port), (A, 0, 1));
    // The decision read the MACs, the VLAN id and presence, the port.
    assert_eq!(t.wc.dl_src, [0xff; 6]);
    assert_eq!(t.wc.dl_dst, [0xff; 6]);
    assert_eq!(t.wc.vlan_tci[0], tci::VID_MASK | tci::PRESENT);
    assert_eq!(t.wc.in_port, u32::MAX);
    // A translation learns nothing itself (the upcall does).
    assert_eq!(r.bridge().macs.lookup(A, 0), None);
    r.bridge().macs.learn(A, 0, 1, 0);
    let back = run(&r, &frame(3, B, A, None));
    assert_eq!(outputs(&back), [1]);
    // To the port it came from: dropped.
    let t = run(&r, &frame(1, B, A, None));
    assert!(outputs(&t).is_empty());
    // Broadcast and multicast flood; a reserved address (STP) does not.
    assert_eq!(outputs(&run(&r, &frame(2, B, BCAST, None))), [1, 3, 4]);
    let mcast = [0x01, 0x00, 0x5e, 0, 0, 1];
    assert_eq!(outputs(&run(&r, &frame(2, B, mcast, None))), [1, 3, 4]);
    let stp = [0x01, 0x80, 0xc2, 0, 0, 0];
    assert!(outputs(&run(&r, &frame(2, B, stp, None))).is_empty());
    // A multicast source is never learned.
    assert!(run(&r, &frame(2, mcast, B, None)).learn.is_empty());
}

#[test]
fn access_ports_keep_to_their_vlan_and_trunks_carry_them_tagged() {
    let r = bridge(&[
        (1, &[("tag", "10")]),
        (2, &[("tag", "10")]),
        (3, &[("tag", "20")]),
        (4, &[("trunks", "10;20")]),
    ]);
    // Untagged from an access port of VLAN 10: to the other access port
    // as it is, to the trunk tagged 10, not to VLAN 20.
    let t = run(&r, &frame(1, A, BCAST, None));
    assert_eq!(
        t.actions,
        [
            DpAction::Output(2),
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            },
            DpAction::Output(4)
        ]
    );
    assert_eq!(t.learn.first().unwrap().vlan, 10);
    // A tagged packet on an access port: dropped.
    assert!(outputs(&run(&r, &frame(1, A, BCAST, Some(10)))).is_empty());
    // Tagged 20 from the trunk: to VLAN 20's access port, untagged.
    let t = run(&r, &frame(4, B, BCAST, Some(20)));
    assert_eq!(t.actions, [DpAction::PopVlan, DpAction::Output(3)]);
    // A VLAN the trunk does not carry, or untagged on it: dropped.
    assert!(outputs(&run(&r, &frame(4, B, BCAST, Some(30)))).is_empty());
    assert!(outputs(&run(&r, &frame(4, B, BCAST, None))).is_empty());
    // Learned per VLAN: A in VLAN 10 is not A in VLAN 20.
    r.bridge().macs.learn(A, 10, 1, 0);
    assert_eq!(outputs(&run(&r, &frame(4, B, A, Some(10)))), [1]);
    assert_eq!(outputs(&run(&r, &frame(4, B, A, Some(20)))), [3]);
}

#[test]
fn native_vlans_arrive_untagged_and_leave_as_their_mode_says() {
    let r = bridge(&[
        (1, &[("tag", "5"), ("vlan_mode", "native-untagged")]),
        (2, &[("tag", "5"), ("vlan_mode", "native-tagged")]),
        (3, &[("tag", "5")]),
    ]);
    // Untagged on the native-untagged port is VLAN 5: out of port 2
    // tagged, port 3 (access) untagged, port 4 (trunk of all) tagged.
    let t = run(&r, &frame(1, A, BCAST, None));
    assert_eq!(
        t.actions,
        [
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5
            },
            DpAction::Output(2),
            DpAction::PopVlan,
            DpAction::Output(3),
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5
            },
            DpAction::Output(4)
        ]
    );
    // Tagged 5 from the trunk: out of the native-untagged port untagged.
    let t = run(&r, &frame(4, B, BCAST, Some(5)));
    assert_eq!(
        t.actions,
        [
            DpAction::PopVlan,
            DpAction::Output(1),
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5
            },
            DpAction::Output(2),
            DpAction::PopVlan,
            DpAction::Output(3)
        ]
    );
}

#[test]
fn a_packet_from_the_controller_floods_everywhere_and_learns_nothing() {
    let r = bridge(&[(1, &[("tag", "10")])]);
    let t = run(&r, &frame(0xffff_fffd, A, BCAST, None));
    assert_eq!(outputs(&t), [2, 3, 4]);
    assert!(t.learn.is_empty());
}

#[test]
fn output_to_the_port_a_register_holds() {
    let out = |text: &str| {
        let t = run(&set(text), &frame(1, A, B, None));
        outputs(&t)
    };
    assert_eq!(
        out("actions=load:3->NXM_NX_REG0[0..15],output:NXM_NX_REG0[0..15]\n"),
        [3]
    );
    // OpenFlow 1.0's reserved ports: IN_PORT, NORMAL (flooded here).
    assert_eq!(
        out("actions=load:0xfff8->NXM_NX_REG0[0..15],output:NXM_NX_REG0[0..15]\n"),
        [1]
    );
    assert_eq!(
        out("actions=load:0xfffa->NXM_NX_REG1[],output:reg1\n"),
        [2, 3, 4]
    );
    // The input port itself (as output:N): skipped; past 65535: nowhere.
    assert!(out("actions=load:1->NXM_NX_REG0[],output:reg0\n").is_empty());
    assert!(out("actions=load:0x10002->NXM_NX_REG0[],output:reg0\n").is_empty());
    // A note does nothing.
    assert_eq!(out("actions=note:aa.bb,output:4\n"), [4]);
}

#[test]
fn a_clone_changes_a_copy_and_the_packet_goes_on_as_it_was() {
    let r = set("ip,actions=clone(mod_dl_dst:02:00:00:00:00:99,load:5->NXM_NX_REG0[],output:2),output:NXM_NX_REG0[0..15],output:3\n");
    let key = FlowKey {
        in_port: 1,
        dl_src: A,
        dl_dst: B,
        dl_type: 0x0800,
        nw_proto: 17,
        ..Default::default()
    };
    let t = run(&r, &key);
    // The copy's rewrite is undone before the next output; the register
    // it loaded is back to 0 (output:0 goes nowhere).
    assert_eq!(
        t.actions,
        [
            DpAction::SetEthDst([2, 0, 0, 0, 0, 0x99]),
            DpAction::Output(2),
            DpAction::SetEthDst(B),
            DpAction::Output(3)
        ]
    );
    // ct and ct_clear in a clone (OVN's logical patch): the packet's own
    // connection state comes back after it; an address the copy's NAT
    // rewrote is set back before the next output.
    let r = set("ip,actions=clone(ct_clear,ct(commit,nat(dst=10.9.9.9)),output:2),output:3\n");
    let key = FlowKey {
        nw_dst: 0x0a00_0002,
        ct_state: 0x21,
        ct_zone: 4,
        ..key
    };
    let t = run(&r, &key);
    assert!(
        matches!(
            &t.actions[..],
            [
                DpAction::CtClear,
                DpAction::Ct(_),
                DpAction::Output(2),
                DpAction::CtRestore(c),
                DpAction::SetIpv4Src(0, _),
                DpAction::SetIpv4Dst(0x0a00_0002, _),
                DpAction::SetTpSrc(0),
                DpAction::SetTpDst(0),
                DpAction::Output(3)
            ] if c.state == 0x21 && c.zone == 4
        ),
        "{:?}",
        t.actions
    );
    assert_eq!(
        (t.wc.ct_state, t.wc.ct_zone),
        (0xff, 0xffff),
        "the state restored is matched"
    );
    // OVN's router: the state cleared, then a clone crossing to the next
    // switch whose copy is tracked and recirculated. Nothing of the
    // packet's own state is put back (it was cleared), and nothing after
    // the copy uses the packet: no restore, and the megaflow does not
    // match the connection (one megaflow per connection before).
    let r =
        set("ip,actions=ct_clear,clone(ct_clear,ct(table=1,zone=5))\ntable=1,actions=output:2\n");
    let key = FlowKey {
        ct_nw_src: 0x0a00_0001,
        ct_tp_src: 1024,
        ..key
    };
    let t = run(&r, &key);
    assert_eq!(t.drop, None);
    assert!(
        matches!(
            &t.actions[..],
            [
                DpAction::CtClear,
                DpAction::CtClear,
                DpAction::Ct(_),
                DpAction::Recirc(_)
            ]
        ),
        "{:?}",
        t.actions
    );
    assert_eq!(
        (t.wc.ct_nw_src, t.wc.ct_tp_src),
        (0, 0),
        "the connection is not matched"
    );
    // Its state was not cleared before the copy, and the packet goes on
    // after it: restored, and matched.
    let r = set("ip,actions=clone(ct_clear,output:3),output:2\n");
    let t = run(&r, &key);
    assert!(
        t.actions
            .iter()
            .any(|a| matches!(a, DpAction::CtRestore(_))),
        "{:?}",
        t.actions
    );
    assert_eq!(t.wc.ct_nw_src, u32::MAX, "the restored state is matched");
}
