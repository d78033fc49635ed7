//! Datapath actions: the flat list a translation produces and the
//! datapath executes (and that caches store), like OVS's ODP actions.
//! No lookups, no resubmits: every header change is explicit, committed
//! just before the output that needs it.

use sluice_packet::rewrite::{ArpField, FragRewrites};

pub use crate::action::PacketInReason;

/// What a packet-in carries beside the packet: the pipeline fields that
/// are not zero when the `controller` action runs (Open vSwitch's
/// `flow_get_metadata`: tunnel, `metadata`, registers, `pkt_mark`,
/// connection tracking; `in_port` is the packet's own), and the action's
/// `userdata`. The translation matches the packet fields it took exactly,
/// so every packet of the megaflow has these values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PacketInMeta {
    /// The fields, each exact where present.
    pub fields: crate::Match,
    /// Bytes for the controller (`NXT_PACKET_IN2` only).
    pub userdata: Vec<u8>,
    /// The meter the packet-ins go through (`controller(meter_id=N)`):
    /// those it drops are not made. A meter that is not there meters
    /// nothing (Open vSwitch takes the rule, logs it, sends unmetered).
    pub meter_id: Option<u32>,
    /// `controller(pause)`: the id of the frozen rest of the translation
    /// (a recirculation state of the datapath's first bridge), which the
    /// packet-in carries as its continuation.
    pub continuation: Option<u32>,
}

/// A `controller` datapath action: what its packet-ins say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketInAction {
    /// Why.
    pub reason: PacketInReason,
    /// The controllers (by `NXT_SET_CONTROLLER_ID`) it goes to.
    pub controller_id: u16,
    /// Bytes to include (with `packet_in_max_len`; the whole packet
    /// otherwise, as Open vSwitch 3.1).
    pub max_len: u16,
    /// The table of the rule whose action it is.
    pub table_id: u8,
    /// That rule's cookie.
    pub cookie: u64,
    /// The pipeline fields and userdata it carries.
    pub meta: std::sync::Arc<PacketInMeta>,
    /// The bridge whose controllers it goes to (its index in the
    /// datapath).
    pub bridge: u16,
    /// The input port, that bridge's OpenFlow number (the peer port for
    /// a packet that crossed a patch port).
    pub in_port: u32,
}

/// A meter a translation holds ([`DpAction::HeldMeter`]): equal when it
/// is the same meter.
#[derive(Debug, Clone)]
pub struct HeldMeter(pub std::sync::Arc<crate::meter::Meter>);

impl PartialEq for HeldMeter {
    fn eq(&self, o: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &o.0)
    }
}

impl Eq for HeldMeter {}

