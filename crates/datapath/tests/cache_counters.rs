//! Cache counters in the style of OVS's "PMD - stats" test, and
//! regressions for the classes of OVS megaflow CVEs.

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{CacheConfig, Datapath, DatapathConfig};
use sluice_packet::build::{Frame, L4};
use sluice_packet::PacketBatch;
use sluice_packet::PacketPool;
use sluice_port::capture::{CapturePort, Captured};
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::{Port, PortCaps, PortStats, RxStatus};

fn rules(text: &str) -> Arc<RuleSet> {
    Arc::new(RuleSet::from_specs(
        &parse_flow_file(text, None).unwrap(),
        0,
    ))
}

/// Runs `frames` into port 1, one packet per poll iteration (each its own
/// batch, as OVS's test sends them one at a time); port 2 captures.
fn one_by_one(text: &str, cache: CacheConfig, frames: Vec<Vec<u8>>) -> (Datapath, Captured) {
    let cfg = DatapathConfig {
        cache,
        ..Default::default()
    };
    let mut dp = Datapath::new(cfg, rules(text)).unwrap();
    let f: Frames = frames.into_iter().collect();
    dp.add_port(1, Box::new(ReplayPort::new("in", f, false).with_burst(1)))
        .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(2, Box::new(cap)).unwrap();
    let mut clock = (0u64..).step_by(10);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    (dp, sent)
}

fn udp() -> Vec<u8> {
    Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build()
}

const ALWAYS_EMC: CacheConfig = CacheConfig {
    emc_entries: 8192,
    emc_insert_inv_prob: 1,
    smc_entries: 1 << 12,
    smc_enabled: true,
    megaflow: sluice_classifier::megaflow::MegaflowLimits {
        max_flows: 1000,
        max_masks: 100,
    },
    max_idle_us: 10_000_000,
    megaflows: true,
    upcall_share_pct: 100,
    packet_in_share_pct: 100,
};

#[test]
fn disabled_megaflows_set_up_one_exact_flow_per_new_key() {
    // Ten source ports under a rule that looks only at in_port: one
    // wildcarded megaflow normally, ten exact ones with megaflows off (as
    // OVS's upcall/disable-megaflows), each from its own upcall.
    let frames: Vec<_> = (0..10u16)
        .flat_map(|p| {
            let f = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: p, dst: 2 }).build();
            [f.clone(), f]
        })
        .collect();
    for (megaflows, want) in [(true, 1), (false, 10)] {
        let cache = CacheConfig {
            megaflows,
            ..ALWAYS_EMC
        };
        let (dp, sent) = one_by_one("in_port=1,actions=output:2", cache, frames.clone());
        let st = dp.stats();
        assert_eq!(st.upcalls, want, "megaflows {megaflows}");
        assert_eq!(dp.cache_occupancy().0, want as usize);
        assert_eq!(sent.lock().unwrap().len(), 20, "all forwarded either way");
        if !megaflows {
            let dump = dp.dump_megaflows(0);
            for p in 0..10 {
                let src = format!(",tp_src={p},");
                assert_eq!(
                    dump.iter().filter(|l| l.contains(&src)).count(),
                    1,
                    "{dump:?}"
                );
            }
        }
    }
}

#[test]
fn twenty_packets_nineteen_emc_hits() {
    let (dp, sent) = one_by_one("actions=output:2", ALWAYS_EMC, vec![udp(); 20]);
    let st = dp.stats();
    assert_eq!(
        (st.emc_hits, st.smc_hits, st.megaflow_hits, st.upcalls),
        (19, 0, 0, 1)
    );
    assert_eq!(sent.lock().unwrap().len(), 20);
}

#[test]
fn twenty_packets_nineteen_smc_hits_without_emc() {
    let cache = CacheConfig {
        emc_insert_inv_prob: 0,
        ..ALWAYS_EMC
    };
    let (dp, _) = one_by_one("actions=output:2", cache, vec![udp(); 20]);
    let st = dp.stats();
    assert_eq!(
        (st.emc_hits, st.smc_hits, st.megaflow_hits, st.upcalls),
        (0, 19, 0, 1)
    );
}

