//! Port specifications as users write them: `pcap:rx=in.pcap,tx=out.pcap`,
//! `pcap:rx=in.pcap,loop`, `null`, `afpacket:eth0`, `tap:tap0`,
//! `stream:unix:/run/sw.sock`, `stream:punix:/run/sw.sock`.

use std::path::{Path, PathBuf};

use crate::afpacket::{AfPacketOptions, AfPacketPort};
use crate::afxdp::AfXdpPort;
use crate::egress::PriorityClass;
use crate::null::NullPort;
use crate::pcap_port::PcapPort;
use crate::replay::ReplayPort;
use crate::stream::StreamPort;
use crate::tap::TapPort;
use crate::vhost::VhostPort;
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
        /// At most this many packets per receive (`burst=N`; default a
        /// whole batch). `burst=1` hands the datapath one packet a pass,
        /// so stateful actions (`ct`) see a capture's packets strictly in
        /// order, as they arrive one by one on a slow link.
        burst: Option<usize>,
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
        /// MTU to set on the interface (else it keeps its own).
        mtu: Option<u32>,
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
        /// Virtio-net headers and offloads (`IFF_VNET_HDR`, on by default).
        vnet: bool,
        /// MTU to set on the interface (else it keeps its own).
        mtu: Option<u32>,
        /// Brought up when opened (`up=off`: left as it is, as OVS leaves
        /// an internal port for the user to bring up).
        up: bool,
        /// Made persistent (`persist=on`: it outlives the switch, with
        /// its addresses, until the port is deleted; as OVS's internal
        /// ports).
        persist: bool,
    },
    /// Open vSwitch netdev-dummy framing over a unix socket.
    Stream {
        /// Socket path.
        path: PathBuf,
        /// Listen (`punix:`) rather than connect (`unix:`).
        listen: bool,
    },
    /// A tunnel port (`vxlan:`, `geneve:`, `gre:`): sends through, and
    /// receives from, an underlay port with an address.
    Tunnel(sluice_packet::tunnel::TunnelConfig),
    /// A port with an IP address of the switch's own (`...,ip=A/N`): a
    /// tunnel underlay, as OVS's `br-phy` with an address.
    Underlay {
        /// The port.
        port: Box<PortSpec>,
        /// Its address.
        addr: UnderlayAddr,
    },
    /// A port with a VLAN mode for `NORMAL` (`...,tag=10`,
    /// `...,trunks=10;20`, `...,vlan_mode=native-untagged`): OVS's `Port`
    /// columns, the port's I/O as `port` says.
    Bridged {
        /// The port.
        port: Box<PortSpec>,
        /// Its VLAN mode.
        vlan: sluice_bridge::PortVlan,
    },
    /// A vhost-user port: a virtual machine or DPDK's virtio-user.
    Vhost {
        /// Socket path.
        path: PathBuf,
        /// Listen (`vhost:`, as OVS's `dpdkvhostuser`) rather than connect
        /// and reconnect (`vhost-client:`, as `dpdkvhostuserclient`).
        server: bool,
    },
}

/// The address of an underlay port: `ip=A/N[,mac=M]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnderlayAddr {
    /// IPv4 or IPv6 address.
    pub ip: std::net::IpAddr,
    /// Prefix length of its subnet (the connected route).
    pub prefix: u8,
    /// The Ethernet address it answers ARP with; `None`: the interface's
    /// own, or one made from the address for ports that have none.
    pub mac: Option<[u8; 6]>,
}

impl UnderlayAddr {
    /// The Ethernet address to use given the port's own (if it has one):
    /// `mac=`, else the port's, else a locally administered one made from
    /// the IP address (02:00:A:B:C:D).
    pub fn mac_or(&self, port_mac: Option<[u8; 6]>) -> [u8; 6] {
        self.mac.or(port_mac).unwrap_or_else(|| {
            let b = match self.ip {
                std::net::IpAddr::V4(a) => a.octets(),
                std::net::IpAddr::V6(a) => {
                    let o = a.octets();
                    [o[12], o[13], o[14], o[15]]
                }
            };
            [0x02, 0x00, b[0], b[1], b[2], b[3]]
        })
    }
}

