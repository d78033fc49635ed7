//! The match part of a rule line: fields, shorthands, prerequisites.

use sluice_packet::key::{FRAG_ANY, FRAG_LATER};
use sluice_packet::wire::ethernet::{ethertype, tci};
use sluice_packet::wire::l4::proto;

use crate::action::{OFPP_LOCAL, OFPP_MAX};
use crate::fields::{all_fields, field_by_name, Field, Prereq};
use crate::flow_match::Match;

use super::values::{parse_int, parse_masked};
use super::{LineCtx, ParseError};

pub(super) struct MatchParser<'a> {
    pub(super) cx: &'a LineCtx<'a>,
    pub(super) m: Match,
    /// Fields the line named, with their offsets, for prerequisite checks.
    pub(super) named: Vec<(&'static Field, usize)>,
}

const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", ethertype::IPV4, None),
    ("ipv4", ethertype::IPV4, None),
    ("ipv6", ethertype::IPV6, None),
    ("arp", ethertype::ARP, None),
    ("rarp", ethertype::RARP, None),
    ("mpls", ethertype::MPLS, None),
    ("mplsm", ethertype::MPLS_MCAST, None),
    ("tcp", ethertype::IPV4, Some(proto::TCP)),
    ("udp", ethertype::IPV4, Some(proto::UDP)),
    ("sctp", ethertype::IPV4, Some(proto::SCTP)),
    ("icmp", ethertype::IPV4, Some(proto::ICMP)),
    ("tcp6", ethertype::IPV6, Some(proto::TCP)),
    ("udp6", ethertype::IPV6, Some(proto::UDP)),
    ("sctp6", ethertype::IPV6, Some(proto::SCTP)),
    ("icmp6", ethertype::IPV6, Some(proto::ICMPV6)),
];

const TCP_FLAG_NAMES: &[(&str, u16)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// Flag names, the field they are of and what the flags are called
/// (for messages), and what to say when a name is none of them.
struct Flags<'n, T> {
    names: &'n [(&'n str, T)],
    field: &'n str,
    kind: &'n str,
    expected: &'n str,
}

impl<T: Copy + Into<u128>> Flags<'_, T> {
    /// The bit of flag `name`.
    fn bit(&self, cx: &LineCtx, name: &str, at: usize) -> Result<u128, ParseError> {
        let Some(&(_, bit)) = self.names.iter().find(|(n, _)| *n == name) else {
            return Err(cx.err(
                at,
                format!("unknown {} flag '{name}': use {}", self.kind, self.expected),
            ));
        };
        Ok(bit.into())
    }

    /// A list of `+flag` and `-flag` (`+syn-ack`, `+trk+est`): the value
    /// and mask it makes.
    fn signed_list(&self, cx: &LineCtx, v: &str, at: usize) -> Result<(u128, u128), ParseError> {
        let (mut fv, mut fm) = (0u128, 0u128);
        let mut rest = v;
        let mut off = at;
        while !rest.is_empty() {
            let sign = rest.as_bytes()[0];
            if sign != b'+' && sign != b'-' {
                return Err(cx.err(
                    off,
                    format!("expected '+flag' or '-flag' in {}", self.field),
                ));
            }
            let end = rest[1..]
                .find(['+', '-'])
                .map(|i| i + 1)
                .unwrap_or(rest.len());
            let bit = self.bit(cx, &rest[1..end], off)?;
            fm |= bit;
            if sign == b'+' {
                fv |= bit;
            }
            off += end;
            rest = &rest[end..];
        }
        Ok((fv, fm))
    }
}

const TCP_FLAGS: Flags<'static, u16> = Flags {
    names: TCP_FLAG_NAMES,
    field: "tcp_flags",
    kind: "TCP",
    expected: "fin, syn, rst, psh, ack, urg, ece, cwr or ns",
};

const CT_STATE_FLAGS: Flags<'static, u8> = Flags {
    names: crate::fields::CT_STATE_NAMES,
    field: "ct_state",
    kind: "ct_state",
    expected: "new, est, rel, rpl, inv, trk, snat or dnat",
};

pub(super) fn f(name: &str) -> &'static Field {
    field_by_name(name).expect("built-in field")
}

