//! vhost-user ports: virtual machines (QEMU) and DPDK's virtio-user on a
//! unix socket, without DPDK.
//!
//! `vhost:PATH` listens on PATH (as OVS's `dpdkvhostuser`); `vhost-client:
//! PATH` connects to the hypervisor's socket at PATH and reconnects
//! whenever it comes back (as OVS's `dpdkvhostuserclient`). A control
//! thread per port speaks the protocol ([`conn`], [`device`]: the `vhost`
//! crate's message layer); the PMD polls the guest's transmit rings and
//! fills its receive rings ([`split`]: Sluice's split ring over the
//! guest's mapped regions, [`guest`]; [`ring`]: frames in and out of
//! descriptor chains), taking each queue's lock once per burst. The guest
//! is asked not to kick (Sluice polls); Sluice notifies the guest through
//! its call eventfd once per burst, only when the guest wants to be told
//! (`EVENT_IDX`, `NO_INTERRUPT`): those writes are the port's `tx kicks`,
//! which output batching amortises. Several queue pairs (`MQ`): one
//! handle per pair, dealt over the PMDs.
//!
//! Copies: one each way. A guest's frame is copied from its memory into a
//! pool frame (the guest reclaims its buffer at once, so the pipeline may
//! keep, rewrite and queue the packet); a frame for the guest is copied
//! into the buffers the guest gave (guest memory is the guest's: the
//! switch cannot hand it a pool frame).

mod conn;
pub(crate) mod device;
pub mod guest;
pub mod net_hdr;
pub mod ring;
pub mod split;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use arrayvec::ArrayVec;
use sluice_packet::batch::BATCH_SIZE;
use sluice_packet::meta::OffloadMask;
use sluice_packet::offload::{from_vnet_hdr, vnet_hdr_of, VNET_HDR_LEN};
use sluice_packet::{Packet, PacketBatch, PacketPool};

use self::conn::Mode;
use self::device::{Shared, Vq};
use self::ring::{
    chain_len, read_chain, read_single, reserve_single, write_frame, write_single, ChainError,
    NetHdr, Slot, MAX_HDR_LEN,
};
use self::split::{Avail, SplitRing};
use crate::egress::{EgressQueue, PriorityClass};
use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus};

/// Queue pairs a port may have (QEMU's limit for a vhost-user netdev is
/// higher; a PMD per pair is the useful bound).
pub const MAX_PAIRS: usize = 16;

/// A vhost-user port, or one handle on it (one queue pair each).
pub struct VhostPort {
    shared: Arc<Shared>,
    /// The first handle's: it owns the control thread.
    ctl: Option<JoinHandle<()>>,
    socket: Option<crate::unix_listen::SocketFile>,
    io: Io,
}

/// A handle's own state, apart from what it shares: so that a queue's
/// lock, borrowed from the shared part, and this are borrowed side by
/// side (no reference count taken per burst: an atomic add, and with it
/// a wait for every store in flight, twice per burst).
struct Io {
    name: String,
    /// The queue pair this handle polls (and sends on, once enabled).
    pair: usize,
    /// Frames waiting for the guest to give receive buffers.
    egress: EgressQueue,
    stats: PortStats,
}

impl Io {
    fn new(name: &str, pair: usize) -> Io {
        Io {
            name: name.to_string(),
            pair,
            egress: EgressQueue::new(PriorityClass::default()),
            stats: PortStats::default(),
        }
    }
}

/// Stops queue `vq` after a guest's fault.
fn stop_queue(shared: &Shared, vq: &mut Vq, e: &ChainError) {
    vq.broken = Some(e.to_string());
    shared.warn(format!(
        "queue {} stopped: {e} (until the guest resets it)",
        vq.index
    ));
}

/// The guest's receive queue of pair `p` (Sluice sends on it) and its
/// transmit queue (Sluice polls it).
fn to_guest(pair: usize) -> usize {
    2 * pair
}
fn from_guest(pair: usize) -> usize {
    2 * pair + 1
}