/// Takes `tag=`, `trunks=` and `vlan_mode=` out of a port spec's options
/// (a `patch:PEER` spec's too, which `sluice vswitchd` reads itself).
pub fn split_vlan(s: &str) -> Result<(String, Option<sluice_bridge::PortVlan>), String> {
    let (kind, _) = s.split_once(':').unwrap_or((s, ""));
    let mut opts = Vec::new();
    let mut rest = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        match part.split_once('=') {
            Some((k @ ("tag" | "trunks" | "vlan_mode"), v)) if i > 0 && kind != "dpdk" => {
                opts.push((k, v))
            }
            _ => rest.push(part),
        }
    }
    if opts.is_empty() {
        return Ok((s.to_string(), None));
    }
    let vlan = sluice_bridge::PortVlan::parse(&opts).map_err(|e| format!("'{s}': {e}"))?;
    Ok((rest.join(","), Some(vlan)))
}

/// Takes `ip=A/N` and `mac=M` out of a port spec's options.
fn split_underlay(s: &str) -> Result<(String, Option<UnderlayAddr>), String> {
    let (kind, _) = s.split_once(':').unwrap_or((s, ""));
    let (mut ip, mut mac) = (None, None);
    let mut rest = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        match part.split_once('=') {
            Some(("ip", v)) if i > 0 => {
                let (a, n) = v.split_once('/').ok_or_else(|| {
                    format!("'{s}': ip takes ADDRESS/PREFIX, e.g. ip=10.90.0.1/24")
                })?;
                let a: std::net::IpAddr = a
                    .parse()
                    .map_err(|_| format!("'{s}': ip={v}: '{a}' is not an IPv4 or IPv6 address"))?;
                let max = if a.is_ipv4() { 32 } else { 128 };
                let n: u8 = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| format!("'{s}': ip={v}: the prefix length is 1 to {max}"))?;
                if a.is_unspecified() || a.is_multicast() || a == std::net::IpAddr::from([255; 4]) {
                    return Err(format!("'{s}': ip={v}: not a unicast address"));
                }
                if let std::net::IpAddr::V6(v6) = a {
                    if v6.segments()[0] & 0xffc0 == 0xfe80 {
                        return Err(format!(
                            "'{s}': ip={v}: a link-local address cannot be a tunnel endpoint; use a global or unique local one (e.g. fd00::1/64)"
                        ));
                    }
                }
                ip = Some((a, n));
            }
            // DPDK device arguments have a mac= of their own (net_tap).
            Some(("mac", v)) if i > 0 && kind != "dpdk" => {
                mac = Some(parse_mac(v).ok_or_else(|| {
                    format!("'{s}': mac={v}: expected an Ethernet address like 02:00:00:00:00:01")
                })?);
            }
            _ => rest.push(part),
        }
    }
    let addr = match (ip, mac) {
        (Some((ip, prefix)), mac) => Some(UnderlayAddr { ip, prefix, mac }),
        (None, Some(_)) => return Err(format!("'{s}': mac= goes with ip=A/N")),
        (None, None) => None,
    };
    Ok((rest.join(","), addr))
}

/// A unicast Ethernet address (`mac=`).
fn parse_mac(v: &str) -> Option<[u8; 6]> {
    sluice_packet::wire::ethernet::parse_mac(v).filter(|m| m[0] & 1 == 0)
}

/// The syntax, for error messages and `--help`.
pub const SPEC_SYNTAX: &str = "pcap:rx=FILE[,tx=FILE][,loop] | pcap:tx=FILE | null | afpacket:IFNAME[,prio-dscp=N][,prio-pcp=N][,vnet=on|off][,mtu=N] | afxdp:IFNAME[:QUEUE][,mtu=N] | dpdk:DEVARGS | tap:NAME[,vnet=on|off][,mtu=N][,up=off][,persist=on] | stream:unix:PATH | stream:punix:PATH | vhost:PATH | vhost-client:PATH | vxlan|geneve|gre:remote_ip=IP|flow[,key=N|flow][,OPTION=V...]; an Ethernet port takes ,ip=A/N[,mac=M] (IPv4 or IPv6) to be a tunnel underlay; any but a tunnel takes ,tag=N | ,trunks=A;B | ,vlan_mode=access|trunk|native-tagged|native-untagged for NORMAL";

