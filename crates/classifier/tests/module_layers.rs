//! The classifier's modules in layers: a module (a file, or a directory
//! of files) imports only modules below it, so there are no cycles.
//! Tests and comments are not counted: a test may build what it needs
//! from above.

use std::path::Path;

/// Bottom to top.
const ORDER: &[&str] = &[
    "fields",
    "subfield",
    "ct",
    "frag",
    "trie",
    "tunnel",
    "meter",
    "flow_match",
    "learn",
    "multipath",
    "ovs_hash",
    "bundle",
    "action",
    "wildcards",
    "recirc",
    "rule",
    "patch",
    "group",
    "parse",
    "tss",
    "table",
    "dpaction",
    "xlate",
    "megaflow",
    "odp_text",
];

/// The code of a file without its test module and comment lines.
fn code(text: &str) -> String {
    let body = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn modules_import_only_lower_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "lib" || name.ends_with("_tests") {
            continue;
        }
        let Some(rank) = ORDER.iter().position(|m| *m == name) else {
            problems.push(format!("{name} is not in ORDER: give it its layer"));
            continue;
        };
        let files: Vec<_> = if path.is_dir() {
            std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "rs")
                        && !p.file_stem().unwrap().to_str().unwrap().contains("tests")
                })
                .collect()
        } else {
            vec![path.clone()]
        };
        for f in files {
            let text = code(&std::fs::read_to_string(&f).unwrap());
            for (i, _) in text.match_indices("crate::") {
                let used: String = text[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if let Some(r) = ORDER.iter().position(|m| *m == used) {
                    if r >= rank && used != name {
                        problems.push(format!(
                            "{} uses {used}, which is not below {name}",
                            f.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
