//! Sluice layer 2b: connection tracking, as the `ct` action asks for it.
//!
//! [`Conntrack::process`] reads a packet's connection tuple
//! ([`tuple::parse`]), finds its connection in either direction (in its
//! zone), updates it (TCP: [`tcp`]'s window tracking; UDP and others: a
//! first packet, several, both ways; ICMP queries: request and reply) and
//! answers the packet's `ct_state`, `ct_mark` and `ct_label`; with
//! `commit`, a connection not yet in the table is added. An ICMP error
//! quoting a tracked connection's packet is `+rel`. Open vSwitch's
//! userspace tracker (`lib/conntrack.c`) is the reference for every
//! state and timeout.
//!
//! The table is split into shards by a hash both directions of a
//! connection share, each behind its own lock, so PMDs contend only when
//! they track connections of the same shard at the same moment; there
//! is no global lock. Expiry costs nothing per packet: a connection
//! carries its deadline, a lookup that finds it past is a miss, and
//! [`Conntrack::sweep`] (the control thread, about once a second)
//! removes what has expired.

#![warn(missing_docs)]

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use sluice_packet::key::{
    FlowKey, CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_REPLY_DIR, CS_TRACKED,
};
use sluice_packet::meta::PacketMeta;
use sluice_packet::wire::l4::proto;

pub mod tcp;
pub mod timeouts;
pub mod tuple;

use tcp::{TcpConn, Update};
use timeouts::Timeout;
use tuple::{Parsed, Tuple};

/// Shards of the table.
const SHARDS: usize = 64;

/// A multiply-rotate hasher for the shards' maps (tuples are the
/// switch's own parse of packets, and a shard's map is one of 64: no
/// need for SipHash's cost on every lookup).
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_ne_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 31)
    }
}

type Shard = HashMap<Tuple, Conn, BuildHasherDefault<FastHasher>>;

/// Most connections held (OVS's default `ct-set-maxconns`: 3,000,000).
pub const DEFAULT_MAX_CONNS: u64 = 3_000_000;

