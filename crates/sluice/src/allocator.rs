//! How the C library's allocator is set up: one arena, grown 64 MiB at a
//! time.
//!
//! By default glibc gives each thread that allocates a lot an arena of its
//! own, made of 64 MiB heaps that it maps piece by piece and unmaps as soon
//! as one is empty. A burst of 100,000 flow-mods allocates some 120 MB of
//! rules and indexes on its connection's thread; deleting them emptied
//! those heaps, so the next burst faulted every page in again (30,000 page
//! faults, about half of the burst's time on this VM). With one arena,
//! which grows by `brk` in steps of 64 MiB and keeps what it grew (glibc's
//! trim threshold), memory a delete freed serves the next burst:
//! `bench/openflow-compare`'s runs went from 0.27 to 0.14 s median, and
//! the datapath's rates and flow setups did not move (docs/openflow.md).
//!
//! The price: a PMD's allocations (an upcall's, never a packet's) and the
//! control plane's share one lock, held for one `malloc` or `free` at a
//! time. Set `GLIBC_TUNABLES` to choose otherwise: Sluice then leaves the
//! allocator as the environment says.

/// How much the arena grows beyond each request when it must grow.
const TOP_PAD: i32 = 64 << 20;

/// Sets the allocator up, unless `GLIBC_TUNABLES` is set: call first
/// thing in `main`, before any thread starts. Returns whether it did.
pub fn tune() -> bool {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return false;
    }
    // SAFETY: `mallopt` only sets the allocator's parameters (valid
    // parameter numbers and values); it has no preconditions and touches no
    // memory of ours. Threads created after this use the main arena.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1) == 1 && libc::mallopt(libc::M_TOP_PAD, TOP_PAD) == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tune_takes_and_memory_still_works_across_threads() {
        if std::env::var_os("GLIBC_TUNABLES").is_some() {
            assert!(!tune());
        } else {
            assert!(tune());
        }
        // Allocated on one thread, written, freed on another.
        let v = std::thread::spawn(|| {
            let mut v = vec![0u8; 8 << 20];
            v[(8 << 20) - 1] = 7;
            v
        })
        .join()
        .unwrap();
        assert_eq!(v.iter().map(|&b| u64::from(b)).sum::<u64>(), 7);
        std::thread::spawn(move || drop(v)).join().unwrap();
    }
}
