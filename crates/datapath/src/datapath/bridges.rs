//! Several bridges on one datapath: bridge 0's rules are the datapath's
//! own (`Datapath::rules`, as with one bridge); the others' are kept here
//! by index, each with what the datapath tracks of its rules (timeouts,
//! rules its `learn` actions added, its MAC table's versions). Ports are
//! numbered in one space ([`sluice_classifier::xlate::bridges`]).

use std::sync::Arc;

use sluice_classifier::table::learned::Learned;
use sluice_classifier::{BridgeView, RuleSet};

use super::Datapath;

/// What the datapath keeps of a bridge besides its rules.
#[derive(Debug, Default)]
pub(crate) struct BridgeState {
    pub have_timeouts: bool,
    /// Rules this thread learned that the control plane has not yet
    /// given back in a version.
    pub learned_mine: Vec<Learned>,
    /// The MAC table's port modes' and entries' versions last seen.
    pub bridge_seen: u64,
    pub macs_seen: u64,
}

/// `rules` with the rules this thread learned that the control plane had
/// not taken when it made them (`mine`, [`RuleSet::keep_learned`]).
pub(super) fn with_mine(rules: Arc<RuleSet>, mine: &mut Vec<Learned>) -> Arc<RuleSet> {
    if mine.is_empty() {
        return rules;
    }
    let mut next = (*rules).clone();
    if next.keep_learned(mine) {
        Arc::new(next)
    } else {
        rules
    }
}

impl Datapath {
    /// Installs bridge `bridge`'s rules (`None`: the bridge is gone; its
    /// ports must be gone first). Bridge 0 is [`Datapath::set_rules`]'s.
    /// In force when this returns, as `set_rules`.
    pub fn set_bridge_rules(&mut self, bridge: u16, rules: Option<Arc<RuleSet>>) {
        let k = bridge as usize;
        if bridge == 0 {
            if let Some(r) = rules {
                self.set_rules(r);
            }
            return;
        }
        if self.extra_state.len() <= k {
            self.extra_state.resize_with(k + 1, BridgeState::default);
        }
        match rules {
            Some(r) => {
                let r = with_mine(r, &mut self.extra_state[k].learned_mine);
                self.install_bridge_rules(bridge, r);
            }
            None => {
                if let Some(slot) = self.extra.get_mut(k) {
                    *slot = None;
                }
                self.extra_state[k] = BridgeState::default();
                if self.extra.iter().all(Option::is_none) {
                    self.extra.clear();
                }
                self.epoch += 1;
                self.refresh_views();
            }
        }
    }

    /// Puts bridge `bridge`'s (not 0's) rules in force as they are.
    pub(super) fn install_bridge_rules(&mut self, bridge: u16, rules: Arc<RuleSet>) {
        let k = bridge as usize;
        if self.extra.len() <= k {
            self.extra.resize_with(k + 1, || None);
        }
        if self.extra_state.len() <= k {
            self.extra_state.resize_with(k + 1, BridgeState::default);
        }
        self.extra_state[k].have_timeouts = rules.has_timeouts();
        let ports = BridgeView::ports_of(bridge, &self.fwd_numbers, &rules);
        let new = self.extra[k].is_none();
        self.extra[k] = Some(BridgeView { rules, ports });
        self.epoch += 1;
        if new {
            // Bridge 0's ports are now those of its part of the space.
            self.refresh_views();
        }
    }

    /// The rules of bridge `bridge`, if the datapath has it.
    pub fn bridge_rules(&self, bridge: u16) -> Option<&Arc<RuleSet>> {
        if bridge == 0 {
            return Some(&self.rules);
        }
        self.extra
            .get(bridge as usize)
            .and_then(Option::as_ref)
            .map(|b| &b.rules)
    }

    /// Recomputes every bridge's port list from the datapath's ports and
    /// the bridges' patch ports.
    pub(super) fn refresh_views(&mut self) {
        self.root_ports =
            BridgeView::first_ports(&self.fwd_numbers, &self.rules, self.extra.is_empty());
        for (k, v) in self.extra.iter_mut().enumerate() {
            if let Some(v) = v {
                v.ports = BridgeView::ports_of(k as u16, &self.fwd_numbers, &v.rules);
            }
        }
    }

    /// The other bridges' rule timeouts, as bridge 0's in housekeeping.
    pub(super) fn expire_extra(&mut self, now_us: u64) {
        if !self.extra_state.iter().any(|s| s.have_timeouts)
            || now_us.saturating_sub(self.extra_expire_us) < super::EXPIRE_INTERVAL_US
        {
            return;
        }
        self.extra_expire_us = now_us;
        self.credit_rules();
        for k in 1..self.extra.len() {
            if !self.extra_state[k].have_timeouts {
                continue;
            }
            let Some(v) = &self.extra[k] else { continue };
            let mut next = (*v.rules).clone();
            if !next.expire(now_us).is_empty() {
                self.install_bridge_rules(k as u16, Arc::new(next));
            }
        }
    }
}
