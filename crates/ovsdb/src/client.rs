//! An OVSDB client session without I/O (as quinn-proto is a QUIC one): the
//! daemon feeds it the bytes it reads from ovsdb-server and writes out the
//! bytes it produces; the session frames and parses messages, answers the
//! server's `echo`, matches replies to requests, keeps the monitored
//! tables' copy ([`crate::replica::Replica`]) and reports what happened as
//! [`Event`]s. `monitor_cond` is asked first; a server that does not know
//! it (`unknown method`) is asked `monitor` instead, the same tables.
//!
//! A malformed message from the server ends the session with an error
//! ([`Client::feed`]): the daemon reconnects and starts a new one (a new
//! session asks for the schema and the initial contents again, so nothing
//! depends on what the old one saw).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::framing::Framer;
use crate::message::Message;
use crate::replica::{Changed, Replica};
use crate::schema::Schema;

/// The monitor's id in its requests and notifications.
const MONITOR_ID: &str = "sluice";

/// What happened on the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The schema came ([`Client::schema`]).
    Schema,
    /// The monitored tables' initial contents came.
    Monitored(Changed),
    /// An update came and is applied.
    Updated(Changed),
    /// The lock is ours (true) or asked for and not yet ours (false).
    Locked(bool),
    /// Another client took the lock.
    LockStolen,
    /// A transaction's reply, for the tag [`Client::transact`] gave.
    Transacted { tag: u64, result: Value },
    /// A request failed: which, and what the server said.
    Failed { request: String, error: String },
}

/// Why a session cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionError(pub String);

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionError {}

#[derive(Debug, Clone)]
enum Pending {
    GetSchema,
    Monitor { cond: bool, tables: Value },
    Lock,
    Transact,
    Echo,
}

impl Pending {
    /// The request's method.
    fn method(&self) -> &'static str {
        match self {
            Pending::GetSchema => "get_schema",
            Pending::Monitor { cond: true, .. } => "monitor_cond",
            Pending::Monitor { cond: false, .. } => "monitor",
            Pending::Lock => "lock",
            Pending::Transact => "transact",
            Pending::Echo => "echo",
        }
    }
}

/// One session with one server.
#[derive(Debug)]
pub struct Client {
    db: String,
    framer: Framer,
    out: Vec<u8>,
    next_id: u64,
    pending: HashMap<u64, Pending>,
    schema: Option<Schema>,
    replica: Replica,
    locked: bool,
}

impl Client {
    /// A session with database `db`, which asks for its schema first.
    pub fn new(db: &str) -> Self {
        let mut c = Client {
            db: db.to_string(),
            framer: Framer::default(),
            out: Vec::new(),
            next_id: 1,
            pending: HashMap::new(),
            schema: None,
            replica: Replica::new(),
            locked: false,
        };
        c.request(Pending::GetSchema, "get_schema", vec![json!(db)]);
        c
    }

    /// The schema, once it came.
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// The monitored tables as the server last said.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Whether the lock is ours.
    pub fn has_lock(&self) -> bool {
        self.locked
    }

