//! `fin_timeout` in the real datapath: a TCP connection's FIN lowers its
//! rule's timeouts (the first FIN by the upcall, later ones through the
//! megaflow they share), the other segments do not, as in OVS.

mod common;

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

use common::run_to_end;

/// An Ethernet/IPv4/TCP frame from 10.0.0.1:1000 to 10.0.0.2:80 with these
/// TCP flags.
fn tcp(flags: u8, seq: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, seq, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x03, 0xe8, 0, 80, 0, 0, 0, seq, 0, 0, 0, 0, 0x50, flags]);
    f.extend_from_slice(&[0x20, 0, 0, 0, 0, 0]);
    f
}

fn run(frames: Vec<Vec<u8>>) -> ((u16, u16), usize) {
    let rules = "priority=5,tcp,actions=fin_timeout(idle_timeout=7,hard_timeout=9),output:2\n";
    let set = RuleSet::from_specs(&parse_flow_file(rules, None).unwrap(), 0);
    let frames: Frames = frames.into_iter().collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(set)).unwrap();
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(2, Box::new(cap)).unwrap();
    run_to_end(&mut dp);
    let timeouts = dp.rules().table(0).next().unwrap().timeouts();
    let out = sent.lock().unwrap().len();
    (timeouts, out)
}

#[test]
fn a_fin_lowers_the_rules_timeouts_and_other_segments_do_not() {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN_ACK: u8 = 0x11;
    const RST: u8 = 0x04;
    assert_eq!(
        run(vec![tcp(SYN, 1), tcp(ACK, 2), tcp(ACK, 3)]),
        ((0, 0), 3)
    );
    assert_eq!(
        run(vec![tcp(SYN, 1), tcp(ACK, 2), tcp(FIN_ACK, 3), tcp(ACK, 4)]),
        ((7, 9), 4)
    );
    assert_eq!(run(vec![tcp(ACK, 1), tcp(RST, 2)]), ((7, 9), 2));
}
