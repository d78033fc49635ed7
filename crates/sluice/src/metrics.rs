//! What `--metrics` serves: the switch's counters in the OpenMetrics text
//! format, for Prometheus, written by `prometheus-client` from one sample
//! of the counters the PMDs already publish (the snapshot `sluice ctl
//! pmd-stats` reads) and the control plane's.
//!
//! Names follow Prometheus' conventions (`sluice_port_rx_packets_total`,
//! base units, labels `pmd`, `port`, `reason`); each HELP text says which
//! OVS counter (`ovs-appctl dpif-netdev/pmd-stats-show`, `ovs-ofctl
//! dump-ports`, ...) the family corresponds to.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sluice_datapath::{DpStats, DROP_REASONS};
use sluice_port::PortDrop;

use crate::ctl::Control;
use crate::pmd::PmdSnapshot;
use sluice_ofproto::hub::{Hub, HubCounters};

/// The OpenFlow tables a sample reads (as `ovs-ofctl dump-tables`).
const N_TABLES: u8 = 254;

/// One reading of everything the endpoint serves.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Each PMD's counters, ports and cache occupancy.
    pub pmds: Vec<PmdSnapshot>,
    /// Per table with rules or lookups: (table, rules, lookups, matches).
    pub tables: Vec<(u8, u32, u64, u64)>,
    /// Flow-mods applied and refused.
    pub flow_mods: [u64; 2],
    /// The OpenFlow channel's counters, when there is one.
    pub openflow: Option<HubCounters>,
    /// Seconds since the switch started.
    pub uptime_s: f64,
}

impl Sample {
    /// Reads the running switch: every PMD's snapshot (one command each,
    /// answered between two iterations), the rule tables' counters (every
    /// rule's, brought up to date: linear in the rules) and the control
    /// plane's.
    pub fn read(control: &Control, hub: Option<&Arc<Hub>>) -> Result<Sample, String> {
        let pmds = control.snapshots()?;
        // A copy of the rules (a new version shares the old one's parts),
        // walked without the lock, which flow-mods wait for.
        let rules = control.with_rules(|rules, _| rules.clone())?;
        let tables = (0..N_TABLES)
            .filter_map(|t| {
                let (n, lookups, matched) = rules.table_counts(t);
                (t == 0 || n > 0 || lookups > 0).then_some((t, n, lookups, matched))
            })
            .collect();
        Ok(Sample {
            pmds,
            tables,
            flow_mods: control.flow_mod_counts(),
            openflow: hub.map(|h| h.counters()),
            uptime_s: control.uptime_us() as f64 / 1e6,
        })
    }

    /// The OpenMetrics text of this sample (ending in `# EOF`).
    pub fn render(self) -> String {
        let mut registry = Registry::with_prefix("sluice");
        registry.register_collector(Box::new(Families(self)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String");
        out
    }
}

/// A label set: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Families(Sample);

/// Writes one family of counters (`_total` is added to `name`).
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, u64)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes one family of gauges.
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, f64)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Batch sizes (packets 1 to 32) as a Prometheus histogram with buckets
/// at the powers of two.
#[derive(Debug)]
struct BatchSizes([u64; 32]);

impl EncodeMetric for BatchSizes {
    fn encode(&self, mut enc: prometheus_client::encoding::MetricEncoder) -> fmt::Result {
        let count: u64 = self.0.iter().sum();
        let sum: u64 = self
            .0
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u64 + 1) * c)
            .sum();
        // Per bucket (the encoder adds them up): sizes in (le/2, le].
        let buckets: Vec<(f64, u64)> = [1usize, 2, 4, 8, 16, 32]
            .iter()
            .map(|&le| {
                let from = le / 2 + 1;
                (le as f64, self.0[from - 1..le].iter().sum())
            })
            .chain([(f64::INFINITY, 0)])
            .collect();
        enc.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            sum as f64, count, &buckets, None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A counter's name as a label value: `controller queue full` →
