//! The tap port (`tap:NAME`): creates (or attaches to) a Linux tap
//! interface, the port a VM or a container's veth hangs off.
//!
//! A tap device moves one frame per `read`/`write`; there is no batched
//! call, so each packet costs a syscall (as in Open vSwitch's netdev-linux
//! tap path). A burst reads until the device is empty or the batch is full.
//! The interface exists while the port is open (unless made persistent by
//! someone else) and is brought up.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use sluice_packet::{PacketBatch, PacketPool};

use crate::sys;
use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus, Warnings};

/// A tap interface.
pub struct TapPort {
    name: String,
    ifname: String,
    dev: File,
    stats: PortStats,
    warnings: Warnings,
}

impl TapPort {
    /// Creates tap interface `ifname` (or attaches to an existing one).
    pub fn open(name: &str, ifname: &str) -> Result<Self, PortError> {
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
        sys::tun_set_iff(&fd, ifname).map_err(|e| {
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
        sys::set_nonblocking(fd.as_raw_fd()).map_err(|e| err(format!("non-blocking: {e}")))?;
        sys::set_if_up(ifname).map_err(|e| err(format!("bringing '{ifname}' up: {e}")))?;
        Ok(TapPort {
            name: name.to_string(),
            ifname: ifname.to_string(),
            dev: File::from(fd),
            stats: PortStats::default(),
            warnings: Warnings::new(8),
        })
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }
}

impl Port for TapPort {
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
        let mut n = 0;
        while !batch.is_full() {
            let Some(mut pkt) = pool.alloc() else {
                // Leave frames in the device: the kernel counts them if its
                // queue overflows; we count nothing we did not see.
                break;
            };
            let room = pool.max_packet_len();
            pkt.set_len(room);
            match self.dev.read(pkt.data_mut()) {
                Ok(0) => {
                    pool.free(pkt);
                    break;
                }
                Ok(len) if len >= room => {
                    // The frame filled the buffer: it may have been cut.
                    self.stats.rx_drop(PortDrop::TooBig, 1);
                    pool.free(pkt);
                }
                Ok(len) => {
                    pkt.set_len(len);
                    pkt.meta.in_port = in_port;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    let _ = batch.push(pkt);
                    n += 1;
                }
                Err(e) => {
                    pool.free(pkt);
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
            self.stats.tx_kicks += 1;
            match self.dev.write(pkt.data()) {
                Ok(_) => {
                    sent += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += pkt.len() as u64;
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
