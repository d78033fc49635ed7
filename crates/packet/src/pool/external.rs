//! Packets in buffers the pool does not own: a device's own buffers (DPDK
//! mbufs) handed to the datapath without a copy.
//!
//! A port that receives into its device's buffers wraps each one as a
//! [`Packet`] with [`PacketPool::adopt_external`]. The packet travels the
//! datapath like any other (its bytes are the device buffer's) and ends in
//! one of two ways: the same kind of port sends it, taking the buffer back
//! as it is ([`PacketPool::external_parts`], then
//! [`PacketPool::release_sent`]: no copy on either side), or anything else
//! frees it to the pool, which gathers such buffers and gives
//! them back to their owner in bulk through the function the port
//! registered ([`PacketPool::set_external_return`]): a push per packet, one
//! call per [`RETURN_BATCH`] buffers, never an allocation.

use std::ptr::NonNull;

use super::{Packet, PacketPool};
use crate::meta::PacketMeta;
use crate::{Fill, PacketBatch};

/// The frame number of a packet in an external buffer.
pub const EXTERNAL_FRAME: u32 = u32::MAX;

/// How many freed external buffers the pool gathers before giving them
/// back in one call.
pub const RETURN_BATCH: usize = 64;

/// Gives external buffers back to their owner, each named by the start of
/// the buffer (what [`PacketPool::adopt_external`] was given).
///
/// # Safety
/// Called only with buffers adopted into a pool that registered this
/// function, each once, after the packet that held it is gone.
pub type ReturnBuffers = unsafe fn(&[NonNull<u8>]);

/// The pool's side of external buffers.
#[derive(Default)]
pub(super) struct External {
    /// Freed buffers not yet given back.
    pending: Vec<NonNull<u8>>,
    /// Who takes them back; `None` until a port registers.
    give_back: Option<ReturnBuffers>,
    /// Packets adopted, and buffers given back or released, so far.
    adopted: u64,
    returned: u64,
}

impl External {
    /// Gives every pending buffer back.
    pub(super) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(give_back) = self.give_back {
            // SAFETY: every pending buffer was adopted into this pool (only
            // take_back pushes, for packets made by adopt_external, which
            // requires the function registered) and its packet is gone.
            unsafe { give_back(&self.pending) };
        }
        self.returned += self.pending.len() as u64;
        self.pending.clear();
    }
}

impl PacketPool {
    /// Registers the function that gives freed external buffers back to
    /// their owner. One per pool: every port that adopts buffers into it
    /// must return them the same way (all DPDK ports do).
    pub fn set_external_return(&mut self, give_back: ReturnBuffers) {
        self.external.flush();
        self.external.give_back = Some(give_back);
        self.external.pending.reserve(RETURN_BATCH);
    }

    /// Whether external buffers can be adopted (a return function is set).
    pub fn takes_external(&self) -> bool {
        self.external.give_back.is_some()
    }

    /// Wraps an external buffer as a packet of this pool: `buf_len` bytes
    /// at `buf`, the data `len` bytes at offset `data_off`. Freeing the
    /// packet to this pool gives the buffer back through the registered
    /// function.
    ///
    /// # Safety
    /// A return function is registered ([`Self::takes_external`]); the
    /// `buf_len` bytes at `buf` are valid, writable, and used by nothing
    /// else until the buffer is given back or released; `data_off + len <=
    /// buf_len`.
    #[inline(always)]
    pub unsafe fn adopt_external(
        &mut self,
        buf: NonNull<u8>,
        buf_len: u32,
        data_off: u32,
        len: u32,
    ) -> Packet {
        debug_assert!(self.takes_external());
        debug_assert!(data_off as u64 + len as u64 <= buf_len as u64);
        self.external.adopted += 1;
        Packet {
            frame_ptr: buf,
            frame_size: buf_len,
            frame: EXTERNAL_FRAME,
            pool_id: self.id,
            data_off,
            len,
            meta: PacketMeta::default(),
        }
    }

