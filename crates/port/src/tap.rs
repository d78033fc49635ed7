//! The tap port (`tap:NAME`): creates (or attaches to) a Linux tap
//! interface, the port a VM or a container's veth hangs off.
//!
//! A tap device moves one frame per `read`/`write`; there is no batched
//! call, so each packet costs a syscall (as in Open vSwitch's netdev-linux
//! tap path). A burst reads until the device is empty or the batch is full.
//! The interface exists while the port is open (unless made persistent by
//! someone else) and is brought up. With `persist=on` (what `sluice
//! vswitchd` gives internal ports, as Open vSwitch's netdev datapath
//! does) it is made persistent: it outlives the switch process, with its
//! addresses and routes, for the next start to take again, and goes when
//! the port is deleted, or when the switch ends with `exit --cleanup`
//! ([`keep_persistent_taps`] says which).
//!
//! With `vnet=on` (the default) the device is opened with `IFF_VNET_HDR`
//! and told (`TUNSETOFFLOAD`) that Sluice takes partial checksums and
//! TCP/UDP segmentation offload: every frame comes and goes with a
//! virtio-net header, as a VM's virtio-net device exchanges them, so the
//! kernel hands over 64 KiB TCP super-frames with the checksum left to
//! whoever puts them on a wire. Where the kernel has UDP-tunnel GSO for
//! taps (Linux 6.17 on) the device is told so too and exchanges the
//! 24-byte tunnel form of the header: a super-frame Sluice encapsulated
//! into VXLAN or Geneve goes to the kernel whole (its stack cuts it, or
//! takes it whole if it ends the tunnel itself), and the kernel's own
//! tunnel super-frames come whole, to be popped whole. Frames larger than a pool frame are read
//! into one of the pool's big frames (one `readv` over both; a regular
//! frame's bytes are copied over only when the frame did not fit it).

use std::fs::File;
use std::io::{ErrorKind, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_packet::meta::{Offload, OffloadMask};
use sluice_packet::offload::{
    from_vnet_hdr, from_vnet_hdr_tnl, vnet_hdr_tnl_of, VNET_HDR_LEN, VNET_HDR_TNL_LEN,
};
use sluice_packet::{Packet, PacketBatch, PacketPool};

use crate::sys;
use crate::{fits_mtu, Port, PortCaps, PortDrop, PortError, PortStats, RxStatus, Warnings};

/// Whether persistent taps stay when their ports close (the process is
/// ending without cleaning up) or go (a port deleted).
static KEEP_PERSISTENT: AtomicBool = AtomicBool::new(false);

/// From now on, persistent taps stay when their ports close: called as a
/// switch ends without `--cleanup`, as Open vSwitch leaves its taps.
pub fn keep_persistent_taps() {
    KEEP_PERSISTENT.store(true, Ordering::SeqCst);
}

/// A tap interface.
pub struct TapPort {
    name: String,
    ifname: String,
    dev: File,
    persist: bool,
    vnet: bool,
    /// The tunnel form of the header is on (UDP-tunnel GSO).
    tnl: bool,
    mtu: u32,
    stats: PortStats,
    warnings: Warnings,
}

impl TapPort {
    /// Creates tap interface `ifname` (or attaches to an existing one),
    /// with virtio-net headers and offloads when `vnet`, and MTU `mtu`
    /// (else the interface's own: 1500 for a new tap), brought up when
    /// `up`, persistent when `persist`.
    pub fn open(
        name: &str,
        ifname: &str,
        vnet: bool,
        mtu: Option<u32>,
        up: bool,
        persist: bool,
    ) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
            return Err(err(format!(
                "'{ifname}' is not a valid interface name (1 to 15 bytes)"
            )));
        }
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map_err(|e| err(format!("cannot open /dev/net/tun: {e}")))?;
        let fd: OwnedFd = dev.into();
        sys::tun_set_iff(&fd, ifname, vnet).map_err(|e| {
            err(format!(
                "cannot create tap '{ifname}': {e}{}",
                if e.raw_os_error() == Some(libc::EPERM) {
                    " (needs root or CAP_NET_ADMIN)"
                } else if e.raw_os_error() == Some(libc::EINVAL) {
                    " (an interface of another type has this name?)"
                } else {
                    ""
                }
            ))
        })?;
        if persist {
            sys::tun_set_persist(&fd, true)
                .map_err(|e| err(format!("making '{ifname}' persistent: {e}")))?;
        }
        let mut warnings = Warnings::new(8);
        let tnl = if vnet {
            let gso = sys::tun_set_offload(&fd).map_err(|e| {
                err(format!(
                    "telling '{ifname}' which offloads Sluice takes: {e}"
                ))
            })?;
            if let sys::TunnelGso::Refused(e) = &gso {
                warnings.note(format!(
                    "the kernel refused the tunnel form of the virtio-net header ({e}): \
                     tunnelled super-frames are cut by Sluice"
                ));
            }
            matches!(gso, sys::TunnelGso::On)
        } else {
            false
        };
        let mtu = sys::apply_mtu(ifname, mtu).map_err(err)?;
        sys::set_nonblocking(fd.as_raw_fd()).map_err(|e| err(format!("non-blocking: {e}")))?;
        if up {
            sys::set_if_up(ifname).map_err(|e| err(format!("bringing '{ifname}' up: {e}")))?;
        }
        Ok(TapPort {
            name: name.to_string(),
            ifname: ifname.to_string(),
            dev: File::from(fd),
            persist,
            vnet,
            tnl,
            mtu,
            stats: PortStats::default(),
            warnings,
        })
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Whether the device takes and gives UDP-tunnel super-frames.
    pub fn tunnel_gso(&self) -> bool {
        self.tnl
    }

    /// The virtio-net header's length: none, plain or the tunnel form.
    fn hdr_len(&self) -> usize {
        match (self.vnet, self.tnl) {
            (false, _) => 0,
            (true, false) => VNET_HDR_LEN,
            (true, true) => VNET_HDR_TNL_LEN,
        }
    }
}

