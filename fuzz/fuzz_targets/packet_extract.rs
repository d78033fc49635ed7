//! Untrusted packet bytes: key extraction, then every header rewrite,
//! VLAN, MPLS and PBB push/pop, TTL copy and ND rewrite on the parsed
//! packet (truncated labels, I-TAGs and ND options included). Must never panic or read out of
//! bounds; the key must be the same after a second extraction of the
//! unchanged bytes.
//! (The checks are in `fuzz/checks/packet_extract.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/packet_extract/`.)
#![no_main]

#[path = "../checks/packet_extract.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
