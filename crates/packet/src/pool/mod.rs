//! Packet buffers in a pre-allocated pool of fixed-size frames.
//!
//! The pool is one contiguous, page-aligned region cut into `frame_size`
//! frames, the way DPDK mempools and AF_XDP UMEMs are laid out: a frame is
//! named by its index, so a later AF_XDP port can hand the same region to
//! the kernel as its UMEM and move frames between rings and the datapath
//! without a copy.
//!
//! A [`Packet`] owns one frame exclusively until it is given back with
//! [`PacketPool::free`]. Taking and freeing a frame is a push/pop on a free
//! stack: no allocation and no lock on the packet path. A pool belongs to
//! one thread (it is `Send`, not `Sync`); packets may travel between threads
//! but go back to the pool they came from.
//!
//! Each frame keeps [`HEADROOM`] bytes in front of the data so that pushing
//! headers (VLAN tags) moves the start pointer instead of the payload.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::meta::PacketMeta;

mod external;
pub use external::{AdoptRun, ReturnBuffers, EXTERNAL_FRAME, RETURN_BATCH};

/// Bytes reserved in front of the data of a fresh frame, for pushed headers.
pub const HEADROOM: usize = 128;

/// Default frame size: a standard 1518-byte frame plus headroom, rounded up.
pub const DEFAULT_FRAME_SIZE: usize = 2048;

/// Largest big frame: a 64 KiB GSO super-frame (plus its Ethernet and
/// VLAN headers) with headroom needs more than 64 KiB.
pub const MAX_BIG_FRAME: usize = 1 << 18;

/// Fresh frames start their data at one of this many cache-line offsets
/// past [`HEADROOM`] (slab-style cache colouring). Frames sit a power of
/// two apart, so without it the first data line of every frame falls in
/// the same one or two sets of an 8-way L1 cache: the 32 frames of a
/// burst then evict each other between the rx copy and the parse (a
/// quarter of the cached-packet path's cycles, measured). DPDK gets the
/// same spread from its 2,304-byte mbuf stride.
const COLOURS: usize = 4;

/// Smallest frame size that is coloured: smaller frames keep all their
/// room for data.
const MIN_COLOURED_FRAME: usize = 2048;

/// Bytes of a frame that colouring may put in front of the data.
const fn colour_span(frame_size: usize) -> usize {
    if frame_size >= MIN_COLOURED_FRAME {
        (COLOURS - 1) * 64
    } else {
        0
    }
}

/// Why a pool could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// Frame size must be a power of two between 256 bytes and 64 KiB.
    BadFrameSize(usize),
    /// Zero frames, or more than the region can address.
    BadFrameCount(usize),
    /// The region could not be allocated.
    OutOfMemory,
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::BadFrameSize(n) => write!(
                f,
                "frame size {n} is not a power of two between 256 and 65536 bytes"
            ),
            PoolError::BadFrameCount(n) => write!(f, "frame count {n} is out of range"),
            PoolError::OutOfMemory => write!(f, "could not allocate the packet pool"),
        }
    }
}

impl std::error::Error for PoolError {}

static NEXT_POOL_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A fixed set of equal-sized packet frames in one contiguous region.
pub struct PacketPool {
    base: NonNull<u8>,
    layout: Layout,
    frame_size: u32,
    n_frames: u32,
    id: u32,
    free: Vec<u32>,
    umem_owner: Option<i32>,
    /// Colouring, worked out once: a frame's colour is
    /// `(frame >> colour_shift) & colour_mask`.
    colour_shift: u32,
    colour_mask: u32,
    /// Frames for packets larger than a frame above (GSO super-frames,
    /// jumbo frames), if the pool has them.
    big: Option<BigFrames>,
    /// Device buffers wrapped as packets (`external.rs`).
    external: external::External,
}

/// A pool's second region: fewer, larger frames, numbered after the
/// regular ones (frame `n_frames + i` is big frame `i`), outside the
/// region an AF_XDP UMEM covers.
struct BigFrames {
    base: NonNull<u8>,
    layout: Layout,
    frame_size: u32,
    n_frames: u32,
    free: Vec<u32>,
}

