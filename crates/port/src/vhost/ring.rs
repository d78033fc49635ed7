//! Frames in and out of a guest's descriptor chains (split virtqueues).
//!
//! A guest's transmit chain holds a virtio-net header and one frame, read
//! out in one copy into a pool frame ([`read_chain`]); a frame for the
//! guest is written, header first, into one or (with `MRG_RXBUF`) several
//! receive chains ([`write_frame`]). Every guest address goes through
//! `vm-memory`'s checked accessors, so a descriptor pointing outside the
//! guest's memory is an error here, never a read or write elsewhere; a
//! chain cannot loop (`virtio-queue` stops after as many descriptors as the
//! table holds).

use arrayvec::ArrayVec;
use virtio_queue::desc::split::Descriptor;
use virtio_queue::{AvailIter, Queue, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryBackend};

/// The longest virtio-net header (VERSION_1 or MRG_RXBUF: with
/// `num_buffers`).
pub const MAX_HDR_LEN: usize = 12;

/// At most this many receive chains carry one frame (a 64 KiB super-frame
/// in buffers of 1,518 bytes takes 44).
pub const MAX_CHAINS_PER_FRAME: usize = 64;

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
            ChainError::TooBig => write!(f, "a frame is larger than its buffer"),
        }
    }
}

/// Copies guest memory at `addr` into `dst`: one bounds-checked slice of
/// the region it lies in (the common case), else `vm-memory`'s general
/// path for a range across regions.
#[inline]
fn read_guest<M: GuestMemoryBackend>(
    mem: &M,
    addr: GuestAddress,
    dst: &mut [u8],
) -> Result<(), ChainError> {
    if let Ok(s) = mem.get_slice(addr, dst.len()) {
        s.copy_to(dst);
        return Ok(());
    }
    mem.read_slice(dst, addr)
        .map_err(|_| ChainError::BadAddress(addr.0))
}

/// Copies `src` into guest memory at `addr` (as [`read_guest`]).
#[inline]
fn write_guest<M: GuestMemoryBackend>(
    mem: &M,
    addr: GuestAddress,
    src: &[u8],
) -> Result<(), ChainError> {
    if let Ok(s) = mem.get_slice(addr, src.len()) {
        s.copy_from(src);
        return Ok(());
    }
    mem.write_slice(src, addr)
        .map_err(|_| ChainError::BadAddress(addr.0))
}

/// The total length of a chain's descriptors (those the device reads when
/// `writable` is false, else those it writes), or a fault.
pub fn chain_len(
    chain: impl Iterator<Item = Descriptor>,
    writable: bool,
) -> Result<u64, ChainError> {
    let mut total = 0u64;
    for d in chain {
        if d.is_write_only() != writable {
            return Err(ChainError::WrongDirection);
        }
        total += u64::from(d.len());
    }
    Ok(total)
}

/// Copies a transmit chain out: the first `hdr.len()` bytes into `hdr`, the
/// rest into `buf`. Returns the frame's length. `buf` must hold the
/// chain's length less the header ([`chain_len`]); a longer chain is
/// [`ChainError::TooBig`].
pub fn read_chain<M: GuestMemoryBackend>(
    mem: &M,
    chain: impl Iterator<Item = Descriptor>,
    hdr: &mut [u8],
    buf: &mut [u8],
) -> Result<usize, ChainError> {
    let (mut h, mut n) = (0usize, 0usize);
    for d in chain {
        if d.is_write_only() {
            return Err(ChainError::WrongDirection);
        }
        let mut addr = d.addr();
        let mut len = d.len() as usize;
        if h < hdr.len() {
            let take = len.min(hdr.len() - h);
            read_guest(mem, addr, &mut hdr[h..h + take])?;
            h += take;
            len -= take;
            addr = addr.unchecked_add(take as u64);
        }
        if len == 0 {
            continue;
        }
        let Some(dst) = buf.get_mut(n..n + len) else {
            return Err(ChainError::TooBig);
        };
        read_guest(mem, addr, dst)?;
        n += len;
    }
    if h < hdr.len() {
        return Err(ChainError::NoHeader);
    }
    Ok(n)
}

