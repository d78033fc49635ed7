//! `check_pkt_larger` in the real datapath: one megaflow serves packets of
//! every length, each taking the branch of its own length (Ethernet
//! padding not counted, as OVS's `check_pkt_len`), and every packet is
//! accounted for.

use std::sync::{Arc, Mutex};

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_packet::build::{Frame, L4};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

/// A UDP frame of `payload` bytes (42 + payload long), padded to `min`.
fn udp(payload: usize, min: usize) -> Vec<u8> {
    Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 7, dst: 53 })
        .payload(&vec![0xab; payload])
        .min_len(min)
        .build()
}

/// Runs `frames` in on port 1 through `rules`; what ports 2, 3 and 4 sent.
fn run(rules: &str, frames: Vec<Vec<u8>>) -> (Datapath, [Vec<Vec<u8>>; 3]) {
    let set = RuleSet::from_specs(&parse_flow_file(rules, None).unwrap(), 0);
    let frames: Frames = frames.into_iter().collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(set)).unwrap();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    let mut sent: Vec<Sent> = Vec::new();
    for p in 2..=4 {
        let (cap, s) = CapturePort::new();
        dp.add_port(p, Box::new(cap)).unwrap();
        sent.push(s);
    }
    dp.run(|| 10, |_| false).unwrap();
    dp.finish().unwrap();
    let out: Vec<Vec<Vec<u8>>> = sent.iter().map(|s| s.lock().unwrap().clone()).collect();
    (dp, out.try_into().unwrap())
}

/// Frames of 42 to 81 bytes, and two short ones padded to 60 and 90: the
/// length compared is 70.
fn frames() -> (Vec<Vec<u8>>, usize) {
    let mut f: Vec<Vec<u8>> = (0..40).map(|n| udp(n, 0)).collect();
    f.push(udp(2, 60));
    f.push(udp(2, 90));
    let longer = f.iter().filter(|f| f.len() > 70 && f.len() != 90).count();
    (f, longer)
}

/// The fork last in the list: the packets themselves go to their branch's
/// port, rewritten as the branch says.
#[test]
fn each_packet_takes_the_branch_of_its_length() {
    let (input, longer) = frames();
    let (dp, [p2, p3, p4]) = run(
        "table=0,in_port=1,actions=mod_dl_src:00:00:00:00:00:aa,check_pkt_larger(70)->NXM_NX_REG0[0],resubmit(,1)\n\
         table=1,reg0=1,actions=output:2\n\
         table=1,reg0=0,actions=mod_nw_tos:16,output:3\n",
        input.clone(),
    );
    assert_eq!(p2.len(), longer);
    assert_eq!(p3.len(), input.len() - longer);
    assert!(p4.is_empty());
    assert!(p2
        .iter()
        .all(|f| f.len() > 70 && f[6..12] == [0, 0, 0, 0, 0, 0xaa] && f[15] == 0));
    // The padded frames are short ones: both in the other branch, padding
    // and all, their TOS set.
    assert!(p3.iter().any(|f| f.len() == 90));
    assert!(p3
        .iter()
        .all(|f| f[6..12] == [0, 0, 0, 0, 0, 0xaa] && f[15] == 0x10));
    let st = dp.stats();
    assert_eq!(st.rx_packets, input.len() as u64);
    assert_eq!(st.forwarded, input.len() as u64);
    assert_eq!(st.dropped.iter().sum::<u64>(), 0);
    // One translation for all of them: the length is no part of the key.
    assert_eq!(st.upcalls, 1);
}

/// The fork in a resubmitted table, the caller sending after it: the
/// branch runs on a copy, the caller's output sends the packet as it was.
#[test]
fn a_fork_before_more_actions_runs_on_a_copy() {
    let (input, longer) = frames();
    let (dp, [p2, p3, p4]) = run(
        "table=0,in_port=1,actions=resubmit(,1),output:4\n\
         table=1,actions=check_pkt_larger(70)->NXM_NX_REG0[0],resubmit(,2)\n\
         table=2,reg0=1,actions=mod_dl_dst:00:00:00:00:00:bb,output:2\n\
         table=2,reg0=0,actions=output:3\n",
        input.clone(),
    );
    assert_eq!((p2.len(), p3.len()), (longer, input.len() - longer));
    assert!(p2.iter().all(|f| f[..6] == [0, 0, 0, 0, 0, 0xbb]));
    assert_eq!(p4, input, "the packets themselves, unchanged, in order");
    let st = dp.stats();
    assert_eq!(st.forwarded, input.len() as u64);
    assert_eq!(st.dropped.iter().sum::<u64>(), 0);
    assert_eq!(st.upcalls, 1);
}
