//! Recirculation through the real datapath: a pop exposes headers the
//! first pass did not parse, the packet goes through the caches again
//! with its recirculation id, and every packet keeps exactly one fate.

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig, DropReason, MAX_RECIRC_DEPTH};
use sluice_packet::build::{Frame, L4};
use sluice_port::capture::CapturePort;
use sluice_port::null::NullPort;
use sluice_port::replay::{Frames, ReplayPort};

fn rules(text: &str) -> Arc<RuleSet> {
    Arc::new(RuleSet::from_specs(
        &parse_flow_file(text, None).unwrap(),
        0,
    ))
}

fn ipv4(dst: u8, sport: u16) -> Frame {
    Frame::ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, dst],
        L4::Udp {
            src: sport,
            dst: 53,
        },
    )
}

/// `inner` under MPLS labels (outermost first), each `(label, ttl)`.
fn under_labels(inner: &[u8], labels: &[(u32, u8)]) -> Vec<u8> {
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&0x8847u16.to_be_bytes());
    for (i, &(label, ttl)) in labels.iter().enumerate() {
        let bos = u32::from(i + 1 == labels.len()) << 8;
        f.extend_from_slice(&(label << 12 | bos | u32::from(ttl)).to_be_bytes());
    }
    f.extend_from_slice(&inner[14..]);
    f
}

#[test]
fn pop_mpls_then_a_match_on_the_inner_header_recirculates() {
    let text = "table=0,mpls,mpls_label=100,actions=pop_mpls:0x0800,goto_table:1\n\
                table=1,ip,nw_dst=10.0.0.2,actions=set_field:16->ip_dscp,output:2\n\
                table=1,priority=0,actions=drop\n";
    // Five flows to 10.0.0.2 and five to 10.0.0.3, twice each: the second
    // round hits the caches in both passes.
    let frames: Frames = (0..20)
        .map(|i| {
            let dst = if i % 2 == 0 { 2 } else { 3 };
            under_labels(&ipv4(dst, 1000 + i % 10).build(), &[(100, 64)])
        })
        .collect();
    let mut dp = Datapath::new(DatapathConfig::default(), rules(text)).unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(cap)).unwrap();
    let mut clock = (0u64..).step_by(10);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.rx_packets, 20);
    assert_eq!(st.recirculations, 20, "each packet passes twice");
    assert_eq!(st.forwarded, 10);
    assert_eq!(st.dropped_total(), 10);
    assert!(st.rx_balanced(), "{st:?}");
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 10);
    for (n, got) in sent.iter().enumerate() {
        let sport = 1000 + (2 * n as u16) % 10;
        let want = ipv4(2, sport).tos(16 << 2).build();
        assert_eq!(got, &want, "popped and rewritten");
    }
}

#[test]
fn a_recirculation_loop_ends_at_the_depth_limit_counted() {
    // Every pass pops one label and starts over in table 0: with more
    // labels than the limit allows, the packet is dropped there.
    let text = "mpls,actions=pop_mpls:0x8847,resubmit(,0)\n";
    let labels: Vec<(u32, u8)> = (0..10).map(|i| (200 + i, 64)).collect();
    let frames: Frames = (0..3)
        .map(|i| under_labels(&ipv4(2, i).build(), &labels))
        .collect();
    let mut dp = Datapath::new(DatapathConfig::default(), rules(text)).unwrap();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(NullPort::new())).unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.dropped_by(DropReason::RecircLimit), 3);
    assert_eq!(st.recirculations, 3 * u64::from(MAX_RECIRC_DEPTH));
    assert!(st.rx_balanced(), "{st:?}");
}

#[test]
fn pushing_and_popping_pbb_round_trips_through_a_second_pass() {
    // Port 1's frames get a PBB encapsulation on the way to port 2; port
    // 3's PBB frames are stripped and forwarded by their inner header.
    let text = "in_port=1,actions=push_pbb:0x88e7,set_field:4660->pbb_isid,output:2\n\
                in_port=3,dl_type=0x88e7,pbb_isid=4660,actions=pop_pbb,goto_table:1\n\
                table=1,ip,nw_dst=10.0.0.2,actions=output:4\n";
    let inner = ipv4(2, 7).build();
    let mut pbb = inner[..12].to_vec();
    pbb.extend_from_slice(&0x88e7u16.to_be_bytes());
    pbb.extend_from_slice(&4660u32.to_be_bytes());
    pbb.extend_from_slice(&inner);
    let mut dp = Datapath::new(DatapathConfig::default(), rules(text)).unwrap();
    let (cap2, sent2) = CapturePort::new();
    let (cap4, sent4) = CapturePort::new();
    dp.add_port(
        1,
        Box::new(ReplayPort::new(
            "a",
            std::iter::once(inner.clone()).collect(),
            false,
        )),
    )
    .unwrap();
    dp.add_port(2, Box::new(cap2)).unwrap();
    dp.add_port(
        3,
        Box::new(ReplayPort::new(
            "b",
            std::iter::once(pbb.clone()).collect(),
            false,
        )),
    )
    .unwrap();
    dp.add_port(4, Box::new(cap4)).unwrap();
    dp.run(|| 0, |_| false).unwrap();
    assert_eq!(sent2.lock().unwrap().as_slice(), &[pbb]);
    assert_eq!(sent4.lock().unwrap().as_slice(), &[inner]);
    let st = dp.stats();
    assert_eq!((st.rx_packets, st.forwarded, st.recirculations), (2, 2, 1));
    assert!(st.rx_balanced());
}

