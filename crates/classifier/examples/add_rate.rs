//! Rule insertion rate: `cargo run --release -p sluice-classifier --example
//! add_rate -- [N] [BATCH]` adds N host routes (`ip,nw_dst=10.x.y.z`) to an
//! empty table, a new version (a clone, as the control plane publishes)
//! every BATCH rules, and prints the time per rule.
use sluice_classifier::parse::{parse_flow, Require};
use sluice_classifier::table::RuleSet;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let batch: u32 = args.next().map_or(u32::MAX, |a| a.parse().expect("BATCH"));
    let specs: Vec<_> = (0..n)
        .map(|i| {
            let a = 0x0A00_0000u32 | i;
            let line = format!(
                "priority=100,ip,nw_dst={}.{}.{}.{},actions=output:2",
                a >> 24,
                a >> 16 & 255,
                a >> 8 & 255,
                a & 255
            );
            parse_flow(&line, Require::Actions).expect("a rule")
        })
        .collect();
    for _ in 0..3 {
        let mut versions = vec![RuleSet::new()];
        let t = Instant::now();
        let mut set = RuleSet::new();
        for (i, s) in specs.iter().enumerate() {
            set.add(s, 0);
            if (i as u32 + 1).is_multiple_of(batch) {
                versions.push(set.clone());
                if versions.len() > 2 {
                    versions.remove(0);
                }
            }
        }
        let dt = t.elapsed();
        println!(
            "{n} adds, a version every {batch}: {:.3} s, {:.0} ns/add, {} rules",
            dt.as_secs_f64(),
            dt.as_nanos() as f64 / f64::from(n),
            set.len()
        );
    }
}
