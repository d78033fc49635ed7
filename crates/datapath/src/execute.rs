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
use sluice_packet::rewrite::{self, PortField};
use sluice_packet::{FlowKey, Packet, PacketPool, Slots, BATCH_SIZE};

use crate::output::OutputStage;
use crate::packet_in::PacketInQueue;
pub(crate) use crate::recirc_queue::RecircQueue;
use crate::stats::{DpStats, DropReason};

mod branch;
mod ct;
mod fates;
mod tnl;

use fates::Fates;

/// Applies one header-changing datapath action to a packet (outputs and
/// recirculations change nothing here). `sluice trace` follows a
/// recirculation with it.
pub fn apply(pkt: &mut Packet, a: &DpAction) {
    // What the tracker verified stays verified through rewrites that keep
    // the checksums right (or touch no checksummed byte); any other makes
    // the next tracker sum them again.
    if !keeps_tracked_fields(a)
        && !matches!(
            a,
            DpAction::PushVlan { .. } | DpAction::PopVlan | DpAction::SetVlanTci(_)
        )
    {
        pkt.meta.csum_ok = 0;
    }
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
        | DpAction::HeldMeter(_)
        | DpAction::Select(_)
        | DpAction::TnlOutput { .. }
        | DpAction::TnlPop(_)
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::CtRestore(_)
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
    // OVS's ipv4_sanity_check / ipv6_sanity_check: a pad only after a
    // datagram whose lengths hold together, and of at most 255 bytes.
    let size = n.saturating_sub(l3);
    let ip_len = match pkt.meta.l3_type {
        0x0800 => {
            let ihl = d.get(l3).map(|b| usize::from(b & 0x0f) * 4);
            be16(l3 + 2).filter(|&t| ihl.is_some_and(|h| h >= 20 && h <= t))
        }
        0x86dd => be16(l3 + 4).map(|p| p + 40),
        _ => None,
    };
    match ip_len {
        Some(len) if len <= size && size - len <= 255 => l3 + len,
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
                | DpAction::HeldMeter(_)
                | DpAction::CtClear
                | DpAction::CtRestore(_)
                | DpAction::CheckPktLen { .. }
        ),
    }
}

/// Whether a header rewrite leaves what the connection tracker reads of
/// the packet (its addresses, protocol, ports, fragment bits and header
/// offsets) and its checksums right: a new Ethernet address, TTL, TOS or
/// IPv6 flow label.
fn keeps_tracked_fields(a: &DpAction) -> bool {
    matches!(
        a,
        DpAction::SetEthSrc(_)
            | DpAction::SetEthDst(_)
            | DpAction::SetIpTtl(_)
            | DpAction::SetIpTos { .. }
            | DpAction::SetIpv6Label(_)
    )
}

/// Whether a datapath action leaves what the connection tracker reads of
/// the packet as the pass's key has it.
fn keeps_tuple(a: &DpAction) -> bool {
    keeps_packet(a) || keeps_tracked_fields(a)
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

/// What [`execute`] works on: the packets of a sub-batch (by their
/// index in `slots`), where they go, and their keys and hashes. The
/// packets of `counted` (a recirculated pass's copies whose received
/// packet has its fate already) are not counted again.
pub(crate) struct Ctx<'a> {
    pub slots: &'a mut Slots,
    pub pool: &'a mut PacketPool,
    pub out: &'a mut OutputStage,
    pub stats: &'a mut DpStats,
    pub packet_ins: &'a mut PacketInQueue,
    pub recirc: &'a mut RecircQueue,
    pub now_us: u64,
    pub counted: u32,
    pub rules: &'a RuleSet,
    pub keys: &'a [FlowKey],
    pub hashes: &'a [u32],
}

/// Where an action is in its list.
pub(crate) struct Step<'a> {
    pub acts: &'a [DpAction],
    /// Its index.
    pub ai: usize,
    /// The drop reason the translation gave.
    pub drop: Option<XlateDrop>,
    /// Whether it is the last action that sends (it takes the packets
    /// themselves; earlier ones take copies).
    pub is_last: bool,
}

