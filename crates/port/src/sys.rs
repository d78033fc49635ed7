//! Small wrappers over the Linux calls the live ports share: interface
//! indexes, promiscuous mode, socket options, memory maps, errors.
//!
//! Every `unsafe` block of the OS boundary that is not ring access lives
//! here, each with the reason it is sound.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// The Ethernet address of interface `name` (from sysfs), if it has one.
pub fn if_mac(name: &str) -> Option<[u8; 6]> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let s = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).ok()?;
    sluice_packet::wire::ethernet::parse_mac(s.trim()).filter(|m| *m != [0; 6])
}

/// The interface index of `name`, with an error that says what is wrong.
pub fn if_index(name: &str) -> Result<u32, String> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(format!(
            "'{name}' is not a valid interface name (1 to {} bytes)",
            libc::IFNAMSIZ - 1
        ));
    }
    let c = CString::new(name).map_err(|_| format!("'{name}' contains a NUL byte"))?;
    // SAFETY: c is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(format!(
            "no network interface '{name}' (in this network namespace): {}",
            io::Error::last_os_error()
        ));
    }
    Ok(idx)
}

/// `struct ifreq` with the flags member of its union (40 bytes, as the
/// kernel's).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IfReqFlags {
    /// Interface name, NUL-padded.
    pub name: [u8; libc::IFNAMSIZ],
    /// `ifr_flags`.
    pub flags: i16,
    pad: [u8; 22],
}

impl IfReqFlags {
    /// A request for interface `name` (at most 15 bytes) with `flags`.
    pub fn new(name: &str, flags: i16) -> IfReqFlags {
        IfReqFlags {
            name: ifr_name(name),
            flags,
            pad: [0; 22],
        }
    }
}

