//! Soundness of the wildcard mask a translation reports: every key that
//! agrees with the translated key on the mask gets exactly the same
//! result (datapath actions, rules credited, drop reason) — the property
//! that makes a translation cacheable as a megaflow. Checked by flipping
//! random bits outside the mask and translating again.

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use sluice_classifier::{parse_flow_file, translate, RuleSet, Translation, XlateEnv};
use sluice_packet::FlowKey;

const PORTS: [u32; 4] = [1, 2, 3, 4];

fn rule_text() -> impl Strategy<Value = String> {
    let proto = prop_oneof![
        Just("ip"),
        Just("tcp"),
        Just("udp"),
        Just("ipv6"),
        Just("tcp6"),
        Just("arp"),
        Just("mpls"),
        Just("dl_type=0x88e7"),
        Just("")
    ];
    let prefix = prop_oneof![
        Just("10.0.0.0/8"),
        Just("10.1.0.0/16"),
        Just("10.1.2.0/24"),
        Just("10.1.2.3"),
        Just("128.0.0.0/1")
    ];
    (
        0u8..3,
        0u16..4,
        proto,
        proptest::option::of(1u32..5),
        proptest::option::of(prefix.clone()),
        proptest::option::of(prefix),
        proptest::option::of(prop_oneof![Just("80"), Just("0x1000/0xf000"), Just("53")]),
        proptest::option::of(prop_oneof![
            Just("dl_vlan=10"),
            Just("vlan_tci=0/0x1000"),
            Just("dl_vlan_pcp=3")
        ]),
        proptest::option::of(prop_oneof![Just("+syn"), Just("+ack-syn")]),
        proptest::collection::vec(0u8..12, 0..4),
        proptest::option::of(0u8..7),
    )
        .prop_map(
            |(table, prio, proto, in_port, src, dst, tp, vlan, flags, acts, encap)| {
                let mut f = vec![format!("table={table}"), format!("priority={}", prio * 10)];
                if !proto.is_empty() {
                    f.push(proto.to_string());
                }
                if let Some(p) = in_port {
                    f.push(format!("in_port={p}"));
                }
                let v4 = matches!(proto, "ip" | "tcp" | "udp" | "arp");
                if v4 {
                    if let Some(s) = src {
                        f.push(format!("nw_src={s}"));
                    }
                    if let Some(d) = dst {
                        f.push(format!("nw_dst={d}"));
                    }
                }
                if matches!(proto, "ipv6" | "tcp6") && src.is_some() {
                    f.push("ipv6_dst=2001:db8::/33".into());
                }
                if matches!(proto, "ipv6" | "tcp6") && prio == 1 {
                    f.push("ipv6_exthdr=0x40/0x50".into());
                }
                // tunnel_id: set on the way to the next table, matched there.
                if table > 0 && prio == 3 {
                    f.push("tun_id=0x5/0xf".into());
                }
                let l4 = matches!(proto, "tcp" | "udp" | "tcp6");
                if l4 {
                    if let Some(t) = tp {
                        f.push(format!("tp_dst={t}"));
                    }
                }
                if let (Some(fl), true) = (flags, proto == "tcp" || proto == "tcp6") {
                    f.push(format!("tcp_flags={fl}"));
                }
                if let Some(v) = vlan {
                    f.push(v.to_string());
                }
                // MPLS and PBB: the outermost label's fields, the I-SID.
                let (mpls, pbb) = (proto == "mpls", proto == "dl_type=0x88e7");
                if mpls && prio % 2 == 0 {
                    f.push("mpls_label=100".into());
                }
                if mpls && prio == 3 {
                    f.push("mpls_tc=3,mpls_bos=1".into());
                }
                if pbb && prio % 2 == 0 {
                    f.push("pbb_isid=0x64/0xff".into());
                }
                let mut a = Vec::new();
                for x in acts {
                    a.push(match x {
                        0..=2 => format!("output:{}", 1 + x),
                        3 => "in_port".into(),
                        4 => "all".into(),
                        5 if v4 && proto != "arp" => "mod_nw_dst:10.9.9.9".into(),
                        6 if l4 => "mod_tp_dst:8080".into(),
                        7 => "dec_ttl".into(),
                        8 => "mod_vlan_vid:7".into(),
                        9 => "strip_vlan".into(),
                        10 => format!("resubmit(,{})", (table + 1) % 3),
                        11 if proto == "ip" || proto == "tcp" => "set_field:5->ip_dscp".into(),
                        _ => "output:4".into(),
                    });
                }
                // Pushes, pops and label changes last (what follows a pop
                // recirculates: its prerequisites are the new packet's).
                let e = match encap {
                    Some(0) => "push_mpls:0x8847,set_field:7->mpls_label,output:2",
                    Some(1) if mpls => "pop_mpls:0x0800",
                    Some(2) if mpls => "dec_mpls_ttl,output:3",
                    Some(3) if mpls => "set_mpls_ttl(9),copy_ttl_out,output:1",
                    Some(4) => "push_pbb:0x88e7,set_field:9->pbb_isid,output:2",
                    Some(5) if pbb => "pop_pbb",
                    Some(6) if mpls => "pop_mpls:0x8847,output:4",
                    _ => "",
                };
                if !e.is_empty() {
                    a.push(e.to_string());
                }
                // Metadata: written on the way to the next table, matched
                // there.
                if table > 0 && prio % 2 == 1 {
                    f.push(format!("metadata={:#x}/0x3", prio));
                }
                if table < 2 && prio >= 2 {
                    if prio == 3 {
                        a.push("set_field:0x15->tun_id".into());
                    }
                    a.push(format!("write_metadata:{:#x}/0x3", prio - 2));
                    a.push(format!("goto_table:{}", table + 1));
                }
                if a.is_empty() {
                    a.push("drop".into());
                }
                format!("{},actions={}", f.join(","), a.join(","))
            },
        )
}