/// One datapath action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DpAction {
    /// Send a copy to this OpenFlow port.
    Output(u32),
    /// Queue a packet-in for the OpenFlow channel.
    Controller(Box<PacketInAction>),
    /// Set the Ethernet source.
    SetEthSrc([u8; 6]),
    /// Set the Ethernet destination.
    SetEthDst([u8; 6]),
    /// Set the IPv4 source (IP and L4 checksums updated).
    SetIpv4Src(u32, FragRewrites),
    /// Set the IPv4 destination (IP and L4 checksums updated).
    SetIpv4Dst(u32, FragRewrites),
    /// Set the IPv6 source (L4 checksum updated).
    SetIpv6Src([u8; 16], FragRewrites),
    /// Set the IPv6 destination (L4 checksum updated).
    SetIpv6Dst([u8; 16], FragRewrites),
    /// Set the IPv6 flow label.
    SetIpv6Label(u32),
    /// Set the EtherType after the VLAN tags (`--set-field spec`).
    SetEthType(u16),
    /// Set the IP protocol / the IPv6 upper-layer next header, updating
    /// the IPv4 header checksum and the transport checksum's pseudo-header
    /// (`--set-field spec`).
    SetIpProto(u8, FragRewrites),
    /// Set the `mask` bits of the TOS / traffic class byte.
    SetIpTos {
        /// New bits.
        tos: u8,
        /// Which bits (0xfc DSCP, 0x03 ECN).
        mask: u8,
    },
    /// Set the TTL / hop limit.
    SetIpTtl(u8),
    /// Set the TCP/UDP/SCTP source port.
    SetTpSrc(u16),
    /// Set the TCP/UDP/SCTP destination port.
    SetTpDst(u16),
    /// Set the ICMP type.
    SetIcmpType(u8),
    /// Set the ICMP code.
    SetIcmpCode(u8),
    /// ICMP type and code written into an IPv4 later fragment's first
    /// payload bytes (Open vSwitch's behaviour; `--frag-rewrites ovs`).
    SetIcmpInLaterFragment {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// Set an ARP field.
    SetArp(ArpField),
    /// Set an IPv6 neighbour discovery field.
    SetNd(sluice_packet::ndisc::NdField),
    /// Turn a neighbour solicitation for an underlay's own address into
    /// the advertisement that answers it ([`sluice_packet::ndisc::advertise`]).
    NdAdvert {
        /// The underlay's Ethernet address.
        mac: [u8; 6],
        /// Its IPv6 address.
        ip: [u8; 16],
    },
    /// Push a VLAN tag (wire TCI: PCP, DEI=0, VID).
    PushVlan {
        /// TPID.
        tpid: u16,
        /// TCI as written on the wire.
        tci: u16,
    },
    /// Pop the outermost VLAN tag.
    PopVlan,
    /// Replace the outermost tag's TCI (as written on the wire).
    SetVlanTci(u16),
    /// Push an MPLS label stack entry after the Ethernet header and tags.
    PushMpls {
        /// The new EtherType (0x8847 or 0x8848).
        eth_type: u16,
        /// The entry, as on the wire (label, TC, BoS, TTL).
        lse: u32,
    },
    /// Pop the outermost MPLS label; what follows gets this EtherType.
    PopMpls(u16),
    /// Replace the outermost MPLS label stack entry.
    SetMplsLse(u32),
    /// TTL of the header under the outermost label into it.
    CopyTtlOut,
    /// TTL of the outermost label into the header under it.
    CopyTtlIn,
    /// Push a PBB encapsulation (backbone addresses copied, I-SID 0).
    PushPbb(u16),
    /// Pop a PBB encapsulation.
    PopPbb,
    /// Set the I-TAG's service instance ID.
    SetPbbIsid(u32),
    /// Meter the packets with meter N ([`crate::meter`]): those above a
    /// drop band go no further, those above a DSCP remark band have their
    /// drop precedence raised.
    Meter(u32),
    /// The same with a meter of a bridge other than the datapath's first,
    /// held by the translation (the datapath looks meters up in the first
    /// bridge's rules; a changed meter makes a new rule version, which
    /// revalidates the megaflow before its next packet).
    HeldMeter(HeldMeter),
    /// Track the packet's connection ([`sluice_conntrack`]): the result
    /// is its connection tracking state for its next pass (a `recirc`
    /// after it). Runs even as the last action (a commit with no output).
    Ct(sluice_conntrack::CtRequest),
    /// Clear the packet's connection tracking state.
    CtClear,
    /// Give the packet this connection tracking state: what it had before
    /// a `clone(...)` whose actions tracked or cleared it (OVS runs such a
    /// clone on a copy of the packet in the datapath; Sluice puts the
    /// state back after it). The megaflow matches the state it restores.
    CtRestore(Box<sluice_conntrack::CtResult>),
    /// Send the packet (a copy, unless it is the last action) through the
    /// datapath again, re-parsed, with this recirculation id
    /// ([`crate::recirc`]).
    Recirc(u32),
    /// A select group chosen per packet: the datapath hashes the packet
    /// ([`crate::group::SlotTable::slot_of`]) and runs the variant of its
    /// slot. Only ever the whole action list of a flow (each variant is
    /// the full list for the packets that pick it).
    Select(std::sync::Arc<Select>),
    /// Encapsulate in this outer header and send out of underlay port
    /// `port` (OVS's `tnl_push`): what an output to a tunnel port becomes.
    TnlOutput {
        /// The header, built at translation.
        header: std::sync::Arc<sluice_packet::tunnel::TnlHeader>,
        /// The underlay port.
        port: u32,
    },
    /// Check and remove the outer headers, then send the inner frame
    /// through the datapath again as received on the tunnel port its outer
    /// headers name, with them as its tunnel metadata (OVS's `tnl_pop`).
    TnlPop(std::sync::Arc<crate::tunnel::Receivers>),
    /// `check_pkt_larger`'s per-packet choice (OVS's `check_pkt_len`): a
    /// packet longer than `len` bytes, Ethernet padding not counted, runs
    /// `gt`, another `le`; on a copy when actions follow this one (which
    /// then see the packet as it was before it), on the packet itself
    /// when none does.
    CheckPktLen {
        /// The length compared with.
        len: u16,
        /// The actions of longer packets.
        gt: std::sync::Arc<[DpAction]>,
        /// The actions of the others.
        le: std::sync::Arc<[DpAction]>,
    },
}

