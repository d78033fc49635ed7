//! The flow key: one fixed-size, 8-byte-aligned record of every matchable
//! field of a packet, plus its hash.
//!
//! Layout follows the order packets are parsed in and keeps fields that
//! are masked together in the same 64-bit word, so masking, comparing and
//! hashing work on the datapath words with no per-field branching. Field values are
//! host-order integers; a field the packet does not carry (or that could
//! not be read, e.g. in a truncated header) is zero, as in Open vSwitch.

use bytemuck::{Pod, Zeroable};

/// Number of 64-bit words in a [`FlowKey`].
pub const KEY_WORDS: usize = 44;

/// Words a packet's key can have bits in: all but the pipeline
/// registers ([`REG_WORDS`]), which only translation writes. The
/// datapath's hashes read no further.
pub const DP_WORDS: usize = REG_WORDS.start;

/// Key words that hold the pipeline registers `reg0`..`reg15` (also
/// named as `xreg0`..`xreg7` and `xxreg0`..`xxreg3`): state a translation
/// carries between tables and across recirculations, as the OpenFlow
/// metadata. Zero in every packet's key and outside every megaflow's
/// mask, as metadata is; only rules match them.
pub const REG_WORDS: std::ops::Range<usize> = 36..KEY_WORDS;

/// Number of 32-bit registers (OVS's `FLOW_N_REGS`).
pub const N_REGS: usize = 16;

/// Words up to and including L4 ports. The words after them (IPv6
/// addresses and label, ND fields) are zero in every IPv4 and ARP key: a
/// *short* key, which compares and hashes on these words alone.
pub const SHORT_KEY_WORDS: usize = 6;

/// The key word that holds `recirc_id` (see [`FlowKey::hash_tunnel`]).
pub const RECIRC_WORD: usize = std::mem::offset_of!(FlowKey, recirc_id) / 8;

/// `tun_flags`: an OAM frame (Geneve's O bit; OVS's `FLOW_TNL_F_OAM`, the
/// one flag the `tun_flags` field shows).
pub const TUN_FLAG_OAM: u16 = 1;
/// `tun_flags`: the outer header had a don't-fragment bit (OVS's
/// `FLOW_TNL_F_DONT_FRAGMENT`).
pub const TUN_FLAG_DONT_FRAGMENT: u16 = 1 << 1;
/// `tun_flags`: the outer header had a checksum (`FLOW_TNL_F_CSUM`).
pub const TUN_FLAG_CSUM: u16 = 1 << 2;
/// `tun_flags`: the outer header had a key (`FLOW_TNL_F_KEY`).
pub const TUN_FLAG_KEY: u16 = 1 << 3;

/// Key words that hold tunnel metadata (`tunnel_id`, `tun_src`/`tun_dst`,
/// the flags, TOS and TTL, `tun_ipv6_src`/`tun_ipv6_dst`, the Geneve
/// options' `tun_metadata` fields): zero in a packet that came from no
/// tunnel.
pub const TUN_WORDS: std::ops::Range<usize> = 15..26;

/// Key words that hold a packet's connection tracking state (`ct_state`,
/// `ct_zone`, `ct_mark`, `ct_label`, the original direction's tuple
/// `ct_nw_proto`, `ct_tp_src`/`ct_tp_dst`, `ct_nw_src`/`ct_nw_dst`,
/// `ct_ipv6_src`/`ct_ipv6_dst`), which a `ct` action gives the
/// packet for its next pass: zero in a packet no `ct` action has seen.
pub const CT_WORDS: std::ops::Range<usize> = 26..DP_WORDS;

/// The words after the metadata word that a packet's key can have bits
/// in: the tunnel metadata and the connection tracking state. They are
/// the last words of a packet's key.
pub const TAIL_WORDS: std::ops::Range<usize> = TUN_WORDS.start..DP_WORDS;

/// Key words that are zero but for packets from a tunnel over IPv6 or
/// with options, and packets a `ct` action has seen: the wide tunnel
/// words and the connection tracking state. Outside the mask of every
/// megaflow that does not read them, a key's hash skips them when they
/// are zero.
pub const WIDE_WORDS: std::ops::Range<usize> = TUN_WIDE_WORDS.start..DP_WORDS;

