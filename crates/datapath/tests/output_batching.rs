//! Output batching with `tx-flush-interval` (seed 000), on a virtual clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig, TxFlush};
use sluice_packet::build::{Frame, L4};
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::{Port, PortCaps, PortStats, RxStatus};

/// Records, per tx burst, the virtual time and each packet's rx time.
#[derive(Default)]
struct Log {
    bursts: Vec<(u64, Vec<u64>)>,
}

struct Sink {
    clock: Arc<AtomicU64>,
    log: Arc<Mutex<Log>>,
}

impl Port for Sink {
    fn name(&self) -> &str {
        "sink"
    }
    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: false,
            tx: true,
            finite_rx: true,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: false,
        }
    }
    fn rx_burst(&mut self, _: &mut PacketPool, _: &mut PacketBatch, _: u32) -> RxStatus {
        RxStatus::Exhausted
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let now = self.clock.load(Ordering::Relaxed);
        let rx: Vec<u64> = batch
            .as_slice()
            .iter()
            .map(|p| p.meta.rx_ts_ns / 1000)
            .collect();
        let n = rx.len();
        self.log.lock().unwrap().bursts.push((now, rx));
        batch.free_all(pool);
        n
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

/// `n` packets, one per 10 µs poll iteration (their rx timestamp says
/// when), forwarded to the sink on port 2 with the given interval.
fn run(interval_us: u64, n: u64, gap_us: u64) -> (Datapath, Arc<Mutex<Log>>) {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let mut dp = Datapath::new(
        DatapathConfig {
            tx_flush: TxFlush::Fixed(interval_us),
            ..Default::default()
        },
        rules,
    )
    .unwrap();
    let mut frames = Frames::new();
    for i in 0..n {
        let f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
        frames.push(&f, (1 + i * gap_us) * 1000);
    }
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let clock = Arc::new(AtomicU64::new(0));
    let log = Arc::new(Mutex::new(Log::default()));
    dp.add_port(
        2,
        Box::new(Sink {
            clock: Arc::clone(&clock),
            log: Arc::clone(&log),
        }),
    )
    .unwrap();
    let mut t = 1;
    while !dp.rx_exhausted() {
        clock.store(t, Ordering::Relaxed);
        dp.poll_once(t);
        t += gap_us;
    }
    clock.store(t, Ordering::Relaxed);
    dp.finish().unwrap();
    (dp, log)
}

#[test]
fn interval_zero_sends_every_burst_at_once() {
    let (dp, log) = run(0, 20, 10);
    let log = log.lock().unwrap();
    assert_eq!(
        log.bursts.len(),
        20,
        "one packet per rx burst, one tx batch each"
    );
    assert!(log
        .bursts
        .iter()
        .all(|(now, rx)| rx.iter().all(|r| r == now)));
    assert_eq!(dp.stats().sent_batches, 20);
}

#[test]
fn interval_batches_across_bursts_and_bounds_the_wait() {
    let (dp, log) = run(50, 100, 10);
    let log = log.lock().unwrap();
    let st = dp.stats();
    // Packets waited for company, but never past the interval.
    for (now, rx) in &log.bursts {
        for r in rx {
            assert!(now - r <= 50, "a packet waited {} µs", now - r);
        }
    }
    assert!(
        st.sent_batches <= 20,
        "about six packets per batch: {} batches",
        st.sent_batches
    );
    assert!(st.packets_per_batch() >= 5.0, "{}", st.packets_per_batch());
    // The counters add up, and order holds.
    let total: usize = log.bursts.iter().map(|(_, rx)| rx.len()).sum();
    assert_eq!(total as u64, st.sent_packets);
    assert_eq!(st.sent_packets, 100);
    let order: Vec<u64> = log
        .bursts
        .iter()
        .flat_map(|(_, rx)| rx.iter().copied())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "FIFO");
}

/// The port's batch waits say what the sink saw: each batch's first
/// packet waited as long as the counter says, never past the interval,
/// one count per batch sent; at interval 0 nothing waits.
#[test]
fn batch_waits_are_counted_per_batch() {
    let (dp, log) = run(50, 100, 10);
    let log = log.lock().unwrap();
    let w = dp
        .port_reports()
        .into_iter()
        .find(|r| r.ofport == 2)
        .unwrap()
        .batch_waits;
    let first_waits: Vec<u64> = log.bursts.iter().map(|(now, rx)| now - rx[0]).collect();
    assert_eq!(w.batches, first_waits.len() as u64);
    assert_eq!(w.batches, dp.stats().sent_batches);
    assert_eq!(w.total_us, first_waits.iter().sum::<u64>());
    assert_eq!(w.max_us, *first_waits.iter().max().unwrap());
    assert!(w.max_us <= 50 && w.max_us >= 40, "{w:?}");
    let (dp, _) = run(0, 20, 10);
    let w = dp.port_reports()[1].batch_waits;
    assert_eq!((w.batches, w.max_us, w.total_us), (20, 0, 0));
}