/// Runs a flow's actions on its packets (action by action over the whole
/// sub-batch). The last output takes the packet itself; earlier outputs
/// take copies. Every packet ends forwarded, queued for the controller,
/// dropped with a reason, or waiting in `recirc` for its next pass; the
/// packets of `counted` (a recirculated pass's copies whose received
/// packet has its fate already) are not counted again.
pub(crate) fn execute(acts: &[DpAction], drop: Option<XlateDrop>, pkts: &[u8], cx: &mut Ctx<'_>) {
    if let [DpAction::Select(sel)] = acts {
        branch::select(sel, drop, pkts, cx);
        return;
    }
    let uncounted = |n: &[u8]| {
        if cx.counted == 0 {
            n.len() as u64
        } else {
            n.iter().filter(|&&i| cx.counted & (1 << i) == 0).count() as u64
        }
    };
    // Fast path: a single output (port forwarding, routing without
    // rewrites), the most common flow: every packet moves straight into
    // the port's output batch.
    if let [DpAction::Output(ofport)] = acts {
        if let Some(idx) = cx.out.index_of(*ofport) {
            for &i in pkts {
                cx.out
                    .enqueue_slot(idx, cx.slots, i as usize, cx.pool, cx.stats, cx.now_us);
            }
            cx.stats.forwarded += uncounted(pkts);
            return;
        }
    }
    let Some(last) = acts.iter().rposition(sends) else {
        let reason = DropReason::Xlate(drop.unwrap_or(XlateDrop::NoOutput));
        for &i in pkts {
            if let Some(p) = cx.slots.take(i as usize) {
                cx.pool.free(p);
            }
        }
        cx.stats.dropped[reason.index()] += uncounted(pkts);
        return;
    };
    if !cx.recirc.branch {
        cx.recirc.carried = 0;
        cx.recirc.ct_set = 0;
        cx.recirc.reparse = false;
    }
    let mut f = Fates::default();
    for (ai, a) in acts[..=last].iter().enumerate() {
        let step = Step {
            acts,
            ai,
            drop,
            is_last: ai == last,
        };
        match *a {
            DpAction::Output(ofport) => output(ofport, step.is_last, pkts, cx, &mut f),
            DpAction::Controller(ref pin) => {
                let c = crate::packet_in::controller(
                    pin,
                    pkts,
                    f.skip,
                    step.is_last,
                    cx.slots,
                    cx.pool,
                    cx.out,
                    cx.stats,
                    cx.packet_ins,
                    cx.rules,
                    cx.now_us,
                );
                f.to_ctl |= c.to_ctl;
                f.ctl_port |= c.port;
                f.ctl_metered |= c.metered;
                f.ctl_budget |= c.budget;
                f.ctl_full |= c.full;
                f.ctl_rate |= c.rate;
            }
            DpAction::Meter(id) => {
                // A meter removed since the translation: the rule went
                // with it, and revalidation takes this flow away.
                let rules = cx.rules;
                if let Some(m) = rules.meter(id) {
                    meter(m, pkts, cx, &mut f)
                }
            }
            DpAction::HeldMeter(ref m) => meter(&m.0, pkts, cx, &mut f),
            DpAction::TnlOutput { ref header, port } => {
                if let Some(idx) = cx.out.index_of(port) {
                    tnl::output(header, idx, step.is_last, pkts, cx, &mut f);
                }
            }
            DpAction::TnlPop(ref receivers) if step.is_last => {
                tnl::pop_all(receivers, pkts, cx, &mut f)
            }
            DpAction::TnlPop(ref receivers) => tnl::pop_copies(receivers, pkts, cx, &mut f),
            DpAction::Ct(ref req) => ct::track(req, &step, pkts, cx, &mut f),
            DpAction::CheckPktLen {
                len,
                ref gt,
                ref le,
            } => branch::check_pkt_len(len, gt, le, &step, pkts, cx, &mut f),
            DpAction::CtClear => {
                for &i in pkts {
                    cx.recirc.ct[i as usize] = CtResult::NONE;
                    cx.recirc.ct_set |= 1 << i;
                }
            }
            DpAction::CtRestore(ref r) => {
                for &i in pkts {
                    cx.recirc.ct[i as usize] = **r;
                    cx.recirc.ct_set |= 1 << i;
                }
            }
            DpAction::Recirc(id) => branch::recirculate(id, step.is_last, pkts, cx, &mut f),
            ref set => {
                for &i in pkts {
                    if f.skip & (1u32 << i) != 0 {
                        continue;
                    }
                    if let Some(p) = cx.slots.get_mut(i as usize) {
                        apply(p, set);
                    }
                }
            }
        }
    }
    f.settle(pkts, drop, cx);
}

