//! A connection's writer thread: what the session and the hub queue for
//! it goes out in batches, put in OpenFlow 1.4's or 1.5's layout on a
//! 1.4 or 1.5 connection.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_openflow::of14::OFP14;
use sluice_openflow::of15::OFP15;

use super::{Conn, Session, SESSION_QUEUE, WRITE_BATCH};

impl<S: Conn> Session<S> {
    /// Starts the writer thread.
    pub(super) fn start_writer(&mut self) -> Result<(), String> {
        let mut w = self.s.writer().map_err(|e| e.to_string())?;
        let listener = Arc::clone(&self.listener);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(SESSION_QUEUE);
        let writer = std::thread::Builder::new()
            .name("of-writer".into())
            .spawn(move || {
                // What is queued goes out together, up to WRITE_BATCH
                // bytes a write: a burst of packet-ins costs a few
                // system calls, not one each.
                // On a 1.4 or 1.5 connection each message is put in its
                // version's layout here (the queue counts the bytes as
                // queued).
                let mut out = Vec::with_capacity(WRITE_BATCH);
                // An item may hold several messages (the hub queues a
                // burst of packet-ins as one): each is put in the layout
                // on its own, or a 1.5 peer reads the burst as its first.
                let put = |out: &mut Vec<u8>, m: &[u8]| {
                    let wire = listener.wire.load(Ordering::Relaxed);
                    for f in sluice_openflow::msg::frames(m) {
                        match wire {
                            OFP14 => out.extend_from_slice(&sluice_openflow::of14::upgrade(f)),
                            OFP15 => out.extend_from_slice(&sluice_openflow::of15::upgrade(f)),
                            _ => out.extend_from_slice(f),
                        }
                    }
                    m.len()
                };
                while let Ok(m) = rx.recv() {
                    out.clear();
                    let mut queued = put(&mut out, &m);
                    while out.len() < WRITE_BATCH {
                        match rx.try_recv() {
                            Ok(m) => queued += put(&mut out, &m),
                            Err(_) => break,
                        }
                    }
                    if w.write_all(&out).is_err() {
                        break;
                    }
                    listener.queued_bytes.fetch_sub(queued, Ordering::Relaxed);
                }
            })
            .map_err(|e| e.to_string())?;
        self.out = Some(tx);
        self.writer = Some(writer);
        Ok(())
    }
}
