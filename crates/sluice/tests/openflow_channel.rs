//! The OpenFlow channel against the real `ovs-ofctl` (installed by
//! scripts/setup with openvswitch-switch).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{free_port, ofctl, ofctl10, osken_manager, wait_for, Killed as Switch, Monitor};

#[test]
fn ovs_ofctl_reads_a_running_switch() {
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("r.flows");
    std::fs::write(
        &flows,
        "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2\npriority=5,in_port=1,tcp,tp_dst=80,actions=mod_nw_dst:1.2.3.4,output:2\n",
    )
    .unwrap();
    let (_sw, target) = logged_switch(
        dir.path(),
        "2=null",
        &[
            "--flows",
            flows.to_str().unwrap(),
            "--datapath-id",
            "0x00000000000000ab",
        ],
    );
    let (ok, show) = ofctl(&["show", &target]);
    assert!(ok, "{show}");
    assert!(show.contains("dpid:00000000000000ab"), "{show}");
    assert!(show.contains("n_tables:254, n_buffers:0"), "{show}");
    assert!(
        show.contains(" 1(null)") && show.contains(" 2(null)"),
        "{show}"
    );
    let (ok, desc) = ofctl(&["dump-desc", &target]);
    assert!(ok && desc.contains("Manufacturer: Sluice"), "{desc}");
    let (ok, flows) = ofctl(&["dump-flows", &target]);
    assert!(ok, "{flows}");
    assert!(
        flows.contains("priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2"),
        "{flows}"
    );
    assert!(
        flows.contains(
            "priority=5,tcp,in_port=1,tp_dst=80 actions=set_field:1.2.3.4->ip_dst,output:2"
        ),
        "{flows}"
    );
    let (ok, agg) = ofctl(&["dump-aggregate", &target]);
    assert!(ok && agg.contains("flow_count=2"), "{agg}");
    let (ok, ports) = ofctl(&["dump-ports", &target]);
    assert!(ok && ports.contains("2 ports"), "{ports}");
}

/// `sluice run` with null port 1, port 2 `port2`, no rules and a punix
/// listener in `dir`, its log in `dir`/switch.log, `extra` arguments
/// after; returns once the socket is there, with its OpenFlow target.
fn logged_switch(dir: &Path, port2: &str, extra: &[&str]) -> (Switch, String) {
    let sock = dir.join("of.sock");
    let sw = Switch(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "run",
                "--port",
                "1=null",
                "--port",
                port2,
                "--duration",
                "60",
            ])
            .arg("--listen")
            .arg(format!("punix:{}", sock.display()))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("switch.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the socket", 20, || sock.exists());
    (sw, format!("unix:{}", sock.display()))
}

/// A switch started with no rules and a punix listener, and its target.
fn empty_switch(dir: &Path) -> (Switch, String) {
    logged_switch(dir, "2=null", &[])
}

/// The OpenFlow connections the log of the switch in `dir` has told of.
fn connections(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("switch.log"))
        .unwrap_or_default()
        .matches("OpenFlow 1.3 connection")
        .count()
}

/// A [`Monitor`] of the switch in `dir`, returned once its connection
/// shows in the switch's log.
fn monitor(dir: &Path, t: &str, miss_len: &str, secs: u32) -> Monitor {
    let before = connections(dir);
    let m = Monitor::start(dir, t, miss_len, secs);
    wait_for("the monitor's connection", 20, || connections(dir) > before);
    m
}

fn flow_lines(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains("priority="))
        .map(|l| {
            // Drop the counters and duration, keep table, match and actions.
            let t = l.split(", table=").nth(1).unwrap_or(l);
            let (table, rest) = t.split_once(", n_packets=").unwrap();
            let rest = rest.split_once(", priority=").map_or(rest, |x| x.1);
            format!("table={table} priority={rest}")
        })
        .collect();
    v.sort();
    v
}

/// The rules of an `ovs-ofctl dump-flows` (either protocol) without
/// their counters and ages: `table=T MATCH actions=...`, sorted.
fn rules_of(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter_map(|l| {
            let (_, t) = l.split_once(", table=")?;
            let (table, rest) = t.split_once(", n_packets=")?;
            let (_, rest) = rest.split_once(", n_bytes=")?;
            let rest = rest.split_once(", ").map_or(rest, |x| x.1);
            let rest = match rest.strip_prefix("idle_age=") {
                Some(r) => r.split_once(", ").map_or(r, |x| x.1),
                None => rest,
            };
            Some(format!("table={table} {rest}"))
        })
        .collect();
    v.sort();
    v
}

