//! Pieces several datapath integration tests share: a small Ethernet
//! frame, and a run of a datapath to the end of its input on a clock of
//! its own.
#![allow(dead_code)]

use sluice_datapath::Datapath;

/// An Ethernet frame from `src` to `dst` of the local experimental type
/// (0x88b5), its 46 payload bytes all `seq`.
pub fn frame(dst: [u8; 6], src: [u8; 6], seq: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend(std::iter::repeat_n(seq, 46));
    f
}

/// Runs `dp` until its inputs end, its clock 10 µs further at every
/// poll, then sends what is queued.
pub fn run_to_end(dp: &mut Datapath) {
    let mut n = 0u64;
    dp.run(
        move || {
            n += 1;
            10 + n * 10
        },
        |_| false,
    )
    .unwrap();
    dp.finish().unwrap();
}
