//! The XDP program Sluice loads for an AF_XDP port, without libbpf: an
//! XSKMAP and five eBPF instructions that redirect every frame of a queue to
//! the socket registered for that queue (and pass it to the kernel stack
//! when none is). It is attached through a BPF link, so the kernel removes
//! it when Sluice closes the link or exits, however it exits.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_UPDATE_ELEM: i64 = 2;
const BPF_PROG_LOAD: i64 = 5;
const BPF_LINK_CREATE: i64 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;
/// Queues a map covers (the queue number is the key).
pub const MAX_QUEUES: u32 = 64;

/// One eBPF instruction.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Insn {
    pub(crate) code: u8,
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

pub(crate) const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

/// `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`.
fn program(map_fd: i32) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): xdp_md.rx_queue_index
        insn(0x61, 2, 1, 16, 0),
        // r1 = map (64-bit immediate, two slots)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: the action when the queue has no socket
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map; its result is the program's
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // exit
        insn(0x95, 0, 0, 0, 0),
    ]
}

pub(crate) fn bpf<T>(cmd: i64, attr: &mut T) -> io::Result<i64> {
    // SAFETY: attr is a valid, initialised bpf_attr prefix of the size we
    // pass; the kernel reads (and for some commands writes) only that much.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

pub(crate) fn owned(fd: i64) -> OwnedFd {
    // SAFETY: fd is a fresh descriptor the kernel just returned to us.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Creates a map of `entries` u32 keys to values of `value_size` bytes.
pub(crate) fn create_map(map_type: u32, value_size: u32, entries: u32) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct MapCreate {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
    }
    let mut attr = MapCreate {
        map_type,
        key_size: 4,
        value_size,
        max_entries: entries,
        map_flags: 0,
    };
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// Loads an XDP program (GPL, as the helpers it calls need).
pub(crate) fn load_xdp(insns: &[Insn], prog_name: &[u8]) -> Result<OwnedFd, String> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    #[repr(C)]
    struct ProgLoad {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
    }
    let mut name = [0u8; 16];
    let n = prog_name.len().min(15);
    name[..n].copy_from_slice(&prog_name[..n]);
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
    };
    bpf(BPF_PROG_LOAD, &mut attr).map(owned).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        format!(
            "loading the XDP program: {e}: {}",
            text.trim_end_matches('\0').trim()
        )
    })
}

/// The loaded program, its map and its attachment; dropping it detaches.
pub struct XdpRedirect {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
}

impl XdpRedirect {
    /// Loads the program and attaches it to interface `ifindex`.
    pub fn attach(ifindex: u32) -> Result<XdpRedirect, String> {
        let map = create_map(BPF_MAP_TYPE_XSKMAP, 4, MAX_QUEUES)
            .map_err(|e| format!("creating the XSKMAP: {e}"))?;
        use std::os::fd::AsRawFd;
        let prog = load_xdp(&program(map.as_raw_fd()), b"sluice_xsk")?;
        #[repr(C)]
        struct LinkCreate {
            prog_fd: u32,
            target_ifindex: u32,
            attach_type: u32,
            flags: u32,
        }
        let mut attr = LinkCreate {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: 0,
        };
        let link = owned(bpf(BPF_LINK_CREATE, &mut attr).map_err(|e| {
            format!(
                "attaching the XDP program: {e}{}",
                if e.raw_os_error() == Some(libc::EBUSY) {
                    " (another XDP program is attached: remove it with `ip link set IF xdp off`)"
                } else {
                    ""
                }
            )
        })?);
        Ok(XdpRedirect {
            map,
            _prog: prog,
            _link: link,
        })
    }

    /// Sends frames of `queue` to socket `xsk_fd`.
    pub fn register(&self, queue: u32, xsk_fd: i32) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let key = queue;
        let value = xsk_fd as u32;
        #[repr(C)]
        struct MapUpdate {
            map_fd: u32,
            pad: u32,
            key: u64,
            value: u64,
            flags: u64,
        }
        let mut attr = MapUpdate {
            map_fd: self.map.as_raw_fd() as u32,
            pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
            .map(|_| ())
            .map_err(|e| format!("registering the socket for queue {queue}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = program(7);
        assert_eq!(p.len(), 6);
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn attaching_to_a_missing_interface_is_a_clear_error() {
        // Needs root (CAP_BPF); CI runs as root.
        let e = XdpRedirect::attach(999_999)
            .err()
            .expect("no such interface");
        assert!(e.contains("XDP"), "{e}");
    }
}
