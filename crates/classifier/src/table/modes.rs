//! Where Open vSwitch and OpenFlow 1.3 differ, the rule set's choice:
//! Open vSwitch's behaviour by default, the spec's as an option.

use sluice_packet::rewrite::FragRewrites;

use crate::FragHandling;

/// Every choice a rule set translates with where Open vSwitch and
/// OpenFlow 1.3 (or the RFCs) differ; each defaults to Open vSwitch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Modes {
    /// How the tables see IP fragments (`ovs-ofctl set-frags`).
    pub frag_handling: FragHandling,
    /// What rewrites do to fragments' L4 bytes.
    pub frag_rewrites: FragRewrites,
    /// What a pushed VLAN tag carries over a tag.
    pub push_vlan: PushVlan,
    /// A pushed MPLS label's TTL over a packet neither MPLS nor IP.
    pub push_mpls: PushMpls,
    /// Which fields `set_field` may write.
    pub set_field: SetFieldMode,
    /// How select groups hash packets to buckets.
    pub select_hash: SelectHash,
}

/// How a select group picks a packet's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SelectHash {
    /// As Open vSwitch 3.1 (`dp_hash`: its hash values and hashes, so a
    /// connection reaches the same bucket through either switch; frames
    /// that differ only in their Ethernet or ARP addresses, or UDP flows
    /// between two hosts with no selection method, share a bucket).
    #[default]
    Ovs,
    /// Sluice's own: Ethernet and IP or ARP addresses, protocol and ports
    /// over 4,096 slots by weight, so flows that differ in any of them
    /// spread (os-ken's select-group tests expect it).
    Spread,
}

impl SelectHash {
    /// Parses `ovs` or `spread`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ovs" => Ok(SelectHash::Ovs),
            "spread" => Ok(SelectHash::Spread),
            _ => Err(format!("unknown select_hash mode '{s}' (ovs or spread)")),
        }
    }
}

/// What a `push_vlan` puts in the new tag when the packet has one already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PushVlan {
    /// VID 0 and PCP 0, as Open vSwitch 3.1 (`push_vlan(vid=0,pcp=0)` in
    /// `ofproto/trace`).
    #[default]
    Ovs,
    /// The outer tag's VID and PCP, as OpenFlow 1.3 says (section 7.2.5,
    /// table 6: "VLAN ID/priority: copied from the existing tag").
    Spec,
}

impl PushVlan {
    /// Parses `ovs` or `spec`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ovs" => Ok(PushVlan::Ovs),
            "spec" => Ok(PushVlan::Spec),
            _ => Err(format!("unknown push_vlan mode '{s}' (ovs or spec)")),
        }
    }
}

/// What a `push_mpls` onto a packet that is neither MPLS nor IP puts in
/// the new label's TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PushMpls {
    /// 64, as Open vSwitch 3.1 (`push_mpls` on ARP: `ttl=64`).
    #[default]
    Ovs,
    /// 0, as OpenFlow 1.3 says (section 7.2.5: the new header's fields are
    /// set to 0 unless table 7 copies them; the TTL is copied only from an
    /// MPLS or IP header).
    Spec,
}

impl PushMpls {
    /// Parses `ovs` or `spec`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ovs" => Ok(PushMpls::Ovs),
            "spec" => Ok(PushMpls::Spec),
            _ => Err(format!("unknown push_mpls mode '{s}' (ovs or spec)")),
        }
    }
}

/// Which header fields `set_field` may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetFieldMode {
    /// As Open vSwitch 3.1: `eth_type`, `ip_proto` and `mpls_bos` are
    /// read-only (`ovs-ofctl: ip_proto is read-only`; OpenFlow's
    /// `BAD_SET_TYPE`).
    #[default]
    Ovs,
    /// As OpenFlow 1.3 (section 7.2.5, "Set-Field"): every header field,
    /// those three included: the EtherType, the IP protocol (the IPv4
    /// header checksum and the transport checksum's pseudo-header updated)
    /// and the outermost MPLS label's bottom-of-stack bit.
    Spec,
}

impl SetFieldMode {
    /// Parses `ovs` or `spec`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ovs" => Ok(SetFieldMode::Ovs),
            "spec" => Ok(SetFieldMode::Spec),
            _ => Err(format!("unknown set_field mode '{s}' (ovs or spec)")),
        }
    }
}
