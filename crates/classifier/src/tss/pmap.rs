//! A persistent ordered map for the levels of a subtable: a B+-tree whose
//! nodes are shared `Arc`s, copied on write, so cloning the map is O(1) and
//! a change copies the O(log n) nodes on its path.
//!
//! Why not `im::OrdMap`: a flow-mod's insert spent most of its time there
//! (about 1,200 instructions of an add's 2,300): its nodes hold entries as
//! (key, value) pairs, which a binary search strides over, an insert
//! searches each node twice, and a key already present costs a second
//! walk to update. Here a node holds its keys in an array of their own (a
//! search touches only keys), values only in the leaves, and
//! [`PMap::entry`] finds or makes an entry in one walk, splitting full
//! nodes on the way down. A node that a run of ascending keys fills (host
//! routes added in order, a bulk load) is split with all but one entry
//! kept, so such a run leaves nodes full, not half empty.
//!
//! Invariant of an inner node: every key under `kids[i]` is at least
//! `seps[i - 1]` and below `seps[i]`. Removals may leave a separator that
//! is no longer a key; it still bounds the keys, which is all a walk needs.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use arrayvec::ArrayVec;

/// Most keys in a leaf, most children of an inner node.
const MAX: usize = 32;
/// A node with fewer (the root excepted) takes from or merges with a
/// sibling after a removal.
const MIN: usize = MAX / 2;

/// The map.
pub(super) struct PMap<K, V> {
    root: Option<Arc<Node<K, V>>>,
    len: usize,
}

// (Nodes live behind an `Arc` each: the variants' sizes cost nothing, and
// boxing one would add a load per level.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Node<K, V> {
    Leaf(Leaf<K, V>),
    Inner(Inner<K, V>),
}

#[derive(Clone)]
struct Leaf<K, V> {
    keys: ArrayVec<K, MAX>,
    vals: ArrayVec<V, MAX>,
}

#[derive(Clone)]
struct Inner<K, V> {
    /// `kids.len() - 1` separators.
    seps: ArrayVec<K, MAX>,
    kids: ArrayVec<Arc<Node<K, V>>, MAX>,
}

impl<K, V> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap {
            root: self.root.clone(),
            len: self.len,
        }
    }
}

impl<K, V> Default for PMap<K, V> {
    fn default() -> Self {
        PMap { root: None, len: 0 }
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for PMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> Node<K, V> {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(l) => l.keys.len(),
            Node::Inner(n) => n.kids.len(),
        }
    }
}

impl<K: Ord, V> Inner<K, V> {
    /// The child whose keys would include `k`.
    fn route(&self, k: &K) -> usize {
        self.seps.partition_point(|s| s <= k)
    }
}

impl<K, V> Inner<K, V> {
    /// [`Inner::route`] of the key `probe` orders against.
    fn route_by(&self, probe: &impl Fn(&K) -> Ordering) -> usize {
        self.seps.partition_point(|s| probe(s) != Ordering::Greater)
    }
}

impl<K: Ord + Clone, V: Clone> Node<K, V> {
    /// Whether `k` goes past every key of this (full) node: a run of
    /// ascending keys, for which a split keeps all but one entry left.
    fn appends(&self, k: &K) -> bool {
        match self {
            Node::Leaf(l) => l.keys.last().is_some_and(|x| x < k),
            Node::Inner(n) => n.seps.last().is_some_and(|s| s <= k),
        }
    }

    /// Splits a full node: it keeps its first `at` entries (or children)
    /// and returns the separator and the rest.
    fn split(&mut self, at: usize) -> (K, Node<K, V>) {
        match self {
            Node::Leaf(l) => {
                let keys: ArrayVec<K, MAX> = l.keys.drain(at..).collect();
                let vals: ArrayVec<V, MAX> = l.vals.drain(at..).collect();
                let sep = keys[0].clone();
                (sep, Node::Leaf(Leaf { keys, vals }))
            }
            Node::Inner(n) => {
                let kids: ArrayVec<_, MAX> = n.kids.drain(at..).collect();
                let seps: ArrayVec<K, MAX> = n.seps.drain(at..).collect();
                let sep = n.seps.pop().expect("a full node has separators");
                (sep, Node::Inner(Inner { seps, kids }))
            }
        }
    }

