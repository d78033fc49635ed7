//! `tx-flush-interval=auto` in the datapath, on a virtual clock: a port
//! whose sends are costly and whose packets come one per poll iteration
//! gets a hold, its batches grow, and no packet waits past the ceiling; a
//! lone packet still leaves at the next idle iteration; nothing waits
//! after shutdown; order and counters hold. (Which hold the measurements
//! call for, port by port, is `autobatch`'s unit tests'.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::autobatch::CEILING_US;
use sluice_datapath::{cycles, Datapath, DatapathConfig, TxFlush};
use sluice_packet::build::{Frame, L4};
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::{Port, PortCaps, PortStats, RxStatus};

/// Per send: the virtual time, and each packet's rx time and UDP source
/// port (its sequence number).
type Log = Arc<Mutex<Vec<(u64, Vec<(u64, u16)>)>>>;

/// A port whose every send call costs `burn` TSC cycles (a kick: a
/// syscall, a doorbell), as a guest's eventfd does.
struct CostlySink {
    clock: Arc<AtomicU64>,
    log: Log,
    burn: u64,
    stats: PortStats,
}

impl Port for CostlySink {
    fn name(&self) -> &str {
        "costly"
    }
    fn caps(&self) -> PortCaps {
        PortCaps::SINK
    }
    fn rx_burst(&mut self, _: &mut PacketPool, _: &mut PacketBatch, _: u32) -> RxStatus {
        RxStatus::Exhausted
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let t0 = cycles::now();
        while cycles::now().wrapping_sub(t0) < self.burn {
            std::hint::spin_loop();
        }
        let now = self.clock.load(Ordering::Relaxed);
        let pkts: Vec<(u64, u16)> = batch
            .as_slice()
            .iter()
            .map(|p| {
                let d = p.data();
                (p.meta.rx_ts_ns / 1000, u16::from_be_bytes([d[34], d[35]]))
            })
            .collect();
        let n = pkts.len();
        self.stats.tx_packets += n as u64;
        self.stats.tx_kicks += 1;
        self.log.lock().unwrap().push((now, pkts));
        batch.free_all(pool);
        n
    }
    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}

/// A datapath forwarding `n` packets from port 1 (one per rx burst) to
/// port 2, a port whose sends cost `burn` cycles, under
/// `tx-flush-interval=auto` (the default); its clock and log.
fn setup(n: u16, burn: u64) -> (Datapath, Arc<AtomicU64>, Log) {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let mut dp = Datapath::new(DatapathConfig::default(), rules).unwrap();
    let mut frames = Frames::new();
    for i in 0..n {
        let f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 2 }).build();
        frames.push(&f, (1 + u64::from(i)) * 1000);
    }
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let clock = Arc::new(AtomicU64::new(0));
    let log: Log = Arc::default();
    dp.add_port(
        2,
        Box::new(CostlySink {
            clock: Arc::clone(&clock),
            log: Arc::clone(&log),
            burn,
            stats: PortStats::default(),
        }),
    )
    .unwrap();
    (dp, clock, log)
}

/// `n` packets, one per 1 µs poll iteration, to a port whose sends cost
/// `burn` cycles; then `idle` idle iterations before shutdown.
fn run(n: u16, burn: u64, idle: u64) -> (Datapath, Log) {
    let (mut dp, clock, log) = setup(n, burn);
    let mut t = 1;
    while !dp.rx_exhausted() {
        clock.store(t, Ordering::Relaxed);
        dp.poll_once(t);
        t += 1;
    }
    for _ in 0..idle {
        clock.store(t, Ordering::Relaxed);
        dp.poll_once(t);
        t += 1;
    }
    clock.store(t, Ordering::Relaxed);
    dp.finish().unwrap();
    (dp, log)
}