/// What a `ct` action asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CtRequest {
    /// The zone.
    pub zone: u16,
    /// Add the connection if it is new (`commit`).
    pub commit: bool,
    /// A committed connection seen in the reply direction is dropped and
    /// the packet taken as a new one's first (`force`).
    pub force: bool,
    /// `exec(set_field:V/M->ct_mark)`: value and mask (committed only).
    pub mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`.
    pub label: Option<(u128, u128)>,
}

/// What a `ct` action tells the packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtResult {
    /// `ct_state` (0: not IP, left untracked).
    pub state: u8,
    /// `ct_zone`.
    pub zone: u16,
    /// `ct_mark`.
    pub mark: u32,
    /// `ct_label`, low 64 bits first (as the key holds it: the result
    /// stays 8-byte aligned and small, copied with every recirculated
    /// packet).
    pub label: [u64; 2],
}

impl CtResult {
    /// The state a flow key holds.
    pub fn of_key(k: &FlowKey) -> CtResult {
        CtResult {
            state: k.ct_state,
            zone: k.ct_zone,
            mark: k.ct_mark,
            label: k.ct_label,
        }
    }

    /// `ct_label` as one number.
    pub fn label128(&self) -> u128 {
        u128::from(self.label[1]) << 64 | u128::from(self.label[0])
    }

    /// Writes the result into a flow key's connection tracking fields.
    pub fn write_key(&self, k: &mut FlowKey) {
        k.ct_state = self.state;
        k.ct_zone = self.zone;
        k.ct_mark = self.mark;
        k.ct_label = self.label;
    }
}

/// Per-protocol state of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProtoState {
    Tcp(TcpConn),
    /// UDP, other protocols: a packet, several one way, both ways.
    Other {
        replied: bool,
        multiple: bool,
    },
    /// ICMP query: whether the reply came.
    Icmp {
        replied: bool,
    },
}

/// A tracked connection.
#[derive(Debug, Clone, Copy)]
struct Conn {
    /// Its original direction.
    orig: Tuple,
    state: ProtoState,
    mark: u32,
    label: u128,
    /// When it expires (the tracker's ms clock).
    expires_ms: u64,
}

impl Conn {
    fn timeout(&self) -> Timeout {
        match self.state {
            ProtoState::Tcp(t) => Timeout::Tcp(t.timeout()),
            ProtoState::Other { replied: true, .. } => Timeout::OtherBidir,
            ProtoState::Other { multiple: true, .. } => Timeout::OtherMultiple,
            ProtoState::Other { .. } => Timeout::OtherFirst,
            ProtoState::Icmp { replied: true } => Timeout::IcmpReply,
            ProtoState::Icmp { .. } => Timeout::IcmpFirst,
        }
    }
}

/// Counters (as `ovs-appctl dpctl/ct-stats-show` and `coverage/show`
/// name what they count).
#[derive(Debug, Default)]
pub struct CtStats {
    /// Connections added.
    pub committed: AtomicU64,
    /// Connections removed on expiry.
    pub expired: AtomicU64,
    /// Packets found `+inv`.
    pub invalid: AtomicU64,
    /// Commits refused because the table was full.
    pub full: AtomicU64,
    /// Commits refused because the zone was at its limit.
    pub zone_full: AtomicU64,
}

/// A zone's count and limit.
#[derive(Debug, Default)]
struct ZoneSlot {
    count: AtomicU32,
    limit: AtomicU32,
}

/// The connection tracker, shared by every PMD.
#[derive(Debug)]
pub struct Conntrack {
    /// The clock's origin ([`Conntrack::now_ms`]).
    origin: std::time::Instant,
    shards: Box<[Mutex<Shard>]>,
    conns: AtomicU64,
    max_conns: AtomicU64,
    /// Per zone: connections held and the most allowed (0: the default,
    /// `default_limit`, which 0 makes unlimited), as OVS's
    /// `ct-set-limits`; made at the first commit or limit (a rule set
    /// that never tracks allocates none of it).
    zones: std::sync::OnceLock<Box<[ZoneSlot]>>,
    default_limit: AtomicU32,
    /// Counters.
    pub stats: CtStats,
}

impl Default for Conntrack {
    fn default() -> Self {
        Conntrack {
            origin: std::time::Instant::now(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            conns: AtomicU64::new(0),
            max_conns: AtomicU64::new(DEFAULT_MAX_CONNS),
            zones: std::sync::OnceLock::new(),
            default_limit: AtomicU32::new(0),
            stats: CtStats::default(),
        }
    }
}

fn icmp(p: u8) -> bool {
    matches!(p, proto::ICMP | proto::ICMPV6)
}

impl Conntrack {
    fn shard(&self, t: &Tuple) -> std::sync::MutexGuard<'_, Shard> {
        let i = (t.shard_hash() >> 32) as usize % SHARDS;
        // A PMD that panicked while holding a shard left its connections
        // as they were: still usable.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tracker's clock (ms since it was made): what
    /// [`Conntrack::process`], [`Conntrack::sweep`] and
    /// [`Conntrack::dump`] take as `now_ms` outside tests. Read once per
    /// `ct` action and flow, not per packet.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn zone(&self, zone: u16) -> &ZoneSlot {
        &self
            .zones
            .get_or_init(|| (0..=u16::MAX).map(|_| ZoneSlot::default()).collect())
            [usize::from(zone)]
    }

    /// Counts a connection of `zone` gone.
    fn gone(&self, zone: u16, n: u64) {
        self.conns.fetch_sub(n, Ordering::Relaxed);
        self.zone(zone).count.fetch_sub(n as u32, Ordering::Relaxed);
    }

    /// The most connections `zone` may hold (0: no limit).
    pub fn zone_limit(&self, zone: u16) -> u32 {
        match self.zone(zone).limit.load(Ordering::Relaxed) {
            0 => self.default_limit.load(Ordering::Relaxed),
            n => n,
        }
    }

    /// `ct-set-limits`: zone `zone`'s limit (`None`: the default's), 0 for
    /// none.
    pub fn set_limit(&self, zone: Option<u16>, limit: u32) {
        match zone {
            Some(z) => self.zone(z).limit.store(limit, Ordering::Relaxed),
            None => self.default_limit.store(limit, Ordering::Relaxed),
        }
    }

    /// `ct-get-limits`: `default limit=N` then, for the zones given (or
    /// every zone with a limit of its own), `zone=Z,limit=L,count=C`, as
    /// `ovs-appctl dpctl/ct-get-limits` prints them.
    pub fn limits(&self, zones: &[u16]) -> String {
        let mut out = format!(
            "default limit={}\n",
            self.default_limit.load(Ordering::Relaxed)
        );
        let listed: Vec<u16> = if zones.is_empty() {
            (0..=u16::MAX)
                .filter(|&z| self.zone(z).limit.load(Ordering::Relaxed) != 0)
                .collect()
        } else {
            zones.to_vec()
        };
        for z in listed {
            out += &format!(
                "zone={z},limit={},count={}\n",
                self.zone_limit(z),
                self.zone(z).count.load(Ordering::Relaxed)
            );
        }
        out
    }

    /// Connections in the table.
    pub fn len(&self) -> u64 {
        self.conns.load(Ordering::Relaxed)
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the most connections held (`ct-set-maxconns`).
    pub fn set_max_conns(&self, n: u64) {
        self.max_conns.store(n, Ordering::Relaxed);
    }

    /// Tracks one packet (its bytes, offsets and flow key) as `req`
    /// asks, at `now_ms` on the tracker's clock.
    pub fn process(
        &self,
        data: &[u8],
        meta: &PacketMeta,
        key: &FlowKey,
        req: &CtRequest,
        now_ms: u64,
    ) -> CtResult {
        let mut r = CtResult {
            zone: req.zone,
            ..CtResult::default()
        };
        let (tuple, seg, icmp_reply) = match tuple::parse(data, meta, key, req.zone) {
            Parsed::NotIp => return r,
            Parsed::Invalid => {
                self.stats.invalid.fetch_add(1, Ordering::Relaxed);
                r.state = CS_TRACKED | CS_INVALID;
                return r;
            }
            Parsed::Related(quoted) => {
                // The error goes back to whoever sent the quoted packet.
                let shard = self.shard(&quoted);
                let found = shard
                    .get(&quoted)
                    .map(|c| (c, false))
                    .or_else(|| shard.get(&quoted.reverse()).map(|c| (c, true)));
                r.state = match found {
                    Some((c, reply)) if c.expires_ms > now_ms => {
                        r.mark = c.mark;
                        r.label = split(c.label);
                        // The error travels against the quoted packet.
                        let rpl = if reply { 0 } else { CS_REPLY_DIR };
                        CS_TRACKED | CS_RELATED | rpl
                    }
                    _ => {
                        self.stats.invalid.fetch_add(1, Ordering::Relaxed);
                        CS_TRACKED | CS_INVALID
                    }
                };
                return r;
            }
            Parsed::Conn {
                tuple,
                tcp,
                icmp_reply,
            } => (tuple, tcp, icmp_reply),
            Parsed::Other(t) => (t, None, false),
        };
        let mut shard = self.shard(&tuple);
        let rev = tuple.reverse();
        // Which direction finds it: the tuple as it is (original) or
        // reversed (reply). An ICMP reply is its query's reverse even when
        // its own tuple reads as an original one.
        let found = if icmp(tuple.proto) && icmp_reply {
            shard.contains_key(&rev).then_some((rev, true))
        } else if shard.contains_key(&tuple) {
            Some((tuple, false))
        } else if shard.contains_key(&rev) {
            Some((rev, true))
        } else {
            None
        };
        // One probe more for the connection found: it is past its
        // deadline, dropped by `force`, or updated (and dropped if the
        // update reopens it).
        let mut state = None;
        if let Some((k, reply)) = found {
            if let Entry::Occupied(mut e) = shard.entry(k) {
                let stale = e.get().expires_ms <= now_ms;
                if stale || (reply && req.force && req.commit) {
                    e.remove();
                    self.gone(k.zone, 1);
                    if stale {
                        self.stats.expired.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    let c = e.get_mut();
                    let update = match (&mut c.state, seg) {
                        (ProtoState::Tcp(t), Some(s)) => t.update(&s, reply),
                        (ProtoState::Other { replied, multiple }, _) => {
                            if reply {
                                *replied = true;
                            } else {
                                *multiple = true;
                            }
                            Update::Valid
                        }
                        (ProtoState::Icmp { replied }, _) => {
                            if reply {
                                *replied = true;
                            }
                            Update::Valid
                        }
                        (ProtoState::Tcp(_), None) => Update::Invalid,
                    };
                    let rpl = if reply { CS_REPLY_DIR } else { 0 };
                    state = match update {
                        Update::Valid => {
                            c.expires_ms = now_ms + c.timeout().ms();
                            Some(CS_ESTABLISHED | rpl)
                        }
                        Update::ValidNew => {
                            c.expires_ms = now_ms + c.timeout().ms();
                            Some(CS_NEW)
                        }
                        Update::Invalid => Some(CS_INVALID),
                        Update::Reopen => None,
                    };
                    if state.is_some() {
                        if req.commit && state != Some(CS_INVALID) {
                            exec(c, req);
                        }
                        r.mark = c.mark;
                        r.label = split(c.label);
                    } else {
                        e.remove();
                        self.gone(k.zone, 1);
                    }
                }
            }
        }
        let state = match state {
            Some(s) => s,
            // A first packet: new if it may start a connection.
            None => {
                let ok = match seg {
                    Some(s) => tcp::valid_new(&s),
                    None => !(icmp(tuple.proto) && icmp_reply),
                };
                if !ok {
                    CS_INVALID
                } else {
                    if req.commit {
                        let limit = self.zone_limit(tuple.zone);
                        if self.conns.load(Ordering::Relaxed)
                            >= self.max_conns.load(Ordering::Relaxed)
                        {
                            // As OVS: still new, just not committed.
                            self.stats.full.fetch_add(1, Ordering::Relaxed);
                        } else if limit != 0
                            && self.zone(tuple.zone).count.load(Ordering::Relaxed) >= limit
                        {
                            self.stats.zone_full.fetch_add(1, Ordering::Relaxed);
                        } else {
                            let state = match seg {
                                Some(s) => ProtoState::Tcp(TcpConn::new(&s)),
                                None if icmp(tuple.proto) => ProtoState::Icmp { replied: false },
                                None => ProtoState::Other {
                                    replied: false,
                                    multiple: false,
                                },
                            };
                            let mut c = Conn {
                                orig: tuple,
                                state,
                                mark: 0,
                                label: 0,
                                expires_ms: 0,
                            };
                            c.expires_ms = now_ms + c.timeout().ms();
                            exec(&mut c, req);
                            r.mark = c.mark;
                            r.label = split(c.label);
                            shard.insert(tuple, c);
                            self.conns.fetch_add(1, Ordering::Relaxed);
                            self.zone(tuple.zone).count.fetch_add(1, Ordering::Relaxed);
                            self.stats.committed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    CS_NEW
                }
            }
        };
        if state & CS_INVALID != 0 {
            self.stats.invalid.fetch_add(1, Ordering::Relaxed);
        }
        r.state = CS_TRACKED | state;
        r
    }

    /// Connections by protocol name (`tcp`, `udp`, `icmp`, ...), for
    /// `conntrack-stats`; expired ones left out.
    pub fn counts(&self, now_ms: u64) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            for c in s.values().filter(|c| c.expires_ms > now_ms) {
                *out.entry(proto_name(&c.orig)).or_insert(0) += 1;
            }
        }
        out
    }

    /// Removes expired connections (the control thread, about once a
    /// second); returns how many.
    pub fn sweep(&self, now_ms: u64) -> usize {
        let mut n = 0;
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.retain(|t, c| {
                let keep = c.expires_ms > now_ms;
                if !keep {
                    self.gone(t.zone, 1);
                    n += 1;
                }
                keep
            });
        }
        self.stats.expired.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Removes every connection (of one zone if given): `flush-conntrack`.
    pub fn flush(&self, zone: Option<u16>) -> usize {
        let mut n = 0;
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.retain(|t, _| {
                let keep = zone.is_some_and(|z| z != t.zone);
                if !keep {
                    self.gone(t.zone, 1);
                    n += 1;
                }
                keep
            });
        }
        n
    }

    /// The connections (of one zone if given) as `ovs-appctl
    /// dpctl/dump-conntrack` lists them, sorted; expired ones left out.
    pub fn dump(&self, zone: Option<u16>, now_ms: u64) -> Vec<String> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            for c in s.values() {
                if c.expires_ms <= now_ms || zone.is_some_and(|z| z != c.orig.zone) {
                    continue;
                }
                out.push(describe(c));
            }
        }
        out.sort();
        out
    }
}

