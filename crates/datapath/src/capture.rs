//! Live capture of a port (`sluice ctl capture`, as `ovs-tcpdump` or
//! VPP's pcap trace): a tap on a port's slot copies the frames it receives
//! and/or sends, whole, into chunks that a writer thread (outside the
//! datapath) turns into a capture file.
//!
//! Bounded cost: a port with no tap pays one branch per batch. A tapped
//! port copies its matching frames into a buffer per batch and hands it
//! over with one non-blocking send; buffers come back from the writer to
//! be used again, so a steady capture allocates nothing. When the writer
//! lags and its queue is full, the batch's frames are dropped from the
//! capture (counted), never from the switch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use sluice_classifier::Match;
use sluice_packet::extract::extract_with_shape;
use sluice_packet::{FlowKey, Packet, PacketMeta};

/// Which frames of a port a tap takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// What it receives.
    Rx,
    /// What it sends.
    Tx,
    /// Both.
    Both,
}

impl Direction {
    fn rx(self) -> bool {
        self != Direction::Tx
    }
    fn tx(self) -> bool {
        self != Direction::Rx
    }
}

/// A tap's counters, shared with the control plane and every PMD that
/// taps the same port.
#[derive(Debug, Default)]
pub struct TapCounters {
    /// Frames handed to the writer.
    pub captured: AtomicU64,
    /// Frames left out because the writer's queue was full.
    pub dropped: AtomicU64,
    /// Frames still wanted (`--count`; `u64::MAX`: no limit).
    pub remaining: AtomicU64,
    /// The capture has all it wanted, or its writer is gone.
    pub done: AtomicBool,
    /// Chunks handed to the writer and not yet taken by it (the writer
    /// takes one off as it receives it).
    pub queued: std::sync::atomic::AtomicUsize,
}

/// One batch of captured frames: records of `[time ns: u64 LE][length:
/// u32 LE][frame]`.
pub type Chunk = Vec<u8>;

/// What a tap needs: its direction and filter, the writer's queue and the
/// queue buffers come back on, and the counters.
pub struct TapSpec {
    /// Which frames.
    pub dir: Direction,
    /// Only frames whose flow this matches (`None`: every frame).
    pub filter: Option<Match>,
    /// VLAN tags parsed for the filter (the datapath's setting).
    pub vlans: usize,
    /// To the writer.
    pub to_writer: SyncSender<Chunk>,
    /// The chunks that queue holds: past it, frames are left out
    /// without being copied.
    pub queue: usize,
    /// Emptied buffers from the writer.
    pub returned: Receiver<Chunk>,
    /// Shared counters.
    pub counters: Arc<TapCounters>,
    /// Wall clock (ns since the epoch) at switch time 0, for the records'
    /// times.
    pub epoch_ns: u64,
}

/// A tap on one port of one datapath thread.
pub(crate) struct Tap {
    spec: TapSpec,
    /// A buffer kept for the next batch.
    spare: Option<Chunk>,
}

/// Bytes a fresh buffer is made with (a batch of 32 full frames fits).
const CHUNK_BYTES: usize = 64 << 10;

impl Tap {
    pub(crate) fn new(spec: TapSpec) -> Tap {
        Tap { spec, spare: None }
    }

    /// Whether the capture has ended (the tap can go).
    pub(crate) fn finished(&self) -> bool {
        self.spec.counters.done.load(Ordering::Relaxed)
    }