/// `ct_state`: the packet starts a new connection.
pub const CS_NEW: u8 = 0x01;
/// `ct_state`: the packet is part of an established connection.
pub const CS_ESTABLISHED: u8 = 0x02;
/// `ct_state`: the packet relates to an established connection (an ICMP
/// error quoting it).
pub const CS_RELATED: u8 = 0x04;
/// `ct_state`: the packet goes in the reply direction.
pub const CS_REPLY_DIR: u8 = 0x08;
/// `ct_state`: the packet is invalid (outside the TCP window, a bad
/// header, a connection that cannot be made).
pub const CS_INVALID: u8 = 0x10;
/// `ct_state`: the packet has been through connection tracking.
pub const CS_TRACKED: u8 = 0x20;
/// `ct_state`: source NAT applied.
pub const CS_SRC_NAT: u8 = 0x40;
/// `ct_state`: destination NAT applied.
pub const CS_DST_NAT: u8 = 0x80;

/// Key words that hold an IPv6 tunnel's outer addresses and the Geneve
/// options' fields: zero but for packets that came out of a tunnel over
/// IPv6 or with options, and outside the mask of every megaflow that
/// does not read them (see [`FlowKey::hash64_masked`]).
pub const TUN_WIDE_WORDS: std::ops::Range<usize> = 18..TUN_WORDS.end;

/// `nw_frag`: the packet is a fragment.
pub const FRAG_ANY: u8 = 1;
/// `nw_frag`: the packet is a fragment other than the first.
pub const FRAG_LATER: u8 = 2;

