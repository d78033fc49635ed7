//! A batch of up to [`BATCH_SIZE`] packets: the unit every stage works on.

use arrayvec::ArrayVec;

use crate::pool::{Packet, PacketPool};

/// Packets per batch, as in OVS (`NETDEV_MAX_BURST`) and DPDK's usual burst.
pub const BATCH_SIZE: usize = 32;

/// The indexes of the set bits of a batch bitmask, lowest first (stages
/// pass "which packets are still to do" as such a mask).
#[inline]
pub fn set_bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            i
        })
    })
}

// `free_all` forgets packets after recycling their frames: sound only while
// a packet has no destructor.
const _: () = assert!(!std::mem::needs_drop::<Packet>());

/// A fixed-capacity batch of packets. Lives on the stack or inside a
/// per-thread structure; never allocates.
#[derive(Debug)]
pub struct PacketBatch {
    pkts: ArrayVec<Packet, BATCH_SIZE>,
    /// How many packets it takes: [`BATCH_SIZE`] unless an rx burst is
    /// held to fewer ([`PacketBatch::with_room`]).
    room: u8,
}

impl Default for PacketBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketBatch {
    /// An empty batch.
    pub fn new() -> Self {
        PacketBatch {
            pkts: ArrayVec::new(),
            room: BATCH_SIZE as u8,
        }
    }

    /// An empty batch that takes at most `room` packets (at most
    /// [`BATCH_SIZE`]): a receive burst held to what a packet limit
    /// leaves (ports fill a batch until [`is_full`](Self::is_full)).
    pub fn with_room(room: usize) -> Self {
        PacketBatch {
            pkts: ArrayVec::new(),
            room: room.min(BATCH_SIZE) as u8,
        }
    }

    /// Lifts a [`with_room`](Self::with_room) limit.
    #[inline]
    pub fn unlimit(&mut self) {
        self.room = BATCH_SIZE as u8;
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Whether the batch holds as many packets as it takes
    /// ([`BATCH_SIZE`] unless made [`with_room`](Self::with_room)).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.len() >= usize::from(self.room)
    }

    /// Room left.
    #[inline]
    pub fn remaining(&self) -> usize {
        usize::from(self.room).saturating_sub(self.pkts.len())
    }

    /// Appends a packet; gives it back if the batch is full.
    #[inline]
    pub fn push(&mut self, pkt: Packet) -> Result<(), Packet> {
        if self.is_full() {
            return Err(pkt);
        }
        self.pkts.try_push(pkt).map_err(|e| e.element())
    }

    /// The packets.
    #[inline]
    pub fn as_slice(&self) -> &[Packet] {
        &self.pkts
    }

    /// The packets, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Moves every packet of `other` to the end of this batch, in order,
    /// as far as there is room; what does not fit stays in `other`.
    #[inline]
    #[allow(unsafe_code)]
    pub fn append(&mut self, other: &mut PacketBatch) {
        let n = other.len().min(self.remaining());
        let (len, rest) = (self.pkts.len(), other.pkts.len() - n);
        let src = other.pkts.as_mut_ptr();
        // SAFETY: one block copy instead of a move per packet (the moves
        // through `drain` cost a fifth of the cache-hit path). `len + n` and
        // `n + rest` stay within both batches' capacity; the `n` packets
        // copied out of `other` are forgotten there by shrinking its length
        // before anything can read them again, and its `rest` packets move
        // down to its start (`copy`, which allows overlap). Every packet is
        // owned by exactly one batch afterwards; nothing is dropped twice.
        unsafe {
            std::ptr::copy_nonoverlapping(src, self.pkts.as_mut_ptr().add(len), n);
            std::ptr::copy(src.add(n), src, rest);
            other.pkts.set_len(rest);
            self.pkts.set_len(len + n);
        }
    }

