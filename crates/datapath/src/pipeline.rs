//! One rx batch's way through the datapath.
//!
//! Stages, each over the whole batch:
//! 1. **extract**: key and layer offsets for every packet (runts dropped);
//! 2. **classify**: group packets by key; translate each distinct key once
//!    through the rule tables (seed 001: batch the misses, one translation
//!    per flow). Caches (#3) slot in here, before translation;
//! 3. **execute**: run each flow's actions on its sub-batch, flows in
//!    order of first arrival, packets in arrival order, so per-flow order
//!    holds; outputs go to the per-port output batches;
//! 4. **credit**: add each flow's packets and bytes to its rules, once.
//!
//! Uses: `meta.in_port`. Sets: `meta` offsets, packet bytes (rewrites).

use std::collections::VecDeque;
use std::sync::Arc;

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::{DpAction, PacketInReason};
use sluice_classifier::{translate, RuleSet, Translation, XlateDrop, XlateEnv};
use sluice_packet::extract::extract;
use sluice_packet::rewrite::{self, PortField};
use sluice_packet::{FlowKey, Packet, PacketBatch, PacketPool, BATCH_SIZE};

use crate::output::OutputStage;
use crate::stats::{DpStats, DropReason};

/// A packet queued for the controller (the OpenFlow channel to come).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// Port the packet came in on.
    pub in_port: u32,
    /// Why it was sent.
    pub reason: PacketInReason,
    /// The packet, truncated to the action's `max_len`.
    pub data: Vec<u8>,
    /// Its length before truncation.
    pub total_len: usize,
}

/// One distinct flow of the batch being processed.
#[derive(Default)]
struct BatchFlow {
    key: FlowKey,
    hash: u32,
    xlate: Translation,
    pkts: ArrayVec<u8, BATCH_SIZE>,
    bytes: u64,
}

/// Per-thread scratch state for batch processing, allocated once.
pub(crate) struct Pipeline {
    keys: [FlowKey; BATCH_SIZE],
    slots: [Option<Packet>; BATCH_SIZE],
    flows: Vec<BatchFlow>,
    n_flows: usize,
    pub packet_ins: VecDeque<PacketIn>,
    pub packet_in_cap: usize,
}

impl Pipeline {
    pub fn new(packet_in_cap: usize) -> Self {
        Pipeline {
            keys: [FlowKey::default(); BATCH_SIZE],
            slots: std::array::from_fn(|_| None),
            flows: (0..BATCH_SIZE).map(|_| BatchFlow::default()).collect(),
            n_flows: 0,
            packet_ins: VecDeque::new(),
            packet_in_cap,
        }
    }

    /// Processes one rx batch to the output queues.
    #[allow(clippy::too_many_arguments)]
    pub fn process(
        &mut self,
        batch: &mut PacketBatch,
        rules: &Arc<RuleSet>,
        port_numbers: &[u32],
        pool: &mut PacketPool,
        out: &mut OutputStage,
        stats: &mut DpStats,
        now_us: u64,
    ) {
        self.n_flows = 0;
        let env = XlateEnv {
            rules,
            ports: port_numbers,
        };
        for (i, mut pkt) in batch.drain().enumerate() {
            stats.rx_packets += 1;
            stats.rx_bytes += pkt.len() as u64;
            let mut meta = pkt.meta;
            if extract(pkt.data(), meta.in_port, &mut meta, &mut self.keys[i]).is_err() {
                stats.dropped[DropReason::Runt.index()] += 1;
                pool.free(pkt);
                continue;
            }
            pkt.meta = meta;
            let key = &self.keys[i];
            let hash = key.hash();
            let found = self.flows[..self.n_flows]
                .iter()
                .position(|f| f.hash == hash && f.key == *key);
            let fi = match found {
                Some(fi) => fi,
                None => {
                    let fi = self.n_flows;
                    self.n_flows += 1;
                    let f = &mut self.flows[fi];
                    f.key = *key;
                    f.hash = hash;
                    f.pkts.clear();
                    f.bytes = 0;
                    translate(env, key, &mut f.xlate, false);
                    stats.upcalls += 1;
                    fi
                }
            };
            self.flows[fi].pkts.push(i as u8);
            self.flows[fi].bytes += pkt.len() as u64;
            self.slots[i] = Some(pkt);
        }
        for fi in 0..self.n_flows {
            let flow = &self.flows[fi];
            execute(
                flow,
                &mut self.slots,
                pool,
                out,
                stats,
                &mut self.packet_ins,
                self.packet_in_cap,
            );
            for r in &flow.xlate.rules {
                r.credit(flow.pkts.len() as u64, flow.bytes, now_us);
            }
        }
    }
}

