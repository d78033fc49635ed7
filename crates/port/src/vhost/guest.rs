//! The guest's memory as the PMD reaches it: the frontend's regions as
//! host pointers, every guest address checked against them before use.
//!
//! `vm-memory` maps the regions (and unmaps them when the last handle
//! goes); this keeps a handle, so the pointers stay valid as long as the
//! map lives, and translates an address with a look at the region hit
//! last (a frontend has a handful; a burst's buffers nearly always lie in
//! the same one) instead of `vm-memory`'s search per access.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::Arc;

use vm_memory::{GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, MemoryRegionAddress};

/// One mapped region.
#[derive(Debug, Clone, Copy)]
struct Region {
    gpa: u64,
    len: u64,
    host: *mut u8,
}

/// The guest's regions as host pointers.
pub struct GuestMap {
    regions: Vec<Region>,
    /// The region the last lookup hit.
    hint: Cell<usize>,
    /// Keeps the mappings alive.
    _mem: Arc<GuestMemoryMmap>,
}

// SAFETY: the pointers point into mappings owned by `_mem` (Send and
// Sync), which this map keeps alive; moving the map to another thread
// moves that ownership along. (`Cell` keeps it from being Sync: a map is
// used by one thread at a time, under its queue's lock.)
unsafe impl Send for GuestMap {}

impl GuestMap {
    /// The map of `mem`'s regions.
    pub fn new(mem: Arc<GuestMemoryMmap>) -> GuestMap {
        let regions = mem
            .iter()
            .filter_map(|r| {
                let host = r.get_host_address(MemoryRegionAddress(0)).ok()?;
                Some(Region {
                    gpa: r.start_addr().0,
                    len: r.len(),
                    host,
                })
            })
            .collect();
        GuestMap {
            regions,
            hint: Cell::new(0),
            _mem: mem,
        }
    }

    /// A guest of anonymous memory at the given (guest address, length)
    /// ranges: a model guest for tests and fuzzing. `None` when the
    /// ranges overlap or cannot be mapped.
    pub fn anonymous(ranges: &[(u64, usize)]) -> Option<GuestMap> {
        let ranges: Vec<_> = ranges
            .iter()
            .map(|&(a, l)| (vm_memory::GuestAddress(a), l))
            .collect();
        let mem = GuestMemoryMmap::<()>::from_ranges(&ranges).ok()?;
        Some(GuestMap::new(Arc::new(mem)))
    }

    /// The host address of the `len` bytes at guest address `gpa`, when
    /// they lie in one region; `None` when any of them is outside the
    /// guest's memory (or they straddle two regions, which no frontend's
    /// buffers do).
    #[inline]
    pub fn host(&self, gpa: u64, len: usize) -> Option<*mut u8> {
        let inside = |r: &Region| {
            gpa.checked_sub(r.gpa)
                .filter(|off| off.checked_add(len as u64).is_some_and(|end| end <= r.len))
        };
        let h = self.hint.get();
        if let Some(r) = self.regions.get(h) {
            if let Some(off) = inside(r) {
                return Some(r.host.wrapping_add(off as usize));
            }
        }
        for (i, r) in self.regions.iter().enumerate() {
            if let Some(off) = inside(r) {
                self.hint.set(i);
                return Some(r.host.wrapping_add(off as usize));
            }
        }
        None
    }

