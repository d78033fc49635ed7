//! Tunnel actions: `tnl_pop` (decapsulated, to the next pass as the
//! tunnel port's packets) and `tnl_push` (encapsulated into the underlay
//! port's batch).

use sluice_classifier::tunnel::Receivers as TnlReceivers;
use sluice_conntrack::CtResult;
use sluice_packet::tunnel::{self, PopError};
use sluice_packet::{Packet, PacketPool, Slots, BATCH_SIZE};

use super::{copy_packets, Ctx, Fates};
use crate::output::OutputStage;
use crate::recirc_queue::NO_TUN;
use crate::stats::DpStats;

/// A final `tnl_pop`: two passes (as `tnl_output`), every packet popped
/// where it lies, then all moved to the recirculation queue.
pub(super) fn pop_all(receivers: &TnlReceivers, pkts: &[u8], cx: &mut Ctx<'_>, f: &mut Fates) {
    // Where each popped packet's tunnel metadata went in the queue: each
    // pop writes it there in place, never copied while just written.
    let mut tun_at = [NO_TUN; BATCH_SIZE];
    let mut ready = 0u32;
    for &i in pkts {
        let bit = 1u32 << i;
        let Some(p) = cx.slots.get_mut(i as usize) else {
            continue;
        };
        if f.skip & bit != 0 {
            continue;
        }
        let (at, m) = cx.recirc.reserve_tun();
        let port =
            tunnel::pop_into(p, receivers.kind, &receivers.tlv, m).map(|()| receivers.lookup(m));
        match port {
            Ok(Some(port)) => {
                tun_at[i as usize] = at;
                p.meta.in_port = port;
                ready |= bit;
                continue;
            }
            Ok(None) => f.tnl_port |= bit,
            Err(PopError::BadHeader) => f.tnl_header |= bit,
            Err(PopError::BadChecksum) => f.tnl_csum |= bit,
        }
        cx.recirc.unreserve_tun();
    }
    for &i in pkts {
        let bit = 1u32 << i;
        // (A ready packet is in its slot: the pop left it there.)
        if ready & bit != 0
            && cx.recirc.push_slot(
                i,
                cx.counted,
                cx.slots,
                0,
                Some(&CtResult::NONE),
                tun_at[i as usize],
                None,
            )
        {
            continue;
        }
        if ready & bit != 0 {
            f.recirc_full |= bit;
        }
        if let Some(p) = cx.slots.take(i as usize) {
            cx.pool.free(p);
        }
    }
}

/// A `tnl_pop` before the last action: copies popped.
pub(super) fn pop_copies(receivers: &TnlReceivers, pkts: &[u8], cx: &mut Ctx<'_>, f: &mut Fates) {
    for &i in pkts {
        if f.skip & (1u32 << i) != 0 {
            continue;
        }
        let bit = 1u32 << i;
        let copy = cx
            .slots
            .get(i as usize)
            .and_then(|p| cx.pool.clone_packet(p));
        let Some(mut p) = copy else {
            cx.stats.copy_failures += 1;
            f.no_buf |= bit;
            continue;
        };
        let popped = tunnel::pop(&mut p, receivers.kind, &receivers.tlv);
        let port = popped.as_ref().ok().and_then(|m| receivers.lookup(m));
        let (Ok(tun), Some(port)) = (popped, port) else {
            cx.pool.free(p);
            match popped {
                Err(PopError::BadHeader) => f.tnl_header |= bit,
                Err(PopError::BadChecksum) => f.tnl_csum |= bit,
                Ok(_) => f.tnl_port |= bit,
            }
            continue;
        };
        p.meta.in_port = port;
        if let Err(p) = cx
            .recirc
            .push(i, cx.counted, p, 0, Some(&CtResult::NONE), Some(tun))
        {
            cx.pool.free(p);
            f.recirc_full |= bit;
        }
    }
}

/// A `tnl_push` into port `idx`.
pub(super) fn output(
    header: &tunnel::TnlHeader,
    idx: usize,
    is_last: bool,
    pkts: &[u8],
    cx: &mut Ctx<'_>,
    f: &mut Fates,
) {
    let o = tnl_output(
        header, idx, is_last, pkts, f.skip, cx.slots, cx.pool, cx.out, cx.stats, cx.now_us,
        cx.hashes,
    );
    f.sent |= o.sent;
    f.no_buf |= o.no_buf;
    f.tnl_long |= o.long;
    f.tnl_mtu |= o.mtu;
}

/// What became of a `tnl_push`'s packets (a bit each).
#[derive(Default)]
struct Pushed {
    sent: u32,
    /// No copy could be made.
    no_buf: u32,
    /// Too long for IPv4 once encapsulated.
    long: u32,
    /// Longer than the underlay port's MTU once encapsulated.
    mtu: u32,
}

/// What became of one packet with offloads pending.
enum Encap {
    Sent,
    TooLong,
    MtuExceeded,
}

