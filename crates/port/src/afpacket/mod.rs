//! The AF_PACKET port (`afpacket:IFNAME`): a Linux interface read and
//! written through memory-mapped packet rings.
//!
//! - **rx**: a TPACKET_V2 ring of frame slots (2 KiB, more for jumbo
//!   MTUs: see [`geometry`]). A longer frame (a GSO super-frame, with
//!   virtio-net headers) leaves only its start in its slot and waits whole
//!   in the socket's queue (`TP_STATUS_COPY`, `PACKET_COPY_THRESH`), read
//!   from there with `recvmsg` straight into a pool frame. The kernel hands each
//!   frame over as soon as it is written (its slot's status word), so a
//!   sparse stream waits for nothing (TPACKET_V3's blocks are handed over
//!   full or after a timeout of at least 1 ms: ping through the switch took
//!   0.85 ms against 0.09 ms on AF_XDP); a burst copies frames into pool
//!   frames and gives each slot back once it is read. VLAN tags the kernel
//!   took out of the frame (offload) are put back; frames the switch sent
//!   itself are skipped.
//!   The socket takes no frame until it is bound to its interface and in its
//!   fanout group (protocol 0 at creation, a drop-all filter until set up).
//! - **tx**: a TPACKET_V2 tx ring. A flushed batch is written into ring slots
//!   and the kernel is kicked once (`send` with no data), as seed 003 asks;
//!   a slot the kernel has finished reads `AVAILABLE` again, which is the
//!   completion the egress queue (seed 002, [`crate::egress`]) tunes its byte
//!   limit from. When the ring is full, packets wait in the egress queue.
//! - **offloads** (`vnet`, on by default): every frame comes and goes with
//!   a virtio-net header ([`sluice_packet::offload`]): GSO super-frames and
//!   partial checksums pass through; frames over 4 KiB leave through a
//!   second, ring-less socket ([`socket`]) straight from the pool frame.
//! - **drops**: the kernel's own counter of frames lost to a full rx ring
//!   (`PACKET_STATISTICS`) is reported as the `kernel ring full` rx drop.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use sluice_packet::meta::Offload;
use sluice_packet::offload::{from_vnet_hdr, vnet_hdr_of, VNET_HDR_LEN};
use sluice_packet::{PacketBatch, PacketPool};

use crate::egress::{EgressQueue, PriorityClass};
use crate::sys::{self, Mmap};
use crate::{fits_mtu, Port, PortCaps, PortDrop, PortError, PortStats, RxStatus, Warnings};

mod geometry;
mod socket;
#[cfg(test)]
mod tests;

use geometry::{Geometry, TX_DATA_OFFSET};
use socket::*;

/// Options of an AF_PACKET port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// Which packets use the egress queue's priority band.
    pub priority: PriorityClass,
    /// Join this fanout group (one socket per PMD on one interface): the
    /// kernel spreads received packets over the group's sockets by flow
    /// hash, like a NIC's RSS over rx queues. Not a user option: set when a
    /// port is opened for several PMDs.
    pub fanout_group: Option<u16>,
    /// Exchange virtio-net headers with the kernel (`PACKET_VNET_HDR`):
    /// packets keep their partial checksums and GSO super-frames (TCP
    /// from veths and taps with offloads on) in and out. On by default:
    /// it costs no measurable rate (docs/offloads.md) but a tx ring of
    /// 64 KiB slots (about 20 MiB per socket against 5 MiB without).
    pub vnet: bool,
    /// MTU to set on the interface at open (else it keeps its own).
    pub mtu: Option<u32>,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            priority: PriorityClass::default(),
            fanout_group: None,
            vnet: true,
            mtu: None,
        }
    }
}

/// An interface read and written through TPACKET_V2 rings.
pub struct AfPacketPort {
    name: String,
    ifname: String,
    fd: OwnedFd,
    map: Mmap,
    /// The rx slot to read next.
    rx_slot: usize,
    /// Next tx slot to fill, oldest slot not yet completed, slots in use.
    tx_head: usize,
    tx_tail: usize,
    tx_used: usize,
    tx_len: Vec<u32>,
    egress: EgressQueue,
    epoch: Instant,
    stats: PortStats,
    kernel_drops: Cell<u64>,
    warnings: Warnings,
    /// The last kick failed: slots still wait for one.
    kick_again: bool,
    /// Virtio-net headers in front of every frame, both ways.
    vnet: bool,
    geo: Geometry,
    /// The interface's MTU: longer frames are not sent (`too big`).
    mtu: u32,
    /// With vnet: a second socket on the interface, without rings, that
    /// sends large packets straight from their pool frames (`sendmsg`: one
    /// copy, into the kernel's buffer). Through the tx ring a super-frame
    /// would be copied twice: into the ring, and again by the kernel when a
    /// veth hands the ring's pages to another namespace.
    direct: Option<OwnedFd>,
}

