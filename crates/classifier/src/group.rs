//! OpenFlow 1.3 groups (section 5.6): a group is a list of buckets of
//! actions that rules reach with the `group:N` action.
//!
//! - `all`: every bucket runs, each on the packet as it was when the
//!   group was reached (flooding, multicast);
//! - `select`: one live bucket, chosen by a hash of the flow's addresses,
//!   protocol and ports and the buckets' weights, so a flow's packets stay
//!   on one bucket;
//! - `indirect`: its one bucket (a next hop many rules share);
//! - `fast_failover`: the first live bucket, a bucket being live while its
//!   watch port is one of the switch's ports and its watch group has a
//!   live bucket.
//!
//! Groups live in the rule set (`crate::table::RuleSet`, whose group
//! operations are in `table/groups.rs`): a group change
//! is a new version, so cached decisions that went through it are
//! revalidated as after a flow-mod. Each group and each bucket counts the
//! packets that went through it the way rules do (a counter the cached
//! decision credits).

use std::sync::{Arc, Mutex};

use sluice_packet::key::FlowKey;
use sluice_packet::wire::l4::proto;

use crate::action::Action;
use crate::rule::Rule;

/// Hash slots of a select group: a flow's hash picks a slot, each slot a
/// bucket (by weight), so the choice is a table lookup the datapath can
/// make per packet. 4096 keep each bucket's share of the slots within
/// about 1 % of its weight's (256 were 3 % off and more).
pub const SELECT_SLOTS: usize = 4096;

/// A select group's slots: which of its chosen buckets each slot picks.
#[derive(Debug, PartialEq, Eq)]
pub struct SlotTable {
    /// Per slot, an index into `buckets` (only the first `mask + 1` in
    /// use with [`SlotHash::Ovs`]).
    pub variant: [u16; SELECT_SLOTS],
    /// The buckets some slot picks, ascending.
    pub buckets: Vec<u16>,
    /// How a packet's hash and slot are found.
    pub hash: SlotHash,
}

/// How a select group hashes a packet to a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotHash {
    /// OVS's `dp_hash` ([`crate::ovs_hash::dp_hash`] with this algorithm
    /// and basis), masked to the group's hash values: the bucket OVS 3.1
    /// picks for the packet.
    Ovs {
        /// `OVS_HASH_ALG_*`.
        alg: u32,
        /// The hash's basis.
        basis: u32,
        /// Hash values less one (a power of two less one, at most 255).
        mask: u32,
    },
    /// Sluice's own [`symmetric_hash`] over [`SELECT_SLOTS`] slots: where
    /// OVS uses its default method (buckets whose weights need more than
    /// 256 hash values) or the `hash` method's fields.
    Sluice,
}

impl SlotTable {
    /// The bucket slot `s` picks.
    #[inline]
    pub fn bucket(&self, s: usize) -> usize {
        usize::from(self.buckets[usize::from(self.variant[s])])
    }

    /// The slot a packet with key `key` hashes to.
    #[inline]
    pub fn slot_of(&self, key: &FlowKey) -> usize {
        match self.hash {
            SlotHash::Ovs { alg, basis, mask } => {
                (crate::ovs_hash::dp_hash(key, alg, basis) & mask) as usize
            }
            SlotHash::Sluice => select_slot(symmetric_hash(key)),
        }
    }

    /// The variant (index into `buckets`) a packet with key `key` picks.
    #[inline]
    pub fn variant_of(&self, key: &FlowKey) -> usize {
        usize::from(self.variant[self.slot_of(key)])
    }
}

/// A select group's selection method, as a controller gave it
/// (Netronome's group property, which OVS takes in OpenFlow 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SelectMethod {
    /// None given: as OVS 3.1, `dp_hash` with the symmetric L3/L4 hash
    /// when the buckets' weights fit 256 hash values.
    #[default]
    Unset,
    /// `selection_method=dp_hash`: the algorithm in the parameter's high
    /// 32 bits (0 L4, 1 symmetric L4; others are L4), the basis in its
    /// low 32.
    DpHash(u64),
    /// `selection_method=hash` with fields: Sluice's own hash.
    Hash,
}

