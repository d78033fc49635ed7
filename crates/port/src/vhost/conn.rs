//! The control thread of a vhost-user port: it waits for a frontend
//! (listening, as OVS's `dpdkvhostuser`, or connecting and reconnecting,
//! as `dpdkvhostuserclient`), answers its requests, and when the frontend
//! goes, unmaps the guest's memory and waits for the next one. It never
//! blocks for more than 100 ms, so the port stops promptly.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vhost::vhost_user::{BackendReqHandler, Error};

use super::device::{Handler, Shared};

/// How a port meets its frontend.
pub enum Mode {
    /// Listens on a socket (removed when the port goes).
    Server(UnixListener),
    /// Connects to the hypervisor's socket, again whenever it goes.
    Client(PathBuf),
}

/// How long one wait lasts before the stop flag is looked at again.
const TICK_MS: i32 = 100;

/// How often a client port tries to connect while nobody listens.
const RECONNECT: Duration = Duration::from_secs(1);

fn readable(fd: i32) -> bool {
    crate::sys::poll(&[(fd, libc::POLLIN)], TICK_MS).is_ok_and(|r| r[0] != 0)
}

/// Runs the port's control plane until `shared.stop` is set.
pub fn run(name: &str, mode: &Mode, shared: &Arc<Shared>) {
    let mut logged_refusal = false;
    while !shared.stop.load(Ordering::Acquire) {
        let stream = match mode {
            Mode::Server(l) => {
                if !readable(l.as_raw_fd()) {
                    continue;
                }
                match l.accept() {
                    Ok((s, _)) => s,
                    Err(e) => {
                        shared.warn(format!("accept: {e}"));
                        continue;
                    }
                }
            }
            Mode::Client(path) => match UnixStream::connect(path) {
                Ok(s) => {
                    logged_refusal = false;
                    s
                }
                Err(e) => {
                    if !logged_refusal {
                        tracing::info!(target: "port", "{name}: waiting for {}: {e}", path.display());
                        logged_refusal = true;
                    }
                    let mut waited = Duration::ZERO;
                    while waited < RECONNECT && !shared.stop.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(TICK_MS as u64));
                        waited += Duration::from_millis(TICK_MS as u64);
                    }
                    continue;
                }
            },
        };
        serve(name, stream, shared);
    }
}

/// Answers one frontend until it goes or the port stops.
fn serve(name: &str, stream: UnixStream, shared: &Arc<Shared>) {
    let fd = stream.as_raw_fd();
    shared.connected.store(true, Ordering::Release);
    let handler = Arc::new(Mutex::new(Handler::new(shared.clone())));
    let mut req = BackendReqHandler::from_stream(stream, handler);
    while !shared.stop.load(Ordering::Acquire) {
        if !readable(fd) {
            continue;
        }
        match req.handle_request() {
            Ok(()) => {}
            Err(
                e @ (Error::Disconnected
                | Error::SocketBroken(_)
                | Error::SocketError(_)
                | Error::PartialMessage
                | Error::InvalidMessage
                | Error::OversizedMsg
                | Error::IncorrectFds),
            ) => {
                if !matches!(e, Error::Disconnected) {
                    shared.warn(format!("frontend closed: {e}"));
                }
                break;
            }
            // A request refused: the frontend was told (REPLY_ACK) and
            // goes on or gives up.
            Err(e) => shared.warn(format!("{name}: request refused: {e}")),
        }
    }
    // Dropping the request handler drops the device handler: queues
    // stopped, memory unmapped.
    drop(req);
}
