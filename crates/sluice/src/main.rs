//! The `sluice` command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod allocator;
mod bench_cmd;
mod cache_args;
mod io_floor;
mod manpages;
mod xdp_send;

use clap::{Args, Parser, Subcommand};
use sluice::config::{parse_port_arg, Config};
use sluice::pmd::Placement;
use sluice::report::{self, RunSummary};
use sluice::runner::{self, RunOptions};
use sluice::{trace, workload};
use sluice_port::spec::SPEC_SYNTAX;
use sluice_port::PortSpec;

use cache_args::{CacheArgs, OvsBehaviourArgs};

const ABOUT: &str = "Sluice: a userspace software switch. It forwards packets between ports by \
OpenFlow rules written in the ovs-ofctl flow language, through a batched poll-mode datapath.";

const EXAMPLES: &str = "\
Examples:
  sluice
      Run the built-in workload in memory and show rates and counters.
  sluice run --flows rules.flows --port 1=pcap:rx=in.pcap --port 2=pcap:tx=out.pcap
      Forward a capture through the rules; exits when the capture is drained.
  sluice trace --flows rules.flows 'in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80'
      Show which rules match a packet and what the datapath does with it.
  sluice check rules.flows
      Validate a flow file and print the rules as Sluice reads them.
  sluice gen -o zipf10k.pcap --flows 10000 --dist zipf --packets 1000000
      Write a traffic profile (64-byte UDP, 10k flows, Zipf).
  sluice bench --rules l3l4 --flows 100,10000 --dist zipf --config default,megaflow-only
      Measure the datapath on in-memory ports.";

