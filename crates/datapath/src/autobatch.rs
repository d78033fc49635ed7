//! Output batching that tunes itself: `tx-flush-interval=auto`, the
//! default (issue 40; seeds 000, 002, 003).
//!
//! A fixed interval is a bet: 50 µs made kernel guests 24 % faster in
//! seed 000's tests and bonded NICs slower, and OVS's maintainers decline
//! to recommend a value. Auto measures, per port, on the PMD's clock:
//!
//! - what one send call costs: TSC cycles per `tx_burst` call, split by
//!   the line through the average small send and the average large one
//!   into a part per call (the kick: syscall, doorbell, eventfd write)
//!   and a part per packet;
//! - how often packets for the port come (packets per µs, over windows of
//!   [`WINDOW_US`]) and how many each send carries;
//! - what the PMD spends per packet (its processing cycles per received
//!   packet over the same window).
//!
//! From them, per port: whether to hold a partly filled batch, and for
//! how many packets. A port holds when one kick costs more than
//! [`KICK_SHARE`] of the processing of the packets a send carries without
//! a hold (kicking less could then gain more than that); it then sends as
//! soon as its batch holds enough packets for the kick to be at most that
//! share (all 32 for a costly kick), or when the batch has waited
//! [`CEILING_US`] for company. It does not hold when its kick is that
//! cheap already, or when its batches fill anyway. Until a window has
//! been measured nothing is held (what interval 0 does).
//!
//! Whether more packets will come is not guessed from the rate: when none
//! comes, the PMD's next iteration receives nothing and sends every batch,
//! so a lone packet leaves at once whatever the hold. (A guess was tried:
//! no hold where the measured rate promised less than one more packet
//! within the ceiling. On a busy PMD that rate is what the kicks leave
//! it; at a rate that jumps tenfold the PMD fell behind before it held;
//! and a kernel guest on a vhost-user port, 13,000 super-frames a second,
//! lost the 50 µs interval's gain.)
//!
//! The ceiling runs on the PMD's time less what it spends in send calls
//! (as the ports' fits estimate them): a batch waits for company while
//! the PMD receives and processes packets, not while it sends the other
//! ports' batches, which every packet waits for whatever the setting.
//! Counted on the plain clock, sixteen ports with 20,000-cycle kicks
//! (8 µs each, 123 µs a round) pass any 50 µs deadline every iteration,
//! and each sends every iteration: the hold then makes nothing better
//! (`sluice bench --batching`, the bursty scenario, lost a tenth of its
//! packets that way). On the plain clock a held batch still goes after
//! [`WALL_FACTOR`] times the hold (500 µs), whatever the estimates say;
//! a timing sample the thread was preempted in counts as at most 8 times
//! the cost expected.
//!
//! What the hold never changes: a full batch goes at once, an idle
//! iteration (nothing received) sends everything, and shutdown and
//! reconfiguration flush first; a port's batch is one FIFO. So a lone
//! packet leaves at the next idle iteration whatever the hold, and per-flow
//! order holds.
//!
//! Cost: two counter reads per timed send call (one in eight), a few
//! float operations per call and per window, and a comparison per queued
//! packet (the batch size to send at).

/// The longest a packet may wait in an output batch under `auto` (µs):
/// the highest interval any seed measured as useful (seed 000: 50 µs gave
/// kernel guests +24 %).
pub const CEILING_US: u64 = 50;

/// A held batch goes after this many times its hold on the plain clock,
/// whatever the send-time estimates say (a preempted timing sample must
/// not hold batches for long).
pub const WALL_FACTOR: u64 = 10;

/// How long each measurement of the arrival rate and the PMD's cost per
/// packet runs (µs).
pub const WINDOW_US: u64 = 1_000;

/// The share of a packet's own processing cost a kick may add: the hold
/// grows the batch until the kick's share per packet is at most this.
pub const KICK_SHARE: f64 = 0.03;

/// Sends of at most this many packets are small ones for the fit.
const SMALL: f64 = 4.0;
/// Sends of at least this many packets are large ones.
const LARGE: f64 = 16.0;

/// Weight of the newest sample in the running averages.
const NEW: f64 = 1.0 / 16.0;

/// How long a port's output batch may wait for more packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxFlush {
    /// Measured per port (the default).
    #[default]
    Auto,
    /// At most this many µs (0: at the end of the rx burst).
    Fixed(u64),
}