/// The receive chains frames went into: (head, bytes written).
pub type Used = ArrayVec<(u16, u32), USED_PER_BURST>;

/// At most this many receive chains are filled per burst (the used ring
/// is written once for them all).
pub const USED_PER_BURST: usize = 256;

/// Writes `hdr` then `frame` into the guest's receive chains taken from
/// `avail` (one look at the guest's ring index for a whole burst), as
/// many as it takes when `mergeable` (the header's `num_buffers`, bytes
/// 10..12, is set to their count), else into one. Appends the chains it
/// used to `used` (the caller adds them to the used ring) and returns
/// true. On an error, or `Ok(false)` (not enough chains available now, or
/// no room left in `used`), every chain it took is handed back.
pub fn write_frame<M: GuestMemoryBackend>(
    avail: &mut AvailIter<'_, &M>,
    mem: &M,
    hdr: &[u8],
    frame: &[u8],
    mergeable: bool,
    used: &mut Used,
) -> Result<bool, ChainError> {
    let total = (hdr.len() + frame.len()) as u64;
    let mut chains: ArrayVec<_, MAX_CHAINS_PER_FRAME> = ArrayVec::new();
    let mut room = 0u64;
    let give_back = |avail: &mut AvailIter<'_, &M>, n: usize| {
        for _ in 0..n {
            avail.go_to_previous_position();
        }
    };
    while room < total {
        if chains.is_full() || (!mergeable && !chains.is_empty()) {
            give_back(avail, chains.len());
            return Err(ChainError::TooBig);
        }
        if used.len() + chains.len() == used.capacity() {
            give_back(avail, chains.len());
            return Ok(false);
        }
        let Some(chain) = avail.next() else {
            give_back(avail, chains.len());
            return Ok(false);
        };
        match chain_len(chain.clone(), true) {
            Ok(n) => room += n,
            Err(e) => {
                give_back(avail, chains.len() + 1);
                return Err(e);
            }
        }
        chains.push(chain);
    }
    let mut h = [0u8; MAX_HDR_LEN];
    h[..hdr.len()].copy_from_slice(hdr);
    if hdr.len() == MAX_HDR_LEN {
        h[10..12].copy_from_slice(&(chains.len() as u16).to_le_bytes());
    }
    let hdr = &h[..hdr.len()];
    let n_chains = chains.len();
    let first = used.len();
    let mut done = 0usize;
    // By reference: the chains stay where they are (a move would copy
    // the whole array for every frame).
    for chain in chains.iter() {
        let head = chain.head_index();
        let start = done;
        for d in chain.clone() {
            let mut addr = d.addr();
            let mut left = d.len() as usize;
            while left > 0 && done < total as usize {
                let src = if done < hdr.len() {
                    &hdr[done..]
                } else {
                    &frame[done - hdr.len()..]
                };
                let take = left.min(src.len());
                if let Err(e) = write_guest(mem, addr, &src[..take]) {
                    give_back(avail, n_chains);
                    used.truncate(first);
                    return Err(e);
                }
                done += take;
                left -= take;
                addr = addr.unchecked_add(take as u64);
            }
        }
        used.push((head, (done - start) as u32));
    }
    Ok(true)
}

/// Whether the guest wants an interrupt for what was just added to the
/// used ring: by `used_event` with `EVENT_IDX`, else unless its available
/// ring's flags say `NO_INTERRUPT` (which `virtio-queue` does not read).
pub fn wants_interrupt<M: GuestMemoryBackend>(queue: &mut Queue, mem: &M) -> bool {
    if queue.event_idx_enabled() {
        return queue.needs_notification(mem).unwrap_or(true);
    }
    const NO_INTERRUPT: u16 = 1;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    mem.load::<u16>(
        GuestAddress(queue.avail_ring()),
        std::sync::atomic::Ordering::Acquire,
    )
    .map_or(true, |f| u16::from_le(f) & NO_INTERRUPT == 0)
}

