//! Untrusted packets through the connection tracker, in sequences.
//! (The checks are in `fuzz/checks/conntrack.rs`, which `cargo test` also
//! runs over the kept corpus, `fuzz/corpus/conntrack/`.)
#![no_main]

#[path = "../checks/conntrack.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
