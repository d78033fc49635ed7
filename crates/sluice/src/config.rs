//! The switch configuration: ports, rules, datapath sizing. Comes from a
//! TOML file, command-line flags, or both (flags win).
//!
//! ```toml
//! flows = "rules.flows"          # relative to this file
//! pmd_cores = [1]               # one pinned PMD thread per CPU listed
//! n_rxq = 4                     # rx queues per multi-queue port (default: one per PMD)
//! pmd_auto_lb = true            # move rx queues by load on its own (OVS's pmd-auto-lb)
//! pmd_auto_lb_interval = 60     # seconds between looks at the load
//! pmd_auto_lb_load_threshold = 95         # % busy that makes a PMD overloaded
//! pmd_auto_lb_improvement_threshold = 25  # % the busiest PMD's load must drop
//! vlan_limit = 1                # VLAN tags parsed (OVS's other_config:vlan-limit; 0 = all)
//! frag_handling = "normal"      # normal, nx-match or drop (ovs-ofctl set-frags)
//! frag_rewrites = "ovs"         # ovs or correct: what rewrites do to fragments
//! push_vlan = "ovs"             # ovs or spec: a tag pushed over a tag copies its VID/PCP (spec)
//! push_mpls = "ovs"             # ovs or spec: a label pushed onto non-IP has TTL 64 (ovs) or 0 (spec)
//! set_field = "ovs"             # ovs or spec: set_field may write eth_type, ip_proto, mpls_bos (spec)
//! ct_nat_alone = "ovs"          # ovs or kernel: what ct(commit,nat) does to a new connection
//! mac_aging_time = 300          # NORMAL: seconds a MAC learned lives without a packet (15-3600)
//! mac_table_size = 8192         # NORMAL: most MACs learned
//! pad_short_frames = false      # pad frames under 60 bytes when sent (as a NIC on the wire)
//! packet_in_max_len = "ovs"     # ovs or spec: packet-ins carry the whole packet (ovs) or up to max_len (spec)
//! tlv_map = "{class=0x102,type=0x80,len=4}->tun_metadata0"  # Geneve options as fields (ovs-ofctl add-tlv-map)
//!
//! metrics = "127.0.0.1:9477"  # Prometheus metrics at http://127.0.0.1:9477/metrics (off unless given)
//!
//! [datapath]
//! pool_frames = 16384
//! emc_insert_inv_prob = 100     # 1 = always, 0 = EMC off
//! smc = true
//! megaflows = true              # false: exact-match megaflows only
//! upcall_share = 25             # % of PMD cycles upcalls may take under contention
//! packet_in_share = 10          # % of PMD cycles packet-ins may take while forwarding
//! flow_limit = 200000
//! mask_limit = 512
//!
//! tx_flush_interval = "auto"    # µs an output batch may wait, or auto (the default)
//! pmd_perf_metrics = false      # pmd-perf-show's histograms and logs (OVS's pmd-perf-metrics)
//! pmd_sleep_after = 200         # µs an idle PMD polls before it sleeps (kernel ports only; 0: never)
//! ct_prealloc = 131072          # connections whose memory is ready once a rule tracks (0: grow as they come)
//!
//! [openflow]                   # an OpenFlow 1.3 channel (see `sluice run --help`)
//! controllers = ["tcp:192.0.2.10:6653"]
//! listen = ["ptcp:6653", "punix:sluice.of"]   # a punix: path is relative to this file
//! datapath_id = "0000000000000001"
//! fail_mode = "secure"          # or standalone
//! controller_rate_limit = 1000  # packet-ins a second per controller (0: none)
//!
//! [[ports]]
//! number = 1
//! spec = "pcap:rx=in.pcap"
//! tx_flush_interval = 50        # this port's own (or "auto")
//!
//! [[ports]]
//! number = 2
//! spec = "pcap:tx=out.pcap"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_classifier::table::{PushMpls, PushVlan, SelectHash, SetFieldMode};
use sluice_classifier::FragHandling;
use sluice_datapath::DatapathConfig;
use sluice_datapath::TxFlush;
use sluice_packet::rewrite::FragRewrites;
use sluice_port::PortSpec;

