//! Short copies. Frames are mostly short: up to 128 bytes a copy is two
//! overlapping fixed-size moves, inlined, instead of a call to the C
//! library's `memcpy` (which cost 10 of the ~100 cycles a cached packet
//! takes; DPDK's `rte_memcpy` inlines the same way). The pool copies
//! frames with it, and the vhost-user port copies to and from a guest's
//! memory (raw pointers: memory the guest may write meanwhile is never a
//! Rust slice).

#![allow(unsafe_code)]

/// Copies `src` into `dst` of the same length.
///
/// # Panics
/// If the lengths differ (as `copy_from_slice`).
#[inline(always)]
pub fn copy_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy between slices of different lengths"
    );
    // SAFETY: both slices hold `src.len()` bytes, and a `&mut` slice
    // cannot overlap a shared one.
    unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// Copies `n` bytes from `src` to `dst`.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, and the two
/// ranges must not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's promise, passed on; each arm's moves stay
    // within the `n` bytes (`W <= n <= 2W`).
    unsafe {
        match n {
            8..=15 => copy_two_overlapping::<8>(src, dst, n),
            16..=31 => copy_two_overlapping::<16>(src, dst, n),
            32..=64 => copy_two_overlapping::<32>(src, dst, n),
            65..=128 => copy_two_overlapping::<64>(src, dst, n),
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// The first and the last `W` bytes of the `n` at `src` to `dst`.
///
/// # Safety
/// As [`copy_bytes`], and `W <= n <= 2 * W`.
#[inline(always)]
unsafe fn copy_two_overlapping<const W: usize>(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!((W..=2 * W).contains(&n));
    // SAFETY: `0..W` and `n - W..n` lie within the `n` bytes both ranges
    // hold (the caller's promise); unaligned moves of plain bytes. Both
    // loads come first: the ranges do not overlap, so no store changes
    // what the second load reads.
    unsafe {
        let a = std::ptr::read_unaligned(src.cast::<[u8; W]>());
        let b = std::ptr::read_unaligned(src.add(n - W).cast::<[u8; W]>());
        std::ptr::write_unaligned(dst.cast::<[u8; W]>(), a);
        std::ptr::write_unaligned(dst.add(n - W).cast::<[u8; W]>(), b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_short_length_is_copied_exactly_and_nothing_around_it() {
        let src: Vec<u8> = (0..300u16).map(|i| (i * 7 + 1) as u8).collect();
        for n in 0..=260 {
            let mut dst = [0u8; 300];
            copy_slice(&mut dst[1..=n], &src[..n]);
            assert_eq!(dst[0], 0, "nothing before, at length {n}");
            assert_eq!(&dst[1..=n], &src[..n], "length {n}");
            assert!(
                dst[n + 1..].iter().all(|&b| b == 0),
                "nothing after, at length {n}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn slices_of_different_lengths_are_refused() {
        copy_slice(&mut [0u8; 4], &[1u8; 5]);
    }
}
