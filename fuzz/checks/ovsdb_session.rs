//! Untrusted bytes from an OVSDB server: what `sluice vswitchd` reads on
//! its database connection, fed to a client session (framing, JSON-RPC,
//! schema, monitor updates) cut at a point the input chooses. Events or a
//! session error, never a panic; after an error the session stays ended;
//! what the session writes back is always JSON-RPC.

use sluice_ovsdb::framing::Framer;
use sluice_ovsdb::message::Message;
use sluice_ovsdb::Client;

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (a, b) = data.split_at(cut);
    let mut c = Client::new("Open_vSwitch");
    c.monitor(&[("Bridge", &[]), ("Port", &["name", "interfaces"])]);
    let mut ended = false;
    for part in [a, b] {
        match c.feed(part) {
            Ok(_) => assert!(!ended, "no events after the session ended"),
            Err(_) => ended = true,
        }
        // Whatever it answered (echo replies, a fallback monitor) frames
        // and parses.
        let out = c.take_output();
        let mut f = Framer::default();
        f.push(&out);
        while let Some(t) = f.next_message().expect("the session writes JSON texts") {
            Message::parse(&t).expect("and JSON-RPC messages");
        }
        if ended {
            break;
        }
    }
}
