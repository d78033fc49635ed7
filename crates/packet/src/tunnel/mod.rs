//! Tunnel encapsulations as Open vSwitch's userspace datapath does them
//! ("native tunnelling"): VXLAN, Geneve and GRE over IPv4.
//!
//! - [`config`]: a tunnel port's options as users write them
//!   (`vxlan:remote_ip=10.0.0.2,key=42`);
//! - [`header`]: the outer header built once per flow at translation,
//!   pushed on each packet with its lengths, checksum and UDP source port
//!   filled in, and the outer headers of a received tunnel packet checked
//!   and popped into [`TunnelMeta`].

pub mod config;
pub mod header;
pub mod tlv;

pub use config::{Endpoint, TunnelConfig, TunnelKey};
pub use header::{
    pop, pop_into, push, push_super, udp_src_port, HeaderParams, PopError, TnlHeader,
};
pub use tlv::{GeneveOpts, TlvEntry, TlvError, TlvMap};

/// The tunnel protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348): UDP, 24-bit VNI.
    Vxlan,
    /// Geneve (RFC 8926): UDP, 24-bit VNI, options.
    Geneve,
    /// GRE (RFC 2784/2890) carrying Ethernet: optional 32-bit key.
    Gre,
}

impl TunnelKind {
    /// The port type as OVS names it (`type=vxlan`).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
        }
    }

    /// The kind a port type name means.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "vxlan" => Some(TunnelKind::Vxlan),
            "geneve" => Some(TunnelKind::Geneve),
            "gre" => Some(TunnelKind::Gre),
            _ => None,
        }
    }

    /// The IANA UDP port (0 for GRE, which is not UDP).
    pub fn default_dst_port(self) -> u16 {
        match self {
            TunnelKind::Vxlan => 4789,
            TunnelKind::Geneve => 6081,
            TunnelKind::Gre => 0,
        }
    }

    /// The outer IP protocol.
    pub fn ip_proto(self) -> u8 {
        match self {
            TunnelKind::Gre => 47,
            _ => crate::wire::l4::proto::UDP,
        }
    }

    /// Whether the protocol runs over UDP.
    pub fn is_udp(self) -> bool {
        self != TunnelKind::Gre
    }
}

/// What the outer headers of a received tunnel packet said: the tunnel
/// fields of the flow key of the packet inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunnelMeta {
    /// VNI or GRE key (`tun_id`).
    pub tun_id: u64,
    /// Outer IPv4 source (zero over IPv6).
    pub src: u32,
    /// Outer IPv4 destination (zero over IPv6).
    pub dst: u32,
    /// Outer IPv6 source (zero over IPv4).
    pub ipv6_src: [u8; 16],
    /// Outer IPv6 destination (zero over IPv4).
    pub ipv6_dst: [u8; 16],
    /// Outer TOS (IPv6: traffic class).
    pub tos: u8,
    /// Outer TTL (IPv6: hop limit).
    pub ttl: u8,
    /// `crate::key::TUN_FLAG_*` bits.
    pub flags: u16,
    /// The `tun_metadata` fields the Geneve options filled.
    pub opts: tlv::Fields,
}

impl TunnelMeta {
    /// The metadata a flow key holds (none when every field is zero).
    pub fn of_key(k: &crate::FlowKey) -> Self {
        TunnelMeta {
            tun_id: k.tunnel_id,
            src: k.tun_src,
            dst: k.tun_dst,
            ipv6_src: k.tun_ipv6_src,
            ipv6_dst: k.tun_ipv6_dst,
            tos: k.tun_tos,
            ttl: k.tun_ttl,
            flags: k.tun_flags,
            opts: tlv::Fields {
                present: k.tun_metadata_present,
                values: k.tun_metadata,
            },
        }
    }

    /// The metadata a flow key holds, or `None` when it holds none (every
    /// tunnel word zero: what extraction leaves).
    #[inline]
    pub fn in_key(k: &crate::FlowKey) -> Option<Self> {
        let any = k.words()[crate::key::TUN_WORDS]
            .iter()
            .fold(0, |a, w| a | w);
        (any != 0).then(|| TunnelMeta::of_key(k))
    }

    /// Writes the metadata into a flow key's tunnel fields, as whole
    /// words (a key is read word by word right after: narrow stores there
    /// would make those reads wait).
    #[inline]
    pub fn write_key(&self, k: &mut crate::FlowKey) {
        let t = crate::FlowKey {
            tun_src: self.src,
            tun_dst: self.dst,
            tun_tos: self.tos,
            tun_ttl: self.ttl,
            tun_flags: self.flags,
            tun_ipv6_src: self.ipv6_src,
            tun_ipv6_dst: self.ipv6_dst,
            tun_metadata_present: self.opts.present,
            tun_metadata: self.opts.values,
            tun_family: if self.is_ipv6() {
                6
            } else if self.dst != 0 {
                4
            } else {
                0
            },
            tunnel_id: self.tun_id,
            ..Default::default()
        };
        let r = crate::key::TUN_WORDS;
        k.words_mut()[r.clone()].copy_from_slice(&t.words()[r]);
    }

    /// Whether the outer header was IPv6.
    #[inline]
    pub fn is_ipv6(&self) -> bool {
        self.src == 0 && self.dst == 0 && (self.ipv6_src != [0; 16] || self.ipv6_dst != [0; 16])
    }

    /// The outer source address.
    #[inline]
    pub fn src_ip(&self) -> std::net::IpAddr {
        if self.is_ipv6() {
            self.ipv6_src.into()
        } else {
            self.src.to_be_bytes().into()
        }
    }

    /// The outer destination address.
    #[inline]
    pub fn dst_ip(&self) -> std::net::IpAddr {
        if self.is_ipv6() {
            self.ipv6_dst.into()
        } else {
            self.dst.to_be_bytes().into()
        }
    }
}
