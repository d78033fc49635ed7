//! Untrusted OpenFlow bytes as a connection reads them: framed, decoded,
//! each message that decodes encoded again and decoded to the same thing
//! (after one pass, which settles lossy names);
//! flow-mods, group-mods, meter-mods and packet-outs mapped onto the
//! classifier's rules, groups, meters and actions (errors, never a panic);
//! every flow-mod frame also read as the channel reads them, through one
//! reader kept across the input's frames, with the same result.
//! (The checks are in `fuzz/checks/openflow_decode.rs`, which `cargo test` also runs
//! over the kept corpus, `fuzz/corpus/openflow_decode/`.)
#![no_main]

#[path = "../checks/openflow_decode.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
