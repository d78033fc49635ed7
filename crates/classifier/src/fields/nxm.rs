//! Fields by their NXM and OXM names (`NXM_OF_ETH_SRC`, `NXM_NX_REG0`,
//! `OXM_OF_PKT_REG1`...), as `load:` and `move:` name them and as
//! `ovs-ofctl` prints them there: the name Open vSwitch prefers (the
//! NXM one where a field has both), and the other accepted on input.

use sluice_packet::key::FlowKey;

use super::{field_by_name, Field, Prereq, ValueKind};

/// The input port as OpenFlow 1.0 numbers it, 16 bits (`in_port` and
/// `NXM_OF_IN_PORT` in a subfield, as in OVS; `OXM_OF_IN_PORT` is the
/// 32-bit one): ports from 0xff00 up are the reserved ones, 0xffffff00
/// and up in 32 bits.
pub static IN_PORT16: Field = Field {
    name: "in_port16",
    aliases: &[],
    kind: ValueKind::Int(16),
    maskable: false,
    prereq: Prereq::None,
    writable: true,
    get: |k: &FlowKey| u128::from(port16(k.in_port)),
    put: |k: &mut FlowKey, v: u128| k.in_port = port32(v as u16),
};

fn port16(p: u32) -> u16 {
    match p {
        0..0xff00 => p as u16,
        0xffff_ff00.. => (p - 0xffff_0000) as u16,
        // No 16-bit number: OVS's OFPP_NONE.
        _ => 0xffff,
    }
}

fn port32(p: u16) -> u32 {
    if p >= 0xff00 {
        u32::from(p) + 0xffff_0000
    } else {
        u32::from(p)
    }
}

