//! Open vSwitch 3.1's hashes of a flow, bit for bit, where the value
//! decides what a packet does: the `dp_hash` a select group picks its
//! bucket by (`lib/flow.c`'s `miniflow_hash_5tuple`, as the userspace
//! datapath takes it for `OVS_HASH_ALG_L4`, and
//! `flow_hash_symmetric_l3l4` for `OVS_HASH_ALG_SYM_L4`), so the same
//! packet reaches the same backend of an OVN load balancer through
//! either switch.
//!
//! OVS stores addresses and ports in network byte order and reads them as
//! native (little-endian) words into the hash; the words below are made
//! the same way. The hash steps and the symmetric hashes are
//! [`crate::multipath`]'s (`lib/hash.h`'s Murmur3-based ones: the build
//! without SSE 4.2, as Debian's amd64 package is; its CRC32 variant gives
//! other values).

use sluice_packet::key::FlowKey;
use sluice_packet::wire::ethernet::ethertype;
use sluice_packet::wire::l4::proto;

use crate::multipath::{flow_hash, hash_2words, hash_add, hash_add64, hash_finish, HashFields};

/// `OVS_HASH_ALG_L4`: the 5-tuple, as the datapath's RSS hash.
pub const ALG_L4: u32 = 0;
/// `OVS_HASH_ALG_SYM_L4`: addresses and ports combined so that both
/// directions hash alike.
pub const ALG_SYM_L4: u32 = 1;

/// `hash_int(x, basis)` (`hash_2words`).
pub fn hash_int(x: u32, basis: u32) -> u32 {
    hash_2words(x, basis)
}

/// An address as OVS's word of it (network order read natively).
fn be32_word(v: u32) -> u32 {
    u32::from_le_bytes(v.to_be_bytes())
}

fn addr64(a: &[u8; 16], half: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&a[half * 8..half * 8 + 8]);
    u64::from_le_bytes(w)
}

/// `miniflow_hash_5tuple(flow, basis)`.
pub fn hash_5tuple(f: &FlowKey, basis: u32) -> u32 {
    let mut hash = basis;
    'out: {
        if f.dl_type == ethertype::IPV6 {
            for a in [&f.ipv6_src, &f.ipv6_dst] {
                hash = hash_add64(hash, addr64(a, 0));
                hash = hash_add64(hash, addr64(a, 1));
            }
        } else if f.dl_type == ethertype::IPV4 || f.dl_type == ethertype::ARP {
            hash = hash_add(hash, be32_word(f.nw_src));
            hash = hash_add(hash, be32_word(f.nw_dst));
        } else {
            break 'out;
        }
        hash = hash_add(hash, u32::from(f.nw_proto));
        if !matches!(
            f.nw_proto,
            proto::TCP | proto::UDP | proto::SCTP | proto::ICMP | proto::ICMPV6
        ) || f.dl_type == ethertype::ARP
        {
            break 'out;
        }
        // Both ports at once: tp_src then tp_dst in network order.
        let [s0, s1] = f.tp_src.to_be_bytes();
        let [d0, d1] = f.tp_dst.to_be_bytes();
        hash = hash_add(hash, u32::from_le_bytes([s0, s1, d0, d1]));
    }
    hash_finish(hash, 42)
}

/// The `dp_hash` OVS's userspace datapath gives a packet of key `f` for
/// a `hash(alg, basis)` action: for L4 the packet's RSS hash (the
/// 5-tuple, basis 0) mixed with the basis, for SYM_L4 the symmetric
/// hash.
pub fn dp_hash(f: &FlowKey, alg: u32, basis: u32) -> u32 {
    if alg == ALG_SYM_L4 {
        flow_hash(HashFields::SymmetricL3L4, f, basis)
    } else {
        hash_int(hash_5tuple(f, 0), basis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> FlowKey {
        FlowKey {
            dl_type: ethertype::IPV4,
            nw_proto: proto::TCP,
            nw_src: u32::from_be_bytes(src),
            nw_dst: u32::from_be_bytes(dst),
            tp_src: sp,
            tp_dst: dp,
            ..FlowKey::default()
        }
    }

    #[test]
    fn hash_int_takes_its_basis() {
        assert_eq!(hash_int(1, 0), hash_int(1, 0));
        assert_ne!(hash_int(1, 0), hash_int(1, 1));
    }

    #[test]
    fn symmetric_hash_is_the_same_both_ways_and_the_5tuple_is_not() {
        let a = tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80);
        let b = tcp([10, 0, 0, 2], [10, 0, 0, 1], 80, 1234);
        assert_eq!(dp_hash(&a, ALG_SYM_L4, 0), dp_hash(&b, ALG_SYM_L4, 0));
        assert_ne!(dp_hash(&a, ALG_L4, 0), dp_hash(&b, ALG_L4, 0));
        assert_ne!(dp_hash(&a, ALG_L4, 0), dp_hash(&a, ALG_L4, 5));
    }

    #[test]
    fn the_symmetric_hash_leaves_udp_ports_and_fragments_ports_out() {
        let mut a = tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53);
        a.nw_proto = proto::UDP;
        let mut b = a;
        b.tp_src = 999;
        assert_eq!(dp_hash(&a, ALG_SYM_L4, 0), dp_hash(&b, ALG_SYM_L4, 0));
        assert_ne!(dp_hash(&a, ALG_L4, 0), dp_hash(&b, ALG_L4, 0));
        let t = tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80);
        let mut frag = t;
        frag.nw_frag = sluice_packet::key::FRAG_ANY;
        frag.tp_src = 1;
        let mut frag2 = frag;
        frag2.tp_src = 2;
        assert_eq!(
            dp_hash(&frag, ALG_SYM_L4, 0),
            dp_hash(&frag2, ALG_SYM_L4, 0)
        );
    }

    #[test]
    fn fields_outside_the_tuple_do_not_count() {
        let a = tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80);
        let mut b = a;
        b.dl_src = [2, 0, 0, 0, 0, 1];
        b.nw_ttl = 3;
        assert_eq!(hash_5tuple(&a, 0), hash_5tuple(&b, 0));
        b.tp_src = 1235;
        assert_ne!(hash_5tuple(&a, 0), hash_5tuple(&b, 0));
        // No IP, no ARP: only the finish.
        let l2 = FlowKey {
            dl_type: 0x88b5,
            ..FlowKey::default()
        };
        assert_eq!(hash_5tuple(&l2, 0), hash_finish(0, 42));
    }
}
