//! Packet-ins: what a `controller` datapath action makes of its packets
//! (a copy of each for the OpenFlow channel, unless a limit, a port's
//! `no-packet-in`, the controller meter or nobody's asking refuses it,
//! each refusal a counted fate), and the bounded queue they wait in.

use std::collections::VecDeque;
use std::sync::Arc;

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::{PacketInAction, PacketInReason};
use sluice_classifier::RuleSet;
use sluice_packet::{PacketPool, Slots, BATCH_SIZE};

use crate::output::OutputStage;
use crate::stats::DpStats;
use crate::upcall_budget::UpcallBudget;

/// A packet queued for the controller (the OpenFlow channel to come).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// Port the packet came in on.
    pub in_port: u32,
    /// Why it was sent.
    pub reason: PacketInReason,
    /// The controllers it is for (those that said this id; 0 by default).
    pub controller_id: u16,
    /// The packet, truncated to the action's `max_len`.
    pub data: Vec<u8>,
    /// Its length before truncation.
    pub total_len: usize,
    /// The table of the rule that sent it.
    pub table_id: u8,
    /// That rule's cookie.
    pub cookie: u64,
    /// The pipeline fields and userdata the action gave it.
    pub meta: std::sync::Arc<sluice_classifier::dpaction::PacketInMeta>,
    /// The bridge whose controllers it is for (its index in the datapath).
    pub bridge: u16,
}

