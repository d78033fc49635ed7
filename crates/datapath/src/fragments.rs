//! IP fragments through a `ct` action: held by the tracker's reassembly
//! module ([`sluice_conntrack::ipf`]) until their datagram is whole,
//! then tracked as one and sent on, each fragment with the datagram's
//! state, through the actions that followed the `ct` (as OVS's userspace
//! datapath does: its fragments join the batch that completed them).
//!
//! The fragments a `ct` lets go are queued ([`Released`]) and run once
//! the batch's flows are done ([`crate::pipeline::Pipeline`]), each
//! group through a copy of the actions after its `ct`. Fragments are
//! rare: copies and allocations here are the slow path's.
//!
//! Accounting: a fragment held counts as `ct_frags_held` where it was
//! received; when it goes on it counts as `ct_frags_released` and then
//! as forwarded or dropped wherever it goes (a list completed on one PMD
//! may hold fragments received on another), so over all PMDs received +
//! released = forwarded + to controller + dropped + held. A list purged
//! (expired and never sent on, or held when the switch stops) is dropped,
//! counted as `fragment purged`.

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::DpAction;
use sluice_classifier::{RuleSet, XlateDrop};
use sluice_conntrack::ipf::{Frag, HeldFrag};
use sluice_conntrack::{Conntrack, CtRequest, CtResult};
use sluice_packet::key::CS_INVALID;
use sluice_packet::tunnel::TunnelMeta;
use sluice_packet::{FlowKey, Packet, PacketPool, Slots, BATCH_SIZE};

use crate::execute::{execute, Ctx, RecircQueue};
use crate::output::OutputStage;
use crate::packet_in::PacketInQueue;
use crate::stats::{DpStats, DropReason};

/// Fragments a `ct` let go, with the actions after it.
#[derive(Debug)]
pub(crate) struct Released {
    pub frags: Vec<HeldFrag>,
    /// Every fragment's state (their datagram's), or `None` for an
    /// expired list: each keeps the state it came with, `ct_state`
    /// only `inv` (as OVS marks them).
    pub ct: Option<CtResult>,
    pub acts: Vec<DpAction>,
    pub drop: Option<XlateDrop>,
    /// The tunnel the packet that let them go came from.
    pub tun: TunnelMeta,
    pub recirc_id: u32,
}

impl Released {
    /// Fragment `f`'s state as it goes on.
    pub fn state_of(&self, f: &HeldFrag) -> CtResult {
        self.ct.unwrap_or(CtResult {
            state: CS_INVALID,
            ..f.prev
        })
    }
}

/// A packet met by a `ct` action.
pub(crate) struct Fragment<'a> {
    /// Its flow key (this pass's).
    pub key: &'a FlowKey,
    /// Whether actions before the `ct` changed it (its key is then
    /// found again from its bytes).
    pub reparse: bool,
    /// The state an earlier `ct` gave it.
    pub prev: &'a CtResult,
    /// Whether the received packet's fate is this one's.
    pub fate: bool,
}

/// The actions after the `ct`.
pub(crate) struct Rest<'a> {
    pub acts: &'a [DpAction],
    pub drop: Option<XlateDrop>,
}

/// Offers fragment `p` to the reassembly module; true when it is held
/// (the caller lets go of the packet). A datagram it completes is
/// tracked and its fragments queued in `released`.
pub(crate) fn hold(
    ct: &Conntrack,
    p: &Packet,
    f: &Fragment<'_>,
    req: &CtRequest,
    now_ms: u64,
    rest: &Rest<'_>,
    released: &mut Vec<Released>,
) -> bool {
    let mut meta = p.meta;
    let mut fresh = FlowKey::default();
    let key = if f.reparse {
        if sluice_packet::extract::extract(p.data(), meta.in_port, &mut meta, &mut fresh).is_err() {
            return false;
        }
        fresh.recirc_id = f.key.recirc_id;
        &fresh
    } else {
        f.key
    };
    match ct
        .ipf()
        .handle(p.data(), &meta, key, req.zone, f.fate, f.prev, now_ms)
    {
        Frag::NotTaken | Frag::Invalid => false,
        Frag::Held => true,
        Frag::Complete(mut r) => {
            let state = ct.track_reassembled(&mut r, f.prev, req, now_ms);
            released.push(Released {
                frags: r.frags,
                ct: Some(state),
                acts: rest.acts.to_vec(),
                drop: rest.drop,
                tun: TunnelMeta::of_key(f.key),
                recirc_id: f.key.recirc_id,
            });
            true
        }
    }
}

