//! IP fragments reassembled before tracking, as Open vSwitch's userspace
//! datapath does it (`lib/ipf.c` of OVS 3.1 is the reference for every
//! rule here; the code is our own).
//!
//! A `ct` action that meets a fragment does not track it: the fragment
//! is held, in a list of the fragments of its datagram (keyed by
//! addresses, IP id, protocol for IPv4, zone and recirculation id). When
//! the list has its first and its last fragment and nothing missing
//! between them, the datagram is rebuilt and tracked whole; its verdict
//! (state, zone, mark, label, original tuple) is then given to each
//! fragment, and with NAT the fragments are rewritten as the datagram
//! was (addresses in every one, the L4 header in the first). The
//! fragments, not the datagram, go on, in offset order. As OVS:
//!
//! - a fragment other than the last smaller than the minimum size (1200
//!   bytes of IPv4, 1280 of IPv6, counting the IP header), a fragment
//!   overlapping one held, a malformed one, or one with a bad IPv4 header
//!   checksum is `+inv` at once, counted;
//! - at most 1000 fragments are held (`ipf-set-max-nfrags`); past that,
//!   or in a list too long for a 64 KiB datagram, a fragment is tracked
//!   as it is (`+inv`);
//! - a list not complete 15 s after its first fragment expires: its
//!   fragments go on `+inv` with the next `ct` that runs (one list at a
//!   time); a list expired 10 s more is purged (its fragments dropped,
//!   counted).
//!
//! Fragments are rare and every path here is the slow one: one lock for
//! the whole module (no packet that is not a fragment takes it), and
//! fragments copied as they are held, as OVS clones them.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use sluice_packet::key::{FlowKey, FRAG_ANY};
use sluice_packet::meta::PacketMeta;
use sluice_packet::wire::checksum::{checksum, update32};
use sluice_packet::wire::ipv6::ext;

use crate::CtResult;

/// A list expires this long after its first fragment (OVS's
/// `IPF_FRAG_LIST_TIMEOUT`), ms.
pub const LIST_TIMEOUT_MS: u64 = 15_000;
/// An expired list not yet sent on is purged this long after it expired
/// (`IPF_FRAG_LIST_PURGE_TIME_ADJ`), ms.
pub const PURGE_AFTER_MS: u64 = 10_000;
/// Default minimum size of an IPv4 fragment other than the last.
pub const V4_MIN_FRAG_DEFAULT: u32 = 1200;
/// Default minimum size of an IPv6 fragment other than the last.
pub const V6_MIN_FRAG_DEFAULT: u32 = 1280;
/// The smallest minimum `ipf-set-min-frag` takes.
pub const MIN_FRAG_LOWER_BOUND: u32 = 400;
/// Default most fragments held at once.
pub const MAX_FRAGS_DEFAULT: u32 = 1000;
/// The largest `ipf-set-max-nfrags` takes.
pub const MAX_FRAGS_UPPER_BOUND: u32 = 5000;

const V4_MAX_HDR: u32 = 60;
const IP_MAX: usize = 65_535;
const V6_MAX_LIST: usize = 65_535;
const IPV4_MF: u16 = 0x2000;
const IPV4_OFF: u16 = 0x1fff;
const IPV6_MF: u16 = 0x0001;
const IPV6_OFF: u16 = 0xfff8;

/// Counters of one IP version, as `dpctl/ipf-get-status` names them.
#[derive(Debug, Default)]
pub struct IpfCounters {
    /// Fragments taken into a list.
    pub accepted: AtomicU64,
    /// Fragments sent on from a completed list.
    pub completed: AtomicU64,
    /// Fragments sent on (`+inv`) from an expired list.
    pub expired: AtomicU64,
    /// Fragments refused as smaller than the minimum.
    pub too_small: AtomicU64,
    /// Fragments refused as overlapping one held.
    pub overlap: AtomicU64,
    /// Fragments of lists purged.
    pub purged: AtomicU64,
}

