//! The group table of a rule set ([`crate::group`]): groups checked as
//! they are added or changed, and the rules that send to them.

use std::sync::Arc;

use super::{doomed, Rule, RuleSet};
use crate::action::Action;
use crate::group::{Group, GroupError, GROUP_ALL, GROUP_ANY, MAX_GROUP_DEPTH};

/// The group table of a rule set: its groups, checked as they are added
/// or changed, and the rules that send to them.
impl RuleSet {
    /// Group `id`, if it exists.
    pub fn group(&self, id: u32) -> Option<&Arc<Group>> {
        self.groups.get(&id)
    }

    /// A group that actions (a rule's, its write-actions included) send
    /// to and that does not exist.
    pub fn missing_group(&self, actions: &[Action]) -> Option<u32> {
        crate::action::groups_of(actions).find(|g| !self.groups.contains_key(g))
    }

    /// The rules that send to group `id`. O(rules).
    pub fn group_users(&self, id: u32) -> impl Iterator<Item = &Arc<Rule>> {
        self.iter()
            .filter(move |r| crate::action::groups_of(&r.actions).any(|g| g == id))
    }

    /// Every group, by id.
    pub fn groups(&self) -> impl Iterator<Item = &Arc<Group>> {
        self.groups.values()
    }

    /// Whether following group references from `from` reaches `target`
    /// (`target` itself standing for the group being changed, `with`).
    fn reaches(&self, from: u32, target: u32, with: &Group, depth: u32) -> bool {
        if from == target {
            return true;
        }
        if depth > MAX_GROUP_DEPTH {
            return true;
        }
        let Some(g) = self.groups.get(&from) else {
            return false;
        };
        let g: &Group = if g.id == with.id { with } else { g };
        g.refers_to()
            .chain(g.buckets.iter().map(|b| b.watch_group))
            .filter(|&n| n != GROUP_ANY)
            .any(|n| self.reaches(n, target, with, depth + 1))
    }

    fn check_group(&self, g: &Group) -> Result<(), GroupError> {
        g.check()?;
        for n in g.refers_to() {
            if !self.groups.contains_key(&n) {
                return Err(GroupError::Unknown);
            }
        }
        let refs = g
            .refers_to()
            .chain(g.buckets.iter().map(|b| b.watch_group))
            .filter(|&n| n != GROUP_ANY);
        for n in refs {
            if self.reaches(n, g.id, g, 0) {
                return Err(GroupError::Loop);
            }
        }
        Ok(())
    }

    /// Adds group `g` (OpenFlow GROUP_MOD ADD): refused if its id exists,
    /// its buckets do not suit its type, or they name groups that do not
    /// exist or lead back to it. A new version.
    pub fn add_group(&mut self, g: Group) -> Result<(), GroupError> {
        if self.groups.contains_key(&g.id) {
            return Err(GroupError::Exists);
        }
        self.check_group(&g)?;
        self.put_group(g);
        Ok(())
    }

    /// Puts checked group `g` in place (a new version), the tracker's
    /// memory made ready first if its buckets track connections.
    fn put_group(&mut self, g: Group) {
        if g.buckets
            .iter()
            .any(|b| crate::action::tracks_connections(&b.actions))
        {
            self.conntrack.make_ready();
        }
        self.groups.insert(g.id, Arc::new(g));
        self.version += 1;
    }

    /// Replaces group `g.id`'s type and buckets (GROUP_MOD MODIFY); its
    /// counters restart, as in OVS. A new version.
    pub fn modify_group(&mut self, g: Group) -> Result<(), GroupError> {
        if !self.groups.contains_key(&g.id) {
            return Err(GroupError::Unknown);
        }
        self.check_group(&g)?;
        self.put_group(g);
        Ok(())
    }

    /// Deletes group `id` ([`GROUP_ALL`]: every group) and, as OpenFlow
    /// says, every rule whose actions send to a deleted group; a group
    /// that does not exist is no error. Returns the rules removed.
    pub fn delete_group(&mut self, id: u32) -> Vec<Arc<Rule>> {
        let gone = doomed(&self.groups, id, GROUP_ALL);
        if gone.is_empty() {
            return Vec::new();
        }
        for g in &gone {
            self.groups.remove(g);
        }
        self.retire_users(|r| crate::action::groups_of(&r.actions).any(|g| gone.contains(&g)))
    }
}
