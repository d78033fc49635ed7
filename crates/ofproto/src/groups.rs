//! The OpenFlow channel's group messages: GROUP_MOD, and the GROUP,
//! GROUP_DESC and GROUP_FEATURES multiparts, on the control's rule set
//! (groups are versioned with the rules: a group change is published to
//! the PMDs as a flow-mod is, and answered after it is in force).

use std::sync::Arc;

use sluice_classifier::group::GROUP_ALL;
use sluice_classifier::Rule;
use sluice_openflow::consts::mp;
use sluice_openflow::convert::{group_buckets, group_error, to_group};
use sluice_openflow::group::{
    cmd, decode_group_mod, desc_entry, features_body, stats_request, GroupStats,
};
use sluice_openflow::OfError;

use crate::backend::{Backend, BackendExt};

/// Applies a GROUP_MOD body. Returns the rules a delete took with it
/// (those that sent to a deleted group), for FLOW_REMOVED.
pub(crate) fn group_mod(
    control: &dyn Backend,
    body: &[u8],
) -> Result<Result<Vec<Arc<Rule>>, OfError>, String> {
    let gm = match decode_group_mod(body) {
        Ok(g) => g,
        Err(e) => return Ok(Err(e)),
    };
    let now = control.uptime_us();
    control.change_rules(|rules| match gm.command {
        cmd::ADD | cmd::MODIFY => {
            let g = to_group(&gm, now)?;
            if g.buckets
                .iter()
                .any(|b| rules.read_only_write(&b.actions).is_some())
            {
                return Err(OfError::BAD_SET_TYPE);
            }
            let done = if gm.command == cmd::ADD {
                rules.add_group(g)
            } else {
                rules.modify_group(g)
            };
            done.map(|()| Vec::new()).map_err(group_error)
        }
        cmd::DELETE => {
            if gm.group_id > sluice_classifier::group::GROUP_MAX && gm.group_id != GROUP_ALL {
                return Err(OfError::INVALID_GROUP);
            }
            Ok(rules.delete_group(gm.group_id))
        }
        _ => Err(OfError::GROUP_BAD_COMMAND),
    })
}

/// A reply's entries, or the error to answer with.
type Entries = Result<Vec<Vec<u8>>, OfError>;

/// The entries of a GROUP or GROUP_DESC reply, or GROUP_FEATURES's one
/// body (`None`: not a group multipart).
pub(crate) fn group_multipart(
    control: &dyn Backend,
    typ: u16,
    body: &[u8],
) -> Result<Option<Entries>, String> {
    match typ {
        mp::GROUP_FEATURES if body.is_empty() => Ok(Some(Ok(vec![features_body()]))),
        mp::GROUP_DESC if body.is_empty() => control.with_rules(|rules, _| {
            let entries = rules
                .groups()
                .map(|g| {
                    let mut e = Vec::new();
                    desc_entry(g.kind.number(), g.id, &group_buckets(g), &mut e);
                    e
                })
                .collect();
            Some(Ok(entries))
        }),
        mp::GROUP => {
            let want = match stats_request(body) {
                Ok(w) => w,
                Err(e) => return Ok(Some(Err(e))),
            };
            control.with_rules(|rules, now| {
                let mut out = Vec::new();
                for g in rules.groups().filter(|g| want == GROUP_ALL || g.id == want) {
                    let (packet_count, byte_count) = g.counter.counters();
                    let age = now.saturating_sub(g.created_us);
                    let mut e = Vec::new();
                    GroupStats {
                        group_id: g.id,
                        ref_count: rules.group_users(g.id).count() as u32,
                        packet_count,
                        byte_count,
                        duration_sec: (age / 1_000_000) as u32,
                        duration_nsec: (age % 1_000_000 * 1000) as u32,
                        buckets: g.buckets.iter().map(|b| b.counter.counters()).collect(),
                    }
                    .encode(&mut e);
                    out.push(e);
                }
                Some(Ok(out))
            })
        }
        mp::GROUP_DESC | mp::GROUP_FEATURES => Ok(Some(Err(OfError::BAD_LEN))),
        _ => Ok(None),
    }
}
