//! Several bridges on one datapath: translation starts in the input
//! port's bridge, outputs name datapath numbers, and patch ports cross
//! into the peer bridge in the same pass (as ofproto-dpif's).

use std::sync::Arc;

use super::tests::{set, tcp_key};
use super::*;

/// Bridge 0 from `b0` with ports `p0` (patch ports `patch0`), bridge 1
/// from `b1` with `p1` (`patch1`), sharing bridge 0's datapath state.
fn two(
    b0: &str,
    patch0: &[(u32, u32)],
    b1: &str,
    patch1: &[(u32, u32)],
) -> (RuleSet, Vec<Option<BridgeView>>) {
    let mut r0 = set(b0);
    r0.set_patch_ports(
        patch0
            .iter()
            .map(|&(port, peer_port)| PatchPort {
                port,
                peer: 1,
                peer_port,
            })
            .collect(),
    );
    let mut r1 = set(b1);
    r1.share_datapath_state(&r0);
    r1.set_patch_ports(
        patch1
            .iter()
            .map(|&(port, peer_port)| PatchPort {
                port,
                peer: 0,
                peer_port,
            })
            .collect(),
    );
    let dp_ports = [
        1,
        3,
        dp_port(1, 1),
        dp_port(1, 5),
        dp_port(1, bridges::LOCAL),
    ];
    (r0, second_bridge(r1, &dp_ports))
}

/// The other bridges of a datapath whose second bridge has rules `r1`,
/// its ports those of `dp_ports` (datapath numbers) that are bridge 1's.
pub(super) fn second_bridge(r1: RuleSet, dp_ports: &[u32]) -> Vec<Option<BridgeView>> {
    let ports = BridgeView::ports_of(1, dp_ports, &r1);
    vec![
        None,
        Some(BridgeView {
            rules: Arc::new(r1),
            ports,
        }),
    ]
}

fn run2(r0: &RuleSet, others: &[Option<BridgeView>], key: &FlowKey) -> Translation {
    let mut ports0 = BridgeView::ports_of(0, &[1, 3], r0);
    ports0.sort_unstable();
    let env = XlateEnv {
        rules: r0,
        ports: &ports0,
        bridges: others,
        bridge: 0,
    };
    let mut t = Translation::default();
    translate(env, key, &mut t, true);
    t
}

#[test]
fn a_patch_crossing_is_one_pass_counted_in_both_bridges() {
    let (r0, others) = two(
        "in_port=1,actions=output:2\n",
        &[(2, 2)],
        "in_port=2,actions=output:1\n",
        &[(2, 2)],
    );
    let t = run2(&r0, &others, &tcp_key());
    assert_eq!(
        t.actions,
        vec![DpAction::Output(dp_port(1, 1))],
        "{:?}",
        t.trace
    );
    assert_eq!(t.outputs, 1);
    // The rule of each bridge is credited with the packet.
    assert_eq!(t.rules.len(), 2);
    assert!(t
        .rules
        .iter()
        .any(|r| Arc::ptr_eq(r, &r0.rules().next().unwrap().clone())));
    assert_eq!(t.wc.in_port, u32::MAX);
}

#[test]
fn the_peer_starts_with_a_clean_pipeline_and_its_header_changes_are_undone() {
    // Registers and metadata do not cross; a header the peer changes is
    // set back for the next output of the first bridge.
    let (r0, others) = two(
        "in_port=1,actions=load:5->NXM_NX_REG0[],load:7->OXM_OF_METADATA[],output:2,output:3\n",
        &[(2, 2)],
        "priority=10,reg0=5,actions=drop\n\
         priority=9,metadata=7,actions=drop\n\
         priority=1,in_port=2,actions=mod_dl_src:02:00:00:00:00:09,output:5\n",
        &[(2, 2)],
    );
    let key = FlowKey {
        dl_src: [2, 0, 0, 0, 0, 1],
        ..tcp_key()
    };
    let t = run2(&r0, &others, &key);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetEthSrc([2, 0, 0, 0, 0, 9]),
            DpAction::Output(dp_port(1, 5)),
            DpAction::SetEthSrc([2, 0, 0, 0, 0, 1]),
            DpAction::Output(3),
        ],
        "{:#?}",
        t.trace
    );
}

#[test]
fn a_packet_enters_the_bridge_of_its_port_and_comes_back_through_a_patch() {
    let (r0, others) = two(
        "in_port=2,actions=output:3\n",
        &[(2, 2)],
        "in_port=5,actions=output:2\n",
        &[(2, 2)],
    );
    let key = FlowKey {
        in_port: dp_port(1, 5),
        ..tcp_key()
    };
    let t = run2(&r0, &others, &key);
    assert_eq!(t.actions, vec![DpAction::Output(3)], "{:#?}", t.trace);
    // A port of no bridge: dropped, said why.
    let key = FlowKey {
        in_port: dp_port(7, 1),
        ..tcp_key()
    };
    let t = run2(&r0, &others, &key);
    assert_eq!(t.drop, Some(XlateDrop::NoSuchPort));
}

