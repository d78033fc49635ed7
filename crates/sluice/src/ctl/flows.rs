//! Rule changes: OpenFlow flow-mods and the rule commands of `sluice ctl`
//! (`add-flow`, `add-flows`, `replace-flows`, `mod-flows`, `del-flows`),
//! each applied as one new version of the rule set.

use std::sync::atomic::Ordering;

use sluice_classifier::table::{flag, Selection};
use sluice_classifier::{parse_flow, Require, RuleSet};
use sluice_openflow::convert::{outputs_to, FlowModOp};
use sluice_openflow::OfError;

use sluice_ofproto::backend::Applied;

use super::{next_version, Control};

impl Control {
    /// Applies OpenFlow flow-mods as one new version of the rules (a burst
    /// read together costs one copy of the rule set, not one per message)
    /// and returns once every PMD runs it. Each op's error, if any, by
    /// position.
    /// Also returns the rules deleted that asked for FLOW_REMOVED.
    /// The ops come one at a time (decoded as they are applied: a burst of
    /// ten thousand is not held as a list of flow specs).
    pub(crate) fn apply_flow_mods(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String> {
        self.apply_flow_mods_as(ops, false)
    }

    /// [`Control::apply_flow_mods`] all or nothing (an OpenFlow bundle's
    /// commit): when one fails, no rule changes (its error is among
    /// those returned; the others are `None` though not applied).
    pub(crate) fn apply_flow_mods_atomic(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String> {
        self.apply_flow_mods_as(ops, true)
    }

    fn apply_flow_mods_as(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
        atomic: bool,
    ) -> Result<Applied, String> {
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let now = self.now_us();
        let mut removed = Vec::new();
        let errs = ops
            .into_iter()
            .map(|op| match op {
                Err(e) => Some(e),
                Ok(
                    FlowModOp::Add(spec)
                    | FlowModOp::Modify(spec, _)
                    | FlowModOp::ModifyOrAdd(spec, _),
                ) if next.refusal(&spec.actions).is_some() => {
                    next.refusal(&spec.actions).map(of_refusal)
                }
                Ok(FlowModOp::Add(spec)) => {
                    if spec.flags & flag::CHECK_OVERLAP != 0 && next.overlaps(&spec) {
                        return Some(OfError::OVERLAP);
                    }
                    next.add_owned(spec, now);
                    None
                }
                Ok(FlowModOp::Modify(spec, how)) => {
                    next.modify(&spec, how, !spec.table_given);
                    None
                }
                Ok(FlowModOp::ModifyOrAdd(spec, how)) => {
                    if next.modify(&spec, how, !spec.table_given) == 0 {
                        next.add_owned(spec, now);
                    }
                    None
                }
                Ok(FlowModOp::Delete {
                    spec,
                    how,
                    all_tables,
                    out_port,
                }) => {
                    let gone = next.delete_if(&spec, how, all_tables, |r| outputs_to(r, out_port));
                    removed.extend(gone);
                    None
                }
            })
            .collect::<Vec<_>>();
        let refused = errs.iter().filter(|e| e.is_some()).count() as u64;
        if atomic && refused > 0 {
            self.flow_mods[1].fetch_add(errs.len() as u64, Ordering::Relaxed);
            return Ok((errs, Vec::new()));
        }
        self.flow_mods[0].fetch_add(errs.len() as u64 - refused, Ordering::Relaxed);
        self.flow_mods[1].fetch_add(refused, Ordering::Relaxed);
        if next.version() != rules.version() {
            self.publish(&next)?;
            *rules = next;
        }
        Ok((errs, removed))
    }

    /// The error that refuses a packet-out's `actions`, if the rule set
    /// refuses them ([`RuleSet::refusal`]).
    pub(crate) fn refusal(&self, actions: &[sluice_classifier::Action]) -> Option<OfError> {
        let rules = self.rules.lock().expect("rules");
        rules.refusal(actions).map(of_refusal)
    }

    /// Which fields set_field may write (`--set-field`).
    pub(crate) fn set_field_mode(&self) -> sluice_classifier::table::SetFieldMode {
        self.rules.lock().expect("rules").modes().set_field
    }

    /// Changes the rule set with `f` (a group change) and, when it made a
    /// new version, publishes it to every PMD before returning.
    pub(crate) fn change_rules<T>(
        &self,
        f: impl FnOnce(&mut RuleSet) -> Result<T, OfError>,
    ) -> Result<Result<T, OfError>, String> {
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let out = f(&mut next);
        if out.is_ok() && next.version() != rules.version() {
            self.publish(&next)?;
            *rules = next;
        }
        Ok(out)
    }

    /// A flow command of `sluice ctl`, counted in [`Control::flow_mods`]:
    /// each rule it names applied, or the command refused.
    pub(super) fn flow_mod(
        &self,
        cmd: &str,
        args: &[&str],
        strict: bool,
    ) -> Result<String, String> {
        let done = self.change_by_command(cmd, args, strict);
        match &done {
            Ok((_, n)) => self.flow_mods[0].fetch_add(*n, Ordering::Relaxed),
            Err(_) => self.flow_mods[1].fetch_add(1, Ordering::Relaxed),
        };
        done.map(|(said, _)| said)
    }

    fn change_by_command(
        &self,
        cmd: &str,
        args: &[&str],
        strict: bool,
    ) -> Result<(String, u64), String> {
        let how = if strict {
            Selection::Strict
        } else {
            Selection::Loose
        };
        let mut rules = self.rules.lock().expect("rules");
        let mut next = next_version(&rules);
        let now = self.now_us();
        // Rules the rule set refuses (a missing group or meter, a field
        // kept read-only) are refused, the whole command with them.
        let admit = |specs: &[sluice_classifier::parse::FlowSpec]| -> Result<(), String> {
            match specs.iter().find_map(|s| next.refusal(&s.actions)) {
                Some(r) => Err(r.to_string()),
                None => Ok(()),
            }
        };
        let out = match cmd {
            "add-flow" => {
                let line = args.join(" ");
                let (spec, warnings) =
                    sluice_classifier::parse_flow_with_warnings(&line, Require::Actions)
                        .map_err(|e| e.to_string())?;
                admit(std::slice::from_ref(&spec))?;
                next.add(&spec, now);
                (format!("{}added 1 rule", warning_lines(&warnings)), 1)
            }
            "add-flows" | "replace-flows" => {
                let [name, text] = args else {
                    return Err(format!("{cmd} needs a file"));
                };
                let (specs, warnings) =
                    sluice_classifier::parse_flow_file_with_warnings(text, Some(name))
                        .map_err(|e| e.to_string())?;
                admit(&specs)?;
                let said = warning_lines(&warnings);
                if cmd == "add-flows" {
                    for s in &specs {
                        next.add(s, now);
                    }
                    (format!("{said}added {} rules", specs.len()), specs.len())
                } else {
                    let (kept, added, removed) = next.replace_with(&specs, now);
                    (
                        format!("{said}kept {kept}, added {added}, removed {removed} rules"),
                        specs.len(),
                    )
                }
            }
            "mod-flows" => {
                let spec =
                    parse_flow(&args.join(" "), Require::Actions).map_err(|e| e.to_string())?;
                admit(std::slice::from_ref(&spec))?;
                let n = next.modify(&spec, how, !spec.table_given);
                (format!("modified {n} rules"), 1)
            }
            _ => {
                let line = args.join(" ");
                let spec = parse_flow(&line, Require::NoActions).map_err(|e| e.to_string())?;
                let n = next.delete(&spec, how, !spec.table_given).len();
                (format!("deleted {n} rules"), 1)
            }
        };
        self.publish(&next)?;
        *rules = next;
        Ok((out.0, out.1 as u64))
    }
}

/// Parse warnings (a field dropped from a match), a line each.
fn warning_lines(warnings: &[sluice_classifier::ParseError]) -> String {
    warnings.iter().map(|w| format!("warning: {w}\n")).collect()
}

/// The OpenFlow error for what a rule set refuses.
fn of_refusal(r: sluice_classifier::table::Refusal) -> OfError {
    use sluice_classifier::table::Refusal;
    match r {
        Refusal::MissingGroup(_) => OfError::BAD_OUT_GROUP,
        Refusal::MissingMeter(_) => OfError::METER_UNKNOWN,
        Refusal::ReadOnly(_) => OfError::BAD_SET_TYPE,
    }
}
