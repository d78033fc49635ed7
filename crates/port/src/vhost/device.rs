//! The vhost-user device: the state a frontend (QEMU, DPDK's virtio-user)
//! sets up over the socket, and the handler of its requests.
//!
//! The protocol itself (messages, file descriptors passed along) is the
//! `vhost` crate's; this file answers each request. What the PMD needs of
//! a queue (its rings, the guest's memory, the call eventfd) lives in a
//! [`Vq`] behind a mutex that the PMD takes once per burst and the control
//! thread takes for the moment a request changes it, as DPDK's vhost
//! library takes its per-queue `access_lock`.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{Error, GpuBackend, Result, VhostUserBackendReqHandlerMut};
use vhost::VhostUserMemoryRegionBase;
use vm_memory::{GuestAddress, GuestMemoryMmap, GuestRegionMmap};

use sluice_packet::meta::OffloadMask;

use super::guest::GuestMap;
use super::split::{RingAddrs, SplitRing};
use crate::Warnings;

/// Virtio-net feature bits Sluice offers (virtio 1.2, 5.1.3).
pub mod feature {
    /// The guest may send frames with a partial checksum.
    pub const CSUM: u64 = 1 << 0;
    /// The guest takes frames with a partial checksum.
    pub const GUEST_CSUM: u64 = 1 << 1;
    /// The guest takes TCPv4 super-frames.
    pub const GUEST_TSO4: u64 = 1 << 7;
    /// The guest takes TCPv6 super-frames.
    pub const GUEST_TSO6: u64 = 1 << 8;
    /// ... with ECN.
    pub const GUEST_ECN: u64 = 1 << 9;
    /// The guest takes UDPv4 super-frames.
    pub const GUEST_USO4: u64 = 1 << 54;
    /// The guest takes UDPv6 super-frames.
    pub const GUEST_USO6: u64 = 1 << 55;
    /// The guest may send TCPv4 super-frames.
    pub const HOST_TSO4: u64 = 1 << 11;
    /// The guest may send TCPv6 super-frames.
    pub const HOST_TSO6: u64 = 1 << 12;
    /// ... with ECN.
    pub const HOST_ECN: u64 = 1 << 13;
    /// Frames to the guest may span several receive buffers.
    pub const MRG_RXBUF: u64 = 1 << 15;
    /// Indirect descriptor tables.
    pub const INDIRECT_DESC: u64 = 1 << 28;
    /// `used_event` / `avail_event` notification suppression.
    pub const EVENT_IDX: u64 = 1 << 29;
    /// vhost-user protocol features (GET/SET_PROTOCOL_FEATURES).
    pub const PROTOCOL_FEATURES: u64 = 1 << 30;
    /// Virtio 1.0 (little-endian, 12-byte header).
    pub const VERSION_1: u64 = 1 << 32;
    /// The device uses buffers in the order they were made available
    /// (Sluice always does: chains are taken and returned in ring order),
    /// so the driver may reclaim them without searching: DPDK's virtio
    /// driver then takes its in-order paths.
    pub const IN_ORDER: u64 = 1 << 35;
    /// The guest may send UDP super-frames (USO).
    pub const HOST_USO: u64 = 1 << 56;
    /// Several queue pairs (offered when the port has more than one).
    pub const MQ: u64 = 1 << 22;

    /// What Sluice offers: the guest's offloads both ways (carried to the
    /// datapath in the packet's metadata on transmit; on receive, what
    /// the guest's driver accepted goes to it as it is, the rest is
    /// carried out by the datapath first); vhost-user protocol features,
    /// which QEMU needs to start its rings. `MQ` besides when the port has
    /// several queue pairs ([`Shared::offered`]).
    pub const OFFERED: u64 = CSUM
        | GUEST_CSUM
        | GUEST_TSO4
        | GUEST_TSO6
        | GUEST_ECN
        | GUEST_USO4
        | GUEST_USO6
        | HOST_TSO4
        | HOST_TSO6
        | HOST_ECN
        | HOST_USO
        | MRG_RXBUF
        | INDIRECT_DESC
        | EVENT_IDX
        | PROTOCOL_FEATURES
        | VERSION_1
        | IN_ORDER;
}

/// The largest ring Sluice takes (QEMU's and DPDK's largest).
pub const MAX_QUEUE_SIZE: u16 = 1024;

