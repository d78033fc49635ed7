//! The DPDK port on DPDK's software devices (`net_pcap`, `net_null`), with
//! or without hugepages: zero copy from rx to tx, packets that cross to and
//! from other ports, several queues, and mbuf exhaustion.

use super::*;
use crate::pcap::{write_all, PcapReader};
use sluice_packet::build::{Frame, L4};

fn udp_frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 }).build())
        .collect()
}

fn pcap_file(dir: &tempfile::TempDir, name: &str, frames: &[Vec<u8>]) -> String {
    let file = dir.path().join(name);
    std::fs::write(&file, write_all(frames)).unwrap();
    file.display().to_string()
}

fn read_pcap(path: &str) -> Vec<Vec<u8>> {
    let mut r =
        PcapReader::new(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(rec)) = r.next_record() {
        out.push(rec.data);
    }
    out
}

/// Receives until `want` packets came or 2,000 polls went by.
fn rx_all(port: &mut DpdkPort, pool: &mut PacketPool, want: usize) -> Vec<sluice_packet::Packet> {
    let mut got = Vec::new();
    for _ in 0..2000 {
        let mut b = PacketBatch::new();
        port.rx_burst(pool, &mut b, 1);
        got.extend(b.drain());
        if got.len() >= want {
            break;
        }
    }
    got
}

#[test]
fn an_infinite_pcap_vdev_gets_a_pool_for_its_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let frames = vec![udp_frames(1)[0].clone(); 300];
    let f = pcap_file(&dir, "in.pcap", &frames);
    assert_eq!(
        infinite_pcap_frames(&format!("net_pcap0,rx_pcap={f},infinite_rx=1")),
        Some(300)
    );
    assert_eq!(
        infinite_pcap_frames(&format!("net_pcap0,rx_pcap={f}")),
        None
    );
    assert_eq!(infinite_pcap_frames("net_null0,no-rx=1"), None);
    assert_eq!(
        infinite_pcap_frames("net_pcap0,rx_pcap=/no/such,infinite_rx=1"),
        Some(65536)
    );
}

/// Runs the vdev test below in a child process (the EAL starts once
/// per process) with `SLUICE_DPDK_MEMORY=mode`.
fn vdev_test_in_child(mode: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "dpdk::tests::received_packets_are_sent_in_place_without_a_copy",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SLUICE_DPDK_MEMORY", mode)
        .output()
        .unwrap()
}

fn assert_ran_and_passed(mode: &str, out: &std::process::Output) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "SLUICE_DPDK_MEMORY={mode}:\n{text}"
    );
}

/// Puts `/proc/sys/vm/nr_hugepages` back as it was.
struct RestoreHugepages(String);

impl Drop for RestoreHugepages {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/vm/nr_hugepages", &self.0);
    }
}

#[test]
fn the_port_runs_without_hugepages_whatever_the_machine_has() {
    let out = vdev_test_in_child("no-huge");
    assert_ran_and_passed("no-huge", &out);
}

/// With hugepages: reserves 256 of them for the test when the machine
/// has fewer free (root only), and gives them back after.
#[test]
fn the_port_runs_on_hugepages_reserved_for_the_test() {
    let before = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap_or_default();
    let _restore = RestoreHugepages(before.clone());
    if eal::free_hugepages() < 256 {
        let want = before.trim().parse::<u64>().unwrap_or(0) + 256;
        if std::fs::write("/proc/sys/vm/nr_hugepages", want.to_string()).is_err()
            || eal::free_hugepages() < 256
        {
            eprintln!("skipped: cannot reserve 256 hugepages (needs root and free memory)");
            return;
        }
    }
    let out = vdev_test_in_child("huge");
    assert_ran_and_passed("huge", &out);
}

