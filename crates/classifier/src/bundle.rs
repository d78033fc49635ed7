//! `bundle(fields,basis,algorithm,ofport,members:P,...)` and
//! `bundle_load(...,dst,members:...)`: one of a list of ports, chosen by
//! `active_backup` (the first that is up) or `hrw` (the highest random
//! weight of a hash of the packet's fields, among those up), is output to
//! or written into `dst`. As Open vSwitch's `lib/bundle.c`, with its hash
//! ([`crate::multipath`]): the same rules pick the same port.

use sluice_packet::key::FlowKey;

use crate::multipath::{flow_hash, hash_2words, unwildcard, HashFields};
use crate::subfield::Subfield;

/// How the member is chosen (`NX_BD_ALG_*`, numbered as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BundleAlgorithm {
    /// The first member that is up.
    ActiveBackup = 0,
    /// Highest random weight among those up.
    Hrw = 1,
}

impl BundleAlgorithm {
    /// By name (any case).
    pub fn named(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("active_backup") {
            Some(Self::ActiveBackup)
        } else if s.eq_ignore_ascii_case("hrw") {
            Some(Self::Hrw)
        } else {
            None
        }
    }

    /// By wire number.
    pub fn of_code(c: u16) -> Option<Self> {
        match c {
            0 => Some(Self::ActiveBackup),
            1 => Some(Self::Hrw),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ActiveBackup => "active_backup",
            Self::Hrw => "hrw",
        }
    }
}

/// OVS's `OFPP_NONE` in 16 bits: what `bundle_load` writes when no member
/// is up.
pub const NONE: u32 = 0xffff;

/// A `bundle` or `bundle_load` action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bundle {
    /// What is hashed (for `hrw`).
    pub fields: HashFields,
    /// The hash's basis.
    pub basis: u16,
    /// How the member is chosen.
    pub algorithm: BundleAlgorithm,
    /// The ports (OpenFlow numbers).
    pub members: Vec<u32>,
    /// `bundle_load`'s destination (`None`: `bundle`, which outputs).
    pub dst: Option<Subfield>,
}

impl std::fmt::Display for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.dst.is_some() {
            "bundle_load"
        } else {
            "bundle"
        };
        write!(
            f,
            "{name}({},{},{},ofport,",
            self.fields.name(),
            self.basis,
            self.algorithm.name()
        )?;
        if let Some(d) = &self.dst {
            write!(f, "{d},")?;
        }
        let members: Vec<String> = self.members.iter().map(u32::to_string).collect();
        write!(f, "members:{})", members.join(","))
    }
}

impl Bundle {
    /// The member chosen for a packet with key `k` among those `up` says
    /// are up ([`NONE`] if none); `wc` gets the fields the choice read.
    pub fn choose(&self, k: &FlowKey, wc: &mut FlowKey, up: impl Fn(u32) -> bool) -> u32 {
        match self.algorithm {
            BundleAlgorithm::ActiveBackup => self
                .members
                .iter()
                .copied()
                .find(|&p| up(p))
                .unwrap_or(NONE),
            BundleAlgorithm::Hrw => {
                if self.members.len() > 1 {
                    unwildcard(self.fields, k, wc);
                }
                let h = flow_hash(self.fields, k, u32::from(self.basis));
                let mut best: Option<(u32, u32)> = None;
                for (i, &p) in self.members.iter().enumerate() {
                    if up(p) {
                        let w = hash_2words(i as u32, h);
                        if best.is_none_or(|(_, bw)| w > bw) {
                            best = Some((p, w));
                        }
                    }
                }
                best.map_or(NONE, |b| b.0)
            }
        }
    }
}
