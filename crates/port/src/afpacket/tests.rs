//! AF_PACKET ports over real veth pairs (root).

use super::*;
use sluice_packet::build::{Frame, L4};
use std::process::Command;

/// A veth pair in the root namespace, deleted on drop (needs root).
pub(crate) struct Veth(pub String, pub String);

impl Veth {
    pub(crate) fn new(tag: &str) -> Veth {
        let id = std::process::id() % 100_000;
        let (a, b) = (format!("u{id}{tag}a"), format!("u{id}{tag}b"));
        let _ = Command::new("ip").args(["link", "del", &a]).output();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip link add {a} type veth peer name {b} && \
                 sysctl -qw net.ipv6.conf.{a}.disable_ipv6=1 net.ipv6.conf.{b}.disable_ipv6=1"
            ))
            .output()
            .expect("ip");
        assert!(out.status.success(), "veth (needs root): {out:?}");
        Veth(a, b)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

/// Operstate reads "up" a moment before the kernel swaps in the real
/// qdisc, and the placeholder drops: probes from `tx` until one reaches
/// `rx` (10 s at most), then reads late copies. Returns the probes sent.
fn wait_for_link(tx: &mut AfPacketPort, rx: &mut AfPacketPort, pool: &mut PacketPool) -> u64 {
    let probe = Frame::ipv4([10, 0, 0, 9], [10, 0, 0, 9], L4::Udp { src: 9, dst: 9 }).build();
    let until = Instant::now() + std::time::Duration::from_secs(10);
    let mut probes = 0;
    'probe: while Instant::now() < until {
        let mut b = PacketBatch::new();
        b.push(pool.alloc_from(&probe).unwrap()).unwrap();
        probes += tx.tx_burst(pool, &mut b) as u64;
        tx.flush(pool).unwrap();
        for _ in 0..20 {
            let mut b = PacketBatch::new();
            rx.rx_burst(pool, &mut b, 2);
            let n = b.len();
            b.drain().for_each(|p| pool.free(p));
            if n > 0 {
                break 'probe;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    // Late copies of the probe, if any, are read and counted here.
    std::thread::sleep(std::time::Duration::from_millis(50));
    loop {
        let mut b = PacketBatch::new();
        rx.rx_burst(pool, &mut b, 2);
        if b.is_empty() {
            break;
        }
        b.drain().for_each(|p| pool.free(p));
    }
    probes
}

fn frames() -> Vec<Vec<u8>> {
    (0..100u16)
        .map(|i| {
            let f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 });
            if i % 4 == 0 {
                f.vlan(0x8100, 0x2000 | 100)
            } else {
                f
            }
            .build()
        })
        .collect()
}

#[test]
fn frames_cross_a_veth_pair_through_both_rings_byte_for_byte() {
    cross_a_veth_pair("p", true);
}

#[test]
fn frames_cross_a_veth_pair_through_plain_rings_byte_for_byte() {
    cross_a_veth_pair("q", false);
}

fn cross_a_veth_pair(tag: &str, vnet: bool) {
    let v = Veth::new(tag);
    let opts = AfPacketOptions {
        vnet,
        ..Default::default()
    };
    let mut tx = AfPacketPort::open("a", &v.0, opts).unwrap();
    let mut rx = AfPacketPort::open("b", &v.1, opts).unwrap();
    let mut pool = PacketPool::new(512, 2048).unwrap();
    let probes = wait_for_link(&mut tx, &mut rx, &mut pool);
    let (tx0, rx0) = (tx.stats(), rx.stats());
    assert!(rx0.rx_packets > 0, "no probe crossed the veth in 10 s");
    assert!(tx0.tx_packets == probes);
    let want = frames();
    for chunk in want.chunks(32) {
        let mut b = PacketBatch::new();
        for f in chunk {
            b.push(pool.alloc_from(f).unwrap()).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut pool, &mut b), chunk.len());
    }
    let mut got = Vec::new();
    let until = Instant::now() + std::time::Duration::from_secs(5);
    while got.len() < want.len() && Instant::now() < until {
        tx.tx_drain(&mut pool);
        let mut b = PacketBatch::new();
        rx.rx_burst(&mut pool, &mut b, 2);
        for p in b.drain() {
            assert!(p.meta.has_hash == 0, "TPACKET_V2 slots carry no hash");
            got.push(p.data().to_vec());
            pool.free(p);
        }
    }
    assert_eq!(
        got.len(),
        want.len(),
        "frames lost; port warnings: {:?} {:?}",
        tx.warnings(),
        rx.warnings()
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}: VLAN tags put back, in order");
    }
    tx.flush(&mut pool).unwrap();
    assert_eq!(tx.stats().tx_packets - tx0.tx_packets, 100);
    let kicks = tx.stats().tx_kicks - tx0.tx_kicks;
    assert!((4..100).contains(&kicks), "batched kicks: {kicks}");
    assert_eq!(rx.stats().rx_packets - rx0.rx_packets, 100);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_missing_interface_is_a_clear_error() {
    let e = AfPacketPort::open("x", "no-such-if7", AfPacketOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("no network interface"), "{e}");
}

