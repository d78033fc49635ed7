//! The poll-mode datapath threads and the commands they take.
//!
//! Each PMD thread owns one datapath (its pool, caches, megaflows and one
//! queue of every port); other threads never touch it.
//! They send [`PmdCommand`]s over a channel, which the thread reads at the
//! top of every poll iteration (before any packet of that iteration is
//! classified) and answers on the reply channel each command carries. So
//! when a `SetRules` is answered, the new rules are in force: every packet
//! the thread processes afterwards is forwarded by them. A thread that
//! sleeps while its ports are idle ([`crate::pmd_sleep`]) is woken by the
//! command ([`PmdSender::send`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use sluice_classifier::{Action, RuleSet};
use sluice_datapath::{Datapath, DpStats, PacketIn, PortConfig, PortReport, RxQueue};
use sluice_ofproto::hub::PinBatch;
use sluice_port::Port;

use crate::pmd_sleep::{Sleeper, Wake, MAX_SLEEP};

/// A point-in-time copy of a PMD's counters.
#[derive(Debug, Clone)]
pub struct PmdSnapshot {
    /// Which PMD (0-based) and the core it is pinned to, if any.
    pub placement: Placement,
    /// Datapath counters.
    pub stats: DpStats,
    /// (megaflows, masks, EMC entries, SMC entries).
    pub occupancy: (usize, usize, usize, usize),
    /// Port counters (this PMD's queues of each port).
    pub ports: Vec<PortReport>,
}

/// What `pmd-perf-show` reads of one PMD.
#[derive(Debug, Clone)]
pub struct PerfSnapshot {
    /// Which PMD.
    pub placement: Placement,
    /// Its counters now.
    pub stats: DpStats,
    /// Its metrics, when on.
    pub perf: Option<Box<sluice_datapath::perf::PmdPerf>>,
    /// The switch clock now, µs.
    pub now_us: u64,
}

/// Where a PMD thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placement {
    /// Its number among the PMDs (0-based): it sends on queue `index` of
    /// every port (and polls it, with any further rx queues dealt to it).
    pub index: usize,
    /// The CPU it is pinned to (`--pmd-cores`), or none.
    pub core: Option<usize>,
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.core {
            Some(c) => write!(f, "pmd thread {} core_id {c}", self.index),
            None => write!(f, "pmd thread {}", self.index),
        }
    }
}

/// What the PMD threads of one switch share: the stop conditions that
/// count over all of them.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set to end every PMD (Ctrl-C, `--duration`).
    pub stop: Arc<AtomicBool>,
    /// Packets received by all PMDs, kept only when `--packets` is given.
    pub received: AtomicU64,
    /// Packets PMDs may receive: `received` and what each PMD has
    /// reserved for its next poll (given back unused), so that together
    /// they receive exactly `--packets`.
    pub claimed: AtomicU64,
    /// PMDs whose inputs are not all used up. A PMD whose inputs end keeps
    /// polling (its ports' queues stay served, it answers commands) until
    /// every PMD's inputs end.
    pub busy: AtomicUsize,
    /// Whether some PMD's finite input (a capture) has ended. With
    /// [`Limits::hold`], a run ends for want of input only then: a switch
    /// whose ports never received, or whose live ports were removed,
    /// waits for ports to be added.
    pub input_ended: AtomicBool,
}

/// Emptied packet-in batches a PMD's return queue holds.
const PIN_RETURNS: usize = 16;

