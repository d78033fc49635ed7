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
//! every packet of the first that froze alike. The table is capped at
//! [`MAX_STATES`] (a translation that would pass the cap drops its packet,
//! counted). Lookups and inserts take a lock: they happen in upcalls only,
//! never on a cache hit.
//!
//! States no cache refers to any more are freed, as Open vSwitch frees its
//! recirculation ids: every datapath thread that caches translations is a
//! *marker*; about once a second it walks its megaflows and marks the ids
//! their `recirc(id)` actions use, then says its pass is complete. A state
//! is freed once it was neither handed out nor marked since the start of
//! every marker's latest complete pass, and not for [`GRACE_US`]: a
//! megaflow installed during a pass was translated after that pass began,
//! so it refreshed its state, and a packet between its two passes is never
//! held that long. Megaflows of a second pass (keyed by `recirc_id`) do not
//! keep a state: only a `recirc(id)` makes such packets, and once none is
//! left they are orphans, which expire as idle. Ids are not reused (they
//! count up, skipping those in use when they wrap), so a cached
//! `recirc(id)` can never lead into another state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::action::Action;

/// Most distinct frozen states kept.
pub const MAX_STATES: usize = 1 << 20;

/// A state unused for less than this is never freed (µs).
pub const GRACE_US: u64 = 2_000_000;

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
    /// The registers (`reg0`..`reg15`).
    pub regs: [u32; sluice_packet::key::N_REGS],
    /// `tunnel_id` as the pipeline had set it.
    pub tunnel_id: u64,
    /// The input port as the translation had it (a `resubmit` may have
    /// changed it).
    pub in_port: u32,
    /// The bridge it runs in (its index in the datapath: a packet that
    /// crossed a patch port resumes in the peer bridge).
    pub bridge: u16,
    /// The mirrors (bits) that had copied the packet: not again after
    /// the recirculation (OVS's frozen `mirrors`).
    pub mirrored: u32,
}

/// The frozen states, by id and by content.
#[derive(Debug)]
pub struct RecircTable {
    inner: Mutex<Inner>,
    clock: Instant,
}

impl Default for RecircTable {
    fn default() -> Self {
        RecircTable {
            inner: Mutex::default(),
            clock: Instant::now(),
        }
    }
}

#[derive(Debug)]
struct Entry {
    state: Arc<Frozen>,
    /// When it was last handed out or marked (the table's clock).
    seen_us: u64,
}

#[derive(Debug, Default)]
struct Inner {
    by_state: HashMap<Arc<Frozen>, u32>,
    by_id: HashMap<u32, Entry>,
    /// The last id handed out.
    last_id: u32,
    /// Per marker slot: None while free; else the start of its latest
    /// complete pass (None inside: none complete yet).
    markers: Vec<Option<Option<u64>>>,
    freed: u64,
}

impl Inner {
    fn next_free_id(&mut self) -> u32 {
        loop {
            self.last_id = self.last_id.wrapping_add(1);
            if self.last_id != 0 && !self.by_id.contains_key(&self.last_id) {
                return self.last_id;
            }
        }
    }
}

