//! A select group chosen per packet by the datapath, as Open vSwitch's
//! `dp_hash` selection method does (OVS hashes in the datapath and
//! recirculates; Sluice needs no second pass): the translation runs every
//! bucket the group's slot table can pick and emits one action list per
//! bucket, and the datapath hashes each packet
//! ([`crate::group::SlotTable::slot_of`]: OVS's `dp_hash`, or Sluice's
//! own hash where OVS uses its default method) and runs the list of its slot. So the
//! megaflow does not depend on the hashed fields: one megaflow serves every
//! flow through the group, where choosing at translation made one per flow.
//!
//! It applies when every bucket is a plain clone (header sets, outputs,
//! meters, controller) and goes through no rule or group of its own (their
//! counters could not be credited per packet); otherwise, and for a second
//! select in the same translation, the bucket is chosen at translation
//! from the same hash and slot table, so a flow takes the same bucket
//! either way.

use std::sync::Arc;

use sluice_packet::key::FlowKey;

use super::Ctx;
use crate::dpaction::{DpAction, Select};
use crate::group::{Group, SlotTable};

/// A select group whose lists wait for the end of the translation: the
/// actions before it (`..at`) and after it go around each bucket's.
#[derive(Debug)]
pub(super) struct Pending {
    group: u32,
    at: usize,
    slots: Arc<SlotTable>,
    lists: Vec<(u32, Vec<DpAction>)>,
    counters: Vec<Arc<crate::table::Rule>>,
}

/// Datapath actions a bucket's list may hold: those that change no state
/// the translation tracks for later commits (tags, encapsulations, ARP).
fn plain(a: &DpAction) -> bool {
    matches!(
        a,
        DpAction::Output(_)
            | DpAction::Controller(_)
            | DpAction::Meter(_)
            | DpAction::HeldMeter(_)
            | DpAction::SetEthSrc(_)
            | DpAction::SetEthDst(_)
            | DpAction::SetIpv4Src(..)
            | DpAction::SetIpv4Dst(..)
            | DpAction::SetIpv6Src(..)
            | DpAction::SetIpv6Dst(..)
            | DpAction::SetIpv6Label(_)
            | DpAction::SetIpTos { .. }
            | DpAction::SetIpTtl(_)
            | DpAction::SetTpSrc(_)
            | DpAction::SetTpDst(_)
            | DpAction::SetIcmpType(_)
            | DpAction::SetIcmpCode(_)
            | DpAction::SetNd(_)
    )
}

/// The translation state a bucket run changes, to put back.
#[derive(Clone, Copy)]
pub(super) struct Snapshot {
    flow: FlowKey,
    dirty: FlowKey,
    vlan_origin: [Option<usize>; 2],
    base: ([u16; 2], [u16; 2], [Option<usize>; 2]),
    vlans_touched: bool,
    arp_base: FlowKey,
    reason: Option<super::XlateDrop>,
}

