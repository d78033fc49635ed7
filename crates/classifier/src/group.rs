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
//! Groups live in the rule set ([`crate::table::RuleSet`]): a group change
//! is a new version, so cached decisions that went through it are
//! revalidated as after a flow-mod. Each group and each bucket counts the
//! packets that went through it the way rules do (a counter the cached
//! decision credits).

use std::sync::Arc;

use crate::action::Action;
use crate::table::Rule;

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
    live: impl Fn(&Bucket) -> bool,
) -> Option<usize> {
    // Weighted rendezvous: bucket i scores ln(u_i) / w_i for a uniform
    // u_i in (0, 1) from the hash; the highest wins, bucket i with
    // probability w_i / sum(w).
    let mut best: Option<(f64, usize)> = None;
    for (i, b) in buckets.iter().enumerate() {
        if b.weight == 0 || !live(b) {
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
            .map(|h| select_bucket(&b, mix(h), |_| true).unwrap())
            .collect();
        for &i in &pick {
            n[i] += 1;
        }
        assert_eq!(n[2], 0, "weight 0 is never chosen");
        let share = f64::from(n[1]) / 20_000.0;
        assert!((0.6..0.8).contains(&share), "weight 3 of 4: {share}");
        // Bucket 0 dies: its flows move, bucket 1's stay.
        for (h, &was) in pick.iter().enumerate() {
            let now = select_bucket(&b, mix(h as u64), |x| x.weight != 1).unwrap();
            if was == 1 {
                assert_eq!(now, 1);
            }
        }
        assert_eq!(select_bucket(&b, 7, |_| false), None);
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