/// A fragment held, with what it came with.
#[derive(Debug, Clone)]
pub struct HeldFrag {
    /// Its bytes (the frame as received).
    pub data: Vec<u8>,
    /// Its metadata.
    pub meta: PacketMeta,
    /// Whether the received packet's fate is this fragment's (false: a
    /// copy whose packet has its fate elsewhere).
    pub fate: bool,
    /// The connection tracking state it came with.
    pub prev: CtResult,
    at: Place,
}

/// Where a fragment's data lies, in its datagram and in its frame.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// Its data bytes, numbered as OVS numbers them (16 bits, as there).
    start: u16,
    end: u16,
    /// Where its data starts (after the IPv4 header; IPv6: after the
    /// fragment header, or for a first fragment after every extension
    /// header), and where its datagram ends (padding left out).
    l4: usize,
    len: usize,
    /// IPv6: the fragment header's offset and that of the byte that names
    /// it (the previous header's next-header field).
    frag_hdr: usize,
    next_at: usize,
}

/// What [`Ipf::handle`] did with a packet.
#[derive(Debug)]
pub enum Frag {
    /// Not a fragment it takes (none, reassembly off for its IP version,
    /// too many held, its list done or too long): tracked as it is.
    NotTaken,
    /// Malformed, too small or overlapping: tracked as it is, which
    /// finds it `+inv`.
    Invalid,
    /// Held: the caller lets go of the packet.
    Held,
    /// Held, and its datagram is complete: to be tracked whole
    /// ([`crate::Conntrack::track_reassembled`]).
    Complete(Reassembled),
}

/// A datagram rebuilt from its fragments.
#[derive(Debug)]
pub struct Reassembled {
    /// The datagram as one frame (the first fragment's link header).
    pub data: Vec<u8>,
    /// Its fragments in offset order (the packet that completed it among
    /// them).
    pub frags: Vec<HeldFrag>,
    /// IPv6.
    pub v6: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ListKey {
    src: [u8; 16],
    dst: [u8; 16],
    recirc_id: u32,
    id: u32,
    v6: bool,
    zone: u16,
    proto: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Other,
    First,
    Last,
    FirstLast,
    Failed,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Other => "other frag",
            State::First => "first frag",
            State::Last => "last frag",
            State::FirstLast => "first/last frag",
            State::Failed => "reassemble fail",
        }
    }
}

#[derive(Debug)]
struct List {
    frags: Vec<HeldFrag>,
    state: State,
    expires_ms: u64,
}

#[derive(Debug, Default)]
struct Lists {
    map: HashMap<ListKey, List>,
    /// Lists in the order they expire (all live the same time): stale
    /// entries (a list completed, or another under the same key) are
    /// skipped when met.
    order: VecDeque<(u64, ListKey)>,
}

/// The reassembly module, shared by every PMD (beside the tracker).
#[derive(Debug)]
pub struct Ipf {
    lists: Mutex<Lists>,
    v4_enabled: AtomicBool,
    v6_enabled: AtomicBool,
    min_v4: AtomicU32,
    min_v6: AtomicU32,
    max_frags: AtomicU32,
    /// Fragments held now.
    nfrag: AtomicU32,
    /// IPv4's counters.
    pub v4: IpfCounters,
    /// IPv6's counters.
    pub v6: IpfCounters,
}

impl Default for Ipf {
    fn default() -> Self {
        Ipf {
            lists: Mutex::default(),
            v4_enabled: AtomicBool::new(true),
            v6_enabled: AtomicBool::new(true),
            min_v4: AtomicU32::new(V4_MIN_FRAG_DEFAULT),
            min_v6: AtomicU32::new(V6_MIN_FRAG_DEFAULT),
            max_frags: AtomicU32::new(MAX_FRAGS_DEFAULT),
            nfrag: AtomicU32::new(0),
            v4: IpfCounters::default(),
            v6: IpfCounters::default(),
        }
    }
}

