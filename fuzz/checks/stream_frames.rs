//! Untrusted bytes from a stream-port peer: the framing reader must cut
//! frames that lie inside the buffer, or stop, never panic.

use sluice_port::stream::{next_frame, Framing, MIN_FRAME};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let mut ofs = 0;
    while let Framing::Frame(len) = next_frame(&data[ofs..]) {
        assert!(len >= MIN_FRAME && ofs + 2 + len <= data.len());
        ofs += 2 + len;
    }
}
