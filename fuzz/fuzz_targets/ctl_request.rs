//! See `fuzz/checks/ctl_request.rs`, which `cargo test` also runs over the kept
//! corpus, `fuzz/corpus/ctl_request/`.
#![no_main]

#[path = "../checks/ctl_request.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
