//! Untrusted packet bytes: key extraction, then every header rewrite,
//! VLAN, MPLS and PBB push/pop, TTL copy and ND rewrite on the parsed
//! packet (truncated labels, I-TAGs and ND options included). Must never panic or read out of
//! bounds; the key must be the same after a second extraction of the
//! unchanged bytes.

use sluice_packet::encap;
use sluice_packet::extract::extract;
use sluice_packet::ndisc::{self, NdField};
use sluice_packet::rewrite::{self, ArpField, FragRewrites, PortField};
use sluice_packet::{FlowKey, PacketMeta, PacketPool};

thread_local! {
    // One pool for the whole run, as a datapath thread has: a frame that
    // is not given back shows up as an allocation failure next time.
    static POOL: std::cell::RefCell<PacketPool> = std::cell::RefCell::new(PacketPool::new(1, 2048).unwrap());
}

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let mut key = FlowKey::default();
    let mut meta = PacketMeta::default();
    if extract(data, 1, &mut meta, &mut key).is_err() {
        assert!(data.len() < 14);
        return;
    }
    let mut again = FlowKey::default();
    let mut meta2 = PacketMeta::default();
    extract(data, 1, &mut meta2, &mut again).unwrap();
    assert_eq!(key, again);
    POOL.with_borrow_mut(|pool| rewrite_all(pool, data, meta));
}

fn rewrite_all(pool: &mut PacketPool, data: &[u8], meta: PacketMeta) {
    if data.len() > pool.max_packet_len() {
        return;
    }
    let mut p = pool
        .alloc_from(data)
        .expect("the frame was given back last time");
    p.meta = meta;
    rewrite::set_eth_src(&mut p, [1; 6]);
    rewrite::set_ipv4_src(&mut p, 0x0a00_0001, FragRewrites::Ovs);
    rewrite::set_ipv4_dst(&mut p, 0x0a00_0002, FragRewrites::Ovs);
    rewrite::set_ipv6_src(&mut p, [2; 16], FragRewrites::Ovs);
    rewrite::set_ipv6_dst(&mut p, [3; 16], FragRewrites::Ovs);
    rewrite::set_ipv6_label(&mut p, 0x12345);
    rewrite::set_ip_tos(&mut p, 0xb8, 0xfc);
    rewrite::set_ip_ttl(&mut p, 7);
    rewrite::set_tp_port(&mut p, PortField::Src, 1);
    rewrite::set_tp_port(&mut p, PortField::Dst, 2);
    rewrite::set_icmp(&mut p, PortField::Src, 3);
    rewrite::set_arp(&mut p, ArpField::Tpa(9));
    rewrite::push_vlan(&mut p, 0x8100, 5);
    rewrite::set_vlan_tci(&mut p, 6);
    rewrite::pop_vlan(&mut p);
    rewrite::pop_vlan(&mut p);
    rewrite::map_dscp(&mut p, |d| d ^ 1);
    ndisc::set_nd(&mut p, NdField::Target([4; 16]));
    ndisc::set_nd(&mut p, NdField::Sll([5; 6]));
    ndisc::set_nd(&mut p, NdField::Tll([6; 6]));
    encap::set_mpls_lse(&mut p, 0x0006_4140);
    encap::copy_ttl_in(&mut p);
    encap::copy_ttl_out(&mut p);
    encap::pop_mpls(&mut p, 0x0800);
    encap::set_pbb_isid(&mut p, 7);
    encap::pop_pbb(&mut p);
    encap::push_mpls(&mut p, 0x8847, 0x100);
    encap::push_pbb(&mut p, 0x88e7, 0);
    pool.free(p);
}