    /// Takes `frames` (received by port `ofport` when `rx`, else about to
    /// be sent) at switch time `now_us`.
    pub(crate) fn take<'a>(
        &mut self,
        rx: bool,
        ofport: u32,
        frames: impl Iterator<Item = &'a Packet>,
        now_us: u64,
    ) {
        let wanted = if rx {
            self.spec.dir.rx()
        } else {
            self.spec.dir.tx()
        };
        if !wanted || self.finished() {
            return;
        }
        // The frames that match (a batch is at most 32).
        let mut picked: arrayvec::ArrayVec<&Packet, 64> = arrayvec::ArrayVec::new();
        for p in frames {
            if let Some(m) = &self.spec.filter {
                let mut key = FlowKey::default();
                let mut meta = PacketMeta::default();
                let in_port = if rx { ofport } else { p.meta.in_port };
                if extract_with_shape(p.data(), in_port, self.spec.vlans, &mut meta, &mut key)
                    .is_err()
                    || !key.matches(&m.value, &m.mask)
                {
                    continue;
                }
            }
            if picked.try_push(p).is_err() {
                break;
            }
        }
        if picked.is_empty() {
            return;
        }
        let c = &self.spec.counters;
        // A writer that is behind: these frames are left out, uncopied.
        if c.queued.load(Ordering::Acquire) >= self.spec.queue {
            c.dropped.fetch_add(picked.len() as u64, Ordering::Relaxed);
            return;
        }
        // The frames of the count this batch may take, in one step.
        let want = picked.len() as u64;
        let Ok(before) = c
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                (r > 0).then(|| r.saturating_sub(want))
            })
        else {
            c.done.store(true, Ordering::Relaxed);
            return;
        };
        let n = want.min(before);
        if before <= want {
            c.done.store(true, Ordering::Relaxed);
        }
        let mut buf = self
            .spare
            .take()
            .or_else(|| self.spec.returned.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES));
        buf.clear();
        let ts = self.spec.epoch_ns + now_us * 1000;
        for p in &picked[..n as usize] {
            let data = p.data();
            buf.extend_from_slice(&ts.to_le_bytes());
            buf.extend_from_slice(&(data.len() as u32).to_le_bytes());
            buf.extend_from_slice(data);
        }
        c.queued.fetch_add(1, Ordering::AcqRel);
        match self.spec.to_writer.try_send(buf) {
            Ok(()) => {
                c.captured.fetch_add(n, Ordering::Relaxed);
            }
            Err(TrySendError::Full(b)) => {
                c.queued.fetch_sub(1, Ordering::AcqRel);
                c.dropped.fetch_add(n, Ordering::Relaxed);
                self.spare = Some(b);
            }
            Err(TrySendError::Disconnected(_)) => {
                c.queued.fetch_sub(1, Ordering::AcqRel);
                c.done.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// The frames of a chunk: (time ns, frame).
pub fn records(chunk: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = chunk.get(at..at + 12)?;
        let ts = u64::from_le_bytes(head[..8].try_into().ok()?);
        let len = u32::from_le_bytes(head[8..12].try_into().ok()?) as usize;
        let frame = chunk.get(at + 12..at + 12 + len)?;
        at += 12 + len;
        Some((ts, frame))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::PacketPool;
    use std::sync::mpsc::sync_channel;

    fn spec(
        dir: Direction,
        count: u64,
        queue: usize,
    ) -> (TapSpec, Receiver<Chunk>, Arc<TapCounters>) {
        let (tx, rx) = sync_channel(queue);
        let (_back_tx, back_rx) = sync_channel(queue);
        let queue_len = queue;
        let counters = Arc::new(TapCounters {
            remaining: AtomicU64::new(count),
            ..TapCounters::default()
        });
        (
            TapSpec {
                dir,
                filter: None,
                vlans: 1,
                to_writer: tx,
                queue: queue_len,
                returned: back_rx,
                counters: Arc::clone(&counters),
                epoch_ns: 5_000,
            },
            rx,
            counters,
        )
    }

    fn frames(pool: &mut PacketPool, n: usize) -> Vec<Packet> {
        (0..n)
            .map(|i| {
                let f = sluice_packet::build::Frame::ipv4(
                    [10, 0, 0, 1],
                    [10, 0, 0, 2],
                    sluice_packet::build::L4::Udp {
                        src: i as u16,
                        dst: 53,
                    },
                )
                .build();
                pool.alloc_from(&f).unwrap()
            })
            .collect()
    }

    #[test]
    fn takes_whole_frames_with_times_up_to_the_count() {
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let pkts = frames(&mut pool, 10);
        let (s, rx, c) = spec(Direction::Both, 7, 8);
        let mut tap = Tap::new(s);
        tap.take(true, 1, pkts[..4].iter(), 3);
        tap.take(false, 1, pkts[4..].iter(), 4);
        let got: Vec<Chunk> = rx.try_iter().collect();
        let recs: Vec<(u64, Vec<u8>)> = got
            .iter()
            .flat_map(|c| records(c).map(|(t, f)| (t, f.to_vec())))
            .collect();
        assert_eq!(recs.len(), 7);
        assert_eq!(recs[0], (8_000, pkts[0].data().to_vec()));
        assert_eq!(recs[6], (9_000, pkts[6].data().to_vec()));
        assert_eq!(c.captured.load(Ordering::Relaxed), 7);
        assert!(tap.finished());
        for p in pkts {
            pool.free(p);
        }
    }

    #[test]
    fn a_lagging_writer_loses_capture_not_traffic() {
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let pkts = frames(&mut pool, 3);
        let (s, rx, c) = spec(Direction::Tx, u64::MAX, 1);
        let mut tap = Tap::new(s);
        tap.take(true, 1, pkts.iter(), 0); // rx: not wanted
        tap.take(false, 1, pkts.iter(), 0);
        // The queue holds one chunk: the writer is behind, these frames
        // are left out (uncopied).
        tap.take(false, 1, pkts.iter(), 0);
        tap.take(false, 1, pkts.iter(), 0);
        assert_eq!(c.captured.load(Ordering::Relaxed), 3);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 6);
        // The writer takes its chunk: room again.
        rx.recv().unwrap();
        c.queued.fetch_sub(1, Ordering::AcqRel);
        tap.take(false, 1, pkts.iter(), 0);
        assert_eq!(c.captured.load(Ordering::Relaxed), 6);
        rx.recv().unwrap();
        c.queued.fetch_sub(1, Ordering::AcqRel);
        drop(rx);
        tap.take(false, 1, pkts.iter(), 0);
        assert!(tap.finished(), "the writer is gone");
        for p in pkts {
            pool.free(p);
        }
    }

    #[test]
    fn the_filter_picks_frames_by_flow() {
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let pkts = frames(&mut pool, 6);
        let (mut s, rx, c) = spec(Direction::Rx, u64::MAX, 8);
        s.filter = Some(
            sluice_classifier::parse_flow("udp,tp_src=3", sluice_classifier::Require::NoActions)
                .unwrap()
                .matcher,
        );
        let mut tap = Tap::new(s);
        tap.take(true, 1, pkts.iter(), 0);
        let chunk = rx.try_recv().unwrap();
        let recs: Vec<_> = records(&chunk).collect();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].1, pkts[3].data());
        assert_eq!(c.captured.load(Ordering::Relaxed), 1);
        for p in pkts {
            pool.free(p);
        }
    }
}