impl Ctx<'_, '_> {
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            flow: self.flow,
            dirty: self.dirty,
            vlan_origin: self.vlan_origin,
            base: (self.base_tci, self.base_tpid, self.base_origin),
            vlans_touched: self.vlans_touched,
            arp_base: self.arp_base,
            reason: self.reason,
        }
    }

    pub(super) fn restore(&mut self, s: Snapshot) {
        self.flow = s.flow;
        self.dirty = s.dirty;
        self.vlan_origin = s.vlan_origin;
        (self.base_tci, self.base_tpid, self.base_origin) = s.base;
        self.vlans_touched = s.vlans_touched;
        self.arp_base = s.arp_base;
        self.reason = s.reason;
    }

    /// Emits select group `g` as a per-packet choice over slot table `t`;
    /// false (nothing changed) when it cannot be one.
    pub(super) fn select_in_datapath(&mut self, g: &Group, t: &Arc<SlotTable>, table: u8) -> bool {
        if self.select.is_some() || self.frozen.is_some() || self.error.is_some() || self.forks > 0
        {
            return false;
        }
        let buckets = &t.buckets;
        if buckets.len() < 2
            || buckets.iter().any(|&b| {
                g.buckets[b as usize]
                    .actions
                    .iter()
                    .any(super::encap::reshapes)
            })
        {
            return false;
        }
        // What to put back if a bucket turns out not to be plain.
        let saved = self.snapshot();
        let (acts0, rules0, outputs0, wc0) = (
            self.out.actions.len(),
            self.out.rules.len(),
            self.out.outputs,
            self.out.wc,
        );
        let trace0 = self.out.trace.as_ref().map_or(0, Vec::len);
        self.commit();
        let at = self.out.actions.len();
        let base = (
            self.base_tci,
            self.base_tpid,
            self.base_origin,
            self.arp_base,
        );
        let mut changed = FlowKey::default();
        let mut lists = Vec::with_capacity(buckets.len());
        self.group_depth += 1;
        let mut ok = true;
        for &b in buckets {
            let bucket = &g.buckets[b as usize];
            if self.out.trace.is_some() {
                self.note(
                    self.depth,
                    &format!(
                        "group {} bucket {b} (chosen per packet): {}",
                        g.id,
                        crate::action::format_list(&bucket.actions)
                    ),
                );
            }
            self.run_bucket(&bucket.actions, table);
            changed.or_assign(&self.dirty);
            self.dirty = FlowKey::default();
            (
                self.base_tci,
                self.base_tpid,
                self.base_origin,
                self.arp_base,
            ) = base;
            let list: Vec<DpAction> = self.out.actions.drain(at..).collect();
            if self.error.is_some()
                || self.frozen.is_some()
                || self.out.rules.len() != rules0
                || !list.iter().all(plain)
            {
                ok = false;
                break;
            }
            lists.push((u32::from(b), list));
        }
        self.group_depth -= 1;
        if !ok {
            self.restore(saved);
            self.error = None;
            self.frozen = None;
            self.out.actions.truncate(acts0);
            self.out.rules.truncate(rules0);
            self.out.outputs = outputs0;
            self.out.wc = wc0;
            if let Some(tr) = &mut self.out.trace {
                tr.truncate(trace0);
            }
            return false;
        }
        // Whatever a bucket changed is set back before the next output.
        self.dirty = changed;
        if self.out.trace.is_some() {
            let b = t.buckets[t.variant_of(&self.flow)];
            self.note(
                self.depth,
                &format!("group {}: this packet's hash picks bucket {b}", g.id),
            );
        }
        self.select = Some(Pending {
            group: g.id,
            at,
            slots: Arc::clone(t),
            counters: buckets
                .iter()
                .map(|&b| Arc::clone(&g.buckets[b as usize].counter))
                .collect(),
            lists,
        });
        true
    }

    /// Puts the actions around a pending select's lists: the whole list
    /// becomes one [`DpAction::Select`].
    pub(super) fn finish_select(&mut self) {
        let Some(p) = self.select.take() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let suffix = self.out.actions.split_off(p.at.min(self.out.actions.len()));
        let prefix = std::mem::take(&mut self.out.actions);
        let variants = p
            .lists
            .into_iter()
            .map(|(b, list)| {
                let whole: Arc<[DpAction]> = prefix
                    .iter()
                    .cloned()
                    .chain(list)
                    .chain(suffix.iter().cloned())
                    .collect();
                (b, whole)
            })
            .collect();
        self.out.actions.push(DpAction::Select(Arc::new(Select {
            group: p.group,
            slots: p.slots,
            variants,
            counters: p.counters,
        })));
    }
}

/// The action list a packet with key `key` runs: `acts` itself, or the
/// variant of a [`DpAction::Select`] its hash picks.
pub fn resolve<'a>(acts: &'a [DpAction], key: &FlowKey) -> &'a [DpAction] {
    match acts {
        [DpAction::Select(sel)] => {
            let v = sel.slots.variant_of(key);
            sel.variants.get(v).map_or(&[], |(_, l)| l)
        }
        _ => acts,
    }
}