    /// Removes `k`'s entry below this node, known to be there, mending
    /// children left with too few entries.
    fn remove(&mut self, k: &K) -> Option<V> {
        match self {
            Node::Leaf(l) => {
                let i = l.keys.binary_search(k).ok()?;
                l.keys.remove(i);
                Some(l.vals.remove(i))
            }
            Node::Inner(n) => {
                let i = n.route(k);
                let v = Arc::make_mut(&mut n.kids[i]).remove(k)?;
                if n.kids[i].len() < MIN {
                    n.mend(i);
                }
                Some(v)
            }
        }
    }
}

impl<K: Ord + Clone, V: Clone> Inner<K, V> {
    /// Child `i` has fewer than [`MIN`] entries: merges it with a
    /// neighbour when both fit in one node, or else moves one entry over
    /// from the neighbour (which has more than enough).
    fn mend(&mut self, i: usize) {
        if self.kids.len() < 2 {
            return;
        }
        let a = i.saturating_sub(1).min(self.kids.len() - 2);
        let b = a + 1;
        if self.kids[a].len() + self.kids[b].len() <= MAX {
            let right = self.kids.remove(b);
            let sep = self.seps.remove(a);
            let right = Arc::try_unwrap(right).unwrap_or_else(|r| (*r).clone());
            match (Arc::make_mut(&mut self.kids[a]), right) {
                (Node::Leaf(l), Node::Leaf(r)) => {
                    l.keys.extend(r.keys);
                    l.vals.extend(r.vals);
                }
                (Node::Inner(l), Node::Inner(r)) => {
                    l.seps.push(sep);
                    l.seps.extend(r.seps);
                    l.kids.extend(r.kids);
                }
                _ => unreachable!("siblings are at one depth"),
            }
            return;
        }
        let (left, right) = self.kids.split_at_mut(b);
        let (left, right) = (Arc::make_mut(&mut left[a]), Arc::make_mut(&mut right[0]));
        let sep = &mut self.seps[a];
        let from_left = i == b;
        match (left, right) {
            (Node::Leaf(l), Node::Leaf(r)) => {
                if from_left {
                    let (k, v) = (l.keys.pop(), l.vals.pop());
                    let (k, v) = (k.expect("a lender"), v.expect("a lender"));
                    *sep = k.clone();
                    r.keys.insert(0, k);
                    r.vals.insert(0, v);
                } else {
                    l.keys.push(r.keys.remove(0));
                    l.vals.push(r.vals.remove(0));
                    *sep = r.keys[0].clone();
                }
            }
            (Node::Inner(l), Node::Inner(r)) => {
                if from_left {
                    let kid = l.kids.pop().expect("a lender");
                    let up = l.seps.pop().expect("a lender");
                    r.kids.insert(0, kid);
                    r.seps.insert(0, std::mem::replace(sep, up));
                } else {
                    l.kids.push(r.kids.remove(0));
                    let up = r.seps.remove(0);
                    l.seps.push(std::mem::replace(sep, up));
                }
            }
            _ => unreachable!("siblings are at one depth"),
        }
    }
}

impl<K: Ord + Clone, V: Clone> PMap<K, V> {
    /// The value of `k`.
    pub(super) fn get(&self, k: &K) -> Option<&V> {
        self.get_by(|x| x.cmp(k))
    }

    /// The value of the key that `probe` says is equal, where `probe(x)`
    /// orders key `x` against the one sought (as `x.cmp(sought)`): a
    /// look-up by a key that is not built as a `K` (no allocation).
    pub(super) fn get_by(&self, probe: impl Fn(&K) -> Ordering) -> Option<&V> {
        let mut node = self.root.as_deref()?;
        loop {
            match node {
                Node::Leaf(l) => return l.keys.binary_search_by(&probe).ok().map(|i| &l.vals[i]),
                Node::Inner(n) => node = &n.kids[n.route_by(&probe)],
            }
        }
    }