// SAFETY: the pool owns its region exclusively; the raw base pointer is not
// shared with anything but the packets the pool hands out, each of which owns
// a disjoint frame. Moving the pool to another thread moves that ownership.
unsafe impl Send for PacketPool {}

impl PacketPool {
    /// Creates a pool of `n_frames` frames of `frame_size` bytes each.
    pub fn new(n_frames: usize, frame_size: usize) -> Result<Self, PoolError> {
        if !frame_size.is_power_of_two() || !(256..=65536).contains(&frame_size) {
            return Err(PoolError::BadFrameSize(frame_size));
        }
        if n_frames == 0 || n_frames > (u32::MAX as usize) / 2 {
            return Err(PoolError::BadFrameCount(n_frames));
        }
        let (base, layout) = alloc_region(n_frames, frame_size, true)?;
        // Hand out low frame numbers first: pop() takes from the end.
        let free = (0..n_frames as u32).rev().collect();
        Ok(PacketPool {
            base,
            layout,
            frame_size: frame_size as u32,
            n_frames: n_frames as u32,
            id: NEXT_POOL_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            free,
            umem_owner: None,
            // log2 of the frames per 4 KiB span (frame sizes are powers of two).
            colour_shift: (4096 / frame_size).max(1).trailing_zeros(),
            colour_mask: if colour_span(frame_size) == 0 {
                0
            } else {
                COLOURS as u32 - 1
            },
            big: None,
            external: Default::default(),
        })
    }

    /// Adds `n_frames` big frames of `frame_size` bytes (a power of two up
    /// to 256 KiB, larger than the regular frames): the frames
    /// [`PacketPool::alloc_for`] takes for packets that do not fit a
    /// regular one. Replaces big frames added before, which must all be free.
    pub fn add_big_frames(&mut self, n_frames: usize, frame_size: usize) -> Result<(), PoolError> {
        if !frame_size.is_power_of_two()
            || frame_size <= self.frame_size as usize
            || frame_size > MAX_BIG_FRAME
        {
            return Err(PoolError::BadFrameSize(frame_size));
        }
        if n_frames == 0 || n_frames > (u32::MAX / 2 - self.n_frames) as usize {
            return Err(PoolError::BadFrameCount(n_frames));
        }
        if self
            .big
            .as_ref()
            .is_some_and(|b| b.free.len() != b.n_frames as usize)
        {
            return Err(PoolError::BadFrameCount(n_frames));
        }
        let (base, layout) = alloc_region(n_frames, frame_size, false)?;
        if let Some(old) = self.big.take() {
            // SAFETY: allocated with this layout; every frame is free (checked).
            unsafe { alloc::dealloc(old.base.as_ptr(), old.layout) };
        }
        self.big = Some(BigFrames {
            base,
            layout,
            frame_size: frame_size as u32,
            n_frames: n_frames as u32,
            free: (0..n_frames as u32).rev().collect(),
        });
        Ok(())
    }

    /// Largest packet a big frame holds with full headroom (0 without big
    /// frames).
    pub fn max_big_packet_len(&self) -> usize {
        self.big
            .as_ref()
            .map_or(0, |b| b.frame_size as usize - HEADROOM)
    }

    /// Largest packet the pool holds, in a regular or a big frame.
    pub fn max_len(&self) -> usize {
        self.max_packet_len().max(self.max_big_packet_len())
    }

    /// Big frames: (free, total).
    pub fn big_frames(&self) -> (usize, usize) {
        self.big
            .as_ref()
            .map_or((0, 0), |b| (b.free.len(), b.n_frames as usize))
    }

    /// Takes a frame that holds `len` bytes with full headroom: a regular
    /// one when they fit, else a big one. `None` when none is free or
    /// `len` is beyond [`PacketPool::max_len`].
    #[inline]
    pub fn alloc_for(&mut self, len: usize) -> Option<Packet> {
        if len <= self.max_packet_len() {
            return self.alloc();
        }
        if len > self.max_big_packet_len() {
            return None;
        }
        let b = self.big.as_mut()?;
        let i = b.free.pop()?;
        let (base, size) = (b.base, b.frame_size);
        Some(self.empty_packet(base, size, i, self.n_frames + i, HEADROOM as u32))
    }

