//! The C shim's functions (`csrc/dpdk_shim.c`): plain symbols over DPDK's
//! inline functions.

use std::ffi::{c_char, c_int};

/// An `rte_mempool` (opaque).
#[repr(C)]
pub(super) struct Mempool {
    _private: [u8; 0],
}

/// An `rte_mbuf` (opaque).
#[repr(C)]
pub(super) struct Mbuf {
    _private: [u8; 0],
}

extern "C" {
    pub(super) fn sl_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub(super) fn sl_dev_probe(devargs: *const c_char) -> c_int;
    pub(super) fn sl_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    pub(super) fn sl_pool_create(name: *const c_char, n: u32) -> *mut Mempool;
    pub(super) fn sl_pool_free(mp: *mut Mempool);
    pub(super) fn sl_pool_avail(mp: *const Mempool) -> u32;
    pub(super) fn sl_max_queues(port: u16, rxq: *mut u16, txq: *mut u16) -> c_int;
    pub(super) fn sl_port_start(
        port: u16,
        mps: *const *mut Mempool,
        nq: u16,
        nb_desc: u16,
    ) -> c_int;
    pub(super) fn sl_port_stop(port: u16);
    pub(super) fn sl_stats(port: u16, out: *mut u64) -> c_int;
    pub(super) fn sl_thread_register() -> c_int;
    pub(super) fn sl_rx_burst(port: u16, q: u16, m: *mut *mut Mbuf, n: u16) -> u16;
    pub(super) fn sl_tx_burst(port: u16, q: u16, m: *mut *mut Mbuf, n: u16) -> u16;
    pub(super) fn sl_free_mbufs(m: *const *mut Mbuf, n: u32);
    pub(super) fn sl_copy_out(m: *mut Mbuf, dst: *mut u8, cap: u32) -> u32;
    pub(super) fn sl_copy_in(mp: *mut Mempool, src: *const u8, len: u16) -> *mut Mbuf;
    pub(super) fn sl_copy_in_bulk(
        mp: *mut Mempool,
        srcs: *const *const u8,
        lens: *const u16,
        out: *mut *mut Mbuf,
        n: u32,
    ) -> c_int;
}
