//! Tracking a packet: its connection found in either direction (by a
//! translated reply tuple too), updated (TCP window tracking, UDP and
//! ICMP pseudo-connections, related ICMP errors), translated as its NAT
//! says, and a new one committed ([`Conntrack::process`]).

use std::sync::atomic::Ordering;

use sluice_packet::key::{
    FlowKey, CS_DST_NAT, CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_REPLY_DIR, CS_SRC_NAT,
    CS_TRACKED,
};
use sluice_packet::meta::PacketMeta;

use crate::held::{One, Shards};
use crate::nat::{self, NatKind};
use crate::prefetch::Prepared;
use crate::tcp::{self, TcpConn, Update};
use crate::tuple::{self, Parsed, Tuple};
use crate::{
    exec, handle_nat, icmp, split, translate_packet, Batch, Conn, ConnNat, Conntrack, CtRequest,
    CtResult, Dir, Found, Hit, PacketAt, ProtoState, Shard,
};

impl Conntrack {
    /// Tracks one packet (its bytes, offsets and flow key) as `req`
    /// asks, at `now_ms` on the tracker's clock; `prev` is the state an
    /// earlier `ct` gave it (kept, as OVS keeps it, when the zone is the
    /// same: a packet already translated is looked up by its translated
    /// tuple and not translated twice). With `req.nat` the packet's
    /// bytes are translated in place.
    pub fn process(
        &self,
        data: &mut [u8],
        meta: &PacketMeta,
        key: &FlowKey,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
    ) -> CtResult {
        let p = self.prepare(data, meta, key, req.zone);
        self.track_prepared(data, meta, prev, req, now_ms, &p)
    }

    /// Tracks a packet read by [`Conntrack::prepare`] (in `req.zone`, its
    /// bytes unchanged since): the second half of [`Conntrack::process`].
    pub fn track_prepared(
        &self,
        data: &mut [u8],
        meta: &PacketMeta,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
        p: &Prepared,
    ) -> CtResult {
        let mut r = CtResult::default();
        track_in(
            &mut One::new(self),
            data,
            meta,
            prev,
            req,
            now_ms,
            p,
            &mut r,
        );
        r
    }
}

impl Batch<'_> {
    /// [`Conntrack::track_prepared`], the shards it locks kept (but
    /// before a commit or an alias's removal, which lock shards
    /// themselves), the result written into `out` field by field where
    /// the caller keeps it. (Returned by value, the result
    /// was built in a temporary by narrow stores and copied out whole
    /// right after: the copy's wide loads waited for those stores, a
    /// tenth of a tracked packet's time.)
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn track_prepared_into(
        &mut self,
        data: &mut [u8],
        meta: &PacketMeta,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
        p: &Prepared,
        out: &mut CtResult,
    ) {
        track_in(self, data, meta, prev, req, now_ms, p, out)
    }
}

