//! A fast, well-mixed hash of 64-bit words for flow keys.
//!
//! One multiply-rotate step per word (as in FxHash) followed by the
//! murmur3 64-bit finaliser so that every input bit reaches the low bits
//! that cache indexes and signatures use.

/// Hashes `words` with `basis`.
#[inline]
pub fn hash_words(words: &[u64], basis: u64) -> u32 {
    let mut h = basis ^ 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        h = (h.rotate_left(23) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fmix64(h) as u32
}

/// Hashes a flow key's 14 words: the step of [`hash_words`] over four
/// independent lanes (words i, i+4, i+8, ... per lane), joined pairwise,
/// then the finaliser. Four short dependency chains instead of one long
/// one: the multiplies of a key overlap, which matters because every
/// packet's key is hashed on the cache-hit path.
#[inline]
pub fn hash_key_words(w: &[u64; 14]) -> u32 {
    const M: u64 = 0x517c_c1b7_2722_0a95;
    #[inline(always)]
    fn step(h: u64, w: u64) -> u64 {
        (h.rotate_left(23) ^ w).wrapping_mul(M)
    }
    let mut lanes = [
        0x9e37_79b9_7f4a_7c15u64,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x85eb_ca77_c2b2_ae63,
    ];
    for (i, &x) in w.iter().enumerate() {
        lanes[i % 4] = step(lanes[i % 4], x);
    }
    let ab = step(lanes[0], lanes[1]);
    let cd = step(lanes[2], lanes[3]);
    fmix64(step(ab, cd)) as u32
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

    #[test]
    fn key_hash_single_bit_changes_spread() {
        let base = [0u64; 14];
        let h0 = hash_key_words(&base);
        let mut low_bits_seen = 0u32;
        for w in 0..14 {
            for b in 0..64 {
                let mut k = base;
                k[w] ^= 1 << b;
                let h = hash_key_words(&k);
                assert_ne!(h, h0);
                low_bits_seen |= h ^ h0;
            }
        }
        assert_eq!(low_bits_seen & 0xffff, 0xffff);
        // Moving a value to another word of the same lane changes the hash.
        let (mut a, mut b) = (base, base);
        a[0] = 7;
        b[4] = 7;
        assert_ne!(hash_key_words(&a), hash_key_words(&b));
    }

    #[test]
    fn single_bit_changes_spread() {
        let base = [0u64; 14];
        let h0 = hash_words(&base, 0);
        let mut low_bits_seen = 0u32;
        for w in 0..14 {
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
