//! The MAC learning table of a bridge, as Open vSwitch's
//! (`lib/mac-learning.c` is the reference; the code is our own): per
//! (VLAN, MAC) the port it was last seen on; an entry lives `idle` (300 s
//! by default, `mac-aging-time`, 15 to 3600) after its last packet; past
//! `max` entries (8192, `mac-table-size`) the least recently used entry
//! of the port holding the most is evicted ("fairly"). Multicast sources
//! are not learned; multicast destinations are never found.
//!
//! The table belongs to the control plane. Translations (upcalls) learn
//! and look up under its lock; a change that can change a decision (a
//! MAC learned, moved, expired, evicted, flushed) moves its version, and
//! the PMDs revalidate their megaflows when they see it move, as OVS's
//! `need_revalidate`. Every operation is O(log n).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// `mac-table-size` default.
pub const DEFAULT_MAX: usize = 8192;
/// `mac-aging-time` default, seconds.
pub const DEFAULT_IDLE_S: u64 = 300;

/// A MAC in a VLAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The VLAN (0: none).
    pub vlan: u16,
    /// The address.
    pub mac: [u8; 6],
}

/// What a `NORMAL` translation learns: a source MAC in a VLAN on a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Learn {
    /// The source address.
    pub mac: [u8; 6],
    /// Its VLAN.
    pub vlan: u16,
    /// The port it came in on.
    pub port: u32,
    /// The bridge (its index in the datapath) whose table learns it.
    pub bridge: u16,
}

/// Most bridges one translation learns in (a packet crossing a patch port
/// runs `NORMAL` in each bridge it reaches).
pub const MAX_LEARNS: usize = 2;

/// What one translation's `NORMAL`s learn: one entry per bridge, at most
/// [`MAX_LEARNS`] (a third bridge's is not kept: [`Learns::push`] says so).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Learns([Option<Learn>; MAX_LEARNS]);

impl Learns {
    /// Nothing learned.
    pub const NONE: Learns = Learns([None; MAX_LEARNS]);

    /// Adds `l`, replacing an entry of the same bridge; false when every
    /// slot holds another bridge's (`l` is not kept).
    pub fn push(&mut self, l: Learn) -> bool {
        for slot in &mut self.0 {
            match slot {
                Some(o) if o.bridge != l.bridge => continue,
                _ => {
                    *slot = Some(l);
                    return true;
                }
            }
        }
        false
    }

    /// The entries.
    pub fn iter(&self) -> impl Iterator<Item = &Learn> {
        self.0.iter().flatten()
    }

    /// The first (the input bridge's, when it learns).
    pub fn first(&self) -> Option<Learn> {
        self.0[0]
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0[0].is_none()
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    port: u32,
    /// When it was learned on `port` (ms): a cached flow's packet from
    /// another port moves it only if it came later.
    moved_ms: u64,
    /// Last refreshed (ms) and its order among all refreshes.
    used_ms: u64,
    stamp: u64,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Key, Entry>,
    /// Every entry by its last refresh, oldest first.
    lru: BTreeMap<u64, Key>,
    /// Per port, its entries by last refresh (for fair eviction).
    per_port: HashMap<u32, BTreeMap<u64, Key>>,
    next_stamp: u64,
    /// The keys of the last changes, with the version each made (for the
    /// PMDs to revalidate only the decisions that read them).
    log: VecDeque<(u64, Key)>,
    /// Changes up to this version are not all in `log` (it overflowed,
    /// or a flush changed everything).
    log_floor: u64,
    learned: u64,
    expired: u64,
    evicted: u64,
    moved: u64,
}

/// The table.
#[derive(Debug)]
pub struct MacTable {
    inner: Mutex<Inner>,
    idle_ms: AtomicU64,
    max: AtomicU64,
    version: AtomicU64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable {
            inner: Mutex::default(),
            idle_ms: AtomicU64::new(DEFAULT_IDLE_S * 1000),
            max: AtomicU64::new(DEFAULT_MAX as u64),
            version: AtomicU64::new(0),
        }
    }
}

