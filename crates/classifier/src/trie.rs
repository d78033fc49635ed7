//! A persistent, path-compressed binary trie of address prefixes, one per
//! address field of a table: one walk with a packet's address tells, for
//! every prefix length the table's rules use on that field, whether a rule
//! prefix of that length contains the address, and if not, how many of the
//! address's leading bits prove that none does (OVS's prefix tries, with
//! the proof kept per length so that it is never longer than the one the
//! scan over those rules gives).
//!
//! Each prefix carries items (the rules with it, in order), so that a walk
//! also hands back, for each length that matched, the best of them.
//!
//! Values are left-aligned in a `u128` (an IPv4 address in the top 32
//! bits). Nodes are shared between versions (`Arc`); a change copies the
//! nodes on its path only.

use std::sync::Arc;

/// A set of prefix lengths 1..=128 (length `n` is bit `n - 1`).
pub type Lens = u128;

fn len_bit(n: u32) -> Lens {
    1 << (n - 1)
}

/// Whether length `n` (1..=128) is in `l`.
pub fn lens_has(l: Lens, n: u32) -> bool {
    l & len_bit(n) != 0
}

/// The top `n` bits set (n in 0..=128).
pub(crate) fn top(n: u32) -> u128 {
    u128::MAX.checked_shl(128 - n).unwrap_or(0)
}

/// Bit `i` of `v` (0 is the top bit).
fn bit(v: u128, i: u32) -> usize {
    (v >> (127 - i)) as usize & 1
}

/// One node, 64 bytes: a walk of a large table is a chain of dependent
/// loads, one per node, so a node is kept small. A node holds
/// the bits from its parent's end to its own; it keeps the whole prefix
/// up to its end, so that a walk compares without shifting.
#[derive(Debug, Clone)]
#[repr(C)]
struct Node<T> {
    /// The prefix this node ends, left-aligned, bits past `end` zero.
    key: u128,
    /// Lengths of the prefixes in this subtree, this node's included.
    lens: Lens,
    kids: [Option<Arc<Node<T>>>; 2],
    /// The items of the prefix `key`/`end`, in order (`None` rather than
    /// an empty list). Behind a thin pointer, which keeps the node at 64
    /// bytes (only a walk that matches here follows it) and lets a node
    /// copied for a new version share the list.
    #[allow(clippy::redundant_allocation)]
    here: Option<Arc<Vec<T>>>,
    /// The length of `key` (0 only at the root).
    end: u32,
}

impl<T: Clone + Ord> Node<T> {
    /// The leaf holding `item` for prefix `v`/`plen`.
    fn leaf(v: u128, plen: u32, item: T) -> Arc<Self> {
        Arc::new(Node {
            key: v,
            lens: len_bit(plen),
            kids: [None, None],
            here: Some(Arc::new(vec![item])),
            end: plen,
        })
    }

    fn add(&mut self, item: T) {
        let here = Arc::make_mut(self.here.get_or_insert_with(Arc::default));
        let at = here.partition_point(|x| *x < item);
        here.insert(at, item);
    }

    fn relens(&mut self) {
        let mut l = if self.here.is_none() {
            0
        } else {
            len_bit(self.end)
        };
        for k in self.kids.iter().flatten() {
            l |= k.lens;
        }
        self.lens = l;
    }
}

/// Addresses [`PrefixTrie::warm`] walks together (a batch's).
const WARM: usize = 32;

/// Matched lengths whose items a walk keeps (the rest: see `matched`).
const HITS: usize = 24;

/// What a walk found for one address.
#[derive(Debug, Clone)]
pub struct TrieMatch<'a, T> {
    /// Lengths with a prefix that contains the address.
    pub matched: Lens,
    /// For a length present but not matched: how many leading bits of the
    /// address prove no prefix of that length contains it.
    pub proof: [u8; 129],
    /// The items of the matched prefixes, shortest first (the first
    /// [`HITS`] lengths only).
    hits: arrayvec::ArrayVec<(u32, &'a Vec<T>), HITS>,
}

impl<'a, T> TrieMatch<'a, T> {
    /// The items of the prefix of length `n` that contains the address, if
    /// it matched and the walk kept them.
    pub fn items(&self, n: u32) -> Option<&'a [T]> {
        self.hits.iter().find(|h| h.0 == n).map(|h| &h.1[..])
    }
}

