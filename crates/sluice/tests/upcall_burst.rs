//! A burst of new flows on a live port, beside an established flow on
//! another (issue 60): misses the upcall budget cannot pay for at once
//! wait in the upcall queue instead of being dropped, so the whole burst is
//! forwarded, and the established flow loses nothing meanwhile.

mod support;

use support::*;

use sluice_packet::build::{Frame, L4};

/// Sends the frames of a capture out of `eth0` of the namespace it runs
/// in, through a raw socket: `rate` frames a second (0: as fast as it
/// can). Prints how many it sent.
const SENDER: &str = r#"
import socket, struct, sys, time
path, rate = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
frames, pos = [], 24
while pos + 16 <= len(data):
    incl = struct.unpack("<I", data[pos + 8:pos + 12])[0]
    frames.append(data[pos + 16:pos + 16 + incl])
    pos += 16 + incl
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
start = time.monotonic()
for i, f in enumerate(frames):
    if rate:
        due = start + i / rate
        while time.monotonic() < due:
            time.sleep(0.0005)
    while True:
        try:
            s.send(f)
            break
        except BlockingIOError:
            time.sleep(0.0001)
print(len(frames))
"#;

fn sender(host: &Host, pcap: &std::path::Path, rate: u64, cpu: usize) -> std::process::Child {
    std::process::Command::new("ip")
        .args(["netns", "exec", &host.ns, "taskset", "-c", &cpu.to_string()])
        .args(["python3", "-c", SENDER])
        .arg(pcap)
        .arg(rate.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting the sender")
}

fn sent(c: std::process::Child) -> u64 {
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "the sender failed");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The burst comes at 50,000 new flows a second (10,000 in 0.2 s, as a
/// port scan or a VM's start-up sends them), each flow an upcall; the
/// switch's thread and the senders are on different cores.
#[test]
fn afpacket_a_burst_of_ten_thousand_new_flows_is_forwarded_whole_beside_an_established_flow() {
    require_root_and(&["ip", "ethtool", "python3", "taskset"]);
    let cpus = sluice_port::sys::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 CPUs, this process may use {cpus:?}");
        return;
    }
    let burst_host = Host::new("ubb", None);
    let est_host = Host::new("ube", None);
    let dir = tempfile::tempdir().unwrap();
    // The burst: 10,000 UDP flows, each new (source address and port).
    let n = 10_000u32;
    let burst: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let ip = (0x0b00_0000 + i).to_be_bytes();
            Frame::ipv4(
                ip,
                [10, 0, 0, 2],
                L4::Udp {
                    src: 1024 + (i % 60_000) as u16,
                    dst: 9,
                },
            )
            .build()
        })
        .collect();
    let burst_pcap = dir.path().join("burst.pcap");
    std::fs::write(&burst_pcap, sluice_port::pcap::write_all(&burst)).unwrap();
    // The established flow: one 5-tuple, 4,000 frames at 4,000 a second
    // (the burst goes in its second half).
    let est: Vec<Vec<u8>> = (0..4000)
        .map(|_| Frame::ipv4([10, 0, 0, 7], [10, 0, 0, 8], L4::Udp { src: 7, dst: 8 }).build())
        .collect();
    let est_pcap = dir.path().join("est.pcap");
    std::fs::write(&est_pcap, sluice_port::pcap::write_all(&est)).unwrap();
    // Megaflows off: every new 5-tuple is an upcall, so the burst is a
    // burst of upcalls (10,000 of them).
    let sw = Sluice::start_with(
        None,
        "in_port=1,actions=output:3\nin_port=2,actions=output:4\n",
        &[
            &format!("1=afpacket:{}", burst_host.root_if),
            &format!("2=afpacket:{}", est_host.root_if),
            "3=null",
            "4=null",
        ],
        &["--disable-megaflows", "--pmd-cores", &cpus[1].to_string()],
    );
    let est_sender = sender(&est_host, &est_pcap, 4000, cpus[0]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    let burst_sender = sender(&burst_host, &burst_pcap, 50_000, cpus[0]);
    let (burst_sent, est_sent) = (sent(burst_sender), sent(est_sender));
    assert_eq!((burst_sent, est_sent), (u64::from(n), 4000));
    // Whatever still waits for the budget goes once the traffic stops.
    wait_for("no miss left waiting", 20, || {
        sw.ctl(&["pmd-stats"]).contains("(0 waiting now)")
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let report = sw.stop();
    assert_balanced(&report);
    let dp = &report["datapath"];
    let tx = |p| port(&report, p)["tx_packets"].as_u64().unwrap();
    // The kernel's ring of the burst port (2,048 frames) can overflow on a
    // stall of this shared 2-core machine, the old code's and this one's
    // alike (up to a few dozen frames in runs alone): counted, bounded here.
    let ring = drops(port(&report, 1), "rx_dropped");
    assert!(ring <= u64::from(n) / 20, "ring drops {ring}: {report}");
    assert_eq!(
        dp["dropped"]["upcall budget"], 0,
        "nothing dropped for the budget: {dp}"
    );
    assert_eq!(dp_drops(&report), 0, "no datapath drop: {dp}");
    assert_eq!(
        tx(3) + ring,
        u64::from(n),
        "every packet of the burst the switch received: {dp}"
    );
    assert_eq!(tx(4), 4000, "every packet of the established flow: {dp}");
    eprintln!(
        "upcalls deferred: {}, ring drops {ring}, cycles/pkt {}",
        dp["upcalls deferred"], dp["cycles/pkt"]
    );
}
