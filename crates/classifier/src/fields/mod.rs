//! The matchable and settable fields, by their `ovs-ofctl` names.
//!
//! Each field maps a typed value onto bits of the [`FlowKey`]: `put`
//! writes only the field's own bits, so the same function fills a match's
//! value key and its mask key. Prerequisites are those of Open vSwitch
//! (`tp_dst` needs a TCP, UDP or SCTP match, `nd_target` an ND message...);
//! the parser rejects a rule that breaks them instead of silently dropping
//! the field as OVS does when it normalises a match.

use sluice_packet::key::{FlowKey, FRAG_LATER};
use sluice_packet::wire::ethernet::{ethertype, tci};
use sluice_packet::wire::l4::proto;

/// How a field's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// An unsigned integer of `bits` bits (decimal or 0x-hex).
    Int(u8),
    /// A MAC address.
    Mac,
    /// An IPv4 address (prefix or mask allowed).
    Ipv4,
    /// An IPv6 address (prefix or mask allowed).
    Ipv6,
}

/// What a rule must match for a field to be meaningful.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prereq {
    /// Always meaningful.
    None,
    /// `ip` or `ipv6`.
    Ip,
    /// `ip`.
    Ipv4,
    /// `ipv6`.
    Ipv6,
    /// `ip` or `arp` (nw_src/nw_dst double as arp_spa/arp_tpa).
    IpOrArp,
    /// `ip`, `ipv6` or `arp` (nw_proto doubles as the ARP opcode).
    IpOrArpProto,
    /// `arp`.
    Arp,
    /// `tcp`, `udp` or `sctp` (v4 or v6).
    L4,
    /// `tcp` or `tcp6`.
    Tcp,
    /// `udp` or `udp6`.
    Udp,
    /// `sctp` or `sctp6`.
    Sctp,
    /// `icmp` or `icmp6`.
    IcmpAny,
    /// `icmp` (writing icmp_type/icmp_code: OVS aliases them to the
    /// ICMPv6 fields in a match only).
    Icmp4,
    /// IP that is not a later fragment (where OpenFlow 1.0's `mod_tp_src`
    /// and `mod_tp_dst` act, whatever the protocol).
    IpNotLater,
    /// `icmp6`.
    Icmp6,
    /// `icmp6` with `icmp_type` 135 or 136 (and `icmp_code` 0 or unmatched).
    Nd,
    /// A VLAN tag (for set_field on VLAN fields).
    Vlan,
    /// `mpls` or `mplsm` (dl_type 0x8847 or 0x8848).
    Mpls,
    /// dl_type 0x88e7 (PBB).
    Pbb,
    /// A valid connection (OVS's `MFP_CT_VALID`): `ct_state` matching one
    /// of `+new`, `+est`, `+rel`, `+rpl`, `+snat`, `+dnat`, or `+trk-inv`.
    Ct,
    /// [`Prereq::Ct`] and `ip`.
    CtIpv4,
    /// [`Prereq::Ct`] and `ipv6`.
    CtIpv6,
}