/// The guest's receive queue handle `pair` sends on, locked: its own
/// pair's while the guest runs it, else pair 0's.
fn tx_vq(shared: &Shared, pair: usize) -> MutexGuard<'_, Vq> {
    let own = shared.vq(to_guest(pair));
    if pair == 0 || own.live() {
        return own;
    }
    drop(own);
    shared.vq(to_guest(0))
}

impl VhostPort {
    /// Opens a port: listens on `path` when `server`, else connects to it
    /// (in the background, again whenever the frontend goes).
    pub fn open(name: &str, path: &Path, server: bool) -> Result<VhostPort, PortError> {
        Self::open_pairs(name, path, server, 1)
    }

    /// [`open`](Self::open) with `pairs` queue pairs.
    fn open_pairs(
        name: &str,
        path: &Path,
        server: bool,
        pairs: usize,
    ) -> Result<VhostPort, PortError> {
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
        let shared = Shared::new(pairs);
        links().push((path.to_path_buf(), Arc::downgrade(&shared)));
        let ctl = {
            let (shared, name) = (shared.clone(), name.to_string());
            std::thread::Builder::new()
                .name("vhost-ctl".into())
                .spawn(move || conn::run(&name, &mode, &shared))
                .map_err(|e| err(format!("cannot start its control thread: {e}")))?
        };
        Ok(VhostPort {
            shared,
            ctl: Some(ctl),
            socket,
            io: Io::new(name, 0),
        })
    }

    /// The port with `n` queue pairs (virtio's `MQ`), one handle each,
    /// dealt over the PMDs as other ports' rx queues are: handle `i` polls
    /// the guest's transmit queue of pair `i` and sends on pair `i`'s
    /// receive queue, or on pair 0's while the guest has not enabled
    /// pair `i` (a guest may use fewer pairs than offered). The first
    /// handle owns the control thread.
    pub fn open_shared(
        name: &str,
        path: &Path,
        server: bool,
        n: usize,
    ) -> Result<Vec<VhostPort>, PortError> {
        if n > MAX_PAIRS {
            return Err(PortError {
                port: name.to_string(),
                message: format!("{n} queue pairs: a vhost-user port has at most {MAX_PAIRS}"),
            });
        }
        let first = VhostPort::open_pairs(name, path, server, n.max(1))?;
        let shared = first.shared.clone();
        let mut all = vec![first];
        all.extend((1..n).map(|pair| VhostPort {
            shared: shared.clone(),
            ctl: None,
            socket: None,
            io: Io::new(name, pair),
        }));
        Ok(all)
    }
}