/// `ovs-ofctl` with no `-O` offers OpenFlow 1.0 alone: the switch speaks
/// it, with the Nicira flow format (NXM), flow-mods and flow statistics,
/// so that a flow file of Nicira actions goes in and reads back as
/// ovs-ofctl 3.1 prints it, and means what the same file added over 1.3
/// means.
#[test]
fn ovs_ofctl_with_its_default_protocol_programs_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let d2 = tempfile::tempdir().unwrap();
    let (_sw2, t13) = empty_switch(d2.path());
    let flows = dir.path().join("nicira.flows");
    std::fs::write(
        &flows,
        "priority=10,ip,nw_dst=10.0.0.0/8,actions=mod_dl_src:00:00:00:00:00:01,dec_ttl,output:2
priority=20,arp,actions=flood
table=1,priority=3,udp,tp_src=53,actions=enqueue:1:3,note:01.02.03
table=2,reg0=0x5/0xff,actions=load:0x1->NXM_NX_REG1[0..7],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],resubmit(,3),output:NXM_NX_REG2[0..15]
table=3,tcp,actions=learn(table=4,idle_timeout=30,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])
table=3,priority=5,tcp,actions=conjunction(7,1/2)
table=3,ip,nw_src=10.0.0.1,actions=conjunction(7,2/2)
table=3,conj_id=7,ip,actions=clone(mod_vlan_vid:5,output:2),ct(commit,zone=3,exec(set_field:0x1->ct_mark)),sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)
table=5,pkt_mark=0x10/0xf0,ipv6,ipv6_src=fd00::/64,actions=set_field:fd00::1->ipv6_dst,controller:100
table=6,dl_vlan=10,actions=mod_vlan_pcp:3,output:in_port,strip_vlan,set_queue:4,pop_queue
table=7,udp,actions=mod_nw_dst:1.2.3.4,set_field:3->reg3,NORMAL
table=9,priority=9,udp,actions=controller(userdata=aa.bb,id=2,max_len=64,reason=no_match),controller(reason=invalid_ttl)
table=10,priority=3,ip,actions=multipath(symmetric_l3l4+udp,1024,hrw,4,0,NXM_NX_REG0[0..1]),output:NXM_NX_REG0[0..1]
table=11,priority=4,tcp,actions=bundle_load(symmetric_l4,0,hrw,ofport,NXM_NX_REG0[],members:1,2),bundle(eth_src,50,active_backup,ofport,members:2,1)
table=12,ip,actions=dec_ttl(1,2),output:2
table=13,tcp,actions=fin_timeout(idle_timeout=7,hard_timeout=9),output:2
table=14,ip,actions=check_pkt_larger(1500)->NXM_NX_REG0[5],resubmit(,15)
",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let (ok, out) = ofctl10(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    let f = flows.to_str().unwrap();
    run(&["add-flows", &t, f]);
    let dump = run(&["dump-flows", &t]);
    assert!(dump.starts_with("NXST_FLOW reply"), "{dump}");
    assert_eq!(
        rules_of(&dump),
        [
            "table=0 priority=10,ip,nw_dst=10.0.0.0/8 actions=mod_dl_src:00:00:00:00:00:01,dec_ttl,output:2",
            "table=0 priority=20,arp actions=FLOOD",
            "table=1 priority=3,udp,tp_src=53 actions=enqueue:1:3,note:01.02.03.00.00.00",
            "table=10 priority=3,ip actions=multipath(symmetric_l3l4+udp,1024,hrw,4,0,NXM_NX_REG0[0..1]),output:NXM_NX_REG0[0..1]",
            "table=11 priority=4,tcp actions=bundle_load(symmetric_l4,0,hrw,ofport,NXM_NX_REG0[],members:1,2),bundle(eth_src,50,active_backup,ofport,members:2,1)",
            "table=12 ip actions=dec_ttl(1,2),output:2",
            "table=13 tcp actions=fin_timeout(idle_timeout=7,hard_timeout=9),output:2",
            "table=14 ip actions=check_pkt_larger(1500)->NXM_NX_REG0[5],resubmit(,15)",
            "table=2 reg0=0x5/0xff actions=load:0x1->NXM_NX_REG1[0..7],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],resubmit(,3),output:NXM_NX_REG2[0..15]",
            "table=3 conj_id=7,ip actions=clone(mod_vlan_vid:5,output:2),ct(commit,zone=3,exec(load:0x1->NXM_NX_CT_MARK[])),sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
            "table=3 ip,nw_src=10.0.0.1 actions=conjunction(7,2/2)",
            "table=3 priority=5,tcp actions=conjunction(7,1/2)",
            "table=3 tcp actions=learn(table=4,idle_timeout=30,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
            "table=5 pkt_mark=0x10/0xf0,ipv6,ipv6_src=fd00::/64 actions=load:0x1->NXM_NX_IPV6_DST[0..63],load:0xfd00000000000000->NXM_NX_IPV6_DST[64..127],CONTROLLER:100",
            "table=6 dl_vlan=10 actions=mod_vlan_pcp:3,IN_PORT,strip_vlan,set_queue:4,pop_queue",
            "table=7 udp actions=mod_nw_dst:1.2.3.4,load:0x3->NXM_NX_REG3[],NORMAL",
            "table=9 priority=9,udp actions=controller(reason=no_match,max_len=64,id=2,userdata=aa.bb),controller(reason=invalid_ttl)",
        ]
    );
    // The same file added over 1.3 to another switch: the same rules
    // (enqueue is 1.0's: over 1.3 it is the three actions it stands for;
    // ovs-ofctl sends a learn of NXM_OF_IN_PORT and check_pkt_larger over
    // NXM only).
    let f13 = dir.path().join("nicira13.flows");
    let text = std::fs::read_to_string(&flows).unwrap();
    let text: String = text
        .replace("enqueue:1:3", "set_queue:3,output:1,pop_queue")
        .lines()
        .filter(|l| !l.contains("learn(") && !l.contains("check_pkt_larger"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&f13, text).unwrap();
    let (ok, out) = ofctl(&["add-flows", &t13, f13.to_str().unwrap()]);
    assert!(ok, "{out}");
    // (Both read in 1.0: what was sent as set_field over 1.3 and as load
    // over 1.0 is kept as it came, in 1.3's dump.)
    let mut via10 = rules_of(&dump);
    via10.retain(|r| !r.contains("learn(") && !r.contains("check_pkt_larger"));
    assert_eq!(via10, rules_of(&run(&["dump-flows", &t13])));
    assert_eq!(via10.len(), 15);
    // The standard 1.0 format (what ovs-ofctl falls back to) and the
    // aggregate.
    let (ok, out) = ofctl10(&["-F", "openflow10", "dump-flows", &t, "table=0"]);
    assert!(ok && out.starts_with("OFPST_FLOW reply"), "{out}");
    assert_eq!(rules_of(&out).len(), 2, "{out}");
    assert!(run(&["dump-aggregate", &t]).contains("flow_count=17"));
    // A 1.0 modify that selects nothing adds; strict and loose deletes.
    run(&["mod-flows", &t, "table=8,udp,actions=output:2"]);
    assert!(run(&["dump-flows", &t, "table=8"]).contains("udp actions=output:2"));
    run(&["del-flows", "--strict", &t, "priority=20,arp"]);
    run(&["del-flows", &t, "table=3"]);
    assert!(run(&["dump-aggregate", &t]).contains("flow_count=13"));
    // Errors in 1.0's numbers: an unknown group.
    let (ok, out) = ofctl10(&["add-flow", &t, "actions=group:9"]);
    assert!(!ok && out.contains("OFPBAC_BAD_OUT_GROUP"), "{out}");
    // The ports, in the features reply.
    assert!(run(&["show", &t]).contains(" 2(null): addr:00:00:00:00:00:00"));
    run(&["del-flows", &t]);
    assert!(run(&["dump-aggregate", &t]).contains("flow_count=0"));
}

