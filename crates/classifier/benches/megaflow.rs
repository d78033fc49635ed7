//! Megaflow classifier lookup per 32-packet batch, by number of subtables
//! (masks) and megaflows, against single-key lookups.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice_classifier::megaflow::{Megaflow, MegaflowLimits, MegaflowTable};
use sluice_classifier::{DpAction, Match};
use sluice_packet::FlowKey;

/// `masks` subtables, each a different nw_dst prefix length with `per`
/// megaflows on its own in_port; keys all hit the last-ranked subtable,
/// so every lookup probes every subtable (the worst case ranking fixes).
fn table(masks: u32, per: u32) -> (MegaflowTable, Vec<FlowKey>) {
    let mut t = MegaflowTable::new(MegaflowLimits {
        max_flows: 1 << 22,
        max_masks: 1024,
    });
    let mut keys = Vec::new();
    for m in 0..masks {
        let len = 8 + m;
        let mask = FlowKey {
            in_port: u32::MAX,
            dl_type: 0xffff,
            nw_dst: u32::MAX << (32 - len),
            ..Default::default()
        };
        for i in 0..per {
            let k = FlowKey {
                in_port: m + 1,
                dl_type: 0x0800,
                nw_dst: (i << (32 - len)) | (1 << (31 - len)),
                nw_proto: 17,
                ..Default::default()
            };
            let flow = Megaflow {
                matcher: Match {
                    value: k.masked(&mask),
                    mask,
                },
                actions: std::sync::Arc::from([DpAction::Output(2)]),
                drop: None,
                rules: std::sync::Arc::from([]),
                version: 1,
                packets: 0,
                bytes: 0,
                used_us: 0,
                created_us: 0,
                upcall_packets: 0,
                upcall_bytes: 0,
                credited: (0, 0),
                select_hits: Vec::new(),
                learn: sluice_bridge::macs::Learns::NONE,
                learned: None,
                mac_reads: sluice_classifier::megaflow::MacReads::None,
                fin: None,
            };
            t.insert(flow).unwrap();
            if m == masks - 1 {
                keys.push(k);
            }
        }
    }
    (t, keys)
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("megaflow_lookup_batch");
    for masks in [1u32, 4, 16] {
        let (mut t, keys) = table(masks, 1000);
        let batch: Vec<FlowKey> = (0..32).map(|i| keys[(i * 31) % keys.len()]).collect();
        g.throughput(Throughput::Elements(32));
        g.bench_with_input(BenchmarkId::new("batched", masks), &batch, |b, batch| {
            let mut out = [None; 32];
            b.iter(|| {
                let mut probes = 0;
                t.lookup_batch(batch, u32::MAX, &mut out, &mut probes)
            })
        });
        g.bench_with_input(BenchmarkId::new("one_by_one", masks), &batch, |b, batch| {
            b.iter(|| {
                let mut probes = 0;
                batch
                    .iter()
                    .filter(|k| t.lookup(k, &mut probes).is_some())
                    .count()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
