//! The datapath's settings shared by `sluice run`, `bench` and `demo`:
//! the flow caches' ([`CacheArgs`]) and where Sluice may behave as Open
//! vSwitch does or otherwise ([`OvsBehaviourArgs`]).

use clap::Args;
use sluice::config::Config;
use sluice_classifier::table::{PushMpls, PushVlan, SelectHash, SetFieldMode};
use sluice_classifier::FragHandling;
use sluice_packet::rewrite::FragRewrites;

/// Flow-cache settings (defaults as Open vSwitch's).
#[derive(Args, Default)]
pub(crate) struct CacheArgs {
    /// Insert into the exact-match cache with probability 1/N (default 100;
    /// 1 = always; 0 turns the EMC off).
    #[arg(long, value_name = "N")]
    emc_insert_inv_prob: Option<u32>,
    /// Turn the signature match cache off.
    #[arg(long)]
    no_smc: bool,
    /// Make every megaflow an exact match of its packet (no wildcards), as
    /// `ovs-appctl upcall/disable-megaflows`: each new flow is an upcall.
    #[arg(long)]
    disable_megaflows: bool,
    /// Share (%) of a PMD's cycles upcalls may take while cached traffic
    /// competes (default 25; 100 = no limit). Misses beyond it wait in a
    /// queue (12,288 packets with the default pool) and are translated as
    /// the share allows; only misses beyond a full queue are dropped
    /// (counted as `upcall budget`). A source that can wait (a capture, a
    /// vhost-user guest) is read later instead, never dropped. With no
    /// cached traffic nothing is held back.
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(1..=100))]
    upcall_share: Option<u32>,
    /// Share (%) of a PMD's cycles making packet-ins (for OpenFlow
    /// controllers) may take while the PMD also forwards (default 10; 100 =
    /// no limit). Beyond it packet-ins are dropped (counted as `upcall
    /// budget`), so forwarded flows keep their rate in a flood of
    /// packet-ins even with no --controller-rate-limit; with nothing
    /// forwarded nothing is refused.
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(1..=100))]
    packet_in_share: Option<u32>,
    /// Most megaflows (default 200000); installs beyond are refused and
    /// their packets forwarded uncached.
    #[arg(long, value_name = "N")]
    flow_limit: Option<usize>,
    /// Most distinct megaflow masks (default 512), a bound on the
    /// classifier's subtables.
    #[arg(long, value_name = "N")]
    mask_limit: Option<usize>,
    /// List the megaflows at the end (like ovs-appctl dpctl/dump-flows).
    #[arg(long)]
    pub(crate) dump_megaflows: bool,
    /// How long an output batch may wait for more packets: auto or US for
    /// every port, N=auto or N=US for port N (repeatable). auto, the
    /// default, has each port measure what its sends cost and how often
    /// its packets come, and hold a partly filled batch only where that
    /// pays (never past 50 µs; see docs/batching.md); 0 sends at the end of
    /// each rx burst (OVS's default); US pins the longest wait.
    #[arg(long, value_name = "[N=]auto|US", value_parser = sluice::config::parse_flush_arg)]
    tx_flush_interval: Vec<(Option<u32>, sluice_datapath::TxFlush)>,
    /// Keep PMD performance metrics for 'sluice ctl pmd-perf-show'
    /// (histograms of cycles and packets per iteration, packets per rx and
    /// tx batch, cycles per upcall; the last 60 s; iterations over 250 µs),
    /// as OVS's other_config:pmd-perf-metrics=true. Off by default, as
    /// OVS; 'sluice ctl set pmd-perf-metrics=true' turns them on later.
    #[arg(long)]
    pmd_perf_metrics: bool,
    /// Microseconds a PMD thread polls with nothing received before it
    /// sleeps in poll(2), woken by the first packet or command (default
    /// 200; 0: it never sleeps). Only a PMD whose ports all have a
    /// descriptor to wait on sleeps (tap, afpacket, afxdp, stream), as
    /// Open vSwitch reads such ports from a thread that sleeps; one that
    /// reads a DPDK, vhost-user or file port always polls. pmd-stats counts
    /// the sleeps.
    #[arg(long, value_name = "US")]
    pmd_sleep_after: Option<u32>,
    /// Connections the connection tracker has memory ready for, made
    /// ready when the first rule or group with a ct action is installed
    /// (default 131072: about 27 MB, 208 bytes a connection). A burst of
    /// new connections then takes no memory from the kernel in the PMD
    /// (each page the kernel finds and clears there cost the PMD more
    /// than tracking the connections on it). Past it the tables grow as
    /// connections come; 0 makes none ready ahead.
    #[arg(long, value_name = "N")]
    ct_prealloc: Option<u64>,
}

