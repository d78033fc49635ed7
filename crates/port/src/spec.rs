//! Port specifications as users write them: `pcap:rx=in.pcap,tx=out.pcap`,
//! `pcap:rx=in.pcap,loop`, `null`, `afpacket:eth0`, `tap:tap0`,
//! `stream:unix:/run/sw.sock`, `stream:punix:/run/sw.sock`.

use std::path::PathBuf;

use crate::afpacket::{AfPacketOptions, AfPacketPort};
use crate::afxdp::AfXdpPort;
use crate::egress::PriorityClass;
use crate::null::NullPort;
use crate::pcap_port::PcapPort;
use crate::replay::ReplayPort;
use crate::stream::StreamPort;
use crate::tap::TapPort;
use crate::{Port, PortError};

/// What a port spec says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// Capture files.
    Pcap {
        /// File to receive from.
        rx: Option<PathBuf>,
        /// File to write sent packets to.
        tx: Option<PathBuf>,
        /// Load `rx` once and replay it forever.
        looping: bool,
    },
    /// Discard everything sent; receive nothing.
    Null,
    /// A Linux interface through AF_PACKET rings.
    AfPacket {
        /// Interface name.
        ifname: String,
        /// Queue options.
        opts: AfPacketOptions,
    },
    /// One queue of a Linux interface through an AF_XDP socket.
    AfXdp {
        /// Interface name.
        ifname: String,
        /// Queue number.
        queue: u32,
    },
    /// A DPDK ethdev (needs the `dpdk` build feature).
    Dpdk {
        /// Device arguments: a vdev with options, or a PCI address.
        devargs: String,
    },
    /// A tap interface, created if absent.
    Tap {
        /// Interface name.
        ifname: String,
    },
    /// Open vSwitch netdev-dummy framing over a unix socket.
    Stream {
        /// Socket path.
        path: PathBuf,
        /// Listen (`punix:`) rather than connect (`unix:`).
        listen: bool,
    },
}

/// The syntax, for error messages and `--help`.
pub const SPEC_SYNTAX: &str = "pcap:rx=FILE[,tx=FILE][,loop] | pcap:tx=FILE | null | afpacket:IFNAME[,prio-dscp=N][,prio-pcp=N][,vnet=on|off] | afxdp:IFNAME[:QUEUE] | dpdk:DEVARGS | tap:NAME | stream:unix:PATH | stream:punix:PATH";

fn parse_afpacket(s: &str, args: &str) -> Result<PortSpec, String> {
    let mut parts = args.split(',');
    let ifname = parts.next().unwrap_or("").to_string();
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ', ':']) {
        return Err(format!(
            "'{s}': expected afpacket:IFNAME with an interface name of 1 to 15 bytes"
        ));
    }
    let mut opts = AfPacketOptions::default();
    for opt in parts {
        let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
        if key == "vnet" {
            opts.vnet = match value {
                "on" => true,
                "off" => false,
                _ => return Err(format!("'{s}': vnet takes on or off, not '{value}'")),
            };
            continue;
        }
        let n: u8 = value
            .parse()
            .map_err(|_| format!("'{s}': option '{opt}' needs a number, e.g. prio-dscp=46"))?;
        match key {
            "prio-dscp" if n <= 64 => opts.priority.min_dscp = n,
            "prio-pcp" if n <= 8 => opts.priority.min_pcp = n,
            "prio-dscp" | "prio-pcp" => {
                return Err(format!(
                    "'{s}': {key} out of range (DSCP 0-63, PCP 0-7; 64 or 8 turn it off)"
                ))
            }
            _ => {
                return Err(format!(
                    "'{s}': unknown afpacket option '{key}'; expected prio-dscp=N, prio-pcp=N or vnet=on|off"
                ))
            }
        }
    }
    Ok(PortSpec::AfPacket { ifname, opts })
}

