//! Translation of `group:N`: a group's live buckets as its type says,
//! each a clone of the packet ([`crate::group`]).

use std::sync::Arc;

use super::{encap, Ctx, XlateDrop};
use crate::action::Action;
use crate::group::GroupType;

impl Ctx<'_, '_> {
    /// Runs group `id` ([`crate::group`]): its live buckets as its type
    /// says, each on the packet as it was when the group was reached (as
    /// OVS's xlate_group_bucket: what a bucket changes is undone for the
    /// next one and for the actions after the group).
    pub(super) fn group(&mut self, id: u32, table: u8) {
        let rules = self.env.rules;
        let Some(g) = rules.group(id) else {
            self.note(self.depth, &format!(">> no group {id}"));
            self.reason = Some(XlateDrop::NoSuchGroup);
            return;
        };
        if self.group_depth >= crate::group::MAX_GROUP_DEPTH {
            self.error = Some(XlateDrop::NoSuchGroup);
            return;
        }
        self.out.rules.push(Arc::clone(&g.counter));
        let chosen: Vec<usize> = match g.kind {
            GroupType::All => (0..g.buckets.len())
                .filter(|&i| self.bucket_live(&g.buckets[i], 0))
                .collect(),
            GroupType::Indirect => (0..g.buckets.len().min(1)).collect(),
            GroupType::FastFailover => (0..g.buckets.len())
                .find(|&i| self.bucket_live(&g.buckets[i], 0))
                .into_iter()
                .collect(),
            GroupType::Select => match g.slots(
                |b| self.bucket_live(b, 0),
                self.env.rules.modes().select_hash == crate::table::SelectHash::Spread,
            ) {
                Some(t) if self.select_in_datapath(g, &t, table) => return,
                Some(t) => {
                    self.unwildcard_select_fields();
                    vec![t.bucket(t.slot_of(&self.flow))]
                }
                None => Vec::new(),
            },
        };
        if chosen.is_empty() {
            self.note(self.depth, &format!(">> group {id}: no live bucket"));
        }
        self.group_depth += 1;
        for i in chosen {
            if self.error.is_some() {
                break;
            }
            let b = &g.buckets[i];
            if self.out.trace.is_some() {
                self.note(
                    self.depth,
                    &format!(
                        "group {id} bucket {i}: {}",
                        crate::action::format_list(&b.actions)
                    ),
                );
            }
            self.out.rules.push(Arc::clone(&b.counter));
            if b.actions.iter().any(encap::reshapes) {
                // A bucket is a clone, and these change the packet's shape
                // in a way no later set undoes: the bucket runs on a copy
                // in a pass of its own.
                self.recirc_bucket(&b.actions, table);
            } else {
                self.run_bucket(&b.actions, table);
            }
        }
        self.group_depth -= 1;
    }

    /// Runs a bucket's actions and undoes what they change in the flow:
    /// the next output sets the packet back (a bucket is a clone).
    pub(super) fn run_bucket(&mut self, actions: &[Action], table: u8) {
        self.commit();
        let (flow, origin) = (self.flow, self.vlan_origin);
        self.actions(actions, table);
        if self.frozen.take().is_some() {
            // A resubmit from the bucket reached an action that needs the
            // packet parsed again, after changes a clone cannot take back.
            self.note(
                self.depth,
                ">> a group bucket cannot recirculate: the packet is dropped",
            );
            self.error = Some(XlateDrop::Recirc);
            return;
        }
        let changed = {
            let mut d = flow;
            for (w, e) in d.words_mut().iter_mut().zip(self.flow.words()) {
                *w ^= e;
            }
            d
        };
        if changed.vlan_tci != [0; 2] || changed.vlan_tpid != [0; 2] {
            self.vlans_touched = true;
        }
        self.dirty.or_assign(&changed);
        self.flow = flow;
        self.vlan_origin = origin;
    }

    /// Whether a bucket is live: its watch port is a port of the switch
    /// and its watch group has a live bucket (nothing watched: live).
    pub(super) fn bucket_live(&self, b: &crate::group::Bucket, depth: u32) -> bool {
        use crate::group::{GROUP_ANY, PORT_ANY};
        if b.watch_port != PORT_ANY && self.env.ports.binary_search(&b.watch_port).is_err() {
            return false;
        }
        if b.watch_group != GROUP_ANY {
            if depth >= crate::group::MAX_GROUP_DEPTH {
                return false;
            }
            let Some(g) = self.env.rules.group(b.watch_group) else {
                return false;
            };
            return g.buckets.iter().any(|c| self.bucket_live(c, depth + 1));
        }
        true
    }

    /// A select group chosen at translation: every field its hash may
    /// read (OVS's 5-tuple and symmetric hashes, or Sluice's own, whose
    /// fallback for other protocols reads the Ethernet header and the
    /// VLAN) is un-wildcarded.
    pub(super) fn unwildcard_select_fields(&mut self) {
        let f = self.flow;
        let w = &mut self.out.wc;
        w.dl_src = [0xff; 6];
        w.dl_dst = [0xff; 6];
        w.dl_type = 0xffff;
        w.vlan_tci = [0x1fff; 2];
        if f.is_arp() {
            w.nw_src = u32::MAX;
            w.nw_dst = u32::MAX;
            w.nw_proto = 0xff;
        }
        if f.is_ip() {
            w.nw_proto = 0xff;
            w.nw_frag = 0xff;
            if f.is_ipv4() {
                w.nw_src = u32::MAX;
                w.nw_dst = u32::MAX;
            } else {
                w.ipv6_src = [0xff; 16];
                w.ipv6_dst = [0xff; 16];
            }
            w.tp_src = 0xffff;
            w.tp_dst = 0xffff;
        }
    }
}
