//! The OpenFlow 1.3 channel: `--listen ptcp:PORT[:IP]` or `punix:PATH`
//! (owner-only), so that controllers and `ovs-ofctl -O OpenFlow13` program
//! a running switch. A second front end of [`Control`], beside the ctl
//! socket: a rule added by either is seen by both.
//!
//! Each connection has its own thread: a slow or dead peer blocks only its
//! own. Flow-mods read together (everything a read brought in) become one
//! version of the rules, published to every PMD before anything that
//! follows them is answered, so a barrier reply means every earlier rule
//! is what forwards.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_classifier::table::Removal;
use sluice_classifier::Action;
use sluice_datapath::PortConfig;
use sluice_openflow::action::OfAction;
use sluice_openflow::async_msg::PinFormat;
use sluice_openflow::consts::NO_BUFFER;
use sluice_openflow::consts::{mp, msg, port, portc, role, OFP13};
use sluice_openflow::convert::{to_action, FlowModReader};
use sluice_openflow::msg::{error_reply, to_bytes, Features, SwitchConfig};
use sluice_openflow::msg::{PacketOut, PortMod};
use sluice_openflow::multipart::MpRequest;
use sluice_openflow::nx::nx_body;
use sluice_openflow::of10::{message as of10_msg, t as of10_t, OFP10};
use sluice_openflow::of14::OFP14;
use sluice_openflow::of15::OFP15;
use sluice_openflow::{decode, frame_len, Message, OfError};

use crate::backend::{Backend, BackendExt};
use crate::hub::{Hub, Listener, SESSION_QUEUE};
use crate::loglimit::log_connection;

pub use crate::multipart::N_TABLES;

mod endpoints;
mod of10;
mod of14;
mod writer;

pub use endpoints::{
    connect, connect_link, listen, listen_link, serve_bytes, ControllerLink, ListenerLink,
};
/// Inactivity probe: an echo request after this long without a message,
/// a disconnect after as long again without one.
const PROBE: Duration = Duration::from_secs(5);

/// A standalone switch whose controllers have all been gone this long
/// fails open, as OVS after three inactivity probe intervals.
pub const FAIL_OPEN_AFTER: Duration = Duration::from_secs(3 * PROBE.as_secs());
/// How long an accepted connection may take to send its HELLO before it
/// is closed (and counted): an idle or trickling peer holds no slot long.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// A peer that takes this long to accept a reply is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes the writer thread gathers from its queue for one write.
const WRITE_BATCH: usize = 1 << 16;
/// Most bytes read on without waiting after a full read: a burst of
/// flow-mods up to this size is applied as one batch.
const BURST: usize = 1 << 20;

pub use crate::target::{parse_controller, parse_listen, parse_passive, Peer, Target};

/// What every connection of this switch says about it.
#[derive(Clone)]
pub struct SwitchInfo {
    /// Datapath id.
    pub datapath_id: u64,
    /// Where packet-ins reach the connections.
    pub hub: Arc<Hub>,
    /// TLS for ssl: and pssl: (made at start when either is used).
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// The OpenFlow versions its new connections may speak, a bit per
    /// wire version (`Bridge.protocols`; [`ALL_VERSIONS`] by default).
    pub versions: Arc<std::sync::atomic::AtomicU32>,
}

/// Every OpenFlow version Sluice speaks, a bit per wire version: 1.0,
/// 1.3, 1.4 and 1.5, offered by default as OVS offers all it speaks (a
/// peer that offers several speaks the highest; ovn-controller offers
/// only 1.5).
pub const ALL_VERSIONS: u32 = 1 << OFP15 | 1 << OFP14 | 1 << OFP13 | 1 << OFP10;

impl SwitchInfo {
    /// The switch `datapath_id`, its packet-ins through `hub`, speaking
    /// every version.
    pub fn new(datapath_id: u64, hub: Arc<Hub>, tls: Option<Arc<crate::tls::Tls>>) -> Self {
        SwitchInfo {
            datapath_id,
            hub,
            tls,
            versions: Arc::new(std::sync::atomic::AtomicU32::new(ALL_VERSIONS)),
        }
    }
}

trait Conn: Read + Write + Send + Sized + AsRawFd + 'static {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()>;
    fn writer(&self) -> std::io::Result<Self>;
}

