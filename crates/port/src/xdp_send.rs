//! A traffic generator that sends frames out of an interface from inside
//! the kernel, with no socket and no `sk_buff` per frame: an XDP program
//! that redirects every frame to the interface, run by `BPF_PROG_TEST_RUN`
//! in live-frame mode (`BPF_F_TEST_XDP_LIVE_FRAMES`, Linux 5.18+), which
//! builds each frame from the given bytes in a page pool and transmits what
//! the program redirects through the device's `ndo_xdp_xmit`, in bulk. This
//! is what `xdp-trafficgen` (xdp-tools) does, without libbpf or BTF.
//!
//! On a veth the frames reach the peer's receive path as XDP frames: the
//! peer must run in NAPI mode (an XDP program attached, as AF_XDP ports do,
//! or GRO turned on), else the kernel drops them (`ENXIO` inside, counted
//! as the veth's `peer_tq_xdp_xmit_err`).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};

use crate::xdp_prog::{bpf, create_map, insn, load_xdp, Insn};

const BPF_PROG_TEST_RUN: i64 = 10;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_REDIRECT: i32 = 23;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// Bytes the kernel accepts as one live frame (a page less its headroom
/// and the skb_shared_info it reserves).
pub const MAX_FRAME: usize = 3_500;

/// How the sender varies the frames it sends: a 16-bit big-endian field at
/// `offset` takes the values `base`, `base + 1`, ... `base + count - 1` in
/// turn (one per frame sent), so that one frame makes `count` flows.
#[derive(Debug, Clone, Copy)]
pub struct Vary {
    /// Byte offset of the field in the frame.
    pub offset: u16,
    /// Its first value.
    pub base: u16,
    /// How many values it takes.
    pub count: u16,
}

/// The loaded redirect program (and the counter map of the varying one).
pub struct XdpSender {
    prog: OwnedFd,
    _counter: Option<OwnedFd>,
}

/// `return bpf_redirect(ifindex, 0)`.
fn program(ifindex: u32) -> Vec<Insn> {
    vec![
        insn(0xb7, 1, 0, 0, ifindex as i32),
        insn(0xb7, 2, 0, 0, 0),
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT),
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// The same, after writing `base + (n % count)` at `offset` of the frame,
/// `n` the counter in map `map_fd` (incremented per frame).
fn varying_program(ifindex: u32, map_fd: i32, v: Vary) -> Vec<Insn> {
    let off = i16::try_from(v.offset).unwrap_or(i16::MAX);
    let mut p = vec![
        insn(0xbf, 6, 1, 0, 0),   // r6 = ctx
        insn(0x62, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = 0: the key
        insn(0xbf, 2, 10, 0, 0),  // r2 = r10
        insn(0x07, 2, 0, 0, -4),  // r2 -= 4
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        insn(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
        insn(0x15, 0, 0, 13, 0), // if r0 == 0 goto send
        insn(0x61, 1, 0, 0, 0),  // r1 = *(u32 *)r0
        insn(0xbf, 2, 1, 0, 0),  // r2 = r1
        insn(0x07, 2, 0, 0, 1),  // r2 += 1
        insn(0x63, 0, 2, 0, 0),  // *(u32 *)r0 = r2
        insn(0x94, 1, 0, 0, i32::from(v.count.max(1))), // w1 %= count
        insn(0x61, 2, 6, 0, 0),  // r2 = ctx->data
        insn(0x61, 3, 6, 4, 0),  // r3 = ctx->data_end
        insn(0xbf, 4, 2, 0, 0),  // r4 = r2
        insn(0x07, 4, 0, 0, i32::from(off) + 2), // r4 += offset + 2
        insn(0x2d, 4, 3, 3, 0),  // if r4 > r3 goto send
        insn(0x04, 1, 0, 0, i32::from(v.base)), // w1 += base
        insn(0xdc, 1, 0, 0, 16), // w1 = htons(w1)
        insn(0x6b, 2, 1, off, 0), // *(u16 *)(r2 + offset) = w1
    ];
    p.extend(program(ifindex));
    p
}

impl XdpSender {
    /// Loads a program that sends every frame out of `ifindex` (an interface
    /// of the caller's network namespace), varying a field if asked.
    pub fn new(ifindex: u32, vary: Option<Vary>) -> Result<XdpSender, String> {
        let Some(v) = vary else {
            return Ok(XdpSender {
                prog: load_xdp(&program(ifindex), b"sluice_send")?,
                _counter: None,
            });
        };
        let map = create_map(BPF_MAP_TYPE_ARRAY, 4, 1)
            .map_err(|e| format!("creating the sender's counter map: {e}"))?;
        Ok(XdpSender {
            prog: load_xdp(
                &varying_program(ifindex, map.as_raw_fd(), v),
                b"sluice_send",
            )?,
            _counter: Some(map),
        })
    }

    /// Sends `frame` `repeat` times, the kernel transmitting `batch` frames
    /// at a time (at most 256). Returns once all were handed to the device.
    pub fn send(&self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), String> {
        if frame.len() < 14 || frame.len() > MAX_FRAME {
            return Err(format!(
                "a frame of {} bytes cannot be sent (14 to {MAX_FRAME})",
                frame.len()
            ));
        }
        #[repr(C)]
        #[derive(Default)]
        struct TestRun {
            prog_fd: u32,
            retval: u32,
            data_size_in: u32,
            data_size_out: u32,
            data_in: u64,
            data_out: u64,
            repeat: u32,
            duration: u32,
            ctx_size_in: u32,
            ctx_size_out: u32,
            ctx_in: u64,
            ctx_out: u64,
            flags: u32,
            cpu: u32,
            batch_size: u32,
            pad: u32,
        }
        let mut attr = TestRun {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: batch.clamp(1, 256),
            ..TestRun::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr).map(|_| ()).map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::EPERM) {
                " (this kernel refuses XDP live frames to this process: they need Linux 5.18 \
                     or later and root, and a kernel in lockdown may refuse them even so: \
                     see dmesg and /sys/kernel/security/lockdown)"
            } else {
                ""
            };
            format!("sending through XDP (BPF_PROG_TEST_RUN, live frames): {e}{why}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = program(7);
        assert_eq!((p[0].code, p[0].regs, p[0].imm), (0xb7, 0x01, 7));
        assert_eq!((p[2].code, p[2].imm), (0x85, 23));
        assert_eq!(p[3].code, 0x95);
        let v = varying_program(
            7,
            3,
            Vary {
                offset: 34,
                base: 1024,
                count: 100,
            },
        );
        // Both branches of the bounds checks land on the send part.
        assert_eq!(7 + 1 + 13, v.len() - 4);
        assert_eq!(17 + 1 + 3, v.len() - 4);
        assert_eq!((v[20].code, v[20].off), (0x6b, 34));
    }

    #[test]
    fn frames_of_bad_size_are_refused() {
        // Needs root (CAP_BPF); CI runs as root.
        let s = XdpSender::new(1, None).expect("loading needs no interface");
        assert!(s.send(&[0u8; 10], 1, 1).unwrap_err().contains("14 to"));
        assert!(s.send(&vec![0u8; MAX_FRAME + 1], 1, 1).is_err());
    }
}