/// What a PMD thread can be asked.
pub enum PmdCommand {
    /// Install rules; answered with the epoch once they are in force.
    SetRules(Arc<RuleSet>, Sender<u64>),
    /// Install a bridge's rules (`None`: the bridge is gone), as
    /// `SetRules` for bridge 0.
    SetBridgeRules(u16, Option<Arc<RuleSet>>, Sender<u64>),
    /// Report counters.
    Stats(Sender<PmdSnapshot>),
    /// Every port's counters alone: no cache scan (what the OpenFlow
    /// channel asks for often, e.g. to watch links every half second).
    PortReports(Sender<Vec<PortReport>>),
    /// Zero the datapath counters.
    ClearStats(Sender<()>),
    /// Credit the rules with every megaflow hit so far (before reading
    /// rule counters: they are pushed in bulk, not per batch).
    CreditRules(Sender<()>),
    /// List the megaflows.
    DumpMegaflows(Sender<Vec<String>>),
    /// List the megaflows in ODP text (verbose: every field), those a
    /// filter matches when there is one.
    DumpOdpFlows(
        bool,
        Option<Box<sluice_classifier::flow_match::Match>>,
        Sender<Vec<String>>,
    ),
    /// Remove every megaflow; answered with how many went.
    PurgeMegaflows(Sender<usize>),
    /// Start a live capture of a port (`sluice ctl capture`).
    AddTap(
        u32,
        Box<sluice_datapath::capture::TapSpec>,
        Sender<Result<(), String>>,
    ),
    /// End the live capture of a port; answered whether there was one.
    RemoveTap(u32, Sender<bool>),
    /// The PMD performance metrics (`pmd-perf-show`).
    Perf(Sender<PerfSnapshot>),
    /// Turn the performance metrics on or off, and/or set the iteration
    /// log's threshold (µs); either starts them afresh.
    SetPerf(Option<bool>, Option<u64>, Sender<()>),
    /// Which cache level would serve a packet of this flow now (nothing
    /// changes).
    ProbeCaches(
        Box<sluice_packet::FlowKey>,
        Sender<sluice_datapath::CacheProbe>,
    ),
    /// Set `tx-flush-interval` (µs) for a port, or every port.
    SetTxFlush(
        Option<u32>,
        sluice_datapath::TxFlush,
        Sender<Result<(), String>>,
    ),
    /// Add queue `.1` of port `.0` (opened by the caller, off the
    /// datapath thread): the PMD sends on it and polls it.
    AddPort(u32, u32, Box<dyn Port>, Sender<Result<(), String>>),
    /// Remove a port after sending what it has queued; answered with its
    /// final counters.
    DelPort(u32, Sender<Result<PortReport, String>>),
    /// Change port `.0`'s MTU to `.1` in place.
    SetMtu(u32, u32, Sender<Result<(), String>>),
    /// Start polling an rx queue of port `.0` (which the PMD has); on
    /// failure the queue comes back.
    AddRxq(u32, RxQueue, Sender<Result<(), RxqRefused>>),
    /// Stop polling rx queue `.1` of port `.0` and hand it over, after
    /// sending everything queued for output. A queue whose input goes on
    /// counts in [`Shared::busy`] while in flight, so the run cannot end
    /// for want of input between two PMDs.
    TakeRxq(u32, u32, Sender<Result<RxQueue, String>>),
    /// Forward a controller's packet (PACKET_OUT): its bytes, in_port and
    /// actions.
    PacketOut(Vec<u8>, u32, Vec<Action>, Sender<Result<(), String>>),
    /// Set a port's OpenFlow config bits (PORT_MOD).
    SetPortConfig(u32, PortConfig, Sender<Result<(), String>>),
    /// Finish: flush everything and end the thread.
    Stop,
}

/// An rx queue a PMD would not take, handed back with the reason.
pub struct RxqRefused {
    /// Why.
    pub error: String,
    /// The queue, to give back where it came from.
    pub queue: RxQueue,
}

/// Whether a PMD's inputs go on, as counted in [`Shared::busy`].
struct Liveness<'a> {
    shared: &'a Shared,
    inputs_left: bool,
}

impl Liveness<'_> {
    /// Counts this PMD in or out of `busy` as its datapath says.
    fn update(&mut self, dp: &Datapath) {
        let live = !dp.rx_exhausted();
        if dp.input_ended() {
            self.shared.input_ended.store(true, Ordering::Relaxed);
        }
        if live && !self.inputs_left {
            self.shared.busy.fetch_add(1, Ordering::AcqRel);
        } else if !live && self.inputs_left {
            self.shared.busy.fetch_sub(1, Ordering::AcqRel);
        }
        self.inputs_left = live;
    }
}

/// Packets a PMD reserves for one poll under `--packets` (a few bursts).
const RESERVE: u64 = 8 * sluice_packet::BATCH_SIZE as u64;