impl Drop for TapPort {
    /// A persistent tap goes with its port unless the switch is ending
    /// without cleaning up ([`keep_persistent_taps`]).
    fn drop(&mut self) {
        if self.persist && !KEEP_PERSISTENT.load(Ordering::SeqCst) {
            let _ = sys::tun_set_persist(&self.dev, false);
        }
    }
}

impl TapPort {
    /// Reads one frame (with its virtio-net header when vnet) into `small`,
    /// running on into `big` when it does not fit. `Ok(None)`: a frame was
    /// read and counted as a drop; `Err`: nothing was read. Frees whichever
    /// frames it does not return.
    fn read_frame(
        &mut self,
        pool: &mut PacketPool,
        mut small: Packet,
        mut big: Option<Packet>,
    ) -> std::io::Result<Option<Packet>> {
        let room = pool.max_packet_len();
        small.set_len(room);
        let mut cap = room;
        if let Some(b) = big.as_mut() {
            let len = pool.max_big_packet_len();
            b.set_len(len);
            cap = len;
        }
        let mut hdr = [0u8; VNET_HDR_TNL_LEN];
        let hdr_len = self.hdr_len();
        let got = {
            let mut iov: [IoSliceMut; 3] = [
                IoSliceMut::new(&mut hdr[..hdr_len]),
                IoSliceMut::new(small.data_mut()),
                IoSliceMut::new(match big.as_mut() {
                    Some(b) => &mut b.data_mut()[room..],
                    None => &mut [],
                }),
            ];
            self.dev.read_vectored(&mut iov)
        };
        let frees = |pool: &mut PacketPool, a: Option<Packet>, b: Option<Packet>| {
            a.into_iter().chain(b).for_each(|p| pool.free(p));
        };
        let got = match got {
            Ok(g) if g > 0 => g,
            // 0: nothing to read (a tap read never returns an empty frame).
            other => {
                frees(pool, Some(small), big);
                return Err(other.err().unwrap_or_else(|| ErrorKind::WouldBlock.into()));
            }
        };
        let len = got.saturating_sub(hdr_len);
        if got < hdr_len || len >= cap {
            // No header, or the frame filled every buffer: it may have
            // been cut.
            self.stats.rx_drop(PortDrop::TooBig, 1);
            frees(pool, Some(small), big);
            return Ok(None);
        }
        let offload = if self.vnet {
            let parsed = if self.tnl {
                from_vnet_hdr_tnl(&hdr)
            } else {
                let mut plain = [0u8; VNET_HDR_LEN];
                plain.copy_from_slice(&hdr[..VNET_HDR_LEN]);
                from_vnet_hdr(&plain)
            };
            match parsed {
                Ok(o) => o,
                Err(_) => {
                    self.stats.rx_drop(PortDrop::BadOffload, 1);
                    frees(pool, Some(small), big);
                    return Ok(None);
                }
            }
        } else {
            Offload::NONE
        };
        let mut pkt = if len <= room {
            frees(pool, big, None);
            small.set_len(len);
            small
        } else {
            let mut b = big.expect("len < cap = room without a big frame");
            b.data_mut()[..room].copy_from_slice(small.data());
            b.set_len(len);
            pool.free(small);
            b
        };
        pkt.meta.offload = offload;
        Ok(Some(pkt))
    }
}