#[derive(Parser)]
#[command(name = "sluice", version, about = ABOUT, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Forward packets between ports by the rules of a flow file.
    #[command(after_help = RUN_HELP, allow_negative_numbers = true)]
    Run(Box<RunArgs>),
    /// Show how the rules handle one packet (like ovs-appctl ofproto/trace).
    #[command(
        after_help = "Example:\n  sluice trace --flows rules.flows 'in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80'"
    )]
    Trace(TraceArgs),
    /// Talk to a running sluice over its control socket.
    #[command(after_help = CTL_HELP)]
    Ctl(CtlArgs),
    /// Validate a flow file and print its rules as Sluice reads them
    /// (refusing what `run` refuses: a group or meter that does not exist,
    /// a field kept read-only).
    #[command(after_help = "Example:\n  sluice check rules.flows")]
    Check {
        /// The flow file (ovs-ofctl syntax, one rule per line).
        flows: PathBuf,
        #[command(flatten)]
        ovs: OvsBehaviourArgs,
    },
    /// Write a traffic profile (pcap) or a benchmark rule set.
    #[command(
        after_help = "Example:\n  sluice gen -o zipf10k.pcap --flows 10000 --dist zipf --packets 1000000"
    )]
    Gen(bench_cmd::GenArgs),
    /// Measure the datapath per rule set, flow count, distribution and
    /// cache configuration on in-memory ports, with the I/O floor.
    #[command(
        after_help = "Example:\n  sluice bench --rules l3l4 --flows 100,10000 --dist zipf --config default,megaflow-only"
    )]
    Bench(bench_cmd::BenchArgs),
    /// Measure the I/O floor of ports: what they receive sent straight out
    /// of one port, no datapath between (like dpdk-testpmd's io mode).
    #[command(name = "io-floor", after_help = io_floor::IO_FLOOR_HELP)]
    IoFloor(io_floor::IoFloorArgs),
    /// Send frames out of an interface from inside the kernel (XDP live
    /// frames): a sender for benchmarks over veth that one core can run
    /// several times faster than a socket.
    #[command(name = "xdp-send", after_help = xdp_send::XDP_SEND_HELP)]
    XdpSend(xdp_send::XdpSendArgs),
    /// Write the man pages: sluice.8 and one per subcommand
    /// (sluice-run.8, ...), from the same definitions as --help.
    #[command(after_help = "Example:\n  sluice man /usr/share/man/man8 && man sluice-run")]
    Man {
        /// The directory to write them into (made if missing).
        dir: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell).
    #[command(after_help = "Example:\n  sluice completions bash > /etc/bash_completion.d/sluice")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Run as ovs-vswitchd: make the bridges and ports an ovsdb-server's
    /// Open_vSwitch database holds, as ovs-vsctl, OVN and libvirt write
    /// them (also when this binary is run under the name ovs-vswitchd).
    #[command(after_help = sluice::vswitchd_cmd::VSWITCHD_HELP)]
    Vswitchd(sluice::vswitchd_cmd::VswitchdArgs),
    /// Run the built-in workload in memory (what `sluice` alone does).
    #[command(after_help = "Example:\n  sluice demo --flow-count 100000 --dump-megaflows")]
    Demo {
        /// Packets each of the two sending ports replays.
        #[arg(long, default_value_t = workload::PACKETS_PER_PORT)]
        packets: u64,
        /// Distinct flows in the traffic (round robin over them).
        #[arg(long, default_value_t = workload::DEFAULT_FLOWS)]
        flow_count: u32,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

const RUN_HELP: &str = "\
Port specs:
  pcap:rx=FILE          receive the frames of a capture (classic pcap, Ethernet)
  pcap:rx=FILE,loop     load the capture once and replay it forever
  pcap:tx=FILE          write what the port sends to a capture
  pcap:rx=A,tx=B        both
  null                  discard what the port sends
  afpacket:IFNAME       a Linux interface through AF_PACKET rings (TPACKET_V2);
                        brought up and made promiscuous; needs root.
                        Options: ,prio-dscp=N ,prio-pcp=N: packets at or above
                        this DSCP (default 46) or VLAN PCP (default 5) use the
                        egress queue's priority band; ,vnet=off: no
                        virtio-net headers (on by default: veths and taps
                        with their offloads on, i.e. partial checksums and
                        64 KB TSO super-frames, work; super-frames pass whole
                        to other afpacket and tap ports and are segmented in
                        software for any other port; 64 KiB ring slots, about
                        50 MiB per socket, 5 MiB with vnet=off); ,mtu=N
  afxdp:IFNAME[:QUEUE]  one queue (default 0) of a Linux interface through an
                        AF_XDP socket whose UMEM is the packet pool; loads a
                        small XDP program (removed on exit); zero-copy where
                        the driver can, copy mode otherwise; needs root.
                        Option: ,mtu=N
  tap:NAME              create tap interface NAME (or attach to it) and bring
                        it up; with virtio-net headers as a VM's virtio-net
                        has them (,vnet=off: without). Options: ,mtu=N;
                        ,up=off: leave it down (as OVS leaves an internal
                        port: the user brings it up); ,persist=on: it
                        outlives the switch with its addresses, until the
                        port is deleted (as OVS's internal ports)
  mtu=N                 (afpacket, afxdp, tap) set the interface's MTU, 68 to
                        65535 (else the port takes the interface's own, 1500
                        for a veth or a new tap); longer frames are the counted
                        drop 'too big'
  stream:unix:PATH      connect to a unix socket (Open vSwitch netdev-dummy
                        framing: 2-byte big-endian length, then the frame);
                        retried every 100 ms while nobody listens
  stream:punix:PATH     listen on a unix socket for one such peer
  vhost:PATH            a vhost-user port (a VM's virtio-net, DPDK's
                        virtio-user): listen on PATH for the hypervisor;
                        vhost-client:PATH connects to the hypervisor's socket
                        (and again whenever it comes back). docs/vhost.md
  dpdk:DEVARGS          a DPDK ethdev (a vdev with options, or a PCI address);
                        needs the build with --features dpdk. docs/dpdk.md
  vxlan:OPTIONS         a tunnel port (also geneve: and gre:), with Open
                        vSwitch's options: remote_ip=IP|flow (required),
                        local_ip=IP|flow, key=N|flow (or in_key=, out_key=),
                        dst_port=N, tos=N|inherit, ttl=N,
                        df_default=true|false, csum=true|false; IPv4 or
                        IPv6; it sends through an underlay port (below).
                        docs/tunnels.md
  ,ip=A/N[,mac=M]       (any Ethernet port) an underlay: an IPv4 or IPv6
                        address of the switch's own on that port, for
                        tunnels (answers ARP or neighbour solicitations,
                        decapsulates what comes to it); e.g.
                        --port 2=afpacket:eth1,ip=10.90.0.1/24
                        --port 10=vxlan:remote_ip=10.90.0.2,key=42
                        (or ip=fd90::1/64 and remote_ip=fd90::2)

Live interfaces (afpacket, afxdp, tap, stream) never end: stop with Ctrl-C or
SIGTERM, --duration or --packets. Traffic that enters through an afxdp port
carries no checksum state: a TCP/UDP checksum that holds only the
pseudo-header sum (a sender's checksum offload) is completed on the way out
('rx partial checksums'). With afpacket vnet=off, turn off the sender's
offloads (ethtool -K IF tx off tso off gso off), or its 64 KB super-frames
are the drop 'too big'.

With finite inputs, the run drains them, flushes every output, prints the
counters and exits 0. Every received packet is reported as forwarded, sent to
the controller queue, or dropped with a reason; every port drop has a reason.

Configuration file (TOML), instead of or besides flags (flags win):
  flows = \"rules.flows\"
  [datapath]
  pool_frames = 16384
  [[ports]]
  number = 1
  spec = \"pcap:rx=in.pcap\"

Examples:
  sluice run --flows rules.flows --port 1=pcap:rx=in.pcap --port 2=pcap:tx=out.pcap
      Forward a capture through the rules; exits when it is drained.
  sluice run --port 1=afpacket:veth0 --port 2=afpacket:veth1 --ctl /tmp/s.ctl
      A learning switch (NORMAL) between two interfaces, driven by sluice ctl.";

#[derive(Args)]
struct RunArgs {
    /// A port: N=SPEC, where N is its OpenFlow port number.
    #[arg(long = "port", value_name = "N=SPEC", value_parser = parse_port_arg)]
    ports: Vec<(u32, PortSpec)>,
    /// Flow file (ovs-ofctl syntax, one rule per line). None: one rule,
    /// priority=0,actions=NORMAL (a MAC-learning switch, as ovs-vsctl
    /// add-br makes a bridge), unless a controller in secure fail mode
    /// gives the rules.
    #[arg(long, value_name = "FILE")]
    flows: Option<PathBuf>,
    /// Geneve options as tun_metadata0..3 fields, as ovs-ofctl
    /// add-tlv-map takes them: '{class=C,type=T,len=4|8}->tun_metadataN'
    /// (several: comma-separated, or the flag again). Also `sluice ctl
    /// add-tlv-map` on a running switch. docs/tunnels.md
    #[arg(long = "tlv-map", value_name = "MAPPINGS")]
    tlv_map: Vec<String>,
    /// TOML configuration file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Stop after this many seconds (for endless inputs; more than 0, at
    /// most 1e9).
    #[arg(long, value_name = "SECS", value_parser = sluice::config::parse_seconds)]
    duration: Option<f64>,
    /// Stop after receiving exactly this many packets, counted over every
    /// port (and every PMD).
    #[arg(long, value_name = "N")]
    packets: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Serve `sluice ctl` on this unix socket while running: owner-only
    /// (0600), removed at exit; only a stale socket already at PATH is
    /// replaced, anything else is an error. With it (or an OpenFlow
    /// front end) a switch with no receiving port stays up for ports to be
    /// added.
    #[arg(long, value_name = "PATH")]
    ctl: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (OpenMetrics text):
    /// per PMD, port, rx queue, cache level and rule table, and the
    /// OpenFlow channel's counters. ADDR is PORT (on 127.0.0.1),
    /// IP:PORT or [IPv6]:PORT; off unless given. Each scrape reads the
    /// counters the PMDs publish to 'sluice ctl pmd-stats'. E.g.
    /// --metrics 9477, then 'curl -s localhost:9477/metrics'.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// What the switch logs to stderr: LEVEL or TARGET=LEVEL,
    /// comma-separated (levels error, warn, info, debug, trace, off;
    /// targets switch, openflow, ctl, pmd, port, capture); what is not
    /// named logs at info. E.g. --log openflow=debug (every OpenFlow
    /// message), --log warn. Also SLUICE_LOG. Lines a peer can cause
    /// (connections) are rate-limited, with a count of those left out.
    #[arg(long, value_name = "SPEC")]
    log: Option<String>,
    /// Accept OpenFlow connections (controllers and 'ovs-ofctl -O
    /// OpenFlow13 ... tcp:127.0.0.1:6653' in 1.3; plain 'ovs-ofctl' in 1.0
    /// with Nicira's extensions): ptcp:PORT[:IP] (IP defaults to
    /// 127.0.0.1), pssl:PORT[:IP] (TLS: the peer's certificate must chain
    /// to --ca-cert) or punix:PATH (owner-only). Repeatable. With it,
    /// --flows is optional: the tables start empty and a miss drops.
    #[arg(long, value_name = "TARGET")]
    listen: Vec<String>,
    /// Connect to an OpenFlow 1.3 controller: tcp:IP[:PORT], ssl:IP[:PORT]
    /// (TLS; port 6653 by default) or unix:PATH; reconnects with backoff
    /// (1 s doubling to 8 s) for as long as the switch runs. Repeatable.
    #[arg(long, value_name = "TARGET")]
    controller: Vec<String>,
    /// With ssl: or pssl:, the switch's private key (PEM), as OVS's
    /// --private-key.
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// With ssl: or pssl:, the switch's certificate (PEM), as OVS's
    /// --certificate.
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// With ssl: or pssl:, the CA certificate that every peer's
    /// certificate must chain to (PEM), as OVS's --ca-cert. A peer without one is
    /// refused, and the refusal logged.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// OpenFlow datapath id, 16 hex digits (0x optional); default: random,
    /// printed at start.
    #[arg(long, value_name = "HEX")]
    datapath_id: Option<String>,
    /// Packet-ins a second to each controller, beyond a burst of a quarter
    /// of that (OVS's controller-rate-limit); more are dropped and counted.
    /// 0: no limit.
    /// [default: 1000]
    #[arg(long, value_name = "PPS")]
    controller_rate_limit: Option<u32>,
    /// 'secure' (default) or 'standalone'. With a controller and no flow
    /// file, a standalone switch starts as a learning switch
    /// (priority=0,actions=NORMAL) until the controller changes the
    /// rules, a secure one with no rules. A secure switch keeps its rules
    /// when no controller is connected; a standalone one whose
    /// controllers (--controller) have all been gone for 15 s fails open,
    /// as OVS: every packet NORMAL, above the rules, until one connects.
    #[arg(long, value_name = "MODE", value_parser = ["secure", "standalone"])]
    fail_mode: Option<String>,
    /// Run one PMD thread per CPU listed (e.g. 0,1 or 1-3), each pinned to
    /// its CPU with its own caches and megaflows; every port then has one
    /// rx/tx queue per PMD (null, pcap:rx=F,loop and afpacket ports can; a
    /// vhost port offers the guest one virtio queue pair per PMD).
    /// Default: one PMD, not pinned.
    #[arg(long, value_name = "CPUS")]
    pmd_cores: Option<String>,
    /// Rx queues per port that can have several (null, pcap:rx=F,loop,
    /// afpacket: a fanout group of N sockets, vhost: N virtio queue pairs,
    /// at most 16), at least one per PMD. Each
    /// PMD sends on one queue of every port and polls it; the other queues
    /// are dealt round-robin and can be moved by measured load with
    /// 'sluice ctl pmd-rxq-rebalance' (OVS's pmd-rxq-assign=cycles).
    /// Default: one per PMD.
    #[arg(long, value_name = "N")]
    n_rxq: Option<usize>,
    /// Move rx queues between PMDs by load on its own, as OVS's
    /// pmd-auto-lb: every --pmd-auto-lb-interval seconds, when a PMD spent
    /// at least --pmd-auto-lb-load-threshold % of its cycles on packets and
    /// moving queues (as 'sluice ctl pmd-rxq-rebalance' would) lowers the
    /// busiest PMD's load by at least --pmd-auto-lb-improvement-threshold %.
    /// Each rebalance is logged on stderr. Needs two or more PMDs and
    /// queues that can move (--n-rxq above the PMD count).
    #[arg(long)]
    pmd_auto_lb: bool,
    /// Seconds between looks at the load (default 60, OVS's one minute;
    /// at least 0.1).
    #[arg(long, value_name = "SECS", value_parser = sluice::config::parse_seconds)]
    pmd_auto_lb_interval: Option<f64>,
    /// Busy share (%) that makes a PMD overloaded (default 95).
    #[arg(long, value_name = "PCT")]
    pmd_auto_lb_load_threshold: Option<u32>,
    /// How much (%) a rebalance must lower the busiest PMD's load (default 25).
    #[arg(long, value_name = "PCT")]
    pmd_auto_lb_improvement_threshold: Option<u32>,
    /// Lock all memory into RAM, present and future, as `ovs-vswitchd
    /// --mlockall` (which ovs-ctl passes by default): every page the
    /// datapath will use is faulted in when it is mapped, not when a miss
    /// storm first writes it, and none is paged out. The megaflow table's
    /// reservation becomes resident (about 70 MB per PMD at the default
    /// flow limit). Needs CAP_IPC_LOCK or a large enough `ulimit -l`;
    /// without them a warning says so and the run goes on unlocked.
    #[arg(long)]
    mlockall: bool,
    #[command(flatten)]
    cache: CacheArgs,
    #[command(flatten)]
    ovs: OvsBehaviourArgs,
}

const CTL_HELP: &str = "Commands:\n  pmd-stats | pmd-stats-clear | pmd-rxq-show | dump-megaflows | dump-odp-flows [-m] [--filter MATCH] | del-megaflows | dump-flows | dump-ports\n  trace FLOW | trace --packet HEX --in-port N\n  capture PORT FILE [--rx|--tx|--both] [--count N] [--filter MATCH] | capture-stop PORT | capture-show\n  pmd-perf-show [-nh] [--seconds [N]] [--iteration-log [N]]\n  set tx-flush-interval=auto|US [port=N] | set pmd-perf-metrics=true|false | set pmd-perf-log-us=US\n  add-flow FLOW | add-flows FILE | replace-flows FILE\n  mod-flows [--strict] FLOW | del-flows [--strict] [FLOW]\n  add-port N=SPEC | set-port N=SPEC | del-port N | pmd-rxq-rebalance | of-show\n  dump-conntrack [zone=N] | flush-conntrack [zone=N] | conntrack-stats | ct-set-maxconns N\n  ct-set-limits [default=N] [zone=Z,limit=N]... | ct-get-limits [zone=Z,...] | ct-del-limits zone=Z,...\n  fdb-show | fdb-flush | fdb-stats-show\n  ct-set-timeout-policy zone=N ATTR=SECS,... | ct-get-timeout-policy zone=N | ct-del-timeout-policy zone=N\n  ipf-get-status [-m] | ipf-set-enabled|ipf-set-disabled v4|v6 | ipf-set-min-frag v4|v6 N | ipf-set-max-nfrags N\n\nRule and port commands return once the datapath runs with the change;\ndel-port sends what the port has queued before it goes.\n\nExamples:\n  sluice ctl --ctl /tmp/s.ctl pmd-stats\n  sluice ctl --ctl /tmp/s.ctl add-flow 'priority=10,udp,tp_dst=53,actions=output:2'";

#[derive(Args)]
struct CtlArgs {
    /// The control socket (default: $SLUICE_CTL).
    #[arg(long, value_name = "PATH", env = "SLUICE_CTL")]
    ctl: PathBuf,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

#[derive(Args)]
struct TraceArgs {
    /// Flow file with the rules.
    #[arg(long, value_name = "FILE")]
    flows: PathBuf,
    /// The packet as match fields, e.g. 'in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80'.
    #[arg(required_unless_present = "packet")]
    flow: Option<String>,
    /// The packet as hex bytes of an Ethernet frame instead. With the
    /// bytes, a recirculation (after pop_mpls or pop_pbb) is followed: the
    /// trace goes on with the packet as the datapath parses it again; and
    /// for a check_pkt_larger, the trace says which branch this packet's
    /// length takes.
    #[arg(long, value_name = "HEX", requires = "in_port")]
    packet: Option<String>,
    /// The input port, with --packet.
    #[arg(long, value_name = "N")]
    in_port: Option<u32>,
    /// Ports that exist (for all, flood and NORMAL); default: those the
    /// rules and the flow name.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    ports: Vec<u32>,
    #[command(flatten)]
    ovs: OvsBehaviourArgs,
}

fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    // A second Ctrl-C while stopping ends the process the usual way.
    let _ = ctrlc::set_handler(move || {
        if s.swap(true, Ordering::Relaxed) {
            std::process::exit(130);
        }
    });
    stop
}

fn print_outcome(out: &runner::RunOutcome, json: bool) {
    for w in &out.warnings {
        tracing::warn!(target: "switch", "{w}");
    }
    let summary = RunSummary {
        elapsed: out.elapsed,
        stats: &out.stats,
        per_pmd: &out.per_pmd,
        ports: &out.ports,
        rules: &out.rules,
        now_us: out.now_us,
        packet_ins: out.packet_ins,
        cache_occupancy: out.cache_occupancy,
        megaflows: out.megaflows.as_deref(),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&summary)).expect("json")
        );
    } else {
        // A reader that went away has what it wanted; any other failure
        // to write is said.
        if let Err(e) = emit(
            &mut std::io::stdout().lock(),
            format_args!("{}", report::text(&summary)),
        ) {
            eprintln!("sluice: {e}");
        }
    }
}

