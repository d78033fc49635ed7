//! vhost-user ports: virtual machines (QEMU) and DPDK's virtio-user on a
//! unix socket, without DPDK.
//!
//! `vhost:PATH` listens on PATH (as OVS's `dpdkvhostuser`); `vhost-client:
//! PATH` connects to the hypervisor's socket at PATH and reconnects
//! whenever it comes back (as OVS's `dpdkvhostuserclient`). A control
//! thread per port speaks the protocol ([`conn`], [`device`]: the `vhost`
//! crate's message layer); the PMD polls the guest's transmit ring and
//! fills its receive ring ([`ring`]: `virtio-queue` split rings over
//! `vm-memory`'s checked guest memory), taking each queue's lock once per
//! burst. The guest is asked not to kick (Sluice polls); Sluice notifies
//! the guest through its call eventfd once per burst, only when the guest
//! wants to be told (`EVENT_IDX`, `NO_INTERRUPT`): those writes are the
//! port's `tx kicks`, which output batching amortises.
//!
//! Copies: one each way. A guest's frame is copied from its memory into a
//! pool frame (the guest reclaims its buffer at once, so the pipeline may
//! keep, rewrite and queue the packet); a frame for the guest is copied
//! into the buffers the guest gave (guest memory is the guest's: the
//! switch cannot hand it a pool frame).

mod conn;
pub(crate) mod device;
pub mod ring;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use arrayvec::ArrayVec;
use sluice_packet::batch::BATCH_SIZE;
use sluice_packet::meta::OffloadMask;
use sluice_packet::offload::{from_vnet_hdr, vnet_hdr_of, VNET_HDR_LEN};
use sluice_packet::{Packet, PacketBatch, PacketPool};
use virtio_queue::{DescriptorChain, QueueOwnedT, QueueT};
use vm_memory::{GuestMemoryBackend, GuestMemoryMmap};

use self::conn::Mode;
use self::device::{Shared, Vq};
use self::ring::{
    chain_len, read_chain, wants_interrupt, write_frame, ChainError, Used, MAX_HDR_LEN,
};
use crate::egress::{EgressQueue, PriorityClass};
use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus};

/// A vhost-user port (one queue pair), or one PMD's handle on it.
pub struct VhostPort {
    name: String,
    shared: Arc<Shared>,
    /// The first handle's: it owns the control thread and polls the
    /// guest's transmit ring.
    ctl: Option<JoinHandle<()>>,
    socket: Option<crate::unix_listen::SocketFile>,
    /// Frames waiting for the guest to give receive buffers.
    egress: EgressQueue,
    stats: PortStats,
}

/// Queue pairs a port offers.
const PAIRS: usize = 1;
/// The guest's receive queue (Sluice sends on it) and transmit queue.
const TO_GUEST: usize = 0;
const FROM_GUEST: usize = 1;

impl VhostPort {
    /// Opens a port: listens on `path` when `server`, else connects to it
    /// (in the background, again whenever the frontend goes).
    pub fn open(name: &str, path: &Path, server: bool) -> Result<VhostPort, PortError> {
        let err = |message: String| PortError {
            port: name.to_string(),
            message,
        };
        let (mode, socket) = if server {
            let (l, f) =
                crate::unix_listen::listen(path).map_err(|e| err(format!("cannot listen: {e}")))?;
            l.set_nonblocking(true)
                .map_err(|e| err(format!("cannot listen: {e}")))?;
            (Mode::Server(l), Some(f))
        } else {
            if path.as_os_str().len() > crate::unix_listen::MAX_SOCKET_PATH {
                return Err(err(format!(
                    "socket path longer than {} bytes",
                    crate::unix_listen::MAX_SOCKET_PATH
                )));
            }
            (Mode::Client(path.to_path_buf()), None)
        };
        let shared = Shared::new(PAIRS);
        links().push((path.to_path_buf(), Arc::downgrade(&shared)));
        let ctl = {
            let (shared, name) = (shared.clone(), name.to_string());
            std::thread::Builder::new()
                .name("vhost-ctl".into())
                .spawn(move || conn::run(&name, &mode, &shared))
                .map_err(|e| err(format!("cannot start its control thread: {e}")))?
        };
        Ok(VhostPort {
            name: name.to_string(),
            shared,
            ctl: Some(ctl),
            socket,
            egress: EgressQueue::new(PriorityClass::default()),
            stats: PortStats::default(),
        })
    }

