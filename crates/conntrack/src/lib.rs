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

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use sluice_packet::key::{FlowKey, CS_DST_NAT, CS_INVALID, CS_SRC_NAT, CS_TRACKED};
use sluice_packet::meta::PacketMeta;
use sluice_packet::wire::l4::proto;

mod flush;
mod held;
pub mod ipf;
pub mod nat;
mod prefetch;
mod ready;
mod result;
mod table;
pub mod tcp;
pub mod timeouts;
mod track;
pub mod tuple;

pub use flush::{FlushMatch, FlushTuple};
pub use held::Batch;
pub use nat::{Nat, NatAlone, NatKind};
pub use prefetch::Prepared;
pub use ready::DEFAULT_PREALLOC;
pub use result::{CtResult, CtTuple};

use prefetch::{Published, ShardSlot, PREFETCH_FROM};

use table::Table;
use tcp::TcpConn;
use timeouts::Timeout;
use tuple::Tuple;

/// Shards of the table.
pub(crate) const SHARDS: usize = 64;

/// One shard of the table.
#[derive(Debug, Default)]
struct Shard {
    /// Connections by original tuple.
    conns: Table<Conn>,
    /// Translated connections' reply tuples (the shard of the reply
    /// tuple's own hash) to their original tuple (the connection's
    /// shard's). A connection without NAT needs none: its reply tuple is
    /// its original reversed, in the same shard.
    aliases: Table<Tuple>,
}

/// Which direction a packet's tuple may be found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Any,
    /// An ICMP request: only as a connection's original tuple.
    Orig,
    /// An ICMP reply: only as a reply tuple.
    Reply,
}

impl Dir {
    fn flip(self) -> Dir {
        match self {
            Dir::Any => Dir::Any,
            Dir::Orig => Dir::Reply,
            Dir::Reply => Dir::Orig,
        }
    }
}

/// A tuple found: the connection's original tuple, whether the tuple is
/// its reply, and whether it was found as a translated reply (an alias:
/// the connection is in another shard, maybe).
#[derive(Debug, Clone, Copy)]
struct Hit {
    key: Tuple,
    reply: bool,
    alias: bool,
}

/// What tracking a packet through the connection it found did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Tracked; the connection stays.
    Live,
    /// The connection goes (past its deadline, dropped by `force`, or
    /// reopened): the packet is a new connection's.
    Gone { key: Tuple, stale: bool },
    /// Found by a translated reply tuple whose connection is gone.
    Orphan,
}

impl Shard {
    /// Finds `t`'s connection here and runs `track` on it (one probe when
    /// `t` is a connection's original tuple); `Err(Some(hit))` when `t` is
    /// a translated reply tuple (the connection is in the shard of
    /// `hit.key`), `Err(None)` when nothing holds it.
    /// `hash` is `t.shard_hash()` (its reverse's as well).
    fn find(
        &mut self,
        t: &Tuple,
        hash: u64,
        dir: Dir,
        track: &mut dyn FnMut(Hit, &mut Conn) -> Found,
    ) -> Result<Found, Option<Hit>> {
        let hit = |key, reply| Hit {
            key,
            reply,
            alias: false,
        };
        if dir == Dir::Orig {
            return match self.conns.get_mut_h(hash, t) {
                Some(c) => Ok(track(hit(*t, false), c)),
                None => Err(None),
            };
        }
        // The tuple as an original one, then a translated reply's alias,
        // then the reverse (untranslated): as three lookups would, the
        // first and the last in one walk of the group when either way.
        let r = t.reverse();
        let mut back = None;
        if dir == Dir::Any {
            match self.conns.find_either(hash, t, &r, |c| c.nat.is_none()) {
                Ok(i) => return Ok(track(hit(*t, false), self.conns.val_mut(i))),
                Err(b) => back = b,
            }
        }
        if !self.aliases.is_empty() {
            if let Some(k) = self.aliases.get_h(hash, t) {
                return Err(Some(Hit {
                    key: *k,
                    reply: true,
                    alias: true,
                }));
            }
        }
        if dir == Dir::Reply {
            back = self.conns.find(hash, &r);
        }
        if let Some(i) = back {
            let c = self.conns.val_mut(i);
            if c.nat.is_none() {
                return Ok(track(hit(r, true), c));
            }
        }
        Err(None)
    }

