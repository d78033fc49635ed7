//! `learn`: the flow language both ways, OVS's add-time checks, the rule
//! built from a packet, the megaflow bits it reads, and the rule set's
//! add/refresh/modify, hand-over and `delete_learned`.

use std::sync::Arc;

use sluice_packet::key::FlowKey;
use sluice_packet::wire::ethernet::tci;

use crate::action::Action;
use crate::parse::{parse_flow, parse_flow_file, Require};
use crate::table::RuleSet;
use crate::xlate::{learned_rule, translate, Translation, XlateEnv};

fn learn_of(line: &str) -> crate::learn::Learn {
    let spec = parse_flow(line, Require::Actions).expect("parses");
    match &spec.actions[0] {
        Action::Learn(l) => (**l).clone(),
        a => panic!("not a learn: {a}"),
    }
}

fn key() -> FlowKey {
    let mut k = FlowKey {
        in_port: 3,
        dl_src: [2, 0, 0, 0, 0, 0x11],
        dl_dst: [2, 0, 0, 0, 0, 0x22],
        dl_type: 0x0800,
        nw_src: 0x0a00_0011,
        nw_dst: 0x0a00_0022,
        nw_proto: 17,
        ..Default::default()
    };
    k.vlan_tci[0] = tci::PRESENT | 10;
    k.vlan_tpid[0] = 0x8100;
    k
}

#[test]
fn prints_as_ovs_ofctl_does() {
    // What ovs-ofctl 3.1's dump-flows prints for this line.
    let line = "ip,actions=learn(table=2,idle_timeout=10,hard_timeout=20,priority=7,cookie=0x5,send_flow_rem,delete_learned,dl_type=0x800,NXM_OF_IP_SRC[],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],reg0[0..3]=5,in_port=3,vlan_tci=0x1007,load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:0x2a->reg2[],output:NXM_OF_IN_PORT[])";
    let ovs = "learn(table=2,idle_timeout=10,hard_timeout=20,priority=7,send_flow_rem,delete_learned,cookie=0x5,eth_type=0x800,NXM_OF_IP_SRC[],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],NXM_NX_REG0[0..3]=0x5,in_port=3,vlan_tci=0x1007,load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:0x2a->NXM_NX_REG2[],output:NXM_OF_IN_PORT[])";
    assert_eq!(learn_of(line).to_string(), ovs);
    // Defaults: table 1, priority 32768; and the print reads back.
    let l = learn_of("actions=learn(NXM_OF_VLAN_TCI[0..11],dl_type=0x800,nw_src=1.2.3.4)");
    assert_eq!(
        l.to_string(),
        "learn(table=1,NXM_OF_VLAN_TCI[0..11],eth_type=0x800,ip_src=1.2.3.4)"
    );
    assert_eq!(learn_of(&format!("ip,actions={ovs}")).to_string(), ovs);
}

#[test]
fn refuses_what_ovs_refuses_at_add_time() {
    let err = |line: &str| parse_flow(line, Require::Actions).unwrap_err().message;
    // A source read from the packet needs the rule to match its protocol.
    assert!(
        err("actions=learn(dl_type=0x800,NXM_OF_IP_SRC[])").contains("lacks correct prerequisites")
    );
    // A learned match on an IP field needs eth_type set before it.
    assert!(err("ip,actions=learn(NXM_OF_IP_SRC[])").contains("lacks its prerequisites"));
    assert!(err("actions=learn(table=255,NXM_OF_ETH_SRC[])").contains("255"));
    assert!(err("actions=learn(NXM_OF_ETH_SRC[]=NXM_OF_IP_SRC[])").contains("bit widths"));
    assert!(err("actions=learn(vlan_tci=0x1007/0x1fff)").contains("wildcards"));
    assert!(err("actions=learn(tun_tos=7)").contains("no NXM or OXM form"));
    assert!(err("actions=learn(bogus=1)").contains("unknown keyword"));
    assert!(
        err("actions=learn(result_dst=NXM_NX_REG0[0..1],NXM_OF_ETH_SRC[])").contains("single bit")
    );
    assert!(
        err("actions=learn(result_dst=NXM_OF_TCP_DST[0],NXM_OF_ETH_SRC[])")
            .contains("prerequisites")
    );
}

