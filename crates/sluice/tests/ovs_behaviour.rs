//! The options where Open vSwitch and OpenFlow 1.3 (or the RFCs) differ,
//! as users give them to `sluice run` and `sluice trace`: each keeps OVS's
//! behaviour by default.

use sluice_packet::build::{Frame, L4};
use sluice_port::pcap::{read_all, write_all};

mod support;
use support::{sluice, stderr, stdout};

/// `--vlan-limit`, `--frag-handling` and `--frag-rewrites` reach the
/// datapath of `sluice run` (and `trace`), each with OVS's default.
#[test]
fn ovs_behaviour_settings_reach_the_datapath() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let tcp = || L4::Tcp {
        src: 1,
        dst: 80,
        flags: 2,
    };
    let qinq = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], tcp())
        .vlan(0x88a8, 10)
        .vlan(0x8100, 20)
        .build();
    // A later fragment of a TCP datagram (offset 64 bytes).
    let later = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], tcp())
        .frag(8)
        .build();
    std::fs::write(p("in.pcap"), write_all(&[qinq, later.clone()])).unwrap();
    std::fs::write(
        p("r.flows"),
        "priority=10,tcp,actions=mod_nw_src:10.9.9.9,output:2\npriority=5,ip,actions=mod_nw_src:10.9.9.9,output:3\npriority=1,actions=output:4\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "run".to_string(),
            "--json".into(),
            "--flows".into(),
            p("r.flows"),
            "--port".into(),
            format!("1=pcap:rx={}", p("in.pcap")),
        ];
        for n in 2..=4 {
            a.push("--port".into());
            a.push(format!("{n}=pcap:tx={}", p(&format!("out{n}.pcap"))));
        }
        a.extend(extra.iter().map(|s| s.to_string()));
        let o = sluice(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let sent = |n: u32| -> Vec<Vec<u8>> {
            let recs = read_all(&std::fs::read(p(&format!("out{n}.pcap"))).unwrap()).unwrap();
            recs.into_iter().map(|r| r.data).collect()
        };
        (r, [sent(2), sent(3), sent(4)])
    };
    // OVS's defaults: the QinQ frame is not IP (vlan-limit 1); the later
    // fragment matches 'tcp' and gets OVS's update of its payload bytes
    // 16-17 (where a TCP checksum would be).
    let (_, [tcp_out, ip_out, other]) = run(&[]);
    assert_eq!((tcp_out.len(), ip_out.len(), other.len()), (1, 0, 1));
    let l4 = 14 + 20;
    assert_ne!(tcp_out[0][l4 + 16..l4 + 18], later[l4 + 16..l4 + 18]);
    // vlan-limit 2 sees TCP inside the QinQ frame; 'correct' leaves the
    // fragment's payload alone.
    let (_, [tcp_out, _, other]) = run(&["--vlan-limit", "2", "--frag-rewrites", "correct"]);
    assert_eq!((tcp_out.len(), other.len()), (2, 0));
    let frag_out = tcp_out.iter().find(|f| f.len() == later.len()).unwrap();
    assert_eq!(frag_out[l4 + 16..l4 + 18], later[l4 + 16..l4 + 18]);
    // drop: the fragment is counted as 'ip fragment'.
    let (r, [tcp_out, _, _]) = run(&["--frag-handling", "drop"]);
    assert_eq!(tcp_out.len(), 0);
    assert_eq!(r["datapath"]["dropped"]["ip fragment"], 1);
    let o = sluice(&[
        "run",
        "--frag-handling",
        "reassemble",
        "--flows",
        &p("r.flows"),
    ]);
    assert!(stderr(&o).contains("does not reassemble"), "{}", stderr(&o));
    // trace parses as many tags as it is told.
    let hex: String = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], tcp())
        .vlan(0x8100, 10)
        .vlan(0x8100, 20)
        .build()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for (limit, out) in [("1", "output:4"), ("2", "output:2")] {
        let o = sluice(&[
            "trace",
            "--flows",
            &p("r.flows"),
            "--in-port",
            "1",
            "--packet",
            &hex,
            "--vlan-limit",
            limit,
        ]);
        assert!(
            stdout(&o).contains(out),
            "vlan-limit {limit}: {}",
            stdout(&o)
        );
    }
}

