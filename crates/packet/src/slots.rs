//! A batch's packets by index while its actions run: each index holds a
//! packet or none, and a packet leaves its slot in one 64-byte copy.
//!
//! Why not `[Option<Packet>; BATCH_SIZE]`: taking a packet out of an
//! `Option` reads its tag (the frame pointer) apart from the rest, and a
//! packet that then goes anywhere by value is written into a stack
//! temporary as 8 + 56 bytes (two overlapping 32-byte stores), which the
//! destination's 32-byte loads cannot be forwarded from: every such move
//! waited for its own stores (a tenth of a decapsulation's cycles, in the
//! output queue's and the recirculation queue's pushes). Here presence is
//! a bit, and [`Slots::move_to`] / [`Slots::move_to_vec`] copy the packet
//! from the slot's memory straight to where it goes.

use std::mem::MaybeUninit;

use crate::batch::BATCH_SIZE;
use crate::pool::Packet;
use crate::PacketBatch;

/// Up to [`BATCH_SIZE`] packets by index.
pub struct Slots {
    pkts: [MaybeUninit<Packet>; BATCH_SIZE],
    /// Bit `i`: slot `i` holds a packet.
    full: u32,
}

impl Default for Slots {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slots({:#010x})", self.full)
    }
}

impl Slots {
    /// No packet in any slot.
    pub fn new() -> Self {
        Slots {
            pkts: [const { MaybeUninit::uninit() }; BATCH_SIZE],
            full: 0,
        }
    }

    /// Which slots hold a packet (bit `i` for slot `i`).
    #[inline(always)]
    pub fn mask(&self) -> u32 {
        self.full
    }

    /// Whether slot `i` holds no packet.
    #[inline(always)]
    pub fn is_empty_at(&self, i: usize) -> bool {
        self.full & (1 << i) == 0
    }

    /// Puts `pkt` in slot `i`, giving back the packet that was there.
    ///
    /// # Panics
    /// If `i` is not below [`BATCH_SIZE`].
    #[inline(always)]
    pub fn put(&mut self, i: usize, pkt: Packet) -> Option<Packet> {
        let old = self.take(i);
        self.pkts[i].write(pkt);
        self.full |= 1 << i;
        old
    }

    /// Takes the packet out of slot `i`.
    #[inline(always)]
    pub fn take(&mut self, i: usize) -> Option<Packet> {
        if self.is_empty_at(i) {
            return None;
        }
        self.full &= !(1 << i);
        // SAFETY: the bit said slot i holds a packet, written by `put`;
        // clearing it first means it is read out exactly once.
        Some(unsafe { self.pkts[i].assume_init_read() })
    }

    /// The packet in slot `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&Packet> {
        // SAFETY: the bit says slot i holds a packet.
        (!self.is_empty_at(i)).then(|| unsafe { self.pkts[i].assume_init_ref() })
    }

    /// The packet in slot `i`, writable.
    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Packet> {
        if self.is_empty_at(i) {
            return None;
        }
        // SAFETY: the bit says slot i holds a packet.
        Some(unsafe { self.pkts[i].assume_init_mut() })
    }

    /// Moves slot `i`'s packet to the end of `dst`. False, moving
    /// nothing, when the slot is empty or `dst` is full.
    #[inline(always)]
    pub fn move_to(&mut self, i: usize, dst: &mut PacketBatch) -> bool {
        if self.is_empty_at(i) || dst.is_full() {
            return false;
        }
        self.full &= !(1 << i);
        // SAFETY: the slot holds a packet (its bit, now cleared, so it is
        // never read from here again); dst has room for it.
        unsafe { dst.push_raw(self.pkts[i].as_ptr()) };
        true
    }

    /// Moves slot `i`'s packet to the end of `dst` (which grows if it
    /// must). False, moving nothing, when the slot is empty.
    #[inline(always)]
    pub fn move_to_vec(&mut self, i: usize, dst: &mut Vec<Packet>) -> bool {
        if self.is_empty_at(i) {
            return false;
        }
        dst.reserve(1);
        self.full &= !(1 << i);
        let at = dst.len();
        // SAFETY: the slot holds a packet (its bit, now cleared: it is
        // read from here once); dst has room at `at` (reserved), and the
        // length counts the packet only once it is copied there.
        unsafe {
            std::ptr::copy_nonoverlapping(self.pkts[i].as_ptr(), dst.as_mut_ptr().add(at), 1);
            dst.set_len(at + 1);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PacketPool;

    #[test]
    fn packets_move_in_and_out_of_slots_each_once() {
        let mut pool = PacketPool::new(8, 256).unwrap();
        let mut s = Slots::new();
        assert_eq!(s.mask(), 0);
        let a = pool.alloc_from(&[1; 60]).unwrap();
        let b = pool.alloc_from(&[2; 61]).unwrap();
        let c = pool.alloc_from(&[3; 62]).unwrap();
        assert!(s.put(0, a).is_none());
        assert!(s.put(5, b).is_none());
        let back = s.put(31, c);
        assert!(back.is_none());
        assert_eq!(s.mask(), 1 | 1 << 5 | 1 << 31);
        assert!(s.is_empty_at(1) && !s.is_empty_at(5));
        assert_eq!(s.get(5).unwrap().len(), 61);
        s.get_mut(0).unwrap().meta.in_port = 9;
        // Replacing gives the old packet back.
        let old = s.put(0, pool.alloc_from(&[4; 63]).unwrap()).unwrap();
        assert_eq!((old.data()[0], old.meta.in_port), (1, 9));
        pool.free(old);
        let mut batch = PacketBatch::with_room(1);
        assert!(s.move_to(5, &mut batch));
        assert!(!s.move_to(5, &mut batch), "moved once");
        assert!(!s.move_to(0, &mut batch), "the batch is full");
        assert_eq!(batch.as_slice()[0].data(), &[2; 61]);
        let mut v = Vec::new();
        assert!(s.move_to_vec(31, &mut v));
        assert!(!s.move_to_vec(31, &mut v));
        assert_eq!(v[0].data(), &[3; 62]);
        let t = s.take(0).unwrap();
        assert_eq!(t.data(), &[4; 63]);
        assert!(s.take(0).is_none() && s.get(0).is_none() && s.mask() == 0);
        pool.free(t);
        pool.free(v.pop().unwrap());
        batch.free_all(&mut pool);
        assert_eq!(pool.available(), 8, "every frame back, none twice");
    }
}