#[test]
fn ovs_ofctl_programs_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let f1 = dir.path().join("f1.flows");
    std::fs::write(
        &f1,
        "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2\npriority=20,arp,actions=flood\ntable=1,priority=3,udp,tp_src=53,actions=output:1\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let (ok, out) = ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    run(&["add-flows", &t, f1.to_str().unwrap()]);
    run(&[
        "add-flow",
        &t,
        "priority=7,dl_vlan=5,actions=pop_vlan,goto_table:3",
    ]);
    run(&["mod-flows", &t, "ip,actions=output:1"]);
    assert_eq!(
        flow_lines(&run(&["dump-flows", &t])),
        [
            "table=0 priority=10,ip,nw_dst=10.0.0.0/8 actions=output:1",
            "table=0 priority=20,arp actions=FLOOD",
            "table=0 priority=7,dl_vlan=5 actions=pop_vlan,goto_table:3",
            "table=1 priority=3,udp,tp_src=53 actions=output:1",
        ]
    );
    // diff-flows exits 2 when the switch differs from the file.
    let f2 = dir.path().join("f2.flows");
    std::fs::write(
        &f2,
        "priority=20,arp,actions=flood\npriority=30,ipv6,actions=drop\n",
    )
    .unwrap();
    let (same, diff) = ofctl(&["diff-flows", &t, f2.to_str().unwrap()]);
    assert!(
        !same && diff.contains("+priority=30,ipv6 actions=drop"),
        "{diff}"
    );
    run(&["replace-flows", &t, f2.to_str().unwrap()]);
    let (same, diff) = ofctl(&["diff-flows", &t, f2.to_str().unwrap()]);
    assert!(same && diff.is_empty(), "{diff}");
    run(&["del-flows", "--strict", &t, "priority=20,arp"]);
    run(&[
        "mod-flows",
        "--strict",
        &t,
        "priority=30,ipv6,actions=output:2",
    ]);
    assert_eq!(
        flow_lines(&run(&["dump-flows", &t])),
        ["table=0 priority=30,ipv6 actions=output:2"]
    );
    // Action sets: clear and write, kept in the spec's instruction order.
    run(&[
        "add-flow",
        &t,
        "priority=3,ip,actions=dec_ttl,clear_actions,write_actions(set_field:10.9.9.9->ip_dst,output:2),goto_table:4",
    ]);
    assert!(
        run(&["dump-flows", &t]).contains(
            "priority=3,ip actions=dec_ttl,clear_actions,write_actions(set_field:10.9.9.9->ip_dst,output:2),goto_table:4"
        ),
        "action sets"
    );
    // Metadata: written by one table, matched by the next.
    run(&[
        "add-flow",
        &t,
        "table=2,priority=4,ip,actions=write_metadata:0x5/0xff,goto_table:3",
    ]);
    run(&[
        "add-flow",
        &t,
        "table=3,priority=4,metadata=0x5/0xff,actions=output:2",
    ]);
    let dump = run(&["dump-flows", &t]);
    assert!(
        dump.contains("table=2, n_packets=0, n_bytes=0, priority=4,ip actions=write_metadata:0x5/0xff,goto_table:3")
            && dump.contains("table=3, n_packets=0, n_bytes=0, priority=4,metadata=0x5/0xff actions=output:2"),
        "metadata: {dump}"
    );
    // Tunnel addresses: Nicira fields inside OpenFlow 1.3 messages.
    run(&[
        "add-flow",
        &t,
        "table=5,priority=6,tun_src=10.9.0.2,tun_ipv6_dst=fd90::/16,actions=set_field:fd90::7->tun_ipv6_dst,set_field:10.9.0.9->tun_dst,output:2",
    ]);
    let dump = run(&["dump-flows", &t]);
    assert!(
        dump.contains("priority=6,tun_src=10.9.0.2,tun_ipv6_dst=fd90::/16 actions=set_field:fd90::7->tun_ipv6_dst,set_field:10.9.0.9->tun_dst,output:2"),
        "tunnel fields: {dump}"
    );
    // Geneve options: the TLV table by Nicira messages (ovs-ofctl
    // add-tlv-map, dump-tlv-map, del-tlv-map), tun_metadata in matches and
    // set-fields.
    run(&[
        "add-tlv-map",
        &t,
        "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata1",
    ]);
    let map = run(&["dump-tlv-map", &t]);
    assert!(
        map.contains("0x102  0x80       4  tun_metadata0")
            && map.contains("0xffff   0x1       8  tun_metadata1"),
        "{map}"
    );
    let (ok, out) = ofctl(&["add-tlv-map", &t, "{class=1,type=1,len=4}->tun_metadata0"]);
    assert!(!ok && out.contains("NXTTMFC_ALREADY_MAPPED"), "{out}");
    let (ok, out) = ofctl(&["add-tlv-map", &t, "{class=1,type=1,len=12}->tun_metadata2"]);
    assert!(!ok && out.contains("NXTTMFC_BAD_OPT_LEN"), "{out}");
    run(&[
        "add-flow",
        &t,
        "table=6,priority=6,tun_metadata0=0x10002,actions=set_field:0x1122334455667788->tun_metadata1,output:2",
    ]);
    let dump = run(&["dump-flows", &t]);
    assert!(
        dump.contains(
            "tun_metadata0=0x10002 actions=set_field:0x1122334455667788->tun_metadata1,output:2"
        ),
        "tun_metadata: {dump}"
    );
    run(&[
        "add-flow",
        &t,
        "table=7,priority=7,tun_flags=+oam,actions=output:2",
    ]);
    let dump = run(&["dump-flows", &t]);
    assert!(
        dump.contains("tun_flags=+oam actions=output:2"),
        "tun_flags: {dump}"
    );
    run(&[
        "del-tlv-map",
        &t,
        "{class=0x102,type=0x80,len=4}->tun_metadata0",
    ]);
    let map = run(&["dump-tlv-map", &t]);
    assert!(
        !map.contains("tun_metadata0") && map.contains("tun_metadata1"),
        "{map}"
    );
    // Registers: matched (reg, xreg, xxreg: shown as the 32-bit ones),
    // written by set_field, Nicira's load (NXAST_REG_LOAD) and move
    // (NXAST_REG_MOVE). The dump is what OVS 3.1 shows for the same
    // add-flow (checked in its sandbox).
    run(&[
        "add-flow",
        &t,
        "table=8,priority=8,tcp,reg0=5,reg1=0x7/0xff,xreg1=0x100000000/0xffffffff00000000,actions=load:0x5->NXM_NX_REG0[0..15],set_field:0x7->reg1,move:NXM_OF_ETH_SRC[]->NXM_NX_XXREG1[0..47],set_field:0x1/0xf->reg3,move:NXM_NX_REG0[0..3]->NXM_OF_TCP_DST[4..7],load:1->xreg3[63],set_field:0x1234->xxreg2,set_field:0x10/0x101->reg2,load:0->NXM_OF_IN_PORT[],output:2",
    ]);
    let dump = run(&["dump-flows", &t]);
    assert!(
        dump.contains("priority=8,tcp,reg0=0x5,reg1=0x7/0xff,reg2=0x1 actions=load:0x5->NXM_NX_REG0[0..15],set_field:0x7->reg1,move:NXM_OF_ETH_SRC[]->NXM_NX_XXREG1[0..47],load:0x1->NXM_NX_REG3[0..3],move:NXM_NX_REG0[0..3]->NXM_OF_TCP_DST[4..7],load:0x1->OXM_OF_PKT_REG3[63],set_field:0x1234->xxreg2,load:0->NXM_NX_REG2[0],load:0->NXM_NX_REG2[8],load:0->NXM_OF_IN_PORT[],output:2"),
        "registers: {dump}"
    );
    // Connection tracking: NXAST_CT (zone from a register, exec with a
    // set-field and, for a masked label, a load), NXAST_CT_CLEAR and the
    // ct_* match fields; the dump is OVS 3.1's for the same add-flows.
    for f in [
        "table=9,priority=100,ip,actions=ct(table=10,zone=NXM_NX_REG0[0..15])",
        "table=10,priority=10,ct_state=+new+trk,ip,actions=ct(commit,zone=7,exec(set_field:0x5->ct_mark,set_field:0x1/0x3->ct_label)),output:2",
        "table=10,priority=20,ct_state=-new+est+trk,ct_mark=0x5,ct_zone=7,actions=ct_clear,output:2",
        "table=11,priority=10,ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.9:1024-2047,random),exec(set_field:0x1->ct_mark))",
        "table=11,priority=20,ipv6,actions=ct(commit,table=12,nat(dst=[2001:db8::1]:80,persistent))",
        "table=11,priority=30,tcp,actions=ct(table=12,nat)",
        "table=12,priority=10,ct_state=+est+trk,ct_nw_proto=6,ct_nw_dst=10.0.0.0/8,ct_tp_dst=80,ip,actions=move:NXM_NX_CT_NW_SRC[]->NXM_NX_REG1[],output:2",
        "table=12,priority=20,ct_state=-inv+trk,ct_ipv6_src=2001:db8::/32,ct_nw_proto=58,ct_tp_src=128,ipv6,actions=output:2",
    ] {
        run(&["add-flow", &t, f]);
    }
    let dump = run(&["dump-flows", &t]);
    for line in [
        "priority=100,ip actions=ct(table=10,zone=NXM_NX_REG0[0..15])",
        "priority=10,ct_state=+new+trk,ip actions=ct(commit,zone=7,exec(set_field:0x5->ct_mark,load:0x1->NXM_NX_CT_LABEL[0..1])),output:2",
        "priority=20,ct_state=-new+est+trk,ct_zone=7,ct_mark=0x5 actions=ct_clear,output:2",
        "priority=10,ip actions=ct(commit,nat(src=10.0.0.1-10.0.0.9:1024-2047,random),exec(set_field:0x1->ct_mark))",
        "priority=20,ipv6 actions=ct(commit,table=12,nat(dst=[2001:db8::1]:80,persistent))",
        "priority=30,tcp actions=ct(table=12,nat)",
        "priority=10,ct_state=+est+trk,ct_nw_dst=10.0.0.0/8,ct_nw_proto=6,ct_tp_dst=80,ip actions=move:NXM_NX_CT_NW_SRC[]->NXM_NX_REG1[],output:2",
        "priority=20,ct_state=-inv+trk,ct_ipv6_src=2001:db8::/32,ct_nw_proto=58,ct_tp_src=128,ipv6 actions=output:2",
    ] {
        assert!(dump.contains(line), "{line}: {dump}");
    }
    // NORMAL (OFPP_NORMAL), output to a register's port
    // (NXAST_OUTPUT_REG), note (NXAST_NOTE), clone (NXAST_CLONE): read
    // back as OVS 3.1 prints the same add-flows.
    for f in [
        "table=13,priority=1,actions=NORMAL",
        "table=13,priority=2,actions=note:01.02.03,output:NXM_NX_REG0[0..15]",
        "table=13,priority=3,ip,actions=output:reg1",
        "table=13,priority=4,ip,actions=clone(mod_dl_dst:02:00:00:00:00:99,set_field:0x1->reg0,output:2),output:3",
        "table=13,priority=5,ip,actions=learn(table=14,idle_timeout=10,hard_timeout=20,priority=7,cookie=0x5,send_flow_rem,delete_learned,dl_type=0x800,NXM_OF_IP_SRC[],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],reg0[0..3]=5,in_port=3,vlan_tci=0x1007,load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:0x2a->reg2[],output:NXM_OF_IN_PORT[]),NORMAL",
        "table=13,priority=6,actions=learn(NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,1)",
        "table=13,priority=7,actions=resubmit:3,resubmit(2,4),resubmit(in_port,5)",
        "table=13,priority=8,ip,nw_src=10.0.0.1,actions=conjunction(1,1/2),conjunction(9,2/3)",
        "table=13,priority=8,conj_id=1,ip,actions=output:2",
        "table=13,priority=10,pkt_mark=0x5/0xff,actions=set_field:0x7->pkt_mark,load:0x3->NXM_NX_PKT_MARK[0..3],resubmit(,14)",
        "table=13,priority=9,actions=sample(probability=65535,collector_set_id=1,obs_domain_id=2,obs_point_id=3),sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3,sampling_port=2,ingress),set_queue:5,output:1,pop_queue,enqueue:1:2",
    ] {
        run(&["add-flow", &t, f]);
    }
    let dump = run(&["dump-flows", &t]);
    for line in [
        "priority=1 actions=NORMAL",
        "priority=2 actions=note:01.02.03.00.00.00,output:NXM_NX_REG0[0..15]",
        "priority=3,ip actions=output:NXM_NX_REG1[]",
        "priority=4,ip actions=clone(set_field:02:00:00:00:00:99->eth_dst,set_field:0x1->reg0,output:2),output:3",
        // NXAST_LEARN, as ovs-ofctl 3.1 prints it.
        "priority=5,ip actions=learn(table=14,idle_timeout=10,hard_timeout=20,priority=7,send_flow_rem,delete_learned,cookie=0x5,eth_type=0x800,NXM_OF_IP_SRC[],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],NXM_NX_REG0[0..3]=0x5,in_port=3,vlan_tci=0x1007,load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:0x2a->NXM_NX_REG2[],output:NXM_OF_IN_PORT[]),NORMAL",
        "priority=6 actions=learn(table=1,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,1)",
        // NXAST_RESUBMIT and NXAST_RESUBMIT_TABLE.
        "priority=7 actions=resubmit:3,resubmit(2,4),resubmit(,5)",
        // NXAST_CONJUNCTION, and conj_id (NXM_NX_CONJ_ID) in a match.
        "priority=8,ip,nw_src=10.0.0.1 actions=conjunction(1,1/2),conjunction(9,2/3)",
        "priority=8,conj_id=1,ip actions=output:2",
        // pkt_mark (NXM_NX_PKT_MARK) in a match, a set_field and a load.
        "priority=10,pkt_mark=0x5/0xff actions=set_field:0x7->pkt_mark,load:0x3->NXM_NX_PKT_MARK[0..3],resubmit(,14)",
        // NXAST_SAMPLE, NXAST_SAMPLE3, OFPAT_SET_QUEUE, NXAST_POP_QUEUE
        // (enqueue is set_queue, output, pop_queue from OpenFlow 1.1 on).
        "priority=9 actions=sample(probability=65535,collector_set_id=1,obs_domain_id=2,obs_point_id=3),sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3,sampling_port=2,ingress),set_queue:5,output:1,pop_queue,set_queue:2,output:1,pop_queue",
    ] {
        assert!(dump.contains(line), "{line}: {dump}");
    }
    run(&["del-flows", &t]);
    assert!(flow_lines(&run(&["dump-flows", &t])).is_empty());
    // Refusals come back as the spec's errors; the connection and the
    // rules stay as they were.
    let (ok, out) = ofctl(&["add-flow", &t, "priority=1,ip,actions=meter:1,output:2"]);
    assert!(!ok && out.contains("OFPMMFC_UNKNOWN_METER"), "{out}");
    let (ok, out) = ofctl(&["add-flow", &t, "table=4,priority=1,actions=goto_table:2"]);
    assert!(!ok && out.contains("OFPBIC_BAD_TABLE_ID"), "{out}");
    let (ok, out) = ofctl(&["add-flow", &t, "priority=1,dp_hash=5,actions=drop"]);
    assert!(!ok && out.contains("OFPBMC_BAD_FIELD"), "{out}");
    assert!(flow_lines(&run(&["dump-flows", &t])).is_empty());
}