/// With vnet, packets longer than this go out through the direct socket.
const DIRECT_SEND_MIN: usize = 4096;

fn read_u32(base: *const u8, ofs: usize) -> u32 {
    // SAFETY: callers pass offsets inside the ring map (block headers and
    // frame headers the kernel wrote); the read is unaligned-safe.
    unsafe { base.add(ofs).cast::<u32>().read_unaligned() }
}

fn read_u16(base: *const u8, ofs: usize) -> u16 {
    // SAFETY: as read_u32.
    unsafe { base.add(ofs).cast::<u16>().read_unaligned() }
}

/// Puts back the VLAN tag (TPID, TCI) the kernel took out of a received
/// frame, moving a partial checksum's start with the bytes after it.
fn put_vlan(pkt: &mut sluice_packet::Packet, tag: Option<(u16, u16)>) {
    if let Some((tpid, tci)) = tag {
        if pkt.len() >= 12 && pkt.insert_gap(12, 4) {
            pkt.data_mut()[12..14].copy_from_slice(&tpid.to_be_bytes());
            pkt.data_mut()[14..16].copy_from_slice(&tci.to_be_bytes());
            if pkt.meta.offload.needs_csum() {
                pkt.meta.offload.csum_start += 4;
            }
        }
    }
}

/// The status word the kernel and this process hand a block or slot over
/// with; acquire/release order it against the frame bytes.
fn status(base: *mut u8, ofs: usize) -> &'static AtomicU32 {
    // SAFETY: status words are 4-byte aligned (slots start at 2 KiB
    // boundaries, the word at offset 0) and live as
    // long as the map, which outlives every use (the port owns both).
    unsafe { &*base.add(ofs).cast::<AtomicU32>() }
}