/// Most hash values OVS gives a `dp_hash` select group
/// (`MAX_SELECT_GROUP_HASH_VALUES`).
const OVS_MAX_HASH_VALUES: u64 = 256;

/// OVS's `dp_hash` table for `buckets` (`group_setup_dp_hash_table`):
/// at least 16 hash values and enough for the least weighted bucket to
/// get one, a power of two, spread over the buckets by weight with
/// Webster's method; None where OVS falls back to its default method
/// (no weight, or more than 256 values needed).
pub fn ovs_hash_map(buckets: &[Bucket]) -> Option<Vec<u16>> {
    // (No bucket of weight: no minimum, and OVS's total weight is 0.)
    let min = buckets.iter().map(|b| b.weight).filter(|&w| w > 0).min()?;
    let total: u64 = buckets.iter().map(|b| u64::from(b.weight)).sum();
    let n_hash = total.div_ceil(u64::from(min)).next_power_of_two().max(16);
    if n_hash > OVS_MAX_HASH_VALUES {
        return None;
    }
    let mut divisor = vec![1u32; buckets.len()];
    let mut value: Vec<f64> = buckets.iter().map(|b| f64::from(b.weight)).collect();
    let mut map = Vec::with_capacity(n_hash as usize);
    for _ in 0..n_hash {
        // The first of the highest values wins, as OVS's loop.
        let mut w = 0;
        for i in 1..buckets.len() {
            if value[i] > value[w] {
                w = i;
            }
        }
        divisor[w] += 2;
        value[w] = f64::from(buckets[w].weight) / f64::from(divisor[w]);
        map.push(w as u16);
    }
    Some(map)
}

impl SelectMethod {
    /// The `dp_hash` algorithm and basis OVS uses for a group of this
    /// method (None: not `dp_hash`).
    fn dp_hash(self) -> Option<(u32, u32)> {
        match self {
            SelectMethod::Unset => Some((crate::ovs_hash::ALG_SYM_L4, 0)),
            SelectMethod::DpHash(param) => {
                let alg = (param >> 32) as u32;
                let alg = if alg > crate::ovs_hash::ALG_SYM_L4 {
                    crate::ovs_hash::ALG_L4
                } else {
                    alg
                };
                Some((alg, param as u32))
            }
            SelectMethod::Hash => None,
        }
    }
}

/// A group's slot tables for the sets of live buckets seen, made on first
/// use (a table takes some 100 µs to make; a translation only looks it up).
#[derive(Debug, Clone, Default)]
pub struct SlotCache(Arc<Mutex<Vec<SlotsFor>>>);

/// A set of live buckets (one flag per bucket), whether Sluice's own
/// spread was asked for (`--select-hash spread`), and its slot table.
type SlotsFor = (Vec<bool>, bool, Option<Arc<SlotTable>>);

/// Sets of live buckets a group keeps tables for.
const SLOT_CACHE_SETS: usize = 8;

/// Largest group id (`OFPG_MAX`).
pub const GROUP_MAX: u32 = 0xffff_ff00;
/// Every group, in a delete (`OFPG_ALL`).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// No group (a bucket's watch_group, `OFPG_ANY`).
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// No port (a bucket's watch_port, `OFPP_ANY`).
pub const PORT_ANY: u32 = 0xffff_ffff;
/// Deepest chain of groups a translation follows (OVS's limit is the
/// translation's recursion depth).
pub const MAX_GROUP_DEPTH: u32 = 16;

/// A group's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupType {
    /// Every bucket.
    All,
    /// One bucket by hash and weight.
    Select,
    /// Its only bucket.
    Indirect,
    /// The first live bucket.
    FastFailover,
}

