//! Meters in the real datapath on a virtual clock: offered twice a
//! meter's rate, what passes is the rate (within a few percent, the first
//! burst included), what is above it is the counted drop `meter drop`;
//! a DSCP remark band raises the drop precedence of the packets above
//! it and drops nothing.

use std::sync::Arc;

use sluice_classifier::meter::{flags, BandKind, Meter};
use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig, DropReason};
use sluice_packet::build::{Frame, L4};
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

/// Runs `secs` seconds of `len`-byte frames (DSCP `dscp`) offered at
/// `pps` through `in_port=1,actions=meter:1,output:2` with meter 1 as
/// given; returns (passed per second, the datapath, what port 2 sent).
fn run(
    meter_flags: u16,
    band: (BandKind, u32),
    len: usize,
    dscp: u8,
    pps: u64,
    secs: u64,
) -> (f64, Datapath, Vec<Vec<u8>>) {
    let mut rules = RuleSet::from_specs(
        &parse_flow_file("in_port=1,actions=meter:1,output:2\n", None).unwrap(),
        0,
    );
    rules
        .add_meter(Meter::new(1, meter_flags, &[(band.0, band.1, 0)], 0).unwrap())
        .unwrap();
    // Polls of up to 16 frames, each poll a tick of the clock.
    let burst = 16u64.min(pps.div_ceil(100)).max(1);
    let tick_us = burst * 1_000_000 / pps;
    let frame = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
        .tos(dscp << 2)
        .min_len(len)
        .build();
    let n = pps * secs;
    let frames: Frames = (0..n).map(|_| frame.clone()).collect();
    let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(rules)).unwrap();
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(burst as usize)),
    )
    .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(2, Box::new(cap)).unwrap();
    let mut clock = (1u64..).step_by(tick_us as usize);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    let sent = sent.lock().unwrap().clone();
    (sent.len() as f64 / secs as f64, dp, sent)
}

#[test]
fn a_packet_rate_holds_at_100_1000_and_10000_per_second() {
    for rate in [100u32, 1000, 10_000] {
        let (passed, dp, _) = run(
            flags::PKTPS,
            (BandKind::Drop, rate),
            64,
            0,
            2 * u64::from(rate),
            10,
        );
        let err = passed / f64::from(rate) - 1.0;
        eprintln!(
            "meter {rate} pkt/s, offered {}/s: passed {passed:.1}/s ({:+.2} %)",
            2 * rate,
            err * 100.0
        );
        assert!((-0.01..0.03).contains(&err), "{rate} pps: {passed}");
        let st = dp.stats();
        assert!(st.rx_balanced(), "{st:?}");
        assert_eq!(
            st.dropped_by(DropReason::MeterDrop),
            st.rx_packets - st.forwarded
        );
    }
}

#[test]
fn a_bit_rate_holds_at_1_10_and_100_mbit() {
    for mbps in [1u32, 10, 100] {
        // 1500-byte frames offered at twice the rate.
        let pps = u64::from(mbps) * 1_000_000 * 2 / (1500 * 8);
        let (passed, dp, _) = run(flags::KBPS, (BandKind::Drop, mbps * 1000), 1500, 0, pps, 10);
        let got = passed * 1500.0 * 8.0 / 1e6;
        let err = got / f64::from(mbps) - 1.0;
        eprintln!(
            "meter {mbps} Mbit/s, offered {}: passed {got:.3} Mbit/s ({:+.2} %)",
            2 * mbps,
            err * 100.0
        );
        assert!((-0.02..0.03).contains(&err), "{mbps} Mbit/s: {got}");
        assert!(dp.stats().rx_balanced());
    }
}

#[test]
fn a_dscp_remark_band_raises_precedence_above_the_rate_and_drops_nothing() {
    // AF21 (DSCP 18), 1000 packets/s offered 2000/s: about half leave as
    // AF22 (20).
    let (passed, dp, sent) = run(
        flags::PKTPS,
        (BandKind::DscpRemark(1), 1000),
        64,
        18,
        2000,
        5,
    );
    assert_eq!(passed, 2000.0, "nothing is dropped");
    let dscp = |f: &Vec<u8>| f[15] >> 2;
    let raised = sent.iter().filter(|f| dscp(f) == 20).count();
    let kept = sent.iter().filter(|f| dscp(f) == 18).count();
    assert_eq!(raised + kept, sent.len());
    assert!(
        (4_800..=5_200).contains(&raised),
        "{raised} of {}",
        sent.len()
    );
    // The IPv4 checksum was updated with the DSCP.
    let f = sent.iter().find(|f| dscp(f) == 20).unwrap();
    assert_eq!(sluice_packet::wire::checksum::checksum(&f[14..34]), 0);
    assert!(dp.stats().rx_balanced());
}

/// `controller(meter_id=1)` (Open vSwitch's controller meter): offered
/// twice the meter's rate, the packet-ins made are the rate, the rest the
/// counted drop `meter drop` where the packet-in was the packet's one way
/// out; an output beside it gets every packet. A meter that is not there
/// meters nothing.
#[test]
fn a_controller_meter_limits_the_packet_ins_alone() {
    for (meter, rate, output) in [(1u32, 100u32, true), (2, 0, true), (1, 100, false)] {
        let out = if output { ",output:2" } else { "" };
        let text = format!("in_port=1,actions=controller(meter_id={meter}){out}\n");
        let mut rules = RuleSet::from_specs(&parse_flow_file(&text, None).unwrap(), 0);
        rules
            .add_meter(Meter::new(1, flags::PKTPS, &[(BandKind::Drop, 100, 0)], 0).unwrap())
            .unwrap();
        let frame = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
        // 200 packets a second for 5 s, 2 a poll (a poll every 10 ms).
        let frames: Frames = (0..1000).map(|_| frame.clone()).collect();
        let cfg = DatapathConfig {
            packet_in_queue: 4096,
            ..Default::default()
        };
        let mut dp = Datapath::new(cfg, Arc::new(rules)).unwrap();
        dp.add_port(
            1,
            Box::new(ReplayPort::new("in", frames, false).with_burst(2)),
        )
        .unwrap();
        let (cap, sent) = CapturePort::new();
        dp.add_port(2, Box::new(cap)).unwrap();
        let mut clock = (1u64..).step_by(10_000);
        dp.run(|| clock.next().unwrap(), |_| false).unwrap();
        let st = dp.stats();
        assert!(st.rx_balanced(), "{st:?}");
        let pins = dp.packet_ins().count() as u64;
        if !output {
            // The packet-in was each packet's one way out.
            assert_eq!(st.to_controller, pins);
            assert_eq!(st.dropped_by(DropReason::MeterDrop), 1000 - pins);
            assert!((490..=560).contains(&pins), "{pins} packet-ins");
            continue;
        }
        assert_eq!(sent.lock().unwrap().len(), 1000, "every packet forwarded");
        if rate == 0 {
            assert_eq!(pins, 1000, "meter {meter} is not there: no metering");
        } else {
            // 100 a second for 5 s, and the first burst.
            assert!((490..=560).contains(&pins), "{pins} packet-ins");
        }
        // Forwarded, so no packet's fate is the meter's.
        assert_eq!(st.forwarded, 1000);
    }
}