#[test]
fn a_costly_busy_port_holds_within_the_ceiling() {
    let n = 6_000u16;
    let (dp, log) = run(n, 20_000, 0);
    let log = log.lock().unwrap();
    // Every packet once, in order.
    let seq: Vec<u16> = log
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .collect();
    assert_eq!(seq, (0..n).collect::<Vec<_>>());
    let st = dp.stats();
    assert_eq!(
        (st.forwarded, st.sent_packets),
        (u64::from(n), u64::from(n))
    );
    // No packet waited past the ceiling (plus the iteration it left in).
    let worst = log
        .iter()
        .flat_map(|(at, p)| p.iter().map(move |x| at - x.0))
        .max()
        .unwrap();
    assert!(worst <= CEILING_US + 1, "waited {worst} µs");
    // Before any measurement, a packet a send; after the first windows,
    // sends of many.
    assert_eq!(log[0].1.len(), 1);
    let late: Vec<usize> = log
        .iter()
        .filter(|(at, _)| *at > 3_000)
        .map(|(_, p)| p.len())
        .collect();
    let per_kick = late.iter().sum::<usize>() as f64 / late.len() as f64;
    assert!(per_kick > 8.0, "{per_kick} packets per send");
    let r = dp
        .port_reports()
        .into_iter()
        .find(|p| p.ofport == 2)
        .unwrap();
    assert_eq!(r.tx_flush, TxFlush::Auto);
    assert!(
        r.kicks.hold_us > 0 && r.kicks.hold_us <= CEILING_US,
        "{:?}",
        r.kicks
    );
    assert!(r.kicks.per_call_cycles > 10_000.0, "{:?}", r.kicks);
}

#[test]
fn a_lone_packet_leaves_at_the_next_idle_iteration() {
    // The hold is up when the input stops: the last batch goes at the
    // first iteration that receives nothing, not at its deadline.
    let n = 4_000u16;
    let (dp, log) = run(n, 20_000, 3);
    let log = log.lock().unwrap();
    let (at, last) = log.last().unwrap();
    let last_rx = last.last().unwrap().0;
    assert_eq!(*at, last_rx + 1, "sent at the idle iteration after it");
    assert_eq!(dp.stats().sent_packets, u64::from(n));
}

#[test]
fn a_fixed_interval_pins_it() {
    let rules = Arc::new(RuleSet::from_specs(
        &parse_flow_file("actions=output:2", None).unwrap(),
        0,
    ));
    let mut dp = Datapath::new(
        DatapathConfig {
            tx_flush: TxFlush::Fixed(0),
            ..Default::default()
        },
        rules,
    )
    .unwrap();
    dp.add_port(2, Box::new(sluice_port::null::NullPort::new()))
        .unwrap();
    dp.set_tx_flush_interval(Some(2), TxFlush::Auto).unwrap();
    assert_eq!(dp.port_reports()[0].tx_flush, TxFlush::Auto);
    dp.set_tx_flush_interval(Some(2), TxFlush::Fixed(25))
        .unwrap();
    assert_eq!(dp.port_reports()[0].tx_flush, TxFlush::Fixed(25));
}

#[test]
fn nothing_waits_after_shutdown_or_port_removal() {
    // Holding after the first windows; the input goes on. Removing the
    // port sends what it holds first.
    let (mut dp, clock, log) = setup(20_000, 20_000);
    for t in 1..=4_000 {
        clock.store(t, Ordering::Relaxed);
        dp.poll_once(t);
    }
    let st = dp.stats();
    assert!(st.output_copies > st.sent_packets, "a batch is held");
    let queued = st.output_copies;
    dp.remove_port(2).unwrap();
    assert_eq!(dp.stats().sent_packets, queued);
    let logged: usize = log.lock().unwrap().iter().map(|(_, p)| p.len()).sum();
    assert_eq!(logged as u64, queued);
    // And shutdown: a held batch of a run stopped mid-stream goes.
    let (mut dp, clock, _log) = setup(20_000, 20_000);
    for t in 1..=4_000 {
        clock.store(t, Ordering::Relaxed);
        dp.poll_once(t);
    }
    assert!(dp.stats().output_copies > dp.stats().sent_packets);
    dp.finish().unwrap();
    assert_eq!(dp.stats().sent_packets, dp.stats().output_copies);
}