/// One virtqueue as the PMD uses it.
pub struct Vq {
    /// Its index (even: the guest's receive queue, odd: its transmit queue).
    pub index: usize,
    /// The ring, while it runs.
    pub ring: Option<SplitRing>,
    /// Where the frontend put it.
    addrs: RingAddrs,
    /// Where a ring starts (SET_VRING_BASE) or stopped (GET_VRING_BASE).
    next_avail: u16,
    next_used: u16,
    /// `EVENT_IDX` negotiated.
    event_idx: bool,
    /// The guest's memory (dropped, and so unmapped, on disconnect or a new
    /// table, once the ring that maps it is gone too).
    pub mem: Option<Arc<GuestMemoryMmap>>,
    /// The guest's interrupt: written to notify it of used buffers.
    pub call: Option<File>,
    /// The guest's kick (kept to hold the descriptor; Sluice polls).
    pub kick: Option<File>,
    /// SET_VRING_ENABLE (or enabled at once without protocol features).
    pub enabled: bool,
    /// The virtio-net header's length: 12 (VERSION_1 or MRG_RXBUF) or 10.
    pub hdr_len: usize,
    /// MRG_RXBUF: frames to the guest may span receive buffers.
    pub mergeable: bool,
    /// Why the queue was stopped after a guest's fault.
    pub broken: Option<String>,
}

impl Vq {
    fn new(index: usize) -> Vq {
        Vq {
            index,
            ring: None,
            addrs: RingAddrs {
                size: MAX_QUEUE_SIZE,
                ..RingAddrs::default()
            },
            next_avail: 0,
            next_used: 0,
            event_idx: false,
            mem: None,
            call: None,
            kick: None,
            enabled: false,
            hdr_len: 12,
            mergeable: false,
            broken: None,
        }
    }

    /// Whether the PMD may use the queue: its ring mapped (from
    /// SET_VRING_KICK to GET_VRING_BASE), enabled, not stopped by a fault.
    pub fn live(&self) -> bool {
        self.ring.is_some() && self.enabled && self.broken.is_none()
    }

    /// Maps the ring where the frontend put it, in the memory it gave
    /// last, from where it started or stopped.
    fn map_ring(&mut self) -> std::result::Result<(), &'static str> {
        self.unmap_ring();
        let mem = self.mem.clone().ok_or("no memory table yet")?;
        let mut ring = SplitRing::new(
            GuestMap::new(mem),
            &self.addrs,
            self.next_avail,
            self.next_used,
            self.event_idx,
        )?;
        // Sluice polls every ring it uses: the guest need not kick any
        // (a kick is a system call in the guest's driver, per burst).
        ring.no_kicks();
        self.ring = Some(ring);
        Ok(())
    }

    /// Unmaps the ring, keeping where it stopped; the next available
    /// entry's index.
    fn unmap_ring(&mut self) -> u16 {
        if let Some(mut r) = self.ring.take() {
            r.publish();
            self.next_avail = r.next_avail();
            self.next_used = r.next_used();
        }
        self.next_avail
    }

    /// Notifies the guest through its call eventfd; false when it has none
    /// or the write failed.
    pub fn notify(&self) -> bool {
        match &self.call {
            Some(f) => {
                let mut w: &File = f;
                w.write_all(&1u64.to_ne_bytes()).is_ok()
            }
            None => false,
        }
    }
}

/// What the port and its control thread share.
pub struct Shared {
    /// The virtqueues: receive (to the guest) at even, transmit (from it)
    /// at odd indices.
    pub vqs: Vec<Mutex<Vq>>,
    /// Set to stop the control thread.
    pub stop: AtomicBool,
    /// Whether a frontend is connected.
    pub connected: AtomicBool,
    /// The virtio features the guest's driver accepted (0 until then).
    pub features: AtomicU64,
    /// Problems met off the hot path (requests refused, disconnects).
    pub warnings: Mutex<Warnings>,
}

impl Shared {
    /// State for `pairs` queue pairs.
    pub fn new(pairs: usize) -> Arc<Shared> {
        Arc::new(Shared {
            vqs: (0..2 * pairs).map(|i| Mutex::new(Vq::new(i))).collect(),
            stop: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            features: AtomicU64::new(0),
            warnings: Mutex::new(Warnings::new(32)),
        })
    }