    /// The port as `n` handles, one per PMD thread: the first owns the
    /// control thread and polls the guest's transmit ring; every handle
    /// sends into the guest's receive ring (taking its lock per burst,
    /// with an egress queue of its own). One queue pair until the port
    /// offers several (`MQ`).
    pub fn open_shared(
        name: &str,
        path: &Path,
        server: bool,
        n: usize,
    ) -> Result<Vec<VhostPort>, PortError> {
        let first = VhostPort::open(name, path, server)?;
        let mut all = Vec::with_capacity(n);
        for _ in 1..n {
            all.push(VhostPort {
                name: name.to_string(),
                shared: first.shared.clone(),
                ctl: None,
                socket: None,
                egress: EgressQueue::new(PriorityClass::default()),
                stats: PortStats::default(),
            });
        }
        all.insert(0, first);
        Ok(all)
    }

    /// Stops queue `vq` after a guest's fault.
    fn fault(&self, vq: &mut Vq, which: usize, e: &ChainError) {
        vq.broken = Some(e.to_string());
        self.shared.warn(format!(
            "queue {which} stopped: {e} (until the guest resets it)"
        ));
    }
}

impl Port for VhostPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: true,
            finite_rx: false,
            rx_hash: false,
            tx_offload: false,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        if self.ctl.is_none() {
            // Another handle polls the guest's transmit ring.
            return RxStatus::Idle;
        }
        let shared = self.shared.clone();
        let mut guard = shared.vq(FROM_GUEST);
        if !guard.live() {
            return RxStatus::Idle;
        }
        let vq = &mut *guard;
        let mem = vq.mem.clone().expect("a live queue has memory");
        let mem = &*mem;
        if !vq.kicks_off {
            // Sluice polls: the guest need not kick.
            let _ = vq.queue.disable_notification(mem);
            vq.kicks_off = true;
        }
        let hdr_len = vq.hdr_len;
        // The chains the guest offers, read off its ring with one look at
        // its index; those not taken below are handed back.
        let mut chains: ArrayVec<DescriptorChain<&GuestMemoryMmap>, BATCH_SIZE> = ArrayVec::new();
        if let Ok(it) = vq.queue.iter(mem) {
            chains.extend(it.take(batch.remaining()));
        }
        let popped = chains.len();
        // Ask for every frame's first lines before copying any: the guest
        // wrote them on another core, and one miss at a time is what a
        // burst would otherwise wait for (DPDK's vhost library does the same).
        for chain in chains.iter() {
            if let Some(d) = chain.clone().next() {
                let len = (d.len() as usize).min(128);
                if let Ok(s) = mem.get_slice(d.addr(), len) {
                    let p = s.ptr_guard().as_ptr();
                    sluice_packet::prefetch::read_addr(p);
                    sluice_packet::prefetch::read_addr(p.wrapping_add(64));
                }
            }
        }
        let (mut n, mut used) = (0, 0);
        let mut fault = None;
        for chain in chains {
            let head = chain.head_index();
            let mut hdr = [0u8; MAX_HDR_LEN];
            let pkt = match self.read_from_guest(pool, mem, chain, &mut hdr[..hdr_len]) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(ChainError::TooBig) => {
                    self.stats.rx_drop(PortDrop::TooBig, 1);
                    let _ = vq.queue.add_used(mem, head, 0);
                    used += 1;
                    continue;
                }
                Err(e) => {
                    self.stats.rx_drop(PortDrop::GuestFault, 1);
                    fault = Some(e);
                    break;
                }
            };
            let _ = vq.queue.add_used(mem, head, 0);
            used += 1;
            let mut pkt = pkt;
            let h: &[u8; VNET_HDR_LEN] = hdr[..VNET_HDR_LEN].try_into().expect("10 bytes");
            match from_vnet_hdr(h) {
                Ok(o) => pkt.meta.offload = o,
                Err(_) => {
                    self.stats.rx_drop(PortDrop::BadOffload, 1);
                    pool.free(pkt);
                    continue;
                }
            }
            pkt.meta.in_port = in_port;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += pkt.len() as u64;
            self.stats.rx_copied += 1;
            if pkt.meta.offload.gso() != 0 {
                self.stats.rx_gso_packets += 1;
            }
            let _ = batch.push(pkt);
            n += 1;
        }
        for _ in used..popped {
            vq.queue.go_to_previous_position();
        }
        if let Some(e) = fault {
            self.fault(vq, FROM_GUEST, &e);
        }
        if used > 0 && wants_interrupt(&mut vq.queue, mem) {
            vq.notify();
        }
        RxStatus::of_burst(n, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let shared = self.shared.clone();
        let mut guard = shared.vq(TO_GUEST);
        if !guard.live() {
            let n = batch.len() as u64;
            self.stats.tx_drop(PortDrop::NotConnected, n);
            batch.drain().for_each(|p| pool.free(p));
            return 0;
        }
        // Every frame joins the egress queue (behind those already
        // waiting, high-priority ones first), which then goes into the
        // guest's buffers as far as they reach.
        let mut taken = 0;
        for pkt in batch.drain() {
            taken += usize::from(self.egress.offer(pkt, pool, &mut self.stats));
        }
        let mem = guard.mem.clone().expect("a live queue has memory");
        self.drain_egress(&mut guard, &mem, pool);
        self.interrupt(&mut guard);
        taken
    }

    fn tx_pending(&self) -> usize {
        self.egress.len()
    }

    fn tx_drain(&mut self, pool: &mut PacketPool) {
        let shared = self.shared.clone();
        let mut guard = shared.vq(TO_GUEST);
        if guard.live() {
            let mem = guard.mem.clone().expect("a live queue has memory");
            self.drain_egress(&mut guard, &mem, pool);
            self.interrupt(&mut guard);
        } else {
            // The guest went: what waited for it cannot be sent.
            let n = self.egress.clear(pool);
            self.stats.tx_drop(PortDrop::NotConnected, n as u64);
        }
    }

    fn flush(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        self.tx_drain(pool);
        let n = self.egress.clear(pool);
        self.stats.tx_drop(PortDrop::QueueFull, n as u64);
        Ok(())
    }

    fn tx_offloads(&self) -> OffloadMask {
        self.shared.guest_offloads()
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats.clone();
        s.tx_high_priority = self.egress.high_packets;
        s
    }

    fn warnings(&self) -> Vec<String> {
        self.shared
            .warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .to_vec()
    }
}

