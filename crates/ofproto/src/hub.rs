//! Packet-ins on their way from the PMDs to the controllers. The PMDs hand
//! them to one bounded queue (no lock on the packet path; what does not fit
//! stays in, or is dropped and counted by, each datapath's own bounded
//! queue). One thread takes them from there and offers each to every
//! connected controller that takes packet-ins, through that controller's
//! own bounded queue and rate limit: a slow or flooded controller loses
//! its own packet-ins (counted), never another's, never a PMD's time.

use std::sync::atomic::{
    AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_classifier::table::Removal;
use sluice_classifier::Rule;
use sluice_datapath::PacketIn;
use sluice_openflow::async_msg::{self, PinData, PinFormat};
use sluice_openflow::consts::{role, OFP13};
use sluice_openflow::convert::flow_removed;
use sluice_openflow::msg::to_bytes;
use sluice_openflow::of10::{self, OFP10};
use sluice_openflow::{Message, OfError};

/// A PMD's packet-ins on their way to the OpenFlow channel, and where to
/// send the emptied batch back (its buffers are the PMD's to reuse).
pub struct PinBatch {
    /// The packet-ins, oldest first.
    pub items: Vec<PacketIn>,
    /// The PMD that made them.
    pub back: mpsc::SyncSender<Vec<PacketIn>>,
}

/// Batches of packet-ins (one per PMD iteration that made some) waiting
/// between the PMDs and the controllers.
pub const PACKET_IN_QUEUE: usize = 256;
/// Entries waiting to be written to one controller (a reply, or a PMD
/// batch of packet-ins).
pub const SESSION_QUEUE: usize = 1024;
/// Bytes of packet-ins that may wait for one controller; beyond, they
/// are the counted `controller queue full`.
pub const SESSION_BYTES: usize = 4 << 20;

/// What one connection lets the hub know and change.
#[derive(Debug)]
pub struct Listener {
    /// Whether it has said HELLO (only then does it take packet-ins).
    pub wants_packet_ins: AtomicBool,
    /// Its role (`OFPCR_ROLE_*`).
    pub role: AtomicU32,
    /// Its asynchronous message masks (SET_ASYNC): packet-in, port-status,
    /// flow-removed reasons, each for master/equal then slave.
    pub masks: [AtomicU32; 6],
    /// Packet-ins written to its queue.
    pub sent: AtomicU64,
    /// Packet-ins lost because its queue was full.
    pub queue_full: AtomicU64,
    /// Packet-ins lost to its rate limit.
    pub rate_limited: AtomicU64,
    /// Bytes waiting in its queue (added when queued, taken off once
    /// written): the hub queues no packet-in past [`SESSION_BYTES`].
    pub queued_bytes: AtomicUsize,
    /// Its controller id (`NXT_SET_CONTROLLER_ID`; 0 unless it said one):
    /// a `controller(id=N)` packet-in goes to the connections of id N.
    pub controller_id: AtomicU16,
    /// The OpenFlow version it speaks (1.3's 4 until HELLO says 1.0's 1):
    /// its asynchronous messages are that version's.
    pub version: AtomicU8,
    /// The packet-in format it asked for (`NXT_SET_PACKET_IN_FORMAT`,
    /// [`PinFormat::wire`]).
    pub pin_format: AtomicU8,
    /// A 1.0 connection in the NXM flow format: its flow removed messages
    /// are `NXT_FLOW_REMOVED`.
    pub nxm: AtomicBool,
    /// OpenFlow 1.4 (5) when it speaks 1.4: what is written to it (1.3's
    /// messages, `version` 4) is put in 1.4's layout on the way out.
    pub wire: AtomicU8,
}

impl Default for Listener {
    fn default() -> Self {
        Listener {
            wants_packet_ins: AtomicBool::new(false),
            role: AtomicU32::new(role::EQUAL),
            masks: DEFAULT_MASKS.map(AtomicU32::new),
            sent: AtomicU64::new(0),
            queue_full: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
            queued_bytes: AtomicUsize::new(0),
            controller_id: AtomicU16::new(0),
            version: AtomicU8::new(OFP13),
            pin_format: AtomicU8::new(0),
            nxm: AtomicBool::new(false),
            wire: AtomicU8::new(0),
        }
    }
}

/// The spec's default asynchronous configuration (OFPT_SET_ASYNC): a
/// master or equal controller gets packet-ins for no_match and action,
/// every port-status, every flow-removed; a slave only port-status.
pub const DEFAULT_MASKS: [u32; 6] = [0b011, 0, 0b111, 0b111, 0b1111, 0];

impl Listener {
    /// Whether it takes an asynchronous message of kind `k` (0 packet-in,
    /// 1 port-status, 2 flow-removed) with reason `reason`.
    pub fn takes(&self, k: usize, reason: u8) -> bool {
        let slave = usize::from(self.role.load(Ordering::Relaxed) == role::SLAVE);
        self.masks[2 * k + slave].load(Ordering::Relaxed) & 1 << reason != 0
    }

    /// Its version and packet-in format: which encoding of a packet-in it
    /// takes (an index into [`Hub::offer`]'s encodings).
    fn form(&self) -> (u8, PinFormat) {
        let v = self.version.load(Ordering::Relaxed);
        let f = PinFormat::of_wire(u32::from(self.pin_format.load(Ordering::Relaxed)));
        (v, f.unwrap_or_default())
    }
}

/// The six forms of a packet-in: 1.0 or 1.3, each in three formats.
const FORMS: [(u8, PinFormat); 6] = [
    (OFP13, PinFormat::Standard),
    (OFP10, PinFormat::Standard),
    (OFP13, PinFormat::Nxt),
    (OFP10, PinFormat::Nxt),
    (OFP13, PinFormat::Nxt2),
    (OFP10, PinFormat::Nxt2),
];

struct Outlet {
    id: u64,
    tx: SyncSender<Vec<u8>>,
    listener: Arc<Listener>,
    bucket: Bucket,
    /// Who it is.
    peer: String,
}

impl Outlet {
    /// Queues `bytes` for the connection's writer, counting them in;
    /// false when its queue is full or it is gone.
    fn queue(&self, bytes: Vec<u8>) -> bool {
        let len = bytes.len();
        self.listener.queued_bytes.fetch_add(len, Ordering::Relaxed);
        if self.tx.try_send(bytes).is_ok() {
            return true;
        }
        self.listener.queued_bytes.fetch_sub(len, Ordering::Relaxed);
        false
    }
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
    /// The greatest generation_id a master or slave request brought.
    generation: Mutex<Option<u64>>,
    /// Connections accepted by the listeners and still open.
    pub accepted_open: std::sync::atomic::AtomicUsize,
    /// Connections the listeners refused: [`MAX_OF_CONNECTIONS`] were open.
    pub refused_busy: AtomicU64,
    /// Accepted connections closed for sending no HELLO in time.
    pub closed_no_hello: AtomicU64,
    /// The controllers (`--controller`) and whether one is connected,
    /// for fail-open.
    controllers: Mutex<Controllers>,
    /// Whether the switch fails open now (standalone, no controller for
    /// fifteen seconds, `ofchannel`'s `FAIL_OPEN_AFTER`).
    pub failing_open: std::sync::atomic::AtomicBool,
    /// Fail mode secure set at run time (`sluice vswitchd`, a bridge's
    /// `fail_mode`): never fail open, whatever the start said.
    pub fail_secure: std::sync::atomic::AtomicBool,
    /// The packet-in counters of connections that have closed (sent,
    /// queue full, rate limited), so that the totals never go back.
    closed: Mutex<[u64; 3]>,
    /// Whether a connection takes packet-ins for a TTL that ran out: the
    /// PMDs make none otherwise ([`Hub::refresh`]).
    invalid_ttl: Arc<AtomicBool>,
    /// The hubs of the datapath's other bridges, by bridge index: their
    /// packet-ins go there ([`Hub::route_bridge`]).
    others: Mutex<Vec<(u16, Arc<Hub>)>>,
    /// Whether one of this hub's own connections takes packet-ins for a
    /// TTL that ran out (`invalid_ttl` is that of every bridge's hub).
    wants_ttl: AtomicBool,
    /// The datapath's first bridge's hub, for another bridge's
    /// ([`Hub::for_bridge`]).
    first: Option<std::sync::Weak<Hub>>,
}

/// The hub's counters, summed over its connections, open and closed
/// (for `--metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HubCounters {
    /// Connections with a packet-in queue (that said HELLO).
    pub connections: u64,
    /// Connections the listeners hold open.
    pub accepted_open: u64,
    /// Packet-ins written to a controller's queue.
    pub sent: u64,
    /// Packet-ins lost to a full queue.
    pub queue_full: u64,
    /// Packet-ins lost to the rate limit.
    pub rate_limited: u64,
    /// Packet-ins no controller was there to take.
    pub no_controller: u64,
    /// Connections refused: too many open.
    pub refused_busy: u64,
    /// Connections closed for sending no HELLO in time.
    pub closed_no_hello: u64,
}