impl TxFlush {
    /// `auto` or a number of µs up to [`crate::MAX_TX_FLUSH_INTERVAL_US`].
    pub fn parse(s: &str) -> Result<TxFlush, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(TxFlush::Auto);
        }
        let us: u64 = s.trim().parse().map_err(|_| {
            format!(
                "tx-flush-interval '{s}': give auto, or 0 to {} µs",
                crate::MAX_TX_FLUSH_INTERVAL_US
            )
        })?;
        crate::check_tx_flush_interval(us).map(TxFlush::Fixed)
    }
}

impl std::fmt::Display for TxFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxFlush::Auto => f.write_str("auto"),
            TxFlush::Fixed(us) => write!(f, "{us}"),
        }
    }
}

/// What a port's sends cost and how fast its packets come, and the hold
/// time that follows.
#[derive(Debug, Clone, Default)]
pub struct KickModel {
    /// Running average of packets per send.
    n: f64,
    /// Running averages (packets, cycles) of sends of at most [`SMALL`]
    /// and of at least [`LARGE`] packets (0, 0: none yet).
    small: (f64, f64),
    large: (f64, f64),
    /// Send calls timed, and all send calls.
    calls: u64,
    sends: u64,
    /// The fit: cycles per call and per packet.
    per_call: f64,
    per_packet: f64,
    /// The window being measured: its start, packets sent in it, and the
    /// PMD's time and packets at its start.
    win_start_us: u64,
    win_packets: u64,
    win0: PmdTime,
    /// The batch size that is sent at once while holding (0: none).
    target: usize,
    /// Packets per µs for this port (0 until a window ends).
    rate: f64,
    /// The PMD's cycles per received packet (0 until a window ends).
    pkt_cost: f64,
    /// The hold in force (µs).
    hold_us: u64,
}

/// The PMD's counters a window is measured between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PmdTime {
    /// Cycles spent on iterations that received packets.
    pub busy_cycles: u64,
    /// Packets received.
    pub rx_packets: u64,
}

/// What [`KickModel`] tells of itself (for `dump-ports` and
/// `pmd-stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KickReport {
    /// The hold in force, µs.
    pub hold_us: u64,
    /// The batch size sent at once while holding (0: a full one).
    pub target: usize,
    /// Cycles per send call, the per-packet part left out.
    pub per_call_cycles: f64,
    /// Cycles per packet of a send call.
    pub per_packet_cycles: f64,
    /// Packets per µs for the port.
    pub rate_per_us: f64,
    /// The PMD's processing cycles per packet.
    pub pmd_cycles_per_packet: f64,
    /// Send calls measured.
    pub calls: u64,
}

impl KickModel {
    /// Whether the next send call should be timed ([`KickModel::sent`]):
    /// the first 64, then one in eight.
    #[inline]
    pub fn wants_sample(&self) -> bool {
        self.calls < 64 || self.sends.is_multiple_of(8)
    }

    /// A send call of `n` packets, timed or not.
    #[inline]
    pub fn count(&mut self, n: usize) {
        self.sends += 1;
        self.win_packets += n as u64;
    }

    /// A timed send call of `n` packets that took `cycles`.
    pub fn sent(&mut self, n: usize, cycles: u64) {
        let mut c = cycles as f64;
        if self.calls >= 64 {
            // A sample the thread was preempted in says nothing of the
            // port: at most 8 times the cost expected.
            c = c.min(8.0 * self.cycles_for(n).max(1_000.0));
        }
        let n = n as f64;
        let w = if self.calls == 0 { 1.0 } else { NEW };
        self.n += w * (n - self.n);
        self.calls += 1;
        // Running averages of small sends and of large ones, each of its
        // size and its cost.
        let class = if n <= SMALL {
            &mut self.small
        } else if n >= LARGE {
            &mut self.large
        } else {
            return self.refit();
        };
        let w = if class.0 == 0.0 { 1.0 } else { NEW };
        class.0 += w * (n - class.0);
        class.1 += w * (c - class.1);
        self.refit();
    }

    /// The line through the small and the large sends: cost per packet
    /// its slope, cost per call what is left of a small send. With sends
    /// of one kind only, all of their cost is taken as the call's: a
    /// costly-looking kick is then held for, and the held sends, larger,
    /// tell the two apart (a two-point fit, not a regression over all
    /// sends: the kernel's share of a send, a veth's receive side say, is
    /// far from a line, and a least-squares slope over it was seen at
    /// 52,000 cycles a packet for a 4,000-cycle one).
    fn refit(&mut self) {
        let ((ns, cs), (nl, cl)) = (self.small, self.large);
        (self.per_call, self.per_packet) = match (ns > 0.0, nl > 0.0) {
            (true, true) if nl > ns => {
                let slope = ((cl - cs) / (nl - ns)).max(0.0);
                ((cs - slope * ns).max(0.0), slope)
            }
            (true, _) => (cs, 0.0),
            (false, true) => (cl, 0.0),
            (false, false) => (0.0, 0.0),
        };
    }