impl AfPacketPort {
    /// Opens `ifname`: binds a packet socket to it, maps its rings, turns on
    /// promiscuous mode and brings the interface up.
    pub fn open(name: &str, ifname: &str, opts: AfPacketOptions) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        let ifindex = sys::if_index(ifname).map_err(err)?;
        // Protocol 0: the socket takes no frame until bind() names both the
        // protocol and this interface. Created with ETH_P_ALL it would take
        // every frame of every interface of the namespace from here to
        // bind(), into the ring set up below, and the switch would forward
        // them once it starts (other hosts' traffic, or what it sends itself
        // on another port).
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| {
            err(format!(
                "cannot open a packet socket: {e}{}",
                if e.raw_os_error() == Some(libc::EPERM) {
                    " (AF_PACKET needs root or CAP_NET_RAW)"
                } else {
                    ""
                }
            ))
        })?;
        let opt = |what: &str, e: io::Error| err(format!("{what}: {e}"));
        sys::setsockopt(&fd, SOL_PACKET, PACKET_VERSION, &TPACKET_V2)
            .map_err(|e| opt("TPACKET_V2", e))?;
        // Older kernels lack it; frames we sent are also skipped by type.
        let _ = sys::setsockopt(&fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32);
        // Until the socket is bound and in its fanout group, it drops every
        // frame: between bind() and the group join it would otherwise take
        // its own copy of frames the group also delivers (duplicates).
        sys::setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &DROP_ALL.prog(),
        )
        .map_err(|e| opt("closing the socket until it is set up", e))?;
        if opts.vnet {
            // Before the rings: the kernel refuses it once they exist.
            sys::setsockopt(&fd, SOL_PACKET, PACKET_VNET_HDR, &1i32)
                .map_err(|e| opt("virtio-net headers (PACKET_VNET_HDR)", e))?;
            // A frame longer than an rx slot (a super-frame) is queued
            // whole on the socket beside its cut slot (TP_STATUS_COPY),
            // with room for a burst of them.
            sys::setsockopt(&fd, SOL_PACKET, PACKET_COPY_THRESH, &1i32)
                .map_err(|e| opt("whole long frames (PACKET_COPY_THRESH)", e))?;
            let rcvbuf = 8i32 << 20;
            if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf).is_err() {
                sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf)
                    .map_err(|e| opt("receive buffer", e))?;
            }
        }
        let mtu = sys::apply_mtu(ifname, opts.mtu).map_err(err)?;
        let geo = Geometry::for_mtu(opts.vnet, mtu);
        let req = |block: usize, frame: usize, frames: usize| TpacketReq {
            block_size: block as u32,
            block_nr: (frames / (block / frame)) as u32,
            frame_size: frame as u32,
            frame_nr: frames as u32,
        };
        let rx_req = req(geo.rx_block, geo.rx_frame, geo.rx_frames);
        sys::setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &rx_req).map_err(|e| opt("rx ring", e))?;
        let tx_req = req(geo.tx_block, geo.tx_frame, geo.tx_frames);
        sys::setsockopt(&fd, SOL_PACKET, PACKET_TX_RING, &tx_req).map_err(|e| opt("tx ring", e))?;
        // Ring blocks are mapped back to back; the frames of a block start
        // at its beginning (a 1 MiB vnet block holds 15 slots and a gap).
        let len = geo.rx_block * rx_req.block_nr as usize + geo.tx_block * tx_req.block_nr as usize;
        let map = Mmap::new(fd.as_raw_fd(), len, 0).map_err(|e| opt("mapping the rings", e))?;
        bind(&fd, ifindex, ETH_P_ALL).map_err(|e| opt("bind", e))?;
        let mreq = PacketMreq {
            ifindex: ifindex as i32,
            kind: PACKET_MR_PROMISC,
            alen: 0,
            address: [0; 8],
        };
        sys::setsockopt(&fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|e| opt("promiscuous mode", e))?;
        let mut warnings = Warnings::new(8);
        if let Some(group) = opts.fanout_group {
            // Fragments are reassembled for hashing so that every piece of
            // a datagram reaches the same socket (per-flow order). A fanout
            // group ignores the sockets' PACKET_IGNORE_OUTGOING: without
            // the group's own flag, the rings also take copies of what the
            // port sends, and a full ring counts them as drops.
            let base = u32::from(group) | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG) << 16);
            let ignoring = base | (PACKET_FANOUT_FLAG_IGNORE_OUTGOING << 16);
            if sys::setsockopt(&fd, SOL_PACKET, PACKET_FANOUT, &ignoring).is_err() {
                // Older kernels lack the flag: the copies are skipped
                // on receive, but may show up as `kernel ring full`.
                sys::setsockopt(&fd, SOL_PACKET, PACKET_FANOUT, &base)
                    .map_err(|e| opt("joining the fanout group", e))?;
                warnings.note(
                    "this kernel cannot keep sent frames out of a fanout group's rings: 'kernel ring full' may count copies of them".into(),
                );
            }
        }
        // Set up: from now on the port receives what its interface (or its
        // share of the fanout group) receives, and nothing before.
        sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &0i32)
            .map_err(|e| opt("opening the socket", e))?;
        sys::set_if_up(ifname).map_err(|e| opt("bringing the interface up", e))?;
        let direct = if opts.vnet {
            Some(direct_socket(ifindex).map_err(|e| opt("the direct send socket", e))?)
        } else {
            None
        };
        Ok(AfPacketPort {
            name: name.to_string(),
            ifname: ifname.to_string(),
            fd,
            map,
            rx_slot: 0,
            tx_head: 0,
            tx_tail: 0,
            tx_used: 0,
            tx_len: vec![0; geo.tx_frames],
            egress: EgressQueue::new(opts.priority),
            epoch: Instant::now(),
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
            warnings,
            kick_again: false,
            vnet: opts.vnet,
            mtu,
            geo,
            direct,
        })
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Offset of rx slot `i` in the map.
    fn rx_slot_at(&self, i: usize) -> usize {
        let g = &self.geo;
        let per = g.rx_block / g.rx_frame;
        (i / per) * g.rx_block + (i % per) * g.rx_frame
    }

    /// Offset of tx slot `i` in the map (the tx ring follows the rx ring).
    fn tx_slot(&self, i: usize) -> usize {
        let g = &self.geo;
        let rx_len = g.rx_frames.div_ceil(g.rx_block / g.rx_frame) * g.rx_block;
        let per = g.tx_block / g.tx_frame;
        rx_len + (i / per) * g.tx_block + (i % per) * g.tx_frame
    }

    /// Reads a frame too long for its rx slot (`wire` bytes, its VLAN
    /// tag as the slot says) from the socket's queue straight into a pool
    /// frame. A frame that cannot be taken is dequeued all the same.
    fn read_queued(
        &mut self,
        pool: &mut PacketPool,
        wire: usize,
        vlan: Option<(u16, u16)>,
    ) -> Result<sluice_packet::Packet, PortDrop> {
        let extra = if vlan.is_some() { 4 } else { 0 };
        let Some(mut pkt) = pool.alloc_for(wire + extra) else {
            discard_queued(&self.fd);
            return Err(if wire + extra > pool.max_len() {
                PortDrop::TooBig
            } else {
                PortDrop::NoBuffer
            });
        };
        // The tag goes back into the headroom: the frame's tail is room.
        let room = pkt.tailroom();
        pkt.set_len(room);
        let mut h = [0u8; VNET_HDR_LEN];
        let got = recv_queued(&self.fd, &mut h, pkt.data_mut());
        let fail = |pool: &mut PacketPool, pkt, why| {
            pool.free(pkt);
            Err(why)
        };
        let len = match got {
            Ok(len) if len <= room => len,
            Ok(_) => return fail(pool, pkt, PortDrop::TooBig),
            Err(e) => {
                self.warnings.note(format!("reading a long frame: {e}"));
                return fail(pool, pkt, PortDrop::Error);
            }
        };
        let Ok(offload) = from_vnet_hdr(&h) else {
            return fail(pool, pkt, PortDrop::BadOffload);
        };
        pkt.set_len(len);
        pkt.meta.offload = offload;
        put_vlan(&mut pkt, vlan);
        Ok(pkt)
    }

    /// Reads the kernel's rx-ring drop counter (reset by each read).
    fn poll_kernel_drops(&self) {
        if let Ok(s) = sys::getsockopt::<TpacketStats>(&self.fd, SOL_PACKET, PACKET_STATISTICS) {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(s.drops));
        }
    }

    /// Takes back finished tx slots; tells the byte limit what completed.
    fn reclaim(&mut self) {
        let base = self.map.as_ptr();
        let mut bytes = 0u32;
        while self.tx_used > 0 {
            let slot = self.tx_slot(self.tx_tail);
            match status(base, slot + PKT_STATUS).load(Ordering::Acquire) {
                TP_STATUS_AVAILABLE => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += u64::from(self.tx_len[self.tx_tail]);
                }
                TP_STATUS_WRONG_FORMAT => {
                    self.stats.tx_drop(PortDrop::Error, 1);
                    status(base, slot + PKT_STATUS).store(TP_STATUS_AVAILABLE, Ordering::Release);
                }
                _ => break,
            }
            bytes += self.tx_len[self.tx_tail];
            self.tx_tail = (self.tx_tail + 1) % self.geo.tx_frames;
            self.tx_used -= 1;
        }
        if bytes > 0 {
            let now = self.epoch.elapsed().as_micros() as u64;
            let backlog = !self.egress.is_empty();
            self.egress.bql.completed(bytes, backlog, now);
        }
    }

    /// Moves waiting packets into free slots within the byte limit, then
    /// kicks the kernel once if anything was written.
    fn fill_and_kick(&mut self, pool: &mut PacketPool) {
        let base = self.map.as_ptr();
        let mut written = 0;
        let vnet_len = if self.vnet { VNET_HDR_LEN } else { 0 };
        while self.tx_used < self.geo.tx_frames {
            let Some(pkt) = self.egress.pop_within_limit() else {
                break;
            };
            let len = pkt.len();
            if len > DIRECT_SEND_MIN {
                if let Some(fd) = self.direct.as_ref().map(|f| f.as_raw_fd()) {
                    // The ring's frames go first: kicked now, the kernel
                    // sends them before this call returns.
                    if written > 0 {
                        written = 0;
                        self.kick();
                    }
                    match send_with_vnet(fd, &vnet_hdr_of(&pkt), pkt.data()) {
                        Ok(()) => {
                            self.stats.tx_packets += 1;
                            self.stats.tx_bytes += len as u64;
                            if pkt.meta.offload.gso() != 0 {
                                self.stats.tx_gso_packets += 1;
                            }
                            pool.free(pkt);
                        }
                        Err(e)
                            if sys::would_block(&e) || e.raw_os_error() == Some(libc::ENOBUFS) =>
                        {
                            // The send buffer is full: try again at the next drain.
                            self.egress.unpop(pkt);
                            break;
                        }
                        Err(e) => {
                            self.warnings.note(format!("sendmsg: {e}"));
                            self.stats.tx_drop(PortDrop::Error, 1);
                            pool.free(pkt);
                        }
                    }
                    continue;
                }
            }
            let slot = self.tx_slot(self.tx_head);
            if self.vnet {
                if pkt.meta.offload.gso() != 0 {
                    self.stats.tx_gso_packets += 1;
                }
                let hdr = vnet_hdr_of(&pkt);
                // SAFETY: as the frame copy below; the header goes right
                // before the frame, inside the slot.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        hdr.as_ptr(),
                        base.add(slot + TX_DATA_OFFSET),
                        VNET_HDR_LEN,
                    );
                }
            }
            let wire = len + vnet_len;
            // SAFETY: the slot is ours (status AVAILABLE, counted free by
            // tx_used) and len + vnet_len <= tx_frame - TX_DATA_OFFSET,
            // checked when the packet was accepted.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pkt.data().as_ptr(),
                    base.add(slot + TX_DATA_OFFSET + vnet_len),
                    len,
                );
                base.add(slot + PKT_LEN)
                    .cast::<u32>()
                    .write_unaligned(wire as u32);
                base.add(slot + PKT_SNAPLEN)
                    .cast::<u32>()
                    .write_unaligned(wire as u32);
            }
            status(base, slot + PKT_STATUS).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_len[self.tx_head] = len as u32;
            self.egress.bql.queued(len as u32);
            self.tx_head = (self.tx_head + 1) % self.geo.tx_frames;
            self.tx_used += 1;
            written += 1;
            pool.free(pkt);
        }
        // Slots the kernel has taken (SENDING) complete by themselves; a kick
        // is needed only for new SEND_REQUEST slots or after a failed kick.
        if written > 0 || self.kick_again {
            self.kick();
        }
    }

    fn kick(&mut self) {
        self.stats.tx_kicks += 1;
        // SAFETY: a zero-length send on our own socket: the kernel sends the
        // slots marked SEND_REQUEST; no user buffer is read.
        let rc =
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        // On failure the slots stay queued: kick again at the next drain.
        self.kick_again = rc < 0;
        if rc < 0 {
            let e = io::Error::last_os_error();
            if !sys::would_block(&e) {
                self.warnings.note(format!("send: {e}"));
            }
        }
    }
}