/// Tracks a packet read by [`Conntrack::prepare`], its shards locked
/// through `held` (one at a time, or a batch's).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn track_in<'a>(
    held: &mut impl Shards<'a>,
    data: &mut [u8],
    meta: &PacketMeta,
    prev: &CtResult,
    req: &CtRequest,
    now_ms: u64,
    p: &Prepared,
    r: &mut CtResult,
) {
    let ct = held.tracker();
    // Cleared in place, then the zone: a result built in a temporary
    // and copied was read whole right after its narrower stores, and
    // the copy waited for them.
    *r = CtResult::NONE;
    r.zone = req.zone;
    let mut st = if prev.state != 0 && prev.zone == req.zone {
        prev.state
    } else {
        0
    };
    let (tuple, seg, dir, related) = match p.parsed {
        Parsed::NotIp => return,
        Parsed::Invalid => {
            ct.stats.invalid.fetch_add(1, Ordering::Relaxed);
            r.state = CS_TRACKED | CS_INVALID;
            return;
        }
        // An error travels against the packet it quotes.
        Parsed::Related(quoted) => (quoted.reverse(), None, Dir::Any, true),
        Parsed::Conn {
            tuple,
            tcp,
            icmp_reply,
        } => {
            let dir = match (icmp(tuple.proto), icmp_reply) {
                (false, _) => Dir::Any,
                (true, false) => Dir::Orig,
                (true, true) => Dir::Reply,
            };
            (tuple, tcp, dir, false)
        }
        Parsed::Other(t) => (t, None, Dir::Any, false),
    };
    let pkt = PacketAt {
        l3: meta.l3().unwrap_or(0),
        l4: meta.l4().unwrap_or(0),
        v6: tuple.v6,
    };
    // Translated already (by an earlier ct in this zone): its tuple
    // is the other direction's, reversed.
    let natted = st & (CS_SRC_NAT | CS_DST_NAT) != 0;
    let (lt, ldir) = if natted {
        (tuple.reverse(), dir.flip())
    } else {
        (tuple, dir)
    };
    let hash = p.hash.unwrap_or_else(|| lt.shard_hash());
    let home = Conntrack::index_of(hash);
    // The shard the connection is in (its reply's alias may be in
    // another).
    let mut at = home;
    // What tracking the packet through a connection found did to it.
    let mut track = |h: Hit, c: &mut Conn| -> Found {
        let h = Hit {
            reply: h.reply ^ natted,
            ..h
        };
        if h.alias && c.expires_ms <= now_ms {
            return Found::Orphan;
        }
        let stale = c.expires_ms <= now_ms;
        // `force`: a committed connection seen from its reply side
        // goes, and the packet starts a new one.
        let forced = req.force && req.commit && h.reply && !h.alias;
        if stale || forced {
            return Found::Gone { key: h.key, stale };
        }
        if related {
            st |= CS_RELATED;
            if h.reply {
                st |= CS_REPLY_DIR;
            }
        } else {
            let update = match (&mut c.state, seg) {
                (ProtoState::Tcp(t), Some(s)) => t.update(&s, h.reply),
                // As OVS 3.1's other_conn_update and icmp_conn_update:
                // until a reply is seen, every packet of the
                // connection is `+new` (established only from the
                // reply on).
                (ProtoState::Other { replied, multiple }, _) => {
                    if h.reply {
                        *replied = true;
                    } else {
                        *multiple = true;
                    }
                    if *replied {
                        Update::Valid
                    } else {
                        Update::ValidNew
                    }
                }
                (ProtoState::Icmp { replied }, _) => {
                    if h.reply {
                        *replied = true;
                    }
                    if *replied {
                        Update::Valid
                    } else {
                        Update::ValidNew
                    }
                }
                (ProtoState::Tcp(_), None) => Update::Invalid,
            };
            match update {
                Update::Valid => {
                    c.expires_ms = now_ms + ct.policies.ms(c.orig.zone, c.timeout());
                    st = (st | CS_ESTABLISHED) & !CS_NEW;
                    if h.reply {
                        st |= CS_REPLY_DIR;
                    }
                }
                Update::ValidNew => {
                    c.expires_ms = now_ms + ct.policies.ms(c.orig.zone, c.timeout());
                    st |= CS_NEW;
                }
                Update::Invalid => st = CS_INVALID,
                // Reopened: gone, the packet a new connection's.
                Update::Reopen => {
                    return Found::Gone {
                        key: h.key,
                        stale: false,
                    }
                }
            }
        }
        if req.nat.is_some() {
            handle_nat(data, &pkt, c, h.reply, related, &mut st);
        }
        exec(c, req);
        r.mark = c.mark;
        r.label = split(c.label);
        r.tuple.set_of(&c.orig);
        Found::Live
    };
    let found = match held.shard(home).find(&lt, hash, ldir, &mut track) {
        Ok(f) => Some(f),
        Err(None) => None,
        // A translated reply: its connection is in its own shard.
        Err(Some(h)) => {
            at = Conntrack::index(&h.key);
            Some(match held.shard(at).conns.get_mut(&h.key) {
                Some(c) => track(h, c),
                None => Found::Orphan,
            })
        }
    };
    let mut gone_alias = None;
    let mut live = false;
    match found {
        Some(Found::Live) => live = true,
        Some(Found::Orphan) => {
            // A reply tuple whose connection is gone: as OVS
            // ("missing parent conn"), invalid.
            ct.stats.invalid.fetch_add(1, Ordering::Relaxed);
            r.state = st | CS_TRACKED | CS_INVALID;
            return;
        }
        Some(Found::Gone { key, stale }) => {
            // Past its deadline (a miss), dropped by force, or
            // reopened.
            if let Some(c) = held.shard(at).conns.remove(&key) {
                ct.gone(key.zone, 1);
                if stale {
                    ct.stats.expired.fetch_add(1, Ordering::Relaxed);
                }
                gone_alias = c.nat.map(|n| n.reply);
            }
        }
        None => {}
    }
    let mut create = false;
    r.unseen = !live;
    if !live {
        if related {
            // No new connection from an error.
            st = CS_INVALID;
        } else {
            create = true;
        }
    }
    // A commit without NAT changes only the home shard, which the
    // lookup above holds (`at` is `home` whenever nothing was found, or
    // the connection found was gone from there): it commits under that
    // lock. A translating commit and an alias's removal lock shards
    // themselves, holding nothing else.
    let in_home = gone_alias.is_none() && req.nat.is_none();
    if gone_alias.is_some() || (create && req.commit && !in_home) {
        held.release();
    }
    if let Some(a) = gone_alias {
        ct.remove_alias(&a);
    }
    if create {
        // The connection's tuple, committed or not (OVS: the lookup
        // key when there is no connection).
        r.tuple.set_of(&tuple);
        let icmp_reply = icmp(tuple.proto) && dir == Dir::Reply;
        let valid = match seg {
            Some(s) => tcp::valid_new(&s),
            None => !icmp_reply,
        };
        if !valid {
            st = CS_INVALID;
        } else {
            st = CS_NEW;
            if req.commit {
                // (`hash` is `lt`'s: a tuple's reverse hashes alike.)
                let made = if in_home {
                    let shard = held.shard(home);
                    // Not translated before: the lookup above, under this
                    // same lock, looked for `tuple` as the commit's check
                    // would (as an original tuple, an alias, a plain
                    // reply) and found nothing (or a connection it
                    // removed).
                    let looked = !natted;
                    ct.commit_in(
                        shard, home, looked, data, &pkt, tuple, hash, seg, req, now_ms, &mut st,
                    )
                } else {
                    ct.commit(data, &pkt, tuple, hash, seg, req, now_ms, &mut st)
                };
                if let Some((mark, label)) = made {
                    r.mark = mark;
                    r.label = split(label);
                }
            }
        }
    }
    if st & CS_INVALID != 0 {
        ct.stats.invalid.fetch_add(1, Ordering::Relaxed);
    }
    r.state = CS_TRACKED | st;
}

