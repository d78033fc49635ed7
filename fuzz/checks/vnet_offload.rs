//! Untrusted virtio-net headers and frames, as a vnet-header port
//! receives them: decode the header, parse the frame, then carry out the
//! request the way the output stage does (segment or complete the
//! checksum). A header whose GSO type has a UDP-tunnel bit is read in its
//! 24-byte tunnel form (a tap with UDP-tunnel GSO), and written back as a
//! tap would send the frame. Nothing may panic, and every frame goes back
//! to the pool.

use sluice_packet::extract::extract;
use sluice_packet::key::FlowKey;
use sluice_packet::offload::{
    complete_csum, from_vnet_hdr, from_vnet_hdr_tnl, needs_segmenting, vnet_hdr_tnl_of, Segmenter,
    VNET_HDR_LEN, VNET_HDR_TNL_LEN,
};
use sluice_packet::PacketPool;

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    if data.len() < VNET_HDR_LEN {
        return;
    }
    let tunnel = data[1] & 0x60 != 0;
    if tunnel && data.len() < VNET_HDR_TNL_LEN {
        return;
    }
    let (h, frame) = data.split_at(if tunnel {
        VNET_HDR_TNL_LEN
    } else {
        VNET_HDR_LEN
    });
    let parsed = if tunnel {
        from_vnet_hdr_tnl(h.try_into().expect("24 bytes"))
    } else {
        from_vnet_hdr(h.try_into().expect("10 bytes"))
    };
    let Ok(offload) = parsed else {
        return;
    };
    let mut pool = PacketPool::new(256, 2048).expect("pool");
    pool.add_big_frames(2, 1 << 17).expect("big frames");
    let Some(mut pkt) = pool.alloc_from(frame) else {
        return;
    };
    let mut key = FlowKey::default();
    let (bytes, meta) = pkt.data_and_meta_mut();
    let _ = extract(bytes, 1, meta, &mut key);
    pkt.meta.offload = offload;
    let _ = vnet_hdr_tnl_of(&pkt);
    if needs_segmenting(&pkt) {
        if let Ok(mut seg) = Segmenter::new(&pkt) {
            while let Some(r) = seg.next_segment(&pkt, &mut pool) {
                match r {
                    Ok(s) => pool.free(s),
                    Err(_) => break,
                }
            }
        }
    } else {
        let _ = complete_csum(&mut pkt);
    }
    pool.free(pkt);
    assert_eq!(pool.available(), pool.capacity());
}
