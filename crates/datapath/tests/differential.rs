//! Differential property test: random rule sets (several tables,
//! overlapping masks, priorities, rewrites, resubmits) and random packets
//! through the real datapath, against an independent reference.
//!
//! The reference shares only the flow-key extraction and the linear rule
//! lookup with the datapath. It applies OpenFlow actions to the packet
//! bytes one at a time, re-extracts the key before every lookup (instead
//! of tracking the flow like translation does), and recomputes every
//! checksum from scratch (instead of incremental updates). Outputs must be
//! equal packet for packet and byte for byte; rule counters must be equal;
//! every packet and every frame must be accounted for.
//!
//! `PROPTEST_CASES=5000 cargo test -p sluice-datapath --test differential`
//! runs a larger search.

mod support;

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use sluice_classifier::fields::Prereq;
use sluice_classifier::megaflow::MegaflowLimits;
use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{CacheConfig, Datapath, DatapathConfig, DropReason};
use sluice_packet::build::{Frame, L4};
use sluice_packet::{FlowKey, PacketBatch, PacketPool};
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::{Port, PortCaps, PortStats, RxStatus};
use support::reference::{key_of, Ref, CONTROLLER, PORTS};

// ---------------------------------------------------------------- ports

type Sent = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

/// Replays frames on rx and records (rx timestamp, bytes) on tx. The
/// timestamp is the index of the input packet the copy came from.
struct TestPort {
    rx: ReplayPort,
    sent: Sent,
    stats: PortStats,
}

impl Port for TestPort {
    fn name(&self) -> &str {
        "test"
    }
    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: true,
            finite_rx: true,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: false,
        }
    }
    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        self.rx.rx_burst(pool, batch, in_port)
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let n = batch.len();
        let mut sent = self.sent.lock().unwrap();
        for p in batch.drain() {
            sent.push((p.meta.rx_ts_ns, p.data().to_vec()));
            pool.free(p);
        }
        self.stats.tx_packets += n as u64;
        n
    }
    fn stats(&self) -> PortStats {
        let mut s = self.rx.stats();
        s.tx_packets = self.stats.tx_packets;
        s
    }
}

// ------------------------------------------------------------ generators

#[derive(Debug, Clone, Copy, PartialEq)]
enum Proto {
    Any,
    Ip,
    Ipv6,
    Arp,
    Tcp,
    Udp,
    Icmp,
    Tcp6,
}

fn proto_strategy() -> impl Strategy<Value = Proto> {
    prop_oneof![
        Just(Proto::Any),
        Just(Proto::Ip),
        Just(Proto::Ipv6),
        Just(Proto::Arp),
        Just(Proto::Tcp),
        Just(Proto::Udp),
        Just(Proto::Icmp),
        Just(Proto::Tcp6)
    ]
}

/// Optional match fields of a generated rule: in_port, nw_src, nw_dst,
/// tp_dst (indexes into the pools below) and VLAN.
type MatchChoice = (
    Option<u32>,
    Option<usize>,
    Option<usize>,
    Option<usize>,
    Option<u8>,
);

const PREFIXES: [&str; 5] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.1.1",
    "192.168.0.0/24",
    "0.0.0.0/0",
];
const TP_PORTS: [u16; 3] = [80, 53, 1000];

