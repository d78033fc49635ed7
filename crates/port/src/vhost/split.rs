//! A split virtqueue (virtio 1.2, 2.7) as the device side sees it, over
//! the guest's mapped memory ([`GuestMap`]).
//!
//! Made for bursts: the guest's available index is read once per burst
//! ([`SplitRing::avail`]), descriptors are plain loads from a table whose
//! place was checked when the ring started, used entries are written as
//! chains are done and published with one store of the used index per
//! burst ([`SplitRing::publish`]), and whether the guest wants an
//! interrupt is decided once per burst ([`SplitRing::wants_interrupt`],
//! with `EVENT_IDX` or the `NO_INTERRUPT` flag).
//!
//! Everything the guest controls is checked before use: a head or a
//! `next` past the table, a chain longer than its table (a loop), a
//! nested or chained indirect table, an available index that moved by
//! more than the ring holds, a buffer outside the guest's memory. Each is
//! a [`ChainError`]: the caller stops the queue and counts it.

#![allow(unsafe_code)]

use std::sync::atomic::{fence, Ordering};

use super::guest::GuestMap;

/// Descriptor flags.
const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;
/// Used ring flag: the device does not want kicks.
const NO_NOTIFY: u16 = 1;
/// Available ring flag: the guest does not want interrupts.
const NO_INTERRUPT: u16 = 1;

/// What a guest did wrong, or what did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainError {
    /// A descriptor points outside the guest's memory (the queue stops).
    BadAddress(u64),
    /// A transmit chain holds a device-writable descriptor, or a receive
    /// chain a read-only one (the queue stops).
    WrongDirection,
    /// The chain is shorter than the virtio-net header (the queue stops).
    NoHeader,
    /// A head or a `next` index past the descriptor table (the queue
    /// stops).
    BadIndex(u16),
    /// A chain has more descriptors than its table: it loops (the queue
    /// stops).
    Loop,
    /// An indirect descriptor inside an indirect table, with `NEXT`, or
    /// with a length that is not a whole number of descriptors (the
    /// queue stops).
    BadIndirect,
    /// The guest's available index moved by more than the ring holds
    /// (the queue stops).
    BadAvailIndex(u16),
    /// A chain changed while the device used it (the queue stops).
    Changed,
    /// The frame is longer than the buffer given for it (a counted drop;
    /// the chain is used).
    TooBig,
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainError::BadAddress(a) => {
                write!(f, "descriptor address {a:#x} is outside the guest's memory")
            }
            ChainError::WrongDirection => write!(f, "a descriptor has the wrong direction"),
            ChainError::NoHeader => write!(f, "a chain is shorter than the virtio-net header"),
            ChainError::BadIndex(i) => write!(f, "descriptor index {i} is past the table"),
            ChainError::Loop => write!(f, "a descriptor chain loops"),
            ChainError::BadIndirect => write!(f, "an indirect descriptor is malformed"),
            ChainError::BadAvailIndex(i) => {
                write!(f, "the available index {i} moved past the ring")
            }
            ChainError::Changed => write!(f, "a chain changed while in use"),
            ChainError::TooBig => write!(f, "a frame is larger than its buffer"),
        }
    }
}

/// Where the frontend put a ring (guest-physical addresses) and its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingAddrs {
    /// Entries (a power of two).
    pub size: u16,
    /// The descriptor table.
    pub desc: u64,
    /// The available (driver) ring.
    pub avail: u64,
    /// The used (device) ring.
    pub used: u64,
}

/// One descriptor as the device uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    /// Guest address of the buffer.
    pub addr: u64,
    /// Its length.
    pub len: u32,
    /// Device-writable (a receive buffer).
    pub write: bool,
}

/// A started ring.
pub struct SplitRing {
    map: GuestMap,
    desc: *const u8,
    avail: *const u8,
    used: *mut u8,
    size: u16,
    /// The next available entry to take.
    last_avail: u16,
    /// The used index as written so far (entries past `published` are
    /// not yet visible to the guest).
    used_idx: u16,
    published: u16,
    /// Used entries not yet written to the guest's ring: written together
    /// at [`SplitRing::publish`], so that the lines the guest polls move
    /// between cores once per burst, not once per chain.
    shadow: Vec<(u32, u32)>,
    /// The used index when the guest was last considered for an interrupt.
    signalled: u16,
    event_idx: bool,
}

