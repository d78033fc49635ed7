//! The egress queue of a port whose device ring can fill up (seed 002).
//!
//! When the device ring (an AF_PACKET tx ring, an AF_XDP tx ring) has no
//! room, packets wait here instead of being dropped at once. The queue has
//! two bands: a strict-priority band for a class of packets (by default DSCP
//! ≥ 46 or VLAN PCP ≥ 5: voice and network control) and a bulk band. It
//! dequeues in bulk, as many packets as fit under a byte limit on what the
//! device holds in flight; the limit tunes itself from completions the way
//! Linux's BQL (dynamic queue limits) does, so the device ring holds only what
//! keeps it busy and a high-priority packet never waits behind a full ring of
//! bulk packets. No knob: the only bound a user sees is the hard cap on
//! waiting packets, whose overflow is a counted drop.

use std::collections::VecDeque;

use sluice_packet::{Packet, PacketPool};

/// Smallest in-flight byte limit (a few full-size frames).
pub const BQL_MIN_LIMIT: u32 = 3 * 1518;
/// Largest in-flight byte limit.
pub const BQL_MAX_LIMIT: u32 = 1 << 20;
/// How long (µs) the limit must have been more than needed before it is
/// lowered (Linux: `slack_hold_time`, 1 s).
pub const BQL_SLACK_HOLD_US: u64 = 1_000_000;
/// Packets that may wait per port before new ones are dropped.
pub const EGRESS_QUEUE_PACKETS: usize = 1024;

/// Which packets use the priority band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityClass {
    /// IP DSCP at or above this is high priority (64: never).
    pub min_dscp: u8,
    /// VLAN PCP at or above this is high priority (8: never).
    pub min_pcp: u8,
}

impl Default for PriorityClass {
    fn default() -> Self {
        // EF (46), CS6, CS7; PCP 5-7 (voice, internetwork and network control).
        PriorityClass {
            min_dscp: 46,
            min_pcp: 5,
        }
    }
}

impl PriorityClass {
    /// Whether the frame belongs to the priority band. Reads only the
    /// Ethernet/VLAN header and the first IP bytes; malformed frames are bulk.
    pub fn is_high(&self, frame: &[u8]) -> bool {
        let mut ofs = 12;
        let mut ethertype = match frame.get(12..14) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return false,
        };
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            let Some(tci) = frame.get(14..16) else {
                return false;
            };
            if tci[0] >> 5 >= self.min_pcp {
                return true;
            }
            ofs = 16;
            ethertype = match frame.get(16..18) {
                Some(b) => u16::from_be_bytes([b[0], b[1]]),
                None => return false,
            };
        }
        let l3 = ofs + 2;
        let dscp = match ethertype {
            0x0800 => frame.get(l3 + 1).map(|tos| tos >> 2),
            0x86dd => frame
                .get(l3..l3 + 2)
                .map(|b| ((b[0] & 0x0f) << 2) | (b[1] >> 6)),
            _ => None,
        };
        dscp.is_some_and(|d| d >= self.min_dscp)
    }
}

/// Linux-style dynamic queue limit on bytes in flight in a device ring.
#[derive(Debug, Clone)]
pub struct ByteQueueLimit {
    limit: u32,
    in_flight: u32,
    /// Lowest in-flight level seen since `slack_since_us`.
    lowest: u32,
    slack_since_us: u64,
}

impl Default for ByteQueueLimit {
    fn default() -> Self {
        ByteQueueLimit {
            limit: BQL_MIN_LIMIT,
            in_flight: 0,
            lowest: u32::MAX,
            slack_since_us: 0,
        }
    }
}

impl ByteQueueLimit {
    /// Bytes that may be handed to the device now.
    pub fn available(&self) -> u32 {
        self.limit.saturating_sub(self.in_flight)
    }

    /// The current limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Bytes in the device now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// `bytes` were handed to the device.
    pub fn queued(&mut self, bytes: u32) {
        self.in_flight += bytes;
    }