    /// Locks queue `i` (a PMD that panicked holding it leaves it usable:
    /// the state is plain data).
    pub fn vq(&self, i: usize) -> MutexGuard<'_, Vq> {
        self.vqs[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a frontend is connected and both rings of the first pair
    /// run.
    pub fn link_up(&self) -> bool {
        self.connected.load(Ordering::Acquire) && self.vq(0).live() && self.vq(1).live()
    }

    /// Queue pairs the port has.
    pub fn pairs(&self) -> usize {
        self.vqs.len() / 2
    }

    /// The virtio features offered: [`feature::OFFERED`], and `MQ` with
    /// several queue pairs.
    pub fn offered(&self) -> u64 {
        if self.pairs() > 1 {
            feature::OFFERED | feature::MQ
        } else {
            feature::OFFERED
        }
    }

    /// The offload requests the guest's driver takes with a frame.
    pub fn guest_offloads(&self) -> OffloadMask {
        let f = self.features.load(Ordering::Acquire);
        let has = |bits: u64| f & bits == bits;
        let mut m = 0;
        if has(feature::GUEST_CSUM) {
            m |= OffloadMask::CSUM;
            if has(feature::GUEST_TSO4) {
                m |= OffloadMask::TSO4;
            }
            if has(feature::GUEST_TSO6) {
                m |= OffloadMask::TSO6;
            }
            if has(feature::GUEST_USO4 | feature::GUEST_USO6) {
                m |= OffloadMask::USO;
            }
            if has(feature::GUEST_ECN) {
                m |= OffloadMask::ECN;
            }
        }
        OffloadMask(m)
    }

    /// Notes a warning.
    pub fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note(w);
    }

    /// Forgets everything the frontend set up: queues stopped, memory
    /// unmapped, eventfds closed.
    pub fn reset(&self) {
        self.features.store(0, Ordering::Release);
        for i in 0..self.vqs.len() {
            *self.vq(i) = Vq::new(i);
        }
    }
}

/// Where a region of guest memory is in the frontend's address space.
#[derive(Debug, Clone, Copy)]
struct Region {
    gpa: u64,
    size: u64,
    uva: u64,
}

/// Answers one frontend's requests (one per connection).
pub struct Handler {
    shared: Arc<Shared>,
    owned: bool,
    features: u64,
    regions: Vec<Region>,
}

fn refused(why: &'static str) -> Error {
    Error::InvalidOperation(why)
}

impl Handler {
    /// A handler for a new connection.
    pub fn new(shared: Arc<Shared>) -> Handler {
        Handler {
            shared,
            owned: false,
            features: 0,
            regions: Vec::new(),
        }
    }

    fn index(&self, i: u32) -> Result<usize> {
        let i = i as usize;
        if i < self.shared.vqs.len() {
            Ok(i)
        } else {
            Err(Error::InvalidParam)
        }
    }

    /// A frontend's address as a guest-physical one.
    fn to_gpa(&self, uva: u64) -> Result<u64> {
        self.regions
            .iter()
            .find(|r| uva >= r.uva && uva - r.uva < r.size)
            .map(|r| r.gpa + (uva - r.uva))
            .ok_or(Error::InvalidParam)
    }
}

impl VhostUserBackendReqHandlerMut for Handler {
    fn set_owner(&mut self) -> Result<()> {
        if self.owned {
            return Err(refused("already owned"));
        }
        self.owned = true;
        Ok(())
    }