#[test]
fn a_lone_packet_does_not_wait_for_company() {
    // A 1 s interval, but the next iteration is idle: the packet goes then.
    let (_, log) = run(1_000_000, 1, 10);
    let log = log.lock().unwrap();
    assert_eq!(log.bursts.len(), 1);
    let (now, rx) = &log.bursts[0];
    assert!(
        now - rx[0] <= 10,
        "left at the first idle iteration, after {} µs",
        now - rx[0]
    );
}

#[test]
fn nothing_waits_after_shutdown() {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let cfg = DatapathConfig {
        tx_flush: TxFlush::Fixed(1_000_000),
        ..Default::default()
    };
    let mut dp = Datapath::new(cfg, rules).unwrap();
    let frames: Frames = (0..5)
        .map(|_| Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 1, dst: 2 }).build())
        .collect();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
        .unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    dp.add_port(
        2,
        Box::new(Sink {
            clock: Arc::default(),
            log: Arc::clone(&log),
        }),
    )
    .unwrap();
    dp.poll_once(0);
    assert_eq!(dp.stats().sent_packets, 0, "waiting for the interval");
    dp.finish().unwrap();
    assert_eq!(dp.stats().sent_packets, 5);
    assert!(dp.stats().tx_balanced());
}

#[test]
fn per_port_interval_and_runtime_change() {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2,output:3", None).unwrap(),
        0,
    ));
    let mut dp = Datapath::new(
        DatapathConfig {
            tx_flush: TxFlush::Fixed(1_000_000),
            ..Default::default()
        },
        rules,
    )
    .unwrap();
    let frames: Frames = (0..4)
        .map(|_| Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 1, dst: 2 }).build())
        .collect();
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(2)),
    )
    .unwrap();
    let (l2, l3) = (
        Arc::new(Mutex::new(Log::default())),
        Arc::new(Mutex::new(Log::default())),
    );
    dp.add_port(
        2,
        Box::new(Sink {
            clock: Arc::default(),
            log: Arc::clone(&l2),
        }),
    )
    .unwrap();
    dp.add_port(
        3,
        Box::new(Sink {
            clock: Arc::default(),
            log: Arc::clone(&l3),
        }),
    )
    .unwrap();
    dp.set_tx_flush_interval(Some(3), TxFlush::Fixed(0))
        .unwrap();
    dp.poll_once(0);
    assert_eq!(
        (
            l2.lock().unwrap().bursts.len(),
            l3.lock().unwrap().bursts.len()
        ),
        (0, 1),
        "port 3 sends at once, port 2 waits"
    );
    // Changing the global interval sends what waited under the old one.
    dp.set_tx_flush_interval(None, TxFlush::Fixed(0)).unwrap();
    assert_eq!(l2.lock().unwrap().bursts.len(), 1);
    dp.poll_once(1);
    assert_eq!(l2.lock().unwrap().bursts.len(), 2);
    assert!(dp
        .set_tx_flush_interval(Some(9), TxFlush::Fixed(0))
        .is_err());
}

#[test]
fn nothing_waits_after_port_removal() {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let cfg = DatapathConfig {
        tx_flush: TxFlush::Fixed(1_000_000),
        ..Default::default()
    };
    let mut dp = Datapath::new(cfg, rules).unwrap();
    let frames: Frames = (0..5)
        .map(|_| Frame::ipv4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp { src: 1, dst: 2 }).build())
        .collect();
    dp.add_port(1, Box::new(ReplayPort::new("in", frames, true)))
        .unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    dp.add_port(
        2,
        Box::new(Sink {
            clock: Arc::default(),
            log: Arc::clone(&log),
        }),
    )
    .unwrap();
    dp.poll_once(0);
    assert_eq!(dp.stats().sent_packets, 0, "waiting for the interval");
    let queued = dp.stats().output_copies;
    assert!(queued > 0);
    let report = dp.remove_port(2).unwrap();
    assert_eq!(report.ofport, 2);
    assert_eq!(dp.stats().sent_packets, queued, "sent before the port went");
    assert_eq!(dp.removed_ports().len(), 1);
    // The rules still output to 2: now a counted drop, not a stale cache hit.
    let dropped_before = dp.stats().dropped_total();
    dp.poll_once(10);
    assert!(dp.stats().dropped_total() > dropped_before);
    assert_eq!(dp.stats().sent_packets, queued);
    dp.finish().unwrap();
    assert!(dp.stats().rx_balanced() && dp.stats().tx_balanced());
    assert!(dp.remove_port(2).is_err(), "no port 2 any more");
}