/// A free TCP port on 127.0.0.1 (bound, then released).
#[test]
fn connects_to_an_os_ken_controller_and_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("osken.log");
    let app = osken_manager("marker.py", port, &log);
    let sock = dir.path().join("of.sock");
    let _sw = Switch(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "run",
                "--port",
                "1=null",
                "--port",
                "2=null",
                "--duration",
                "60",
            ])
            .args(["--datapath-id", "00000000000000cd"])
            .arg("--controller")
            .arg(format!("tcp:127.0.0.1:{port}"))
            .arg("--listen")
            .arg(format!("punix:{}", sock.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let target = format!("unix:{}", sock.display());
    let connections = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .matches("MARKER connected dpid=00000000000000cd")
            .count()
    };
    wait_for("the controller's rule", 30, || {
        sock.exists()
            && ofctl(&["dump-flows", &target])
                .1
                .contains("priority=42,ip,nw_dst=10.1.0.0/16 actions=output:2")
    });
    assert_eq!(connections(&log), 1);
    // The controller goes away and comes back: the switch reconnects
    // (backoff at most 8 s).
    drop(app);
    let log2 = dir.path().join("osken2.log");
    let _app = osken_manager("marker.py", port, &log2);
    wait_for("a reconnection", 30, || connections(&log2) == 1);
}