#[cfg(test)]
mod tests {
    //! Against a model guest: a memory of 1 MiB with one split ring whose
    //! descriptors, available ring and buffers the test writes itself.
    use super::*;
    use proptest::prelude::*;
    use virtio_queue::QueueOwnedT;
    use vm_memory::{GuestAddress, GuestMemoryMmap};

    const SIZE: u16 = 16;
    const DESC: u64 = 0x0;
    const AVAIL: u64 = 0x1000;
    const USED: u64 = 0x2000;
    const DATA: u64 = 0x10000;
    const MEM: usize = 1 << 20;
    const NEXT: u16 = 1;
    const WRITE: u16 = 2;
    const INDIRECT: u16 = 4;

    /// A transmit chain read out: (header, frame), or what was wrong.
    type Read = Option<Result<(Vec<u8>, Vec<u8>), ChainError>>;

    struct Guest {
        mem: GuestMemoryMmap,
        queue: Queue,
        next_desc: u16,
        avail: u16,
        data: u64,
    }

    impl Guest {
        fn new() -> Guest {
            let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).unwrap();
            let mut queue = Queue::new(SIZE).unwrap();
            queue.set_size(SIZE);
            queue.set_desc_table_address(Some(DESC as u32), Some(0));
            queue.set_avail_ring_address(Some(AVAIL as u32), Some(0));
            queue.set_used_ring_address(Some(USED as u32), Some(0));
            queue.set_ready(true);
            assert!(queue.is_valid(&mem));
            Guest {
                mem,
                queue,
                next_desc: 0,
                avail: 0,
                data: DATA,
            }
        }

        fn desc_at(&self, table: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
            let mut d = [0u8; 16];
            d[0..8].copy_from_slice(&addr.to_le_bytes());
            d[8..12].copy_from_slice(&len.to_le_bytes());
            d[12..14].copy_from_slice(&flags.to_le_bytes());
            d[14..16].copy_from_slice(&next.to_le_bytes());
            self.mem
                .write_slice(&d, GuestAddress(table + 16 * u64::from(i)))
                .unwrap();
        }

        /// Makes the chain head `head` available.
        fn offer(&mut self, head: u16) {
            let slot = AVAIL + 4 + 2 * u64::from(self.avail % SIZE);
            self.mem
                .write_obj(head.to_le(), GuestAddress(slot))
                .unwrap();
            self.avail = self.avail.wrapping_add(1);
            self.mem
                .write_obj(self.avail.to_le(), GuestAddress(AVAIL + 2))
                .unwrap();
        }