impl Conn for TcpStream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
    fn writer(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

impl Conn for UnixStream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
    fn writer(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

/// One OpenFlow connection. Its thread reads and answers; everything it
/// sends goes through a bounded queue to a writer thread of its own, which
/// packet-ins join (and are dropped, counted, when the queue is full).
struct Session<S> {
    s: S,
    control: Arc<dyn Backend>,
    info: SwitchInfo,
    config: SwitchConfig,
    /// Whether the peer's HELLO came.
    hello: bool,
    /// A multipart request still coming in parts: xid, type, bodies so far.
    parts: Option<(u32, u16, Vec<u8>)>,
    out: Option<SyncSender<Vec<u8>>>,
    listener: Arc<Listener>,
    registered: Option<u64>,
    /// Who it is, for the log.
    peer: String,
    /// Reads its flow-mods (buffers and instructions kept from one to the
    /// next).
    flow_mods: FlowModReader,
    /// For an accepted connection: how long its HELLO may take.
    hello_deadline: Option<Duration>,
    /// The writer thread, joined when the session ends (after its queue
    /// is closed), so that a session that is gone has no thread left.
    writer: Option<std::thread::JoinHandle<()>>,
    /// One of the switch's own controllers (`--controller`), counted for
    /// fail-open once it said HELLO.
    primary: bool,
    counted_up: bool,
    /// OpenFlow 1.0 was negotiated: the flow format it has asked for.
    v10: Option<sluice_openflow::of10::flow_mod::Format>,
    /// The version negotiated when it is 1.3 or 1.4 (1.4's messages are
    /// read and written as 1.3's, converted: `of14`).
    wire: u8,
    /// Its open bundles (OpenFlow 1.4).
    bundles: of14::Bundles,
}

impl<S> Drop for Session<S> {
    fn drop(&mut self) {
        if self.counted_up {
            self.info.hub.controller_down();
        }
        if let Some(id) = self.registered.take() {
            self.info.hub.unregister(id);
        }
        // The queue closes (the hub's clone went with `unregister`): the
        // writer sends what is queued, or gives up at its write timeout,
        // and ends.
        self.out = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let l = &self.listener;
        let (q, r) = (
            l.queue_full.load(Ordering::Relaxed),
            l.rate_limited.load(Ordering::Relaxed),
        );
        if q + r > 0 {
            tracing::info!(
                target: "openflow",
                "OpenFlow connection {}: {} packet-ins sent, {q} dropped (queue full), {r} dropped (rate limit)",
                self.peer,
                l.sent.load(Ordering::Relaxed)
            );
        }
    }
}

impl<S: Conn> Session<S> {
    fn new(s: S, control: Arc<dyn Backend>, info: SwitchInfo, peer: String) -> Self {
        Session {
            s,
            control,
            info,
            config: SwitchConfig {
                flags: 0,
                miss_send_len: 128,
            },
            hello: false,
            parts: None,
            out: None,
            listener: Arc::new(Listener::default()),
            registered: None,
            peer,
            flow_mods: FlowModReader::default(),
            hello_deadline: None,
            writer: None,
            primary: false,
            counted_up: false,
            v10: None,
            wire: OFP13,
            bundles: of14::Bundles::default(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let out = self.out.as_ref().ok_or("not started")?;
        self.listener
            .queued_bytes
            .fetch_add(bytes.len(), Ordering::Relaxed);
        out.send(bytes.to_vec())
            .map_err(|_| "the peer stopped taking what is sent to it".to_string())
    }

    fn reply(&mut self, m: &Message, xid: u32) -> Result<(), String> {
        self.send(&to_bytes(m, xid))
    }

    fn is_slave(&self) -> bool {
        self.listener.role.load(Ordering::Relaxed) == role::SLAVE
    }

    /// Marks it one of the switch's own controllers (for fail-open).
    fn primary(mut self) -> Self {
        self.primary = true;
        self
    }

    fn run(&mut self) -> Result<(), String> {
        self.s
            .set_timeouts(Some(PROBE), Some(WRITE_TIMEOUT))
            .map_err(|e| e.to_string())?;
        self.start_writer()?;
        let mine = self.info.versions.load(Ordering::Relaxed);
        // The header says the highest version offered, the bitmap all.
        let mut hello = to_bytes(&Message::Hello { versions: mine }, 0);
        hello[0] = (OFP10..=OFP15)
            .rev()
            .find(|v| mine & 1 << v != 0)
            .unwrap_or(OFP13);
        self.send(&hello)?;
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut chunk = vec![0u8; 1 << 16];
        let mut last_heard = Instant::now();
        let mut probed = false;
        let opened = Instant::now();
        if let Some(d) = self.hello_deadline {
            // Wake in time to close a peer that never says HELLO.
            self.s
                .set_timeouts(Some(d.min(PROBE)), Some(WRITE_TIMEOUT))
                .map_err(|e| e.to_string())?;
        }
        loop {
            if !self.hello && self.hello_deadline.is_some_and(|d| opened.elapsed() >= d) {
                self.info
                    .hub
                    .closed_no_hello
                    .fetch_add(1, Ordering::Relaxed);
                return Err(format!(
                    "no HELLO within {} s",
                    self.hello_deadline.unwrap_or_default().as_secs()
                ));
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if n == chunk.len() {
                        self.drain(&mut buf, &mut chunk);
                    }
                    last_heard = Instant::now();
                    probed = false;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if probed && last_heard.elapsed() >= 2 * PROBE {
                        return Err("no answer to an echo request".into());
                    }
                    if !probed {
                        if self.v10.is_some() {
                            self.send(&of10_msg(of10_t::ECHO_REQUEST, 0, &[]))?;
                        } else {
                            self.reply(&Message::EchoRequest(Vec::new()), 0)?;
                        }
                        probed = true;
                    }
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read: {e}")),
            }
            let used = if self.wire >= OFP14 {
                self.handle_frames14(&buf)?
            } else {
                self.handle_frames13(&buf)?
            };
            buf.drain(..used);
        }
    }

    /// Reads on, without waiting, what the peer has already sent, up to
    /// [`BURST`] bytes: a burst of flow-mods becomes one batch (one new
    /// version of the rules) rather than one per read.
    fn drain(&mut self, buf: &mut Vec<u8>, chunk: &mut [u8]) {
        while buf.len() < BURST {
            match sluice_port::sys::recv_nowait(self.s.as_raw_fd(), chunk) {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                // The end of the stream, nothing more now, or an error: the
                // next blocking read says which.
                _ => return,
            }
        }
    }

    /// Handles every whole message in `buf`; returns the bytes used.
    /// Consecutive flow-mods are applied together.
    fn handle_frames13(&mut self, buf: &[u8]) -> Result<usize, String> {
        let mut at = 0;
        let mut mods: Vec<(usize, usize)> = Vec::new();
        loop {
            let len = match frame_len(&buf[at..]) {
                Ok(Some(len)) if at + len <= buf.len() => len,
                Ok(_) => break,
                Err(e) => {
                    // The stream cannot be framed any more.
                    self.flush_mods(buf, &mut mods)?;
                    let _ = if self.v10.is_some() {
                        self.error10(e, &buf[at..at + 8])
                    } else {
                        self.reply(&error_reply(e, &buf[at..]), 0)
                    };
                    return Err(format!("{e}: a message length under 8"));
                }
            };
            let frame = &buf[at..at + len];
            let flow_mod = match self.v10 {
                Some(_) => sluice_openflow::of10::flow_mod::is_flow_mod(frame),
                None => frame[1] == sluice_openflow::consts::msg::FLOW_MOD,
            };
            if flow_mod && self.hello {
                mods.push((at, len));
            } else {
                self.flush_mods(buf, &mut mods)?;
                let was = self.wire;
                self.handle(frame)?;
                if was < OFP14 && self.wire >= OFP14 {
                    // The HELLO that made it a 1.4 or 1.5 connection:
                    // the rest of what came with it is of that version.
                    at += len;
                    return Ok(at + self.handle_frames14(&buf[at..])?);
                }
            }
            at += len;
        }
        self.flush_mods(buf, &mut mods)?;
        Ok(at)
    }

    /// FLOW_REMOVED (reason delete) to the controllers for the rules a
    /// change removed that asked for it (`send_flow_rem`).
    fn tell_removed(&self, removed: &[Arc<sluice_classifier::Rule>]) {
        let now = self.control.uptime_us();
        for r in removed
            .iter()
            .filter(|r| r.flags & sluice_classifier::table::flag::SEND_FLOW_REM != 0)
        {
            self.info.hub.flow_removed(r, Removal::Delete, now);
        }
    }

    fn flush_mods(&mut self, buf: &[u8], mods: &mut Vec<(usize, usize)>) -> Result<(), String> {
        if mods.is_empty() {
            return Ok(());
        }
        let slave = self.is_slave();
        let reader = &mut self.flow_mods;
        let v10 = self.v10;
        let ops = mods.iter().map(|&(a, l)| {
            let frame = &buf[a..a + l];
            // A slave controller may not change the switch.
            if let Some(format) = v10 {
                if slave {
                    return Err(OfError::IS_SLAVE);
                }
                return sluice_openflow::of10::flow_mod::decode(frame, format, N_TABLES);
            }
            reader.read(frame)?;
            if slave {
                return Err(OfError::IS_SLAVE);
            }
            reader.op(N_TABLES)
        });
        let (errs, removed) = self.control.apply_flow_mods(ops)?;
        self.tell_removed(&removed);
        for (&(a, l), e) in mods.iter().zip(errs) {
            if let Some(e) = e {
                let frame = &buf[a..a + l];
                let xid = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                if self.v10.is_some() {
                    self.error10(e, frame)?;
                } else {
                    self.reply(&error_reply(e, frame), xid)?;
                }
            }
        }
        mods.clear();
        Ok(())
    }

    fn handle(&mut self, frame: &[u8]) -> Result<(), String> {
        if frame.len() >= 8 && tracing::enabled!(target: "openflow", tracing::Level::DEBUG) {
            tracing::debug!(
                target: "openflow",
                "{}: received {} (OpenFlow {}), xid {}, {} bytes",
                self.peer,
                sluice_openflow::consts::message_name(frame[0], frame[1]),
                if frame[0] == OFP13 { "1.3" } else { "1.0" },
                u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
                frame.len()
            );
        }
        if self.v10.is_some() {
            return self.handle10(frame);
        }
        if self.hello
            && frame.len() >= 16
            && frame[0] == OFP13
            && frame[1] == msg::MULTIPART_REQUEST
        {
            let xid = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            let typ = u16::from_be_bytes([frame[8], frame[9]]);
            let more = u16::from_be_bytes([frame[10], frame[11]]) & mp::MORE != 0;
            let continues = self
                .parts
                .as_ref()
                .is_some_and(|p| p.0 == xid && p.1 == typ);
            if more || continues {
                return self.request_part(frame, xid, typ, more);
            }
        }
        let (h, m) = match decode(frame) {
            Ok(x) => x,
            Err((h, e)) => {
                let xid = h.map_or(0, |h| h.xid);
                return self.reply(&error_reply(e, frame), xid);
            }
        };
        if !self.hello {
            let Message::Hello { versions } = m else {
                return self.reply(&error_reply(OfError::BAD_TYPE, frame), h.xid);
            };
            let mine = self.info.versions.load(Ordering::Relaxed);
            let versions = versions & mine;
            if versions == 0 {
                let text = match mine {
                    0 => "This bridge's protocols allow no version Sluice speaks".into(),
                    m => format!(
                        "We support version{} {} on this bridge",
                        if m.count_ones() > 1 { "s" } else { "" },
                        (0..32)
                            .filter(|v| m & 1 << v != 0)
                            .map(|v| format!("0x{v:02x}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
                .into_bytes();
                let _ = self.reply(
                    &Message::Error {
                        err: OfError::HELLO_INCOMPATIBLE,
                        data: text,
                    },
                    h.xid,
                );
                return Err("the peer speaks no OpenFlow version this bridge allows".into());
            }
            self.hello = true;
            if self.primary {
                self.counted_up = true;
                self.info.hub.controller_up();
            }
            if versions & 1 << OFP14 != 0 {
                // What was queued before this HELLO (errors for what came
                // before it) goes out as it was made: the writer converts
                // by the wire version it sees when it writes.
                let t = Instant::now();
                while self.listener.queued_bytes.load(Ordering::Acquire) > 0
                    && t.elapsed() < Duration::from_secs(1)
                {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            if versions & 1 << OFP15 != 0 {
                // OpenFlow 1.5: 1.3's messages, converted both ways.
                self.wire = OFP15;
                self.listener.wire.store(OFP15, Ordering::Relaxed);
                log_connection(&format!("OpenFlow 1.5 connection {}", self.peer));
            } else if versions & 1 << OFP14 != 0 {
                // OpenFlow 1.4: 1.3's messages, converted both ways.
                self.wire = OFP14;
                self.listener.wire.store(OFP14, Ordering::Relaxed);
                log_connection(&format!("OpenFlow 1.4 connection {}", self.peer));
            } else if versions & 1 << OFP13 == 0 {
                // OpenFlow 1.0: its messages are 1.0's, with Nicira's.
                self.v10 = Some(Default::default());
                self.listener.version.store(OFP10, Ordering::Relaxed);
                log_connection(&format!("OpenFlow 1.0 connection {}", self.peer));
            } else {
                log_connection(&format!("OpenFlow 1.3 connection {}", self.peer));
            }
            if let Some(out) = &self.out {
                self.listener
                    .wants_packet_ins
                    .store(true, Ordering::Relaxed);
                self.registered = Some(self.info.hub.register(
                    out.clone(),
                    Arc::clone(&self.listener),
                    &self.peer,
                ));
            }
            return Ok(());
        }
        match m {
            Message::Hello { .. } | Message::EchoReply(_) | Message::Error { .. } => Ok(()),
            Message::EchoRequest(d) => self.reply(&Message::EchoReply(d), h.xid),
            Message::FeaturesRequest => self.reply(
                &Message::FeaturesReply(Features {
                    datapath_id: self.info.datapath_id,
                    n_buffers: 0,
                    n_tables: N_TABLES,
                    // Flow, table and port statistics.
                    capabilities: 1 | 2 | 4,
                }),
                h.xid,
            ),
            Message::GetConfigRequest => self.reply(&Message::GetConfigReply(self.config), h.xid),
            Message::SetConfig(c) => {
                // Fragments are handled as `--frags` says; only the
                // normal mode (0) is asked for here.
                if c.flags & 3 != 0 {
                    return self
                        .reply(&error_reply(OfError::SWITCH_CONFIG_BAD_FLAGS, frame), h.xid);
                }
                self.config = c;
                Ok(())
            }
            // Flow-mods before it were applied and published already.
            Message::BarrierRequest => self.reply(&Message::BarrierReply, h.xid),
            Message::MultipartRequest { body, .. } => self.multipart(body, h.xid, frame),
            // Flow-mods after HELLO are batched before they get here.
            Message::FlowMod(_) => self.reply(&error_reply(OfError::BAD_TYPE, frame), h.xid),
            Message::PacketOut(_) if self.listener.role.load(Ordering::Relaxed) == role::SLAVE => {
                self.reply(&error_reply(OfError::IS_SLAVE, frame), h.xid)
            }
            Message::PortMod(_) if self.listener.role.load(Ordering::Relaxed) == role::SLAVE => {
                self.reply(&error_reply(OfError::IS_SLAVE, frame), h.xid)
            }
            Message::Other {
                typ: msg::GROUP_MOD | msg::METER_MOD,
                ..
            } if self.listener.role.load(Ordering::Relaxed) == role::SLAVE => {
                self.reply(&error_reply(OfError::IS_SLAVE, frame), h.xid)
            }
            Message::Other {
                typ: msg::METER_MOD,
                body,
            } => match crate::meters::meter_mod(&*self.control, &body)? {
                Ok(removed) => {
                    self.tell_removed(&removed);
                    Ok(())
                }
                Err(e) => self.reply(&error_reply(e, frame), h.xid),
            },
            Message::Other {
                typ: msg::GROUP_MOD,
                body,
            } => match crate::groups::group_mod(&*self.control, &body)? {
                Ok(removed) => {
                    self.tell_removed(&removed);
                    Ok(())
                }
                Err(e) => self.reply(&error_reply(e, frame), h.xid),
            },
            Message::Other {
                typ: msg::EXPERIMENTER,
                body,
            } if set_packet_in_format(&body).is_some() => {
                match set_packet_in_format(&body).flatten() {
                    Some(f) => {
                        self.listener.pin_format.store(f.wire(), Ordering::Relaxed);
                        Ok(())
                    }
                    None => self.reply(&error_reply(OfError { typ: 1, code: 5 }, frame), h.xid),
                }
            }
            Message::Other {
                typ: msg::EXPERIMENTER,
                body,
            } if is_resume(&body) => {
                if self.is_slave() {
                    return self.reply(&error_reply(OfError::IS_SLAVE, frame), h.xid);
                }
                match sluice_openflow::async_msg::decode_resume(&body[8..]) {
                    Err(e) => self.reply(&error_reply(e, frame), h.xid),
                    Ok(r) if r.continuation.nonce != crate::hub::continuation_nonce() => {
                        tracing::info!(target: "openflow", "NXT_RESUME: a continuation of another run of the switch, refused");
                        self.reply(&error_reply(OfError::BAD_PACKET, frame), h.xid)
                    }
                    Ok(r) => {
                        let (in_port, sets) = sluice_openflow::convert::resume_fields(&r.metadata);
                        match self
                            .control
                            .resume(r.packet, r.continuation.id, in_port, sets)
                        {
                            Ok(()) => Ok(()),
                            Err(e) => {
                                tracing::info!(target: "openflow", "NXT_RESUME: {e}");
                                self.reply(&error_reply(OfError::BAD_PACKET, frame), h.xid)
                            }
                        }
                    }
                }
            }
            Message::Other {
                typ: msg::EXPERIMENTER,
                body,
            } if set_controller_id(&body).is_some() => {
                let id = set_controller_id(&body).unwrap_or_default();
                self.listener.controller_id.store(id, Ordering::Relaxed);
                Ok(())
            }
            Message::Other {
                typ: msg::EXPERIMENTER,
                body,
            } => {
                let slave = self.listener.role.load(Ordering::Relaxed) == role::SLAVE;
                match crate::tlv::experimenter(&*self.control, &body, slave)? {
                    Ok(Some(reply)) => self.reply(
                        &Message::Other {
                            typ: msg::EXPERIMENTER,
                            body: reply,
                        },
                        h.xid,
                    ),
                    Ok(None) => Ok(()),
                    Err(e) => self.reply(&error_reply(e, frame), h.xid),
                }
            }
            Message::PortMod(pm) => match self.port_mod(&pm) {
                Ok(()) => Ok(()),
                Err(e) => self.reply(&error_reply(e, frame), h.xid),
            },
            Message::RoleRequest(want, gen) => {
                let r = self.info.hub.set_role(&self.listener, want, gen);
                self.info.hub.refresh();
                match r {
                    Ok((r, g)) => self.reply(&Message::RoleReply(r, g), h.xid),
                    Err(e) => self.reply(&error_reply(e, frame), h.xid),
                }
            }
            Message::GetAsyncRequest => {
                let m = self
                    .listener
                    .masks
                    .each_ref()
                    .map(|a| a.load(Ordering::Relaxed));
                self.reply(&Message::GetAsyncReply(m), h.xid)
            }
            Message::SetAsync(m) => {
                for (a, v) in self.listener.masks.iter().zip(m) {
                    a.store(v, Ordering::Relaxed);
                }
                self.info.hub.refresh();
                Ok(())
            }
            Message::PacketOut(po) => {
                // Actions the rule set refuses get its error, as bad ones do.
                let checked = packet_out(&po).and_then(|(in_port, actions)| {
                    self.control
                        .refusal(&actions)
                        .map_or(Ok((in_port, actions)), Err)
                });
                match checked {
                    Ok((in_port, actions)) => {
                        match self.control.packet_out(po.data, in_port, actions) {
                            Ok(()) => Ok(()),
                            Err(e) => {
                                tracing::warn!(target: "openflow", "packet-out: {e}");
                                self.reply(&error_reply(OfError::BAD_PACKET, frame), h.xid)
                            }
                        }
                    }
                    Err(e) => self.reply(&error_reply(e, frame), h.xid),
                }
            }
            _ => self.reply(&error_reply(OfError::BAD_TYPE, frame), h.xid),
        }
    }

    /// A part of a multipart request in parts (REQ_MORE): the bodies are
    /// gathered, up to 1 MiB, and the whole served when the last comes.
    fn request_part(&mut self, frame: &[u8], xid: u32, typ: u16, more: bool) -> Result<(), String> {
        let mut whole = match self.parts.take() {
            Some((x, t, acc)) if x == xid && t == typ => acc,
            _ => Vec::new(),
        };
        whole.extend_from_slice(&frame[16..]);
        if whole.len() > 1 << 20 {
            return self.reply(&error_reply(OfError::MULTIPART_BUFFER_OVERFLOW, frame), xid);
        }
        if more {
            self.parts = Some((xid, typ, whole));
            return Ok(());
        }
        match MpRequest::decode(typ, &whole) {
            Ok(req) => self.multipart(req, xid, frame),
            Err(e) => self.reply(&error_reply(e, frame), xid),
        }
    }

    /// PORT_MOD: the config bits Sluice acts on (`port_down`, `no_recv`,
    /// `no_fwd`); any other bit in the mask is `BAD_CONFIG`, not ignored.
    fn port_mod(&mut self, pm: &PortMod) -> Result<(), OfError> {
        let ports = self
            .control
            .port_reports()
            .map_err(|_| OfError::PORT_MOD_BAD_PORT)?;
        if !ports.iter().any(|p| p.ofport == pm.port_no) {
            return Err(OfError::PORT_MOD_BAD_PORT);
        }
        // Sluice's port descriptions give every port the address 0.
        if pm.hw_addr != [0; 6] {
            return Err(OfError::PORT_MOD_BAD_HW_ADDR);
        }
        let known = portc::PORT_DOWN | portc::NO_RECV | portc::NO_FWD | portc::NO_PACKET_IN;
        if pm.mask & !known != 0 {
            return Err(OfError::PORT_MOD_BAD_CONFIG);
        }
        let old = self.control.port_config(pm.port_no);
        let new = (old & !pm.mask) | (pm.config & pm.mask);
        if new != old {
            self.control
                .set_port_config(
                    pm.port_no,
                    new,
                    PortConfig {
                        no_recv: new & (portc::PORT_DOWN | portc::NO_RECV) != 0,
                        no_fwd: new & (portc::PORT_DOWN | portc::NO_FWD) != 0,
                        no_packet_in: new & portc::NO_PACKET_IN != 0,
                    },
                )
                .map_err(|_| OfError::PORT_MOD_BAD_PORT)?;
        }
        Ok(())
    }

    fn multipart(&mut self, req: MpRequest, xid: u32, frame: &[u8]) -> Result<(), String> {
        match crate::multipart::replies(&*self.control, self.info.datapath_id, req, xid)? {
            Ok(msgs) => msgs.iter().try_for_each(|m| self.send(m)),
            Err(e) => self.reply(&error_reply(e, frame), xid),
        }
    }
}

/// An `NXT_SET_PACKET_IN_FORMAT` (experimenter body): `Some(None)` for
/// a format there is none of.
fn set_packet_in_format(body: &[u8]) -> Option<Option<PinFormat>> {
    let f: [u8; 4] = nx_body(body, 16)?.try_into().ok()?;
    Some(PinFormat::of_wire(u32::from_be_bytes(f)))
}

/// Whether an experimenter body (vendor id on) is an `NXT_RESUME`.
fn is_resume(body: &[u8]) -> bool {
    nx_body(body, sluice_openflow::async_msg::NXT_RESUME).is_some()
}

/// The id an `NXT_SET_CONTROLLER_ID` body (vendor id on) sets, if it is
/// one.
fn set_controller_id(body: &[u8]) -> Option<u16> {
    let b: [u8; 8] = nx_body(body, sluice_openflow::of10::nxt::SET_CONTROLLER_ID)?
        .try_into()
        .ok()?;
    Some(u16::from_be_bytes([b[6], b[7]]))
}

/// The exact match of a packet-out's packet, which its actions are
/// checked against.
fn packet_match(data: &[u8], in_port: u32) -> Result<sluice_classifier::Match, OfError> {
    let mut key = sluice_packet::FlowKey::default();
    let mut meta = sluice_packet::PacketMeta::default();
    if sluice_packet::extract::extract(data, in_port, &mut meta, &mut key).is_err() {
        return Err(OfError::BAD_PACKET);
    }
    Ok(sluice_classifier::Match::exact(&key))
}

/// A packet-out's in_port and actions, checked: the buffer must be none
/// (Sluice keeps no packet buffers), in_port a port, `CONTROLLER` or
/// `ANY`, the actions valid for the packet (`output:TABLE` runs it through
/// the tables from table 0).
fn packet_out(po: &PacketOut) -> Result<(u32, Vec<Action>), OfError> {
    if po.buffer_id != NO_BUFFER {
        return Err(OfError::BUFFER_UNKNOWN);
    }
    let in_port = match po.in_port {
        p @ 1..=port::MAX => p,
        port::CONTROLLER | port::ANY => port::CONTROLLER,
        _ => return Err(OfError::BAD_PORT),
    };
    let m = packet_match(&po.data, in_port)?;
    po.actions
        .iter()
        .map(|a| match a {
            OfAction::Output {
                port: port::TABLE, ..
            } => Ok(Action::Resubmit {
                in_port: None,
                table: Some(0),
            }),
            a => to_action(a, &m),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|acts| (in_port, acts))
}