#[test]
fn icmp_under_a_label_comes_out_whole() {
    // A short frame (54 bytes, as os-ken's tester sends it): popped, then
    // matched on its ICMP code in the next table.
    let text = "table=0,mpls,actions=pop_mpls:0x0800,goto_table:1\n\
                table=1,icmp,icmp_code=0,actions=output:2\n";
    let inner = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Icmp { ty: 8, code: 0 })
        .payload(&[1, 2, 3, 4, 5, 6, 7, 8])
        .build();
    let frame = under_labels(&inner, &[(100, 64)]);
    let mut dp = Datapath::new(DatapathConfig::default(), rules(text)).unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(
        1,
        Box::new(ReplayPort::new(
            "in",
            std::iter::once(frame).collect(),
            false,
        )),
    )
    .unwrap();
    dp.add_port(2, Box::new(cap)).unwrap();
    dp.run(|| 0, |_| false).unwrap();
    assert_eq!(sent.lock().unwrap().as_slice(), &[inner]);
}

/// Frozen states no cache uses any more are freed (after the grace of
/// `sluice_classifier::recirc::GRACE_US` of real time); one that a live
/// megaflow still uses is kept, and its packets keep being forwarded, from
/// the caches and from a fresh translation.
#[test]
fn states_no_cache_uses_are_freed_and_used_ones_kept() {
    use sluice_classifier::parse::{parse_flow, Require};
    use sluice_classifier::table::Selection;
    // 20 labels, each popped and its inner destination rewritten: 20
    // distinct frozen states (the rewrite needs the inner header).
    let text: String = (0..20)
        .map(|i| {
            format!(
                "mpls,mpls_label={},actions=pop_mpls:0x0800,mod_nw_dst:10.9.0.{i},output:2\n",
                100 + i
            )
        })
        .collect();
    let first = rules(&text);
    let frame = |i: u32| under_labels(&ipv4(2, 1000).build(), &[(100 + i, 64)]);
    let frames: Frames = (0..20).map(frame).collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::clone(&first)).unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(cap)).unwrap();
    let mut t = 0;
    while !dp.rx_exhausted() {
        dp.poll_once(t);
        t += 10;
    }
    let table = Arc::clone(first.recirc_shared());
    assert_eq!(table.len(), 20);
    assert_eq!(sent.lock().unwrap().len(), 20);
    // Every rule but label 100's goes: their states are used by no cache
    // once the megaflows are revalidated against the new rules.
    let mut next = (*first).clone();
    for i in 1..20 {
        let sel = parse_flow(&format!("mpls,mpls_label={}", 100 + i), Require::NoActions).unwrap();
        assert_eq!(next.delete(&sel, Selection::Strict, false).len(), 1);
    }
    dp.set_rules(Arc::new(next));
    std::thread::sleep(std::time::Duration::from_micros(
        sluice_classifier::recirc::GRACE_US + 200_000,
    ));
    // Housekeeping runs once a second of the datapath's time.
    for _ in 0..3 {
        t += sluice_datapath::datapath::CACHE_INTERVAL_US;
        dp.poll_once(t);
    }
    assert_eq!(table.len(), 1, "the state label 100's megaflow uses");
    assert_eq!(dp.stats().recirc_freed, 19);
    // Label 100 still forwards: through its cached megaflows, and through
    // a fresh translation once they expired (idle for 10 s of the
    // datapath's time; too little real time for the state to go).
    let one = |name: &str| {
        let mut f = Frames::new();
        f.push(&frame(0), 0);
        Box::new(ReplayPort::new(name, f, false))
    };
    dp.add_port(3, one("again")).unwrap();
    while !dp.rx_exhausted() {
        dp.poll_once(t);
        t += 10;
    }
    let upcalls = dp.stats().upcalls;
    for _ in 0..12 {
        t += sluice_datapath::datapath::CACHE_INTERVAL_US;
        dp.poll_once(t);
    }
    assert_eq!(dp.cache_occupancy().0, 0, "every megaflow expired");
    dp.add_port(4, one("fresh")).unwrap();
    while !dp.rx_exhausted() {
        dp.poll_once(t);
        t += 10;
    }
    assert_eq!(dp.stats().upcalls, upcalls + 2, "both passes translated");
    dp.finish().unwrap();
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 22);
    assert_eq!(sent[20], sent[0]);
    assert_eq!(sent[21], sent[0]);
    assert!(dp.stats().rx_balanced());
}