impl std::str::FromStr for PortSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "null" if args.is_empty() => Ok(PortSpec::Null),
            "null" => Err(format!("'{s}': null takes no options")),
            "afpacket" => parse_afpacket(s, args),
            "dpdk" if !args.is_empty() => Ok(PortSpec::Dpdk {
                devargs: args.to_string(),
            }),
            "dpdk" => Err(format!(
                "'{s}': expected dpdk:DEVARGS, e.g. dpdk:net_null0,no-rx=1 or dpdk:0000:01:00.0"
            )),
            "afxdp" => {
                let (ifname, queue) = args.split_once(':').unwrap_or((args, "0"));
                let queue: u32 = queue
                    .parse()
                    .map_err(|_| format!("'{s}': queue '{queue}' is not a number"))?;
                if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ', ',']) {
                    return Err(format!(
                        "'{s}': expected afxdp:IFNAME[:QUEUE] with an interface name of 1 to 15 bytes"
                    ));
                }
                Ok(PortSpec::AfXdp {
                    ifname: ifname.to_string(),
                    queue,
                })
            }
            "tap" if !args.is_empty() && args.len() <= 15 && !args.contains(['/', ',', ' ']) => {
                Ok(PortSpec::Tap {
                    ifname: args.to_string(),
                })
            }
            "tap" => Err(format!(
                "'{s}': expected tap:NAME with an interface name of 1 to 15 bytes"
            )),
            "stream" => match args.split_once(':') {
                Some(("unix", p)) if !p.is_empty() => Ok(PortSpec::Stream {
                    path: PathBuf::from(p),
                    listen: false,
                }),
                Some(("punix", p)) if !p.is_empty() => Ok(PortSpec::Stream {
                    path: PathBuf::from(p),
                    listen: true,
                }),
                _ => Err(format!(
                    "'{s}': expected stream:unix:PATH (connect) or stream:punix:PATH (listen)"
                )),
            },
            "pcap" => {
                let (mut rx, mut tx, mut looping) = (None, None, false);
                for opt in args.split(',').filter(|o| !o.is_empty()) {
                    match opt.split_once('=') {
                        Some(("rx", f)) if !f.is_empty() => rx = Some(PathBuf::from(f)),
                        Some(("tx", f)) if !f.is_empty() => tx = Some(PathBuf::from(f)),
                        None if opt == "loop" => looping = true,
                        _ => {
                            return Err(format!(
                            "'{s}': unknown pcap option '{opt}'; expected rx=FILE, tx=FILE or loop"
                        ))
                        }
                    }
                }
                if rx.is_none() && tx.is_none() {
                    return Err(format!("'{s}': a pcap port needs rx=FILE, tx=FILE or both"));
                }
                if looping && rx.is_none() {
                    return Err(format!("'{s}': loop needs rx=FILE"));
                }
                Ok(PortSpec::Pcap { rx, tx, looping })
            }
            _ => Err(format!(
                "'{s}': unknown port type '{kind}'; expected {SPEC_SYNTAX}"
            )),
        }
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortSpec::Null => f.write_str("null"),
            PortSpec::AfPacket { ifname, opts } => {
                write!(f, "afpacket:{ifname}")?;
                let d = PriorityClass::default();
                if opts.priority.min_dscp != d.min_dscp {
                    write!(f, ",prio-dscp={}", opts.priority.min_dscp)?;
                }
                if opts.priority.min_pcp != d.min_pcp {
                    write!(f, ",prio-pcp={}", opts.priority.min_pcp)?;
                }
                if opts.vnet != AfPacketOptions::default().vnet {
                    write!(f, ",vnet={}", if opts.vnet { "on" } else { "off" })?;
                }
                Ok(())
            }
            PortSpec::Tap { ifname } => write!(f, "tap:{ifname}"),
            PortSpec::AfXdp { ifname, queue } => write!(f, "afxdp:{ifname}:{queue}"),
            PortSpec::Dpdk { devargs } => write!(f, "dpdk:{devargs}"),
            PortSpec::Stream { path, listen } => write!(
                f,
                "stream:{}:{}",
                if *listen { "punix" } else { "unix" },
                path.display()
            ),
            PortSpec::Pcap { rx, tx, looping } => {
                let mut parts = Vec::new();
                if let Some(r) = rx {
                    parts.push(format!("rx={}", r.display()));
                }
                if let Some(t) = tx {
                    parts.push(format!("tx={}", t.display()));
                }
                if *looping {
                    parts.push("loop".into());
                }
                write!(f, "pcap:{}", parts.join(","))
            }
        }
    }
}

/// Opens the port a spec describes.
pub fn open_port(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    match spec {
        PortSpec::Null => Ok(Box::new(NullPort::new())),
        PortSpec::AfPacket { ifname, opts } => Ok(Box::new(AfPacketPort::open(
            &spec.to_string(),
            ifname,
            *opts,
        )?)),
        PortSpec::Tap { ifname } => Ok(Box::new(TapPort::open(&spec.to_string(), ifname)?)),
        #[cfg(feature = "dpdk")]
        PortSpec::Dpdk { devargs } => Ok(Box::new(crate::dpdk::DpdkPort::open(
            &spec.to_string(),
            devargs,
        )?)),
        #[cfg(not(feature = "dpdk"))]
        PortSpec::Dpdk { .. } => Err(PortError {
            port: spec.to_string(),
            message: "this sluice was built without DPDK: build with `cargo build --release --features dpdk` (needs libdpdk-dev)".into(),
        }),
        PortSpec::AfXdp { ifname, queue } => Ok(Box::new(AfXdpPort::open(
            &spec.to_string(),
            ifname,
            *queue,
        )?)),
        PortSpec::Stream { path, listen } => Ok(Box::new(StreamPort::open(
            &spec.to_string(),
            path,
            *listen,
        )?)),
        PortSpec::Pcap { rx, tx, looping } => Ok(Box::new(PcapPort::open(
            &spec.to_string(),
            rx.as_deref(),
            tx.as_deref(),
            *looping,
        )?)),
    }
}

