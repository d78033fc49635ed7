//! `sluice io-floor`: the I/O floor of a set of ports, measured through
//! Sluice's own port code with no datapath between them. Every packet a
//! port receives is sent straight out of one port, a burst at a time, as
//! `dpdk-testpmd --forward-mode=io` does; what is left is the cost of
//! receiving and sending, which a switch on the same ports can only add to.
//! `bench/compare-ovs` sets it beside testpmd's on the same DPDK vdevs.

use std::time::{Duration, Instant};

use clap::Args;
use sluice_datapath::cycles;
use sluice_packet::pool::DEFAULT_FRAME_SIZE;
use sluice_packet::{PacketBatch, PacketPool};
use sluice_port::{open_port, Port, PortSpec, RxStatus};

pub const IO_FLOOR_HELP: &str = "\
Examples:
  sluice io-floor --port 1=dpdk:net_pcap0,rx_pcap=in.pcap,infinite_rx=1 --port 2=dpdk:net_null0,no-rx=1
      DPDK's vdevs through Sluice's DPDK port (compare dpdk-testpmd --forward-mode=io).
  sluice io-floor --port 1=pcap:rx=in.pcap,loop --port 2=null --to 2
      Sluice's in-memory replay port.

Pin it as you pin a PMD (taskset -c 1 sluice io-floor ...). Cycles per packet
are TSC cycles of the polling thread per packet sent (it polls without
pause, so every cycle counts).";

/// `sluice io-floor` arguments.
#[derive(Args)]
pub struct IoFloorArgs {
    /// A port, as in `sluice run` (N=SPEC; repeatable).
    #[arg(long = "port", value_name = "N=SPEC", required = true)]
    ports: Vec<String>,
    /// The port everything is sent out of (default: the highest-numbered
    /// port that cannot receive, else port 2).
    #[arg(long)]
    to: Option<u32>,
    /// Seconds to measure, after the warm-up.
    #[arg(long, default_value_t = 4.0, value_parser = sluice::config::parse_seconds)]
    seconds: f64,
    /// Seconds to run before measuring.
    #[arg(long, default_value_t = 2.0, value_parser = sluice::config::parse_seconds_or_zero)]
    warmup: f64,
    /// Frames in the packet pool (the DPDK port needs none: it forwards
    /// its mbufs).
    #[arg(long, default_value_t = 4096)]
    pool_frames: usize,
}

/// Polls every receiving port once and sends what came to `out`; counts
/// what was received in `rx`.
fn poll_once(
    inputs: &mut [Box<dyn Port>],
    out: &mut dyn Port,
    pool: &mut PacketPool,
    batch: &mut PacketBatch,
    rx: &mut u64,
) {
    for p in inputs.iter_mut() {
        if let RxStatus::Received(k) = p.rx_burst(pool, batch, 1) {
            if k > 0 {
                *rx += k as u64;
                out.tx_burst(pool, batch);
                batch.free_all(pool);
            }
        }
    }
}

pub fn io_floor(a: IoFloorArgs) -> Result<(), String> {
    let mut specs = Vec::new();
    for s in &a.ports {
        specs.push(sluice::config::parse_port_arg(s)?);
    }
    if !(a.seconds > 0.0 && a.seconds.is_finite() && a.warmup >= 0.0 && a.warmup.is_finite()) {
        return Err("--seconds must be above 0 and --warmup at least 0".into());
    }
    let mut pool = PacketPool::new(a.pool_frames, DEFAULT_FRAME_SIZE).map_err(|e| e.to_string())?;
    let mut ports: Vec<(u32, PortSpec, Box<dyn Port>)> = Vec::new();
    for (n, spec) in specs {
        if ports.iter().any(|(m, _, _)| *m == n) {
            return Err(format!("port {n} given twice"));
        }
        let mut p = open_port(&spec).map_err(|e| e.to_string())?;
        p.attach_pool(&mut pool).map_err(|e| e.to_string())?;
        ports.push((n, spec, p));
    }
    let to = a.to.unwrap_or_else(|| {
        ports
            .iter()
            .filter(|(_, _, p)| !p.caps().rx)
            .map(|(n, _, _)| *n)
            .max()
            .unwrap_or(2)
    });
    let Some(i) = ports.iter().position(|(n, _, _)| *n == to) else {
        return Err(format!(
            "--to {to}: no such port (give it with --port {to}=SPEC)"
        ));
    };
    let (_, out_spec, mut out) = ports.remove(i);
    if !out.caps().tx {
        return Err(format!("--to {to}: port {out_spec} cannot send"));
    }
    let mut inputs: Vec<Box<dyn Port>> = ports
        .into_iter()
        .filter(|(_, _, p)| p.caps().rx)
        .map(|(_, _, p)| p)
        .collect();
    if inputs.is_empty() {
        return Err("no port that receives: give one besides the --to port".into());
    }
    if inputs.iter().any(|p| p.caps().finite_rx) {
        return Err(
            "a receiving port ends (a capture read once): the floor needs endless input, e.g. pcap:rx=FILE,loop or a DPDK device"
                .into(),
        );
    }
    let mut batch = PacketBatch::new();
    let mut rx = 0;
    let warm_until = Instant::now() + Duration::from_secs_f64(a.warmup);
    while Instant::now() < warm_until {
        for _ in 0..1024 {
            poll_once(&mut inputs, out.as_mut(), &mut pool, &mut batch, &mut rx);
        }
    }
    let tx_before = out.stats().tx_packets;
    rx = 0;
    let hz = cycles::hz();
    let (t0, c0) = (Instant::now(), cycles::now());
    let until = t0 + Duration::from_secs_f64(a.seconds);
    while Instant::now() < until {
        for _ in 0..1024 {
            poll_once(&mut inputs, out.as_mut(), &mut pool, &mut batch, &mut rx);
        }
    }
    let (c1, secs) = (cycles::now(), t0.elapsed().as_secs_f64());
    out.flush(&mut pool).map_err(|e| e.to_string())?;
    let sent = out.stats().tx_packets - tx_before;
    let mpps = sent as f64 / secs / 1e6;
    let cyc = if sent > 0 {
        c1.wrapping_sub(c0) as f64 / sent as f64
    } else {
        0.0
    };
    println!(
        "io-floor: {mpps:.2} Mpps, {cyc:.1} cycles/pkt (TSC {:.0} MHz) over {secs:.2} s: received {}, sent {}, not sent {}",
        hz / 1e6,
        rx,
        sent,
        rx.saturating_sub(sent)
    );
    Ok(())
}
