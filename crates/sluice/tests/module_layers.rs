//! The modules of `crates/sluice/src` in layers: a module imports only
//! modules below it (no cycles), as DESIGN.md's layers between crates.

use std::path::Path;

/// Bottom to top. `main.rs` (the binary) sits above all.
const ORDER: &[&str] = &[
    "allocator",
    "log",
    "vlog",
    "loglimit",
    "metrics_http",
    "link",
    "oftarget",
    "cpu",
    "workload",
    "rxq_assign",
    "pmd",
    "auto_lb",
    "config",
    "report",
    "pmd_show",
    "perf_show",
    "trace",
    "tunnels",
    "ctcmd",
    "capture",
    "ctl",
    "ctl_socket",
    "ofhub",
    "oftls",
    "ofgroups",
    "ofmeters",
    "ofmultipart",
    "ofct",
    "oftlv",
    "ofchannel",
    "tend",
    "metrics",
    "runner",
    "vswitchd_cmd",
    "cache_args",
    "bench_cmd",
    "io_floor",
    "xdp_send",
    "manpages",
];

#[test]
fn modules_import_only_lower_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "lib" || name == "main" {
            continue;
        }
        let Some(rank) = ORDER.iter().position(|m| *m == name) else {
            problems.push(format!("{name}.rs is not in ORDER: give it its layer"));
            continue;
        };
        // A module's submodules (`ofchannel/of10.rs`) are of its layer.
        let text = if path.is_dir() {
            let mut t = String::new();
            for e in std::fs::read_dir(&path).unwrap() {
                t += &std::fs::read_to_string(e.unwrap().path()).unwrap();
            }
            t
        } else {
            std::fs::read_to_string(&path).unwrap()
        };
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let used: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(r) = ORDER.iter().position(|m| *m == used) {
                if r >= rank && used != name {
                    problems.push(format!("{name} uses {used}, which is not below it"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
