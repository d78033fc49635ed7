//! Where OpenFlow connections come from: the controllers the switch
//! connects to (`--controller`, reconnecting with backoff), the listeners
//! it accepts them on (`--listen`, at most [`MAX_OF_CONNECTIONS`] open),
//! and a session over given bytes for the fuzz target.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_port::unix_listen::SocketFile;

use super::{Conn, Peer, Session, SwitchInfo, Target, HELLO_TIMEOUT};
use crate::backend::Backend;
use crate::hub::{Hub, MAX_OF_CONNECTIONS};
use crate::loglimit::log_connection;

/// Backoff between connection attempts to a controller: the first retry
/// within a second, doubling up to 8 s (OVS's max-backoff default).
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// A controller connection that can be ended (`ovs-vsctl del-controller`):
/// dropped, it stops reconnecting and shuts the live connection down.
pub struct ControllerLink {
    cancel: Arc<std::sync::atomic::AtomicBool>,
    live: Arc<std::sync::Mutex<Option<TcpOrUnix>>>,
}

/// The socket under a live session, to shut down.
enum TcpOrUnix {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Drop for ControllerLink {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        if let Some(s) = self.live.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = match s {
                TcpOrUnix::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
                TcpOrUnix::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            };
        }
    }
}

/// Connects to `peer` and serves the connection; reconnects with backoff
/// whenever it fails or ends, for as long as the switch runs.
pub fn connect(peer: Peer, control: Arc<dyn Backend>, info: SwitchInfo) -> Result<(), String> {
    std::mem::forget(connect_link(peer, control, info)?);
    Ok(())
}