/// (field, printed name, other accepted name or "").
const NAMES: &[(&str, &str, &str)] = &[
    ("in_port16", "NXM_OF_IN_PORT", ""),
    ("in_port", "OXM_OF_IN_PORT", ""),
    ("dl_src", "NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC"),
    ("dl_dst", "NXM_OF_ETH_DST", "OXM_OF_ETH_DST"),
    ("dl_type", "NXM_OF_ETH_TYPE", "OXM_OF_ETH_TYPE"),
    ("vlan_tci", "NXM_OF_VLAN_TCI", ""),
    ("vlan_vid", "OXM_OF_VLAN_VID", ""),
    ("vlan_pcp", "OXM_OF_VLAN_PCP", ""),
    ("nw_src", "NXM_OF_IP_SRC", "OXM_OF_IPV4_SRC"),
    ("nw_dst", "NXM_OF_IP_DST", "OXM_OF_IPV4_DST"),
    ("nw_proto", "NXM_OF_IP_PROTO", "OXM_OF_IP_PROTO"),
    ("nw_tos", "NXM_OF_IP_TOS", ""),
    ("ip_dscp", "OXM_OF_IP_DSCP", ""),
    ("ip_ecn", "NXM_NX_IP_ECN", "OXM_OF_IP_ECN"),
    ("nw_ttl", "NXM_NX_IP_TTL", ""),
    ("nw_frag", "NXM_NX_IP_FRAG", ""),
    ("ipv6_src", "NXM_NX_IPV6_SRC", "OXM_OF_IPV6_SRC"),
    ("ipv6_dst", "NXM_NX_IPV6_DST", "OXM_OF_IPV6_DST"),
    ("ipv6_label", "NXM_NX_IPV6_LABEL", "OXM_OF_IPV6_FLABEL"),
    ("ipv6_exthdr", "OXM_OF_IPV6_EXTHDR", ""),
    ("mpls_label", "OXM_OF_MPLS_LABEL", ""),
    ("mpls_tc", "OXM_OF_MPLS_TC", ""),
    ("mpls_bos", "OXM_OF_MPLS_BOS", ""),
    ("mpls_ttl", "NXM_NX_MPLS_TTL", ""),
    ("pbb_isid", "OXM_OF_PBB_ISID", ""),
    ("tcp_src", "NXM_OF_TCP_SRC", "OXM_OF_TCP_SRC"),
    ("tcp_dst", "NXM_OF_TCP_DST", "OXM_OF_TCP_DST"),
    ("udp_src", "NXM_OF_UDP_SRC", "OXM_OF_UDP_SRC"),
    ("udp_dst", "NXM_OF_UDP_DST", "OXM_OF_UDP_DST"),
    ("sctp_src", "OXM_OF_SCTP_SRC", ""),
    ("sctp_dst", "OXM_OF_SCTP_DST", ""),
    ("tcp_flags", "NXM_NX_TCP_FLAGS", "ONF_OXM_OF_TCP_FLAGS"),
    ("icmp_type", "NXM_OF_ICMP_TYPE", "OXM_OF_ICMPV4_TYPE"),
    ("icmp_code", "NXM_OF_ICMP_CODE", "OXM_OF_ICMPV4_CODE"),
    ("icmpv6_type", "NXM_NX_ICMPV6_TYPE", "OXM_OF_ICMPV6_TYPE"),
    ("icmpv6_code", "NXM_NX_ICMPV6_CODE", "OXM_OF_ICMPV6_CODE"),
    ("nd_target", "NXM_NX_ND_TARGET", "OXM_OF_IPV6_ND_TARGET"),
    ("nd_sll", "NXM_NX_ND_SLL", "OXM_OF_IPV6_ND_SLL"),
    ("nd_tll", "NXM_NX_ND_TLL", "OXM_OF_IPV6_ND_TLL"),
    ("arp_op", "NXM_OF_ARP_OP", "OXM_OF_ARP_OP"),
    ("arp_spa", "NXM_OF_ARP_SPA", "OXM_OF_ARP_SPA"),
    ("arp_tpa", "NXM_OF_ARP_TPA", "OXM_OF_ARP_TPA"),
    ("arp_sha", "NXM_NX_ARP_SHA", "OXM_OF_ARP_SHA"),
    ("arp_tha", "NXM_NX_ARP_THA", "OXM_OF_ARP_THA"),
    ("metadata", "OXM_OF_METADATA", ""),
    ("tun_id", "NXM_NX_TUN_ID", "OXM_OF_TUNNEL_ID"),
    ("tun_src", "NXM_NX_TUN_IPV4_SRC", ""),
    ("tun_dst", "NXM_NX_TUN_IPV4_DST", ""),
    ("tun_ipv6_src", "NXM_NX_TUN_IPV6_SRC", ""),
    ("tun_ipv6_dst", "NXM_NX_TUN_IPV6_DST", ""),
    ("tun_flags", "NXM_NX_TUN_FLAGS", ""),
    ("tun_metadata0", "NXM_NX_TUN_METADATA0", ""),
    ("tun_metadata1", "NXM_NX_TUN_METADATA1", ""),
    ("tun_metadata2", "NXM_NX_TUN_METADATA2", ""),
    ("tun_metadata3", "NXM_NX_TUN_METADATA3", ""),
    ("ct_state", "NXM_NX_CT_STATE", ""),
    ("ct_zone", "NXM_NX_CT_ZONE", ""),
    ("ct_mark", "NXM_NX_CT_MARK", ""),
    ("ct_label", "NXM_NX_CT_LABEL", ""),
    ("ct_nw_proto", "NXM_NX_CT_NW_PROTO", ""),
    ("ct_nw_src", "NXM_NX_CT_NW_SRC", ""),
    ("ct_nw_dst", "NXM_NX_CT_NW_DST", ""),
    ("ct_ipv6_src", "NXM_NX_CT_IPV6_SRC", ""),
    ("ct_ipv6_dst", "NXM_NX_CT_IPV6_DST", ""),
    ("ct_tp_src", "NXM_NX_CT_TP_SRC", ""),
    ("ct_tp_dst", "NXM_NX_CT_TP_DST", ""),
    ("conj_id", "NXM_NX_CONJ_ID", ""),
    ("pkt_mark", "NXM_NX_PKT_MARK", ""),
    ("reg0", "NXM_NX_REG0", ""),
    ("reg1", "NXM_NX_REG1", ""),
    ("reg2", "NXM_NX_REG2", ""),
    ("reg3", "NXM_NX_REG3", ""),
    ("reg4", "NXM_NX_REG4", ""),
    ("reg5", "NXM_NX_REG5", ""),
    ("reg6", "NXM_NX_REG6", ""),
    ("reg7", "NXM_NX_REG7", ""),
    ("reg8", "NXM_NX_REG8", ""),
    ("reg9", "NXM_NX_REG9", ""),
    ("reg10", "NXM_NX_REG10", ""),
    ("reg11", "NXM_NX_REG11", ""),
    ("reg12", "NXM_NX_REG12", ""),
    ("reg13", "NXM_NX_REG13", ""),
    ("reg14", "NXM_NX_REG14", ""),
    ("reg15", "NXM_NX_REG15", ""),
    ("xreg0", "OXM_OF_PKT_REG0", ""),
    ("xreg1", "OXM_OF_PKT_REG1", ""),
    ("xreg2", "OXM_OF_PKT_REG2", ""),
    ("xreg3", "OXM_OF_PKT_REG3", ""),
    ("xreg4", "OXM_OF_PKT_REG4", ""),
    ("xreg5", "OXM_OF_PKT_REG5", ""),
    ("xreg6", "OXM_OF_PKT_REG6", ""),
    ("xreg7", "OXM_OF_PKT_REG7", ""),
    ("xxreg0", "NXM_NX_XXREG0", ""),
    ("xxreg1", "NXM_NX_XXREG1", ""),
    ("xxreg2", "NXM_NX_XXREG2", ""),
    ("xxreg3", "NXM_NX_XXREG3", ""),
];

