//! An untrusted guest's split virtqueue, as a vhost-user port meets it:
//! the input is the guest's memory (descriptor table, available ring,
//! buffers) and a byte of choices (header length, `MRG_RXBUF`,
//! `EVENT_IDX`). The ring is used as a transmit queue (every available
//! chain read out) and as a receive queue (frames written in). Nothing
//! may panic or touch memory outside the guest's, and what the device
//! tells the guest (its used index) must be what it did; a chain that
//! `read_single` reads whole reads the same through `read_chain`. A third pass
//! writes frames the burst's way (a chain reserved whole for a frame
//! first, `reserve_single`, then written) beside the general way on a
//! copy of the same memory: the two memories stay the same.

use sluice_port::vhost::guest::GuestMap;
use sluice_port::vhost::ring::{
    chain_len, read_chain, read_single, reserve_single, write_frame, write_single, NetHdr,
    MAX_HDR_LEN,
};
use sluice_port::vhost::split::{RingAddrs, SplitRing};

/// Where the model guest's memory starts (below it: nothing mapped).
const BASE: u64 = 0x10000;
const MEM: usize = 0x10000;
const SIZE: u16 = 16;

fn ring(map: GuestMap, event_idx: bool) -> SplitRing {
    let addrs = RingAddrs {
        size: SIZE,
        desc: BASE,
        avail: BASE + 0x100,
        used: BASE + 0x200,
    };
    SplitRing::new(map, &addrs, 0, 0, event_idx).expect("a ring inside memory")
}

fn used_idx(map: &GuestMap) -> u16 {
    let mut b = [0u8; 2];
    assert!(map.read(BASE + 0x202, &mut b));
    u16::from_le_bytes(b)
}

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let Some((&choice, image)) = data.split_first() else {
        return;
    };
    let hdr_len = if choice & 1 != 0 { MAX_HDR_LEN } else { 10 };
    let mergeable = choice & 2 != 0;
    let event_idx = choice & 4 != 0;
    let image = &image[..image.len().min(MEM)];
    for as_receive in [false, true] {
        let map = GuestMap::anonymous(&[(BASE, MEM)]).expect("anonymous memory");
        assert!(map.write(BASE, image));
        let mut r = ring(map, event_idx);
        for taken in 0..4 * SIZE {
            let Ok(mut avail) = r.avail() else {
                break;
            };
            if avail.is_empty() {
                break;
            }
            let before = r.next_used();
            if as_receive {
                let frame = vec![0x5a; 60 + 97 * usize::from(taken % 23)];
                let hdr = NetHdr::new(&image[..image.len().min(MAX_HDR_LEN)], hdr_len);
                match write_frame(&mut r, &mut avail, hdr, &frame, mergeable) {
                    Ok(true) => r.consume(&avail),
                    Ok(false) | Err(_) => {
                        // Nothing taken, nothing used.
                        assert_eq!(r.next_used(), before);
                        break;
                    }
                }
            } else {
                let Some(Ok(head)) = r.next_head(&mut avail) else {
                    break;
                };
                r.consume(&avail);
                let Ok(len) = chain_len(&r, head, false) else {
                    break;
                };
                let len = (len as usize).saturating_sub(hdr_len).min(1 << 20);
                let mut hdr = [0u8; MAX_HDR_LEN];
                let mut buf = vec![0u8; len];
                let (mut h1, mut b1) = ([0u8; MAX_HDR_LEN], vec![0u8; len]);
                let single = read_single(&r, head, &mut h1[..hdr_len], &mut b1);
                match read_chain(&r, head, &mut hdr[..hdr_len], &mut buf) {
                    Ok(n) => {
                        assert!(n <= len);
                        // A chain read whole the short way reads the same.
                        if let Some(m) = single {
                            assert_eq!((m, &h1, &b1[..m]), (n, &hdr, &buf[..n]));
                        }
                    }
                    Err(_) => {
                        assert_eq!(single, None, "a chain one way refuses, the other reads");
                        break;
                    }
                }
                r.push_used(head, 0);
            }
            r.publish();
            let _ = r.wants_interrupt();
            assert_eq!(used_idx(r.map()), r.next_used());
        }
    }
    single_beside_general(image, hdr_len, mergeable, event_idx);
}

/// Frames written with `reserve_single` + `write_single` wherever a chain
/// takes one whole (else with `write_frame`) into one copy of the guest's
/// memory, and with `write_frame` alone into another: the same bytes, the
/// same used entries.
fn single_beside_general(image: &[u8], hdr_len: usize, mergeable: bool, event_idx: bool) {
    let maps = [(); 2].map(|_| {
        let map = GuestMap::anonymous(&[(BASE, MEM)]).expect("anonymous memory");
        assert!(map.write(BASE, image));
        map
    });
    let [a, b] = maps;
    let (mut ra, mut rb) = (ring(a, event_idx), ring(b, event_idx));
    let hdr = NetHdr::new(&image[..image.len().min(MAX_HDR_LEN)], hdr_len);
    for taken in 0..4 * SIZE {
        let (Ok(mut aa), Ok(mut ab)) = (ra.avail(), rb.avail()) else {
            break;
        };
        let frame = vec![0xa5; 60 + 97 * usize::from(taken % 23)];
        let general = write_frame(&mut rb, &mut ab, hdr, &frame, mergeable);
        match reserve_single(&ra, &mut aa, hdr_len + frame.len()) {
            Some(slot) => {
                assert_eq!(write_single(&mut ra, slot, hdr, &frame), Ok(()));
                assert_eq!(
                    general,
                    Ok(true),
                    "a chain taken whole is one the general way takes"
                );
            }
            None => assert_eq!(
                write_frame(&mut ra, &mut aa, hdr, &frame, mergeable),
                general
            ),
        }
        if general != Ok(true) {
            break;
        }
        ra.consume(&aa);
        rb.consume(&ab);
        ra.publish();
        rb.publish();
        assert_eq!(ra.next_used(), rb.next_used());
        let (mut ma, mut mb) = (vec![0u8; MEM], vec![0u8; MEM]);
        assert!(ra.map().read(BASE, &mut ma) && rb.map().read(BASE, &mut mb));
        assert!(ma == mb, "the two ways wrote different bytes");
    }
}