fn rule_line(
    table: u8,
    prio: u8,
    proto: Proto,
    m: MatchChoice,
    acts: Vec<(u8, u8)>,
    n_tables: u8,
) -> String {
    let mut parts = vec![
        format!("table={table}"),
        format!("priority={}", prio as u16 * 10),
    ];
    let shorthand = match proto {
        Proto::Any => None,
        Proto::Ip => Some("ip"),
        Proto::Ipv6 => Some("ipv6"),
        Proto::Arp => Some("arp"),
        Proto::Tcp => Some("tcp"),
        Proto::Udp => Some("udp"),
        Proto::Icmp => Some("icmp"),
        Proto::Tcp6 => Some("tcp6"),
    };
    if let Some(s) = shorthand {
        parts.push(s.into());
    }
    let (in_port, src, dst, tp, vlan) = m;
    if let Some(p) = in_port {
        parts.push(format!("in_port={p}"));
    }
    // Later tables read the metadata and registers earlier ones wrote.
    if table > 0 && prio.is_multiple_of(3) {
        parts.push(format!("metadata={:#x}/0x3", (prio / 3) % 4));
    }
    if table > 0 && prio % 4 == 1 {
        parts.push(format!("reg1={:#x}/0x3", prio % 3));
    }
    let v4 = matches!(
        proto,
        Proto::Ip | Proto::Tcp | Proto::Udp | Proto::Icmp | Proto::Arp
    );
    if v4 {
        if let Some(s) = src {
            parts.push(format!("nw_src={}", PREFIXES[s]));
        }
        if let Some(d) = dst {
            parts.push(format!("nw_dst={}", PREFIXES[d]));
        }
    }
    let l4 = matches!(proto, Proto::Tcp | Proto::Udp | Proto::Tcp6);
    if l4 {
        if let Some(t) = tp {
            parts.push(format!("tp_dst={}", TP_PORTS[t]));
        }
    }
    match vlan {
        Some(0) => parts.push("vlan_tci=0x0000/0x1000".into()),
        Some(v) => parts.push(format!("dl_vlan={}", v as u16 * 10)),
        None => {}
    }
    let ip = matches!(
        proto,
        Proto::Ip | Proto::Tcp | Proto::Udp | Proto::Icmp | Proto::Ipv6 | Proto::Tcp6
    );
    let ipv4 = matches!(proto, Proto::Ip | Proto::Tcp | Proto::Udp | Proto::Icmp);
    let mut actions = Vec::new();
    // VLAN tags the rule guarantees at each action (at most two, as OVS).
    let mut tags = u8::from(matches!(vlan, Some(v) if v > 0));
    for (kind, arg) in acts {
        let a = match kind % 16 {
            0..=3 => format!("output:{}", 1 + arg % 4),
            4 => "in_port".into(),
            5 => "all".into(),
            6 => format!("mod_dl_src:02:00:00:00:00:{:02x}", arg),
            7 if ipv4 || proto == Proto::Arp => format!("mod_nw_dst:10.1.{}.{}", arg % 3, arg),
            8 if l4 => format!("mod_tp_dst:{}", TP_PORTS[arg as usize % 3]),
            9 => "dec_ttl".into(),
            10 => {
                tags = tags.max(1);
                format!("mod_vlan_vid:{}", (arg % 3) * 10)
            }
            11 => {
                tags = tags.saturating_sub(1);
                "strip_vlan".into()
            }
            12 if tags < 2 => {
                tags += 1;
                format!(
                    "push_vlan:{}",
                    if arg % 2 == 0 { "0x8100" } else { "0x88a8" }
                )
            }
            13 => format!("resubmit(,{})", arg % n_tables),
            14 if ip => format!("set_field:{}->ip_dscp", arg % 64),
            15 if arg % 4 == 0 => "controller:64".into(),
            15 if tags > 0 => format!("set_field:{}->vlan_vid", 4096 + (arg % 3) as u32 * 10),
            // Registers, from constants and from header bits, and header
            // bits from registers (the byte at a time a real pipeline's
            // moves look like).
            15 if arg % 4 == 1 => format!("load:{}->NXM_NX_REG1[0..1]", arg % 3),
            15 if arg % 4 == 2 && ipv4 => "move:NXM_OF_IP_DST[0..1]->NXM_NX_REG1[0..1]".into(),
            15 if arg % 4 == 3 && ipv4 => "move:NXM_NX_REG1[0..7]->NXM_OF_IP_DST[0..7]".into(),
            15 if arg % 4 == 3 => "move:NXM_OF_ETH_SRC[0..7]->NXM_NX_REG1[0..7]".into(),
            _ => format!("output:{}", 1 + arg % 4),
        };
        actions.push(a);
    }
    if table + 1 < n_tables && actions.len() % 3 == 2 {
        if prio % 2 == 1 {
            actions.push(format!("write_metadata:{:#x}/0x3", prio % 4));
        }
        actions.push(format!("goto_table:{}", table + 1));
    }
    let acts = if actions.is_empty() {
        "drop".to_string()
    } else {
        actions.join(",")
    };
    format!("{},actions={}", parts.join(","), acts)
}