#[test]
fn twenty_packets_nineteen_megaflow_hits_without_emc_and_smc() {
    let cache = CacheConfig {
        emc_insert_inv_prob: 0,
        smc_enabled: false,
        ..ALWAYS_EMC
    };
    let (dp, _) = one_by_one("actions=output:2", cache, vec![udp(); 20]);
    let st = dp.stats();
    assert_eq!(
        (st.emc_hits, st.smc_hits, st.megaflow_hits, st.upcalls),
        (0, 0, 19, 1)
    );
    assert_eq!(st.subtable_lookups_per_hit(), 1.0);
}

#[test]
fn megaflow_hits_feed_the_smc_and_emc() {
    // Two flows share one megaflow (the rule looks at nothing): the second
    // flow's first packet is a megaflow hit, after which it hits the EMC.
    let a = udp();
    let b = Frame::ipv4([10, 0, 0, 9], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
    let (dp, _) = one_by_one("actions=output:2", ALWAYS_EMC, vec![a, b.clone(), b]);
    let st = dp.stats();
    assert_eq!((st.upcalls, st.megaflow_hits, st.emc_hits), (1, 1, 1));
    assert_eq!(dp.cache_occupancy().0, 1, "one megaflow");
}

#[test]
fn rule_change_is_seen_by_the_next_packet_at_every_cache_level() {
    for cache in [
        ALWAYS_EMC,
        CacheConfig {
            emc_insert_inv_prob: 0,
            ..ALWAYS_EMC
        },
        CacheConfig {
            emc_insert_inv_prob: 0,
            smc_enabled: false,
            ..ALWAYS_EMC
        },
    ] {
        let cfg = DatapathConfig {
            cache,
            ..Default::default()
        };
        let mut dp = Datapath::new(cfg, rules("actions=output:2")).unwrap();
        let f: Frames = vec![udp(); 10].into_iter().collect();
        dp.add_port(1, Box::new(ReplayPort::new("in", f, false).with_burst(1)))
            .unwrap();
        let (cap, sent) = CapturePort::new();
        dp.add_port(2, Box::new(cap)).unwrap();
        for t in 0..5 {
            dp.poll_once(t);
        }
        dp.set_rules(rules("actions=drop"));
        for t in 5..10 {
            dp.poll_once(t);
        }
        dp.finish().unwrap();
        assert_eq!(
            sent.lock().unwrap().len(),
            5,
            "not one packet after the change is forwarded ({cache:?})"
        );
        assert_eq!(
            dp.stats().invalidated + dp.stats().revalidated,
            1,
            "the megaflow was revalidated once"
        );
    }
}

#[test]
fn unchanged_decisions_survive_a_rule_change() {
    let mut dp = Datapath::new(
        DatapathConfig {
            cache: ALWAYS_EMC,
            ..Default::default()
        },
        rules("ip,actions=output:2\narp,actions=drop"),
    )
    .unwrap();
    let f: Frames = vec![udp(); 4].into_iter().collect();
    dp.add_port(1, Box::new(ReplayPort::new("in", f, false).with_burst(1)))
        .unwrap();
    dp.add_port(2, Box::new(CapturePort::new().0)).unwrap();
    dp.poll_once(0);
    // The ARP rule goes; IP packets are decided as before.
    dp.set_rules(rules("ip,actions=output:2"));
    dp.poll_once(1);
    dp.poll_once(2);
    let st = dp.stats();
    assert_eq!((st.revalidated, st.invalidated, st.upcalls), (1, 0, 1));
    assert_eq!(st.forwarded, 3);
}

/// A port that receives scripted bursts, one per poll iteration.
struct Bursts(std::collections::VecDeque<Vec<Vec<u8>>>, PortStats);

impl Port for Bursts {
    fn name(&self) -> &str {
        "bursts"
    }
    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: false,
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
        let Some(frames) = self.0.pop_front() else {
            return RxStatus::Exhausted;
        };
        for f in &frames {
            let mut p = pool.alloc_from(f).unwrap();
            p.meta.in_port = in_port;
            batch.push(p).unwrap();
        }
        RxStatus::Received(frames.len())
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        batch.free_all(pool);
        0
    }
    fn stats(&self) -> PortStats {
        self.1.clone()
    }
}