impl Conntrack {
    /// Whether the table and `zone` may hold one more connection (if
    /// not, counted: as OVS, the packet is still new, just not
    /// committed).
    fn room_for(&self, zone: u16) -> bool {
        let limit = self.zone_limit(zone);
        if self.conns.load(Ordering::Relaxed) >= self.max_conns.load(Ordering::Relaxed) {
            self.stats.full.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if limit != 0 && self.zone(zone).count.load(Ordering::Relaxed) >= limit {
            self.stats.zone_full.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Adds a new connection for `tuple`, whose [`Tuple::shard_hash`] is
    /// `hash` (translating the packet if `req` has NAT); its mark and
    /// label, or `None` when it could not be added (table or zone full,
    /// NAT exhausted, or another PMD added it first).
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        data: &mut [u8],
        pkt: &PacketAt,
        tuple: Tuple,
        hash: u64,
        seg: Option<tuple::TcpSeg>,
        req: &CtRequest,
        now_ms: u64,
        st: &mut u8,
    ) -> Option<(u32, u128)> {
        let _nat = req
            .nat
            .map(|_| self.nat_lock.lock().unwrap_or_else(|e| e.into_inner()));
        let home = Self::index_of(hash);
        let mut g = self.lock(home);
        self.commit_in(
            &mut g, home, false, data, pkt, tuple, hash, seg, req, now_ms, st,
        )
    }

    /// [`Conntrack::commit`] with `tuple`'s shard, `home`, locked by the
    /// caller as `g`, and `nat_lock` when `req` has NAT (the reply tuple
    /// it picks is checked in other shards, locked one at a time). The
    /// table's and the zone's limits are checked first (a refusal
    /// counted, the packet still new). `looked`: the caller looked for
    /// `tuple` under this lock as [`Shard::probe`] would and found
    /// nothing, so the check is not made again.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit_in(
        &self,
        g: &mut Shard,
        home: usize,
        looked: bool,
        data: &mut [u8],
        pkt: &PacketAt,
        tuple: Tuple,
        hash: u64,
        seg: Option<tuple::TcpSeg>,
        req: &CtRequest,
        now_ms: u64,
        st: &mut u8,
    ) -> Option<(u32, u128)> {
        debug_assert_eq!(hash, tuple.shard_hash());
        debug_assert_eq!(home, Self::index_of(hash));
        if !self.room_for(tuple.zone) {
            return None;
        }
        debug_assert!(
            !looked || !g.probe(&tuple, hash),
            "looked for and yet there"
        );
        if !looked && g.probe(&tuple, hash) {
            return None;
        }
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
            nat: None,
        };
        c.expires_ms = now_ms + self.policies.ms(c.orig.zone, c.timeout());
        let kernel_alone = self.nat_alone_kernel.load(Ordering::Relaxed);
        if let Some(nat) = req
            .nat
            .filter(|n| !(kernel_alone && n.kind == NatKind::Apply))
        {
            let found = {
                let held = &g;
                let mut taken = |t: &Tuple| {
                    let i = Self::index(t);
                    if i == home {
                        held.holds(t, now_ms)
                    } else {
                        self.lock(i).holds(t, now_ms)
                    }
                };
                nat::reply_tuple(&tuple, &nat, &mut taken)
            };
            let Some((action, reply)) = found else {
                self.stats.nat_exhausted.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            let n = ConnNat { action, reply };
            c.nat = Some(n);
            // The first packet, translated as its connection's.
            translate_packet(data, pkt, &n.reply, action, false, st);
            let i = Self::index(&reply);
            if i == home {
                g.aliases.insert(reply, tuple);
            } else {
                self.lock(i).aliases.insert(reply, tuple);
            }
        }
        exec(&mut c, req);
        let out = (c.mark, c.label);
        // Not there: `probe` said so under this lock.
        g.conns.insert_absent(hash, tuple, c);
        self.publish(home, g);
        self.conns.fetch_add(1, Ordering::Relaxed);
        self.zone(tuple.zone).count.fetch_add(1, Ordering::Relaxed);
        self.stats.committed.fetch_add(1, Ordering::Relaxed);
        Some(out)
    }
}