impl GroupType {
    /// OpenFlow's number for the type.
    pub fn number(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }

    /// The type of OpenFlow's number.
    pub fn from_number(n: u8) -> Option<Self> {
        Some(match n {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }

    /// The name `ovs-ofctl dump-groups` prints.
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }
}

/// One bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    /// Share of a select group's flows (0: never chosen).
    pub weight: u16,
    /// The port whose presence makes the bucket live ([`PORT_ANY`]: none).
    pub watch_port: u32,
    /// The group whose liveness makes the bucket live ([`GROUP_ANY`]: none).
    pub watch_group: u32,
    /// Its actions, applied at once.
    pub actions: Vec<Action>,
    /// Packets and bytes that went through it.
    pub counter: Arc<Rule>,
}

/// A group, as installed.
#[derive(Debug, Clone)]
pub struct Group {
    /// Its id.
    pub id: u32,
    /// Its type.
    pub kind: GroupType,
    /// Its buckets, in order.
    pub buckets: Vec<Bucket>,
    /// The OpenFlow 1.3 buckets as the controller sent them, given back in
    /// GROUP_DESC replies as they came (`None`: made otherwise).
    pub of_buckets: Option<Arc<[u8]>>,
    /// Packets and bytes that reached it.
    pub counter: Arc<Rule>,
    /// When it was added (µs on the switch clock).
    pub created_us: u64,
    /// Its slot table with every bucket live (select groups).
    pub slots: SlotCache,
    /// How a select group picks its bucket.
    pub selection: SelectMethod,
}

/// Why a group change was refused (OpenFlow's GROUP_MOD_FAILED codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    /// ADD of an id that exists.
    Exists,
    /// An id above [`GROUP_MAX`] (or ALL/ANY where a group is meant).
    Invalid,
    /// MODIFY or a `group:N` action naming a group that does not exist.
    Unknown,
    /// A bucket's actions reach a group that leads back to this one.
    Loop,
    /// A type it cannot be: an indirect group without exactly one bucket,
    /// or a fast-failover bucket that watches nothing.
    BadType,
    /// A bucket's watch port or group is out of range.
    BadWatch,
}

impl Group {
    /// The slot table with the buckets `live` says live (None: no live
    /// bucket has weight); with `spread`, Sluice's own hash whatever the
    /// selection method.
    pub fn slots(&self, live: impl Fn(&Bucket) -> bool, spread: bool) -> Option<Arc<SlotTable>> {
        let alive: Vec<bool> = self.buckets.iter().map(&live).collect();
        let mut cache = self.slots.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, t)) = cache.iter().find(|(a, s, _)| *a == alive && *s == spread) {
            return t.clone();
        }
        let method = if spread {
            SelectMethod::Hash
        } else {
            self.selection
        };
        let t = slot_table(&self.buckets, &alive, method).map(Arc::new);
        if cache.len() >= SLOT_CACHE_SETS {
            cache.remove(0);
        }
        cache.push((alive, spread, t.clone()));
        t
    }

    /// The groups its buckets' actions reach.
    pub fn refers_to(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets
            .iter()
            .flat_map(|b| crate::action::groups_of(&b.actions))
    }

    /// Checks the buckets against the type.
    pub fn check(&self) -> Result<(), GroupError> {
        if self.id > GROUP_MAX {
            return Err(GroupError::Invalid);
        }
        if self.kind == GroupType::Indirect && self.buckets.len() != 1 {
            return Err(GroupError::BadType);
        }
        for b in &self.buckets {
            if self.kind == GroupType::FastFailover
                && b.watch_port == PORT_ANY
                && b.watch_group == GROUP_ANY
            {
                return Err(GroupError::BadWatch);
            }
            if b.watch_group != GROUP_ANY && b.watch_group > GROUP_MAX {
                return Err(GroupError::BadWatch);
            }
        }
        Ok(())
    }
}

