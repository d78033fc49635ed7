//! Tests of the flow-language parser.

use super::*;

fn ok(s: &str) -> FlowSpec {
    parse_flow(s, Require::Actions).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn err(s: &str) -> ParseError {
    parse_flow(s, Require::Actions).expect_err(s)
}

#[test]
fn full_line() {
    let s = ok("table=1, priority=100,cookie=0x10,idle_timeout=5,hard_timeout=60,tcp,in_port=3,nw_src=10.0.0.0/8,tp_dst=80 actions=mod_nw_dst:1.2.3.4,output:2");
    assert_eq!(
        (
            s.table,
            s.priority,
            s.cookie,
            s.idle_timeout,
            s.hard_timeout
        ),
        (1, 100, 0x10, 5, 60)
    );
    assert_eq!(
        s.matcher.to_string(),
        "tcp,in_port=3,nw_src=10.0.0.0/8,tp_dst=80"
    );
    assert_eq!(s.actions.len(), 2);
    assert_eq!(s.actions[1], Action::Output(2));
    assert_eq!(
        crate::action::format_actions(&s.actions),
        "mod_nw_dst:1.2.3.4,output:2"
    );
}

#[test]
fn every_match_field_parses() {
    for line in [
        "dl_src=00:11:22:33:44:55,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
        "dl_type=0x88cc,actions=drop",
        "dl_vlan=10,dl_vlan_pcp=3,actions=drop",
        "vlan_tci=0x1000/0x1000,actions=drop",
        "dl_vlan=0xffff,actions=drop",
        "ip,nw_tos=184,nw_ttl=1,ip_ecn=3,actions=drop",
        "ip,ip_dscp=46,actions=drop",
        "ip,nw_frag=later,actions=drop",
        "ip,nw_proto=0,actions=drop",
        "tcp,tcp_flags=+syn-ack,actions=drop",
        "tun_flags=+oam,actions=drop",
        "tun_flags=-oam,tun_metadata0=0x10002,actions=drop",
        "tcp,tcp_flags=0x002/0x012,actions=drop",
        "udp,tp_src=0x1000/0xf000,actions=drop",
        "sctp,sctp_dst=9,actions=drop",
        "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=::1,ipv6_label=0x12345,actions=drop",
        "icmp,icmp_type=8,icmp_code=0,actions=drop",
        "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,actions=drop",
        // As OVS: icmp_code need not be given; icmp_type is icmpv6_type
        // under icmp6, also spelled out as dl_type and nw_proto.
        "icmp6,icmp_type=136,nd_target=2001:db8::10,actions=drop",
        "dl_type=0x86dd,nw_proto=58,icmp_type=136,nd_tll=00:11:22:33:44:55,actions=drop",
        "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_sha=00:00:00:00:00:01,arp_tha=00:00:00:00:00:02,actions=drop",
        "arp,nw_src=10.0.0.1,actions=drop",
        "tcp6,tp_dst=443,actions=drop",
        "udp6,actions=drop",
        "rarp,actions=drop",
    ] {
        ok(line);
    }
}

#[test]
fn every_action_parses() {
    let s = ok("ip,dl_vlan=5,actions=output:1,2,in_port,all,flood,controller,controller:64,mod_dl_src:00:00:00:00:00:01,mod_dl_dst:00:00:00:00:00:02,mod_nw_src:1.1.1.1,mod_nw_dst:2.2.2.2,mod_nw_tos:8,dec_ttl,mod_vlan_vid:7,mod_vlan_pcp:2,push_vlan:0x88a8,strip_vlan,pop_vlan,set_field:9->ip_dscp,resubmit(,3),resubmit:4,resubmit(5,6),goto_table:9");
    assert_eq!(s.actions.len(), 23);
    assert_eq!(s.actions[22], Action::GotoTable(9));
    assert_eq!(
        s.actions[19],
        Action::Resubmit {
            in_port: None,
            table: Some(3)
        }
    );
    let s = ok("tcp,actions=mod_tp_src:1,mod_tp_dst:2,set_field:3->tcp_dst");
    assert_eq!(s.actions.len(), 3);
    assert!(ok("actions=drop").actions.is_empty());
    assert!(ok("actions=").actions.is_empty());
}

#[test]
fn errors_point_at_the_token() {
    let e = err("in_port=1,tp_dst=80,actions=drop");
    assert_eq!(e.column, 11);
    assert!(e.message.contains("tp_dst requires"), "{}", e.message);
    let e = err("in_port=1,nw_dts=1.2.3.4,actions=drop");
    assert_eq!(e.column, 11);
    assert!(e.message.contains("did you mean 'nw_dst'"), "{}", e.message);
    let e = err("ip,nw_src=1.2.3,actions=drop");
    assert_eq!(e.column, 11);
    assert!(e.message.contains("IPv4 address"));
    let e = err("actions=output:2,bogus");
    assert_eq!(e.column, 18);
    let e = err("in_port=1");
    assert!(e.message.contains("missing 'actions="));
    assert!(err("actions=output:2,drop").message.contains("only action"));
    // OpenFlow 1.0 actions load without their prerequisite (ovs-ofctl
    // takes them) and act per packet; set_field does not.
    ok("actions=mod_nw_src:1.2.3.4,mod_tp_dst:80,mod_nw_tos:8");
    assert!(err("ip,actions=set_field:80->tcp_dst")
        .message
        .contains("requires"));
    assert!(err("ip,actions=mod_nw_tos:5")
        .message
        .contains("not a valid TOS"));
    assert!(err("actions=set_field:5->vlan_vid")
        .message
        .contains("VLAN tag"));
    assert!(err("table=2,actions=goto_table:1")
        .message
        .contains("later table"));
    assert!(err("actions=goto_table:1,output:1")
        .message
        .contains("last action"));
    assert!(err("tcp,nw_frag=later,tp_dst=80,actions=drop")
        .message
        .contains("not nw_frag=later"));
    assert!(
        err("dl_vlan=5,actions=push_vlan:0x8100,output:1,push_vlan:0x88a8")
            .message
            .contains("BAD_TAG")
    );
    ok("dl_vlan=5,actions=push_vlan:0x8100,strip_vlan,push_vlan:0x88a8");
    assert!(err("icmp6,actions=set_field:3->icmp_type")
        .message
        .contains("ICMPv4"));
    assert!(err("priority=70000,actions=drop")
        .message
        .contains("too large"));
    // The bridge's own port, as ovs-vsctl add-br makes it.
    let local = ok("in_port=LOCAL,actions=LOCAL");
    assert_eq!(
        &local.actions[..],
        &[Action::Output(crate::action::OFPP_LOCAL)]
    );
    assert_eq!(local.matcher.value.in_port, crate::action::OFPP_LOCAL);
    assert_eq!(
        Action::Output(crate::action::OFPP_LOCAL).to_string(),
        "LOCAL"
    );
    // Reserved ports by name in a set_field, as OVN's rules have them
    // (`set_field:ANY->in_port`), and printed back so.
    let any = ok("actions=set_field:ANY->in_port,resubmit(,1)");
    let shown = crate::action::format_actions(&any.actions);
    assert!(shown.starts_with("set_field:ANY->in_port,"), "{shown}");
    let none = ok("actions=set_field:NONE->in_port");
    assert_eq!(
        crate::action::format_actions(&none.actions),
        "set_field:ANY->in_port"
    );
    assert!(err("actions=set_field:UNSET->in_port")
        .message
        .contains("not a port"));
    assert!(err("table=255,actions=drop")
        .message
        .contains("out of range"));
    assert!(err("tcp,in_port=1/1,actions=drop")
        .message
        .contains("cannot be masked"));
    assert!(err("actions=output:0")
        .message
        .contains("valid output port"));
}

/// As `ovs-ofctl` (OVS 3.1's `mf_set`): a field named twice takes its last
/// value, fields sharing a word keep each other's bits, and an L4 field
/// needs a match that can have an L4 header.
#[test]
fn repeated_fields_take_the_last_value_as_ovs() {
    let m = |s: &str| ok(s).matcher.to_string();
    assert_eq!(m("tcp,udp,actions=drop"), "udp");
    assert_eq!(m("tcp,tp_dst=80,tp_dst=81,actions=drop"), "tcp,tp_dst=81");
    assert_eq!(
        m("ip,nw_src=10.0.0.0/8,nw_src=10.1.1.1,actions=drop"),
        "ip,nw_src=10.1.1.1"
    );
    assert_eq!(
        m("ip,nw_src=10.1.1.1,nw_src=10.0.0.0/8,actions=drop"),
        "ip,nw_src=10.0.0.0/8"
    );
    assert_eq!(
        m("arp,nw_dst=10.0.0.1/8,arp_tpa=10.1.1.1/24,actions=drop"),
        "arp,arp_tpa=10.1.1.0/24"
    );
    assert_eq!(
        m("dl_vlan=10,dl_vlan_pcp=3,actions=drop"),
        m("dl_vlan_pcp=3,dl_vlan=10,actions=drop")
    );
    assert_eq!(
        m("icmp,nw_frag=later,icmp_type=3,actions=drop"),
        "icmp,nw_frag=later,icmp_type=3"
    );
    ok("icmp6,actions=set_field:3->icmpv6_type");
}

/// Prefix lengths at both ends: a /128 IPv6 prefix is an exact match (it
/// was parsed as a catch-all in release builds, found by the index's
/// property test), /0 matches everything.
#[test]
fn prefix_lengths_at_the_ends() {
    let m = |s: &str| ok(s).matcher;
    assert_eq!(
        m("ipv6,ipv6_dst=2001:db8::1/128,actions=drop")
            .mask
            .ipv6_dst,
        [0xff; 16]
    );
    assert_eq!(
        m("ipv6,ipv6_dst=2001:db8::1/0,actions=drop").mask.ipv6_dst,
        [0; 16]
    );
    assert_eq!(
        m("ip,nw_dst=10.0.0.1/32,actions=drop").mask.nw_dst,
        u32::MAX
    );
    assert_eq!(m("ip,nw_dst=10.0.0.1/0,actions=drop").mask.nw_dst, 0);
}

#[test]
fn file_is_all_or_nothing_with_positions() {
    let text = "# comment\n\nin_port=1,actions=output:2\n  in_port=2,actions=outptu:1\n";
    let e = parse_flow_file(text, Some("f.flows")).unwrap_err();
    assert_eq!((e.line, e.column), (4, 21));
    assert_eq!(e.to_string().split(':').next(), Some("f.flows"));
    let specs = parse_flow_file("in_port=1,actions=output:2 # to 2\nactions=drop\n", None).unwrap();
    assert_eq!(specs.len(), 2);
}

#[test]
fn dump_flows_output_reads_back() {
    let s = ok(" cookie=0x0, duration=1.5s, table=0, n_packets=3, n_bytes=180, priority=5,ip actions=output:2");
    assert_eq!(
        (s.priority, s.actions.to_vec()),
        (5, vec![Action::Output(2)])
    );
}

#[test]
fn selectors_take_no_actions() {
    let s = parse_flow("tcp,nw_dst=10.0.0.1,tp_dst=80", Require::NoActions).unwrap();
    assert_eq!(s.matcher.value.tp_dst, 80);
    assert!(parse_flow("actions=drop", Require::NoActions).is_err());
}

#[test]
fn parallel_parse_is_the_serial_parse() {
    // Over 1 MiB per thread, with comments, blank lines and CRLF lines.
    let mut text = String::new();
    for i in 0..60_000u32 {
        match i % 7 {
            0 => text += "# a comment\n",
            1 => text += "\n",
            2 => {
                text += &format!(
                    "priority={},udp,tp_dst={},actions=drop\r\n",
                    i % 500,
                    i % 65_536
                )
            }
            _ => {
                text += &format!(
                    "priority=100,ip,nw_dst=10.{}.{}.{},actions=output:2\n",
                    i >> 16,
                    (i >> 8) & 255,
                    i & 255
                )
            }
        }
    }
    assert!(text.len() > 2 << 20);
    let serial = parse_flow_file(&text, Some("f")).unwrap();
    for threads in [1, 2, 3, 8] {
        let (par, warnings) = parse_flow_file_parallel(&text, Some("f"), threads).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(par.len(), serial.len());
        assert!(par
            .iter()
            .zip(&serial)
            .all(|(a, b)| a.matcher == b.matcher && a.priority == b.priority));
    }
    // Warnings (a field dropped from a match) come in file order with
    // their line numbers, from whichever run read them.
    let mut lines: Vec<&str> = text.split('\n').collect();
    let nd = "icmp6,icmp_type=136,icmp_code=4,nd_target=::1,actions=drop";
    let (first, last) = (10, lines.len() - 10);
    lines[first] = nd;
    lines[last] = nd;
    let warned = lines.join("\n");
    let (_, serial_w) = parse_flow_file_with_warnings(&warned, Some("f")).unwrap();
    let (_, par_w) = parse_flow_file_parallel(&warned, Some("f"), 4).unwrap();
    assert_eq!(par_w, serial_w);
    assert_eq!(
        par_w.iter().map(|w| w.line).collect::<Vec<_>>(),
        vec![first + 1, last + 1]
    );
    assert!(par_w[0]
        .to_string()
        .starts_with(&format!("f:{}:33: nd_target dropped", first + 1)));
    // The first bad line is the one reported, with its number, from any run.
    let mut lines: Vec<&str> = text.split('\n').collect();
    let (early, late) = (1_000, lines.len() - 100);
    lines[late] = "priority=1,nw_dst=1.2.3.4,actions=drop";
    let bad = lines.join("\n");
    let e = parse_flow_file_parallel(&bad, Some("f"), 4).unwrap_err();
    assert_eq!(
        e.to_string(),
        parse_flow_file(&bad, Some("f")).unwrap_err().to_string()
    );
    assert!(e.to_string().contains(&format!(":{}", late + 1)), "{e}");
    lines[early] = "priority=x,actions=drop";
    let bad = lines.join("\n");
    let e = parse_flow_file_parallel(&bad, Some("f"), 4).unwrap_err();
    assert!(e.to_string().contains(&format!(":{}", early + 1)), "{e}");
}

#[test]
fn action_sets_and_instruction_order() {
    let s = ok("ip,actions=output:1,clear_actions,write_actions(dec_ttl,output:2),goto_table:3");
    assert_eq!(
        crate::action::format_actions(&s.actions),
        "output:1,clear_actions,write_actions(dec_ttl,output:2),goto_table:3"
    );
    for bad in [
        "ip,actions=write_actions(output:2),output:1",
        "ip,actions=write_actions(output:2),clear_actions",
        "ip,actions=write_actions(output:2),write_actions(output:3)",
        "ip,actions=write_actions(goto_table:2)",
    ] {
        assert!(
            crate::parse::parse_flow(bad, crate::Require::Actions).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn mpls_pbb_and_pipeline_fields_parse_and_print_back() {
    for (line, printed) in [
        (
            "mpls,mpls_label=100,mpls_tc=3,mpls_bos=1,mpls_ttl=64,actions=drop",
            "mpls,mpls_label=100,mpls_tc=3,mpls_ttl=64,mpls_bos=1",
        ),
        ("mplsm,actions=drop", "mplsm"),
        (
            "dl_type=0x88e7,pbb_isid=0x100/0xff00,actions=drop",
            "dl_type=0x88e7,pbb_isid=0x100/0xff00",
        ),
        (
            "ipv6,ipv6_exthdr=0x40/0x1f0,actions=drop",
            "ipv6,ipv6_exthdr=0x40/0x1f0",
        ),
        ("tun_id=0x3000/0xff00,actions=drop", "tun_id=0x3000/0xff00"),
        ("tunnel_id=5,actions=drop", "tun_id=0x5"),
    ] {
        let s = ok(line);
        assert_eq!(s.matcher.to_string(), printed, "{line}");
        assert_eq!(ok(&format!("{printed},actions=drop")).matcher, s.matcher);
    }
    // A field of one packet type under another's prerequisite is refused.
    err("ip,mpls_label=5,actions=drop");
    err("mpls,pbb_isid=5,actions=drop");
    err("ip,ipv6_exthdr=1,actions=drop");
}

#[test]
fn mpls_and_pbb_actions_parse_with_their_prerequisites_along_the_list() {
    let s = ok("ip,actions=push_mpls:0x8847,set_field:7->mpls_label,set_mpls_tc(2),set_mpls_ttl(9),dec_mpls_ttl,copy_ttl_out,copy_ttl_in,pop_mpls:0x0800,set_field:1->ip_dscp,output:1");
    assert_eq!(s.actions[0], Action::PushMpls(0x8847));
    assert_eq!(s.actions[7], Action::PopMpls(0x0800));
    assert_eq!(
        crate::action::format_actions(&s.actions),
        "push_mpls:0x8847,set_field:7->mpls_label,set_mpls_tc:2,set_mpls_ttl(9),dec_mpls_ttl,copy_ttl_out,copy_ttl_in,pop_mpls:0x0800,set_field:1->ip_dscp,output:1"
    );
    let s = ok("actions=push_pbb:0x88e7,set_field:5->pbb_isid,pop_pbb,output:2");
    assert_eq!(s.actions[2], Action::PopPbb);
    // The packet's type follows the pushes and pops.
    assert!(err("ip,actions=set_field:7->mpls_label")
        .to_string()
        .contains("mpls"));
    assert!(err("ip,actions=pop_mpls:0x0800")
        .to_string()
        .contains("MPLS"));
    err("mpls,actions=pop_mpls:0x0800,pop_mpls:0x0800");
    err("actions=push_mpls:0x0800");
    err("actions=push_pbb:0x8100");
    err("ip,actions=pop_pbb");
    // mpls_bos parses (OpenFlow 1.3 lets set_field write it); the rule
    // set refuses it in Open vSwitch's mode (`RuleSet::read_only_write`),
    // and a field no mode writes stays a parse error.
    ok("mpls,actions=set_field:0->mpls_bos");
    assert!(err("tcp,actions=set_field:1->tcp_flags")
        .to_string()
        .contains("tcp_flags cannot be set"));
}

#[test]
fn action_is_a_synonym_of_actions_as_in_ovs_ofctl() {
    for line in [
        "in_port=1,ip,action=output:2",
        "in_port=1,ip action=output:2",
        "in_port=1,ip,ACTION=output:2",
    ] {
        assert_eq!(ok(line).actions[..], [Action::Output(2)], "{line}");
    }
    assert_eq!(
        ok("in_port=1,actions=output:2").actions[..],
        [Action::Output(2)]
    );
}