fn run_bursts(text: &str, cache: CacheConfig, bursts: Vec<Vec<Vec<u8>>>) -> (Datapath, Captured) {
    let mut dp = Datapath::new(
        DatapathConfig {
            cache,
            ..Default::default()
        },
        rules(text),
    )
    .unwrap();
    dp.add_port(1, Box::new(Bursts(bursts.into(), PortStats::default())))
        .unwrap();
    let (cap, sent) = CapturePort::new();
    dp.add_port(2, Box::new(cap)).unwrap();
    let mut clock = (0u64..).step_by(10);
    dp.run(|| clock.next().unwrap(), |_| false).unwrap();
    (dp, sent)
}

#[test]
fn mixed_cache_levels_keep_per_flow_order() {
    // Flow A is cached (EMC) by a first burst; a second burst interleaves A
    // and a new flow B (a miss, then megaflow hits): each flow's packets
    // must leave in the order they came.
    let a = |i: u8| {
        Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
            .payload(&[i])
            .build()
    };
    let b = |i: u8| {
        Frame::ipv4([10, 0, 0, 3], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
            .payload(&[i])
            .build()
    };
    let burst: Vec<Vec<u8>> = (1..=20u8)
        .map(|i| if i % 3 == 0 { a(i) } else { b(i) })
        .collect();
    let text = "priority=10,ip,nw_src=10.0.0.1,actions=output:2\npriority=1,ip,actions=output:2";
    let (dp, sent) = run_bursts(text, ALWAYS_EMC, vec![vec![a(0)], burst]);
    let st = dp.stats();
    assert!(st.emc_hits >= 6 && st.upcalls == 2, "{st:?}");
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 21);
    let seq = |src: u8| -> Vec<u8> {
        sent.iter()
            .filter(|f| f[29] == src)
            .map(|f| f[42])
            .collect()
    };
    let (sa, sb) = (seq(1), seq(3));
    assert!(
        sa.windows(2).all(|w| w[0] < w[1]),
        "flow A in order: {sa:?}"
    );
    assert!(
        sb.windows(2).all(|w| w[0] < w[1]),
        "flow B in order: {sb:?}"
    );
}

#[test]
fn cve_2023_1668_ip_proto_0_does_not_widen_the_megaflow() {
    // A megaflow made for an IP packet with protocol 0 must not catch TCP
    // packets that a rule rewrites (OVS failed to match nw_proto there).
    let text = "priority=100,tcp,actions=mod_tp_dst:99,output:2\npriority=1,ip,actions=output:2";
    let proto0 = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Other(0)).build();
    let tcp = Frame::ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        L4::Tcp {
            src: 5,
            dst: 80,
            flags: 0x10,
        },
    )
    .build();
    let (_, sent) = run_bursts(
        text,
        ALWAYS_EMC,
        vec![
            vec![proto0.clone()],
            vec![tcp.clone()],
            vec![proto0.clone()],
        ],
    );
    let sent = sent.lock().unwrap();
    assert_eq!(sent[0], proto0);
    assert_eq!(
        u16::from_be_bytes([sent[1][36], sent[1][37]]),
        99,
        "the TCP packet was rewritten"
    );
    assert_eq!(sent[2], proto0);
}

#[test]
fn cve_2023_5366_tcp_flags_with_ports_stay_in_the_mask() {
    // SYNs to port 80 are dropped, other TCP is forwarded: a megaflow made
    // for an ACK to port 80 must match tcp_flags, so a later SYN misses it.
    let text =
        "priority=100,tcp,tp_dst=80,tcp_flags=+syn,actions=drop\npriority=1,tcp,actions=output:2";
    let pkt = |flags| {
        Frame::ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            L4::Tcp {
                src: 5,
                dst: 80,
                flags,
            },
        )
        .build()
    };
    let (dp, sent) = run_bursts(
        text,
        ALWAYS_EMC,
        vec![vec![pkt(0x10)], vec![pkt(0x02)], vec![pkt(0x10), pkt(0x02)]],
    );
    assert_eq!(sent.lock().unwrap().len(), 2, "only the ACKs are forwarded");
    assert_eq!(dp.stats().dropped_total(), 2);
}