impl VhostPort {
    /// Copies one transmit chain out of the guest into a pool frame: a
    /// regular one, or a big one for a frame that does not fit.
    /// `Ok(None)`: no frame free (the chain stays for later).
    fn read_from_guest(
        &mut self,
        pool: &mut PacketPool,
        mem: &GuestMemoryMmap,
        chain: DescriptorChain<&GuestMemoryMmap>,
        hdr: &mut [u8],
    ) -> Result<Option<Packet>, ChainError> {
        let Some(mut pkt) = pool.alloc() else {
            return Ok(None);
        };
        pkt.set_len(pool.max_packet_len());
        match read_chain(mem, chain.clone(), hdr, pkt.data_mut()) {
            Ok(got) => {
                pkt.set_len(got);
                return Ok(Some(pkt));
            }
            Err(ChainError::TooBig) => pool.free(pkt),
            Err(e) => {
                pool.free(pkt);
                return Err(e);
            }
        }
        let len = (chain_len(chain.clone(), false)? as usize).saturating_sub(hdr.len());
        if len > pool.max_len() {
            return Err(ChainError::TooBig);
        }
        let Some(mut big) = pool.alloc_for(len) else {
            return Ok(None);
        };
        big.set_len(len);
        match read_chain(mem, chain, hdr, big.data_mut()) {
            Ok(got) => {
                big.set_len(got);
                Ok(Some(big))
            }
            Err(e) => {
                pool.free(big);
                // Longer now than a moment ago: the guest changed the
                // chain under us.
                Err(if e == ChainError::TooBig {
                    ChainError::WrongDirection
                } else {
                    e
                })
            }
        }
    }

