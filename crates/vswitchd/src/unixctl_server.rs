//! The unixctl socket (`ovs-appctl -t SOCKET COMMAND`): a listener whose
//! every client gets a thread of its own and a session
//! ([`crate::unixctl::UnixctlSession`]), so a slow or silent client never
//! holds up another; at most [`MAX_CLIENTS`] at once (more are closed at
//! once), and a client silent for [`IDLE`] is let go.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::unixctl::{Commands, UnixctlSession};

/// Clients served at once.
pub const MAX_CLIENTS: usize = 16;
/// How long a client may stay silent.
pub const IDLE: Duration = Duration::from_secs(30);

/// A running unixctl socket; stops (and removes the socket) when dropped.
pub struct UnixctlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UnixctlServer {
    /// Listens on `path` (a stale socket file there is replaced) and
    /// serves `commands`.
    pub fn start(
        path: &Path,
        commands: Arc<Mutex<dyn Commands + Send>>,
    ) -> std::io::Result<UnixctlServer> {
        if path.exists() && UnixStream::connect(path).is_err() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let clients = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("unixctl".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                                clients.fetch_sub(1, Ordering::AcqRel);
                                continue;
                            }
                            let (cmds, n) = (Arc::clone(&commands), Arc::clone(&clients));
                            let _ = std::thread::Builder::new()
                                .name("unixctl-client".into())
                                .spawn(move || {
                                    serve(conn, &cmds);
                                    n.fetch_sub(1, Ordering::AcqRel);
                                });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(UnixctlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn serve(mut conn: UnixStream, cmds: &Mutex<dyn Commands + Send>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(IDLE));
    let mut session = UnixctlSession::default();
    let mut buf = [0u8; 4096];
    loop {
        let n = match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let r = {
            let mut c = cmds.lock().unwrap_or_else(|p| p.into_inner());
            session.feed(&buf[..n], &mut *c)
        };
        let out = session.take_output();
        if !out.is_empty() && conn.write_all(&out).is_err() {
            return;
        }
        if r.is_err() {
            return;
        }
    }
}

impl Drop for UnixctlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