/// Super-frames longer than an rx slot come whole from the socket's queue
/// (`TP_STATUS_COPY`), in order among the frames that fit their slots,
/// with their virtio-net header and VLAN tag.
#[test]
fn super_frames_longer_than_a_slot_come_whole_and_in_order() {
    let v = Veth::new("g");
    let opts = AfPacketOptions::default();
    assert!(opts.vnet);
    let mut tx = AfPacketPort::open("a", &v.0, opts).unwrap();
    let mut rx = AfPacketPort::open("b", &v.1, opts).unwrap();
    let mut pool = PacketPool::new(512, 2048).unwrap();
    pool.add_big_frames(16, 1 << 17).unwrap();
    // A super-frame (TCP, 20,000 bytes of payload, 1,448 a segment,
    // checksum partial) or a small UDP frame; every third one tagged.
    let make = |pool: &mut PacketPool, i: u16| {
        let big = i.is_multiple_of(2);
        let f = if big {
            Frame::ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                L4::Tcp {
                    src: 5000 + i,
                    dst: 80,
                    flags: 0x10,
                },
            )
            .payload(&vec![i as u8; 20_000])
        } else {
            Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 })
        };
        let tagged = i.is_multiple_of(3);
        let bytes = if tagged { f.vlan(0x8100, 100) } else { f }.build();
        let mut p = pool.alloc_for(bytes.len()).unwrap();
        assert!(p.fill_from(&bytes));
        if big {
            let l4 = 14 + if tagged { 4 } else { 0 } + 20;
            p.meta.offload = Offload {
                flags: Offload::NEEDS_CSUM | Offload::GSO_TCPV4,
                gso_size: 1448,
                csum_start: l4 as u16,
                csum_offset: 16,
            };
        }
        (bytes, p.meta.offload, p)
    };
    wait_for_link(&mut tx, &mut rx, &mut pool);
    let mut want = Vec::new();
    let rx0 = rx.stats();
    let mut b = PacketBatch::new();
    for i in 0..12u16 {
        let (bytes, o, p) = make(&mut pool, i);
        want.push((bytes, o));
        b.push(p).unwrap();
    }
    assert_eq!(tx.tx_burst(&mut pool, &mut b), 12);
    tx.flush(&mut pool).unwrap();
    let mut got = Vec::new();
    let until = Instant::now() + std::time::Duration::from_secs(5);
    while got.len() < want.len() && Instant::now() < until {
        let mut b = PacketBatch::new();
        rx.rx_burst(&mut pool, &mut b, 2);
        for p in b.drain() {
            got.push((p.data().to_vec(), p.meta.offload));
            pool.free(p);
        }
    }
    assert_eq!(got.len(), want.len(), "warnings: {:?}", rx.warnings());
    for (i, ((g, go), (w, wo))) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.len(), w.len(), "frame {i}");
        assert_eq!(g, w, "frame {i}: whole, tag put back, in order");
        assert_eq!(go.gso(), wo.gso(), "frame {i}");
        if wo.gso() != 0 {
            assert_eq!(go.gso_size, 1448);
            assert_eq!(go.csum_start, wo.csum_start, "frame {i}");
        }
    }
    let s = rx.stats();
    assert_eq!(s.rx_gso_packets - rx0.rx_gso_packets, 6);
    assert_eq!(s.rx_packets - rx0.rx_packets, 12);
    assert_eq!(pool.available(), pool.capacity());
}
