//! Frames in and out of a guest's descriptor chains.
//!
//! A guest's transmit chain holds a virtio-net header and one frame, read
//! out in one copy into a pool frame ([`read_chain`]); a frame for the
//! guest is written, header first, into one or (with `MRG_RXBUF`) several
//! receive chains ([`write_frame`]). The common shape, one buffer per
//! chain, has a short way each direction: [`read_single`], and
//! [`reserve_single`] then [`write_single`] (a burst's chains taken and
//! their lines asked for before any frame is written); anything else
//! takes the general way. Every guest address is checked by
//! [`GuestMap`](super::guest::GuestMap) before a byte moves, so a
//! descriptor pointing outside the guest's memory is an error here, never
//! a read or write elsewhere; a looping chain is an error too
//! ([`split`](super::split)).

use arrayvec::ArrayVec;

pub use super::net_hdr::NetHdr;
pub use super::split::ChainError;
use super::split::{Avail, SplitRing};

/// The longest virtio-net header (VERSION_1 or MRG_RXBUF: with
/// `num_buffers`).
pub const MAX_HDR_LEN: usize = 12;

/// At most this many receive chains carry one frame (a 64 KiB super-frame
/// in buffers of 1,518 bytes takes 44).
pub const MAX_CHAINS_PER_FRAME: usize = 64;

/// The total length of the chain at `head`'s descriptors (those the
/// device reads when `writable` is false, else those it writes), or a
/// fault.
pub fn chain_len(ring: &SplitRing, head: u16, writable: bool) -> Result<u64, ChainError> {
    let mut total = 0u64;
    for d in ring.chain(head) {
        let d = d?;
        if d.write != writable {
            return Err(ChainError::WrongDirection);
        }
        total += u64::from(d.len);
    }
    Ok(total)
}

/// Copies the transmit chain at `head` out: the first `hdr.len()` bytes
/// into `hdr`, the rest into `buf`. Returns the frame's length. `buf`
/// must hold the chain's length less the header ([`chain_len`]); a longer
/// chain is [`ChainError::TooBig`].
pub fn read_chain(
    ring: &SplitRing,
    head: u16,
    hdr: &mut [u8],
    buf: &mut [u8],
) -> Result<usize, ChainError> {
    let map = ring.map();
    let (mut h, mut n) = (0usize, 0usize);
    for d in ring.chain(head) {
        let d = d?;
        if d.write {
            return Err(ChainError::WrongDirection);
        }
        let mut addr = d.addr;
        let mut len = d.len as usize;
        if h < hdr.len() {
            let take = len.min(hdr.len() - h);
            if !map.read(addr, &mut hdr[h..h + take]) {
                return Err(ChainError::BadAddress(addr));
            }
            h += take;
            len -= take;
            addr = addr.wrapping_add(take as u64);
        }
        if len == 0 {
            continue;
        }
        let Some(dst) = buf.get_mut(n..n + len) else {
            return Err(ChainError::TooBig);
        };
        if !map.read(addr, dst) {
            return Err(ChainError::BadAddress(addr));
        }
        n += len;
    }
    if h < hdr.len() {
        return Err(ChainError::NoHeader);
    }
    Ok(n)
}

/// Reads the transmit chain at `head` when it is one readable buffer
/// holding a header and a frame that fits `buf` (as drivers lay out
/// frames that fit their buffers): the header into `hdr`, the frame into
/// `buf`; its length. `None` for any other chain, nothing counted: the
/// caller then reads it with [`read_chain`], which takes every other
/// layout and names every fault.
#[inline]
pub fn read_single(ring: &SplitRing, head: u16, hdr: &mut [u8], buf: &mut [u8]) -> Option<usize> {
    let d = ring.single(head)?;
    let len = (d.len as usize).checked_sub(hdr.len())?;
    if d.write || len > buf.len() {
        return None;
    }
    let map = ring.map();
    let at = d.addr.wrapping_add(hdr.len() as u64);
    (map.read(d.addr, hdr) && map.read(at, &mut buf[..len])).then_some(len)
}

