//! Untrusted flow-file text: parse, and for every rule that parses,
//! format it and parse the formatted text again (same rule).

use sluice_classifier::action::format_actions;
use sluice_classifier::{parse_flow, parse_flow_file, Require};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(specs) = parse_flow_file(text, Some("fuzz")) else {
        return;
    };
    for s in specs {
        let line = format!(
            "table={},priority={},{} actions={}",
            s.table,
            s.priority,
            s.matcher,
            format_actions(&s.actions)
        );
        let back = parse_flow(&line, Require::Actions).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(back.matcher, s.matcher, "{line}");
        assert_eq!(back.actions, s.actions, "{line}");
    }
}
