//! This datapath thread's part in freeing recirculation states
//! ([`sluice_classifier::recirc`]): it is a marker of the rule set's state
//! table, and on each cache housekeeping (about once a second) it marks
//! the ids its megaflows' `recirc(id)` actions use, then completes a pass, which lets the table
//! free the states no thread's caches use. Nothing happens while the table
//! is empty (rule sets that never recirculate).

use std::sync::Arc;

use sluice_classifier::dpaction::DpAction;
use sluice_classifier::megaflow::MegaflowTable;
use sluice_classifier::recirc::RecircTable;

/// This thread's registration with a state table.
#[derive(Debug, Default)]
pub(crate) struct RecircGc {
    reg: Option<(Arc<RecircTable>, usize)>,
    ids: Vec<u32>,
}

impl Drop for RecircGc {
    fn drop(&mut self) {
        if let Some((t, m)) = self.reg.take() {
            t.unregister_marker(m);
        }
    }
}

impl RecircGc {
    /// One pass over `megaflows` for `table` (the current rule set's):
    /// marks the ids they use and completes the pass. Returns the states
    /// freed.
    pub fn pass(&mut self, table: &Arc<RecircTable>, megaflows: &MegaflowTable) -> usize {
        if !matches!(&self.reg, Some((t, _)) if Arc::ptr_eq(t, table)) {
            // A rule set with a table of its own (or the first states):
            // leave the old one, which this thread's caches no longer
            // resume from once they are revalidated against the new rules.
            if let Some((t, m)) = self.reg.take() {
                t.unregister_marker(m);
            }
            if table.is_empty() {
                return 0;
            }
            self.reg = Some((Arc::clone(table), table.register_marker()));
        }
        let start = table.now_us();
        self.ids.clear();
        let mut last: Option<&Arc<[DpAction]>> = None;
        for (_, f) in megaflows.iter() {
            // Megaflows of one translation share their actions: look once.
            if last.is_some_and(|a| Arc::ptr_eq(a, &f.actions)) {
                continue;
            }
            last = Some(&f.actions);
            recirc_ids(&f.actions, &mut self.ids);
        }
        self.ids.sort_unstable();
        self.ids.dedup();
        table.mark(&self.ids, start);
        let m = self.reg.as_ref().map_or(usize::MAX, |(_, m)| *m);
        table.pass_complete(m, start)
    }
}

/// The ids of the `recirc` actions and paused packet-ins' continuations
/// in `acts` (and in its select variants and `check_pkt_len` branches).
fn recirc_ids(acts: &[DpAction], ids: &mut Vec<u32>) {
    for a in acts {
        match a {
            DpAction::Recirc(id) => ids.push(*id),
            // A paused packet-in's continuation resumes this state.
            DpAction::Controller(p) => ids.extend(p.meta.continuation),
            DpAction::Select(sel) => {
                for (_, v) in &sel.variants {
                    recirc_ids(v, ids);
                }
            }
            DpAction::CheckPktLen { gt, le, .. } => {
                recirc_ids(gt, ids);
                recirc_ids(le, ids);
            }
            _ => {}
        }
    }
}