#[test]
fn cve_2020_35498_padding_after_the_ip_payload_shares_the_flow() {
    // Ethernet padding behind the IP payload changes neither the key nor
    // the cached decision: the padded packet hits the EMC entry the
    // unpadded one made, and both go out as they came.
    let plain = udp();
    let mut padded = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
        .min_len(0)
        .build();
    padded.extend_from_slice(&[0xee; 40]);
    let (dp, sent) = run_bursts(
        "ip,actions=output:2",
        ALWAYS_EMC,
        vec![vec![plain.clone()], vec![padded.clone()]],
    );
    let st = dp.stats();
    assert_eq!((st.upcalls, st.emc_hits), (1, 1));
    assert_eq!(*sent.lock().unwrap(), vec![plain, padded]);
}

#[test]
fn flood_of_masks_is_bounded_and_counted() {
    // Each rule's prefix makes a different mask for the packets that miss
    // it; with a limit of 2 masks the rest are forwarded uncached.
    let mut text = String::new();
    for len in 8..32 {
        text += &format!("priority={len},ip,nw_dst=192.168.0.0/{len},actions=drop\n");
    }
    text += "priority=0,ip,actions=output:2\n";
    let cache = CacheConfig {
        megaflow: sluice_classifier::megaflow::MegaflowLimits {
            max_flows: 100,
            max_masks: 2,
        },
        ..ALWAYS_EMC
    };
    let bursts: Vec<Vec<Vec<u8>>> = (0..24u32)
        .map(|i| {
            let dst = (0xc0a8_0000u32 ^ (1 << (31 - 8 - i.min(23)))).to_be_bytes();
            vec![Frame::ipv4([10, 0, 0, 1], dst, L4::Udp { src: 1, dst: 2 }).build()]
        })
        .collect();
    let (dp, sent) = run_bursts(&text, cache, bursts);
    let st = dp.stats();
    assert!(dp.cache_occupancy().1 <= 2, "at most 2 masks");
    assert!(st.mask_limit_hits > 0 && st.failed_upcalls > 0, "{st:?}");
    assert_eq!(st.rx_packets, st.forwarded + st.dropped_total());
    assert_eq!(sent.lock().unwrap().len() as u64, st.forwarded);
}

#[test]
fn a_connections_first_packet_leaves_its_tracked_pass_out_of_the_exact_caches() {
    // Pass 1 is keyed by the packet; pass 2 by the pass and the state the
    // tracker gave it, which for a connection it did not know is a key no
    // later packet has: neither looked up in the EMC and SMC nor put there.
    let text = "table=0,priority=100,ip,in_port=1,actions=ct(table=1,zone=1)\n\
                table=1,ct_state=+trk+new,ip,actions=ct(commit,zone=1),output:2\n\
                table=1,ct_state=+trk+est,ip,actions=output:2\n";
    let other = Frame::ipv4([10, 0, 0, 9], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 }).build();
    // `other` makes the megaflows (its upcalls cache both its passes).
    let (dp, sent) = one_by_one(text, ALWAYS_EMC, vec![other.clone(), udp()]);
    assert_eq!(sent.lock().unwrap().len(), 2);
    let (_, _, emc, smc) = dp.cache_occupancy();
    assert_eq!((emc, smc), (3, 3), "the new connection's pass 1 only");
    assert_eq!(dp.stats().megaflow_hits, 2);
    // Then the connection is known (an unreplied UDP one stays +new, as
    // in OVS): its next packets' second pass is cached and hit.
    let (dp, sent) = one_by_one(text, ALWAYS_EMC, vec![other, udp(), udp(), udp()]);
    assert_eq!(sent.lock().unwrap().len(), 4);
    let (_, _, emc, smc) = dp.cache_occupancy();
    assert_eq!((emc, smc), (4, 4));
    // The second packet's first pass, the third's both.
    assert_eq!(dp.stats().emc_hits, 3);
}