/// The MTUs a port takes: IPv4's minimum to the largest IP datagram.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=65535;

/// `vnet=on|off`.
fn parse_on_off(s: &str, key: &str, value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{s}': {key} takes on or off, not '{value}'")),
    }
}

/// `mtu=N`.
fn parse_mtu(s: &str, value: &str) -> Result<u32, String> {
    value
        .parse()
        .ok()
        .filter(|m| MTU_RANGE.contains(m))
        .ok_or_else(|| {
            format!(
                "'{s}': mtu takes a number of bytes from {} to {} (IP packet size, without the Ethernet header), not '{value}'",
                MTU_RANGE.start(),
                MTU_RANGE.end()
            )
        })
}

/// `IFNAME` of an interface port, checked.
fn parse_ifname<'a>(s: &str, ifname: &'a str, syntax: &str) -> Result<&'a str, String> {
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ', ':', ',']) {
        return Err(format!(
            "'{s}': expected {syntax} with an interface name of 1 to 15 bytes"
        ));
    }
    Ok(ifname)
}

fn parse_afpacket(s: &str, args: &str) -> Result<PortSpec, String> {
    let mut parts = args.split(',');
    let ifname = parse_ifname(s, parts.next().unwrap_or(""), "afpacket:IFNAME")?.to_string();
    let mut opts = AfPacketOptions::default();
    for opt in parts {
        let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
        match key {
            "vnet" => {
                opts.vnet = parse_on_off(s, key, value)?;
                continue;
            }
            "mtu" => {
                opts.mtu = Some(parse_mtu(s, value)?);
                continue;
            }
            _ => {}
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
                    "'{s}': unknown afpacket option '{key}'; expected prio-dscp=N, prio-pcp=N, vnet=on|off or mtu=N"
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
        if let Some(k) = sluice_packet::tunnel::TunnelKind::from_name(kind) {
            return Ok(PortSpec::Tunnel(
                sluice_packet::tunnel::TunnelConfig::parse(k, args, s)?,
            ));
        }
        let (plain, vlan) = split_vlan(s)?;
        if let Some(vlan) = vlan {
            let port: PortSpec = plain.parse()?;
            if matches!(port, PortSpec::Tunnel(_)) {
                return Err(format!("'{s}': a tunnel port takes no VLAN mode"));
            }
            return Ok(PortSpec::Bridged {
                port: Box::new(port),
                vlan,
            });
        }
        let (plain, addr) = split_underlay(s)?;
        if let Some(addr) = addr {
            let port: PortSpec = plain.parse()?;
            return Ok(PortSpec::Underlay {
                port: Box::new(port),
                addr,
            });
        }
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
                let mut parts = args.split(',');
                let first = parts.next().unwrap_or("");
                let (ifname, queue) = first.split_once(':').unwrap_or((first, "0"));
                let ifname = parse_ifname(s, ifname, "afxdp:IFNAME[:QUEUE]")?.to_string();
                let queue: u32 = queue
                    .parse()
                    .map_err(|_| format!("'{s}': queue '{queue}' is not a number"))?;
                let mut mtu = None;
                for opt in parts {
                    match opt.split_once('=') {
                        Some(("mtu", v)) => mtu = Some(parse_mtu(s, v)?),
                        _ => {
                            return Err(format!(
                                "'{s}': unknown afxdp option '{opt}'; expected mtu=N"
                            ))
                        }
                    }
                }
                Ok(PortSpec::AfXdp { ifname, queue, mtu })
            }
            "tap" => {
                let mut parts = args.split(',');
                let ifname = parse_ifname(s, parts.next().unwrap_or(""), "tap:NAME")?.to_string();
                let (mut vnet, mut mtu, mut up, mut persist) = (true, None, true, false);
                for opt in parts {
                    match opt.split_once('=') {
                        Some(("vnet", v)) => vnet = parse_on_off(s, "vnet", v)?,
                        Some(("mtu", v)) => mtu = Some(parse_mtu(s, v)?),
                        Some(("up", v)) => up = parse_on_off(s, "up", v)?,
                        Some(("persist", v)) => persist = parse_on_off(s, "persist", v)?,
                        _ => {
                            return Err(format!(
                                "'{s}': unknown tap option '{opt}'; expected vnet=on|off, mtu=N, up=on|off or persist=on|off"
                            ))
                        }
                    }
                }
                Ok(PortSpec::Tap {
                    ifname,
                    vnet,
                    mtu,
                    up,
                    persist,
                })
            }
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
            "vhost" | "vhost-client" if !args.is_empty() && !args.contains(',') => {
                Ok(PortSpec::Vhost {
                    path: PathBuf::from(args),
                    server: kind == "vhost",
                })
            }
            "vhost" | "vhost-client" => Err(format!(
                "'{s}': expected vhost:PATH (listen for the VM's frontend) or vhost-client:PATH (connect to the hypervisor's socket)"
            )),
            "pcap" => {
                let (mut rx, mut tx, mut looping, mut burst) = (None, None, false, None);
                for opt in args.split(',').filter(|o| !o.is_empty()) {
                    match opt.split_once('=') {
                        Some(("rx", f)) if !f.is_empty() => rx = Some(PathBuf::from(f)),
                        Some(("tx", f)) if !f.is_empty() => tx = Some(PathBuf::from(f)),
                        Some(("burst", n)) => {
                            burst = Some(
                                n.parse::<usize>()
                                    .ok()
                                    .filter(|n| (1..=sluice_packet::BATCH_SIZE).contains(n))
                                    .ok_or_else(|| {
                                        format!(
                                            "'{s}': burst={n}: expected 1 to {} packets per receive",
                                            sluice_packet::BATCH_SIZE
                                        )
                                    })?,
                            )
                        }
                        None if opt == "loop" => looping = true,
                        _ => {
                            return Err(format!(
                            "'{s}': unknown pcap option '{opt}'; expected rx=FILE, tx=FILE, loop or burst=N"
                        ))
                        }
                    }
                }
                if burst.is_some() && looping {
                    return Err(format!("'{s}': burst=N is for a file read once, not with loop"));
                }
                if rx.is_none() && tx.is_none() {
                    return Err(format!("'{s}': a pcap port needs rx=FILE, tx=FILE or both"));
                }
                if looping && rx.is_none() {
                    return Err(format!("'{s}': loop needs rx=FILE"));
                }
                Ok(PortSpec::Pcap {
                    rx,
                    tx,
                    looping,
                    burst,
                })
            }
            _ => Err(format!(
                "'{s}': unknown port type '{kind}'; expected {SPEC_SYNTAX}"
            )),
        }
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn write_mtu(f: &mut std::fmt::Formatter<'_>, mtu: Option<u32>) -> std::fmt::Result {
    match mtu {
        Some(m) => write!(f, ",mtu={m}"),
        None => Ok(()),
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortSpec::Tunnel(c) => write!(f, "{c}"),
            PortSpec::Bridged { port, vlan } => write!(f, "{port},{vlan}"),
            PortSpec::Underlay { port, addr } => {
                write!(f, "{port},ip={}/{}", addr.ip, addr.prefix)?;
                if let Some(m) = addr.mac {
                    write!(f, ",mac={}", sluice_packet::wire::ethernet::fmt_mac(&m))?;
                }
                Ok(())
            }
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
                    write!(f, ",vnet={}", on_off(opts.vnet))?;
                }
                write_mtu(f, opts.mtu)
            }
            PortSpec::Vhost { path, server } => {
                let kind = if *server { "vhost" } else { "vhost-client" };
                write!(f, "{kind}:{}", path.display())
            }
            PortSpec::Tap {
                ifname,
                vnet,
                mtu,
                up,
                persist,
            } => {
                write!(f, "tap:{ifname}")?;
                if !vnet {
                    f.write_str(",vnet=off")?;
                }
                if !up {
                    f.write_str(",up=off")?;
                }
                if *persist {
                    f.write_str(",persist=on")?;
                }
                write_mtu(f, *mtu)
            }
            PortSpec::AfXdp { ifname, queue, mtu } => {
                write!(f, "afxdp:{ifname}:{queue}")?;
                write_mtu(f, *mtu)
            }
            PortSpec::Dpdk { devargs } => write!(f, "dpdk:{devargs}"),
            PortSpec::Stream { path, listen } => write!(
                f,
                "stream:{}:{}",
                if *listen { "punix" } else { "unix" },
                path.display()
            ),
            PortSpec::Pcap {
                rx,
                tx,
                looping,
                burst,
            } => {
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
                if let Some(n) = burst {
                    parts.push(format!("burst={n}"));
                }
                write!(f, "pcap:{}", parts.join(","))
            }
        }
    }
}

