//! In-memory replay: frames held in one contiguous buffer, copied into
//! pool frames on receive (the per-packet work of DPDK's `net_pcap` with
//! `infinite_rx=1`), once or in a loop. Benchmarks and `pcap:...,loop`.

use sluice_packet::{PacketBatch, PacketPool};

use crate::{Port, PortCaps, PortDrop, PortStats, RxStatus};

/// A set of frames to replay.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    bytes: Vec<u8>,
    /// (offset, length, timestamp) of each frame.
    index: Vec<(usize, usize, u64)>,
}

impl Frames {
    /// Empty.
    pub fn new() -> Self {
        Frames::default()
    }

    /// Appends a frame.
    pub fn push(&mut self, frame: &[u8], ts_ns: u64) {
        self.index.push((self.bytes.len(), frame.len(), ts_ns));
        self.bytes.extend_from_slice(frame);
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Timestamp (ns) of frame `i`.
    pub fn timestamp(&self, i: usize) -> u64 {
        self.index[i].2
    }

    /// Frame `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let (o, l, _) = self.index[i];
        &self.bytes[o..o + l]
    }

    /// Deals the frames over `n` receive queues by flow, as a NIC's RSS
    /// does: every frame of one flow lands in the same queue, in order.
    pub fn split_by_flow(&self, n: usize) -> Vec<Frames> {
        let n = n.max(1);
        let mut queues = vec![Frames::new(); n];
        for i in 0..self.len() {
            let q = rss_hash(self.get(i)) as usize % n;
            queues[q].push(self.get(i), self.timestamp(i));
        }
        queues
    }
}

/// A flow hash of a frame: IPv4/IPv6 addresses and, for TCP/UDP/SCTP
/// first fragments, ports (what RSS hashes on); the first 64 bytes of
/// anything else.
pub fn rss_hash(frame: &[u8]) -> u32 {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
        u64::from_le_bytes(w)
    };
    let mut ofs = 12;
    while frame.len() >= ofs + 2 && matches!(&frame[ofs..ofs + 2], [0x81, 0x00] | [0x88, 0xa8]) {
        ofs += 4;
    }
    let l3 = ofs + 2;
    let ethertype = frame.get(ofs..l3);
    let (addrs, proto, l4, first_frag) = match ethertype {
        Some([0x08, 0x00]) if frame.len() >= l3 + 20 => {
            let ihl = usize::from(frame[l3] & 0x0f) * 4;
            let frag_ofs = u16::from_be_bytes([frame[l3 + 6], frame[l3 + 7]]) & 0x1fff;
            (
                &frame[l3 + 12..l3 + 20],
                frame[l3 + 9],
                l3 + ihl,
                frag_ofs == 0,
            )
        }
        Some([0x86, 0xdd]) if frame.len() >= l3 + 40 => {
            (&frame[l3 + 8..l3 + 40], frame[l3 + 6], l3 + 40, true)
        }
        _ => {
            let head = &frame[..frame.len().min(64)];
            let words: arrayvec::ArrayVec<u64, 8> = head.chunks(8).map(word).collect();
            return sluice_packet::hash::hash_words(&words, 0);
        }
    };
    let mut words: arrayvec::ArrayVec<u64, 6> = addrs.chunks(8).map(word).collect();
    if first_frag && matches!(proto, 6 | 17 | 132) && frame.len() >= l4 + 4 {
        words.push(word(&frame[l4..l4 + 4]));
    }
    sluice_packet::hash::hash_words(&words, u64::from(proto))
}

impl<T: AsRef<[u8]>> FromIterator<T> for Frames {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut f = Frames::new();
        for x in iter {
            f.push(x.as_ref(), 0);
        }
        f
    }
}

/// Replays [`Frames`] as received traffic.
#[derive(Debug)]
pub struct ReplayPort {
    name: String,
    frames: Frames,
    next: usize,
    looping: bool,
    /// Stop after this many packets in total (None: once through, or
    /// forever when looping).
    limit: Option<u64>,
    /// Most packets per rx burst.
    burst: usize,
    /// Offered at a fixed rate instead of as fast as taken.
    pace: Option<Pace>,
    /// Stands in for a live device ([`ReplayPort::live`]): the datapath
    /// may not leave its frames unread.
    live: bool,
    stats: PortStats,
}

/// A fixed offered rate into a device ring of bounded size: frames arrive
/// on the clock whether or not the switch takes them, and what the ring
/// cannot hold is lost, counted as `queue full` (a NIC's `imissed`).
#[derive(Debug)]
struct Pace {
    pps: u64,
    ring: u64,
    start: Option<std::time::Instant>,
    /// Frames that left the ring so far: received or lost.
    consumed: u64,
}

