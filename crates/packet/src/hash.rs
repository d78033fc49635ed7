//! A fast, well-mixed hash of 64-bit words for flow keys.
//!
//! One multiply-rotate step per word (as in FxHash) followed by the
//! murmur3 64-bit finaliser so that every input bit reaches the low bits
//! that cache indexes and signatures use.

use crate::key::{
    CT_WORDS, DP_WORDS, KEY_WORDS, RECIRC_WORD, SHORT_KEY_WORDS, TUN_WIDE_WORDS, TUN_WORDS,
    WIDE_WORDS,
};

/// Hashes `words` with `basis`.
#[inline]
pub fn hash_words(words: &[u64], basis: u64) -> u32 {
    let mut h = basis ^ 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        h = (h.rotate_left(23) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fmix64(h) as u32
}

/// Hashes a flow key's words, xxh3 style: each pair of words, mixed
/// with secret constants, is multiplied to 128 bits and folded to 64; the
/// folds are summed and finalised. Half as many multiplies as a multiply
/// per word, all independent of each other (no long dependency chain),
/// and none for the words past L4 when they are all zero,
/// as they are for every IPv4 and ARP packet: this runs for every packet
/// on the cache-hit path. The registers ([`crate::key::REG_WORDS`],
/// zero in packets' keys) are not read.
#[inline]
pub fn hash_key_words(w: &[u64; KEY_WORDS]) -> u32 {
    let mut acc = short_acc(w);
    let or = |r: std::ops::Range<usize>| w[r].iter().fold(0, |a, &x| a | x);
    // The wide words (IPv6 tunnel addresses, Geneve options, connection
    // tracking state) are zero but in keys of packets that have them:
    // left out then, as the words past L4 of a short key are.
    // Each block of them is hashed only when it has bits (a key after a
    // `ct` has connection state but, from no tunnel, no wide tunnel
    // words).
    let wide = or(WIDE_WORDS);
    let mut fold = |r: std::ops::Range<usize>| {
        for i in r.step_by(2) {
            acc = acc.wrapping_add(fold_mul(w[i] ^ SECRET[i], w[i + 1] ^ SECRET[i + 1]));
        }
    };
    if or(6..WIDE_WORDS.start) | wide != 0 {
        fold(6..WIDE_WORDS.start);
        if wide != 0 {
            if or(TUN_WIDE_WORDS) != 0 {
                fold(TUN_WIDE_WORDS);
            }
            if or(CT_WORDS) != 0 {
                fold(CT_WORDS);
            }
        }
    }
    fmix64(acc) as u32
}

/// The cache hash of a recirculated packet's next pass: its pass's hash
/// mixed with the next pass's id, as OVS mixes a packet's RSS hash with
/// the recirculation depth. Every cache compares the whole key, so the
/// hash need only spread flows, and a flow's passes (whose keys differ
/// in their id) apart: no ~180-instruction hash of the recirculated key.
#[inline]
pub fn recirc_hash(pass_hash: u32, recirc_id: u32) -> u32 {
    fmix64((u64::from(pass_hash) << 32) | u64::from(recirc_id)) as u32
}

/// [`hash_key_words`] of a key whose words past the sixth are known to
/// be zero: the same value, without looking at them.
#[inline]
pub fn hash_short_key_words(w: &[u64; KEY_WORDS]) -> u32 {
    fmix64(short_acc(w)) as u32
}

/// [`hash_key_words`] of a key whose words past the first
/// [`SHORT_KEY_WORDS`] are zero but for the pass id's word, the metadata
/// word and the narrow tunnel words ([`TUN_WORDS`] before
/// [`TUN_WIDE_WORDS`]), and not all of those zero: a packet out of an
/// IPv4 tunnel without options (its key has the tunnel's family) whose
/// inner headers are short. The same value, folding only the pairs
/// those words are in (a zero pair's fold is a constant the compiler
/// works out): 4 multiplies instead of 9, and 26 words not read.
#[inline]
pub fn hash_tunnel_key_words(w: &[u64; KEY_WORDS]) -> u32 {
    let mut acc = short_acc(w);
    for i in (SHORT_KEY_WORDS..TUN_WIDE_WORDS.start).step_by(2) {
        let read = i == RECIRC_WORD & !1 || i >= TUN_WORDS.start - 1;
        let (a, b) = if read { (w[i], w[i + 1]) } else { (0, 0) };
        acc = acc.wrapping_add(fold_mul(a ^ SECRET[i], b ^ SECRET[i + 1]));
    }
    fmix64(acc) as u32
}

const _: () = assert!(SHORT_KEY_WORDS.is_multiple_of(2) && TUN_WORDS.start % 2 == 1);

/// The sum of the folds of the first three word pairs.
#[inline(always)]
fn short_acc(w: &[u64; KEY_WORDS]) -> u64 {
    fold_mul(w[0] ^ SECRET[0], w[1] ^ SECRET[1])
        .wrapping_add(fold_mul(w[2] ^ SECRET[2], w[3] ^ SECRET[3]))
        .wrapping_add(fold_mul(w[4] ^ SECRET[4], w[5] ^ SECRET[5]))
}

/// A 64-bit hash of `w & m` word by word, built like [`hash_key_words`]
/// (every pair: masks rarely leave whole pairs out) and finalised to
/// 64 bits, for hash tables that take tags from the high bits. Only the
/// first `N` words are read (at most [`DP_WORDS`]): a caller passes fewer
/// when the mask's words past `N` are zero, and must pass the same `N`
/// for every key hashed with one mask.
#[inline]
pub fn hash64_key_masked<const N: usize>(w: &[u64; KEY_WORDS], m: &[u64; KEY_WORDS]) -> u64 {
    const { assert!(N.is_multiple_of(2) && N <= DP_WORDS) };
    let mut acc = 0u64;
    for i in (0..N).step_by(2) {
        acc = acc.wrapping_add(fold_mul(
            (w[i] & m[i]) ^ SECRET[i],
            (w[i + 1] & m[i + 1]) ^ SECRET[i + 1],
        ));
    }
    fmix64(acc)
}

/// [`hash64_key_masked`] for one mask, prepared once: a pair of words
/// the mask has no bit in adds the same constant to every key's hash
/// (`fold_mul` of the two secrets), so only the pairs it reads are
/// folded per key, the rest added as one sum. The same hash as
/// `FlowKey::hash64_masked` of the mask, for fewer multiplies: a
/// megaflow subtable whose mask reads 6 of the 18 pairs folds 6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskedHasher {
    /// The mask's words.
    mask: [u64; DP_WORDS],
    /// The first word of each pair the mask reads.
    pairs: [u8; DP_WORDS / 2],
    n: u8,
    /// The sum of the constants of the pairs it does not read.
    base: u64,
}