    /// The value of `k`, to change (the nodes on its path copied if shared).
    pub(super) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let mut node = Arc::make_mut(self.root.as_mut()?);
        loop {
            match node {
                Node::Leaf(l) => return l.keys.binary_search(k).ok().map(|i| &mut l.vals[i]),
                Node::Inner(n) => {
                    let i = n.route(k);
                    node = Arc::make_mut(&mut n.kids[i]);
                }
            }
        }
    }

    /// The value of `k`, made with `new` if there was none; and whether
    /// there was. One walk: full nodes on the way are split first.
    pub(super) fn entry(&mut self, k: K, new: impl FnOnce() -> V) -> (&mut V, bool) {
        let root = self.root.get_or_insert_with(|| {
            Arc::new(Node::Leaf(Leaf {
                keys: ArrayVec::new(),
                vals: ArrayVec::new(),
            }))
        });
        if root.len() == MAX {
            let at = if root.appends(&k) { MAX - 1 } else { MIN };
            let mut left = Arc::clone(root);
            let (sep, right) = Arc::make_mut(&mut left).split(at);
            let mut seps = ArrayVec::new();
            seps.push(sep);
            let mut kids = ArrayVec::new();
            kids.push(left);
            kids.push(Arc::new(right));
            *root = Arc::new(Node::Inner(Inner { seps, kids }));
        }
        let mut node = Arc::make_mut(root);
        loop {
            match node {
                Node::Leaf(l) => {
                    return match l.keys.binary_search(&k) {
                        Ok(i) => (&mut l.vals[i], true),
                        Err(i) => {
                            l.keys.insert(i, k);
                            l.vals.insert(i, new());
                            self.len += 1;
                            (&mut l.vals[i], false)
                        }
                    };
                }
                Node::Inner(n) => {
                    let mut i = n.route(&k);
                    if n.kids[i].len() == MAX {
                        let at = if n.kids[i].appends(&k) { MAX - 1 } else { MIN };
                        let (sep, right) = Arc::make_mut(&mut n.kids[i]).split(at);
                        let past = k >= sep;
                        n.seps.insert(i, sep);
                        n.kids.insert(i + 1, Arc::new(right));
                        i += usize::from(past);
                    }
                    node = Arc::make_mut(&mut n.kids[i]);
                }
            }
        }
    }

    /// Sets `k`'s value, returning the one it replaced.
    #[cfg(test)]
    pub(super) fn insert(&mut self, k: K, v: V) -> Option<V> {
        let mut v = Some(v);
        let (slot, had) = self.entry(k, || v.take().expect("made once"));
        debug_assert_eq!(had, v.is_some());
        v.map(|v| std::mem::replace(slot, v))
    }

    /// Removes `k`'s entry.
    pub(super) fn remove(&mut self, k: &K) -> Option<V> {
        // Looked up first: a missing key copies no node.
        self.get(k)?;
        let root = self.root.as_mut()?;
        let v = Arc::make_mut(root).remove(k)?;
        self.len -= 1;
        match &**root {
            Node::Inner(n) if n.kids.len() == 1 => *root = Arc::clone(&n.kids[0]),
            Node::Leaf(l) if l.keys.is_empty() => self.root = None,
            _ => {}
        }
        Some(v)
    }

    /// The entry with the greatest key at most `k`.
    #[cfg(test)]
    pub(super) fn get_prev(&self, k: &K) -> Option<(&K, &V)> {
        self.get_prev_by(|x| x.cmp(k))
    }

    /// The entry with the least key at least `k`.
    #[cfg(test)]
    pub(super) fn get_next(&self, k: &K) -> Option<(&K, &V)> {
        self.get_next_by(|x| x.cmp(k))
    }

    /// [`PMap::get_prev`] of the key `probe` orders against (see
    /// [`PMap::get_by`]).
    pub(super) fn get_prev_by(&self, probe: impl Fn(&K) -> Ordering) -> Option<(&K, &V)> {
        fn prev<'a, K, V>(
            node: &'a Node<K, V>,
            probe: &impl Fn(&K) -> Ordering,
        ) -> Option<(&'a K, &'a V)> {
            match node {
                Node::Leaf(l) => {
                    let i = l
                        .keys
                        .partition_point(|x| probe(x) != Ordering::Greater)
                        .checked_sub(1)?;
                    Some((&l.keys[i], &l.vals[i]))
                }
                // (A child before the routed one holds keys below the
                // probe's: it answers if the routed one has none at most
                // the probe's.)
                Node::Inner(n) => (0..=n.route_by(probe))
                    .rev()
                    .find_map(|j| prev(&n.kids[j], probe)),
            }
        }
        prev(self.root.as_deref()?, &probe)
    }

    /// [`PMap::get_next`] of the key `probe` orders against.
    pub(super) fn get_next_by(&self, probe: impl Fn(&K) -> Ordering) -> Option<(&K, &V)> {
        fn next<'a, K, V>(
            node: &'a Node<K, V>,
            probe: &impl Fn(&K) -> Ordering,
        ) -> Option<(&'a K, &'a V)> {
            match node {
                Node::Leaf(l) => {
                    let i = l.keys.partition_point(|x| probe(x) == Ordering::Less);
                    Some((l.keys.get(i)?, &l.vals[i]))
                }
                Node::Inner(n) => {
                    (n.route_by(probe)..n.kids.len()).find_map(|j| next(&n.kids[j], probe))
                }
            }
        }
        next(self.root.as_deref()?, &probe)
    }

    /// The entry with the least key.
    pub(super) fn get_min(&self) -> Option<(&K, &V)> {
        self.iter().next()
    }

    /// The entry with the greatest key.
    pub(super) fn get_max(&self) -> Option<(&K, &V)> {
        fn max<K, V>(node: &Node<K, V>) -> Option<(&K, &V)> {
            match node {
                Node::Leaf(l) => Some((l.keys.last()?, l.vals.last()?)),
                Node::Inner(n) => n.kids.iter().rev().find_map(|k| max(k)),
            }
        }
        max(self.root.as_deref()?)
    }

    /// The values, in key order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

