//! The shards one batch of packets has locked ([`Batch`]): a `ct` action
//! tracks its packets through a `Batch`, which keeps the shards it locks
//! (up to eight) until the batch ends, so that a batch whose packets
//! belong to a few connections takes each shard's lock once instead of
//! once a packet (an uncontended lock and unlock cost about 50 cycles
//! here: two locked instructions, each waiting for the core's stores
//! before it; OVN's pipeline looks twice a packet). A batch of packets
//! in many shards locks and unlocks as many times as before.
//!
//! No deadlock: a `Batch` takes a further shard only with `try_lock`,
//! and when that fails it lets go of every shard it holds before it
//! waits. It never waits while it holds one, which is the rule every
//! other holder of a shard keeps (but the one NAT commit at a time under
//! `nat_lock`), and it lets go of all of them before a commit or any
//! other path that locks shards itself.

use std::sync::{MutexGuard, TryLockError};

use sluice_packet::key::FlowKey;
use sluice_packet::meta::PacketMeta;

use crate::{Conntrack, CtRequest, CtResult, Shard, SHARDS};

const _: () = assert!(SHARDS <= 64, "a Batch's masks have a bit per shard");

/// A batch's way to the tracker: [`Batch::process`] and
/// [`Batch::track_prepared_into`] as [`Conntrack`]'s, the shards they lock
/// kept locked (up to eight, then all let go and the count starts
/// again) until the `Batch` is dropped or [`Batch::release`]d. Tracking
/// in batch order is unchanged; only the locks are taken fewer times.
#[derive(Debug)]
pub struct Batch<'a> {
    pub(crate) ct: &'a Conntrack,
    /// The guards held (`guards[..n]`).
    guards: [Option<MutexGuard<'a, Shard>>; HELD],
    n: usize,
    /// Shards held (bit `i`: shard `i`), and each one's place in
    /// `guards`.
    held: u64,
    at: [u8; SHARDS],
}

/// Shards a [`Batch`] holds at most. A batch's packets in more shards
/// than this (many connections) gain nothing from holding them, and
/// holding them longer costs (measured: 20-40 cycles a packet at 1,000
/// connections and more when every shard a batch met was held).
pub(crate) const HELD: usize = 8;

impl Conntrack {
    /// A batch's way to the tracker, holding nothing yet.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            ct: self,
            guards: [const { None }; HELD],
            n: 0,
            held: 0,
            at: [0; SHARDS],
        }
    }
}

/// How tracking a packet locks the shards it looks in.
pub(crate) trait Shards<'a> {
    /// The tracker.
    fn tracker(&self) -> &'a Conntrack;
    /// Shard `i`, locked.
    fn shard(&mut self, i: usize) -> &mut Shard;
    /// Lets go of every shard held (before a path that locks shards
    /// itself: a commit, an alias's removal).
    fn release(&mut self);
}

/// One packet's way: one shard locked at a time, let go before the next
/// and when the packet is done.
pub(crate) struct One<'a> {
    ct: &'a Conntrack,
    g: Option<(usize, MutexGuard<'a, Shard>)>,
}

impl<'a> One<'a> {
    pub(crate) fn new(ct: &'a Conntrack) -> One<'a> {
        One { ct, g: None }
    }
}

impl<'a> Shards<'a> for One<'a> {
    #[inline(always)]
    fn tracker(&self) -> &'a Conntrack {
        self.ct
    }

    #[inline(always)]
    fn shard(&mut self, i: usize) -> &mut Shard {
        if self.g.as_ref().is_some_and(|(j, _)| *j != i) {
            // Let go before waiting for another.
            self.g = None;
        }
        let ct = self.ct;
        &mut self.g.get_or_insert_with(|| (i, ct.lock(i))).1
    }

    #[inline(always)]
    fn release(&mut self) {
        self.g = None;
    }
}

impl<'a> Shards<'a> for Batch<'a> {
    #[inline(always)]
    fn tracker(&self) -> &'a Conntrack {
        self.ct
    }

    #[inline(always)]
    fn shard(&mut self, i: usize) -> &mut Shard {
        self.lock(i)
    }

    #[inline(always)]
    fn release(&mut self) {
        Batch::release(self);
    }
}

impl<'a> Batch<'a> {
    /// Shard `i`, locked (now, or by an earlier packet of the batch).
    #[inline(always)]
    fn lock(&mut self, i: usize) -> &mut Shard {
        let bit = 1u64 << i;
        if self.held & bit == 0 {
            let g = match self.ct.shards[i].shard.try_lock() {
                Ok(g) => g,
                // As `Conntrack::lock`: a shard left by a panic is as its
                // holder left it, still usable.
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    // Wait holding nothing.
                    self.release();
                    self.ct.lock(i)
                }
            };
            if self.n == HELD {
                self.release();
            }
            self.guards[self.n] = Some(g);
            self.at[i] = self.n as u8;
            self.n += 1;
            self.held |= bit;
        }
        match self.guards[usize::from(self.at[i])].as_deref_mut() {
            Some(s) => s,
            None => unreachable!("a held shard has its guard"),
        }
    }

    /// Lets go of every shard held (before a path that locks shards
    /// itself: a commit, an alias's removal, reassembly).
    pub fn release(&mut self) {
        for g in &mut self.guards[..self.n] {
            *g = None;
        }
        self.n = 0;
        self.held = 0;
    }

    /// Shards held now.
    pub fn held(&self) -> u32 {
        self.held.count_ones()
    }

    /// [`Conntrack::process`], the shards it locks kept.
    pub fn process(
        &mut self,
        data: &mut [u8],
        meta: &PacketMeta,
        key: &FlowKey,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
    ) -> CtResult {
        let mut r = CtResult::default();
        self.process_into(data, meta, key, prev, req, now_ms, &mut r);
        r
    }

    /// [`Batch::process`], the result written into `out` where the
    /// caller keeps it (as [`Batch::track_prepared_into`], and for the
    /// same reason).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn process_into(
        &mut self,
        data: &mut [u8],
        meta: &PacketMeta,
        key: &FlowKey,
        prev: &CtResult,
        req: &CtRequest,
        now_ms: u64,
        out: &mut CtResult,
    ) {
        let p = self.ct.prepare(data, meta, key, req.zone);
        self.track_prepared_into(data, meta, prev, req, now_ms, &p, out);
    }
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