/// A label as the key holds it: low 64 bits first.
pub fn split(label: u128) -> [u64; 2] {
    [label as u64, (label >> 64) as u64]
}

/// A committing action's `exec`: the connection's mark and label.
fn exec(c: &mut Conn, req: &CtRequest) {
    if let Some((v, m)) = req.mark {
        c.mark = (c.mark & !m) | (v & m);
    }
    if let Some((v, m)) = req.label {
        c.label = (c.label & !m) | (v & m);
    }
}

fn proto_name(t: &Tuple) -> String {
    match t.proto {
        proto::TCP => "tcp".into(),
        proto::UDP => "udp".into(),
        proto::SCTP => "sctp".into(),
        proto::ICMP => "icmp".into(),
        proto::ICMPV6 => "icmpv6".into(),
        p => format!("{}{p}", if t.v6 { "ipv6," } else { "ip," }),
    }
}

fn describe(c: &Conn) -> String {
    let t = c.orig;
    // (OVS names the protocol alone: tcp, udp, icmpv6, whatever the IP
    // version.)
    let mut s = format!(
        "{},orig={},reply={}",
        proto_name(&t),
        t.describe(false),
        t.reverse().describe(true)
    );
    if t.zone != 0 {
        s += &format!(",zone={}", t.zone);
    }
    if c.mark != 0 {
        s += &format!(",mark={}", c.mark);
    }
    if c.label != 0 {
        s += &format!(",labels={:#x}", c.label);
    }
    if let ProtoState::Tcp(tc) = c.state {
        // The later of the two peers' states, as the kernel's tracker
        // would name it (OVS's coalescing: FIN_WAIT_2 shows as
        // TIME_WAIT, SYN_RECV as ESTABLISHED).
        let st = match tc.peer[0].state.max(tc.peer[1].state) {
            tcp::PeerState::FinWait2 => tcp::PeerState::TimeWait,
            tcp::PeerState::SynRecv => tcp::PeerState::Established,
            st => st,
        };
        s += &format!(",protoinfo=(state={})", st.name());
    }
    s
}

#[cfg(test)]
mod tests;