/// The switch's own controllers (not the listeners' peers, as OVS
/// counts only its primary controllers for fail-open).
#[derive(Debug, Default)]
struct Controllers {
    configured: usize,
    connected: usize,
    /// Since when none has been connected (or since the start).
    down_since: Option<std::time::Instant>,
}

/// Most connections the OpenFlow listeners (`--listen`) keep open at
/// once; one more is closed at once and counted.
pub const MAX_OF_CONNECTIONS: usize = 128;

impl Hub {
    /// A hub limiting each controller to `rate` packet-ins a second (0:
    /// no limit).
    pub fn new(rate: u32) -> Self {
        Hub {
            rate,
            ..Hub::default()
        }
    }

    /// A hub that keeps `invalid_ttl` (the flag the PMDs read) saying
    /// whether a connection takes packet-ins for a TTL that ran out.
    pub fn with_invalid_ttl_flag(rate: u32, invalid_ttl: Arc<AtomicBool>) -> Self {
        Hub {
            rate,
            invalid_ttl,
            ..Hub::default()
        }
    }

    /// Sends bridge `bridge`'s packet-ins to `hub` (`None`: the bridge is
    /// gone; its packet-ins are counted as taken by no controller).
    pub fn route_bridge(&self, bridge: u16, hub: Option<Arc<Hub>>) {
        let mut others = self.others.lock().expect("other hubs");
        others.retain(|(b, _)| *b != bridge);
        if let Some(h) = hub {
            others.push((bridge, h));
        }
        drop(others);
        self.refresh_datapath();
    }