/// An `output` action: the packet itself into the port's batch when it is
/// the last action that sends, a copy before that.
fn output(ofport: u32, is_last: bool, pkts: &[u8], cx: &mut Ctx<'_>, f: &mut Fates) {
    let idx = cx.out.index_of(ofport);
    for &i in pkts {
        let bit = 1u32 << i;
        if f.skip & bit != 0 {
            continue;
        }
        let sent = match (is_last, idx) {
            // The packet itself, moved from its slot.
            (true, Some(idx)) => cx
                .out
                .enqueue_slot(idx, cx.slots, i as usize, cx.pool, cx.stats, cx.now_us),
            (false, Some(idx)) => {
                let copy = cx
                    .slots
                    .get(i as usize)
                    .and_then(|p| cx.pool.clone_packet(p));
                copy.map(|p| cx.out.enqueue(idx, p, cx.pool, cx.stats, cx.now_us))
                    .is_some()
            }
            (true, None) => match cx.slots.take(i as usize) {
                Some(p) => {
                    cx.pool.free(p);
                    continue;
                }
                None => false,
            },
            (false, None) => false,
        };
        if sent {
            f.sent |= bit;
        } else {
            cx.stats.copy_failures += 1;
            f.no_buf |= bit;
        }
    }
}

/// A `meter` action: the packets its drop band takes are freed and passed
/// over by the actions after it; those it remarks get a higher drop
/// precedence.
fn meter(m: &sluice_classifier::meter::Meter, pkts: &[u8], cx: &mut Ctx<'_>, f: &mut Fates) {
    let mut lens = ArrayVec::<usize, BATCH_SIZE>::new();
    let mut who = ArrayVec::<u8, BATCH_SIZE>::new();
    for &i in pkts {
        if let Some(p) = cx.slots.get(i as usize) {
            lens.push(p.len());
            who.push(i);
        }
    }
    let v = m.apply(cx.now_us, &lens);
    for (k, &i) in who.iter().enumerate() {
        if v.drop & (1 << k) != 0 {
            if let Some(p) = cx.slots.take(i as usize) {
                cx.pool.free(p);
            }
            f.metered |= 1 << i;
            f.skip |= 1 << i;
        } else if v.remark & (1 << k) != 0 {
            if let Some(p) = cx.slots.get_mut(i as usize) {
                rewrite::map_dscp(p, |d| raise_drop_precedence(d, v.prec_level));
            }
        }
    }
}

/// Copies the packets `which` of `slots` (those there are) into the same
/// places of `copies`; the bits of those no copy could be made of (each
/// counted as a copy failure).
fn copy_packets(
    which: impl Iterator<Item = u8>,
    slots: &Slots,
    copies: &mut Slots,
    pool: &mut PacketPool,
    stats: &mut DpStats,
) -> u32 {
    let mut failed = 0u32;
    for i in which {
        if let Some(p) = slots.get(i as usize) {
            match pool.clone_packet(p) {
                Some(c) => {
                    let _ = copies.put(i as usize, c);
                }
                None => {
                    stats.copy_failures += 1;
                    failed |= 1 << i;
                }
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::check_len;
    use sluice_packet::extract::extract_with_shape;
    use sluice_packet::{FlowKey, PacketPool};

    /// The length `check_pkt_len` compares, as OVS's: the Ethernet padding
    /// after a sane IPv4 datagram is left out; after one whose header says
    /// it is longer than its total length (IHL 6, total length 20: OVS's
    /// ipv4_sanity_check fails), or with more than 255 bytes after it, the
    /// whole frame counts.
    #[test]
    fn padding_counts_only_after_a_sane_datagram() {
        let mut pool = PacketPool::new(4, 2048).unwrap();
        let len_of = |pool: &mut PacketPool, frame: &[u8]| {
            let mut p = pool.alloc_from(frame).unwrap();
            let (d, m) = p.data_and_meta_mut();
            let _ = extract_with_shape(d, 1, 1, m, &mut FlowKey::default());
            let n = check_len(&p);
            pool.free(p);
            n
        };
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&20u16.to_be_bytes());
        f[23] = 17;
        assert_eq!(
            len_of(&mut pool, &f),
            34,
            "a 20-byte datagram, 26 bytes of pad"
        );
        f[14] = 0x46;
        assert_eq!(len_of(&mut pool, &f), 60, "IHL 6 over a total length of 20");
        f[14] = 0x45;
        let mut big = f.clone();
        big.resize(14 + 20 + 300, 0);
        assert_eq!(len_of(&mut pool, &big), 334, "300 bytes after it: no pad");
    }
}
