//! `check_pkt_larger`: the translation forks into the two branches of a
//! `check_pkt_len` datapath action, as Open vSwitch 3.1's does (the
//! expected lists are what `ovs-appctl ofproto/trace` printed for these
//! rules, in Sluice's notation).

use super::*;
use crate::parse::parse_flow_file;

use super::tests::{run, set, tcp_key};

fn dp(t: &Translation) -> String {
    crate::dpaction::format_dp_actions(&t.actions)
}

/// The rest of the action list, a resubmit included, runs once per
/// answer; a change before the fork is committed before it; every rule
/// of both branches is credited.
#[test]
fn the_rest_of_the_list_runs_in_both_branches() {
    let r = set("table=0,in_port=1,actions=mod_dl_src:00:00:00:00:00:aa,check_pkt_larger(100)->NXM_NX_REG0[0],resubmit(,1)\n\
                 table=1,reg0=0x1,actions=output:2\n\
                 table=1,reg0=0x0,actions=mod_nw_tos:16,output:3\n");
    let t = run(&r, &tcp_key());
    assert_eq!(
        dp(&t),
        "set(eth(src=00:00:00:00:00:aa)),check_pkt_len(size=100,gt(2),le(set(ip(tos=0x10/0xfc)),3))"
    );
    assert_eq!(t.rules.len(), 3);
    assert_eq!(t.drop, None);
    // The length is no field: the megaflow does not depend on the
    // register either.
    assert_eq!(t.wc.regs, [0; sluice_packet::key::N_REGS]);
    let trace = t.trace.unwrap().join("\n");
    assert!(
        trace.contains("packets longer than 100 bytes: NXM_NX_REG0[0] = 1"),
        "{trace}"
    );
    assert!(
        trace.contains("packets of at most 100 bytes: NXM_NX_REG0[0] = 0"),
        "{trace}"
    );
}

/// In a resubmitted table, the fork ends that table's list; the list
/// that resubmitted goes on after it, from the flow as it was before the
/// fork, as in OVS.
#[test]
fn the_caller_goes_on_after_the_fork() {
    let r = set(
        "table=0,in_port=1,actions=resubmit(,1),mod_dl_dst:00:00:00:00:00:bb,output:3\n\
                 table=1,actions=check_pkt_larger(80)->NXM_NX_REG0[0],resubmit(,2)\n\
                 table=2,reg0=1,actions=mod_dl_src:00:00:00:00:00:11,output:2\n\
                 table=2,reg0=0,actions=output:3\n",
    );
    let t = run(&r, &tcp_key());
    assert_eq!(
        dp(&t),
        "check_pkt_len(size=80,gt(set(eth(src=00:00:00:00:00:11)),2),le(3)),set(eth(dst=00:00:00:00:00:bb)),3"
    );
    assert_eq!(t.final_flow.regs[0], 0);
}

/// A branch may hold a `ct` (each branch its own recirculation); not an
/// action that needs the packet parsed again after a pop of MPLS: the
/// translation fails with a counted reason. Forks nested past the action
/// limit fail as any list too long does, without building them all.
#[test]
fn what_a_branch_can_hold() {
    let r = set(
        "actions=check_pkt_larger(100)->NXM_NX_REG0[0],ct(table=1)\ntable=1,actions=output:2\n",
    );
    let t = run(&r, &tcp_key());
    assert_eq!(t.drop, None);
    let [DpAction::CheckPktLen { gt, le, .. }] = &t.actions[..] else {
        panic!("{}", dp(&t));
    };
    for b in [gt, le] {
        assert!(
            matches!(b[..], [DpAction::Ct(_), DpAction::Recirc(_)]),
            "{}",
            dp(&t)
        );
    }
    let r = set(
        "mpls,actions=check_pkt_larger(100)->NXM_NX_REG0[0],pop_mpls:0x0800,dec_ttl,output:2\n",
    );
    let mpls = FlowKey {
        in_port: 1,
        dl_type: 0x8847,
        ..Default::default()
    };
    let t = run(&r, &mpls);
    assert_eq!(t.drop, Some(XlateDrop::Recirc), "{}", dp(&t));
    let mut acts = String::new();
    for i in 0..16 {
        acts += &format!(
            "check_pkt_larger({})->NXM_NX_REG0[{i}],output:2,output:3,",
            60 + i
        );
    }
    let r = set(&format!("actions={acts}output:4\n"));
    let t = run(&r, &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::TooManyActions));
}

/// Parsed and printed as ovs-ofctl does; a destination of more than one
/// bit, or one no action may write, is refused.
#[test]
fn parse_and_print() {
    let r = set("actions=check_pkt_larger(1500)->reg3[7],output:2\n");
    assert_eq!(
        crate::action::format_actions(&r.rules().next().unwrap().actions),
        "check_pkt_larger(1500)->NXM_NX_REG3[7],output:2"
    );
    for bad in [
        "actions=check_pkt_larger(1500)->NXM_NX_REG0[0..1]",
        "actions=check_pkt_larger(1500)",
        "actions=check_pkt_larger(70000)->NXM_NX_REG0[0]",
        "actions=check_pkt_larger(x)->NXM_NX_REG0[0]",
        "actions=check_pkt_larger(100)->NXM_OF_ETH_TYPE[0]",
    ] {
        assert!(parse_flow_file(bad, None).is_err(), "{bad}");
    }
}
