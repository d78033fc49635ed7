//! The rules of one group of a subtable (one match), best first. A group
//! of one rule, by far the most common, holds the rule's own pointer (no
//! allocation of its own); two or more are the best and the rest behind
//! one shared pointer, so a lookup reaches the best rule in one load from
//! the group either way.

use std::sync::Arc;

use super::order_key;
use crate::rule::{Rule, RuleId};

/// A group's rules (none outside the last level).
#[derive(Debug, Clone, Default)]
pub(super) enum Rules {
    #[default]
    None,
    One(Arc<Rule>),
    /// Two or more.
    Many(Arc<List>),
}

#[derive(Debug, Clone)]
pub(super) struct List {
    best: Arc<Rule>,
    /// The others, best first (never empty).
    rest: Vec<Arc<Rule>>,
}

impl Rules {
    /// The best rule.
    pub(super) fn first(&self) -> Option<&Arc<Rule>> {
        match self {
            Rules::None => None,
            Rules::One(r) => Some(r),
            Rules::Many(l) => Some(&l.best),
        }
    }

    /// Best first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Rule>> {
        let rest = match self {
            Rules::Many(l) => &l.rest[..],
            _ => &[],
        };
        self.first().into_iter().chain(rest)
    }

    /// Puts `rule` in the place of the one with its priority and match
    /// (OpenFlow's "identical"), which is returned as `Err`, or else in
    /// best-first order (priority, then age).
    pub(super) fn put(&mut self, rule: &Arc<Rule>) -> Result<(), Arc<Rule>> {
        let identical = |r: &Arc<Rule>| r.priority == rule.priority && r.matcher == rule.matcher;
        let list = match self {
            Rules::None => {
                *self = Rules::One(Arc::clone(rule));
                return Ok(());
            }
            Rules::One(r) if identical(r) => return Err(std::mem::replace(r, Arc::clone(rule))),
            Rules::One(r) => {
                let (best, other) = if order_key(rule) < order_key(r) {
                    (Arc::clone(rule), Arc::clone(r))
                } else {
                    (Arc::clone(r), Arc::clone(rule))
                };
                *self = Rules::Many(Arc::new(List {
                    best,
                    rest: vec![other],
                }));
                return Ok(());
            }
            Rules::Many(list) => Arc::make_mut(list),
        };
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
        let list = match self {
            Rules::None => return None,
            Rules::One(r) if r.id == id => {
                return match std::mem::take(self) {
                    Rules::One(r) => Some(r),
                    _ => None,
                };
            }
            Rules::One(_) => return None,
            Rules::Many(list) => list,
        };
        let gone = if list.best.id == id {
            let list = Arc::make_mut(list);
            let next = list.rest.remove(0);
            std::mem::replace(&mut list.best, next)
        } else {
            let pos = list.rest.iter().position(|r| r.id == id)?;
            Arc::make_mut(list).rest.remove(pos)
        };
        if list.rest.is_empty() {
            *self = Rules::One(Arc::clone(&list.best));
        }
        Some(gone)
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
        assert!(matches!(rs, Rules::Many(_)));
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
        // One left: held without a list.
        assert!(matches!(&rs, Rules::One(r) if r.id == 1));
        assert_eq!(rs.put(&rule(6, 5, "ip")).map_err(|r| r.id), Ok(()));
        assert_eq!(ids(&rs), [1, 6]);
        assert_eq!(rs.remove(1).map(|r| r.id), Some(1));
        assert_eq!(rs.remove(1).map(|r| r.id), None);
        assert_eq!(rs.put(&rule(7, 5, "ip")).map_err(|r| r.id), Err(6));
        assert_eq!(rs.remove(7).map(|r| r.id), Some(7));
        assert!(rs.first().is_none() && rs.iter().next().is_none());
    }
}
