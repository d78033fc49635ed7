//! Which key bits a lookup decision depended on.
//!
//! A rule that matched depends on all of its mask. A rule that did *not*
//! match depends only on enough bits to prove the miss: the first key
//! region (in a fixed order) where the packet differs from the rule, and
//! for address fields only the prefix down to the first differing bit.
//! Any packet that agrees with this one on those bits misses the rule too,
//! so the result is sound; un-wildcarding whole regions and prefixes (not
//! single scattered bits) keeps the number of distinct megaflow masks, and
//! so of classifier subtables, small — as OVS's staged lookup and prefix
//! tries do.

use std::mem::offset_of;

use sluice_packet::key::FlowKey;

use crate::flow_match::Match;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Un-wildcard the rule's mask over the whole region.
    Whole,
    /// A host-order u32 address: prefix down to the first differing bit.
    PrefixU32,
    /// A 16-byte network-order address: prefix down to the first differing bit.
    Prefix128,
}

/// Key regions in the order misses are explained. Early regions are the
/// ones most rules share, so explanations reuse the same bits.
pub(crate) const REGIONS: &[(usize, usize, Kind)] = &[
    (offset_of!(FlowKey, metadata), 8, Kind::Whole),
    (offset_of!(FlowKey, conj_id), 4, Kind::Whole),
    (offset_of!(FlowKey, pkt_mark), 4, Kind::Whole),
    (offset_of!(FlowKey, regs), 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 4, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 8, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 12, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 16, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 20, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 24, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 28, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 32, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 36, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 40, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 44, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 48, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 52, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 56, 4, Kind::Whole),
    (offset_of!(FlowKey, regs) + 60, 4, Kind::Whole),
    (offset_of!(FlowKey, ct_state), 1, Kind::Whole),
    (offset_of!(FlowKey, ct_zone), 2, Kind::Whole),
    (offset_of!(FlowKey, ct_mark), 4, Kind::Whole),
    (offset_of!(FlowKey, ct_label), 8, Kind::Whole),
    (offset_of!(FlowKey, ct_label) + 8, 8, Kind::Whole),
    (offset_of!(FlowKey, ct_nw_proto), 1, Kind::Whole),
    (offset_of!(FlowKey, ct_nw_src), 4, Kind::PrefixU32),
    (offset_of!(FlowKey, ct_nw_dst), 4, Kind::PrefixU32),
    (offset_of!(FlowKey, ct_ipv6_src), 16, Kind::Prefix128),
    (offset_of!(FlowKey, ct_ipv6_dst), 16, Kind::Prefix128),
    (offset_of!(FlowKey, ct_tp_src), 2, Kind::Whole),
    (offset_of!(FlowKey, ct_tp_dst), 2, Kind::Whole),
    (offset_of!(FlowKey, actset_output), 2, Kind::Whole),
    (offset_of!(FlowKey, tunnel_id), 8, Kind::Whole),
    (offset_of!(FlowKey, tun_dst), 4, Kind::Whole),
    (offset_of!(FlowKey, tun_src), 4, Kind::Whole),
    (offset_of!(FlowKey, tun_family), 1, Kind::Whole),
    (offset_of!(FlowKey, tun_metadata_present), 1, Kind::Whole),
    (offset_of!(FlowKey, tun_metadata), 8, Kind::Whole),
    (offset_of!(FlowKey, tun_metadata) + 8, 8, Kind::Whole),
    (offset_of!(FlowKey, tun_metadata) + 16, 8, Kind::Whole),
    (offset_of!(FlowKey, tun_metadata) + 24, 8, Kind::Whole),
    (offset_of!(FlowKey, tun_ipv6_dst), 16, Kind::Prefix128),
    (offset_of!(FlowKey, tun_ipv6_src), 16, Kind::Prefix128),
    (offset_of!(FlowKey, tun_flags), 2, Kind::Whole),
    (offset_of!(FlowKey, tun_tos), 1, Kind::Whole),
    (offset_of!(FlowKey, tun_ttl), 1, Kind::Whole),
    (offset_of!(FlowKey, in_port), 4, Kind::Whole),
    (offset_of!(FlowKey, dl_type), 2, Kind::Whole),
    (offset_of!(FlowKey, nw_proto), 1, Kind::Whole),
    (offset_of!(FlowKey, vlan_tci), 4, Kind::Whole),
    (offset_of!(FlowKey, vlan_tpid), 4, Kind::Whole),
    (offset_of!(FlowKey, nw_frag), 1, Kind::Whole),
    (offset_of!(FlowKey, dl_dst), 6, Kind::Whole),
    (offset_of!(FlowKey, dl_src), 6, Kind::Whole),
    (offset_of!(FlowKey, nw_dst), 4, Kind::PrefixU32),
    (offset_of!(FlowKey, nw_src), 4, Kind::PrefixU32),
    (offset_of!(FlowKey, ipv6_dst), 16, Kind::Prefix128),
    (offset_of!(FlowKey, ipv6_src), 16, Kind::Prefix128),
    (offset_of!(FlowKey, tp_dst), 2, Kind::Whole),
    (offset_of!(FlowKey, tp_src), 2, Kind::Whole),
    (offset_of!(FlowKey, tcp_flags), 2, Kind::Whole),
    (offset_of!(FlowKey, nw_tos), 1, Kind::Whole),
    (offset_of!(FlowKey, nw_ttl), 1, Kind::Whole),
    (offset_of!(FlowKey, ipv6_label), 4, Kind::Whole),
    (offset_of!(FlowKey, nd_target), 16, Kind::Prefix128),
    (offset_of!(FlowKey, arp_sha), 6, Kind::Whole),
    (offset_of!(FlowKey, arp_tha), 6, Kind::Whole),
];