/// A flow file whose rules send to a group or use a meter is refused by
/// `run`, `check` and `trace` (no group or meter exists before a
/// controller adds one; Open vSwitch refuses such a rule too), with the
/// rule and the reason, not loaded to drop what it matches.
#[test]
fn rules_naming_a_missing_group_or_meter_are_refused_at_load() {
    let d = tempfile::tempdir().unwrap();
    for (rule, said) in [
        ("in_port=1,actions=group:5", "group 5 does not exist"),
        (
            "in_port=1,actions=meter:3,output:2",
            "meter 3 does not exist",
        ),
    ] {
        let flows = d.path().join("f.flows").display().to_string();
        std::fs::write(&flows, format!("priority=9,actions=output:2\n{rule}\n")).unwrap();
        for args in [
            vec!["check", flows.as_str()],
            vec!["trace", "--flows", flows.as_str(), "in_port=1"],
            vec![
                "run",
                "--flows",
                flows.as_str(),
                "--port",
                "1=null",
                "--port",
                "2=null",
            ],
        ] {
            let o = sluice(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}");
            assert!(
                stderr(&o).contains(said) && stderr(&o).contains(rule.split(',').nth(1).unwrap()),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
}

/// `--set-field`: a rule writing ip_proto is refused by default (as
/// `ovs-ofctl` refuses it), and with `spec` it leaves with the new
/// protocol and checksums valid for it.
#[test]
fn set_field_on_read_only_fields_needs_the_spec_mode() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    let flows = p("r.flows");
    std::fs::write(&flows, "tcp,actions=set_field:17->ip_proto,output:2\n").unwrap();
    let tcp = Frame::ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        L4::Tcp {
            src: 1,
            dst: 80,
            flags: 2,
        },
    )
    .build();
    std::fs::write(p("in.pcap"), write_all(std::slice::from_ref(&tcp))).unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "run".to_string(),
            "--flows".into(),
            flows.clone(),
            "--port".into(),
            format!("1=pcap:rx={}", p("in.pcap")),
            "--port".into(),
            format!("2=pcap:tx={}", p("out.pcap")),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        sluice(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = run(&[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("nw_proto is read-only (as in Open vSwitch); --set-field spec"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--set-field", "spec"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = read_all(&std::fs::read(p("out.pcap")).unwrap()).unwrap();
    assert_eq!(out.len(), 1);
    let f = &out[0].data;
    assert_eq!(f[23], 17, "protocol");
    // Only the protocol and the two checksums changed.
    let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != tcp[i]).collect();
    assert!(
        changed.iter().all(|&i| matches!(i, 23 | 24 | 25 | 50 | 51)),
        "{changed:?}"
    );
    let o = sluice(&[
        "trace",
        "--set-field",
        "spec",
        "--flows",
        &flows,
        "tcp,in_port=1",
    ]);
    assert!(
        stdout(&o).contains("Datapath actions: set(ip(proto=17)),2"),
        "{}",
        stdout(&o)
    );
    let o = sluice(&["run", "--set-field", "all", "--flows", &flows]);
    assert!(
        stderr(&o).contains("unknown set_field mode 'all' (ovs or spec)"),
        "{}",
        stderr(&o)
    );
}

/// `--push-mpls`: a label pushed onto ARP has TTL 64 (OVS) or 0 (spec).
#[test]
fn push_mpls_ttl_over_arp_follows_the_mode() {
    let d = tempfile::tempdir().unwrap();
    let flows = d.path().join("r.flows").display().to_string();
    std::fs::write(&flows, "arp,actions=push_mpls:0x8847,output:2\n").unwrap();
    for (mode, ttl) in [("ovs", "ttl=64"), ("spec", "ttl=0")] {
        let o = sluice(&[
            "trace",
            "--push-mpls",
            mode,
            "--flows",
            &flows,
            "arp,in_port=1",
        ]);
        let out = stdout(&o);
        let line = out
            .lines()
            .find(|l| l.starts_with("Datapath actions:"))
            .unwrap_or_else(|| panic!("{mode}: {out}{}", stderr(&o)));
        assert!(line.contains(ttl), "{mode}: {line}");
    }
}

/// A neighbor discovery field whose prerequisite the ICMPv6 type or code
/// of the same rule rules out is dropped from the match with a warning
/// (line:column), as Open vSwitch 3.1 normalises it away; each kept match
/// is the one `ovs-ofctl parse-flow` prints.
#[test]
fn nd_fields_unmet_by_a_value_are_dropped_as_ovs_does() {
    let d = tempfile::tempdir().unwrap();
    let lines = [
        (
            "icmp6,icmp_type=136,icmp_code=4,nd_target=2001:db8::10",
            "icmp6,icmp_type=136,icmp_code=4",
        ),
        (
            "icmp6,icmp_type=136,nd_sll=00:00:00:00:00:01",
            "icmp6,icmp_type=136",
        ),
        (
            "icmp6,icmp_type=135,nd_tll=00:00:00:00:00:01",
            "icmp6,icmp_type=135",
        ),
        ("icmp6,icmp_type=134,nd_target=::1", "icmp6,icmp_type=134"),
        (
            "icmp6,icmp_type=135,nd_sll=00:00:00:00:00:01",
            "icmp6,icmp_type=135,nd_sll=00:00:00:00:00:01",
        ),
        (
            "icmp6,icmp_type=136,icmp_code=0,nd_target=::1",
            "icmp6,icmp_type=136,icmp_code=0,nd_target=::1",
        ),
    ];
    let flows = d.path().join("nd.flows");
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, (l, _))| format!("priority={},{l},actions=drop\n", 100 + i))
        .collect();
    std::fs::write(&flows, text).unwrap();
    let o = sluice(&["check", &flows.display().to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("nd.flows:1:46: nd_target dropped from the match: icmp_code=4 is not 0"),
        "{err}"
    );
    assert_eq!(err.matches("dropped from the match").count(), 4, "{err}");
    let out = stdout(&o);
    for (i, (line, kept)) in lines.iter().enumerate() {
        let want = format!("priority={},{kept} actions=drop", 100 + i);
        assert!(out.contains(&want), "{line}: want {want} in\n{out}");
        // The reference: what OVS keeps of the same line.
        let (ok, ovs) = support::ofctl(&[
            "parse-flow",
            &format!("priority={},{line},actions=drop", 100 + i),
        ]);
        assert!(ok, "{ovs}");
        assert!(
            ovs.contains(&format!("ADD {want}")),
            "OVS keeps {want}: {ovs}"
        );
    }
    // Missing a match (no icmp_type) is still refused, with the reason.
    std::fs::write(&flows, "icmp6,nd_target=::1,actions=drop\n").unwrap();
    let o = sluice(&["check", &flows.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nd_target requires"), "{}", stderr(&o));
}