/// Packet-ins waiting for the OpenFlow channel, bounded, and the rate at
/// which they may be made (a token bucket: beyond it a packet-in is not
/// made at all, so a miss storm to a rate-limited controller costs the PMD
/// no copy per packet).
#[derive(Debug, Default)]
pub(crate) struct PacketInQueue {
    pub queue: VecDeque<PacketIn>,
    pub cap: usize,
    /// Packet-ins a microsecond (0: no limit).
    pub rate_per_us: f64,
    pub burst: f64,
    pub tokens: f64,
    pub last_us: u64,
    /// Buffers of packet-ins the OpenFlow channel is done with, for the
    /// next ones: in a storm no packet-in costs an allocation (or a free
    /// on another thread, which costs the allocator's lock).
    pub spare: Vec<Vec<u8>>,
    /// The share of the PMD's cycles making packet-ins may take while it
    /// also forwards (its "hits" are batches that forwarded something).
    pub budget: Option<UpcallBudget>,
    /// Packet-ins of frames shorter than 60 bytes carry them padded, as
    /// they are sent ([`crate::datapath::DatapathConfig::pad_short_frames`]).
    pub pad_short: bool,
    /// Whether a packet-in is cut to its action's `max_len`
    /// ([`crate::datapath::DatapathConfig::packet_in_max_len`]).
    pub max_len: bool,
    /// Whether a controller takes packet-ins for a TTL that ran out
    /// (set by the OpenFlow channel): without one, such a packet is
    /// dropped as `invalid ttl` and no packet-in is made.
    pub invalid_ttl: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PacketInQueue {
    /// Whether one more packet-in may be made at `now_us`.
    pub(crate) fn admit(&mut self, now_us: u64) -> bool {
        if self.rate_per_us <= 0.0 {
            return true;
        }
        let dt = now_us.saturating_sub(self.last_us) as f64;
        self.last_us = now_us;
        self.tokens = (self.tokens + dt * self.rate_per_us).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The packets of `pkts` (those not in `skip`, still here) whose
/// packet-in meter `id` drops (a bit each); none when the meter is not
/// there (it meters nothing, as Open vSwitch's controller meter of an
/// unknown id).
fn meter_packet_ins(
    rules: &RuleSet,
    id: u32,
    pkts: &[u8],
    skip: u32,
    slots: &Slots,
    now_us: u64,
) -> u32 {
    let Some(m) = rules.meter(id) else {
        return 0;
    };
    let mut lens = ArrayVec::<usize, BATCH_SIZE>::new();
    let mut who = ArrayVec::<u8, BATCH_SIZE>::new();
    for &i in pkts {
        if skip & (1 << i) == 0 {
            if let Some(p) = slots.get(i as usize) {
                lens.push(p.len());
                who.push(i);
            }
        }
    }
    let v = m.apply(now_us, &lens);
    who.iter()
        .enumerate()
        .filter(|&(k, _)| v.drop & (1 << k) != 0)
        .fold(0, |acc, (_, &i)| acc | 1 << i)
}

/// What a `controller` action did to each packet of its sub-batch, a bit
/// each: queued for the controller, or refused (the port says
/// `no-packet-in`, the controller meter dropped it, the packet-in budget
/// was spent, the queue was full, the rate limit said no).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PinFates {
    pub to_ctl: u32,
    pub port: u32,
    pub metered: u32,
    pub budget: u32,
    pub full: u32,
    pub rate: u32,
}

/// Runs `controller` action `a` on the packets of `pkts` not in `skip`
/// (the last action of their list: `is_last`, each packet is freed after).
#[allow(clippy::too_many_arguments)]
pub(crate) fn controller(
    a: &PacketInAction,
    pkts: &[u8],
    skip: u32,
    is_last: bool,
    slots: &mut Slots,
    pool: &mut PacketPool,
    out: &OutputStage,
    stats: &mut DpStats,
    packet_ins: &mut PacketInQueue,
    rules: &RuleSet,
    now_us: u64,
) -> PinFates {
    let mut fates = PinFates::default();

    if a.reason == PacketInReason::InvalidTtl
        && !packet_ins
            .invalid_ttl
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        // No controller takes them: none is made, and the
        // packet is dropped for its TTL.
        if is_last {
            for &i in pkts {
                if let Some(p) = slots.take(i as usize) {
                    pool.free(p);
                }
            }
        }
        return fates;
    }
    // The controller meter's drops get no packet-in.
    let metered_out = a.meta.meter_id.map_or(0, |id| {
        meter_packet_ins(rules, id, pkts, skip, slots, now_us)
    });
    // What making these packet-ins costs is charged to the
    // packet-in budget, which refuses them (as `upcall
    // budget`) once spent while forwarding competes.
    let start = packet_ins.budget.as_mut().map(|b| {
        let now = crate::cycles::now();
        b.refill(now);
        now
    });
    let allowed = match (&packet_ins.budget, start) {
        (Some(b), Some(now)) => b.allows(now),
        _ => true,
    };
    for &i in pkts {
        if skip & (1u32 << i) != 0 {
            continue;
        }
        let bit = 1u32 << i;
        if let Some(p) = slots.get(i as usize) {
            let in_port = p.meta.in_port;
            if out
                .index_of(in_port)
                .is_some_and(|k| out.ports[k].no_packet_in)
            {
                fates.port |= bit;
            } else if metered_out & bit != 0 {
                fates.metered |= bit;
            } else if !allowed {
                fates.budget |= bit;
            } else if packet_ins.queue.len() >= packet_ins.cap {
                fates.full |= bit;
            } else if !packet_ins.admit(now_us) {
                fates.rate |= bit;
            } else {
                // The whole packet (as Open vSwitch), or up
                // to the action's max_len.
                let cut = if packet_ins.max_len {
                    usize::from(a.max_len)
                } else {
                    usize::MAX
                };
                let n = p.len().min(cut);
                let mut data = packet_ins.spare.pop().unwrap_or_default();
                data.clear();
                data.extend_from_slice(&p.data()[..n]);
                let mut total_len = p.len();
                if packet_ins.pad_short && total_len < crate::output::MIN_FRAME {
                    total_len = crate::output::MIN_FRAME;
                    data.resize(total_len.min(cut).max(n), 0);
                }
                packet_ins.queue.push_back(PacketIn {
                    // (The first bridge's numbers are the datapath's.)
                    in_port: if a.bridge == 0 {
                        p.meta.in_port
                    } else {
                        a.in_port
                    },
                    reason: a.reason,
                    controller_id: a.controller_id,
                    data,
                    total_len,
                    table_id: a.table_id,
                    cookie: a.cookie,
                    meta: Arc::clone(&a.meta),
                    bridge: a.bridge,
                });
                stats.packet_ins += 1;
                fates.to_ctl |= bit;
            }
        }
        if is_last {
            if let Some(p) = slots.take(i as usize) {
                pool.free(p);
            }
        }
    }
    if let (Some(b), Some(t0)) = (packet_ins.budget.as_mut(), start) {
        b.charge(crate::cycles::now().wrapping_sub(t0));
    }
    fates
}
