//! Flushing the connections a partial tuple names: what `NXT_CT_FLUSH`
//! asks (ovn-controller sends it for a load balancer's removed backend)
//! and `flush-conntrack` with tuples, as OVS 3.1 does it
//! (`ct_dpif_flush_tuple` in `lib/ct-dpif.c`).

use crate::tuple::{query_of, reply_type, Tuple};
use crate::{icmp, Conn, Conntrack, Dir, Found};

/// One direction of a flush's match, as `NXT_CT_FLUSH` carries it:
/// addresses in IPv6 form (IPv4 mapped, `::ffff:a.b.c.d`), zero for any;
/// ports zero for any. ICMP has no "any": `sport` is the id, `dport`
/// the code and type (`code << 8 | type`, OVS's union with the
/// destination port), all compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushTuple {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Source port, or ICMP id.
    pub sport: u16,
    /// Destination port, or ICMP code and type.
    pub dport: u16,
}

/// Which connections a flush removes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushMatch {
    /// IP protocol, 0 for any.
    pub proto: u8,
    /// IPv6 (`Some(true)`) or IPv4 (`Some(false)`), as the addresses
    /// given say; `None` when none is.
    pub v6: Option<bool>,
    /// The original direction's tuple.
    pub orig: FlushTuple,
    /// The reply direction's tuple.
    pub reply: FlushTuple,
}

impl FlushTuple {
    fn is_zero(&self, proto: u8) -> bool {
        self.src == [0; 16] && self.dst == [0; 16] && (icmp(proto) || self.sport | self.dport == 0)
    }

    /// Both addresses, and for other than ICMP both ports.
    fn is_five_tuple(&self, proto: u8) -> bool {
        self.src != [0; 16]
            && self.dst != [0; 16]
            && (icmp(proto) || (self.sport != 0 && self.dport != 0))
    }

    /// Whether `t` (a connection's direction, ICMP type `ty`) has every
    /// part given here.
    fn covers(&self, t: &Tuple, ty: u8, m: &FlushMatch) -> bool {
        let addr = |want: &[u8; 16], have: &[u8; 16]| {
            *want == [0; 16]
                || match m.v6 {
                    Some(false) => want[12..] == have[..4],
                    Some(true) => want == have,
                    None => true,
                }
        };
        if !addr(&self.src, &t.src) || !addr(&self.dst, &t.dst) {
            return false;
        }
        if icmp(m.proto) {
            self.sport == t.sport && self.dport == u16::from(ty)
        } else {
            (self.sport == 0 || self.sport == t.sport) && (self.dport == 0 || self.dport == t.dport)
        }
    }

    /// The tuple to look up for a direct flush (`zone`'s), and which
    /// direction it may be found in: an ICMP query's tuple is keyed by
    /// its request type, and its type says which direction it is.
    fn to_tuple(self, m: &FlushMatch, zone: u16) -> Option<(Tuple, Dir)> {
        let v6 = m.v6 == Some(true);
        let addr = |a: [u8; 16]| {
            if v6 {
                a
            } else {
                let mut o = [0; 16];
                o[..4].copy_from_slice(&a[12..]);
                o
            }
        };
        let (dport, dir) = if icmp(m.proto) {
            // Code 0 only: the tracker holds queries, whose code is 0.
            let (request, reply) =
                query_of(m.proto, self.dport as u8).filter(|_| self.dport >> 8 == 0)?;
            (
                u16::from(request),
                if reply { Dir::Reply } else { Dir::Orig },
            )
        } else {
            (self.dport, Dir::Any)
        };
        let t = Tuple {
            zone,
            proto: m.proto,
            v6,
            src: addr(self.src),
            dst: addr(self.dst),
            sport: self.sport,
            dport,
        };
        Some((t, dir))
    }
}

impl FlushMatch {
    /// Nothing given: the flush is of a whole zone (or every zone).
    pub fn is_zero(&self) -> bool {
        self.proto == 0
            && self.v6.is_none()
            && self.orig.is_zero(self.proto)
            && self.reply.is_zero(self.proto)
    }

    /// Whether connection `c` has every part given.
    fn covers(&self, c: &Conn) -> bool {
        if self.v6.is_some_and(|v6| v6 != c.orig.v6)
            || (self.proto != 0 && self.proto != c.orig.proto)
        {
            return false;
        }
        let reply = c.nat.map_or_else(|| c.orig.reverse(), |n| n.reply);
        // ICMP: the original direction carries the request's type, the
        // reply the reply's, as OVS's entries show them.
        let (oty, rty) = if icmp(c.orig.proto) {
            let request = c.orig.dport as u8;
            (request, reply_type(c.orig.proto, request))
        } else {
            (0, 0)
        };
        self.orig.covers(&c.orig, oty, self) && self.reply.covers(&reply, rty, self)
    }
}

impl Conntrack {
    /// Removes the connections `m` names (`NXT_CT_FLUSH`), in `zone` if
    /// given; returns how many. As OVS 3.1: nothing given flushes the
    /// zone (or everything); a whole original five-tuple and no reply
    /// tuple flushes that one connection, found by either direction, in
    /// `zone` or else zone 0; anything else flushes every connection
    /// (of `zone`, or of any zone) that has every part given.
    pub fn flush_matching(&self, zone: Option<u16>, m: &FlushMatch) -> usize {
        if m.is_zero() {
            return self.flush(zone);
        }
        if m.orig.is_five_tuple(m.proto) && m.reply.is_zero(m.proto) {
            return match m.orig.to_tuple(m, zone.unwrap_or(0)) {
                Some((t, dir)) => self.flush_tuple(&t, dir),
                None => 0,
            };
        }
        self.remove_where(|c| zone.is_none_or(|z| z == c.orig.zone) && m.covers(c))
    }

    /// Removes the connection `t` is a direction of (in direction `dir`),
    /// found as a packet's would be (`Shard::find`); 1 if there was
    /// one.
    fn flush_tuple(&self, t: &Tuple, dir: Dir) -> usize {
        let hash = t.shard_hash();
        let mut key = None;
        let found = self
            .lock(Self::index_of(hash))
            .find(t, hash, dir, &mut |h, _| {
                key = Some(h.key);
                Found::Live
            });
        let key = match found {
            Ok(_) => key,
            // A translated reply tuple: its connection's original.
            Err(h) => h.map(|h| h.key),
        };
        key.map_or(0, |k| usize::from(self.remove_conn(&k)))
    }

    /// Removes the connection whose original tuple is `key` and its
    /// translated reply tuple; whether there was one.
    fn remove_conn(&self, key: &Tuple) -> bool {
        let Some(c) = self.lock(Self::index(key)).conns.remove(key) else {
            return false;
        };
        self.gone(key.zone, 1);
        if let Some(n) = c.nat {
            self.remove_alias(&n.reply);
        }
        true
    }
}
