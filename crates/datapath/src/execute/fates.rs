//! What became of each packet of a sub-batch as its actions ran, a mask
//! per outcome, and the count of each packet's fate once they are done:
//! forwarded, to the controller, or dropped with one reason.

use sluice_classifier::XlateDrop;

use super::Ctx;
use crate::stats::DropReason;

/// A bit per packet (by its index in the batch) for each outcome.
#[derive(Default)]
pub(crate) struct Fates {
    /// Sent by an output.
    pub sent: u32,
    /// Queued for the controller.
    pub to_ctl: u32,
    /// No copy could be made.
    pub no_buf: u32,
    /// Could not recirculate (the queue was full); those whose fate a
    /// queued copy carries are `recirc.carried`.
    pub recirc_full: u32,
    /// Taken by a meter's drop band.
    pub metered: u32,
    /// Passed over by later actions: those a meter dropped, and the
    /// fragments a `ct` held.
    pub skip: u32,
    /// Fragments a `ct` held whose fate is theirs.
    pub held: u32,
    /// Consumed by a final `ct` (no output after it); the tracker's
    /// results are in `recirc.ct`, valid per `recirc.ct_set`.
    pub ct_end: u32,
    /// Tunnel packets refused, by reason.
    pub tnl_header: u32,
    pub tnl_csum: u32,
    pub tnl_port: u32,
    pub tnl_long: u32,
    pub tnl_mtu: u32,
    /// Packet-ins not made: the controller queue full, the rate limit,
    /// the upcall budget, the controller meter, a port that sends none.
    pub ctl_full: u32,
    pub ctl_rate: u32,
    pub ctl_budget: u32,
    pub ctl_metered: u32,
    pub ctl_port: u32,
    /// Handed to a branch by a final `check_pkt_len`, their fate with it.
    pub branched: u32,
}

impl Fates {
    /// Counts the fate of each packet of `pkts` (those of `cx.counted`
    /// and the branched excepted): the first outcome that applies.
    pub fn settle(&self, pkts: &[u8], drop: Option<XlateDrop>, cx: &mut Ctx<'_>) {
        let f = self;
        for &i in pkts {
            let bit = 1u32 << i;
            if (cx.counted | f.branched) & bit != 0 {
                continue;
            }
            if f.held & bit != 0 {
                // Its fate comes with its datagram's.
                cx.stats.ct_frags_held += 1;
                continue;
            }
            if f.metered & bit != 0 {
                cx.stats.dropped[DropReason::MeterDrop.index()] += 1;
                continue;
            }
            if cx.recirc.carried & bit != 0 {
                if (f.sent | f.to_ctl) & bit != 0 {
                    // Its fate is here after all: the copy's is not.
                    cx.recirc.next.fates[cx.recirc.carrier[i as usize] as usize] = false;
                } else {
                    continue;
                }
            }
            if f.sent & bit != 0 {
                cx.stats.forwarded += 1;
            } else if f.to_ctl & bit != 0 {
                cx.stats.to_controller += 1;
            } else if f.ctl_metered & bit != 0 {
                cx.stats.dropped[DropReason::MeterDrop.index()] += 1;
            } else if f.ctl_full & bit != 0 {
                cx.stats.dropped[DropReason::ControllerQueueFull.index()] += 1;
            } else if f.ctl_rate & bit != 0 {
                cx.stats.dropped[DropReason::ControllerRateLimit.index()] += 1;
            } else if f.ctl_budget & bit != 0 {
                cx.stats.dropped[DropReason::UpcallBudget.index()] += 1;
            } else if f.ctl_port & bit != 0 {
                cx.stats.dropped[DropReason::PortNoPacketIn.index()] += 1;
            } else if f.no_buf & bit != 0 {
                cx.stats.dropped[DropReason::NoBuffer.index()] += 1;
            } else if f.recirc_full & bit != 0 {
                cx.stats.dropped[DropReason::RecircLimit.index()] += 1;
            } else if f.tnl_header & bit != 0 {
                cx.stats.dropped[DropReason::TunnelBadHeader.index()] += 1;
            } else if f.tnl_csum & bit != 0 {
                cx.stats.dropped[DropReason::TunnelBadChecksum.index()] += 1;
            } else if f.tnl_port & bit != 0 {
                cx.stats.dropped[DropReason::TunnelNoPort.index()] += 1;
            } else if f.tnl_long & bit != 0 {
                cx.stats.dropped[DropReason::TunnelTooLong.index()] += 1;
            } else if f.tnl_mtu & bit != 0 {
                cx.stats.dropped[DropReason::TunnelMtuExceeded.index()] += 1;
            } else if f.ct_end & bit != 0 {
                // Tracked (committed, maybe), then no output.
                cx.stats.dropped[DropReason::Xlate(drop.unwrap_or(XlateDrop::NoOutput)).index()] +=
                    1;
            } else {
                // No output took it: the reason the translation gave (a TTL
                // that ran out before a packet-in nobody asked for), or the
                // port it named is gone.
                let why = drop.unwrap_or(XlateDrop::NoSuchPort);
                cx.stats.dropped[DropReason::Xlate(why).index()] += 1;
            }
            debug_assert!(
                cx.slots.is_empty_at(i as usize),
                "every packet leaves the batch"
            );
        }
    }
}