fn apply(pkt: &mut Packet, a: &DpAction) {
    match *a {
        DpAction::SetEthSrc(m) => rewrite::set_eth_src(pkt, m),
        DpAction::SetEthDst(m) => rewrite::set_eth_dst(pkt, m),
        DpAction::SetIpv4Src(ip) => rewrite::set_ipv4_src(pkt, ip),
        DpAction::SetIpv4Dst(ip) => rewrite::set_ipv4_dst(pkt, ip),
        DpAction::SetIpv6Src(a) => rewrite::set_ipv6_src(pkt, a),
        DpAction::SetIpv6Dst(a) => rewrite::set_ipv6_dst(pkt, a),
        DpAction::SetIpv6Label(l) => rewrite::set_ipv6_label(pkt, l),
        DpAction::SetIpTos { tos, mask } => rewrite::set_ip_tos(pkt, tos, mask),
        DpAction::SetIpTtl(t) => rewrite::set_ip_ttl(pkt, t),
        DpAction::SetTpSrc(p) => rewrite::set_tp_port(pkt, PortField::Src, p),
        DpAction::SetTpDst(p) => rewrite::set_tp_port(pkt, PortField::Dst, p),
        DpAction::SetIcmpType(t) => rewrite::set_icmp(pkt, PortField::Src, t),
        DpAction::SetIcmpCode(c) => rewrite::set_icmp(pkt, PortField::Dst, c),
        DpAction::SetArp(f) => rewrite::set_arp(pkt, f),
        DpAction::PushVlan { tpid, tci } => rewrite::push_vlan(pkt, tpid, tci),
        DpAction::PopVlan => rewrite::pop_vlan(pkt),
        DpAction::SetVlanTci(t) => rewrite::set_vlan_tci(pkt, t),
        DpAction::Output(_) | DpAction::Controller { .. } => true,
    };
}

/// Runs a flow's actions on its packets (action by action over the whole
/// sub-batch). The last output takes the packet itself; earlier outputs
/// take copies. Every packet ends forwarded, queued for the controller, or
/// dropped with a reason.
fn execute(
    flow: &BatchFlow,
    slots: &mut [Option<Packet>; BATCH_SIZE],
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    packet_ins: &mut VecDeque<PacketIn>,
    packet_in_cap: usize,
) {
    let acts = &flow.xlate.actions;
    let last = acts
        .iter()
        .rposition(|a| matches!(a, DpAction::Output(_) | DpAction::Controller { .. }));
    let Some(last) = last else {
        let reason = DropReason::Xlate(flow.xlate.drop.unwrap_or(XlateDrop::NoOutput));
        for &i in &flow.pkts {
            if let Some(p) = slots[i as usize].take() {
                pool.free(p);
            }
        }
        stats.dropped[reason.index()] += flow.pkts.len() as u64;
        return;
    };
    let (mut sent, mut to_ctl, mut no_buf, mut ctl_full) = (0u32, 0u32, 0u32, 0u32);
    for (ai, a) in acts[..=last].iter().enumerate() {
        let is_last = ai == last;
        match *a {
            DpAction::Output(ofport) => {
                let idx = out.index_of(ofport);
                for &i in &flow.pkts {
                    let bit = 1u32 << i;
                    let slot = &mut slots[i as usize];
                    let pkt = match (is_last, idx) {
                        (true, _) => slot.take(),
                        (false, Some(_)) => slot.as_ref().and_then(|p| pool.clone_packet(p)),
                        (false, None) => None,
                    };
                    match (pkt, idx) {
                        (Some(p), Some(idx)) => {
                            out.enqueue(idx, p, pool, stats);
                            sent |= bit;
                        }
                        (Some(p), None) => pool.free(p),
                        (None, _) => {
                            stats.copy_failures += 1;
                            no_buf |= bit;
                        }
                    }
                }
            }
            DpAction::Controller { reason, max_len } => {
                for &i in &flow.pkts {
                    let bit = 1u32 << i;
                    let slot = &mut slots[i as usize];
                    if let Some(p) = slot.as_ref() {
                        if packet_ins.len() < packet_in_cap {
                            let n = p.len().min(max_len as usize);
                            packet_ins.push_back(PacketIn {
                                in_port: p.meta.in_port,
                                reason,
                                data: p.data()[..n].to_vec(),
                                total_len: p.len(),
                            });
                            stats.packet_ins += 1;
                            to_ctl |= bit;
                        } else {
                            ctl_full |= bit;
                        }
                    }
                    if is_last {
                        if let Some(p) = slot.take() {
                            pool.free(p);
                        }
                    }
                }
            }
            ref set => {
                for &i in &flow.pkts {
                    if let Some(p) = slots[i as usize].as_mut() {
                        apply(p, set);
                    }
                }
            }
        }
    }
    for &i in &flow.pkts {
        let bit = 1u32 << i;
        if sent & bit != 0 {
            stats.forwarded += 1;
        } else if to_ctl & bit != 0 {
            stats.to_controller += 1;
        } else if ctl_full & bit != 0 {
            stats.dropped[DropReason::ControllerQueueFull.index()] += 1;
        } else if no_buf & bit != 0 {
            stats.dropped[DropReason::NoBuffer.index()] += 1;
        } else {
            stats.dropped[DropReason::Xlate(XlateDrop::NoSuchPort).index()] += 1;
        }
        debug_assert!(slots[i as usize].is_none(), "every packet leaves the batch");
    }
}