/// `controller_queue_full`.
fn label_value(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn pmd(p: &PmdSnapshot) -> Labels {
    vec![("pmd", p.placement.index.to_string())]
}

fn with(mut l: Labels, k: &'static str, v: impl Into<String>) -> Labels {
    l.push((k, v.into()));
    l
}

impl Families {
    /// One counter family per PMD from `f` of its datapath counters.
    fn per_pmd(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        f: impl Fn(&DpStats) -> u64,
    ) -> fmt::Result {
        counters(
            enc,
            name,
            help,
            self.0.pmds.iter().map(|p| (pmd(p), f(&p.stats))),
        )
    }

    fn pmd_families(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let pmds = &self.0.pmds;
        gauges(
            enc,
            "pmd_info",
            "A PMD thread and the CPU it is pinned to (core -1: not pinned); pmd-stats-show's header",
            pmds.iter().map(|p| {
                let core = p.placement.core.map_or("-1".to_string(), |c| c.to_string());
                (with(pmd(p), "core", core), 1.0)
            }),
        )?;
        counters(
            enc,
            "pmd_cycles",
            "TSC cycles by state (pmd-stats-show: idle cycles, processing cycles)",
            pmds.iter().flat_map(|p| {
                [
                    (with(pmd(p), "state", "idle"), p.stats.idle_cycles),
                    (with(pmd(p), "state", "busy"), p.stats.processing_cycles),
                ]
            }),
        )?;
        self.per_pmd(
            enc,
            "pmd_sleeps",
            "Times an idle PMD slept in poll(2) until a packet or a command came (pmd-stats-show: sleeps)",
            |s| s.sleeps,
        )?;
        self.per_pmd(
            enc,
            "pmd_sleep_microseconds",
            "Microseconds PMDs slept (in neither cycle count)",
            |s| s.sleep_us,
        )?;
        self.per_pmd(
            enc,
            "pmd_iterations",
            "Poll loop iterations (pmd-stats-show: iterations)",
            |s| s.iterations,
        )?;
        self.per_pmd(
            enc,
            "pmd_rx_packets",
            "Packets received (pmd-stats-show: packets received)",
            |s| s.rx_packets,
        )?;
        self.per_pmd(enc, "pmd_rx_bytes", "Bytes of the packets received", |s| {
            s.rx_bytes
        })?;
        self.per_pmd(
            enc,
            "pmd_recirculations",
            "Packets recirculated (pmd-stats-show: packet recirculations)",
            |s| s.recirculations,
        )?;
        self.per_pmd(
            enc,
            "pmd_tx_packets",
            "Packets sent (pmd-stats-show: sent packets)",
            |s| s.sent_packets,
        )?;
        self.per_pmd(
            enc,
            "pmd_tx_batches",
            "Output batches sent (pmd-stats-show: sent batches; tx_packets over this is avg. packets per output batch)",
            |s| s.sent_batches,
        )?;
        self.per_pmd(
            enc,
            "pmd_packet_ins",
            "Packets sent to a controller (datapath's upcalls of type action)",
            |s| s.packet_ins,
        )?;
        for (name, help, rx) in [
            (
                "pmd_rx_batch_packets",
                "Packets per rx burst that brought any (pmd-perf-show: packets/rx batch)",
                true,
            ),
            (
                "pmd_tx_batch_packets",
                "Packets per send call (pmd-perf-show: packets/tx batch)",
                false,
            ),
        ] {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for p in pmds {
                let sizes = if rx {
                    p.stats.rx_batch_sizes
                } else {
                    p.stats.tx_batch_sizes
                };
                let labels = pmd(p);
                BatchSizes(sizes).encode(m.encode_family(&labels)?)?;
            }
        }
        counters(
            enc,
            "pmd_dropped",
            "Packets the datapath dropped, by reason (ovs-appctl coverage/show datapath_drop_*)",
            pmds.iter().flat_map(|p| {
                DROP_REASONS.iter().map(move |r| {
                    (
                        with(pmd(p), "reason", label_value(r.name())),
                        p.stats.dropped_by(*r),
                    )
                })
            }),
        )?;
        counters(
            enc,
            "upcalls",
            "Cache cascade misses handed to the slow path, by result (pmd-stats-show: miss with success upcall, miss with failed upcall)",
            pmds.iter().flat_map(|p| {
                [
                    (with(pmd(p), "result", "ok"), p.stats.upcalls),
                    (with(pmd(p), "result", "failed"), p.stats.failed_upcalls),
                ]
            }),
        )?;
        self.per_pmd(
            enc,
            "upcalls_deferred",
            "Misses that waited in the upcall queue for the upcall budget (Sluice's own: OVS has no budget)",
            |s| s.upcalls_deferred,
        )
    }

    fn cache_families(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let pmds = &self.0.pmds;
        self.per_pmd(
            enc,
            "cache_lookups",
            "Packets looked up in the cache cascade (received and recirculated); a level's lookups are these less the hits of the levels before it",
            |s| s.rx_packets + s.recirculations,
        )?;
        counters(
            enc,
            "cache_hits",
            "Cache hits by level (pmd-stats-show: emc hits, smc hits, megaflow hits)",
            pmds.iter().flat_map(|p| {
                [
                    (with(pmd(p), "level", "emc"), p.stats.emc_hits),
                    (with(pmd(p), "level", "smc"), p.stats.smc_hits),
                    (with(pmd(p), "level", "megaflow"), p.stats.megaflow_hits),
                ]
            }),
        )?;
        self.per_pmd(
            enc,
            "megaflow_subtable_lookups",
            "Subtables searched for megaflow hits (pmd-stats-show: avg. subtable lookups per megaflow hit, times the hits)",
            |s| s.subtable_lookups,
        )?;
        gauges(
            enc,
            "cache_entries",
            "Entries in each cache level (dpif-netdev/pmd-stats-show; megaflows as dpctl/dump-flows counts them)",
            pmds.iter().flat_map(|p| {
                let (mf, _, emc, smc) = p.occupancy;
                [
                    (with(pmd(p), "level", "emc"), emc as f64),
                    (with(pmd(p), "level", "smc"), smc as f64),
                    (with(pmd(p), "level", "megaflow"), mf as f64),
                ]
            }),
        )?;
        gauges(
            enc,
            "megaflow_masks",
            "Distinct megaflow masks (subtables) (dpctl/show: masks total)",
            pmds.iter().map(|p| (pmd(p), p.occupancy.1 as f64)),
        )?;
        counters(
            enc,
            "megaflow_limit_hits",
            "Megaflows not installed for a limit (flow-limit, mask-limit)",
            pmds.iter().flat_map(|p| {
                [
                    (with(pmd(p), "limit", "flows"), p.stats.flow_limit_hits),
                    (with(pmd(p), "limit", "masks"), p.stats.mask_limit_hits),
                ]
            }),
        )
    }

    fn port_families(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let per_pmd: Vec<_> = self.0.pmds.iter().map(|p| p.ports.clone()).collect();
        let ports = crate::report::merge_ports(&per_pmd);
        let port = |p: &sluice_datapath::PortReport| -> Labels {
            vec![("port", p.ofport.to_string()), ("name", p.name.clone())]
        };
        let each = |f: fn(&sluice_port::PortStats) -> u64| {
            ports
                .iter()
                .map(move |p| (port(p), f(&p.stats)))
                .collect::<Vec<_>>()
        };
        counters(
            enc,
            "port_rx_packets",
            "Packets received (ovs-ofctl dump-ports: rx pkts)",
            each(|s| s.rx_packets),
        )?;
        counters(
            enc,
            "port_rx_bytes",
            "Bytes received (dump-ports: rx bytes)",
            each(|s| s.rx_bytes),
        )?;
        counters(
            enc,
            "port_tx_packets",
            "Packets sent (dump-ports: tx pkts)",
            each(|s| s.tx_packets),
        )?;
        counters(
            enc,
            "port_tx_bytes",
            "Bytes sent (dump-ports: tx bytes)",
            each(|s| s.tx_bytes),
        )?;
        for (dir, name, help) in [
            (
                0,
                "port_rx_dropped",
                "Frames that arrived but were not received, by reason (dump-ports: rx drop)",
            ),
            (
                1,
                "port_tx_dropped",
                "Packets given to the port but not sent, by reason (dump-ports: tx drop)",
            ),
        ] {
            counters(
                enc,
                name,
                help,
                ports.iter().flat_map(|p| {
                    PortDrop::ALL.iter().map(move |r| {
                        let by = if dir == 0 {
                            &p.stats.rx_dropped
                        } else {
                            &p.stats.tx_dropped
                        };
                        (
                            with(port(p), "reason", label_value(r.name())),
                            by[r.index()],
                        )
                    })
                }),
            )?;
        }
        counters(
            enc,
            "port_tx_kicks",
            "Send calls (syscalls, doorbells, guest notifications); tx_packets over this is packets per kick",
            each(|s| s.tx_kicks),
        )?;
        gauges(
            enc,
            "port_tx_hold_seconds",
            "How long a partly filled output batch may wait now (tx-flush-interval, or what auto chose), on the first PMD that sends on the port",
            ports.iter().map(|p| {
                let us = match p.tx_flush {
                    sluice_datapath::TxFlush::Auto => p.kicks.hold_us,
                    sluice_datapath::TxFlush::Fixed(us) => us,
                };
                (port(p), us as f64 / 1e6)
            }),
        )?;
        gauges(
            enc,
            "port_tx_kick_cycles",
            "Measured TSC cycles per send call, the per-packet part left out (0 until measured)",
            ports.iter().map(|p| (port(p), p.kicks.per_call_cycles)),
        )?;
        counters(
            enc,
            "rxq_cycles",
            "TSC cycles spent receiving from an rx queue and processing what came (pmd-rxq-show: usage)",
            self.0.pmds.iter().flat_map(|pm| {
                pm.ports.iter().flat_map(move |p| {
                    p.rxqs.iter().map(move |q| {
                        let l = with(with(pmd(pm), "port", p.ofport.to_string()), "queue", q.qid.to_string());
                        (l, q.rx_cycles)
                    })
                })
            }),
        )
    }

    fn control_families(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let s = &self.0;
        let table = |t: u8| vec![("table", t.to_string())];
        gauges(
            enc,
            "table_rules",
            "Rules in an OpenFlow table (ovs-ofctl dump-tables: active)",
            s.tables
                .iter()
                .map(|&(t, n, _, _)| (table(t), f64::from(n))),
        )?;
        counters(
            enc,
            "table_lookups",
            "Packets looked up in a table (dump-tables: lookup)",
            s.tables.iter().map(|&(t, _, l, _)| (table(t), l)),
        )?;
        counters(
            enc,
            "table_matches",
            "Packets that matched a rule of a table (dump-tables: matched)",
            s.tables.iter().map(|&(t, _, _, m)| (table(t), m)),
        )?;
        counters(
            enc,
            "flow_mods",
            "Flow-mods by result: OpenFlow's one by one, sluice ctl's a rule each (a refused command counts once)",
            [
                (vec![("result", "applied".to_string())], s.flow_mods[0]),
                (vec![("result", "refused".to_string())], s.flow_mods[1]),
            ],
        )?;
        if let Some(h) = &s.openflow {
            gauges(
                enc,
                "openflow_connections",
                "OpenFlow connections that said HELLO (ovs-vsctl list controller: is_connected)",
                [(vec![], h.connections as f64)],
            )?;
            counters(
                enc,
                "openflow_packet_ins",
                "Packet-ins by outcome: sent to a controller, or lost to a full queue, the rate limit (controller-rate-limit) or no controller",
                [
                    ("sent", h.sent),
                    ("queue_full", h.queue_full),
                    ("rate_limited", h.rate_limited),
                    ("no_controller", h.no_controller),
                ]
                .map(|(k, v)| (vec![("outcome", k.to_string())], v)),
            )?;
            counters(
                enc,
                "openflow_connections_closed",
                "Listener connections refused (too many open) or closed (no HELLO in time)",
                [
                    ("too_many", h.refused_busy),
                    ("no_hello", h.closed_no_hello),
                ]
                .map(|(k, v)| (vec![("reason", k.to_string())], v)),
            )?;
        }
        gauges(
            enc,
            "uptime_seconds",
            "Seconds since the switch started",
            [(vec![], s.uptime_s)],
        )?;
        gauges(
            enc,
            "build_info",
            "The running Sluice's version",
            [(
                vec![("version", env!("CARGO_PKG_VERSION").to_string())],
                1.0,
            )],
        )
    }
}

impl Collector for Families {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        self.pmd_families(&mut enc)?;
        self.cache_families(&mut enc)?;
        self.port_families(&mut enc)?;
        self.control_families(&mut enc)
    }
}