#[test]
fn packet_out_and_packet_in_with_ovs_ofctl() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    let (_sw, t) = logged_switch(dir.path(), &format!("2=pcap:tx={}", out.display()), &[]);
    let run = |args: &[&str]| {
        let (ok, out) = ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    // An OpenFlow 1.3 table-miss rule sends to the controller.
    run(&["add-flow", &t, "priority=0,actions=CONTROLLER:65535"]);
    run(&["add-flow", &t, "priority=5,udp,actions=output:2"]);
    // ovs-ofctl writes what it monitors when it ends (SIGTERM).
    let mon = monitor(dir.path(), &t, "65534", 4);
    let arp =
        "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";
    let udp = "0200000000020200000000010800450000260000000040117ab3c0a80001c0a80002300030390012000068656c6c6f6f6f6f6f6f";
    // Through the tables: the ARP packet misses and comes back as a
    // packet-in; the UDP one follows its rule to port 2.
    run(&[
        "packet-out",
        &t,
        &format!("in_port=CONTROLLER,packet={arp},actions=table"),
    ]);
    run(&[
        "packet-out",
        &t,
        &format!("in_port=1,packet={udp},actions=table"),
    ]);
    // Straight to a port.
    run(&[
        "packet-out",
        &t,
        &format!("in_port=1,packet={arp},actions=output:2"),
    ]);
    let seen = mon.seen();
    // ovs-ofctl monitor asks for NXT_PACKET_IN2; a packet-out's packet
    // that the table-miss rule sends says `action`, as in OVS (its
    // OFPR_PACKET_OUT, which 1.3 has no number for).
    assert!(
        seen.contains("NXT_PACKET_IN2 (OF1.3)")
            && seen.contains("total_len=42 in_port=CONTROLLER (via action)"),
        "{seen}"
    );
    let flows = run(&["dump-flows", &t]);
    assert!(
        flows.contains("n_packets=1, n_bytes=52, priority=5,udp"),
        "{flows}"
    );
    assert!(
        flows.contains("n_packets=1, n_bytes=42, priority=0"),
        "{flows}"
    );
    let ports = run(&["dump-ports", &t, "2"]);
    assert!(ports.contains("tx pkts=2"), "{ports}");
    // A packet-out naming a buffer is refused: Sluice keeps none.
    let (ok, e) = ofctl(&[
        "packet-out",
        &t,
        &format!("in_port=1,packet={arp},actions=drop"),
    ]);
    assert!(ok, "{e}");
}

/// Reads one OpenFlow message (header and body) from `s`.
fn read_msg(s: &mut std::os::unix::net::UnixStream) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut h = [0u8; 8];
    s.read_exact(&mut h)?;
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let mut m = h.to_vec();
    m.resize(len.max(8), 0);
    s.read_exact(&mut m[8..])?;
    Ok(m)
}

/// Reads until a message of type `typ` comes (skipping echo requests and
/// multipart replies), and returns it.
fn expect(s: &mut std::os::unix::net::UnixStream, typ: u8) -> Vec<u8> {
    loop {
        let m = read_msg(s).expect("the switch answers");
        if m[1] == typ {
            return m;
        }
        assert!(
            m[1] == 2 || m[1] == 19,
            "unexpected message type {}: {m:02x?}",
            m[1]
        );
    }
}

/// The header and fixed part of an ADD flow-mod of `len` bytes in all
/// (table 0, priority 0x8000, no buffer, no timeouts, flags or cookie);
/// the match and instructions follow.
fn add_flow_head(len: u16, xid: u32) -> Vec<u8> {
    let mut fm = vec![4, 14];
    fm.extend_from_slice(&len.to_be_bytes());
    fm.extend_from_slice(&xid.to_be_bytes());
    fm.extend_from_slice(&[0; 16]); // cookie, mask
    fm.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x80, 0]); // table, add, timeouts, priority
    fm.extend_from_slice(&[0xff; 12]); // buffer, out_port, out_group
    fm.extend_from_slice(&[0; 4]); // flags, pad
    fm
}

fn hello(s: &mut std::os::unix::net::UnixStream) {
    use std::io::Write;
    s.write_all(&[4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10])
        .unwrap();
    let m = read_msg(s).unwrap();
    assert_eq!(m[1], 0, "the switch says hello first");
}