impl MatchParser<'_> {
    /// Sets the bits `bits` of a field (in the field's units) to the value
    /// `v` under the mask `m` (within `bits`), as OVS's `mf_set` does: a
    /// field named twice takes its last value (`nw_src=10.0.0.0/8,nw_src=10.1.1.1`
    /// is `nw_src=10.1.1.1`, `tcp,udp` is `udp`), and fields that share a
    /// word keep each other's bits (`dl_vlan=10,dl_vlan_pcp=3`).
    fn set(&mut self, field: &'static Field, v: u128, m: u128, bits: u128) {
        let (old_v, old_m) = self.m.get(field);
        self.m
            .set(field, (old_v & !bits) | (v & m), (old_m & !bits) | m);
    }

    pub(super) fn field(
        &mut self,
        name: &str,
        value: Option<&str>,
        at: usize,
        vat: usize,
    ) -> Result<(), ParseError> {
        let cx = self.cx;
        if let Some(&(_, dl, nw)) = SHORTHANDS.iter().find(|s| s.0 == name) {
            if value.is_some() {
                return Err(cx.err(at, format!("'{name}' is a shorthand and takes no value")));
            }
            self.set(f("dl_type"), dl as u128, 0xffff, 0xffff);
            if let Some(p) = nw {
                self.set(f("nw_proto"), p as u128, 0xff, 0xff);
            }
            return Ok(());
        }
        let Some(v) = value else {
            return Err(cx.err(at, unknown_field_message(name)));
        };
        match name {
            "dl_vlan" => {
                let n = parse_int(cx, v, vat, 16, "dl_vlan")?;
                if n == 0xffff {
                    // OpenFlow 1.0's OFP_VLAN_NONE: no tag.
                    self.set(f("vlan_tci"), 0, 0xffff, 0xffff);
                    Ok(())
                } else if n > 4095 {
                    Err(cx.err(
                        vat,
                        format!("dl_vlan {n} is out of range (0 to 4095, or 0xffff for untagged)"),
                    ))
                } else {
                    self.set(f("vlan_tci"), n | tci::PRESENT as u128, 0x1fff, 0x1fff);
                    Ok(())
                }
            }
            "dl_vlan_pcp" | "vlan_pcp" => {
                let p = parse_int(cx, v, vat, 3, name)?;
                self.set(
                    f("vlan_tci"),
                    (p << 13) | tci::PRESENT as u128,
                    0xf000,
                    0xf000,
                );
                Ok(())
            }
            // OVS writes ip_frag; nw_frag is its older name.
            "nw_frag" | "ip_frag" => {
                let (fv, fm) = match v {
                    "no" => (0, FRAG_ANY | FRAG_LATER),
                    "yes" => (FRAG_ANY, FRAG_ANY),
                    "first" => (FRAG_ANY, FRAG_ANY | FRAG_LATER),
                    "later" => (FRAG_ANY | FRAG_LATER, FRAG_ANY | FRAG_LATER),
                    "not_later" => (0, FRAG_LATER),
                    _ => {
                        return Err(cx.err(
                            vat,
                            format!(
                            "'{v}' is not a fragment type: use no, yes, first, later or not_later"
                        ),
                        ))
                    }
                };
                self.named.push((f("nw_frag"), at));
                self.set(f("nw_frag"), fv as u128, fm as u128, 3);
                Ok(())
            }
            "tun_flags" if v.starts_with('+') || v.starts_with('-') => {
                // OVS's tunnel flags: `oam` is the one a rule sees.
                let oam = match &v[1..] {
                    "oam" => 1u128,
                    other => {
                        return Err(cx.err(
                            vat,
                            format!(
                                "unknown tunnel flag '{other}': the one flag is oam (+oam or -oam)"
                            ),
                        ))
                    }
                };
                let fv = if v.starts_with('+') { oam } else { 0 };
                self.named.push((f("tun_flags"), at));
                self.set(f("tun_flags"), fv, oam, 1);
                Ok(())
            }
            "ct_state" if v.starts_with('+') || v.starts_with('-') => {
                let (fv, fm) = CT_STATE_FLAGS.signed_list(cx, v, vat)?;
                self.named.push((f("ct_state"), at));
                self.set(f("ct_state"), fv, fm, 0xff);
                Ok(())
            }
            "ct_state"
                if v.contains('|') || v.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) =>
            {
                // An exact match by names, as ovs-ofctl prints one: new|trk.
                let mut fv = 0u128;
                for name in v.split('|') {
                    fv |= CT_STATE_FLAGS.bit(cx, name, vat)?;
                }
                self.named.push((f("ct_state"), at));
                self.set(f("ct_state"), fv, 0xff, 0xff);
                Ok(())
            }
            "tcp_flags" if v.starts_with('+') || v.starts_with('-') => {
                let (fv, fm) = TCP_FLAGS.signed_list(cx, v, vat)?;
                self.named.push((f("tcp_flags"), at));
                self.set(f("tcp_flags"), fv, fm, 0xfff);
                Ok(())
            }
            _ => {
                let Some(field) = field_by_name(name) else {
                    return Err(cx.err(at, unknown_field_message(name)));
                };
                let (fv, fm) = parse_masked(cx, field, v, vat)?;
                if field.name == "nw_tos" && fv & 3 != 0 {
                    return Err(cx.err(vat, format!("nw_tos {fv} has ECN bits set: nw_tos matches DSCP bits only (a multiple of 4); use ip_ecn for ECN")));
                }
                if fv & !field.full_mask() != 0 || fm & !field.full_mask() != 0 {
                    return Err(cx.err(vat, format!("value too large for {}", field.name)));
                }
                if field.name == "ct_state" && (fv & fm) >> 8 != 0 {
                    return Err(cx.err(vat, format!("{v}: unknown ct_state flag(s): the flags are new (0x01), est, rel, rpl, inv, trk, snat and dnat (0x80)")));
                }
                self.named.push((field, at));
                if field.name == "in_port" && fv > OFPP_MAX as u128 && fv != OFPP_LOCAL as u128 {
                    return Err(cx.err(vat, format!("in_port {fv} is not a valid port number")));
                }
                self.set(field, fv, fm, field.full_mask());
                Ok(())
            }
        }
    }

    /// Checks each named field's prerequisite against the whole match, so
    /// that field order in the line does not matter. A neighbor discovery
    /// field whose prerequisite fails only by the ICMPv6 type or code given
    /// (`icmp6,icmp_type=136,icmp_code=4,nd_target=...`) is dropped from
    /// the match, as Open vSwitch normalises it away, with a warning in
    /// `warn`; any other unmet prerequisite is an error.
    pub(super) fn check_prereqs(&mut self, warn: &mut Vec<ParseError>) -> Result<(), ParseError> {
        let mut dropped = Vec::new();
        for &(field, at) in &self.named {
            if let Some(why) = nd_unmet_by_value(field, &self.m) {
                dropped.push((field, at, why));
                continue;
            }
            if matches!(field.name, "ct_tp_src" | "ct_tp_dst") && self.m.mask.ct_nw_proto == 0 {
                dropped.push((
                    field,
                    at,
                    "the match has no ct_nw_proto, without which Open vSwitch encodes no ct_tp_src or ct_tp_dst (add ct_nw_proto=6 for TCP, 17 for UDP)".into(),
                ));
                continue;
            }
            if !field.prereq.holds(&self.m.value, &self.m.mask) && field.prereq != Prereq::Vlan {
                return Err(self.cx.err(
                    at,
                    format!("{} requires {}", field.name, field.prereq.describe()),
                ));
            }
        }
        for (field, at, why) in dropped {
            self.m.set(field, 0, 0);
            warn.push(self.cx.err(
                at,
                format!(
                    "{} dropped from the match: {why} (as Open vSwitch does)",
                    field.name
                ),
            ));
        }
        Ok(())
    }
}

