//! An untrusted guest's split virtqueue, as a vhost-user port meets it:
//! the input is the guest's memory (descriptor table, available ring,
//! buffers) and a byte of choices (header length, `MRG_RXBUF`,
//! `EVENT_IDX`). The ring is used as a transmit queue (every available
//! chain read out) and as a receive queue (frames written in). Nothing
//! may panic or touch memory outside the guest's, and what the device
//! tells the guest (its used index) must be what it did.

use sluice_port::vhost::guest::GuestMap;
use sluice_port::vhost::ring::{chain_len, read_chain, write_frame, MAX_HDR_LEN};
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
                let hdr = [0u8; MAX_HDR_LEN];
                match write_frame(&mut r, &mut avail, &hdr[..hdr_len], &frame, mergeable) {
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
                match read_chain(&r, head, &mut hdr[..hdr_len], &mut buf) {
                    Ok(n) => assert!(n <= len),
                    Err(_) => break,
                }
                r.push_used(head, 0);
            }
            r.publish();
            let _ = r.wants_interrupt();
            assert_eq!(used_idx(r.map()), r.next_used());
        }
    }
}
