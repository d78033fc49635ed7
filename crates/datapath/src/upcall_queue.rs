//! Misses waiting for the upcall budget: a bounded queue per datapath
//! thread.
//!
//! When the budget ([`crate::upcall_budget`]) cannot pay for a miss now,
//! the packet waits here instead of being dropped, and is translated as
//! the budget refills, ahead of newer misses. Only a full queue drops
//! (`upcall budget`, as before).
//!
//! Order is kept per flow: while a packet waits, a later packet of its
//! flow waits behind it even when a cache would match it. So that such a
//! packet is not stuck behind misses of other flows that the budget cannot
//! pay for yet, the queue is walked rather than popped: each drain takes
//! packets from where the last one stopped, leaves in place a miss the
//! budget refuses (and, for the rest of the walk, every later packet of
//! its flow), and goes on with the packets behind it; a walk that reaches
//! the end starts again at the front. While the budget refuses, misses are
//! passed over without a lookup. Which flows have a packet waiting is
//! kept as counts per 32-bit flow hash: two flows that share a hash only
//! make one wait behind the other, in order.

use std::collections::VecDeque;

use sluice_packet::Packet;

/// Places a walk passes over at most in one call (without a lookup each).
const MAX_SKIP: usize = 1024;

/// A packet waiting for its upcall, with the hash it was received with.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub pkt: Packet,
    pub hash: u32,
    /// It missed every cache when it was last looked up (it needs the
    /// budget); false for a packet that waits only behind its flow.
    pub missed: bool,
}

/// The queue of one datapath thread.
#[derive(Debug)]
pub(crate) struct UpcallQueue {
    /// Waiting packets in arrival order; `None` where a drain took one.
    q: VecDeque<Option<Waiting>>,
    /// Packets in `q`.
    live: usize,
    /// Of them, those that wait only behind their flow.
    held: usize,
    cap: usize,
    /// Packets waiting per flow hash.
    flows: hashbrown::HashMap<u32, u32>,
    /// Where the walk goes on.
    walk: usize,
    /// Flows with a packet the current walk left in place.
    blocked: hashbrown::HashSet<u32>,
}

impl UpcallQueue {
    /// A queue of at most `cap` packets.
    pub fn new(cap: usize) -> Self {
        UpcallQueue {
            q: VecDeque::with_capacity(cap.min(1 << 16)),
            live: 0,
            held: 0,
            cap,
            flows: hashbrown::HashMap::with_capacity(cap.min(1 << 16)),
            walk: 0,
            blocked: hashbrown::HashSet::with_capacity(cap.min(1 << 16)),
        }
    }

    /// Most packets it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Packets waiting.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Packets that wait only behind their flow (no budget needed).
    #[inline]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether a packet of hash `hash` may have an earlier packet of its
    /// flow waiting.
    #[inline]
    pub fn holds_flow(&self, hash: u32) -> bool {
        self.live != 0 && self.flows.contains_key(&hash)
    }

    fn count_in(&mut self, w: &Waiting) {
        *self.flows.entry(w.hash).or_insert(0) += 1;
        self.live += 1;
        self.held += usize::from(!w.missed);
    }

    fn count_out(&mut self, w: &Waiting) {
        if let hashbrown::hash_map::Entry::Occupied(mut e) = self.flows.entry(w.hash) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        self.live -= 1;
        self.held -= usize::from(!w.missed);
    }

    /// Queues `w` behind the others. The packet back when the queue is
    /// full.
    pub fn push(&mut self, w: Waiting) -> Result<(), Packet> {
        if self.live >= self.cap {
            return Err(w.pkt);
        }
        self.count_in(&w);
        self.q.push_back(Some(w));
        Ok(())
    }

    /// Puts a packet a drain took back where it was (`slot`, from
    /// [`UpcallQueue::take`]): it waits again, and so do the later packets
    /// of its flow for the rest of the walk.
    pub fn put_back(&mut self, slot: usize, w: Waiting) {
        self.blocked.insert(w.hash);
        self.count_in(&w);
        debug_assert!(self.q[slot].is_none(), "a slot a drain emptied");
        self.q[slot] = Some(w);
    }

    /// Takes up to `n` packets for a drain pass, in queue order, from where
    /// the walk stopped: each with its slot (for
    /// [`UpcallQueue::put_back`]). Passes over the packets of flows the
    /// walk left a packet of, and with `refused` (the budget pays for no
    /// miss now) the misses, without taking them. Returns how many it
    /// took; 0 when the walk came to the end (it starts again at the front
    /// next time).
    pub fn take(&mut self, n: usize, refused: bool, mut f: impl FnMut(usize, Waiting)) -> usize {
        let mut taken = 0;
        let mut skipped = 0;
        while taken < n && skipped < MAX_SKIP {
            if self.walk >= self.q.len() {
                self.walk = 0;
                self.blocked.clear();
                if taken == 0 {
                    // No slot handed out in this call moves.
                    self.compact();
                }
                break;
            }
            let slot = self.walk;
            self.walk += 1;
            let Some(w) = self.q[slot].as_ref() else {
                continue;
            };
            if self.blocked.contains(&w.hash) || (refused && w.missed) {
                let h = w.hash;
                self.blocked.insert(h);
                skipped += 1;
                continue;
            }
            let w = self.q[slot].take().expect("checked");
            self.count_out(&w);
            f(slot, w);
            taken += 1;
        }
        taken
    }

