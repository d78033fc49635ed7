//! Untrusted bytes from a stream-port peer: the framing reader must cut
//! frames that lie inside the buffer, or stop, never panic.
//! (The checks are in `fuzz/checks/stream_frames.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/stream_frames/`.)
#![no_main]

#[path = "../checks/stream_frames.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