impl<K, V> PMap<K, V> {
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The entries, in key order.
    pub(super) fn iter(&self) -> Iter<'_, K, V> {
        let mut it = Iter {
            up: Vec::new(),
            leaf: None,
            i: 0,
        };
        if let Some(root) = self.root.as_deref() {
            it.down(root);
        }
        it
    }
}

/// An in-order walk: the inner nodes above the current leaf, each with
/// the next child to visit.
pub(super) struct Iter<'a, K, V> {
    up: Vec<(&'a Inner<K, V>, usize)>,
    leaf: Option<&'a Leaf<K, V>>,
    i: usize,
}

impl<'a, K, V> Iter<'a, K, V> {
    fn down(&mut self, mut node: &'a Node<K, V>) {
        loop {
            match node {
                Node::Leaf(l) => {
                    self.leaf = Some(l);
                    self.i = 0;
                    return;
                }
                Node::Inner(n) => {
                    self.up.push((n, 1));
                    node = &n.kids[0];
                }
            }
        }
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(l) = self.leaf {
                if let (Some(k), Some(v)) = (l.keys.get(self.i), l.vals.get(self.i)) {
                    self.i += 1;
                    return Some((k, v));
                }
                self.leaf = None;
            }
            let top = self.up.last_mut()?;
            let n: &'a Inner<K, V> = top.0;
            if let Some(kid) = n.kids.get(top.1) {
                top.1 += 1;
                self.down(kid);
            } else {
                self.up.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Checks the separators bound the keys, and every node but the root
    /// is non-empty; returns the keys in order.
    fn check<K: Ord + Clone + fmt::Debug, V>(m: &PMap<K, V>) -> Vec<K> {
        fn walk<K: Ord + Clone + fmt::Debug, V>(
            node: &Node<K, V>,
            lo: Option<&K>,
            hi: Option<&K>,
            out: &mut Vec<K>,
        ) {
            match node {
                Node::Leaf(l) => {
                    assert_eq!(l.keys.len(), l.vals.len());
                    for k in &l.keys {
                        assert!(lo.is_none_or(|lo| lo <= k), "{k:?} below {lo:?}");
                        assert!(hi.is_none_or(|hi| k < hi), "{k:?} not below {hi:?}");
                        out.push(k.clone());
                    }
                }
                Node::Inner(n) => {
                    assert_eq!(n.seps.len() + 1, n.kids.len());
                    for (j, kid) in n.kids.iter().enumerate() {
                        assert!(kid.len() > 0, "an empty node");
                        let lo = if j == 0 { lo } else { Some(&n.seps[j - 1]) };
                        let hi = n.seps.get(j).or(hi);
                        walk(kid, lo, hi, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        if let Some(r) = m.root.as_deref() {
            walk(r, None, None, &mut out);
        }
        assert!(out.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(out.len(), m.len());
        out
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u32),
        Bump(u16),
        Remove(u16),
        Snapshot,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Keys from a narrow range so that removals hit and trees shrink;
        // runs of ascending keys as bulk loads make them.
        prop_oneof![
            4 => (0u16..2000, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => (0u16..2000).prop_map(Op::Bump),
            4 => (0u16..2000).prop_map(Op::Remove),
            1 => Just(Op::Snapshot),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every operation answers as `BTreeMap`'s, neighbours included,
        /// and a clone taken earlier is unchanged by what follows.
        #[test]
        fn behaves_as_a_btreemap(
            start in 0u16..3000,
            run in 0usize..3000,
            ops in prop::collection::vec(op(), 0..3000),
        ) {
            let mut m = PMap::new();
            let mut r = BTreeMap::new();
            for k in start..start.saturating_add(run as u16) {
                prop_assert_eq!(m.insert(k, u32::from(k)), r.insert(k, u32::from(k)));
            }
            let mut snaps = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(m.insert(k, v), r.insert(k, v)),
                    Op::Bump(k) => {
                        let (v, had) = m.entry(k, || 7);
                        *v += 1;
                        prop_assert_eq!(had, r.contains_key(&k));
                        *r.entry(k).or_insert(7) += 1;
                    }
                    Op::Remove(k) => prop_assert_eq!(m.remove(&k), r.remove(&k)),
                    Op::Snapshot => snaps.push((m.clone(), r.clone())),
                }
            }
            let keys = check(&m);
            prop_assert_eq!(&keys, &r.keys().copied().collect::<Vec<_>>());
            prop_assert_eq!(
                m.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
                r.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>()
            );
            for k in (0..2100).step_by(7) {
                prop_assert_eq!(m.get(&k), r.get(&k));
                prop_assert_eq!(m.get_prev(&k), r.range(..=k).next_back());
                prop_assert_eq!(m.get_by(|x| x.cmp(&k)), r.get(&k));
                prop_assert_eq!(m.get_next(&k), r.range(k..).next());
            }
            prop_assert_eq!(m.get_min(), r.iter().next());
            prop_assert_eq!(m.get_max(), r.iter().next_back());
            for (sm, sr) in snaps {
                check(&sm);
                prop_assert_eq!(
                    sm.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
                    sr.into_iter().collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn an_ascending_run_leaves_full_nodes_and_empties_cleanly() {
        let mut m = PMap::new();
        for k in 0..100_000u32 {
            assert_eq!(m.insert(k, k), None);
        }
        check(&m);
        // Leaves hold all but one key each (the last excepted).
        let root = m.root.as_deref().expect("a root");
        let mut leaves = 0;
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            match n {
                Node::Leaf(_) => leaves += 1,
                Node::Inner(i) => stack.extend(i.kids.iter().map(|k| &**k)),
            }
        }
        assert!(leaves <= 100_000 / (MAX - 1) + 1, "{leaves} leaves");
        let old = m.clone();
        for k in (0..100_000u32).rev().step_by(3) {
            assert_eq!(m.get_mut(&k).map(|v| *v), Some(k));
            assert_eq!(m.remove(&k), Some(k));
        }
        check(&m);
        for k in 0..100_000u32 {
            assert_eq!(m.remove(&k).is_some(), (99_999 - k) % 3 != 0);
        }
        assert_eq!(m.len(), 0);
        assert!(m.root.is_none());
        assert_eq!(check(&old).len(), 100_000);
    }
}
