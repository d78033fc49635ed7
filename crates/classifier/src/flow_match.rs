//! A match: a masked flow key, as a rule or a megaflow holds it.

use sluice_packet::key::FlowKey;
use sluice_packet::wire::ethernet::{ethertype, is_mpls};
use sluice_packet::wire::l4::proto;

use crate::fields::{c_hex, field_by_name, Field, ValueKind};

/// `value` holds the matched bits (already masked); `mask` says which bits
/// matter. A packet key `k` matches when `k & mask == value`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct Match {
    /// Matched bits (zero wherever `mask` is zero).
    pub value: FlowKey,
    /// Bits that matter.
    pub mask: FlowKey,
}

impl Match {
    /// The match-everything match.
    pub fn catch_all() -> Self {
        Match::default()
    }

    /// An exact match of `key` (every field).
    pub fn exact(key: &FlowKey) -> Self {
        let mask = FlowKey::all_ones();
        Match {
            value: key.masked(&mask),
            mask,
        }
    }

    /// Sets `field` to `value` under `mask` (clipped to the field's width).
    pub fn set(&mut self, field: &Field, value: u128, mask: u128) {
        let mask = mask & field.full_mask();
        (field.put)(&mut self.mask, mask);
        (field.put)(&mut self.value, value & mask);
        // put() writes whole fields; re-mask in case the field shares a
        // word's bits with others (e.g. nw_tos and ip_ecn).
        self.value = self.value.masked(&self.mask);
    }

    /// Sets `field` to an exact value.
    pub fn set_exact(&mut self, field: &Field, value: u128) {
        self.set(field, value, u128::MAX);
    }

    /// Whether this match is at least as specific as `sel` and agrees with
    /// it wherever `sel` looks: OpenFlow's non-strict selection (a loose
    /// delete or modify, a flow or aggregate statistics request).
    pub fn is_within(&self, sel: &Match) -> bool {
        let (rv, rm) = (self.value.words(), self.mask.words());
        let (sv, sm) = (sel.value.words(), sel.mask.words());
        (0..rv.len()).all(|i| rm[i] & sm[i] == sm[i] && rv[i] & sm[i] == sv[i])
    }

    /// Whether `key` matches.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.value, &self.mask)
    }

    /// Matches the bits `bits` of `field` exactly, to those of `value`
    /// (already in place); its other bits as they were.
    pub fn set_bits(&mut self, field: &Field, value: u128, bits: u128) {
        let (v, m) = self.get(field);
        self.set(field, (v & !bits) | (value & bits), m | bits);
    }

    /// The value and mask of `field` in this match.
    pub fn get(&self, field: &Field) -> (u128, u128) {
        ((field.get)(&self.value), (field.get)(&self.mask))
    }
}

fn f(name: &str) -> &'static Field {
    field_by_name(name).expect("built-in field")
}

fn fmt_masked(field: &Field, v: u128, m: u128) -> Option<String> {
    if m == 0 {
        return None;
    }
    // A field's own bits, e.g. 0xfc for nw_tos (DSCP only).
    let full = (field.get)(&FlowKey::all_ones());
    if field.name == "tun_flags" && m == full {
        // As OVS writes its tunnel flags.
        return Some(if v != 0 { "+oam" } else { "-oam" }.into());
    }
    if field.name == "ct_state" {
        return Some(crate::fields::format_ct_state(v, m));
    }
    if m == full {
        return Some(field.format_value(v));
    }
    Some(match field.kind {
        ValueKind::Ipv4 | ValueKind::Ipv6 if is_prefix(m, field.bits()) => {
            format!("{}/{}", field.format_value(v), m.count_ones())
        }
        ValueKind::Int(_) => format!("{}/{}", c_hex(v), c_hex(m)),
        _ => format!("{}/{}", field.format_value(v), field.format_value(m)),
    })
}