#[test]
fn normal_learns_in_each_bridge_it_runs_in() {
    let (r0, others) = two("actions=NORMAL\n", &[(2, 2)], "actions=NORMAL\n", &[(2, 2)]);
    let key = FlowKey {
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_dst: [2, 0, 0, 0, 0, 2],
        ..tcp_key()
    };
    let t = run2(&r0, &others, &key);
    let learned: Vec<(u16, u32)> = t.learn.iter().map(|l| (l.bridge, l.port)).collect();
    assert_eq!(learned, vec![(0, 1), (1, 2)]);
    // Flooded in both: bridge 0's port 3, bridge 1's ports 1, 5, LOCAL
    // (not back out of the patch port either bridge came in on).
    let mut outs: Vec<u32> = t
        .actions
        .iter()
        .filter_map(|a| match a {
            DpAction::Output(p) => Some(*p),
            _ => None,
        })
        .collect();
    outs.sort_unstable();
    let mut want = vec![3, dp_port(1, 1), dp_port(1, 5), dp_port(1, bridges::LOCAL)];
    want.sort_unstable();
    assert_eq!(outs, want, "{:#?}", t.trace);
}

#[test]
fn a_packet_in_from_the_peer_names_its_bridge_and_port() {
    let (r0, others) = two(
        "in_port=1,actions=output:2\n",
        &[(2, 2)],
        "in_port=2,actions=controller\n",
        &[(2, 2)],
    );
    let t = run2(&r0, &others, &tcp_key());
    let pi = t
        .actions
        .iter()
        .find_map(|a| match a {
            DpAction::Controller(p) => Some(p),
            _ => None,
        })
        .expect("a packet-in");
    assert_eq!((pi.bridge, pi.in_port), (1, 2));
}

#[test]
fn a_recirculation_in_the_peer_resumes_there() {
    let (r0, others) = two(
        "in_port=1,actions=output:2\n",
        &[(2, 2)],
        "table=0,in_port=2,ip,actions=ct(table=1)\n\
         table=1,in_port=2,actions=output:5\n",
        &[(2, 2)],
    );
    let t = run2(&r0, &others, &tcp_key());
    let id = t
        .actions
        .iter()
        .find_map(|a| match a {
            DpAction::Recirc(id) => Some(*id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a recirculation: {:#?}", t.trace));
    // The packet comes back with the recirculation id, its in_port the
    // datapath's (bridge 0's port 1).
    let key = FlowKey {
        recirc_id: id,
        ct_state: 0x21,
        ..tcp_key()
    };
    let t = run2(&r0, &others, &key);
    assert_eq!(
        t.actions,
        vec![DpAction::Output(dp_port(1, 5))],
        "{:#?}",
        t.trace
    );
}

#[test]
fn a_patch_loop_ends_at_the_depth_limit() {
    let (r0, others) = two(
        "actions=output:2\n",
        &[(2, 2)],
        "actions=output:2\n",
        &[(2, 2)],
    );
    let t = run2(&r0, &others, &tcp_key());
    // in_port 1 -> patch -> bridge 1 in_port 2: output:2 is its input
    // port, skipped. A loop needs two patch pairs:
    assert_eq!(t.drop, Some(XlateDrop::OutputToInPort), "{:#?}", t.trace);
    let (r0, others) = two(
        "actions=output:2,output:4\n",
        &[(2, 2), (4, 4)],
        "in_port=2,actions=output:4\nin_port=4,actions=output:2\n",
        &[(2, 2), (4, 4)],
    );
    let t = run2(&r0, &others, &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::RecursionTooDeep));
}

#[test]
fn a_meter_of_the_peer_bridge_is_held_by_the_translation() {
    use crate::meter::{flags, BandKind, Meter};
    let (r0, mut others) = two(
        "in_port=1,actions=output:2\n",
        &[(2, 2)],
        "in_port=2,actions=meter:1,output:5\n",
        &[(2, 2)],
    );
    // Without the meter: dropped, said why.
    let t = run2(&r0, &others, &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::NoSuchMeter), "{:#?}", t.trace);
    let v = others[1].as_mut().unwrap();
    let mut r1 = (*v.rules).clone();
    r1.add_meter(Meter::new(1, flags::PKTPS, &[(BandKind::Drop, 10, 0)], 0).unwrap())
        .unwrap();
    v.rules = Arc::new(r1);
    let t = run2(&r0, &others, &tcp_key());
    match t.actions.as_slice() {
        [DpAction::HeldMeter(m), DpAction::Output(p)] => {
            assert_eq!(m.0.id, 1);
            assert_eq!(*p, dp_port(1, 5));
            assert!(Arc::ptr_eq(
                &m.0,
                others[1].as_ref().unwrap().rules.meter(1).unwrap()
            ));
        }
        a => panic!("{a:?}"),
    }
}

/// The bits a crossing clears and puts back are exactly the pipeline's
/// fields as the tunnel's and the connection tracker's own writers see
/// them: in_port, metadata, registers, actset_output, every tunnel field
/// and every field of a `ct` result.
#[test]
fn a_crossing_clears_the_pipeline_fields_and_no_other() {
    let mut k = FlowKey::default();
    k.words_mut().fill(!0);
    k.nw_frag = 0;
    sluice_packet::tunnel::TunnelMeta::default().write_key(&mut k);
    sluice_conntrack::CtResult::default().write_key(&mut k);
    k.in_port = 0;
    k.metadata = 0;
    k.regs = [0; sluice_packet::key::N_REGS];
    k.actset_output = 0;
    let mut cleared = FlowKey::default();
    for (c, w) in cleared.words_mut().iter_mut().zip(k.words()) {
        *c = !w;
    }
    // (nw_frag was not set: it is the packet's.)
    cleared.nw_frag = 0;
    let want = bridges::crossing_bits();
    for (i, (a, b)) in cleared.words().iter().zip(want.words()).enumerate() {
        assert_eq!(a, b, "word {i}");
    }
}
