//! The packet-socket side of the AF_PACKET port: option numbers and
//! status bits of `<linux/if_packet.h>`, the structures the ring setup
//! passes, binding, the drop-all filter a socket starts with, the
//! ring-less socket that sends large frames with `sendmsg`, and reading a
//! frame too long for an rx slot from the socket's queue.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use sluice_packet::offload::VNET_HDR_LEN;

use crate::sys;

pub(super) const SOL_PACKET: i32 = 263;
pub(super) const PACKET_ADD_MEMBERSHIP: i32 = 1;
pub(super) const PACKET_RX_RING: i32 = 5;
pub(super) const PACKET_STATISTICS: i32 = 6;
pub(super) const PACKET_COPY_THRESH: i32 = 7;
pub(super) const PACKET_VERSION: i32 = 10;
pub(super) const PACKET_TX_RING: i32 = 13;
pub(super) const PACKET_IGNORE_OUTGOING: i32 = 23;
pub(super) const PACKET_VNET_HDR: i32 = 15;
pub(super) const PACKET_FANOUT: i32 = 18;
pub(super) const PACKET_FANOUT_HASH: u32 = 0;
pub(super) const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
pub(super) const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;
pub(super) const PACKET_MR_PROMISC: u16 = 1;
pub(super) const TPACKET_V2: i32 = 1;
pub(super) const ETH_P_ALL: u16 = 0x0003;
pub(super) const PACKET_OUTGOING: u8 = 4;

pub(super) const TP_STATUS_KERNEL: u32 = 0;
pub(super) const TP_STATUS_USER: u32 = 1;
pub(super) const TP_STATUS_COPY: u32 = 1 << 1;
pub(super) const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub(super) const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
pub(super) const TP_STATUS_AVAILABLE: u32 = 0;
pub(super) const TP_STATUS_SEND_REQUEST: u32 = 1;
pub(super) const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

// Offsets in `struct tpacket2_hdr`, at the start of every slot.
pub(super) const PKT_STATUS: usize = 0;
pub(super) const PKT_LEN: usize = 4;
pub(super) const PKT_SNAPLEN: usize = 8;
pub(super) const PKT_MAC: usize = 12;
pub(super) const PKT_VLAN_TCI: usize = 24;
pub(super) const PKT_VLAN_TPID: usize = 26;
/// `sll_pkttype` of the `sockaddr_ll` after the aligned header.
pub(super) const PKT_SLL_PKTTYPE: usize = 32 + 10;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct TpacketReq {
    pub(super) block_size: u32,
    pub(super) block_nr: u32,
    pub(super) frame_size: u32,
    pub(super) frame_nr: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct TpacketStats {
    pub(super) packets: u32,
    pub(super) drops: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct PacketMreq {
    pub(super) ifindex: i32,
    pub(super) kind: u16,
    pub(super) alen: u16,
    pub(super) address: [u8; 8],
}

/// A packet socket that only sends: bound to `ifindex` with protocol 0
/// (it takes no frame), virtio-net headers on, a send buffer of 8 MiB
/// (a default one holds three super-frames).
pub(super) fn direct_socket(ifindex: u32) -> io::Result<OwnedFd> {
    let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
    sys::setsockopt(&fd, SOL_PACKET, PACKET_VNET_HDR, &1i32)?;
    let sndbuf = 8i32 << 20;
    if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
        sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf)?;
    }
    bind(&fd, ifindex, 0)?;
    Ok(fd)
}

/// Binds packet socket `fd` to interface `ifindex` for frames of
/// `protocol` (host order; 0 takes none).
pub(super) fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: addr is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `frame` behind virtio-net header `hdr` on packet socket `fd`
/// (one the port owns) without waiting.
pub(super) fn send_with_vnet(fd: i32, hdr: &[u8; VNET_HDR_LEN], frame: &[u8]) -> io::Result<()> {
    let mut iov = [
        libc::iovec {
            iov_base: hdr.as_ptr().cast_mut().cast(),
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: frame.as_ptr().cast_mut().cast(),
            iov_len: frame.len(),
        },
    ];
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len();
    // SAFETY: msg points at two iovecs over live buffers the kernel only
    // reads during the call.
    let rc = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A classic BPF program of one instruction, `ret #0`: drop every frame.
pub(super) struct DropAll([libc::sock_filter; 1]);

pub(super) static DROP_ALL: DropAll = DropAll([libc::sock_filter {
    code: 0x06, // BPF_RET | BPF_K
    jt: 0,
    jf: 0,
    k: 0,
}]);

impl DropAll {
    pub(super) fn prog(&'static self) -> libc::sock_fprog {
        libc::sock_fprog {
            len: 1,
            // The kernel copies the program in SO_ATTACH_FILTER and never
            // writes through this pointer.
            filter: self.0.as_ptr().cast_mut(),
        }
    }
}

// SAFETY: the program is immutable plain data.
unsafe impl Sync for DropAll {}

/// Reads the next frame queued on packet socket `fd` (one too long for
/// its rx slot, `TP_STATUS_COPY`): its virtio-net header into `hdr`, its
/// bytes into `buf`. Returns the frame's whole length, which is longer
/// than `buf` when it was cut. An error the socket kept for its next
/// reader (`ENETDOWN` after the interface went down and up) is taken
/// first, then the frame is read.
pub(super) fn recv_queued(
    fd: &OwnedFd,
    hdr: &mut [u8; VNET_HDR_LEN],
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut tries = 0;
    loop {
        match recv_queued_once(fd, hdr, buf) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock && tries < 2 => tries += 1,
            r => return r,
        }
    }
}

fn recv_queued_once(
    fd: &OwnedFd,
    hdr: &mut [u8; VNET_HDR_LEN],
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: VNET_HDR_LEN,
        },
        libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        },
    ];
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len();
    // SAFETY: msg points at two iovecs over `hdr` and `buf`, which live
    // and are not otherwise borrowed for the call.
    let n = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n < VNET_HDR_LEN {
        return Err(io::ErrorKind::InvalidData.into());
    }
    Ok(n - VNET_HDR_LEN)
}

/// Takes the next frame queued on packet socket `fd` off its queue
/// unread (one whose slot is not used), past a kept error as
/// [`recv_queued`].
pub(super) fn discard_queued(fd: &OwnedFd) {
    let _ = recv_queued(fd, &mut [0; VNET_HDR_LEN], &mut []);
}
