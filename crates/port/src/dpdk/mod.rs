//! The DPDK port (`dpdk:DEVARGS`), built with the `dpdk` feature against
//! Debian's libdpdk: what OVS-DPDK users run on NICs (`dpdk:0000:01:00.0`)
//! and what lets `bench/compare-ovs` push Sluice through the very vdevs OVS
//! uses (`dpdk:net_pcap0,rx_pcap=F,infinite_rx=1`, `dpdk:net_null0,no-rx=1`).
//!
//! The EAL starts once per process, with the first DPDK port (without a PCI
//! scan when that port is a vdev, so list a NIC first), on the first
//! CPU the process may run on (so `taskset -c 1 sluice ...` pins it there;
//! the PMD thread inherits the affinity). With no free hugepages it runs
//! with `--no-huge` (see [`DpdkMemory`]).
//!
//! **Zero copy.** A received mbuf becomes a packet in place: the packet's
//! frame is the mbuf's buffer ([`PacketPool::adopt_external`]), and when a
//! DPDK port sends it, the same mbuf goes to `rte_eth_tx_burst` with the
//! packet's offset and length: no copy on either side, as in OVS-DPDK.
//! Only where a packet crosses to or from another kind of port is it
//! copied, once, and counted (`tx_copied`, `rx_copied`): a frame of the
//! packet pool sent here is copied into an mbuf; an mbuf that reaches
//! another port is read from in place and given back to DPDK when freed
//! (the pool gathers them and frees them in bulk). A chained mbuf, or one
//! whose buffer the driver attached, is copied into a pool frame.
//!
//! **Queues.** A port opened for several PMD threads gets as many rx/tx
//! queue pairs (RSS over IP/TCP/UDP spreads the flows when the device
//! hashes; its hash becomes the packet's), each with its own mempool; the
//! device stops when the last queue is dropped. One `rte_eth_tx_burst` per
//! flushed batch.
#![allow(unsafe_code)]

mod eal;
mod ffi;
mod mbuf;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use sluice_packet::{Packet, PacketBatch, PacketPool, BATCH_SIZE};

use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus};
pub use eal::DpdkMemory;
use eal::{eal_init, register_thread};
use ffi::*;

/// mbufs per queue's mempool, beyond what an infinite pcap keeps: the rx
/// and tx rings (1,024 each) and everything in flight in the datapath.
const MBUFS_PER_QUEUE: u32 = 8191;

/// Data room of an mbuf of Sluice's mempools (`RTE_MBUF_DEFAULT_DATAROOM`):
/// the largest frame of another port that a DPDK port copies and sends.
const MBUF_DATA_ROOM: usize = 2048;

/// Numbers mempool names: port ids are reused after a device closes.
static NEXT_POOL: AtomicU32 = AtomicU32::new(0);

/// A started device and its queues' mempools; the device is stopped and
/// closed when its last queue goes, and each mempool freed if every mbuf
/// of it came back (else it stays: a packet somewhere still holds one).
struct Device {
    port: u16,
    mps: Vec<*mut Mempool>,
    /// mbufs in each of them.
    mbufs: u32,
}

// SAFETY: the device is only stopped (once, by the last owner) and its
// mempools only freed there; DPDK's mempool and ethdev calls used on it
// are safe from any thread.
unsafe impl Send for Device {}
// SAFETY: as above; shared handles read only the port id.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the device was started by us; no queue of it is left.
        unsafe { sl_port_stop(self.port) };
        for &mp in &self.mps {
            // SAFETY: mp is a valid pool; with all its mbufs free and the
            // device closed, nothing refers to it.
            unsafe {
                if sl_pool_avail(mp) == self.mbufs {
                    sl_pool_free(mp);
                }
            }
        }
    }
}

/// One rx/tx queue pair of a DPDK ethdev.
pub struct DpdkPort {
    name: String,
    dev: Arc<Device>,
    queue: u16,
    mp: *mut Mempool,
    stats: PortStats,
    scratch: Box<Scratch>,
}