impl PortSpec {
    /// Whether [`open_port_queues`] can open this port with several queues.
    pub fn multi_queue(&self) -> bool {
        matches!(
            self,
            PortSpec::Null
                | PortSpec::AfPacket { .. }
                | PortSpec::Pcap {
                    rx: Some(_),
                    tx: None,
                    looping: true,
                }
        )
    }
}

/// Opens the port a spec describes as `n` queue pairs, one per PMD thread:
/// each handle receives from its own rx queue and sends on its own tx
/// queue, so PMDs never share a port object (no lock on the hot path).
/// With `n` = 1 this is [`open_port`]. Ports with several queues:
/// `null`; `pcap:rx=FILE,loop` (the file's flows dealt over the queues by
/// an RSS-style hash); `afpacket` (one socket per queue in a fanout group,
/// spread by the kernel's flow hash). The others have one queue and
/// refuse `n` > 1 with an error that says so.
pub fn open_port_queues(spec: &PortSpec, n: usize) -> Result<Vec<Box<dyn Port>>, PortError> {
    let name = spec.to_string();
    let err = |message: String| PortError {
        port: name.clone(),
        message,
    };
    if n <= 1 {
        return Ok(vec![open_port(spec)?]);
    }
    match spec {
        PortSpec::Null => Ok((0..n)
            .map(|_| Box::new(NullPort::new()) as Box<dyn Port>)
            .collect()),
        PortSpec::Pcap {
            rx: Some(rx),
            tx: None,
            looping: true,
        } => {
            let frames = crate::pcap_port::load_frames(rx).map_err(err)?;
            Ok(frames
                .split_by_flow(n)
                .into_iter()
                .map(|f| Box::new(ReplayPort::new(name.clone(), f, true)) as Box<dyn Port>)
                .collect())
        }
        PortSpec::AfPacket { ifname, opts } => {
            // One group per port and process: the low 16 bits of a value
            // that differs between ports and between switches.
            let ifindex = crate::sys::if_index(ifname).map_err(err)?;
            let group = (std::process::id() as u16).wrapping_mul(31).wrapping_add(ifindex as u16);
            (0..n)
                .map(|_| {
                    let opts = AfPacketOptions {
                        fanout_group: Some(group),
                        ..*opts
                    };
                    AfPacketPort::open(&name, ifname, opts).map(|p| Box::new(p) as Box<dyn Port>)
                })
                .collect()
        }
        _ => Err(err(format!(
            "this port has one queue and cannot be shared by {n} PMD threads; with several PMDs use null, pcap:rx=FILE,loop (no tx file) or afpacket ports, or run one PMD"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for s in [
            "null",
            "pcap:rx=a.pcap",
            "pcap:tx=b.pcap",
            "pcap:rx=a.pcap,tx=b.pcap,loop",
            "afpacket:eth0",
            "afpacket:veth1,prio-dscp=40,prio-pcp=8",
            "afpacket:veth1,vnet=on",
            "tap:tap0",
            "afxdp:eth1:3",
            "dpdk:net_pcap0,rx_pcap=/tmp/a.pcap,infinite_rx=1",
            "stream:unix:/tmp/a.sock",
            "stream:punix:/tmp/a.sock",
        ] {
            assert_eq!(s.parse::<PortSpec>().unwrap().to_string(), s);
        }
        assert!("pcap:"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("needs rx"));
        assert!("pcap:tx=a,loop"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("loop needs"));
        assert!("pcap:rx=a,speed=9"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("unknown pcap option"));
        assert!("eth0"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("unknown port type"));
        assert!("null:x".parse::<PortSpec>().is_err());
        for bad in [
            "afpacket:",
            "afpacket:a-name-of-16-bytes",
            "afpacket:eth0,prio-dscp=99",
            "afpacket:eth0,speed=1",
            "afpacket:eth0,prio-pcp=x",
            "afpacket:eth0,vnet=yes",
            "tap:",
            "afxdp::1",
            "afxdp:eth0:x",
            "stream:tcp:1.2.3.4:5",
            "stream:unix:",
        ] {
            assert!(bad.parse::<PortSpec>().is_err(), "{bad}");
        }
    }
}
