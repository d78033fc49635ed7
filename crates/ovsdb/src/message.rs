//! JSON-RPC 1.0 messages as OVSDB uses them (RFC 7047 §4): a request
//! (`method`, `params`, `id`), a notification (a request whose `id` is
//! null: `update`, `update2`, `locked`, `stolen`) and a reply (`result` or
//! `error`, and the request's `id`). Malformed input is an error naming
//! what is wrong, never a panic.

use serde_json::{json, Value};

/// One message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Vec<Value>,
    },
    Notification {
        method: String,
        params: Vec<Value>,
    },
    Reply {
        id: Value,
        result: Value,
    },
    Error {
        id: Value,
        error: Value,
    },
}

/// Why bytes are not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageError(pub String);

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MessageError {}

impl Message {
    /// Reads one message from its JSON text.
    pub fn parse(text: &[u8]) -> Result<Message, MessageError> {
        let v: Value =
            serde_json::from_slice(text).map_err(|e| MessageError(format!("not JSON: {e}")))?;
        Message::from_json(v)
    }

    /// Reads one message from a JSON value.
    pub fn from_json(v: Value) -> Result<Message, MessageError> {
        let Value::Object(mut o) = v else {
            return Err(MessageError("a JSON-RPC message is an object".into()));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(m) = o.remove("method") {
            let Value::String(method) = m else {
                return Err(MessageError(format!("\"method\" is not a string: {m}")));
            };
            let params = match o.remove("params") {
                Some(Value::Array(p)) => p,
                None | Some(Value::Null) => Vec::new(),
                Some(p) => {
                    return Err(MessageError(format!(
                        "\"params\" of {method} is not an array: {p}"
                    )))
                }
            };
            return Ok(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { id, method, params }
            });
        }
        match (o.remove("result"), o.remove("error")) {
            (_, Some(error)) if !error.is_null() => Ok(Message::Error { id, error }),
            (Some(result), _) => Ok(Message::Reply { id, result }),
            (None, _) => Err(MessageError(
                "neither a request (\"method\") nor a reply (\"result\" or \"error\")".into(),
            )),
        }
    }

    /// Its JSON form (every field JSON-RPC 1.0 wants).
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                json!({"id": id, "method": method, "params": params})
            }
            Message::Notification { method, params } => {
                json!({"id": null, "method": method, "params": params})
            }
            Message::Reply { id, result } => json!({"id": id, "result": result, "error": null}),
            Message::Error { id, error } => json!({"id": id, "result": null, "error": error}),
        }
    }

    /// Its bytes on the stream.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_json()).expect("a JSON value serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_kinds() {
        let r = Message::parse(br#"{"id":1,"method":"echo","params":[]}"#).unwrap();
        assert_eq!(
            r,
            Message::Request {
                id: json!(1),
                method: "echo".into(),
                params: vec![]
            }
        );
        let n = Message::parse(br#"{"id":null,"method":"update2","params":["m",{}]}"#).unwrap();
        assert!(matches!(n, Message::Notification { ref method, .. } if method == "update2"));
        let ok = Message::parse(br#"{"id":"x","result":{"locked":true},"error":null}"#).unwrap();
        assert_eq!(
            ok,
            Message::Reply {
                id: json!("x"),
                result: json!({"locked": true})
            }
        );
        let e = Message::parse(br#"{"id":2,"result":null,"error":"unknown method"}"#).unwrap();
        assert_eq!(
            e,
            Message::Error {
                id: json!(2),
                error: json!("unknown method")
            }
        );
        for m in [r, n, ok, e] {
            assert_eq!(Message::parse(&m.to_bytes()).unwrap(), m);
        }
    }

    #[test]
    fn malformed_messages_are_named() {
        for (text, says) in [
            (&b"[1]"[..], "an object"),
            (b"{\"method\":5}", "not a string"),
            (b"{\"method\":\"x\",\"params\":{}}", "not an array"),
            (b"{\"id\":1}", "neither"),
            (b"{", "not JSON"),
        ] {
            let e = Message::parse(text).unwrap_err();
            assert!(e.0.contains(says), "{}: {e}", String::from_utf8_lossy(text));
        }
    }
}
