//! Packet-ins on their way from the PMDs to the controllers. The PMDs hand
//! them to one bounded queue (no lock on the packet path; what does not fit
//! stays in, or is dropped and counted by, each datapath's own bounded
//! queue). One thread takes them from there and offers each to every
//! connected controller that takes packet-ins, through that controller's
//! own bounded queue and rate limit: a slow or flooded controller loses
//! its own packet-ins (counted), never another's, never a PMD's time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_classifier::dpaction::PacketInReason;
use sluice_datapath::PacketIn;
use sluice_openflow::consts::NO_BUFFER;
use sluice_openflow::msg::{to_bytes, PacketIn as OfPacketIn};
use sluice_openflow::oxm::{f, Oxm};
use sluice_openflow::Message;

/// Packet-ins waiting between the PMDs and the controllers.
pub const PACKET_IN_QUEUE: usize = 4096;
/// Messages waiting to be written to one controller.
pub const SESSION_QUEUE: usize = 1024;

/// What one connection lets the hub know and change.
#[derive(Debug, Default)]
pub struct Listener {
    /// Whether it takes packet-ins now (a slave does not).
    pub wants_packet_ins: AtomicBool,
    /// Packet-ins written to its queue.
    pub sent: AtomicU64,
    /// Packet-ins lost because its queue was full.
    pub queue_full: AtomicU64,
    /// Packet-ins lost to its rate limit.
    pub rate_limited: AtomicU64,
}

struct Outlet {
    id: u64,
    tx: SyncSender<Vec<u8>>,
    listener: Arc<Listener>,
    bucket: Bucket,
}

/// A token bucket: `rate` per second, up to `burst` at once.
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u32) -> Self {
        let rate = f64::from(rate);
        // OVS's controller-burst-limit default: a quarter of the rate, at
        // least 25.
        let burst = (rate / 4.0).max(25.0);
        Bucket {
            rate,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The controllers' side of the packet-in path, and its counters.
#[derive(Default)]
pub struct Hub {
    outlets: Mutex<Vec<Outlet>>,
    next_id: AtomicU64,
    /// Packet-ins per second per controller (0: no limit).
    rate: u32,
    /// Packet-ins no controller was there to take.
    pub no_controller: AtomicU64,
}

impl Hub {
    /// A hub limiting each controller to `rate` packet-ins a second (0:
    /// no limit).
    pub fn new(rate: u32) -> Self {
        Hub {
            rate,
            ..Hub::default()
        }
    }

    /// Adds a connection's queue; returns its id for [`Hub::unregister`].
    pub fn register(&self, tx: SyncSender<Vec<u8>>, listener: Arc<Listener>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.outlets.lock().expect("outlets").push(Outlet {
            id,
            tx,
            listener,
            bucket: Bucket::new(self.rate),
        });
        id
    }

    /// Removes a connection's queue.
    pub fn unregister(&self, id: u64) {
        self.outlets.lock().expect("outlets").retain(|o| o.id != id);
    }

    /// Starts the thread that takes the PMDs' packet-ins from `rx` and
    /// offers them to the controllers. It ends when every PMD has.
    pub fn spawn(self: &Arc<Self>, rx: Receiver<PacketIn>) -> std::io::Result<()> {
        let hub = Arc::clone(self);
        std::thread::Builder::new()
            .name("of-packet-in".into())
            .spawn(move || {
                for pi in rx {
                    hub.offer(&pi);
                }
            })
            .map(|_| ())
    }

    fn offer(&self, pi: &PacketIn) {
        let msg = to_bytes(&Message::PacketIn(packet_in(pi)), 0);
        let mut outlets = self.outlets.lock().expect("outlets");
        let mut taken = false;
        for o in outlets.iter_mut() {
            if !o.listener.wants_packet_ins.load(Ordering::Relaxed) {
                continue;
            }
            taken = true;
            if !o.bucket.take() {
                o.listener.rate_limited.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            match o.tx.try_send(msg.clone()) {
                Ok(()) => o.listener.sent.fetch_add(1, Ordering::Relaxed),
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    o.listener.queue_full.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        if !taken {
            self.no_controller.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The OpenFlow message of a datapath packet-in.
pub fn packet_in(pi: &PacketIn) -> OfPacketIn {
    OfPacketIn {
        buffer_id: NO_BUFFER,
        total_len: pi.total_len.min(usize::from(u16::MAX)) as u16,
        reason: match pi.reason {
            PacketInReason::NoMatch => 0,
            PacketInReason::Action => 1,
        },
        table_id: pi.table_id,
        cookie: pi.cookie,
        oxms: vec![Oxm::exact(f::IN_PORT, u128::from(pi.in_port))],
        data: pi.data.clone(),
    }
}
