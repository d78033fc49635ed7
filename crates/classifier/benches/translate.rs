//! One translation (an upcall's work in the rules) of a packet through
//! `in_port=1,actions=output:2` on one bridge, against the same forward
//! across two bridges joined by a patch port (`bench/…` `patch-forward`):
//! and against the same two rules in two tables of one bridge: what a
//! patch crossing adds to a packet that misses every cache.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_classifier::xlate::{dp_port, translate, BridgeView, Translation, XlateEnv};
use sluice_classifier::{parse_flow_file, PatchPort, RuleSet};
use sluice_packet::FlowKey;

fn rules(text: &str) -> RuleSet {
    RuleSet::from_specs(&parse_flow_file(text, None).expect("rules parse"), 0)
}

fn key(in_port: u32) -> FlowKey {
    FlowKey {
        in_port,
        dl_type: 0x0800,
        nw_proto: 17,
        nw_src: 0x0a00_0001,
        nw_dst: 0x0a00_0002,
        nw_ttl: 64,
        tp_src: 1000,
        tp_dst: 2000,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    let single = rules("in_port=1,actions=output:2\n");
    let ports = [1, 2];
    let mut t = Translation::default();
    let k = key(1);
    g.bench_function("port-forward", |b| {
        b.iter(|| {
            translate(XlateEnv::single(&single, &ports), &k, &mut t, false);
            std::hint::black_box(&t);
        })
    });

    // The same two rules in one bridge, the second in table 1: what the
    // crossing adds is patch-forward's time over this one's.
    let tables = rules("in_port=1,actions=resubmit(,1)\ntable=1,in_port=1,actions=output:2\n");
    g.bench_function("table-forward", |b| {
        b.iter(|| {
            translate(XlateEnv::single(&tables, &ports), &k, &mut t, false);
            std::hint::black_box(&t);
        })
    });

    let mut first = rules("in_port=1,actions=output:3\n");
    first.set_patch_ports(vec![PatchPort {
        port: 3,
        peer: 1,
        peer_port: 1,
    }]);
    let mut second = rules("in_port=1,actions=output:2\n");
    second.share_datapath_state(&first);
    second.set_patch_ports(vec![PatchPort {
        port: 1,
        peer: 0,
        peer_port: 3,
    }]);
    let dp_ports = [1, 3, dp_port(1, 1), dp_port(1, 2)];
    let ports0 = BridgeView::ports_of(0, &dp_ports, &first);
    let ports1 = BridgeView::ports_of(1, &dp_ports, &second);
    let others = [
        None,
        Some(BridgeView {
            rules: Arc::new(second),
            ports: ports1,
        }),
    ];
    let env = XlateEnv {
        rules: &first,
        ports: &ports0,
        bridges: &others,
        bridge: 0,
    };
    translate(env, &k, &mut t, false);
    assert_eq!(
        t.actions.len(),
        1,
        "the crossing's translation: {:?}",
        t.actions
    );
    g.bench_function("patch-forward", |b| {
        b.iter(|| {
            translate(env, &k, &mut t, false);
            std::hint::black_box(&t);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
