//! Untrusted tunnel packets from an underlay: outer headers checked and
//! popped, the inner frame pushed back and popped again.
//! (The checks are in `fuzz/checks/tunnel_pop.rs`, which `cargo test` also
//! runs over the kept corpus, `fuzz/corpus/tunnel_pop/`.)
#![no_main]

#[path = "../checks/tunnel_pop.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
