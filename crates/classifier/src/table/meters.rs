//! The meter table of a rule set ([`crate::meter`]): meters added,
//! changed and deleted as new versions, and the rules that use them.

use std::sync::Arc;

use super::{doomed, Rule, RuleSet};
use crate::action::Action;
use crate::meter::{Meter, MeterError, METER_ALL};

impl RuleSet {
    /// Meter `id`.
    pub fn meter(&self, id: u32) -> Option<&Arc<Meter>> {
        self.meters.get(&id)
    }

    /// Every meter, by id.
    pub fn meters(&self) -> impl Iterator<Item = &Arc<Meter>> {
        self.meters.values()
    }

    /// A meter that actions use and that does not exist.
    pub fn missing_meter(&self, actions: &[Action]) -> Option<u32> {
        crate::action::meters_of(actions).find(|m| !self.meters.contains_key(m))
    }

    /// The rules that use meter `id`. O(rules).
    pub fn meter_users(&self, id: u32) -> impl Iterator<Item = &Arc<Rule>> {
        self.iter()
            .filter(move |r| crate::action::meters_of(&r.actions).any(|m| m == id))
    }

    /// Adds meter `m` (METER_MOD ADD). A new version.
    pub fn add_meter(&mut self, m: Meter) -> Result<(), MeterError> {
        if self.meters.contains_key(&m.id) {
            return Err(MeterError::Exists);
        }
        self.meters.insert(m.id, Arc::new(m));
        self.version += 1;
        Ok(())
    }

    /// Replaces meter `m.id` (METER_MOD MODIFY): full buckets, counters
    /// from zero. A new version.
    pub fn modify_meter(&mut self, m: Meter) -> Result<(), MeterError> {
        if !self.meters.contains_key(&m.id) {
            return Err(MeterError::Unknown);
        }
        self.meters.insert(m.id, Arc::new(m));
        self.version += 1;
        Ok(())
    }

    /// Deletes meter `id` ([`METER_ALL`]: every meter) and
    /// the rules that use it, as OpenFlow says; a meter that does not
    /// exist is no error. Returns the rules removed.
    pub fn delete_meter(&mut self, id: u32) -> Vec<Arc<Rule>> {
        let gone = doomed(&self.meters, id, METER_ALL);
        if gone.is_empty() {
            return Vec::new();
        }
        for m in &gone {
            self.meters.remove(m);
        }
        self.retire_users(|r| crate::action::meters_of(&r.actions).any(|m| gone.contains(&m)))
    }
}
