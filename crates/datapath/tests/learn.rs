//! `learn` in the real datapath: a rule learned from one packet forwards
//! the next (packet-out and upcall alike), and what a thread learned stays
//! in its rules until the control plane's rules hold it.

mod common;

use std::sync::Arc;

use sluice_classifier::parse::{parse_flow, Require};
use sluice_classifier::table::Selection;
use sluice_classifier::{parse_flow_file, Action, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

use common::{frame, run_to_end};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

/// OVS's learning switch written with `learn`.
const LEARNING: &str = "table=0,actions=learn(table=1,hard_timeout=60,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)\n\
    table=1,priority=0,actions=FLOOD\n";

#[test]
fn a_learned_rule_forwards_the_next_packet_and_stays_until_the_control_plane_has_it() {
    let master = RuleSet::from_specs(&parse_flow_file(LEARNING, None).unwrap(), 0);
    // A control plane takes what the thread learns.
    master.take_learned();
    let frames: Frames = vec![frame(B, A, 1), frame(B, A, 2)].into_iter().collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(master.clone())).unwrap();
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let mut caps = Vec::new();
    for p in 2..=4 {
        let (cap, sent) = CapturePort::new();
        dp.add_port(p, Box::new(cap)).unwrap();
        caps.push(sent);
    }
    // B speaks first, from port 2 (a packet-out through the tables):
    // flooded, and learned.
    let resubmit = vec![Action::Resubmit {
        in_port: None,
        table: Some(0),
    }];
    dp.packet_out(&frame(A, B, 0), 2, &resubmit, 1).unwrap();
    assert_eq!(
        dp.rules().len(),
        3,
        "{:?}",
        dp.rules().iter().collect::<Vec<_>>()
    );
    run_to_end(&mut dp);
    let sent: Vec<Vec<Vec<u8>>> = caps.iter().map(|c| c.lock().unwrap().clone()).collect();
    // A's packets to B went to port 2 alone; B's first was flooded.
    assert_eq!(sent[0], vec![frame(B, A, 1), frame(B, A, 2)]);
    assert_eq!(sent[1], vec![frame(A, B, 0)]);
    assert_eq!(sent[2], vec![frame(A, B, 0)]);
    let learned: Vec<String> = dp
        .rules()
        .table(1)
        .map(|r| {
            format!(
                "{} {}",
                r.matcher,
                sluice_classifier::action::format_actions(&r.actions)
            )
        })
        .collect();
    assert_eq!(
        learned,
        [
            "dl_dst=02:00:00:00:00:0b output:2",
            "dl_dst=02:00:00:00:00:0a output:1",
            " FLOOD"
        ]
    );
    assert_eq!(dp.stats().learned, 2);
    // The control plane's rules from before: the thread keeps its own.
    dp.set_rules(Arc::new(master.clone()));
    assert_eq!(dp.rules().len(), 4);
    // The control plane takes them (the same rules) and publishes.
    let mut taken = master.clone();
    assert_eq!(taken.adopt_learned(), 2);
    dp.set_rules(Arc::new(taken.clone()));
    assert_eq!(dp.rules().len(), 4);
    // Then deletes one: it stays deleted.
    let sel = parse_flow("table=1,dl_dst=02:00:00:00:00:0a", Require::NoActions).unwrap();
    assert_eq!(taken.delete(&sel, Selection::Loose, false).len(), 1);
    dp.set_rules(Arc::new(taken));
    assert_eq!(dp.rules().len(), 3);
}