/// Writes `hdr` then `frame` into the guest's receive chains taken from
/// `avail`, as many as it takes when `mergeable` (the header's
/// `num_buffers`, bytes 10..12, is set to their count), else into one,
/// and writes their used entries (published by the caller, once per
/// burst). Returns true. On an error, or `Ok(false)` (not enough chains
/// available now), every chain it took is handed back to `avail` and no
/// used entry stays written.
pub fn write_frame(
    ring: &mut SplitRing,
    avail: &mut Avail,
    hdr: NetHdr,
    frame: &[u8],
    mergeable: bool,
) -> Result<bool, ChainError> {
    let total = (hdr.len() + frame.len()) as u64;
    let start = *avail;
    let mut heads: ArrayVec<u16, MAX_CHAINS_PER_FRAME> = ArrayVec::new();
    let mut room = 0u64;
    while room < total {
        if heads.is_full() || (!mergeable && !heads.is_empty()) {
            *avail = start;
            return Err(ChainError::TooBig);
        }
        let head = match ring.next_head(avail) {
            None => {
                *avail = start;
                return Ok(false);
            }
            Some(Ok(h)) => h,
            Some(Err(e)) => {
                *avail = start;
                return Err(e);
            }
        };
        match chain_len(ring, head, true) {
            Ok(n) => room += n,
            Err(e) => {
                *avail = start;
                return Err(e);
            }
        }
        heads.push(head);
    }
    let hdr = hdr.with_num_buffers(heads.len() as u16);
    let hdr_len = hdr.len();
    let mut done = 0usize;
    let mut pushed = 0u16;
    let mut fault = None;
    'chains: for &head in &heads {
        let start_len = done;
        for d in ring.chain(head) {
            // Checked by `chain_len` a moment ago; a guest that changed
            // the chain since is caught again here.
            let d = match d {
                Ok(d) if d.write => d,
                Ok(_) => {
                    fault = Some(ChainError::WrongDirection);
                    break 'chains;
                }
                Err(e) => {
                    fault = Some(e);
                    break 'chains;
                }
            };
            let mut addr = d.addr;
            let mut left = d.len as usize;
            if done == 0 && left >= hdr_len {
                // The whole header in the first buffer (as every driver
                // lays it out): two stores.
                let (lo, hi) = hdr.words();
                if !ring.map().write_header(addr, lo, hi, hdr_len) {
                    fault = Some(ChainError::BadAddress(addr));
                    break 'chains;
                }
                done = hdr_len;
                left -= hdr_len;
                addr = addr.wrapping_add(hdr_len as u64);
            }
            while left > 0 && done < total as usize {
                let bytes;
                let src = if done < hdr_len {
                    bytes = hdr.to_bytes();
                    &bytes[done..hdr_len]
                } else {
                    &frame[done - hdr_len..]
                };
                let take = left.min(src.len());
                if !ring.map().write(addr, &src[..take]) {
                    fault = Some(ChainError::BadAddress(addr));
                    break 'chains;
                }
                done += take;
                left -= take;
                addr = addr.wrapping_add(take as u64);
            }
        }
        ring.push_used(head, (done - start_len) as u32);
        pushed += 1;
    }
    if fault.is_none() && done < total as usize {
        // Shorter than `chain_len` found: the guest changed it meanwhile.
        fault = Some(ChainError::Changed);
    }
    if let Some(e) = fault {
        ring.unpush(pushed);
        *avail = start;
        return Err(e);
    }
    Ok(true)
}

/// A receive chain taken for one frame that its single buffer holds
/// whole with its header ([`reserve_single`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    head: u16,
    /// The buffer's guest address.
    addr: u64,
}

