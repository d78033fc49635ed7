//! Every packet accounted for, in the corner cases: controller queue
//! overflow, pool exhaustion while copying, runts, timeouts on a virtual
//! clock, and per-batch translation counts.

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet, XlateDrop};
use sluice_datapath::{Datapath, DatapathConfig, DropReason, PortConfig};
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

fn udp(i: u16) -> Vec<u8> {
    Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 53 }).build()
}

fn dp_with(text: &str, cfg: DatapathConfig, frames: Frames) -> Datapath {
    let mut dp = Datapath::new(cfg, rules(text)).unwrap();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(NullPort::new())).unwrap();
    dp.add_port(3, Box::new(NullPort::new())).unwrap();
    dp.add_port(4, Box::new(NullPort::new())).unwrap();
    dp
}

#[test]
fn controller_queue_overflow_is_a_named_drop() {
    let frames: Frames = (0..5).map(udp).collect();
    let cfg = DatapathConfig {
        packet_in_queue: 2,
        ..Default::default()
    };
    let mut dp = dp_with("actions=controller", cfg, frames);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.to_controller, 2);
    assert_eq!(st.dropped_by(DropReason::ControllerQueueFull), 3);
    assert!(st.rx_balanced());
    assert_eq!(dp.packet_ins().count(), 2);
}

/// A packet-in carries the whole packet whatever the action's max_len,
/// as Open vSwitch 3.1 sends it; `packet_in_max_len` cuts it to max_len.
#[test]
fn a_packet_in_is_whole_unless_max_len_is_honoured() {
    let frames: Frames = (0..3).map(udp).collect();
    let len = udp(0).len();
    for (honour, want) in [(false, len), (true, 20)] {
        let cfg = DatapathConfig {
            packet_in_max_len: honour,
            ..Default::default()
        };
        let mut dp = dp_with("actions=controller:20", cfg, frames.clone());
        dp.run(|| 0, |_| false).unwrap();
        let lens: Vec<(usize, usize)> = dp
            .packet_ins()
            .map(|p| (p.data.len(), p.total_len))
            .collect();
        assert_eq!(lens, [(want, len); 3], "max_len honoured: {honour}");
    }
}

/// A TTL that runs out makes a packet-in only while a controller takes
/// them (the OpenFlow channel's flag); otherwise the packet is the
/// counted drop `invalid ttl`, as before any controller asked.
#[test]
fn an_expired_ttl_goes_to_the_controller_only_when_one_asked() {
    let ttl1: Frames = (0..4u16)
        .map(|i| {
            let mut f = udp(i);
            f[22] = 1; // the IPv4 TTL
            f
        })
        .collect();
    for wanted in [false, true] {
        let mut dp = dp_with(
            "ip,actions=dec_ttl,output:2",
            Default::default(),
            ttl1.clone(),
        );
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(wanted));
        dp.set_invalid_ttl_flag(flag);
        dp.run(|| 0, |_| false).unwrap();
        let st = dp.stats();
        assert!(st.rx_balanced());
        assert_eq!(st.forwarded, 0);
        if wanted {
            assert_eq!(st.to_controller, 4);
            let pins: Vec<_> = dp.packet_ins().collect();
            assert_eq!(pins.len(), 4);
            assert!(pins.iter().all(|p| {
                p.reason == sluice_classifier::dpaction::PacketInReason::InvalidTtl
                    && p.data.len() == p.total_len
            }));
        } else {
            assert_eq!(st.dropped_by(DropReason::Xlate(XlateDrop::InvalidTtl)), 4);
            assert!(!dp.has_packet_ins());
        }
    }
}

#[test]
fn the_controller_rate_limit_makes_no_packet_in_beyond_it() {
    // 40 packets at one instant, a burst of 5: 5 packet-ins, 35 drops.
    let frames: Frames = (0..40).map(udp).collect();
    let mut dp = dp_with("actions=controller", DatapathConfig::default(), frames);
    dp.set_packet_in_limit(10.0, 5.0);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.to_controller, 5);
    assert_eq!(st.dropped_by(DropReason::ControllerRateLimit), 35);
    assert!(st.rx_balanced());
}