#[test]
fn received_packets_are_sent_in_place_without_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udp_frames(100);
    let input = pcap_file(&dir, "in.pcap", &frames);
    let output = dir.path().join("out.pcap").display().to_string();
    let mut rx = DpdkPort::open("in", &format!("net_pcap7,rx_pcap={input}")).unwrap();
    let mut tx = DpdkPort::open("out", &format!("net_pcap8,tx_pcap={output}")).unwrap();
    let mut pool = PacketPool::new(64, 2048).unwrap();
    rx.attach_pool(&mut pool).unwrap();
    tx.attach_pool(&mut pool).unwrap();
    let free_before = rx.mbufs_free();
    let mut pkts = rx_all(&mut rx, &mut pool, frames.len());
    assert_eq!(pkts.len(), frames.len());
    assert!(
        pkts.iter().all(PacketPool::is_external),
        "every packet in its mbuf"
    );
    assert_eq!(pool.available(), pool.capacity(), "no pool frame used");
    assert_eq!(
        rx.mbufs_free(),
        free_before - 100,
        "the mbufs are the packets"
    );
    // Change each packet where it lies, as an action would, and send.
    for p in &mut pkts {
        p.data_mut()[0] = 0x02;
    }
    for chunk in pkts.chunks_mut(32).map(|c| c.len()).collect::<Vec<_>>() {
        let mut b = PacketBatch::new();
        for p in pkts.drain(..chunk) {
            b.push(p).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut pool, &mut b), chunk);
    }
    let s = tx.stats();
    assert_eq!((s.tx_packets, s.tx_copied, s.tx_kicks), (100, 0, 4));
    assert_eq!(
        s.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(rx.stats().rx_copied, 0);
    drop(tx); // closes the capture
    let sent = read_pcap(&output);
    let want: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f[0] = 0x02;
            f
        })
        .collect();
    assert_eq!(sent, want, "the bytes as changed in place, in order");
    assert_eq!(pool.external_in_use(), 0);
    assert_eq!(rx.mbufs_free(), free_before, "every mbuf back");
    let e = DpdkPort::open("bad", "net_nosuchdriver0").err().unwrap();
    assert!(e.to_string().contains("cannot probe"), "{e}");
}

#[test]
fn packets_cross_to_and_from_other_ports_with_one_counted_copy() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udp_frames(40);
    let input = pcap_file(&dir, "in.pcap", &frames);
    let output = dir.path().join("out.pcap").display().to_string();
    let mut rx = DpdkPort::open("in", &format!("net_pcap9,rx_pcap={input}")).unwrap();
    let mut tx = DpdkPort::open("out", &format!("net_pcap10,tx_pcap={output}")).unwrap();
    let mut pool = PacketPool::new(64, 2048).unwrap();
    rx.attach_pool(&mut pool).unwrap();
    let free_before = rx.mbufs_free();
    // DPDK -> another kind of port: read in place, the mbuf given back
    // when the packet is freed.
    let pkts = rx_all(&mut rx, &mut pool, frames.len());
    let (mut capture, captured) = crate::capture::CapturePort::new();
    let mut b = PacketBatch::new();
    for p in pkts {
        b.push(p).unwrap();
        if b.is_full() {
            capture.tx_burst(&mut pool, &mut b);
        }
    }
    capture.tx_burst(&mut pool, &mut b);
    assert_eq!(*captured.lock().unwrap(), frames);
    pool.return_external();
    assert_eq!(pool.external_in_use(), 0);
    assert_eq!(
        rx.mbufs_free(),
        free_before,
        "freed packets' mbufs back in DPDK"
    );
    // A pool frame -> DPDK: copied into an mbuf, counted.
    let mut b = PacketBatch::new();
    for f in &frames[..10] {
        b.push(pool.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(tx.tx_burst(&mut pool, &mut b), 10);
    assert_eq!(tx.stats().tx_copied, 10);
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "the frames freed after the copy"
    );
    drop(tx);
    assert_eq!(read_pcap(&output), frames[..10].to_vec());
}

#[test]
fn pool_frames_and_mbufs_mixed_in_a_batch_go_out_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udp_frames(32);
    let input = pcap_file(&dir, "in.pcap", &frames[..16]);
    let output = dir.path().join("out.pcap").display().to_string();
    let mut rx = DpdkPort::open("in", &format!("net_pcap13,rx_pcap={input}")).unwrap();
    let mut tx = DpdkPort::open("out", &format!("net_pcap14,tx_pcap={output}")).unwrap();
    let mut pool = PacketPool::new(64, 2048).unwrap();
    rx.attach_pool(&mut pool).unwrap();
    let mut mbufs = rx_all(&mut rx, &mut pool, 16).into_iter();
    // Even places: received mbufs (sent in place); odd: pool frames
    // (copied into mbufs taken in one go).
    let mut b = PacketBatch::new();
    let mut want = Vec::new();
    for (i, f) in frames[16..].iter().enumerate() {
        let m = mbufs.next().unwrap();
        want.push(m.data().to_vec());
        b.push(m).unwrap();
        if i % 3 != 2 {
            want.push(f.clone());
            b.push(pool.alloc_from(f).unwrap()).unwrap();
        }
    }
    let n = b.len();
    assert_eq!(tx.tx_burst(&mut pool, &mut b), n);
    let s = tx.stats();
    assert_eq!((s.tx_packets, s.tx_copied), (n as u64, (n - 16) as u64));
    pool.return_external();
    assert_eq!(pool.available(), pool.capacity());
    drop(tx);
    assert_eq!(read_pcap(&output), want);
}

