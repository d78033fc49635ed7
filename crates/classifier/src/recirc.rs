//! Recirculation: translation state frozen in one datapath pass and
//! resumed in the next, after the datapath has parsed the packet again.
//!
//! Some actions leave the flow key not knowing the packet any more:
//! `pop_mpls` exposes a header that was never parsed, `pop_pbb` a whole
//! customer frame. A translation that still has to look at the packet
//! after such an action (a set-field on the inner IP header, a
//! `goto_table` that matches it) stops there, as Open vSwitch's "freezing"
//! does: it commits what it has, freezes the rest of its work (the
//! actions still to run, the action set, the metadata) under a
//! *recirculation id*, and ends its datapath actions with `recirc(id)`.
//! The datapath then re-parses the changed packet and sends it through
//! the caches again with that id in its key's `recirc_id`; a miss
//! translates by resuming the frozen state against the new key.
//!
//! Ids are handed out once per distinct state (the same rule and packet
//! shape freeze the same state), so a megaflow of the second pass serves
//! every packet of the first that froze alike. The table only grows with
//! distinct states, which the rules bound; it is capped at [`MAX_STATES`]
//! (a translation that would pass the cap drops its packet, counted).
//! Lookups and inserts take a lock: they happen in upcalls only, never
//! on a cache hit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::action::Action;

/// Most distinct frozen states kept.
pub const MAX_STATES: usize = 1 << 20;

/// What a translation still had to do when it froze.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frozen {
    /// The actions still to run, innermost first (the rest of the action
    /// list that froze, then the rest of each list that called it).
    pub actions: Vec<Action>,
    /// The OpenFlow action set written so far.
    pub action_set: Vec<Action>,
    /// The table whose rule's actions froze (`resubmit(,)` without a
    /// table, and packet-ins, name it).
    pub table: u8,
    /// That rule's cookie, and whether it is a table-miss rule.
    pub cookie: u64,
    /// Whether that rule is a table-miss rule (for packet-in reasons).
    pub miss: bool,
    /// OpenFlow metadata.
    pub metadata: u64,
    /// `tunnel_id` as the pipeline had set it.
    pub tunnel_id: u64,
    /// The input port as the translation had it (a `resubmit` may have
    /// changed it).
    pub in_port: u32,
}

/// The frozen states, by id and by content.
#[derive(Debug, Default)]
pub struct RecircTable {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_state: HashMap<Arc<Frozen>, u32>,
    /// Index `id - 1`.
    by_id: Vec<Arc<Frozen>>,
}

impl RecircTable {
    /// The id of `state`, handed out on first use (ids start at 1). None
    /// when the table is full.
    pub fn id_of(&self, state: Frozen) -> Option<u32> {
        let mut t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = t.by_state.get(&state) {
            return Some(id);
        }
        if t.by_id.len() >= MAX_STATES {
            return None;
        }
        let state = Arc::new(state);
        t.by_id.push(Arc::clone(&state));
        let id = t.by_id.len() as u32;
        t.by_state.insert(state, id);
        Some(id)
    }

    /// The state frozen under `id`.
    pub fn get(&self, id: u32) -> Option<Arc<Frozen>> {
        let t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let i = (id as usize).checked_sub(1)?;
        t.by_id.get(i).cloned()
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .len()
    }

    /// Whether no state was frozen yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(port: u32) -> Frozen {
        Frozen {
            actions: vec![Action::Output(port)],
            action_set: Vec::new(),
            table: 0,
            cookie: 0,
            miss: false,
            metadata: 0,
            tunnel_id: 0,
            in_port: 1,
        }
    }

    #[test]
    fn one_id_per_distinct_state() {
        let t = RecircTable::default();
        let a = t.id_of(state(2)).unwrap();
        let b = t.id_of(state(3)).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(t.id_of(state(2)), Some(1));
        assert_eq!(t.get(2).unwrap().actions, vec![Action::Output(3)]);
        assert!(t.get(0).is_none() && t.get(3).is_none());
        assert_eq!(t.len(), 2);
    }
}
