//! The EAL: started once per process, by the first DPDK port, with its
//! memory from hugepages or ordinary pages (`SLUICE_DPDK_MEMORY`), and the
//! registration that gives each polling thread an lcore id.

use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

use super::ffi::{sl_eal_init, sl_thread_register};

static EAL: OnceLock<Result<(), String>> = OnceLock::new();

thread_local! {
    static LCORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Registers the polling thread with DPDK once (the PMD thread is not an
/// EAL thread): without an lcore id every mbuf alloc/free would go to the
/// mempool's shared ring.
pub(super) fn register_thread() {
    LCORE.with(|done| {
        if !done.get() {
            // SAFETY: called after EAL init (a port exists); idempotent.
            unsafe { sl_thread_register() };
            done.set(true);
        }
    });
}

fn first_allowed_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            for cpu in 0..libc::CPU_SETSIZE as usize {
                if libc::CPU_ISSET(cpu, &set) {
                    return cpu;
                }
            }
        }
    }
    0
}

/// How the EAL gets its memory, from `SLUICE_DPDK_MEMORY`: `huge`
/// (hugepages, which must be reserved), `no-huge` (ordinary pages, fine
/// for vdevs and tests, not for NICs doing DMA) or `auto` (the default:
/// hugepages when some are free, else ordinary pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpdkMemory {
    /// Hugepages when the machine has free ones, else ordinary pages.
    Auto,
    /// Hugepages (`--in-memory`).
    Huge,
    /// Ordinary pages (`--no-huge`).
    NoHuge,
}

impl DpdkMemory {
    /// Parses `auto`, `huge` or `no-huge`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" | "" => Ok(DpdkMemory::Auto),
            "huge" => Ok(DpdkMemory::Huge),
            "no-huge" => Ok(DpdkMemory::NoHuge),
            _ => Err(format!(
                "SLUICE_DPDK_MEMORY={s}: expected 'auto', 'huge' or 'no-huge'"
            )),
        }
    }
}

/// Free hugepages of the default size (`HugePages_Free` in /proc/meminfo).
pub(super) fn free_hugepages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("HugePages_Free:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The EAL's memory arguments. DPDK turns `--no-huge` into legacy memory,
/// which it refuses together with `--in-memory`; `--no-shconf` is the part
/// of `--in-memory` that still applies without hugepages (no files shared
/// with other DPDK processes).
fn memory_args(mode: DpdkMemory, free_huge: u64) -> Vec<String> {
    let huge = match mode {
        DpdkMemory::Auto => free_huge > 0,
        DpdkMemory::Huge => true,
        DpdkMemory::NoHuge => false,
    };
    if huge {
        vec!["--in-memory".into()]
    } else {
        ["--no-huge", "--no-shconf", "-m", "512"]
            .map(String::from)
            .to_vec()
    }
}

pub(super) fn eal_init(first_devargs: &str) -> Result<(), String> {
    EAL.get_or_init(|| {
        let mode = DpdkMemory::parse(
            std::env::var("SLUICE_DPDK_MEMORY")
                .unwrap_or_default()
                .as_str(),
        )?;
        let mut args = vec![
            "sluice".to_string(),
            "-l".into(),
            first_allowed_cpu().to_string(),
            "--no-telemetry".into(),
            "--log-level=*:error".into(),
            format!("--file-prefix=sluice{}", std::process::id()),
        ];
        args.extend(memory_args(mode, free_hugepages()));
        // A vdev first (net_pcap0, net_null0, ...): no PCI scan, whose
        // failures on virtual machines are only noise. A PCI address first:
        // scan, so it can be probed.
        if !first_devargs.contains(':') || first_devargs.starts_with("net_") {
            args.push("--no-pci".into());
        }
        let cargs: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_str()).unwrap())
            .collect();
        let mut ptrs: Vec<*mut c_char> = cargs.iter().map(|c| c.as_ptr() as *mut c_char).collect();
        // SAFETY: argv points to NUL-terminated strings that outlive the
        // call (DPDK keeps no pointer into them after init returns... it may
        // reorder the array, which is ours).
        let rc = unsafe { sl_eal_init(ptrs.len() as c_int, ptrs.as_mut_ptr()) };
        std::mem::forget(cargs);
        if rc < 0 {
            return Err(format!(
                "DPDK EAL initialisation failed ({rc}) with {args:?}: with hugepages, are enough reserved and free? (SLUICE_DPDK_MEMORY=no-huge runs without them)"
            ));
        }
        Ok(())
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_arguments_never_mix_no_huge_with_in_memory() {
        let no_huge = memory_args(DpdkMemory::NoHuge, 100);
        assert!(no_huge.contains(&"--no-huge".to_string()));
        assert!(!no_huge.contains(&"--in-memory".to_string()));
        assert_eq!(memory_args(DpdkMemory::Auto, 0), no_huge);
        assert_eq!(memory_args(DpdkMemory::Auto, 1), vec!["--in-memory"]);
        assert_eq!(memory_args(DpdkMemory::Huge, 0), vec!["--in-memory"]);
        assert_eq!(DpdkMemory::parse("no-huge"), Ok(DpdkMemory::NoHuge));
        assert!(DpdkMemory::parse("sometimes")
            .unwrap_err()
            .contains("no-huge"));
    }
}