    /// Whether `t` is a connection's original tuple or reply tuple here;
    /// `hash` is `t.shard_hash()` (its reverse's as well).
    fn probe(&self, t: &Tuple, hash: u64) -> bool {
        // An ICMP query's tuple is only ever a connection's original one:
        // OVS's reply keys carry the reply's type, so a request never
        // meets another connection's reply (pings both ways with one id
        // are two connections).
        if icmp(t.proto) {
            return self.conns.get_h(hash, t).is_some();
        }
        self.conns.get_h(hash, t).is_some()
            || self.aliases.get_h(hash, t).is_some()
            || self
                .conns
                .get_h(hash, &t.reverse())
                .is_some_and(|c| c.nat.is_none())
    }

    /// Whether a connection holds `t` as its original or reply tuple
    /// (what a NAT reply tuple must not be): as OVS, an expired
    /// connection holds its tuples until swept if it is translated.
    fn holds(&self, t: &Tuple, now_ms: u64) -> bool {
        // (An ICMP reply tuple is never a connection's original one: see
        // `probe`.)
        (!icmp(t.proto)
            && self
                .conns
                .get(t)
                .is_some_and(|c| c.nat.is_some() || c.expires_ms > now_ms))
            || self.aliases.contains_key(t)
            || self
                .conns
                .get(&t.reverse())
                .is_some_and(|c| c.nat.is_none() && c.expires_ms > now_ms)
    }
}

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
    /// `nat`, `nat(src=...)`, `nat(dst=...)`.
    pub nat: Option<Nat>,
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
    /// Its translation, if committed with `nat`.
    nat: Option<ConnNat>,
}

/// A translated connection's NAT.
#[derive(Debug, Clone, Copy)]
struct ConnNat {
    /// `NAT_SRC` or `NAT_DST` (with the port bits), 0 for a `nat`
    /// without either.
    action: u8,
    /// The tuple its replies carry.
    reply: Tuple,
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
    /// Commits with NAT refused because every candidate tuple was taken
    /// (OVS: "Unable to NAT due to tuple space exhaustion").
    pub nat_exhausted: AtomicU64,
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
    /// How far [`Conntrack::warp`] moved the clock on, ms.
    warped_ms: AtomicU64,
    shards: Box<[ShardSlot]>,
    /// What each shard published for PMDs to prefetch by, side by side.
    published: Box<[Published]>,
    conns: AtomicU64,
    max_conns: AtomicU64,
    /// [`Conntrack::prefetch_pays`] from this many connections on.
    prefetch_from: AtomicU64,
    /// Per zone: connections held and the most allowed (0: the default,
    /// `default_limit`, which 0 makes unlimited), as OVS's
    /// `ct-set-limits`; made at the first commit or limit (a rule set
    /// that never tracks allocates none of it).
    zones: std::sync::OnceLock<Box<[ZoneSlot]>>,
    default_limit: AtomicU32,
    /// Held by a commit with NAT, which looks at the shards of its
    /// candidate reply tuples while it holds its own: the one thread at a
    /// time that may wait for a shard while it holds another (every other
    /// holds one, or a batch several taken with `try_lock`, and waits for
    /// none while it does: [`Batch`]), so no two wait for each other.
    nat_lock: Mutex<()>,
    /// `ct(commit,nat)` on a new connection as the kernel does it
    /// ([`NatAlone::Kernel`]) rather than as OVS 3.1.
    nat_alone_kernel: std::sync::atomic::AtomicBool,
    /// Fragments held for reassembly before tracking.
    ipf: ipf::Ipf,
    /// Timeout policies by zone.
    policies: timeouts::Policies,
    /// Connections to make memory ready for ([`Conntrack::set_prealloc`]).
    prealloc: AtomicU64,
    /// Whether a rule tracks connections (memory is made ready then).
    ready_wanted: std::sync::atomic::AtomicBool,
    /// Connections memory was made ready for.
    readied: AtomicU64,
    /// Held while memory is made ready.
    readying: Mutex<()>,
    /// Counters.
    pub stats: CtStats,
}