fn multicast(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// An address as OVS prints it.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

impl Inner {
    fn touch(&mut self, key: Key, now_ms: u64) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let e = self.map.get_mut(&key).expect("present");
        self.lru.remove(&e.stamp);
        if let Some(l) = self.per_port.get_mut(&e.port) {
            l.remove(&e.stamp);
            l.insert(stamp, key);
        }
        e.stamp = stamp;
        e.used_ms = now_ms;
        self.lru.insert(stamp, key);
    }

    fn set_port(&mut self, key: Key, port: u32) {
        let e = self.map.get_mut(&key).expect("present");
        let (old, stamp) = (e.port, e.stamp);
        e.port = port;
        if let Some(l) = self.per_port.get_mut(&old) {
            l.remove(&stamp);
            if l.is_empty() {
                self.per_port.remove(&old);
            }
        }
        self.per_port.entry(port).or_default().insert(stamp, key);
    }

    fn remove(&mut self, key: Key) {
        if let Some(e) = self.map.remove(&key) {
            self.lru.remove(&e.stamp);
            if let Some(l) = self.per_port.get_mut(&e.port) {
                l.remove(&e.stamp);
                if l.is_empty() {
                    self.per_port.remove(&e.port);
                }
            }
        }
    }

    /// The least recently used entry of the port holding the most.
    fn evict_fairly(&mut self) -> Option<Key> {
        let victim = self
            .per_port
            .iter()
            .max_by_key(|(port, l)| (l.len(), std::cmp::Reverse(**port)))
            .and_then(|(_, l)| l.values().next().copied());
        if let Some(k) = victim {
            self.remove(k);
            self.evicted += 1;
        }
        victim
    }
}

/// Changes the log keeps (beyond, a PMD that has not looked revalidates
/// everything, as after a flush).
const LOG_MAX: usize = 65536;

