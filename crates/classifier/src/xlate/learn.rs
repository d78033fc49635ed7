//! `learn`: the rule the packet teaches, recorded for the datapath to
//! apply (the translation itself changes no table).

use std::sync::Arc;

use sluice_packet::key::FlowKey;

use super::Ctx;
use crate::action::Action;
use crate::learn::{flag, Learn, LearnDst, LearnSrc};
use crate::parse::FlowSpec;

/// The flow-mod `l` makes of `flow`: add the rule, or refresh it when
/// an identical one is there (OVS's `learn_execute`).
pub fn learned_rule(l: &Learn, flow: &FlowKey) -> FlowSpec {
    let mut m = crate::flow_match::Match::catch_all();
    let mut actions = Vec::new();
    // As OVS: the FIN timeouts first.
    if l.fin_idle_timeout != 0 || l.fin_hard_timeout != 0 {
        actions.push(Action::FinTimeout {
            idle: l.fin_idle_timeout,
            hard: l.fin_hard_timeout,
        });
    }
    for s in &l.specs {
        let v = match s.src {
            LearnSrc::Field(sf) => sf.read(flow),
            LearnSrc::Imm(v) => v,
        };
        match s.dst {
            LearnDst::Match(d) => m.set_bits(d.field, d.place(v), d.mask()),
            LearnDst::Load(d) => actions.push(Action::Load {
                field: d.field,
                value: d.place(v),
                mask: d.mask(),
            }),
            LearnDst::Output => {
                // As OVS: a port, IN_PORT, FLOOD or ALL (a value past 16
                // bits names none).
                let port = u16::try_from(v).ok().and_then(Action::of10_port);
                if let Some(a @ (Action::InPort | Action::Flood | Action::All)) = port {
                    actions.push(a);
                } else if let Some(a @ Action::Output(1..)) = port {
                    actions.push(a);
                }
            }
        }
    }
    FlowSpec {
        table: l.table,
        priority: l.priority,
        cookie: l.cookie,
        idle_timeout: l.idle_timeout,
        hard_timeout: l.hard_timeout,
        matcher: m,
        actions: Arc::from(actions),
        has_actions: true,
        table_given: true,
        flags: if l.flags & flag::SEND_FLOW_REM != 0 {
            crate::rule::flag::SEND_FLOW_REM
        } else {
            0
        },
        learn_limit: l.limit,
        ..FlowSpec::default()
    }
}

impl Ctx<'_, '_> {
    /// Builds `l`'s flow-mod from the flow as the actions so far leave
    /// it; the decision now depends on every bit the learned rule took
    /// from the packet (OVS's `learn_mask`).
    pub(super) fn learn(&mut self, l: &Learn) {
        for sf in l.read_fields() {
            self.unwc_read(sf.field, sf.mask());
        }
        let spec = learned_rule(l, &self.flow);
        if self.out.trace.is_some() {
            let m = spec.matcher.to_string();
            self.note(
                self.depth + 1,
                &format!(
                    "-> table={} priority={}{}{} actions={}",
                    spec.table,
                    spec.priority,
                    if m.is_empty() { "" } else { "," },
                    m,
                    crate::action::format_actions(&spec.actions)
                ),
            );
        }
        // With a limit, learning fails when the table holds that many
        // rules of the cookie already (a refresh always succeeds), as
        // OVS's ofproto_flow_mod_learn; the result goes to result_dst.
        let success = self.env.rules.learn_allowed(&spec);
        if let Some(dst) = l.result_dst {
            if self.out.trace.is_some() {
                self.note(
                    self.depth + 1,
                    &format!("-> {dst} is now {}", u8::from(success)),
                );
            }
            self.load(dst.field, dst.place(u128::from(success)), dst.mask());
        }
        if success {
            self.out.learned.push((self.env.bridge, spec));
        } else {
            self.note(self.depth + 1, ">> Limit exceeded, learn failed");
        }
    }
}