    /// The device finished `bytes`. `backlog` says whether packets were
    /// waiting for room meanwhile. As in Linux's `dql_completed`: a device
    /// that ran dry while packets waited means the limit is too low (raise it
    /// by what completed); a device that never ran below some level for a
    /// whole hold time means the limit is that much too high.
    pub fn completed(&mut self, bytes: u32, backlog: bool, now_us: u64) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
        if bytes == 0 {
            return;
        }
        if self.in_flight == 0 && backlog {
            self.limit = (self.limit.saturating_add(bytes)).min(BQL_MAX_LIMIT);
            self.lowest = u32::MAX;
            self.slack_since_us = now_us;
            return;
        }
        self.lowest = self.lowest.min(self.in_flight);
        if now_us.saturating_sub(self.slack_since_us) >= BQL_SLACK_HOLD_US {
            if self.lowest != u32::MAX && self.lowest > 0 {
                self.limit = self.limit.saturating_sub(self.lowest).max(BQL_MIN_LIMIT);
            }
            self.lowest = u32::MAX;
            self.slack_since_us = now_us;
        }
    }
}

/// What became of a packet offered to an [`EgressQueue`].
#[derive(Debug)]
pub enum Push {
    /// It waits in its band.
    Queued,
    /// It waits; this older bulk packet was dropped to make room.
    Displaced(Packet),
    /// The queue is full: it is given back.
    Refused(Packet),
}

/// Packets waiting for room in a device ring, in two bands.
#[derive(Debug, Default)]
pub struct EgressQueue {
    high: VecDeque<Packet>,
    bulk: VecDeque<Packet>,
    /// Which packets go first.
    pub class: PriorityClass,
    /// The in-flight byte limit.
    pub bql: ByteQueueLimit,
    /// Packets that went through the priority band.
    pub high_packets: u64,
}

