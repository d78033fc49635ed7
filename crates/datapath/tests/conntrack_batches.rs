//! The `ct` action on whole batches: packets read first, their
//! connections prefetched, then tracked (what a large table takes) give
//! every packet the state one-at-a-time tracking gives it.

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig};
use sluice_packet::build::{Frame, L4};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

/// New connections committed and sent to port 2, established ones to
/// port 3; a DNAT on the way for TCP to 10.0.0.9.
const FIREWALL: &str = "\
table=0,ip,ct_state=-trk,actions=ct(table=1,zone=5,nat)
table=1,priority=20,tcp,ct_state=+trk+new,nw_dst=10.0.0.9,actions=ct(commit,zone=5,nat(dst=10.0.0.2)),output:2
table=1,priority=10,ip,ct_state=+trk+new,actions=ct(commit,zone=5),output:2
table=1,priority=10,ip,ct_state=+trk+est,actions=output:3
table=1,priority=0,actions=drop
";

fn frames(rounds: usize) -> Frames {
    let mut out = Vec::new();
    for _ in 0..rounds {
        for i in 0..300u16 {
            let l4 = if i % 2 == 0 {
                L4::Udp {
                    src: 1000 + i,
                    dst: 53,
                }
            } else {
                L4::Tcp {
                    src: 1000 + i,
                    dst: 80,
                    flags: 0x10,
                }
            };
            let dst = if i % 4 == 1 { 9 } else { 2 };
            out.push(Frame::ipv4([10, 0, 0, 1], [10, 0, 0, dst], l4).build());
        }
    }
    out.into_iter().collect()
}

/// What ports 2 and 3 got with batches prefetching from `prefetch_from`
/// connections on.
fn run(prefetch_from: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file(FIREWALL, None).unwrap(),
        0,
    ));
    rules.conntrack().set_prefetch_from(prefetch_from);
    let mut dp = Datapath::new(DatapathConfig::default(), rules).unwrap();
    let (new, got_new) = CapturePort::new();
    let (est, got_est) = CapturePort::new();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames(3), false)))
        .unwrap();
    dp.add_port(2, Box::new(new)).unwrap();
    dp.add_port(3, Box::new(est)).unwrap();
    let mut clock = (0u64..).step_by(10);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.rx_packets, 900);
    assert!(st.rx_balanced(), "{st:?}");
    let a = got_new.lock().unwrap().clone();
    let b = got_est.lock().unwrap().clone();
    (a, b)
}

#[test]
fn batches_that_prefetch_track_as_one_at_a_time() {
    let (new, est) = run(0);
    // Each connection new once, established twice; the DNATed ones
    // leave translated.
    // Each connection's first packet is new; after it the TCP ones are
    // established and the UDP ones, never replied to, new again (as OVS
    // 3.1's other_conn_update has them): 300 + 2 x 150 new, 2 x 150
    // established.
    assert_eq!(new.len(), 600);
    assert_eq!(est.len(), 300);
    let dnat = Frame::ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        L4::Tcp {
            src: 1001,
            dst: 80,
            flags: 0x10,
        },
    )
    .build();
    assert!(new.contains(&dnat) && est.contains(&dnat));
    assert_eq!(run(u64::MAX), (new, est));
}