/// A burst's arrays, kept with the queue: no burst clears them first (a
/// burst reads only the entries it wrote).
struct Scratch {
    /// Received mbufs.
    rx: [*mut Mbuf; BATCH_SIZE],
    /// mbufs to send.
    tx: [*mut Mbuf; BATCH_SIZE],
    /// Pool frames to copy into fresh mbufs: their bytes, lengths, where
    /// each goes among those sent, and the mbufs taken for them.
    srcs: [*const u8; BATCH_SIZE],
    lens: [u16; BATCH_SIZE],
    at: [u8; BATCH_SIZE],
    fresh: [*mut Mbuf; BATCH_SIZE],
}

impl Scratch {
    fn new() -> Box<Self> {
        Box::new(Scratch {
            rx: [std::ptr::null_mut(); BATCH_SIZE],
            tx: [std::ptr::null_mut(); BATCH_SIZE],
            srcs: [std::ptr::null(); BATCH_SIZE],
            lens: [0; BATCH_SIZE],
            at: [0; BATCH_SIZE],
            fresh: [std::ptr::null_mut(); BATCH_SIZE],
        })
    }
}

// SAFETY: the mempool pointers are used only by the thread that polls the
// queue (DPDK mempools are thread-safe, with per-lcore caches for
// registered threads); the device is shared through an Arc and each queue
// is used by one handle.
unsafe impl Send for DpdkPort {}

/// Gives mbufs that packets held back to their mempools (the function a
/// DPDK port registers with the packet pool).
///
/// # Safety
/// Each buffer is the buffer of a direct mbuf of a Sluice mempool that no
/// one uses any more.
unsafe fn return_mbufs(bufs: &[NonNull<u8>]) {
    let mut m = [std::ptr::null_mut::<Mbuf>(); 64];
    for chunk in bufs.chunks(64) {
        for (slot, b) in m.iter_mut().zip(chunk) {
            *slot = b.as_ptr().wrapping_sub(mbuf::HEADER).cast();
        }
        // SAFETY: each buffer follows its mbuf's header (the caller
        // vouches they are direct mbufs of Sluice's pools, unused).
        unsafe { sl_free_mbufs(m.as_ptr(), chunk.len() as u32) };
    }
}

impl DpdkPort {
    /// Probes `devargs` (a vdev such as `net_null0,no-rx=1`, or a PCI
    /// address) and starts it with one queue pair.
    pub fn open(name: &str, devargs: &str) -> Result<Self, PortError> {
        Ok(Self::open_queues(name, devargs, 1, None)?.remove(0))
    }

    /// Probes and starts the device with `n` rx/tx queue pairs, one handle
    /// each; `mbufs` overrides each queue's mempool size.
    pub fn open_queues(
        name: &str,
        devargs: &str,
        n: usize,
        mbufs: Option<u32>,
    ) -> Result<Vec<Self>, PortError> {
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
        let (mut max_rx, mut max_tx) = (0u16, 0u16);
        // SAFETY: the port exists; both outputs are writable.
        if unsafe { sl_max_queues(port, &mut max_rx, &mut max_tx) } < 0 {
            return Err(err(format!("cannot read DPDK port {port}'s device info")));
        }
        let max = max_rx.min(max_tx) as usize;
        if n == 0 || n > max {
            return Err(err(format!(
                "DPDK device '{dev}' has at most {max} rx/tx queue pairs; {n} asked (one per PMD thread)"
            )));
        }
        // net_pcap with infinite_rx keeps every frame of its file in an
        // mbuf: room for all of them, plus the ring and bursts in flight.
        let per_queue = mbufs.unwrap_or(match infinite_pcap_frames(devargs) {
            Some(frames) => (frames + 8192).max(16384),
            None => MBUFS_PER_QUEUE,
        });
        let mut mps = Vec::with_capacity(n);
        let free_all = |mps: &[*mut Mempool]| {
            for &mp in mps {
                // SAFETY: created above and given to no device that started.
                unsafe { sl_pool_free(mp) };
            }
        };
        for q in 0..n {
            let id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
            let pool_name = CString::new(format!("sl_mp_{id}")).unwrap();
            // SAFETY: valid name; result checked.
            let mp = unsafe { sl_pool_create(pool_name.as_ptr(), per_queue) };
            if mp.is_null() {
                free_all(&mps);
                return Err(err(format!(
                    "cannot create a pool of {per_queue} mbufs for queue {q} (DPDK memory: with hugepages, reserve more; without, SLUICE_DPDK_MEMORY=no-huge has 512 MiB)"
                )));
            }
            mps.push(mp);
        }
        // SAFETY: the port exists; mps holds n valid pools.
        let rc = unsafe { sl_port_start(port, mps.as_ptr(), n as u16, 1024) };
        if rc < 0 {
            // SAFETY: the device did not start; stopping and closing it
            // releases the queues' hold on the pools.
            unsafe { sl_port_stop(port) };
            free_all(&mps);
            return Err(err(format!(
                "cannot start DPDK port {port} with {n} queues ({rc})"
            )));
        }
        let dev = Arc::new(Device {
            port,
            mps: mps.clone(),
            mbufs: per_queue,
        });
        Ok(mps
            .into_iter()
            .enumerate()
            .map(|(q, mp)| DpdkPort {
                name: name.to_string(),
                dev: dev.clone(),
                queue: q as u16,
                mp,
                stats: PortStats::default(),
                scratch: Scratch::new(),
            })
            .collect())
    }