#[test]
fn a_port_set_no_recv_drops_what_it_receives_and_no_fwd_takes_it_out() {
    let frames: Frames = (0..10).map(udp).collect();
    let mut dp = dp_with(
        "actions=output:2",
        DatapathConfig::default(),
        frames.clone(),
    );
    dp.set_port_config(
        1,
        PortConfig {
            no_recv: true,
            ..PortConfig::default()
        },
    )
    .unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.dropped_by(DropReason::PortNoRecv), 10);
    assert_eq!(st.forwarded, 0);
    assert!(st.rx_balanced());
    let mut dp = dp_with("actions=output:2", DatapathConfig::default(), frames);
    dp.set_port_config(
        2,
        PortConfig {
            no_fwd: true,
            ..PortConfig::default()
        },
    )
    .unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.dropped_by(DropReason::Xlate(XlateDrop::NoSuchPort)), 10);
    assert!(st.rx_balanced());
    assert!(dp.set_port_config(9, PortConfig::default()).is_err());
}

#[test]
fn a_port_set_no_packet_in_sends_nothing_to_the_controller_and_counts_it() {
    // Port 1 receives: with no_packet_in, its packets' packet-ins are the
    // counted drop; the output beside the controller action still goes.
    let frames: Frames = (0..10).map(udp).collect();
    let mut dp = dp_with(
        "actions=controller",
        DatapathConfig::default(),
        frames.clone(),
    );
    let config = PortConfig {
        no_packet_in: true,
        ..PortConfig::default()
    };
    dp.set_port_config(1, config).unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.dropped_by(DropReason::PortNoPacketIn), 10);
    assert_eq!(st.to_controller, 0);
    assert!(!dp.has_packet_ins());
    assert!(st.rx_balanced());
    let mut dp = dp_with(
        "actions=controller,output:2",
        DatapathConfig::default(),
        frames,
    );
    dp.set_port_config(1, config).unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!((st.forwarded, st.to_controller), (10, 0));
    assert!(st.rx_balanced());
}

#[test]
fn pool_exhaustion_while_copying_is_counted() {
    // 8 frames: 8 packets in one burst leave no frame for copies.
    let frames: Frames = (0..8).map(udp).collect();
    let cfg = DatapathConfig {
        pool_frames: 8,
        ..Default::default()
    };
    let mut dp = dp_with("actions=output:2,output:3,output:4", cfg, frames);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!(st.rx_packets, 8);
    assert_eq!(st.forwarded, 8, "the last output takes the packet itself");
    assert!(st.copy_failures > 0);
    assert_eq!(st.output_copies + st.copy_failures, 24);
    assert!(st.rx_balanced() && st.tx_balanced());
    assert_eq!(dp.pool_available().0, 8, "no frame leaked");
}

#[test]
fn runts_are_dropped_and_counted() {
    let mut frames = Frames::new();
    frames.push(&[0u8; 10], 0);
    frames.push(&udp(1), 0);
    let mut dp = dp_with("actions=output:2", DatapathConfig::default(), frames);
    dp.run(|| 0, |_| false).unwrap();
    assert_eq!(dp.stats().dropped_by(DropReason::Runt), 1);
    assert_eq!(dp.stats().forwarded, 1);
}

#[test]
fn one_translation_per_distinct_flow_per_batch() {
    // 20 identical packets arrive in one burst: one upcall (seed 001).
    let frames: Frames = (0..20).map(|_| udp(7)).collect();
    let mut dp = dp_with("actions=output:2", DatapathConfig::default(), frames);
    dp.run(|| 0, |_| false).unwrap();
    assert_eq!(dp.stats().upcalls, 1);
    assert_eq!(dp.stats().sent_packets, 20);
    assert_eq!(dp.stats().sent_batches, 1, "one output batch for the burst");
    let r = dp.rules().table(0).next().unwrap();
    assert_eq!(r.counters(), (20, 20 * 60));
}