impl MaskedHasher {
    /// For `mask`, whose words past `N` are zero when `wide` is false (as
    /// `hash64_key_masked::<N>` takes them).
    pub fn new(mask: &[u64; KEY_WORDS], wide: bool) -> MaskedHasher {
        let words = if wide { DP_WORDS } else { TUN_WIDE_WORDS.start };
        let mut h = MaskedHasher {
            mask: [0; DP_WORDS],
            pairs: [0; DP_WORDS / 2],
            n: 0,
            base: 0,
        };
        h.mask.copy_from_slice(&mask[..DP_WORDS]);
        for i in (0..words).step_by(2) {
            if mask[i] | mask[i + 1] == 0 {
                h.base = h.base.wrapping_add(fold_mul(SECRET[i], SECRET[i + 1]));
            } else {
                h.pairs[usize::from(h.n)] = i as u8;
                h.n += 1;
            }
        }
        h
    }

    /// The hash of `w & mask`.
    #[inline]
    pub fn hash(&self, w: &[u64; KEY_WORDS]) -> u64 {
        let mut acc = self.base;
        for &i in &self.pairs[..usize::from(self.n)] {
            let i = usize::from(i);
            acc = acc.wrapping_add(fold_mul(
                (w[i] & self.mask[i]) ^ SECRET[i],
                (w[i + 1] & self.mask[i + 1]) ^ SECRET[i + 1],
            ));
        }
        fmix64(acc)
    }
}