// SAFETY: the raw pointers point into the mappings `map` keeps alive; the
// ring is used by one thread at a time (under its queue's lock), and
// moving it moves the map, which is Send.
unsafe impl Send for SplitRing {}

/// A burst's view of the available ring: entries `next..end`.
#[derive(Debug, Clone, Copy)]
pub struct Avail {
    next: u16,
    end: u16,
}

impl Avail {
    /// Entries left.
    pub fn len(&self) -> u16 {
        self.end.wrapping_sub(self.next)
    }

    /// Whether none are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SplitRing {
    /// Starts a ring at `addrs` in `map`, taking available entries from
    /// `next_avail` and writing used ones from `next_used`. Refused (with
    /// why) when a part of it is outside the guest's memory or misaligned.
    pub fn new(
        map: GuestMap,
        addrs: &RingAddrs,
        next_avail: u16,
        next_used: u16,
        event_idx: bool,
    ) -> Result<SplitRing, &'static str> {
        let n = usize::from(addrs.size);
        if n == 0 || !n.is_power_of_two() {
            return Err("its size is not a power of two");
        }
        if !addrs.desc.is_multiple_of(16)
            || !addrs.avail.is_multiple_of(2)
            || !addrs.used.is_multiple_of(4)
        {
            return Err("a ring is misaligned");
        }
        let (Some(desc), Some(avail), Some(used)) = (
            map.host(addrs.desc, 16 * n),
            map.host(addrs.avail, 6 + 2 * n),
            map.host(addrs.used, 6 + 8 * n),
        ) else {
            return Err("a ring is outside the guest's memory");
        };
        if !(avail as usize).is_multiple_of(2) || !(used as usize).is_multiple_of(4) {
            return Err("a ring is misaligned in the frontend's mapping");
        }
        Ok(SplitRing {
            map,
            desc,
            avail,
            used,
            size: addrs.size,
            last_avail: next_avail,
            used_idx: next_used,
            published: next_used,
            shadow: Vec::with_capacity(n),
            signalled: next_used,
            event_idx,
        })
    }

    /// The guest's memory.
    #[inline]
    pub fn map(&self) -> &GuestMap {
        &self.map
    }

    /// The next available entry to take (what GET_VRING_BASE reports).
    pub fn next_avail(&self) -> u16 {
        self.last_avail
    }

    /// The used index as added so far (published or not).
    pub fn next_used(&self) -> u16 {
        self.used_idx
    }

    /// Sets whether `EVENT_IDX` was negotiated.
    pub fn set_event_idx(&mut self, on: bool) {
        self.event_idx = on;
    }

    #[inline]
    fn load16(p: *const u8) -> u16 {
        // SAFETY: every caller passes a pointer into the rings checked in
        // `new` (2-aligned, inside the mapping the map keeps alive).
        // Volatile: the guest writes it concurrently; read once.
        u16::from_le(unsafe { std::ptr::read_volatile(p.cast::<u16>()) })
    }

    #[inline]
    fn store16(p: *mut u8, v: u16) {
        // SAFETY: as in `load16`, into the used ring (writable shared
        // memory).
        unsafe { std::ptr::write_volatile(p.cast::<u16>(), v.to_le()) }
    }

    #[inline]
    fn store32(p: *mut u8, v: u32) {
        // SAFETY: a used element inside the used ring checked in `new`,
        // 4-aligned (the ring is, and elements are 8 bytes).
        unsafe { std::ptr::write_volatile(p.cast::<u32>(), v.to_le()) }
    }

    /// The entries the guest has made available since the last burst: its
    /// index read once (then what it points to is visible).
    #[inline]
    pub fn avail(&self) -> Result<Avail, ChainError> {
        let end = Self::load16(self.avail.wrapping_add(2));
        fence(Ordering::Acquire);
        let a = Avail {
            next: self.last_avail,
            end,
        };
        if a.len() > self.size {
            return Err(ChainError::BadAvailIndex(end));
        }
        Ok(a)
    }

    /// The next entry's chain head, taken from `a`.
    #[inline]
    pub fn next_head(&self, a: &mut Avail) -> Option<Result<u16, ChainError>> {
        if a.is_empty() {
            return None;
        }
        let slot = usize::from(a.next & (self.size - 1));
        let head = Self::load16(self.avail.wrapping_add(4 + 2 * slot));
        a.next = a.next.wrapping_add(1);
        Some(if head < self.size {
            Ok(head)
        } else {
            Err(ChainError::BadIndex(head))
        })
    }

    /// Marks the entries before `a`'s position taken.
    #[inline]
    pub fn consume(&mut self, a: &Avail) {
        self.last_avail = a.next;
    }

    /// Marks the next `n` available entries taken.
    #[inline]
    pub fn advance(&mut self, n: u16) {
        self.last_avail = self.last_avail.wrapping_add(n);
    }

    /// The descriptors of the chain at `head`.
    #[inline]
    pub fn chain(&self, head: u16) -> Chain<'_> {
        Chain {
            map: &self.map,
            table: self.desc,
            table_len: u32::from(self.size),
            next: Some(head),
            seen: 0,
            indirect: false,
        }
    }

    /// The first descriptor of the chain at `head`, for a prefetch.
    #[inline]
    pub fn first(&self, head: u16) -> Option<Desc> {
        self.single(head)
            .or_else(|| self.chain(head).next().and_then(Result::ok))
    }

    /// The chain at `head` when it is a single direct descriptor (no
    /// `next`, no indirect table), as receive rings hold them; `None` for
    /// any other chain, and for a fault (which the caller's general path
    /// meets again and names).
    #[inline]
    pub fn single(&self, head: u16) -> Option<Desc> {
        if head >= self.size {
            return None;
        }
        // SAFETY: `head < size`: inside the ring's table, which `new`
        // checked lies in the map this ring keeps alive.
        let (addr, len, flags, _) = unsafe { load_desc(self.desc, head) };
        (flags & (NEXT | INDIRECT) == 0).then_some(Desc {
            addr,
            len,
            write: flags & WRITE != 0,
        })
    }

    /// Adds a used entry (written to the guest's ring, and seen by it, at
    /// the next [`publish`](Self::publish)).
    #[inline]
    pub fn push_used(&mut self, head: u16, len: u32) {
        // At most `size` chains are out at a time, so the shadow never
        // grows past its capacity; a guest that breaks that rule only
        // makes it grow.
        self.shadow.push((u32::from(head), len));
        self.used_idx = self.used_idx.wrapping_add(1);
    }

    /// Takes back the last `n` used entries not yet published.
    #[inline]
    pub fn unpush(&mut self, n: u16) {
        let keep = self.shadow.len().saturating_sub(usize::from(n));
        self.shadow.truncate(keep);
        self.used_idx = self.published.wrapping_add(keep as u16);
    }

    /// Makes the used entries added so far visible to the guest: the
    /// entries written in one go, then one store of the used index.
    #[inline]
    pub fn publish(&mut self) {
        if self.shadow.is_empty() {
            return;
        }
        let mask = self.size - 1;
        let mut idx = self.published;
        for &(id, len) in &self.shadow {
            let e = self.used.wrapping_add(4 + 8 * usize::from(idx & mask));
            Self::store32(e, id);
            Self::store32(e.wrapping_add(4), len);
            idx = idx.wrapping_add(1);
        }
        self.shadow.clear();
        fence(Ordering::Release);
        Self::store16(self.used.wrapping_add(2), self.used_idx);
        self.published = self.used_idx;
    }

    /// Whether the guest wants an interrupt for what was published since
    /// it was last asked: by `used_event` with `EVENT_IDX` (virtio's
    /// `vring_need_event`), else unless its ring says `NO_INTERRUPT`.
    #[inline]
    pub fn wants_interrupt(&mut self) -> bool {
        let (old, new) = (self.signalled, self.published);
        if old == new {
            return false;
        }
        self.signalled = new;
        // The used index must be visible before the guest's flag or event
        // index is read (it may be re-enabling interrupts right now).
        fence(Ordering::SeqCst);
        if self.event_idx {
            let event = Self::load16(self.avail.wrapping_add(4 + 2 * usize::from(self.size)));
            new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            Self::load16(self.avail) & NO_INTERRUPT == 0
        }
    }

    /// Asks the guest not to kick (the device polls). With `EVENT_IDX`
    /// the avail event is left where it is: the guest kicks once when its
    /// index passes it, then not for 65,536 more entries.
    pub fn no_kicks(&mut self) {
        if !self.event_idx {
            Self::store16(self.used, NO_NOTIFY);
        }
    }
}