/// The field an NXM or OXM name stands for (`NXM_OF_ETH_SRC` is
/// `dl_src`); case as written by `ovs-ofctl`.
pub fn field_by_nxm_name(name: &str) -> Option<&'static Field> {
    if name == "NXM_OF_IN_PORT" {
        return Some(&IN_PORT16);
    }
    let (f, _, _) = NAMES
        .iter()
        .find(|(_, nxm, other)| *nxm == name || (!other.is_empty() && *other == name))?;
    field_by_name(f)
}

/// The name `ovs-ofctl` prints for a field in `load:` and `move:`: its
/// NXM or OXM name, or its own name if it has neither (`tun_tos`, and
/// Sluice's `tp_src`/`tp_dst`, which name TCP's where OVS has a field
/// per protocol).
pub fn nxm_name(field: &Field) -> &'static str {
    let own = match field.name {
        "tp_src" => "tcp_src",
        "tp_dst" => "tcp_dst",
        n => n,
    };
    NAMES
        .iter()
        .find(|(f, _, _)| *f == own)
        .map_or(field.name, |&(_, nxm, _)| nxm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_field_and_round_trips() {
        for &(f, nxm, other) in NAMES {
            let field = field_by_name(f)
                .or((f == "in_port16").then_some(&IN_PORT16))
                .unwrap_or_else(|| panic!("{f}"));
            assert_eq!(nxm_name(field), nxm);
            assert_eq!(field_by_nxm_name(nxm).map(|x| x.name), Some(f));
            if !other.is_empty() {
                assert_eq!(field_by_nxm_name(other).map(|x| x.name), Some(f));
            }
        }
    }
}

#[cfg(test)]
mod port_tests {
    use super::*;

    #[test]
    fn sixteen_bit_ports_map_the_reserved_range() {
        for (p32, p16) in [
            (1, 1),
            (0xfeff, 0xfeff),
            (0xffff_fff8, 0xfff8),
            (0xffff_fffd, 0xfffd),
        ] {
            assert_eq!(port16(p32), p16);
            assert_eq!(port32(p16), p32);
        }
        assert_eq!(port16(0x1_0000), 0xffff);
    }
}