fn rules_strategy() -> impl Strategy<Value = Vec<String>> {
    let n_tables = 3u8;
    proptest::collection::vec(
        (
            0..n_tables,
            0u8..5,
            proto_strategy(),
            (
                proptest::option::weighted(0.3, 1u32..5),
                proptest::option::weighted(0.4, 0usize..5),
                proptest::option::weighted(0.4, 0usize..5),
                proptest::option::weighted(0.4, 0usize..3),
                proptest::option::weighted(0.2, 0u8..3),
            ),
            proptest::collection::vec((any::<u8>(), any::<u8>()), 0..5),
        )
            .prop_map(move |(t, p, proto, m, acts)| rule_line(t, p, proto, m, acts, n_tables)),
        1..12,
    )
}

const ADDRS: [[u8; 4]; 5] = [
    [10, 1, 1, 1],
    [10, 1, 2, 3],
    [10, 2, 0, 1],
    [192, 168, 0, 7],
    [8, 8, 8, 8],
];

fn packet_strategy() -> impl Strategy<Value = (u32, Vec<u8>)> {
    (
        1u32..5,
        0u8..8,
        0usize..5,
        0usize..5,
        0usize..4,
        0usize..4,
        0u8..3,
        0u8..4,
        any::<bool>(),
    )
        .prop_map(|(in_port, kind, s, d, sp, dp, vlan, ttl, udp_nocsum)| {
            let ports = [80u16, 53, 1000, 4242];
            let (src, dst) = (ADDRS[s], ADDRS[d]);
            let mut f = match kind {
                0 | 1 => Frame::ipv4(
                    src,
                    dst,
                    L4::Tcp {
                        src: ports[sp],
                        dst: ports[dp],
                        flags: 0x10,
                    },
                ),
                2 => {
                    let f = Frame::ipv4(
                        src,
                        dst,
                        L4::Udp {
                            src: ports[sp],
                            dst: ports[dp],
                        },
                    );
                    if udp_nocsum {
                        f.udp_without_checksum()
                    } else {
                        f
                    }
                }
                3 => Frame::ipv4(src, dst, L4::Icmp { ty: 8, code: 0 }),
                4 => Frame::ipv6(
                    [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, s as u8],
                    [0xfe; 16],
                    L4::Tcp {
                        src: ports[sp],
                        dst: ports[dp],
                        flags: 2,
                    },
                ),
                5 => Frame::arp(1, [2, 0, 0, 0, 0, 9], src, [0; 6], dst),
                6 => Frame::ipv4(
                    src,
                    dst,
                    L4::Udp {
                        src: ports[sp],
                        dst: ports[dp],
                    },
                )
                .frag(0x0020),
                _ => Frame::raw(0x88cc).payload(&[1, 2, 3]),
            };
            f = f.ttl([1, 2, 64, 255][ttl as usize]).payload(b"sluice");
            if vlan > 0 {
                f = f.vlan(0x8100, (vlan as u16 * 10) | 0x2000);
            }
            (in_port, f.build())
        })
}

// ------------------------------------------------------------------ test

/// Cache configurations the datapath is checked under.
fn cache_config(which: u8) -> CacheConfig {
    let base = CacheConfig {
        smc_entries: 1 << 12,
        ..CacheConfig::default()
    };
    match which % 4 {
        // EMC always inserts, SMC on: most packets hit the EMC.
        0 => CacheConfig {
            emc_insert_inv_prob: 1,
            ..base
        },
        // SMC only.
        1 => CacheConfig {
            emc_insert_inv_prob: 0,
            ..base
        },
        // Megaflows only.
        2 => CacheConfig {
            emc_insert_inv_prob: 0,
            smc_enabled: false,
            ..base
        },
        // Tiny limits: installs are refused and packets take the slow path.
        _ => CacheConfig {
            emc_insert_inv_prob: 1,
            megaflow: MegaflowLimits {
                max_flows: 3,
                max_masks: 2,
            },
            ..base
        },
    }
}

