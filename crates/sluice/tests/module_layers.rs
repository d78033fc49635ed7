//! The layers of the control plane's crates and of their modules: a
//! crate depends only on crates below it, and a module of `crates/sluice`
//! or `crates/ofproto` imports only modules of its crate below it (no
//! cycles), as DESIGN.md's layers. (The classifier's modules have their
//! own test beside it.)

use std::path::Path;

/// `crates/sluice`, bottom to top. `main.rs` (the binary) sits above all.
const ORDER: &[&str] = &[
    "allocator",
    "log",
    "vlog",
    "metrics_http",
    "cpu",
    "workload",
    "rxq_assign",
    "pmd_sleep",
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

/// `crates/ofproto`, bottom to top.
const OFPROTO: &[&str] = &[
    "loglimit",
    "target",
    "tls",
    "backend",
    "hub",
    "groups",
    "meters",
    "multipart",
    "ct",
    "tlv",
    "channel",
];

/// The workspace's crates, bottom to top (`sluice-` left off).
const CRATES: &[&str] = &[
    "packet",
    "conntrack",
    "bridge",
    "classifier",
    "cache",
    "port",
    "datapath",
    "bench",
    "openflow",
    "ofproto",
    "ovsdb",
    "vswitchd",
    "sluice",
];

/// What each module of the crate at `src` imports that is not below it.
fn problems(src: &Path, order: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "lib" || name == "main" {
            continue;
        }
        let Some(rank) = order.iter().position(|m| *m == name) else {
            problems.push(format!("{name}.rs is not in ORDER: give it its layer"));
            continue;
        };
        // A module's submodules (`channel/of10.rs`) are of its layer.
        let text = if path.is_dir() {
            let mut t = String::new();
            for e in std::fs::read_dir(&path).unwrap() {
                t += &std::fs::read_to_string(e.unwrap().path()).unwrap();
            }
            t
        } else {
            std::fs::read_to_string(&path).unwrap()
        };
        // Comments name what they like.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (i, _) in code.match_indices("crate::") {
            let used: String = code[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(r) = order.iter().position(|m| *m == used) {
                if r >= rank && used != name {
                    problems.push(format!("{name} uses {used}, which is not below it"));
                }
            }
        }
    }
    problems
}

#[test]
fn modules_import_only_lower_ones() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = problems(&here.join("src"), ORDER);
    found.extend(problems(&here.join("../ofproto/src"), OFPROTO));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn crates_depend_only_on_lower_ones() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let Some(rank) = CRATES.iter().position(|c| *c == name) else {
            found.push(format!("crates/{name} is not in CRATES: give it its layer"));
            continue;
        };
        let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        // [dependencies] only: a test may build what it needs from above.
        let deps = toml
            .split("[dependencies]")
            .nth(1)
            .unwrap_or_default()
            .split("\n[")
            .next()
            .unwrap_or_default();
        for line in deps.lines() {
            let Some(dep) = line.trim().strip_prefix("sluice-") else {
                continue;
            };
            let dep: String = dep.chars().take_while(|c| *c != '.' && *c != ' ').collect();
            match CRATES.iter().position(|c| *c == dep) {
                Some(r) if r < rank => {}
                _ => found.push(format!(
                    "sluice-{name} depends on sluice-{dep}, not below it"
                )),
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