impl ReplayPort {
    /// Replays `frames` once (or forever when `looping`).
    pub fn new(name: impl Into<String>, frames: Frames, looping: bool) -> Self {
        ReplayPort {
            name: name.into(),
            frames,
            next: 0,
            looping,
            limit: None,
            burst: sluice_packet::BATCH_SIZE,
            pace: None,
            live: false,
            stats: PortStats::default(),
        }
    }

    /// Makes the port stand in for a live device (a NIC whose ring the
    /// switch must keep draining): its caps say it cannot wait, so the
    /// datapath never leaves its frames unread to save upcalls. A paced
    /// port ([`ReplayPort::with_rate`]) is live already.
    pub fn live(mut self) -> Self {
        self.live = true;
        self
    }

    /// Offers the frames at `pps` packets per second (from the first
    /// receive on) into a ring of `ring` frames, like traffic on a wire:
    /// frames the switch does not take in time are lost once the ring is
    /// full (counted as `queue full`).
    pub fn with_rate(mut self, pps: u64, ring: u64) -> Self {
        self.pace = Some(Pace {
            pps: pps.max(1),
            ring: ring.max(1),
            start: None,
            consumed: 0,
        });
        self
    }

    /// Receives at most `n` packets per burst (at least 1).
    pub fn with_burst(mut self, n: usize) -> Self {
        self.burst = n.max(1);
        self
    }

    /// Stops after `n` packets in total.
    pub fn with_limit(mut self, n: u64) -> Self {
        self.limit = Some(n);
        self
    }

    /// Receive half, shared with the pcap port's loop mode.
    pub(crate) fn rx_into(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        if self.frames.is_empty() {
            return RxStatus::Exhausted;
        }
        // Frames this burst may take (received or dropped), worked out once
        // instead of per frame.
        let mut budget = batch.remaining().min(self.burst) as u64;
        if let Some(l) = self.limit {
            let taken = self.stats.rx_packets + self.stats.rx_dropped_total();
            budget = budget.min(l.saturating_sub(taken));
        }
        if let Some(p) = &mut self.pace {
            let start = *p.start.get_or_insert_with(std::time::Instant::now);
            let due = (start.elapsed().as_nanos() * u128::from(p.pps) / 1_000_000_000) as u64;
            let waiting = due.saturating_sub(p.consumed);
            let lost = waiting.saturating_sub(p.ring);
            if lost > 0 {
                // The ring overflowed since the last burst: the frames
                // beyond it were never received.
                self.stats.rx_drop(PortDrop::QueueFull, lost);
                p.consumed += lost;
                let len = self.frames.len() as u64;
                let next = self.next as u64 + lost;
                self.next = if self.looping {
                    next % len
                } else {
                    next.min(len)
                } as usize;
            }
            budget = budget.min(waiting - lost);
        }
        let paced_budget = budget;
        let max_len = pool.max_packet_len();
        // Frames for the whole burst at once; the ones a too-big frame
        // leaves unused go back at the end.
        let first = batch.len();
        let got = pool.alloc_bulk(batch, budget as usize);
        let fresh = &mut batch.as_mut_slice()[first..];
        let (mut n, mut bytes) = (0usize, 0u64);
        // n < got: with no frame left the rest wait for the next burst
        // (back-pressure).
        while budget > 0 && n < got {
            if self.next == self.frames.len() {
                if !self.looping {
                    break;
                }
                self.next = 0;
            }
            let (o, l, ts) = self.frames.index[self.next];
            if l > max_len {
                self.stats.rx_drop(PortDrop::TooBig, 1);
                self.next += 1;
                budget -= 1;
                continue;
            }
            let p = &mut fresh[n];
            let filled = p.fill_from(&self.frames.bytes[o..o + l]);
            debug_assert!(filled, "max_packet_len fits every fresh frame");
            p.meta.in_port = in_port;
            p.meta.rx_ts_ns = ts;
            bytes += l as u64;
            self.next += 1;
            n += 1;
            budget -= 1;
        }
        batch.free_from(first + n, pool);
        if let Some(p) = &mut self.pace {
            p.consumed += paced_budget - budget;
        }
        self.stats.rx_packets += n as u64;
        self.stats.rx_bytes += bytes;
        let done = (!self.looping && self.next == self.frames.len())
            || self
                .limit
                .is_some_and(|l| self.stats.rx_packets + self.stats.rx_dropped_total() >= l);
        RxStatus::of_burst(n, done)
    }

    pub(crate) fn replay_stats(&self) -> &PortStats {
        &self.stats
    }
}

