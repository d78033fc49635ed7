//! The DPDK port (`dpdk:DEVARGS`), built with the `dpdk` feature against
//! Debian's libdpdk: what OVS-DPDK users run on NICs (`dpdk:0000:01:00.0`)
//! and what lets `bench/compare-ovs` push Sluice through the very vdevs OVS
//! uses (`dpdk:net_pcap0,rx_pcap=F,infinite_rx=1`, `dpdk:net_null0,no-rx=1`).
//!
//! The EAL starts once per process, with the first DPDK port (without a PCI
//! scan when that port is a vdev, so list a NIC first), on the first
//! CPU the process may run on (so `taskset -c 1 sluice ...` pins it there;
//! the PMD thread inherits the affinity). With no free hugepages it runs
//! with `--no-huge` (see [`DpdkMemory`]). Each port has one rx and one tx queue and its own mbuf
//! pool; frames are copied between mbufs and the packet pool (one copy each
//! way, the same a pcap vdev does). One `rte_eth_tx_burst` per flushed batch.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

use sluice_packet::{PacketBatch, PacketPool, BATCH_SIZE};

use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus};

#[repr(C)]
struct Mempool {
    _private: [u8; 0],
}

extern "C" {
    fn sl_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn sl_dev_probe(devargs: *const c_char) -> c_int;
    fn sl_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    fn sl_pool_create(name: *const c_char, n: u32) -> *mut Mempool;
    fn sl_port_start(port: u16, mp: *mut Mempool, nb_desc: u16) -> c_int;
    fn sl_port_stop(port: u16);
    fn sl_stats(port: u16, out: *mut u64) -> c_int;
    fn sl_thread_register() -> c_int;
    fn sl_rx_copy(
        port: u16,
        dst: *const *mut u8,
        cap: u32,
        lens: *mut u32,
        hash: *mut u32,
        has_hash: *mut u8,
        n: u16,
    ) -> u16;
    fn sl_tx_copy(
        port: u16,
        mp: *mut Mempool,
        src: *const *const u8,
        lens: *const u16,
        n: u16,
    ) -> c_int;
}

static EAL: OnceLock<Result<(), String>> = OnceLock::new();