/// Takes the next available chain for a frame of `len` bytes (header
/// included) when that chain is one writable buffer of at least `len`
/// bytes inside the guest's memory (every driver's receive buffers, for
/// frames up to their size), and asks for the buffer's first lines to be
/// made writable here. `None`, taking nothing, for any other chain, none
/// available, or a fault: [`write_frame`] then writes the frame, spanning
/// buffers, dropping it or naming the fault.
///
/// A burst reserves the slots of a run of frames first, then writes them
/// ([`write_single`]): the buffers' lines, last written by the guest's
/// core, are then on their way together instead of one frame's stores
/// waiting for them while the next frame's descriptors wait behind.
#[inline]
pub fn reserve_single(ring: &SplitRing, avail: &mut Avail, len: usize) -> Option<Slot> {
    let mut a = *avail;
    let head = ring.next_head(&mut a)?.ok()?;
    let d = ring.single(head)?;
    if !d.write || (d.len as usize) < len {
        return None;
    }
    let buf = ring.map().host(d.addr, len)?;
    // The buffer was last written by the guest's core: a store to it
    // would otherwise wait for its line in the store buffer, every later
    // store behind it. The first lines (a header and a short frame) are
    // what a burst of small frames waits for.
    sluice_packet::prefetch::write_lines(buf, len.min(192));
    *avail = a;
    Some(Slot { head, addr: d.addr })
}

