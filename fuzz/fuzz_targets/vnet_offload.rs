//! Untrusted virtio-net headers and frames, as a vnet-header port
//! receives them: decode the header, parse the frame, then carry out the
//! request the way the output stage does (segment or complete the
//! checksum). Nothing may panic, and every frame goes back to the pool.
//! (The checks are in `fuzz/checks/vnet_offload.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/vnet_offload/`.)
#![no_main]

#[path = "../checks/vnet_offload.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