/// How packets are read and rewritten where Open vSwitch has a setting
/// (defaults as OVS 3.1's).
#[derive(Args, Default)]
pub(crate) struct OvsBehaviourArgs {
    /// VLAN tags parsed into the flow, as OVS's other_config:vlan-limit
    /// (default 1: a second tag's TPID is the EtherType, and ip/tcp rules do
    /// not see inside QinQ frames; 2, or 0 for no limit, parses both tags).
    #[arg(long, value_name = "N")]
    vlan_limit: Option<usize>,
    /// How the tables see IP fragments, as `ovs-ofctl set-frags`: normal
    /// (default: every fragment's L4 ports and ICMP type/code read as 0),
    /// nx-match (a first fragment's L4 fields match) or drop (every fragment
    /// dropped, counted as 'ip fragment'). reassemble is not supported.
    #[arg(long, value_name = "MODE", value_parser = FragHandling::parse)]
    frag_handling: Option<FragHandling>,
    /// What rewrites do to fragments: ovs (default, as OVS 3.1: an IPv4
    /// later fragment's first payload bytes are treated as an L4 header by
    /// address and ICMP rewrites; an IPv6 atomic fragment's L4 checksum is
    /// not updated) or correct (only real L4 headers; see docs/flow-language.md).
    #[arg(long, value_name = "MODE", value_parser = FragRewrites::parse)]
    frag_rewrites: Option<FragRewrites>,
    /// What a push_vlan onto a tagged packet puts in the new tag: ovs
    /// (default, as OVS 3.1: VID 0, PCP 0) or spec (the outer tag's VID and
    /// PCP, as OpenFlow 1.3 says).
    #[arg(long, value_name = "MODE", value_parser = PushVlan::parse)]
    push_vlan: Option<PushVlan>,
    /// The TTL of an MPLS label pushed onto a packet that is neither MPLS
    /// nor IP: ovs (default, as OVS 3.1: 64) or spec (0, as OpenFlow 1.3:
    /// a pushed header's fields are 0 unless copied from an MPLS or IP
    /// header).
    #[arg(long, value_name = "MODE", value_parser = PushMpls::parse)]
    push_mpls: Option<PushMpls>,
    /// Which fields set_field may write: ovs (default, as OVS 3.1:
    /// eth_type, ip_proto and mpls_bos are read-only, and a rule, group
    /// bucket or packet-out writing one is refused) or spec (OpenFlow 1.3:
    /// those too; ip_proto updates the IPv4 header checksum and the
    /// transport checksum's pseudo-header).
    #[arg(long, value_name = "MODE", value_parser = SetFieldMode::parse)]
    set_field: Option<SetFieldMode>,
    /// How a select group hashes a packet to its bucket: ovs (default, as
    /// OVS 3.1's dp_hash: the same connection takes the same bucket
    /// through either switch; frames that differ only in their Ethernet
    /// or ARP addresses share one) or spread (Ethernet, IP or ARP
    /// addresses, protocol and ports over 4,096 slots by weight: any of
    /// them spreads flows; os-ken's select-group tests expect it).
    #[arg(long, value_name = "MODE", value_parser = SelectHash::parse)]
    select_hash: Option<SelectHash>,
    /// What ct(commit,nat) -- nat with neither src nor dst -- does to a new
    /// connection: ovs (default, as OVS 3.1's userspace tracker: the
    /// connection gets a reply tuple of address 0 and port 0, so its
    /// replies are not found and start connections of their own) or
    /// kernel (as the Linux kernel's tracker: committed untranslated, its
    /// replies found).
    #[arg(long, value_name = "MODE", value_parser = sluice_conntrack::NatAlone::parse)]
    ct_nat_alone: Option<sluice_conntrack::NatAlone>,
    /// NORMAL (the default rule of a switch given no flow file, or
    /// actions=NORMAL): seconds a learned MAC lives without a packet from
    /// it, 15 to 3600 (OVS's mac-aging-time). [default: 300]
    #[arg(long, value_name = "SECS", value_parser = parse_mac_aging)]
    mac_aging_time: Option<u64>,
    /// NORMAL: most MACs learned (OVS's mac-table-size); past it the
    /// least recently used MAC of the port with the most goes.
    /// [default: 8192]
    #[arg(long, value_name = "N", value_parser = parse_mac_table_size)]
    mac_table_size: Option<usize>,
    /// Pad frames shorter than 60 bytes with zeros to 60 when they are
    /// sent, as an Ethernet NIC does on the wire (default: off, as OVS: a
    /// frame leaves as short as its actions made it, e.g. after a pop).
    #[arg(long)]
    pad_short_frames: bool,
    /// How much of a packet a packet-in carries: ovs (default, as OVS
    /// 3.1: the whole packet, whatever the controller action's max_len)
    /// or spec (up to the action's max_len, as OpenFlow says).
    #[arg(long, value_name = "MODE", value_parser = sluice::config::parse_packet_in_max_len)]
    packet_in_max_len: Option<bool>,
}