impl Prereq {
    /// Human-readable form for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Prereq::None => "nothing",
            Prereq::Ip => "an IP match ('ip' or 'ipv6')",
            Prereq::Ipv4 => "an IPv4 match ('ip')",
            Prereq::Ipv6 => "an IPv6 match ('ipv6')",
            Prereq::IpOrArp => "an IPv4 or ARP match ('ip' or 'arp')",
            Prereq::IpOrArpProto => "an IP or ARP match ('ip', 'ipv6' or 'arp')",
            Prereq::Arp => "an ARP match ('arp')",
            Prereq::L4 => {
                "a protocol match with ports ('tcp', 'udp' or 'sctp') that is not nw_frag=later"
            }
            Prereq::Tcp => "a TCP match ('tcp' or 'tcp6') that is not nw_frag=later",
            Prereq::Udp => "a UDP match ('udp' or 'udp6') that is not nw_frag=later",
            Prereq::Sctp => "an SCTP match ('sctp' or 'sctp6') that is not nw_frag=later",
            Prereq::IcmpAny => "an ICMP match ('icmp' or 'icmp6')",
            Prereq::Icmp4 => "an ICMPv4 match ('icmp')",
            Prereq::IpNotLater => "an IP match that is not nw_frag=later",
            Prereq::Icmp6 => "an ICMPv6 match ('icmp6')",
            Prereq::Nd => "a neighbor discovery match ('icmp6,icmp_type=135' or 136)",
            Prereq::Vlan => "a VLAN match (e.g. 'dl_vlan=10' or 'vlan_tci=0x1000/0x1000')",
            Prereq::Mpls => "an MPLS match ('mpls' or 'mplsm')",
            Prereq::Pbb => "a PBB match ('dl_type=0x88e7')",
            Prereq::Ct => "a valid connection's ct_state (one of +new, +est, +rel, +rpl, +snat, +dnat, or +trk-inv)",
            Prereq::CtIpv4 => "an IPv4 match ('ip') and a valid connection's ct_state (one of +new, +est, +rel, +rpl, +snat, +dnat, or +trk-inv)",
            Prereq::CtIpv6 => "an IPv6 match ('ipv6') and a valid connection's ct_state (one of +new, +est, +rel, +rpl, +snat, +dnat, or +trk-inv)",
        }
    }

    /// Whether a match (value, mask) guarantees the prerequisite.
    pub fn holds(self, v: &FlowKey, m: &FlowKey) -> bool {
        let dl = |t: u16| m.dl_type == 0xffff && v.dl_type == t;
        let ip = || dl(ethertype::IPV4) || dl(ethertype::IPV6);
        let pr = |p: u8| m.nw_proto == 0xff && v.nw_proto == p;
        // A later fragment has no L4 header: as OVS's MFP_TCP/UDP/SCTP, the
        // value's bit decides (the mask is not looked at).
        let not_later = v.nw_frag & FRAG_LATER == 0;
        match self {
            Prereq::None => true,
            Prereq::Ip => ip(),
            Prereq::Ipv4 => dl(ethertype::IPV4),
            Prereq::Ipv6 => dl(ethertype::IPV6),
            Prereq::IpOrArp => dl(ethertype::IPV4) || dl(ethertype::ARP) || dl(ethertype::RARP),
            Prereq::IpOrArpProto => ip() || dl(ethertype::ARP) || dl(ethertype::RARP),
            Prereq::Arp => dl(ethertype::ARP) || dl(ethertype::RARP),
            Prereq::L4 => {
                ip() && (pr(proto::TCP) || pr(proto::UDP) || pr(proto::SCTP)) && not_later
            }
            Prereq::Tcp => ip() && pr(proto::TCP) && not_later,
            Prereq::Udp => ip() && pr(proto::UDP) && not_later,
            Prereq::Sctp => ip() && pr(proto::SCTP) && not_later,
            Prereq::IcmpAny => {
                (dl(ethertype::IPV4) && pr(proto::ICMP))
                    || (dl(ethertype::IPV6) && pr(proto::ICMPV6))
            }
            Prereq::Icmp4 => dl(ethertype::IPV4) && pr(proto::ICMP),
            Prereq::IpNotLater => ip() && not_later,
            Prereq::Icmp6 => dl(ethertype::IPV6) && pr(proto::ICMPV6),
            // As OVS's is_nd: the code need not be matched, only not be
            // matched to anything but 0 (an ND message with another code
            // keys no ND fields, so the rule cannot match it anyway).
            Prereq::Nd => {
                Prereq::Icmp6.holds(v, m)
                    && m.tp_src & 0xff == 0xff
                    && (v.tp_src & 0xff == 135 || v.tp_src & 0xff == 136)
                    && v.tp_dst & m.tp_dst & 0xff == 0
            }
            Prereq::Vlan => m.vlan_tci[0] & tci::PRESENT != 0 && v.vlan_tci[0] & tci::PRESENT != 0,
            Prereq::Mpls => dl(ethertype::MPLS) || dl(ethertype::MPLS_MCAST),
            Prereq::Pbb => dl(ethertype::PBB),
            Prereq::Ct => ct_valid(v, m),
            Prereq::CtIpv4 => ct_valid(v, m) && dl(ethertype::IPV4),
            Prereq::CtIpv6 => ct_valid(v, m) && dl(ethertype::IPV6),
        }
    }

    /// Whether a concrete packet key satisfies the prerequisite (used when
    /// an action runs on a packet whose rule could not guarantee it).
    pub fn holds_for_key(self, k: &FlowKey) -> bool {
        self.holds(k, &FlowKey::all_ones())
    }
}

/// OVS's `is_ct_valid` for a match: its `ct_state` says the packet has
/// a valid connection.
fn ct_valid(v: &FlowKey, m: &FlowKey) -> bool {
    use sluice_packet::key::{
        CS_DST_NAT, CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_REPLY_DIR, CS_SRC_NAT,
        CS_TRACKED,
    };
    let s = v.ct_state & m.ct_state;
    s & (CS_NEW | CS_ESTABLISHED | CS_RELATED | CS_REPLY_DIR | CS_SRC_NAT | CS_DST_NAT) != 0
        || (s & CS_TRACKED != 0 && m.ct_state & CS_INVALID != 0 && s & CS_INVALID == 0)
}