/// A fragment as read from its headers.
struct Parsed {
    key: ListKey,
    first: bool,
    last: bool,
    at: Place,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Ipf {
    fn lock(&self) -> std::sync::MutexGuard<'_, Lists> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counters(&self, v6: bool) -> &IpfCounters {
        if v6 {
            &self.v6
        } else {
            &self.v4
        }
    }

    /// Fragments held now.
    pub fn held(&self) -> u32 {
        self.nfrag.load(Ordering::Relaxed)
    }

    /// `ipf-set-enabled` / `ipf-set-disabled`.
    pub fn set_enabled(&self, v6: bool, on: bool) {
        let a = if v6 {
            &self.v6_enabled
        } else {
            &self.v4_enabled
        };
        a.store(on, Ordering::Relaxed);
    }

    /// `ipf-set-min-frag`: refused below [`MIN_FRAG_LOWER_BOUND`].
    pub fn set_min_frag(&self, v6: bool, n: u32) -> Result<(), String> {
        if n < MIN_FRAG_LOWER_BOUND {
            return Err(format!(
                "requested minimum fragment size {n} too small: at least {MIN_FRAG_LOWER_BOUND}"
            ));
        }
        let a = if v6 { &self.min_v6 } else { &self.min_v4 };
        a.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// `ipf-set-max-nfrags`: refused above [`MAX_FRAGS_UPPER_BOUND`].
    pub fn set_max_frags(&self, n: u32) -> Result<(), String> {
        if n > MAX_FRAGS_UPPER_BOUND {
            return Err(format!(
                "maximum fragments {n} too large: at most {MAX_FRAGS_UPPER_BOUND}"
            ));
        }
        self.max_frags.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// Takes a packet the `ct` action of zone `zone` met, if it is a
    /// fragment to hold (see [`Frag`]). `fate` and `prev` travel with the
    /// fragment while it is held.
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
        &self,
        data: &[u8],
        meta: &PacketMeta,
        key: &FlowKey,
        zone: u16,
        fate: bool,
        prev: &CtResult,
        now_ms: u64,
    ) -> Frag {
        if key.nw_frag & FRAG_ANY == 0 {
            return Frag::NotTaken;
        }
        let v6 = match key.dl_type {
            0x0800 if self.v4_enabled.load(Ordering::Relaxed) => false,
            0x86dd if self.v6_enabled.load(Ordering::Relaxed) => true,
            _ => return Frag::NotTaken,
        };
        let Some(l3) = meta.l3() else {
            return Frag::NotTaken;
        };
        let parsed = if v6 {
            self.parse_v6(data, l3)
        } else {
            self.parse_v4(data, l3)
        };
        let mut p = match parsed {
            Ok(Some(p)) => p,
            Ok(None) => return Frag::NotTaken,
            Err(()) => return Frag::Invalid,
        };
        p.key.zone = zone;
        p.key.recirc_id = key.recirc_id;
        if self.nfrag.load(Ordering::Relaxed) >= self.max_frags.load(Ordering::Relaxed) {
            return Frag::NotTaken;
        }
        let max_list = if v6 {
            V6_MAX_LIST
        } else {
            let min = self.min_v4.load(Ordering::Relaxed).max(V4_MAX_HDR + 1);
            (IP_MAX as u32 - V4_MAX_HDR).div_ceil(min - V4_MAX_HDR) as usize
        };
        let mut g = self.lock();
        let lists = &mut *g;
        let list = match lists.map.entry(p.key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let expires_ms = now_ms + LIST_TIMEOUT_MS;
                lists.order.push_back((expires_ms, p.key));
                v.insert(List {
                    frags: Vec::with_capacity(4),
                    state: State::Other,
                    expires_ms,
                })
            }
        };
        if list.state == State::Failed || list.frags.len() >= max_list {
            return Frag::NotTaken;
        }
        // As OVS's ipf_is_frag_duped: either end inside a held fragment.
        let inside = |x: u16, f: &HeldFrag| x >= f.at.start && x <= f.at.end;
        if list
            .frags
            .iter()
            .any(|f| inside(p.at.start, f) || inside(p.at.end, f))
        {
            bump(&self.counters(v6).overlap, 1);
            return Frag::Invalid;
        }
        list.frags.push(HeldFrag {
            data: data.to_vec(),
            meta: *meta,
            fate,
            prev: *prev,
            at: p.at,
        });
        self.nfrag.fetch_add(1, Ordering::Relaxed);
        bump(&self.counters(v6).accepted, 1);
        list.state = match (list.state, p.first, p.last) {
            (State::Other, true, _) => State::First,
            (State::Other, false, true) => State::Last,
            (State::First, _, true) | (State::Last, true, _) => State::FirstLast,
            (s, _, _) => s,
        };
        if list.state != State::FirstLast {
            return Frag::Held;
        }
        // Insertion sort: held lists are sorted but for the newcomer.
        list.frags.sort_by_key(|f| f.at.start);
        let complete = list
            .frags
            .windows(2)
            .all(|w| u32::from(w[0].at.end) + 1 == u32::from(w[1].at.start));
        if !complete {
            return Frag::Held;
        }
        let rebuilt = if v6 {
            reassemble_v6(&list.frags)
        } else {
            reassemble_v4(&list.frags)
        };
        let Some(data) = rebuilt else {
            list.state = State::Failed;
            return Frag::Held;
        };
        let list = lists.map.remove(&p.key).expect("just found");
        drop(g);
        let n = list.frags.len();
        self.nfrag.fetch_sub(n as u32, Ordering::Relaxed);
        bump(&self.counters(v6).completed, n as u64);
        Frag::Complete(Reassembled {
            data,
            frags: list.frags,
            v6,
        })
    }