#[test]
fn hard_timeout_expires_on_the_virtual_clock() {
    let frames: Frames = (0..64).map(udp).collect();
    let mut dp = Datapath::new(
        DatapathConfig::default(),
        rules("hard_timeout=1,actions=output:2\n"),
    )
    .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(2, Box::new(cap)).unwrap();
    assert_eq!(dp.poll_once(0), 32);
    assert_eq!(sent.lock().unwrap().len(), 32);
    dp.poll_once(1_000_000); // the rule's second is up: it expires here
    assert!(dp.rules().is_empty());
    dp.poll_once(1_000_001);
    dp.finish().unwrap();
    let st = dp.stats();
    assert_eq!(
        st.dropped_by(DropReason::Xlate(sluice_classifier::XlateDrop::TableMiss)),
        32
    );
    assert!(st.rx_balanced() && st.tx_balanced());
}

#[test]
fn an_idle_timeout_sees_hits_served_by_the_caches() {
    // Rules are credited from the megaflows in bulk, not per batch; a rule
    // that keeps matching must still never look idle.
    let frames: Frames = (0..32).map(udp).collect();
    let mut dp = Datapath::new(
        DatapathConfig::default(),
        rules("idle_timeout=1,actions=output:2\n"),
    )
    .unwrap();
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, true).with_limit(320)),
    )
    .unwrap();
    dp.add_port(2, Box::new(NullPort::new())).unwrap();
    for i in 0..10u64 {
        assert_eq!(dp.poll_once(i * 300_000), 32, "poll {i}");
        assert_eq!(dp.rules().len(), 1, "still in use at poll {i}");
    }
    dp.credit_rules();
    assert_eq!(
        dp.rules().table(0).next().unwrap().counters(),
        (320, 320 * 60)
    );
    // Now idle for more than a second: it goes.
    dp.poll_once(2_700_000 + 1_100_000);
    assert!(dp.rules().is_empty());
    dp.finish().unwrap();
    assert_eq!(dp.stats().sent_packets, 320);
}

#[test]
fn outputs_to_a_receive_only_port_are_refused_and_counted() {
    let frames: Frames = (0..3).map(udp).collect();
    let mut dp = Datapath::new(
        DatapathConfig::default(),
        rules("in_port=1,actions=output:2\n"),
    )
    .unwrap();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    dp.add_port(
        2,
        Box::new(ReplayPort::new("rx-only", Frames::new(), false)),
    )
    .unwrap();
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert_eq!((st.forwarded, st.sent_packets, st.tx_dropped), (3, 0, 3));
    let port2 = &dp.port_reports()[1];
    assert_eq!(
        port2
            .stats
            .tx_dropped_by(sluice_port::PortDrop::NotWritable),
        3
    );
}

#[test]
fn bad_port_numbers_are_refused() {
    let mut dp = Datapath::new(DatapathConfig::default(), rules("actions=drop\n")).unwrap();
    assert!(dp.add_port(0, Box::new(NullPort::new())).is_err());
    dp.add_port(5, Box::new(NullPort::new())).unwrap();
    assert!(dp
        .add_port(5, Box::new(NullPort::new()))
        .unwrap_err()
        .to_string()
        .contains("twice"));
}

