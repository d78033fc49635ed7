//! Tests of the pool and of packets in its frames.

use super::*;

#[test]
fn fresh_frames_are_coloured_so_a_burst_spreads_over_l1_sets() {
    for frame_size in [256, 1024, 2048, 4096, 16384] {
        let mut pool = PacketPool::new(64, frame_size).unwrap();
        let pkts: Vec<_> = (0..32).map(|_| pool.alloc().unwrap()).collect();
        let mut sets = std::collections::HashSet::new();
        for p in &pkts {
            assert!(p.headroom() >= HEADROOM);
            assert!(
                p.tailroom() >= pool.max_packet_len(),
                "every fresh frame holds the largest packet ({frame_size})"
            );
            // Set of the first data line in an 8-way 32 KiB L1 (64 sets).
            let addr = p.frame_index() as usize * frame_size + p.data_offset();
            sets.insert(addr / 64 % 64);
        }
        let want = if frame_size >= MIN_COLOURED_FRAME {
            4
        } else {
            1
        };
        assert!(sets.len() >= want, "{frame_size}: {} sets", sets.len());
        for p in pkts {
            pool.free(p);
        }
    }
    // A standard frame still fits a double-tagged 1518-byte frame.
    assert!(
        PacketPool::new(1, DEFAULT_FRAME_SIZE)
            .unwrap()
            .max_packet_len()
            >= 1526
    );
}

#[test]
fn bulk_alloc_hands_out_what_alloc_would_as_far_as_room_and_frames_go() {
    let mut one = PacketPool::new(40, 2048).unwrap();
    let mut bulk = PacketPool::new(40, 2048).unwrap();
    let mut b = crate::PacketBatch::new();
    b.push(bulk.alloc().unwrap()).unwrap();
    let _first = one.alloc().unwrap();
    assert_eq!(
        bulk.alloc_bulk(&mut b, 100),
        31,
        "as far as the batch has room"
    );
    for p in &b.as_slice()[1..] {
        let q = one.alloc().unwrap();
        assert_eq!(p.frame_index(), q.frame_index(), "same frames, same order");
        assert_eq!(p.headroom(), q.headroom());
        assert!(p.is_empty());
        assert_eq!(p.meta, PacketMeta::default());
    }
    assert_eq!(bulk.available(), 8);
    // Keep the first 10; the rest go back.
    b.free_from(10, &mut bulk);
    assert_eq!((b.len(), bulk.available()), (10, 30));
    b.free_from(10, &mut bulk);
    assert_eq!(
        (b.len(), bulk.available()),
        (10, 30),
        "nothing past the end"
    );
    assert_eq!(bulk.alloc_bulk(&mut b, 5), 5);
    b.free_all(&mut bulk);
    assert_eq!(bulk.available(), 40);
    // An empty pool gives what it has.
    let mut small = PacketPool::new(3, 256).unwrap();
    assert_eq!(small.alloc_bulk(&mut b, 32), 3);
    assert_eq!(small.alloc_bulk(&mut b, 32), 0);
    b.free_all(&mut small);
}

#[test]
fn frame_copies_are_exact_at_every_length() {
    // Every length around the copy's size classes (16/32/64/128 and
    // the memcpy fallback), from a source with distinct bytes.
    let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut pool = PacketPool::new(4, 512).unwrap();
    for n in 0..=300 {
        let p = pool.alloc_from(&src[..n]).unwrap();
        assert_eq!(p.data(), &src[..n], "length {n}");
        let c = pool.clone_packet(&p).unwrap();
        assert_eq!(c.data(), &src[..n], "clone, length {n}");
        pool.free(p);
        pool.free(c);
    }
    assert_eq!(pool.available(), 4);
}

#[test]
fn alloc_free_cycles_every_frame() {
    let mut pool = PacketPool::new(4, 256).unwrap();
    let pkts: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
    assert!(pool.alloc().is_none(), "pool of 4 hands out 4");
    let mut frames: Vec<_> = pkts.iter().map(|p| p.frame_index()).collect();
    frames.sort();
    assert_eq!(frames, vec![0, 1, 2, 3]);
    for p in pkts {
        pool.free(p);
    }
    assert_eq!(pool.available(), 4);
}

#[test]
fn frames_are_disjoint() {
    let mut pool = PacketPool::new(3, 256).unwrap();
    let mut a = pool.alloc_from(&[1u8; 100]).unwrap();
    let b = pool.alloc_from(&[2u8; 128]).unwrap();
    a.data_mut().fill(9);
    assert!(b.data().iter().all(|&x| x == 2));
    assert_eq!(a.len(), 100);
    pool.free(a);
    pool.free(b);
}

