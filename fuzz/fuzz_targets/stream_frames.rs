//! Untrusted bytes from a stream-port peer: the framing reader must cut
//! frames that lie inside the buffer, or stop, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_port::stream::{next_frame, Framing, MIN_FRAME};

fuzz_target!(|data: &[u8]| {
    let mut ofs = 0;
    while let Framing::Frame(len) = next_frame(&data[ofs..]) {
        assert!(len >= MIN_FRAME && ofs + 2 + len <= data.len());
        ofs += 2 + len;
    }
});