/// Runs the packets through the datapath, switching rule sets between
/// poll iterations by `schedule`, and compares with the reference, which
/// uses for each packet the rule set in force for its iteration.
fn check(
    rule_sets: &[Vec<String>],
    schedule: &[usize],
    cache: u8,
    packets: &[(u32, Vec<u8>)],
) -> Result<(), TestCaseError> {
    let mut sets = Vec::new();
    for rules_text in rule_sets {
        let text = rules_text.join("\n");
        let specs = parse_flow_file(&text, None)
            .map_err(|e| TestCaseError::fail(format!("generated a bad rule: {e}\n{text}")))?;
        sets.push(Arc::new(RuleSet::from_specs(&specs, 0)));
    }
    let text = rule_sets
        .iter()
        .map(|r| r.join("\n"))
        .collect::<Vec<_>>()
        .join("\n--- then ---\n");
    let set_for_iteration = |it: usize| schedule[it % schedule.len()];

    // Each poll iteration takes one burst (up to 32) from every port, so a
    // packet's iteration is its position among its port's packets / 32.
    let mut pos_in_port = vec![0usize; packets.len()];
    let mut count = [0usize; 5];
    for (idx, (p, _)) in packets.iter().enumerate() {
        pos_in_port[idx] = count[*p as usize];
        count[*p as usize] += 1;
    }

    // Reference, packet by packet in arrival order.
    let mut want: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    let mut want_hits: std::collections::HashMap<(usize, u64), u64> = Default::default();
    for (idx, (in_port, bytes)) in packets.iter().enumerate() {
        let si = set_for_iteration(pos_in_port[idx] / 32);
        let mut r = Ref {
            rules: &sets[si],
            bytes: bytes.clone(),
            in_port: *in_port,
            outputs: vec![],
            hits: vec![],
            depth: 0,
            deep: 0,
            resubmits: 0,
            error: false,
            vlans: None,
            metadata: 0,
            regs: [0; sluice_packet::key::N_REGS],
        };
        r.table(0);
        for h in r.hits {
            *want_hits.entry((si, h)).or_default() += 1;
        }
        if !r.error {
            want.extend(r.outputs.into_iter().map(|(p, b)| (p, idx as u64, b)));
        }
    }

    // The datapath, with packets spread over the four ports' rx sides.
    let cfg = DatapathConfig {
        pool_frames: 512,
        cache: cache_config(cache),
        ..Default::default()
    };
    let mut dp = Datapath::new(cfg, Arc::clone(&sets[schedule[0]])).unwrap();
    let mut sent: Vec<Sent> = Vec::new();
    for p in PORTS {
        let mut frames = Frames::new();
        for (idx, (in_port, bytes)) in packets.iter().enumerate() {
            if *in_port == p {
                frames.push(bytes, idx as u64);
            }
        }
        let s: Sent = Arc::default();
        sent.push(Arc::clone(&s));
        dp.add_port(
            p,
            Box::new(TestPort {
                rx: ReplayPort::new("rx", frames, false),
                sent: s,
                stats: PortStats::default(),
            }),
        )
        .unwrap();
    }
    let mut it = 0;
    let mut current = schedule[0];
    while !dp.rx_exhausted() {
        let si = set_for_iteration(it);
        if si != current {
            dp.set_rules(Arc::clone(&sets[si]));
            current = si;
        }
        dp.poll_once(it as u64 * 1000);
        it += 1;
    }
    dp.finish().unwrap();

    let st = dp.stats();
    prop_assert!(
        st.rx_balanced(),
        "received != forwarded + controller + dropped: {st:?}"
    );
    prop_assert!(st.tx_balanced(), "copies != sent + tx drops: {st:?}");
    prop_assert_eq!(st.rx_packets, packets.len() as u64);
    prop_assert_eq!(
        st.classified(),
        st.rx_packets - st.dropped_by(DropReason::Runt),
        "every packet classified once: {:?}",
        st
    );
    let (free, cap) = dp.pool_available();
    prop_assert_eq!(free, cap, "every frame back in the pool");

    for (pi, p) in PORTS.iter().enumerate() {
        let got = sent[pi].lock().unwrap().clone();
        // Per flow, copies leave in arrival order. (A packet sent twice to
        // one port goes out as two passes over the flow's batch, as in OVS,
        // so only single copies are checked.)
        let mut copies: std::collections::HashMap<u64, usize> = Default::default();
        for (wp, i, _) in &want {
            if wp == p {
                *copies.entry(*i).or_default() += 1;
            }
        }
        let mut last_by_key: std::collections::HashMap<FlowKey, u64> = Default::default();
        for (idx, _) in got.iter().filter(|(i, _)| copies.get(i) == Some(&1)) {
            let (in_port, bytes) = &packets[*idx as usize];
            let k = key_of(bytes, *in_port).unwrap().0;
            let prev = last_by_key.insert(k, *idx);
            prop_assert!(
                prev.is_none_or(|prev| prev <= *idx),
                "per-flow order broken on port {}",
                p
            );
        }
        let mut got = got;
        got.sort_by_key(|(idx, _)| *idx);
        let expect: Vec<(u64, Vec<u8>)> = want
            .iter()
            .filter(|(wp, _, _)| wp == p)
            .map(|(_, i, b)| (*i, b.clone()))
            .collect();
        prop_assert_eq!(
            got.len(),
            expect.len(),
            "port {}: output count (cache config {})\nrules:\n{}",
            p,
            cache % 4,
            text
        );
        for (g, e) in got.iter().zip(&expect) {
            prop_assert_eq!(
                g.0,
                e.0,
                "port {}: which packet (cache config {})\nrules:\n{}",
                p,
                cache % 4,
                text
            );
            prop_assert_eq!(
                &g.1,
                &e.1,
                "port {}: bytes of packet {} (cache config {})\nrules:\n{}",
                p,
                g.0,
                cache % 4,
                text
            );
        }
    }
    let mut ctl_got: Vec<Vec<u8>> = dp.packet_ins().map(|p| p.data.clone()).collect();
    let mut ctl_want: Vec<Vec<u8>> = want
        .iter()
        .filter(|(p, _, _)| *p == CONTROLLER)
        .map(|(_, _, b)| b.clone())
        .collect();
    ctl_got.sort();
    ctl_want.sort();
    prop_assert_eq!(ctl_got, ctl_want, "packet-ins\nrules:\n{}", text);
    for (si, set) in sets.iter().enumerate() {
        for r in set.iter() {
            prop_assert_eq!(
                r.counters().0,
                want_hits.get(&(si, r.id)).copied().unwrap_or(0),
                "n_packets of rule {} in set {}",
                r.dump(0),
                si
            );
        }
    }
    Ok(())
}

