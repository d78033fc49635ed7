//! The AF_XDP port (`afxdp:IFNAME[:QUEUE]`).
//!
//! The UMEM *is* the datapath's packet pool: every pool frame is a UMEM
//! chunk, so a received frame becomes a [`Packet`] where the kernel wrote it
//! and a packet is sent from where it lies, whatever port it came from (no
//! copy between ring and datapath). Frames handed to the kernel (fill ring,
//! tx ring) are held by the port until the kernel gives them back (rx ring,
//! completion ring); completions are reclaimed at every burst and every
//! poll iteration, so sustained tx never starves the pool.
//!
//! Sluice loads a tiny XDP program ([`crate::xdp_prog`]) that redirects the
//! queue to the socket, attached through a BPF link (removed on exit).
//! Zero-copy is tried first; where the driver cannot (veth), the socket
//! binds in copy mode. `need_wakeup` is used: the kernel is kicked only when
//! it asks. Several AF_XDP ports of one datapath share the one UMEM.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use sluice_packet::{Packet, PacketBatch, PacketPool};

use crate::egress::EgressQueue;
use crate::sys::{self, Mmap};
use crate::xdp_prog::{XdpRedirect, MAX_QUEUES};
use crate::{fits_mtu, Port, PortCaps, PortDrop, PortError, PortStats, RxStatus, Warnings};

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_SHARED_UMEM: u16 = 1;
const XDP_COPY: u16 = 2;
const XDP_ZEROCOPY: u16 = 4;
const XDP_USE_NEED_WAKEUP: u16 = 8;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const PGOFF_RX: i64 = 0;
const PGOFF_TX: i64 = 0x8000_0000;
const PGOFF_FILL: i64 = 0x1_0000_0000;
const PGOFF_COMPLETION: i64 = 0x1_8000_0000;

/// Entries per ring.
const RING_SIZE: u32 = 1024;
/// Frames kept in the fill ring (at most; fewer when the pool is short).
const FILL_TARGET: usize = 1024;