/// Opens the port a spec describes.
pub fn open_port(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    match spec {
        PortSpec::Tunnel(c) => Ok(Box::new(crate::tunnel_port::TunnelPort::new(c))),
        PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } => open_port(port),
        PortSpec::Null => Ok(Box::new(NullPort::new())),
        PortSpec::AfPacket { ifname, opts } => Ok(Box::new(AfPacketPort::open(
            &spec.to_string(),
            ifname,
            *opts,
        )?)),
        PortSpec::Tap {
            ifname,
            vnet,
            mtu,
            up,
            persist,
        } => Ok(Box::new(TapPort::open(
            &spec.to_string(),
            ifname,
            *vnet,
            *mtu,
            *up,
            *persist,
        )?)),
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
        PortSpec::AfXdp { ifname, queue, mtu } => Ok(Box::new(AfXdpPort::open(
            &spec.to_string(),
            ifname,
            *queue,
            *mtu,
        )?)),
        PortSpec::Stream { path, listen } => Ok(Box::new(StreamPort::open(
            &spec.to_string(),
            path,
            *listen,
        )?)),
        PortSpec::Vhost { path, server } => Ok(Box::new(VhostPort::open(
            &spec.to_string(),
            path,
            *server,
        )?)),
        PortSpec::Pcap {
            rx,
            tx,
            looping,
            burst,
        } => Ok(Box::new(
            PcapPort::open(&spec.to_string(), rx.as_deref(), tx.as_deref(), *looping)?
                .with_burst(*burst),
        )),
    }
}