    /// Moves the first `n` packets of `src` to the end of this batch, in
    /// order, as far as there is room (one block copy, as [`Self::append`]);
    /// the rest of `src` moves down. Returns how many moved.
    #[inline]
    #[allow(unsafe_code)]
    pub fn append_from_vec(&mut self, src: &mut Vec<Packet>, n: usize) -> usize {
        let n = n.min(src.len()).min(self.remaining());
        let (len, rest) = (self.pkts.len(), src.len() - n);
        // SAFETY: as in `append`: `len + n` fits this batch, the `n`
        // packets copied out of `src` are forgotten there by shrinking its
        // length (after its `rest` move down over them), so each packet is
        // owned once; nothing is dropped.
        unsafe {
            let p = src.as_mut_ptr();
            std::ptr::copy_nonoverlapping(p, self.pkts.as_mut_ptr().add(len), n);
            std::ptr::copy(p.add(n), p, rest);
            src.set_len(rest);
            self.pkts.set_len(len + n);
        }
        n
    }

    /// Removes and yields every packet, in order.
    #[inline]
    pub fn drain(&mut self) -> arrayvec::Drain<'_, Packet, BATCH_SIZE> {
        self.pkts.drain(..)
    }

    /// Empties the batch one packet at a time, in order, each packet
    /// moving straight from this batch's memory to where it goes (see
    /// [`Unload`]).
    #[inline]
    #[allow(unsafe_code)]
    pub fn unload(&mut self) -> Unload<'_> {
        let len = self.pkts.len();
        // SAFETY: length 0 first: from here the packets belong to the
        // `Unload`, which reads each at most once and gives back the ones
        // it has not moved when it is dropped. Shrinking the length never
        // reads or drops a packet (and a Packet has no destructor).
        unsafe { self.pkts.set_len(0) };
        Unload {
            batch: self,
            len,
            next: 0,
        }
    }

    /// Frees the packets from index `start` on to `pool`, keeping the
    /// ones before it.
    #[inline]
    pub fn free_from(&mut self, start: usize, pool: &mut PacketPool) {
        // Read in place, then forget: a Packet has no destructor, and its
        // frame is back in the pool once `recycle` has seen it.
        if start < self.pkts.len() {
            pool.recycle(&self.pkts[start..]);
            self.pkts.truncate(start);
        }
    }

    /// A cursor that appends packets with the length kept in a register
    /// and written back once, when the cursor goes (a port's rx loop: each
    /// packet is written once, where it stays, and no store of the length
    /// per packet sits between one packet's stores and the next's).
    #[inline]
    pub fn fill(&mut self) -> Fill<'_> {
        let len = self.pkts.len();
        let room = usize::from(self.room).min(BATCH_SIZE);
        Fill {
            batch: self,
            len,
            room,
        }
    }

    /// Appends the packet at `src` by copying it (the caller's move).
    ///
    /// # Safety
    /// `src` points to a packet that the caller gives up: it is never
    /// used again from there; the batch is not full.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn push_raw(&mut self, src: *const Packet) {
        let at = self.pkts.len();
        debug_assert!(at < usize::from(self.room));
        // SAFETY: at < room <= capacity (the caller checked the batch is
        // not full); src is a packet the caller hands over, and it cannot
        // be inside this batch past its length.
        unsafe {
            std::ptr::copy_nonoverlapping(src, self.pkts.as_mut_ptr().add(at), 1);
            self.pkts.set_len(at + 1);
        }
    }

    /// Empties the batch without freeing: for the pool, once it has seen
    /// every packet ([`PacketPool::release_sent`]).
    #[inline]
    pub(crate) fn forget_all(&mut self) {
        // A Packet has no destructor: truncating forgets them.
        self.pkts.clear();
    }

    /// Frees the first `n` packets (every one when the batch holds
    /// fewer) to `pool` in one go; the others move to the front, in order.
    #[inline]
    #[allow(unsafe_code)]
    pub fn free_front(&mut self, n: usize, pool: &mut PacketPool) {
        let n = n.min(self.pkts.len());
        if n == 0 {
            return;
        }
        pool.recycle(&self.pkts[..n]);
        let rest = self.pkts.len() - n;
        // SAFETY: the first `n` packets' frames are back in the pool and
        // the packets are forgotten (a Packet has no destructor): the
        // `rest` after them move down over them (`copy` allows overlap)
        // and the length then counts only those, each owned once.
        unsafe {
            let p = self.pkts.as_mut_ptr();
            std::ptr::copy(p.add(n), p, rest);
            self.pkts.set_len(rest);
        }
    }

    /// Frees every packet to `pool`.
    #[inline]
    pub fn free_all(&mut self, pool: &mut PacketPool) {
        self.free_from(0, pool);
    }
}