    /// Copies the `dst.len()` bytes at `gpa` into `dst`; false (nothing
    /// copied) when they are not all in the guest's memory.
    #[inline]
    pub fn read(&self, gpa: u64, dst: &mut [u8]) -> bool {
        let Some(src) = self.host(gpa, dst.len()) else {
            return false;
        };
        // SAFETY: `host` checked that the whole range lies in a region
        // this map keeps mapped; `dst` is ours and cannot overlap guest
        // memory. The guest may write the bytes meanwhile (it breaks its
        // own frame, as with any device): plain bytes have no invalid
        // values, and they are read once, never checked then re-read.
        unsafe { sluice_packet::copy::copy_bytes(src, dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Copies `src` into guest memory at `gpa`; false (nothing written)
    /// when the range is not all in the guest's memory.
    #[inline]
    pub fn write(&self, gpa: u64, src: &[u8]) -> bool {
        let Some(dst) = self.host(gpa, src.len()) else {
            return false;
        };
        // SAFETY: as in `read`: the range was checked to lie in a mapped
        // region; guest memory is writable shared memory, and `src` is
        // ours, so they do not overlap.
        unsafe { sluice_packet::copy::copy_bytes(src.as_ptr(), dst, src.len()) };
        true
    }

    /// Writes a virtio-net header of `len` bytes (10 or 12) at `gpa` as
    /// two stores: `lo` into bytes 0..8, the low `len - 8` bytes of `hi`
    /// after it, little-endian. False (nothing written) when the range is
    /// not all in the guest's memory or `len` is neither.
    #[inline]
    pub fn write_header(&self, gpa: u64, lo: u64, hi: u32, len: usize) -> bool {
        if len != 10 && len != 12 {
            return false;
        }
        let Some(dst) = self.host(gpa, len) else {
            return false;
        };
        // SAFETY: `host` checked that the `len` bytes at `dst` lie in a
        // region this map keeps mapped (writable shared memory); the
        // stores are unaligned ones of 8 and then 2 or 4 bytes, all
        // inside those `len` bytes.
        unsafe {
            std::ptr::write_unaligned(dst.cast::<u64>(), lo.to_le());
            if len == 12 {
                std::ptr::write_unaligned(dst.add(8).cast::<u32>(), hi.to_le());
            } else {
                std::ptr::write_unaligned(dst.add(8).cast::<u16>(), (hi as u16).to_le());
            }
        }
        true
    }

    /// Asks for the first lines at `gpa` to be loaded (no check needed:
    /// a prefetch of any address is harmless, but only mapped ones are
    /// asked for).
    #[inline]
    pub fn prefetch(&self, gpa: u64, len: usize) {
        if let Some(p) = self.host(gpa, len.min(128)) {
            sluice_packet::prefetch::read_addr(p);
            sluice_packet::prefetch::read_addr(p.wrapping_add(64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::{Bytes, GuestAddress};

    fn two_regions() -> GuestMap {
        let mem = GuestMemoryMmap::<()>::from_ranges(&[
            (GuestAddress(0x1000), 0x1000),
            (GuestAddress(0x10000), 0x2000),
        ])
        .unwrap();
        GuestMap::new(Arc::new(mem))
    }

    #[test]
    fn addresses_are_checked_against_every_region() {
        let m = two_regions();
        assert!(m.host(0x1000, 0x1000).is_some());
        assert!(m.host(0x1fff, 1).is_some());
        assert!(m.host(0x1fff, 2).is_none(), "past the region's end");
        assert!(m.host(0xfff, 1).is_none(), "before the first region");
        assert!(m.host(0x10000, 0x2000).is_some());
        assert!(m.host(0x12000, 0).is_some(), "an empty range at the end");
        assert!(m.host(0x12000, 1).is_none());
        assert!(m.host(0x1800, 0x9000).is_none(), "across the gap");
        assert!(m.host(u64::MAX, 2).is_none(), "wraps around");
        assert!(m.host(0x10000, usize::MAX).is_none());
    }

    #[test]
    fn copies_of_every_short_length_are_exact() {
        let m = two_regions();
        let src: Vec<u8> = (0..300u16).map(|i| (i * 7 + 1) as u8).collect();
        for n in 0..=260 {
            assert!(m.write(0x10000, &[0u8; 300]));
            assert!(m.write(0x10001, &src[..n]));
            let mut back = [0xffu8; 300];
            m._mem.read_slice(&mut back, GuestAddress(0x10000)).unwrap();
            assert_eq!(back[0], 0, "nothing before, at length {n}");
            assert_eq!(&back[1..=n], &src[..n], "length {n}");
            assert!(
                back[n + 1..].iter().all(|&b| b == 0),
                "nothing after, at length {n}"
            );
            let mut got = vec![0xeeu8; n + 1];
            assert!(m.read(0x10001, &mut got[..n]));
            assert_eq!(&got[..n], &src[..n]);
            assert_eq!(got[n], 0xee);
        }
    }

    #[test]
    fn reads_and_writes_land_where_vm_memory_sees_them() {
        let m = two_regions();
        assert!(m.write(0x10ff0, b"0123456789abcdefXYZ"));
        let mut back = [0u8; 19];
        m._mem.read_slice(&mut back, GuestAddress(0x10ff0)).unwrap();
        assert_eq!(&back, b"0123456789abcdefXYZ");
        m._mem.write_slice(b"hello", GuestAddress(0x1200)).unwrap();
        let mut got = [0u8; 5];
        assert!(m.read(0x1200, &mut got));
        assert_eq!(&got, b"hello");
        // Outside: nothing happens.
        assert!(!m.write(0x1ffe, b"abc"));
        assert!(!m.read(0x5000, &mut got));
        // A header as two stores: its bytes little-endian, nothing past it.
        assert!(m.write(0x10100, &[0xee; 16]));
        assert!(m.write_header(0x10100, 0x0807_0605_0403_0201, 0x0c0b_0a09, 12));
        let mut h = [0u8; 14];
        assert!(m.read(0x10100, &mut h));
        assert_eq!(h, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xee, 0xee]);
        assert!(m.write_header(0x10100, 0, 0xffff_0d0c, 10));
        assert!(m.read(0x10100, &mut h));
        assert_eq!(h, [0, 0, 0, 0, 0, 0, 0, 0, 12, 13, 11, 12, 0xee, 0xee]);
        assert!(!m.write_header(0x1ff8, 0, 0, 12), "past the region's end");
        assert!(!m.write_header(0x10100, 0, 0, 11), "not a header's length");
        assert!(m.read(0x1ff8, &mut h[..8]));
        assert_eq!(h[..8], [0; 8], "nothing written");
        m.prefetch(0x5000, 64);
        m.prefetch(0x1000, 4096);
    }
}
