//! What a `ct` action tells a packet ([`CtResult`]): its state, zone,
//! mark, label and its connection's original tuple, and how they go into
//! and come out of a flow key's connection tracking words.

use sluice_packet::key::{FlowKey, FRAG_LATER};
use sluice_packet::wire::l4::proto;

use crate::tuple::Tuple;

/// What a `ct` action tells the packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtResult {
    /// `ct_state` (0: not IP, left untracked).
    pub state: u8,
    /// `ct_zone`.
    pub zone: u16,
    /// `ct_mark`.
    pub mark: u32,
    /// `ct_label`, low 64 bits first (as the key holds it: the result
    /// stays 8-byte aligned and small, copied with every recirculated
    /// packet).
    pub label: [u64; 2],
    /// The original direction's tuple of the packet's connection (of the
    /// packet itself when it has none).
    pub tuple: CtTuple,
    /// The tracker had no connection for the packet (it may have
    /// committed one for it just now): the first packet of a connection,
    /// or one never committed. Not a `ct_*` field; the datapath leaves
    /// such a packet's next pass out of its exact-match and signature
    /// caches (nothing of this connection's can be in them yet).
    pub unseen: bool,
}

/// A connection's original direction as the `ct_nw_src`... fields show
/// it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtTuple {
    /// `ct_nw_proto`.
    pub proto: u8,
    /// `ct_tp_src` (ICMP: the type).
    pub tp_src: u16,
    /// `ct_tp_dst` (ICMP: the code).
    pub tp_dst: u16,
    /// `ct_nw_src` (IPv4).
    pub nw_src: u32,
    /// `ct_nw_dst` (IPv4).
    pub nw_dst: u32,
    /// `ct_ipv6_src` (IPv6).
    pub ipv6_src: [u8; 16],
    /// `ct_ipv6_dst` (IPv6).
    pub ipv6_dst: [u8; 16],
}

impl CtTuple {
    /// No tuple, as `Default` gives it (a constant: see
    /// [`CtResult::NONE`]).
    pub const NONE: CtTuple = CtTuple {
        proto: 0,
        tp_src: 0,
        tp_dst: 0,
        nw_src: 0,
        nw_dst: 0,
        ipv6_src: [0; 16],
        ipv6_dst: [0; 16],
    };

    /// Sets it from a connection key, as OVS's `write_ct_md` fills it:
    /// ports, or for ICMP the type (a query's request type) and code
    /// (0). Field by field where it is kept: built in a temporary, the
    /// copy out read the addresses whole right after narrower stores
    /// into them, and waited for those.
    pub(crate) fn set_of(&mut self, t: &Tuple) {
        let (tp_src, tp_dst) = match t.proto {
            proto::ICMP | proto::ICMPV6 => (t.dport, 0),
            proto::TCP | proto::UDP | proto::SCTP => (t.sport, t.dport),
            _ => (0, 0),
        };
        self.proto = t.proto;
        self.tp_src = tp_src;
        self.tp_dst = tp_dst;
        if t.v6 {
            self.nw_src = 0;
            self.nw_dst = 0;
            self.ipv6_src = t.src;
            self.ipv6_dst = t.dst;
        } else {
            self.nw_src = u32::from_be_bytes(t.src[..4].try_into().expect("4 bytes"));
            self.nw_dst = u32::from_be_bytes(t.dst[..4].try_into().expect("4 bytes"));
            self.ipv6_src = [0; 16];
            self.ipv6_dst = [0; 16];
        }
    }
}

impl CtResult {
    /// No connection tracking state (`ct_clear`), as `Default` gives it;
    /// a constant, so that clearing copies it rather than building it.
    pub const NONE: CtResult = CtResult {
        state: 0,
        zone: 0,
        mark: 0,
        label: [0; 2],
        tuple: CtTuple::NONE,
        unseen: false,
    };

    /// The state a flow key holds.
    pub fn of_key(k: &FlowKey) -> CtResult {
        CtResult {
            state: k.ct_state,
            zone: k.ct_zone,
            mark: k.ct_mark,
            label: k.ct_label,
            tuple: CtTuple {
                proto: k.ct_nw_proto,
                tp_src: k.ct_tp_src,
                tp_dst: k.ct_tp_dst,
                nw_src: k.ct_nw_src,
                nw_dst: k.ct_nw_dst,
                ipv6_src: k.ct_ipv6_src,
                ipv6_dst: k.ct_ipv6_dst,
            },
            unseen: false,
        }
    }

    /// `ct_label` as one number.
    pub fn label128(&self) -> u128 {
        u128::from(self.label[1]) << 64 | u128::from(self.label[0])
    }

    /// Writes the result into a flow key's connection tracking fields
    /// (a key extracted from the packet: as OVS's miniflow_extract, a
    /// later fragment, whose own ports are not parsed, keys no
    /// `ct_tp_src`/`ct_tp_dst` either).
    pub fn write_key(&self, k: &mut FlowKey) {
        k.ct_state = self.state;
        k.ct_zone = self.zone;
        k.ct_mark = self.mark;
        k.ct_label = self.label;
        let t = &self.tuple;
        k.ct_nw_proto = t.proto;
        let later = k.nw_frag & FRAG_LATER != 0;
        k.ct_tp_src = if later { 0 } else { t.tp_src };
        k.ct_tp_dst = if later { 0 } else { t.tp_dst };
        k.ct_nw_src = t.nw_src;
        k.ct_nw_dst = t.nw_dst;
        k.ct_ipv6_src = t.ipv6_src;
        k.ct_ipv6_dst = t.ipv6_dst;
    }
}
