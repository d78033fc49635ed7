//! Running a flow's datapath actions on its packets.
//!
//! Action by action over the whole sub-batch: header rewrites through
//! `sluice_packet::rewrite`, outputs into the per-port output batches.
//! The last output takes the packet itself, earlier ones take copies.
//! Every packet ends forwarded, queued for the controller, or dropped
//! with a reason.

use arrayvec::ArrayVec;
use sluice_classifier::dpaction::DpAction;
use sluice_classifier::meter::raise_drop_precedence;
use sluice_classifier::{RuleSet, XlateDrop};
use sluice_conntrack::CtResult;
use sluice_packet::encap;
use sluice_packet::key::FRAG_ANY;
use sluice_packet::rewrite::{self, PortField};
use sluice_packet::tunnel::{self, PopError, TunnelMeta};
use sluice_packet::{FlowKey, Packet, PacketPool, BATCH_SIZE};

use crate::output::OutputStage;
use crate::packet_in::PacketInQueue;
pub(crate) use crate::recirc_queue::{RecircQueue, Recirculated};
use crate::stats::{DpStats, DropReason};

/// Applies one header-changing datapath action to a packet (outputs and
/// recirculations change nothing here). `sluice trace` follows a
/// recirculation with it.
pub fn apply(pkt: &mut Packet, a: &DpAction) {
    match *a {
        DpAction::SetEthSrc(m) => rewrite::set_eth_src(pkt, m),
        DpAction::SetEthDst(m) => rewrite::set_eth_dst(pkt, m),
        DpAction::SetIpv4Src(ip, m) => rewrite::set_ipv4_src(pkt, ip, m),
        DpAction::SetIpv4Dst(ip, m) => rewrite::set_ipv4_dst(pkt, ip, m),
        DpAction::SetIpv6Src(a, m) => rewrite::set_ipv6_src(pkt, a, m),
        DpAction::SetIpv6Dst(a, m) => rewrite::set_ipv6_dst(pkt, a, m),
        DpAction::SetIpv6Label(l) => rewrite::set_ipv6_label(pkt, l),
        DpAction::SetEthType(t) => rewrite::set_eth_type(pkt, t),
        DpAction::SetIpProto(p, m) => rewrite::set_ip_proto(pkt, p, m),
        DpAction::SetIpTos { tos, mask } => rewrite::set_ip_tos(pkt, tos, mask),
        DpAction::SetIpTtl(t) => rewrite::set_ip_ttl(pkt, t),
        DpAction::SetTpSrc(p) => rewrite::set_tp_port(pkt, PortField::Src, p),
        DpAction::SetTpDst(p) => rewrite::set_tp_port(pkt, PortField::Dst, p),
        DpAction::SetIcmpType(t) => rewrite::set_icmp(pkt, PortField::Src, t),
        DpAction::SetIcmpCode(c) => rewrite::set_icmp(pkt, PortField::Dst, c),
        DpAction::SetIcmpInLaterFragment { ty, code } => {
            rewrite::set_icmp_in_later_fragment(pkt, ty, code)
        }
        DpAction::SetArp(f) => rewrite::set_arp(pkt, f),
        DpAction::SetNd(f) => sluice_packet::ndisc::set_nd(pkt, f),
        DpAction::NdAdvert { mac, ip } => sluice_packet::ndisc::advertise(pkt, mac, ip),
        DpAction::PushVlan { tpid, tci } => rewrite::push_vlan(pkt, tpid, tci),
        DpAction::PopVlan => rewrite::pop_vlan(pkt),
        DpAction::SetVlanTci(t) => rewrite::set_vlan_tci(pkt, t),
        DpAction::PushMpls { eth_type, lse } => encap::push_mpls(pkt, eth_type, lse),
        DpAction::PopMpls(t) => encap::pop_mpls(pkt, t),
        DpAction::SetMplsLse(lse) => encap::set_mpls_lse(pkt, lse),
        DpAction::CopyTtlOut => encap::copy_ttl_out(pkt),
        DpAction::CopyTtlIn => encap::copy_ttl_in(pkt),
        DpAction::PushPbb(t) => encap::push_pbb(pkt, t, 0),
        DpAction::PopPbb => encap::pop_pbb(pkt),
        DpAction::SetPbbIsid(i) => encap::set_pbb_isid(pkt, i),
        DpAction::Output(_)
        | DpAction::Controller(_)
        | DpAction::Recirc(_)
        | DpAction::Meter(_)
        | DpAction::Select(_)
        | DpAction::TnlOutput { .. }
        | DpAction::TnlPop(_)
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::CheckPktLen { .. } => true,
    };
}