/// `limit` and `result_dst`, as OVS's sandbox did with these rules and
/// packets from MACs 1, 2, 3, 1: the first two learned (result 1, port 3),
/// the third over the limit (result 0, port 4, nothing learned), the
/// fourth a refresh (result 1).
#[test]
fn a_limit_stops_learning_and_result_dst_says_so() {
    let rules = parse_flow_file(
        "table=0,actions=learn(table=1,limit=2,result_dst=NXM_NX_REG0[0],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,2)\n\
         table=2,reg0=1,actions=output:3\ntable=2,reg0=0,actions=output:4\n",
        None,
    )
    .unwrap();
    let mut set = RuleSet::from_specs(&rules, 0);
    assert_eq!(
        crate::action::format_actions(&set.table(0).next().unwrap().actions),
        "learn(table=1,limit=2,result_dst=NXM_NX_REG0[0],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,2)"
    );
    let mut outs = Vec::new();
    for m in [1u8, 2, 3, 1] {
        let k = FlowKey {
            in_port: 1,
            dl_src: [2, 0, 0, 0, 0, m],
            dl_dst: [0xff; 6],
            dl_type: 0x88b5,
            ..Default::default()
        };
        let mut t = Translation::default();
        let env = XlateEnv::single(&set, &[1, 2, 3, 4]);
        translate(env, &k, &mut t, false);
        outs.push(format!("{:?}", t.actions));
        for (_, spec) in &t.learned {
            set.learn(spec, 1);
        }
    }
    assert_eq!(
        outs,
        ["[Output(3)]", "[Output(3)]", "[Output(4)]", "[Output(3)]"]
    );
    assert_eq!(set.table(1).count(), 2);
    // Put past its limit all the same (several translated in one batch):
    // the rule set keeps the limit.
    let mut over = learned_rule(
        &learn_of("actions=learn(table=1,limit=2,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])"),
        &key(),
    );
    over.learn_limit = 2;
    assert!(set.learn(&over, 2).is_none());
    assert_eq!(set.table(1).count(), 2);
}

/// `fin_idle_timeout`/`fin_hard_timeout`: the learned rule starts with
/// `fin_timeout(...)`, as OVS's learn_execute puts it.
#[test]
fn fin_timeouts_become_the_learned_rules_first_action() {
    let rules = parse_flow_file(
        "tcp,actions=learn(table=1,fin_idle_timeout=3,fin_hard_timeout=4,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])\n",
        None,
    )
    .unwrap();
    let Action::Learn(l) = &rules[0].actions[0] else {
        panic!("a learn")
    };
    assert_eq!(
        l.to_string(),
        "learn(table=1,fin_idle_timeout=3,fin_hard_timeout=4,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])"
    );
    let key = FlowKey {
        in_port: 2,
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_type: 0x0800,
        nw_proto: 6,
        ..Default::default()
    };
    let spec = crate::xlate::learned_rule(l, &key);
    assert_eq!(
        crate::action::format_actions(&spec.actions),
        "fin_timeout(idle_timeout=3,hard_timeout=4),output:2"
    );
}

#[test]
fn builds_the_rule_from_the_packet_and_reads_what_it_took() {
    let rules = parse_flow_file(
        "ip,actions=learn(table=2,priority=7,hard_timeout=20,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],eth_type=0x800,NXM_OF_IP_SRC[0..7]=0x5,load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],output:NXM_OF_IN_PORT[]),output:1\n",
        None,
    )
    .unwrap();
    let set = RuleSet::from_specs(&rules, 0);
    let mut t = Translation::default();
    let env = XlateEnv::single(&set, &[1, 2, 3]);
    translate(env, &key(), &mut t, false);
    assert_eq!(t.learned.len(), 1);
    let s = &t.learned[0].1;
    assert_eq!((s.table, s.priority, s.hard_timeout), (2, 7, 20));
    assert_eq!(
        s.matcher.to_string(),
        "ip,vlan_tci=0x000a/0x0fff,dl_dst=02:00:00:00:00:11,nw_src=0.0.0.5/0.0.0.255"
    );
    assert_eq!(
        crate::action::format_actions(&s.actions),
        "load:0x3->NXM_NX_REG0[0..15],output:3"
    );
    // The megaflow depends on every bit the learned rule took.
    assert_eq!(t.wc.dl_src, [0xff; 6]);
    assert_eq!(t.wc.in_port, u32::MAX);
    assert_eq!(t.wc.vlan_tci[0] & tci::VID_MASK, tci::VID_MASK);
    assert_eq!(t.wc.nw_src, 0, "a constant reads nothing");
}

#[test]
fn learn_adds_refreshes_and_modifies() {
    let rules = parse_flow_file(
        "actions=learn(table=1,hard_timeout=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])\n",
        None,
    )
    .unwrap();
    let mut set = RuleSet::from_specs(&rules, 0);
    let l = match &set.iter().next().unwrap().actions[0] {
        Action::Learn(l) => (**l).clone(),
        _ => unreachable!(),
    };
    let mut k = key();
    let spec = learned_rule(&l, &k);
    let v = set.version();
    let added = set.learn(&spec, 1_000_000).expect("added");
    assert!(set.version() > v);
    assert_eq!(set.len(), 2);
    // The same rule again: a refresh (the hard timeout starts again).
    assert!(set.refresh_learned(&spec, 9_000_000));
    assert!(set.learn(&spec, 9_000_000).is_none());
    assert!(
        !added.expired(15_000_000),
        "refreshed at 9 s: lives to 19 s"
    );
    assert!(added.expired(19_000_001));
    // The MAC moves: the rule keeps its identity and counters, new actions.
    added.credit(5, 500, 2_000_000);
    k.in_port = 2;
    let moved = set
        .learn(&learned_rule(&l, &k), 10_000_000)
        .expect("modified");
    assert_eq!(moved.id, added.id);
    assert_eq!(moved.counters(), (5, 500));
    assert_eq!(crate::action::format_actions(&moved.actions), "output:2");
    assert_eq!(set.len(), 2);
}