const _: () = assert!(DP_WORDS.is_multiple_of(2), "words are folded in pairs");
const _: () = assert!(WIDE_WORDS.start.is_multiple_of(2), "so are the narrow ones");

/// Random constants (one per key word) for [`hash_key_words`].
const SECRET: [u64; DP_WORDS] = [
    0xbe4b_a423_396c_feb8,
    0x1cad_21f7_2c81_017c,
    0xdb97_9083_e96d_d4de,
    0x1f67_b3b7_a4a4_4072,
    0x78e5_c0cc_4ee6_79cb,
    0x2172_ffcc_7dd0_5a82,
    0x8e2e_4c9f_2c3a_9a35,
    0xd3ea_6781_4c5b_5e61,
    0x5a93_3f03_8c6d_11b7,
    0x9c28_7fbb_6d1f_0a43,
    0x3f1d_a5e7_b9c2_d08f,
    0xa74c_1b2e_63d8_f5c9,
    0x6b5e_d4a1_f037_8e2d,
    0xe1c9_8b74_25fa_36b1,
    0x4d27_c3e9_81b6_5fa3,
    0xc86a_15d2_7e94_b30d,
    0x7f3b_92c5_e1a8_d64b,
    0x29d6_0e4f_b57c_a813,
    0xb3e8_5d17_c94a_62f0,
    0x58a1_f6c3_0d7e_b924,
    0xf40d_2b86_a57c_13e9,
    0x0e97_c4d1_68b3_fa52,
    0x6c1f_a83d_29e5_b470,
    0xd5a2_7b94_0ec8_316f,
    0x3b86_e0f5_a417_9cd2,
    0x94e3_1c6a_d85b_f207,
    0xa3b4_6bce_6dd4_c127,
    0xb96b_1a00_10f4_5dcc,
    0xb2a7_769d_5ffb_0b2e,
    0x9ba8_aa3f_2b8b_9732,
    0x75ff_1d52_bbe9_e2a2,
    0xc7bb_186c_fcf4_03aa,
    0xa3c7_64d4_63e9_5c22,
    0xeee3_8c65_dd2b_b260,
    0x0e8e_3b9b_be84_5bd0,
    0x1888_a4e0_e2e9_7ea3,
];