impl Port for TapPort {
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.dev.as_raw_fd())
    }

    fn mtu(&self) -> Option<u32> {
        Some(self.mtu)
    }

    fn set_mtu(&mut self, mtu: u32) -> Result<(), PortError> {
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

    fn tx_offloads(&self) -> OffloadMask {
        match (self.vnet, self.tnl) {
            (false, _) => OffloadMask::NONE,
            (true, false) => OffloadMask::ALL,
            (true, true) => OffloadMask::ALL_TUNNEL,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let mut n = 0;
        while !batch.is_full() {
            let Some(pkt) = pool.alloc() else {
                // Leave frames in the device: the kernel counts them if its
                // queue overflows; we count nothing we did not see.
                break;
            };
            let big = pool.alloc_for(pool.max_big_packet_len());
            match self.read_frame(pool, pkt, big) {
                Ok(Some(mut pkt)) => {
                    pkt.meta.in_port = in_port;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += pkt.len() as u64;
                    if pkt.meta.offload.gso() != 0 {
                        self.stats.rx_gso_packets += 1;
                    }
                    let _ = batch.push(pkt);
                    n += 1;
                }
                Ok(None) => {}
                Err(e) => {
                    if e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::Interrupted {
                        self.warnings.note(format!("read: {e}"));
                    }
                    break;
                }
            }
        }
        RxStatus::of_burst(n, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let mut sent = 0;
        for pkt in batch.drain() {
            if !fits_mtu(&pkt, self.mtu) {
                self.stats.tx_drop(PortDrop::TooBig, 1);
                pool.free(pkt);
                continue;
            }
            let hdr_len = self.hdr_len();
            let hdr = if hdr_len > 0 {
                vnet_hdr_tnl_of(&pkt)
            } else {
                Some([0; VNET_HDR_TNL_LEN])
            };
            let Some(hdr) = hdr else {
                // A tunnelled super-frame whose headers cannot be found.
                self.stats.tx_drop(PortDrop::BadOffload, 1);
                pool.free(pkt);
                continue;
            };
            self.stats.tx_kicks += 1;
            let gso = pkt.meta.offload.gso() != 0;
            let wrote = if self.vnet {
                self.dev
                    .write_vectored(&[IoSlice::new(&hdr[..hdr_len]), IoSlice::new(pkt.data())])
            } else {
                self.dev.write(pkt.data())
            };
            match wrote {
                Ok(_) => {
                    sent += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += pkt.len() as u64;
                    if gso {
                        self.stats.tx_gso_packets += 1;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.stats.tx_drop(PortDrop::QueueFull, 1);
                }
                Err(e) => {
                    // EIO: the interface is down (nobody can receive).
                    self.stats.tx_drop(PortDrop::Error, 1);
                    self.warnings.note(format!("write: {e}"));
                }
            }
            pool.free(pkt);
        }
        sent
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.to_vec()
    }
}