#[test]
fn a_thread_keeps_what_the_control_plane_had_not_taken() {
    let rules = parse_flow_file("actions=learn(NXM_OF_ETH_SRC[])\n", None).unwrap();
    let master = RuleSet::from_specs(&rules, 0);
    master.take_learned();
    let l = match &master.iter().next().unwrap().actions[0] {
        Action::Learn(l) => (**l).clone(),
        _ => unreachable!(),
    };
    // A PMD's copy learns a rule and hands it over.
    let mut mine = master.clone();
    let r = mine.learn(&learned_rule(&l, &key()), 1).unwrap();
    let mut pending = mine.queue_learned(vec![Arc::clone(&r)]);
    assert_eq!(pending.len(), 1);
    // A version the control plane made before taking it: the PMD puts
    // its rule back.
    let mut early = master.clone();
    assert!(early.keep_learned(&mut pending));
    assert_eq!(early.len(), 2);
    assert_eq!(pending.len(), 1);
    // The control plane takes it (the same rule, counters and all) and
    // a later version holds it: the PMD lets go.
    let mut master = master;
    assert_eq!(master.adopt_learned(), 1);
    assert!(master.iter().any(|x| Arc::ptr_eq(x, &r)));
    let mut later = master.clone();
    assert!(!later.keep_learned(&mut pending));
    assert!(pending.is_empty());
    // Without a control plane nothing is queued.
    let alone = RuleSet::from_specs(&rules, 0);
    assert!(alone.queue_learned(vec![r]).is_empty());
}

#[test]
fn delete_learned_goes_with_the_last_rule_that_learns_there() {
    use crate::table::Selection;
    let text = "priority=1,actions=learn(table=1,cookie=0x7,delete_learned,NXM_OF_ETH_SRC[])\n\
                priority=2,ip,actions=learn(table=1,cookie=0x7,delete_learned,NXM_OF_ETH_DST[])\n\
                table=1,cookie=0x7,dl_src=02:00:00:00:00:01,actions=drop\n\
                table=1,cookie=0x8,dl_src=02:00:00:00:00:02,actions=drop\n";
    let mut set = RuleSet::from_specs(&parse_flow_file(text, None).unwrap(), 0);
    let sel = |line: &str| parse_flow(line, Require::NoActions).unwrap();
    let gone = set.delete(&sel("priority=1"), Selection::Strict, false);
    assert_eq!(
        gone.len(),
        1,
        "another rule still learns into table 1 with cookie 0x7"
    );
    let gone = set.delete(&sel("priority=2,ip"), Selection::Strict, false);
    assert_eq!(gone.len(), 2, "the learner and what it learned");
    assert_eq!(gone[1].cookie, 7);
    assert_eq!(set.len(), 1, "another cookie's rule stays");
}

/// Beside learn, what OVS flow files carry that changes no byte here:
/// `sample` (no IPFIX exporter: OVS without one does nothing either) and
/// the QoS queue actions (no queues), printed as ovs-ofctl prints them.
#[test]
fn sample_and_queues_print_as_ovs_and_change_nothing() {
    let spec = parse_flow(
        "ip,actions=sample(probability=1,egress),set_queue:5,output:2,pop_queue,enqueue:4:7",
        Require::Actions,
    )
    .unwrap();
    assert_eq!(
        crate::action::format_actions(&spec.actions),
        "sample(probability=1,collector_set_id=0,obs_domain_id=0,obs_point_id=0,egress),set_queue:5,output:2,pop_queue,set_queue:7,output:4,pop_queue"
    );
    let err = |line: &str| parse_flow(line, Require::Actions).unwrap_err().message;
    assert!(err("actions=sample(collector_set_id=1)").contains("non-zero \"probability\""));
    assert!(err("actions=sample(probability=0)").contains("invalid probability"));
    assert!(err("actions=sample(probability=1,bogus=2)").contains("invalid key"));
    let set = RuleSet::from_specs(&[spec], 0);
    let mut t = Translation::default();
    translate(XlateEnv::single(&set, &[1, 2, 3, 4]), &key(), &mut t, false);
    let out: Vec<String> = t.actions.iter().map(|a| a.to_string()).collect();
    assert_eq!(out, ["2", "4"]);
}