/// A field definition.
pub struct Field {
    /// Canonical name (as `ovs-ofctl` prints it).
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// Value syntax.
    pub kind: ValueKind,
    /// Whether `value/mask` is accepted in a match.
    pub maskable: bool,
    /// What the rule must match for this field.
    pub prereq: Prereq,
    /// Whether `set_field` may write it.
    pub writable: bool,
    /// Reads the field from a key.
    pub get: fn(&FlowKey) -> u128,
    /// Writes the field's bits into a key (other bits untouched).
    pub put: fn(&mut FlowKey, u128),
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Field {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Field {}

impl std::hash::Hash for Field {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl Field {
    /// What a rule must match for `set_field` to write this field. The
    /// match prerequisite, except that `icmp_type`/`icmp_code` name the
    /// ICMPv4 fields (OVS reads them as the ICMPv6 ones in an `icmp6`
    /// match, never in an action: `icmp6,actions=set_field:3->icmp_type`
    /// is refused, `set_field:3->icmpv6_type` is the way).
    pub fn write_prereq(&self) -> Prereq {
        match self.prereq {
            Prereq::IcmpAny => Prereq::Icmp4,
            // ip_proto (written only with `--set-field spec`): the IP
            // protocol, not an ARP opcode.
            Prereq::IpOrArpProto => Prereq::Ip,
            p => p,
        }
    }

    /// Whether writing it changes the packet's bytes: not for the
    /// registers and metadata (pipeline state) nor the tunnel fields
    /// (which an output to a tunnel port reads).
    pub fn in_packet(&self) -> bool {
        !(self.name.starts_with("tun_") || self.is_pipeline())
    }

    /// Whether `ovs-ofctl` shows its values in hex (as OVS's
    /// `MFS_HEXADECIMAL` fields), in matches and in `set_field`.
    pub fn shows_hex(&self) -> bool {
        matches!(
            self.name,
            "dl_type"
                | "vlan_tci"
                | "tcp_flags"
                | "ipv6_label"
                | "metadata"
                | "tun_id"
                | "ct_mark"
                | "ct_label"
                | "pkt_mark"
        ) || self.name.starts_with("tun_metadata")
            || self.is_register()
    }

    /// Whether it is pipeline state that no packet carries: metadata and
    /// the registers (zero in every packet's key).
    pub fn is_pipeline(&self) -> bool {
        matches!(
            self.name,
            "metadata" | "conj_id" | "pkt_mark" | "actset_output"
        ) || self.is_register()
    }

    /// Whether it is one of the registers (`reg`, `xreg`, `xxreg`).
    pub fn is_register(&self) -> bool {
        ["reg", "xreg", "xxreg"].iter().any(|p| {
            self.name
                .strip_prefix(p)
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
    }

    /// Whether `set_field` may write it under OpenFlow 1.3, which lets it
    /// write every header field: the [`writable`](Self::writable) ones and
    /// those Open vSwitch keeps read-only (`eth_type`, `ip_proto`,
    /// `mpls_bos`), which a rule set writes only in its `SetFieldMode::Spec`
    /// (`--set-field spec`).
    pub fn spec_writable(&self) -> bool {
        self.writable || self.read_only_in_ovs()
    }

    /// Whether it is one of the header fields Open vSwitch does not let
    /// `set_field` write but OpenFlow 1.3 does.
    pub fn read_only_in_ovs(&self) -> bool {
        matches!(self.name, "dl_type" | "nw_proto" | "mpls_bos")
    }

    /// Where an OpenFlow 1.0 action (`mod_nw_src`, `mod_tp_dst`, ...) on
    /// this field acts, checked per packet as OVS's translation does: such a
    /// rule loads whatever it matches (ovs-ofctl takes it, in OpenFlow 1.0),
    /// and the action does nothing to a packet outside this.
    /// `mod_nw_src`/`mod_nw_dst` act on IPv4 only (not on ARP), the port
    /// actions on any IP packet but a later fragment (on ICMP they set the
    /// type or code, which share the port fields).
    pub fn legacy_prereq(&self) -> Prereq {
        match self.prereq {
            Prereq::IpOrArp => Prereq::Ipv4,
            Prereq::L4 => Prereq::IpNotLater,
            p => p,
        }
    }

    /// Width in bits.
    pub fn bits(&self) -> u32 {
        match self.kind {
            ValueKind::Int(b) => b as u32,
            ValueKind::Mac => 48,
            ValueKind::Ipv4 => 32,
            ValueKind::Ipv6 => 128,
        }
    }

    /// All-ones value of the field's width.
    pub fn full_mask(&self) -> u128 {
        if self.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }

    /// Formats a value in the field's syntax.
    pub fn format_value(&self, v: u128) -> String {
        match self.kind {
            // As OVS's flags formatting: the names of the bits set.
            ValueKind::Int(_) if self.name == "tun_flags" && v == 1 => "oam".into(),
            ValueKind::Int(_) if self.name == "actset_output" => PORT_NAMES
                .iter()
                .find(|(p, _)| u128::from(*p) == v)
                .map_or_else(|| v.to_string(), |(_, n)| (*n).to_string()),
            ValueKind::Int(_) if self.name == "in_port" => u32::try_from(v)
                .ok()
                .and_then(reserved_port_name)
                .map_or_else(|| v.to_string(), str::to_string),
            ValueKind::Int(_) if self.shows_hex() => c_hex(v),
            ValueKind::Int(_) => v.to_string(),
            ValueKind::Mac => sluice_packet::wire::ethernet::fmt_mac(&mac_of(v)),
            ValueKind::Ipv4 => std::net::Ipv4Addr::from(v as u32).to_string(),
            ValueKind::Ipv6 => std::net::Ipv6Addr::from(v).to_string(),
        }
    }
}

/// `OFPP_UNSET`: no output in the action set (`actset_output`).
pub const OFPP_UNSET: u32 = 0xffff_fff7;

/// A port in 32 bits from its 16-bit number, as OpenFlow 1.0 numbers
/// them: the `OFPP_*` numbers from `0xff00` up are 1.1's from
/// `0xffffff00` up.
pub fn port32(p: u16) -> u32 {
    if p >= 0xff00 {
        u32::from(p) | 0xffff_0000
    } else {
        u32::from(p)
    }
}

/// [`port32`]'s inverse: a port with no 16-bit number (past `0xff00` but
/// not reserved) is `OFPP_NONE`.
pub fn port16(p: u32) -> u16 {
    match p {
        0..0xff00 => p as u16,
        0xffff_ff00.. => p as u16,
        _ => 0xffff,
    }
}

/// The names `ovs-ofctl` gives the reserved ports, 32-bit.
pub const PORT_NAMES: [(u32, &str); 9] = [
    (0xffff_fff7, "UNSET"),
    (0xffff_fff8, "IN_PORT"),
    (0xffff_fff9, "TABLE"),
    (0xffff_fffa, "NORMAL"),
    (0xffff_fffb, "FLOOD"),
    (0xffff_fffc, "ALL"),
    (0xffff_fffd, "CONTROLLER"),
    (0xffff_fffe, "LOCAL"),
    (0xffff_ffff, "ANY"),
];

/// A reserved port by the name `ovs-ofctl` gives it (`CONTROLLER`,
/// `ANY`...), as a port where OVS reads one (an `in_port` value, a
/// resubmit's port); `UNSET` is `actset_output`'s alone.
pub fn reserved_port(name: &str) -> Option<u32> {
    PORT_NAMES
        .iter()
        .find(|(p, n)| n.eq_ignore_ascii_case(name) && *p != OFPP_UNSET)
        .map(|&(p, _)| p)
}

/// [`reserved_port`]'s inverse: the name OVS prints for port `p`, if
/// reserved.
pub fn reserved_port_name(p: u32) -> Option<&'static str> {
    PORT_NAMES
        .iter()
        .find(|&&(q, _)| q == p && p != OFPP_UNSET)
        .map(|&(_, n)| n)
}

/// A MAC stored in the low 48 bits of a u128.
pub fn mac_of(v: u128) -> [u8; 6] {
    let b = (v as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The u128 form of a MAC.
pub fn mac_val(m: &[u8; 6]) -> u128 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]) as u128
}

macro_rules! int_field {
    ($name:literal, [$($alias:literal),*], $bits:expr, $mask:expr, $pre:ident, $w:expr, |$k:ident| $get:expr, |$kk:ident, $v:ident| $put:expr) => {
        Field {
            name: $name,
            aliases: &[$($alias),*],
            kind: ValueKind::Int($bits),
            maskable: $mask,
            prereq: Prereq::$pre,
            writable: $w,
            get: |$k: &FlowKey| ($get) as u128,
            put: |$kk: &mut FlowKey, $v: u128| $put,
        }
    };
}

/// `tun_metadata<N>`: Geneve option data as the TLV map says; having a
/// value (a match or a set_field) is being present.
macro_rules! tun_metadata_field {
    ($name:literal, $i:literal) => {
        int_field!(
            $name,
            [],
            64,
            true,
            None,
            true,
            |k| k.tun_metadata[$i],
            |k, v| {
                k.tun_metadata[$i] = v as u64;
                k.tun_metadata_present |= 1 << $i;
            }
        )
    };
}

/// Every field, in the order `ovs-ofctl` prints matches.
pub static FIELDS: &[Field] = &[
    // Written by write_metadata, and by set_field and load as Open
    // vSwitch lets them.
    int_field!(
        "metadata",
        [],
        64,
        true,
        None,
        true,
        |k| k.metadata,
        |k, v| k.metadata = v as u64
    ),
    // Pipeline state the classifier sets for a conjunctive match's
    // second lookup (zero in packets).
    int_field!(
        "conj_id",
        [],
        32,
        false,
        None,
        false,
        |k| k.conj_id,
        |k, v| k.conj_id = v as u32
    ),
    // The output port of the action set (OVS's actset_output): matched,
    // never written; kept in 16 bits as OpenFlow 1.0 numbers ports.
    int_field!(
        "actset_output",
        [],
        32,
        false,
        None,
        false,
        |k| crate::fields::port32(k.actset_output),
        |k, v| k.actset_output = crate::fields::port16(v as u32)
    ),
    // OVS's packet mark: pipeline state here too (a userspace port
    // receives every packet unmarked).
    int_field!(
        "pkt_mark",
        [],
        32,
        true,
        None,
        true,
        |k| k.pkt_mark,
        |k, v| k.pkt_mark = v as u32
    ),
    int_field!(
        "tun_id",
        ["tunnel_id"],
        64,
        true,
        None,
        true,
        |k| k.tunnel_id,
        |k, v| k.tunnel_id = v as u64
    ),
    Field {
        name: "tun_src",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| k.tun_src as u128,
        put: |k, v| k.tun_src = v as u32,
    },
    Field {
        name: "tun_dst",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| k.tun_dst as u128,
        put: |k, v| k.tun_dst = v as u32,
    },
    Field {
        name: "tun_ipv6_src",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| u128::from_be_bytes(k.tun_ipv6_src),
        put: |k, v| k.tun_ipv6_src = v.to_be_bytes(),
    },
    Field {
        name: "tun_ipv6_dst",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| u128::from_be_bytes(k.tun_ipv6_dst),
        put: |k, v| k.tun_ipv6_dst = v.to_be_bytes(),
    },
    int_field!(
        "tun_flags",
        [],
        1,
        true,
        None,
        true,
        // The OAM flag alone: the other bits are the switch's own record
        // of the outer headers (checksum, key, don't-fragment), as OVS's.
        |k| k.tun_flags & sluice_packet::key::TUN_FLAG_OAM,
        |k, v| k.tun_flags = (k.tun_flags & !sluice_packet::key::TUN_FLAG_OAM)
            | (v as u16 & sluice_packet::key::TUN_FLAG_OAM)
    ),
    int_field!(
        "tun_tos",
        [],
        8,
        false,
        None,
        true,
        |k| k.tun_tos,
        |k, v| k.tun_tos = v as u8
    ),
    int_field!(
        "tun_ttl",
        [],
        8,
        false,
        None,
        true,
        |k| k.tun_ttl,
        |k, v| k.tun_ttl = v as u8
    ),
    tun_metadata_field!("tun_metadata0", 0),
    tun_metadata_field!("tun_metadata1", 1),
    tun_metadata_field!("tun_metadata2", 2),
    tun_metadata_field!("tun_metadata3", 3),
    int_field!(
        "in_port",
        ["in_port_oxm"],
        32,
        false,
        None,
        true,
        |k| k.in_port,
        |k, v| k.in_port = v as u32
    ),
    Field {
        name: "dl_src",
        aliases: &["eth_src"],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| mac_val(&k.dl_src),
        put: |k, v| k.dl_src = mac_of(v),
    },
    Field {
        name: "dl_dst",
        aliases: &["eth_dst"],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::None,
        writable: true,
        get: |k| mac_val(&k.dl_dst),
        put: |k, v| k.dl_dst = mac_of(v),
    },
    int_field!(
        "dl_type",
        ["eth_type"],
        16,
        false,
        None,
        false,
        |k| k.dl_type,
        |k, v| k.dl_type = v as u16
    ),
    int_field!(
        "vlan_tci",
        [],
        16,
        true,
        None,
        false,
        |k| k.vlan_tci[0],
        |k, v| k.vlan_tci[0] = v as u16
    ),
    // OXM vlan_vid: 0x1000 (OFPVID_PRESENT) | VID.
    int_field!(
        "vlan_vid",
        [],
        13,
        true,
        None,
        true,
        |k| k.vlan_tci[0] & 0x1fff,
        |k, v| k.vlan_tci[0] = (k.vlan_tci[0] & !0x1fff) | (v as u16 & 0x1fff)
    ),
    int_field!(
        "vlan_pcp",
        [],
        3,
        false,
        Vlan,
        true,
        |k| k.vlan_tci[0] >> 13,
        |k, v| k.vlan_tci[0] = (k.vlan_tci[0] & 0x1fff) | ((v as u16 & 7) << 13)
    ),
    Field {
        name: "nw_src",
        aliases: &["ip_src"],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::IpOrArp,
        writable: true,
        get: |k| k.nw_src as u128,
        put: |k, v| k.nw_src = v as u32,
    },
    Field {
        name: "nw_dst",
        aliases: &["ip_dst"],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::IpOrArp,
        writable: true,
        get: |k| k.nw_dst as u128,
        put: |k, v| k.nw_dst = v as u32,
    },
    Field {
        name: "ipv6_src",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::Ipv6,
        writable: true,
        get: |k| u128::from_be_bytes(k.ipv6_src),
        put: |k, v| k.ipv6_src = v.to_be_bytes(),
    },
    Field {
        name: "ipv6_dst",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::Ipv6,
        writable: true,
        get: |k| u128::from_be_bytes(k.ipv6_dst),
        put: |k, v| k.ipv6_dst = v.to_be_bytes(),
    },
    int_field!(
        "ipv6_label",
        [],
        20,
        true,
        Ipv6,
        true,
        |k| k.ipv6_label & 0xfffff,
        |k, v| k.ipv6_label = (k.ipv6_label & !0xfffff) | (v as u32 & 0xfffff)
    ),
    // OpenFlow's extension-header flags (OFPIEH_*), above the label.
    int_field!(
        "ipv6_exthdr",
        [],
        9,
        true,
        Ipv6,
        false,
        |k| (k.ipv6_label >> 20) & 0x1ff,
        |k, v| k.ipv6_label = (k.ipv6_label & !(0x1ff << 20)) | ((v as u32 & 0x1ff) << 20)
    ),
    // An MPLS packet's outermost label stack entry (in ipv6_label's bits).
    int_field!(
        "mpls_label",
        [],
        20,
        false,
        Mpls,
        true,
        |k| k.ipv6_label >> 12,
        |k, v| k.ipv6_label = (k.ipv6_label & 0xfff) | ((v as u32 & 0xfffff) << 12)
    ),
    int_field!(
        "mpls_tc",
        [],
        3,
        false,
        Mpls,
        true,
        |k| (k.ipv6_label >> 9) & 7,
        |k, v| k.ipv6_label = (k.ipv6_label & !0xe00) | ((v as u32 & 7) << 9)
    ),
    int_field!(
        "mpls_bos",
        [],
        1,
        false,
        Mpls,
        false,
        |k| (k.ipv6_label >> 8) & 1,
        |k, v| k.ipv6_label = (k.ipv6_label & !0x100) | ((v as u32 & 1) << 8)
    ),
    int_field!(
        "mpls_ttl",
        [],
        8,
        false,
        Mpls,
        true,
        |k| k.ipv6_label & 0xff,
        |k, v| k.ipv6_label = (k.ipv6_label & !0xff) | (v as u32 & 0xff)
    ),
    // A PBB packet's I-TAG service instance ID (in ipv6_label's bits).
    int_field!(
        "pbb_isid",
        [],
        24,
        true,
        Pbb,
        true,
        |k| k.ipv6_label & 0xff_ffff,
        |k, v| k.ipv6_label = (k.ipv6_label & !0xff_ffff) | (v as u32 & 0xff_ffff)
    ),
    int_field!(
        "nw_proto",
        ["ip_proto"],
        8,
        false,
        IpOrArpProto,
        false,
        |k| k.nw_proto,
        |k, v| k.nw_proto = v as u8
    ),
    // nw_tos carries the DSCP bits only (the low two bits must be zero).
    int_field!(
        "nw_tos",
        [],
        8,
        false,
        Ip,
        true,
        |k| k.nw_tos & 0xfc,
        |k, v| k.nw_tos = (k.nw_tos & 0x03) | (v as u8 & 0xfc)
    ),
    int_field!(
        "ip_dscp",
        [],
        6,
        false,
        Ip,
        true,
        |k| k.nw_tos >> 2,
        |k, v| k.nw_tos = (k.nw_tos & 0x03) | ((v as u8 & 0x3f) << 2)
    ),
    int_field!(
        "ip_ecn",
        ["nw_ecn"],
        2,
        false,
        Ip,
        true,
        |k| k.nw_tos & 0x03,
        |k, v| k.nw_tos = (k.nw_tos & 0xfc) | (v as u8 & 0x03)
    ),
    int_field!("nw_ttl", [], 8, false, Ip, true, |k| k.nw_ttl, |k, v| k
        .nw_ttl =
        v as u8),
    int_field!(
        "nw_frag",
        ["ip_frag"],
        2,
        true,
        Ip,
        false,
        |k| k.nw_frag & 3,
        |k, v| k.nw_frag = (k.nw_frag & !3) | (v as u8 & 3)
    ),
    int_field!("tp_src", [], 16, true, L4, true, |k| k.tp_src, |k, v| k
        .tp_src =
        v as u16),
    int_field!("tp_dst", [], 16, true, L4, true, |k| k.tp_dst, |k, v| k
        .tp_dst =
        v as u16),
    int_field!("tcp_src", [], 16, true, Tcp, true, |k| k.tp_src, |k, v| k
        .tp_src =
        v as u16),
    int_field!("tcp_dst", [], 16, true, Tcp, true, |k| k.tp_dst, |k, v| k
        .tp_dst =
        v as u16),
    int_field!("udp_src", [], 16, true, Udp, true, |k| k.tp_src, |k, v| k
        .tp_src =
        v as u16),
    int_field!("udp_dst", [], 16, true, Udp, true, |k| k.tp_dst, |k, v| k
        .tp_dst =
        v as u16),
    int_field!(
        "sctp_src",
        [],
        16,
        true,
        Sctp,
        true,
        |k| k.tp_src,
        |k, v| k.tp_src = v as u16
    ),
    int_field!(
        "sctp_dst",
        [],
        16,
        true,
        Sctp,
        true,
        |k| k.tp_dst,
        |k, v| k.tp_dst = v as u16
    ),
    int_field!(
        "tcp_flags",
        [],
        12,
        true,
        Tcp,
        false,
        |k| k.tcp_flags & 0xfff,
        |k, v| k.tcp_flags = (k.tcp_flags & !0xfff) | (v as u16 & 0xfff)
    ),
    int_field!(
        "icmp_type",
        ["icmpv4_type"],
        8,
        false,
        IcmpAny,
        true,
        |k| k.tp_src & 0xff,
        |k, v| k.tp_src = (k.tp_src & !0xff) | (v as u16 & 0xff)
    ),
    int_field!(
        "icmp_code",
        ["icmpv4_code"],
        8,
        false,
        IcmpAny,
        true,
        |k| k.tp_dst & 0xff,
        |k, v| k.tp_dst = (k.tp_dst & !0xff) | (v as u16 & 0xff)
    ),
    int_field!(
        "icmpv6_type",
        [],
        8,
        false,
        Icmp6,
        true,
        |k| k.tp_src & 0xff,
        |k, v| k.tp_src = (k.tp_src & !0xff) | (v as u16 & 0xff)
    ),
    int_field!(
        "icmpv6_code",
        [],
        8,
        false,
        Icmp6,
        true,
        |k| k.tp_dst & 0xff,
        |k, v| k.tp_dst = (k.tp_dst & !0xff) | (v as u16 & 0xff)
    ),
    Field {
        name: "nd_target",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::Nd,
        writable: true,
        get: |k| u128::from_be_bytes(k.nd_target),
        put: |k, v| k.nd_target = v.to_be_bytes(),
    },
    Field {
        name: "nd_sll",
        aliases: &[],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::Nd,
        writable: true,
        get: |k| mac_val(&k.arp_sha),
        put: |k, v| k.arp_sha = mac_of(v),
    },
    Field {
        name: "nd_tll",
        aliases: &[],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::Nd,
        writable: true,
        get: |k| mac_val(&k.arp_tha),
        put: |k, v| k.arp_tha = mac_of(v),
    },
    int_field!("arp_op", [], 8, false, Arp, true, |k| k.nw_proto, |k, v| {
        k.nw_proto = v as u8
    }),
    Field {
        name: "arp_spa",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::Arp,
        writable: true,
        get: |k| k.nw_src as u128,
        put: |k, v| k.nw_src = v as u32,
    },
    Field {
        name: "arp_tpa",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::Arp,
        writable: true,
        get: |k| k.nw_dst as u128,
        put: |k, v| k.nw_dst = v as u32,
    },
    Field {
        name: "arp_sha",
        aliases: &[],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::Arp,
        writable: true,
        get: |k| mac_val(&k.arp_sha),
        put: |k, v| k.arp_sha = mac_of(v),
    },
    Field {
        name: "arp_tha",
        aliases: &[],
        kind: ValueKind::Mac,
        maskable: true,
        prereq: Prereq::Arp,
        writable: true,
        get: |k| mac_val(&k.arp_tha),
        put: |k, v| k.arp_tha = mac_of(v),
    },
];

/// An integer as C's `%#x` writes it (`0`, `0x1f`), as `ovs-ofctl` does.
pub fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

mod ct;
mod nxm;
mod regs;
pub use ct::{format_ct_state, CT_FIELDS, CT_STATE_NAMES};
pub use nxm::{field_by_nxm_name, nxm_name, IN_PORT16};
pub use regs::{regs32, REG_FIELDS};

/// Every field: the packet's and tunnel's ([`FIELDS`]), the connection
/// tracking state ([`CT_FIELDS`]), then the registers ([`REG_FIELDS`]).
pub fn all_fields() -> impl Iterator<Item = &'static Field> {
    FIELDS.iter().chain(CT_FIELDS).chain(REG_FIELDS)
}

/// Looks a field up by name or alias: one hash lookup (the parser asks
/// for every field of every rule; a scan of the ~300 names and aliases
/// was a seventh of loading a million rules).
pub fn field_by_name(name: &str) -> Option<&'static Field> {
    static BY_NAME: std::sync::OnceLock<hashbrown::HashMap<&'static str, &'static Field>> =
        std::sync::OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            let mut m = hashbrown::HashMap::new();
            for f in all_fields() {
                // The first field of a name or alias wins, as a scan in
                // order would find it.
                for n in std::iter::once(&f.name).chain(f.aliases.iter()) {
                    m.entry(*n).or_insert(f);
                }
            }
            m
        })
        .get(name)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_by_name_finds_what_a_scan_in_order_finds() {
        for f in all_fields() {
            for n in std::iter::once(&f.name).chain(f.aliases.iter()) {
                let scan = all_fields().find(|g| g.name == *n || g.aliases.contains(n));
                assert!(
                    std::ptr::eq(field_by_name(n).unwrap(), scan.unwrap()),
                    "{n}"
                );
            }
        }
        assert!(field_by_name("no_such_field").is_none());
        assert!(field_by_name("").is_none());
    }

    #[test]
    fn put_touches_only_own_bits() {
        for f in all_fields() {
            let mut k = FlowKey::all_ones();
            (f.put)(&mut k, 0);
            assert_eq!((f.get)(&k), 0, "{}", f.name);
            let mut z = FlowKey::default();
            (f.put)(&mut z, f.full_mask());
            assert_eq!(
                (f.get)(&z),
                (f.get)(&FlowKey::all_ones()),
                "{} full mask round trip",
                f.name
            );
            // Clearing then filling again restores all-ones: no other bits moved.
            (f.put)(&mut k, f.full_mask());
            let mut expect = FlowKey::all_ones();
            if f.name == "nw_tos" {
                // nw_tos owns only the DSCP bits; the ECN bits stay ones.
                expect.nw_tos = 0xff;
            }
            assert_eq!(k, expect, "{}", f.name);
        }
    }

    #[test]
    fn lookup_by_alias() {
        assert_eq!(field_by_name("eth_src").unwrap().name, "dl_src");
        assert_eq!(field_by_name("ip_proto").unwrap().name, "nw_proto");
        assert!(field_by_name("nope").is_none());
    }

    #[test]
    fn prereqs() {
        let m = FlowKey {
            dl_type: 0xffff,
            nw_proto: 0xff,
            ..Default::default()
        };
        let v = FlowKey {
            dl_type: 0x0800,
            nw_proto: 6,
            ..Default::default()
        };
        assert!(Prereq::Tcp.holds(&v, &m));
        assert!(Prereq::L4.holds(&v, &m));
        assert!(!Prereq::Udp.holds(&v, &m));
        assert!(!Prereq::Ipv6.holds(&v, &m));
        assert!(
            !Prereq::Tcp.holds(&v, &FlowKey::default()),
            "unmasked dl_type proves nothing"
        );
    }
}
