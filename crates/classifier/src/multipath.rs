//! `multipath(fields, basis, algorithm, n_links, arg, dst)`: a hash of
//! some of the packet's fields picks a link number from 0 to `n_links -
//! 1`, written into `dst` (a register, usually, that later rules match).
//!
//! The value is what Open vSwitch 3.1 computes, bit for bit, so the same
//! rules send the same packet the same way: `flow_hash_fields`
//! (`lib/flow.c`) over OVS's own structures, with its Jenkins hash
//! (`jhash_bytes`, `lib/jhash.c`) and its Murmur-based `hash_add` and
//! `hash_finish` (`lib/hash.h`, the portable build Debian ships), then
//! `multipath_algorithm` (`lib/multipath.c`). OVS lays the fields out in
//! memory in network byte order and reads them as little-endian words (an
//! x86 host): that is what these functions do.

use sluice_packet::key::FlowKey;

use crate::subfield::Subfield;

/// What is hashed (`NX_HASH_FIELDS_*`, numbered as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashFields {
    /// `eth_src`.
    EthSrc = 0,
    /// `symmetric_l4`: Ethernet addresses, VLAN IDs, type, IP addresses
    /// and protocol, TCP/SCTP ports, each pair XORed.
    SymmetricL4 = 1,
    /// `symmetric_l3l4`: IP addresses, protocol, TCP/SCTP ports.
    SymmetricL3L4 = 2,
    /// `symmetric_l3l4+udp`: and UDP's ports.
    SymmetricL3L4Udp = 3,
    /// `nw_src`.
    NwSrc = 4,
    /// `nw_dst`.
    NwDst = 5,
    /// `symmetric_l3`: IP addresses and the type.
    SymmetricL3 = 6,
}

/// The names, as `ovs-ofctl` writes them.
const FIELD_NAMES: [(HashFields, &str); 7] = [
    (HashFields::EthSrc, "eth_src"),
    (HashFields::SymmetricL4, "symmetric_l4"),
    (HashFields::SymmetricL3L4, "symmetric_l3l4"),
    (HashFields::SymmetricL3L4Udp, "symmetric_l3l4+udp"),
    (HashFields::NwSrc, "nw_src"),
    (HashFields::NwDst, "nw_dst"),
    (HashFields::SymmetricL3, "symmetric_l3"),
];

impl HashFields {
    /// By name (any case, as OVS).
    pub fn named(s: &str) -> Option<HashFields> {
        FIELD_NAMES
            .iter()
            .find(|f| f.1.eq_ignore_ascii_case(s))
            .map(|f| f.0)
    }

    /// By wire number.
    pub fn of_code(c: u16) -> Option<HashFields> {
        FIELD_NAMES.get(usize::from(c)).map(|f| f.0)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        FIELD_NAMES[self as usize].1
    }
}

/// How a hash becomes a link (`NX_MP_ALG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// `modulo_n`: the hash modulo the links.
    ModuloN = 0,
    /// `hash_threshold`: the hash's share of the 32-bit range.
    HashThreshold = 1,
    /// `hrw`: highest random weight (`iter_hash` past 64 links).
    Hrw = 2,
    /// `iter_hash`: rehashed until under the links, modulo `arg` (or the
    /// power of two above the links).
    IterHash = 3,
}

const ALG_NAMES: [(Algorithm, &str); 4] = [
    (Algorithm::ModuloN, "modulo_n"),
    (Algorithm::HashThreshold, "hash_threshold"),
    (Algorithm::Hrw, "hrw"),
    (Algorithm::IterHash, "iter_hash"),
];

impl Algorithm {
    /// By name (any case).
    pub fn named(s: &str) -> Option<Algorithm> {
        ALG_NAMES
            .iter()
            .find(|a| a.1.eq_ignore_ascii_case(s))
            .map(|a| a.0)
    }

    /// By wire number.
    pub fn of_code(c: u16) -> Option<Algorithm> {
        ALG_NAMES.get(usize::from(c)).map(|a| a.0)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        ALG_NAMES[self as usize].1
    }
}

