//! Lookup rate: `cargo run --release -p sluice-classifier --example
//! lookup_rate -- [N] [LENS]` builds a table of N routes over LENS prefix
//! lengths (`LENS` 1: N host routes /32; more: /32, /31, ... spread over
//! the N) and a catch-all, then looks up a million random destinations
//! in 10.0.0.0/8 (as an upcall does: rule and megaflow mask) and prints
//! the time per lookup of each of 5 rounds.
use sluice_classifier::parse::{parse_flow, Require};
use sluice_classifier::table::RuleSet;
use sluice_packet::key::FlowKey;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let lens: u32 = args.next().map_or(1, |a| a.parse().expect("LENS"));
    let mut specs = Vec::new();
    for i in 0..n {
        let len = 32 - i % lens;
        let a = (0x0A00_0000u32 | i.wrapping_mul(2_654_435_761) >> 8) & (u32::MAX << (32 - len));
        let line = format!(
            "priority={len},ip,nw_dst={}/{len},actions=output:2",
            std::net::Ipv4Addr::from(a)
        );
        specs.push(parse_flow(&line, Require::Actions).expect("a rule"));
    }
    specs.push(parse_flow("priority=0,actions=drop", Require::Actions).expect("a rule"));
    let mut set = RuleSet::new();
    for s in &specs {
        set.add(s, 0);
    }
    let mut keys = Vec::new();
    let mut x = 0x1234_5678u32;
    for _ in 0..1_000_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let k = FlowKey {
            dl_type: 0x0800,
            nw_dst: 0x0A00_0000 | x & 0x00ff_ffff,
            ..FlowKey::default()
        };
        keys.push(k);
    }
    for _ in 0..5 {
        let t = Instant::now();
        let mut hits = 0u64;
        for k in &keys {
            let mut wc = FlowKey::default();
            if let Some(r) = set.lookup(0, k, &mut wc) {
                hits += u64::from(r.priority);
            }
        }
        println!(
            "{} rules over {lens} lengths: {:.0} ns/lookup ({hits})",
            set.len(),
            t.elapsed().as_nanos() as f64 / keys.len() as f64
        );
    }
}
