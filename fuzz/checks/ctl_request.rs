//! Untrusted bytes on the control socket: each line a JSON request, run
//! by a `Control` of a switch with no PMD thread (every command but
//! `add-port`, which would open files and interfaces). A request gets an
//! answer or an error, never a panic; the rules stay a valid rule set.

use std::sync::Arc;
use std::time::Instant;

use sluice::ctl::{Control, Request};
use sluice_classifier::RuleSet;

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let control = Arc::new(Control::new(
        RuleSet::new(),
        Vec::new(),
        Instant::now(),
        None,
    ));
    for line in data.split(|&b| b == b'\n').take(64) {
        let Ok(req) = serde_json::from_slice::<Request>(line) else {
            continue;
        };
        if req.cmd == "add-port" {
            continue;
        }
        let _ = control.execute(&req);
    }
    // The rules it holds still dump.
    let _ = control.execute(&Request {
        cmd: "dump-flows".into(),
        args: Vec::new(),
    });
}