pub(crate) fn prefix_through_first_diff(diff: u128, bits: u32) -> u128 {
    // diff != 0; keep the top bits down to and including its highest bit.
    let lz = diff.leading_zeros() - (128 - bits);
    let keep = lz + 1;
    let full = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    // checked: a difference in the last bit of 128 keeps all 128.
    full & !full.checked_shr(keep).unwrap_or(0)
}

/// ORs into `wc` the bits that prove `key` misses `rule` (which it must).
pub fn explain_miss(key: &FlowKey, rule: &Match, wc: &mut FlowKey) {
    let k = bytemuck::bytes_of(key);
    let v = bytemuck::bytes_of(&rule.value);
    let m = bytemuck::bytes_of(&rule.mask);
    for &(off, len, kind) in REGIONS {
        let r = off..off + len;
        if k[r.clone()]
            .iter()
            .zip(&m[r.clone()])
            .zip(&v[r.clone()])
            .all(|((k, m), v)| k & m == *v)
        {
            continue;
        }
        let w = bytemuck::bytes_of_mut(wc);
        match kind {
            Kind::Whole => {
                for i in r {
                    w[i] |= m[i];
                }
            }
            Kind::PrefixU32 => {
                let rd = |b: &[u8]| {
                    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]) as u128
                };
                let diff = (rd(k) & rd(m)) ^ rd(v);
                let bits = (prefix_through_first_diff(diff, 32) & rd(m)) as u32;
                let old = rd(w) as u32;
                w[r].copy_from_slice(&(old | bits).to_ne_bytes());
            }
            Kind::Prefix128 => {
                let rd = |b: &[u8]| {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&b[off..off + 16]);
                    u128::from_be_bytes(a)
                };
                let diff = (rd(k) & rd(m)) ^ rd(v);
                let bits = prefix_through_first_diff(diff, 128) & rd(m);
                let old = rd(w);
                w[r].copy_from_slice(&(old | bits).to_be_bytes());
            }
        }
        return;
    }
    // The key matches after all: the caller's bug, but stay sound.
    wc.or_assign(&rule.mask);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::field_by_name;

    #[test]
    fn regions_cover_every_byte_a_field_can_match() {
        let mut covered = [false; std::mem::size_of::<FlowKey>()];
        for &(off, len, _) in REGIONS {
            covered[off..off + len].iter_mut().for_each(|c| *c = true);
        }
        for f in crate::fields::all_fields() {
            let mut k = FlowKey::default();
            (f.put)(&mut k, u128::MAX);
            for (i, b) in bytemuck::bytes_of(&k).iter().enumerate() {
                assert!(*b == 0 || covered[i], "{}: byte {i} in no region", f.name);
            }
        }
    }

    fn rule(f: &[(&str, u128, u128)]) -> Match {
        let mut m = Match::catch_all();
        for (n, v, mk) in f {
            m.set(field_by_name(n).unwrap(), *v, *mk);
        }
        m
    }

    #[test]
    fn prefix_miss_unwildcards_down_to_the_first_differing_bit() {
        // Rule 10.0.0.0/8; packet 11.1.2.3 differs in the 8th bit only.
        let r = rule(&[
            ("dl_type", 0x0800, 0xffff),
            ("nw_dst", 0x0a00_0000, 0xff00_0000),
        ]);
        let k = FlowKey {
            dl_type: 0x0800,
            nw_dst: 0x0b01_0203,
            ..Default::default()
        };
        let mut wc = FlowKey::default();
        explain_miss(&k, &r, &mut wc);
        assert_eq!(wc.nw_dst, 0xff00_0000);
        assert_eq!(
            wc.dl_type, 0,
            "dl_type matched: not needed to explain the miss"
        );
        // Packet 128.x differs in the first bit: one bit explains it.
        let k = FlowKey {
            dl_type: 0x0800,
            nw_dst: 0x8000_0001,
            ..Default::default()
        };
        let mut wc = FlowKey::default();
        explain_miss(&k, &r, &mut wc);
        assert_eq!(wc.nw_dst, 0x8000_0000);
    }

    #[test]
    fn first_differing_region_wins() {
        // tcp,tp_dst=80 against a UDP packet: nw_proto explains it; the port is not looked at.
        let r = rule(&[
            ("dl_type", 0x0800, 0xffff),
            ("nw_proto", 6, 0xff),
            ("tp_dst", 80, 0xffff),
        ]);
        let k = FlowKey {
            dl_type: 0x0800,
            nw_proto: 17,
            tp_dst: 80,
            ..Default::default()
        };
        let mut wc = FlowKey::default();
        explain_miss(&k, &r, &mut wc);
        assert_eq!((wc.nw_proto, wc.tp_dst, wc.dl_type), (0xff, 0, 0));
        // Same protocol, other port: the whole port field.
        let k = FlowKey {
            dl_type: 0x0800,
            nw_proto: 6,
            tp_dst: 81,
            ..Default::default()
        };
        let mut wc = FlowKey::default();
        explain_miss(&k, &r, &mut wc);
        assert_eq!((wc.nw_proto, wc.tp_dst), (0, 0xffff));
    }

    #[test]
    fn ipv6_prefix() {
        let r = rule(&[
            ("dl_type", 0x86dd, 0xffff),
            ("ipv6_dst", 0x2001_0db8u128 << 96, u128::MAX << 96),
        ]);
        let mut k = FlowKey {
            dl_type: 0x86dd,
            ..Default::default()
        };
        k.ipv6_dst = (0x2001_0db9u128 << 96).to_be_bytes();
        let mut wc = FlowKey::default();
        explain_miss(&k, &r, &mut wc);
        assert_eq!(u128::from_be_bytes(wc.ipv6_dst), u128::MAX << 96);
    }
}
