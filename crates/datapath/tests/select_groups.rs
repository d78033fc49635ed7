//! A select group chosen per packet by the datapath: one megaflow serves
//! every flow through the group, each flow stays on one bucket, buckets
//! take flows by weight, a bucket's header changes reach only its own
//! packets, and the group and bucket counters add up.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_classifier::action::Action;
use sluice_classifier::group::{Bucket, Group, GroupType, SelectMethod, GROUP_ANY, PORT_ANY};
use sluice_classifier::parse::{parse_flow, Require};
use sluice_classifier::table::Rule;
use sluice_classifier::RuleSet;
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_packet::build::{Frame, L4};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

const NEW_DST: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

fn bucket(weight: u16, actions: Vec<Action>) -> Bucket {
    Bucket {
        weight,
        watch_port: PORT_ANY,
        watch_group: GROUP_ANY,
        actions,
        counter: Arc::new(Rule::counter()),
    }
}

#[test]
fn a_select_group_is_chosen_per_packet_under_one_megaflow() {
    let mut rules = RuleSet::new();
    rules.add(
        &parse_flow("ip,actions=group:1", Require::Actions).unwrap(),
        0,
    );
    let set_dst = parse_flow(
        "actions=mod_dl_dst:02:00:00:00:00:99,output:3",
        Require::Actions,
    )
    .unwrap()
    .actions
    .to_vec();
    rules
        .add_group(Group {
            id: 1,
            kind: GroupType::Select,
            buckets: vec![bucket(1, vec![Action::Output(2)]), bucket(3, set_dst)],
            of_buckets: None,
            counter: Arc::new(Rule::counter()),
            created_us: 0,
            slots: Default::default(),
            // OVN's `selection_method=dp_hash`: OVS's 5-tuple hash, UDP
            // ports included (with no method OVS hashes symmetrically,
            // and leaves UDP ports out).
            selection: SelectMethod::DpHash(0),
        })
        .unwrap();
    let rules = Arc::new(rules);
    // 400 flows (UDP source ports), five packets each, interleaved.
    let (flows, rounds) = (400u16, 5);
    let mut frames = Frames::new();
    for _ in 0..rounds {
        for f in 0..flows {
            let frame = Frame::ipv4(
                [10, 1, 0, 1],
                [10, 2, 0, 1],
                L4::Udp {
                    src: 2000 + f,
                    dst: 53,
                },
            )
            .build();
            frames.push(&frame, 0);
        }
    }
    let total = u64::from(flows) * rounds;
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::clone(&rules)).unwrap();
    let (c2, sent2) = CapturePort::new();
    let (c3, sent3) = CapturePort::new();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(c2)).unwrap();
    dp.add_port(3, Box::new(c3)).unwrap();
    let mut clock = (0u64..).step_by(10);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.forwarded, total);
    assert!(st.rx_balanced(), "{st:?}");
    assert_eq!(dp.cache_occupancy().0, 1, "one megaflow for every flow");
    assert_eq!(st.upcalls, 1);
    let (sent2, sent3) = (sent2.lock().unwrap(), sent3.lock().unwrap());
    // Each flow on one bucket; bucket 1's packets carry its new address.
    let mut port_of: BTreeMap<[u8; 2], u32> = BTreeMap::new();
    for (port, sent) in [(2, &*sent2), (3, &*sent3)] {
        for f in sent.iter() {
            let sport = [f[34], f[35]];
            assert_eq!(*port_of.entry(sport).or_insert(port), port, "a flow moved");
            assert_eq!(f[..6] == NEW_DST, port == 3, "only bucket 1 rewrites");
        }
    }
    assert_eq!(port_of.len(), usize::from(flows));
    let share = sent3.len() as f64 / total as f64;
    assert!((0.65..0.85).contains(&share), "weight 3 of 4: {share}");
    // The group counts every packet; each bucket its own.
    dp.credit_rules();
    let g = rules.group(1).unwrap();
    assert_eq!(g.counter.counters().0, total);
    assert_eq!(g.buckets[0].counter.counters().0, sent2.len() as u64);
    assert_eq!(g.buckets[1].counter.counters().0, sent3.len() as u64);
}