/// The prefixes of one field, each with its items.
#[derive(Debug, Clone)]
pub struct PrefixTrie<T> {
    root: Option<Arc<Node<T>>>,
}

impl<T> Default for PrefixTrie<T> {
    fn default() -> Self {
        PrefixTrie { root: None }
    }
}

impl<T: Clone + Ord> PrefixTrie<T> {
    /// Whether the trie holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Adds prefix `v` (left-aligned; bits past `plen` zero) of `plen`
    /// bits (1..=128).
    pub fn insert(&mut self, v: u128, plen: u32, item: T) {
        let root = self.root.get_or_insert_with(|| {
            Arc::new(Node {
                key: 0,
                lens: 0,
                kids: [None, None],
                here: None,
                end: 0,
            })
        });
        Self::ins(Arc::make_mut(root), v, plen, item);
    }

    fn ins(n: &mut Node<T>, v: u128, plen: u32, item: T) {
        // The bits before this node agree (the walk came here); where do
        // `v` and the node part?
        let common = (v ^ n.key).leading_zeros().min(plen).min(n.end);
        if common < n.end {
            // Split this node after `common` bits: the old node becomes a
            // child of what stays.
            let rest = Node {
                key: n.key,
                lens: n.lens,
                kids: std::mem::take(&mut n.kids),
                here: n.here.take(),
                end: n.end,
            };
            let b = bit(rest.key, common);
            n.key &= top(common);
            n.end = common;
            n.kids[b] = Some(Arc::new(rest));
            if common == plen {
                n.here = Some(Arc::new(vec![item]));
            } else {
                n.kids[bit(v, common)] = Some(Node::leaf(v, plen, item));
            }
            // An insert only adds a length below: no need to read the
            // children's (a sibling per level is a cache miss in a large
            // trie).
            n.lens |= len_bit(plen);
            return;
        }
        if n.end == plen {
            n.add(item);
        } else {
            let b = bit(v, n.end);
            match &mut n.kids[b] {
                Some(k) => Self::ins(Arc::make_mut(k), v, plen, item),
                None => n.kids[b] = Some(Node::leaf(v, plen, item)),
            }
        }
        n.lens |= len_bit(plen);
    }

    /// Removes `item` from prefix `v`/`plen`, if there.
    pub fn remove(&mut self, v: u128, plen: u32, item: &T) {
        let Some(root) = self.root.as_mut() else {
            return;
        };
        let gone = Self::rem(Arc::make_mut(root), v, plen, item);
        if gone {
            self.root = None;
        }
    }

    /// Returns whether `n` is now empty (its parent drops it).
    fn rem(n: &mut Node<T>, v: u128, plen: u32, item: &T) -> bool {
        if n.end == plen {
            if let Some(here) = n.here.as_mut() {
                if let Ok(at) = here.binary_search(item) {
                    Arc::make_mut(here).remove(at);
                }
                if here.is_empty() {
                    n.here = None;
                }
            }
        } else if n.end < plen {
            let b = bit(v, n.end);
            if let Some(k) = n.kids[b].as_mut() {
                if Self::rem(Arc::make_mut(k), v, plen, item) {
                    n.kids[b] = None;
                }
            }
        }
        if n.here.is_none() {
            match (&n.kids[0], &n.kids[1]) {
                (None, None) => return true,
                // A lone child merges into this node: the path stays compressed.
                (Some(_), None) | (None, Some(_)) => {
                    let k = n.kids[0]
                        .take()
                        .or_else(|| n.kids[1].take())
                        .expect("one child");
                    *n = Arc::unwrap_or_clone(k);
                    return false;
                }
                _ => {}
            }
        }
        n.relens();
        false
    }

