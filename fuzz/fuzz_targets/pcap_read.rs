//! Untrusted capture files: the pcap reader must refuse or read them,
//! never panic, and never allocate more than its record limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sluice_port::pcap::read_all(data);
});