/// `--datapath-id`: 1 to 16 hex digits, `0x` optional.
fn parse_datapath_id(s: &str) -> Result<u64, String> {
    let h = s.strip_prefix("0x").unwrap_or(s);
    if h.is_empty() || h.len() > 16 {
        return Err(format!("--datapath-id '{s}': give up to 16 hex digits"));
    }
    u64::from_str_radix(h, 16).map_err(|_| format!("--datapath-id '{s}': not hex"))
}

fn cmd_run(a: RunArgs) -> Result<(), String> {
    let mut cfg = match &a.config {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    if let Some(f) = a.flows {
        cfg.flows = Some(f);
    }
    for (n, spec) in a.ports {
        cfg.ports.retain(|(m, _)| *m != n);
        cfg.add_port(n, spec)?;
    }
    for m in &a.tlv_map {
        cfg.add_tlv_map(m).map_err(|e| format!("--tlv-map: {e}"))?;
    }
    if let Some(cores) = &a.pmd_cores {
        cfg.pmd_cores =
            sluice::config::parse_cpu_list(cores).map_err(|e| format!("--pmd-cores {e}"))?;
    }
    if let Some(n) = a.n_rxq {
        cfg.n_rxq =
            Some(sluice::config::check_n_rxq(n).map_err(|e| format!("--{}", e.replace('_', "-")))?);
    }
    let from_file = cfg.auto_lb;
    cfg.auto_lb = sluice::config::auto_lb_settings(
        a.pmd_auto_lb || from_file.is_some(),
        a.pmd_auto_lb_interval
            .or(from_file.map(|f| f.interval.as_secs_f64())),
        a.pmd_auto_lb_load_threshold
            .or(from_file.map(|f| f.load_threshold_pct)),
        a.pmd_auto_lb_improvement_threshold
            .or(from_file.map(|f| f.improvement_pct)),
    )
    .map_err(|e| {
        e.replace(
            "set pmd_auto_lb = true, or --pmd-auto-lb",
            "add --pmd-auto-lb",
        )
    })?;
    a.cache.apply(&mut cfg);
    a.ovs.apply(&mut cfg);
    let stop_after = RunOptions {
        duration: a.duration.map(Duration::from_secs_f64),
        packets: a.packets,
        dump_megaflows: a.cache.dump_megaflows,
        ctl: a.ctl,
        metrics: match &a.metrics {
            Some(m) => {
                Some(sluice::metrics_http::parse_addr(m).map_err(|e| format!("--metrics {e}"))?)
            }
            None => cfg.metrics,
        },
        listen: cfg
            .openflow
            .listen
            .iter()
            .chain(&a.listen)
            .map(|t| sluice_ofproto::channel::parse_listen(t).map_err(|e| format!("--listen {e}")))
            .collect::<Result<_, _>>()?,
        controllers: cfg
            .openflow
            .controllers
            .iter()
            .chain(&a.controller)
            .map(|t| {
                sluice_ofproto::channel::parse_controller(t)
                    .map_err(|e| format!("--controller {e}"))
            })
            .collect::<Result<_, _>>()?,
        fail_standalone: match a.fail_mode.as_deref().or(cfg.openflow.fail_mode.as_deref()) {
            None | Some("secure") => false,
            Some("standalone") => true,
            Some(m) => return Err(format!("fail_mode '{m}': give secure or standalone")),
        },
        controller_rate_limit: a
            .controller_rate_limit
            .or(cfg.openflow.controller_rate_limit)
            .unwrap_or(1000),
        datapath_id: a
            .datapath_id
            .as_deref()
            .or(cfg.openflow.datapath_id.as_deref())
            .map(parse_datapath_id)
            .transpose()?,
        tls: sluice_ofproto::tls::TlsFiles {
            private_key: a.private_key.or(cfg.openflow.private_key.clone()),
            certificate: a.certificate.or(cfg.openflow.certificate.clone()),
            ca_cert: a.ca_cert.or(cfg.openflow.ca_cert.clone()),
        },
        ..RunOptions::default()
    };
    if a.mlockall {
        // Before any datapath exists, so all of its memory is locked.
        if let Err(e) = sluice_port::sys::lock_all_memory() {
            tracing::warn!(target: "switch", "--mlockall: mlockall failed ({e}); running with memory that can fault and page");
        }
    }
    let out = runner::run(&cfg, &stop_after, stop_flag())?;
    print_outcome(&out, a.json);
    Ok(())
}

fn cmd_trace(a: TraceArgs) -> Result<(), String> {
    let mut cfg = Config::default();
    a.ovs.apply(&mut cfg);
    let mut rules = runner::load_rules(&a.flows)?;
    runner::set_rule_modes(&mut rules, &cfg)?;
    let key = match (&a.flow, &a.packet) {
        (_, Some(hex)) => {
            trace::key_from_packet(hex, a.in_port.unwrap_or(0), cfg.datapath.vlan_limit)?
        }
        (Some(desc), None) => {
            let (key, ttl_assumed) = trace::key_from_description(desc)?;
            if ttl_assumed {
                eprintln!("sluice: note: no nw_ttl given; tracing with nw_ttl=64");
            }
            key
        }
        (None, None) => return Err("give the packet as a flow description or --packet HEX".into()),
    };
    let mut ports = if a.ports.is_empty() {
        runner::ports_named_by(&rules)
    } else {
        a.ports
    };
    if !ports.contains(&key.in_port) && key.in_port != 0 {
        ports.push(key.in_port);
    }
    ports.sort_unstable();
    ports.dedup();
    let bytes = match &a.packet {
        Some(hex) => Some(trace::packet_bytes(hex)?),
        None => None,
    };
    let vlans = sluice_packet::extract::vlan_limit(cfg.datapath.vlan_limit);
    print!(
        "{}",
        trace::trace(
            sluice_classifier::XlateEnv::single(&rules, &ports),
            &key,
            bytes.as_deref().map(|b| (b, vlans)),
        )
    );
    Ok(())
}

fn cmd_ctl(a: CtlArgs) -> Result<(), String> {
    let mut words = a.command.into_iter();
    let cmd = words.next().expect("required");
    let mut args: Vec<String> = words.collect();
    if cmd == "add-flows" || cmd == "replace-flows" {
        let [file] = args.as_slice() else {
            return Err(format!("{cmd} takes one flow file"));
        };
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        args = vec![file.clone(), text];
    }
    let resp = sluice::ctl_socket::request(&a.ctl, &sluice::ctl_socket::Request { cmd, args })?;
    if resp.ok {
        if !resp.output.is_empty() {
            // One newline at the end, whether the answer has it or not.
            let nl = if resp.output.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            emit(
                &mut std::io::stdout().lock(),
                format_args!("{}{nl}", resp.output),
            )?;
        }
        Ok(())
    } else {
        Err(resp.output)
    }
}

fn cmd_check(flows: PathBuf, ovs: OvsBehaviourArgs) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    let specs = runner::read_rules(&flows)?;
    let read = t0.elapsed().as_secs_f64();
    let mut rules = sluice_classifier::table::RuleSet::from_specs(&specs, 0);
    drop(specs);
    let mut cfg = Config::default();
    ovs.apply(&mut cfg);
    runner::set_rule_modes(&mut rules, &cfg).map_err(|e| format!("{}: {e}", flows.display()))?;
    let took = t0.elapsed().as_secs_f64();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let tables = rules
        .iter()
        .map(|r| r.table)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    emit(
        &mut out,
        format_args!(
            "{}: {} rules in {tables} tables (read and indexed in {took:.2} s: {read:.2} s reading, {:.2} s indexing)\n",
            flows.display(),
            rules.len(),
            took - read,
        ),
    )?;
    for r in rules.iter() {
        if !emit(&mut out, format_args!("{}\n", r.dump(0)))? {
            return Ok(());
        }
    }
    std::io::Write::flush(&mut out).or_else(|e| pipe_closed(&e))
}

