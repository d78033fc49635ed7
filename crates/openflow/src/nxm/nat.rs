//! `NXAST_NAT` (only inside `NXAST_CT`): `nat(src=...|dst=...)` read
//! and written as Open vSwitch does.

use crate::consts::OfError;
use crate::wire::Rd;

use super::{nat_flag, subtype};

/// `NXAST_NAT`'s `range_present` bits (`NX_NAT_RANGE_*`).
mod nat_range {
    pub const IPV4_MIN: u16 = 1;
    pub const IPV4_MAX: u16 = 2;
    pub const IPV6_MIN: u16 = 4;
    pub const IPV6_MAX: u16 = 8;
    pub const PROTO_MIN: u16 = 16;
    pub const PROTO_MAX: u16 = 32;
}

/// `NXAST_NAT`'s body after its subtype, checked as OVS checks it: one of
/// src and dst at most, not both hash and random, a maximum only with
/// its minimum and not below it, a port range only with an address.
pub(super) fn decode_nat(b: &mut Rd) -> Result<sluice_conntrack::Nat, OfError> {
    use sluice_conntrack::{Nat, NatKind};
    let bad = OfError::BAD_ARGUMENT;
    b.skip(2)?;
    let flags = b.u16()?;
    let present = b.u16()?;
    let known = nat_flag::SRC
        | nat_flag::DST
        | nat_flag::PERSISTENT
        | nat_flag::PROTO_HASH
        | nat_flag::PROTO_RANDOM;
    let both = |x, y| flags & x != 0 && flags & y != 0;
    if flags & !known != 0
        || both(nat_flag::SRC, nat_flag::DST)
        || both(nat_flag::PROTO_HASH, nat_flag::PROTO_RANDOM)
    {
        return Err(bad);
    }
    let mut n = Nat {
        kind: if flags & nat_flag::SRC != 0 {
            NatKind::Src
        } else if flags & nat_flag::DST != 0 {
            NatKind::Dst
        } else {
            NatKind::Apply
        },
        persistent: flags & nat_flag::PERSISTENT != 0,
        hash: flags & nat_flag::PROTO_HASH != 0,
        random: flags & nat_flag::PROTO_RANDOM != 0,
        ..Nat::default()
    };
    let has = |bit| present & bit != 0;
    if has(nat_range::IPV4_MIN) {
        if has(nat_range::IPV6_MIN) || has(nat_range::IPV6_MAX) {
            return Err(bad);
        }
        n.v6 = Some(false);
        n.min[..4].copy_from_slice(b.take(4).map_err(|_| bad)?);
        if n.min[..4] == [0; 4] {
            return Err(bad);
        }
        if has(nat_range::IPV4_MAX) {
            n.max[..4].copy_from_slice(b.take(4).map_err(|_| bad)?);
            if n.max[..4] < n.min[..4] {
                return Err(bad);
            }
        }
    } else if has(nat_range::IPV4_MAX) {
        return Err(bad);
    } else if has(nat_range::IPV6_MIN) {
        n.v6 = Some(true);
        n.min.copy_from_slice(b.take(16).map_err(|_| bad)?);
        if n.min == [0; 16] {
            return Err(bad);
        }
        if has(nat_range::IPV6_MAX) {
            n.max.copy_from_slice(b.take(16).map_err(|_| bad)?);
            if n.max < n.min {
                return Err(bad);
            }
        }
    } else if has(nat_range::IPV6_MAX) {
        return Err(bad);
    }
    if has(nat_range::PROTO_MIN) {
        if n.v6.is_none() {
            return Err(bad);
        }
        n.min_port = b.u16().map_err(|_| bad)?;
        if n.min_port == 0 {
            return Err(bad);
        }
        if has(nat_range::PROTO_MAX) {
            n.max_port = b.u16().map_err(|_| bad)?;
            if n.max_port < n.min_port {
                return Err(bad);
            }
        }
    } else if has(nat_range::PROTO_MAX) {
        return Err(bad);
    }
    Ok(n)
}

/// `NXAST_NAT`'s body after the vendor id, as OVS encodes it (the
/// caller pads).
pub(super) fn encode_nat(n: &sluice_conntrack::Nat, out: &mut Vec<u8>) {
    use sluice_conntrack::NatKind;
    let mut flags = match n.kind {
        NatKind::Apply => 0,
        NatKind::Src => nat_flag::SRC,
        NatKind::Dst => nat_flag::DST,
    };
    for (on, f) in [
        (n.persistent, nat_flag::PERSISTENT),
        (n.hash, nat_flag::PROTO_HASH),
        (n.random, nat_flag::PROTO_RANDOM),
    ] {
        if on {
            flags |= f;
        }
    }
    let mut present = 0;
    let mut opts = Vec::new();
    match n.v6 {
        Some(false) => {
            for (a, bit) in [(&n.min, nat_range::IPV4_MIN), (&n.max, nat_range::IPV4_MAX)] {
                if a[..4] != [0; 4] {
                    opts.extend_from_slice(&a[..4]);
                    present |= bit;
                }
            }
        }
        Some(true) => {
            for (a, bit) in [(&n.min, nat_range::IPV6_MIN), (&n.max, nat_range::IPV6_MAX)] {
                if *a != [0; 16] {
                    opts.extend_from_slice(a);
                    present |= bit;
                }
            }
        }
        None => {}
    }
    if n.v6.is_some() {
        for (p, bit) in [
            (n.min_port, nat_range::PROTO_MIN),
            (n.max_port, nat_range::PROTO_MAX),
        ] {
            if p != 0 {
                opts.extend_from_slice(&p.to_be_bytes());
                present |= bit;
            }
        }
    }
    out.extend_from_slice(&subtype::NAT.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&present.to_be_bytes());
    out.extend_from_slice(&opts);
}
