//! The one admission test of actions that come to a rule set: from a flow
//! file, `sluice ctl`, an OpenFlow flow-mod or a packet-out. Open vSwitch
//! refuses the same three things at the same places.

use std::fmt;

use super::RuleSet;
use crate::action::Action;
use crate::fields::Field;

/// Why a rule set refuses actions.
#[derive(Clone, Copy)]
pub enum Refusal {
    /// A group they send to does not exist (OpenFlow's `BAD_OUT_GROUP`).
    MissingGroup(u32),
    /// A meter they use does not exist (`METER_UNKNOWN`).
    MissingMeter(u32),
    /// They write a field the rule set keeps read-only, as Open vSwitch
    /// does (`--set-field ovs`; `BAD_SET_TYPE`).
    ReadOnly(&'static Field),
}

impl fmt::Debug for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::MissingGroup(g) => write!(f, "MissingGroup({g})"),
            Refusal::MissingMeter(m) => write!(f, "MissingMeter({m})"),
            Refusal::ReadOnly(field) => write!(f, "ReadOnly({})", field.name),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::MissingGroup(g) => write!(
                f,
                "group {g} does not exist (groups come from OpenFlow group-mods; \
                 a rule that sends to one is added after it, as in Open vSwitch)"
            ),
            Refusal::MissingMeter(m) => write!(
                f,
                "meter {m} does not exist (meters come from OpenFlow meter-mods; \
                 a rule that uses one is added after it, as in Open vSwitch)"
            ),
            Refusal::ReadOnly(field) => write!(
                f,
                "{} is read-only (as in Open vSwitch); --set-field spec lets set_field \
                 write it, as OpenFlow 1.3 does",
                field.name
            ),
        }
    }
}

impl RuleSet {
    /// What refuses `actions` (a rule's, with its write-actions, or a
    /// packet-out's) in this rule set, if anything: a meter that does not
    /// exist, then a group (Open vSwitch's order), then a field kept
    /// read-only.
    pub fn refusal(&self, actions: &[Action]) -> Option<Refusal> {
        if let Some(m) = self.missing_meter(actions) {
            return Some(Refusal::MissingMeter(m));
        }
        if let Some(g) = self.missing_group(actions) {
            return Some(Refusal::MissingGroup(g));
        }
        self.read_only_write(actions).map(Refusal::ReadOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_flow, Require};
    use crate::table::{Modes, SetFieldMode};

    fn actions(text: &str) -> Vec<Action> {
        parse_flow(&format!("ip,actions={text}"), Require::Actions)
            .unwrap()
            .actions
            .to_vec()
    }

    #[test]
    fn meters_then_groups_then_read_only_fields_are_refused() {
        let mut r = RuleSet::new();
        assert!(r.refusal(&actions("output:2")).is_none());
        let all = actions("meter:3,set_field:17->ip_proto,group:5");
        assert!(matches!(r.refusal(&all), Some(Refusal::MissingMeter(3))));
        let group = actions("set_field:17->ip_proto,group:5");
        assert!(matches!(r.refusal(&group), Some(Refusal::MissingGroup(5))));
        let ro = actions("set_field:17->ip_proto,output:2");
        let Some(refused @ Refusal::ReadOnly(f)) = r.refusal(&ro) else {
            panic!("{:?}", r.refusal(&ro));
        };
        assert_eq!(f.name, "nw_proto");
        assert!(refused.to_string().starts_with("nw_proto is read-only"));
        assert!(Refusal::MissingGroup(5)
            .to_string()
            .starts_with("group 5 does not exist"));
        r.set_modes(Modes {
            set_field: SetFieldMode::Spec,
            ..r.modes()
        });
        assert!(r.refusal(&ro).is_none());
    }
}