impl Default for Conntrack {
    fn default() -> Self {
        let (shards, published): (Vec<_>, Vec<_>) = (0..SHARDS).map(|_| ShardSlot::new()).unzip();
        Conntrack {
            origin: std::time::Instant::now(),
            warped_ms: AtomicU64::new(0),
            shards: shards.into(),
            published: published.into(),
            conns: AtomicU64::new(0),
            max_conns: AtomicU64::new(DEFAULT_MAX_CONNS),
            prefetch_from: AtomicU64::new(PREFETCH_FROM),
            zones: std::sync::OnceLock::new(),
            default_limit: AtomicU32::new(0),
            nat_lock: Mutex::new(()),
            nat_alone_kernel: std::sync::atomic::AtomicBool::new(false),
            ipf: ipf::Ipf::default(),
            policies: timeouts::Policies::default(),
            prealloc: AtomicU64::new(0),
            ready_wanted: std::sync::atomic::AtomicBool::new(false),
            readied: AtomicU64::new(0),
            readying: Mutex::new(()),
            stats: CtStats::default(),
        }
    }
}

fn icmp(p: u8) -> bool {
    matches!(p, proto::ICMP | proto::ICMPV6)
}

impl Conntrack {
    fn index(t: &Tuple) -> usize {
        Self::index_of(t.shard_hash())
    }

    /// The shard of a tuple whose [`Tuple::shard_hash`] is `hash`.
    #[inline]
    fn index_of(hash: u64) -> usize {
        (hash >> 32) as usize % SHARDS
    }

    fn lock(&self, i: usize) -> std::sync::MutexGuard<'_, Shard> {
        // A PMD that panicked while holding a shard left its connections
        // as they were: still usable.
        self.shards[i]
            .shard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Removes a translated connection's reply tuple (after its
    /// connection went, with no shard held).
    fn remove_alias(&self, reply: &Tuple) {
        self.lock(Self::index(reply)).aliases.remove(reply);
    }

    /// The timeout policies by zone (`ct-set-timeout-policy`): they
    /// apply to a connection's next packet.
    pub fn timeout_policies(&self) -> &timeouts::Policies {
        &self.policies
    }

    /// The fragment reassembly module (`ipf-*` commands and the `ct`
    /// action's fragments).
    pub fn ipf(&self) -> &ipf::Ipf {
        &self.ipf
    }

    /// Tracks a datagram rebuilt from its fragments as
    /// [`Conntrack::process`] tracks a packet (its state before, `prev`,
    /// is the packet's that completed it), then gives its fragments what
    /// tracking did to it ([`ipf::write_back`]). The result is every
    /// fragment's.
    pub fn track_reassembled(
        &self,
        r: &mut ipf::Reassembled,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
    ) -> CtResult {
        let in_port = r.frags.first().map_or(0, |f| f.meta.in_port);
        let mut meta = PacketMeta::default();
        let mut key = FlowKey::default();
        if sluice_packet::extract::extract(&r.data, in_port, &mut meta, &mut key).is_err() {
            self.stats.invalid.fetch_add(1, Ordering::Relaxed);
            return CtResult {
                state: CS_TRACKED | CS_INVALID,
                zone: req.zone,
                ..CtResult::default()
            };
        }
        let res = self.process(&mut r.data, &meta, &key, prev, req, now_ms);
        if let Some(l4) = meta.l4() {
            ipf::write_back(&mut r.frags, &r.data, l4, r.v6);
        }
        res
    }