#[test]
fn bad_input_gets_errors_or_a_clean_disconnect_and_nothing_else_stops() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let path = t.strip_prefix("unix:").unwrap().to_string();
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    hello(&mut s);
    let err_of = |m: &[u8]| {
        (
            u16::from_be_bytes([m[8], m[9]]),
            u16::from_be_bytes([m[10], m[11]]),
        )
    };
    // An unknown message type: BAD_REQUEST/BAD_TYPE, with the xid.
    s.write_all(&[4, 99, 0, 8, 0, 0, 0, 42]).unwrap();
    let m = expect(&mut s, 1);
    assert_eq!((err_of(&m), &m[4..8]), ((1, 1), &[0u8, 0, 0, 42][..]));
    // A wrong version: BAD_REQUEST/BAD_VERSION.
    s.write_all(&[1, 5, 0, 8, 0, 0, 0, 43]).unwrap();
    assert_eq!(err_of(&expect(&mut s, 1)), (1, 0));
    // A flow-mod cut short: BAD_REQUEST/BAD_LEN.
    s.write_all(&[4, 14, 0, 16, 0, 0, 0, 44, 0, 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    assert_eq!(err_of(&expect(&mut s, 1)), (1, 6));
    // A flow-mod whose OXM claims more bytes than the match holds:
    // BAD_MATCH/BAD_LEN.
    let mut fm = add_flow_head(64, 45);
    fm.extend_from_slice(&[0, 1, 0, 12, 0x80, 0, 0x18, 9, 10, 0, 0, 1, 0, 0, 0, 0]);
    s.write_all(&fm).unwrap();
    assert_eq!(err_of(&expect(&mut s, 1)), (4, 1));
    // A multipart request of a type not served: BAD_REQUEST/BAD_MULTIPART.
    s.write_all(&[4, 18, 0, 16, 0, 0, 0, 46, 0, 14, 0, 0, 0, 0, 0, 0])
        .unwrap();
    assert_eq!(err_of(&expect(&mut s, 1)), (1, 2));
    // The connection is still up: an echo comes back with its data.
    s.write_all(&[4, 2, 0, 12, 0, 0, 0, 47, 1, 2, 3, 4])
        .unwrap();
    let m = expect(&mut s, 3);
    assert_eq!(&m[4..], &[0, 0, 0, 47, 1, 2, 3, 4]);
    // A length under the header's cannot be framed: ERROR, then the
    // connection closes.
    s.write_all(&[4, 2, 0, 4, 0, 0, 0, 48]).unwrap();
    assert_eq!(err_of(&expect(&mut s, 1)), (1, 6));
    assert!(read_msg(&mut s).is_err(), "closed");

    // 16 MiB of garbage on one connection, a peer that never reads on
    // another: ovs-ofctl on a third is served all the while.
    let mut garbage = UnixStream::connect(&path).unwrap();
    let junk: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let g = std::thread::spawn(move || {
        garbage
            .set_write_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let _ = garbage.write_all(&junk);
    });
    let mut deaf = UnixStream::connect(&path).unwrap();
    deaf.set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let d = std::thread::spawn(move || {
        let mut echo = Vec::new();
        for i in 0..200_000u32 {
            echo.extend_from_slice(&[4, 2, 0, 8]);
            echo.extend_from_slice(&i.to_be_bytes());
        }
        let _ = deaf.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]);
        let r = deaf.write_all(&echo);
        std::thread::sleep(Duration::from_secs(20));
        r
    });
    for _ in 0..5 {
        let (ok, out) = ofctl(&["dump-flows", &t]);
        assert!(ok, "{out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    g.join().unwrap();
    let _ = d;
    let (ok, out) = ofctl(&["add-flow", &t, "priority=9,actions=drop"]);
    assert!(ok, "{out}");
}

fn role_request(s: &mut std::os::unix::net::UnixStream, role: u32, gen: u64) -> Vec<u8> {
    use std::io::Write;
    let mut m = vec![4, 24, 0, 24, 0, 0, 0, 7];
    m.extend_from_slice(&role.to_be_bytes());
    m.extend_from_slice(&[0; 4]);
    m.extend_from_slice(&gen.to_be_bytes());
    s.write_all(&m).unwrap();
    loop {
        let r = read_msg(s).unwrap();
        if r[1] == 25 || r[1] == 1 {
            return r;
        }
    }
}

#[test]
fn roles_master_slave_and_generation_ids() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let path = t.strip_prefix("unix:").unwrap().to_string();
    let open = || {
        let mut s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        hello(&mut s);
        s
    };
    let (mut a, mut b) = (open(), open());
    let role_of = |r: &[u8]| (r[1], u32::from_be_bytes([r[8], r[9], r[10], r[11]]));
    assert_eq!(role_of(&role_request(&mut a, 2, 1)), (25, 2), "a is master");
    assert_eq!(role_of(&role_request(&mut b, 2, 2)), (25, 2), "b is master");
    assert_eq!(
        role_of(&role_request(&mut a, 0, 0)),
        (25, 3),
        "so a is a slave now"
    );
    // An older generation: ROLE_REQUEST_FAILED/STALE.
    let r = role_request(&mut a, 3, 1);
    assert_eq!((r[1], &r[8..12]), (1, &[0u8, 11, 0, 0][..]));
    // A slave may not change the rules: BAD_REQUEST/IS_SLAVE.
    let fm = {
        let mut m = vec![4, 14, 0, 56, 0, 0, 0, 9];
        m.extend_from_slice(&[0; 16]);
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x80, 0]);
        m.extend_from_slice(&[0xff; 12]);
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]);
        m
    };
    a.write_all(&fm).unwrap();
    let e = expect(&mut a, 1);
    assert_eq!(&e[8..12], &[0, 1, 0, 10]);
    // The master may.
    b.write_all(&fm).unwrap();
    b.write_all(&[4, 20, 0, 8, 0, 0, 0, 10]).unwrap();
    expect(&mut b, 21);
    let (ok, flows) = ofctl(&["dump-flows", &t]);
    assert!(ok && flows.contains("n_bytes=0, actions=drop"), "{flows}");
    // GET_ASYNC: the spec's defaults (a slave's packet-in mask is empty).
    a.write_all(&[4, 26, 0, 8, 0, 0, 0, 11]).unwrap();
    let m = expect(&mut a, 27);
    assert_eq!(&m[8..16], &[0, 0, 0, 3, 0, 0, 0, 0]);
}