    /// [`Self::adopt_external`] straight into the end of `batch` (a port's
    /// rx loop: the packet is written once, where it stays), returning it
    /// for its metadata; `None`, adopting nothing, when the batch is full.
    ///
    /// # Safety
    /// As [`Self::adopt_external`].
    #[inline(always)]
    pub unsafe fn adopt_external_into<'b>(
        &mut self,
        batch: &'b mut PacketBatch,
        buf: NonNull<u8>,
        buf_len: u32,
        data_off: u32,
        len: u32,
    ) -> Option<&'b mut Packet> {
        if batch.is_full() {
            return None;
        }
        // SAFETY: the caller's promises are adopt_external's.
        let pkt = unsafe { self.adopt_external(buf, buf_len, data_off, len) };
        batch.push(pkt).ok()?;
        batch.as_mut_slice().last_mut()
    }

    /// A receive burst's adoption of external buffers into `batch`, for
    /// packets arriving on `in_port` ([`AdoptRun`]): each packet written
    /// once, as whole words, the batch's length and the pool's count
    /// written back when the run ends.
    #[inline(always)]
    pub fn adopt_run<'a>(&'a mut self, batch: &'a mut PacketBatch, in_port: u32) -> AdoptRun<'a> {
        debug_assert!(self.takes_external());
        let fill = batch.fill();
        AdoptRun {
            start: fill.len(),
            fill,
            pool: self,
            in_port,
            copies: 0,
        }
    }

    /// Whether `pkt` sits in an external buffer.
    #[inline(always)]
    pub fn is_external(pkt: &Packet) -> bool {
        pkt.frame == EXTERNAL_FRAME
    }

    /// An external packet's buffer, the data's offset in it and its
    /// length (what a port sending it in place needs); `None` for a packet
    /// in a frame of the pool.
    #[inline(always)]
    pub fn external_parts(pkt: &Packet) -> Option<(NonNull<u8>, u32, u32)> {
        Self::is_external(pkt).then_some((pkt.frame_ptr, pkt.data_off, pkt.len))
    }

    /// Empties `batch` after a port sent it: its external packets went out
    /// in place (their buffers are the port's now: the pool forgets them),
    /// the others were copied and are freed.
    ///
    /// # Panics
    /// If a packet belongs to another pool.
    #[inline]
    pub fn release_sent(&mut self, batch: &mut PacketBatch) {
        let mut released = 0;
        for pkt in batch.as_slice() {
            if Self::is_external(pkt) {
                assert_eq!(pkt.pool_id, self.id, "external packet of another pool");
                released += 1;
            } else {
                self.take_back(pkt);
            }
        }
        self.external.returned += released;
        batch.forget_all();
    }

    /// [`Self::release_sent`] for a batch the port found all external (the
    /// common case: no pass over it again). Checked in debug builds only;
    /// a packet of the pool's own frames here would be lost, not freed.
    #[inline]
    pub fn release_sent_external(&mut self, batch: &mut PacketBatch) {
        debug_assert!(batch
            .as_slice()
            .iter()
            .all(|p| Self::is_external(p) && p.pool_id == self.id));
        self.external.returned += batch.len() as u64;
        batch.forget_all();
    }

    /// Puts a freed external buffer on the list to give back (out of line:
    /// the free path of the pool's own frames stays small).
    #[cold]
    #[inline(never)]
    pub(super) fn take_back_external(&mut self, pkt: &Packet) {
        self.external.pending.push(pkt.frame_ptr);
        if self.external.pending.len() >= RETURN_BATCH {
            self.external.flush();
        }
    }

    /// Gives every freed external buffer back now (a port does so before
    /// it counts its device's buffers, or stops).
    pub fn return_external(&mut self) {
        self.external.flush();
    }

    /// External packets adopted and not yet given back or released: in
    /// flight in the datapath, or freed and waiting (0 when nothing leaks).
    pub fn external_in_use(&self) -> u64 {
        self.external.adopted - self.external.returned - self.external.pending.len() as u64
    }
}

/// Adopts a receive burst's external buffers ([`PacketPool::adopt_run`]).
pub struct AdoptRun<'a> {
    pool: &'a mut PacketPool,
    fill: Fill<'a>,
    in_port: u32,
    /// Batch length at the start, and packets of the pool's own pushed:
    /// the rest were adopted.
    start: usize,
    copies: usize,
}