impl PortSpec {
    /// The spec without its VLAN mode, and the mode (None: the default).
    pub fn split_vlan(&self) -> (&PortSpec, Option<&sluice_bridge::PortVlan>) {
        match self {
            PortSpec::Bridged { port, vlan } => (port, Some(vlan)),
            other => (other, None),
        }
    }

    /// The MTU it asks for (`,mtu=N`).
    pub fn mtu(&self) -> Option<u32> {
        match self {
            PortSpec::AfPacket { opts, .. } => opts.mtu,
            PortSpec::AfXdp { mtu, .. } | PortSpec::Tap { mtu, .. } => *mtu,
            PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } => port.mtu(),
            _ => None,
        }
    }

    /// The same spec asking for MTU `want` (a port with no MTU option is
    /// left as it is).
    pub fn with_mtu(&self, want: Option<u32>) -> PortSpec {
        let mut s = self.clone();
        match &mut s {
            PortSpec::AfPacket { opts, .. } => opts.mtu = want,
            PortSpec::AfXdp { mtu, .. } | PortSpec::Tap { mtu, .. } => *mtu = want,
            PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } => {
                **port = port.with_mtu(want)
            }
            _ => {}
        }
        s
    }

    /// The Linux interface that is this port's own end (AF_PACKET and
    /// AF_XDP ports; a tap's interface is the peer's end, not the port's).
    pub fn own_ifname(&self) -> Option<&str> {
        match self {
            PortSpec::AfPacket { ifname, .. } | PortSpec::AfXdp { ifname, .. } => Some(ifname),
            PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } => port.own_ifname(),
            _ => None,
        }
    }

    /// Whether [`open_port_queues`] can open this port with several queues.
    pub fn multi_queue(&self) -> bool {
        if let PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } = self {
            return port.multi_queue();
        }
        (cfg!(feature = "dpdk") && matches!(self, PortSpec::Dpdk { .. }))
            || matches!(
                self,
                PortSpec::Null
                    | PortSpec::Tunnel(_)
                    | PortSpec::AfPacket { .. }
                    | PortSpec::Vhost { .. }
                    | PortSpec::Pcap {
                        rx: Some(_),
                        tx: None,
                        looping: true,
                        ..
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
/// spread by the kernel's flow hash); `dpdk` (one rx/tx queue pair per
/// PMD, RSS where the device hashes); `vhost` (a virtio queue pair per
/// handle, `MQ`; a guest that enables fewer gets every handle's frames
/// on its first pair). The others have one queue and
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
        PortSpec::Underlay { port, .. } | PortSpec::Bridged { port, .. } => {
            open_port_queues(port, n)
        }
        PortSpec::Tunnel(c) => Ok((0..n)
            .map(|_| Box::new(crate::tunnel_port::TunnelPort::new(c)) as Box<dyn Port>)
            .collect()),
        PortSpec::Null => Ok((0..n)
            .map(|_| Box::new(NullPort::new()) as Box<dyn Port>)
            .collect()),
        PortSpec::Pcap {
            rx: Some(rx),
            tx: None,
            looping: true,
            ..
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
        #[cfg(feature = "dpdk")]
        PortSpec::Dpdk { devargs } => Ok(crate::dpdk::DpdkPort::open_queues(&name, devargs, n, None)?
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Port>)
            .collect()),
        PortSpec::Vhost { path, server } => Ok(VhostPort::open_shared(&name, path, *server, n)?
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Port>)
            .collect()),
        _ => Err(err(format!(
            "this port has one queue and cannot be shared by {n} PMD threads; with several PMDs use null, pcap:rx=FILE,loop (no tx file), afpacket, vhost or dpdk ports, or run one PMD"
        ))),
    }
}