/// A `multipath` action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Multipath {
    /// What is hashed.
    pub fields: HashFields,
    /// The hash's basis.
    pub basis: u16,
    /// How the link is picked.
    pub algorithm: Algorithm,
    /// The highest link (`n_links - 1`).
    pub max_link: u16,
    /// `iter_hash`'s modulo.
    pub arg: u32,
    /// Where the link goes.
    pub dst: Subfield,
}

impl std::fmt::Display for Multipath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "multipath({},{},{},{},{},{})",
            self.fields.name(),
            self.basis,
            self.algorithm.name(),
            u32::from(self.max_link) + 1,
            self.arg,
            self.dst
        )
    }
}

impl Multipath {
    /// The link for a packet whose fields are `k`.
    pub fn link(&self, k: &FlowKey) -> u16 {
        let hash = flow_hash(self.fields, k, u32::from(self.basis));
        algorithm(hash, self.algorithm, u32::from(self.max_link) + 1, self.arg)
    }
}

fn rot(x: u32, k: u32) -> u32 {
    x.rotate_left(k)
}

fn jhash_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 4);
    *b = b.wrapping_add(*a);
}

fn jhash_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 14));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 11));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 25));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 16));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 4));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 14));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 24));
}

/// OVS's `jhash_bytes` (words read little-endian, as on x86).
pub fn jhash_bytes(p: &[u8], basis: u32) -> u32 {
    let word = |b: &[u8]| {
        let mut w = [0u8; 4];
        w[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(w)
    };
    let init = 0xdead_beef_u32
        .wrapping_add(p.len() as u32)
        .wrapping_add(basis);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = p;
    while rest.len() >= 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        jhash_mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if !rest.is_empty() {
        let mut tmp = [0u8; 12];
        tmp[..rest.len()].copy_from_slice(rest);
        a = a.wrapping_add(word(&tmp[0..4]));
        b = b.wrapping_add(word(&tmp[4..8]));
        c = c.wrapping_add(word(&tmp[8..12]));
        jhash_final(&mut a, &mut b, &mut c);
    }
    c
}

/// OVS's `hash_add` (`mhash_add`).
pub fn hash_add(hash: u32, data: u32) -> u32 {
    let mut h = hash;
    if data != 0 {
        let d = rot(data.wrapping_mul(0xcc9e_2d51), 15).wrapping_mul(0x1b87_3593);
        h ^= d;
    }
    rot(h, 13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// OVS's `hash_add64`.
pub fn hash_add64(hash: u32, data: u64) -> u32 {
    hash_add(hash_add(hash, data as u32), (data >> 32) as u32)
}

/// OVS's `hash_finish`.
pub fn hash_finish(hash: u32, fin: u32) -> u32 {
    let mut h = hash ^ fin;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// OVS's `hash_2words`.
pub fn hash_2words(x: u32, y: u32) -> u32 {
    hash_finish(hash_add(hash_add(x, 0), y), 8)
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;

/// The XOR of the VLAN IDs of the tags (network order).
fn vids(k: &FlowKey) -> [u8; 2] {
    (k.vlan_tci[0] & 0x0fff ^ k.vlan_tci[1] & 0x0fff).to_be_bytes()
}

fn xor<const N: usize>(a: [u8; N], b: [u8; N]) -> [u8; N] {
    let mut o = [0u8; N];
    for i in 0..N {
        o[i] = a[i] ^ b[i];
    }
    o
}

/// The source and destination addresses XORed, as OVS's union of an
/// IPv4 address (first four bytes) and an IPv6 one; `None` for neither.
fn l3_xor(k: &FlowKey) -> Option<[u8; 16]> {
    let mut a = [0u8; 16];
    if k.dl_type == 0x0800 {
        a[..4].copy_from_slice(&(k.nw_src ^ k.nw_dst).to_be_bytes());
    } else if k.dl_type == 0x86dd {
        a = xor(k.ipv6_src, k.ipv6_dst);
    } else {
        return None;
    }
    Some(a)
}

/// `flow_hash_symmetric_l4`.
fn symmetric_l4(k: &FlowKey, basis: u32) -> u32 {
    let mut f = [0u8; 32];
    f[16..18].copy_from_slice(&k.dl_type.to_be_bytes());
    f[18..20].copy_from_slice(&vids(k));
    f[22..28].copy_from_slice(&xor(k.dl_src, k.dl_dst));
    if let Some(a) = l3_xor(k) {
        f[..16].copy_from_slice(&a);
        f[28] = k.nw_proto;
        if k.nw_proto == TCP || k.nw_proto == SCTP {
            f[20..22].copy_from_slice(&(k.tp_src ^ k.tp_dst).to_be_bytes());
        }
    }
    jhash_bytes(&f, basis)
}

/// `flow_hash_symmetric_l2`.
fn symmetric_l2(k: &FlowKey, basis: u32) -> u32 {
    let mut f = [0u8; 12];
    f[0..2].copy_from_slice(&k.dl_type.to_be_bytes());
    f[2..4].copy_from_slice(&vids(k));
    f[4..10].copy_from_slice(&xor(k.dl_src, k.dl_dst));
    let word = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    let h = hash_add(hash_add(hash_add(basis, word(0)), word(4)), word(8));
    hash_finish(h, basis)
}

/// `flow_hash_symmetric_l3l4`.
fn symmetric_l3l4(k: &FlowKey, basis: u32, udp: bool) -> u32 {
    let mut h = basis;
    if k.dl_type == 0x0800 {
        h = hash_add(h, u32::from_le_bytes((k.nw_src ^ k.nw_dst).to_be_bytes()));
    } else if k.dl_type == 0x86dd {
        let a = xor(k.ipv6_src, k.ipv6_dst);
        for half in a.chunks(8) {
            h = hash_add64(h, u64::from_le_bytes(half.try_into().expect("8 bytes")));
        }
    } else {
        return symmetric_l2(k, basis);
    }
    h = hash_add(h, u32::from(k.nw_proto));
    if k.nw_frag & 3 == 0 && (k.nw_proto == TCP || k.nw_proto == SCTP || (udp && k.nw_proto == UDP))
    {
        h = hash_add(
            h,
            u32::from(u16::from_le_bytes((k.tp_src ^ k.tp_dst).to_be_bytes())),
        );
    }
    hash_finish(h, basis)
}

/// `flow_hash_symmetric_l3`.
fn symmetric_l3(k: &FlowKey, basis: u32) -> u32 {
    let mut f = [0u8; 20];
    f[16..18].copy_from_slice(&k.dl_type.to_be_bytes());
    if let Some(a) = l3_xor(k) {
        f[..16].copy_from_slice(&a);
    }
    jhash_bytes(&f, basis)
}

/// OVS's `flow_hash_fields`.
pub fn flow_hash(fields: HashFields, k: &FlowKey, basis: u32) -> u32 {
    match fields {
        HashFields::EthSrc => jhash_bytes(&k.dl_src, basis),
        HashFields::SymmetricL4 => symmetric_l4(k, basis),
        HashFields::SymmetricL3L4 => symmetric_l3l4(k, basis, false),
        HashFields::SymmetricL3L4Udp => symmetric_l3l4(k, basis, true),
        HashFields::NwSrc | HashFields::NwDst => {
            let src = fields == HashFields::NwSrc;
            match k.dl_type {
                0x0800 => {
                    let a = if src { k.nw_src } else { k.nw_dst };
                    jhash_bytes(&a.to_be_bytes(), basis)
                }
                0x86dd => jhash_bytes(if src { &k.ipv6_src } else { &k.ipv6_dst }, basis),
                _ => basis,
            }
        }
        HashFields::SymmetricL3 => symmetric_l3(k, basis),
    }
}

/// The fields the hash of `fields` read for a packet with key `k`, set to
/// all ones in `wc` (OVS's `flow_mask_hash_fields`, and the Ethernet type
/// and fragment bits the hash also depends on).
pub fn unwildcard(fields: HashFields, k: &FlowKey, wc: &mut FlowKey) {
    let ip4 = k.dl_type == 0x0800;
    let ip6 = k.dl_type == 0x86dd;
    let addrs = |wc: &mut FlowKey, src: bool, dst: bool| {
        if ip4 {
            if src {
                wc.nw_src = u32::MAX;
            }
            if dst {
                wc.nw_dst = u32::MAX;
            }
        } else if ip6 {
            if src {
                wc.ipv6_src = [0xff; 16];
            }
            if dst {
                wc.ipv6_dst = [0xff; 16];
            }
        }
    };
    if fields != HashFields::EthSrc {
        wc.dl_type = 0xffff;
    }
    match fields {
        HashFields::EthSrc => wc.dl_src = [0xff; 6],
        HashFields::SymmetricL4 => {
            wc.dl_src = [0xff; 6];
            wc.dl_dst = [0xff; 6];
            addrs(wc, true, true);
            if ip4 || ip6 {
                wc.nw_proto = 0xff;
                if k.nw_proto != UDP {
                    if k.nw_proto == 1 || k.nw_proto == 58 {
                        wc.tp_src |= 0xff;
                        wc.tp_dst |= 0xff;
                    } else {
                        wc.tp_src = 0xffff;
                        wc.tp_dst = 0xffff;
                    }
                }
            }
            wc.vlan_tci[0] |= 0x1fff;
            wc.vlan_tci[1] |= 0x1fff;
        }
        HashFields::SymmetricL3L4 | HashFields::SymmetricL3L4Udp => {
            if !(ip4 || ip6) {
                // Hashed as Ethernet (symmetric_l2).
                wc.dl_src = [0xff; 6];
                wc.dl_dst = [0xff; 6];
                wc.vlan_tci[0] |= 0x0fff;
                wc.vlan_tci[1] |= 0x0fff;
                return;
            }
            addrs(wc, true, true);
            wc.nw_proto = 0xff;
            wc.nw_frag |= 3;
            let udp = fields == HashFields::SymmetricL3L4Udp && k.nw_proto == UDP;
            if k.nw_frag & 3 == 0 && (k.nw_proto == TCP || k.nw_proto == SCTP || udp) {
                wc.tp_src = 0xffff;
                wc.tp_dst = 0xffff;
            }
        }
        HashFields::NwSrc => addrs(wc, true, false),
        HashFields::NwDst => addrs(wc, false, true),
        HashFields::SymmetricL3 => addrs(wc, true, true),
    }
}

/// OVS's `round_up_pow2` as `multipath.c` has it (16 bits).
fn round_up_pow2(x: u32) -> u32 {
    let mut x = x.wrapping_sub(1);
    x |= x >> 1;
    x |= x >> 2;
    x |= x >> 4;
    x |= x >> 8;
    x.wrapping_add(1)
}

fn iter_hash(hash: u32, n_links: u32, modulo: u32) -> u16 {
    let modulo = if modulo < n_links || modulo / 2 > n_links {
        round_up_pow2(n_links)
    } else {
        modulo
    };
    let mut i = 0u32;
    loop {
        let link = hash_2words(hash, i) % modulo.max(1);
        i += 1;
        if link < n_links {
            return link as u16;
        }
    }
}

/// OVS's `multipath_algorithm`.
pub fn algorithm(hash: u32, alg: Algorithm, n_links: u32, arg: u32) -> u16 {
    match alg {
        Algorithm::ModuloN => (hash % n_links) as u16,
        Algorithm::HashThreshold if n_links == 1 => 0,
        Algorithm::HashThreshold => (hash / (u32::MAX / n_links + 1)) as u16,
        Algorithm::Hrw if n_links <= 64 => {
            let mut best = (0u16, hash_2words(hash, 0));
            for link in 1..n_links {
                let w = hash_2words(hash, link);
                if w > best.1 {
                    best = (link as u16, w);
                }
            }
            best.0
        }
        Algorithm::Hrw => iter_hash(hash, n_links, 0),
        Algorithm::IterHash => iter_hash(hash, n_links, arg),
    }
}