        /// Puts `bytes` in fresh buffers cut at `cuts` and offers them as
        /// one chain (through an indirect table when `indirect`).
        fn chain_of(&mut self, bytes: &[u8], cuts: &[usize], flags: u16, indirect: bool) -> u16 {
            let mut pieces = Vec::new();
            let mut at = 0;
            for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
                let c = c.clamp(at, bytes.len());
                let addr = self.data;
                self.mem
                    .write_slice(&bytes[at..c], GuestAddress(addr))
                    .unwrap();
                self.data += (c - at) as u64 + 64;
                pieces.push((addr, (c - at) as u32));
                at = c;
            }
            let n = pieces.len() as u16;
            let head = self.next_desc;
            let (table, first) = if indirect {
                let t = self.data;
                self.data += 16 * u64::from(n) + 64;
                self.desc_at(DESC, head, t, 16 * u32::from(n), INDIRECT, 0);
                self.next_desc += 1;
                (t, 0)
            } else {
                self.next_desc += n;
                (DESC, head)
            };
            for (k, (addr, len)) in pieces.iter().enumerate() {
                let k = k as u16;
                let last = k + 1 == n;
                let f = flags | if last { 0 } else { NEXT };
                self.desc_at(table, first + k, *addr, *len, f, first + k + 1);
            }
            self.offer(head);
            head
        }

        fn used_len(&self, slot: u16) -> (u16, u32) {
            let at = USED + 4 + 8 * u64::from(slot);
            let id: u32 = self.mem.read_obj(GuestAddress(at)).unwrap();
            let len: u32 = self.mem.read_obj(GuestAddress(at + 4)).unwrap();
            (id as u16, len)
        }

        /// The bytes the device wrote into the chain with head `head`.
        fn written(&self, head: u16, len: u32) -> Vec<u8> {
            let mut out = Vec::new();
            let mut i = head;
            loop {
                let mut d = [0u8; 16];
                self.mem
                    .read_slice(&mut d, GuestAddress(DESC + 16 * u64::from(i)))
                    .unwrap();
                let addr = u64::from_le_bytes(d[0..8].try_into().unwrap());
                let dlen = u32::from_le_bytes(d[8..12].try_into().unwrap());
                let take = dlen.min(len - out.len() as u32) as usize;
                let mut b = vec![0u8; take];
                self.mem.read_slice(&mut b, GuestAddress(addr)).unwrap();
                out.extend(b);
                let flags = u16::from_le_bytes([d[12], d[13]]);
                if flags & NEXT == 0 || out.len() as u32 == len {
                    return out;
                }
                i = u16::from_le_bytes([d[14], d[15]]);
            }
        }

        /// Reads the next available chain as a transmit chain.
        fn read_next(&mut self, hdr_len: usize) -> Read {
            let chain = self.queue.pop_descriptor_chain(&self.mem)?;
            let total = match chain_len(chain.clone(), false) {
                Ok(t) => t as usize,
                Err(e) => return Some(Err(e)),
            };
            let mut hdr = vec![0u8; hdr_len];
            let mut buf = vec![0u8; total.saturating_sub(hdr_len)];
            Some(read_chain(&self.mem, chain, &mut hdr, &mut buf).map(|n| {
                buf.truncate(n);
                (hdr, buf)
            }))
        }
    }

    proptest! {
        #[test]
        fn a_transmit_chain_reads_back_as_written(
            frame in proptest::collection::vec(any::<u8>(), 0..3000),
            cuts in proptest::collection::vec(0usize..3100, 0..4),
            indirect in any::<bool>(),
        ) {
            let mut g = Guest::new();
            let hdr: Vec<u8> = (1..=12).collect();
            let mut bytes = hdr.clone();
            bytes.extend(&frame);
            let mut cuts = cuts;
            cuts.sort_unstable();
            g.chain_of(&bytes, &cuts, 0, indirect);
            let (h, f) = g.read_next(12).unwrap().unwrap();
            prop_assert_eq!(h, hdr);
            prop_assert_eq!(f, frame);
        }

        #[test]
        fn a_frame_spans_receive_buffers_with_num_buffers_set(
            frame in proptest::collection::vec(any::<u8>(), 1..12000),
            // Two descriptors a chain: at most 8 chains in a table of 16.
            sizes in proptest::collection::vec(1usize..2048, 1..=8),
            mergeable in any::<bool>(),
        ) {
            let mut g = Guest::new();
            let mut heads = Vec::new();
            for s in &sizes {
                heads.push(g.chain_of(&vec![0u8; *s], &[*s / 3], WRITE, false));
            }
            let hdr = [0u8; MAX_HDR_LEN];
            let room: usize = if mergeable { sizes.iter().sum() } else { sizes[0] };
            let mut chains = Used::new();
            let got = {
                let mut avail = g.queue.iter(&g.mem).unwrap();
                write_frame(&mut avail, &g.mem, &hdr, &frame, mergeable, &mut chains)
            };
            let need = frame.len() + MAX_HDR_LEN;
            if need > room {
                if mergeable {
                    prop_assert_eq!(got, Ok(false));
                } else {
                    prop_assert_eq!(got, Err(ChainError::TooBig));
                }
                // Every chain taken was given back.
                prop_assert_eq!(g.queue.next_avail(), 0);
                return Ok(());
            }
            prop_assert_eq!(got, Ok(true));
            let mut bytes = Vec::new();
            for (k, (head, len)) in chains.iter().enumerate() {
                prop_assert_eq!(*head, heads[k]);
                g.queue.add_used(&g.mem, *head, *len).unwrap();
                let (id, l) = g.used_len(k as u16);
                prop_assert_eq!((id, l), (*head, *len));
                bytes.extend(g.written(*head, *len));
            }
            prop_assert_eq!(&bytes[MAX_HDR_LEN..], &frame[..]);
            let n = u16::from_le_bytes([bytes[10], bytes[11]]);
            prop_assert_eq!(usize::from(n), chains.len());
        }

        /// Whatever a guest writes in its ring, reading and writing
        /// chains ends (no loop), and never touches memory outside it.
        #[test]
        fn a_hostile_ring_is_an_error_never_a_crash(
            table in proptest::collection::vec(any::<u8>(), 16 * SIZE as usize),
            heads in proptest::collection::vec(any::<u16>(), 1..8),
            addr_bits in proptest::collection::vec(0u64..3, 16),
        ) {
            let mut g = Guest::new();
            g.mem.write_slice(&table, GuestAddress(DESC)).unwrap();
            // Bend some addresses into memory so that chains get somewhere.
            for (i, b) in addr_bits.iter().enumerate() {
                let at = GuestAddress(DESC + 16 * i as u64);
                let a: u64 = g.mem.read_obj(at).unwrap();
                let a = match b { 0 => a, 1 => DATA + (a % (MEM as u64 - DATA)), _ => u64::MAX - (a & 0xff) };
                g.mem.write_obj(a, at).unwrap();
                // Lengths up to 64 KiB so that buffers stay testable.
                let lat = GuestAddress(DESC + 16 * i as u64 + 8);
                let l: u32 = g.mem.read_obj(lat).unwrap();
                g.mem.write_obj(l % 65536, lat).unwrap();
            }
            for h in &heads {
                g.offer(*h);
            }
            for _ in 0..heads.len() {
                match g.read_next(12) {
                    None => break,
                    Some(Ok((_, f))) => prop_assert!(f.len() <= 16 * 65536),
                    Some(Err(_)) => {}
                }
            }
            let mut g2 = Guest::new();
            g2.mem.write_slice(&table, GuestAddress(DESC)).unwrap();
            for h in &heads {
                g2.offer(*h);
            }
            let frame = vec![0xabu8; 3000];
            let mut used = Used::new();
            for _ in 0..heads.len() {
                if let Ok(mut avail) = g2.queue.iter(&g2.mem) {
                    let _ = write_frame(&mut avail, &g2.mem, &[0u8; 12], &frame, true, &mut used);
                }
            }
        }
    }

    #[test]
    fn faults_are_named() {
        // A buffer outside the guest's memory.
        let mut g = Guest::new();
        g.desc_at(DESC, 0, MEM as u64 + 4096, 100, 0, 0);
        g.offer(0);
        assert!(matches!(
            g.read_next(12),
            Some(Err(ChainError::BadAddress(_)))
        ));
        // A device-writable buffer in a transmit chain.
        let mut g = Guest::new();
        g.chain_of(&[0u8; 64], &[], WRITE, false);
        assert_eq!(g.read_next(12), Some(Err(ChainError::WrongDirection)));
        // Shorter than the header.
        let mut g = Guest::new();
        g.chain_of(&[0u8; 8], &[], 0, false);
        assert_eq!(g.read_next(12), Some(Err(ChainError::NoHeader)));
        // A chain that loops on itself ends after as many descriptors as
        // the table holds.
        let mut g = Guest::new();
        g.desc_at(DESC, 0, DATA, 100, NEXT, 0);
        g.offer(0);
        let (_, f) = g.read_next(12).unwrap().unwrap();
        assert_eq!(f.len(), 100 * SIZE as usize - 12);
        // A read-only buffer in a receive chain: refused, and given back.
        let mut g = Guest::new();
        g.chain_of(&[0u8; 2048], &[], 0, false);
        let r = {
            let mut avail = g.queue.iter(&g.mem).unwrap();
            let mut used = Used::new();
            write_frame(&mut avail, &g.mem, &[0u8; 12], &[1u8; 60], true, &mut used)
        };
        assert_eq!(r, Err(ChainError::WrongDirection));
        assert_eq!(g.queue.next_avail(), 0);
    }
}