/// Every matchable field of a packet. Also used as a mask (same layout, a
/// set bit means "this bit matters").
#[repr(C, align(8))]
#[derive(Clone, Copy, Eq, Default, Pod, Zeroable)]
pub struct FlowKey {
    /// OpenFlow input port.
    pub in_port: u32,
    /// EtherType after any VLAN tags (0x05ff for 802.3 frames without SNAP).
    pub dl_type: u16,
    /// IP protocol, or the low 8 bits of the ARP opcode.
    pub nw_proto: u8,
    /// IP TOS / traffic class byte (DSCP << 2 | ECN).
    pub nw_tos: u8,
    /// Ethernet destination.
    pub dl_dst: [u8; 6],
    /// Ethernet source.
    pub dl_src: [u8; 6],
    /// VLAN TCIs, outermost first; bit 0x1000 marks "tag present".
    pub vlan_tci: [u16; 2],
    /// VLAN TPIDs, outermost first.
    pub vlan_tpid: [u16; 2],
    /// IP TTL / hop limit.
    pub nw_ttl: u8,
    /// Fragment bits: [`FRAG_ANY`], [`FRAG_LATER`].
    pub nw_frag: u8,
    /// TCP flags (12 bits).
    pub tcp_flags: u16,
    /// IPv4 source, or ARP sender protocol address.
    pub nw_src: u32,
    /// IPv4 destination, or ARP target protocol address.
    pub nw_dst: u32,
    /// L4 source port, or ICMP type.
    pub tp_src: u16,
    /// L4 destination port, or ICMP code.
    pub tp_dst: u16,
    /// IPv6 flow label (low 20 bits) and, above it, the `ipv6_exthdr`
    /// flags of its extension headers (9 bits). In an MPLS packet (`dl_type` 0x8847 or 0x8848),
    /// the outermost label stack entry (label, TC, BoS, TTL, as on the
    /// wire); in a PBB packet (0x88e7), the I-TAG's service instance ID
    /// (24 bits). The prerequisites on `dl_type` keep the three apart, as
    /// ARP's fields share `nw_src`/`nw_dst`.
    pub ipv6_label: u32,
    /// IPv6 source.
    pub ipv6_src: [u8; 16],
    /// IPv6 destination.
    pub ipv6_dst: [u8; 16],
    /// IPv6 ND target.
    pub nd_target: [u8; 16],
    /// ARP sender hardware address, or ND source link-layer address.
    pub arp_sha: [u8; 6],
    /// ARP target hardware address, or ND target link-layer address.
    pub arp_tha: [u8; 6],
    /// Which pass through the datapath this is: 0 for a packet as it
    /// arrived, otherwise the id of the translation state a `recirc`
    /// action froze (the packet re-parsed after, say, `pop_mpls`). Every
    /// decision depends on it.
    pub recirc_id: u32,
    /// OpenFlow metadata: pipeline state that `write_metadata` sets
    /// between tables and rules match. Zero in every packet's key (so a
    /// megaflow never needs its bits: the tables' use of it follows from
    /// the decisions before it).
    pub metadata: u64,
    /// OpenFlow's `tunnel_id` (OVS's `tun_id`): the VNI or GRE key a
    /// packet came out of a tunnel with (zero for a packet that did not),
    /// also written by `set_field` between tables and read by an output to
    /// a tunnel port whose key is `flow`.
    pub tunnel_id: u64,
    /// The outer IPv4 source of a packet that came out of a tunnel
    /// (`tun_src`), zero otherwise.
    pub tun_src: u32,
    /// The outer IPv4 destination (`tun_dst`).
    pub tun_dst: u32,
    /// Tunnel flags (`tun_flags`): [`TUN_FLAG_CSUM`] when the outer
    /// header carried a checksum, [`TUN_FLAG_KEY`] when it carried a key,
    /// [`TUN_FLAG_DONT_FRAGMENT`] when the outer IP header said so.
    pub tun_flags: u16,
    /// The outer IP TOS byte (`tun_tos`), or IPv6 traffic class.
    pub tun_tos: u8,
    /// The outer IP TTL (`tun_ttl`), or IPv6 hop limit.
    pub tun_ttl: u8,
    /// Which IP version the tunnel a packet came out of ran over (4 or
    /// 6; 0: no tunnel). Not a field of flow files: the switch's own
    /// record of whether a packet came from a tunnel, read by every
    /// decision on a switch with tunnels without reading the addresses.
    pub tun_family: u8,
    /// Which `tun_metadata` fields the packet has (bit N:
    /// `tun_metadataN`), from Geneve options or `set_field`.
    pub tun_metadata_present: u8,
    /// Zero: room for more tunnel metadata.
    pub tun_pad: [u8; 2],
    /// The outer IPv6 source of a packet that came out of a tunnel over
    /// IPv6 (`tun_ipv6_src`), zero otherwise.
    pub tun_ipv6_src: [u8; 16],
    /// The outer IPv6 destination (`tun_ipv6_dst`).
    pub tun_ipv6_dst: [u8; 16],
    /// `tun_metadata0` to `tun_metadata3`: Geneve options' data, as the
    /// TLV map says ([`crate::tunnel::tlv`]).
    pub tun_metadata: [u64; crate::tunnel::tlv::SLOTS],
    /// Connection tracking state (`ct_state`): the `CS_*` bits a `ct`
    /// action gave the packet, zero before one.
    pub ct_state: u8,
    /// Zero: room for more connection tracking state.
    pub ct_pad: u8,
    /// The conntrack zone the packet was tracked in (`ct_zone`).
    pub ct_zone: u16,
    /// The mark of the packet's connection (`ct_mark`).
    pub ct_mark: u32,
    /// The label of the packet's connection (`ct_label`, 128 bits): low
    /// 64 bits first.
    pub ct_label: [u64; 2],
    /// The protocol of the connection's original direction
    /// (`ct_nw_proto`).
    pub ct_nw_proto: u8,
    /// Zero.
    pub ct_pad2: u8,
    /// Its source port (`ct_tp_src`; ICMP: the type).
    pub ct_tp_src: u16,
    /// Its destination port (`ct_tp_dst`; ICMP: the code).
    pub ct_tp_dst: u16,
    /// `actset_output`: the output port of the OpenFlow action set, as
    /// its 16-bit number (OpenFlow 1.0's: the reserved ports from
    /// `0xfff7`, `OFPP_UNSET`, up). Pipeline state the translation keeps
    /// for its lookups; zero in every packet's key and outside every
    /// megaflow's mask.
    pub actset_output: u16,
    /// Its IPv4 source (`ct_nw_src`).
    pub ct_nw_src: u32,
    /// Its IPv4 destination (`ct_nw_dst`).
    pub ct_nw_dst: u32,
    /// Its IPv6 source (`ct_ipv6_src`).
    pub ct_ipv6_src: [u8; 16],
    /// Its IPv6 destination (`ct_ipv6_dst`).
    pub ct_ipv6_dst: [u8; 16],
    /// The conjunction a classifier lookup found complete (`conj_id`):
    /// set only for the lookup of its `conj_id=N` rule, zero in every
    /// packet's key.
    pub conj_id: u32,
    /// `pkt_mark`: a mark the pipeline sets and matches (OVS's skb mark;
    /// zero in every packet's key, as a userspace port gives it).
    pub pkt_mark: u32,
    /// The registers `reg0`..`reg15` (see [`REG_WORDS`]): `xregN` is
    /// `reg(2N)` (high half) and `reg(2N+1)`, `xxregN` is `reg(4N)`
    /// (highest) to `reg(4N+3)`, as in Open vSwitch.
    pub regs: [u32; N_REGS],
}

