//! Untrusted flow-file text: parse, and for every rule that parses,
//! format it and parse the formatted text again (same rule).
//! (The checks are in `fuzz/checks/flow_parse.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/flow_parse/`.)
#![no_main]

#[path = "../checks/flow_parse.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