/// A batch being emptied from its front, one packet at a time
/// ([`PacketBatch::unload`]).
///
/// Why not [`PacketBatch::drain`]: a packet that `drain` yields comes back
/// by value through a stack temporary, written in pieces and read back
/// whole right after, which stalls store-to-load forwarding once per
/// packet (a fifth of the classified path's cycles when a batch's packets
/// go to several places). Here each move is one 64-byte copy from the
/// batch's memory to the destination batch's.
///
/// The packets not moved or freed when it is dropped stay in the batch,
/// in order, at its start.
pub struct Unload<'a> {
    batch: &'a mut PacketBatch,
    /// Packets the batch held.
    len: usize,
    /// Index of the packet at the front.
    next: usize,
}

impl Unload<'_> {
    /// Index (in the batch as it was) of the packet at the front.
    #[inline]
    pub fn index(&self) -> usize {
        self.next
    }

    /// The packet at the front, if any is left.
    #[inline]
    #[allow(unsafe_code)]
    pub fn front(&self) -> Option<&Packet> {
        // SAFETY: indexes `next..len` hold packets this Unload owns and has
        // not moved out yet.
        (self.next < self.len).then(|| unsafe { &*self.batch.pkts.as_ptr().add(self.next) })
    }

    /// Moves the packet at the front to the end of `dst`. Returns false,
    /// moving nothing, when no packet is left or `dst` is full.
    #[inline]
    #[allow(unsafe_code)]
    pub fn move_to(&mut self, dst: &mut PacketBatch) -> bool {
        if self.next >= self.len || dst.is_full() {
            return false;
        }
        // SAFETY: `next < len` holds a packet owned here (see `front`);
        // `dst` has room, and `dst` is not this batch (both are borrowed
        // mutably). The packet is copied once and, by advancing `next`,
        // never read from here again: `dst` alone owns it.
        unsafe { dst.push_raw(self.batch.pkts.as_ptr().add(self.next)) };
        self.next += 1;
        true
    }

    /// Gives the packet at the front back to `pool`. Returns false when no
    /// packet is left.
    ///
    /// # Panics
    /// As [`PacketPool::free`].
    #[inline]
    pub fn free(&mut self, pool: &mut PacketPool) -> bool {
        let Some(p) = self.front() else {
            return false;
        };
        pool.recycle(std::slice::from_ref(p));
        self.next += 1;
        true
    }

    /// Takes the packet at the front out by value.
    #[inline]
    #[allow(unsafe_code)]
    pub fn take(&mut self) -> Option<Packet> {
        if self.next >= self.len {
            return None;
        }
        // SAFETY: as `move_to`: read once, then never again from here.
        let p = unsafe { std::ptr::read(self.batch.pkts.as_ptr().add(self.next)) };
        self.next += 1;
        Some(p)
    }
}

impl Drop for Unload<'_> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        let rest = self.len - self.next;
        if rest > 0 {
            // SAFETY: `next..len` are the packets still owned here; they
            // move down to the start (`copy` allows overlap) and the batch
            // owns them again through its length.
            unsafe {
                let p = self.batch.pkts.as_mut_ptr();
                std::ptr::copy(p.add(self.next), p, rest);
                self.batch.pkts.set_len(rest);
            }
        }
    }
}

