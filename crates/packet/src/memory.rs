//! Large per-thread tables (the SMC's 8 MiB, the megaflow slots, the
//! packet pool) are read at random: with 4 KiB pages nearly every lookup
//! also misses the TLB, and a table that grows takes a page fault per 4 KiB
//! it touches. Transparent huge pages (2 MiB) fix both where the kernel
//! offers them (`madvise` mode is the common default).

/// `n` copies of `value` in memory advised for huge pages before it is
/// first written (advice after the first write comes too late: the pages
/// are already there).
pub fn huge_vec<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(v.spare_capacity_mut());
    v.resize(n, value);
    v
}

/// Asks the kernel to back the memory of `region` with transparent huge
/// pages. Only a hint: nothing changes for the program if it is refused,
/// and it is a no-op off Linux.
pub fn advise_huge_pages<T>(region: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = region.as_ptr() as usize;
        let end = start + std::mem::size_of_val(region);
        // madvise wants a page-aligned start; the kernel uses the 2 MiB
        // aligned parts of the range.
        let first = start.next_multiple_of(PAGE);
        if end > first {
            // SAFETY: MADV_HUGEPAGE only changes how the kernel backs pages
            // this process already has mapped (the range lies inside
            // `region`'s allocation, rounded inwards); it never moves,
            // frees or changes their contents.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = region;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_leaves_contents_alone() {
        let v: Vec<u64> = (0..1_000_000).collect();
        advise_huge_pages(&v);
        advise_huge_pages(&v[3..5]);
        advise_huge_pages::<u8>(&[]);
        let h = huge_vec(100_000, 7u32);
        assert_eq!(h.len(), 100_000);
        assert!(h.iter().all(|&x| x == 7));
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    }
}
