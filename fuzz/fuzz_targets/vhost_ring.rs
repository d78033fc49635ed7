//! See `fuzz/checks/vhost_ring.rs`, which `cargo test` also runs over the kept
//! corpus, `fuzz/corpus/vhost_ring/`.
#![no_main]

#[path = "../checks/vhost_ring.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
