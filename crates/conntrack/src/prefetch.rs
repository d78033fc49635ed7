//! What a batch of `ct` actions needs of the tracker to overlap its
//! lookups' DRAM misses: each packet read first ([`Conntrack::prepare`]),
//! its group of the shard's index prefetched, then the connections the
//! group's tags name, then each tracked ([`Conntrack::track_prepared`]).
//! PMDs read the indexes without the shards' locks, through what each
//! shard publishes ([`Published`]: all shards' in a few cache lines, so
//! that finding where to prefetch costs no miss of its own).

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_packet::key::FlowKey;
use sluice_packet::meta::PacketMeta;

use crate::table::{Groups, Table, View};
use crate::tuple::{self, Parsed};
use crate::{Conn, Conntrack, Shard};

/// Connections past which a batch prefetches ([`Conntrack::prefetch_pays`]).
pub(crate) const PREFETCH_FROM: u64 = 8192;

/// A shard and the indexes it published.
#[derive(Debug)]
pub(crate) struct ShardSlot {
    pub(crate) shard: Mutex<Shard>,
    /// Every index the shard published, kept until the tracker goes: a
    /// PMD may be reading the tags of one the shard has replaced. The
    /// indexes double as they grow, so this is less than the current one
    /// again (8-byte slots; no connection is kept).
    kept: Mutex<Vec<Arc<Groups>>>,
}

/// What a PMD may read of a shard without its lock: where its
/// connections' groups and entries are, to prefetch them for a batch.
#[derive(Debug)]
#[repr(align(16))]
pub(crate) struct Published {
    /// The connections' index as last published ([`Groups::packed`]).
    index: AtomicU64,
    /// Where the connections' entries start, as last published (read only
    /// to compute prefetch addresses: it may be stale).
    entries: AtomicPtr<u8>,
}

impl ShardSlot {
    /// An empty shard and what it publishes.
    pub(crate) fn new() -> (ShardSlot, Published) {
        let shard = Shard::default();
        let g = Arc::clone(shard.conns.groups());
        let published = Published {
            index: AtomicU64::new(g.packed()),
            entries: AtomicPtr::new(shard.conns.entries_ptr().cast_mut()),
        };
        let slot = ShardSlot {
            shard: Mutex::new(shard),
            kept: Mutex::new(vec![g]),
        };
        (slot, published)
    }
}

/// A packet read for tracking ([`Conntrack::prepare`]): what a batch
/// computes for each of its packets, prefetching their connections
/// ([`Conntrack::prefetch_group`], [`Conntrack::prefetch_entry`]),
/// before it tracks any ([`Conntrack::track_prepared`]).
#[derive(Debug, Clone, Copy)]
pub struct Prepared {
    pub(crate) parsed: Parsed,
    /// The tuple's [`Tuple::shard_hash`] (its reverse's too), when there
    /// is one to look up.
    pub(crate) hash: Option<u64>,
}

impl Prepared {
    /// A packet not read (what an array of them starts as).
    pub const NONE: Prepared = Prepared {
        parsed: Parsed::NotIp,
        hash: None,
    };
}

impl Conntrack {
    /// Whether a batch should prefetch its connections
    /// ([`Conntrack::prepare`]): when the table holds more than a core's
    /// L2 cache does (8,192 connections of 192 bytes and their slots,
    /// about 1.7 MB). With fewer the lookups hit the cache anyway and
    /// the prefetch passes cost more than they save (OVN's pipeline on
    /// the replay port: +110 cycles a packet at 16 connections, -130 at
    /// 20,000, -1,100 at 2,000,000).
    #[inline]
    pub fn prefetch_pays(&self) -> bool {
        self.conns.load(Ordering::Relaxed) >= self.prefetch_from.load(Ordering::Relaxed)
    }

    /// Sets how many connections make batches prefetch (tests: 0, so
    /// that a few connections take the batches' way).
    pub fn set_prefetch_from(&self, n: u64) {
        self.prefetch_from.store(n, Ordering::Relaxed);
    }

