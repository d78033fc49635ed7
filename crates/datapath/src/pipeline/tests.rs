use super::*;

/// Groups as the plain search makes them: first-arrival order, packets
/// in arrival order.
fn reference_groups(targets: &[Target]) -> Vec<(Target, Vec<u8>)> {
    let mut groups: Vec<(Target, Vec<u8>)> = Vec::new();
    for (i, &t) in targets.iter().enumerate() {
        match groups.iter_mut().find(|g| g.0 == t) {
            Some(g) => g.1.push(i as u8),
            None => groups.push((t, vec![i as u8])),
        }
    }
    groups
}

#[test]
fn grouping_through_the_index_matches_a_plain_search() {
    use sluice_packet::PacketPool;
    let mut pool = PacketPool::new(64, 256).unwrap();
    let mut p = Pipeline::new(16, CacheConfig::default(), 1, 64);
    // Slot indexes that share index entries (5, 69, 133 and 197 all
    // end in the same 6 bits), other generations of one slot, temps,
    // repeats near and far.
    let mega = |idx, gen| Target::mega(FlowRef { idx, gen });
    let pattern = [
        mega(5, 1),
        mega(69, 1),
        mega(5, 1),
        Target::temp(5),
        mega(133, 2),
        mega(5, 2),
        mega(69, 1),
        mega(197, 1),
        mega(7, 1),
        Target::temp(0),
        mega(133, 2),
        mega(197, 1),
    ];
    for round in 0..3 {
        let mut batch = PacketBatch::new();
        for i in 0..BATCH_SIZE {
            batch.push(pool.alloc_from(&[0u8; 60]).unwrap()).unwrap();
            p.targets[i] = pattern[(i * (round + 1)) % pattern.len()];
        }
        p.group_packets(&batch, u32::MAX);
        let want = reference_groups(&p.targets);
        let got: Vec<(Target, Vec<u8>)> = p
            .groups
            .iter()
            .map(|g| (g.target, g.pkts.to_vec()))
            .collect();
        assert_eq!(got.len(), want.len(), "round {round}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "round {round}");
        }
        for (i, &g) in p.group_of.iter().enumerate() {
            assert_eq!(p.groups[g as usize].target, p.targets[i]);
        }
        assert!(
            p.group_index.iter().all(|e| e.0 == Target::NONE),
            "the index is empty again after the batch"
        );
        batch.free_all(&mut pool);
    }
}

#[test]
fn targets_pack_and_unpack() {
    let r = FlowRef {
        idx: (1 << 31) - 1,
        gen: u32::MAX,
    };
    assert!(matches!(Target::mega(r).kind(), TargetKind::Mega(x) if x == r));
    let r0 = FlowRef { idx: 0, gen: 0 };
    assert!(matches!(Target::mega(r0).kind(), TargetKind::Mega(x) if x == r0));
    assert!(matches!(Target::temp(31).kind(), TargetKind::Temp(31)));
    assert!(matches!(Target::NONE.kind(), TargetKind::None));
    assert_ne!(Target::temp(0), Target::mega(r0));
    assert_ne!(Target::temp(255), Target::NONE);
    assert_ne!(Target::mega(r), Target::NONE);
}