    /// An IPv4 fragment's place, or `Err` when it is one to refuse
    /// (`ipf_is_valid_v4_frag`), `Ok(None)` when it is no fragment.
    fn parse_v4(&self, d: &[u8], l3: usize) -> Result<Option<Parsed>, ()> {
        let b = d.get(l3..).ok_or(())?;
        if b.len() < 20 {
            return Err(());
        }
        let frag = be16(b, 6);
        if frag & (IPV4_MF | IPV4_OFF) == 0 {
            return Ok(None);
        }
        let tot = usize::from(be16(b, 2));
        let hl = usize::from(b[0] & 0xf) * 4;
        // The datagram's length must be what the frame holds (padding
        // aside), its header whole and its checksum right.
        if tot > b.len() || hl < 20 || tot < hl || checksum(&b[..hl]) != 0 {
            return Err(());
        }
        let first = frag & IPV4_OFF == 0 && frag & IPV4_MF != 0;
        let last = frag & IPV4_OFF != 0 && frag & IPV4_MF == 0;
        if !last && (tot as u32) < self.min_v4.load(Ordering::Relaxed) {
            bump(&self.v4.too_small, 1);
            return Err(());
        }
        let start = (frag & IPV4_OFF).wrapping_mul(8);
        let end = start.wrapping_add((tot - hl) as u16).wrapping_sub(1);
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src[..4].copy_from_slice(&b[12..16]);
        dst[..4].copy_from_slice(&b[16..20]);
        Ok(Some(Parsed {
            key: ListKey {
                src,
                dst,
                recirc_id: 0,
                id: u32::from(be16(b, 4)),
                v6: false,
                zone: 0,
                proto: b[9],
            },
            first,
            last,
            at: Place {
                start,
                end,
                l4: l3 + hl,
                len: l3 + tot,
                frag_hdr: 0,
                next_at: 0,
            },
        }))
    }

