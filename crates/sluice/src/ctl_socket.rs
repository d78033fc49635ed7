//! The control socket: a unix socket (owner-only) on which a running
//! `sluice` answers `sluice ctl`, each client on a thread of its own.
//!
//! Protocol: one JSON object per line each way,
//! `{"cmd": "add-flow", "args": ["in_port=1,actions=output:2"]}` →
//! `{"ok": true, "output": "..."}`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_port::unix_listen::{self, SocketFile};

use crate::ctl::{Control, PMD_TIMEOUT};
pub use crate::ctl::{Request, Response};

/// Most control connections served at once; one more is told so and
/// closed.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest request line: room for a flow file of about a million rules
/// (`add-flows`, `replace-flows` send the file's text).
pub const MAX_REQUEST: usize = 64 << 20;
/// How long a request may take to arrive once its first byte has.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// How long a connection may wait between requests before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Listens on `path` (replacing a stale socket, owner-only permissions)
/// and serves each client on a thread of its own, so that a client that
/// sends nothing, or half a request, never holds up another: at most
/// [`MAX_CONNECTIONS`] at once, each request at most [`MAX_REQUEST`] bytes
/// arriving within [`REQUEST_DEADLINE`], and an idle connection closed
/// after [`IDLE_TIMEOUT`].
pub fn serve(path: &Path, control: Arc<Control>) -> Result<Server, String> {
    let (listener, file) = unix_listen::listen(path)?;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let busy = Arc::clone(&in_flight);
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("ctl".into())
        .spawn(move || {
            for mut stream in listener.incoming().flatten() {
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = reply(
                        &mut stream,
                        Response {
                            ok: false,
                            output: format!(
                                "too many control connections ({MAX_CONNECTIONS} open); try again"
                            ),
                        },
                    );
                    continue;
                }
                let (control, mine, busy) =
                    (Arc::clone(&control), Arc::clone(&open), Arc::clone(&busy));
                let spawned = std::thread::Builder::new()
                    .name("ctl-conn".into())
                    // ofproto/trace translates here.
                    .stack_size(sluice_classifier::xlate::STACK_BYTES)
                    .spawn(move || {
                        let _ = answer(stream, &control, &busy);
                        mine.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(Server { file, in_flight })
}

/// A serving control socket.
pub struct Server {
    /// Its socket file.
    pub file: SocketFile,
    /// Requests being carried out or answered.
    in_flight: Arc<AtomicUsize>,
}

impl Server {
    /// Waits, at most `limit`, until no request is being carried out or
    /// answered: a run that ends lets a command that was in force (an
    /// `add-port` whose capture then drained) send its reply first.
    pub fn quiesce(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while self.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn reply(w: &mut UnixStream, resp: Response) -> std::io::Result<()> {
    writeln!(w, "{}", serde_json::to_string(&resp).expect("json"))
}

/// Reads one request line: `Ok(None)` when the client closed (or stayed
/// idle too long) between requests; an error for a request too long or too
/// slow to arrive.
fn read_request(
    stream: &mut UnixStream,
    buf: &mut [u8],
    pending: &mut Vec<u8>,
) -> Result<Option<Vec<u8>>, String> {
    let mut started: Option<Instant> = (!pending.is_empty()).then(Instant::now);
    let idle_since = Instant::now();
    // Bytes already searched for the newline: each byte is looked at once
    // (searching all of a many-megabyte request after every read was
    // quadratic).
    let mut scanned = 0;
    loop {
        if let Some(nl) = pending[scanned..].iter().position(|&b| b == b'\n') {
            let nl = scanned + nl;
            let line = pending[..nl].to_vec();
            pending.drain(..=nl);
            return Ok(Some(line));
        }
        scanned = pending.len();
        if pending.len() > MAX_REQUEST {
            return Err(format!("request longer than {MAX_REQUEST} bytes"));
        }
        let wait = match started {
            Some(t) => REQUEST_DEADLINE.checked_sub(t.elapsed()),
            None => IDLE_TIMEOUT.checked_sub(idle_since.elapsed()),
        };
        let Some(wait) = wait.filter(|w| !w.is_zero()) else {
            return match started {
                Some(_) => Err(format!(
                    "request incomplete after {} s (no newline)",
                    REQUEST_DEADLINE.as_secs()
                )),
                None => Ok(None),
            };
        };
        stream
            .set_read_timeout(Some(wait))
            .map_err(|e| e.to_string())?;
        match stream.read(buf) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                started.get_or_insert_with(Instant::now);
                pending.extend_from_slice(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn answer(mut stream: UnixStream, control: &Control, busy: &AtomicUsize) -> std::io::Result<()> {
    stream.set_write_timeout(Some(REQUEST_DEADLINE))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pending = Vec::new();
    loop {
        let line = match read_request(&mut stream, &mut buf, &mut pending) {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => {
                return reply(
                    &mut stream,
                    Response {
                        ok: false,
                        output: format!("bad request: {e}"),
                    },
                )
            }
        };
        busy.fetch_add(1, Ordering::AcqRel);
        let resp = match serde_json::from_slice::<Request>(&line) {
            Ok(req) => {
                tracing::debug!(target: "ctl", "{} {}", req.cmd, shown_args(&req.args));
                match control.execute(&req) {
                    Ok(output) => Response { ok: true, output },
                    Err(output) => Response { ok: false, output },
                }
            }
            Err(e) => Response {
                ok: false,
                output: format!("bad request: {e}"),
            },
        };
        let sent = reply(&mut stream, resp);
        busy.fetch_sub(1, Ordering::AcqRel);
        sent?;
    }
}

/// A request's arguments for the debug log (a flow file's text as its
/// size).
fn shown_args(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.len() > 200 {
                format!("({} bytes)", a.len())
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends one request to the socket at `path` and returns the reply.
pub fn request(path: &Path, req: &Request) -> Result<Response, String> {
    let stream = UnixStream::connect(path).map_err(|e| {
        format!(
            "{}: {e} (is `sluice run --ctl {}` running?)",
            path.display(),
            path.display()
        )
    })?;
    stream
        .set_read_timeout(Some(PMD_TIMEOUT * 2))
        .map_err(|e| e.to_string())?;
    let text = serde_json::to_string(req).expect("json");
    if text.len() > MAX_REQUEST {
        return Err(format!(
            "request of {} bytes is longer than the {} MiB a control request may be: split the flow file",
            text.len(),
            MAX_REQUEST >> 20
        ));
    }
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    let sent = writeln!(w, "{text}");
    // A server that refused the request has said why before closing.
    let mut line = String::new();
    let read = BufReader::new(stream).read_line(&mut line);
    match (sent, read) {
        (_, Ok(n)) if n > 0 => serde_json::from_str(&line).map_err(|e| format!("bad reply: {e}")),
        (Err(e), _) => Err(format!("sending the request: {e}")),
        (Ok(()), Err(e)) => Err(e.to_string()),
        (Ok(()), Ok(_)) => Err("the switch closed the connection without a reply".into()),
    }
}