/// The 128-bit product of `a` and `b`, its halves XORed.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The murmur3 64-bit finaliser.
#[inline]
pub fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A prepared hasher gives `hash64_key_masked`'s hash for any key
        /// and any mask (sparse masks made by keeping a few words).
        #[test]
        fn masked_hasher_hashes_as_the_loop(
            w in proptest::array::uniform32(any::<u64>()),
            m in proptest::array::uniform32(any::<u64>()),
            keep in any::<u64>(),
            wide in any::<bool>(),
        ) {
            let mut key = [0u64; KEY_WORDS];
            let mut mask = [0u64; KEY_WORDS];
            for i in 0..DP_WORDS {
                key[i] = w[i % 32].rotate_left(i as u32);
                if keep >> i & 1 == 1 && (wide || i < TUN_WIDE_WORDS.start) {
                    mask[i] = m[i % 32];
                }
            }
            let h = MaskedHasher::new(&mask, wide);
            let want = if wide {
                hash64_key_masked::<DP_WORDS>(&key, &mask)
            } else {
                hash64_key_masked::<{ TUN_WIDE_WORDS.start }>(&key, &mask)
            };
            prop_assert_eq!(h.hash(&key), want);
        }
    }

    proptest! {
        /// A key out of a narrow tunnel (bits only in the short words,
        /// the pass id's word, the metadata and the narrow tunnel words)
        /// hashes the same by the tunnel path as by the whole key's.
        #[test]
        fn tunnel_hash_is_the_whole_keys(
            w in proptest::array::uniform32(any::<u64>()),
            zero in any::<u32>(),
        ) {
            let mut key = [0u64; KEY_WORDS];
            let words = (0..SHORT_KEY_WORDS)
                .chain([RECIRC_WORD])
                .chain(TUN_WORDS.start - 1..TUN_WIDE_WORDS.start);
            for (n, i) in words.enumerate() {
                // (Some left zero: a zero tunnel id, no pass id.)
                if zero >> n & 1 == 0 {
                    key[i] = w[n];
                }
            }
            // (An IPv4 tunnel's key always has its family.)
            key[TUN_WIDE_WORDS.start - 1] |= 4 << 32;
            prop_assert_eq!(hash_tunnel_key_words(&key), hash_key_words(&key));
        }
    }

    /// A recirculated pass's hash spreads flows as the first pass's did
    /// (8,192 flows over 8,192 slots fill about 1 - 1/e of them) and puts
    /// one flow's passes in different slots.
    #[test]
    fn recirculated_hashes_spread_flows_and_passes() {
        let mut used = vec![false; 8192];
        for f in 0..8192u32 {
            let first = hash_words(&[u64::from(f)], 0);
            used[(recirc_hash(first, 7) & 8191) as usize] = true;
            assert_ne!(recirc_hash(first, 1), recirc_hash(first, 2));
            assert_eq!(recirc_hash(first, 1), recirc_hash(first, 1));
        }
        let n = used.iter().filter(|&&u| u).count();
        assert!(n > 4900, "{n} slots of 8192");
    }

    #[test]
    fn key_hash_single_bit_changes_spread() {
        let base = [0u64; KEY_WORDS];
        let h0 = hash_key_words(&base);
        let mut low_bits_seen = 0u32;
        for w in 0..DP_WORDS {
            for b in 0..64 {
                let mut k = base;
                k[w] ^= 1 << b;
                let h = hash_key_words(&k);
                assert_ne!(h, h0);
                low_bits_seen |= h ^ h0;
            }
        }
        assert_eq!(low_bits_seen & 0xffff, 0xffff);
        // Moving a value to another word changes the hash.
        let (mut a, mut b) = (base, base);
        a[0] = 7;
        b[4] = 7;
        assert_ne!(hash_key_words(&a), hash_key_words(&b));
    }

    #[test]
    fn structured_keys_spread_over_cache_positions() {
        // 8192 flows of sequential addresses and ports, as generators make
        // them, over 8192 buckets (the EMC's geometry): a good hash leaves
        // about 1/e of the buckets empty; a weak one piles keys up.
        let mut used = vec![false; 8192];
        for i in 0..8192u64 {
            let mut k = [0u64; KEY_WORDS];
            k[0] = 1 | 0x0800 << 32 | 17 << 48;
            k[4] = (0x0a00_0000 + i) | 0x0a01_0000_u64 << 32;
            k[5] = (1024 + (i % 64)) | 53 << 16;
            used[(hash_key_words(&k) & 8191) as usize] = true;
        }
        let empty = used.iter().filter(|&&u| !u).count();
        assert!(
            (2700..3300).contains(&empty),
            "{empty} of 8192 buckets empty"
        );
    }

    #[test]
    fn single_bit_changes_spread() {
        let base = [0u64; KEY_WORDS];
        let h0 = hash_words(&base, 0);
        let mut low_bits_seen = 0u32;
        for w in 0..KEY_WORDS {
            for b in 0..64 {
                let mut k = base;
                k[w] ^= 1 << b;
                let h = hash_words(&k, 0);
                assert_ne!(h, h0);
                low_bits_seen |= h ^ h0;
            }
        }
        assert_eq!(
            low_bits_seen & 0xffff,
            0xffff,
            "every low bit flips for some input"
        );
    }
}