    /// Drops the emptied places at the front (and, when they are most of
    /// the queue, everywhere), keeping the walk where it was.
    fn compact(&mut self) {
        while matches!(self.q.front(), Some(None)) {
            self.q.pop_front();
            self.walk = self.walk.saturating_sub(1);
        }
        if self.q.len() > 2 * self.live + 64 {
            let before = self
                .q
                .range(..self.walk.min(self.q.len()))
                .filter(|w| w.is_some())
                .count();
            self.q.retain(Option::is_some);
            self.walk = before;
        }
    }

    /// Ends a drain pass: the places it emptied at the front go.
    pub fn end_drain(&mut self) {
        if self.walk == 0 || matches!(self.q.front(), Some(None)) {
            self.compact();
        }
    }

    /// Takes every waiting packet.
    #[cfg(test)]
    pub fn take_all(&mut self) -> Vec<Waiting> {
        self.flows.clear();
        self.blocked.clear();
        self.live = 0;
        self.held = 0;
        self.walk = 0;
        self.q.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::PacketPool;

    fn w(pool: &mut PacketPool, b: u8, hash: u32, missed: bool) -> Waiting {
        Waiting {
            pkt: pool.alloc_from(&[b; 60]).unwrap(),
            hash,
            missed,
        }
    }

    fn free(pool: &mut PacketPool, v: Vec<Waiting>) -> Vec<u8> {
        v.into_iter()
            .map(|w| {
                let b = w.pkt.data()[0];
                pool.free(w.pkt);
                b
            })
            .collect()
    }

    #[test]
    fn bounded_and_flows_counted() {
        let mut pool = PacketPool::new(16, 2048).unwrap();
        let mut q = UpcallQueue::new(3);
        for (b, h) in [(1u8, 7u32), (2, 9), (3, 7)] {
            q.push(w(&mut pool, b, h, true)).unwrap();
        }
        assert!(q.holds_flow(7) && q.holds_flow(9) && !q.holds_flow(8));
        let p = q.push(w(&mut pool, 4, 1, true)).expect_err("full");
        pool.free(p);
        let all = q.take_all();
        assert_eq!(free(&mut pool, all), [1, 2, 3]);
        assert!(!q.holds_flow(7) && q.is_empty());
    }

    /// A miss put back blocks its flow for the rest of the walk, not the
    /// others: the packets behind it of other flows go on.
    #[test]
    fn a_refused_miss_blocks_its_flow_only() {
        let mut pool = PacketPool::new(16, 2048).unwrap();
        let mut q = UpcallQueue::new(8);
        // A (flow 1, a miss), B (flow 2, held behind its flow), C (flow 1,
        // held), D (flow 3, a miss).
        for (b, h, m) in [
            (b'A', 1, true),
            (b'B', 2, false),
            (b'C', 1, false),
            (b'D', 3, true),
        ] {
            q.push(w(&mut pool, b, h, m)).unwrap();
        }
        assert_eq!(q.held(), 2);
        // The budget refuses: misses are passed over, so is C behind A.
        let mut got = Vec::new();
        assert_eq!(q.take(4, true, |s, x| got.push((s, x))), 1);
        assert_eq!(got[0].1.pkt.data()[0], b'B');
        assert_eq!(q.take(4, true, |_, _| panic!("the walk ends")), 0);
        let (_, b) = got.pop().unwrap();
        pool.free(b.pkt);
        // The budget pays: A, C, D in order from the front again.
        let mut got = Vec::new();
        assert_eq!(q.take(2, false, |s, x| got.push((s, x))), 2);
        assert_eq!(
            got.iter().map(|(_, x)| x.pkt.data()[0]).collect::<Vec<_>>(),
            [b'A', b'C']
        );
        // A waits again (refused after all): its place, and C's flow is
        // blocked for the rest of the walk: C goes back too.
        let (sc, c) = got.pop().unwrap();
        let (sa, a) = got.pop().unwrap();
        q.put_back(sa, a);
        q.put_back(sc, c);
        let mut got = Vec::new();
        assert_eq!(q.take(4, false, |s, x| got.push((s, x))), 1);
        let (_, d) = got.pop().unwrap();
        assert_eq!(d.pkt.data()[0], b'D');
        pool.free(d.pkt);
        let rest = q.take_all();
        assert_eq!(free(&mut pool, rest), [b'A', b'C']);
    }
}