fn parse_mac_aging(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    sluice::config::check_mac_aging(n)
}

fn parse_mac_table_size(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of entries"))?;
    sluice::config::check_mac_table_size(n)
}

impl OvsBehaviourArgs {
    pub(crate) fn apply(&self, config: &mut Config) {
        if let Some(n) = self.vlan_limit {
            config.datapath.vlan_limit = n;
        }
        if let Some(m) = self.frag_handling {
            config.frag_handling = m;
        }
        if let Some(m) = self.frag_rewrites {
            config.frag_rewrites = m;
        }
        if let Some(m) = self.push_vlan {
            config.push_vlan = m;
        }
        if let Some(m) = self.push_mpls {
            config.push_mpls = m;
        }
        if let Some(m) = self.set_field {
            config.set_field = m;
        }
        if let Some(m) = self.select_hash {
            config.select_hash = m;
        }
        if let Some(m) = self.ct_nat_alone {
            config.ct_nat_alone = m;
        }
        if let Some(s) = self.mac_aging_time {
            config.mac_aging_time = Some(s);
        }
        if let Some(n) = self.mac_table_size {
            config.mac_table_size = Some(n);
        }
        if self.pad_short_frames {
            config.datapath.pad_short_frames = true;
        }
        if let Some(b) = self.packet_in_max_len {
            config.datapath.packet_in_max_len = b;
        }
    }
}

impl CacheArgs {
    pub(crate) fn apply(&self, config: &mut Config) {
        for &(port, f) in &self.tx_flush_interval {
            match port {
                None => config.datapath.tx_flush = f,
                Some(n) => config.port_tx_flush.push((n, f)),
            }
        }
        let c = &mut config.datapath.cache;
        if let Some(n) = self.emc_insert_inv_prob {
            c.emc_insert_inv_prob = n;
        }
        if self.no_smc {
            c.smc_enabled = false;
        }
        if self.disable_megaflows {
            c.megaflows = false;
        }
        if let Some(p) = self.upcall_share {
            c.upcall_share_pct = p;
        }
        if let Some(p) = self.packet_in_share {
            c.packet_in_share_pct = p;
        }
        if let Some(n) = self.flow_limit {
            c.megaflow.max_flows = n;
        }
        if let Some(n) = self.mask_limit {
            c.megaflow.max_masks = n;
        }
        if let Some(us) = self.pmd_sleep_after {
            config.datapath.sleep_after_us = us;
        }
        if let Some(n) = self.ct_prealloc {
            config.ct_prealloc = Some(n);
        }
        if self.pmd_perf_metrics {
            config.datapath.perf_metrics = true;
        }
    }
}