/// Sends on (or, purged, drops) the oldest expired list, if one is.
pub(crate) fn expire(
    ct: &Conntrack,
    now_ms: u64,
    rest: &Rest<'_>,
    released: &mut Vec<Released>,
    stats: &mut DpStats,
) {
    let Some((frags, purged)) = ct.ipf().take_expired(now_ms) else {
        return;
    };
    if purged {
        drop_purged(&frags, stats);
        return;
    }
    released.push(Released {
        frags,
        ct: None,
        acts: rest.acts.to_vec(),
        drop: rest.drop,
        tun: TunnelMeta::default(),
        recirc_id: 0,
    });
}

/// Counts purged fragments dropped.
pub(crate) fn drop_purged(frags: &[HeldFrag], stats: &mut DpStats) {
    let n = frags.iter().filter(|f| f.fate).count() as u64;
    stats.ct_frags_released += n;
    stats.dropped[DropReason::FragmentPurged.index()] += n;
}

/// Purges the lists expired long ago (`all`: every list), as a PMD's
/// housekeeping does (and its end).
pub(crate) fn purge(ct: &Conntrack, all: bool, stats: &mut DpStats) {
    if ct.ipf().held() != 0 {
        drop_purged(&ct.ipf().purge(ct.now_ms(), all), stats);
    }
}

/// Where the released fragments run: the pipeline's scratch, free once
/// its batch's flows are done.
pub(crate) struct Scratch<'a> {
    pub slots: &'a mut Slots,
    pub keys: &'a mut [FlowKey; BATCH_SIZE],
    pub hashes: &'a mut [u32; BATCH_SIZE],
    pub pool: &'a mut PacketPool,
    pub out: &'a mut OutputStage,
    pub stats: &'a mut DpStats,
    pub packet_ins: &'a mut PacketInQueue,
    pub recirc: &'a mut RecircQueue,
    pub rules: &'a RuleSet,
    pub now_us: u64,
}

/// Runs the fragments `ct` actions let go through the actions after
/// each, a batch at a time, until none is left (a `ct` among those
/// actions may hold them again and let them go once more: each round's
/// actions are fewer, so the rounds end).
pub(crate) fn run_released(s: &mut Scratch<'_>) {
    while !s.recirc.released.is_empty() {
        for rel in std::mem::take(&mut s.recirc.released) {
            let mut frags = rel.frags.iter().peekable();
            while frags.peek().is_some() {
                let mut pkts = ArrayVec::<u8, BATCH_SIZE>::new();
                let mut counted = 0u32;
                for f in frags.by_ref().take(BATCH_SIZE) {
                    let k = pkts.len();
                    if f.fate {
                        s.stats.ct_frags_released += 1;
                    }
                    let Some(mut p) = s.pool.alloc_from(&f.data) else {
                        if f.fate {
                            s.stats.dropped[DropReason::NoBuffer.index()] += 1;
                        }
                        continue;
                    };
                    p.meta = f.meta;
                    let key = &mut s.keys[k];
                    *key = FlowKey::default();
                    let (data, meta) = p.data_and_meta_mut();
                    if sluice_packet::extract::extract(data, meta.in_port, meta, key).is_err() {
                        if f.fate {
                            s.stats.dropped[DropReason::Runt.index()] += 1;
                        }
                        s.pool.free(p);
                        continue;
                    }
                    rel.state_of(f).write_key(key);
                    rel.tun.write_key(key);
                    key.recirc_id = rel.recirc_id;
                    s.hashes[k] = key.hash();
                    let _ = s.slots.put(k, p);
                    if !f.fate {
                        counted |= 1 << k;
                    }
                    pkts.push(k as u8);
                }
                let mut cx = Ctx {
                    slots: s.slots,
                    pool: s.pool,
                    out: s.out,
                    stats: s.stats,
                    packet_ins: s.packet_ins,
                    recirc: s.recirc,
                    now_us: s.now_us,
                    counted,
                    rules: s.rules,
                    keys: &s.keys[..],
                    hashes: &s.hashes[..],
                };
                execute(&rel.acts, rel.drop, &pkts, &mut cx);
            }
        }
    }
}