    /// Walks the trie with address `x` (left-aligned).
    pub fn lookup(&self, x: u128) -> TrieMatch<'_, T> {
        let mut m = TrieMatch {
            matched: 0,
            proof: [0; 129],
            hits: arrayvec::ArrayVec::new(),
        };
        let mut node = self.root.as_deref();
        while let Some(n) = node {
            // Bits of `key` past `end` are zero, and those before the
            // node's start agree: the first difference says all.
            let diff = (x ^ n.key).leading_zeros();
            if diff < n.end {
                // The address leaves the trie inside this node: every
                // length below is disproved by bits 0..=diff.
                Self::prove(&mut m, n.lens, diff + 1);
                return m;
            }
            let end = n.end;
            let here = match n.here.as_deref() {
                None => 0,
                Some(items) => {
                    let _ = m.hits.try_push((end, items));
                    len_bit(end)
                }
            };
            m.matched |= here;
            if end == 128 {
                return m;
            }
            // Bit `end` of `x` differs from the key's (zero) exactly when
            // the first difference is there.
            let next = n.kids[usize::from(diff == end)].as_deref();
            // Lengths only the other side has: disproved one bit further.
            let gone = n.lens & !here & !next.map_or(0, |k| k.lens);
            if gone != 0 {
                Self::prove(&mut m, gone, end + 1);
            }
            node = next;
        }
        m
    }

    /// Brings into the cache the nodes the walks of `xs` will read, and
    /// the item lists of the prefixes they match. The walks go in lockstep, one node
    /// each per round, with a prefetch of the next: the loads of different
    /// addresses overlap instead of each waiting for the one before (a
    /// large trie's nodes are not in the CPU caches, and a walk is a chain
    /// of dependent loads).
    pub fn warm(&self, xs: impl Iterator<Item = u128>, deep: impl Fn(&T)) {
        let Some(root) = self.root.as_deref() else {
            return;
        };
        // Each walk keeps the items of the longest prefix it matched: the
        // ones a lookup uses (every prefix's on a long path would fill the
        // list after a few walks).
        let mut at = arrayvec::ArrayVec::<(&Node<T>, u128, Option<&Vec<T>>), WARM>::new();
        for x in xs.take(WARM) {
            at.push((root, x, None));
        }
        let mut lists = arrayvec::ArrayVec::<&Vec<T>, WARM>::new();
        while !at.is_empty() {
            let mut i = 0;
            while i < at.len() {
                let (n, x, mut last) = at[i];
                let diff = (x ^ n.key).leading_zeros();
                let next = if diff < n.end {
                    None
                } else {
                    if let Some(items) = n.here.as_deref() {
                        last = Some(items);
                    }
                    if n.end == 128 {
                        None
                    } else {
                        n.kids[usize::from(diff == n.end)].as_deref()
                    }
                };
                match next {
                    Some(k) => {
                        sluice_packet::prefetch::read(k);
                        at[i] = (k, x, last);
                        i += 1;
                    }
                    None => {
                        if let Some(items) = last {
                            sluice_packet::prefetch::read(items);
                            let _ = lists.try_push(items);
                        }
                        at.swap_remove(i);
                    }
                }
            }
        }
        for l in &lists {
            sluice_packet::prefetch::read_addr(l.as_ptr());
        }
        // Then what the best item of each points to (its lists' loads
        // overlap: each waits for its own line only).
        for l in &lists {
            if let Some(first) = l.first() {
                deep(first);
            }
        }
    }

    fn prove(m: &mut TrieMatch<'_, T>, lens: Lens, bits: u32) {
        let mut l = lens & !m.matched;
        while l != 0 {
            let n = l.trailing_zeros() + 1;
            l &= l - 1;
            if m.proof[n as usize] == 0 {
                m.proof[n as usize] = bits.min(n) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: for each length, matched or the scan's proof.
    fn reference(prefixes: &[(u128, u32)], x: u128) -> (Lens, [u8; 129]) {
        let mut matched = 0;
        let mut proof = [0u8; 129];
        for &(v, l) in prefixes {
            if x & top(l) == v {
                matched |= len_bit(l);
            }
        }
        for &(v, l) in prefixes {
            if lens_has(matched, l) {
                continue;
            }
            let keep = ((x ^ v) & top(l)).leading_zeros() + 1;
            proof[l as usize] = proof[l as usize].max(keep as u8);
        }
        (matched, proof)
    }

    fn check(trie: &PrefixTrie<u32>, prefixes: &[(u128, u32)], x: u128) {
        let got = trie.lookup(x);
        let (matched, proof) = reference(prefixes, x);
        assert_eq!(got.matched, matched, "matched for {x:x}");
        for &(v, l) in prefixes {
            if x & top(l) == v {
                let mut want: Vec<u32> = prefixes
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| **p == (v, l))
                    .map(|(i, _)| i as u32)
                    .collect();
                want.sort();
                assert_eq!(got.items(l), Some(&want[..]), "items of /{l}");
            }
        }
        for &(_, l) in prefixes {
            if !lens_has(matched, l) {
                assert_eq!(
                    got.proof[l as usize], proof[l as usize],
                    "proof of /{l} for {x:x}"
                );
            }
        }
    }

    /// `check` with dropped entries of `all` as (0, 0).
    fn check_live(trie: &PrefixTrie<u32>, all: &[(u128, u32)], live: &[(u128, u32)], x: u128) {
        let got = trie.lookup(x);
        let (matched, proof) = reference(live, x);
        assert_eq!(got.matched, matched);
        for &(v, l) in live {
            if !lens_has(matched, l) {
                assert_eq!(got.proof[l as usize], proof[l as usize]);
            } else if x & top(l) == v {
                let want: Vec<u32> = (0..all.len() as u32)
                    .filter(|&i| all[i as usize] == (v, l))
                    .collect();
                assert_eq!(got.items(l), Some(&want[..]));
            }
        }
    }

    #[test]
    fn routes() {
        let p = |a: u32, l: u32| ((a as u128) << 96 & top(l), l);
        let prefixes = [
            p(0x0a00_0000, 8),
            p(0x0a01_0000, 16),
            p(0x0a01_0200, 24),
            p(0x0b00_0000, 8),
        ];
        let mut t = PrefixTrie::default();
        for (i, &(v, l)) in prefixes.iter().enumerate() {
            t.insert(v, l, i);
        }
        let m = t.lookup((0x0a01_0203u128) << 96);
        assert_eq!(m.items(16), Some(&[1][..]));
        assert!(lens_has(m.matched, 8) && lens_has(m.matched, 16) && lens_has(m.matched, 24));
        drop(m);
        let m = t.lookup((0x0a02_0000u128) << 96);
        assert!(lens_has(m.matched, 8) && !lens_has(m.matched, 16));
        // 10.2 vs 10.1: differ at bit 14, so 15 bits prove /16 and /24 miss.
        assert_eq!((m.proof[16], m.proof[24]), (15, 15));
        drop(m);
        for (i, &(v, l)) in prefixes.iter().enumerate() {
            t.remove(v, l, &i);
        }
        assert!(t.is_empty());
    }

    proptest! {
        #[test]
        fn trie_equals_scan(
            raw in proptest::collection::vec((any::<u128>(), 1u32..=128), 1..60),
            short in any::<bool>(),
            xs in proptest::collection::vec(any::<u128>(), 20),
            drop in proptest::collection::vec(any::<bool>(), 60),
        ) {
            // Short prefixes of few distinct bits share nodes and collide.
            let mut prefixes: Vec<(u128, u32)> = raw
                .iter()
                .map(|&(v, l)| {
                    let (v, l) = if short { (v & top(6), l % 12 + 1) } else { (v, l) };
                    (v & top(l), l)
                })
                .collect();
            let mut t = PrefixTrie::default();
            for (i, &(v, l)) in prefixes.iter().enumerate() {
                t.insert(v, l, i as u32);
            }
            let old = t.clone();
            let near: Vec<u128> = prefixes.iter().map(|&(v, _)| v).chain(xs.iter().copied()).collect();
            // Warming walks every kind of path (leaving inside a node,
            // ending at /128, matching on the way) and changes nothing.
            t.warm(near.iter().copied(), |_| {});
            for &x in &near {
                check(&t, &prefixes, x);
            }
            // Items are indexes into `prefixes`: keep them so by leaving
            // dropped prefixes in place as (0, 0), which no check looks at.
            let mut kept = prefixes.clone();
            for (i, &(v, l)) in prefixes.iter().enumerate() {
                if drop[i] {
                    t.remove(v, l, &(i as u32));
                    kept[i] = (0, 0);
                }
            }
            let live: Vec<_> = kept.iter().copied().filter(|p| p.1 > 0).collect();
            for &x in &near {
                check_live(&t, &kept, &live, x);
                check(&old, &prefixes, x);
            }
            for (i, &(v, l)) in kept.iter().enumerate() {
                if l > 0 {
                    t.remove(v, l, &(i as u32));
                }
            }
            prefixes.clear();
            prop_assert!(t.is_empty() && prefixes.is_empty());
        }
    }
}