impl EgressQueue {
    /// An empty queue with the given priority class.
    pub fn new(class: PriorityClass) -> Self {
        EgressQueue {
            high: VecDeque::with_capacity(64),
            bulk: VecDeque::with_capacity(EGRESS_QUEUE_PACKETS),
            class,
            bql: ByteQueueLimit::default(),
            high_packets: 0,
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.high.len() + self.bulk.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues `pkt` in its band. At the cap, a bulk packet is refused; a
    /// high-priority packet is never refused while bulk packets wait: the
    /// newest bulk packet is displaced instead. The caller frees and counts
    /// what comes back.
    pub fn push(&mut self, pkt: Packet) -> Push {
        let high = self.class.is_high(pkt.data());
        if self.len() < EGRESS_QUEUE_PACKETS {
            if high {
                self.high_packets += 1;
                self.high.push_back(pkt);
            } else {
                self.bulk.push_back(pkt);
            }
            return Push::Queued;
        }
        if high {
            if let Some(victim) = self.bulk.pop_back() {
                self.high_packets += 1;
                self.high.push_back(pkt);
                return Push::Displaced(victim);
            }
        }
        Push::Refused(pkt)
    }

    /// [`push`](Self::push) for a port's `tx_burst`: what does not wait
    /// (refused, or displaced by a priority packet) goes back to `pool`,
    /// counted as `queue full` in `stats`. Whether `pkt` was taken.
    pub fn offer(
        &mut self,
        pkt: Packet,
        pool: &mut PacketPool,
        stats: &mut crate::PortStats,
    ) -> bool {
        let (taken, dropped) = match self.push(pkt) {
            Push::Queued => return true,
            Push::Displaced(victim) => (true, victim),
            Push::Refused(pkt) => (false, pkt),
        };
        stats.tx_drop(crate::PortDrop::QueueFull, 1);
        pool.free(dropped);
        taken
    }

    /// The next packet to hand to the device if the byte limit lets it
    /// go (priority band first). A device with nothing in flight always
    /// takes one packet, so a limit below a frame's size cannot stall it.
    pub fn pop_within_limit(&mut self) -> Option<Packet> {
        let next = self.high.front().or(self.bulk.front())?;
        let len = next.len() as u32;
        if self.bql.in_flight() > 0 && len > self.bql.available() {
            return None;
        }
        let pkt = match self.high.pop_front() {
            Some(p) => p,
            None => self.bulk.pop_front()?,
        };
        Some(pkt)
    }

    /// Puts back a packet [`EgressQueue::pop_within_limit`] just gave out
    /// (the device could not take it after all): it goes first again.
    pub fn unpop(&mut self, pkt: Packet) {
        if self.class.is_high(pkt.data()) {
            self.high.push_front(pkt);
        } else {
            self.bulk.push_front(pkt);
        }
    }

    /// Frees every waiting packet; returns how many (the caller counts them).
    pub fn clear(&mut self, pool: &mut PacketPool) -> usize {
        let n = self.len();
        for p in self.high.drain(..).chain(self.bulk.drain(..)) {
            pool.free(p);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::build::{Frame, L4};

    fn frame(tos: u8) -> Vec<u8> {
        let mut f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
        f[15] = tos;
        f
    }

    #[test]
    fn classifies_by_dscp_and_pcp() {
        let c = PriorityClass::default();
        assert!(c.is_high(&frame(46 << 2)));
        assert!(c.is_high(&frame(48 << 2)));
        assert!(!c.is_high(&frame(10 << 2)));
        let mut tagged = frame(0);
        tagged.splice(12..12, [0x81, 0x00, 0xa0, 0x64]); // PCP 5, VID 100
        assert!(c.is_high(&tagged));
        tagged[14] = 0x20; // PCP 1
        assert!(!c.is_high(&tagged));
        assert!(!c.is_high(&[0u8; 13]));
        assert!(!c.is_high(&[]));
    }

    #[test]
    fn priority_band_goes_first_and_displaces_bulk_when_full() {
        let mut pool = PacketPool::new(EGRESS_QUEUE_PACKETS + 8, 2048).unwrap();
        let mut q = EgressQueue::new(PriorityClass::default());
        for _ in 0..EGRESS_QUEUE_PACKETS {
            assert!(matches!(
                q.push(pool.alloc_from(&frame(0)).unwrap()),
                Push::Queued
            ));
        }
        let Push::Refused(refused) = q.push(pool.alloc_from(&frame(0)).unwrap()) else {
            panic!("a bulk packet at the cap is refused");
        };
        pool.free(refused);
        let Push::Displaced(displaced) = q.push(pool.alloc_from(&frame(46 << 2)).unwrap()) else {
            panic!("a priority packet displaces bulk");
        };
        assert!(!q.class.is_high(displaced.data()));
        pool.free(displaced);
        let first = q.pop_within_limit().unwrap();
        assert!(q.class.is_high(first.data()), "priority first");
        pool.free(first);
        assert_eq!(q.clear(&mut pool), EGRESS_QUEUE_PACKETS - 1);
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn bql_grows_when_starved_and_shrinks_on_slack() {
        let mut b = ByteQueueLimit::default();
        let start = b.limit();
        b.queued(start);
        assert_eq!(b.available(), 0);
        b.completed(start, true, 10);
        assert!(b.limit() > start, "ran dry with a backlog: raise");
        let raised = b.limit();
        // Now never below 3000 bytes in flight for over a second: lower.
        b.queued(raised);
        b.completed(raised - 3000, false, 20);
        b.completed(0, false, 30);
        b.queued(100);
        b.completed(100, false, 20 + BQL_SLACK_HOLD_US);
        assert!(b.limit() < raised, "slack for a hold time: lower");
        assert!(b.limit() >= BQL_MIN_LIMIT);
    }

    #[test]
    fn an_idle_device_always_takes_one_packet() {
        let mut pool = PacketPool::new(4, 2048).unwrap();
        let mut q = EgressQueue::new(PriorityClass::default());
        let _ = q.push(pool.alloc_from(&frame(0)).unwrap());
        q.bql.limit = 10;
        let p = q.pop_within_limit().expect("nothing in flight: send");
        q.bql.queued(p.len() as u32);
        pool.free(p);
        let _ = q.push(pool.alloc_from(&frame(0)).unwrap());
        assert!(q.pop_within_limit().is_none(), "over the limit: wait");
        q.clear(&mut pool);
    }
}