/// Runs a `tnl_push` action on a flow's packets: encapsulated into port
/// `idx`'s batch (copies for all but the last action). Two passes: every
/// packet encapsulated where it lies, then all moved into the batch, so a
/// packet is never moved right after the narrow stores to its metadata
/// (the move would wait for them). A packet that would not fit the
/// underlay port's MTU once encapsulated is dropped here, counted.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn tnl_output(
    header: &tunnel::TnlHeader,
    idx: usize,
    is_last: bool,
    pkts: &[u8],
    metered: u32,
    slots: &mut Slots,
    pool: &mut PacketPool,
    out: &mut OutputStage,
    stats: &mut DpStats,
    now_us: u64,
    hashes: &[u32],
) -> Pushed {
    let mut o = Pushed::default();
    let mtu = out.ports[idx].mtu;
    let mut copies: Slots;
    let held: &mut Slots = if is_last {
        slots
    } else {
        copies = Slots::new();
        let which = pkts.iter().copied().filter(|&i| metered & (1 << i) == 0);
        o.no_buf |= copy_packets(which, slots, &mut copies, pool, stats);
        &mut copies
    };
    // The header goes into the headroom, a line the packet's own bytes
    // did not bring into the cache: ask for them all first, so that the
    // header stores do not wait for them one by one.
    for &i in pkts {
        if let Some(p) = held.get(i as usize) {
            sluice_packet::prefetch::read_addr(p.data().as_ptr().wrapping_sub(header.len()));
        }
    }
    let mut ready = 0u32;
    for &i in pkts {
        let bit = 1u32 << i;
        if metered & bit != 0 {
            continue;
        }
        let Some(p) = held.get_mut(i as usize) else {
            continue;
        };
        let sport = tunnel::udp_src_port(hashes[i as usize]);
        if p.meta.offload.pending() {
            let p = held.take(i as usize).expect("checked");
            match encap_offloaded(p, header, sport, idx, pool, out, stats, now_us) {
                Encap::Sent => o.sent |= bit,
                Encap::TooLong => o.long |= bit,
                Encap::MtuExceeded => o.mtu |= bit,
            }
        } else if !tunnel::push(p, header, sport) {
            o.long |= bit;
        } else if sluice_port::fits_mtu(p, mtu) {
            ready |= bit;
        } else {
            o.mtu |= bit;
        }
    }
    for &i in pkts {
        if metered & (1 << i) != 0 {
            continue;
        }
        if let Some(p) = held.take(i as usize) {
            if ready & (1 << i) != 0 {
                out.enqueue(idx, p, pool, stats, now_us);
                o.sent |= 1 << i;
            } else {
                pool.free(p);
            }
        }
    }
    o
}

/// Encapsulates a packet with offloads pending and queues it for port
/// `idx`. A super-frame into a UDP tunnel keeps its offloads and gets one
/// outer header ([`tunnel::push_super`]): the port's flush cuts it, each
/// segment with the outer headers, or hands it whole to a tap that takes
/// tunnelled super-frames. Otherwise (GRE, or no room for the header) a
/// super-frame is cut into segments, each encapsulated; a partial
/// checksum is completed. A frame (or segment) longer than the port's
/// MTU once encapsulated is not sent: when nothing could be, the packet
/// is freed and the reason returned.
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
) -> Encap {
    let mtu = out.ports[idx].mtu;
    if tunnel::push_super(&mut pkt, header, sport) {
        if !sluice_port::segments_fit_mtu(&pkt, mtu) {
            pool.free(pkt);
            return Encap::MtuExceeded;
        }
        stats.gso_encapsulated += 1;
        out.enqueue(idx, pkt, pool, stats, now_us);
        return Encap::Sent;
    }
    if sluice_packet::offload::needs_segmenting(&pkt) {
        let mut segs = Vec::new();
        let made = sluice_packet::offload::segment(&pkt, pool, &mut |s| segs.push(s));
        pool.free(pkt);
        stats.gso_segmented += 1;
        let mut fate = Encap::TooLong;
        for s in segs {
            stats.gso_segments += 1;
            match push_then_enqueue(s, header, sport, idx, pool, out, stats, now_us) {
                Encap::Sent => fate = Encap::Sent,
                Encap::MtuExceeded if !matches!(fate, Encap::Sent) => fate = Encap::MtuExceeded,
                _ => {}
            }
        }
        if made.is_err() {
            stats.offload_failures += 1;
        }
        return fate;
    }
    if sluice_packet::offload::complete_csum(&mut pkt).is_err() {
        stats.offload_failures += 1;
    } else {
        stats.csum_completed += 1;
    }
    pkt.meta.offload = sluice_packet::meta::Offload::NONE;
    push_then_enqueue(pkt, header, sport, idx, pool, out, stats, now_us)
}

/// Encapsulates one packet and queues it for port `idx` (or frees it,
/// when it would be too long for IPv4 or for the port's MTU).
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
) -> Encap {
    let fate = if !tunnel::push(&mut pkt, header, sport) {
        Encap::TooLong
    } else if !sluice_port::fits_mtu(&pkt, out.ports[idx].mtu) {
        Encap::MtuExceeded
    } else {
        out.enqueue(idx, pkt, pool, stats, now_us);
        return Encap::Sent;
    };
    pool.free(pkt);
    fate
}