    /// An IPv6 fragment's place (`ipf_is_valid_v6_frag`), as
    /// [`Ipf::parse_v4`].
    fn parse_v6(&self, d: &[u8], l3: usize) -> Result<Option<Parsed>, ()> {
        let b = d.get(l3..).ok_or(())?;
        if b.len() < 40 {
            return Err(());
        }
        // Walk to the fragment header; a first fragment's data starts
        // after every header (as OVS's parse puts its L4 there).
        let (mut next, mut next_at, mut off) = (b[6], 6usize, 40usize);
        let mut frag_at = None;
        loop {
            match next {
                ext::HOPOPTS | ext::ROUTING | ext::DSTOPTS | ext::AH | ext::FRAGMENT
                    if b.len() < off + 8 =>
                {
                    return Ok(None);
                }
                ext::FRAGMENT => {
                    let offlg = be16(b, off + 2);
                    if frag_at.is_none() && offlg & (IPV6_OFF | IPV6_MF) != 0 {
                        frag_at = Some((off, next_at, offlg));
                    }
                    next = b[off];
                    next_at = off;
                    off += 8;
                    if offlg & IPV6_OFF != 0 {
                        break;
                    }
                }
                ext::HOPOPTS | ext::ROUTING | ext::DSTOPTS | ext::AH => {
                    let len = if next == ext::AH {
                        (usize::from(b[off + 1]) + 2) * 4
                    } else {
                        (usize::from(b[off + 1]) + 1) * 8
                    };
                    if b.len() < off + len {
                        return Ok(None);
                    }
                    next = b[off];
                    next_at = off;
                    off += len;
                }
                _ => break,
            }
        }
        let Some((fh, fh_next_at, offlg)) = frag_at else {
            return Ok(None);
        };
        let plen = usize::from(be16(b, 4));
        if 40 + plen > b.len() || off > 40 + plen {
            return Err(());
        }
        let first = offlg & IPV6_OFF == 0 && offlg & IPV6_MF != 0;
        let last = offlg & IPV6_OFF != 0 && offlg & IPV6_MF == 0;
        if !last && ((40 + plen) as u32) < self.min_v6.load(Ordering::Relaxed) {
            bump(&self.v6.too_small, 1);
            return Err(());
        }
        let start = (offlg & IPV6_OFF).wrapping_add(8);
        let end = start.wrapping_add((40 + plen - off) as u16).wrapping_sub(1);
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&b[8..24]);
        dst.copy_from_slice(&b[24..40]);
        let id = u32::from_be_bytes([b[fh + 4], b[fh + 5], b[fh + 6], b[fh + 7]]);
        Ok(Some(Parsed {
            key: ListKey {
                src,
                dst,
                recirc_id: 0,
                id,
                v6: true,
                zone: 0,
                proto: 0,
            },
            first,
            last,
            at: Place {
                start,
                end,
                l4: l3 + off,
                len: l3 + 40 + plen,
                frag_hdr: l3 + fh,
                next_at: l3 + fh_next_at,
            },
        }))
    }

    /// The fragments of the oldest list past its time, if any: `false`
    /// with them when they are to go on (`+inv`), `true` when the list
    /// was expired so long it is purged (they are to be dropped). One
    /// list a call, as OVS sends one expired list per batch.
    pub fn take_expired(&self, now_ms: u64) -> Option<(Vec<HeldFrag>, bool)> {
        if self.held() == 0 {
            return None;
        }
        let mut g = self.lock();
        loop {
            let &(exp, key) = g.order.front()?;
            let live = g.map.get(&key).is_some_and(|l| l.expires_ms == exp);
            if !live {
                g.order.pop_front();
                continue;
            }
            if now_ms <= exp {
                return None;
            }
            g.order.pop_front();
            let list = g.map.remove(&key).expect("live");
            drop(g);
            let purged = now_ms >= exp + PURGE_AFTER_MS;
            let c = self.counters(key.v6);
            let n = list.frags.len();
            self.nfrag.fetch_sub(n as u32, Ordering::Relaxed);
            bump(if purged { &c.purged } else { &c.expired }, n as u64);
            return Some((list.frags, purged));
        }
    }

    /// Purges every list expired [`PURGE_AFTER_MS`] ago (`all`: every
    /// list), as OVS's clean thread does for lists no `ct` sends on:
    /// their fragments, to be dropped.
    pub fn purge(&self, now_ms: u64, all: bool) -> Vec<HeldFrag> {
        if self.held() == 0 {
            return Vec::new();
        }
        let mut g = self.lock();
        let lists = &mut *g;
        let mut out = Vec::new();
        lists.map.retain(|k, l| {
            if all || now_ms >= l.expires_ms + PURGE_AFTER_MS {
                let c = if k.v6 { &self.v6 } else { &self.v4 };
                bump(&c.purged, l.frags.len() as u64);
                self.nfrag
                    .fetch_sub(l.frags.len() as u32, Ordering::Relaxed);
                out.append(&mut l.frags);
                false
            } else {
                true
            }
        });
        let map = &lists.map;
        lists
            .order
            .retain(|(e, k)| map.get(k).is_some_and(|l| l.expires_ms == *e));
        out
    }

    /// `ipf-get-status` (with `verbose`, the lists held), in
    /// `ovs-appctl dpctl/ipf-get-status`'s words.
    pub fn status(&self, verbose: bool) -> String {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let b = |a: &AtomicBool| u32::from(a.load(Ordering::Relaxed));
        let mut o = String::new();
        let _ = writeln!(o, "        Fragmentation Module Status");
        let _ = writeln!(o, "        ---------------------------");
        let _ = writeln!(o, "        v4 enabled: {}", b(&self.v4_enabled));
        let _ = writeln!(o, "        v6 enabled: {}", b(&self.v6_enabled));
        let _ = writeln!(
            o,
            "        max num frags (v4/v6): {}",
            self.max_frags.load(Ordering::Relaxed)
        );
        let _ = writeln!(o, "        num frag: {}", self.held());
        for (v, c, min) in [
            ("v4", &self.v4, &self.min_v4),
            ("v6", &self.v6, &self.min_v6),
        ] {
            let _ = writeln!(
                o,
                "        min {v} frag size: {}",
                min.load(Ordering::Relaxed)
            );
            let _ = writeln!(o, "        {v} frags accepted: {}", r(&c.accepted));
            let _ = writeln!(o, "        {v} frags completed: {}", r(&c.completed));
            let _ = writeln!(o, "        {v} frags expired: {}", r(&c.expired));
            let _ = writeln!(o, "        {v} frags too small: {}", r(&c.too_small));
            let _ = writeln!(o, "        {v} frags overlapped: {}", r(&c.overlap));
            let _ = writeln!(o, "        {v} frags purged: {}", r(&c.purged));
        }
        if verbose {
            let _ = writeln!(o, "\n        Fragment Lists:\n");
            let g = self.lock();
            let mut lines: Vec<String> = g.map.iter().map(|(k, l)| list_line(k, l)).collect();
            lines.sort();
            for l in lines {
                let _ = writeln!(o, "{l}");
            }
        }
        o
    }
}