/// The descriptors of one chain, in order, through an indirect table
/// where the chain has one. Ends after an error.
pub struct Chain<'a> {
    map: &'a GuestMap,
    table: *const u8,
    table_len: u32,
    next: Option<u16>,
    seen: u32,
    indirect: bool,
}

/// Descriptor `i` of the table at `table` as (address, length, flags,
/// next), read once.
///
/// # Safety
/// `i` must be inside a table that lies in guest memory mapped for as
/// long as the call lasts: the ring's own (checked in `SplitRing::new`)
/// or an indirect one checked by `GuestMap::host`.
#[inline]
unsafe fn load_desc(table: *const u8, i: u16) -> (u64, u32, u16, u16) {
    let p = table.wrapping_add(16 * usize::from(i));
    let (a, b) = if (p as usize).is_multiple_of(8) {
        // SAFETY: the caller's promise (descriptor `i` lies in mapped
        // guest memory); 8-aligned. Volatile: the guest may write it;
        // each field is read once and used from the copy.
        unsafe {
            (
                std::ptr::read_volatile(p.cast::<u64>()),
                std::ptr::read_volatile(p.add(8).cast::<u64>()),
            )
        }
    } else {
        let mut d = [0u8; 16];
        for (k, b) in d.iter_mut().enumerate() {
            // SAFETY: as above, byte by byte for a table the guest
            // did not align (an indirect one).
            *b = unsafe { std::ptr::read_volatile(p.add(k)) };
        }
        (
            u64::from_ne_bytes(d[..8].try_into().expect("8 bytes")),
            u64::from_ne_bytes(d[8..].try_into().expect("8 bytes")),
        )
    };
    let b = u64::from_le(b);
    (
        u64::from_le(a),
        b as u32,
        (b >> 32) as u16,
        (b >> 48) as u16,
    )
}