/// The bucket a select group picks for a flow of hash `hash`: the live
/// bucket with the highest weighted score (rendezvous hashing, as OVS's
/// default selection), so a flow stays on its bucket while the buckets
/// do not change, and removing one moves only its own flows.
pub fn select_bucket(
    buckets: &[Bucket],
    hash: u64,
    live: impl Fn(usize, &Bucket) -> bool,
) -> Option<usize> {
    // Weighted rendezvous: bucket i scores ln(u_i) / w_i for a uniform
    // u_i in (0, 1) from the hash; the highest wins, bucket i with
    // probability w_i / sum(w).
    let mut best: Option<(f64, usize)> = None;
    for (i, b) in buckets.iter().enumerate() {
        if b.weight == 0 || !live(i, b) {
            continue;
        }
        let h = mix(hash ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let score = u.ln() / f64::from(b.weight);
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| i)
}

/// The slot table of `buckets` with `alive` telling which are live, for
/// a group of `selection`. OVS's `dp_hash` method where OVS uses it: slot
/// `s` picks the first live bucket of the hash table from `s` on
/// (`pick_dp_hash_select_group`); otherwise slot `s` of
/// [`SELECT_SLOTS`] picks the bucket [`select_bucket`] gives for hash
/// `s`. None when no live bucket has weight.
pub fn slot_table(
    buckets: &[Bucket],
    alive: &[bool],
    selection: SelectMethod,
) -> Option<SlotTable> {
    let ovs = selection
        .dp_hash()
        .and_then(|(alg, basis)| Some((alg, basis, ovs_hash_map(buckets)?)));
    let (picks, hash) = match ovs {
        Some((alg, basis, map)) => {
            let n = map.len();
            let mut picks = Vec::with_capacity(n);
            for s in 0..n {
                let b = (0..n)
                    .map(|i| usize::from(map[(s + i) % n]))
                    .find(|&b| alive[b] && buckets[b].weight > 0)?;
                picks.push(b as u16);
            }
            let mask = n as u32 - 1;
            (picks, SlotHash::Ovs { alg, basis, mask })
        }
        None => {
            let mut picks = vec![0u16; SELECT_SLOTS];
            for (s, slot) in picks.iter_mut().enumerate() {
                let b = select_bucket(buckets, mix(s as u64 ^ 0x5e1e_c7ed), |i, _| alive[i])?;
                *slot = b as u16;
            }
            (picks, SlotHash::Sluice)
        }
    };
    let mut used = vec![false; buckets.len()];
    for &b in &picks {
        used[usize::from(b)] = true;
    }
    let chosen: Vec<u16> = (0..buckets.len() as u16)
        .filter(|&b| used[usize::from(b)])
        .collect();
    let mut index = vec![0u16; buckets.len()];
    for (v, &b) in chosen.iter().enumerate() {
        index[usize::from(b)] = v as u16;
    }
    let mut variant = [0u16; SELECT_SLOTS];
    for (v, &b) in variant.iter_mut().zip(&picks) {
        *v = index[usize::from(b)];
    }
    Some(SlotTable {
        variant,
        buckets: chosen,
        hash,
    })
}

/// A select group's hash of a flow: Ethernet addresses and type, IP (or
/// ARP) addresses and protocol, TCP/UDP/SCTP ports, each pair combined so
/// both directions of a connection hash alike (OVS's `symmetric_l4`
/// fields, less the VLAN ID, plus ARP's addresses). Cheap enough for the
/// datapath to compute per packet; [`select_slot`] takes its slot.
#[inline]
pub fn symmetric_hash(f: &FlowKey) -> u64 {
    let mac = |m: [u8; 6]| u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
    let mut x = mac(f.dl_src) ^ mac(f.dl_dst) ^ u64::from(f.dl_type) << 48;
    if f.is_arp() || f.is_ipv4() {
        x = x.rotate_left(21) ^ u64::from(f.nw_src ^ f.nw_dst);
    } else if f.is_ip() {
        let a = u128::from_be_bytes(f.ipv6_src) ^ u128::from_be_bytes(f.ipv6_dst);
        x = x.rotate_left(21) ^ a as u64 ^ (a >> 64) as u64;
    }
    if f.is_ip() {
        x ^= u64::from(f.nw_proto) << 56;
        if matches!(f.nw_proto, proto::TCP | proto::UDP | proto::SCTP) {
            x ^= u64::from(f.tp_src ^ f.tp_dst) << 32;
        }
    }
    x = (x ^ x >> 29).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ x >> 32
}

/// The slot of a hash from [`symmetric_hash`].
#[inline]
pub fn select_slot(hash: u64) -> usize {
    (hash >> (64 - SELECT_SLOTS.trailing_zeros())) as usize
}

/// A 64-bit finaliser (splitmix64's).
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(weight: u16) -> Bucket {
        Bucket {
            weight,
            watch_port: PORT_ANY,
            watch_group: GROUP_ANY,
            actions: Vec::new(),
            counter: Arc::new(Rule::counter()),
        }
    }

    #[test]
    fn select_spreads_by_weight_and_moves_only_a_dead_buckets_flows() {
        let b = vec![bucket(1), bucket(3), bucket(0)];
        let mut n = [0u32; 3];
        let pick: Vec<usize> = (0..20_000u64)
            .map(|h| select_bucket(&b, mix(h), |_, _| true).unwrap())
            .collect();
        for &i in &pick {
            n[i] += 1;
        }
        assert_eq!(n[2], 0, "weight 0 is never chosen");
        let share = f64::from(n[1]) / 20_000.0;
        assert!((0.6..0.8).contains(&share), "weight 3 of 4: {share}");
        // Bucket 0 dies: its flows move, bucket 1's stay.
        for (h, &was) in pick.iter().enumerate() {
            let now = select_bucket(&b, mix(h as u64), |_, x| x.weight != 1).unwrap();
            if was == 1 {
                assert_eq!(now, 1);
            }
        }
        assert_eq!(select_bucket(&b, 7, |_, _| false), None);
    }

    #[test]
    fn ovs_dp_hash_tables_are_websters_over_a_power_of_two() {
        // Two of one weight: 16 values, alternating (ties to the first).
        let even = ovs_hash_map(&[bucket(100), bucket(100)]).unwrap();
        assert_eq!(even.len(), 16);
        assert!(even
            .iter()
            .enumerate()
            .all(|(i, &b)| usize::from(b) == i % 2));
        // Weights 1 and 3: 16 values, 4 and 12.
        let m = ovs_hash_map(&[bucket(1), bucket(3)]).unwrap();
        assert_eq!(m.iter().filter(|&&b| b == 0).count(), 4);
        // Weights 1 and 255: 256 values; 1 and 256 would need 512, where
        // OVS uses its default method.
        assert_eq!(ovs_hash_map(&[bucket(1), bucket(255)]).unwrap().len(), 256);
        assert!(ovs_hash_map(&[bucket(1), bucket(256)]).is_none());
        assert!(ovs_hash_map(&[bucket(0), bucket(0)]).is_none());
        // A weight-0 bucket never gets a value.
        let z = ovs_hash_map(&[bucket(0), bucket(5), bucket(5)]).unwrap();
        assert!(!z.contains(&0));
    }

    #[test]
    fn an_ovs_table_slot_takes_the_next_live_bucket_in_the_map() {
        let b = vec![bucket(1), bucket(1), bucket(2)];
        let map = ovs_hash_map(&b).unwrap();
        let all = slot_table(&b, &[true; 3], SelectMethod::DpHash(0)).unwrap();
        assert_eq!(
            all.hash,
            SlotHash::Ovs {
                alg: crate::ovs_hash::ALG_L4,
                basis: 0,
                mask: 15
            }
        );
        let two = slot_table(&b, &[true, false, true], SelectMethod::Unset).unwrap();
        assert!(matches!(two.hash, SlotHash::Ovs { alg: 1, .. }));
        for s in 0..16 {
            assert_eq!(all.bucket(s), usize::from(map[s]));
            let want = (0..16)
                .map(|i| usize::from(map[(s + i) % 16]))
                .find(|&x| x != 1)
                .unwrap();
            assert_eq!(two.bucket(s), want, "slot {s}");
        }
        // OVN's load balancer to two backends (selection_method=dp_hash):
        // Open vSwitch 3.1 sent 10.84.1.2:50778 -> 10.84.9.100:80 to the
        // second (scripts/ovn-compare, seed 1, case 1).
        let lb = slot_table(
            &[bucket(100), bucket(100)],
            &[true; 2],
            SelectMethod::DpHash(0),
        )
        .unwrap();
        let key = FlowKey {
            dl_type: 0x0800,
            nw_proto: proto::TCP,
            nw_src: u32::from_be_bytes([10, 84, 1, 2]),
            nw_dst: u32::from_be_bytes([10, 84, 9, 100]),
            tp_src: 50778,
            tp_dst: 80,
            ..FlowKey::default()
        };
        assert_eq!(lb.bucket(lb.slot_of(&key)), 1);
        // `hash` with fields: Sluice's own slots.
        let h = slot_table(&b, &[true; 3], SelectMethod::Hash).unwrap();
        assert_eq!(h.hash, SlotHash::Sluice);
    }

    #[test]
    fn slot_tables_share_by_weight_and_a_dead_bucket_moves_only_its_slots() {
        let b = vec![bucket(1), bucket(2), bucket(3)];
        let all = slot_table(&b, &[true; 3], SelectMethod::Hash).unwrap();
        assert_eq!(all.buckets, vec![0, 1, 2]);
        for (i, w) in [1.0, 2.0, 3.0].into_iter().enumerate() {
            let n = (0..SELECT_SLOTS).filter(|&s| all.bucket(s) == i).count();
            let share = n as f64 / SELECT_SLOTS as f64;
            assert!((share - w / 6.0).abs() < 0.02, "bucket {i}: {share}");
        }
        let two = slot_table(&b, &[true, false, true], SelectMethod::Hash).unwrap();
        assert_eq!(two.buckets, vec![0, 2]);
        for s in 0..SELECT_SLOTS {
            if all.bucket(s) != 1 {
                assert_eq!(two.bucket(s), all.bucket(s), "slot {s} moved");
            }
        }
        assert!(slot_table(&b, &[false; 3], SelectMethod::Hash).is_none());
        assert!(slot_table(&b, &[false; 3], SelectMethod::Unset).is_none());
        // Hashes use every slot.
        let used: std::collections::BTreeSet<usize> =
            (0..100_000u64).map(|h| select_slot(mix(h))).collect();
        assert_eq!(used.len(), SELECT_SLOTS);
    }

    #[test]
    fn types_check_their_buckets() {
        let g = |kind, buckets| Group {
            id: 1,
            kind,
            buckets,
            of_buckets: None,
            counter: Arc::new(Rule::counter()),
            created_us: 0,
            slots: SlotCache::default(),
            selection: Default::default(),
        };
        assert_eq!(
            g(GroupType::Indirect, vec![]).check(),
            Err(GroupError::BadType)
        );
        assert_eq!(g(GroupType::Indirect, vec![bucket(0)]).check(), Ok(()));
        assert_eq!(
            g(GroupType::FastFailover, vec![bucket(0)]).check(),
            Err(GroupError::BadWatch)
        );
        assert_eq!(g(GroupType::All, vec![]).check(), Ok(()));
        for n in 0..4 {
            assert_eq!(GroupType::from_number(n).unwrap().number(), n);
        }
    }
}
