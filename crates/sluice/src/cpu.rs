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
        let have = |name: &str| match name {
            "sse3" => l1.ecx & 1 != 0,
            "ssse3" => l1.ecx & (1 << 9) != 0,
            "fma" => l1.ecx & (1 << 12) != 0 && ymm_saved,
            "sse4.1" => l1.ecx & (1 << 19) != 0,
            "sse4.2" => l1.ecx & (1 << 20) != 0,
            "movbe" => l1.ecx & (1 << 22) != 0,
            "popcnt" => l1.ecx & (1 << 23) != 0,
            "avx" => l1.ecx & (1 << 28) != 0 && ymm_saved,
            "f16c" => l1.ecx & (1 << 29) != 0,
            "bmi1" => l7b & (1 << 3) != 0,
            "avx2" => l7b & (1 << 5) != 0 && ymm_saved,
            "bmi2" => l7b & (1 << 8) != 0,
            "lzcnt" => ext.ecx & (1 << 5) != 0,
            _ => true,
        };
        let built: [(&'static str, bool); 13] = [
            ("sse3", cfg!(target_feature = "sse3")),
            ("ssse3", cfg!(target_feature = "ssse3")),
            ("sse4.1", cfg!(target_feature = "sse4.1")),
            ("sse4.2", cfg!(target_feature = "sse4.2")),
            ("popcnt", cfg!(target_feature = "popcnt")),
            ("avx", cfg!(target_feature = "avx")),
            ("avx2", cfg!(target_feature = "avx2")),
            ("bmi1", cfg!(target_feature = "bmi1")),
            ("bmi2", cfg!(target_feature = "bmi2")),
            ("fma", cfg!(target_feature = "fma")),
            ("f16c", cfg!(target_feature = "f16c")),
            ("lzcnt", cfg!(target_feature = "lzcnt")),
            ("movbe", cfg!(target_feature = "movbe")),
        ];
        built
            .into_iter()
            .filter(|&(name, used)| used && !have(name))
            .map(|(name, _)| name)
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
