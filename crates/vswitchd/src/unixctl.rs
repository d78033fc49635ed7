//! The `ovs-appctl` protocol (OVS's unixctl) without I/O: JSON-RPC
//! requests on a stream, `{"method": COMMAND, "params": [ARG, ...], "id":
//! N}`, each answered with the command's text as `result` or its failure
//! as `error`. The commands are the daemon's ([`Commands`]); the session
//! frames and parses, answers `list-commands` itself and refuses what is
//! not a request of strings with an error reply (a message that is not
//! JSON-RPC at all ends the session). The framing is OVSDB's
//! ([`sluice_ovsdb::framing`]): the same JSON-RPC 1.0.

use serde_json::{json, Value};
use sluice_ovsdb::framing::Framer;
use sluice_ovsdb::message::Message;

/// The longest request a client may send (OVS's commands are a line).
pub const MAX_REQUEST: usize = 1 << 20;

/// What a daemon serves over unixctl.
pub trait Commands {
    /// The commands, each with its argument synopsis, for `list-commands`.
    fn list(&self) -> Vec<(String, String)>;
    /// Runs `method` with `args`: its output, or why it failed. `None`:
    /// no such command.
    fn call(&mut self, method: &str, args: &[String]) -> Option<Result<String, String>>;
}

/// One client's session.
#[derive(Debug)]
pub struct UnixctlSession {
    framer: Framer,
    out: Vec<u8>,
}

impl Default for UnixctlSession {
    fn default() -> Self {
        UnixctlSession {
            framer: Framer::new(MAX_REQUEST),
            out: Vec::new(),
        }
    }
}

/// Why a session ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixctlError(pub String);

impl std::fmt::Display for UnixctlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnixctlError {}

impl UnixctlSession {
    /// Bytes to send back (taken).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Takes bytes from the client and runs the requests they complete.
    pub fn feed(&mut self, bytes: &[u8], cmds: &mut dyn Commands) -> Result<(), UnixctlError> {
        self.framer.push(bytes);
        loop {
            let text = match self.framer.next_message() {
                Ok(Some(t)) => t,
                Ok(None) => return Ok(()),
                Err(e) => return Err(UnixctlError(format!("unixctl: {e}"))),
            };
            let msg = Message::parse(&text).map_err(|e| UnixctlError(format!("unixctl: {e}")))?;
            let (id, method, params) = match msg {
                Message::Request { id, method, params } => (id, method, params),
                Message::Notification { method, .. } => {
                    return Err(UnixctlError(format!("unixctl: {method} without an id")))
                }
                _ => return Err(UnixctlError("unixctl: a reply where a request goes".into())),
            };
            let reply = match strings(&params) {
                None => Message::Error {
                    id,
                    error: json!(line(format!(
                        "\"{method}\" command has non-string argument"
                    ))),
                },
                Some(args) => match run(cmds, &method, &args) {
                    Ok(text) => Message::Reply {
                        id,
                        result: json!(line(text)),
                    },
                    Err(text) => Message::Error {
                        id,
                        error: json!(line(text)),
                    },
                },
            };
            self.out.extend(reply.to_bytes());
        }
    }
}

/// A reply's text as OVS's `unixctl_command_reply__` sends it: what is
/// not empty ends with a newline (`ovs-appctl` prints an error and then
/// its own line after it).
fn line(mut text: String) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

fn strings(params: &[Value]) -> Option<Vec<String>> {
    params
        .iter()
        .map(|p| p.as_str().map(str::to_string))
        .collect()
}

fn run(cmds: &mut dyn Commands, method: &str, args: &[String]) -> Result<String, String> {
    if method == "list-commands" {
        let mut list = cmds.list();
        list.push(("list-commands".into(), String::new()));
        list.sort();
        let mut s = String::from("The available commands are:\n");
        for (c, syn) in list {
            s += &format!("  {:<34}{syn}\n", c);
        }
        return Ok(s);
    }
    cmds.call(method, args).unwrap_or_else(|| {
        Err(format!(
            "\"{method}\" is not a valid command (use \"list-commands\" to see a list of valid commands)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    impl Commands for Echo {
        fn list(&self) -> Vec<(String, String)> {
            vec![
                ("version".into(), String::new()),
                ("echo".into(), "[ARG...]".into()),
            ]
        }
        fn call(&mut self, method: &str, args: &[String]) -> Option<Result<String, String>> {
            match method {
                "version" => Some(Ok("ovs-vswitchd (Open vSwitch) 3.1.0\n".into())),
                "echo" if args.is_empty() => Some(Err("echo needs an argument".into())),
                "echo" => Some(Ok(args.join(" "))),
                _ => None,
            }
        }
    }

    fn replies(out: Vec<u8>) -> Vec<Message> {
        let mut f = Framer::default();
        f.push(&out);
        let mut v = Vec::new();
        while let Some(t) = f.next_message().unwrap() {
            v.push(Message::parse(&t).unwrap());
        }
        v
    }

    #[test]
    fn commands_errors_and_list() {
        let mut s = UnixctlSession::default();
        let req = br#"{"method":"version","params":[],"id":0}{"method":"echo","params":["a","b"],"id":1}{"method":"echo","params":[],"id":2}{"method":"frob","params":[],"id":3}{"method":"echo","params":[5],"id":4}{"method":"list-commands","params":[],"id":5}"#;
        s.feed(&req[..20], &mut Echo).unwrap();
        s.feed(&req[20..], &mut Echo).unwrap();
        let r = replies(s.take_output());
        assert_eq!(
            r[0],
            Message::Reply {
                id: json!(0),
                result: json!("ovs-vswitchd (Open vSwitch) 3.1.0\n")
            }
        );
        assert_eq!(
            r[1],
            Message::Reply {
                id: json!(1),
                // A newline put at the end, as OVS's.
                result: json!("a b\n")
            }
        );
        assert_eq!(
            r[2],
            Message::Error {
                id: json!(2),
                error: json!("echo needs an argument\n")
            }
        );
        assert!(
            matches!(&r[3], Message::Error { error, .. } if error.as_str().unwrap().contains("\"frob\" is not a valid command"))
        );
        assert!(
            matches!(&r[4], Message::Error { error, .. } if error == "\"echo\" command has non-string argument\n")
        );
        let Message::Reply { result, .. } = &r[5] else {
            panic!("{:?}", r[5])
        };
        let list = result.as_str().unwrap();
        assert!(
            list.starts_with("The available commands are:\n")
                && list.contains("  echo")
                && list.contains("[ARG...]")
        );
    }

    #[test]
    fn what_is_not_json_rpc_ends_the_session() {
        for bad in [
            &b"nope"[..],
            b"{\"id\":1,\"result\":2}",
            b"{\"method\":\"x\"}",
            b"{]",
        ] {
            let mut s = UnixctlSession::default();
            assert!(
                s.feed(bad, &mut Echo).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