#[test]
fn flow_removed_on_delete_and_timeout_and_check_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = logged_switch(dir.path(), "2=null", &[]);
    let mon = monitor(dir.path(), &t, "0", 5);
    let run = |args: &[&str]| {
        let (ok, out) = ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    run(&[
        "add-flow",
        &t,
        "send_flow_rem,hard_timeout=1,priority=5,ip,actions=drop",
    ]);
    run(&["add-flow", &t, "send_flow_rem,priority=6,arp,actions=drop"]);
    run(&["add-flow", &t, "priority=6,ipv6,actions=drop"]);
    // An overlapping rule of the same priority is refused when asked.
    let (ok, out) = ofctl(&[
        "add-flow",
        &t,
        "check_overlap,priority=6,arp,arp_op=1,actions=drop",
    ]);
    assert!(!ok && out.contains("OFPFMFC_OVERLAP"), "{out}");
    run(&[
        "add-flow",
        &t,
        "check_overlap,priority=7,arp,arp_op=1,actions=drop",
    ]);
    run(&["del-flows", &t, "arp"]);
    run(&["del-flows", &t, "ipv6"]);
    let seen = mon.seen();
    assert!(
        seen.contains("FLOW_REMOVED (OF1.3) (xid=0x0): priority=6,arp reason=delete"),
        "{seen}"
    );
    assert!(seen.contains("priority=5,ip reason=hard"), "{seen}");
    // Only rules that asked.
    assert_eq!(seen.matches("FLOW_REMOVED").count(), 2, "{seen}");
    let flows = run(&["dump-flows", &t]);
    assert!(
        !flows.contains("priority=5,ip"),
        "the timed-out rule is gone: {flows}"
    );
}

#[test]
fn port_status_when_a_port_is_added_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let ctl = dir.path().join("ctl.sock");
    let (_sw, t) = logged_switch(dir.path(), "2=null", &["--ctl", ctl.to_str().unwrap()]);
    wait_for("the control socket", 20, || ctl.exists());
    let mon = monitor(dir.path(), &t, "0", 4);
    let sluice_ctl = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("ctl")
            .arg("--ctl")
            .arg(&ctl)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    sluice_ctl(&["add-port", "3=null"]);
    sluice_ctl(&["del-port", "3"]);
    let seen = mon.seen();
    assert!(
        seen.contains("OFPT_PORT_STATUS (OF1.3) (xid=0x0): ADD: 3(null)"),
        "{seen}"
    );
    assert!(
        seen.contains("OFPT_PORT_STATUS (OF1.3) (xid=0x0): DEL: 3(null)"),
        "{seen}"
    );
}

#[test]
fn port_mod_takes_a_port_out_of_forwarding_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let run = |args: &[&str]| {
        let (ok, out) = ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    let udp = "0200000000020200000000010800450000260000000040117ab3c0a80001c0a80002300030390012000068656c6c6f6f6f6f6f6f";
    let send = || {
        run(&[
            "packet-out",
            &t,
            &format!("in_port=1,packet={udp},actions=table"),
        ])
    };
    let tx2 = || {
        let out = run(&["dump-ports", &t, "2"]);
        out.split("tx pkts=")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    run(&["add-flow", &t, "priority=5,udp,actions=output:2"]);
    send();
    assert_eq!(tx2(), "1");
    run(&["mod-port", &t, "2", "no-forward"]);
    assert!(run(&["show", &t]).contains("config:     NO_FWD"));
    send();
    assert_eq!(tx2(), "1", "nothing forwarded to a no_fwd port");
    run(&["mod-port", &t, "2", "forward"]);
    send();
    assert_eq!(tx2(), "2");
    run(&["mod-port", &t, "2", "down"]);
    let show = run(&["show", &t]);
    assert!(
        show.contains("config:     PORT_DOWN") && show.contains("state:      LINK_DOWN"),
        "{show}"
    );
    send();
    assert_eq!(tx2(), "2");
    run(&["mod-port", &t, "1", "no-packet-in"]);
    assert!(run(&["show", &t]).contains("config:     NO_PACKET_IN"));
}

#[test]
fn a_silent_peer_is_probed_then_dropped() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let mut s = UnixStream::connect(t.strip_prefix("unix:").unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    hello(&mut s);
    let t0 = Instant::now();
    // Five quiet seconds: an echo request comes, which this peer ignores.
    let m = read_msg(&mut s).unwrap();
    assert_eq!(m[1], 2, "an echo request: {m:02x?}");
    let probed = t0.elapsed();
    assert!(
        probed >= Duration::from_secs(4) && probed < Duration::from_secs(8),
        "{probed:?}"
    );
    // Five more without an answer: the switch hangs up.
    assert!(read_msg(&mut s).is_err(), "closed");
    let closed = t0.elapsed();
    assert!(
        closed >= Duration::from_secs(9) && closed < Duration::from_secs(16),
        "{closed:?}"
    );
}

#[test]
fn a_multipart_request_in_parts_is_served_whole() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let (ok, out) = ofctl(&["add-flow", &t, "priority=5,ip,actions=output:2"]);
    assert!(ok, "{out}");
    let mut s = UnixStream::connect(t.strip_prefix("unix:").unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    hello(&mut s);
    // A flow stats request (all tables, any port, any group, no cookie,
    // empty match) in two parts: the first with REQ_MORE.
    let mut body = vec![0xff, 0, 0, 0];
    body.extend_from_slice(&[0xff; 8]);
    body.extend_from_slice(&[0; 4 + 16]);
    body.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]);
    let part = |flags: u8, b: &[u8]| {
        let mut m = vec![
            4,
            18,
            0,
            (16 + b.len()) as u8,
            0,
            0,
            0,
            77,
            0,
            1,
            0,
            flags,
            0,
            0,
            0,
            0,
        ];
        m.extend_from_slice(b);
        m
    };
    s.write_all(&part(1, &body[..20])).unwrap();
    s.write_all(&part(0, &body[20..])).unwrap();
    let r = expect(&mut s, 19);
    assert_eq!(&r[4..8], &[0, 0, 0, 77]);
    assert!(r.len() > 16 + 48, "one flow in the reply: {r:02x?}");
    // Setting table features is refused: TABLE_FEATURES_FAILED/EPERM.
    s.write_all(
        &part(0, &[0, 64, 0, 0, 0, 0, 0, 0])
            .iter()
            .enumerate()
            .map(|(i, &b)| if i == 9 { 12 } else { b })
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let e = expect(&mut s, 1);
    assert_eq!(&e[8..12], &[0, 13, 0, 5]);
}

