//! The connection to `ovsdb-server`: a socket (`unix:PATH` or
//! `tcp:IP:PORT`, as ovs-vswitchd's DATABASE argument) around a
//! [`sluice_ovsdb::Client`] session, which does everything but the I/O.
//! Reads wait at most the time given, so a daemon's loop stays in charge
//! of its other work; what the session answers (echo replies) is written
//! at once.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sluice_ovsdb::{Client, Event};

/// Where the database server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// TLS over TCP: the connection is secured by a [`TlsConnect`].
    Ssl(SocketAddr),
}

/// How `ssl:` targets are secured: runs TLS over a TCP connection to the
/// peer named, and hands back the plain side (the switch's key,
/// certificate and CA are the caller's: `--private-key`,
/// `--certificate`, `--ca-cert`).
pub type TlsConnect =
    std::sync::Arc<dyn Fn(TcpStream, &str) -> Result<UnixStream, String> + Send + Sync>;

impl Target {
    /// Parses ovs-vswitchd's DATABASE: `unix:PATH` or `tcp:IP:PORT`.
    pub fn parse(s: &str) -> Result<Target, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("{s}: unix: needs the socket's path"));
            }
            return Ok(Target::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("tcp:") {
            return a
                .parse()
                .map(Target::Tcp)
                .map_err(|e| format!("{s}: tcp: takes IP:PORT ({e})"));
        }
        if let Some(a) = s.strip_prefix("ssl:") {
            return a
                .parse()
                .map(Target::Ssl)
                .map_err(|e| format!("{s}: ssl: takes IP:PORT ({e})"));
        }
        Err(format!(
            "{s}: a database is unix:PATH, tcp:IP:PORT or ssl:IP:PORT"
        ))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
            Target::Ssl(a) => write!(f, "ssl:{a}"),
        }
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
        }
    }
}

/// Why the connection ended.
#[derive(Debug)]
pub enum DbError {
    /// The socket failed or the server closed it.
    Io(io::Error),
    /// The server sent what the session cannot take.
    Protocol(String),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Io(e) => write!(f, "database connection: {e}"),
            DbError::Protocol(e) => write!(f, "database protocol: {e}"),
        }
    }
}

impl std::error::Error for DbError {}

impl From<io::Error> for DbError {
    fn from(e: io::Error) -> Self {
        DbError::Io(e)
    }
}

/// A connected session.
pub struct DbConnection {
    stream: Stream,
    /// The protocol session (schema, replica, requests).
    pub client: Client,
    buf: Vec<u8>,
}

impl DbConnection {
    /// Connects to `target` (an `ssl:` one secured by `tls`) and starts a
    /// session with database `db` (it asks for the schema).
    pub fn connect(target: &Target, db: &str, tls: Option<&TlsConnect>) -> Result<Self, DbError> {
        let stream = match target {
            Target::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
            Target::Tcp(a) => Stream::Tcp(TcpStream::connect_timeout(a, Duration::from_secs(5))?),
            Target::Ssl(a) => {
                let tls = tls.ok_or_else(|| {
                    DbError::Protocol(format!(
                        "{target}: an ssl: database needs --private-key, --certificate and --ca-cert"
                    ))
                })?;
                let tcp = TcpStream::connect_timeout(a, Duration::from_secs(5))?;
                Stream::Unix(tls(tcp, &a.to_string()).map_err(|e| {
                    DbError::Io(io::Error::new(io::ErrorKind::ConnectionRefused, e))
                })?)
            }
        };
        let mut c = DbConnection {
            stream,
            client: Client::new(db),
            buf: vec![0; 64 << 10],
        };
        c.flush()?;
        Ok(c)
    }

    /// Writes what the session has to send.
    pub fn flush(&mut self) -> Result<(), DbError> {
        let out = self.client.take_output();
        if !out.is_empty() {
            self.stream.write_all(&out)?;
        }
        Ok(())
    }

    /// Reads what arrives within `timeout` (at least one read) and returns
    /// its events; answers at once what needs an answer.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Event>, DbError> {
        self.flush()?;
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let n = match self.stream.read(&mut self.buf) {
            Ok(0) => {
                return Err(DbError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )))
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Vec::new())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let events = self
            .client
            .feed(&self.buf[..n])
            .map_err(|e| DbError::Protocol(e.0))?;
        self.flush()?;
        Ok(events)
    }

    /// Polls until `done` says yes of an event, or `timeout` passes;
    /// returns every event seen (the last one the one `done` took), or
    /// None at the timeout.
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&Event) -> bool,
    ) -> Result<Option<Vec<Event>>, DbError> {
        let until = Instant::now() + timeout;
        let mut seen = Vec::new();
        while Instant::now() < until {
            for e in self.poll(until.saturating_duration_since(Instant::now()))? {
                let hit = done(&e);
                seen.push(e);
                if hit {
                    return Ok(Some(seen));
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_targets_as_ovs_vswitchd_takes_them() {
        assert_eq!(
            Target::parse("unix:/var/run/openvswitch/db.sock").unwrap(),
            Target::Unix("/var/run/openvswitch/db.sock".into())
        );
        assert_eq!(
            Target::parse("tcp:127.0.0.1:6640").unwrap().to_string(),
            "tcp:127.0.0.1:6640"
        );
        assert_eq!(
            Target::parse("ssl:127.0.0.1:6640").unwrap().to_string(),
            "ssl:127.0.0.1:6640"
        );
        for (bad, says) in [
            ("unix:", "path"),
            ("tcp:nope", "IP:PORT"),
            ("ssl:nope", "IP:PORT"),
            ("db.sock", "unix:PATH"),
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
