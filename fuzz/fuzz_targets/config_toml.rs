//! See `fuzz/checks/config_toml.rs`, which `cargo test` also runs over the kept
//! corpus, `fuzz/corpus/config_toml/`.
#![no_main]

#[path = "../checks/config_toml.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
