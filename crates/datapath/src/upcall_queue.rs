//! Misses waiting for the upcall budget: a bounded queue per datapath
//! thread.
//!
//! When the budget ([`crate::upcall_budget`]) cannot pay for a miss now,
//! the packet waits here instead of being dropped, and is translated as
//! the budget refills, ahead of newer misses. Only a full queue drops
//! (`upcall budget`, as before). Order is kept per flow: while a packet
//! waits, a later packet of its flow waits behind it even when a cache
//! would match it (a megaflow that an earlier waiting packet's upcall
//! installed), so no packet of a flow overtakes an earlier one. Which
//! flows have a packet waiting is kept as counts per hash bucket: a
//! collision only makes an unrelated packet wait too, in order.

use std::collections::VecDeque;

use sluice_packet::Packet;

/// Hash buckets of the waiting-flow counts (a power of two; 256 KiB):
/// with a full queue (12,288 packets) a packet of another flow waits by
/// mistake about one time in ten, without one about never.
const BUCKETS: usize = 1 << 17;

/// A packet waiting for its upcall, with the hash it was received with.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub pkt: Packet,
    pub hash: u32,
}

/// The queue of one datapath thread.
#[derive(Debug)]
pub(crate) struct UpcallQueue {
    q: VecDeque<Waiting>,
    cap: usize,
    /// Packets waiting per hash bucket.
    flows: Box<[u16; BUCKETS]>,
    /// Where packets put back during a drain go (the front, in order).
    front: usize,
}

impl UpcallQueue {
    /// A queue of at most `cap` packets.
    pub fn new(cap: usize) -> Self {
        UpcallQueue {
            q: VecDeque::with_capacity(cap.min(1 << 16)),
            cap,
            flows: vec![0u16; BUCKETS]
                .into_boxed_slice()
                .try_into()
                .expect("BUCKETS counts"),
            front: usize::MAX,
        }
    }

    /// Most packets it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Packets waiting.
    #[inline]
    pub fn len(&self) -> usize {
        self.q.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Whether a packet of hash `hash` may have an earlier packet of its
    /// flow waiting.
    #[inline]
    pub fn holds_flow(&self, hash: u32) -> bool {
        self.flows[hash as usize & (BUCKETS - 1)] != 0
    }

    /// Queues `w` behind the others (or, during a drain, where the
    /// drained batch's packets were: see [`UpcallQueue::begin_drain`]).
    /// The packet back when the queue is full.
    pub fn push(&mut self, w: Waiting) -> Result<(), Packet> {
        if self.q.len() >= self.cap {
            return Err(w.pkt);
        }
        let b = &mut self.flows[w.hash as usize & (BUCKETS - 1)];
        *b = b.saturating_add(1);
        if self.front == usize::MAX {
            self.q.push_back(w);
        } else {
            self.q.insert(self.front, w);
            self.front += 1;
        }
        Ok(())
    }

    /// Takes up to `n` packets from the front for a drain pass: the
    /// packets of that pass that must wait again are pushed back in
    /// front of the rest, in their order, until [`UpcallQueue::end_drain`].
    pub fn begin_drain(&mut self, n: usize, mut take: impl FnMut(Waiting)) -> usize {
        let n = n.min(self.q.len());
        for w in self.q.drain(..n) {
            let b = &mut self.flows[w.hash as usize & (BUCKETS - 1)];
            *b = b.saturating_sub(1);
            take(w);
        }
        self.front = 0;
        n
    }

    /// Ends a drain pass: pushes go to the back again.
    pub fn end_drain(&mut self) {
        self.front = usize::MAX;
    }

    /// Takes every waiting packet.
    #[cfg(test)]
    pub fn take_all(&mut self) -> impl Iterator<Item = Waiting> + '_ {
        self.flows.fill(0);
        self.q.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::PacketPool;

    fn pkt(pool: &mut PacketPool, b: u8) -> Packet {
        pool.alloc_from(&[b; 60]).unwrap()
    }

    #[test]
    fn fifo_bounded_and_flows_counted() {
        let mut pool = PacketPool::new(16, 2048).unwrap();
        let mut q = UpcallQueue::new(3);
        for (b, h) in [(1u8, 7u32), (2, 9), (3, 7)] {
            q.push(Waiting {
                pkt: pkt(&mut pool, b),
                hash: h,
            })
            .unwrap();
        }
        assert!(q.holds_flow(7) && q.holds_flow(9) && !q.holds_flow(8));
        let full = q.push(Waiting {
            pkt: pkt(&mut pool, 4),
            hash: 1,
        });
        let p = full.expect_err("a full queue gives the packet back");
        pool.free(p);
        // A drain of two; the second must wait again: it goes back first.
        let mut taken = Vec::new();
        assert_eq!(q.begin_drain(2, |w| taken.push(w)), 2);
        assert!(q.holds_flow(7), "the third packet still waits");
        assert!(!q.holds_flow(9));
        let second = taken.pop().unwrap();
        assert_eq!(second.pkt.data()[0], 2);
        q.push(second).unwrap();
        q.end_drain();
        let order: Vec<u8> = q
            .take_all()
            .map(|w| {
                let b = w.pkt.data()[0];
                pool.free(w.pkt);
                b
            })
            .collect();
        assert_eq!(order, [2, 3]);
        assert!(!q.holds_flow(7));
        for w in taken {
            pool.free(w.pkt);
        }
    }
}
