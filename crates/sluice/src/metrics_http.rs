//! The HTTP side of `--metrics`: a listener that answers `GET /metrics`
//! with what a function renders, each client on a thread of its own, so
//! that a client that sends nothing or half a request holds up no other
//! scraper, and none touches the PMDs but through that function.
//!
//! HTTP/1.1 as much as a scraper needs: `GET` and `HEAD`, one request a
//! connection (`Connection: close`), errors as 400, 404, 405, 431 and 503.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most scrapes served at once; one more is answered 503 at once.
pub const MAX_CLIENTS: usize = 16;
/// How long a request's head may take to arrive.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Longest request head (request line and headers).
pub const MAX_HEAD: usize = 8 << 10;
/// How long writing the answer may take.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The media type served: OpenMetrics text, which Prometheus asks for
/// first and reads.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What renders the metrics page (an error is answered 503).
pub type Render = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// Parses `--metrics`: `PORT` (on 127.0.0.1), `IP:PORT`, `[IPv6]:PORT` or
/// `localhost:PORT`.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(loopback, port));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(loopback, port));
        }
    }
    s.parse::<SocketAddr>().map_err(|_| {
        format!("'{s}': expected PORT (on 127.0.0.1), IP:PORT or [IPv6]:PORT, e.g. 127.0.0.1:9477")
    })
}

/// A serving metrics endpoint; it stops when dropped.
pub struct Server {
    /// The address it listens on (the port chosen when 0 was asked).
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which sees the flag and ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens on `addr` and answers `GET /metrics` with `render`'s page.
pub fn serve(addr: SocketAddr, render: Render) -> Result<Server, String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("{addr}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let ended = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if ended.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = respond(
                        &mut stream,
                        &Answer::text(503, "too many scrapes at once; try again\n"),
                    );
                    // What the client sends with its request is read (20 ms
                    // at most), so that closing does not reset the
                    // connection before it reads the answer.
                    if stream
                        .set_read_timeout(Some(Duration::from_millis(20)))
                        .is_ok()
                    {
                        close_gently(stream);
                    }
                    continue;
                }
                let (render, mine) = (Arc::clone(&render), Arc::clone(&open));
                let spawned = std::thread::Builder::new()
                    .name("metrics-conn".into())
                    .stack_size(256 << 10)
                    .spawn(move || {
                        answer(stream, &render);
                        mine.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(Server {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// Most bytes read and thrown away from a client before closing.
const DRAIN_MAX: usize = 64 << 10;

/// Ends the connection after an answer: no more writes, and what the
/// client sent but was not read (the rest of a refused request) is read
/// and thrown away first (up to [`DRAIN_MAX`], within the socket's read
/// timeout), so that the close does not reset the connection and lose
/// the answer on its way.
fn close_gently(mut stream: TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    let mut read = 0;
    while read < DRAIN_MAX {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => read += n,
            _ => break,
        }
    }
}

/// Reads one request and answers it.
fn answer(mut stream: TcpStream, render: &Render) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let done = serve_one(&mut stream, render);
    if done.is_ok() {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        close_gently(stream);
    }
}

/// Reads one request and writes its answer; `Err` when the client went
/// away.
fn serve_one(stream: &mut TcpStream, render: &Render) -> Result<(), ()> {
    let a = match read_head(stream) {
        Ok(head) => answer_to(&head, render),
        Err(HeadError::TooLong) => Answer::text(431, "request head too long\n"),
        Err(HeadError::Gone) => return Err(()),
    };
    respond(stream, &a)
}

/// What to send back to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// The body (left out for `HEAD`, its length still given).
    pub body: String,
    /// A `HEAD` request: headers only.
    pub head_only: bool,
}

impl Answer {
    fn text(status: u16, body: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            head_only: false,
        }
    }
}

/// The answer to a request whose head (request line and headers, without
/// the blank line) is `head`: the page for `GET`/`HEAD /metrics` (503 if
/// `render` fails), a pointer at `/`, and 400, 404 or 405 for the rest.
pub fn answer_to(head: &str, render: &Render) -> Answer {
    let mut words = head.lines().next().unwrap_or("").split(' ');
    let (method, target, version) = (words.next(), words.next(), words.next());
    let (Some(method), Some(target), Some(version)) = (method, target, version) else {
        return Answer::text(400, "bad request line\n");
    };
    if !version.starts_with("HTTP/1.") || words.next().is_some() {
        return Answer::text(400, "bad request line\n");
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return Answer::text(405, "only GET and HEAD\n");
    }
    let a = match target.split('?').next().unwrap_or("") {
        "/metrics" => match render() {
            Ok(page) => Answer {
                status: 200,
                content_type: CONTENT_TYPE,
                body: page,
                head_only,
            },
            Err(e) => Answer::text(503, &format!("{e}\n")),
        },
        "/" => Answer::text(
            200,
            "Sluice: the metrics are at /metrics (OpenMetrics text)\n",
        ),
        _ => Answer::text(404, "not found: the metrics are at /metrics\n"),
    };
    Answer { head_only, ..a }
}

/// Why no request head could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Closed, timed out or failed before the head ended.
    Gone,
    /// Longer than [`MAX_HEAD`].
    TooLong,
}

/// The request head at the start of `buf` (up to the blank line, which is
/// left out), once it is all there: `None` while more may come, an error
/// once it is longer than [`MAX_HEAD`].
pub fn head_of(buf: &[u8]) -> Option<Result<String, HeadError>> {
    match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(end) if end <= MAX_HEAD => Some(Ok(String::from_utf8_lossy(&buf[..end]).into_owned())),
        Some(_) => Some(Err(HeadError::TooLong)),
        None if buf.len() > MAX_HEAD => Some(Err(HeadError::TooLong)),
        None => None,
    }
}