    /// Ends the measuring window if it has run [`WINDOW_US`] at `now_us`
    /// (the PMD's processing cycles and received packets so far given),
    /// and sets the hold from what was measured.
    pub fn tick(&mut self, now_us: u64, pmd: PmdTime) {
        let span = now_us.saturating_sub(self.win_start_us);
        if span < WINDOW_US {
            return;
        }
        let rate = self.win_packets as f64 / span as f64;
        let first = self.win_start_us == 0;
        if !first {
            self.rate = rate;
            let rx = pmd.rx_packets.saturating_sub(self.win0.rx_packets);
            let busy = pmd.busy_cycles.saturating_sub(self.win0.busy_cycles);
            if rx > 0 {
                self.pkt_cost = busy as f64 / rx as f64;
            }
        }
        self.win_start_us = now_us;
        self.win_packets = 0;
        self.win0 = pmd;
        (self.hold_us, self.target) = self.decide();
    }

    /// The hold and the batch size to send at that the measurements call
    /// for.
    fn decide(&self) -> (u64, usize) {
        const NONE: (u64, usize) = (0, 0);
        if self.rate <= 0.0 || self.pkt_cost <= 0.0 || self.calls == 0 {
            return NONE;
        }
        // (No guess at whether more packets will come: when none does,
        // the next iteration receives nothing and sends every batch.)
        // The batch that makes a kick at most KICK_SHARE of its packets'
        // cost.
        let want = (self.per_call / (KICK_SHARE * self.pkt_cost)).ceil();
        let want = want.clamp(1.0, sluice_packet::BATCH_SIZE as f64);
        // What a send carries without a hold: the packets of one rx burst
        // (while holding, not measured: taken as one).
        let unheld = if self.hold_us == 0 {
            self.n.max(1.0)
        } else {
            1.0
        };
        if want <= unheld {
            // Cheap enough to kick, or the batches fill anyway.
            return NONE;
        }
        (CEILING_US, want as usize)
    }

    /// What a send call of `n` packets costs, as fitted (cycles).
    #[inline]
    pub fn cycles_for(&self, n: usize) -> f64 {
        self.per_call + self.per_packet * n as f64
    }

    /// The hold in force (µs).
    #[inline]
    pub fn hold_us(&self) -> u64 {
        self.hold_us
    }

    /// The batch size to send at at once (`usize::MAX`: a full batch,
    /// sent when the next packet does not fit).
    #[inline]
    pub fn target(&self) -> usize {
        if self.target == 0 {
            usize::MAX
        } else {
            self.target
        }
    }