    /// Whether `pkt` sits in a big frame (outside [`PacketPool::region`]).
    #[inline]
    pub fn is_big(&self, pkt: &Packet) -> bool {
        pkt.frame >= self.n_frames && pkt.frame != EXTERNAL_FRAME
    }

    /// Whether `pkt` sits in a regular frame, inside [`PacketPool::region`]
    /// (not a big frame nor an external buffer).
    #[inline]
    pub fn in_region(&self, pkt: &Packet) -> bool {
        pkt.frame < self.n_frames
    }

    /// The whole frame region (start, length in bytes): what an AF_XDP
    /// socket registers as its UMEM, so ring descriptors and pool frames are
    /// the same memory. Page-aligned.
    pub fn region(&self) -> (*mut u8, usize) {
        (self.base.as_ptr(), self.layout.size())
    }

    /// The descriptor of the AF_XDP socket that registered this pool as its
    /// UMEM, so later sockets share it instead of registering it again.
    pub fn umem_owner(&self) -> Option<i32> {
        self.umem_owner
    }

    /// Records (or clears) the socket that registered this pool as UMEM.
    pub fn set_umem_owner(&mut self, fd: Option<i32>) {
        self.umem_owner = fd;
    }

    /// Size of each frame in bytes (headroom included).
    pub fn frame_size(&self) -> usize {
        self.frame_size as usize
    }

    /// Largest packet a frame of this pool holds with full headroom.
    pub fn max_packet_len(&self) -> usize {
        self.frame_size as usize - HEADROOM - colour_span(self.frame_size as usize)
    }

    /// Where frame `frame`'s data starts when fresh: [`HEADROOM`] plus its
    /// colour. The frames of one 4 KiB span (which covers every set of an
    /// 8-way 32 KiB L1 once) share a colour; consecutive spans take the
    /// next one.
    #[inline]
    fn fresh_data_offset(&self, frame: u32) -> u32 {
        HEADROOM as u32 + ((frame >> self.colour_shift) & self.colour_mask) * 64
    }

    /// Total number of frames.
    pub fn capacity(&self) -> usize {
        self.n_frames as usize
    }

