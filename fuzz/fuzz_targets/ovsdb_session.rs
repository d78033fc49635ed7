//! See `fuzz/checks/ovsdb_session.rs`, which `cargo test` also runs over
//! the kept corpus, `fuzz/corpus/ovsdb_session/`.
#![no_main]

#[path = "../checks/ovsdb_session.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