/// A VLAN match as OVS's `match_format` writes it: `dl_vlan`/`dl_vlan_pcp`
/// when it asks for a tag with exactly the VID and/or PCP, else
/// `vlan_tci` in four hex digits.
fn fmt_vlan(v: u16, m: u16) -> Vec<String> {
    use sluice_packet::wire::ethernet::tci;
    let (vid, pcp) = (m & tci::VID_MASK, m & tci::PCP_MASK);
    let cfi = m & tci::PRESENT != 0 && v & tci::PRESENT != 0;
    if cfi
        && (vid == 0 || vid == tci::VID_MASK)
        && (pcp == 0 || pcp == tci::PCP_MASK)
        && (vid | pcp) != 0
    {
        let mut out = Vec::new();
        if vid != 0 {
            out.push(format!("dl_vlan={}", v & tci::VID_MASK));
        }
        if pcp != 0 {
            out.push(format!(
                "dl_vlan_pcp={}",
                (v & tci::PCP_MASK) >> tci::PCP_SHIFT
            ));
        }
        out
    } else if m == 0xffff {
        vec![format!("vlan_tci={v:#06x}")]
    } else {
        vec![format!("vlan_tci={v:#06x}/{m:#06x}")]
    }
}

fn is_prefix(m: u128, bits: u32) -> bool {
    let ones = m.count_ones();
    ones > 0 && m == (u128::MAX >> (128 - bits)) & !((1u128 << (bits - ones)) - 1)
}