    /// Free mbufs in this queue's mempool.
    pub fn mbufs_free(&self) -> u32 {
        // SAFETY: mp is a valid pool.
        unsafe { sl_pool_avail(self.mp) }
    }

    /// The rare received packet that cannot be used in place: copied into
    /// a pool frame (the mbuf is freed either way). Out of line, so the rx
    /// loop stays small.
    #[cold]
    #[inline(never)]
    fn copy_in(
        stats: &mut PortStats,
        pool: &mut PacketPool,
        m: *mut Mbuf,
        len: u32,
    ) -> Option<Packet> {
        let Some(mut p) = pool.alloc_for(len as usize) else {
            // SAFETY: m came from rx and is ours; dst is null with cap 0.
            unsafe { sl_copy_out(m, std::ptr::null_mut(), 0) };
            stats.rx_drop(PortDrop::NoBuffer, 1);
            return None;
        };
        let cap = p.len() + p.tailroom();
        p.set_len(cap);
        // SAFETY: p owns cap writable bytes from its data pointer; the mbuf
        // is ours and freed by the call.
        let len = unsafe { sl_copy_out(m, p.data_mut().as_mut_ptr(), cap as u32) };
        if len == 0 {
            stats.rx_drop(PortDrop::TooBig, 1);
            pool.free(p);
            return None;
        }
        p.set_len(len as usize);
        stats.rx_copied += 1;
        Some(p)
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
            rx_can_wait: false,
        }
    }

    fn attach_pool(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        pool.set_external_return(return_mbufs);
        Ok(())
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        register_thread();
        if !pool.takes_external() {
            pool.set_external_return(return_mbufs);
        }
        let want = batch.remaining();
        if want == 0 {
            return RxStatus::Idle;
        }
        let m = &mut self.scratch.rx;
        // SAFETY: m has room for want <= BATCH_SIZE mbufs.
        let n =
            unsafe { sl_rx_burst(self.dev.port, self.queue, m.as_mut_ptr(), want as u16) } as usize;
        let (mut got, mut bytes) = (0, 0u64);
        let mut run = pool.adopt_run(batch, in_port);
        for &mb in &m[..n] {
            // SAFETY: rx_burst filled the first n entries with mbufs that
            // are ours now.
            let v = unsafe { mbuf::rx_view(mb) };
            let ok = match v.buf {
                // SAFETY: a plain mbuf just received: its buffer is buf_len
                // bytes, the data inside it, and it is ours until the packet
                // is sent or freed (then given back by return_mbufs,
                // registered above). n <= want, so the batch takes it.
                Some(buf) => unsafe { run.adopt(buf, v.buf_len, v.data_off, v.len, v.hash) },
                // (The batch takes it: n <= room.)
                None => match Self::copy_in(&mut self.stats, run.pool(), mb, v.len) {
                    Some(p) => run.push(p, v.hash),
                    None => false,
                },
            };
            if ok {
                bytes += u64::from(v.len);
                got += 1;
            }
        }
        drop(run);
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes;
        RxStatus::of_burst(got, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let n = batch.len();
        if n == 0 {
            return 0;
        }
        register_thread();
        let Scratch {
            tx: m,
            srcs,
            lens,
            at,
            fresh,
            ..
        } = &mut *self.scratch;
        let (mut k, mut bytes) = (0, 0u64);
        let (mut too_big, mut nomem) = (0u64, 0u64);
        // Pool frames (from ports that copy, as vhost-user) are copied into
        // mbufs taken from the pool in one go, after this pass; `at` says
        // where each goes among the mbufs sent.
        let mut c = 0;
        for p in batch.as_slice() {
            match PacketPool::external_parts(p) {
                // SAFETY: an external packet of a DPDK port is a plain mbuf
                // we own (the pool forgets it below: it is the device's).
                Some((buf, off, len)) => m[k] = unsafe { mbuf::for_tx(buf, off, len) },
                None if p.len() > MBUF_DATA_ROOM => {
                    too_big += 1;
                    continue;
                }
                None => {
                    (srcs[c], lens[c], at[c]) = (p.data().as_ptr(), p.len() as u16, k as u8);
                    c += 1;
                }
            }
            bytes += p.len() as u64;
            k += 1;
        }
        let mut copied = c as u64;
        if c > 0 {
            // SAFETY: mp is valid; srcs/lens hold c readable packets' bytes
            // (the batch still owns them) of at most the data room; fresh
            // has room for c mbufs.
            let rc = unsafe {
                sl_copy_in_bulk(
                    self.mp,
                    srcs.as_ptr(),
                    lens.as_ptr(),
                    fresh.as_mut_ptr(),
                    c as u32,
                )
            };
            for i in 0..c {
                m[usize::from(at[i])] = if rc == 0 {
                    fresh[i]
                } else {
                    // Fewer free mbufs than frames: as many as there are.
                    // SAFETY: as above, one packet.
                    let one = unsafe { sl_copy_in(self.mp, srcs[i], lens[i]) };
                    if one.is_null() {
                        nomem += 1;
                        copied -= 1;
                        bytes -= u64::from(lens[i]);
                    }
                    one
                };
            }
            if rc != 0 {
                // Those without an mbuf leave the list, the rest in order.
                let mut w = 0;
                for r in 0..k {
                    if !m[r].is_null() {
                        m[w] = m[r];
                        w += 1;
                    }
                }
                k = w;
            }
        }
        // Externals are the device's now, frames were copied: forget and free.
        if k == n && c == 0 {
            pool.release_sent_external(batch);
        } else {
            pool.release_sent(batch);
        }
        self.stats.tx_kicks += 1;
        // SAFETY: the first k entries are mbufs we own.
        let sent =
            unsafe { sl_tx_burst(self.dev.port, self.queue, m.as_mut_ptr(), k as u16) } as usize;
        if sent < k {
            for &u in &m[sent..k] {
                // SAFETY: the device did not take these; they are still ours.
                bytes -= u64::from(unsafe { mbuf::pkt_len(u) });
            }
            // SAFETY: as above.
            unsafe { sl_free_mbufs(m[sent..].as_ptr(), (k - sent) as u32) };
        }
        self.stats.tx_drop(PortDrop::TooBig, too_big);
        self.stats.tx_drop(PortDrop::NoBuffer, nomem);
        self.stats.tx_drop(PortDrop::QueueFull, (k - sent) as u64);
        self.stats.tx_copied += copied;
        self.stats.tx_packets += sent as u64;
        self.stats.tx_bytes += bytes;
        sent
    }
    fn stats(&self) -> PortStats {
        let mut s = self.stats.clone();
        if self.queue == 0 {
            // The device's own counters, once per port (queue 0 reports them).
            let mut dev = [0u64; 6];
            // SAFETY: dev holds the 6 counters sl_stats writes.
            if unsafe { sl_stats(self.dev.port, dev.as_mut_ptr()) } == 0 {
                s.rx_drop(PortDrop::KernelRingFull, dev[2]);
                s.rx_drop(PortDrop::NoBuffer, dev[5]);
                s.tx_drop(PortDrop::Error, dev[4]);
            }
        }
        s
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
