//! Conjunctive matches answer as Open vSwitch 3.1 does: the packets and
//! rules of `ovs-appctl ofproto/trace` runs (2026-11-28), each with the
//! output OVS chose, and the megaflow it installed.

use sluice_classifier::{parse_flow_file, translate, RuleSet, Translation, XlateEnv};
use sluice_packet::FlowKey;

const RULES: &str = "\
priority=100,ip,nw_src=10.0.0.1,actions=conjunction(1,1/2)
priority=100,ip,nw_src=10.0.0.2,actions=conjunction(1,1/2)
priority=100,tcp,tp_dst=80,actions=conjunction(1,2/2)
priority=100,tcp,tp_dst=443,actions=conjunction(1,2/2),conjunction(2,1/2)
priority=100,ip,nw_dst=10.0.0.9,actions=conjunction(2,2/2)
priority=100,conj_id=1,ip,actions=output:2
priority=100,conj_id=2,ip,actions=output:3
priority=50,ip,actions=output:4
priority=0,actions=drop
";

fn key(proto: u8, src: u8, dst: u8, port: u16) -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: proto,
        nw_src: u32::from_be_bytes([10, 0, 0, src]),
        // (0: none given, as the traces had it.)
        nw_dst: if dst == 0 {
            0
        } else {
            u32::from_be_bytes([10, 0, 0, dst])
        },
        nw_ttl: 64,
        tp_dst: port,
        ..Default::default()
    }
}

fn run(set: &RuleSet, k: &FlowKey) -> (String, String) {
    let mut t = Translation::default();
    translate(
        XlateEnv {
            rules: set,
            ports: &[1, 2, 3, 4],
        },
        k,
        &mut t,
        false,
    );
    let out = t
        .actions
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut m = sluice_classifier::Match::exact(k);
    m.mask = t.wc;
    m.value = k.masked(&t.wc);
    (out, m.to_string())
}

#[test]
fn as_ovs_traces_them() {
    let set = RuleSet::from_specs(&parse_flow_file(RULES, None).unwrap(), 0);
    for (k, out, megaflow) in [
        // Both clauses of conjunction 1.
        (
            key(6, 1, 0, 80),
            "2",
            "tcp,in_port=1,nw_src=10.0.0.1,nw_dst=0.0.0.0/5,nw_frag=no,tp_dst=80",
        ),
        // The second clause alone: the ordinary rule below.
        (
            key(6, 3, 0, 80),
            "4",
            "tcp,in_port=1,nw_src=10.0.0.3,nw_dst=0.0.0.0/5,nw_frag=no,tp_dst=80",
        ),
        // Conjunctions 1 and 2 both complete: OVS looks up the first it
        // finds complete.
        (
            key(6, 2, 9, 443),
            "2",
            "tcp,in_port=1,nw_src=10.0.0.2,nw_dst=10.0.0.9,nw_frag=no,tp_dst=443",
        ),
        // Conjunction 2 alone.
        (
            key(6, 5, 9, 443),
            "3",
            "tcp,in_port=1,nw_src=10.0.0.4/30,nw_dst=10.0.0.9,nw_frag=no,tp_dst=443",
        ),
        // UDP: no second clause.
        (
            key(17, 1, 0, 80),
            "4",
            "udp,in_port=1,nw_src=10.0.0.1,nw_dst=0.0.0.0/5,nw_frag=no",
        ),
    ] {
        let (o, m) = run(&set, &k);
        assert_eq!(o, out, "{k:?}");
        assert_eq!(m, megaflow, "{k:?}");
    }
}

#[test]
fn a_clause_may_not_go_with_other_actions_and_counts_are_checked() {
    let err = |t: &str| parse_flow_file(t, None).unwrap_err().message;
    assert!(err("ip,actions=conjunction(1,1/2),output:1\n").contains("along with \"note\""));
    assert!(err("ip,actions=conjunction(1,1/1)\n").contains("at least 2 clauses"));
    assert!(err("ip,actions=conjunction(1,3/2)\n").contains("clause index"));
    assert!(err("ip,actions=clone(conjunction(1,1/2))\n").contains("cannot be in a clone"));
    assert!(parse_flow_file("ip,actions=note:01,conjunction(1,1/2)\n", None).is_ok());
}