use crate::auto_lb::AutoLb;

mod values;

pub use values::{
    auto_lb_settings, check_cpus, check_mac_aging, check_mac_table_size, check_n_rxq,
    check_seconds, cpu_count, parse_cpu_list, parse_cpu_list_within, parse_flush_arg,
    parse_packet_in_max_len, parse_port_arg, parse_seconds, parse_seconds_or_zero, MAX_RXQ,
    MAX_SECONDS,
};

/// A parsed configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Flow file.
    pub flows: Option<PathBuf>,
    /// Ports by number.
    pub ports: Vec<(u32, PortSpec)>,
    /// Datapath sizing.
    pub datapath: DatapathConfig,
    /// Per-port `tx-flush-interval` overrides.
    pub port_tx_flush: Vec<(u32, TxFlush)>,
    /// One PMD thread per CPU listed, pinned there (`--pmd-cores`); empty:
    /// one PMD, not pinned.
    pub pmd_cores: Vec<usize>,
    /// Rx queues per port that can have several (null, `pcap:rx=F,loop`,
    /// afpacket), at least one per PMD (`--n-rxq`); `None`: one per PMD.
    pub n_rxq: Option<usize>,
    /// Automatic rx-queue rebalancing (`--pmd-auto-lb`), off when `None`.
    pub auto_lb: Option<AutoLb>,
    /// How the tables see IP fragments (`--frag-handling`).
    pub frag_handling: FragHandling,
    /// What rewrites do to fragments' L4 bytes (`--frag-rewrites`).
    pub frag_rewrites: FragRewrites,
    /// What a pushed VLAN tag carries over a tag (`--push-vlan`).
    pub push_vlan: PushVlan,
    /// A pushed label's TTL over a packet that is not IP (`--push-mpls`).
    pub push_mpls: PushMpls,
    /// Which fields set_field may write (`--set-field`).
    pub set_field: SetFieldMode,
    /// How select groups hash packets (`--select-hash`).
    pub select_hash: SelectHash,
    /// What `ct(commit,nat)` does to a new connection (`--ct-nat-alone`).
    pub ct_nat_alone: sluice_conntrack::NatAlone,
    /// Connections the tracker has memory ready for once a rule tracks
    /// connections (`--ct-prealloc`; `None`:
    /// [`sluice_conntrack::DEFAULT_PREALLOC`]).
    pub ct_prealloc: Option<u64>,
    /// NORMAL's MAC aging time, s (`--mac-aging-time`; `None`: 300).
    pub mac_aging_time: Option<u64>,
    /// NORMAL's MAC table size (`--mac-table-size`; `None`: 8192).
    pub mac_table_size: Option<usize>,
    /// Geneve options as `tun_metadata` fields (`--tlv-map`).
    pub tlv_map: sluice_packet::tunnel::TlvMap,
    /// The `[openflow]` section.
    pub openflow: OpenFlowConfig,
    /// Where to serve Prometheus metrics (`--metrics`); none: off.
    pub metrics: Option<std::net::SocketAddr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    flows: Option<PathBuf>,
    #[serde(default)]
    pmd_cores: Vec<usize>,
    n_rxq: Option<usize>,
    #[serde(default)]
    pmd_auto_lb: bool,
    pmd_auto_lb_interval: Option<f64>,
    pmd_auto_lb_load_threshold: Option<u32>,
    pmd_auto_lb_improvement_threshold: Option<u32>,
    vlan_limit: Option<usize>,
    pad_short_frames: Option<bool>,
    packet_in_max_len: Option<String>,
    frag_handling: Option<String>,
    frag_rewrites: Option<String>,
    push_vlan: Option<String>,
    push_mpls: Option<String>,
    set_field: Option<String>,
    select_hash: Option<String>,
    ct_nat_alone: Option<String>,
    mac_aging_time: Option<u64>,
    mac_table_size: Option<usize>,
    tlv_map: Option<String>,
    #[serde(default)]
    ports: Vec<FilePort>,
    datapath: Option<FileDatapath>,
    openflow: Option<OpenFlowConfig>,
    metrics: Option<MetricsValue>,
}