/// Writes `hdr` (its `num_buffers` 1) and `frame` into the buffer of
/// `slot` and adds its used entry, as [`write_frame`] would have for the
/// same chain. `slot` must have been reserved from this ring and
/// `frame` be no longer than reserved for; an address outside the
/// guest's memory is an error all the same.
#[inline]
pub fn write_single(
    ring: &mut SplitRing,
    slot: Slot,
    hdr: NetHdr,
    frame: &[u8],
) -> Result<(), ChainError> {
    let hdr = hdr.with_num_buffers(1);
    let (lo, hi) = hdr.words();
    let at = slot.addr.wrapping_add(hdr.len() as u64);
    // The map is the ring's for its life: what `reserve_single` found
    // inside the guest's memory still is; checked again all the same.
    if !ring.map().write_header(slot.addr, lo, hi, hdr.len()) || !ring.map().write(at, frame) {
        return Err(ChainError::BadAddress(slot.addr));
    }
    ring.push_used(slot.head, (hdr.len() + frame.len()) as u32);
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Against a model guest: a memory of 1 MiB with one split ring whose
    //! descriptors, available ring and buffers the test writes itself.
    use super::super::guest::GuestMap;
    use super::super::split::RingAddrs;
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

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
        mem: Arc<GuestMemoryMmap>,
        ring: SplitRing,
        next_desc: u16,
        avail: u16,
        data: u64,
    }

    impl Guest {
        fn new() -> Guest {
            let mem =
                Arc::new(GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).unwrap());
            let addrs = RingAddrs {
                size: SIZE,
                desc: DESC,
                avail: AVAIL,
                used: USED,
            };
            let ring = SplitRing::new(GuestMap::new(mem.clone()), &addrs, 0, 0, false).unwrap();
            Guest {
                mem,
                ring,
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
            let mut avail = match self.ring.avail() {
                Ok(a) => a,
                Err(e) => return Some(Err(e)),
            };
            let head = match self.ring.next_head(&mut avail)? {
                Ok(h) => h,
                Err(e) => return Some(Err(e)),
            };
            self.ring.consume(&avail);
            let total = match chain_len(&self.ring, head, false) {
                Ok(t) => t as usize,
                Err(e) => return Some(Err(e)),
            };
            let mut hdr = vec![0u8; hdr_len];
            let mut buf = vec![0u8; total.saturating_sub(hdr_len)];
            Some(read_chain(&self.ring, head, &mut hdr, &mut buf).map(|n| {
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
            // The header's bytes, and a legacy 10-byte one (no MRG_RXBUF).
            hdr_bytes in proptest::array::uniform12(any::<u8>()),
            short in any::<bool>(),
        ) {
            let mut g = Guest::new();
            let mut heads = Vec::new();
            for s in &sizes {
                // The first buffer may be shorter than the header.
                heads.push(g.chain_of(&vec![0u8; *s], &[*s / 3], WRITE, false));
            }
            let hdr_len = if short && !mergeable { 10 } else { MAX_HDR_LEN };
            let hdr = NetHdr::new(&hdr_bytes, hdr_len);
            let room: usize = if mergeable { sizes.iter().sum() } else { sizes[0] };
            let mut avail = g.ring.avail().unwrap();
            let got = write_frame(&mut g.ring, &mut avail, hdr, &frame, mergeable);
            let need = frame.len() + hdr_len;
            if need > room {
                if mergeable {
                    prop_assert_eq!(got, Ok(false));
                } else {
                    prop_assert_eq!(got, Err(ChainError::TooBig));
                }
                // Every chain taken was given back, no used entry written.
                prop_assert_eq!(avail.len(), sizes.len() as u16);
                prop_assert_eq!(g.ring.next_used(), 0);
                return Ok(());
            }
            prop_assert_eq!(got, Ok(true));
            g.ring.consume(&avail);
            g.ring.publish();
            let used: u16 = g.mem.read_obj(GuestAddress(USED + 2)).unwrap();
            prop_assert_eq!(used, g.ring.next_used());
            let mut bytes = Vec::new();
            for k in 0..used {
                let (id, l) = g.used_len(k);
                prop_assert_eq!(id, heads[usize::from(k)]);
                bytes.extend(g.written(id, l));
            }
            prop_assert_eq!(&bytes[hdr_len..], &frame[..]);
            prop_assert_eq!(&bytes[..10], &hdr_bytes[..10]);
            if hdr_len == MAX_HDR_LEN {
                let n = u16::from_le_bytes([bytes[10], bytes[11]]);
                prop_assert_eq!(n, used);
            }
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
            for _ in 0..heads.len() {
                if let Ok(mut avail) = g2.ring.avail() {
                    if let Ok(true) = write_frame(&mut g2.ring, &mut avail, NetHdr::zero(12), &frame, true) {
                        g2.ring.consume(&avail);
                    }
                }
            }
            g2.ring.publish();
        }
    }

    /// The used index the guest sees.
    fn used_idx(g: &Guest) -> u16 {
        g.mem.read_obj(GuestAddress(USED + 2)).unwrap()
    }

    #[test]
    fn used_entries_are_seen_only_when_published_and_in_order() {
        let mut g = Guest::new();
        let mut heads = Vec::new();
        for _ in 0..3 {
            heads.push(g.chain_of(&[0u8; 256], &[], WRITE, false));
        }
        let mut avail = g.ring.avail().unwrap();
        for n in 0..3u8 {
            let frame = vec![n; 60];
            assert_eq!(
                write_frame(&mut g.ring, &mut avail, NetHdr::zero(12), &frame, true),
                Ok(true)
            );
        }
        g.ring.consume(&avail);
        assert_eq!(used_idx(&g), 0, "nothing is seen before the publish");
        g.ring.publish();
        assert_eq!(used_idx(&g), 3);
        for (k, h) in heads.iter().enumerate() {
            assert_eq!(g.used_len(k as u16), (*h, 72));
            assert_eq!(g.written(*h, 72)[12..], [k as u8; 60]);
        }
        // Taken back before a publish: never seen.
        g.ring.push_used(9, 1);
        g.ring.unpush(1);
        g.ring.publish();
        assert_eq!(used_idx(&g), 3);
    }

    #[test]
    fn interrupts_follow_the_guests_flag_or_its_used_event() {
        let publish_one = |g: &mut Guest| {
            g.ring.push_used(0, 0);
            g.ring.publish();
        };
        // Without EVENT_IDX: unless the guest set NO_INTERRUPT; never for
        // nothing new.
        let mut g = Guest::new();
        assert!(!g.ring.wants_interrupt(), "nothing was used");
        publish_one(&mut g);
        assert!(g.ring.wants_interrupt());
        assert!(!g.ring.wants_interrupt(), "told already");
        g.mem.write_obj(1u16.to_le(), GuestAddress(AVAIL)).unwrap();
        publish_one(&mut g);
        assert!(!g.ring.wants_interrupt(), "NO_INTERRUPT");
        // With EVENT_IDX: when the used index passes the guest's
        // used_event (virtio's vring_need_event).
        let mut g = Guest::new();
        g.ring.set_event_idx(true);
        let used_event = GuestAddress(AVAIL + 4 + 2 * u64::from(SIZE));
        g.mem.write_obj(2u16.to_le(), used_event).unwrap();
        publish_one(&mut g); // used 1: event 2 not reached
        assert!(!g.ring.wants_interrupt());
        publish_one(&mut g); // used 2
        assert!(!g.ring.wants_interrupt());
        publish_one(&mut g); // used 3: passed entry 2
        assert!(g.ring.wants_interrupt());
        publish_one(&mut g);
        publish_one(&mut g); // used 5; event still 2
        assert!(!g.ring.wants_interrupt());
    }

    #[test]
    fn kicks_are_turned_off_through_the_used_flags_without_event_idx() {
        let mut g = Guest::new();
        g.ring.no_kicks();
        let flags: u16 = g.mem.read_obj(GuestAddress(USED)).unwrap();
        assert_eq!(flags, 1);
    }

    #[test]
    fn a_ring_outside_memory_or_misaligned_does_not_start() {
        let map = || {
            GuestMap::new(Arc::new(
                GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).unwrap(),
            ))
        };
        let at = |desc, avail, used, size| RingAddrs {
            size,
            desc,
            avail,
            used,
        };
        for (a, why) in [
            (
                at(DESC, AVAIL, MEM as u64 - 8, SIZE),
                "used ring past the end",
            ),
            (at(MEM as u64, AVAIL, USED, SIZE), "table past the end"),
            (at(DESC + 8, AVAIL, USED, SIZE), "table misaligned"),
            (at(DESC, AVAIL + 1, USED, SIZE), "avail misaligned"),
            (at(DESC, AVAIL, USED + 2, SIZE), "used misaligned"),
            (at(DESC, AVAIL, USED, 12), "not a power of two"),
            (at(DESC, AVAIL, USED, 0), "empty"),
        ] {
            assert!(SplitRing::new(map(), &a, 0, 0, false).is_err(), "{why}");
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
        // A chain that loops on itself: an error after as many
        // descriptors as the table holds.
        let mut g = Guest::new();
        g.desc_at(DESC, 0, DATA, 100, NEXT, 0);
        g.offer(0);
        assert_eq!(g.read_next(12), Some(Err(ChainError::Loop)));
        // A `next` past the table, and a head past it.
        let mut g = Guest::new();
        g.desc_at(DESC, 0, DATA, 100, NEXT, SIZE);
        g.offer(0);
        assert_eq!(g.read_next(12), Some(Err(ChainError::BadIndex(SIZE))));
        let mut g = Guest::new();
        g.offer(SIZE + 3);
        assert_eq!(g.read_next(12), Some(Err(ChainError::BadIndex(SIZE + 3))));
        // An indirect table inside an indirect table, and one whose
        // length is not a whole number of descriptors.
        let mut g = Guest::new();
        g.desc_at(DESC, 0, DATA, 32, INDIRECT, 0);
        g.desc_at(DATA, 0, DATA + 0x100, 16, INDIRECT, 0);
        g.offer(0);
        assert_eq!(g.read_next(12), Some(Err(ChainError::BadIndirect)));
        let mut g = Guest::new();
        g.desc_at(DESC, 0, DATA, 24, INDIRECT, 0);
        g.offer(0);
        assert_eq!(g.read_next(12), Some(Err(ChainError::BadIndirect)));
        // An available index further on than the ring holds.
        let mut g = Guest::new();
        g.mem
            .write_obj((SIZE + 1).to_le(), GuestAddress(AVAIL + 2))
            .unwrap();
        assert_eq!(
            g.read_next(12),
            Some(Err(ChainError::BadAvailIndex(SIZE + 1)))
        );
        // A read-only buffer in a receive chain: refused, and given back.
        let mut g = Guest::new();
        g.chain_of(&[0u8; 2048], &[], 0, false);
        let mut avail = g.ring.avail().unwrap();
        let r = write_frame(&mut g.ring, &mut avail, NetHdr::zero(12), &[1u8; 60], true);
        assert_eq!(r, Err(ChainError::WrongDirection));
        assert_eq!(avail.len(), 1);
        assert_eq!(g.ring.next_used(), 0);
    }
}