    /// Offers a batch whose packet-ins may be other bridges': each goes
    /// to its bridge's hub.
    fn offer_routed(&self, batch: &[PacketIn]) {
        if batch.iter().all(|p| p.bridge == 0) {
            return self.offer(batch);
        }
        let mut bridges: Vec<u16> = batch.iter().map(|p| p.bridge).collect();
        bridges.sort_unstable();
        bridges.dedup();
        for b in bridges {
            let mine: Vec<PacketIn> = batch.iter().filter(|p| p.bridge == b).cloned().collect();
            if b == 0 {
                self.offer(&mine);
                continue;
            }
            let hub = self
                .others
                .lock()
                .expect("other hubs")
                .iter()
                .find(|(x, _)| *x == b)
                .map(|(_, h)| Arc::clone(h));
            match hub {
                Some(h) => h.offer(&mine),
                None => {
                    self.no_controller
                        .fetch_add(mine.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// The hub of another bridge of `first`'s datapath: its packet-ins
    /// come through `first` ([`Hub::route_bridge`]), and what its
    /// connections ask of the PMDs goes into `first`'s flags.
    pub fn for_bridge(first: &Arc<Hub>, rate: u32) -> Self {
        Hub {
            rate,
            invalid_ttl: Arc::clone(&first.invalid_ttl),
            first: Some(Arc::downgrade(first)),
            ..Hub::default()
        }
    }

    /// Recomputes what the PMDs read of the connections' asynchronous
    /// configurations: call after a connection comes, goes or changes
    /// its configuration or role.
    pub fn refresh(&self) {
        let any =
            self.outlets.lock().expect("outlets").iter().any(|o| {
                o.listener.wants_packet_ins.load(Ordering::Relaxed) && o.listener.takes(0, 2)
            });
        self.wants_ttl.store(any, Ordering::Relaxed);
        match self.first.as_ref().and_then(std::sync::Weak::upgrade) {
            Some(first) => first.refresh_datapath(),
            None => self.refresh_datapath(),
        }
    }

    /// The datapath's flags from every bridge's hub (on the first's).
    fn refresh_datapath(&self) {
        let any = self.wants_ttl.load(Ordering::Relaxed)
            || self
                .others
                .lock()
                .expect("other hubs")
                .iter()
                .any(|(_, h)| h.wants_ttl.load(Ordering::Relaxed));
        self.invalid_ttl.store(any, Ordering::Relaxed);
    }

    /// Says how many controllers the switch connects to (at the start).
    pub fn set_controllers(&self, n: usize) {
        let mut c = self.controllers.lock().expect("controllers");
        c.configured = n;
        c.down_since = Some(std::time::Instant::now());
    }

    /// A controller connection said HELLO.
    pub fn controller_up(&self) {
        let mut c = self.controllers.lock().expect("controllers");
        c.connected += 1;
        c.down_since = None;
    }

    /// A controller connection that had said HELLO ended.
    pub fn controller_down(&self) {
        let mut c = self.controllers.lock().expect("controllers");
        c.connected = c.connected.saturating_sub(1);
        if c.connected == 0 {
            c.down_since = Some(std::time::Instant::now());
        }
    }

    /// How long the switch has had controllers and none connected (`None`:
    /// one is, or there are none to have).
    pub fn controllers_down_for(&self) -> Option<std::time::Duration> {
        let c = self.controllers.lock().expect("controllers");
        if c.configured == 0 || c.connected > 0 {
            return None;
        }
        c.down_since.map(|t| t.elapsed())
    }

    /// Adds a connection's queue; returns its id for [`Hub::unregister`].
    pub fn register(&self, tx: SyncSender<Vec<u8>>, listener: Arc<Listener>, peer: &str) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.outlets.lock().expect("outlets").push(Outlet {
            id,
            tx,
            listener,
            bucket: Bucket::new(self.rate),
            peer: peer.to_string(),
        });
        self.refresh();
        id
    }

    /// The connections with their peer (as `--controller` names it) and
    /// role as OVS's Controller table writes it (`master`, `slave`,
    /// `other`).
    pub fn peers(&self) -> Vec<(String, &'static str)> {
        let outlets = self.outlets.lock().expect("outlets");
        outlets
            .iter()
            .map(|c| {
                let r = match c.listener.role.load(Ordering::Relaxed) {
                    role::MASTER => "master",
                    role::SLAVE => "slave",
                    _ => "other",
                };
                (c.peer.clone(), r)
            })
            .collect()
    }

    /// The connections and their packet-in counters, as `sluice ctl
    /// of-show` prints them.
    pub fn show(&self) -> String {
        let outlets = self.outlets.lock().expect("outlets");
        let mut o = format!(
            "OpenFlow connections: {} (packet-ins no controller took: {})\n\
             listeners: {} open of at most {MAX_OF_CONNECTIONS}, refused (too many open) {}, closed (no HELLO in time) {}\n",
            outlets.len(),
            self.no_controller.load(Ordering::Relaxed),
            self.accepted_open.load(Ordering::Relaxed),
            self.refused_busy.load(Ordering::Relaxed),
            self.closed_no_hello.load(Ordering::Relaxed),
        );
        if self.failing_open.load(Ordering::Relaxed) {
            o += "fail-open: no controller connected for too long: every packet NORMAL until one connects\n";
        }
        for c in outlets.iter() {
            let l = &c.listener;
            let role = match l.role.load(Ordering::Relaxed) {
                role::MASTER => "master",
                role::SLAVE => "slave",
                _ => "equal",
            };
            o += &format!(
                "  {}: role {role}, packet-ins sent {}, dropped: queue full {}, rate limit {}\n",
                c.peer,
                l.sent.load(Ordering::Relaxed),
                l.queue_full.load(Ordering::Relaxed),
                l.rate_limited.load(Ordering::Relaxed),
            );
        }
        o
    }

    /// A ROLE_REQUEST from `me`: returns the role and generation_id to
    /// reply with. Becoming master makes any other master a slave; an older
    /// generation_id than one seen is `STALE` (spec 6.3.7).
    pub fn set_role(&self, me: &Arc<Listener>, want: u32, gen: u64) -> Result<(u32, u64), OfError> {
        let mut cached = self.generation.lock().expect("generation");
        match want {
            role::NOCHANGE => {}
            role::EQUAL => me.role.store(role::EQUAL, Ordering::Relaxed),
            role::MASTER | role::SLAVE => {
                if let Some(g) = *cached {
                    if (gen.wrapping_sub(g) as i64) < 0 {
                        return Err(OfError::ROLE_STALE);
                    }
                }
                *cached = Some(gen);
                if want == role::MASTER {
                    for o in self.outlets.lock().expect("outlets").iter() {
                        if !Arc::ptr_eq(&o.listener, me) {
                            let _ = o.listener.role.compare_exchange(
                                role::MASTER,
                                role::SLAVE,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            );
                        }
                    }
                }
                me.role.store(want, Ordering::Relaxed);
            }
            _ => return Err(OfError::ROLE_BAD_ROLE),
        }
        Ok((me.role.load(Ordering::Relaxed), cached.unwrap_or(gen)))
    }

    /// Tells the controllers that take it that rule `r` went, for `why`
    /// (FLOW_REMOVED in each one's version and flow format; a full queue
    /// loses it, counted).
    pub fn flow_removed(&self, r: &Rule, why: Removal, now_us: u64) {
        let m = flow_removed(r, why, now_us);
        let reason = m.reason;
        let mut forms: [Option<Vec<u8>>; 3] = Default::default();
        for o in self.outlets.lock().expect("outlets").iter() {
            let l = &o.listener;
            if !l.wants_packet_ins.load(Ordering::Relaxed) || !l.takes(2, reason) {
                continue;
            }
            let k = match (
                l.version.load(Ordering::Relaxed),
                l.nxm.load(Ordering::Relaxed),
            ) {
                (OFP10, true) => 1,
                (OFP10, false) => 2,
                _ => 0,
            };
            let msg = forms[k].get_or_insert_with(|| match k {
                0 => to_bytes(&Message::FlowRemoved(m.clone()), 0),
                _ => async_msg::flow_removed10(&m, &r.matcher, k == 1),
            });
            if !o.queue(msg.clone()) {
                l.queue_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Tells every connection that takes it of a port change
    /// (PORT_STATUS, reason 0 add, 1 delete, 2 modify), with the port's
    /// config bits.
    pub fn port_status(&self, reason: u8, ofport: u32, name: &str, config: u32) {
        let desc = port_desc(ofport, name, config);
        let p10 = of10::Port {
            port_no: of10::port16(ofport),
            hw_addr: desc.hw_addr,
            name: desc.name.clone(),
            config: desc.config,
            state: desc.state & 1,
        };
        let msg13 = to_bytes(&Message::PortStatus(reason, desc), 0);
        let msg10 = async_msg::port_status10(reason, &p10);
        for o in self.outlets.lock().expect("outlets").iter() {
            let l = &o.listener;
            if !l.wants_packet_ins.load(Ordering::Relaxed) || !l.takes(1, reason) {
                continue;
            }
            let msg = match l.version.load(Ordering::Relaxed) {
                OFP10 => msg10.clone(),
                _ => msg13.clone(),
            };
            if !o.queue(msg) {
                l.queue_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes a connection's queue.
    pub fn unregister(&self, id: u64) {
        let mut outlets = self.outlets.lock().expect("outlets");
        if let Some(i) = outlets.iter().position(|o| o.id == id) {
            let gone = outlets.remove(i);
            let l = &gone.listener;
            let mut closed = self.closed.lock().expect("closed");
            closed[0] += l.sent.load(Ordering::Relaxed);
            closed[1] += l.queue_full.load(Ordering::Relaxed);
            closed[2] += l.rate_limited.load(Ordering::Relaxed);
        }
        drop(outlets);
        self.refresh();
    }

    /// Its counters now (every connection's packet-ins, open or closed).
    pub fn counters(&self) -> HubCounters {
        let outlets = self.outlets.lock().expect("outlets");
        let [mut sent, mut queue_full, mut rate_limited] = *self.closed.lock().expect("closed");
        for o in outlets.iter() {
            sent += o.listener.sent.load(Ordering::Relaxed);
            queue_full += o.listener.queue_full.load(Ordering::Relaxed);
            rate_limited += o.listener.rate_limited.load(Ordering::Relaxed);
        }
        HubCounters {
            connections: outlets.len() as u64,
            accepted_open: self.accepted_open.load(Ordering::Relaxed) as u64,
            sent,
            queue_full,
            rate_limited,
            no_controller: self.no_controller.load(Ordering::Relaxed),
            refused_busy: self.refused_busy.load(Ordering::Relaxed),
            closed_no_hello: self.closed_no_hello.load(Ordering::Relaxed),
        }
    }

    /// Starts the thread that takes the PMDs' packet-ins from `rx` and
    /// offers them to the controllers. It ends when every PMD has.
    pub fn spawn(self: &Arc<Self>, rx: Receiver<PinBatch>) -> std::io::Result<()> {
        let hub = Arc::clone(self);
        std::thread::Builder::new()
            .name("of-packet-in".into())
            .spawn(move || {
                for batch in rx {
                    hub.offer_routed(&batch.items);
                    // Back to its PMD, whose buffers they are (a full
                    // return queue: freed here instead).
                    let _ = batch.back.try_send(batch.items);
                }
            })
            .map(|_| ())
    }

    /// Offers a PMD's batch of packet-ins to every connection that takes
    /// them: each is encoded once per form some connection takes (its
    /// version and packet-in format), and each connection gets what it
    /// takes of the batch as one queue entry (one write), each packet-in
    /// counted.
    fn offer(&self, batch: &[PacketIn]) {
        let mut outlets = self.outlets.lock().expect("outlets");
        // Per form: the batch's encodings one after another, and where
        // each packet-in's starts.
        let mut forms: [Option<(Vec<u8>, Vec<usize>)>; FORMS.len()] = Default::default();
        let mut taken = vec![false; batch.len()];
        for o in outlets.iter_mut() {
            if !o.listener.wants_packet_ins.load(Ordering::Relaxed) {
                continue;
            }
            let form = o.listener.form();
            let k = FORMS.iter().position(|f| *f == form).unwrap_or(0);
            let (all, at) = forms[k].get_or_insert_with(|| encode_all(batch, form));
            let mut mine = Vec::new();
            let mut n = 0u64;
            let id = o.listener.controller_id.load(Ordering::Relaxed);
            for (i, pi) in batch.iter().enumerate() {
                let reason = pi.reason.wire(form.0 == OFP10);
                if pi.controller_id != id || !o.listener.takes(0, reason) {
                    continue;
                }
                taken[i] = true;
                if !o.bucket.take() {
                    o.listener.rate_limited.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                mine.extend_from_slice(&all[at[i]..at[i + 1]]);
                n += 1;
            }
            if n == 0 {
                continue;
            }
            let room =
                o.listener.queued_bytes.load(Ordering::Relaxed) + mine.len() <= SESSION_BYTES;
            if room && o.queue(mine) {
                o.listener.sent.fetch_add(n, Ordering::Relaxed);
            } else {
                o.listener.queue_full.fetch_add(n, Ordering::Relaxed);
            }
        }
        let missed = taken.iter().filter(|t| !**t).count() as u64;
        if missed > 0 {
            self.no_controller.fetch_add(missed, Ordering::Relaxed);
        }
    }
}

/// A batch of packet-ins in one form, one after another, and the offsets
/// where each starts (and the end).
fn encode_all(batch: &[PacketIn], (version, format): (u8, PinFormat)) -> (Vec<u8>, Vec<usize>) {
    let mut all = Vec::with_capacity(batch.len() * 128);
    let mut at = Vec::with_capacity(batch.len() + 1);
    for pi in batch {
        at.push(all.len());
        async_msg::packet_in(version, format, &pin_data(pi, version), &mut all);
    }
    at.push(all.len());
    (all, at)
}

/// What a datapath packet-in says, in any form of `version`.
pub fn pin_data(pi: &PacketIn, version: u8) -> PinData<'_> {
    PinData {
        reason: pi.reason.wire(version == OFP10),
        table_id: pi.table_id,
        cookie: pi.cookie,
        in_port: pi.in_port,
        total_len: pi.total_len,
        data: &pi.data,
        fields: &pi.meta.fields,
        userdata: &pi.meta.userdata,
        continuation: pi.meta.continuation.map(|id| async_msg::Continuation {
            id,
            nonce: continuation_nonce(),
        }),
    }
}

/// This run of the switch's continuation nonce (a continuation of
/// another run names states this one does not have).
pub fn continuation_nonce() -> u64 {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()) << 32
    })
}

/// The OpenFlow name of a port: a live port's interface name
/// (`afpacket:veth1` is `veth1`), a vhost-user port's socket file name
/// (`vhost:/run/sluice/vm1.sock` is `vm1.sock`, as OVS names a
/// `dpdkvhostuser` port's socket after the port), any other port's spec;
/// 15 bytes at most.
pub fn of_port_name(spec: &str) -> String {
    let vhost = sluice_port::link::vhost_socket(spec).map(|p| p.rsplit('/').next().unwrap_or(p));
    let name = vhost
        .or_else(|| sluice_port::link::interface(spec))
        .unwrap_or(spec);
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// A port's description: number, name ([`of_port_name`]), config bits
/// and the state they and the link make: `LINK_DOWN` when set
/// `PORT_DOWN` or when a live port's interface has no carrier, `LIVE`
/// otherwise (as Open vSwitch says of a port that is up).
pub fn port_desc(ofport: u32, name: &str, config: u32) -> sluice_openflow::multipart::PortDesc {
    use sluice_openflow::consts::portc;
    let down = config & portc::PORT_DOWN != 0 || sluice_port::link::link_up(name) == Some(false);
    sluice_openflow::multipart::PortDesc {
        port_no: ofport,
        name: of_port_name(name),
        config,
        state: if down { portc::LINK_DOWN } else { portc::LIVE },
        // The interface's own address, as OVS reports it.
        hw_addr: sluice_port::link::mac(name).unwrap_or_default(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::dpaction::PacketInReason;

    #[test]
    fn live_ports_are_named_by_their_interface() {
        assert_eq!(of_port_name("afpacket:veth1"), "veth1");
        assert_eq!(of_port_name("afpacket:veth1,fanout=hash"), "veth1");
        assert_eq!(of_port_name("afxdp:eth0:3"), "eth0");
        assert_eq!(of_port_name("tap:tap0"), "tap0");
        assert_eq!(of_port_name("vhost:/run/sluice/vm1.sock"), "vm1.sock");
        assert_eq!(
            of_port_name("vhost-client:/var/run/vm-000001-net0"),
            "vm-000001-net0"
        );
        assert_eq!(of_port_name("null"), "null");
        assert_eq!(
            of_port_name("pcap:rx=/a/very/long/path.pcap"),
            "pcap:rx=/a/very"
        );
    }

    /// Each connection gets its packet-ins in its own form: 1.3's with
    /// the pipeline fields, 1.0's, or Nicira's with the userdata.
    #[test]
    fn a_packet_in_goes_in_each_connections_form() {
        let hub = Hub::new(0);
        let mut fields = sluice_classifier::Match::catch_all();
        let reg0 = sluice_classifier::fields::field_by_name("reg0").unwrap();
        fields.set_exact(reg0, 5);
        let pi = PacketIn {
            in_port: 3,
            reason: PacketInReason::Action,
            controller_id: 0,
            data: vec![0xff; 60],
            total_len: 60,
            table_id: 1,
            cookie: 7,
            meta: Arc::new(sluice_classifier::dpaction::PacketInMeta {
                fields,
                userdata: vec![0xaa],
                meter_id: None,
                continuation: None,
            }),
            bridge: 0,
        };
        let mut rx = Vec::new();
        for (version, format) in [(OFP13, 0), (OFP10, 0), (OFP10, 2)] {
            let (tx, r) = std::sync::mpsc::sync_channel(16);
            let l = Arc::new(Listener::default());
            l.wants_packet_ins.store(true, Ordering::Relaxed);
            l.version.store(version, Ordering::Relaxed);
            l.pin_format.store(format, Ordering::Relaxed);
            hub.register(tx, l, "test");
            rx.push(r);
        }
        hub.offer(std::slice::from_ref(&pi));
        let got: Vec<Vec<u8>> = rx.iter().map(|r| r.try_recv().unwrap()).collect();
        // 1.3's OFPT_PACKET_IN with in_port and reg0.
        assert_eq!(got[0][..2], [OFP13, 10]);
        let m = sluice_openflow::msg::decode(&got[0]).unwrap().1;
        let Message::PacketIn(of) = m else {
            panic!("{m:?}")
        };
        assert_eq!(
            (
                of.reason,
                of.table_id,
                of.cookie,
                of.total_len,
                of.oxms.len()
            ),
            (1, 1, 7, 60, 2)
        );
        // 1.0's: the 18-byte head, then the packet.
        assert_eq!(got[1][..2], [OFP10, 10]);
        assert_eq!(got[1].len(), 18 + 60);
        // NXT_PACKET_IN2 in 1.0: a vendor message, the userdata last.
        assert_eq!(got[2][..2], [OFP10, 4]);
        assert_eq!(got[2][12..16], 30u32.to_be_bytes());
        assert!(got[2].windows(5).any(|w| w == [0, 7, 0, 5, 0xaa]));
    }

    /// A `controller(id=N)` packet-in goes to the connections that said
    /// id N, a plain one to those that said none.
    #[test]
    fn packet_ins_go_to_the_controllers_of_their_id() {
        let hub = Hub::new(0);
        let pi = |controller_id| PacketIn {
            in_port: 1,
            reason: PacketInReason::Action,
            controller_id,
            data: vec![0; 60],
            total_len: 60,
            table_id: 0,
            cookie: 0,
            meta: Default::default(),
            bridge: 0,
        };
        let mut rx = Vec::new();
        for id in [0u16, 7] {
            let (tx, r) = std::sync::mpsc::sync_channel(16);
            let l = Arc::new(Listener::default());
            l.wants_packet_ins.store(true, Ordering::Relaxed);
            l.controller_id.store(id, Ordering::Relaxed);
            hub.register(tx, l, "test");
            rx.push(r);
        }
        hub.offer(&[pi(0), pi(7), pi(7), pi(3)]);
        let count =
            |r: &std::sync::mpsc::Receiver<Vec<u8>>| r.try_iter().map(|b| b.len()).sum::<usize>();
        let one = count(&rx[0]);
        assert!(one > 0);
        assert_eq!(count(&rx[1]), 2 * one, "id 7: its two");
        // The one for id 3 went to no one.
        assert_eq!(hub.no_controller.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn another_bridges_connection_asks_the_pmds_for_ttl_packet_ins_too() {
        let flag = Arc::new(AtomicBool::new(false));
        let first = Arc::new(Hub::with_invalid_ttl_flag(0, Arc::clone(&flag)));
        let second = Arc::new(Hub::for_bridge(&first, 0));
        first.route_bridge(1, Some(Arc::clone(&second)));
        let (tx, _rx) = std::sync::mpsc::sync_channel(16);
        let l = Arc::new(Listener::default());
        l.wants_packet_ins.store(true, Ordering::Relaxed);
        // Packet-ins of reason 2 (invalid TTL) asked for.
        l.masks[0].store(1 << 2, Ordering::Relaxed);
        second.register(tx, Arc::clone(&l), "test");
        second.refresh();
        assert!(flag.load(Ordering::Relaxed));
        // The first bridge's own connections (none) do not clear it.
        first.refresh();
        assert!(flag.load(Ordering::Relaxed));
        // The second bridge gone: nobody asks.
        first.route_bridge(1, None);
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[test]
    fn the_rate_limit_lets_a_burst_through_then_the_rate() {
        let mut b = Bucket::new(100);
        let passed = (0..1000).filter(|_| b.take()).count();
        // A quarter of the rate (25 here) at once, plus what a few
        // microseconds bring.
        assert!((25..=27).contains(&passed), "{passed}");
        let mut unlimited = Bucket::new(0);
        assert!((0..1000).all(|_| unlimited.take()));
    }
}