/// An rx queue moving from one PMD's datapath to another's: what the first
/// holds for output goes before the queue does, so the flow's packets leave
/// in order; the queue a PMD sends on stays; reports count every queue.
#[test]
fn a_moving_rx_queue_takes_nothing_out_of_order() {
    use sluice_datapath::RxQueue;
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let cfg = DatapathConfig {
        tx_flush: TxFlush::Fixed(1_000_000),
        ..Default::default()
    };
    let log = Arc::new(Mutex::new(Log::default()));
    let frame = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
    let pmd = |home: u32| {
        let mut dp = Datapath::new(cfg, Arc::clone(&rules)).unwrap();
        let mut own = Frames::new();
        own.push(&frame, 999_000_000);
        dp.add_port_queue(1, home, Box::new(ReplayPort::new("in", own, false)))
            .unwrap();
        dp.add_port(
            2,
            Box::new(Sink {
                clock: Arc::default(),
                log: Arc::clone(&log),
            }),
        )
        .unwrap();
        dp
    };
    let (mut a, mut b) = (pmd(0), pmd(1));
    let mut moving = Frames::new();
    for i in 0..100u64 {
        moving.push(&frame, (i + 1) * 1000);
    }
    let q = ReplayPort::new("in", moving, false).with_burst(8);
    a.add_rxq(1, RxQueue::new(2, Box::new(q)))
        .map_err(|(e, _)| e)
        .unwrap();
    a.poll_once(0);
    a.poll_once(1);
    let reports = a.port_reports();
    let qids: Vec<(u32, bool)> = reports[0].rxqs.iter().map(|q| (q.qid, q.home)).collect();
    assert_eq!(qids, vec![(0, true), (2, false)]);
    assert_eq!(reports[0].stats.rx_packets, 1 + 16, "both queues counted");
    assert!(
        log.lock().unwrap().bursts.is_empty(),
        "held for the interval"
    );
    assert!(a.take_rxq(1, 0).is_err(), "the queue a PMD sends on stays");
    let q = a.take_rxq(1, 2).unwrap();
    assert!(!q.rx_done);
    let sent_by_a: usize = log.lock().unwrap().bursts.iter().map(|b| b.1.len()).sum();
    assert_eq!(
        sent_by_a, 17,
        "everything a held went before the queue left"
    );
    b.add_rxq(1, q).map_err(|(e, _)| e).unwrap();
    let mut t = 2;
    while !b.rx_exhausted() {
        b.poll_once(t);
        t += 1;
    }
    b.finish().unwrap();
    a.finish().unwrap();
    let seen: Vec<u64> = log
        .lock()
        .unwrap()
        .bursts
        .iter()
        .flat_map(|b| b.1.clone())
        .filter(|&us| us < 999_000)
        .collect();
    assert_eq!(seen, (1..=100).collect::<Vec<u64>>(), "in order, none lost");
    for dp in [&a, &b] {
        assert!(dp.stats().rx_balanced() && dp.stats().tx_balanced());
    }
    assert_eq!(b.port_reports()[0].rxqs.len(), 2);
}

/// `pad_short_frames`: a frame a pop made shorter than 60 bytes leaves
/// padded with zeros to 60; without it (OVS's behaviour) as it is.
#[test]
fn short_frames_are_padded_only_when_asked() {
    use sluice_port::capture::CapturePort;
    // A tagged 60-byte frame (its IPv4 length says so): the pop leaves 56.
    let inner = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
    let mut tagged = inner[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    tagged.extend_from_slice(&inner[12..]);
    assert_eq!(tagged.len(), inner.len() + 4);
    for pad in [false, true] {
        let rules = Arc::new(RuleSet::from_specs(
            &parse_flow_file("in_port=1,actions=strip_vlan,output:2\n", None).unwrap(),
            0,
        ));
        let cfg = DatapathConfig {
            pad_short_frames: pad,
            ..Default::default()
        };
        let mut dp = Datapath::new(cfg, rules).unwrap();
        let mut frames = Frames::new();
        let mut short = tagged[..60].to_vec();
        short[16 + 2..16 + 4].copy_from_slice(&(60u16 - 18).to_be_bytes());
        frames.push(&short, 0);
        let (cap, sent) = CapturePort::new();
        dp.add_port(1, Box::new(ReplayPort::new("in", frames, false)))
            .unwrap();
        dp.add_port(2, Box::new(cap)).unwrap();
        let mut clock = (0u64..).step_by(10);
        dp.run(|| clock.next().unwrap(), |_| false).unwrap();
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 1);
        if pad {
            assert_eq!(sent[0].len(), 60);
            assert_eq!(
                &sent[0][..56],
                &short[..12]
                    .iter()
                    .chain(&short[16..])
                    .copied()
                    .collect::<Vec<u8>>()[..]
            );
            assert!(sent[0][56..].iter().all(|&b| b == 0));
        } else {
            assert_eq!(sent[0].len(), 56);
        }
    }
}
