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

/// `ct(commit, exec(move:...))` (OVN's ACL label): the register's bits
/// as the packet has them when `ct` runs go into the commit's label, over
/// the `set_field`'s.
#[test]
fn ct_exec_moves_a_register_into_the_label() {
    let r = set(
        "tcp,actions=load:0x1234->NXM_NX_REG3[],ct(commit,exec(set_field:0x5->ct_label,move:NXM_NX_REG3[]->NXM_NX_CT_LABEL[96..127])),output:2\n",
    );
    let t = run(&r, &tcp_key());
    let Some(DpAction::Ct(req)) = t.actions.first() else {
        panic!("{}", dp(&t));
    };
    assert_eq!(req.label, Some((0x1234 << 96 | 5, u128::MAX)));
    let r = set(
        "tcp,actions=ct(commit,exec(move:NXM_NX_REG3[0..7]->NXM_NX_CT_MARK[8..15])),output:2\n",
    );
    let mut k = tcp_key();
    k.regs[3] = 0xab;
    let t = run(&r, &k);
    let Some(DpAction::Ct(req)) = t.actions.first() else {
        panic!("{}", dp(&t));
    };
    assert_eq!(req.mark, Some((0xab00, 0xff00)));
}

/// `push:` and `pop:` (OVN keeps `in_port` on the stack around a
/// resubmit): last in, first out; a pop from an empty stack changes
/// nothing; the text reads back as written.
#[test]
fn the_stack_is_last_in_first_out() {
    let r = set(
        "actions=push:NXM_NX_REG0[],push:NXM_NX_REG2[0..7],load:0x5->NXM_NX_REG0[],pop:NXM_NX_REG1[0..7],pop:NXM_NX_REG3[],pop:NXM_NX_REG4[],output:2\n",
    );
    let mut k = tcp_key();
    k.regs[0] = 7;
    k.regs[2] = 0x1ab;
    k.regs[4] = 9;
    let t = run(&r, &k);
    assert_eq!(t.drop, None);
    assert_eq!(&t.final_flow.regs[..5], &[5, 0xab, 0x1ab, 7, 9]);
    let text = "push:NXM_OF_IN_PORT[],set_field:65535->in_port,resubmit(,1),pop:NXM_OF_IN_PORT[]";
    let shown = set(&format!("actions={text}\n"))
        .rules()
        .next()
        .map(|r| crate::action::format_actions(&r.actions))
        .unwrap_or_default();
    assert!(shown.starts_with("push:NXM_OF_IN_PORT[],"), "{shown}");
    assert!(shown.ends_with(",pop:NXM_OF_IN_PORT[]"), "{shown}");
}

/// As OVS: a pipeline that goes forward through every table (OVN's goes
/// through some 70 in one pass, switch and router) is not "too deep";
/// 64 nested resubmits to the same or an earlier table are. The forward
/// chain translates in 1 MiB of stack (a quarter of [`STACK_BYTES`]).
#[test]
fn only_resubmits_backwards_count_against_the_depth() {
    let mut text = String::new();
    for t in 0..254 {
        text += &format!("table={t},actions=resubmit(,{})\n", t + 1);
    }
    text += "table=254,actions=output:2\n";
    let r = set(&text);
    let t = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || run(&r, &tcp_key()))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(t.drop, None);
    assert_eq!(t.actions, [DpAction::Output(2)]);
    assert_eq!(t.rules.len(), 255);

    let r = set("actions=load:1->NXM_NX_REG0[],resubmit(,1)\ntable=1,reg0=1,actions=load:2->NXM_NX_REG0[],resubmit(,0)\ntable=1,reg0=2,actions=load:1->NXM_NX_REG0[],resubmit(,0)\n");
    let t = run(&r, &tcp_key());
    assert_eq!(t.drop, Some(XlateDrop::RecursionTooDeep));
}