impl Port for ReplayPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: false,
            finite_rx: !self.looping || self.limit.is_some(),
            rx_hash: false,
            tx_offload: false,
            // Frames in memory wait as long as they must, unless the port
            // plays a wire.
            rx_can_wait: !self.live && self.pace.is_none(),
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        self.rx_into(pool, batch, in_port)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        self.stats
            .tx_drop(PortDrop::NotWritable, batch.len() as u64);
        batch.free_all(pool);
        0
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_then_exhausted() {
        let frames: Frames = (0..40u8).map(|i| vec![i; 60]).collect();
        let mut port = ReplayPort::new("r", frames, false);
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b, 3), RxStatus::Received(32));
        assert_eq!(b.as_slice()[5].data()[0], 5);
        assert_eq!(b.as_slice()[5].meta.in_port, 3);
        b.free_all(&mut pool);
        assert_eq!(port.rx_burst(&mut pool, &mut b, 3), RxStatus::Received(8));
        b.free_all(&mut pool);
        assert_eq!(port.rx_burst(&mut pool, &mut b, 3), RxStatus::Exhausted);
        assert_eq!(port.stats().rx_packets, 40);
    }

    #[test]
    fn loop_with_limit_and_backpressure() {
        let frames: Frames = (0..3u8).map(|i| vec![i; 60]).collect();
        let mut port = ReplayPort::new("r", frames, true).with_limit(10);
        let mut pool = PacketPool::new(4, 2048).unwrap();
        let mut b = PacketBatch::new();
        assert_eq!(
            port.rx_burst(&mut pool, &mut b, 1),
            RxStatus::Received(4),
            "pool of 4"
        );
        assert_eq!(b.as_slice()[3].data()[0], 0, "wrapped around");
        b.free_all(&mut pool);
        let mut total = 4;
        loop {
            match port.rx_burst(&mut pool, &mut b, 1) {
                RxStatus::Received(n) => total += n,
                RxStatus::Exhausted => break,
                RxStatus::Idle => unreachable!(),
            }
            b.free_all(&mut pool);
        }
        assert_eq!(total, 10);
    }

    #[test]
    fn a_paced_port_offers_its_rate_and_loses_what_its_ring_cannot_hold() {
        let frames: Frames = (0..10u8).map(|i| vec![i; 60]).collect();
        let mut port = ReplayPort::new("r", frames, true).with_rate(100_000, 64);
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let mut b = PacketBatch::new();
        // Nothing has arrived at the first look.
        assert!(matches!(
            port.rx_burst(&mut pool, &mut b, 1),
            RxStatus::Idle | RxStatus::Received(_)
        ));
        b.free_all(&mut pool);
        // 20 ms later 2,000 frames have arrived: 64 fit the ring.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut got = 0;
        while let RxStatus::Received(n) = port.rx_burst(&mut pool, &mut b, 1) {
            got += n;
            b.free_all(&mut pool);
            if got >= 64 {
                break;
            }
        }
        assert!(got >= 64, "a full ring is received: {got}");
        let lost = port.stats().rx_dropped_by(PortDrop::QueueFull);
        assert!(lost >= 1000, "the overflow is counted: {lost}");
        assert!(got < 2 * 64, "no more than the ring held: {got}");
    }

    #[test]
    fn oversize_frames_are_counted() {
        let frames: Frames = [vec![0u8; 100], vec![1u8; 3000]].into_iter().collect();
        let mut port = ReplayPort::new("r", frames, false);
        let mut pool = PacketPool::new(4, 2048).unwrap();
        let mut b = PacketBatch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b, 1), RxStatus::Received(1));
        assert_eq!(port.stats().rx_dropped_by(PortDrop::TooBig), 1);
        assert_eq!(b.len(), 1);
        assert_eq!(b.as_slice()[0].data(), &[0u8; 100][..]);
        b.free_all(&mut pool);
        assert_eq!(
            pool.available(),
            4,
            "frames the burst did not use went back"
        );
    }

    #[test]
    fn split_by_flow_keeps_each_flow_whole_and_in_order() {
        use sluice_packet::build::{Frame, L4};
        let mut frames = Frames::new();
        for i in 0..400u64 {
            let port = (i % 40) as u16;
            let f =
                Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: port, dst: 53 }).build();
            frames.push(&f, i);
        }
        let queues = frames.split_by_flow(2);
        assert_eq!(queues.iter().map(Frames::len).sum::<usize>(), 400);
        assert!(
            queues.iter().all(|q| !q.is_empty()),
            "40 flows reach both queues"
        );
        for q in &queues {
            let mut last = None;
            for i in 0..q.len() {
                assert!(last < Some(q.timestamp(i)), "order kept");
                last = Some(q.timestamp(i));
                let other = &queues[usize::from(std::ptr::eq(q, &queues[0]))];
                assert!(
                    (0..other.len()).all(|j| other.get(j) != q.get(i)),
                    "a flow lives in one queue"
                );
            }
        }
        // Non-IP frames and runts still get a queue.
        let odd: Frames = [vec![0xffu8; 10], vec![0u8; 200]].into_iter().collect();
        assert_eq!(
            odd.split_by_flow(3).iter().map(Frames::len).sum::<usize>(),
            2
        );
    }
}