/// A flow-mod whose set_field writes ip_proto: BAD_ACTION/BAD_SET_TYPE
/// from a switch in Open vSwitch's mode (the default), added by one run
/// with `--set-field spec`. (`ovs-ofctl` refuses to send it at all.)
#[test]
fn set_field_on_ip_proto_is_refused_unless_the_spec_mode_is_on() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let mut fm = add_flow_head(104, 7);
    // match: eth_type=0x0800 (the prerequisite of writing ip_proto)
    fm.extend_from_slice(&[0, 1, 0, 10, 0x80, 0, 10, 2, 0x08, 0, 0, 0, 0, 0, 0, 0]);
    // apply_actions(set_field:17->ip_proto, output:2)
    fm.extend_from_slice(&[0, 4, 0, 40, 0, 0, 0, 0]);
    fm.extend_from_slice(&[0, 25, 0, 16, 0x80, 0, 20, 1, 17, 0, 0, 0, 0, 0, 0, 0]);
    fm.extend_from_slice(&[0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(fm.len(), 104);
    let barrier = [4, 20, 0, 8, 0, 0, 0, 8];
    for (extra, refused) in [(&[][..], true), (&["--set-field", "spec"][..], false)] {
        let dir = tempfile::tempdir().unwrap();
        let (_sw, t) = logged_switch(dir.path(), "2=null", extra);
        let mut s = UnixStream::connect(t.strip_prefix("unix:").unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        hello(&mut s);
        s.write_all(&fm).unwrap();
        s.write_all(&barrier).unwrap();
        let m = read_msg(&mut s).unwrap();
        if refused {
            assert_eq!((m[1], &m[4..8]), (1, &[0u8, 0, 0, 7][..]), "{m:02x?}");
            let (ty, code) = (
                u16::from_be_bytes([m[8], m[9]]),
                u16::from_be_bytes([m[10], m[11]]),
            );
            assert_eq!((ty, code), (2, 13), "BAD_ACTION/BAD_SET_TYPE");
            assert_eq!(expect(&mut s, 21)[1], 21);
        } else {
            assert_eq!(m[1], 21, "no error before the barrier reply: {m:02x?}");
            // (dump-flows would show it, but ovs-ofctl cannot decode a
            // set_field on ip_proto: it counts it instead.)
            let (ok, agg) = ofctl(&["dump-aggregate", &t]);
            assert!(ok && agg.contains("flow_count=1"), "{agg}");
        }
    }
}

/// fail-mode standalone as OVS's: with its controller gone for three
/// inactivity probe intervals (15 s) the switch fails open, every packet
/// NORMAL above table 0's rules, until a controller connects. A listener's
/// peer (here ovs-ofctl) is no controller of the switch's.
#[test]
fn standalone_fails_open_while_its_controller_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flows = dir.path().join("drop.flows");
    std::fs::write(&flows, "priority=1,actions=drop\n").unwrap();
    let controller = format!("tcp:127.0.0.1:{port}");
    let (_sw, t) = logged_switch(
        dir.path(),
        "2=null",
        &[
            "--controller",
            &controller,
            "--fail-mode",
            "standalone",
            "--flows",
            flows.to_str().unwrap(),
        ],
    );
    let arp =
        "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";
    let send = || {
        let (ok, out) = ofctl(&[
            "packet-out",
            &t,
            &format!("in_port=1,packet={arp},actions=table"),
        ]);
        assert!(ok, "{out}");
    };
    let tx = || {
        let (ok, out) = ofctl(&["dump-ports", &t, "2"]);
        assert!(ok, "{out}");
        let n = out.split("tx pkts=").nth(1).expect("tx pkts");
        n[..n.find(',').unwrap_or(n.len())]
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let log = || std::fs::read_to_string(dir.path().join("switch.log")).unwrap_or_default();
    send();
    assert_eq!(tx(), 0, "the rule drops it");
    wait_for("failing open", 40, || log().contains("failing open"));
    send();
    assert_eq!(tx(), 1, "NORMAL floods it to port 2: {}", log());
    // The hidden rule is no rule of the tables.
    let (_, dump) = ofctl(&["dump-flows", &t]);
    assert_eq!(flow_lines(&dump).len(), 1, "{dump}");
    // A controller (it says HELLO and listens): the rules are the
    // switch's again.
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let (mut c, _) = l.accept().unwrap();
    use std::io::Write as _;
    c.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    wait_for("the end of fail-open", 20, || {
        log().contains("no longer failing open")
    });
    send();
    assert_eq!(tx(), 1, "dropped by the rule again");
    drop(c);
}

/// A rule a packet's `learn` added in a PMD reaches the rules the control
/// plane owns: `dump-flows` shows it.
#[test]
fn a_learned_rule_shows_in_dump_flows() {
    let dir = tempfile::tempdir().unwrap();
    let (_sw, t) = empty_switch(dir.path());
    let run = |args: &[&str]| {
        let (ok, out) = ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {out}");
        out
    };
    run(&[
        "add-flow",
        &t,
        "table=0,actions=learn(table=1,hard_timeout=300,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)",
    ]);
    let arp =
        "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";
    run(&[
        "packet-out",
        &t,
        &format!("in_port=1,packet={arp},actions=table"),
    ]);
    wait_for("the learned rule", 10, || {
        run(&["dump-flows", &t, "table=1"])
            .contains("table=1, n_packets=0, n_bytes=0, hard_timeout=300, dl_dst=00:00:00:00:00:01 actions=output:1")
    });
}

/// `ovs-ofctl mod-flows` without `-O` (OpenFlow 1.0): a modify gives the
/// rules it changes the message's cookie (0 when the line names none), a
/// modify that selects by cookie and finds nothing adds nothing, one that
/// does not select by cookie and finds nothing adds the rule: the rules
/// then read as Open vSwitch 3.1's after the same commands.
#[test]
fn an_openflow_1_0_modify_sets_the_cookie_as_ovs_does() {
    let dir = tempfile::tempdir().unwrap();
    let od = dir.path().join("ovs");
    std::fs::create_dir(&od).unwrap();
    let (_ovs, ovs_t) = support::Ovs::with_bridge(&od);
    let (_sw, t) = empty_switch(dir.path());
    let steps: [&[&str]; 5] = [
        &["add-flow", "cookie=0x5,priority=7,ip,actions=output:1"],
        &["mod-flows", "cookie=0x9,ip,actions=output:2"],
        &["mod-flows", "ip,actions=output:1"],
        &["mod-flows", "cookie=0x9/-1,ip,actions=output:2"],
        &["mod-flows", "cookie=0x11,udp,actions=output:2"],
    ];
    // The rules with their cookies, without counters and ages.
    let rules = |target: &str| -> Vec<String> {
        let (ok, dump) = ofctl10(&["dump-flows", target]);
        assert!(ok, "{dump}");
        support::dumped_rules(&dump)
    };
    for step in steps {
        for target in [&ovs_t, &t] {
            let (ok, out) = ofctl10(&[step[0], target, step[1]]);
            assert!(ok, "{step:?} on {target}: {out}");
        }
        assert_eq!(rules(&t), rules(&ovs_t), "after {step:?}: Sluice, then OVS");
    }
    assert_eq!(
        rules(&t),
        [
            "cookie=0x0, table=0, priority=7,ip actions=output:1",
            "cookie=0x11, table=0, udp actions=output:2"
        ]
    );
}
