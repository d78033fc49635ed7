//! Untrusted bytes on the unixctl socket (`ovs-appctl`'s side): requests
//! to a session with a couple of commands, cut where the input says.
//! Replies or the session's end, never a panic; every reply JSON-RPC,
//! one per request.

use sluice_ovsdb::framing::Framer;
use sluice_ovsdb::message::Message;
use sluice_vswitchd::unixctl::{Commands, UnixctlSession};

struct Cmds;

impl Commands for Cmds {
    fn list(&self) -> Vec<(String, String)> {
        vec![("version".into(), String::new())]
    }
    fn call(&mut self, method: &str, args: &[String]) -> Option<Result<String, String>> {
        match method {
            "version" => Some(Ok("3.1.0".into())),
            "fail" => Some(Err(args.join(" "))),
            _ => None,
        }
    }
}

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (a, b) = data.split_at(cut);
    let mut s = UnixctlSession::default();
    for part in [a, b] {
        let r = s.feed(part, &mut Cmds);
        let out = s.take_output();
        let mut f = Framer::default();
        f.push(&out);
        while let Some(t) = f.next_message().expect("replies are JSON texts") {
            let m = Message::parse(&t).expect("and JSON-RPC");
            assert!(
                matches!(m, Message::Reply { .. } | Message::Error { .. }),
                "{m:?}"
            );
        }
        if r.is_err() {
            break;
        }
    }
}
