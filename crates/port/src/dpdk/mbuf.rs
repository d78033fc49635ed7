//! The few `rte_mbuf` fields a packet needs, read and written in place
//! (DPDK 22.11's layout, which `csrc/dpdk_shim.c` asserts at build time):
//! an rx burst turns each mbuf into a packet and a tx burst turns each
//! packet back, with no descriptor array between Rust and C.

use std::ptr::NonNull;

use super::ffi::Mbuf;

const BUF_ADDR: usize = 0;
const DATA_OFF: usize = 16;
const NB_SEGS: usize = 20;
const OL_FLAGS: usize = 24;
const PKT_LEN: usize = 36;
const DATA_LEN: usize = 40;
const VLAN_TCI: usize = 42;
const HASH_RSS: usize = 44;
const BUF_LEN: usize = 54;
// pkt_len, data_len and vlan_tci are one word (for_tx writes them so).
const _: () = assert!(DATA_LEN == PKT_LEN + 4 && VLAN_TCI == DATA_LEN + 2);
/// `sizeof(struct rte_mbuf)`: a direct mbuf without private area has its
/// buffer right after the header.
pub(super) const HEADER: usize = 128;
/// `RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL`.
const NOT_DIRECT: u64 = 0x6000_0000_0000_0000;
/// `RTE_MBUF_F_RX_RSS_HASH`.
const RX_RSS_HASH: u64 = 2;

/// What rx needs of a received mbuf.
pub(super) struct RxView {
    /// Its buffer, when the packet can be used in place (one segment, a
    /// direct mbuf whose buffer follows its header); `None`: copy it out.
    pub buf: Option<NonNull<u8>>,
    pub buf_len: u32,
    pub data_off: u32,
    pub len: u32,
    pub hash: Option<u32>,
}

/// # Safety
/// `m` points to a valid mbuf.
#[inline(always)]
unsafe fn field<T: Copy>(m: *const Mbuf, off: usize) -> T {
    // SAFETY: the caller passes a valid mbuf; off and T match the
    // asserted layout, inside the 128-byte header.
    unsafe { m.cast::<u8>().add(off).cast::<T>().read_unaligned() }
}

/// # Safety
/// `m` points to a valid mbuf the caller owns.
#[inline(always)]
unsafe fn set_field<T: Copy>(m: *mut Mbuf, off: usize, v: T) {
    // SAFETY: as in field(); the caller owns the mbuf.
    unsafe { m.cast::<u8>().add(off).cast::<T>().write_unaligned(v) }
}

/// Reads a received mbuf.
///
/// # Safety
/// `m` is a valid mbuf.
#[inline(always)]
pub(super) unsafe fn rx_view(m: *mut Mbuf) -> RxView {
    // SAFETY: m is valid (caller).
    unsafe {
        let buf: *mut u8 = field(m, BUF_ADDR);
        let flags: u64 = field(m, OL_FLAGS);
        let plain = field::<u16>(m, NB_SEGS) == 1
            && flags & NOT_DIRECT == 0
            && buf == m.cast::<u8>().add(HEADER);
        RxView {
            buf: if plain { NonNull::new(buf) } else { None },
            buf_len: u32::from(field::<u16>(m, BUF_LEN)),
            data_off: u32::from(field::<u16>(m, DATA_OFF)),
            len: field(m, PKT_LEN),
            hash: (flags & RX_RSS_HASH != 0).then(|| field(m, HASH_RSS)),
        }
    }
}

/// The length of the packet in `m`.
///
/// # Safety
/// `m` is a valid mbuf.
#[inline(always)]
pub(super) unsafe fn pkt_len(m: *mut Mbuf) -> u32 {
    // SAFETY: m is valid (caller).
    unsafe { field(m, PKT_LEN) }
}

/// The mbuf whose buffer is `buf` (a direct mbuf of Sluice's pools),
/// made to carry `len` bytes at `data_off`, ready to send.
///
/// # Safety
/// `buf` came from [`rx_view`] of an mbuf the caller owns, and
/// `data_off + len` is within its buffer.
#[inline(always)]
pub(super) unsafe fn for_tx(buf: NonNull<u8>, data_off: u32, len: u32) -> *mut Mbuf {
    // SAFETY: a plain mbuf's buffer follows its header (checked by
    // rx_view); the caller owns it. An mbuf's buffer is at most 64 KiB, so
    // the offset and length fit their fields.
    unsafe {
        let m = buf.as_ptr().sub(HEADER).cast::<Mbuf>();
        set_field(m, DATA_OFF, data_off as u16);
        set_field(m, OL_FLAGS, 0u64);
        // pkt_len, data_len and vlan_tci (its tag to insert, read only
        // with a VLAN offload flag, which the flags above clear) as one
        // store: a burst's loop is bound by its stores.
        set_field(m, PKT_LEN, u64::from(len) | u64::from(len as u16) << 32);
        m
    }
}