    /// Frames currently free.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a frame and returns it as an empty packet with full headroom,
    /// or `None` when every frame is in use.
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        let frame = self.free.pop()?;
        Some(self.fresh_packet(frame))
    }

    /// Takes up to `n` frames as empty packets appended to `batch`, as far
    /// as it has room and the pool has frames (DPDK's
    /// `rte_pktmbuf_alloc_bulk`): one pass over the free stack, each packet
    /// written straight into the batch. Returns how many were appended.
    #[inline]
    pub fn alloc_bulk(&mut self, batch: &mut crate::PacketBatch, n: usize) -> usize {
        let k = n.min(batch.remaining()).min(self.free.len());
        let rest = self.free.len() - k;
        let meta = PacketMeta::rx_words(0, None);
        let mut fill = batch.fill();
        // The frames `alloc` would hand out, in the same order, each packet
        // written as whole words.
        for &frame in self.free[rest..rest + k].iter().rev() {
            let off = self.fresh_data_offset(frame);
            let ptr = frame_ptr(self.base, self.frame_size, frame);
            // SAFETY: the frame is free and becomes the packet's, inside
            // the region; data_off + 0 fits it.
            let pushed = unsafe {
                fill.push_with(|slot| {
                    Packet::write_words(slot, ptr, self.frame_size, off, 0, frame, self.id, meta)
                })
            };
            debug_assert!(pushed, "room was checked");
        }
        drop(fill);
        self.free.truncate(rest);
        k
    }

    /// Frame `frame` (just taken off the free stack) as an empty packet.
    #[inline(always)]
    fn fresh_packet(&self, frame: u32) -> Packet {
        let off = self.fresh_data_offset(frame);
        self.empty_packet(self.base, self.frame_size, frame, frame, off)
    }

    /// Frame `index` of the region at `base` (frames of `size` bytes) as
    /// an empty packet named `frame`, its data starting at `data_off`.
    #[inline(always)]
    fn empty_packet(
        &self,
        base: NonNull<u8>,
        size: u32,
        index: u32,
        frame: u32,
        data_off: u32,
    ) -> Packet {
        Packet {
            frame_ptr: frame_ptr(base, size, index),
            frame_size: size,
            frame,
            pool_id: self.id,
            data_off,
            len: 0,
            meta: PacketMeta::default(),
        }
    }

    /// Takes a frame (a big one if they need it) and fills it with a copy
    /// of `bytes`. `None` when no frame is free or `bytes` fits none.
    #[inline]
    pub fn alloc_from(&mut self, bytes: &[u8]) -> Option<Packet> {
        let mut pkt = self.alloc_for(bytes.len())?;
        let filled = pkt.fill_from(bytes);
        debug_assert!(filled, "max_packet_len fits every fresh frame");
        Some(pkt)
    }

    /// Copies a packet (bytes and metadata) into a new frame.
    #[inline]
    pub fn clone_packet(&mut self, pkt: &Packet) -> Option<Packet> {
        let mut copy = self.alloc_for(pkt.len())?;
        // Keep the same headroom so later header pushes behave alike.
        copy.data_off = pkt.data_off.min(copy.frame_size - pkt.len);
        copy.len = pkt.len;
        crate::copy::copy_slice(copy.data_mut(), pkt.data());
        copy.meta = pkt.meta;
        Some(copy)
    }

    /// Gives a packet's frame back to the pool.
    ///
    /// # Panics
    /// If the packet belongs to another pool: that is a datapath bug that
    /// would otherwise corrupt both pools.
    #[inline]
    pub fn free(&mut self, pkt: Packet) {
        self.take_back(&pkt);
    }

    /// Puts `pkt`'s frame back on the free stack, after checking it is
    /// one of ours.
    #[inline(always)]
    fn take_back(&mut self, pkt: &Packet) {
        assert_eq!(
            pkt.pool_id, self.id,
            "packet freed to a pool it does not belong to"
        );
        if pkt.frame < self.n_frames {
            self.free.push(pkt.frame);
        } else if pkt.frame == EXTERNAL_FRAME {
            self.take_back_external(pkt);
        } else if let Some(b) = self.big.as_mut() {
            b.free.push(pkt.frame - self.n_frames);
        }
    }

    /// Gives the frames of `pkts` back, for a caller that forgets the
    /// packets right after ([`crate::PacketBatch::free_all`]): no packet
    /// is moved.
    ///
    /// # Panics
    /// As [`PacketPool::free`].
    #[inline]
    pub(crate) fn recycle(&mut self, pkts: &[Packet]) {
        self.free.reserve(pkts.len());
        for pkt in pkts {
            self.take_back(pkt);
        }
    }

    /// Whether `pkt` came from this pool.
    pub fn owns(&self, pkt: &Packet) -> bool {
        pkt.pool_id == self.id
    }
}

/// A page-aligned region of `n_frames` frames of `frame_size` bytes
/// (`n_frames`, `frame_size` >= 1), zeroed or not (untouched pages of an
/// unzeroed region cost no memory until used).
fn alloc_region(
    n_frames: usize,
    frame_size: usize,
    zeroed: bool,
) -> Result<(NonNull<u8>, Layout), PoolError> {
    let bytes = n_frames
        .checked_mul(frame_size)
        .ok_or(PoolError::BadFrameCount(n_frames))?;
    let layout = Layout::from_size_align(bytes, 4096).map_err(|_| PoolError::OutOfMemory)?;
    // SAFETY: the layout has a non-zero size (callers check both counts).
    let raw = unsafe {
        if zeroed {
            alloc::alloc_zeroed(layout)
        } else {
            alloc::alloc(layout)
        }
    };
    Ok((NonNull::new(raw).ok_or(PoolError::OutOfMemory)?, layout))
}