    /// The tracker's clock (ms since it was made): what
    /// [`Conntrack::process`], [`Conntrack::sweep`] and
    /// [`Conntrack::dump`] take as `now_ms` outside tests. Read once per
    /// `ct` action and flow, not per packet.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64 + self.warped_ms.load(Ordering::Relaxed)
    }

    /// Moves the tracker's clock `ms` on (as `ovs-appctl time/warp`):
    /// timeouts and fragment lists expire as if that time had passed.
    pub fn warp(&self, ms: u64) {
        self.warped_ms.fetch_add(ms, Ordering::Relaxed);
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

    /// Reply tuples of translated connections held (one per translated
    /// connection: what a leak check counts).
    pub fn nat_reply_tuples(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).aliases.len()).sum()
    }

    /// What `ct(commit,nat)` does to a new connection (`--ct-nat-alone`).
    pub fn set_nat_alone(&self, m: NatAlone) {
        self.nat_alone_kernel
            .store(m == NatAlone::Kernel, Ordering::Relaxed);
    }

    /// The most connections held (`ct-get-maxconns`).
    pub fn max_conns(&self) -> u64 {
        self.max_conns.load(Ordering::Relaxed)
    }

    /// Sets the most connections held (`ct-set-maxconns`).
    pub fn set_max_conns(&self, n: u64) {
        self.max_conns.store(n, Ordering::Relaxed);
    }

    /// Connections by protocol name (`tcp`, `udp`, `icmp`, ...), for
    /// `conntrack-stats`; expired ones left out.
    pub fn counts(&self, now_ms: u64) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for i in 0..SHARDS {
            let s = self.lock(i);
            for c in s.conns.values().filter(|c| c.expires_ms > now_ms) {
                *out.entry(proto_name(&c.orig)).or_insert(0) += 1;
            }
        }
        out
    }

    /// Removes the connections `drop` picks, shard by shard, and then the
    /// reply tuples of the translated ones (one shard held at a time).
    fn remove_where(&self, drop: impl Fn(&Conn) -> bool) -> usize {
        let mut n = 0;
        let mut aliases = Vec::new();
        for i in 0..SHARDS {
            let mut s = self.lock(i);
            s.conns.retain(|t, c| {
                if !drop(c) {
                    return true;
                }
                self.gone(t.zone, 1);
                n += 1;
                if let Some(nat) = c.nat {
                    aliases.push(nat.reply);
                }
                false
            });
        }
        for a in &aliases {
            self.remove_alias(a);
        }
        n
    }

    /// Removes expired connections (the control thread, about once a
    /// second); returns how many.
    pub fn sweep(&self, now_ms: u64) -> usize {
        let n = self.remove_where(|c| c.expires_ms <= now_ms);
        self.stats.expired.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Removes every connection (of one zone if given): `flush-conntrack`.
    pub fn flush(&self, zone: Option<u16>) -> usize {
        self.remove_where(|c| zone.is_none_or(|z| z == c.orig.zone))
    }

    /// The connections (of one zone if given) as `ovs-appctl
    /// dpctl/dump-conntrack` lists them, sorted; expired ones left out.
    pub fn dump(&self, zone: Option<u16>, now_ms: u64) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..SHARDS {
            let s = self.lock(i);
            for c in s.conns.values() {
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

/// Where a packet's headers are, for translating it.
#[derive(Debug, Clone, Copy)]
struct PacketAt {
    l3: usize,
    l4: usize,
    v6: bool,
}

/// Translates a packet as its connection's NAT says, in the direction it
/// goes (OVS's `handle_nat`): not if an earlier `ct` of the zone did.
fn handle_nat(data: &mut [u8], pkt: &PacketAt, c: &Conn, reply: bool, related: bool, st: &mut u8) {
    let Some(n) = c.nat else { return };
    if n.action == 0 || *st & (CS_SRC_NAT | CS_DST_NAT) != 0 {
        return;
    }
    if reply {
        translate_packet(
            data,
            pkt,
            &c.orig,
            nat::reverse_action(n.action),
            related,
            st,
        );
    } else {
        translate_packet(data, pkt, &n.reply, n.action, related, st);
    }
}

/// OVS's `nat_packet`: the `+snat` or `+dnat` bit, then the bytes.
fn translate_packet(
    data: &mut [u8],
    pkt: &PacketAt,
    key: &Tuple,
    act: u8,
    related: bool,
    st: &mut u8,
) {
    if act & nat::NAT_SRC != 0 {
        *st |= CS_SRC_NAT;
    } else if act & nat::NAT_DST != 0 {
        *st |= CS_DST_NAT;
    }
    nat::translate(data, pkt.l3, pkt.l4, pkt.v6, key, act, related);
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
        // OVS's ct_dpif_format_ipproto: these by name, the rest by number.
        136 => "udplite".into(),
        33 => "dccp".into(),
        2 => "igmp".into(),
        p => p.to_string(),
    }
}

fn describe(c: &Conn) -> String {
    let t = c.orig;
    let reply = c.nat.map_or(t.reverse(), |n| n.reply);
    // (OVS names the protocol alone: tcp, udp, icmpv6, whatever the IP
    // version.)
    let mut s = format!(
        "{},orig={},reply={}",
        proto_name(&t),
        t.describe(false),
        reply.describe(true)
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