impl Port for VhostPort {
    fn name(&self) -> &str {
        &self.io.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: true,
            finite_rx: false,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: true,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let mut guard = self.shared.vq(from_guest(self.io.pair));
        if !guard.live() {
            return RxStatus::Idle;
        }
        let vq = &mut *guard;
        let hdr_len = vq.hdr_len;
        let ring = vq.ring.as_mut().expect("a live queue has a ring");
        // The chains the guest offers, read off its ring with one look at
        // its index.
        let mut avail = match ring.avail() {
            Ok(a) => a,
            Err(e) => {
                stop_queue(&self.shared, vq, &e);
                return RxStatus::Idle;
            }
        };
        let mut heads: ArrayVec<u16, BATCH_SIZE> = ArrayVec::new();
        let mut fault = None;
        while heads.len() < batch.remaining() {
            match ring.next_head(&mut avail) {
                None => break,
                Some(Ok(h)) => heads.push(h),
                Some(Err(e)) => {
                    fault = Some(e);
                    break;
                }
            }
        }
        // Ask for every frame's first lines before copying any: the guest
        // wrote them on another core, and one miss at a time is what a
        // burst would otherwise wait for (DPDK's vhost library does the same).
        for &h in &heads {
            if let Some(d) = ring.first(h) {
                ring.map().prefetch(d.addr, d.len as usize);
            }
        }
        let mut n = 0;
        let mut taken = 0u16;
        for &head in &heads {
            let mut hdr = [0u8; MAX_HDR_LEN];
            let mut pkt = match read_from_guest(pool, ring, head, &mut hdr[..hdr_len]) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(ChainError::TooBig) => {
                    self.io.stats.rx_drop(PortDrop::TooBig, 1);
                    ring.push_used(head, 0);
                    taken += 1;
                    continue;
                }
                Err(e) => {
                    self.io.stats.rx_drop(PortDrop::GuestFault, 1);
                    fault = Some(e);
                    break;
                }
            };
            ring.push_used(head, 0);
            taken += 1;
            let h: &[u8; VNET_HDR_LEN] = hdr[..VNET_HDR_LEN].try_into().expect("10 bytes");
            match from_vnet_hdr(h) {
                Ok(o) => pkt.meta.offload = o,
                Err(_) => {
                    self.io.stats.rx_drop(PortDrop::BadOffload, 1);
                    pool.free(pkt);
                    continue;
                }
            }
            pkt.meta.in_port = in_port;
            self.io.stats.rx_packets += 1;
            self.io.stats.rx_bytes += pkt.len() as u64;
            self.io.stats.rx_copied += 1;
            if pkt.meta.offload.gso() != 0 {
                self.io.stats.rx_gso_packets += 1;
            }
            let _ = batch.push(pkt);
            n += 1;
        }
        // The chains not taken (no pool frame free) stay for later.
        ring.advance(taken);
        ring.publish();
        if ring.wants_interrupt() {
            vq.notify();
        }
        if let Some(e) = fault {
            stop_queue(&self.shared, vq, &e);
        }
        RxStatus::of_burst(n, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let mut guard = tx_vq(&self.shared, self.io.pair);
        if !guard.live() {
            let n = batch.len() as u64;
            self.io.stats.tx_drop(PortDrop::NotConnected, n);
            batch.free_all(pool);
            return 0;
        }
        // Frames already waiting go first; while none wait, this batch's
        // go straight from it into the guest's buffers; what the guest has
        // no room for now joins the egress queue.
        let vq = &mut *guard;
        self.io.drain_egress(&self.shared, vq, pool);
        let mut taken = 0;
        if self.io.egress.is_empty() && !batch.is_empty() {
            taken += self.io.write_batch(&self.shared, vq, pool, batch);
        }
        for pkt in batch.drain() {
            taken += usize::from(self.io.egress.offer(pkt, pool, &mut self.io.stats));
        }
        self.io.interrupt(vq);
        taken
    }

    fn tx_pending(&self) -> usize {
        self.io.egress.len()
    }

    fn tx_drain(&mut self, pool: &mut PacketPool) {
        let mut guard = tx_vq(&self.shared, self.io.pair);
        if guard.live() {
            self.io.drain_egress(&self.shared, &mut guard, pool);
            self.io.interrupt(&mut guard);
        } else {
            // The guest went: what waited for it cannot be sent.
            let n = self.io.egress.clear(pool);
            self.io.stats.tx_drop(PortDrop::NotConnected, n as u64);
        }
    }

    fn flush(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        self.tx_drain(pool);
        let n = self.io.egress.clear(pool);
        self.io.stats.tx_drop(PortDrop::QueueFull, n as u64);
        Ok(())
    }

    fn tx_offloads(&self) -> OffloadMask {
        self.shared.guest_offloads()
    }

