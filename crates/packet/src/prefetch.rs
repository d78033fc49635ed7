//! Software prefetch: ask for a cache line some time before it is read, so
//! that a batch's cache lookups overlap their memory latency (VPP's habit;
//! a 1M-entry cache does not fit the CPU caches, and without a prefetch
//! every lookup of a large working set waits for DRAM in turn).

/// Hints that the cache line holding `addr` will be read soon. Safe for
/// any address, even dangling or null: the hint never dereferences and
/// never faults. A no-op on targets without a prefetch hint.
#[inline(always)]
pub fn read_addr<T>(addr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is part of SSE, which every x86_64 CPU has; it
    // only hints the cache and never faults, whatever the address.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Hints that the cache line holding `addr` will be written soon: asks
/// for it in a state this core may write without asking again (x86's
/// PREFETCHW), so that a store to a line another core holds does not wait
/// in the store buffer for it, holding up every store behind it. Safe for
/// any address; a no-op where the hint does not exist (x86 CPUs before
/// Broadwell execute PREFETCHW as a NOP).
#[inline(always)]
pub fn write_addr<T>(addr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHW only hints the cache: it never faults, whatever
    // the address, reads no register but `p`, writes no memory or flag.
    // Written as asm because the baseline target (x86-64-v3) does not
    // enable `prfchw`, without which `_MM_HINT_ET0` becomes PREFETCHT0.
    unsafe {
        core::arch::asm!(
            "prefetchw [{p}]",
            p = in(reg) addr,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Hints that the `n` bytes from `addr` on will be written soon: one
/// [`write_addr`] per 64-byte line they touch, the first and the last
/// included however `addr` is aligned.
#[inline(always)]
pub fn write_lines(addr: *const u8, n: usize) {
    if n == 0 {
        return;
    }
    let first = addr as usize & !63;
    let last = (addr as usize).wrapping_add(n - 1) & !63;
    let mut line = first;
    loop {
        write_addr(line as *const u8);
        if line >= last {
            break;
        }
        line += 64;
    }
}

/// Hints that `value` (its first cache line) will be read soon.
#[inline(always)]
pub fn read<T>(value: &T) {
    read_addr(value as *const T);
}

/// Hints that the `n` bytes from `value` on will be read soon: one hint
/// per 64-byte cache line.
#[inline(always)]
pub fn read_lines<T>(value: &T, n: usize) {
    let p = (value as *const T).cast::<u8>();
    let mut ofs = 0;
    while ofs < n {
        read_addr(p.wrapping_add(ofs));
        ofs += 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_change_nothing_and_never_fault() {
        let v = vec![7u64; 1024];
        read(&v[0]);
        read(&v[1023]);
        read_lines(&v[0], 8 * 1024);
        read_addr(std::ptr::null::<u8>());
        read_addr(usize::MAX as *const u8);
        write_addr(&v[5]);
        write_addr(std::ptr::null::<u8>());
        write_addr(usize::MAX as *const u8);
        write_lines(v.as_ptr().cast::<u8>().wrapping_add(3), 200);
        write_lines(std::ptr::null::<u8>(), 0);
        write_lines(usize::MAX as *const u8, 1);
        assert!(v.iter().all(|&x| x == 7));
    }
}