#[test]
fn pool_frames_beyond_the_free_mbufs_are_counted_drops_the_rest_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udp_frames(1500);
    let input = pcap_file(&dir, "in.pcap", &frames);
    let output = dir.path().join("out.pcap").display().to_string();
    // One port, both ways, on a small mempool: what it receives and holds
    // leaves fewer mbufs than a batch of pool frames needs.
    let mut port = DpdkPort::open_queues(
        "both",
        &format!("net_pcap15,rx_pcap={input},tx_pcap={output}"),
        1,
        Some(1000),
    )
    .unwrap()
    .remove(0);
    let mut pool = PacketPool::new(64, 2048).unwrap();
    port.attach_pool(&mut pool).unwrap();
    let mut held = rx_all(&mut port, &mut pool, frames.len());
    assert!(port.mbufs_free() < 5, "the mempool ran dry");
    for p in held.drain(..10) {
        pool.free(p);
    }
    pool.return_external();
    let free = port.mbufs_free() as usize;
    assert!(free > 0 && free < 32, "{free} mbufs free");
    let mut b = PacketBatch::new();
    for f in &frames[..32] {
        b.push(pool.alloc_from(f).unwrap()).unwrap();
    }
    assert_eq!(port.tx_burst(&mut pool, &mut b), free);
    let s = port.stats();
    assert_eq!(s.tx_packets, free as u64);
    assert_eq!(s.tx_dropped_by(PortDrop::NoBuffer), (32 - free) as u64);
    for p in held {
        pool.free(p);
    }
    pool.return_external();
    assert_eq!(pool.available(), pool.capacity());
    drop(port);
    assert_eq!(read_pcap(&output), frames[..free].to_vec());
}

#[test]
fn when_mbufs_run_out_receiving_stops_counted_and_nothing_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udp_frames(3000);
    let input = pcap_file(&dir, "in.pcap", &frames);
    // A mempool of 1,000 mbufs (the per-lcore cache of 256 may hold some).
    let mut rx = DpdkPort::open_queues("in", &format!("net_pcap11,rx_pcap={input}"), 1, Some(1000))
        .unwrap()
        .remove(0);
    let mut pool = PacketPool::new(64, 2048).unwrap();
    rx.attach_pool(&mut pool).unwrap();
    // Hold every packet: the device runs dry.
    let held = rx_all(&mut rx, &mut pool, frames.len());
    assert!(
        held.len() <= 1000 && held.len() > 500,
        "{} held",
        held.len()
    );
    let mut b = PacketBatch::new();
    rx.rx_burst(&mut pool, &mut b, 1);
    assert!(b.is_empty());
    let dropped = rx.stats().rx_dropped_by(PortDrop::NoBuffer);
    assert!(dropped > 0, "the device counts what it could not receive");
    // Give them back: receiving resumes, and every mbuf comes home.
    for p in held {
        pool.free(p);
    }
    pool.return_external();
    let more = rx_all(&mut rx, &mut pool, 1);
    assert!(!more.is_empty(), "receiving again once mbufs are back");
    for p in more {
        pool.free(p);
    }
    pool.return_external();
    assert_eq!(pool.external_in_use(), 0);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_port_opened_for_several_pmds_has_a_queue_pair_each() {
    // net_null has no RSS: each rx queue makes its own packets.
    let mut qs = DpdkPort::open_queues("n", "net_null12,size=64", 2, None).unwrap();
    assert_eq!(qs.len(), 2);
    let mut pool = PacketPool::new(64, 2048).unwrap();
    for q in &mut qs {
        q.attach_pool(&mut pool).unwrap();
        let mut b = PacketBatch::new();
        q.rx_burst(&mut pool, &mut b, 1);
        assert_eq!(b.len(), BATCH_SIZE, "queue {} receives", q.queue);
        assert_eq!(
            q.tx_burst(&mut pool, &mut b),
            BATCH_SIZE,
            "and sends in place"
        );
    }
    assert_eq!(qs[1].stats().tx_copied, 0);
    let e = DpdkPort::open_queues("n", "net_null13", 60000, None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("at most"), "{e}");
}
