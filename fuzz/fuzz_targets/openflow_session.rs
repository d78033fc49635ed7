//! See `fuzz/checks/openflow_session.rs`, which `cargo test` also runs over the kept
//! corpus, `fuzz/corpus/openflow_session/`.
#![no_main]

#[path = "../checks/openflow_session.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