    fn stats(&self) -> PortStats {
        let mut s = self.io.stats.clone();
        s.tx_high_priority = self.io.egress.high_packets;
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

impl Io {
    /// Moves waiting frames into the guest's receive buffers while it has
    /// some (one look at its ring index, one used-index store). `vq` is
    /// live.
    fn drain_egress(&mut self, shared: &Shared, vq: &mut Vq, pool: &mut PacketPool) {
        if self.egress.is_empty() {
            return;
        }
        let Some(mut w) = ToGuest::start(self, shared, vq, pool) else {
            return;
        };
        while let Some(pkt) = w.io.egress.pop_within_limit() {
            match w.write(&pkt) {
                Wrote::Done => w.pool.free(pkt),
                Wrote::NoRoom => {
                    w.io.egress.unpop(pkt);
                    break;
                }
                Wrote::Fault => {
                    w.pool.free(pkt);
                    break;
                }
            }
        }
        w.finish();
    }

    /// Writes `batch`'s frames into the guest's buffers, from its front,
    /// read in place; those written (or dropped: too big, a guest fault)
    /// leave the batch, the others stay in it in order. How many left.
    ///
    /// In runs: the chains of as many frames as single buffers hold are
    /// taken first (descriptors read, the buffers' lines asked for), then
    /// the frames written (`ring::reserve_single`); a frame that spans
    /// buffers or meets a fault goes the general way on its own.
    fn write_batch(
        &mut self,
        shared: &Shared,
        vq: &mut Vq,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
    ) -> usize {
        if vq.broken.is_some() {
            // `drain_egress` met a fault a moment ago: the frames are
            // queued, and dropped when the queue is found stopped.
            return 0;
        }
        let Some(mut w) = ToGuest::start(self, shared, vq, pool) else {
            return 0;
        };
        let pkts = batch.as_slice();
        let mut n = 0;
        'frames: while n < pkts.len() {
            let run = w.reserve_run(&pkts[n..]);
            if run.is_empty() {
                match w.write(&pkts[n]) {
                    Wrote::Done => n += 1,
                    Wrote::NoRoom => break,
                    Wrote::Fault => {
                        n += 1;
                        break;
                    }
                }
                continue;
            }
            for (&slot, pkt) in run.iter().zip(&pkts[n..]) {
                n += 1;
                if let Wrote::Fault = w.write_single(slot, pkt) {
                    break 'frames;
                }
            }
        }
        w.finish();
        batch.free_front(n, pool);
        n
    }

    /// Tells the guest of frames written since it was last told, if it
    /// wants to be told: one eventfd write (a `tx kick`) for them all.
    fn interrupt(&mut self, vq: &mut Vq) {
        let Some(ring) = vq.ring.as_mut() else {
            return;
        };
        if ring.wants_interrupt() && vq.notify() {
            self.stats.tx_kicks += 1;
        }
    }
}

/// What writing one frame into the guest's buffers came to.
enum Wrote {
    /// Written, or dropped and counted (too big for the guest's buffers).
    Done,
    /// The guest has no buffers for it now.
    NoRoom,
    /// The guest's ring is broken: dropped and counted, the queue stops.
    Fault,
}

/// One burst of frames into the guest's receive ring: its available index
/// read once at the start, the used entries published once at the end.
struct ToGuest<'a> {
    io: &'a mut Io,
    shared: &'a Shared,
    vq: &'a mut Vq,
    pool: &'a mut PacketPool,
    avail: Avail,
    fault: Option<ChainError>,
}

