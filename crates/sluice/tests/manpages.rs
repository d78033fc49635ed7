//! `sluice man` and `sluice completions`: a page per subcommand, each
//! naming every option its `--help` names (they come from the same
//! definitions, and this keeps it so), and completion scripts for the
//! shells users have.

mod support;
use support::{sluice, stdout};

/// The `--long` options a help text lists.
fn long_options(help: &str) -> Vec<String> {
    let mut v: Vec<String> = help
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = t
                .strip_prefix("-")
                .map_or(t, |r| r.split_once(", ").map_or(t, |(_, x)| x));
            t.strip_prefix("--").map(|o| {
                o.split([' ', '=', '<', '['])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
        })
        .filter(|o| !o.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn a_man_page_per_subcommand_with_every_option_of_its_help() {
    let dir = tempfile::tempdir().unwrap();
    let out = sluice(&["man", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    let subs = [
        "run",
        "trace",
        "ctl",
        "check",
        "gen",
        "bench",
        "io-floor",
        "xdp-send",
        "man",
        "completions",
        "vswitchd",
        "demo",
    ];
    for sub in subs {
        let page = std::fs::read_to_string(dir.path().join(format!("sluice-{sub}.8")))
            .unwrap_or_else(|e| panic!("sluice-{sub}.8: {e}"));
        assert!(
            page.contains(".TH sluice-") || page.contains(".TH \"sluice-"),
            "sluice-{sub}.8 has a title"
        );
        let help = stdout(&sluice(&[sub, "--help"]));
        // What it is for first, an example to copy last (issue 59).
        assert!(
            help.lines().next().is_some_and(|l| l.len() > 20),
            "{sub} --help opens with what it is for"
        );
        assert!(
            help.contains("Example"),
            "{sub} --help ends with an example"
        );
        let opts = long_options(&help);
        assert!(
            !opts.is_empty() || sub == "man" || sub == "completions",
            "{sub}: no options read from --help"
        );
        for o in opts {
            // roff escapes the dashes: \-\-port.
            let roff = format!("\\-\\-{}", o.replace('-', "\\-"));
            assert!(
                page.contains(&roff),
                "sluice-{sub}.8 lacks --{o}, which its --help lists"
            );
        }
    }
    let top = std::fs::read_to_string(dir.path().join("sluice.8")).unwrap();
    for sub in subs {
        assert!(
            top.contains(&sub.replace('-', "\\-")),
            "sluice.8 names {sub}"
        );
    }
}

#[test]
fn completion_scripts_for_bash_zsh_and_fish() {
    for (shell, mark) in [
        ("bash", "complete -F _sluice"),
        ("zsh", "#compdef sluice"),
        ("fish", "complete -c sluice"),
    ] {
        let out = sluice(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let s = stdout(&out);
        assert!(s.contains(mark), "{shell}: {}", &s[..s.len().min(200)]);
        assert!(
            s.contains("--flows") && s.contains("io-floor"),
            "{shell} completes options and subcommands"
        );
    }
    let bad = sluice(&["completions", "tcsh"]);
    assert!(!bad.status.success());
}