    fn reset_owner(&mut self) -> Result<()> {
        self.owned = false;
        self.features = 0;
        self.shared.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> Result<()> {
        self.features = 0;
        self.shared.reset();
        Ok(())
    }

    fn get_features(&mut self) -> Result<u64> {
        Ok(self.shared.offered())
    }

    fn set_features(&mut self, features: u64) -> Result<()> {
        if features & !self.shared.offered() != 0 {
            return Err(Error::InvalidParam);
        }
        self.features = features;
        self.shared.features.store(features, Ordering::Release);
        let hdr_len = if features & (feature::VERSION_1 | feature::MRG_RXBUF) != 0 {
            12
        } else {
            10
        };
        let no_protocol = features & feature::PROTOCOL_FEATURES == 0;
        for i in 0..self.shared.vqs.len() {
            let mut vq = self.shared.vq(i);
            vq.hdr_len = hdr_len;
            vq.mergeable = features & feature::MRG_RXBUF != 0;
            vq.event_idx = features & feature::EVENT_IDX != 0;
            let on = vq.event_idx;
            if let Some(r) = vq.ring.as_mut() {
                r.set_event_idx(on);
            }
            if no_protocol {
                // Without protocol features a ring is enabled as it starts.
                vq.enabled = true;
            }
        }
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        let mut regions = Vec::with_capacity(ctx.len());
        let mut mapped = Vec::with_capacity(ctx.len());
        for (r, file) in ctx.iter().zip(files) {
            let m = r.mmap_region::<()>(file)?;
            let g = GuestRegionMmap::new(m, GuestAddress(r.guest_phys_addr))
                .ok_or(Error::InvalidParam)?;
            mapped.push(g);
            regions.push(Region {
                gpa: r.guest_phys_addr,
                size: r.memory_size,
                uva: r.user_addr,
            });
        }
        let mem = GuestMemoryMmap::from_regions(mapped)
            .map(Arc::new)
            .map_err(|_| Error::InvalidParam)?;
        for i in 0..self.shared.vqs.len() {
            let mut vq = self.shared.vq(i);
            vq.mem = Some(mem.clone());
            if vq.ring.is_some() {
                // A new table under a running ring (memory hot-plug): the
                // ring is mapped again in it, or stops.
                if let Err(why) = vq.map_ring() {
                    drop(vq);
                    self.shared
                        .warn(format!("queue {i} stopped by a new memory table: {why}"));
                }
            }
        }
        self.regions = regions;
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        let i = self.index(index)?;
        if num == 0 || num > u32::from(MAX_QUEUE_SIZE) || !num.is_power_of_two() {
            return Err(Error::InvalidParam);
        }
        self.shared.vq(i).addrs.size = num as u16;
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> Result<()> {
        let i = self.index(index)?;
        let (d, u, a) = (
            self.to_gpa(descriptor)?,
            self.to_gpa(used)?,
            self.to_gpa(available)?,
        );
        let mut vq = self.shared.vq(i);
        vq.addrs.desc = d;
        vq.addrs.used = u;
        vq.addrs.avail = a;
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        let i = self.index(index)?;
        let mut vq = self.shared.vq(i);
        vq.next_avail = base as u16;
        vq.next_used = base as u16;
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        let i = self.index(index)?;
        let mut vq = self.shared.vq(i);
        vq.kick = None;
        let base = vq.unmap_ring();
        Ok(VhostUserVringState::new(index, u32::from(base)))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let i = self.index(u32::from(index))?;
        let mut vq = self.shared.vq(i);
        vq.kick = fd;
        if let Err(why) = vq.map_ring() {
            drop(vq);
            self.shared.warn(format!("queue {i} not started: {why}"));
            return Err(Error::InvalidParam);
        }
        // A started ring is enabled until SET_VRING_ENABLE says otherwise.
        // (With protocol features the protocol has it start disabled, but
        // QEMU sends its SET_VRING_ENABLE before SET_FEATURES, which the
        // `vhost` crate refuses unanswered, so it would never run; DPDK's
        // vhost library takes the message whenever it comes.)
        vq.enabled = true;
        vq.broken = None;
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let i = self.index(u32::from(index))?;
        self.shared.vq(i).call = fd;
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        self.index(u32::from(index)).map(|_| ())
    }

    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        // No REPLY_ACK: QEMU sends SET_VRING_ENABLE before SET_FEATURES,
        // which the `vhost` crate refuses (as the protocol says) without an
        // answer; a frontend waiting for that answer would hang.
        Ok(VhostUserProtocolFeatures::MQ)
    }

    fn set_protocol_features(&mut self, _features: u64) -> Result<()> {
        Ok(())
    }

    fn get_queue_num(&mut self) -> Result<u64> {
        Ok(self.shared.vqs.len() as u64 / 2)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> Result<()> {
        let i = self.index(index)?;
        self.shared.vq(i).enabled = enable;
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        Err(refused("no device configuration space"))
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        Err(refused("no device configuration space"))
    }

    fn set_gpu_socket(&mut self, _: GpuBackend) -> Result<()> {
        Err(refused("not a GPU"))
    }

    fn get_shared_object(&mut self, _: VhostUserSharedMsg) -> Result<File> {
        Err(refused("no shared objects"))
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        Err(refused("no inflight tracking"))
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> Result<()> {
        Err(refused("no inflight tracking"))
    }

    fn get_max_mem_slots(&mut self) -> Result<u64> {
        Err(refused("memory slots not offered"))
    }

    fn add_mem_region(
        &mut self,
        _: &VhostUserSingleMemoryRegion,
        _: File,
        _: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        Err(refused("memory slots not offered"))
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> Result<()> {
        Err(refused("memory slots not offered"))
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> Result<Option<File>> {
        Err(refused("no state transfer"))
    }

    fn check_device_state(&mut self) -> Result<()> {
        Err(refused("no state transfer"))
    }

    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        Err(refused("no shared memory regions"))
    }

    fn set_log_base(&mut self, _: &VhostUserLog, _: File) -> Result<()> {
        Err(refused("no dirty logging (live migration)"))
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        // The connection is gone: the guest's memory and eventfds go with it.
        self.shared.reset();
        self.shared.connected.store(false, Ordering::Release);
    }
}