/// A select group's per-packet choice ([`DpAction::Select`]).
#[derive(Debug)]
pub struct Select {
    /// The group.
    pub group: u32,
    /// The variant each hash slot picks (`slots.variant`; variant `v` is
    /// bucket `slots.buckets[v]`).
    pub slots: std::sync::Arc<crate::group::SlotTable>,
    /// Per variant: its bucket and the whole action list of its packets.
    pub variants: Vec<(u32, std::sync::Arc<[DpAction]>)>,
    /// Per variant: its bucket's counter, credited with its packets.
    pub counters: Vec<std::sync::Arc<crate::rule::Rule>>,
}

impl PartialEq for Select {
    fn eq(&self, o: &Self) -> bool {
        self.group == o.group
            && std::sync::Arc::ptr_eq(&self.slots, &o.slots)
            && self.variants == o.variants
            && self.counters.len() == o.counters.len()
            && self
                .counters
                .iter()
                .zip(&o.counters)
                .all(|(a, b)| std::sync::Arc::ptr_eq(a, b))
    }
}
impl Eq for Select {}

impl std::fmt::Display for DpAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use sluice_packet::ndisc::NdField;
        use sluice_packet::wire::{ethernet::fmt_mac, ipv4::fmt_ipv4, ipv6::fmt_ipv6};
        match self {
            DpAction::Output(p) => write!(f, "{p}"),
            DpAction::TnlOutput { header, port } => {
                write!(
                    f,
                    "tnl_push(header({}),out_port({port}))",
                    header.kind.name()
                )?;
                let b = header.bytes();
                write!(f, "[")?;
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                write!(f, "]")
            }
            DpAction::TnlPop(r) => write!(f, "tnl_pop({}:{})", r.kind.name(), r.dst_port),
            DpAction::Controller(c) => write!(f, "controller(max_len={})", c.max_len),
            DpAction::SetEthSrc(m) => write!(f, "set(eth(src={}))", fmt_mac(m)),
            DpAction::SetEthDst(m) => write!(f, "set(eth(dst={}))", fmt_mac(m)),
            DpAction::SetIpv4Src(a, _) => write!(f, "set(ipv4(src={}))", fmt_ipv4(*a)),
            DpAction::SetIpv4Dst(a, _) => write!(f, "set(ipv4(dst={}))", fmt_ipv4(*a)),
            DpAction::SetIpv6Src(a, _) => write!(f, "set(ipv6(src={}))", fmt_ipv6(a)),
            DpAction::SetIpv6Dst(a, _) => write!(f, "set(ipv6(dst={}))", fmt_ipv6(a)),
            DpAction::SetIpv6Label(l) => write!(f, "set(ipv6(label={l:#x}))"),
            DpAction::SetEthType(t) => write!(f, "set(eth_type({t:#06x}))"),
            DpAction::SetIpProto(p, _) => write!(f, "set(ip(proto={p}))"),
            DpAction::SetIpTos { tos, mask: 0xff } => write!(f, "set(ip(tos={tos:#x}))"),
            DpAction::SetIpTos { tos, mask } => write!(f, "set(ip(tos={tos:#x}/{mask:#x}))"),
            DpAction::SetIpTtl(t) => write!(f, "set(ip(ttl={t}))"),
            DpAction::SetTpSrc(p) => write!(f, "set(l4(src={p}))"),
            DpAction::SetTpDst(p) => write!(f, "set(l4(dst={p}))"),
            DpAction::SetIcmpType(t) => write!(f, "set(icmp(type={t}))"),
            DpAction::SetIcmpCode(c) => write!(f, "set(icmp(code={c}))"),
            DpAction::SetIcmpInLaterFragment { ty, code } => {
                write!(f, "set(icmp(type={ty},code={code}))")
            }
            DpAction::SetArp(a) => match a {
                ArpField::Op(v) => write!(f, "set(arp(op={v}))"),
                ArpField::Spa(v) => write!(f, "set(arp(sip={}))", fmt_ipv4(*v)),
                ArpField::Tpa(v) => write!(f, "set(arp(tip={}))", fmt_ipv4(*v)),
                ArpField::Sha(v) => write!(f, "set(arp(sha={}))", fmt_mac(v)),
                ArpField::Tha(v) => write!(f, "set(arp(tha={}))", fmt_mac(v)),
            },
            DpAction::SetNd(n) => match n {
                NdField::Target(a) => write!(f, "set(nd(target={}))", fmt_ipv6(a)),
                NdField::Sll(m) => write!(f, "set(nd(sll={}))", fmt_mac(m)),
                NdField::Tll(m) => write!(f, "set(nd(tll={}))", fmt_mac(m)),
            },
            DpAction::NdAdvert { mac, ip } => {
                write!(f, "nd_advert(target={},tll={})", fmt_ipv6(ip), fmt_mac(mac))
            }
            DpAction::PushVlan { tpid, tci } => {
                write!(f, "push_vlan(")?;
                if *tpid != 0x8100 {
                    write!(f, "tpid={tpid:#x},")?;
                }
                write!(f, "vid={},pcp={})", tci & 0xfff, tci >> 13)
            }
            DpAction::PopVlan => f.write_str("pop_vlan"),
            DpAction::SetVlanTci(t) => write!(f, "set(vlan(vid={},pcp={}))", t & 0xfff, t >> 13),
            DpAction::PushMpls { eth_type, lse } => {
                write!(f, "push_mpls(")?;
                fmt_lse(f, *lse)?;
                write!(f, ",eth_type={eth_type:#x})")
            }
            DpAction::PopMpls(t) => write!(f, "pop_mpls(eth_type={t:#x})"),
            DpAction::SetMplsLse(lse) => {
                write!(f, "set(mpls(")?;
                fmt_lse(f, *lse)?;
                write!(f, "))")
            }
            DpAction::CopyTtlOut => f.write_str("copy_ttl_out"),
            DpAction::CopyTtlIn => f.write_str("copy_ttl_in"),
            DpAction::PushPbb(t) => write!(f, "push_pbb(eth_type={t:#x})"),
            DpAction::PopPbb => f.write_str("pop_pbb"),
            DpAction::SetPbbIsid(i) => write!(f, "set(pbb(isid={i}))"),
            DpAction::Recirc(id) => write!(f, "recirc({id:#x})"),
            DpAction::Meter(m) => write!(f, "meter({m})"),
            DpAction::HeldMeter(m) => write!(f, "meter({})", m.0.id),
            DpAction::Ct(r) => {
                let mut parts = Vec::new();
                if r.commit {
                    parts.push("commit".to_string());
                }
                if r.force {
                    parts.push("force".to_string());
                }
                if r.zone != 0 {
                    parts.push(format!("zone={}", r.zone));
                }
                if let Some((v, m)) = r.mark {
                    parts.push(format!("mark={v:#x}/{m:#x}"));
                }
                if let Some((v, m)) = r.label {
                    parts.push(format!("label={v:#x}/{m:#x}"));
                }
                if let Some(n) = &r.nat {
                    parts.push(n.to_string());
                }
                if parts.is_empty() {
                    f.write_str("ct")
                } else {
                    write!(f, "ct({})", parts.join(","))
                }
            }
            DpAction::CtClear => f.write_str("ct_clear"),
            DpAction::CtRestore(r) => write!(
                f,
                "ct_restore(state={:#x},zone={},mark={:#x})",
                r.state, r.zone, r.mark
            ),
            DpAction::Select(sel) => {
                write!(f, "select(group={},hash=sym_l4", sel.group)?;
                for (bucket, acts) in &sel.variants {
                    write!(f, ",bucket{bucket}:[{}]", format_dp_actions(acts))?;
                }
                f.write_str(")")
            }
            DpAction::CheckPktLen { len, gt, le } => write!(
                f,
                "check_pkt_len(size={len},gt({}),le({}))",
                format_dp_actions(gt),
                format_dp_actions(le)
            ),
        }
    }
}

fn fmt_lse(f: &mut std::fmt::Formatter<'_>, lse: u32) -> std::fmt::Result {
    write!(
        f,
        "label={},tc={},ttl={},bos={}",
        lse >> 12,
        (lse >> 9) & 7,
        lse & 0xff,
        (lse >> 8) & 1
    )
}

/// Formats a datapath action list as `ofproto/trace` does (`drop` when empty).
pub fn format_dp_actions(actions: &[DpAction]) -> String {
    crate::action::format_list(actions)
}