impl Port for AfPacketPort {
    /// The socket: with a TPACKET_V2 ring `poll` says readable while the
    /// slot the kernel filled last is still the reader's.
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn mtu(&self) -> Option<u32> {
        Some(self.mtu)
    }

    /// In place while the rings' slots still hold a frame of the new MTU
    /// (else the port is made again with rings to fit).
    fn set_mtu(&mut self, mtu: u32) -> Result<(), PortError> {
        let want = Geometry::for_mtu(self.vnet, mtu);
        if want.rx_frame > self.geo.rx_frame || want.tx_frame > self.geo.tx_frame {
            return Err(PortError {
                port: self.name.clone(),
                message: format!("its ring slots do not hold a frame of MTU {mtu}"),
            });
        }
        self.mtu = sys::apply_mtu(&self.ifname, Some(mtu)).map_err(|message| PortError {
            port: self.name.clone(),
            message,
        })?;
        Ok(())
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
            tx_offload: self.vnet,
            rx_can_wait: false,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let base = self.map.as_ptr();
        let mut n = 0;
        let rx_frame = self.geo.rx_frame;
        while !batch.is_full() {
            let hdr = self.rx_slot_at(self.rx_slot);
            let st = status(base, hdr + PKT_STATUS).load(Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                break;
            }
            let snap = read_u32(base, hdr + PKT_SNAPLEN) as usize;
            let wire = read_u32(base, hdr + PKT_LEN) as usize;
            let mac = read_u16(base, hdr + PKT_MAC) as usize;
            // SAFETY: a byte inside the slot header area the kernel wrote.
            let pkttype = unsafe { *base.add(hdr + PKT_SLL_PKTTYPE) };
            if pkttype != PACKET_OUTGOING {
                let vlan = st & TP_STATUS_VLAN_VALID != 0;
                let extra = if vlan { 4 } else { 0 };
                // The kernel puts the virtio-net header right before the frame.
                let offload = if self.vnet && mac >= VNET_HDR_LEN + PKT_SLL_PKTTYPE {
                    let mut h = [0u8; VNET_HDR_LEN];
                    // SAFETY: inside the slot, before the frame (checked above).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base.add(hdr + mac - VNET_HDR_LEN),
                            h.as_mut_ptr(),
                            VNET_HDR_LEN,
                        )
                    };
                    from_vnet_hdr(&h)
                } else {
                    Ok(Offload::NONE)
                };
                let vlan_tag = vlan.then(|| {
                    let tpid = if st & TP_STATUS_VLAN_TPID_VALID != 0 {
                        read_u16(base, hdr + PKT_VLAN_TPID)
                    } else {
                        0x8100
                    };
                    (tpid, read_u16(base, hdr + PKT_VLAN_TCI))
                });
                let got = if st & TP_STATUS_COPY != 0 {
                    // Longer than a slot: whole in the socket's queue.
                    self.read_queued(pool, wire, vlan_tag)
                } else if snap < wire || mac + snap > rx_frame || snap + extra > pool.max_len() {
                    Err(PortDrop::TooBig)
                } else if let Ok(offload) = offload {
                    // SAFETY: the kernel placed snap bytes at hdr + mac,
                    // inside the slot (checked above), which we own until
                    // its status goes back to the kernel below.
                    let frame = unsafe { std::slice::from_raw_parts(base.add(hdr + mac), snap) };
                    pool.alloc_from(frame)
                        .map(|mut pkt| {
                            pkt.meta.offload = offload;
                            put_vlan(&mut pkt, vlan_tag);
                            pkt
                        })
                        .ok_or(PortDrop::NoBuffer)
                } else {
                    Err(PortDrop::BadOffload)
                };
                match got {
                    Ok(mut pkt) => {
                        if pkt.meta.offload.gso() != 0 {
                            self.stats.rx_gso_packets += 1;
                        }
                        pkt.meta.in_port = in_port;
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += pkt.len() as u64;
                        let _ = batch.push(pkt);
                        n += 1;
                    }
                    Err(why) => self.stats.rx_drop(why, 1),
                }
            } else if st & TP_STATUS_COPY != 0 {
                // A frame of ours, queued whole too: dequeued unread.
                discard_queued(&self.fd);
            }
            status(base, hdr + PKT_STATUS).store(TP_STATUS_KERNEL, Ordering::Release);
            self.rx_slot = (self.rx_slot + 1) % self.geo.rx_frames;
        }
        RxStatus::of_burst(n, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        self.reclaim();
        let mut accepted = 0;
        for pkt in batch.drain() {
            let vnet_len = if self.vnet { VNET_HDR_LEN } else { 0 };
            if pkt.len() + vnet_len > self.geo.tx_frame - TX_DATA_OFFSET
                || !fits_mtu(&pkt, self.mtu)
            {
                self.stats.tx_drop(PortDrop::TooBig, 1);
                pool.free(pkt);
                continue;
            }
            // A displaced packet was taken earlier, dropped now for a
            // priority one.
            accepted += usize::from(self.egress.offer(pkt, pool, &mut self.stats));
        }
        self.fill_and_kick(pool);
        accepted
    }

    fn tx_pending(&self) -> usize {
        self.tx_used + self.egress.len()
    }

    fn tx_drain(&mut self, pool: &mut PacketPool) {
        self.reclaim();
        if self.tx_used > 0 || !self.egress.is_empty() {
            self.fill_and_kick(pool);
        }
    }

    fn flush(&mut self, pool: &mut PacketPool) -> Result<(), PortError> {
        // Give the kernel up to 100 ms to take what waits; whatever is
        // still queued after that is counted as dropped, never lost silently.
        let until = Instant::now() + std::time::Duration::from_millis(100);
        while self.tx_pending() > 0 && Instant::now() < until {
            self.tx_drain(pool);
            if self.tx_pending() > 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        let left = self.egress.clear(pool) + self.tx_used;
        self.stats.tx_drop(PortDrop::QueueFull, left as u64);
        self.tx_used = 0;
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.poll_kernel_drops();
        let mut s = self.stats.clone();
        s.rx_drop(PortDrop::KernelRingFull, self.kernel_drops.get());
        s.tx_high_priority = self.egress.high_packets;
        s
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.to_vec()
    }
}