/// Takes up to `want` of what is left below `max` in `claimed`.
fn reserve(claimed: &AtomicU64, max: u64, want: u64) -> u64 {
    let mut cur = claimed.load(Ordering::Acquire);
    loop {
        let k = want.min(max.saturating_sub(cur));
        if k == 0 {
            return 0;
        }
        match claimed.compare_exchange_weak(cur, cur + k, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return k,
            Err(now) => cur = now,
        }
    }
}

/// What ends a PMD's run besides its inputs ending or a stop.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Wall time.
    pub duration: Option<std::time::Duration>,
    /// Packets received.
    pub packets: Option<u64>,
    /// Keep running when no port receives (a control front end can add
    /// ports): only a finite input that ended, a limit or a stop ends it.
    pub hold: bool,
}

/// A running PMD thread.
pub struct PmdHandle {
    /// Where it runs.
    pub placement: Placement,
    /// Where to send commands.
    pub commands: PmdSender,
    join: JoinHandle<Result<Datapath, String>>,
}

/// Where commands for a PMD thread go: its channel, and what wakes it if
/// it sleeps ([`crate::pmd_sleep`]).
#[derive(Clone)]
pub struct PmdSender {
    tx: Sender<PmdCommand>,
    wake: Arc<Wake>,
}

impl PmdSender {
    /// Sends `cmd` (as [`Sender::send`]), waking the thread if it sleeps.
    pub fn send(&self, cmd: PmdCommand) -> Result<(), mpsc::SendError<PmdCommand>> {
        self.tx.send(cmd)?;
        self.wake.sent();
        Ok(())
    }
}

impl PmdHandle {
    /// Waits for the thread to end and takes its datapath back.
    pub fn join(self) -> Result<Datapath, String> {
        self.join
            .join()
            .map_err(|_| "the datapath thread panicked".to_string())?
    }
}

fn handle(
    dp: &mut Datapath,
    cmd: PmdCommand,
    placement: Placement,
    now_us: u64,
    live: &mut Liveness,
) -> bool {
    match cmd {
        PmdCommand::SetRules(rules, reply) => {
            dp.set_rules(rules);
            let _ = reply.send(dp.epoch());
        }
        PmdCommand::SetBridgeRules(bridge, rules, reply) => {
            dp.set_bridge_rules(bridge, rules);
            let _ = reply.send(dp.epoch());
        }
        PmdCommand::SetPortConfig(ofport, config, reply) => {
            let _ = reply.send(
                dp.set_port_config(ofport, config)
                    .map_err(|e| e.to_string()),
            );
        }
        PmdCommand::PacketOut(data, in_port, actions, reply) => {
            let _ = reply.send(dp.packet_out(&data, in_port, &actions, now_us));
        }
        PmdCommand::PortReports(reply) => {
            let _ = reply.send(dp.port_reports());
        }
        PmdCommand::Stats(reply) => {
            let _ = reply.send(PmdSnapshot {
                placement,
                stats: dp.stats().clone(),
                occupancy: dp.cache_occupancy(),
                ports: dp.port_reports(),
            });
        }
        PmdCommand::ClearStats(reply) => {
            dp.clear_stats();
            if dp.perf().is_some() {
                dp.set_perf_metrics(true, now_us);
            }
            let _ = reply.send(());
        }
        PmdCommand::AddTap(port, spec, reply) => {
            let _ = reply.send(dp.add_tap(port, *spec).map_err(|e| e.to_string()));
        }
        PmdCommand::RemoveTap(port, reply) => {
            let _ = reply.send(dp.remove_tap(port));
        }
        PmdCommand::Perf(reply) => {
            let _ = reply.send(PerfSnapshot {
                placement,
                stats: dp.stats().clone(),
                perf: dp.perf().map(|p| Box::new(p.clone())),
                now_us,
            });
        }
        PmdCommand::SetPerf(on, log_us, reply) => {
            if let Some(us) = log_us {
                dp.set_perf_log_threshold(us, now_us);
            }
            if let Some(on) = on {
                dp.set_perf_metrics(on, now_us);
            }
            let _ = reply.send(());
        }
        PmdCommand::CreditRules(reply) => {
            dp.credit_rules();
            let _ = reply.send(());
        }
        PmdCommand::DumpMegaflows(reply) => {
            let _ = reply.send(dp.dump_megaflows(now_us));
        }
        PmdCommand::DumpOdpFlows(verbose, filter, reply) => {
            let _ = reply.send(dp.dump_megaflows_odp(now_us, verbose, filter.as_deref()));
        }
        PmdCommand::PurgeMegaflows(reply) => {
            let _ = reply.send(dp.purge_megaflows());
        }
        PmdCommand::ProbeCaches(key, reply) => {
            let _ = reply.send(dp.probe_caches(&key, now_us));
        }
        PmdCommand::SetTxFlush(port, f, reply) => {
            let _ = reply.send(dp.set_tx_flush_interval(port, f).map_err(|e| e.to_string()));
        }
        PmdCommand::AddPort(n, qid, port, reply) => {
            let _ = reply.send(dp.add_port_queue(n, qid, port).map_err(|e| e.to_string()));
        }
        PmdCommand::DelPort(n, reply) => {
            let _ = reply.send(dp.remove_port(n).map_err(|e| e.to_string()));
        }
        PmdCommand::SetMtu(n, mtu, reply) => {
            let _ = reply.send(dp.set_port_mtu(n, mtu).map_err(|e| e.to_string()));
        }
        PmdCommand::AddRxq(n, q, reply) => {
            let in_flight = !q.rx_done;
            let added = dp.add_rxq(n, q).map_err(|(e, queue)| RxqRefused {
                error: e.to_string(),
                queue,
            });
            if added.is_ok() && in_flight {
                // Count this PMD in before the queue's own count goes.
                live.update(dp);
                live.shared.busy.fetch_sub(1, Ordering::AcqRel);
            }
            let _ = reply.send(added);
        }
        PmdCommand::TakeRxq(n, qid, reply) => {
            let taken = dp.take_rxq(n, qid).map_err(|e| e.to_string());
            if taken.as_ref().is_ok_and(|q| !q.rx_done) {
                live.shared.busy.fetch_add(1, Ordering::AcqRel);
            }
            let _ = reply.send(taken);
        }
        PmdCommand::Stop => return false,
    }
    true
}