/// `metrics` in the file: `"IP:PORT"`, or a port (on 127.0.0.1).
#[derive(Deserialize)]
#[serde(untagged)]
enum MetricsValue {
    Port(u16),
    Addr(String),
}

/// The `[openflow]` section: the OpenFlow channel's settings, as written
/// (the command line's `--controller`, `--listen`, ... add to and override
/// them, and `sluice run` checks them all the same way).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenFlowConfig {
    /// `--controller` targets.
    #[serde(default)]
    pub controllers: Vec<String>,
    /// `--listen` targets.
    #[serde(default)]
    pub listen: Vec<String>,
    /// `--datapath-id`.
    pub datapath_id: Option<String>,
    /// `--fail-mode`.
    pub fail_mode: Option<String>,
    /// `--controller-rate-limit`.
    pub controller_rate_limit: Option<u32>,
    /// `--private-key` (for ssl:/pssl:), relative to the file.
    pub private_key: Option<PathBuf>,
    /// `--certificate`, relative to the file.
    pub certificate: Option<PathBuf>,
    /// `--ca-cert`, relative to the file.
    pub ca_cert: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePort {
    number: u32,
    spec: String,
    tx_flush_interval: Option<FlushValue>,
}

/// A `tx_flush_interval` in the file: µs, or "auto".
#[derive(Deserialize)]
#[serde(untagged)]
enum FlushValue {
    Us(u64),
    Word(String),
}