/// The packet's length as `check_pkt_len` compares it: the frame without
/// the Ethernet padding after its IP datagram (OVS's
/// `dp_packet_get_send_len - dp_packet_l2_pad_size`, the pad being what
/// follows a sane IPv4 total length or IPv6 payload length).
pub fn check_len(pkt: &Packet) -> usize {
    let d = pkt.data();
    let n = d.len();
    let Some(l3) = pkt.meta.l3() else {
        return n;
    };
    let be16 = |at: usize| {
        d.get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let ip_len = match pkt.meta.l3_type {
        0x0800 => be16(l3 + 2).filter(|&t| t >= 20),
        0x86dd => be16(l3 + 4).map(|p| p + 40),
        _ => None,
    };
    match ip_len {
        Some(len) if l3 + len <= n => l3 + len,
        _ => n,
    }
}

/// Whether a datapath action leaves the packet's bytes as they were.
fn keeps_packet(a: &DpAction) -> bool {
    match a {
        DpAction::Ct(r) => r.nat.is_none(),
        // Branches run on copies, or last.
        a => matches!(
            a,
            DpAction::Output(_)
                | DpAction::Controller(_)
                | DpAction::Meter(_)
                | DpAction::CtClear
                | DpAction::CheckPktLen { .. }
        ),
    }
}

/// Whether a datapath action gives the packet (or a copy) a destination,
/// or (`ct`) must see it even when nothing after it does (a commit with
/// no output).
fn sends(a: &DpAction) -> bool {
    match a {
        DpAction::Output(_)
        | DpAction::Controller(_)
        | DpAction::Recirc(_)
        | DpAction::TnlOutput { .. }
        | DpAction::TnlPop(_)
        | DpAction::Ct(_) => true,
        DpAction::Select(sel) => sel.variants.iter().any(|(_, v)| has_destination(v)),
        DpAction::CheckPktLen { gt, le, .. } => has_destination(gt) || has_destination(le),
        _ => false,
    }
}

/// Whether a flow's actions send its packets anywhere (or recirculate them).
pub(crate) fn has_destination(acts: &[DpAction]) -> bool {
    acts.iter().any(sends)
}

/// Runs a flow's actions on its packets (action by action over the whole
/// sub-batch). The last output takes the packet itself; earlier outputs
/// take copies. Every packet ends forwarded, queued for the controller,
/// dropped with a reason, or waiting in `recirc` for its next pass; the
/// packets of `counted` (a recirculated pass's copies whose received
/// packet has its fate already) are not counted again.
#[allow(clippy::too_many_arguments)]
pub(crate) fn execute(
    acts: &[DpAction],
    drop: Option<XlateDrop>,
    pkts: &[u8],
    slots: &mut [Option<Packet>; BATCH_SIZE],
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    packet_ins: &mut PacketInQueue,
    now_us: u64,
    recirc: &mut RecircQueue,
    counted: u32,
    rules: &RuleSet,
    keys: &[FlowKey],
    hashes: &[u32],
) {
    if let [DpAction::Select(sel)] = acts {
        // A select group chosen per packet: each variant's packets run
        // its whole action list (no variant is a select again).
        let mut variant = [0u16; BATCH_SIZE];
        let mut todo = 0u32;
        for &i in pkts {
            variant[i as usize] = sel.slots.variant_of(&keys[i as usize]) as u16;
            todo |= 1 << i;
        }
        let mut group = [0u8; BATCH_SIZE];
        while todo != 0 {
            let v = variant[todo.trailing_zeros() as usize];
            let (mut n, mut bytes) = (0usize, 0u64);
            for &i in pkts {
                if todo & (1 << i) != 0 && variant[i as usize] == v {
                    todo &= !(1 << i);
                    group[n] = i;
                    n += 1;
                    bytes += slots[i as usize].as_ref().map_or(0, |p| p.len() as u64);
                }
            }
            let list = match sel.variants.get(v as usize) {
                // One select per translation: a variant is never one.
                Some((_, list)) if !matches!(**list, [DpAction::Select(_)]) => list,
                _ => {
                    for &i in &group[..n] {
                        if let Some(p) = slots[i as usize].take() {
                            pool.free(p);
                        }
                        if counted & (1 << i) == 0 {
                            stats.dropped[DropReason::Xlate(XlateDrop::NoOutput).index()] += 1;
                        }
                    }
                    continue;
                }
            };
            if let Some(c) = sel.counters.get(v as usize) {
                c.credit(n as u64, bytes, now_us);
            }
            execute(
                list,
                drop,
                &group[..n],
                slots,
                pool,
                out,
                stats,
                packet_ins,
                now_us,
                recirc,
                counted,
                rules,
                keys,
                hashes,
            );
        }
        return;
    }
    let uncounted = |n: &[u8]| {
        if counted == 0 {
            n.len() as u64
        } else {
            n.iter().filter(|&&i| counted & (1 << i) == 0).count() as u64
        }
    };
    let last = acts.iter().rposition(sends);
    // Fast path: a single output (port forwarding, routing without
    // rewrites), the most common flow: every packet moves straight into
    // the port's output batch.
    if let [DpAction::Output(ofport)] = acts {
        if let Some(idx) = out.index_of(*ofport) {
            for &i in pkts {
                if let Some(p) = slots[i as usize].take() {
                    out.enqueue(idx, p, pool, stats, now_us);
                }
            }
            stats.forwarded += uncounted(pkts);
            return;
        }
    }
    let Some(last) = last else {
        let reason = DropReason::Xlate(drop.unwrap_or(XlateDrop::NoOutput));
        for &i in pkts {
            if let Some(p) = slots[i as usize].take() {
                pool.free(p);
            }
        }
        stats.dropped[reason.index()] += uncounted(pkts);
        return;
    };
    let (mut sent, mut to_ctl, mut no_buf, mut ctl_full) = (0u32, 0u32, 0u32, 0u32);
    // Packets that could not recirculate (those whose fate a queued copy
    // carries are `recirc.carried`).
    let mut recirc_full = 0u32;
    if !recirc.branch {
        recirc.carried = 0;
        recirc.ct_set = 0;
        recirc.reparse = false;
    }
    // Packets a meter's drop band took.
    let mut metered = 0u32;
    // Packets later actions pass over: those a meter dropped, and the
    // fragments a `ct` held (those whose fate is theirs in `held`).
    let mut skip = 0u32;
    let mut held = 0u32;
    // The packets a final `ct` consumed (no output after it); the
    // tracker's results are in `recirc.ct`, valid per `recirc.ct_set`.
    let mut ct_end = 0u32;
    // Tunnel packets refused, by reason.
    let (mut tnl_header, mut tnl_csum, mut tnl_port, mut tnl_long) = (0u32, 0u32, 0u32, 0u32);
    let mut ctl_rate = 0u32;
    let mut ctl_budget = 0u32;
    // Packets whose packet-in the controller meter dropped.
    let mut ctl_metered = 0u32;
    let mut ctl_port = 0u32;
    // Packets a final `check_pkt_len` handed to a branch, their fate with it.
    let mut branched = 0u32;
    for (ai, a) in acts[..=last].iter().enumerate() {
        let is_last = ai == last;
        match *a {
            DpAction::Output(ofport) => {
                let idx = out.index_of(ofport);
                for &i in pkts {
                    if skip & (1u32 << i) != 0 {
                        continue;
                    }
                    let bit = 1u32 << i;
                    let slot = &mut slots[i as usize];
                    let pkt = match (is_last, idx) {
                        (true, _) => slot.take(),
                        (false, Some(_)) => slot.as_ref().and_then(|p| pool.clone_packet(p)),
                        (false, None) => None,
                    };
                    match (pkt, idx) {
                        (Some(p), Some(idx)) => {
                            out.enqueue(idx, p, pool, stats, now_us);
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
            DpAction::Controller(ref pin) => {
                let f = crate::packet_in::controller(
                    pin, pkts, skip, is_last, slots, pool, out, stats, packet_ins, rules, now_us,
                );
                to_ctl |= f.to_ctl;
                ctl_port |= f.port;
                ctl_metered |= f.metered;
                ctl_budget |= f.budget;
                ctl_full |= f.full;
                ctl_rate |= f.rate;
            }
            DpAction::Meter(id) => {
                // A meter removed since the translation: the rule went with
                // it, and revalidation takes this flow away.
                let Some(m) = rules.meter(id) else {
                    continue;
                };
                let mut lens = ArrayVec::<usize, BATCH_SIZE>::new();
                let mut who = ArrayVec::<u8, BATCH_SIZE>::new();
                for &i in pkts {
                    if let Some(p) = slots[i as usize].as_ref() {
                        lens.push(p.len());
                        who.push(i);
                    }
                }
                let v = m.apply(now_us, &lens);
                for (k, &i) in who.iter().enumerate() {
                    if v.drop & (1 << k) != 0 {
                        if let Some(p) = slots[i as usize].take() {
                            pool.free(p);
                        }
                        metered |= 1 << i;
                        skip |= 1 << i;
                    } else if v.remark & (1 << k) != 0 {
                        if let Some(p) = slots[i as usize].as_mut() {
                            rewrite::map_dscp(p, |d| raise_drop_precedence(d, v.prec_level));
                        }
                    }
                }
            }
            DpAction::TnlOutput { ref header, port } => {
                let Some(idx) = out.index_of(port) else {
                    continue;
                };
                let (s, n, l) = tnl_output(
                    header, idx, is_last, pkts, skip, slots, pool, out, stats, now_us, hashes,
                );
                sent |= s;
                no_buf |= n;
                tnl_long |= l;
            }
            DpAction::TnlPop(ref receivers) if is_last => {
                // Two passes, as `tnl_output`: every packet popped where it
                // lies, then all moved to the recirculation queue.
                let mut tuns = [TunnelMeta::default(); BATCH_SIZE];
                let mut ready = 0u32;
                for &i in pkts {
                    let bit = 1u32 << i;
                    let Some(p) = slots[i as usize].as_mut() else {
                        continue;
                    };
                    if skip & bit != 0 {
                        continue;
                    }
                    match tunnel::pop(p, receivers.kind, &receivers.tlv) {
                        Ok(m) => match receivers.lookup(&m) {
                            Some(port) => {
                                tuns[i as usize] = m;
                                p.meta.in_port = port;
                                ready |= bit;
                            }
                            None => tnl_port |= bit,
                        },
                        Err(PopError::BadHeader) => tnl_header |= bit,
                        Err(PopError::BadChecksum) => tnl_csum |= bit,
                    }
                }
                for &i in pkts {
                    let bit = 1u32 << i;
                    let Some(p) = slots[i as usize].take() else {
                        continue;
                    };
                    if ready & bit == 0 {
                        pool.free(p);
                        continue;
                    }
                    let r = Recirculated {
                        pkt: p,
                        id: 0,
                        fate: false,
                        tun: tuns[i as usize],
                        ct: CtResult::default(),
                    };
                    if let Err(p) = recirc.push(i, counted, r) {
                        pool.free(p);
                        recirc_full |= bit;
                    }
                }
            }
            DpAction::TnlPop(ref receivers) => {
                for &i in pkts {
                    if skip & (1u32 << i) != 0 {
                        continue;
                    }
                    let bit = 1u32 << i;
                    let slot = &mut slots[i as usize];
                    let pkt = if is_last {
                        slot.take()
                    } else {
                        slot.as_ref().and_then(|p| pool.clone_packet(p))
                    };
                    let Some(mut p) = pkt else {
                        stats.copy_failures += 1;
                        no_buf |= bit;
                        continue;
                    };
                    let popped = tunnel::pop(&mut p, receivers.kind, &receivers.tlv);
                    let port = popped.as_ref().ok().and_then(|m| receivers.lookup(m));
                    let (Ok(tun), Some(port)) = (popped, port) else {
                        pool.free(p);
                        match popped {
                            Err(PopError::BadHeader) => tnl_header |= bit,
                            Err(PopError::BadChecksum) => tnl_csum |= bit,
                            Ok(_) => tnl_port |= bit,
                        }
                        continue;
                    };
                    p.meta.in_port = port;
                    let r = Recirculated {
                        pkt: p,
                        id: 0,
                        fate: false,
                        tun,
                        ct: CtResult::default(),
                    };
                    if let Err(p) = recirc.push(i, counted, r) {
                        pool.free(p);
                        recirc_full |= bit;
                    }
                }
            }
            DpAction::Ct(ref req) => {
                let ct = rules.conntrack();
                let now_ms = ct.now_ms();
                // Whether an action before this one changed the packet
                // (a header rewrite, a translating ct): then it is parsed
                // again (its key is the pass's).
                let changed = recirc.reparse || !acts[..ai].iter().all(keeps_packet);
                for &i in pkts {
                    let bit = 1u32 << i;
                    if skip & bit != 0 {
                        continue;
                    }
                    let Some(p) = slots[i as usize].as_mut() else {
                        continue;
                    };
                    // The state an earlier ct gave it (this pass's, or
                    // the one its key came in with).
                    let prev = if recirc.ct_set & bit != 0 {
                        recirc.ct[i as usize]
                    } else {
                        CtResult::of_key(&keys[i as usize])
                    };
                    if keys[i as usize].nw_frag & FRAG_ANY != 0 {
                        // A fragment: held until its datagram is whole
                        // (then tracked as one, its fragments going on
                        // with the actions after this one), or tracked
                        // as it is when it is none to hold.
                        // (Not if its fate is settled already: a copy
                        // carries it, or an output before this one sent it.)
                        let fate = (counted | recirc.carried | sent | to_ctl) & bit == 0;
                        let frag = crate::fragments::Fragment {
                            key: &keys[i as usize],
                            reparse: changed,
                            prev: &prev,
                            fate,
                        };
                        let rest = crate::fragments::Rest {
                            acts: &acts[ai + 1..],
                            drop,
                        };
                        if crate::fragments::hold(
                            ct,
                            p,
                            &frag,
                            req,
                            now_ms,
                            &rest,
                            &mut recirc.released,
                        ) {
                            if let Some(p) = slots[i as usize].take() {
                                pool.free(p);
                            }
                            skip |= bit;
                            if fate {
                                held |= bit;
                            }
                            continue;
                        }
                    }
                    if req.nat.is_some() && p.meta.offload.needs_csum() {
                        // Translation updates checksums as they are: a
                        // partial one is completed first.
                        let _ = sluice_packet::offload::complete_csum(p);
                    }
                    let r = if !changed {
                        let meta = p.meta;
                        ct.process(p.data_mut(), &meta, &keys[i as usize], &prev, req, now_ms)
                    } else {
                        let mut meta = p.meta;
                        let mut key = FlowKey::default();
                        match sluice_packet::extract::extract(
                            p.data(),
                            meta.in_port,
                            &mut meta,
                            &mut key,
                        ) {
                            Ok(()) => ct.process(p.data_mut(), &meta, &key, &prev, req, now_ms),
                            Err(_) => CtResult {
                                zone: req.zone,
                                ..CtResult::default()
                            },
                        }
                    };
                    recirc.ct[i as usize] = r;
                    recirc.ct_set |= bit;
                    if is_last {
                        if let Some(p) = slots[i as usize].take() {
                            pool.free(p);
                        }
                        ct_end |= bit;
                    }
                }
                if ct.ipf().held() != 0 {
                    // As OVS, a `ct` sends on one expired list of
                    // fragments (`+inv`) with its own packets.
                    let rest = crate::fragments::Rest {
                        acts: &acts[ai + 1..],
                        drop,
                    };
                    crate::fragments::expire(ct, now_ms, &rest, &mut recirc.released, stats);
                }
            }
            DpAction::CheckPktLen {
                len,
                ref gt,
                ref le,
            } => {
                let (mut big, mut small) = (
                    ArrayVec::<u8, BATCH_SIZE>::new(),
                    ArrayVec::<u8, BATCH_SIZE>::new(),
                );
                for &i in pkts {
                    if skip & (1u32 << i) != 0 {
                        continue;
                    }
                    if let Some(p) = slots[i as usize].as_ref() {
                        if check_len(p) > usize::from(len) {
                            big.push(i);
                        } else {
                            small.push(i);
                        }
                    }
                }
                // Last: the packets themselves, their fates the branches'.
                // Otherwise copies, whose fates are not counted (their
                // packets go on with the actions after this one).
                let mut copies: [Option<Packet>; BATCH_SIZE];
                let (targets, branch_counted) = if is_last {
                    for &i in big.iter().chain(&small) {
                        branched |= 1 << i;
                    }
                    (&mut *slots, counted)
                } else {
                    copies = std::array::from_fn(|_| None);
                    let which = big.iter().chain(&small).copied();
                    no_buf |= copy_packets(which, slots, &mut copies, pool, stats);
                    (&mut copies, u32::MAX)
                };
                // The branches start from this list's scratch (a `ct`
                // result so far, the packet changed); the actions after
                // this one find it as it was.
                let saved = (recirc.branch, recirc.reparse, recirc.carried, recirc.ct_set);
                // (The results array is copied only when it will be read.)
                let ct_saved = if !is_last && recirc.ct_set != 0 {
                    Some(recirc.ct)
                } else {
                    None
                };
                recirc.branch = true;
                recirc.reparse |= !acts[..ai].iter().all(keeps_packet);
                for (list, group) in [(gt, &big), (le, &small)] {
                    if !group.is_empty() {
                        execute(
                            list,
                            drop,
                            group,
                            targets,
                            pool,
                            out,
                            stats,
                            packet_ins,
                            now_us,
                            recirc,
                            branch_counted,
                            rules,
                            keys,
                            hashes,
                        );
                    }
                }
                (recirc.branch, recirc.reparse, recirc.carried, recirc.ct_set) = saved;
                if let Some(ct) = ct_saved {
                    recirc.ct = ct;
                }
            }
            DpAction::CtClear => {
                for &i in pkts {
                    recirc.ct[i as usize] = CtResult::default();
                    recirc.ct_set |= 1 << i;
                }
            }
            DpAction::Recirc(id) => {
                for &i in pkts {
                    if skip & (1u32 << i) != 0 {
                        continue;
                    }
                    let bit = 1u32 << i;
                    let slot = &mut slots[i as usize];
                    let pkt = if is_last {
                        slot.take()
                    } else {
                        slot.as_ref().and_then(|p| pool.clone_packet(p))
                    };
                    let Some(mut p) = pkt else {
                        stats.copy_failures += 1;
                        no_buf |= bit;
                        continue;
                    };
                    // The next pass hashes the new key itself.
                    p.meta.has_hash = false;
                    let ct = if recirc.ct_set & bit != 0 {
                        recirc.ct[i as usize]
                    } else {
                        CtResult::of_key(&keys[i as usize])
                    };
                    let r = Recirculated {
                        pkt: p,
                        id,
                        fate: false,
                        tun: TunnelMeta::of_key(&keys[i as usize]),
                        ct,
                    };
                    if let Err(p) = recirc.push(i, counted, r) {
                        pool.free(p);
                        recirc_full |= bit;
                    }
                }
            }
            ref set => {
                for &i in pkts {
                    if skip & (1u32 << i) != 0 {
                        continue;
                    }
                    if let Some(p) = slots[i as usize].as_mut() {
                        apply(p, set);
                    }
                }
            }
        }
    }
    for &i in pkts {
        let bit = 1u32 << i;
        if (counted | branched) & bit != 0 {
            continue;
        }
        if held & bit != 0 {
            // Its fate comes with its datagram's.
            stats.ct_frags_held += 1;
            continue;
        }
        if metered & bit != 0 {
            stats.dropped[DropReason::MeterDrop.index()] += 1;
            continue;
        }
        if recirc.carried & bit != 0 {
            if (sent | to_ctl) & bit != 0 {
                // Its fate is here after all: the copy's is not.
                recirc.next[recirc.carrier[i as usize] as usize].fate = false;
            } else {
                continue;
            }
        }
        if sent & bit != 0 {
            stats.forwarded += 1;
        } else if to_ctl & bit != 0 {
            stats.to_controller += 1;
        } else if ctl_metered & bit != 0 {
            stats.dropped[DropReason::MeterDrop.index()] += 1;
        } else if ctl_full & bit != 0 {
            stats.dropped[DropReason::ControllerQueueFull.index()] += 1;
        } else if ctl_rate & bit != 0 {
            stats.dropped[DropReason::ControllerRateLimit.index()] += 1;
        } else if ctl_budget & bit != 0 {
            stats.dropped[DropReason::UpcallBudget.index()] += 1;
        } else if ctl_port & bit != 0 {
            stats.dropped[DropReason::PortNoPacketIn.index()] += 1;
        } else if no_buf & bit != 0 {
            stats.dropped[DropReason::NoBuffer.index()] += 1;
        } else if recirc_full & bit != 0 {
            stats.dropped[DropReason::RecircLimit.index()] += 1;
        } else if tnl_header & bit != 0 {
            stats.dropped[DropReason::TunnelBadHeader.index()] += 1;
        } else if tnl_csum & bit != 0 {
            stats.dropped[DropReason::TunnelBadChecksum.index()] += 1;
        } else if tnl_port & bit != 0 {
            stats.dropped[DropReason::TunnelNoPort.index()] += 1;
        } else if tnl_long & bit != 0 {
            stats.dropped[DropReason::TunnelTooLong.index()] += 1;
        } else if ct_end & bit != 0 {
            // Tracked (committed, maybe), then no output.
            stats.dropped[DropReason::Xlate(drop.unwrap_or(XlateDrop::NoOutput)).index()] += 1;
        } else {
            // No output took it: the reason the translation gave (a TTL
            // that ran out before a packet-in nobody asked for), or the
            // port it named is gone.
            let why = drop.unwrap_or(XlateDrop::NoSuchPort);
            stats.dropped[DropReason::Xlate(why).index()] += 1;
        }
        debug_assert!(slots[i as usize].is_none(), "every packet leaves the batch");
    }
}

/// Copies the packets `which` of `slots` (those there are) into the same
/// places of `copies`; the bits of those no copy could be made of (each
/// counted as a copy failure).
fn copy_packets(
    which: impl Iterator<Item = u8>,
    slots: &[Option<Packet>; BATCH_SIZE],
    copies: &mut [Option<Packet>; BATCH_SIZE],
    pool: &mut PacketPool,
    stats: &mut DpStats,
) -> u32 {
    let mut failed = 0u32;
    for i in which {
        if let Some(p) = slots[i as usize].as_ref() {
            match pool.clone_packet(p) {
                Some(c) => copies[i as usize] = Some(c),
                None => {
                    stats.copy_failures += 1;
                    failed |= 1 << i;
                }
            }
        }
    }
    failed
}

/// Runs a `tnl_push` action on a flow's packets: encapsulated into port
/// `idx`'s batch (copies for all but the last action). Two passes: every
/// packet encapsulated where it lies, then all moved into the batch, so a
/// packet is never moved right after the narrow stores to its metadata
/// (the move would wait for them). Returns the packets (bits) sent, those
/// with no copy, and those too long to encapsulate.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn tnl_output(
    header: &tunnel::TnlHeader,
    idx: usize,
    is_last: bool,
    pkts: &[u8],
    metered: u32,
    slots: &mut [Option<Packet>; BATCH_SIZE],
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    now_us: u64,
    hashes: &[u32],
) -> (u32, u32, u32) {
    let (mut sent, mut no_buf, mut long) = (0u32, 0u32, 0u32);
    let mut copies: [Option<Packet>; BATCH_SIZE];
    let held: &mut [Option<Packet>; BATCH_SIZE] = if is_last {
        slots
    } else {
        copies = std::array::from_fn(|_| None);
        let which = pkts.iter().copied().filter(|&i| metered & (1 << i) == 0);
        no_buf |= copy_packets(which, slots, &mut copies, pool, stats);
        &mut copies
    };
    // The header goes into the headroom, a line the packet's own bytes
    // did not bring into the cache: ask for them all first, so that the
    // header stores do not wait for them one by one.
    for &i in pkts {
        if let Some(p) = held[i as usize].as_ref() {
            sluice_packet::prefetch::read_addr(p.data().as_ptr().wrapping_sub(header.len()));
        }
    }
    let mut ready = 0u32;
    for &i in pkts {
        let bit = 1u32 << i;
        if metered & bit != 0 {
            continue;
        }
        let Some(p) = held[i as usize].as_mut() else {
            continue;
        };
        let sport = tunnel::udp_src_port(hashes[i as usize]);
        if p.meta.offload.pending() {
            let p = held[i as usize].take().expect("checked");
            if encap_offloaded(p, header, sport, idx, pool, out, stats, now_us) {
                sent |= bit;
            } else {
                long |= bit;
            }
        } else if tunnel::push(p, header, sport) {
            ready |= bit;
        } else {
            long |= bit;
        }
    }
    for &i in pkts {
        if metered & (1 << i) != 0 {
            continue;
        }
        if let Some(p) = held[i as usize].take() {
            if ready & (1 << i) != 0 {
                out.enqueue(idx, p, pool, stats, now_us);
                sent |= 1 << i;
            } else {
                pool.free(p);
            }
        }
    }
    (sent, no_buf, long)
}

/// Encapsulates a packet with offloads pending and queues it for port
/// `idx`: a super-frame is cut into segments, each encapsulated; a partial
/// checksum is completed (no underlay takes offloads for the frame inside
/// a tunnel). False (the packet freed) when nothing could be sent.
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
fn encap_offloaded(
    mut pkt: Packet,
    header: &tunnel::TnlHeader,
    sport: u16,
    idx: usize,
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    now_us: u64,
) -> bool {
    if sluice_packet::offload::needs_segmenting(&pkt) {
        let mut segs = Vec::new();
        let made = sluice_packet::offload::segment(&pkt, pool, &mut |s| segs.push(s));
        pool.free(pkt);
        stats.gso_segmented += 1;
        let mut any = false;
        for s in segs {
            stats.gso_segments += 1;
            any |= push_then_enqueue(s, header, sport, idx, pool, out, stats, now_us);
        }
        if made.is_err() {
            stats.offload_failures += 1;
        }
        return any;
    }
    if sluice_packet::offload::complete_csum(&mut pkt).is_err() {
        stats.offload_failures += 1;
    } else {
        stats.csum_completed += 1;
    }
    pkt.meta.offload = sluice_packet::meta::Offload::NONE;
    push_then_enqueue(pkt, header, sport, idx, pool, out, stats, now_us)
}

/// Encapsulates one packet and queues it for port `idx` (false, the
/// packet freed, when it would be too long for IPv4).
#[allow(clippy::too_many_arguments)]
fn push_then_enqueue(
    mut pkt: Packet,
    header: &tunnel::TnlHeader,
    sport: u16,
    idx: usize,
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    now_us: u64,
) -> bool {
    if tunnel::push(&mut pkt, header, sport) {
        out.enqueue(idx, pkt, pool, stats, now_us);
        true
    } else {
        pool.free(pkt);
        false
    }
}