impl Drop for PacketPool {
    fn drop(&mut self) {
        self.external.flush();
        if let Some(b) = self.big.take() {
            if b.free.len() == b.n_frames as usize {
                // SAFETY: allocated with exactly this layout; every big
                // frame is back, so no packet refers to the region.
                unsafe { alloc::dealloc(b.base.as_ptr(), b.layout) };
            }
        }
        if self.free.len() != self.n_frames as usize {
            // Packets still point into the region: leaking it keeps them valid.
            // This happens only when a thread exits with packets in flight.
            return;
        }
        // SAFETY: base was allocated with exactly this layout and no packet
        // refers to the region any more (every frame is back on the free stack).
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) };
    }
}

impl std::fmt::Debug for PacketPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketPool")
            .field("id", &self.id)
            .field("frames", &self.n_frames)
            .field("frame_size", &self.frame_size)
            .field("free", &self.free.len())
            .finish()
    }
}

/// Frame `index` of the region at `base` (frames of `size` bytes). Callers
/// pass an index below their region's frame count.
#[inline(always)]
fn frame_ptr(base: NonNull<u8>, size: u32, index: u32) -> NonNull<u8> {
    // SAFETY: the index is below the region's frame count (callers), so
    // the offset stays inside the region, and a non-null base moved
    // inside its allocation stays non-null.
    unsafe { NonNull::new_unchecked(base.as_ptr().add(index as usize * size as usize)) }
}

/// One packet: exclusive owner of one pool frame, plus metadata.
///
/// Dropping a `Packet` instead of freeing it to its pool loses the frame
/// (the memory stays valid, the frame is just never reused); the datapath
/// always frees explicitly, and debug builds catch leaks in tests through
/// [`PacketPool::available`].
#[repr(C)] // laid out as Packet::write_words writes it
pub struct Packet {
    frame_ptr: NonNull<u8>,
    frame_size: u32,
    data_off: u32,
    len: u32,
    frame: u32,
    pool_id: u32,
    /// Metadata carried with the packet through the pipeline.
    pub meta: PacketMeta,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Packet>() == 64);
    assert!(offset_of!(Packet, frame_ptr) == 0 && offset_of!(Packet, frame_size) == 8);
    assert!(offset_of!(Packet, data_off) == 12 && offset_of!(Packet, len) == 16);
    assert!(offset_of!(Packet, frame) == 20 && offset_of!(Packet, pool_id) == 24);
    assert!(offset_of!(Packet, meta) == 32);
};

impl Packet {
    /// Writes a packet into `slot` as eight word stores (a receive loop's
    /// packet: the fields one by one are twice as many stores, and a
    /// burst's loop is bound by its stores), the metadata given as
    /// [`PacketMeta::rx_words`] makes it.
    ///
    /// # Safety
    /// `slot` is valid for a write of a `Packet` and holds none that is
    /// still owned (it is overwritten, not dropped); the arguments make a
    /// valid packet (`data_off + len <= frame_size`, the frame owned by
    /// the packet written).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) unsafe fn write_words(
        slot: *mut Packet,
        frame_ptr: NonNull<u8>,
        frame_size: u32,
        data_off: u32,
        len: u32,
        frame: u32,
        pool_id: u32,
        meta: [u64; 4],
    ) {
        let w = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
        // SAFETY: slot is valid for 64 bytes (the caller); the layout is
        // the one asserted above, so each word lands on the fields named
        // and every byte written is a valid value of its field (the
        // pointer stored as a pointer, keeping its provenance; meta's
        // bools 0 or 1 as rx_words makes them; the padding at 28 any).
        unsafe {
            std::ptr::addr_of_mut!((*slot).frame_ptr).write(frame_ptr);
            let words = slot.cast::<u64>();
            words.add(1).write(w(frame_size, data_off));
            words.add(2).write(w(len, frame));
            words.add(3).write(u64::from(pool_id));
            words.add(4).cast::<[u64; 4]>().write(meta);
        }
    }
}

// SAFETY: a Packet is the only handle to its frame; sending it to another
// thread moves that exclusive access along with it.
unsafe impl Send for Packet {}

impl Packet {
    /// The packet's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: data_off + len <= frame_size is an invariant kept by every
        // mutator, the frame lies inside the pool region (which outlives all
        // packets, see PacketPool::drop), and this packet owns the frame.
        unsafe {
            std::slice::from_raw_parts(
                self.frame_ptr.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        }
    }