/// Writes to standard output; a reader that went away (`sluice check F |
/// head`) ends the output quietly (false) instead of failing.
fn emit(out: &mut impl std::io::Write, args: std::fmt::Arguments) -> Result<bool, String> {
    match out.write_fmt(args) {
        Ok(()) => Ok(true),
        Err(e) => pipe_closed(&e).map(|()| false),
    }
}

fn pipe_closed(e: &std::io::Error) -> Result<(), String> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(format!("writing to standard output: {e}"))
    }
}

fn cmd_demo(packets: u64, flow_count: u32, json: bool, cache: &CacheArgs) -> Result<(), String> {
    if flow_count == 0 {
        return Err("--flow-count must be at least 1".into());
    }
    if !json {
        println!("Sluice built-in workload: 2 replay ports x {packets} packets ({flow_count} flows, 64-byte frames)");
        println!("into 2 null ports, through these rules:\n");
        for line in workload::RULES.lines() {
            println!("  {line}");
        }
        println!();
    }
    let mut cfg = Config::default();
    cache.apply(&mut cfg);
    let opts = RunOptions {
        dump_megaflows: cache.dump_megaflows,
        ..RunOptions::default()
    };
    let out = runner::run_ports(
        &cfg,
        &[Placement::default()],
        workload::rules(),
        workload::ports(packets, flow_count)
            .into_iter()
            .map(|(n, p)| (n, vec![p]))
            .collect(),
        &opts,
        stop_flag(),
    )?;
    print_outcome(&out, json);
    Ok(())
}