impl<'a> ToGuest<'a> {
    /// `None` when the guest's ring index is broken (the queue stops).
    fn start(
        io: &'a mut Io,
        shared: &'a Shared,
        vq: &'a mut Vq,
        pool: &'a mut PacketPool,
    ) -> Option<ToGuest<'a>> {
        let ring = vq.ring.as_mut().expect("a live queue has a ring");
        match ring.avail() {
            Ok(avail) => Some(ToGuest {
                io,
                shared,
                vq,
                pool,
                avail,
                fault: None,
            }),
            Err(e) => {
                stop_queue(shared, vq, &e);
                None
            }
        }
    }

    /// Takes the chains of a run of frames from the front of `pkts` that
    /// each fit one receive buffer: empty when the first does not.
    #[inline]
    fn reserve_run(&mut self, pkts: &[Packet]) -> ArrayVec<Slot, BATCH_SIZE> {
        let mut run = ArrayVec::new();
        let hdr_len = self.vq.hdr_len;
        let ring = self.vq.ring.as_ref().expect("a live queue has a ring");
        for pkt in pkts.iter().take(BATCH_SIZE) {
            match reserve_single(ring, &mut self.avail, hdr_len + pkt.len()) {
                Some(slot) => run.push(slot),
                None => break,
            }
        }
        run
    }

    /// Writes `pkt` into the buffer `slot` reserved for it.
    #[inline]
    fn write_single(&mut self, slot: Slot, pkt: &Packet) -> Wrote {
        let hdr = net_hdr_of(pkt, self.vq.hdr_len);
        let ring = self.vq.ring.as_mut().expect("a live queue has a ring");
        match write_single(ring, slot, hdr, pkt.data()) {
            Ok(()) => {
                count_sent(&mut self.io.stats, pkt);
                Wrote::Done
            }
            Err(e) => {
                self.io.stats.tx_drop(PortDrop::GuestFault, 1);
                self.fault = Some(e);
                Wrote::Fault
            }
        }
    }

    /// Writes `pkt` into as many of the guest's buffers as it takes.
    #[inline]
    fn write(&mut self, pkt: &Packet) -> Wrote {
        if self.avail.is_empty() {
            return Wrote::NoRoom;
        }
        let (hdr_len, mergeable) = (self.vq.hdr_len, self.vq.mergeable);
        let ring = self.vq.ring.as_mut().expect("a live queue has a ring");
        let hdr = net_hdr_of(pkt, hdr_len);
        let stats = &mut self.io.stats;
        match write_frame(ring, &mut self.avail, hdr, pkt.data(), mergeable) {
            Ok(true) => {
                count_sent(stats, pkt);
                Wrote::Done
            }
            Ok(false) => Wrote::NoRoom,
            Err(ChainError::TooBig) => {
                stats.tx_drop(PortDrop::TooBig, 1);
                Wrote::Done
            }
            Err(e) => {
                stats.tx_drop(PortDrop::GuestFault, 1);
                self.fault = Some(e);
                Wrote::Fault
            }
        }
    }

    /// Takes the chains used, publishes them, stops the queue after a
    /// fault.
    fn finish(self) {
        let ring = self.vq.ring.as_mut().expect("a live queue has a ring");
        ring.consume(&self.avail);
        ring.publish();
        if let Some(e) = self.fault {
            stop_queue(self.shared, self.vq, &e);
        }
    }
}

/// The virtio-net header of a frame for the guest: the offload requests
/// the guest accepted go with the frame (the datapath carried out the
/// others).
#[inline]
fn net_hdr_of(pkt: &Packet, hdr_len: usize) -> NetHdr {
    if pkt.meta.offload.pending() {
        NetHdr::new(&vnet_hdr_of(pkt), hdr_len)
    } else {
        NetHdr::zero(hdr_len)
    }
}

/// Counts `pkt` sent into the guest's buffers.
#[inline]
fn count_sent(stats: &mut PortStats, pkt: &Packet) {
    stats.tx_packets += 1;
    stats.tx_gso_packets += u64::from(pkt.meta.offload.gso() != 0);
    stats.tx_bytes += pkt.len() as u64;
    stats.tx_copied += 1;
}

/// Copies the transmit chain at `head` out of the guest into a pool
/// frame: a regular one, or a big one for a frame that does not fit.
/// `Ok(None)`: no frame free (the chain stays for later).
fn read_from_guest(
    pool: &mut PacketPool,
    ring: &SplitRing,
    head: u16,
    hdr: &mut [u8],
) -> Result<Option<Packet>, ChainError> {
    let Some(mut pkt) = pool.alloc() else {
        return Ok(None);
    };
    pkt.set_len(pool.max_packet_len());
    if let Some(got) = read_single(ring, head, hdr, pkt.data_mut()) {
        pkt.set_len(got);
        return Ok(Some(pkt));
    }
    match read_chain(ring, head, hdr, pkt.data_mut()) {
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
    let len = (chain_len(ring, head, false)? as usize).saturating_sub(hdr.len());
    if len > pool.max_len() {
        return Err(ChainError::TooBig);
    }
    let Some(mut big) = pool.alloc_for(len) else {
        return Ok(None);
    };
    big.set_len(len);
    match read_chain(ring, head, hdr, big.data_mut()) {
        Ok(got) => {
            big.set_len(got);
            Ok(Some(big))
        }
        Err(e) => {
            pool.free(big);
            // Longer now than a moment ago: the guest changed the chain
            // under us.
            Err(if e == ChainError::TooBig {
                ChainError::Changed
            } else {
                e
            })
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