impl FlushValue {
    fn get(&self) -> Result<TxFlush, String> {
        match self {
            FlushValue::Us(us) => sluice_datapath::check_tx_flush_interval(*us).map(TxFlush::Fixed),
            FlushValue::Word(w) => TxFlush::parse(w),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDatapath {
    pool_frames: Option<usize>,
    frame_size: Option<usize>,
    packet_in_queue: Option<usize>,
    emc_insert_inv_prob: Option<u32>,
    smc: Option<bool>,
    megaflows: Option<bool>,
    upcall_share: Option<u32>,
    packet_in_share: Option<u32>,
    flow_limit: Option<usize>,
    mask_limit: Option<usize>,
    tx_flush_interval: Option<FlushValue>,
    pmd_perf_metrics: Option<bool>,
    pmd_sleep_after: Option<u32>,
    ct_prealloc: Option<u64>,
}

fn resolve(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        base.join(p)
    }
}

fn resolve_spec(base: &Path, spec: PortSpec) -> PortSpec {
    match spec {
        PortSpec::Pcap {
            rx,
            tx,
            looping,
            burst,
        } => PortSpec::Pcap {
            rx: rx.map(|p| resolve(base, p)),
            tx: tx.map(|p| resolve(base, p)),
            looping,
            burst,
        },
        PortSpec::Stream { path, listen } => PortSpec::Stream {
            path: resolve(base, path),
            listen,
        },
        other => other,
    }
}

impl Config {
    /// Adds Geneve option mappings as `ovs-ofctl add-tlv-map` takes them.
    pub fn add_tlv_map(&mut self, spec: &str) -> Result<(), String> {
        self.tlv_map
            .add(&sluice_packet::tunnel::TlvEntry::parse_list(spec)?)
            .map_err(|e| e.to_string())
    }

    /// Reads a TOML configuration file; paths in it are relative to it.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_toml(&text, path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses TOML text; relative paths are taken from `base`.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self, String> {
        let f: FileConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut cfg = Config {
            flows: f.flows.map(|p| resolve(base, p)),
            pmd_cores: {
                check_cpus(&f.pmd_cores).map_err(|e| format!("pmd_cores: {e}"))?;
                f.pmd_cores
            },
            n_rxq: f.n_rxq.map(check_n_rxq).transpose()?,
            auto_lb: auto_lb_settings(
                f.pmd_auto_lb,
                f.pmd_auto_lb_interval,
                f.pmd_auto_lb_load_threshold,
                f.pmd_auto_lb_improvement_threshold,
            )?,
            openflow: f
                .openflow
                .map(|mut o| {
                    // A punix:/unix: path is relative to the file.
                    let fix = |t: &mut String| {
                        for pre in ["punix:", "unix:"] {
                            if let Some(p) = t.strip_prefix(pre) {
                                *t = format!("{pre}{}", resolve(base, p.into()).display());
                            }
                        }
                    };
                    o.listen.iter_mut().for_each(fix);
                    o.controllers.iter_mut().for_each(fix);
                    for p in [&mut o.private_key, &mut o.certificate, &mut o.ca_cert] {
                        *p = p.take().map(|p| resolve(base, p));
                    }
                    o
                })
                .unwrap_or_default(),
            metrics: match f.metrics {
                None => None,
                Some(MetricsValue::Port(p)) => {
                    Some(crate::metrics_http::parse_addr(&p.to_string())?)
                }
                Some(MetricsValue::Addr(a)) => {
                    Some(crate::metrics_http::parse_addr(&a).map_err(|e| format!("metrics: {e}"))?)
                }
            },
            ..Config::default()
        };
        if let Some(n) = f.vlan_limit {
            cfg.datapath.vlan_limit = n;
        }
        if let Some(b) = f.pad_short_frames {
            cfg.datapath.pad_short_frames = b;
        }
        if let Some(m) = &f.packet_in_max_len {
            cfg.datapath.packet_in_max_len =
                parse_packet_in_max_len(m).map_err(|e| format!("packet_in_max_len: {e}"))?;
        }
        if let Some(m) = &f.frag_handling {
            cfg.frag_handling =
                FragHandling::parse(m).map_err(|e| format!("frag_handling: {e}"))?;
        }
        if let Some(m) = &f.frag_rewrites {
            cfg.frag_rewrites =
                FragRewrites::parse(m).map_err(|e| format!("frag_rewrites: {e}"))?;
        }
        if let Some(m) = &f.push_vlan {
            cfg.push_vlan = PushVlan::parse(m).map_err(|e| format!("push_vlan: {e}"))?;
        }
        if let Some(m) = &f.push_mpls {
            cfg.push_mpls = PushMpls::parse(m).map_err(|e| format!("push_mpls: {e}"))?;
        }
        if let Some(m) = &f.select_hash {
            cfg.select_hash = SelectHash::parse(m).map_err(|e| format!("select_hash: {e}"))?;
        }
        if let Some(m) = &f.ct_nat_alone {
            cfg.ct_nat_alone =
                sluice_conntrack::NatAlone::parse(m).map_err(|e| format!("ct_nat_alone: {e}"))?;
        }
        if let Some(s) = f.mac_aging_time {
            cfg.mac_aging_time = Some(check_mac_aging(s)?);
        }
        if let Some(n) = f.mac_table_size {
            cfg.mac_table_size = Some(check_mac_table_size(n)?);
        }
        if let Some(m) = &f.set_field {
            cfg.set_field = SetFieldMode::parse(m).map_err(|e| format!("set_field: {e}"))?;
        }
        if let Some(m) = &f.tlv_map {
            cfg.add_tlv_map(m).map_err(|e| format!("tlv_map: {e}"))?;
        }
        for p in f.ports {
            let spec: PortSpec = p.spec.parse()?;
            cfg.add_port(p.number, resolve_spec(base, spec))?;
            if let Some(v) = p.tx_flush_interval {
                cfg.port_tx_flush.push((p.number, v.get()?));
            }
        }
        if let Some(d) = f.datapath {
            if let Some(n) = d.pool_frames {
                cfg.datapath.pool_frames = n;
            }
            if let Some(n) = d.frame_size {
                cfg.datapath.frame_size = n;
            }
            if let Some(n) = d.packet_in_queue {
                cfg.datapath.packet_in_queue = n;
            }
            let c = &mut cfg.datapath.cache;
            if let Some(n) = d.emc_insert_inv_prob {
                c.emc_insert_inv_prob = n;
            }
            if let Some(b) = d.smc {
                c.smc_enabled = b;
            }
            if let Some(b) = d.megaflows {
                c.megaflows = b;
            }
            if let Some(p) = d.upcall_share {
                if !(1..=100).contains(&p) {
                    return Err(format!(
                        "[datapath] upcall_share = {p}: expected a percentage from 1 to 100"
                    ));
                }
                c.upcall_share_pct = p;
            }
            if let Some(p) = d.packet_in_share {
                if !(1..=100).contains(&p) {
                    return Err(format!(
                        "[datapath] packet_in_share = {p}: expected a percentage from 1 to 100"
                    ));
                }
                c.packet_in_share_pct = p;
            }
            if let Some(n) = d.flow_limit {
                c.megaflow.max_flows = n;
            }
            if let Some(on) = d.pmd_perf_metrics {
                cfg.datapath.perf_metrics = on;
            }
            if let Some(us) = d.pmd_sleep_after {
                cfg.datapath.sleep_after_us = us;
            }
            if let Some(n) = d.ct_prealloc {
                cfg.ct_prealloc = Some(n);
            }
            if let Some(n) = d.mask_limit {
                c.megaflow.max_masks = n;
            }
            if let Some(v) = d.tx_flush_interval {
                cfg.datapath.tx_flush = v.get()?;
            }
        }
        Ok(cfg)
    }

    /// Adds a port, refusing a number already used.
    pub fn add_port(&mut self, n: u32, spec: PortSpec) -> Result<(), String> {
        if self.ports.iter().any(|(m, _)| *m == n) {
            return Err(format!("port {n} is given twice"));
        }
        self.ports.push((n, spec));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_address() {
        let at = |t: &str| Config::from_toml(t, Path::new("/cfg")).map(|c| c.metrics);
        assert_eq!(at("").unwrap(), None);
        assert_eq!(
            at("metrics = 9477").unwrap().unwrap().to_string(),
            "127.0.0.1:9477"
        );
        assert_eq!(
            at("metrics = \"0.0.0.0:80\"").unwrap().unwrap().to_string(),
            "0.0.0.0:80"
        );
        assert!(at("metrics = \"here\"")
            .unwrap_err()
            .contains("metrics: 'here'"));
    }

    #[test]
    fn openflow_section() {
        let cfg = Config::from_toml(
            "[openflow]\ncontrollers = [\"tcp:192.0.2.1\"]\nlisten = [\"ptcp:6653\", \"punix:of.sock\"]\ndatapath_id = \"ab\"\nfail_mode = \"standalone\"\ncontroller_rate_limit = 50\n",
            Path::new("/cfg"),
        )
        .unwrap();
        let o = &cfg.openflow;
        assert_eq!(o.controllers, ["tcp:192.0.2.1"]);
        assert_eq!(o.listen, ["ptcp:6653", "punix:/cfg/of.sock"]);
        assert_eq!(
            (
                o.datapath_id.as_deref(),
                o.fail_mode.as_deref(),
                o.controller_rate_limit
            ),
            (Some("ab"), Some("standalone"), Some(50))
        );
        let tls = Config::from_toml(
            "[openflow]\nprivate_key = \"k.pem\"\ncertificate = \"/etc/c.pem\"\nca_cert = \"ca.pem\"\n",
            Path::new("/cfg"),
        )
        .unwrap()
        .openflow;
        assert_eq!(
            (tls.private_key, tls.certificate, tls.ca_cert),
            (
                Some("/cfg/k.pem".into()),
                Some("/etc/c.pem".into()),
                Some("/cfg/ca.pem".into())
            )
        );
        let e = Config::from_toml("[openflow]\ncontroler = []\n", Path::new("/")).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn toml_config() {
        let cfg = Config::from_toml(
            "flows = \"r.flows\"\n[datapath]\npool_frames = 1024\nsmc = false\nmegaflows = false\nupcall_share = 20\npacket_in_share = 30\nemc_insert_inv_prob = 1\nct_prealloc = 4096\n[[ports]]\nnumber = 1\nspec = \"pcap:rx=in.pcap\"\n[[ports]]\nnumber = 2\nspec = \"null\"\n",
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(cfg.flows, Some(PathBuf::from("/cfg/r.flows")));
        assert_eq!(cfg.datapath.pool_frames, 1024);
        assert_eq!(cfg.ct_prealloc, Some(4096));
        assert!(!cfg.datapath.cache.smc_enabled);
        assert!(!cfg.datapath.cache.megaflows);
        assert_eq!(cfg.datapath.cache.upcall_share_pct, 20);
        let bad = Config::from_toml("[datapath]\nupcall_share = 0\n", Path::new("."));
        assert!(bad.unwrap_err().contains("upcall_share = 0"));
        assert_eq!(cfg.datapath.cache.packet_in_share_pct, 30);
        let bad = Config::from_toml("[datapath]\npacket_in_share = 101\n", Path::new("."));
        assert!(bad.unwrap_err().contains("packet_in_share = 101"));
        assert_eq!(cfg.datapath.cache.emc_insert_inv_prob, 1);
        assert_eq!(
            cfg.ports[0],
            (
                1,
                PortSpec::Pcap {
                    rx: Some("/cfg/in.pcap".into()),
                    tx: None,
                    looping: false,
                    burst: None,
                }
            )
        );
        assert!(Config::from_toml("flow = 1", Path::new("."))
            .unwrap_err()
            .contains("unknown field"));
        let dup =
            "[[ports]]\nnumber = 1\nspec = \"null\"\n[[ports]]\nnumber = 1\nspec = \"null\"\n";
        assert!(Config::from_toml(dup, Path::new("."))
            .unwrap_err()
            .contains("twice"));
    }

    #[test]
    fn ovs_behaviour_settings_from_toml() {
        let d = Config::from_toml("", Path::new(".")).unwrap();
        assert_eq!(
            (d.datapath.vlan_limit, d.frag_handling, d.frag_rewrites),
            (1, FragHandling::Normal, FragRewrites::Ovs)
        );
        let cfg = Config::from_toml(
            "vlan_limit = 0\nfrag_handling = \"nx-match\"\nfrag_rewrites = \"correct\"\npush_vlan = \"spec\"\npush_mpls = \"spec\"\nset_field = \"spec\"\n",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(
            (
                cfg.datapath.vlan_limit,
                cfg.frag_handling,
                cfg.frag_rewrites
            ),
            (0, FragHandling::NxMatch, FragRewrites::Correct)
        );
        assert_eq!(
            (d.push_vlan, cfg.push_vlan),
            (PushVlan::Ovs, PushVlan::Spec)
        );
        assert_eq!(
            (d.set_field, cfg.set_field),
            (SetFieldMode::Ovs, SetFieldMode::Spec)
        );
        assert_eq!(
            (d.push_mpls, cfg.push_mpls),
            (PushMpls::Ovs, PushMpls::Spec)
        );
        let sh = Config::from_toml("select_hash = \"spread\"\n", Path::new(".")).unwrap();
        assert_eq!(
            (d.select_hash, sh.select_hash),
            (SelectHash::Ovs, SelectHash::Spread)
        );
        assert!(Config::from_toml("select_hash = \"round-robin\"\n", Path::new(".")).is_err());
        let k = Config::from_toml("ct_nat_alone = \"kernel\"\n", Path::new(".")).unwrap();
        assert_eq!(
            (d.ct_nat_alone, k.ct_nat_alone),
            (
                sluice_conntrack::NatAlone::Ovs,
                sluice_conntrack::NatAlone::Kernel
            )
        );
        let e = Config::from_toml("ct_nat_alone = \"linux\"\n", Path::new(".")).unwrap_err();
        assert!(
            e.contains("ct_nat_alone: unknown ct_nat_alone mode 'linux'"),
            "{e}"
        );
        let e = Config::from_toml("set_field = \"all\"\n", Path::new(".")).unwrap_err();
        assert!(e.contains("set_field: unknown set_field mode 'all'"), "{e}");
        let e = Config::from_toml("push_vlan = \"copy\"\n", Path::new(".")).unwrap_err();
        assert!(
            e.contains("push_vlan: unknown push_vlan mode 'copy'"),
            "{e}"
        );
        let e = Config::from_toml("frag_handling = \"reassemble\"\n", Path::new(".")).unwrap_err();
        assert!(e.contains("does not reassemble"), "{e}");
        let e = Config::from_toml("frag_rewrites = \"x\"\n", Path::new(".")).unwrap_err();
        assert!(e.contains("ovs or correct"), "{e}");
    }

    #[test]
    fn flush_args() {
        assert_eq!(parse_flush_arg("50").unwrap(), (None, TxFlush::Fixed(50)));
        assert_eq!(
            parse_flush_arg("2=100").unwrap(),
            (Some(2), TxFlush::Fixed(100))
        );
        assert_eq!(parse_flush_arg("auto").unwrap(), (None, TxFlush::Auto));
        assert_eq!(parse_flush_arg("3=auto").unwrap(), (Some(3), TxFlush::Auto));
        assert!(parse_flush_arg("x").is_err());
        assert!(parse_flush_arg("2000000").is_err());
        let cfg = Config::from_toml("[datapath]\ntx_flush_interval = 7\n[[ports]]\nnumber = 2\nspec = \"null\"\ntx_flush_interval = 9\n", Path::new(".")).unwrap();
        assert_eq!(cfg.datapath.tx_flush, TxFlush::Fixed(7));
        assert_eq!(cfg.port_tx_flush, vec![(2, TxFlush::Fixed(9))]);
        let cfg = Config::from_toml("[datapath]\ntx_flush_interval = 0\n[[ports]]\nnumber = 2\nspec = \"null\"\ntx_flush_interval = \"auto\"\n", Path::new(".")).unwrap();
        assert_eq!(cfg.datapath.tx_flush, TxFlush::Fixed(0));
        assert_eq!(cfg.port_tx_flush, vec![(2, TxFlush::Auto)]);
        assert_eq!(Config::default().datapath.tx_flush, TxFlush::Auto);
        let e = Config::from_toml("[datapath]\ntx_flush_interval = \"soon\"\n", Path::new("."))
            .unwrap_err();
        assert!(e.contains("give auto"), "{e}");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_within("1", 8).unwrap(), vec![1]);
        assert_eq!(parse_cpu_list_within("0,2-4", 8).unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpu_list_within("3-1", 8)
            .unwrap_err()
            .contains("backwards"));
        assert!(parse_cpu_list_within("a", 8)
            .unwrap_err()
            .contains("not a CPU"));
        // CPUs that do not exist, checked before a range is expanded.
        let e = parse_cpu_list_within("0-1000000000000", 8).unwrap_err();
        assert!(
            e.contains("CPU 1000000000000 does not exist (this machine has CPUs 0-7)"),
            "{e}"
        );
        assert!(parse_cpu_list_within("0,8", 8).is_err());
        assert!(parse_cpu_list("0").is_ok(), "CPU 0 exists everywhere");
        assert!(check_cpus(&[0, usize::MAX]).is_err());
        let cfg = Config::from_toml("pmd_cores = [0, 1]\nn_rxq = 4\n", Path::new(".")).unwrap();
        assert_eq!(cfg.pmd_cores, vec![0, 1]);
        assert_eq!(cfg.n_rxq, Some(4));
    }

    #[test]
    fn auto_lb_from_toml() {
        let cfg = Config::from_toml(
            "pmd_auto_lb = true\npmd_auto_lb_interval = 2\npmd_auto_lb_load_threshold = 80\n",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(cfg.auto_lb, Some(AutoLb::new(2.0, 80, 25).unwrap()));
        assert_eq!(Config::from_toml("", Path::new(".")).unwrap().auto_lb, None);
        let e = Config::from_toml("pmd_auto_lb_interval = 2\n", Path::new(".")).unwrap_err();
        assert!(e.contains("pmd-auto-lb is off"), "{e}");
        let e = Config::from_toml(
            "pmd_auto_lb = true\npmd_auto_lb_load_threshold = 0\n",
            Path::new("."),
        )
        .unwrap_err();
        assert!(e.contains("1 to 100"), "{e}");
    }

    #[test]
    fn port_args() {
        assert_eq!(parse_port_arg("3=null").unwrap(), (3, PortSpec::Null));
        assert!(parse_port_arg("x=null")
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_port_arg("null").unwrap_err().contains("N=SPEC"));
    }
}