    /// Moves waiting frames into the guest's receive buffers while it has
    /// some: the guest's ring index read once per round, the used ring
    /// written once per round (up to [`ring::USED_PER_BURST`] chains).
    fn drain_egress(&mut self, vq: &mut Vq, mem: &GuestMemoryMmap, pool: &mut PacketPool) {
        if vq.broken.is_some() {
            let n = self.egress.clear(pool);
            self.stats.tx_drop(PortDrop::GuestFault, n as u64);
            return;
        }
        let (hdr_len, mergeable) = (vq.hdr_len, vq.mergeable);
        loop {
            let mut used = Used::new();
            let mut fault = None;
            if let Ok(mut avail) = vq.queue.iter(mem) {
                while let Some(pkt) = self.egress.pop_within_limit() {
                    // The offload requests the guest accepted go with the
                    // frame (the datapath carried out the others).
                    let mut hdr = [0u8; MAX_HDR_LEN];
                    if pkt.meta.offload.pending() {
                        hdr[..VNET_HDR_LEN].copy_from_slice(&vnet_hdr_of(&pkt));
                    }
                    let gso = pkt.meta.offload.gso() != 0;
                    let wrote = write_frame(
                        &mut avail,
                        mem,
                        &hdr[..hdr_len],
                        pkt.data(),
                        mergeable,
                        &mut used,
                    );
                    match wrote {
                        Ok(true) => {
                            self.stats.tx_packets += 1;
                            self.stats.tx_gso_packets += u64::from(gso);
                            self.stats.tx_bytes += pkt.len() as u64;
                            self.stats.tx_copied += 1;
                            vq.unsignalled += 1;
                            pool.free(pkt);
                        }
                        Ok(false) => {
                            self.egress.unpop(pkt);
                            break;
                        }
                        Err(ChainError::TooBig) => {
                            self.stats.tx_drop(PortDrop::TooBig, 1);
                            pool.free(pkt);
                        }
                        Err(e) => {
                            self.stats.tx_drop(PortDrop::GuestFault, 1);
                            pool.free(pkt);
                            fault = Some(e);
                            break;
                        }
                    }
                }
            }
            for &(head, len) in &used {
                let _ = vq.queue.add_used(mem, head, len);
            }
            if let Some(e) = fault {
                self.fault(vq, TO_GUEST, &e);
                return;
            }
            // Another round only when this one stopped for want of room
            // in `used`, not of the guest's buffers.
            if used.len() + ring::MAX_CHAINS_PER_FRAME <= used.capacity() || self.egress.is_empty()
            {
                return;
            }
        }
    }

    /// Tells the guest of frames written since it was last told, if it
    /// wants to be told: one eventfd write (a `tx kick`) for them all.
    fn interrupt(&mut self, vq: &mut Vq) {
        if vq.unsignalled == 0 {
            return;
        }
        vq.unsignalled = 0;
        let mem = vq.mem.clone().expect("a live queue has memory");
        if wants_interrupt(&mut vq.queue, &*mem) && vq.notify() {
            self.stats.tx_kicks += 1;
        }
    }
}

/// The ports open in this process, by socket path, for [`link_up`].
fn links() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Weak<Shared>)>> {
    static LINKS: Mutex<Vec<(PathBuf, Weak<Shared>)>> = Mutex::new(Vec::new());
    LINKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The link of the vhost-user port on socket `path` in this process: up
/// while a frontend is connected and both its rings run (the guest's
/// driver is loaded); `None` when no such port is open. What OpenFlow's
/// PORT_STATUS and port descriptions say of the port.
pub fn link_up(path: &Path) -> Option<bool> {
    links()
        .iter()
        .find(|(p, _)| p == path)
        .and_then(|(_, w)| w.upgrade())
        .map(|s| s.link_up())
}

impl Drop for VhostPort {
    fn drop(&mut self) {
        if self.ctl.is_none() {
            return;
        }
        links().retain(|(_, w)| {
            w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.shared))
        });
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.ctl.take() {
            let _ = t.join();
        }
        if let Some(f) = &self.socket {
            f.remove();
        }
    }
}