/// What names a file for [`check_files`]: its device and inode when it
/// exists (so that two names of one file, links or `a/../a`, are one),
/// else its absolute path.
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_id(p: &Path) -> FileId {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(p) {
        return FileId::Inode(m.dev(), m.ino());
    }
    // Not there yet (a capture to be written): its directory's real path
    // and its name.
    let name = p.file_name().map(PathBuf::from).unwrap_or_default();
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    FileId::Path(std::fs::canonicalize(&dir).unwrap_or(dir).join(name))
}

/// Refuses ports whose capture files meet: a `tx=` file that is any
/// port's `rx=` file or another `tx=` file (the same file by any name),
/// which opening it for writing would destroy or interleave. Called on
/// every spec before any is opened.
pub fn check_files(ports: &[(u32, &PortSpec)]) -> Result<(), String> {
    let mut seen: Vec<(FileId, u32, &'static str, &Path)> = Vec::new();
    for &(n, spec) in ports {
        let PortSpec::Pcap { rx, tx, .. } = spec else {
            continue;
        };
        for (p, how) in [(rx, "rx"), (tx, "tx")] {
            let Some(p) = p else { continue };
            let id = file_id(p);
            if let Some((_, m, other, q)) = seen
                .iter()
                .find(|(i, _, other, _)| *i == id && (how == "tx" || *other == "tx"))
            {
                return Err(format!(
                    "port {n}: {how}={} is the file of port {m}'s {other}={}: a capture written while it is read, or written twice, is destroyed; give another file",
                    p.display(),
                    q.display()
                ));
            }
            seen.push((id, n, how, p));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn mtu_and_vlan_come_apart_from_the_rest() {
        let a: PortSpec = "afpacket:eth1,mtu=9000,tag=5".parse().unwrap();
        assert_eq!(a.mtu(), Some(9000));
        let (base, vlan) = a.split_vlan();
        assert!(vlan.is_some());
        assert_eq!(base.with_mtu(None).to_string(), "afpacket:eth1");
        let t: PortSpec = "tap:t0,up=off".parse().unwrap();
        assert_eq!(t.with_mtu(Some(1400)).to_string(), "tap:t0,up=off,mtu=1400");
        assert_eq!(t.split_vlan().1, None);
    }

    #[test]
    fn a_capture_is_not_written_while_read_or_written_twice() {
        use super::{check_files, PortSpec};
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f.pcap");
        std::fs::write(&f, b"x").unwrap();
        let link = d.path().join("link.pcap");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let pcap = |rx: Option<&std::path::Path>, tx: Option<&std::path::Path>| PortSpec::Pcap {
            burst: None,
            rx: rx.map(Into::into),
            tx: tx.map(Into::into),
            looping: false,
        };
        let (a, b) = (pcap(Some(&f), None), pcap(None, Some(&link)));
        let e = check_files(&[(1, &a), (2, &b)]).unwrap_err();
        assert!(
            e.contains("port 2: tx=") && e.contains("port 1's rx="),
            "{e}"
        );
        // One port both ways, and two tx ports on a file not yet made.
        assert!(check_files(&[(1, &pcap(Some(&f), Some(&f)))]).is_err());
        let new = d.path().join("sub/../new.pcap");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let (c, e2) = (
            pcap(None, Some(&d.path().join("new.pcap"))),
            pcap(None, Some(&new)),
        );
        assert!(check_files(&[(3, &c), (4, &e2)]).is_err());
        // Two ports reading one file is fine; so are distinct files.
        assert!(check_files(&[(1, &a), (2, &pcap(Some(&link), None)), (3, &c)]).is_ok());
    }

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
            "afpacket:veth1,vnet=off",
            "afpacket:veth1,vnet=off,mtu=9000",
            "afpacket:veth1,mtu=9000",
            "tap:tap0",
            "tap:tap0,vnet=off,mtu=9000",
            "tap:tap0,up=off",
            "tap:tap0,up=off,persist=on",
            "afxdp:eth1:3",
            "afxdp:eth1:0,mtu=3000",
            "dpdk:net_pcap0,rx_pcap=/tmp/a.pcap,infinite_rx=1",
            "stream:unix:/tmp/a.sock",
            "stream:punix:/tmp/a.sock",
            "vxlan:remote_ip=10.90.0.2,key=42",
            "geneve:remote_ip=flow,key=flow",
            "gre:remote_ip=10.0.0.1,csum=true",
            "afpacket:uplink,ip=10.90.0.1/24",
            "afpacket:uplink,vnet=off,ip=10.90.0.1/24,mac=02:00:00:00:00:01",
            "afxdp:eth1:0,ip=192.168.0.1/16",
            "afpacket:eth1,tag=10",
            "afpacket:eth2,trunks=10;20",
            "null,tag=5,trunks=5;6,vlan_mode=native-untagged",
            "afpacket:uplink,ip=fd90::1/64",
            "dpdk:net_tap0,mac=02:00:00:00:00:09,ip=10.0.0.1/8",
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
        // vnet is on unless turned off, on afpacket and tap alike.
        for (spec, vnet) in [
            ("afpacket:e0", true),
            ("afpacket:e0,vnet=on", true),
            ("afpacket:e0,vnet=off", false),
        ] {
            match spec.parse::<PortSpec>().unwrap() {
                PortSpec::AfPacket { opts, .. } => assert_eq!(opts.vnet, vnet, "{spec}"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            "tap:t0,vnet=on".parse::<PortSpec>().unwrap(),
            PortSpec::Tap {
                ifname: "t0".into(),
                vnet: true,
                mtu: None,
                up: true,
                persist: false,
            }
        );
        for bad in [
            "afpacket:",
            "afpacket:a-name-of-16-bytes",
            "afpacket:eth0,prio-dscp=99",
            "afpacket:eth0,speed=1",
            "afpacket:eth0,prio-pcp=x",
            "afpacket:eth0,vnet=yes",
            "tap:",
            "tap:t0,vnet=1",
            "tap:t0,mtu=67",
            "tap:t0,mtu=65536",
            "afpacket:eth0,mtu=",
            "afxdp:eth0,mtu=x",
            "afxdp:eth0,speed=1",
            "afxdp::1",
            "afxdp:eth0:x",
            "stream:tcp:1.2.3.4:5",
            "stream:unix:",
            "afpacket:e0,ip=10.0.0.1",
            "afpacket:e0,ip=10.0.0.1/33",
            "afpacket:e0,ip=fe80::1/64",
            "afpacket:e0,ip=fd90::1/129",
            "afpacket:e0,ip=ff02::1/64",
            "afpacket:e0,ip=224.0.0.1/4",
            "afpacket:e0,mac=02:00:00:00:00:01",
            "afpacket:e0,ip=10.0.0.1/24,mac=01:00:00:00:00:01",
            "vxlan:key=1",
        ] {
            assert!(bad.parse::<PortSpec>().is_err(), "{bad}");
        }
    }
}
