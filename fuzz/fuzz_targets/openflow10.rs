//! Untrusted OpenFlow 1.0 and Nicira bytes: flow-mods, statistics
//! requests, action lists, NXM matches (the checks are in
//! `fuzz/checks/openflow10.rs`, which `cargo test` also runs over
//! `fuzz/corpus/openflow10/` and `fuzz/regressions/openflow10/`).
#![no_main]

#[path = "../checks/openflow10.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
