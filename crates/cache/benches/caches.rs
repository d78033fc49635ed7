//! EMC and SMC lookup cost per packet, hit and miss, at several occupancies.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice_cache::emc::Emc;
use sluice_cache::smc::Smc;
use sluice_cache::CacheRef;
use sluice_packet::FlowKey;

fn keys(n: u32) -> Vec<(FlowKey, u32)> {
    (0..n)
        .map(|i| {
            let k = FlowKey {
                in_port: 1,
                dl_type: 0x0800,
                nw_proto: 17,
                nw_src: i,
                nw_dst: !i,
                tp_src: i as u16,
                tp_dst: 53,
                ..Default::default()
            };
            (k, k.hash())
        })
        .collect()
}

fn emc(c: &mut Criterion) {
    let mut g = c.benchmark_group("emc_lookup");
    for flows in [8u32, 1000, 100_000] {
        let ks = keys(flows);
        let mut emc = Emc::new(8192, 1);
        for (i, (k, h)) in ks.iter().enumerate() {
            emc.insert(
                k,
                *h,
                CacheRef {
                    idx: i as u32,
                    gen: 1,
                },
            );
        }
        g.throughput(Throughput::Elements(32));
        g.bench_with_input(BenchmarkId::from_parameter(flows), &ks, |b, ks| {
            let mut i = 0usize;
            b.iter(|| {
                let mut hits = 0;
                for _ in 0..32 {
                    let (k, h) = &ks[i % ks.len()];
                    hits += emc.lookup(k, *h).is_some() as u32;
                    i += 1;
                }
                hits
            })
        });
    }
    g.finish();
}

fn smc(c: &mut Criterion) {
    let mut g = c.benchmark_group("smc_lookup");
    for flows in [1000u32, 100_000, 1_000_000] {
        let ks = keys(flows);
        let mut smc = Smc::new(1 << 20, true);
        for (i, (_, h)) in ks.iter().enumerate() {
            smc.insert(*h, i as u32);
        }
        g.throughput(Throughput::Elements(32));
        g.bench_with_input(BenchmarkId::from_parameter(flows), &ks, |b, ks| {
            let mut i = 0usize;
            b.iter(|| {
                let mut hits = 0;
                for _ in 0..32 {
                    hits += smc.lookup(ks[i % ks.len()].1).is_some() as u32;
                    i += 1;
                }
                hits
            })
        });
    }
    g.finish();
}

criterion_group!(benches, emc, smc);
criterion_main!(benches);