impl AdoptRun<'_> {
    /// [`PacketPool::adopt_external`] at the end of the batch, with the
    /// run's input port and `hash` (a device's RSS hash, if it gave one);
    /// `false`, adopting nothing, when the batch is full.
    ///
    /// # Safety
    /// As [`PacketPool::adopt_external`].
    #[inline(always)]
    pub unsafe fn adopt(
        &mut self,
        buf: NonNull<u8>,
        buf_len: u32,
        data_off: u32,
        len: u32,
        hash: Option<u32>,
    ) -> bool {
        debug_assert!(data_off as u64 + len as u64 <= buf_len as u64);
        let (pool_id, meta) = (self.pool.id, PacketMeta::rx_words(self.in_port, hash));
        // SAFETY: the words make the packet adopt_external makes (the
        // caller's promises are its), written into a free slot.
        unsafe {
            self.fill.push_with(|slot| {
                Packet::write_words(
                    slot,
                    buf,
                    buf_len,
                    data_off,
                    len,
                    EXTERNAL_FRAME,
                    pool_id,
                    meta,
                )
            })
        }
    }

    /// Appends a packet of the pool's own (a buffer the port copied) with
    /// the run's input port and `hash`, as [`Self::adopt`] makes them;
    /// `false`, the packet freed, when the batch is full.
    #[inline]
    pub fn push(&mut self, mut pkt: Packet, hash: Option<u32>) -> bool {
        pkt.meta.in_port = self.in_port;
        pkt.meta.hash = hash.unwrap_or(0);
        pkt.meta.has_hash = u8::from(hash.is_some());
        match self.fill.push(pkt) {
            Ok(_) => {
                self.copies += 1;
                true
            }
            Err(pkt) => {
                self.pool.free(pkt);
                false
            }
        }
    }

    /// The pool (to take a frame for a copy).
    #[inline]
    pub fn pool(&mut self) -> &mut PacketPool {
        self.pool
    }

    /// Whether the batch takes no more.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.fill.is_full()
    }
}

