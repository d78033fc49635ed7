//! Whether this CPU runs the instructions the binary was built for.
//!
//! The workspace builds for x86-64-v3 (`.cargo/config.toml`). Run on an
//! older CPU, such a binary would die of an illegal instruction somewhere
//! in the hot path; `sluice` asks the CPU first and says what to do.
//! (`is_x86_feature_detected!` cannot be used: it answers "yes" for every
//! feature the binary was compiled with, without asking the CPU.)

/// The CPU features this binary was compiled to use that the CPU lacks
/// (empty when it can run).
pub fn missing_features() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        // SAFETY: CPUID exists on every x86_64 CPU and has no side
        // effects; leaf 7 reads as zeros where it does not exist.
        #[allow(unused_unsafe)]
        let (max_leaf, l1, l7) = unsafe { (__cpuid(0).eax, __cpuid(1), __cpuid_count(7, 0)) };
        let l7b = if max_leaf >= 7 { l7.ebx } else { 0 };
        // SAFETY: as above; leaf 0x8000_0001 holds LZCNT (ABM).
        #[allow(unused_unsafe)]
        let ext = unsafe { __cpuid(0x8000_0001) };
        let osxsave = l1.ecx & (1 << 27) != 0;
        // The OS must save the YMM registers for AVX code to run.
        let ymm_saved = osxsave && xcr0() & 0b110 == 0b110;
        let bit = |reg: u32, n: u32| reg & (1 << n) != 0;
        // (feature, whether this binary uses it, whether the CPU has it)
        let features: [(&'static str, bool, bool); 13] = [
            ("sse3", cfg!(target_feature = "sse3"), bit(l1.ecx, 0)),
            ("ssse3", cfg!(target_feature = "ssse3"), bit(l1.ecx, 9)),
            (
                "fma",
                cfg!(target_feature = "fma"),
                bit(l1.ecx, 12) && ymm_saved,
            ),
            ("sse4.1", cfg!(target_feature = "sse4.1"), bit(l1.ecx, 19)),
            ("sse4.2", cfg!(target_feature = "sse4.2"), bit(l1.ecx, 20)),
            ("movbe", cfg!(target_feature = "movbe"), bit(l1.ecx, 22)),
            ("popcnt", cfg!(target_feature = "popcnt"), bit(l1.ecx, 23)),
            (
                "avx",
                cfg!(target_feature = "avx"),
                bit(l1.ecx, 28) && ymm_saved,
            ),
            ("f16c", cfg!(target_feature = "f16c"), bit(l1.ecx, 29)),
            ("bmi1", cfg!(target_feature = "bmi1"), bit(l7b, 3)),
            (
                "avx2",
                cfg!(target_feature = "avx2"),
                bit(l7b, 5) && ymm_saved,
            ),
            ("bmi2", cfg!(target_feature = "bmi2"), bit(l7b, 8)),
            ("lzcnt", cfg!(target_feature = "lzcnt"), bit(ext.ecx, 5)),
        ];
        features
            .into_iter()
            .filter(|&(_, used, present)| used && !present)
            .map(|(name, _, _)| name)
            .collect()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// XCR0: which register states the OS saves (bit 1 SSE, bit 2 AVX).
#[cfg(target_arch = "x86_64")]
fn xcr0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: XGETBV with ECX = 0 reads XCR0; it is called only after
    // CPUID said OSXSAVE, i.e. the OS enabled XGETBV. It touches no memory.
    unsafe {
        std::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags));
    }
    u64::from(hi) << 32 | u64::from(lo)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_cpu_runs_this_build() {
        // The test binary is built like `sluice`: were anything missing,
        // it would not have got this far.
        assert_eq!(super::missing_features(), Vec::<&str>::new());
    }
}