impl RecircTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table's clock (µs since it was made): what marks are stamped with.
    pub fn now_us(&self) -> u64 {
        self.clock.elapsed().as_micros() as u64
    }

    /// The id of `state`, handed out on first use (ids start at 1). None
    /// when the table is full.
    pub fn id_of(&self, state: Frozen) -> Option<u32> {
        let now = self.now_us();
        let mut t = self.lock();
        if let Some(&id) = t.by_state.get(&state) {
            if let Some(e) = t.by_id.get_mut(&id) {
                e.seen_us = now;
            }
            return Some(id);
        }
        if t.by_id.len() >= MAX_STATES {
            return None;
        }
        let state = Arc::new(state);
        let id = t.next_free_id();
        t.by_id.insert(
            id,
            Entry {
                state: Arc::clone(&state),
                seen_us: now,
            },
        );
        t.by_state.insert(state, id);
        Some(id)
    }

    /// The state frozen under `id`. Resuming is not a use that keeps a
    /// state: a packet carries `id` only from a `recirc(id)` that a cache
    /// holds (marked) or that was just handed out.
    pub fn get(&self, id: u32) -> Option<Arc<Frozen>> {
        self.lock().by_id.get(&id).map(|e| Arc::clone(&e.state))
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether no state is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// States freed so far.
    pub fn freed(&self) -> u64 {
        self.lock().freed
    }

    /// Registers a marker (a thread whose caches hold ids); no state is
    /// freed until each registered marker completed a pass.
    pub fn register_marker(&self) -> usize {
        let mut t = self.lock();
        if let Some(i) = t.markers.iter().position(Option::is_none) {
            t.markers[i] = Some(None);
            i
        } else {
            t.markers.push(Some(None));
            t.markers.len() - 1
        }
    }

    /// Ends a marker (its thread holds no ids any more).
    pub fn unregister_marker(&self, m: usize) {
        if let Some(slot) = self.lock().markers.get_mut(m) {
            *slot = None;
        }
    }

    /// Marks `ids` as in use at `now_us` (unknown ids are ignored).
    pub fn mark(&self, ids: &[u32], now_us: u64) {
        if ids.is_empty() {
            return;
        }
        let mut t = self.lock();
        for id in ids {
            if let Some(e) = t.by_id.get_mut(id) {
                e.seen_us = e.seen_us.max(now_us);
            }
        }
    }

    /// Marker `m` completed a pass that began at `start_us` (after it had
    /// marked every id its caches held); frees the states no marker saw
    /// since its latest pass began. Returns how many were freed.
    pub fn pass_complete(&self, m: usize, start_us: u64) -> usize {
        let now = self.now_us();
        let mut t = self.lock();
        if let Some(Some(last)) = t.markers.get_mut(m) {
            *last = Some(start_us);
        }
        let mut before = now.saturating_sub(GRACE_US);
        for slot in t.markers.iter().flatten() {
            match slot {
                Some(s) => before = before.min(*s),
                None => return 0,
            }
        }
        let Inner {
            by_state, by_id, ..
        } = &mut *t;
        let n0 = by_id.len();
        by_id.retain(|_, e| {
            let keep = e.seen_us >= before;
            if !keep {
                by_state.remove(&e.state);
            }
            keep
        });
        let freed = n0 - by_id.len();
        t.freed += freed as u64;
        freed
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
            regs: [0; sluice_packet::key::N_REGS],
            tunnel_id: 0,
            in_port: 1,
            bridge: 0,
            mirrored: 0,
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

    /// A table whose clock started a minute ago (so that states can be
    /// aged past the grace).
    fn table() -> RecircTable {
        RecircTable {
            inner: Mutex::default(),
            clock: Instant::now()
                .checked_sub(std::time::Duration::from_secs(60))
                .unwrap_or_else(Instant::now),
        }
    }

    /// Pretends `us` passed since every state was last seen.
    fn age(t: &RecircTable, us: u64) {
        for e in t.lock().by_id.values_mut() {
            e.seen_us = e.seen_us.saturating_sub(us);
        }
    }

    #[test]
    fn unmarked_states_are_freed_after_every_marker_passed() {
        let t = table();
        let (a, b) = (t.id_of(state(2)).unwrap(), t.id_of(state(3)).unwrap());
        // No marker registered: nothing refers to the states but the grace.
        assert_eq!(t.pass_complete(usize::MAX, 0), 0, "within the grace");
        age(&t, 10 * GRACE_US);
        let (m1, m2) = (t.register_marker(), t.register_marker());
        let start = t.now_us();
        t.mark(&[a], start);
        assert_eq!(t.pass_complete(m1, start), 0, "m2 has not passed yet");
        assert_eq!(t.pass_complete(m2, start), 1, "b: marked by nobody");
        assert!(t.get(b).is_none() && t.get(a).is_some());
        assert_eq!((t.len(), t.freed()), (1, 1));
        // A freed state frozen again gets a new id: a cached recirc(b)
        // can never lead into another state.
        let b2 = t.id_of(state(3)).unwrap();
        assert!(b2 > b, "{b2} after {b}");
        // A marker that leaves stops holding the others back.
        t.unregister_marker(m2);
        age(&t, 10 * GRACE_US);
        let start = t.now_us();
        assert_eq!(t.pass_complete(m1, start), 2);
        assert!(t.is_empty());
    }

    #[test]
    fn a_state_used_during_a_pass_survives_it() {
        let t = table();
        let m = t.register_marker();
        let start = t.now_us();
        age(&t, 0);
        // Handed out after the pass began (a megaflow the walk missed).
        let a = t.id_of(state(2)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert_eq!(t.pass_complete(m, start), 0);
        assert!(t.get(a).is_some());
    }

    #[test]
    fn ids_skip_those_in_use_when_they_wrap() {
        let t = RecircTable::default();
        let a = t.id_of(state(2)).unwrap();
        t.lock().last_id = u32::MAX;
        let b = t.id_of(state(3)).unwrap();
        assert_eq!((a, b), (1, 2), "0 is never an id, 1 is in use");
    }
}