/// Brings interface `name` up (like `ip link set NAME up`), as Open vSwitch
/// does for the interfaces it opens.
pub fn set_if_up(name: &str) -> io::Result<()> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = IfReqFlags::new(name, 0);
    // SAFETY: req is a valid, writable 40-byte ifreq for both ioctls.
    unsafe {
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        if req.flags & libc::IFF_UP as i16 == 0 {
            req.flags |= libc::IFF_UP as i16;
            if libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// `ifr_name`: `name` NUL-padded, cut at 15 bytes.
fn ifr_name(name: &str) -> [u8; libc::IFNAMSIZ] {
    let mut out = [0; libc::IFNAMSIZ];
    let n = name.len().min(libc::IFNAMSIZ - 1);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// `struct ifreq` with the int member of its union (`ifr_mtu`).
#[repr(C)]
#[derive(Clone, Copy)]
struct IfReqInt {
    name: [u8; libc::IFNAMSIZ],
    value: i32,
    pad: [u8; 20],
}

impl IfReqInt {
    fn new(name: &str, value: i32) -> IfReqInt {
        IfReqInt {
            name: ifr_name(name),
            value,
            pad: [0; 20],
        }
    }
}

/// The MTU of interface `name` (`ip link show` prints it).
pub fn if_mtu(name: &str) -> io::Result<u32> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = IfReqInt::new(name, 0);
    // SAFETY: req is a valid, writable 40-byte ifreq for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req.value as u32)
}

/// Sets the MTU of interface `name` (like `ip link set NAME mtu N`).
pub fn set_if_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let req = IfReqInt::new(name, mtu as i32);
    // SAFETY: req is a valid 40-byte ifreq that lives for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFMTU, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets interface `name`'s MTU when `want` says so, and returns the MTU it
/// has then, with errors that say what to do.
pub fn apply_mtu(name: &str, want: Option<u32>) -> Result<u32, String> {
    if let Some(m) = want {
        set_if_mtu(name, m).map_err(|e| {
            format!(
                "cannot set the MTU of '{name}' to {m}: {e}{}",
                if e.raw_os_error() == Some(libc::EINVAL) {
                    " (beyond what this interface takes; `ip -d link show` prints its maxmtu)"
                } else {
                    ""
                }
            )
        })?;
    }
    if_mtu(name).map_err(|e| format!("reading the MTU of '{name}': {e}"))
}

/// Attaches a `/dev/net/tun` descriptor to tap interface `name` (created
/// if absent), without the packet-information prefix; with a virtio-net
/// header before every frame when `vnet`.
pub fn tun_set_iff(fd: &OwnedFd, name: &str, vnet: bool) -> io::Result<()> {
    let vnet = if vnet { libc::IFF_VNET_HDR } else { 0 };
    let req = IfReqFlags::new(name, (libc::IFF_TAP | libc::IFF_NO_PI | vnet) as i16);
    // SAFETY: TUNSETIFF reads (and may write back the name of) a valid
    // 40-byte ifreq that lives for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the tap `fd` is attached to outlive its descriptors (`on`), or
/// go with the last of them (`TUNSETPERSIST`).
pub fn tun_set_persist(fd: &impl AsRawFd, on: bool) -> io::Result<()> {
    // SAFETY: TUNSETPERSIST takes its argument by value.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETPERSIST, libc::c_ulong::from(on)) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `TUN_F_UDP_TUNNEL_GSO` and `TUN_F_UDP_TUNNEL_GSO_CSUM` (Linux 6.17,
/// `include/uapi/linux/if_tun.h`; not in the libc crate yet).
const TUN_F_UDP_TUNNEL_GSO: libc::c_uint = 0x080;
const TUN_F_UDP_TUNNEL_GSO_CSUM: libc::c_uint = 0x100;

/// Tells a tap opened with a virtio-net header that its reader takes
/// partial checksums and TCP segmentation offload (and UDP segmentation
/// where the kernel knows it, 6.2 on), so the kernel hands over
/// super-frames instead of cutting them; super-frames inside UDP tunnels
/// too where the kernel knows them (6.17 on), with their outer
/// checksums: the device then exchanges the 24-byte tunnel form of the
/// header (`TUNSETVNETHDRSZ`). Returns whether the tunnel form is on,
/// and if not, why.
pub fn tun_set_offload(fd: &OwnedFd) -> io::Result<TunnelGso> {
    let tcp = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
    let set = |flags: libc::c_uint| {
        // SAFETY: TUNSETOFFLOAD takes its argument by value.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, flags as libc::c_ulong) } < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // USO where the kernel has it (6.2 on).
    let uso = libc::TUN_F_USO4 | libc::TUN_F_USO6;
    let plain = if set(tcp | uso).is_ok() {
        tcp | uso
    } else {
        set(tcp)?;
        tcp
    };
    // A kernel before 6.17 refuses the flags it does not know.
    if set(plain | TUN_F_UDP_TUNNEL_GSO | TUN_F_UDP_TUNNEL_GSO_CSUM).is_err() {
        return Ok(TunnelGso::Absent);
    }
    let size = sluice_packet::offload::VNET_HDR_TNL_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int that lives for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &size) } < 0 {
        // Without the longer header the tunnel flags cannot be used: back
        // to the plain ones, the tunnelled super-frames cut by Sluice.
        let e = io::Error::last_os_error();
        set(plain)?;
        return Ok(TunnelGso::Refused(e));
    }
    Ok(TunnelGso::On)
}

/// Whether a tap takes and gives UDP-tunnel super-frames
/// ([`tun_set_offload`]).
#[derive(Debug)]
pub enum TunnelGso {
    /// Yes, with the 24-byte tunnel form of the virtio-net header.
    On,
    /// The kernel has no UDP-tunnel GSO for taps (before 6.17).
    Absent,
    /// The kernel knows the flags but refused the longer header: the
    /// plain flags and header are kept.
    Refused(io::Error),
}

/// A socket of `domain`/`ty`/`proto`, close-on-exec.
pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-data value.
pub fn setsockopt<T: Copy>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: value points to size_of::<T>() readable bytes for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt` into a plain-data value (zeroed first).
pub fn getsockopt<T: Copy + Default>(fd: &OwnedFd, level: i32, name: i32) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is writable for len bytes; len is updated by the kernel.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns; results are checked.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A shared memory map of a descriptor (packet rings), unmapped on drop.
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the map is plain memory; whoever holds the Mmap is its only user.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` read-write, shared, at offset `offset`.
    pub fn new(fd: RawFd, len: usize, offset: i64) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL without MAP_FAILED"),
            len,
        })
    }

    /// Start of the map.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty (never, for a successful map).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing uses the
        // map after its owner drops it.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Whether an error means "try again later" (a full ring or socket buffer).
