//! The rules of one group of a subtable (one match), best first: the best
//! inline and the rest, which a group seldom has, in a list beside it,
//! behind one shared pointer. A group of one rule costs one allocation,
//! a B-tree node copied for a new version copies a pointer per group, and
//! a lookup reaches the best rule in one load from the group.

use std::sync::Arc;

use super::order_key;
use crate::table::{Rule, RuleId};

/// A group's rules (none outside the last level).
#[derive(Debug, Clone, Default)]
pub(super) struct Rules(Option<Arc<List>>);

#[derive(Debug, Clone)]
struct List {
    best: Arc<Rule>,
    /// The others, best first.
    rest: Vec<Arc<Rule>>,
}

impl Rules {
    /// The rules of a new group: `rule` alone.
    pub(super) fn one(rule: Arc<Rule>) -> Self {
        Rules(Some(Arc::new(List {
            best: rule,
            rest: Vec::new(),
        })))
    }

    /// The best rule.
    pub(super) fn first(&self) -> Option<&Arc<Rule>> {
        self.0.as_ref().map(|l| &l.best)
    }

    /// Best first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.0
            .iter()
            .flat_map(|l| std::iter::once(&l.best).chain(&l.rest))
    }

    /// Puts `rule` in the place of the one with its priority and match
    /// (OpenFlow's "identical"), which is returned as `Err`, or else in
    /// best-first order (priority, then age).
    pub(super) fn put(&mut self, rule: &Arc<Rule>) -> Result<(), Arc<Rule>> {
        let Some(list) = self.0.as_mut() else {
            *self = Rules::one(Arc::clone(rule));
            return Ok(());
        };
        let list = Arc::make_mut(list);
        let identical = |r: &Arc<Rule>| r.priority == rule.priority && r.matcher == rule.matcher;
        if identical(&list.best) {
            return Err(std::mem::replace(&mut list.best, Arc::clone(rule)));
        }
        if let Some(same) = list.rest.iter_mut().find(|r| identical(r)) {
            return Err(std::mem::replace(same, Arc::clone(rule)));
        }
        if order_key(rule) < order_key(&list.best) {
            let old = std::mem::replace(&mut list.best, Arc::clone(rule));
            list.rest.insert(0, old);
        } else {
            let pos = list
                .rest
                .partition_point(|x| order_key(x) < order_key(rule));
            list.rest.insert(pos, Arc::clone(rule));
        }
        Ok(())
    }

    /// Removes the rule with this id, if here.
    pub(super) fn remove(&mut self, id: RuleId) -> Option<Arc<Rule>> {
        let list = self.0.as_mut()?;
        if list.best.id == id {
            if list.rest.is_empty() {
                return self.0.take().map(|l| Arc::unwrap_or_clone(l).best);
            }
            let list = Arc::make_mut(list);
            let next = list.rest.remove(0);
            return Some(std::mem::replace(&mut list.best, next));
        }
        let pos = list.rest.iter().position(|r| r.id == id)?;
        Some(Arc::make_mut(list).rest.remove(pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_flow, Require};

    fn rule(id: RuleId, prio: u16, m: &str) -> Arc<Rule> {
        let spec = parse_flow(
            &format!("priority={prio},{m},actions=drop"),
            Require::Actions,
        )
        .expect("a rule");
        Arc::new(crate::table::RuleSet::rule_of(&spec, id, 0))
    }

    fn ids(rs: &Rules) -> Vec<RuleId> {
        rs.iter().map(|r| r.id).collect()
    }

    #[test]
    fn best_first_identical_replaced_removed_to_empty() {
        let mut rs = Rules::default();
        assert!(rs.first().is_none());
        assert!(rs.put(&rule(1, 10, "ip")).is_ok());
        assert!(rs.put(&rule(2, 30, "ip")).is_ok());
        assert!(rs.put(&rule(3, 20, "ip")).is_ok());
        assert!(rs.put(&rule(4, 20, "ip,nw_tos=4")).is_ok());
        // Priority first, then age (id) among equals.
        assert_eq!(ids(&rs), [2, 3, 4, 1]);
        // The identical rule (priority and match) is replaced in place.
        assert_eq!(rs.put(&rule(5, 20, "ip")).map_err(|r| r.id), Err(3));
        assert_eq!(ids(&rs), [2, 5, 4, 1]);
        let shared = rs.clone();
        assert_eq!(rs.remove(2).map(|r| r.id), Some(2));
        assert_eq!(rs.remove(9).map(|r| r.id), None);
        assert_eq!(rs.remove(4).map(|r| r.id), Some(4));
        assert_eq!(ids(&rs), [5, 1]);
        // A copy made before is untouched (a version readers hold).
        assert_eq!(ids(&shared), [2, 5, 4, 1]);
        assert_eq!(rs.remove(5).map(|r| r.id), Some(5));
        assert_eq!(rs.remove(1).map(|r| r.id), Some(1));
        assert!(rs.first().is_none() && rs.iter().next().is_none());
    }
}