/// Why a neighbor discovery field's prerequisite fails by a value the
/// match gives (an ICMPv6 type or code), or `None` when it holds or fails
/// for want of a match (`icmp6`, `icmp_type`), which stays an error.
fn nd_unmet_by_value(field: &Field, m: &Match) -> Option<String> {
    if field.prereq != Prereq::Nd || !Prereq::Icmp6.holds(&m.value, &m.mask) {
        return None;
    }
    let (v, mk) = (&m.value, &m.mask);
    if mk.tp_src & 0xff != 0xff {
        return None; // no icmp_type: a missing match, an error
    }
    let (ty, code) = (v.tp_src & 0xff, v.tp_dst & mk.tp_dst & 0xff);
    if ty != 135 && ty != 136 {
        return Some(format!(
            "icmp_type={ty} is not a neighbor solicitation (135) or advertisement (136)"
        ));
    }
    if code != 0 {
        return Some(format!(
            "icmp_code={code} is not 0, as a neighbor discovery message's is"
        ));
    }
    match field.name {
        "nd_sll" if ty != 135 => {
            Some("nd_sll is in neighbor solicitations (icmp_type=135) only".into())
        }
        "nd_tll" if ty != 136 => {
            Some("nd_tll is in neighbor advertisements (icmp_type=136) only".into())
        }
        _ => None,
    }
}

pub(super) fn unknown_field_message(name: &str) -> String {
    let mut names: Vec<&str> = all_fields()
        .flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()))
        .collect();
    names.extend([
        "table",
        "priority",
        "cookie",
        "idle_timeout",
        "hard_timeout",
        "dl_vlan",
        "dl_vlan_pcp",
        "actions",
    ]);
    names.extend(SHORTHANDS.iter().map(|s| s.0));
    let best = names.iter().map(|n| (edit_distance(n, name), *n)).min();
    let hint = match best {
        Some((d, n)) if d <= 2 => format!(" (did you mean '{n}'?)"),
        _ => String::new(),
    };
    format!("unknown field '{name}'{hint}: expected a match field such as in_port, dl_dst, nw_dst, tp_dst, a shorthand such as ip or tcp, or table, priority, cookie, idle_timeout, hard_timeout, actions")
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