impl Chain<'_> {
    /// Descriptor `i` of the current table (`i < table_len`).
    #[inline]
    fn load(&self, i: u16) -> (u64, u32, u16, u16) {
        // SAFETY: callers pass `i < table_len` of the current table: the
        // ring's (checked in `SplitRing::new`) or an indirect one that
        // `GuestMap::host` found inside the map this chain borrows.
        unsafe { load_desc(self.table, i) }
    }

    fn fail(&mut self, e: ChainError) -> Option<Result<Desc, ChainError>> {
        self.next = None;
        Some(Err(e))
    }
}

impl Iterator for Chain<'_> {
    type Item = Result<Desc, ChainError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next?;
        if u32::from(i) >= self.table_len {
            return self.fail(ChainError::BadIndex(i));
        }
        if self.seen == self.table_len {
            return self.fail(ChainError::Loop);
        }
        self.seen += 1;
        let (addr, len, flags, next) = self.load(i);
        if flags & INDIRECT != 0 {
            if self.indirect
                || flags & NEXT != 0
                || !len.is_multiple_of(16)
                || len == 0
                || len > 16 << 16
            {
                return self.fail(ChainError::BadIndirect);
            }
            let Some(t) = self.map.host(addr, len as usize) else {
                return self.fail(ChainError::BadAddress(addr));
            };
            self.table = t;
            self.table_len = len / 16;
            self.next = Some(0);
            self.seen = 0;
            self.indirect = true;
            return self.next();
        }
        self.next = (flags & NEXT != 0).then_some(next);
        Some(Ok(Desc {
            addr,
            len,
            write: flags & WRITE != 0,
        }))
    }
}