/// The request head (up to the blank line), within [`REQUEST_DEADLINE`].
fn read_head(stream: &mut TcpStream) -> Result<String, HeadError> {
    let until = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(HeadError::Gone);
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(HeadError::Gone),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = head_of(&buf) {
            return head;
        }
    }
}

fn respond(stream: &mut TcpStream, a: &Answer) -> Result<(), ()> {
    let reason = match a.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let allow = if a.status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        a.status,
        a.content_type,
        a.body.len()
    );
    stream.write_all(head.as_bytes()).map_err(drop)?;
    if !a.head_only {
        stream.write_all(a.body.as_bytes()).map_err(drop)?;
    }
    stream.flush().map_err(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn addresses_default_to_the_loopback() {
        assert_eq!(parse_addr("9477").unwrap().to_string(), "127.0.0.1:9477");
        assert_eq!(
            parse_addr("localhost:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert_eq!(
            parse_addr("0.0.0.0:9477").unwrap().to_string(),
            "0.0.0.0:9477"
        );
        assert_eq!(parse_addr("[::1]:80").unwrap().to_string(), "[::1]:80");
        for bad in ["", "x", "70000", "1.2.3.4", "host:80"] {
            assert!(
                parse_addr(bad).unwrap_err().contains("expected PORT"),
                "{bad}"
            );
        }
    }

    #[test]
    fn answers_scrapes_and_refuses_the_rest() {
        let page: Render = Arc::new(|| Ok("sluice_up 1\n# EOF\n".to_string()));
        let server = serve(parse_addr("127.0.0.1:0").unwrap(), page).unwrap();
        let a = server.addr;
        let ok = get(a, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains(CONTENT_TYPE) && ok.ends_with("\r\n\r\nsluice_up 1\n# EOF\n"),
            "{ok}"
        );
        let head = get(a, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert!(get(a, "GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        let post = get(a, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("Allow: GET, HEAD"));
        assert!(get(a, "GET\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(get(a, "GET /metrics SMTP/1\r\n\r\n").starts_with("HTTP/1.1 400"));
        let long = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert!(get(a, &long).starts_with("HTTP/1.1 431"));
    }

    #[test]
    fn a_failed_render_is_503() {
        let page: Render = Arc::new(|| Err("the datapath did not answer".to_string()));
        let server = serve(parse_addr("127.0.0.1:0").unwrap(), page).unwrap();
        let r = get(server.addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 503") && r.ends_with("the datapath did not answer\n"),
            "{r}"
        );
    }

    /// Clients that connect and send nothing, or half a request, hold up
    /// no scrape; past [`MAX_CLIENTS`] a client is told 503 at once.
    #[test]
    fn silent_clients_do_not_block_a_scrape() {
        let page: Render = Arc::new(|| Ok("# EOF\n".to_string()));
        let server = serve(parse_addr("127.0.0.1:0").unwrap(), page).unwrap();
        let a = server.addr;
        let mut idle: Vec<TcpStream> = (0..MAX_CLIENTS - 1)
            .map(|_| TcpStream::connect(a).unwrap())
            .collect();
        idle[0].write_all(b"GET /metr").unwrap();
        let t = Instant::now();
        assert!(get(a, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        assert!(
            t.elapsed() < REQUEST_DEADLINE,
            "answered while others sent nothing"
        );
        // One more silent client fills the slots: the next is refused.
        idle.push(TcpStream::connect(a).unwrap());
        let t0 = Instant::now();
        let mut busy = String::new();
        while !busy.starts_with("HTTP/1.1 503") && t0.elapsed() < Duration::from_secs(2) {
            busy = get(a, "GET /metrics HTTP/1.1\r\n\r\n");
        }
        assert!(busy.contains("too many scrapes"), "{busy}");
        drop(idle);
        let t0 = Instant::now();
        let mut r = String::new();
        while !r.starts_with("HTTP/1.1 200") && t0.elapsed() < REQUEST_DEADLINE * 2 {
            r = get(a, "GET /metrics HTTP/1.1\r\n\r\n");
        }
        assert!(
            r.starts_with("HTTP/1.1 200"),
            "served again once they left: {r}"
        );
    }

    proptest::proptest! {
        /// Any bytes: a head once the blank line is there (never past
        /// MAX_HEAD), and an answer of a known status; a scrape with any
        /// headers after its request line is served.
        #[test]
        fn any_request_gets_an_answer(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            headers in "[ -~]{0,200}",
        ) {
            let page: Render = Arc::new(|| Ok("# EOF\n".to_string()));
            if let Some(Ok(head)) = head_of(&data) {
                let a = answer_to(&head, &page);
                proptest::prop_assert!([200, 400, 404, 405].contains(&a.status));
            }
            let req = format!("GET /metrics HTTP/1.1\r\n{}\r\n\r\n", headers.replace("\r\n\r\n", ""));
            if let Some(Ok(head)) = head_of(req.as_bytes()) {
                let a = answer_to(&head, &page);
                proptest::prop_assert_eq!(a.status, 200);
            }
        }
    }

    #[test]
    fn dropping_the_server_frees_its_port() {
        let page: Render = Arc::new(|| Ok(String::new()));
        let server = serve(parse_addr("127.0.0.1:0").unwrap(), page).unwrap();
        let a = server.addr;
        drop(server);
        TcpListener::bind(a).expect("the port is free again");
    }
}
