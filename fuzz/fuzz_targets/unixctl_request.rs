//! See `fuzz/checks/unixctl_request.rs`, which `cargo test` also runs over
//! the kept corpus, `fuzz/corpus/unixctl_request/`.
#![no_main]

#[path = "../checks/unixctl_request.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
