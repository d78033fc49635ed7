//! Prefix trie insertion rate: `cargo run --release -p sluice-classifier
//! --example trie_rate -- [N] [BATCH]` inserts N host routes
//! (10.x.y.z/32) into an empty trie, keeping a copy (a version, as the
//! control plane publishes) every BATCH inserts, and prints the time per
//! insert of each of 5 rounds.
use sluice_classifier::trie::PrefixTrie;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let batch: u32 = args.next().map_or(u32::MAX, |a| a.parse().expect("BATCH"));
    for _ in 0..5 {
        let mut t = PrefixTrie::default();
        let mut kept = Vec::new();
        let start = Instant::now();
        for i in 0..n {
            let v = u128::from(0x0A00_0000u32 | i) << 96;
            t.insert(v, 32, i);
            if (i + 1).is_multiple_of(batch) {
                kept.push(t.clone());
                if kept.len() > 2 {
                    kept.remove(0);
                }
            }
        }
        let dt = start.elapsed();
        println!(
            "{n} inserts, a version every {batch}: {:.0} ns/insert",
            dt.as_nanos() as f64 / f64::from(n)
        );
    }
}
