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
//! the same way. The hash itself is `lib/hash.h`'s Murmur3-based one (the
//! build without SSE 4.2, as Debian's amd64 package is: its CRC32 variant
//! gives other values).

use sluice_packet::key::{FlowKey, FRAG_ANY};
use sluice_packet::wire::l4::proto;

/// `OVS_HASH_ALG_L4`: the 5-tuple, as the datapath's RSS hash.
pub const ALG_L4: u32 = 0;
/// `OVS_HASH_ALG_SYM_L4`: addresses and ports combined so that both
/// directions hash alike.
pub const ALG_SYM_L4: u32 = 1;

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ICMPV6: u8 = 58;

fn mhash_add_raw(hash: u32, data: u32) -> u32 {
    if data == 0 {
        return hash;
    }
    let d = data
        .wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593);
    hash ^ d
}

/// `hash_add`.
pub fn hash_add(hash: u32, data: u32) -> u32 {
    mhash_add_raw(hash, data)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

/// `hash_add64`.
pub fn hash_add64(hash: u32, data: u64) -> u32 {
    hash_add(hash_add(hash, data as u32), (data >> 32) as u32)
}

/// `hash_finish`.
pub fn hash_finish(hash: u32, fin: u32) -> u32 {
    let mut h = hash ^ fin;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// `hash_int(x, basis)` (`hash_2words`).
pub fn hash_int(x: u32, basis: u32) -> u32 {
    hash_finish(hash_add(hash_add(x, 0), basis), 8)
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
        if f.dl_type == ETH_TYPE_IPV6 {
            for a in [&f.ipv6_src, &f.ipv6_dst] {
                hash = hash_add64(hash, addr64(a, 0));
                hash = hash_add64(hash, addr64(a, 1));
            }
        } else if f.dl_type == ETH_TYPE_IP || f.dl_type == ETH_TYPE_ARP {
            hash = hash_add(hash, be32_word(f.nw_src));
            hash = hash_add(hash, be32_word(f.nw_dst));
        } else {
            break 'out;
        }
        hash = hash_add(hash, u32::from(f.nw_proto));
        if !matches!(
            f.nw_proto,
            proto::TCP | proto::UDP | proto::SCTP | proto::ICMP | ICMPV6
        ) || f.dl_type == ETH_TYPE_ARP
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

/// `flow_hash_symmetric_l2(flow, basis)`.
fn hash_symmetric_l2(f: &FlowKey, basis: u32) -> u32 {
    let mut eth = [0u8; 6];
    for (i, e) in eth.iter_mut().enumerate() {
        *e = f.dl_src[i] ^ f.dl_dst[i];
    }
    let tci = (f.vlan_tci[0] ^ f.vlan_tci[1]) & 0x0fff;
    let [t0, t1] = f.dl_type.to_be_bytes();
    let [v0, v1] = tci.to_be_bytes();
    let mut hash = basis;
    hash = hash_add(hash, u32::from_le_bytes([t0, t1, v0, v1]));
    hash = hash_add(hash, u32::from_le_bytes([eth[0], eth[1], eth[2], eth[3]]));
    hash = hash_add(hash, u32::from_le_bytes([eth[4], eth[5], 0, 0]));
    hash_finish(hash, basis)
}

/// `flow_hash_symmetric_l3l4(flow, basis, false)`.
pub fn hash_symmetric_l3l4(f: &FlowKey, basis: u32) -> u32 {
    let mut hash = basis;
    if f.dl_type == ETH_TYPE_IP {
        hash = hash_add(hash, be32_word(f.nw_src ^ f.nw_dst));
    } else if f.dl_type == ETH_TYPE_IPV6 {
        for half in 0..2 {
            hash = hash_add64(hash, addr64(&f.ipv6_src, half) ^ addr64(&f.ipv6_dst, half));
        }
    } else {
        return hash_symmetric_l2(f, basis);
    }
    hash = hash_add(hash, u32::from(f.nw_proto));
    if f.nw_frag & FRAG_ANY == 0 && matches!(f.nw_proto, proto::TCP | proto::SCTP) {
        // The ports' XOR as OVS's 16-bit word: network order read natively.
        let x = f.tp_src ^ f.tp_dst;
        hash = hash_add(hash, u32::from(u16::from_le_bytes(x.to_be_bytes())));
    }
    hash_finish(hash, basis)
}

/// The `dp_hash` OVS's userspace datapath gives a packet of key `f` for
/// a `hash(alg, basis)` action: for L4 the packet's RSS hash (the
/// 5-tuple, basis 0) mixed with the basis, for SYM_L4 the symmetric
/// hash.
pub fn dp_hash(f: &FlowKey, alg: u32, basis: u32) -> u32 {
    if alg == ALG_SYM_L4 {
        hash_symmetric_l3l4(f, basis)
    } else {
        hash_int(hash_5tuple(f, 0), basis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> FlowKey {
        FlowKey {
            dl_type: ETH_TYPE_IP,
            nw_proto: proto::TCP,
            nw_src: u32::from_be_bytes(src),
            nw_dst: u32::from_be_bytes(dst),
            tp_src: sp,
            tp_dst: dp,
            ..FlowKey::default()
        }
    }

    #[test]
    fn murmur_steps_are_lib_hash_h() {
        // hash_add of 0 leaves the hash (before the rotation) alone.
        assert_eq!(mhash_add_raw(7, 0), 7);
        assert_eq!(hash_finish(0, 0), 0);
        // hash_int is hash_2words: the same value for the same inputs,
        // another for another basis.
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
        frag.nw_frag = FRAG_ANY;
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