/// A second rule set made from the first by removing one rule and adding
/// another, so most decisions stay and some change.
fn edited(rules: &[String], extra: &[String], drop_at: usize) -> Vec<String> {
    let mut out: Vec<String> = rules.to_vec();
    if out.len() > 1 {
        out.remove(drop_at % out.len());
    }
    out.extend(extra.iter().cloned());
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256),
        rng_seed: RngSeed::Fixed(0x5111ce),
        ..ProptestConfig::default()
    })]

    #[test]
    fn datapath_equals_reference(rules in rules_strategy(), packets in proptest::collection::vec(packet_strategy(), 1..80), cache in 0u8..4) {
        check(&[rules], &[0], cache, &packets)?;
    }

    #[test]
    fn rule_changes_between_batches_are_never_missed(
        rules in rules_strategy(),
        extra in rules_strategy(),
        drop_at in any::<usize>(),
        schedule in proptest::collection::vec(0usize..3, 1..6),
        packets in proptest::collection::vec(packet_strategy(), 32..200),
        cache in 0u8..4,
    ) {
        let b = edited(&rules, &extra[..1], drop_at);
        check(&[rules, b, vec!["actions=drop".to_string()]], &schedule, cache, &packets)?;
    }
}

#[test]
fn prereq_helper_agrees_with_reference_assumptions() {
    // The reference skips set_field when the prerequisite fails, like the
    // translation; make sure the helper it uses reads the key as expected.
    let k = FlowKey {
        dl_type: 0x0800,
        ..Default::default()
    };
    assert!(Prereq::Ip.holds_for_key(&k));
    assert!(!Prereq::Ipv6.holds_for_key(&k));
}