thread_local! {
    static LCORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Registers the polling thread with DPDK once (the PMD thread is not an
/// EAL thread): without an lcore id every mbuf alloc/free would go to the
/// mempool's shared ring.
fn register_thread() {
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
fn free_hugepages() -> u64 {
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

fn eal_init(first_devargs: &str) -> Result<(), String> {
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

/// A DPDK ethdev with one rx and one tx queue.
pub struct DpdkPort {
    name: String,
    port: u16,
    mp: *mut Mempool,
    stats: PortStats,
    started: bool,
}

// SAFETY: the mempool pointer is used only by the thread that owns the port
// (DPDK mempools are thread-safe with per-lcore caches; non-EAL threads use
// the shared ring).
unsafe impl Send for DpdkPort {}

impl DpdkPort {
    /// Probes `devargs` (a vdev such as `net_null0,no-rx=1`, or a PCI
    /// address) and starts it.
    pub fn open(name: &str, devargs: &str) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        eal_init(devargs).map_err(err)?;
        let dev = devargs.split(',').next().unwrap_or(devargs);
        let c_args = CString::new(devargs).map_err(|_| err("NUL in devargs".into()))?;
        let c_dev = CString::new(dev).map_err(|_| err("NUL in devargs".into()))?;
        let mut port = 0u16;
        // SAFETY: valid C strings; port is writable.
        unsafe {
            if sl_port_by_name(c_dev.as_ptr(), &mut port) != 0 {
                let rc = sl_dev_probe(c_args.as_ptr());
                if rc < 0 {
                    return Err(err(format!(
                        "cannot probe DPDK device '{devargs}' ({rc}): unknown driver, bad arguments, or a NIC not bound to vfio-pci"
                    )));
                }
                if sl_port_by_name(c_dev.as_ptr(), &mut port) != 0 {
                    return Err(err(format!(
                        "DPDK probed '{devargs}' but has no port named '{dev}'"
                    )));
                }
            }
        }
        let pool_name = CString::new(format!("sl_mp_{port}")).unwrap();
        // net_pcap with infinite_rx keeps every frame of its file in an
        // mbuf: room for all of them, plus the ring and bursts in flight.
        let mbufs = match infinite_pcap_frames(devargs) {
            Some(frames) => (frames + 8192).max(16384),
            None => 8191,
        };
        // SAFETY: valid name; result checked.
        let mp = unsafe { sl_pool_create(pool_name.as_ptr(), mbufs) };
        if mp.is_null() {
            return Err(err("cannot create the mbuf pool (memory?)".into()));
        }
        // SAFETY: port exists, mp is a valid pool.
        let rc = unsafe { sl_port_start(port, mp, 1024) };
        if rc < 0 {
            return Err(err(format!("cannot start DPDK port {port} ({rc})")));
        }
        Ok(DpdkPort {
            name: name.to_string(),
            port,
            mp,
            stats: PortStats::default(),
            started: true,
        })
    }
}

impl Port for DpdkPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: true,
            finite_rx: false,
            rx_hash: true,
            tx_offload: false,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        register_thread();
        // Frames for the whole burst first, so one FFI call copies them all.
        let want = batch.remaining().min(pool.available());
        if want == 0 {
            return RxStatus::Idle;
        }
        let mut pkts = arrayvec::ArrayVec::<_, BATCH_SIZE>::new();
        let mut dst = [std::ptr::null_mut::<u8>(); BATCH_SIZE];
        let cap = pool.max_packet_len();
        for d in dst.iter_mut().take(want) {
            let mut p = pool.alloc().expect("counted available");
            p.set_len(cap);
            *d = p.data_mut().as_mut_ptr();
            pkts.push(p);
        }
        let mut lens = [0u32; BATCH_SIZE];
        let mut hash = [0u32; BATCH_SIZE];
        let mut has_hash = [0u8; BATCH_SIZE];
        // SAFETY: dst[i] points to cap writable bytes of a frame we own for
        // i < want; the arrays have room for want entries.
        let n = unsafe {
            sl_rx_copy(
                self.port,
                dst.as_ptr(),
                cap as u32,
                lens.as_mut_ptr(),
                hash.as_mut_ptr(),
                has_hash.as_mut_ptr(),
                want as u16,
            )
        } as usize;
        let mut got = 0;
        for (i, mut p) in pkts.into_iter().enumerate() {
            if i >= n {
                pool.free(p);
            } else if lens[i] == 0 {
                self.stats.rx_drop(PortDrop::TooBig, 1);
                pool.free(p);
            } else {
                p.set_len(lens[i] as usize);
                p.meta.in_port = in_port;
                p.meta.hash = hash[i];
                p.meta.has_hash = has_hash[i] != 0;
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += u64::from(lens[i]);
                let _ = batch.push(p);
                got += 1;
            }
        }
        RxStatus::of_burst(got, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let n = batch.len();
        if n == 0 {
            return 0;
        }
        register_thread();
        let mut src = [std::ptr::null::<u8>(); BATCH_SIZE];
        let mut lens = [0u16; BATCH_SIZE];
        for (i, p) in batch.as_slice().iter().enumerate() {
            src[i] = p.data().as_ptr();
            lens[i] = p.len() as u16; // frames are at most a pool frame (< 64 KiB)
        }
        self.stats.tx_kicks += 1;
        // SAFETY: src[i] points to lens[i] readable bytes for i < n; the
        // packets stay alive until after the call.
        let rc = unsafe { sl_tx_copy(self.port, self.mp, src.as_ptr(), lens.as_ptr(), n as u16) };
        let sent = if rc < 0 {
            self.stats.tx_drop(PortDrop::NoBuffer, n as u64);
            0
        } else {
            let sent = rc as usize;
            self.stats.tx_drop(PortDrop::QueueFull, (n - sent) as u64);
            sent
        };
        self.stats.tx_packets += sent as u64;
        self.stats.tx_bytes += lens[..sent].iter().map(|&l| u64::from(l)).sum::<u64>();
        batch.free_all(pool);
        sent
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats.clone();
        let mut dev = [0u64; 6];
        // SAFETY: dev holds the 6 counters sl_stats writes.
        if unsafe { sl_stats(self.port, dev.as_mut_ptr()) } == 0 {
            s.rx_drop(PortDrop::KernelRingFull, dev[2]);
            s.rx_drop(PortDrop::NoBuffer, dev[5]);
            s.tx_drop(PortDrop::Error, dev[4]);
        }
        s
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        if self.started {
            // SAFETY: the port was started by us and is used by no one else.
            unsafe { sl_port_stop(self.port) };
        }
    }
}

/// The number of frames in the file of a `net_pcap` device in infinite-rx
/// mode (which keeps them all in mbufs), from its devargs; `None` for other
/// devices. An unreadable file counts as 65536 (DPDK will say what is wrong).
fn infinite_pcap_frames(devargs: &str) -> Option<u32> {
    let args: Vec<&str> = devargs.split(',').collect();
    if !args.iter().any(|a| a.starts_with("infinite_rx=1")) {
        return None;
    }
    let file = args.iter().find_map(|a| a.strip_prefix("rx_pcap="))?;
    let count = std::fs::File::open(file)
        .ok()
        .and_then(|f| crate::pcap::PcapReader::new(std::io::BufReader::new(f)).ok())
        .map(|mut r| {
            let mut n = 0u32;
            while let Ok(Some(_)) = r.next_record() {
                n += 1;
            }
            n
        });
    Some(count.unwrap_or(65536))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::build::{Frame, L4};

    #[test]
    fn an_infinite_pcap_vdev_gets_a_pool_for_its_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.pcap");
        let frames = vec![
            Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 9 })
                .build();
            300
        ];
        std::fs::write(&file, crate::pcap::write_all(&frames)).unwrap();
        let f = file.display();
        assert_eq!(
            infinite_pcap_frames(&format!("net_pcap0,rx_pcap={f},infinite_rx=1")),
            Some(300)
        );
        assert_eq!(
            infinite_pcap_frames(&format!("net_pcap0,rx_pcap={f}")),
            None
        );
        assert_eq!(infinite_pcap_frames("net_null0,no-rx=1"), None);
        assert_eq!(
            infinite_pcap_frames("net_pcap0,rx_pcap=/no/such,infinite_rx=1"),
            Some(65536)
        );
    }

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

    /// Runs the vdev test below in a child process (the EAL starts once
    /// per process) with `SLUICE_DPDK_MEMORY=mode`.
    fn vdev_test_in_child(mode: &str) -> std::process::Output {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "dpdk::tests::frames_flow_from_a_pcap_vdev_to_a_null_vdev_with_one_burst_per_batch",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SLUICE_DPDK_MEMORY", mode)
            .output()
            .unwrap()
    }

    fn assert_ran_and_passed(mode: &str, out: &std::process::Output) {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("1 passed"),
            "SLUICE_DPDK_MEMORY={mode}:\n{text}"
        );
    }

    /// Puts `/proc/sys/vm/nr_hugepages` back as it was.
    struct RestoreHugepages(String);

    impl Drop for RestoreHugepages {
        fn drop(&mut self) {
            let _ = std::fs::write("/proc/sys/vm/nr_hugepages", &self.0);
        }
    }

    #[test]
    fn the_port_runs_without_hugepages_whatever_the_machine_has() {
        let out = vdev_test_in_child("no-huge");
        assert_ran_and_passed("no-huge", &out);
    }

    /// With hugepages: reserves 256 of them for the test when the machine
    /// has fewer free (root only), and gives them back after.
    #[test]
    fn the_port_runs_on_hugepages_reserved_for_the_test() {
        let before = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap_or_default();
        let _restore = RestoreHugepages(before.clone());
        if free_hugepages() < 256 {
            let want = before.trim().parse::<u64>().unwrap_or(0) + 256;
            if std::fs::write("/proc/sys/vm/nr_hugepages", want.to_string()).is_err()
                || free_hugepages() < 256
            {
                eprintln!("skipped: cannot reserve 256 hugepages (needs root and free memory)");
                return;
            }
        }
        let out = vdev_test_in_child("huge");
        assert_ran_and_passed("huge", &out);
    }

    #[test]
    fn frames_flow_from_a_pcap_vdev_to_a_null_vdev_with_one_burst_per_batch() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.pcap");
        let frames: Vec<Vec<u8>> = (0..100u16)
            .map(|i| Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 }).build())
            .collect();
        std::fs::write(&file, crate::pcap::write_all(&frames)).unwrap();
        let mut rx =
            DpdkPort::open("in", &format!("net_pcap7,rx_pcap={}", file.display())).unwrap();
        let mut tx = DpdkPort::open("out", "net_null7,no-rx=1").unwrap();
        let mut pool = PacketPool::new(256, 2048).unwrap();
        let mut got = Vec::new();
        for _ in 0..1000 {
            let mut b = PacketBatch::new();
            rx.rx_burst(&mut pool, &mut b, 1);
            for p in b.as_slice() {
                got.push(p.data().to_vec());
            }
            if !b.is_empty() {
                tx.tx_burst(&mut pool, &mut b);
            }
            if got.len() == frames.len() {
                break;
            }
        }
        assert_eq!(got, frames, "every frame of the capture, in order");
        assert_eq!(tx.stats().tx_packets, 100);
        assert_eq!(tx.stats().tx_kicks, 4, "one tx burst per batch of 32");
        assert_eq!(pool.available(), pool.capacity());
        let e = DpdkPort::open("bad", "net_nosuchdriver0").err().unwrap();
        assert!(e.to_string().contains("cannot probe"), "{e}");
    }
}
