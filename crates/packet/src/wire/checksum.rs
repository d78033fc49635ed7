//! Internet checksums (RFC 1071) with incremental updates (RFC 1624), and
//! CRC32c for SCTP (RFC 3309).

/// Adds `data` to a running ones-complement sum (not yet folded).
///
/// The 16-bit words go into a 64-bit accumulator, folded once at the
/// end (no packet has the 2^48 words that could overflow it): folding
/// after each word made every add wait for the one before (a fifth of
/// conntrack's time in an IPv4 header's checksum), and this way the
/// compiler can add several words a step.
#[inline]
pub fn sum(acc: u32, data: &[u8]) -> u32 {
    let mut wide = u64::from(acc);
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        wide += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        wide += u64::from(*last) << 8;
    }
    fold_wide(wide)
}

/// A 64-bit running sum folded to 32 bits, small enough that callers can
/// still add to it (at most `0xffff_0000`, or a sum already that small).
#[inline]
fn fold_wide(mut wide: u64) -> u32 {
    while wide >> 32 != 0 {
        wide = (wide & 0xffff_ffff) + (wide >> 32);
    }
    let mut n = wide as u32;
    while n > 0xffff_0000 {
        n = (n & 0xffff) + (n >> 16);
    }
    n
}

/// [`sum`] for long buffers (segment payloads): eight bytes a step into a
/// 64-bit accumulator, folded once at the end. Returns a value
/// [`finish`] turns into the same checksum as [`sum`]'s.
#[inline]
pub fn sum_wide(acc: u32, data: &[u8]) -> u32 {
    let mut wide = u64::from(acc);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Adding both 32-bit halves: 2^32 is 1 in ones-complement 16-bit
        // arithmetic, and 2^32 words of 2^32 each cannot overflow 64 bits.
        wide += (w >> 32) + (w & 0xffff_ffff);
    }
    // The last 0-7 bytes (from an even offset) as a 4-byte word, a
    // 16-bit one and an odd byte padded right: a few adds, where a call
    // of `sum` for them set up its vector loop for nothing (a header's
    // checksum is mostly tail: 20 bytes are two steps and four bytes).
    let rest = chunks.remainder();
    let (four, rest) = rest.split_at(rest.len() & 4);
    if let Ok(w) = <[u8; 4]>::try_from(four) {
        wide += u64::from(u32::from_be_bytes(w));
    }
    let (two, rest) = rest.split_at(rest.len() & 2);
    if let Ok(w) = <[u8; 2]>::try_from(two) {
        wide += u64::from(u16::from_be_bytes(w));
    }
    if let [last] = rest {
        wide += u64::from(*last) << 8;
    }
    fold_wide(wide)
}

/// Folds a running sum into the final complemented 16-bit checksum.
#[inline]
pub fn finish(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Checksum of `data` alone (through [`sum_wide`]: eight bytes a step,
/// which a 20-byte IPv4 header takes in three).
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum_wide(0, data))
}

/// Sum of the IPv4 pseudo-header for an L4 checksum.
pub fn pseudo_v4(src: u32, dst: u32, proto: u8, l4_len: u16) -> u32 {
    (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + proto as u32 + l4_len as u32
}

/// Sum of the IPv6 pseudo-header for an L4 checksum.
pub fn pseudo_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, l4_len: u32) -> u32 {
    let acc = sum(sum(0, src), dst);
    acc + (l4_len >> 16) + (l4_len & 0xffff) + next_header as u32
}

/// Updates checksum `csum` for a 16-bit field changing from `old` to `new`
/// (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')).
#[inline]
pub fn update16(csum: u16, old: u16, new: u16) -> u16 {
    let acc = (!csum as u32) + (!old as u32) + new as u32;
    finish(acc)
}

/// Updates `csum` for a 32-bit field change.
#[inline]
pub fn update32(csum: u16, old: u32, new: u32) -> u16 {
    let c = update16(csum, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// Updates `csum` for a change of an arbitrary even-length byte field.
pub fn update_bytes(mut csum: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    for (o, n) in old.chunks(2).zip(new.chunks(2)) {
        let o = u16::from_be_bytes([o[0], *o.get(1).unwrap_or(&0)]);
        let n = u16::from_be_bytes([n[0], *n.get(1).unwrap_or(&0)]);
        csum = update16(csum, o, n);
    }
    csum
}

const fn crc32c_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC32C: [u32; 256] = crc32c_table();

/// CRC32c (Castagnoli) of `data`, as SCTP uses it.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC32C[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc1071_example() {
        // The example header from RFC 1071 section 3: sum 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(sum(0, &data)), !0xddf2);
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    proptest! {
        #[test]
        fn wide_sum_equals_plain_sum(data in proptest::collection::vec(any::<u8>(), 0..3000),
                                     acc in 0u32..0x0010_0000) {
            prop_assert_eq!(finish(sum_wide(acc, &data)), finish(sum(acc, &data)));
        }

        /// Short buffers (headers: every tail of 0-7 bytes after whole
        /// steps) the same, with any starting sum callers pass.
        #[test]
        fn wide_sum_of_headers_equals_plain_sum(data in proptest::collection::vec(any::<u8>(), 0..48),
                                                acc in 0u32..0xffff_0000) {
            prop_assert_eq!(finish(sum_wide(acc, &data)), finish(sum(acc, &data)));
            prop_assert_eq!(checksum(&data), finish(sum(0, &data)));
        }

        /// The sum as RFC 1071 makes it, a 16-bit word at a time folded
        /// as it goes, gives the same checksum.
        #[test]
        fn sum_equals_word_by_word(data in proptest::collection::vec(any::<u8>(), 0..3000),
                                   acc in 0u32..0x0010_0000) {
            let mut r = acc;
            for (i, b) in data.iter().enumerate() {
                r += if i % 2 == 0 { u32::from(*b) << 8 } else { u32::from(*b) };
                if r > 0xffff_0000 {
                    r = (r & 0xffff) + (r >> 16);
                }
            }
            prop_assert_eq!(finish(sum(acc, &data)), finish(r));
        }

        #[test]
        fn incremental_equals_full(mut data in proptest::collection::vec(any::<u8>(), 4..64),
                                   at in 0usize..30, new in any::<u16>()) {
            if data.len() % 2 == 1 { data.pop(); }
            let at = (at * 2) % (data.len() - 1);
            let at = at - at % 2;
            let before = checksum(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let full = checksum(&data);
            let inc = update16(before, old, new);
            // 0x0000 and 0xffff are the same value in ones-complement.
            prop_assert!(inc == full || (inc == 0xffff && full == 0) || (inc == 0 && full == 0xffff));
        }
    }
}
