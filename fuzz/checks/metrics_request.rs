//! Untrusted bytes on the `--metrics` endpoint: what a client sends, as
//! the server reads it (a head once the blank line is there, refused past
//! `MAX_HEAD`) and answers it. An answer of a known status or nothing,
//! never a panic; a `HEAD` request's answer has no body to send.

use std::sync::Arc;

use sluice::metrics_http::{answer_to, head_of, HeadError, Render, MAX_HEAD};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let page: Render = Arc::new(|| Ok("sluice_up 1\n# EOF\n".to_string()));
    match head_of(data) {
        None => assert!(data.len() <= MAX_HEAD),
        Some(Err(HeadError::TooLong)) => {}
        Some(Err(HeadError::Gone)) => unreachable!("head_of never says gone"),
        Some(Ok(head)) => {
            assert!(head.len() <= MAX_HEAD * 3, "lossy UTF-8 at most triples it");
            let a = answer_to(&head, &page);
            assert!([200, 400, 404, 405].contains(&a.status), "{}", a.status);
            if a.head_only {
                assert!(head.starts_with("HEAD "));
            }
        }
    }
}
