//! Untrusted capture files: the pcap reader must refuse or read them,
//! never panic, and never allocate more than its record limit.
//! (The checks are in `fuzz/checks/pcap_read.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/pcap_read/`.)
#![no_main]

#[path = "../checks/pcap_read.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