pub fn would_block(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}

/// Reads what socket `fd` holds now, without waiting (`recv` with
/// `MSG_DONTWAIT`): `WouldBlock` when it holds nothing, `Ok(0)` at the
/// end of the stream. Other threads' use of the same socket (a writer on
/// a clone of it) is not affected, as it would be by `O_NONBLOCK`.
pub fn recv_nowait(fd: std::os::fd::RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole
    // call, and recv writes at most that many; a bad `fd` is an error
    // return, not undefined behaviour.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Waits up to `timeout_ms` for events on descriptors (`poll(2)`): each
/// entry is (fd, events asked, as `libc::POLLIN`...); returns the events
/// that came, in the same order (0 for none). `Interrupted` when a signal
/// came first.
pub fn poll(fds: &[(RawFd, i16)], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfd for the whole call;
    // poll writes only their `revents`.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.iter().map(|x| x.revents).collect())
}

/// An `eventfd(2)`: one thread wakes another that sleeps in [`poll`] on
/// it (a PMD thread woken for a command).
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A non-blocking eventfd, closed on exec.
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; a valid descriptor it returns
        // is ours alone.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and nothing else owns it.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the descriptor readable (adds 1 to its counter).
    pub fn notify(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local buffer. A full counter
        // (EAGAIN) means it is readable already.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Reads the counter back to 0 (not readable again until notified).
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local buffer; EAGAIN
        // (nothing to read) is fine.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Pins the calling thread to CPU `cpu` (a PMD thread owns its core, as
/// OVS's `pmd-cpu-mask` threads do).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    pin_to_cpus(&[cpu])
}

/// Lets the calling thread run on the CPUs listed only (threads it starts
/// afterwards inherit that).
pub fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    if let Some(&cpu) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, CPU_SET
    // writes inside it (each cpu checked above), and sched_setaffinity
    // reads exactly size_of::<cpu_set_t>() bytes of it. Pid 0 is this
    // thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Locks all of this process's memory into RAM, present and future
/// (`mlockall(MCL_CURRENT | MCL_FUTURE)`, as `ovs-vswitchd --mlockall`):
/// every page is faulted in when it is mapped, never when the datapath
/// first writes it, and none is paged out.
pub fn lock_all_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: as above; sched_getaffinity fills the set it is given, and
    // CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_eventfd_wakes_a_poll_once_per_notify() {
        let e = super::EventFd::new().unwrap();
        let fd = e.as_raw_fd();
        assert_eq!(super::poll(&[(fd, libc::POLLIN)], 0).unwrap(), [0]);
        e.notify();
        e.notify();
        assert_eq!(
            super::poll(&[(fd, libc::POLLIN)], 1000).unwrap(),
            [libc::POLLIN]
        );
        e.drain();
        assert_eq!(super::poll(&[(fd, libc::POLLIN)], 0).unwrap(), [0]);
        // Draining an empty one does not block.
        e.drain();
    }

    #[test]
    fn poll_says_which_descriptor_is_ready() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        let fds = [(b.as_raw_fd(), libc::POLLIN), (c.as_raw_fd(), libc::POLLIN)];
        assert_eq!(super::poll(&fds, 0).unwrap(), vec![0, 0]);
        a.write_all(b"x").unwrap();
        let r = super::poll(&fds, 1000).unwrap();
        assert!(r[0] & libc::POLLIN != 0 && r[1] == 0, "{r:?}");
        assert!(
            super::poll(&[(-5, libc::POLLIN)], 0).is_ok(),
            "a bad fd is ignored (POLLNVAL)"
        );
    }

    use super::*;

    #[test]
    fn if_mac_reads_sysfs() {
        assert_eq!(if_mac("lo"), None, "loopback's address is all zeros");
        assert_eq!(if_mac("no-such-if0"), None);
        assert_eq!(if_mac("../lo"), None);
    }

    #[test]
    fn if_index_knows_loopback_and_explains_errors() {
        assert_eq!(if_index("lo").unwrap(), 1);
        assert!(if_index("no-such-if0")
            .unwrap_err()
            .contains("no network interface"));
        assert!(if_index("").unwrap_err().contains("not a valid"));
        assert!(if_index("a-very-long-interface-name").is_err());
        assert_eq!(std::mem::size_of::<IfReqFlags>(), 40);
        set_if_up("lo").unwrap();
        assert!(set_if_up("no-such-if0").is_err());
    }

    #[test]
    fn loopback_mtu_reads_and_a_missing_interface_says_so() {
        assert!(if_mtu("lo").unwrap() >= 1500);
        assert!(apply_mtu("lo", None).unwrap() >= 1500);
        let e = apply_mtu("no-such-if0", Some(1500)).unwrap_err();
        assert!(e.contains("cannot set the MTU of 'no-such-if0'"), "{e}");
    }

    #[test]
    fn socket_options_and_maps_round_trip() {
        let fd = socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0).unwrap();
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &65536i32).unwrap();
        let v: i32 = getsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap();
        assert!(v >= 65536, "the kernel doubles it: {v}");
        set_nonblocking(fd.as_raw_fd()).unwrap();
        let memfd = {
            let name = CString::new("sluice-test").unwrap();
            // SAFETY: valid name; result checked below.
            let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
            assert!(raw >= 0);
            // SAFETY: fresh descriptor.
            unsafe { OwnedFd::from_raw_fd(raw) }
        };
        // SAFETY: valid descriptor; size checked.
        assert_eq!(unsafe { libc::ftruncate(memfd.as_raw_fd(), 8192) }, 0);
        let m = Mmap::new(memfd.as_raw_fd(), 8192, 0).unwrap();
        // SAFETY: inside the 8192-byte map.
        unsafe { *m.as_ptr().add(8191) = 7 };
        assert_eq!(m.len(), 8192);
    }

    #[test]
    fn recv_nowait_reads_what_is_there_and_never_waits() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut buf = [0u8; 8];
        let e = recv_nowait(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        a.write_all(b"0123456789").unwrap();
        assert_eq!(recv_nowait(b.as_raw_fd(), &mut buf).unwrap(), 8);
        assert_eq!(&buf, b"01234567");
        assert_eq!(recv_nowait(b.as_raw_fd(), &mut buf).unwrap(), 2);
        drop(a);
        assert_eq!(recv_nowait(b.as_raw_fd(), &mut buf).unwrap(), 0);
        assert!(recv_nowait(-1, &mut buf).is_err());
    }

    #[test]
    fn a_thread_pins_to_an_allowed_cpu_and_refuses_others() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_to_cpu(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![last]);
        })
        .join()
        .unwrap();
        assert!(pin_to_cpu(100_000).is_err());
        // Still free to run anywhere: pinning was the other thread's.
        assert_eq!(allowed_cpus().unwrap(), cpus);
        let all = cpus.clone();
        std::thread::spawn(move || {
            pin_to_cpus(&all[..1]).unwrap();
            assert_eq!(allowed_cpus().unwrap(), all[..1]);
            pin_to_cpus(&all).unwrap();
            assert_eq!(allowed_cpus().unwrap(), all);
            assert!(pin_to_cpus(&[0, 100_000]).is_err());
        })
        .join()
        .unwrap();
    }
}