    /// What it measured and decided.
    pub fn report(&self) -> KickReport {
        KickReport {
            hold_us: self.hold_us,
            target: self.target,
            per_call_cycles: self.per_call,
            per_packet_cycles: self.per_packet,
            rate_per_us: self.rate,
            pmd_cycles_per_packet: self.pkt_cost,
            calls: self.calls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's load: packets a millisecond in sends of `batch`, each
    /// send costing `call` cycles plus `pkt` per packet, on a PMD spending
    /// `pmd` cycles a packet and receiving `rx_per_ms` a millisecond.
    #[derive(Clone, Copy)]
    struct Load {
        per_ms: u64,
        batch: usize,
        call: u64,
        pkt: u64,
        pmd: u64,
        rx_per_ms: u64,
    }

    /// Feeds `ms` milliseconds of `l`.
    fn feed(m: &mut KickModel, ms: u64, l: Load) {
        let start = m.win_start_us.max(1);
        m.tick(start, PmdTime::default());
        let (mut cycles, mut rx) = (0u64, 0u64);
        for t in 0..ms {
            let mut left = l.per_ms;
            while left > 0 {
                let n = (l.batch as u64).min(left);
                if m.wants_sample() {
                    m.sent(n as usize, l.call + l.pkt * n);
                }
                m.count(n as usize);
                left -= n;
            }
            rx += l.rx_per_ms;
            cycles += l.rx_per_ms * l.pmd;
            m.tick(
                start + (t + 1) * WINDOW_US,
                PmdTime {
                    busy_cycles: cycles,
                    rx_packets: rx,
                },
            );
        }
    }

    #[test]
    fn the_fit_splits_call_and_packet_costs() {
        let mut m = KickModel::default();
        for i in 0..400 {
            let n = 1 + (i * 7) % 32;
            m.sent(n, 5_000 + 40 * n as u64);
            m.count(n);
        }
        let r = m.report();
        assert!((r.per_call_cycles - 5_000.0).abs() < 50.0, "{r:?}");
        assert!((r.per_packet_cycles - 40.0).abs() < 2.0, "{r:?}");
    }

    #[test]
    fn a_cheap_port_holds_nothing() {
        let mut m = KickModel::default();
        // A send of 2 costs 14 cycles against 300 a packet (a DPDK ring
        // enqueue): the kick is under 3 % of the 2 packets' cost already.
        // (All sends the same size: the fit counts all of it as the call's.)
        let l = Load {
            per_ms: 2_000,
            batch: 2,
            call: 10,
            pkt: 2,
            pmd: 300,
            rx_per_ms: 32_000,
        };
        feed(&mut m, 5, l);
        assert_eq!(
            (m.hold_us(), m.target()),
            (0, usize::MAX),
            "{:?}",
            m.report()
        );
    }

    #[test]
    fn a_costly_port_holds_to_the_ceiling_or_a_batch_worth_its_kick() {
        // 0.5 packets a µs in sends of 2, 20,000 cycles a kick, 200 a
        // packet, a PMD with time to spare: sends of 32, within 50 µs.
        let mut m = KickModel::default();
        let l = Load {
            per_ms: 500,
            batch: 2,
            call: 20_000,
            pkt: 20,
            pmd: 200,
            rx_per_ms: 8_000,
        };
        feed(&mut m, 5, l);
        assert_eq!(
            (m.hold_us(), m.target()),
            (CEILING_US, 32),
            "{:?}",
            m.report()
        );
        // A 1,000-cycle kick is worth a batch of 17 at 2,000 cycles a packet.
        let mut m = KickModel::default();
        let l = Load {
            per_ms: 500,
            batch: 2,
            call: 1_000,
            pkt: 0,
            pmd: 2_000,
            rx_per_ms: 8_000,
        };
        feed(&mut m, 5, l);
        assert_eq!(
            (m.hold_us(), m.target()),
            (CEILING_US, 17),
            "{:?}",
            m.report()
        );
    }

    #[test]
    fn a_sparse_port_with_costly_kicks_holds() {
        // Sixteen ports of one input that the kicks keep at 0.25 Mpps: 16
        // packets a millisecond each, less than one more within 50 µs;
        // holding is what lets the PMD take more.
        let mut m = KickModel::default();
        let l = Load {
            per_ms: 16,
            batch: 2,
            call: 20_000,
            pkt: 20,
            pmd: 10_000,
            rx_per_ms: 256,
        };
        feed(&mut m, 5, l);
        assert_eq!(
            (m.hold_us(), m.target()),
            (CEILING_US, 32),
            "{:?}",
            m.report()
        );
    }

    #[test]
    fn full_batches_hold_nothing() {
        let mut m = KickModel::default();
        let l = Load {
            per_ms: 32_000,
            batch: 32,
            call: 20_000,
            pkt: 20,
            pmd: 100,
            rx_per_ms: 32_000,
        };
        feed(&mut m, 5, l);
        assert_eq!(m.hold_us(), 0, "{:?}", m.report());
    }

    #[test]
    fn nothing_is_held_before_a_window_is_measured() {
        let mut m = KickModel::default();
        m.sent(1, 50_000);
        m.count(1);
        m.tick(
            10,
            PmdTime {
                busy_cycles: 1_000,
                rx_packets: 1,
            },
        );
        assert_eq!(m.hold_us(), 0);
    }

    #[test]
    fn parse_and_show() {
        assert_eq!(TxFlush::parse("auto"), Ok(TxFlush::Auto));
        assert_eq!(TxFlush::parse("AUTO"), Ok(TxFlush::Auto));
        assert_eq!(TxFlush::parse("50"), Ok(TxFlush::Fixed(50)));
        assert!(TxFlush::parse("2000000").is_err());
        assert!(TxFlush::parse("fast").unwrap_err().contains("give auto"));
        assert_eq!(TxFlush::Auto.to_string(), "auto");
        assert_eq!(TxFlush::Fixed(7).to_string(), "7");
    }
}
