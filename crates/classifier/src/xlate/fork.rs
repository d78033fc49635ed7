//! `check_pkt_larger`: a decision on the packet's length, which is no
//! field of the flow key, so no megaflow could match it. As OVS's
//! `xlate_check_pkt_larger` with a datapath that has `check_pkt_len`, the
//! rest of the action list is translated twice, once with the
//! destination bit 1 (longer packets) and once with it 0, into the two
//! branches of one [`DpAction::CheckPktLen`]; the datapath picks a branch
//! per packet. Each branch ends with the action set run, as OVS's do.
//! After the fork the translation goes on (in the action lists that
//! resubmitted to this one) from the state before it, the fork's
//! destination bit unwritten, as in OVS.
//!
//! Both branches' rules are credited with every packet, and both
//! branches' `learn`s and `fin_timeout`s are kept: what OVS's translation
//! cache holds for the megaflow, from both branches, is what its
//! revalidator credits and redoes.
//!
//! A branch may hold a `ct` (each branch freezes its own state). Not
//! inside a branch: an action that needs the packet parsed again after a
//! pop of MPLS or PBB — the translation fails with `recirculation
//! failed`; and a select group chosen per packet — the group's bucket is
//! chosen at translation instead (by the same hash).

use std::sync::Arc;

use super::Ctx;
use crate::action::Action;
use crate::dpaction::DpAction;
use crate::subfield::Subfield;

impl Ctx<'_, '_> {
    /// `check_pkt_larger(len)->dst` followed by `rest`, the remainder of
    /// its action list (the caller runs nothing of that list after it).
    pub(super) fn check_pkt_larger(&mut self, len: u16, dst: Subfield, rest: &[Action], table: u8) {
        self.commit();
        if self.error.is_some() {
            return;
        }
        let at = self.out.actions.len();
        let saved = (
            self.snapshot(),
            self.icmp_later_base,
            self.action_set.clone(),
            self.stale,
        );
        self.forks += 1;
        let mut branches: [Arc<[DpAction]>; 2] = [Arc::from([]), Arc::from([])];
        for (bit, branch) in [(1u128, 0usize), (0, 1)] {
            if self.out.trace.is_some() {
                let which = if bit == 1 {
                    format!("packets longer than {len} bytes")
                } else {
                    format!("packets of at most {len} bytes")
                };
                self.note(self.depth, &format!("-> {which}: {dst} = {bit}"));
            }
            self.load(dst.field, dst.place(bit), dst.mask());
            self.actions(rest, table);
            self.run_action_set();
            if self.frozen.take().is_some() {
                self.note(
                    self.depth,
                    ">> check_pkt_larger before an action that needs the packet parsed again after a pop: not supported",
                );
                self.error = Some(super::XlateDrop::Recirc);
            }
            branches[branch] = self.out.actions.drain(at..).collect();
            self.forked += branches[branch].len();
            // Why the branch sent nothing, if it did not, outlives it.
            let reason = self.reason;
            let (snap, icmp, set, stale) = saved.clone();
            self.restore(snap);
            (self.icmp_later_base, self.action_set, self.stale) = (icmp, set, stale);
            self.reason = reason.or(self.reason);
            if self.error.is_some() {
                break;
            }
        }
        self.forks -= 1;
        let [gt, le] = branches;
        self.push(DpAction::CheckPktLen { len, gt, le });
    }
}
