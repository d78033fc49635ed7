//! The `ct` action: each packet through the connection tracker (its
//! fragments held until their datagram is whole), the results kept for the
//! actions after it and the next pass.

use sluice_conntrack::{CtRequest, CtResult};
use sluice_packet::key::{CS_INVALID, CS_TRACKED, FRAG_ANY};
use sluice_packet::FlowKey;

use super::{keeps_packet, keeps_tuple, Ctx, Fates, Step};

/// A `ct` action on `pkts`.
pub(super) fn track(
    req: &CtRequest,
    step: &Step<'_>,
    pkts: &[u8],
    cx: &mut Ctx<'_>,
    f: &mut Fates,
) {
    let Step {
        acts,
        ai,
        drop,
        is_last,
    } = *step;
    let ct = cx.rules.conntrack();
    let now_ms = ct.now_ms();
    // Whether an action before this one changed the packet
    // (a header rewrite, a translating ct): then it is parsed
    // again (its key is the pass's).
    let changed = cx.recirc.reparse || !acts[..ai].iter().all(keeps_packet);
    // Whether the key still says what the tracker reads (a router's new
    // MACs and TTL before the ct do not make it parse the packet again).
    let retuple = cx.recirc.reparse || !acts[..ai].iter().all(keeps_tuple);
    for &i in pkts {
        let bit = 1u32 << i;
        if f.skip & bit != 0 {
            continue;
        }
        let Some(p) = cx.slots[i as usize].as_mut() else {
            continue;
        };
        // The state an earlier ct gave it (this pass's, or
        // the one its key came in with).
        let prev = if cx.recirc.ct_set & bit != 0 {
            cx.recirc.ct[i as usize]
        } else {
            CtResult::of_key(&cx.keys[i as usize])
        };
        if cx.keys[i as usize].nw_frag & FRAG_ANY != 0 {
            // A fragment: held until its datagram is whole
            // (then tracked as one, its fragments going on
            // with the actions after this one), or tracked
            // as it is when it is none to hold.
            // (Not if its fate is settled already: a copy
            // carries it, or an output before this one sent it.)
            let fate = (cx.counted | cx.recirc.carried | f.sent | f.to_ctl) & bit == 0;
            let frag = crate::fragments::Fragment {
                key: &cx.keys[i as usize],
                reparse: changed,
                prev: &prev,
                fate,
            };
            let rest = crate::fragments::Rest {
                acts: &acts[ai + 1..],
                drop,
            };
            if crate::fragments::hold(ct, p, &frag, req, now_ms, &rest, &mut cx.recirc.released) {
                if let Some(p) = cx.slots[i as usize].take() {
                    cx.pool.free(p);
                }
                f.skip |= bit;
                if fate {
                    f.held |= bit;
                }
                continue;
            }
        }
        if req.nat.is_some() && p.meta.offload.needs_csum() {
            // Translation updates checksums as they are: a
            // partial one is completed first.
            let _ = sluice_packet::offload::complete_csum(p);
        }
        let r = if !retuple {
            let meta = p.meta;
            ct.process(
                p.data_mut(),
                &meta,
                &cx.keys[i as usize],
                &prev,
                req,
                now_ms,
            )
        } else {
            let mut meta = p.meta;
            let mut key = FlowKey::default();
            match sluice_packet::extract::extract(p.data(), meta.in_port, &mut meta, &mut key) {
                Ok(()) => ct.process(p.data_mut(), &meta, &key, &prev, req, now_ms),
                Err(_) => CtResult {
                    zone: req.zone,
                    ..CtResult::default()
                },
            }
        };
        // Tracked and not invalid: its checksums were summed and right
        // (or taken as right before), and the tracker's own rewrites
        // (NAT) keep them so. A partial checksum was not summed.
        if r.state & CS_TRACKED != 0 && r.state & CS_INVALID == 0 && !p.meta.offload.needs_csum() {
            p.meta.csum_ok = true;
        }
        cx.recirc.ct[i as usize] = r;
        cx.recirc.ct_set |= bit;
        if is_last {
            if let Some(p) = cx.slots[i as usize].take() {
                cx.pool.free(p);
            }
            f.ct_end |= bit;
        }
    }
    if ct.ipf().held() != 0 {
        // As OVS, a `ct` sends on one expired list of
        // fragments (`+inv`) with its own packets.
        let rest = crate::fragments::Rest {
            acts: &acts[ai + 1..],
            drop,
        };
        crate::fragments::expire(ct, now_ms, &rest, &mut cx.recirc.released, cx.stats);
    }
}
