//! `sluice xdp-send`: a traffic generator for benchmarks over veth. It
//! sends frames out of an interface from inside the kernel
//! ([`sluice_port::xdp_send`]: XDP live frames), so one core offers a
//! switch several times what a socket-based sender can, with no `sk_buff`
//! built per frame on the way.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use sluice_bench::profile::flow_frame;
use sluice_port::pcap::read_all;
use sluice_port::sys::if_index;
use sluice_port::xdp_send::{Vary, XdpSender, MAX_FRAME};

/// Offsets in a generated frame (Ethernet, IPv4 without options, UDP).
const UDP_SPORT: usize = 14 + 20;
const UDP_CSUM: usize = 14 + 20 + 6;

pub const XDP_SEND_HELP: &str = "\
Examples:
  ip netns exec gen sluice xdp-send eth0 --seconds 10
      100 UDP flows of 64 bytes out of eth0, as fast as one core sends them.
  sluice xdp-send veth0 --pcap in.pcap --burst 10000
      The frames of a capture, 10000 of each in turn.

The frames go out through the device's XDP transmit (ndo_xdp_xmit). On a veth
its peer must take XDP frames: an XDP program attached to it (AF_XDP sockets
attach one) or GRO on (ethtool -K PEER gro on), else the kernel drops them.
Count what arrived on the peer's side (its rx_packets); the rate printed is
what was handed to the device. Needs root (CAP_BPF, CAP_NET_ADMIN), Linux 5.18+;
a kernel in lockdown may refuse it even so (the error says so: check dmesg and
/sys/kernel/security/lockdown).";

/// `sluice xdp-send` arguments.
#[derive(Args)]
pub struct XdpSendArgs {
    /// The interface to send out of (in this network namespace).
    iface: String,
    /// Send the frames of this capture, in turn (default: generated UDP
    /// flows, see --flows and --size).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Distinct flows of the generated traffic (1 to 60000: frames differ
    /// in their UDP source port, round robin).
    #[arg(long, default_value_t = 100)]
    flows: u64,
    /// Bytes per generated frame (60 to 3500).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Seconds to send (0: until interrupted or --count is reached).
    #[arg(long, default_value_t = 10.0, value_parser = sluice::config::parse_seconds_or_zero)]
    seconds: f64,
    /// Frames to send in all, then stop (0: no limit).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Frames sent per system call, each of a capture's frames in turn
    /// (the kernel transmits them in bulks of 64). Each call costs some
    /// milliseconds of set-up: keep it large.
    #[arg(long, default_value_t = 1_000_000)]
    burst: u32,
}

pub fn xdp_send(a: XdpSendArgs, stop: Arc<AtomicBool>) -> Result<(), String> {
    if !(a.seconds >= 0.0 && a.seconds.is_finite()) {
        return Err("--seconds must be 0 or more".into());
    }
    if a.burst == 0 {
        return Err("--burst must be at least 1".into());
    }
    // Generated traffic is one frame whose UDP source port the kernel side
    // varies per frame sent (flow i's port, as `sluice gen` numbers them;
    // the UDP checksum is left out, which IPv4 allows); a capture's frames
    // go out as they are, --burst of each in turn.
    let (frames, vary): (Vec<Vec<u8>>, _) = match &a.pcap {
        Some(path) => {
            let bytes =
                std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            let frames: Vec<Vec<u8>> = read_all(&bytes)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .into_iter()
                .map(|r| r.data)
                .collect();
            (frames, None)
        }
        None => {
            if !(60..=MAX_FRAME).contains(&a.size) {
                return Err(format!("--size must be 60 to {MAX_FRAME}"));
            }
            if !(1..=60_000).contains(&a.flows) {
                return Err("--flows must be 1 to 60000".into());
            }
            let mut f = flow_frame(0, a.size);
            f[UDP_CSUM..UDP_CSUM + 2].fill(0);
            let vary = Vary {
                offset: UDP_SPORT as u16,
                base: u16::from_be_bytes([f[UDP_SPORT], f[UDP_SPORT + 1]]),
                count: a.flows as u16,
            };
            (vec![f], Some(vary))
        }
    };
    if frames.is_empty() {
        return Err("no frames to send: the capture is empty".into());
    }
    let sender = XdpSender::new(if_index(&a.iface)?, vary)?;
    let until = (a.seconds > 0.0).then(|| Instant::now() + Duration::from_secs_f64(a.seconds));
    let t0 = Instant::now();
    let mut sent = 0u64;
    'outer: loop {
        for f in &frames {
            let n = if a.count > 0 {
                u64::from(a.burst).min(a.count - sent) as u32
            } else {
                a.burst
            };
            sender.send(f, n, 64)?;
            sent += u64::from(n);
            if stop.load(Ordering::Relaxed) || (a.count > 0 && sent >= a.count) {
                break 'outer;
            }
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{sent} frames out of {} in {secs:.2} s: {:.0} frames/s ({} distinct)",
        a.iface,
        sent as f64 / secs,
        frames.len()
    );
    Ok(())
}