/// As [`connect`], until the returned link is dropped.
pub fn connect_link(
    peer: Peer,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
) -> Result<ControllerLink, String> {
    let link = ControllerLink {
        cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        live: Arc::new(std::sync::Mutex::new(None)),
    };
    let (cancel, live) = (Arc::clone(&link.cancel), Arc::clone(&link.live));
    let keep = move |s: TcpOrUnix| {
        *live.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
    };
    let cancelled = Arc::clone(&cancel);
    std::thread::Builder::new()
        .name("of-controller".into())
        .spawn(move || {
            let mut backoff = BACKOFF_MIN;
            while !cancelled.load(Ordering::Acquire) {
                let started = Instant::now();
                let result = match &peer {
                    Peer::Tcp(a) => TcpStream::connect_timeout(a, BACKOFF_MAX).map(|s| {
                        let _ = s.set_nodelay(true);
                        if let Ok(c) = s.try_clone() {
                            keep(TcpOrUnix::Tcp(c));
                        }
                        Session::new(s, Arc::clone(&control), info.clone(), peer.to_string())
                            .primary()
                            .run()
                    }),
                    Peer::Unix(p) => UnixStream::connect(p).map(|s| {
                        if let Ok(c) = s.try_clone() {
                            keep(TcpOrUnix::Unix(c));
                        }
                        Session::new(s, Arc::clone(&control), info.clone(), peer.to_string())
                            .primary()
                            .run()
                    }),
                    Peer::Ssl(a) => TcpStream::connect_timeout(a, BACKOFF_MAX).and_then(|s| {
                        if let Ok(c) = s.try_clone() {
                            keep(TcpOrUnix::Tcp(c));
                        }
                        let tls = info.tls.as_ref().ok_or_else(|| {
                            std::io::Error::other(
                                "ssl: needs --private-key, --certificate and --ca-cert",
                            )
                        })?;
                        let plain = crate::tls::connect(tls, s, &peer.to_string())
                            .map_err(std::io::Error::other)?;
                        Ok(Session::new(
                            plain,
                            Arc::clone(&control),
                            info.clone(),
                            peer.to_string(),
                        )
                        .primary()
                        .run())
                    }),
                };
                if cancelled.load(Ordering::Acquire) {
                    tracing::info!(target: "openflow", "controller {peer}: removed");
                    break;
                }
                match result {
                    Ok(Ok(())) => tracing::info!(target: "openflow", "controller {peer} closed the connection"),
                    Ok(Err(e)) => tracing::warn!(target: "openflow", "controller {peer}: {e}"),
                    Err(e) => {
                        if backoff == BACKOFF_MIN {
                            tracing::warn!(target: "openflow", "controller {peer}: {e}; retrying");
                        }
                    }
                }
                // A connection that lasted resets the backoff.
                if started.elapsed() > BACKOFF_MAX {
                    backoff = BACKOFF_MIN;
                }
                let until = Instant::now() + backoff;
                while Instant::now() < until && !cancelled.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(link)
}

/// Listens on `target` and serves each connection on its own thread.
/// Returns what it listens on, for the log, and the socket file of a
/// `punix:` target (to remove at exit).
pub fn listen(
    target: &Target,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
) -> Result<(String, Option<SocketFile>), String> {
    let never = Arc::new(std::sync::atomic::AtomicBool::new(false));
    listen_until(target, control, info, never).map(|(name, file, _)| (name, file))
}

/// A listener that can be closed (a passive controller target taken out
/// of the database, a bridge deleted): dropped, it accepts no more
/// connections (those it accepted go on until they end), its thread
/// ends, and its socket file goes.
pub struct ListenerLink {
    cancel: Arc<std::sync::atomic::AtomicBool>,
    /// Where one more connection wakes its thread to see `cancel`.
    wake: Wake,
    file: Option<SocketFile>,
}

enum Wake {
    Tcp(std::net::SocketAddr),
    Unix(std::path::PathBuf),
}

impl Drop for ListenerLink {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        let _ = match &self.wake {
            Wake::Tcp(a) => TcpStream::connect_timeout(a, Duration::from_secs(1)).map(drop),
            Wake::Unix(p) => UnixStream::connect(p).map(drop),
        };
        if let Some(f) = &self.file {
            f.remove();
        }
    }
}

/// As [`listen`], until the returned link is dropped. Returns what it
/// listens on, for the log, and the link.
pub fn listen_link(
    target: &Target,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
) -> Result<(String, ListenerLink), String> {
    let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (name, file, bound) = listen_until(target, control, info, Arc::clone(&cancel))?;
    let wake = match bound {
        Some(mut a) => {
            // Bound to every address: one of this host's reaches it.
            if a.ip().is_unspecified() {
                a.set_ip(match a {
                    std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            Wake::Tcp(a)
        }
        None => Wake::Unix(match target {
            Target::Unix(p) => p.clone(),
            _ => unreachable!("a TCP listener has an address"),
        }),
    };
    Ok((name, ListenerLink { cancel, wake, file }))
}

/// Listens on `target` until `cancel` is set (seen as the next connection
/// comes). Returns what it listens on, the socket file of a `punix:`
/// target, and the address a TCP listener is bound to.
fn listen_until(
    target: &Target,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
    cancel: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(String, Option<SocketFile>, Option<std::net::SocketAddr>), String> {
    match target {
        Target::Tcp(addr) => tcp_listener(
            addr,
            "tcp",
            control,
            info,
            cancel,
            |s, _, control, info, from| {
                let _ = s.set_nodelay(true);
                spawn_conn(s, control, info, from);
            },
        ),
        Target::Ssl(addr) => {
            let tls = info
                .tls
                .clone()
                .ok_or("pssl: needs --private-key, --certificate and --ca-cert")?;
            tcp_listener(
                addr,
                "ssl",
                control,
                info,
                cancel,
                move |s, hub, control, info, from| match crate::tls::accept(&tls, s, &from) {
                    Ok(plain) => spawn_conn(plain, control, info, from),
                    Err(e) => {
                        hub.accepted_open.fetch_sub(1, Ordering::AcqRel);
                        log_connection(&format!("OpenFlow connection {from}: {e}"));
                    }
                },
            )
        }
        Target::Unix(path) => {
            let (l, file) =
                sluice_port::unix_listen::listen(path).map_err(|e| format!("punix:{e}"))?;
            let name = format!("unix:{}", path.display());
            let label = name.clone();
            std::thread::Builder::new()
                .name("of-listen".into())
                .spawn(move || {
                    for s in l.incoming() {
                        if cancel.load(Ordering::Acquire) {
                            break;
                        }
                        let Ok(s) = s else { continue };
                        if admit(&info.hub, &label) {
                            spawn_conn(s, Arc::clone(&control), info.clone(), label.clone());
                        }
                    }
                })
                .map_err(|e| e.to_string())?;
            Ok((name, Some(file), None))
        }
    }
}

/// Listens on TCP `addr` (`scheme` is `tcp` or `ssl`, for names) and
/// hands each connection a listener admits to `serve` (which owns its
/// slot in the hub's count from then on).
fn tcp_listener(
    addr: &std::net::SocketAddr,
    scheme: &'static str,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
    cancel: Arc<std::sync::atomic::AtomicBool>,
    serve: impl Fn(TcpStream, &Hub, Arc<dyn Backend>, SwitchInfo, String) + Send + 'static,
) -> Result<(String, Option<SocketFile>, Option<std::net::SocketAddr>), String> {
    let l = TcpListener::bind(addr).map_err(|e| format!("p{scheme}:{addr}: {e}"))?;
    let bound = l.local_addr().map_err(|e| e.to_string())?;
    let name = format!("{scheme}:{bound}");
    std::thread::Builder::new()
        .name("of-listen".into())
        .spawn(move || {
            for s in l.incoming() {
                if cancel.load(Ordering::Acquire) {
                    break;
                }
                let Ok(s) = s else { continue };
                let from = s
                    .peer_addr()
                    .map_or_else(|_| scheme.to_string(), |a| format!("{scheme}:{a}"));
                if admit(&info.hub, &from) {
                    serve(s, &info.hub, Arc::clone(&control), info.clone(), from);
                }
                // else dropping `s` closes it
            }
        })
        .map_err(|e| e.to_string())?;
    Ok((name, None, Some(bound)))
}

/// Runs one OpenFlow session of `control` on `input`, as if a peer sent
/// those bytes and closed, and returns what the switch sent back. For the
/// `openflow_session` fuzz target and its corpus replay: the whole
/// message sequence through the channel's state (HELLO, multipart parts,
/// flow-mod bursts, roles), not one message at a time.
pub fn serve_bytes(control: Arc<dyn Backend>, input: &[u8]) -> Vec<u8> {
    let (mut peer, ours) = match UnixStream::pair() {
        Ok(p) => p,
        Err(_) => return Vec::new(),
    };
    let info = SwitchInfo::new(1, Arc::new(Hub::new(0)), None);
    let mut reader = match peer.try_clone() {
        Ok(r) => r,
        Err(_) => return Vec::new(),
    };
    // What the switch sends is read as it comes, so that its writer never
    // waits on a full socket.
    let drain = std::thread::spawn(move || {
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        got
    });
    // And what the peer sends goes from a thread of its own, so that a
    // long input never waits for the session to start reading.
    let input = input.to_vec();
    let feed = std::thread::spawn(move || {
        let _ = peer.write_all(&input);
        let _ = peer.shutdown(std::net::Shutdown::Write);
    });
    let mut session = Session::new(ours, control, info, "fuzz".into());
    let _ = session.run();
    drop(session);
    let _ = feed.join();
    drain.join().unwrap_or_default()
}

/// Whether a listener takes one more connection: at most
/// [`MAX_OF_CONNECTIONS`] open at once (counted in the hub until the
/// connection's thread ends).
fn admit(hub: &Hub, peer: &str) -> bool {
    if hub.accepted_open.fetch_add(1, Ordering::AcqRel) >= MAX_OF_CONNECTIONS {
        hub.accepted_open.fetch_sub(1, Ordering::AcqRel);
        hub.refused_busy.fetch_add(1, Ordering::Relaxed);
        log_connection(&format!(
            "OpenFlow connection {peer} refused: {MAX_OF_CONNECTIONS} connections open"
        ));
        return false;
    }
    true
}

/// Serves an accepted connection on a thread of its own; it counts in
/// the hub's `accepted_open` until it ends.
fn spawn_conn<S: Conn + 'static>(s: S, control: Arc<dyn Backend>, info: SwitchInfo, peer: String) {
    let hub = Arc::clone(&info.hub);
    let spawned = std::thread::Builder::new()
        .name("of-conn".into())
        .stack_size(512 << 10)
        .spawn(move || {
            let hub = Arc::clone(&info.hub);
            let mut c = Session::new(s, control, info, peer.clone());
            c.hello_deadline = Some(HELLO_TIMEOUT);
            let result = c.run();
            drop(c);
            hub.accepted_open.fetch_sub(1, Ordering::AcqRel);
            if let Err(e) = result {
                log_connection(&format!("OpenFlow connection {peer} closed: {e}"));
            }
        });
    if spawned.is_err() {
        hub.accepted_open.fetch_sub(1, Ordering::AcqRel);
    }
}
