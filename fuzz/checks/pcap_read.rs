//! Untrusted capture files: the pcap reader must refuse or read them,
//! never panic, and never allocate more than its record limit.

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let _ = sluice_port::pcap::read_all(data);
}
