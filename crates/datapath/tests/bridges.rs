//! Several bridges in the real datapath: a packet in on the first
//! bridge's port crosses a patch port into the second, whose `learn`
//! action adds a rule to the second bridge's rules (not the first's) and
//! whose NORMAL learns the source on its patch port; frames leave by the
//! second bridge's port, numbered in the datapath's space. Every packet is
//! accounted for.

mod common;

use std::sync::Arc;

use sluice_classifier::xlate::dp_port;
use sluice_classifier::{parse_flow_file, PatchPort, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

use common::{frame, run_to_end};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

#[test]
fn a_patch_crossing_learns_in_the_peer_bridge_and_leaves_by_its_port() {
    // Bridge 0: port 1 in, port 3 a patch to bridge 1's port 1.
    let mut first = RuleSet::from_specs(
        &parse_flow_file("in_port=1,actions=output:3\n", None).unwrap(),
        0,
    );
    first.set_patch_ports(vec![PatchPort {
        port: 3,
        peer: 1,
        peer_port: 1,
    }]);
    first.take_learned();
    // Bridge 1: learns where sources are, then NORMAL out of port 2.
    let mut second = RuleSet::from_specs(
        &parse_flow_file(
            "table=0,actions=learn(table=1,hard_timeout=60,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),NORMAL\n",
            None,
        )
        .unwrap(),
        0,
    );
    second.share_datapath_state(&first);
    second.set_patch_ports(vec![PatchPort {
        port: 1,
        peer: 0,
        peer_port: 3,
    }]);
    second.take_learned();
    let frames: Frames = vec![frame(B, A, 1), frame(B, A, 2)].into_iter().collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(first)).unwrap();
    dp.set_bridge_rules(1, Some(Arc::new(second)));
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(dp_port(1, 2), Box::new(cap)).unwrap();
    run_to_end(&mut dp);
    // Flooded by the second bridge's NORMAL: out of its port 2 alone (not
    // back into the patch).
    assert_eq!(*sent.lock().unwrap(), vec![frame(B, A, 1), frame(B, A, 2)]);
    // The learned rule is the second bridge's.
    let second = dp.bridge_rules(1).unwrap();
    assert_eq!(second.table(1).count(), 1);
    assert_eq!(dp.bridge_rules(0).unwrap().table(1).count(), 0);
    // NORMAL learned A on the second bridge's patch port, in its table.
    let macs = second.bridge().macs.show(second.bridge().now_ms());
    assert!(
        macs.lines()
            .any(|l| l.split_whitespace().next() == Some("1") && l.contains("02:00:00:00:00:0a")),
        "{macs}"
    );
    let first_macs = dp.bridge_rules(0).unwrap().bridge().macs.show(0);
    assert!(!first_macs.contains("02:00:00:00:00:0a"), "{first_macs}");
    let st = dp.stats();
    assert!(st.rx_balanced() && st.tx_balanced(), "{st:?}");
    assert_eq!(st.rx_packets, 2);

    // The second bridge gone: its ports' packets have no bridge.
    dp.set_bridge_rules(1, None);
    assert!(dp.bridge_rules(1).is_none());
}
