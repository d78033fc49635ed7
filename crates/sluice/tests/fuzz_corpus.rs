//! Replays the kept fuzz corpus (`fuzz/corpus/TARGET/`, what fuzzing
//! found and `cargo fuzz cmin` kept) and the regression inputs
//! (`fuzz/regressions/TARGET/`: hand-written seeds and every crash a
//! fuzzing run found, kept once fixed; never minimised away) through the
//! very checks the cargo-fuzz targets run (`fuzz/checks/TARGET.rs`), on
//! the stable toolchain. Seconds, not a fuzz run; `scripts/fuzz` fuzzes.

use std::path::Path;

#[path = "../../../fuzz/checks/config_toml.rs"]
mod config_toml;
#[path = "../../../fuzz/checks/conntrack.rs"]
mod conntrack;
#[path = "../../../fuzz/checks/ctl_request.rs"]
mod ctl_request;
#[path = "../../../fuzz/checks/flow_parse.rs"]
mod flow_parse;
#[path = "../../../fuzz/checks/metrics_request.rs"]
mod metrics_request;
#[path = "../../../fuzz/checks/openflow10.rs"]
mod openflow10;
#[path = "../../../fuzz/checks/openflow_decode.rs"]
mod openflow_decode;
#[path = "../../../fuzz/checks/openflow_session.rs"]
mod openflow_session;
#[path = "../../../fuzz/checks/ovsdb_session.rs"]
mod ovsdb_session;
#[path = "../../../fuzz/checks/packet_extract.rs"]
mod packet_extract;
#[path = "../../../fuzz/checks/pcap_read.rs"]
mod pcap_read;
#[path = "../../../fuzz/checks/stream_frames.rs"]
mod stream_frames;
#[path = "../../../fuzz/checks/tunnel_pop.rs"]
mod tunnel_pop;
#[path = "../../../fuzz/checks/unixctl_request.rs"]
mod unixctl_request;
#[path = "../../../fuzz/checks/vhost_ring.rs"]
mod vhost_ring;
#[path = "../../../fuzz/checks/vnet_offload.rs"]
mod vnet_offload;

/// A target's check of one input.
type Check = fn(&[u8]);

/// Every target and its check.
const TARGETS: &[(&str, Check)] = &[
    ("config_toml", config_toml::run),
    ("conntrack", conntrack::run),
    ("ctl_request", ctl_request::run),
    ("flow_parse", flow_parse::run),
    ("metrics_request", metrics_request::run),
    ("openflow10", openflow10::run),
    ("openflow_decode", openflow_decode::run),
    ("openflow_session", openflow_session::run),
    ("ovsdb_session", ovsdb_session::run),
    ("packet_extract", packet_extract::run),
    ("pcap_read", pcap_read::run),
    ("stream_frames", stream_frames::run),
    ("tunnel_pop", tunnel_pop::run),
    ("unixctl_request", unixctl_request::run),
    ("vhost_ring", vhost_ring::run),
    ("vnet_offload", vnet_offload::run),
];

#[test]
fn every_kept_fuzz_input_passes_its_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut missing = Vec::new();
    for (name, check) in TARGETS {
        assert!(
            root.join("fuzz_targets")
                .join(format!("{name}.rs"))
                .exists(),
            "{name}: no such fuzz target"
        );
        let dirs = ["corpus", "regressions"].map(|d| root.join(d).join(name));
        if !dirs.iter().all(|d| d.is_dir()) {
            missing.push(*name);
            continue;
        }
        let mut n = 0;
        for e in dirs
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
        {
            let path = e.path();
            let data = match std::fs::read(&path) {
                Ok(d) => d,
                // Gone since the listing (a fuzzing run reducing the
                // corpus beside this test): nothing to replay.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => panic!("{}: {err}", path.display()),
            };
            let r = std::panic::catch_unwind(|| check(&data));
            assert!(r.is_ok(), "{name}: {} fails its check", path.display());
            n += 1;
        }
        assert!(n > 0, "{name}: empty corpus");
    }
    assert!(
        missing.is_empty(),
        "no corpus or regressions for {missing:?}"
    );
    // Every target of the fuzz crate is replayed here.
    let listed = std::fs::read_dir(root.join("fuzz_targets"))
        .unwrap()
        .count();
    assert_eq!(listed, TARGETS.len(), "a fuzz target is not replayed");
}
