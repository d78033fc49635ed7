//! Golden tests: captures and expected outputs made by scapy
//! (`tests/golden/make_golden.py`), run through the `sluice` binary.
//! Output frames must equal scapy's byte for byte, checksums included.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_port::pcap::read_all;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn frames(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_all(&bytes)
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect()
}

fn run_case(name: &str) {
    let dir = golden_dir().join(name);
    let out = tempfile::tempdir().unwrap();
    let mut ports: BTreeMap<u32, (Option<PathBuf>, Option<PathBuf>)> = BTreeMap::new();
    let spec = std::fs::read_to_string(dir.join("ports")).unwrap();
    for line in spec.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n: u32 = f[0].parse().unwrap();
        let e = ports.entry(n).or_default();
        match f[1] {
            "rx" => e.0 = Some(dir.join(f[2])),
            _ => e.1 = Some(out.path().join(f[2])),
        }
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("run")
        .arg("--json")
        .arg("--flows")
        .arg(dir.join("rules.flows"));
    for (n, (rx, tx)) in &ports {
        let mut parts = Vec::new();
        if let Some(r) = rx {
            parts.push(format!("rx={}", r.display()));
        }
        if let Some(t) = tx {
            parts.push(format!("tx={}", t.display()));
        }
        cmd.arg("--port")
            .arg(format!("{n}=pcap:{}", parts.join(",")));
    }
    let res = cmd.output().unwrap();
    assert!(
        res.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let dp = &report["datapath"];
    let dropped: u64 = dp["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        dp["packets received"].as_u64().unwrap(),
        dp["forwarded"].as_u64().unwrap() + dp["to controller"].as_u64().unwrap() + dropped,
        "{name}: accounting"
    );
    let mut received_from_files = 0;
    for (n, (rx, tx)) in &ports {
        if let Some(r) = rx {
            received_from_files += frames(r).len() as u64;
        }
        if let Some(t) = tx {
            let got = frames(t);
            let want = frames(&dir.join(format!("expected_out{n}.pcap")));
            assert_eq!(got.len(), want.len(), "{name}: port {n} frame count");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g, w,
                    "{name}: port {n} frame {i}\n got {g:02x?}\nwant {w:02x?}"
                );
            }
        }
    }
    assert_eq!(
        dp["packets received"].as_u64().unwrap(),
        received_from_files,
        "{name}: every input frame received"
    );
}

#[test]
fn l3_forward() {
    run_case("l3_forward");
}

#[test]
fn nat_rewrite() {
    run_case("nat_rewrite");
}

#[test]
fn vlan() {
    run_case("vlan");
}

#[test]
fn ipv6_icmp() {
    run_case("ipv6_icmp");
}

#[test]
fn ttl_and_in_port() {
    run_case("ttl_and_in_port");
}