/// Frames of four flows, three to two ports and one dropped by its rule,
/// with runts between them, in one burst: each port gets its flows'
/// packets in arrival order, the runts and the dropped flow are counted,
/// and nothing else is lost, whether every flow just outputs or drops
/// (packets move straight from the rx batch) or one flow rewrites first
/// (the general path, flow by flow).
#[test]
fn mixed_flows_and_runts_in_one_burst_keep_order_and_count() {
    for rewrite in [false, true] {
        let mut frames = Frames::new();
        for i in 0..30u16 {
            let f = if i % 7 == 3 {
                vec![0u8; 9]
            } else {
                Frame::ipv4(
                    [10, 0, 0, 1],
                    [10, 0, 0, 2],
                    L4::Udp {
                        src: i % 4,
                        dst: 100 + i,
                    },
                )
                .build()
            };
            frames.push(&f, u64::from(i));
        }
        let flow2 = if rewrite {
            "udp,tp_src=2,actions=mod_nw_tos:4,output:3\n"
        } else {
            "udp,tp_src=2,actions=output:3\n"
        };
        let text = format!(
            "udp,tp_src=0,actions=output:2\nudp,tp_src=1,actions=output:3\n{flow2}udp,tp_src=3,actions=drop\n"
        );
        let mut dp = Datapath::new(DatapathConfig::default(), rules(&text)).unwrap();
        let (cap2, sent2) = CapturePort::new();
        let (cap3, sent3) = CapturePort::new();
        dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
            .unwrap();
        dp.add_port(2, Box::new(cap2)).unwrap();
        dp.add_port(3, Box::new(cap3)).unwrap();
        dp.run(|| 0, |_| false).unwrap();
        let st = dp.stats();
        let runts = (0..30).filter(|i| i % 7 == 3).count() as u64;
        let dropped = (0..30).filter(|i| i % 7 != 3 && i % 4 == 3).count() as u64;
        assert_eq!(st.dropped_by(DropReason::Runt), runts);
        assert_eq!(
            st.dropped_by(DropReason::Xlate(XlateDrop::NoOutput)),
            dropped
        );
        assert_eq!(st.forwarded, 30 - runts - dropped);
        assert!(st.rx_balanced() && st.tx_balanced());
        let dst = |f: &Vec<u8>| u16::from_be_bytes([f[36], f[37]]);
        let src = |f: &Vec<u8>| u16::from_be_bytes([f[34], f[35]]);
        let to2: Vec<_> = sent2.lock().unwrap().clone();
        let to3: Vec<_> = sent3.lock().unwrap().clone();
        assert!(to2.iter().all(|f| src(f) == 0));
        assert_eq!(to2.len() + to3.len(), (30 - runts - dropped) as usize);
        for flow in [0u16, 1, 2] {
            let port = if flow == 0 { &to2 } else { &to3 };
            let seen: Vec<u16> = port.iter().filter(|f| src(f) == flow).map(dst).collect();
            let want: Vec<u16> = (0..30u16)
                .filter(|i| i % 7 != 3 && i % 4 == flow)
                .map(|i| 100 + i)
                .collect();
            assert_eq!(seen, want, "flow {flow} (rewrite {rewrite})");
        }
        let tos4 = to3.iter().filter(|f| f[15] == 4).count();
        let flow2 = (0..30).filter(|i| i % 7 != 3 && i % 4 == 2).count();
        assert_eq!(tos4, if rewrite { flow2 } else { 0 }, "flow 2 rewritten");
    }
}

/// Established flows (8, a packet of each first: they are established
/// when the new flows come) and new flows (a new source address and port
/// each), interleaved one to one: `n` of each besides the first 8.
fn storm_mix(n: u64) -> Frames {
    let mut frames = Frames::new();
    for i in 0..8 {
        frames.push(&udp(i), 0);
    }
    for i in 0..n {
        frames.push(&udp((i % 8) as u16), 0);
        let ip = (0x0b00_0000 + i as u32).to_be_bytes();
        frames.push(
            &Frame::ipv4(
                ip,
                [10, 0, 0, 2],
                L4::Udp {
                    src: (i % 60_000) as u16,
                    dst: 9,
                },
            )
            .build(),
            0,
        );
    }
    frames
}