impl MacTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A change of where `key` is (under the lock): the version moves
    /// and the log says which key.
    fn changed(&self, g: &mut Inner, key: Key) {
        let v = self.version.fetch_add(1, Ordering::Release) + 1;
        g.log.push_back((v, key));
        if g.log.len() > LOG_MAX {
            if let Some((old, _)) = g.log.pop_front() {
                g.log_floor = old;
            }
        }
    }

    /// A change of everything (a flush): the version moves, the log
    /// starts again.
    fn changed_all(&self, g: &mut Inner) {
        let v = self.version.fetch_add(1, Ordering::Release) + 1;
        g.log.clear();
        g.log_floor = v;
    }

    /// The (VLAN, MAC) keys whose place changed after version `since`,
    /// or `None` when that is not known (too many changes since, or a
    /// flush): then every decision that read the table is to be redone.
    pub fn changes_since(&self, since: u64) -> Option<Vec<Key>> {
        let g = self.lock();
        if since < g.log_floor {
            return None;
        }
        let first = g.log.partition_point(|&(v, _)| v <= since);
        Some(g.log.range(first..).map(|&(_, k)| k).collect())
    }

    /// Moves on each change that may change a forwarding decision.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// `mac-aging-time` (clamped to 15..=3600 s, as OVS does).
    pub fn set_idle_secs(&self, s: u64) {
        self.idle_ms
            .store(s.clamp(15, 3600) * 1000, Ordering::Relaxed);
    }

    /// The aging time, s.
    pub fn idle_secs(&self) -> u64 {
        self.idle_ms.load(Ordering::Relaxed) / 1000
    }

    /// `mac-table-size` (at least 1).
    pub fn set_max(&self, n: usize) {
        self.max.store(n.max(1) as u64, Ordering::Relaxed);
    }

    /// The size limit.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed) as usize
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Learns that `mac` in `vlan` is on `port` (seen now): refreshes the
    /// entry, adds it (evicting fairly when full) or moves it. True when
    /// that changed where the MAC is (then the version moved).
    pub fn learn(&self, mac: [u8; 6], vlan: u16, port: u32, now_ms: u64) -> bool {
        if multicast(&mac) {
            return false;
        }
        let key = Key { vlan, mac };
        let mut g = self.lock();
        let changed = match g.map.get(&key).map(|e| e.port) {
            Some(p) if p == port => false,
            Some(_) => {
                g.moved += 1;
                g.set_port(key, port);
                if let Some(e) = g.map.get_mut(&key) {
                    e.moved_ms = now_ms;
                }
                true
            }
            None => {
                if g.map.len() >= self.max() {
                    if let Some(k) = g.evict_fairly() {
                        self.changed(&mut g, k);
                    }
                }
                g.learned += 1;
                let stamp = g.next_stamp;
                g.map.insert(
                    key,
                    Entry {
                        port,
                        moved_ms: now_ms,
                        used_ms: now_ms,
                        stamp,
                    },
                );
                g.lru.insert(stamp, key);
                g.next_stamp += 1;
                g.per_port.entry(port).or_default().insert(stamp, key);
                true
            }
        };
        g.touch(key, now_ms);
        if changed {
            self.changed(&mut g, key);
        }
        changed
    }

    /// Learns again from packets a cached decision forwarded, the last
    /// of them at `hit_ms` (as OVS's revalidators push its xlate cache's
    /// `NORMAL` entries): refreshes the MAC on `port`, learns it if it is
    /// gone, moves it to `port` if those packets came after it was
    /// learned elsewhere (never for older ones: the move is newer news).
    /// True when that changed where it is.
    pub fn refresh(&self, mac: [u8; 6], vlan: u16, port: u32, hit_ms: u64, now_ms: u64) -> bool {
        let key = Key { vlan, mac };
        let mut g = self.lock();
        match g.map.get(&key).map(|e| (e.port, e.moved_ms)) {
            Some((p, _)) if p == port => {
                g.touch(key, now_ms);
                false
            }
            Some((_, moved)) if hit_ms <= moved => false,
            _ => {
                drop(g);
                self.learn(mac, vlan, port, now_ms)
            }
        }
    }

    /// Where `mac` in `vlan` was learned (never for a multicast address).
    pub fn lookup(&self, mac: [u8; 6], vlan: u16) -> Option<u32> {
        if multicast(&mac) {
            return None;
        }
        self.lock().map.get(&Key { vlan, mac }).map(|e| e.port)
    }

    /// Expires entries idle for the aging time, and evicts past the size
    /// limit (a smaller `mac-table-size`), oldest first, as OVS's
    /// `mac_learning_run`. True when any went.
    pub fn run(&self, now_ms: u64) -> bool {
        let idle = self.idle_ms.load(Ordering::Relaxed);
        let max = self.max();
        let mut g = self.lock();
        let mut any = false;
        while let Some((_, &key)) = g.lru.iter().next() {
            let e = g.map[&key];
            if g.map.len() > max || now_ms >= e.used_ms + idle {
                g.remove(key);
                g.expired += 1;
                self.changed(&mut g, key);
                any = true;
            } else {
                break;
            }
        }
        any
    }

    /// Forgets every entry (`fdb/flush`).
    pub fn flush(&self) {
        let mut g = self.lock();
        let any = !g.map.is_empty();
        g.map.clear();
        g.lru.clear();
        g.per_port.clear();
        if any {
            self.changed_all(&mut g);
        }
    }

    /// Forgets the entries on `port` (a port removed).
    pub fn forget_port(&self, port: u32) {
        let mut g = self.lock();
        let keys: Vec<Key> = g
            .per_port
            .get(&port)
            .map(|l| l.values().copied().collect())
            .unwrap_or_default();
        for k in &keys {
            g.remove(*k);
            self.changed(&mut g, *k);
        }
    }

    /// `fdb/show`: the entries oldest first, with their age in seconds.
    pub fn show(&self, now_ms: u64) -> String {
        let g = self.lock();
        let mut o = String::from(" port  VLAN  MAC                Age\n");
        for key in g.lru.values() {
            let e = &g.map[key];
            let age = now_ms.saturating_sub(e.used_ms) / 1000;
            // The bridge's own port by name, as OVS shows it.
            let port = if e.port == 0xffff_fffe {
                "LOCAL".to_string()
            } else {
                e.port.to_string()
            };
            let _ = writeln!(
                o,
                "{:>5}  {:>4}  {}  {:>3}",
                port,
                key.vlan,
                fmt_mac(&key.mac),
                age
            );
        }
        o
    }

    /// `fdb/stats-show` for bridge `name`.
    pub fn stats(&self, name: &str) -> String {
        let g = self.lock();
        format!(
            "Statistics for bridge \"{name}\":\n  Current/maximum MAC entries in the table: {}/{}\n  Current static MAC entries in the table : 0\n  Total number of learned MAC entries     : {}\n  Total number of expired MAC entries     : {}\n  Total number of evicted MAC entries     : {}\n  Total number of port moved MAC entries  : {}\n",
            g.map.len(),
            self.max(),
            g.learned,
            g.expired,
            g.evicted,
            g.moved
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_keep_one_entry_per_bridge_and_refuse_a_third() {
        let l = |bridge, port| Learn {
            mac: [2, 0, 0, 0, 0, 1],
            vlan: 0,
            port,
            bridge,
        };
        let mut ls = Learns::NONE;
        assert!(ls.is_empty());
        assert!(ls.push(l(0, 1)));
        assert!(ls.push(l(0, 2)), "the same bridge's replaces");
        assert!(ls.push(l(3, 7)));
        assert!(!ls.push(l(4, 1)), "a third bridge is not kept");
        let got: Vec<(u16, u32)> = ls.iter().map(|x| (x.bridge, x.port)).collect();
        assert_eq!(got, vec![(0, 2), (3, 7)]);
        assert_eq!(ls.first().map(|x| x.port), Some(2));
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn the_log_names_each_change_until_a_flush() {
        let t = MacTable::default();
        let (a, b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
        let v0 = t.version();
        t.learn(a, 0, 1, 0);
        t.learn(b, 10, 2, 0);
        t.learn(a, 0, 1, 5); // a refresh: no change
        t.learn(a, 0, 3, 6); // a move
        let k = |mac, vlan| Key { vlan, mac };
        assert_eq!(t.changes_since(v0), Some(vec![k(a, 0), k(b, 10), k(a, 0)]));
        let v1 = t.version();
        assert_eq!(t.changes_since(v1), Some(vec![]));
        // Aged: named too.
        t.run(1_000_000);
        assert_eq!(t.changes_since(v1), Some(vec![k(b, 10), k(a, 0)]));
        // A flush: what came before is no longer known one by one.
        t.learn(a, 0, 1, 2_000_000);
        t.flush();
        assert_eq!(t.changes_since(v1), None);
        assert_eq!(t.changes_since(t.version()), Some(vec![]));
    }

    #[test]
    fn learns_moves_and_ages() {
        let t = MacTable::default();
        let v0 = t.version();
        assert!(t.learn(A, 0, 1, 0));
        assert!(!t.learn(A, 0, 1, 1000), "a refresh changes nothing");
        assert_eq!(t.version(), v0 + 1);
        assert_eq!(t.lookup(A, 0), Some(1));
        assert_eq!(t.lookup(A, 10), None, "per VLAN");
        assert!(t.learn(A, 0, 2, 2000), "moved");
        assert_eq!(t.lookup(A, 0), Some(2));
        assert!(!t.learn([1, 0, 0x5e, 0, 0, 1], 0, 1, 0), "multicast source");
        assert_eq!(t.lookup([0xff; 6], 0), None);
        // Aged 300 s after its last packet.
        assert!(!t.run(2000 + 299_999));
        assert!(t.run(2000 + 300_000));
        assert!(t.is_empty());
        let s = t.stats("br0");
        assert!(s.contains("learned MAC entries     : 1\n"), "{s}");
        assert!(s.contains("moved MAC entries  : 1\n"), "{s}");
        assert!(s.contains("expired MAC entries     : 1\n"), "{s}");
    }

    #[test]
    fn a_refresh_keeps_alive_and_relearns_but_never_moves() {
        let t = MacTable::default();
        assert!(t.refresh(A, 0, 1, 0, 0), "gone: learned");
        assert!(!t.refresh(A, 0, 1, 200_000, 200_000));
        assert!(!t.run(300_000), "refreshed at 200 s");
        assert!(t.learn(A, 0, 2, 250_000), "moved by a new packet");
        assert!(!t.refresh(A, 0, 1, 249_000, 260_000), "older packets");
        assert_eq!(t.lookup(A, 0), Some(2), "not moved back");
        assert!(t.refresh(A, 0, 1, 255_000, 260_000), "newer packets: back");
        assert_eq!(t.lookup(A, 0), Some(1));
    }

    #[test]
    fn evicts_the_oldest_of_the_port_holding_most() {
        let t = MacTable::default();
        t.set_max(3);
        t.learn(A, 0, 1, 0);
        t.learn(B, 0, 1, 1);
        t.learn([2, 0, 0, 0, 0, 3], 0, 2, 2);
        t.learn(A, 0, 1, 3); // A now newer than B on port 1
        t.learn([2, 0, 0, 0, 0, 4], 0, 3, 4);
        assert_eq!(t.lookup(B, 0), None, "port 1's least recent");
        assert_eq!(t.lookup(A, 0), Some(1));
        assert_eq!(t.len(), 3);
        assert!(t.stats("b").contains("evicted MAC entries     : 1\n"));
    }

    #[test]
    fn shows_as_ovs() {
        let t = MacTable::default();
        t.learn(A, 10, 3, 0);
        assert_eq!(
            t.show(5_500),
            " port  VLAN  MAC                Age\n    3    10  02:00:00:00:00:01    5\n"
        );
        t.flush();
        assert!(t.is_empty());
    }

    proptest::proptest! {
        /// Whatever is learned, the table's indexes agree and its size
        /// stays within the limit.
        #[test]
        fn indexes_agree(ops in proptest::collection::vec((0u8..8, 0u16..3, 1u32..4), 0..200), max in 1usize..6) {
            let t = MacTable::default();
            t.set_max(max);
            for (i, (m, v, p)) in ops.into_iter().enumerate() {
                t.learn([2, 0, 0, 0, 0, m], v, p, i as u64);
                let g = t.lock();
                proptest::prop_assert!(g.map.len() <= max);
                proptest::prop_assert_eq!(g.lru.len(), g.map.len());
                proptest::prop_assert_eq!(g.per_port.values().map(|l| l.len()).sum::<usize>(), g.map.len());
            }
        }
    }
}