/// Starts a PMD thread (pinned to `placement.core` when given) that
/// builds its datapath with `build` and runs its poll loop. The loop ends
/// when every PMD's finite inputs are drained, at a stop condition of
/// `opts` (counted over all PMDs through `shared`), when `shared.stop` is
/// set, or on [`PmdCommand::Stop`]; then it flushes every port.
/// `shared.busy` must count this PMD before the call. Returns once the
/// datapath is built, or the error that stopped the thread before it ran
/// (pinning, building).
///
/// The datapath is built on the thread that polls it, after pinning, so
/// everything it allocates comes from that thread's own heap arena (and
/// its CPU's memory node): two PMDs' datapaths built side by side on one
/// thread shared cache lines at the seams of their allocations, written
/// by both PMDs every batch, which cost a fifth of the rate of two PMDs
/// (`sluice bench --pmds 2`, l3l4, 10k flows: 49-51 Mpps in some runs,
/// 66-71 in others; built in place, 69-71 in every run).
pub fn spawn(
    build: impl FnOnce() -> Result<Datapath, String> + Send + 'static,
    placement: Placement,
    start: Instant,
    limits: Limits,
    shared: Arc<Shared>,
    packet_ins: Option<mpsc::SyncSender<PinBatch>>,
) -> Result<PmdHandle, String> {
    let (tx, rx): (Sender<PmdCommand>, Receiver<PmdCommand>) = mpsc::channel();
    let wake = Arc::new(
        Wake::new().map_err(|e| format!("{placement}: cannot make its wake-up eventfd: {e}"))?,
    );
    let mut sleeper = Sleeper::new(Arc::clone(&wake), MAX_SLEEP);
    let (built_tx, built_rx) = mpsc::channel::<Result<(), String>>();
    let deadline = limits.duration.map(|d| start + d);
    let max_packets = limits.packets;
    let hold = limits.hold;
    let join = std::thread::Builder::new()
        .name(format!("pmd{}", placement.index))
        // Its translations nest a resubmit a level each.
        .stack_size(sluice_classifier::xlate::STACK_BYTES)
        .spawn(move || {
            let ready = placement
                .core
                .map_or(Ok(()), |core| {
                    sluice_port::sys::pin_to_cpu(core)
                        .map_err(|e| format!("{placement}: cannot pin to CPU {core}: {e}"))
                })
                .and_then(|()| build());
            let mut dp = match ready {
                Ok(dp) => {
                    let _ = built_tx.send(Ok(()));
                    dp
                }
                Err(e) => {
                    shared.busy.fetch_sub(1, Ordering::AcqRel);
                    let _ = built_tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            // Time from the cycle counter: one read per poll iteration.
            let clock = sluice_datapath::cycles::TscClock::new(start);
            let now_us = || clock.now_us();
            let mut live = Liveness {
                shared: &shared,
                inputs_left: true,
            };
            let mut pending_pins: Option<Vec<PacketIn>> = None;
            let mut pins_since: Option<u64> = None;
            let (back_tx, back_rx) = mpsc::sync_channel::<Vec<PacketIn>>(PIN_RETURNS);
            let mut spare_batches: Vec<Vec<PacketIn>> = Vec::new();
            // A command the sleeper found waiting.
            let mut found: Option<PmdCommand> = None;
            'poll: loop {
                // Commands first: a change is in force before any packet
                // of this iteration is looked at.
                while let Some(cmd) = found.take().or_else(|| rx.try_recv().ok()) {
                    if !handle(&mut dp, cmd, placement, now_us(), &mut live) {
                        break 'poll;
                    }
                }
                live.update(&dp);
                if (shared.busy.load(Ordering::Acquire) == 0
                    && (!hold || shared.input_ended.load(Ordering::Relaxed)))
                    || shared.stop.load(Ordering::Relaxed)
                    || max_packets.is_some_and(|n| shared.received.load(Ordering::Relaxed) >= n)
                {
                    break;
                }
                if deadline.is_some_and(|d| {
                    dp.stats().iterations.is_multiple_of(64) && Instant::now() >= d
                }) {
                    break;
                }
                // With --packets, this poll may take what it reserved.
                let reserved = max_packets.map(|max| {
                    let k = reserve(&shared.claimed, max, RESERVE);
                    dp.set_rx_budget(Some(k as usize));
                    k
                });
                let received = dp.poll_once_clocked(&clock);
                if let Some(k) = reserved.filter(|&k| k > 0) {
                    let unused = dp.rx_budget() as u64;
                    if unused > 0 {
                        shared.claimed.fetch_sub(unused, Ordering::AcqRel);
                    }
                    if unused < k {
                        shared.received.fetch_add(k - unused, Ordering::AcqRel);
                    }
                }
                // Packet-ins leave for the OpenFlow channel in one batch
                // per iteration through a bounded queue (one hand-over, at
                // most one wake-up, per batch). A batch the queue has no
                // room for waits here, and the datapath's own bounded
                // queue fills behind it (then drops, counted).
                if let Some(tx) = &packet_ins {
                    // What handing packet-ins over costs counts against
                    // the PMD's packet-in share, as making them does.
                    let t0 = sluice_datapath::cycles::now();
                    let mut worked = false;
                    // Batches the channel is done with come back: their
                    // buffers serve the next packet-ins.
                    while let Ok(mut used) = back_rx.try_recv() {
                        dp.recycle_packet_ins(&mut used);
                        spare_batches.push(used);
                        worked = true;
                    }
                    // Handed over a batch at a time: 64 waiting, or the
                    // first has waited 50 µs (each hand-over may wake the
                    // channel's thread, a system call on this core).
                    let waiting = dp.packet_ins_waiting();
                    if waiting == 0 {
                        pins_since = None;
                    } else if pins_since.is_none() {
                        pins_since = Some(t0);
                    }
                    let due = waiting >= 64
                        || pins_since
                            .is_some_and(|t| clock.us_at(t0).saturating_sub(clock.us_at(t)) >= 50);
                    if pending_pins.is_none() && due {
                        worked = true;
                        pins_since = None;
                        let mut batch = spare_batches.pop().unwrap_or_default();
                        dp.hand_over_packet_ins(|p| {
                            batch.push(p);
                            Ok(())
                        });
                        pending_pins = Some(batch);
                    }
                    if let Some(items) = pending_pins.take() {
                        let b = PinBatch {
                            items,
                            back: back_tx.clone(),
                        };
                        if let Err(mpsc::TrySendError::Full(b)) = tx.try_send(b) {
                            pending_pins = Some(b.items);
                        }
                    }
                    if worked {
                        dp.charge_packet_ins(sluice_datapath::cycles::now().wrapping_sub(t0));
                    }
                }
                // Nothing came and nothing waits: perhaps sleep.
                let idle = received == 0 && pending_pins.is_none();
                found = sleeper.after(&mut dp, idle, now_us, deadline, &rx);
            }
            if live.inputs_left {
                shared.busy.fetch_sub(1, Ordering::AcqRel);
            }
            // One PMD stopping by command or condition stops the others.
            shared.stop.store(true, Ordering::Relaxed);
            dp.finish().map_err(|e| e.to_string())?;
            Ok(dp)
        })
        .map_err(|e| format!("{placement}: cannot start the thread: {e}"))?;
    let handle = PmdHandle {
        placement,
        commands: PmdSender { tx, wake },
        join,
    };
    match built_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        // The thread ended without a word: it panicked; join says so.
        Err(_) => Err(handle
            .join()
            .err()
            .unwrap_or_else(|| format!("{placement}: the datapath thread ended while starting"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse_flow_file;
    use sluice_datapath::DatapathConfig;
    use sluice_packet::build::{Frame, L4};
    use sluice_port::capture::CapturePort;
    use sluice_port::replay::{Frames, ReplayPort};

    fn rules(text: &str) -> Arc<RuleSet> {
        Arc::new(RuleSet::from_specs(
            &parse_flow_file(text, None).unwrap(),
            0,
        ))
    }

    #[test]
    fn a_datapath_that_cannot_be_built_is_an_error_from_spawn() {
        let shared = Arc::new(Shared {
            busy: AtomicUsize::new(1),
            ..Shared::default()
        });
        let err = spawn(
            || {
                let mut dp = Datapath::new(DatapathConfig::default(), rules("actions=drop"))
                    .map_err(|e| e.to_string())?;
                dp.set_tx_flush_interval(Some(7), sluice_datapath::TxFlush::Fixed(50))
                    .map_err(|e| format!("tx-flush-interval for port 7: {e}"))?;
                Ok(dp)
            },
            Placement::default(),
            Instant::now(),
            Limits::default(),
            Arc::clone(&shared),
            None,
        )
        .err()
        .expect("no datapath, no PMD");
        assert!(err.contains("port 7"), "{err}");
        assert_eq!(
            shared.busy.load(Ordering::Acquire),
            0,
            "the PMD counted itself out"
        );
    }

    #[test]
    fn once_set_rules_is_answered_no_packet_uses_the_old_rules() {
        let mut dp = Datapath::new(DatapathConfig::default(), rules("actions=output:2")).unwrap();
        let frames: Frames = (0..64u16)
            .map(|i| Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 53 }).build())
            .collect();
        dp.add_port(1, Box::new(ReplayPort::new("in", frames, true)))
            .unwrap();
        let (cap, sent) = CapturePort::new();
        dp.add_port(2, Box::new(cap)).unwrap();
        let shared = Arc::new(Shared {
            busy: AtomicUsize::new(1),
            ..Shared::default()
        });
        let pmd = spawn(
            move || Ok(dp),
            Placement::default(),
            Instant::now(),
            Limits::default(),
            Arc::clone(&shared),
            None,
        )
        .unwrap();
        while sent.lock().unwrap().len() < 10_000 {
            std::thread::yield_now();
        }
        let (tx, rx) = mpsc::channel();
        pmd.commands
            .send(PmdCommand::SetRules(rules("actions=drop"), tx))
            .unwrap();
        rx.recv().unwrap();
        let at_change = sent.lock().unwrap().len();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (tx, rx) = mpsc::channel();
        pmd.commands.send(PmdCommand::Stats(tx)).unwrap();
        let snap = rx.recv().unwrap();
        assert_eq!(
            sent.lock().unwrap().len(),
            at_change,
            "not one packet forwarded after the answer"
        );
        assert!(snap.stats.dropped_total() > 0, "and packets kept coming");
        shared.stop.store(true, Ordering::Relaxed);
        let dp = pmd.join().unwrap();
        assert!(dp.stats().rx_balanced() && dp.stats().tx_balanced());
    }
}