    /// Reads a packet for tracking in `zone` (its tuple, TCP segment and
    /// checksums): the first half of [`Conntrack::process`], for a batch
    /// that prefetches its packets' connections before it tracks them
    /// with [`Conntrack::track_prepared`]. Nothing is looked up or
    /// counted yet.
    #[inline]
    pub fn prepare(&self, data: &[u8], meta: &PacketMeta, key: &FlowKey, zone: u16) -> Prepared {
        let mut p = Prepared::NONE;
        self.prepare_into(data, meta, key, zone, &mut p);
        p
    }

    /// [`Conntrack::prepare`] into `out`, where the caller keeps it (a
    /// batch's array: returned and copied there, the copy read it whole
    /// right after the narrower stores that made it, and waited).
    pub fn prepare_into(
        &self,
        data: &[u8],
        meta: &PacketMeta,
        key: &FlowKey,
        zone: u16,
        out: &mut Prepared,
    ) {
        tuple::parse_into(data, meta, key, zone, &mut out.parsed);
        out.hash = match &out.parsed {
            // Both directions hash alike: the packet's own tuple's hash is
            // the lookup's whichever way (and whether translated) it goes.
            Parsed::Conn { tuple, .. } | Parsed::Other(tuple) | Parsed::Related(tuple) => {
                Some(tuple.shard_hash())
            }
            Parsed::NotIp | Parsed::Invalid => None,
        };
    }

    /// The index of the shard `p`'s connection would be in, as published
    /// (without the shard's lock).
    #[inline]
    fn published(&self, hash: u64) -> (View<'_>, *const u8) {
        let p = &self.published[Self::index_of(hash)];
        let w = p.index.load(Ordering::Acquire);
        // SAFETY: `w` is `Groups::packed` of an index stored (Release,
        // after its `Arc` was pushed to the shard's `kept`) by
        // `ShardSlot::new` or `Conntrack::publish`, and `kept` drops
        // nothing before the tracker itself goes: the `Groups` lives as
        // long as `&self`. Its slots are atomics, read here while the
        // shard's holder may write them.
        let groups = unsafe { View::of(w) };
        (groups, p.entries.load(Ordering::Relaxed).cast_const())
    }

    /// Hints that `p`'s lookup will read its group of the index soon (the
    /// first of a batch's two prefetch passes).
    #[inline]
    pub fn prefetch_group(&self, p: &Prepared) {
        if let Some(h) = p.hash {
            self.published(h).0.prefetch(h);
        }
    }

    /// Hints that `p`'s lookup will read the connections its group's tags
    /// name (the second pass, once the group is on its way): their
    /// addresses from the index and entries as published, maybe stale,
    /// and a prefetch never faults.
    #[inline]
    pub fn prefetch_entry(&self, p: &Prepared) {
        if let Some(h) = p.hash {
            let (groups, base) = self.published(h);
            groups.candidates(h, |i| {
                let at = base.wrapping_add(i as usize * Table::<Conn>::ENTRY_BYTES);
                let mut ofs = 0;
                while ofs < Table::<Conn>::ENTRY_BYTES {
                    sluice_packet::prefetch::read_addr(at.wrapping_add(ofs));
                    ofs += 64;
                }
            });
        }
    }

    /// Makes the shard's index and entries what PMDs prefetch (after a
    /// connection was added: the table may have grown).
    pub(crate) fn publish(&self, i: usize, s: &Shard) {
        let published = &self.published[i];
        let g = s.conns.groups();
        let w = g.packed();
        // (A replaced index is kept, so its address is never another's.)
        if published.index.load(Ordering::Relaxed) != w {
            self.shards[i]
                .kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arc::clone(g));
            published.index.store(w, Ordering::Release);
        }
        published
            .entries
            .store(s.conns.entries_ptr().cast_mut(), Ordering::Relaxed);
    }
}
