//! The stream port against a real Open vSwitch: Debian's ovs-vswitchd in a
//! private run directory (dummy datapath, no root needed, nothing touches a
//! host OVS), with dummy ports on unix sockets: OVS listening
//! (`options:pstream=punix:PATH`, Sluice's `stream:unix:PATH` connects) and
//! OVS connecting (`options:stream=unix:PATH` to Sluice's
//! `stream:punix:PATH`). Sluice sends a capture's frames, OVS rewrites them
//! and sends them back, and Sluice writes what returns to a capture.

mod support;

use std::time::{Duration, Instant};

use sluice_packet::build::{Frame, L4};
use support::*;

/// Which side listens on the socket.
#[derive(Clone, Copy, PartialEq)]
enum Listener {
    Ovs,
    Sluice,
}

fn exchange(listener: Listener) {
    assert!(
        sh_status("command -v ovs-vswitchd").status.success(),
        "Open vSwitch is missing: run scripts/setup"
    );
    let dir = tempfile::tempdir().unwrap();
    let ovs = Ovs::start(dir.path());
    let sock = dir.path().join("p1.sock");
    let option = match listener {
        Listener::Ovs => format!("options:pstream=punix:{}", sock.display()),
        Listener::Sluice => format!("options:stream=unix:{}", sock.display()),
    };
    ovs.vsctl(&format!(
        "add-br br0 -- set bridge br0 datapath_type=dummy fail-mode=secure protocols=OpenFlow13 \
         -- add-port br0 p1 -- set interface p1 type=dummy ofport_request=1 {option}"
    ));
    // OVS sends every frame back where it came from, with DSCP 8 written:
    // what returns proves OVS parsed and forwarded our framing.
    ovs.ofctl("add-flow BR in_port=1,ip,actions=mod_nw_tos:32,in_port");

    let n = 100u16;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 }).build())
        .collect();
    let input = dir.path().join("in.pcap");
    std::fs::write(&input, sluice_port::pcap::write_all(&frames)).unwrap();
    let output = dir.path().join("back.pcap");
    let rules = "in_port=2,actions=output:1\nin_port=1,actions=output:3\n";
    let stream_port = format!("3=pcap:tx={}", output.display());
    let sw = if listener == Listener::Ovs {
        let until = Instant::now() + Duration::from_secs(10);
        while !sock.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sock.exists(), "OVS did not open {}", sock.display());
        Sluice::start(
            None,
            rules,
            &[
                &format!("1=stream:unix:{}", sock.display()),
                &format!("2=pcap:rx={}", input.display()),
                &stream_port,
            ],
        )
    } else {
        let sw = Sluice::start(
            None,
            rules,
            &[&format!("1=stream:punix:{}", sock.display()), &stream_port],
        );
        // OVS connects with back-off; send once it says it is connected.
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let state = sh_status(&format!(
                "ovs-appctl -t {}/ovs-vswitchd.ctl netdev-dummy/conn-state p1",
                dir.path().display()
            ));
            if String::from_utf8_lossy(&state.stdout)
                .trim()
                .ends_with(": connected")
            {
                break;
            }
            assert!(Instant::now() < until, "OVS never connected to Sluice");
            std::thread::sleep(Duration::from_millis(50));
        }
        sw.ctl(&["add-port", &format!("2=pcap:rx={}", input.display())]);
        sw
    };
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let ports = sw.ctl(&["dump-ports"]);
        let back = ports
            .split("port 3")
            .nth(1)
            .and_then(|p| p.split("tx packets: ").nth(1))
            .and_then(|t| t.split(',').next())
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if back >= u64::from(n) || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = sw.stop();
    let back = sluice_port::pcap::read_all(&std::fs::read(&output).unwrap()).unwrap();
    assert_eq!(back.len(), n as usize, "every frame came back: {report}");
    for (sent, got) in frames.iter().zip(&back) {
        assert_eq!(got.data.len(), sent.len());
        assert_eq!(got.data[15], 32, "OVS wrote the DSCP");
        assert_eq!(got.data[34..], sent[34..], "L4 and payload unchanged");
    }
    let p1 = port(&report, 1);
    assert_eq!(p1["tx_packets"], u64::from(n));
    assert_eq!(p1["rx_packets"], u64::from(n));
    let ovs_ports = ovs.ofctl("dump-ports BR 1");
    assert!(
        ovs_ports.contains(&format!("rx pkts={n}")),
        "OVS counted them: {ovs_ports}"
    );
}

#[test]
fn stream_port_connects_to_a_listening_open_vswitch() {
    exchange(Listener::Ovs);
}

#[test]
fn open_vswitch_connects_to_a_listening_stream_port() {
    exchange(Listener::Sluice);
}