/// A list as `ipf-get-status -m` prints it.
fn list_line(k: &ListKey, l: &List) -> String {
    let (src, dst, dl_type) = if k.v6 {
        (
            std::net::Ipv6Addr::from(k.src).to_string(),
            std::net::Ipv6Addr::from(k.dst).to_string(),
            0x86dd,
        )
    } else {
        let a = |x: &[u8; 16]| std::net::Ipv4Addr::new(x[0], x[1], x[2], x[3]).to_string();
        (a(&k.src), a(&k.dst), 0x0800)
    };
    format!(
        "(src={src},dst={dst},recirc_id={},ip_id={},dl_type={dl_type:#x},zone={},nw_proto={},num_fragments={},state={})",
        k.recirc_id,
        k.id,
        k.zone,
        k.proto,
        l.frags.len(),
        l.state.name()
    )
}

/// The data bytes fragment `f` adds, or `None` when its numbers do not
/// fit its bytes.
fn data_of(f: &HeldFrag) -> Option<&[u8]> {
    let a = &f.at;
    let n = (i32::from(a.end) - i32::from(a.start) + 1).max(0) as usize;
    f.data
        .get(a.l4..a.l4.checked_add(n)?)
        .filter(|_| a.l4 + n <= a.len)
}

/// The IPv4 datagram of a complete, sorted list: the first fragment's
/// frame with the others' data after it, "more fragments" cleared.
fn reassemble_v4(frags: &[HeldFrag]) -> Option<Vec<u8>> {
    let f0 = &frags[0];
    let l3 = usize::from(f0.meta.l3_ofs);
    let mut out = f0.data.get(..f0.at.len)?.to_vec();
    for f in &frags[1..] {
        out.extend_from_slice(data_of(f)?);
    }
    let tot = out.len() - l3;
    if tot > IP_MAX {
        return None;
    }
    out[l3 + 2..l3 + 4].copy_from_slice(&(tot as u16).to_be_bytes());
    let frag = be16(&out, l3 + 6) & !IPV4_MF;
    out[l3 + 6..l3 + 8].copy_from_slice(&frag.to_be_bytes());
    let hl = usize::from(out[l3] & 0xf) * 4;
    out[l3 + 10..l3 + 12].fill(0);
    let c = checksum(&out[l3..l3 + hl]);
    out[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    Some(out)
}

/// The IPv6 datagram of a complete, sorted list: the first fragment's
/// frame without its fragment header, the others' data after it.
fn reassemble_v6(frags: &[HeldFrag]) -> Option<Vec<u8>> {
    let f0 = &frags[0];
    let l3 = usize::from(f0.meta.l3_ofs);
    let a = &f0.at;
    let mut out = Vec::with_capacity(a.len * frags.len());
    out.extend_from_slice(f0.data.get(..a.frag_hdr)?);
    out.extend_from_slice(f0.data.get(a.frag_hdr + 8..a.len)?);
    out[a.next_at] = f0.data[a.frag_hdr];
    for f in &frags[1..] {
        out.extend_from_slice(data_of(f)?);
    }
    let plen = out.len() - l3 - 40;
    if plen > IP_MAX {
        return None;
    }
    out[l3 + 4..l3 + 6].copy_from_slice(&(plen as u16).to_be_bytes());
    Some(out)
}

/// Gives the fragments what tracking did to their datagram (`datagram`,
/// its L4 header at `l4`): the addresses of each (IPv4's header checksum
/// updated) and, in the first, the datagram's L4 bytes it carries (NAT
/// may have changed ports and the L4 checksum).
pub fn write_back(frags: &mut [HeldFrag], datagram: &[u8], l4: usize, v6: bool) {
    let Some(f0) = frags.first_mut() else {
        return;
    };
    let (f0_l4, n) = (f0.at.l4, f0.at.len.saturating_sub(f0.at.l4));
    if let (Some(src), Some(dst)) = (datagram.get(l4..l4 + n), f0.data.get_mut(f0_l4..f0_l4 + n)) {
        dst.copy_from_slice(src);
    }
    let l3 = usize::from(f0.meta.l3_ofs);
    let (at, n) = if v6 { (l3 + 8, 32) } else { (l3 + 12, 8) };
    let Some(addrs) = datagram.get(at..at + n) else {
        return;
    };
    for f in frags {
        let l3 = usize::from(f.meta.l3_ofs);
        let at = if v6 { l3 + 8 } else { l3 + 12 };
        let Some(old) = f.data.get(at..at + n) else {
            continue;
        };
        if old == addrs {
            continue;
        }
        if !v6 {
            let word =
                |b: &[u8], i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            let mut c = be16(&f.data, l3 + 10);
            c = update32(c, word(old, 0), word(addrs, 0));
            c = update32(c, word(old, 4), word(addrs, 4));
            f.data[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        f.data[at..at + n].copy_from_slice(addrs);
    }
}

#[cfg(test)]
#[path = "ipf_tests.rs"]
mod tests;