impl std::fmt::Display for Match {
    /// Formats the match in `ovs-ofctl` syntax (`tcp,in_port=1,nw_dst=10.0.0.0/8`).
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (v, m) = (&self.value, &self.mask);
        let mut parts: Vec<String> = Vec::new();
        if m.conj_id != 0 {
            parts.push(format!("conj_id={}", v.conj_id));
        }
        let f_actset = f("actset_output");
        if let Some(s) = fmt_masked(f_actset, (f_actset.get)(v), (f_actset.get)(m)) {
            parts.push(format!("actset_output={s}"));
        }
        // As OVS's match_format: the packet mark next, before the
        // connection tracking fields.
        let f_mark = f("pkt_mark");
        if let Some(s) = fmt_masked(f_mark, (f_mark.get)(v), (f_mark.get)(m)) {
            parts.push(format!("pkt_mark={s}"));
        }
        // The connection tracking fields come before the protocol, as
        // ovs-ofctl prints them.
        for field in crate::fields::CT_FIELDS {
            let name = field.name;
            if let Some(s) = fmt_masked(field, (field.get)(v), (field.get)(m)) {
                parts.push(format!("{name}={s}"));
            }
        }
        let dl_exact = m.dl_type == 0xffff;
        let proto_exact = m.nw_proto == 0xff;
        let mut dl_done = false;
        let mut proto_done = false;
        if dl_exact {
            let short = match (v.dl_type, proto_exact.then_some(v.nw_proto)) {
                (ethertype::IPV4, Some(proto::TCP)) => Some(("tcp", true)),
                (ethertype::IPV4, Some(proto::UDP)) => Some(("udp", true)),
                (ethertype::IPV4, Some(proto::SCTP)) => Some(("sctp", true)),
                (ethertype::IPV4, Some(proto::ICMP)) => Some(("icmp", true)),
                (ethertype::IPV6, Some(proto::TCP)) => Some(("tcp6", true)),
                (ethertype::IPV6, Some(proto::UDP)) => Some(("udp6", true)),
                (ethertype::IPV6, Some(proto::SCTP)) => Some(("sctp6", true)),
                (ethertype::IPV6, Some(proto::ICMPV6)) => Some(("icmp6", true)),
                (ethertype::IPV4, _) => Some(("ip", false)),
                (ethertype::IPV6, _) => Some(("ipv6", false)),
                (ethertype::ARP, _) => Some(("arp", false)),
                (ethertype::RARP, _) => Some(("rarp", false)),
                (ethertype::MPLS, _) => Some(("mpls", false)),
                (ethertype::MPLS_MCAST, _) => Some(("mplsm", false)),
                _ => None,
            };
            if let Some((s, with_proto)) = short {
                parts.push(s.to_string());
                dl_done = true;
                proto_done = with_proto;
            }
        }
        let is_arp = dl_exact && (v.dl_type == ethertype::ARP || v.dl_type == ethertype::RARP);
        let is_icmp = proto_done && (v.nw_proto == proto::ICMP || v.nw_proto == proto::ICMPV6);
        let mut names: Vec<&str> = crate::fields::regs32().iter().map(|f| f.name).collect();
        // The tunnel fields in OVS's order (tun_tos and tun_ttl, which
        // OpenFlow cannot carry, where OVS's formatter has them).
        names.extend([
            "tun_id",
            "tun_src",
            "tun_dst",
            "tun_ipv6_src",
            "tun_ipv6_dst",
            "tun_tos",
            "tun_ttl",
            "tun_flags",
            "tun_metadata0",
            "tun_metadata1",
            "tun_metadata2",
            "tun_metadata3",
            "metadata",
            "in_port",
            "vlan_tci",
            "dl_src",
            "dl_dst",
        ]);
        if !dl_done {
            names.push("dl_type");
        }
        if is_arp {
            names.extend(["arp_spa", "arp_tpa"]);
        } else {
            names.extend(["nw_src", "nw_dst"]);
        }
        names.extend(["ipv6_src", "ipv6_dst"]);
        // ipv6_label's bits hold an MPLS packet's outermost label and a PBB
        // packet's I-SID: named as the match's dl_type says.
        if dl_exact && is_mpls(v.dl_type) {
            names.extend(["mpls_label", "mpls_tc", "mpls_ttl", "mpls_bos"]);
        } else if dl_exact && v.dl_type == ethertype::PBB {
            names.push("pbb_isid");
        } else {
            names.extend(["ipv6_label", "ipv6_exthdr"]);
        }
        if !proto_done {
            names.push(if is_arp { "arp_op" } else { "nw_proto" });
        }
        names.extend(["nw_tos", "ip_ecn", "nw_ttl", "nw_frag"]);
        if is_icmp {
            names.extend(["icmp_type", "icmp_code"]);
        } else {
            names.extend(["tp_src", "tp_dst"]);
        }
        names.extend(["tcp_flags", "nd_target"]);
        if is_arp {
            names.extend(["arp_sha", "arp_tha"]);
        } else {
            names.extend(["nd_sll", "nd_tll"]);
        }
        for name in names {
            let field = f(name);
            let (fv, fm) = ((field.get)(v), (field.get)(m));
            if name == "nw_frag" && fm != 0 {
                let s = match (fv, fm) {
                    (0, 3) => "no",
                    (1, 3) => "first",
                    (3, 3) => "later",
                    (1, 1) => "yes",
                    (0, 2) => "not_later",
                    _ => "",
                };
                if !s.is_empty() {
                    parts.push(format!("nw_frag={s}"));
                    continue;
                }
            }
            if name == "vlan_tci" && fm != 0 {
                parts.extend(fmt_vlan(fv as u16, fm as u16));
                continue;
            }
            if name == "dl_type" && fm != 0 {
                parts.push(format!("dl_type={fv:#06x}"));
                continue;
            }
            if let Some(s) = fmt_masked(field, fv, fm) {
                parts.push(format!("{name}={s}"));
            }
        }
        out.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_like_ovs_ofctl() {
        let mut m = Match::catch_all();
        m.set_exact(f("dl_type"), 0x0800);
        m.set_exact(f("nw_proto"), 6);
        m.set_exact(f("in_port"), 1);
        m.set(f("nw_dst"), 0x0a00_0000, 0xff00_0000);
        m.set_exact(f("tp_dst"), 80);
        assert_eq!(m.to_string(), "tcp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=80");
        assert_eq!(Match::catch_all().to_string(), "");
    }

    #[test]
    fn matches_masked() {
        let mut m = Match::catch_all();
        m.set(f("nw_src"), 0x0a01_0203, 0xffff_0000);
        let k = FlowKey {
            nw_src: 0x0a01_ffff,
            ..Default::default()
        };
        assert!(m.matches(&k));
        assert_eq!(m.get(f("nw_src")), (0x0a01_0000, 0xffff_0000));
    }
}