    /// Requests waiting for a reply.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes to write to the server (taken: the next call gives the rest).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn request(&mut self, p: Pending, method: &str, params: Vec<Value>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, p);
        let m = Message::Request {
            id: json!(id),
            method: method.into(),
            params,
        };
        self.out.extend(m.to_bytes());
        id
    }

    /// Asks for lock `name` (`lock`): [`Event::Locked`] says when it is ours.
    pub fn lock(&mut self, name: &str) {
        self.request(Pending::Lock, "lock", vec![json!(name)]);
    }

    /// Monitors `tables` (each with the columns wanted; none: all):
    /// [`Event::Monitored`] with the initial contents, then
    /// [`Event::Updated`] for every change.
    pub fn monitor(&mut self, tables: &[(&str, &[&str])]) {
        let mut req = serde_json::Map::new();
        for (t, cols) in tables {
            let r = if cols.is_empty() {
                json!({})
            } else {
                json!({ "columns": cols })
            };
            req.insert((*t).to_string(), json!([r]));
        }
        let tables = Value::Object(req);
        self.request(
            Pending::Monitor {
                cond: true,
                tables: tables.clone(),
            },
            "monitor_cond",
            vec![json!(self.db), json!(MONITOR_ID), tables],
        );
    }

    /// Sends a transaction of `ops` (RFC 7047 §5.2 operations); returns
    /// the tag its [`Event::Transacted`] will carry.
    pub fn transact(&mut self, ops: Vec<Value>) -> u64 {
        let mut params = vec![json!(self.db)];
        params.extend(ops);
        self.request(Pending::Transact, "transact", params)
    }

    /// Sends an `echo` (the inactivity probe).
    pub fn echo(&mut self) {
        self.request(Pending::Echo, "echo", vec![]);
    }

    /// Takes bytes read from the server; returns what they brought about.
    /// An error ends the session (the daemon reconnects).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, SessionError> {
        self.framer.push(bytes);
        let mut events = Vec::new();
        loop {
            let text = match self.framer.next_message() {
                Ok(Some(t)) => t,
                Ok(None) => return Ok(events),
                Err(e) => return Err(SessionError(format!("from the database server: {e}"))),
            };
            let msg = Message::parse(&text)
                .map_err(|e| SessionError(format!("from the database server: {e}")))?;
            self.handle(msg, &mut events)?;
        }
    }

    fn handle(&mut self, msg: Message, events: &mut Vec<Event>) -> Result<(), SessionError> {
        match msg {
            Message::Request { id, method, params } => {
                let reply = if method == "echo" {
                    Message::Reply {
                        id,
                        result: Value::Array(params),
                    }
                } else {
                    Message::Error {
                        id,
                        error: json!(format!("unknown method {method}")),
                    }
                };
                self.out.extend(reply.to_bytes());
            }
            Message::Notification { method, params } => match method.as_str() {
                "update2" | "update" => {
                    let updates = params
                        .get(1)
                        .ok_or_else(|| SessionError(format!("{method} without table updates")))?;
                    let ch = self.apply(method == "update2", updates)?;
                    events.push(Event::Updated(ch));
                }
                "locked" => {
                    self.locked = true;
                    events.push(Event::Locked(true));
                }
                "stolen" => {
                    self.locked = false;
                    events.push(Event::LockStolen);
                }
                // Others (update3, ...) are not asked for: ignored.
                _ => {}
            },
            Message::Reply { id, result } => {
                let n = id.as_u64();
                let Some(p) = n.and_then(|i| self.pending.remove(&i)) else {
                    return Err(SessionError(format!("a reply to no request: id {id}")));
                };
                match p {
                    Pending::GetSchema => {
                        let s = Schema::from_json(&result)
                            .map_err(|e| SessionError(format!("the schema: {e}")))?;
                        self.schema = Some(s);
                        events.push(Event::Schema);
                    }
                    Pending::Monitor { cond, .. } => {
                        self.replica.clear();
                        let ch = self.apply(cond, &result)?;
                        events.push(Event::Monitored(ch));
                    }
                    Pending::Lock => {
                        self.locked = result["locked"].as_bool().unwrap_or(false);
                        events.push(Event::Locked(self.locked));
                    }
                    Pending::Transact => events.push(Event::Transacted {
                        tag: n.unwrap_or_default(),
                        result,
                    }),
                    Pending::Echo => {}
                }
            }
            Message::Error { id, error } => {
                let Some(p) = id.as_u64().and_then(|i| self.pending.remove(&i)) else {
                    return Err(SessionError(format!(
                        "an error reply to no request: id {id}"
                    )));
                };
                let text = error
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_string);
                match p {
                    Pending::Monitor { cond: true, tables } if text.contains("unknown method") => {
                        // An older server: the same tables by `monitor`.
                        self.request(
                            Pending::Monitor {
                                cond: false,
                                tables: tables.clone(),
                            },
                            "monitor",
                            vec![json!(self.db), json!(MONITOR_ID), tables],
                        );
                    }
                    p => events.push(Event::Failed {
                        request: p.method().to_string(),
                        error: text,
                    }),
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, v2: bool, updates: &Value) -> Result<Changed, SessionError> {
        let r = if v2 {
            let schema = self
                .schema
                .as_ref()
                .ok_or_else(|| SessionError("an update before the schema".into()))?;
            self.replica.apply_update2(schema, updates)
        } else {
            self.replica.apply_update(updates)
        };
        r.map_err(|e| SessionError(format!("a table update: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(c: &mut Client) -> Vec<Message> {
        let out = c.take_output();
        let mut f = Framer::default();
        f.push(&out);
        let mut v = Vec::new();
        while let Some(t) = f.next_message().unwrap() {
            v.push(Message::parse(&t).unwrap());
        }
        v
    }

    fn id_of(m: &Message) -> Value {
        match m {
            Message::Request { id, .. } => id.clone(),
            _ => panic!("not a request: {m:?}"),
        }
    }

    const SCHEMA: &str = r#"{"name":"Open_vSwitch","version":"8.3.1","tables":{"Bridge":{"columns":{"name":{"type":"string"},"ports":{"type":{"key":"uuid","min":0,"max":"unlimited"}}}}}}"#;
    const B: &str = "00000000-0000-0000-0000-000000000001";

    #[test]
    fn schema_lock_monitor_updates_and_echo() {
        let mut c = Client::new("Open_vSwitch");
        let m = sent(&mut c);
        assert!(
            matches!(&m[0], Message::Request { method, params, .. } if method == "get_schema" && params == &[json!("Open_vSwitch")])
        );
        let reply = format!(
            r#"{{"id":{},"result":{SCHEMA},"error":null}}"#,
            id_of(&m[0])
        );
        assert_eq!(c.feed(reply.as_bytes()).unwrap(), vec![Event::Schema]);
        c.lock("ovs_vswitchd");
        c.monitor(&[("Bridge", &["name", "ports"])]);
        let m = sent(&mut c);
        assert_eq!(m.len(), 2);
        let (lock, mon) = (id_of(&m[0]), id_of(&m[1]));
        // The replies split anywhere, an echo from the server between.
        let stream = format!(
            r#"{{"id":{lock},"result":{{"locked":false}},"error":null}} {{"id":"e1","method":"echo","params":["x"]}}{{"id":{mon},"result":{{"Bridge":{{"{B}":{{"initial":{{"name":"br0"}}}}}}}},"error":null}}{{"id":null,"method":"locked","params":["ovs_vswitchd"]}}"#
        );
        let (a, b) = stream.as_bytes().split_at(37);
        let mut ev = c.feed(a).unwrap();
        ev.extend(c.feed(b).unwrap());
        assert_eq!(ev[0], Event::Locked(false));
        assert!(matches!(&ev[1], Event::Monitored(ch) if ch.touches("Bridge")));
        assert_eq!(ev[2], Event::Locked(true));
        assert!(c.has_lock());
        let echo = sent(&mut c);
        assert_eq!(
            echo,
            vec![Message::Reply {
                id: json!("e1"),
                result: json!(["x"])
            }]
        );
        let upd = format!(
            r#"{{"id":null,"method":"update2","params":["sluice",{{"Bridge":{{"{B}":{{"modify":{{"name":"br1"}}}}}}}}]}}"#
        );
        assert!(matches!(
            &c.feed(upd.as_bytes()).unwrap()[0],
            Event::Updated(_)
        ));
        let row = c
            .replica()
            .row("Bridge", &crate::datum::Uuid::parse(B).unwrap())
            .unwrap();
        assert_eq!(crate::replica::string(row, "name"), Some("br1"));
        assert_eq!(c.pending(), 0);
    }

    #[test]
    fn an_old_server_is_asked_monitor_and_errors_are_events() {
        let mut c = Client::new("Open_vSwitch");
        let g = id_of(&sent(&mut c)[0]);
        c.feed(format!(r#"{{"id":{g},"result":{SCHEMA},"error":null}}"#).as_bytes())
            .unwrap();
        c.monitor(&[("Bridge", &[])]);
        let mon = id_of(&sent(&mut c)[0]);
        let ev = c
            .feed(format!(r#"{{"id":{mon},"result":null,"error":"unknown method"}}"#).as_bytes())
            .unwrap();
        assert!(ev.is_empty());
        let again = sent(&mut c);
        assert!(matches!(&again[0], Message::Request { method, .. } if method == "monitor"));
        let t = c.transact(vec![json!({"op": "comment", "comment": "x"})]);
        let _ = sent(&mut c);
        let ev = c
            .feed(format!(r#"{{"id":{t},"result":null,"error":"not allowed"}}"#).as_bytes())
            .unwrap();
        assert_eq!(
            ev,
            vec![Event::Failed {
                request: "transact".into(),
                error: "not allowed".into()
            }]
        );
    }

    #[test]
    fn malformed_input_ends_the_session_with_an_error() {
        for bad in [
            &b"]"[..],
            b"{\"id\":99,\"result\":1}",
            b"{\"method\":\"update2\",\"params\":[]}",
            b"{x}",
        ] {
            let mut c = Client::new("Open_vSwitch");
            assert!(c.feed(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