/// This binary run as `ovs-vswitchd`.
#[derive(Parser)]
#[command(name = "ovs-vswitchd", about = "Sluice in ovs-vswitchd's place: see `sluice vswitchd --help`.", after_help = sluice::vswitchd_cmd::VSWITCHD_HELP, disable_version_flag = true)]
struct OvsVswitchd {
    #[command(flatten)]
    args: sluice::vswitchd_cmd::VswitchdArgs,
}

/// `sluice vswitchd`: the fork of `--detach` and the log before any
/// thread, then the daemon.
fn run_vswitchd(a: sluice::vswitchd_cmd::VswitchdArgs) -> ExitCode {
    match sluice::vswitchd_cmd::prepare(&a) {
        Ok(false) => return ExitCode::SUCCESS,
        Ok(true) => {}
        Err(e) => {
            eprintln!("ovs-vswitchd: {e}");
            return ExitCode::from(1);
        }
    }
    match sluice::vswitchd_cmd::vswitchd(a, stop_flag()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(target: "switch", "{e}");
            eprintln!("ovs-vswitchd: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    allocator::tune();
    let missing = sluice::cpu::missing_features();
    if !missing.is_empty() {
        eprintln!(
            "sluice: this build uses CPU features this CPU lacks ({}): it was built for \
             x86-64-v3 (.cargo/config.toml). Rebuild on this machine with \
             RUSTFLAGS=\"-C target-cpu=native\" cargo build --release",
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    // Run as `ovs-vswitchd` (a link, as Debian's alternatives make it):
    // ovs-vswitchd's command line.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if Path::new(&argv0)
        .file_name()
        .is_some_and(|n| n == "ovs-vswitchd")
    {
        return run_vswitchd(OvsVswitchd::parse().args);
    }
    let cli = Cli::parse();
    if let Some(Command::Vswitchd(a)) = cli.command {
        return run_vswitchd(a);
    }
    // The log: `run --log` or SLUICE_LOG, else information and up.
    let env = std::env::var("SLUICE_LOG").ok();
    let spec = match &cli.command {
        Some(Command::Run(a)) => a.log.clone().or(env),
        _ => env,
    };
    if let Err(e) = sluice::log::init(spec.as_deref()) {
        eprintln!("sluice: --log {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        None => cmd_demo(
            workload::PACKETS_PER_PORT,
            workload::DEFAULT_FLOWS,
            false,
            &CacheArgs::default(),
        ),
        Some(Command::Demo {
            packets,
            flow_count,
            json,
            cache,
        }) => cmd_demo(packets, flow_count, json, &cache),
        Some(Command::Run(a)) => cmd_run(*a),
        Some(Command::Trace(a)) => cmd_trace(a),
        Some(Command::Check { flows, ovs }) => cmd_check(flows, ovs),
        Some(Command::Ctl(a)) => cmd_ctl(a),
        Some(Command::Gen(a)) => bench_cmd::gen(a),
        Some(Command::Bench(a)) => bench_cmd::bench(a),
        Some(Command::IoFloor(a)) => io_floor::io_floor(a),
        Some(Command::XdpSend(a)) => xdp_send::xdp_send(a, stop_flag()),
        Some(Command::Vswitchd(_)) => unreachable!("run above"),
        Some(Command::Man { dir }) => {
            use clap::CommandFactory;
            manpages::write_man_pages(&Cli::command(), &dir).map(|files| {
                for f in files {
                    println!("{f}");
                }
            })
        }
        Some(Command::Completions { shell }) => {
            use clap::CommandFactory;
            manpages::print_completions(&mut Cli::command(), shell);
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            if e.contains("port spec") {
                eprintln!("sluice: port specs: {SPEC_SYNTAX}");
            }
            ExitCode::from(2)
        }
    }
}
