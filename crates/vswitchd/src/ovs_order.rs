//! The order in which ovs-vswitchd creates a bridge's new interfaces, and
//! so which OpenFlow number each gets when several come in one
//! transaction: `bridge_add_ports()` walks a `shash` of the bridge's port
//! names, that is an `hmap` iterated bucket by bucket, each bucket newest
//! first, the names hashed with `hash_string(name, 0)` (Murmur3 words, as
//! OVS builds it without SSE 4.2: Debian's). The shash is filled from the
//! bridge's `ports` column in UUID order (the IDL sorts sets), and grows
//! (rehashing, which reverses each bucket's order) as OVS's does. Within
//! a port, interfaces come in UUID order. Nothing here knows Sluice: it is
//! OVS's arithmetic, checked against OVS 3.1 by the differential test.

fn rot(x: u32, k: u32) -> u32 {
    x.rotate_left(k)
}

fn mhash_add(hash: u32, data: u32) -> u32 {
    let mut hash = hash;
    if data != 0 {
        let d = data.wrapping_mul(0xcc9e_2d51);
        let d = rot(d, 15).wrapping_mul(0x1b87_3593);
        hash ^= d;
    }
    rot(hash, 13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

fn mhash_finish(mut hash: u32) -> u32 {
    hash ^= hash >> 16;
    hash = hash.wrapping_mul(0x85eb_ca6b);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(0xc2b2_ae35);
    hash ^ hash >> 16
}

/// OVS's `hash_bytes(p, n, basis)` (`lib/hash.c`, the Murmur variant).
pub fn hash_bytes(p: &[u8], basis: u32) -> u32 {
    let mut hash = basis;
    let mut chunks = p.chunks_exact(4);
    for c in &mut chunks {
        hash = mhash_add(hash, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut tmp = [0u8; 4];
        tmp[..rest.len()].copy_from_slice(rest);
        hash = mhash_add(hash, u32::from_le_bytes(tmp));
    }
    mhash_finish(hash ^ p.len() as u32)
}

/// OVS's `hash_string(s, 0)`, what a `shash` hashes names with.
pub fn hash_name(s: &str) -> u32 {
    hash_bytes(s.as_bytes(), 0)
}

/// `calc_mask()` of `lib/hmap.c`.
fn calc_mask(capacity: usize) -> usize {
    let mut mask = capacity / 2;
    for s in [1, 2, 4, 8, 16, 32] {
        mask |= mask >> s;
    }
    mask | (mask & 1) << 1
}

/// The order a `shash` filled with `names` (in this order) iterates them.
pub fn shash_order<'a>(names: &[&'a str]) -> Vec<&'a str> {
    // Buckets as lists, head first; (hash, name).
    let mut mask = 0usize;
    let mut buckets: Vec<Vec<(u32, &str)>> = vec![Vec::new()];
    let mut n = 0usize;
    for &name in names {
        let h = hash_name(name);
        buckets[h as usize & mask].insert(0, (h, name));
        n += 1;
        if n / 2 > mask {
            let new_mask = calc_mask(n);
            if new_mask > mask {
                let mut grown: Vec<Vec<(u32, &str)>> = vec![Vec::new(); new_mask + 1];
                for b in &buckets {
                    for &(h, name) in b {
                        grown[h as usize & new_mask].insert(0, (h, name));
                    }
                }
                buckets = grown;
                mask = new_mask;
            }
        }
    }
    buckets
        .iter()
        .flat_map(|b| b.iter().map(|(_, name)| *name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_words_and_tails() {
        // The same bytes, the same hash; every length's tail counts.
        assert_eq!(hash_name("br0"), hash_name("br0"));
        let hs: Vec<u32> = ["", "a", "ab", "abc", "abcd", "abcde"]
            .iter()
            .map(|s| hash_name(s))
            .collect();
        let mut d = hs.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), hs.len());
        // A zero word does not change the running hash (mhash_add__).
        assert_eq!(
            mhash_add(7, 0),
            rot(7, 13).wrapping_mul(5).wrapping_add(0xe654_6b64)
        );
    }

    #[test]
    fn masks_as_hmap_grows_them() {
        assert_eq!(calc_mask(2), 3);
        assert_eq!(calc_mask(3), 3);
        assert_eq!(calc_mask(8), 7);
        assert_eq!(calc_mask(9), 7);
        assert_eq!(calc_mask(16), 15);
    }

    #[test]
    fn every_name_once() {
        let names: Vec<String> = (0..50).map(|i| format!("p{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut got = shash_order(&refs);
        assert_eq!(got.len(), 50);
        got.sort();
        let mut want = refs.clone();
        want.sort();
        assert_eq!(got, want);
        // One name: itself.
        assert_eq!(shash_order(&["br0"]), ["br0"]);
    }
}