/// Appends to a batch, its length written back when dropped
/// ([`PacketBatch::fill`]).
pub struct Fill<'b> {
    batch: &'b mut PacketBatch,
    len: usize,
    room: usize,
}

impl Fill<'_> {
    /// Appends a packet, returning it in place for its metadata; gives it
    /// back if the batch is full.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn push(&mut self, pkt: Packet) -> Result<&mut Packet, Packet> {
        if self.len >= self.room {
            return Err(pkt);
        }
        // SAFETY: len < room <= BATCH_SIZE, the array's capacity; the slot
        // is past the batch's recorded length, so nothing reads or drops
        // it until Drop records it (after it is written).
        unsafe {
            let slot = self.batch.pkts.as_mut_ptr().add(self.len);
            slot.write(pkt);
            self.len += 1;
            Ok(&mut *slot)
        }
    }

    /// Appends the packet `write` writes into the next slot; `false`,
    /// calling nothing, when the batch is full.
    ///
    /// # Safety
    /// `write` writes a whole valid packet into the slot it is given.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn push_with(&mut self, write: impl FnOnce(*mut Packet)) -> bool {
        if self.len >= self.room {
            return false;
        }
        // SAFETY: as in push: the slot is inside the array and past the
        // recorded length; the caller's write makes it a packet before
        // the length counts it.
        unsafe { write(self.batch.pkts.as_mut_ptr().add(self.len)) };
        self.len += 1;
        true
    }

    /// Whether the batch takes no more.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.room
    }

    /// Packets in the batch so far.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch is still empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Fill<'_> {
    #[inline(always)]
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: every slot below len was written by push (or was in the
        // batch before), and len <= BATCH_SIZE.
        unsafe { self.batch.pkts.set_len(self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_bits_lists_indexes() {
        assert_eq!(set_bits(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(set_bits(0).count(), 0);
        assert_eq!(set_bits(u32::MAX).count(), 32);
    }

    #[test]
    fn a_batch_with_room_takes_no_more_until_unlimited() {
        let mut pool = PacketPool::new(64, 256).unwrap();
        let mut b = PacketBatch::with_room(5);
        let mut refused = 0;
        for i in 0..8u8 {
            if let Err(p) = b.push(pool.alloc_from(&[i; 20]).unwrap()) {
                pool.free(p);
                refused += 1;
            }
        }
        assert_eq!((b.len(), refused, b.remaining()), (5, 3, 0));
        assert!(b.is_full());
        b.unlimit();
        assert_eq!(b.remaining(), BATCH_SIZE - 5);
        assert!(!b.is_full());
        assert_eq!(PacketBatch::with_room(1000).remaining(), BATCH_SIZE);
        b.free_all(&mut pool);
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn append_moves_what_fits_in_order() {
        let mut pool = PacketPool::new(64, 256).unwrap();
        let (mut a, mut b) = (PacketBatch::new(), PacketBatch::new());
        for i in 0..20u8 {
            a.push(pool.alloc_from(&[i; 20]).unwrap()).unwrap();
            b.push(pool.alloc_from(&[100 + i; 20]).unwrap()).unwrap();
        }
        a.append(&mut b);
        assert_eq!(a.len(), BATCH_SIZE);
        assert_eq!(b.len(), 8, "what does not fit stays");
        assert_eq!(a.as_slice()[20].data()[0], 100);
        assert_eq!(a.as_slice()[31].data()[0], 111);
        assert_eq!(b.as_slice()[0].data()[0], 112);
        a.free_all(&mut pool);
        b.free_all(&mut pool);
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn free_front_frees_the_first_and_keeps_the_rest_in_order() {
        let mut pool = PacketPool::new(64, 256).unwrap();
        let mut b = PacketBatch::new();
        for i in 0..10u8 {
            b.push(pool.alloc_from(&[i; 20]).unwrap()).unwrap();
        }
        b.free_front(0, &mut pool);
        assert_eq!((b.len(), pool.available()), (10, 54));
        b.free_front(3, &mut pool);
        assert_eq!((b.len(), pool.available()), (7, 57));
        let firsts: Vec<u8> = b.as_slice().iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, [3, 4, 5, 6, 7, 8, 9]);
        b.free_front(100, &mut pool);
        assert!(b.is_empty());
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn unload_moves_frees_takes_and_gives_back_the_rest_in_order() {
        let mut pool = PacketPool::new(64, 256).unwrap();
        let (mut src, mut dst) = (PacketBatch::new(), PacketBatch::new());
        for i in 0..10u8 {
            src.push(pool.alloc_from(&[i; 20]).unwrap()).unwrap();
        }
        for i in 0..30u8 {
            dst.push(pool.alloc_from(&[100 + i; 20]).unwrap()).unwrap();
        }
        {
            let mut u = src.unload();
            assert_eq!(u.index(), 0);
            assert!(u.move_to(&mut dst));
            assert!(u.free(&mut pool));
            assert!(u.move_to(&mut dst));
            assert!(!u.move_to(&mut dst), "dst is full: nothing moves");
            assert_eq!(u.front().unwrap().data()[0], 3);
            let p = u.take().unwrap();
            assert_eq!(p.data()[0], 3);
            pool.free(p);
            assert_eq!(u.index(), 4);
        }
        assert_eq!(dst.len(), BATCH_SIZE);
        assert_eq!(dst.as_slice()[30].data()[0], 0);
        assert_eq!(dst.as_slice()[31].data()[0], 2);
        let rest: Vec<u8> = src.as_slice().iter().map(|p| p.data()[0]).collect();
        assert_eq!(rest, vec![4, 5, 6, 7, 8, 9], "the rest stays, in order");
        {
            let mut u = src.unload();
            while u.free(&mut pool) {}
            assert!(u.front().is_none() && u.take().is_none());
        }
        assert!(src.is_empty());
        dst.free_all(&mut pool);
        assert_eq!(pool.available(), 64, "every frame back exactly once");
    }

    #[test]
    fn push_until_full_then_reject() {
        let mut pool = PacketPool::new(40, 256).unwrap();
        let mut b = PacketBatch::new();
        for _ in 0..BATCH_SIZE {
            b.push(pool.alloc().unwrap()).unwrap();
        }
        assert!(b.is_full());
        let extra = pool.alloc().unwrap();
        let back = b.push(extra).unwrap_err();
        pool.free(back);
        b.free_all(&mut pool);
        assert_eq!(pool.available(), 40);
    }

    #[test]
    fn a_fill_appends_in_order_and_the_batch_counts_them_when_it_ends() {
        let mut pool = PacketPool::new(40, 256).unwrap();
        let mut b = PacketBatch::with_room(5);
        b.push(pool.alloc().unwrap()).unwrap();
        let first = b.as_slice()[0].frame_index();
        let mut frames = vec![first];
        {
            let mut f = b.fill();
            assert_eq!(f.len(), 1);
            while !f.is_full() {
                let p = pool.alloc().unwrap();
                frames.push(p.frame_index());
                f.push(p).unwrap().meta.in_port = 3;
            }
            let extra = pool.alloc().unwrap();
            let back = f.push(extra).unwrap_err();
            pool.free(back);
        }
        assert_eq!(b.len(), 5);
        let got: Vec<u32> = b.as_slice().iter().map(|p| p.frame_index()).collect();
        assert_eq!(got, frames);
        assert!(b.as_slice()[1..].iter().all(|p| p.meta.in_port == 3));
        b.free_all(&mut pool);
        assert_eq!(pool.available(), 40);
    }
}
