//! The rule tables' index (tuple space search) against the linear scan it
//! replaced, which stays as the reference: for random rule sets with mixed
//! masks and priorities (ties included), changed by random adds, deletes
//! and modifies, every lookup returns the same rule, and its mask is sound
//! (a key that agrees with it on the mask gets the same rule from both).
//! Also: the index's masks are never narrower than the scan's on rule sets
//! where every mask has one priority (as routing tables and the benchmark
//! sets do), so megaflows stay as wide.
//!
//! Conjunctive matches (`conjunction(...)` clauses and `conj_id` rules)
//! are among the rules; their resolution is shared code, so what this
//! checks of them is the lookups around it and the soundness of the mask.
//!
//! `PROPTEST_CASES=2000 TSS_RULES=10000 cargo test -p sluice-classifier --test tss_vs_linear`
//! searches harder with up to 10k rules per set.

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use sluice_classifier::table::Selection;
use sluice_classifier::{parse_flow, Require, RuleSet};
use sluice_packet::FlowKey;

const PREFIXES: [u8; 7] = [0, 1, 8, 16, 24, 31, 32];

fn max_rules() -> usize {
    std::env::var("TSS_RULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// A rule line from random numbers: a mask shape (which fields, which
/// prefix lengths) and values from a small space so that rules overlap.
fn rule_line(r: &[u32; 8], one_prio_per_shape: bool) -> String {
    let shape = r[0] % 12;
    let mut f = Vec::new();
    // With one priority per mask: a priority that is a function of the mask.
    let mut shape_prio = shape * 100;
    let ip = |o: u32| format!("10.{}.{}.{}", o % 3, (o >> 2) % 4, (o >> 4) % 5);
    match shape {
        0 => f.push(format!("in_port={}", 1 + r[1] % 4)),
        1 => f.push("ip".into()),
        2..=5 => {
            f.push("ip".into());
            let len = PREFIXES[(shape as usize + r[1] as usize) % PREFIXES.len()];
            shape_prio = 200 + len as u32;
            f.push(format!("nw_dst={}/{}", ip(r[2]), len));
        }
        6 => {
            f.push("tcp".into());
            f.push(format!(
                "nw_src={}/{}",
                ip(r[2]),
                PREFIXES[r[3] as usize % 7]
            ));
            shape_prio += r[3] % 7;
            f.push(format!("tp_dst={}", [80, 443, 53][r[4] as usize % 3]));
        }
        7 => {
            f.push("udp".into());
            f.push(format!("tp_dst=0x{:04x}/0xff00", (r[4] % 4) << 8));
        }
        8 => {
            f.push(format!("dl_vlan={}", r[1] % 3));
            f.push(format!("in_port={}", 1 + r[2] % 4));
        }
        9 => {
            f.push("ipv6".into());
            f.push(format!(
                "ipv6_dst=2001:db8:{:x}::/{}",
                r[2] % 4,
                [32, 48, 64, 128][r[3] as usize % 4]
            ));
            shape_prio += r[3] % 4;
        }
        10 => {
            f.push(format!(
                "dl_dst=02:00:00:00:00:{:02x}/ff:ff:ff:ff:ff:{:02x}",
                r[2] % 4,
                [0xff, 0xfe, 0][r[3] as usize % 3]
            ));
            shape_prio += r[3] % 3;
        }
        _ => {}
    }
    let prio = if one_prio_per_shape {
        shape_prio
    } else {
        [0, 1, 5, 5, 100, 100, 200][r[5] as usize % 7]
    };
    // Now and then a clause of a conjunction, or the rule a complete
    // conjunction looks up (`conj_id`).
    let id = 1 + r[6] % 3;
    let n = 2 + r[6] % 2;
    match r[7] % 8 {
        _ if one_prio_per_shape => {}
        0 | 1 => {
            return format!(
                "priority={prio},{},actions=conjunction({id},{}/{n})",
                f.join(","),
                1 + r[5] % n
            )
        }
        2 => f.push(format!("conj_id={id}")),
        _ => {}
    }
    format!(
        "priority={prio},{},actions=output:{}",
        f.join(","),
        1 + r[6] % 4
    )
}

fn key_near(r: &[u32; 8]) -> FlowKey {
    let mut k = FlowKey {
        in_port: 1 + r[0] % 4,
        dl_type: [0x0800, 0x86dd, 0x0806, 0x0800][r[1] as usize % 4],
        nw_proto: [6, 17, 1, 0][r[2] as usize % 4],
        nw_src: 0x0a00_0000 | (r[3] & 0x0003_0f0f),
        nw_dst: 0x0a00_0000 | (r[4] & 0x0003_0f07) ^ (r[7] & 1) << (r[7] % 32),
        tp_dst: [80, 443, 53, 0x0150, 0x0300][r[5] as usize % 5],
        ..Default::default()
    };
    k.dl_dst = [2, 0, 0, 0, 0, (r[6] % 5) as u8];
    if r[6].is_multiple_of(3) {
        k.vlan_tci[0] = 0x1000 | (r[7] % 3) as u16;
    }
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[5] = (r[3] % 4) as u8;
    a[15] = (r[4] % 3) as u8;
    k.ipv6_dst = a;
    k
}

fn flip_outside(k: &FlowKey, wc: &FlowKey, noise: &[u64]) -> FlowKey {
    let mut out = *k;
    for (i, w) in out.words_mut().iter_mut().enumerate() {
        *w ^= noise[i % noise.len()] & !wc.words()[i];
    }
    out
}

fn check(set: &RuleSet, keys: &[[u32; 8]], noise: &[u64], wide: bool) -> Result<(), TestCaseError> {
    for r in keys {
        let k = key_near(r);
        let (mut wl, mut wt) = (FlowKey::default(), FlowKey::default());
        let lin = set.lookup_linear(0, &k, &mut wl).map(|r| r.id);
        let tss = set.lookup(0, &k, &mut wt).map(|r| r.id);
        prop_assert_eq!(lin, tss, "key {:?}", k.words());
        let k2 = flip_outside(&k, &wt, noise);
        let (mut a, mut b) = (FlowKey::default(), FlowKey::default());
        prop_assert_eq!(
            set.lookup_linear(0, &k2, &mut a).map(|r| r.id),
            tss,
            "unsound mask"
        );
        prop_assert_eq!(set.lookup(0, &k2, &mut b).map(|r| r.id), tss);
        if wide {
            let narrower = wt.words().iter().zip(wl.words()).any(|(t, l)| t & !l != 0);
            prop_assert!(
                !narrower,
                "index mask {:x?} narrower than scan {:x?}",
                wt.words(),
                wl.words()
            );
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        rng_seed: RngSeed::Fixed(0x7553),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn index_equals_linear_scan_through_changes(
        rules in proptest::collection::vec(any::<[u32; 8]>(), 1..max_rules()),
        changes in proptest::collection::vec((0u8..3, any::<[u32; 8]>()), 0..60),
        keys in proptest::collection::vec(any::<[u32; 8]>(), 40),
        noise in proptest::collection::vec(any::<u64>(), 16),
    ) {
        let mut set = RuleSet::new();
        for r in &rules {
            set.add(&parse_flow(&rule_line(r, false), Require::Actions).unwrap(), 0);
        }
        check(&set, &keys, &noise, false)?;
        for (op, r) in &changes {
            let spec = parse_flow(&rule_line(r, false), Require::Actions).unwrap();
            match op {
                0 => { set.add(&spec, 0); }
                1 => { set.delete(&spec, Selection::Strict, false); }
                _ => { set.modify(&spec, Selection::Loose, false); }
            }
        }
        check(&set, &keys, &noise, false)?;
        // Delete everything a loose selector covers, then check again.
        let sel = parse_flow("ip", Require::NoActions).unwrap();
        set.delete(&sel, Selection::Loose, false);
        check(&set, &keys, &noise, false)?;
    }

    #[test]
    fn masks_as_wide_as_the_scan_when_each_mask_has_one_priority(
        rules in proptest::collection::vec(any::<[u32; 8]>(), 1..max_rules()),
        keys in proptest::collection::vec(any::<[u32; 8]>(), 40),
        noise in proptest::collection::vec(any::<u64>(), 16),
    ) {
        let mut set = RuleSet::new();
        for r in &rules {
            set.add(&parse_flow(&rule_line(r, true), Require::Actions).unwrap(), 0);
        }
        check(&set, &keys, &noise, true)?;
    }

    /// A bulk load (`from_specs`, which indexes in key order) builds the
    /// same set as adding the rules one by one in file order: the same
    /// rules with the same ids (identical rules: the later one stays),
    /// the same lookups and masks.
    #[test]
    fn bulk_load_equals_adding_in_order(
        rules in proptest::collection::vec(any::<[u32; 8]>(), 1..max_rules()),
        keys in proptest::collection::vec(any::<[u32; 8]>(), 40),
    ) {
        let specs: Vec<_> = rules
            .iter()
            .map(|r| parse_flow(&rule_line(r, false), Require::Actions).unwrap())
            .collect();
        let bulk = RuleSet::from_specs(&specs, 0);
        let mut one = RuleSet::new();
        for s in &specs {
            one.add(s, 0);
        }
        let dump = |set: &RuleSet| {
            set.iter().map(|r| (r.id, r.dump(0))).collect::<Vec<_>>()
        };
        prop_assert_eq!(dump(&bulk), dump(&one));
        prop_assert_eq!(bulk.version(), one.version());
        for r in &keys {
            let k = key_near(r);
            let (mut a, mut b) = (FlowKey::default(), FlowKey::default());
            prop_assert_eq!(
                bulk.lookup(0, &k, &mut a).map(|r| r.id),
                one.lookup(0, &k, &mut b).map(|r| r.id)
            );
            prop_assert_eq!(a.words(), b.words());
        }
    }
}