const _: () = assert!(std::mem::size_of::<FlowKey>() == KEY_WORDS * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, tunnel_id) == TUN_WORDS.start * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, metadata) == (TUN_WORDS.start - 1) * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, tun_ipv6_src) == TUN_WIDE_WORDS.start * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, regs) == REG_WORDS.start * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, ct_state) == CT_WORDS.start * 8);
const _: () = assert!(std::mem::offset_of!(FlowKey, tun_metadata) + 32 == TUN_WORDS.end * 8);

impl PartialEq for FlowKey {
    /// Word by word, without branches (the derived comparison calls
    /// `memcmp` per array field; this is on every cache hit).
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.words(), other.words());
        let mut diff = 0u64;
        for i in 0..KEY_WORDS {
            diff |= a[i] ^ b[i];
        }
        diff == 0
    }
}

impl std::hash::Hash for FlowKey {
    /// Hashes the words [`PartialEq`] compares.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.words().hash(state);
    }
}

impl FlowKey {
    /// The key as 64-bit words.
    #[inline]
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        bytemuck::cast_ref(self)
    }

    /// The key as 64-bit words, writable.
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64; KEY_WORDS] {
        bytemuck::cast_mut(self)
    }

    /// The mask of an exact match of packets: every bit a packet's key
    /// can have (the registers, never in a packet's key, left out: an
    /// exact megaflow is a megaflow, and megaflows never read them).
    pub fn exact_packet_mask() -> Self {
        let mut k = FlowKey::default();
        k.words_mut()[..DP_WORDS].fill(u64::MAX);
        k
    }

    /// A key with every bit set: the mask of an exact match.
    pub fn all_ones() -> Self {
        let mut k = FlowKey::default();
        k.words_mut().fill(u64::MAX);
        k
    }

    /// `self & mask`, word by word.
    #[inline]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = *self;
        for (o, m) in out.words_mut().iter_mut().zip(mask.words()) {
            *o &= m;
        }
        out
    }

    /// Whether `self & mask == value` (where `value` is already masked).
    #[inline]
    pub fn matches(&self, value: &FlowKey, mask: &FlowKey) -> bool {
        if mask.reads_wide() {
            self.matches_n::<KEY_WORDS>(value, mask)
        } else {
            self.matches_n::<{ TUN_WIDE_WORDS.start }>(value, mask)
        }
    }

    /// [`FlowKey::matches`] for a megaflow's mask, which never reads the
    /// registers ([`REG_WORDS`]): the words past the narrow ones are
    /// compared only up to [`DP_WORDS`] (a mask with connection tracking
    /// state compared 8 words of registers and looked at them first).
    #[inline]
    pub fn matches_dp(&self, value: &FlowKey, mask: &FlowKey) -> bool {
        debug_assert!(mask.words()[REG_WORDS].iter().all(|&w| w == 0));
        let m = mask.words();
        if m[TUN_WIDE_WORDS.start..DP_WORDS]
            .iter()
            .fold(0, |a, &w| a | w)
            != 0
        {
            self.matches_n::<DP_WORDS>(value, mask)
        } else {
            self.matches_n::<{ TUN_WIDE_WORDS.start }>(value, mask)
        }
    }

    /// Whether a mask has bits past the narrow words: in the wide words
    /// ([`WIDE_WORDS`]: wide tunnel fields, connection tracking state) or
    /// the registers (which rules may match, megaflows never).
    #[inline(always)]
    pub fn reads_wide(&self) -> bool {
        let m = self.words();
        m[TUN_WIDE_WORDS.start..].iter().fold(0, |a, &w| a | w) != 0
    }

    /// Whether a mask has bits in the IPv6 tunnel addresses or the Geneve
    /// option fields: no megaflow but those that read them does, so the
    /// others hash and compare without those words (a branch each
    /// subtable takes the same way every time).
    #[inline(always)]
    pub fn reads_tun_wide(&self) -> bool {
        let m = self.words();
        m[TUN_WIDE_WORDS].iter().fold(0, |a, &w| a | w) != 0
    }

    #[inline(always)]
    fn matches_n<const N: usize>(&self, value: &FlowKey, mask: &FlowKey) -> bool {
        let (k, v, m) = (self.words(), value.words(), mask.words());
        let mut diff = 0u64;
        for i in 0..N {
            diff |= (k[i] & m[i]) ^ v[i];
        }
        diff == 0
    }

    /// ORs `other` into `self` (used to widen a mask of consulted bits).
    #[inline]
    pub fn or_assign(&mut self, other: &FlowKey) {
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a |= b;
        }
    }

    /// ORs `other & mask` into `self`, word by word (no copy of either).
    #[inline]
    pub fn or_assign_masked(&mut self, other: &FlowKey, mask: &FlowKey) {
        for ((a, b), m) in self
            .words_mut()
            .iter_mut()
            .zip(other.words())
            .zip(mask.words())
        {
            *a |= b & m;
        }
    }

    /// Whether every bit is zero.
    pub fn is_zero(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }

    /// Whether the packet is IPv4.
    #[inline]
    pub fn is_ipv4(&self) -> bool {
        self.dl_type == crate::wire::ethernet::ethertype::IPV4
    }

    /// Whether the packet is IPv6.
    #[inline]
    pub fn is_ipv6(&self) -> bool {
        self.dl_type == crate::wire::ethernet::ethertype::IPV6
    }

    /// Whether the packet is IPv4 or IPv6.
    #[inline]
    pub fn is_ip(&self) -> bool {
        self.is_ipv4() || self.is_ipv6()
    }

    /// Whether the packet is ARP or RARP.
    #[inline]
    pub fn is_arp(&self) -> bool {
        use crate::wire::ethernet::ethertype::{ARP, RARP};
        self.dl_type == ARP || self.dl_type == RARP
    }

    /// Whether every word past the first [`SHORT_KEY_WORDS`] is zero (as
    /// in IPv4 and ARP keys).
    #[inline]
    pub fn is_short(&self) -> bool {
        self.words()[SHORT_KEY_WORDS..]
            .iter()
            .fold(0, |a, &w| a | w)
            == 0
    }

    /// Equality of two short keys (see [`FlowKey::is_short`]): only their
    /// first [`SHORT_KEY_WORDS`] can differ.
    #[inline]
    pub fn eq_short(&self, other: &Self) -> bool {
        debug_assert!(self.is_short() && other.is_short());
        let (a, b) = (self.words(), other.words());
        let mut diff = 0u64;
        for i in 0..SHORT_KEY_WORDS {
            diff |= a[i] ^ b[i];
        }
        diff == 0
    }

    /// [`FlowKey::hash`] of a key known to be short, without checking
    /// the zero words (the same value).
    #[inline]
    pub fn hash_short(&self) -> u32 {
        debug_assert!(self.is_short());
        crate::hash::hash_short_key_words(self.words())
    }

    /// [`FlowKey::hash`] of a key out of an IPv4 tunnel without options
    /// whose inner headers are short (its only other words with bits: the
    /// pass id's, the metadata and the narrow tunnel words), without
    /// reading the zero words (the same value).
    #[inline]
    pub fn hash_tunnel(&self) -> u32 {
        debug_assert!({
            let w = self.words();
            let narrow = |i: usize| (TUN_WORDS.start - 1..TUN_WIDE_WORDS.start).contains(&i);
            let others_zero = (SHORT_KEY_WORDS..DP_WORDS)
                .filter(|&i| i != RECIRC_WORD && !narrow(i))
                .all(|i| w[i] == 0);
            others_zero && self.tun_family == 4
        });
        crate::hash::hash_tunnel_key_words(self.words())
    }

    /// The hash of the whole key.
    #[inline]
    pub fn hash(&self) -> u32 {
        crate::hash::hash_key_words(self.words())
    }

    /// A 64-bit hash of `self & mask` (for hash tables that use the high
    /// bits as tags). The registers are left out: megaflow masks, the
    /// tables this is for, never have their bits.
    #[inline]
    pub fn hash64_masked(&self, mask: &FlowKey) -> u64 {
        use crate::hash::hash64_key_masked;
        debug_assert!(
            mask.regs == [0; N_REGS],
            "a megaflow mask never reads registers"
        );
        if mask.reads_wide() {
            hash64_key_masked::<DP_WORDS>(self.words(), mask.words())
        } else {
            hash64_key_masked::<{ TUN_WIDE_WORDS.start }>(self.words(), mask.words())
        }
    }

    /// The hash of `self & mask`, without building the masked key.
    #[inline]
    pub fn hash_masked(&self, mask: &FlowKey) -> u32 {
        let mut w = [0u64; KEY_WORDS];
        for (i, o) in w.iter_mut().enumerate() {
            *o = self.words()[i] & mask.words()[i];
        }
        crate::hash::hash_key_words(&w)
    }
}

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowKey")
            .field("in_port", &self.in_port)
            .field("dl_src", &crate::wire::ethernet::fmt_mac(&self.dl_src))
            .field("dl_dst", &crate::wire::ethernet::fmt_mac(&self.dl_dst))
            .field("dl_type", &format_args!("{:#06x}", self.dl_type))
            .field("vlan_tci", &self.vlan_tci)
            .field("nw_src", &crate::wire::ipv4::fmt_ipv4(self.nw_src))
            .field("nw_dst", &crate::wire::ipv4::fmt_ipv4(self.nw_dst))
            .field("nw_proto", &self.nw_proto)
            .field("nw_tos", &self.nw_tos)
            .field("nw_ttl", &self.nw_ttl)
            .field("nw_frag", &self.nw_frag)
            .field("tp_src", &self.tp_src)
            .field("tp_dst", &self.tp_dst)
            .field("tcp_flags", &self.tcp_flags)
            .field("ipv6_src", &crate::wire::ipv6::fmt_ipv6(&self.ipv6_src))
            .field("ipv6_dst", &crate::wire::ipv6::fmt_ipv6(&self.ipv6_dst))
            .field("tunnel_id", &self.tunnel_id)
            .field("tun_src", &crate::wire::ipv4::fmt_ipv4(self.tun_src))
            .field("tun_dst", &crate::wire::ipv4::fmt_ipv4(self.tun_dst))
            .field(
                "tun_ipv6_src",
                &crate::wire::ipv6::fmt_ipv6(&self.tun_ipv6_src),
            )
            .field(
                "tun_ipv6_dst",
                &crate::wire::ipv6::fmt_ipv6(&self.tun_ipv6_dst),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_and_match() {
        let mut k = FlowKey {
            nw_dst: 0x0a00_0105,
            tp_dst: 80,
            ..Default::default()
        };
        let mask = FlowKey {
            nw_dst: 0xffff_ff00,
            ..Default::default()
        };
        let value = k.masked(&mask);
        assert_eq!(value.nw_dst, 0x0a00_0100);
        assert_eq!(value.tp_dst, 0);
        assert!(k.matches(&value, &mask));
        k.nw_dst = 0x0a00_0205;
        assert!(!k.matches(&value, &mask));
        assert_eq!(k.hash_masked(&mask), k.masked(&mask).hash());
    }

    proptest::proptest! {
        /// A megaflow's match (no register bits in its mask) answers as
        /// the general one, whichever words the mask and the key differ in.
        #[test]
        fn matches_dp_is_matches_without_registers(
            k in proptest::collection::vec(proptest::prelude::any::<u64>(), KEY_WORDS),
            m in proptest::collection::vec(proptest::prelude::any::<u64>(), KEY_WORDS),
            narrow in proptest::prelude::any::<bool>(),
            flip in 0..KEY_WORDS,
            bit in 0..64u32,
        ) {
            let mut key = FlowKey::default();
            let mut mask = FlowKey::default();
            key.words_mut().copy_from_slice(&k);
            mask.words_mut().copy_from_slice(&m);
            mask.words_mut()[REG_WORDS].fill(0);
            if narrow {
                mask.words_mut()[TUN_WIDE_WORDS.start..].fill(0);
            }
            let value = key.masked(&mask);
            proptest::prop_assert!(key.matches_dp(&value, &mask));
            let mut other = key;
            other.words_mut()[flip] ^= 1 << bit;
            proptest::prop_assert_eq!(other.matches_dp(&value, &mask), other.matches(&value, &mask));
        }
    }

    #[test]
    fn all_ones_is_every_bit() {
        let m = FlowKey::all_ones();
        assert_eq!(m.recirc_id, u32::MAX);
        assert_eq!(m.in_port, u32::MAX);
        assert_eq!(m.arp_tha, [0xff; 6]);
    }
}