    /// The packet's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in data(); &mut self guarantees no other view is alive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.frame_ptr.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        }
    }

    /// The packet's bytes and its metadata, writable, together (flow-key
    /// extraction reads the one and fills in the other).
    #[inline]
    pub fn data_and_meta_mut(&mut self) -> (&[u8], &mut PacketMeta) {
        // SAFETY: as in data(); the bytes live in the frame, not in `self`,
        // so the slice and the `meta` field do not overlap.
        let data = unsafe {
            std::slice::from_raw_parts(
                self.frame_ptr.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        };
        (data, &mut self.meta)
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the packet has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes free in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.data_off as usize
    }

    /// Bytes free after the data.
    #[inline]
    pub fn tailroom(&self) -> usize {
        (self.frame_size - self.data_off - self.len) as usize
    }

    /// Where the data starts inside the frame (the UMEM descriptor address
    /// is `frame_index * frame_size + data_offset`).
    #[inline]
    pub fn data_offset(&self) -> usize {
        self.data_off as usize
    }

    /// Makes the packet the `len` bytes at `offset` in its frame (where a
    /// device wrote them).
    ///
    /// # Panics
    /// If the range does not fit the frame.
    #[inline]
    pub fn set_data_range(&mut self, offset: usize, len: usize) {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|end| end <= self.frame_size as usize),
            "data range outside the frame"
        );
        self.data_off = offset as u32;
        self.len = len as u32;
    }

    /// Index of the frame in its pool (the UMEM frame number for AF_XDP);
    /// [`EXTERNAL_FRAME`] for a packet in an external buffer.
    #[inline]
    pub fn frame_index(&self) -> u32 {
        self.frame
    }

    /// Sets the length, growing or shrinking at the tail.
    ///
    /// # Panics
    /// If the frame has no room for `len` bytes at the current offset.
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= (self.frame_size - self.data_off) as usize,
            "packet longer than its frame"
        );
        self.len = len as u32;
    }

    /// Makes the packet a copy of `bytes` at its current offset. Returns
    /// false, changing nothing, when they do not fit the frame.
    #[inline]
    pub fn fill_from(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() > (self.frame_size - self.data_off) as usize {
            return false;
        }
        self.len = bytes.len() as u32;
        crate::copy::copy_slice(self.data_mut(), bytes);
        true
    }

    /// Opens `n` bytes at `offset` by moving the bytes before `offset` toward
    /// the headroom (cheap for headers near the front, like VLAN tags).
    /// Returns false, changing nothing, when the headroom is too small or
    /// `offset` is past the end.
    pub fn insert_gap(&mut self, offset: usize, n: usize) -> bool {
        if n > self.headroom() || offset > self.len() {
            return false;
        }
        let old_off = self.data_off as usize;
        let new_off = old_off - n;
        // SAFETY: both ranges lie within this packet's frame: the source is
        // [old_off, old_off + offset) and the destination starts n bytes
        // earlier, which is >= 0 because n <= headroom. copy handles overlap.
        unsafe {
            let base = self.frame_ptr.as_ptr();
            std::ptr::copy(base.add(old_off), base.add(new_off), offset);
        }
        self.data_off = new_off as u32;
        self.len += n as u32;
        true
    }

    /// Removes `n` bytes at `offset` by moving the bytes before it forward
    /// (the reverse of [`insert_gap`](Self::insert_gap)). Returns false,
    /// changing nothing, when the range is outside the packet.
    pub fn remove_range(&mut self, offset: usize, n: usize) -> bool {
        if offset.checked_add(n).is_none_or(|end| end > self.len()) {
            return false;
        }
        let old_off = self.data_off as usize;
        // SAFETY: source [old_off, old_off + offset) and destination
        // [old_off + n, old_off + n + offset) lie within the packet's bytes,
        // because offset + n <= len. copy handles overlap.
        unsafe {
            let base = self.frame_ptr.as_ptr();
            std::ptr::copy(base.add(old_off), base.add(old_off + n), offset);
        }
        self.data_off += n as u32;
        self.len -= n as u32;
        true
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("frame", &self.frame)
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

#[cfg(test)]
mod tests;
