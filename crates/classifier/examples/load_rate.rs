//! Bulk load rate: `cargo run --release -p sluice-classifier --example
//! load_rate -- FILE` parses a flow file and builds the rule set from it
//! (as `sluice run --flows` does before anything forwards), printing the
//! time of each step.
use sluice_classifier::parse::parse_flow_file;
use sluice_classifier::table::RuleSet;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("a flow file");
    let text = std::fs::read_to_string(&path).expect("readable");
    let t = Instant::now();
    let specs = parse_flow_file(&text, Some(&path)).expect("valid");
    let parsed = t.elapsed();
    for _ in 0..2 {
        let t = Instant::now();
        let set = RuleSet::from_specs(&specs, 0);
        let built = t.elapsed();
        println!(
            "{} rules: parsed in {:.2} s (one thread), indexed in {:.2} s ({:.0} ns/rule)",
            set.len(),
            parsed.as_secs_f64(),
            built.as_secs_f64(),
            built.as_nanos() as f64 / set.len().max(1) as f64
        );
        let t = Instant::now();
        drop(set);
        println!("dropped in {:.2} s", t.elapsed().as_secs_f64());
    }
}
