//! Untrusted tunnel packets from an underlay (IPv4 or IPv6): the first
//! byte picks the protocol (VXLAN, Geneve, GRE), the rest is the frame. Its key is
//! extracted, its outer headers checked and popped: never a panic or a read
//! out of bounds; a frame taken leaves a shorter inner frame whose pending
//! checksum (if any) lies inside it; and that inner frame pushed back into
//! a tunnel header built from what the pop said pops to the same frame and
//! the same metadata (Geneve options through a TLV map of two mappings,
//! one critical).

use sluice_packet::extract::extract;
use sluice_packet::tunnel::{
    pop, push, GeneveOpts, HeaderParams, TlvEntry, TlvMap, TnlHeader, TunnelKind,
};
use sluice_packet::{FlowKey, PacketPool};

thread_local! {
    /// Two Geneve options mapped, one of them critical.
    static MAP: TlvMap = {
        let mut m = TlvMap::default();
        m.add(&TlvEntry::parse_list(
            "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata3",
        ).unwrap()).unwrap();
        m
    };
    static POOL: std::cell::RefCell<PacketPool> = std::cell::RefCell::new(PacketPool::new(2, 2048).unwrap());
}

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    let kind = [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre][usize::from(sel % 3)];
    let map = MAP.with(|m| m.clone());
    POOL.with_borrow_mut(|pool| {
        if frame.len() > pool.max_packet_len() {
            return;
        }
        let mut p = pool.alloc_from(frame).expect("frames are given back");
        let (d, m) = p.data_and_meta_mut();
        let mut key = FlowKey::default();
        if extract(d, 1, m, &mut key).is_err() {
            pool.free(p);
            return;
        }
        let n = p.len();
        match pop(&mut p, kind, &map) {
            Err(_) => pool.free(p),
            Ok(meta) => {
                assert!(p.len() + 14 <= n, "the outer headers went");
                let o = p.meta.offload;
                if o.needs_csum() {
                    assert!(usize::from(o.csum_start) < p.len() || p.is_empty());
                    pool.free(p);
                    return;
                }
                let inner = p.data().to_vec();
                let (d, m) = p.data_and_meta_mut();
                let _ = extract(d, 1, m, &mut key);
                let h = TnlHeader::build(&HeaderParams {
                    kind,
                    eth_src: [2, 0, 0, 0, 0, 1],
                    eth_dst: [2, 0, 0, 0, 0, 2],
                    ip_src: meta.src_ip(),
                    ip_dst: meta.dst_ip(),
                    tos: meta.tos,
                    ttl: meta.ttl,
                    df: true,
                    key: Some(meta.tun_id),
                    dst_port: kind.default_dst_port(),
                    csum: sel & 0x80 != 0,
                    oam: meta.flags & sluice_packet::key::TUN_FLAG_OAM != 0,
                    opts: if kind == TunnelKind::Geneve {
                        GeneveOpts::of_fields(&map, meta.opts.present, &meta.opts.values)
                    } else {
                        GeneveOpts::default()
                    },
                });
                if push(&mut p, &h, 50000) {
                    let (d, m) = p.data_and_meta_mut();
                    extract(d, 1, m, &mut key).unwrap();
                    let again = pop(&mut p, kind, &map).expect("a header Sluice built pops");
                    assert_eq!(p.data(), &inner[..]);
                    assert_eq!(
                        (again.tun_id, again.src_ip(), again.dst_ip(), again.opts),
                        (meta.tun_id, meta.src_ip(), meta.dst_ip(), meta.opts)
                    );
                    assert_eq!(
                        again.flags & sluice_packet::key::TUN_FLAG_OAM,
                        meta.flags & sluice_packet::key::TUN_FLAG_OAM
                    );
                }
                pool.free(p);
            }
        }
    });
}