/// The pool frames a datapath with `sockets` AF_XDP sockets on its pool
/// should have at least: each socket lends [`FILL_TARGET`] frames to its
/// fill ring, and as many again stay free for output queues, the copies a
/// multi-output rule makes and packet-ins.
pub fn pool_frames_for(sockets: usize) -> usize {
    sockets * FILL_TARGET * 2
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingOffsets {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffsets,
    tx: RingOffsets,
    fill: RingOffsets,
    completion: RingOffsets,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// One mapped ring: producer/consumer indexes shared with the kernel and
/// `RING_SIZE` entries of `entry` bytes.
struct Ring {
    map: Mmap,
    off: RingOffsets,
    entry: usize,
    /// Our copy of the index we move (producer for fill/tx, consumer for
    /// rx/completion).
    local: u32,
}

impl Ring {
    fn map(fd: &OwnedFd, off: RingOffsets, entry: usize, pgoff: i64) -> io::Result<Ring> {
        let len = off.desc as usize + RING_SIZE as usize * entry;
        let map = Mmap::new(fd.as_raw_fd(), len, pgoff)?;
        let mut r = Ring {
            map,
            off,
            entry,
            local: 0,
        };
        r.local = if pgoff == PGOFF_RX || pgoff == PGOFF_COMPLETION {
            r.index(off.consumer).load(Ordering::Relaxed)
        } else {
            r.index(off.producer).load(Ordering::Relaxed)
        };
        Ok(r)
    }

    fn index(&self, ofs: u64) -> &AtomicU32 {
        // SAFETY: the kernel's ring offsets point at 4-byte aligned u32
        // indexes inside the map, which lives as long as self.
        unsafe { &*self.map.as_ptr().add(ofs as usize).cast::<AtomicU32>() }
    }

    fn slot(&self, i: u32) -> *mut u8 {
        // SAFETY: (i & mask) < RING_SIZE entries follow `desc` in the map.
        unsafe {
            self.map
                .as_ptr()
                .add(self.off.desc as usize + (i & (RING_SIZE - 1)) as usize * self.entry)
        }
    }

    fn needs_wakeup(&self) -> bool {
        self.index(self.off.flags).load(Ordering::Acquire) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: free entries.
    fn free(&self) -> u32 {
        let cons = self.index(self.off.consumer).load(Ordering::Acquire);
        RING_SIZE - self.local.wrapping_sub(cons)
    }

    fn write_addr(&mut self, addr: u64) {
        // SAFETY: a free producer slot (checked by the caller via free()).
        unsafe { self.slot(self.local).cast::<u64>().write_unaligned(addr) };
        self.local = self.local.wrapping_add(1);
    }

    fn write_desc(&mut self, addr: u64, len: u32) {
        let p = self.slot(self.local);
        // SAFETY: a free producer slot of a 16-byte xdp_desc ring.
        unsafe {
            p.cast::<u64>().write_unaligned(addr);
            p.add(8).cast::<u32>().write_unaligned(len);
            p.add(12).cast::<u32>().write_unaligned(0);
        }
        self.local = self.local.wrapping_add(1);
    }

    fn publish(&self) {
        self.index(self.off.producer)
            .store(self.local, Ordering::Release);
    }

    /// Consumer side: entries ready.
    fn ready(&self) -> u32 {
        self.index(self.off.producer)
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    fn read_addr(&mut self) -> u64 {
        // SAFETY: a ready consumer slot (checked by the caller via ready()).
        let a = unsafe { self.slot(self.local).cast::<u64>().read_unaligned() };
        self.local = self.local.wrapping_add(1);
        a
    }

    fn read_desc(&mut self) -> (u64, u32) {
        let p = self.slot(self.local);
        // SAFETY: a ready consumer slot of a 16-byte xdp_desc ring.
        let d = unsafe {
            (
                p.cast::<u64>().read_unaligned(),
                p.add(8).cast::<u32>().read_unaligned(),
            )
        };
        self.local = self.local.wrapping_add(1);
        d
    }

    fn release(&self) {
        self.index(self.off.consumer)
            .store(self.local, Ordering::Release);
    }
}

/// The socket and its four rings, once bound to a pool.
struct Live {
    rx: Ring,
    tx: Ring,
    fill: Ring,
    completion: Ring,
    fd: OwnedFd,
    frame_size: u64,
    zero_copy: bool,
    owner: bool,
}

/// An AF_XDP socket on one queue of an interface.
pub struct AfXdpPort {
    name: String,
    ifindex: u32,
    queue: u32,
    /// The interface's MTU, and whether the user asked for it.
    mtu: u32,
    mtu_asked: bool,
    live: Option<Live>,
    prog: Option<XdpRedirect>,
    /// Frames the kernel holds (fill ring or tx ring), by frame index.
    lent: Vec<Option<Packet>>,
    in_fill: usize,
    in_tx: usize,
    egress: EgressQueue,
    epoch: Instant,
    stats: PortStats,
    warnings: Warnings,
}

impl AfXdpPort {
    /// Attaches the redirect program to `ifname` (after setting its MTU to
    /// `mtu`, if given); the socket is created when the port joins a
    /// datapath ([`Port::attach_pool`]).
    pub fn open(name: &str, ifname: &str, queue: u32, mtu: Option<u32>) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        if queue >= MAX_QUEUES {
            return Err(err(format!(
                "queue {queue} out of range (0 to {})",
                MAX_QUEUES - 1
            )));
        }
        let ifindex = sys::if_index(ifname).map_err(err)?;
        let mtu_asked = mtu.is_some();
        let mtu = sys::apply_mtu(ifname, mtu).map_err(err)?;
        sys::set_if_up(ifname).map_err(|e| err(format!("bringing {ifname} up: {e}")))?;
        let prog = XdpRedirect::attach(ifindex).map_err(|e| {
            err(format!(
                "{e}; AF_XDP needs root (CAP_NET_ADMIN, CAP_BPF) and a kernel with XDP sockets"
            ))
        })?;
        Ok(AfXdpPort {
            name: name.to_string(),
            ifindex,
            queue,
            mtu,
            mtu_asked,
            live: None,
            prog: Some(prog),
            lent: Vec::new(),
            in_fill: 0,
            in_tx: 0,
            egress: EgressQueue::new(Default::default()),
            epoch: Instant::now(),
            stats: PortStats::default(),
            warnings: Warnings::new(8),
        })
    }

    /// Whether the socket runs in zero-copy mode (else copy mode).
    pub fn zero_copy(&self) -> Option<bool> {
        self.live.as_ref().map(|l| l.zero_copy)
    }

    fn setup(&mut self, pool: &mut PacketPool) -> io::Result<Live> {
        let fd = sys::socket(AF_XDP, libc::SOCK_RAW, 0)?;
        let shared = pool.umem_owner();
        let (base, len) = pool.region();
        if shared.is_none() {
            let reg = UmemReg {
                addr: base as u64,
                len: len as u64,
                chunk_size: pool.frame_size() as u32,
                headroom: 0,
                flags: 0,
                tx_metadata_len: 0,
            };
            sys::setsockopt(&fd, SOL_XDP, XDP_UMEM_REG, &reg)?;
        }
        for opt in [
            XDP_UMEM_FILL_RING,
            XDP_UMEM_COMPLETION_RING,
            XDP_RX_RING,
            XDP_TX_RING,
        ] {
            sys::setsockopt(&fd, SOL_XDP, opt, &RING_SIZE)?;
        }
        let off: MmapOffsets = sys::getsockopt(&fd, SOL_XDP, XDP_MMAP_OFFSETS)?;
        let rx = Ring::map(&fd, off.rx, 16, PGOFF_RX)?;
        let tx = Ring::map(&fd, off.tx, 16, PGOFF_TX)?;
        let fill = Ring::map(&fd, off.fill, 8, PGOFF_FILL)?;
        let completion = Ring::map(&fd, off.completion, 8, PGOFF_COMPLETION)?;
        let bind = |flags: u16| -> io::Result<()> {
            let addr = SockaddrXdp {
                family: AF_XDP as u16,
                flags,
                ifindex: self.ifindex,
                queue_id: self.queue,
                shared_umem_fd: shared.unwrap_or(0) as u32,
            };
            // SAFETY: addr is a valid sockaddr_xdp of the size passed.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&addr as *const SockaddrXdp).cast(),
                    std::mem::size_of::<SockaddrXdp>() as u32,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        let zero_copy = if shared.is_some() {
            // A shared UMEM keeps the mode of the socket that registered it.
            bind(XDP_SHARED_UMEM)?;
            false
        } else if bind(XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP).is_ok() {
            true
        } else {
            bind(XDP_COPY | XDP_USE_NEED_WAKEUP)?;
            false
        };
        if shared.is_none() {
            pool.set_umem_owner(Some(fd.as_raw_fd()));
        }
        Ok(Live {
            rx,
            tx,
            fill,
            completion,
            fd,
            frame_size: pool.frame_size() as u64,
            zero_copy,
            owner: shared.is_none(),
        })
    }

    /// Tops the fill ring up with free pool frames.
    fn refill(&mut self, pool: &mut PacketPool) {
        let Some(live) = &mut self.live else { return };
        let want = FILL_TARGET.saturating_sub(self.in_fill);
        let room = live.fill.free() as usize;
        // A quarter of the pool is never lent: the datapath needs frames of
        // its own for the copies a multi-output rule makes (one frame to
        // several ports), or those copies could not be made at all.
        let reserve = pool.capacity() / 4;
        let spare = pool.available().saturating_sub(reserve);
        let mut added = 0;
        for _ in 0..want.min(room).min(spare) {
            let Some(pkt) = pool.alloc() else { break };
            let frame = pkt.frame_index() as usize;
            live.fill.write_addr(frame as u64 * live.frame_size);
            self.lent[frame] = Some(pkt);
            added += 1;
        }
        if added > 0 {
            live.fill.publish();
            self.in_fill += added;
        }
        if live.fill.needs_wakeup() {
            // SAFETY: a zero-length receive on our socket: only a wakeup.
            unsafe {
                libc::recvfrom(
                    live.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Frees frames the kernel has finished sending.
    fn reclaim(&mut self, pool: &mut PacketPool) {
        let Some(live) = &mut self.live else { return };
        let n = live.completion.ready();
        let mut bytes = 0u32;
        for _ in 0..n {
            let addr = live.completion.read_addr();
            let frame = (addr / live.frame_size) as usize;
            match self.lent.get_mut(frame).and_then(Option::take) {
                Some(pkt) => {
                    bytes += pkt.len() as u32;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += pkt.len() as u64;
                    pool.free(pkt);
                    self.in_tx -= 1;
                }
                None => {
                    // Not ours: a kernel/port bug; count it, never panic.
                    self.stats.tx_drop(PortDrop::Error, 1);
                }
            }
        }
        if n > 0 {
            live.completion.release();
            let backlog = !self.egress.is_empty();
            self.egress
                .bql
                .completed(bytes, backlog, self.epoch.elapsed().as_micros() as u64);
        }
    }

    /// Moves waiting packets into the tx ring within the byte limit and
    /// kicks the kernel if it asks for it (or the socket is in copy mode,
    /// where only a send makes it transmit).
    fn fill_tx_and_kick(&mut self) {
        let Some(live) = &mut self.live else { return };
        let mut room = live.tx.free();
        let mut written = 0;
        while room > 0 {
            let Some(pkt) = self.egress.pop_within_limit() else {
                break;
            };
            let frame = pkt.frame_index() as usize;
            let addr = frame as u64 * live.frame_size + pkt.data_offset() as u64;
            live.tx.write_desc(addr, pkt.len() as u32);
            self.egress.bql.queued(pkt.len() as u32);
            self.lent[frame] = Some(pkt);
            self.in_tx += 1;
            room -= 1;
            written += 1;
        }
        if written > 0 {
            live.tx.publish();
        }
        // Unconsumed descriptors wait in the ring: copy mode sends only when
        // kicked; zero-copy drivers poll by themselves unless they ask.
        let waiting = written > 0 || live.tx.free() < RING_SIZE;
        if waiting && (!live.zero_copy || live.tx.needs_wakeup()) {
            self.stats.tx_kicks += 1;
            // SAFETY: a zero-length send on our socket: a transmit kick.
            let rc = unsafe {
                libc::sendto(
                    live.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if !sys::would_block(&e) && e.raw_os_error() != Some(libc::EBUSY) {
                    self.warnings.note(format!("tx kick: {e}"));
                }
            }
        }
    }
}

impl Port for AfXdpPort {
    /// The XSK socket: `poll` says readable while its rx ring holds
    /// descriptors.
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        self.live.as_ref().map(|l| l.fd.as_raw_fd())
    }

    fn mtu(&self) -> Option<u32> {
        Some(self.mtu)
    }

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
            rx_can_wait: false,
        }
    }

    fn attach_pool(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        if self.live.is_some() {
            return Ok(());
        }
        // A frame of the UMEM holds a whole packet (no multi-buffer).
        let fits = pool.max_packet_len().saturating_sub(18) as u32;
        if self.mtu > fits {
            let what = format!(
                "MTU {} does not fit AF_XDP frames of this pool (at most {fits} bytes of IP packet); frames beyond that are the drop 'too big'",
                self.mtu
            );
            if self.mtu_asked {
                return Err(PortError {
                    port: self.name.clone(),
                    message: format!("{what}: ask for mtu={fits} or less"),
                });
            }
            self.warnings.note(what);
        }
        self.lent = (0..pool.capacity()).map(|_| None).collect();
        let live = self.setup(pool).map_err(|e| PortError {
            port: self.name.clone(),
            message: format!("AF_XDP socket: {e}"),
        })?;
        if let Some(prog) = &self.prog {
            prog.register(self.queue, live.fd.as_raw_fd())
                .map_err(|m| PortError {
                    port: self.name.clone(),
                    message: m,
                })?;
        }
        self.live = Some(live);
        self.refill(pool);
        Ok(())
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let Some(live) = &mut self.live else {
            return RxStatus::Idle;
        };
        let n = live.rx.ready().min(batch.remaining() as u32);
        let mut got = 0;
        for _ in 0..n {
            let (addr, len) = live.rx.read_desc();
            let frame = (addr / live.frame_size) as usize;
            let ofs = (addr % live.frame_size) as usize;
            match self.lent.get_mut(frame).and_then(Option::take) {
                Some(mut pkt) => {
                    self.in_fill -= 1;
                    pkt.set_data_range(ofs, len as usize);
                    pkt.meta = Default::default();
                    pkt.meta.in_port = in_port;
                    // AF_XDP says nothing of a sender's checksum offload:
                    // a field that holds only the pseudo-header sum is
                    // marked for completion on the way out.
                    if let Some(o) = sluice_packet::partial_csum::partial_csum_in(pkt.data()) {
                        pkt.meta.offload = o;
                        self.stats.rx_csum_partial += 1;
                    }
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += u64::from(len);
                    let _ = batch.push(pkt);
                    got += 1;
                }
                None => self.stats.rx_drop(PortDrop::Error, 1),
            }
        }
        if n > 0 {
            live.rx.release();
        }
        self.refill(pool);
        RxStatus::of_burst(got, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        for mut pkt in batch.drain() {
            if self.live.is_none() || !pool.owns(&pkt) {
                self.stats.tx_drop(PortDrop::Error, 1);
                pool.free(pkt);
                continue;
            }
            if !fits_mtu(&pkt, self.mtu) {
                self.stats.tx_drop(PortDrop::TooBig, 1);
                pool.free(pkt);
                continue;
            }
            if !pool.in_region(&pkt) {
                // Outside the UMEM: into a regular frame if it fits one
                // (the frames are 4 KiB at most, AF_XDP's limit).
                let copy = (pkt.len() <= pool.max_packet_len())
                    .then(|| pool.clone_packet(&pkt))
                    .flatten();
                pool.free(pkt);
                match copy {
                    Some(c) => pkt = c,
                    None => {
                        self.stats.tx_drop(PortDrop::TooBig, 1);
                        continue;
                    }
                }
            }
            taken += usize::from(self.egress.offer(pkt, pool, &mut self.stats));
        }
        self.fill_tx_and_kick();
        taken
    }

    fn tx_pending(&self) -> usize {
        self.in_tx + self.egress.len()
    }

    fn tx_drain(&mut self, pool: &mut PacketPool) {
        self.reclaim(pool);
        self.fill_tx_and_kick();
    }

    fn flush(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        let until = Instant::now() + std::time::Duration::from_millis(100);
        while self.tx_pending() > 0 && Instant::now() < until {
            self.tx_drain(pool);
            if self.tx_pending() > 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        let left = self.egress.clear(pool) + self.in_tx;
        self.stats.tx_drop(PortDrop::QueueFull, left as u64);
        // Close the socket before the frames go back: the kernel must not
        // write into a frame the pool hands out again.
        if let Some(live) = self.live.take() {
            if live.owner {
                pool.set_umem_owner(None);
            }
            self.stats = self.stats_with_kernel(&live);
            drop(live);
        }
        self.prog = None;
        for p in self.lent.iter_mut().filter_map(Option::take) {
            pool.free(p);
        }
        self.in_fill = 0;
        self.in_tx = 0;
        Ok(())
    }

    fn stats(&self) -> PortStats {
        match &self.live {
            Some(live) => self.stats_with_kernel(live),
            None => self.stats.clone(),
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.to_vec()
    }
}

impl AfXdpPort {
    /// Our counters plus the kernel's drops (cumulative, not reset on read).
    fn stats_with_kernel(&self, live: &Live) -> PortStats {
        let mut s = self.stats.clone();
        s.tx_high_priority = self.egress.high_packets;
        if let Ok(k) = sys::getsockopt::<XdpStatistics>(&live.fd, SOL_XDP, XDP_STATISTICS) {
            s.rx_dropped[PortDrop::KernelRingFull as usize] = k.rx_dropped + k.rx_ring_full;
            s.rx_dropped[PortDrop::Error as usize] += k.rx_invalid_descs;
            s.tx_dropped[PortDrop::Error as usize] += k.tx_invalid_descs;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::{AfPacketOptions, AfPacketPort};
    use sluice_packet::build::{Frame, L4};
    use std::process::Command;

    #[test]
    fn frames_sent_from_the_pool_arrive_in_the_pool_and_every_frame_comes_back() {
        let id = std::process::id() % 100_000;
        let (a, b) = (format!("x{id}a"), format!("x{id}b"));
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip link del {a} 2>/dev/null; ip link add {a} type veth peer name {b} && \
                 sysctl -qw net.ipv6.conf.{a}.disable_ipv6=1 net.ipv6.conf.{b}.disable_ipv6=1"
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "veth (needs root): {out:?}");
        let mut pool = PacketPool::new(4096, 2048).unwrap();
        // AF_XDP sends from a; AF_PACKET on b sees what arrives, and
        // AF_PACKET sends back to a, where the AF_XDP socket receives.
        let mut xdp = AfXdpPort::open("x", &a, 0, None).unwrap();
        xdp.attach_pool(&mut pool).unwrap();
        assert!(pool.umem_owner().is_some());
        let mut raw = AfPacketPort::open("p", &b, AfPacketOptions::default()).unwrap();
        let want: Vec<Vec<u8>> = (0..64u16)
            .map(|i| Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 }).build())
            .collect();
        let roundtrip = |from: &mut dyn Port, to: &mut dyn Port, pool: &mut PacketPool| {
            for chunk in want.chunks(32) {
                let mut batch = PacketBatch::new();
                for f in chunk {
                    batch.push(pool.alloc_from(f).unwrap()).unwrap();
                }
                assert_eq!(from.tx_burst(pool, &mut batch), chunk.len());
            }
            let mut got = Vec::new();
            let until = Instant::now() + std::time::Duration::from_secs(5);
            while got.len() < want.len() && Instant::now() < until {
                from.tx_drain(pool);
                let mut batch = PacketBatch::new();
                to.rx_burst(pool, &mut batch, 1);
                for p in batch.drain() {
                    got.push(p.data().to_vec());
                    pool.free(p);
                }
            }
            got
        };
        assert_eq!(roundtrip(&mut xdp, &mut raw, &mut pool), want, "AF_XDP tx");
        assert_eq!(roundtrip(&mut raw, &mut xdp, &mut pool), want, "AF_XDP rx");
        xdp.flush(&mut pool).unwrap();
        raw.flush(&mut pool).unwrap();
        assert_eq!(xdp.stats().tx_packets, 64);
        assert_eq!(xdp.stats().rx_packets, 64);
        assert_eq!(
            pool.available(),
            pool.capacity(),
            "every lent frame came back"
        );
        assert!(pool.umem_owner().is_none());
        let _ = Command::new("ip").args(["link", "del", &a]).output();
    }
}
