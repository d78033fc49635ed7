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