#[test]
fn data_and_meta_are_both_writable_views_of_one_packet() {
    let mut pool = PacketPool::new(2, 256).unwrap();
    let mut p = pool.alloc_from(&[5u8; 60]).unwrap();
    let (data, meta) = p.data_and_meta_mut();
    assert_eq!(data, &[5u8; 60][..]);
    meta.l3_ofs = 14;
    assert_eq!(p.meta.l3_ofs, 14);
    assert_eq!(p.data(), &[5u8; 60][..], "the bytes are untouched");
    pool.free(p);
}

#[test]
fn a_batch_freed_whole_returns_every_frame_and_refuses_strangers() {
    let mut pool = PacketPool::new(4, 256).unwrap();
    let mut b = crate::PacketBatch::new();
    for _ in 0..4 {
        b.push(pool.alloc().unwrap()).unwrap();
    }
    b.free_all(&mut pool);
    assert!(b.is_empty());
    assert_eq!(pool.available(), 4);
    let mut other = PacketPool::new(1, 256).unwrap();
    b.push(other.alloc().unwrap()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.free_all(&mut pool)));
    assert!(r.is_err(), "a packet of another pool is refused");
}

#[test]
fn rejects_bad_geometry_and_oversize() {
    assert!(PacketPool::new(4, 1000).is_err());
    assert!(PacketPool::new(0, 2048).is_err());
    let mut pool = PacketPool::new(1, 256).unwrap();
    assert!(
        pool.alloc_from(&[0u8; 200]).is_none(),
        "256 - 128 headroom = 128 max"
    );
    assert_eq!(pool.available(), 1, "a failed alloc_from returns its frame");
}

#[test]
fn insert_and_remove_gap_keep_bytes() {
    let mut pool = PacketPool::new(1, 256).unwrap();
    let mut p = pool.alloc_from(&[1, 2, 3, 4, 5, 6]).unwrap();
    assert!(p.insert_gap(2, 4));
    assert_eq!(p.len(), 10);
    assert_eq!(&p.data()[..2], &[1, 2]);
    assert_eq!(&p.data()[6..], &[3, 4, 5, 6]);
    assert!(p.remove_range(2, 4));
    assert_eq!(p.data(), &[1, 2, 3, 4, 5, 6]);
    assert!(!p.remove_range(4, 3), "past the end");
    assert!(!p.insert_gap(0, HEADROOM + 10), "more than the headroom");
    pool.free(p);
}

#[test]
fn clone_copies_bytes_and_meta() {
    let mut pool = PacketPool::new(2, 256).unwrap();
    let mut p = pool.alloc_from(&[7; 60]).unwrap();
    p.meta.in_port = 3;
    let c = pool.clone_packet(&p).unwrap();
    assert_eq!(c.data(), p.data());
    assert_eq!(c.meta.in_port, 3);
    assert_ne!(c.frame_index(), p.frame_index());
    pool.free(p);
    pool.free(c);
}

#[test]
#[should_panic(expected = "does not belong")]
fn free_to_wrong_pool_panics() {
    let mut a = PacketPool::new(1, 256).unwrap();
    let mut b = PacketPool::new(1, 256).unwrap();
    let p = a.alloc().unwrap();
    b.free(p);
}

#[test]
fn pool_dropped_with_packet_outstanding_keeps_it_valid() {
    let mut pool = PacketPool::new(1, 256).unwrap();
    let p = pool.alloc_from(&[5; 10]).unwrap();
    drop(pool);
    assert_eq!(p.data(), &[5; 10]);
}

#[test]
fn big_frames_take_what_regular_frames_cannot_and_go_back() {
    let mut pool = PacketPool::new(8, 2048).unwrap();
    assert_eq!(
        pool.alloc_for(5000).map(|p| p.len()),
        None,
        "no big frames yet"
    );
    assert!(
        pool.add_big_frames(2, 2048).is_err(),
        "not larger than a frame"
    );
    pool.add_big_frames(2, 1 << 17).unwrap();
    assert_eq!(pool.max_len(), (1 << 17) - HEADROOM);
    let small = pool.alloc_for(100).unwrap();
    assert!(!pool.is_big(&small));
    let big = pool.alloc_from(&vec![7u8; 9000]).unwrap();
    assert!(pool.is_big(&big) && big.data() == vec![7u8; 9000].as_slice());
    let copy = pool.clone_packet(&big).unwrap();
    assert!(pool.is_big(&copy));
    assert!(pool.alloc_for(9000).is_none(), "both big frames in use");
    assert!(
        pool.add_big_frames(4, 1 << 16).is_err(),
        "big frames in use"
    );
    for p in [small, big, copy] {
        pool.free(p);
    }
    assert_eq!(pool.big_frames(), (2, 2));
    assert_eq!(pool.available(), pool.capacity());
    // Replacing them gives the old region back and starts afresh.
    pool.add_big_frames(4, 1 << 16).unwrap();
    assert_eq!(pool.big_frames(), (4, 4));
    assert!(pool.alloc_for((1 << 16) - HEADROOM + 1).is_none());
}