fn key_strategy() -> impl Strategy<Value = FlowKey> {
    (
        1u32..5,
        prop_oneof![
            Just((0x0800u16, 6u8)),
            Just((0x0800, 17)),
            Just((0x0800, 0)),
            Just((0x86dd, 6)),
            Just((0x0806, 1)),
            Just((0x88cc, 0)),
            Just((0x8847, 0)),
            Just((0x88e7, 0))
        ],
        prop_oneof![
            Just(0x0a01_0203u32),
            Just(0x0a01_0304),
            Just(0x0a02_0001),
            Just(0x8000_0001),
            Just(0x0b00_0001)
        ],
        prop_oneof![Just(80u16), Just(53), Just(0x1234), Just(443)],
        prop_oneof![Just(0u16), Just(0x100a), Just(0x700a), Just(0x1014)],
        any::<u8>(),
        prop_oneof![Just(0x02u16), Just(0x10), Just(0x12)],
        any::<u128>(),
    )
        .prop_map(|(in_port, (dl, proto), ip, port, tci, ttl, flags, v6)| {
            let mut k = FlowKey {
                in_port,
                dl_type: dl,
                nw_proto: proto,
                nw_ttl: ttl,
                ..Default::default()
            };
            k.vlan_tci[0] = tci;
            if tci != 0 {
                k.vlan_tpid[0] = 0x8100;
            }
            match dl {
                0x0800 | 0x0806 => {
                    k.nw_dst = ip;
                    k.nw_src = ip.rotate_left(8);
                }
                0x86dd => {
                    k.ipv6_dst = ((0x2001_0db8u128 << 96) | (v6 >> 33)).to_be_bytes();
                    // A flow label and extension-header flags.
                    k.ipv6_label = v6 as u32 & 0x1fff_ffff;
                }
                // A label stack entry (label 100 half the time), an I-SID.
                0x8847 if v6 & 1 == 0 => k.ipv6_label = 100 << 12 | (v6 as u32 >> 20),
                0x8847 => k.ipv6_label = v6 as u32,
                0x88e7 => k.ipv6_label = v6 as u32 & 0xff_ffff,
                _ => {}
            }
            if proto == 6 || proto == 17 {
                k.tp_dst = port;
                k.tp_src = 1000;
            }
            if proto == 6 {
                k.tcp_flags = flags;
            }
            k
        })
}

fn run(rules: &RuleSet, key: &FlowKey) -> Translation {
    let mut t = Translation::default();
    translate(XlateEnv::single(rules, &PORTS), key, &mut t, false);
    t
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024),
        rng_seed: RngSeed::Fixed(0x50d),
        ..ProptestConfig::default()
    })]

    #[test]
    fn keys_equal_under_the_mask_translate_alike(
        rules in proptest::collection::vec(rule_text(), 1..10),
        key in key_strategy(),
        flips in proptest::collection::vec(any::<[u64; sluice_packet::key::KEY_WORDS]>(), 1..6),
    ) {
        let specs = parse_flow_file(&rules.join("\n"), None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let set = RuleSet::from_specs(&specs, 0);
        let base = run(&set, &key);
        for f in flips {
            let mut other = key;
            for (i, w) in other.words_mut().iter_mut().enumerate() {
                *w ^= f[i] & !base.wc.words()[i];
            }
            // Every packet's key starts with metadata and registers 0.
            other.metadata = 0;
            other.regs = [0; sluice_packet::key::N_REGS];
            other.tunnel_id = 0;
            let t = run(&set, &other);
            prop_assert_eq!(&t.actions, &base.actions, "rules:\n{}\nkey {:?}\nother {:?}", rules.join("\n"), key, other);
            prop_assert_eq!(t.drop, base.drop);
            let ids = |t: &Translation| t.rules.iter().map(|r| r.id).collect::<Vec<_>>();
            prop_assert_eq!(ids(&t), ids(&base));
        }
    }
}