impl Drop for AdoptRun<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.pool.external.adopted += (self.fill.len() - self.start - self.copies) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        static GIVEN_BACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// Records what it is given (the test's stand-in for a device pool).
    unsafe fn record(bufs: &[NonNull<u8>]) {
        GIVEN_BACK.with(|g| {
            g.borrow_mut()
                .extend(bufs.iter().map(|b| b.as_ptr() as usize))
        });
    }

    fn given_back() -> Vec<usize> {
        GIVEN_BACK.with(|g| g.borrow().clone())
    }

    #[test]
    fn freed_external_packets_go_back_to_their_owner_in_bulk_and_none_is_lost() {
        let mut bufs = vec![[0u8; 256]; RETURN_BATCH + 5];
        let mut pool = PacketPool::new(8, 256).unwrap();
        assert!(!pool.takes_external());
        pool.set_external_return(record);
        let mut pkts = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            b[100] = i as u8;
            let buf = NonNull::new(b.as_mut_ptr()).unwrap();
            // SAFETY: the buffer lives until the end of the test, and only
            // the packet uses it until it is given back.
            let pkt = unsafe { pool.adopt_external(buf, 256, 100, 60) };
            assert!(PacketPool::is_external(&pkt));
            assert!(!pool.is_big(&pkt) && !pool.in_region(&pkt));
            assert_eq!(pkt.data()[0], i as u8, "the data is the buffer's, in place");
            pkts.push(pkt);
        }
        assert_eq!(pool.external_in_use(), bufs.len() as u64);
        let last = pkts.pop().unwrap();
        let (buf, off, len) = PacketPool::external_parts(&last).unwrap();
        assert_eq!(
            (buf.as_ptr() as usize, off, len),
            (bufs[RETURN_BATCH + 4].as_ptr() as usize, 100, 60)
        );
        // Sent in place by a port, beside a frame of the pool it copied.
        let mut sent = PacketBatch::new();
        sent.push(last).unwrap();
        sent.push(pool.alloc().unwrap()).unwrap();
        pool.release_sent(&mut sent);
        assert!(sent.is_empty());
        let mut all_external = PacketBatch::new();
        all_external.push(pkts.pop().unwrap()).unwrap();
        pool.release_sent_external(&mut all_external);
        assert!(all_external.is_empty());
        for p in pkts.drain(..RETURN_BATCH - 1) {
            pool.free(p);
        }
        assert!(given_back().is_empty(), "gathered until a batch is full");
        pool.free(pkts.remove(0));
        assert_eq!(given_back().len(), RETURN_BATCH, "one call for the batch");
        for p in pkts.drain(..) {
            pool.free(p);
        }
        assert_eq!(given_back().len(), RETURN_BATCH);
        pool.return_external();
        let mut back = given_back();
        back.sort_unstable();
        let mut want: Vec<usize> = bufs[..RETURN_BATCH + 3]
            .iter()
            .map(|b| b.as_ptr() as usize)
            .collect();
        want.sort_unstable();
        assert_eq!(back, want, "every freed buffer, once");
        assert_eq!(pool.external_in_use(), 0);
        assert_eq!(
            pool.available(),
            pool.capacity(),
            "the pool's own frames untouched"
        );
    }

    #[test]
    fn an_external_packet_grows_and_shrinks_inside_its_buffer() {
        let mut buf = [0u8; 512];
        let mut pool = PacketPool::new(1, 256).unwrap();
        pool.set_external_return(record);
        let ptr = NonNull::new(buf.as_mut_ptr()).unwrap();
        // SAFETY: as above.
        let mut pkt = unsafe { pool.adopt_external(ptr, 512, 128, 64) };
        pkt.data_mut().fill(7);
        assert!(pkt.insert_gap(0, 4), "room in the headroom");
        assert_eq!(pkt.len(), 68);
        assert_eq!(&pkt.data()[4..8], &[7; 4]);
        assert!(pkt.remove_range(0, 4));
        pkt.set_len(300);
        assert!(pkt.tailroom() <= 512 - 128 - 300);
        pool.free(pkt);
        pool.return_external();
        assert_eq!(pool.external_in_use(), 0);
    }

    #[test]
    fn a_run_adopts_as_adopt_external_does_beside_copies_and_stops_when_full() {
        let mut bufs = vec![[0u8; 512]; 40];
        let mut pool = PacketPool::new(4, 256).unwrap();
        pool.set_external_return(record);
        let mut batch = PacketBatch::with_room(30);
        batch.push(pool.alloc().unwrap()).unwrap();
        let mut taken = 0;
        {
            let mut run = pool.adopt_run(&mut batch, 7);
            for (i, b) in bufs.iter_mut().enumerate() {
                b[64 + i] = i as u8;
                let buf = NonNull::new(b.as_mut_ptr()).unwrap();
                let hash = (i % 2 == 0).then_some(0xdead_0000 | i as u32);
                if i == 3 {
                    // A frame of the pool's own (a copy) among them.
                    let c = run.pool().alloc_from(&[9; 60]).unwrap();
                    assert!(run.push(c, None));
                    continue;
                }
                // SAFETY: the buffers outlive the packets; nothing else
                // uses them until they are given back.
                if !unsafe { run.adopt(buf, 512, 64 + i as u32, 60, hash) } {
                    assert!(run.is_full());
                    break;
                }
                taken += 1;
            }
        }
        assert_eq!(batch.len(), 30, "as far as the batch has room");
        assert_eq!(taken, 28);
        assert_eq!(pool.external_in_use(), 28, "copies are not adopted");
        for (k, p) in batch.as_slice().iter().enumerate().skip(1) {
            let i = k - 1;
            if i == 3 {
                assert!(!PacketPool::is_external(p));
                continue;
            }
            // SAFETY: as above (a twin of what the run wrote, not kept).
            let mut want = unsafe {
                pool.adopt_external(
                    NonNull::new(bufs[i].as_mut_ptr()).unwrap(),
                    512,
                    64 + i as u32,
                    60,
                )
            };
            want.meta.in_port = 7;
            if i % 2 == 0 {
                want.meta.hash = 0xdead_0000 | i as u32;
                want.meta.has_hash = 1;
            }
            assert_eq!(p.meta, want.meta, "packet {i}");
            assert_eq!(
                PacketPool::external_parts(p),
                PacketPool::external_parts(&want)
            );
            assert_eq!(p.data()[0], i as u8, "the buffer's bytes, in place");
            pool.release_sent_external(&mut {
                let mut b = PacketBatch::new();
                b.push(want).unwrap();
                b
            });
        }
        batch.free_all(&mut pool);
        pool.return_external();
        assert_eq!(pool.external_in_use(), 0);
        assert_eq!(pool.available(), 4);
    }
}