/// A datapath whose port 1 plays `frames` as a live device (one that
/// cannot wait: a NIC) or as a source that can, megaflows off (every new
/// flow an upcall), upcalls held to `share` % of the cycles.
fn storm_dp(frames: Frames, live: bool, share: u32) -> Datapath {
    let cfg = DatapathConfig {
        cache: sluice_datapath::CacheConfig {
            megaflows: false,
            upcall_share_pct: share,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut dp = Datapath::new(cfg, rules("actions=output:2")).unwrap();
    let port = ReplayPort::new("in", frames, false);
    let port = if live { port.live() } else { port };
    dp.add_port(1, Box::new(port)).unwrap();
    dp.add_port(2, Box::new(NullPort::new())).unwrap();
    dp
}

/// A sustained miss storm from a live device, mixed with established
/// flows: with upcalls held to a small share of the cycles, storm packets
/// beyond it wait in the upcall queue, and once it is full are dropped as
/// `upcall budget` (nothing else is lost, every established packet is
/// forwarded); with no limit every storm packet is translated.
#[test]
fn a_miss_storm_beyond_the_upcall_budget_waits_then_is_dropped_and_counted() {
    // Large beside the budget's bucket (about 20M cycles of upcalls before
    // the share applies) and the queue (12,288 packets by default).
    let storm = 150_000u64;
    let frames = storm_mix(storm);
    for (share, refused) in [(1, true), (100, false)] {
        let mut dp = storm_dp(frames.clone(), true, share);
        dp.run(|| 0, |_| false).unwrap();
        let st = dp.stats();
        let dropped = st.dropped_by(DropReason::UpcallBudget);
        assert!(st.rx_balanced(), "share {share}");
        assert_eq!(st.rx_packets, 2 * storm + 8);
        assert_eq!(st.forwarded + dropped, 2 * storm + 8, "no other loss");
        assert_eq!(st.upcalls_waiting(), 0, "none left waiting at the end");
        assert_eq!(dp.upcalls_waiting(), 0);
        if refused {
            assert!(dropped > storm / 2, "most of the storm refused: {dropped}");
            assert!(st.upcalls_deferred > 0, "the queue was used: {st:?}");
            assert!(st.emc_hits + st.smc_hits + st.megaflow_hits >= storm - 8);
        } else {
            // Misses may still wait behind a full burst (read first,
            // translated after), but none is dropped.
            assert_eq!(dropped, 0);
            assert_eq!(st.upcalls, storm + 8);
        }
    }
}

/// One flow from a live device whose every burst comes full: its first
/// packet's miss waits in the queue and the packets read behind it wait
/// behind it, and once the miss has run they all go: the flow does not
/// go on waiting behind itself, every packet run twice (found on DPDK's
/// vhost ports in PVP: a tenth of the rate).
#[test]
fn a_flow_that_waited_behind_its_miss_stops_waiting() {
    let n = 100_000u64;
    let mut frames = Frames::new();
    for _ in 0..n {
        frames.push(&udp(1), 0);
    }
    let mut dp = storm_dp(frames, true, 100);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert!(st.rx_balanced());
    assert_eq!(st.forwarded, n, "{st:?}");
    assert_eq!(st.upcalls, 1);
    assert!(
        st.upcalls_resumed < n / 20,
        "{} of {n} packets ran from the queue",
        st.upcalls_resumed
    );
}

/// A burst of 10,000 new flows from a live device beside established
/// traffic, with upcalls held to 1 % of the cycles: the burst waits in the
/// queue instead of being dropped, and every packet is forwarded.
#[test]
fn a_burst_of_ten_thousand_new_flows_waits_and_is_forwarded_whole() {
    let n = 10_000u64;
    let mut dp = storm_dp(storm_mix(n), true, 1);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert!(st.rx_balanced());
    assert_eq!(st.dropped_total(), 0, "{st:?}");
    assert_eq!(st.forwarded, 2 * n + 8);
    assert_eq!(st.upcalls, n + 8, "one upcall per flow");
}

/// A source that can wait (frames in memory, a capture file) is read later
/// instead: the same storm, with the same 1 % share, loses nothing, and
/// every new flow is translated.
#[test]
fn a_source_that_can_wait_is_never_dropped_for_the_budget() {
    let storm = 50_000u64;
    let mut dp = storm_dp(storm_mix(storm), false, 1);
    dp.run(|| 0, |_| false).unwrap();
    let st = dp.stats();
    assert!(st.rx_balanced());
    assert_eq!(st.dropped_total(), 0, "{st:?}");
    assert_eq!(st.upcalls_deferred, 0, "its misses never wait in the queue");
    assert_eq!(st.upcalls, storm + 8);
    assert_eq!(st.forwarded, 2 * storm + 8);
}
