//! `sluice trace`: how the rules handle one packet, in the format of
//! `ovs-appctl ofproto/trace`.

use sluice_classifier::dpaction::{format_dp_actions, DpAction};
use sluice_classifier::fields::all_fields;
use sluice_classifier::{parse_flow, translate, Match, Require, Translation, XlateEnv};
use sluice_packet::extract::{extract_with_shape, vlan_limit};
use sluice_packet::{FlowKey, PacketMeta, PacketPool};

/// The flow of a description like `in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80`.
/// Fields not given are zero, except the IP TTL, which is 64 so that
/// `dec_ttl` behaves as for a typical packet.
pub fn key_from_description(desc: &str) -> Result<(FlowKey, bool), String> {
    let spec = parse_flow(desc, Require::NoActions).map_err(|e| format!("flow: {e}"))?;
    let m = spec.matcher;
    if m.mask != m.mask.masked(&FlowKey::all_ones()) || m.value != m.value.masked(&m.mask) {
        return Err("flow: internal masking error".into());
    }
    let mut key = m.value;
    let ttl_assumed = key.is_ip() && m.mask.nw_ttl == 0;
    if ttl_assumed {
        key.nw_ttl = 64;
    }
    Ok((key, ttl_assumed))
}

/// The bytes of a packet given in hex (spaces and colons between digits
/// allowed).
pub fn packet_bytes(hex: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<char> = hex
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    if let Some((at, c)) = hex
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_hexdigit() && !c.is_whitespace() && *c != ':')
    {
        return Err(format!(
            "--packet: '{c}' (character {}) is not a hex digit",
            at + 1
        ));
    }
    if !digits.len().is_multiple_of(2) {
        return Err("--packet: odd number of hex digits".into());
    }
    Ok(digits
        .chunks(2)
        .map(|d| {
            // Both are ASCII hex digits (checked above).
            (d[0].to_digit(16).unwrap_or(0) << 4 | d[1].to_digit(16).unwrap_or(0)) as u8
        })
        .collect())
}

/// The flow of a packet given in hex, received on `in_port`, with VLAN
/// tags parsed up to the `vlan-limit` setting.
pub fn key_from_packet(hex: &str, in_port: u32, vlan_setting: usize) -> Result<FlowKey, String> {
    let bytes = packet_bytes(hex)?;
    let mut key = FlowKey::default();
    let mut meta = PacketMeta::default();
    extract_with_shape(&bytes, in_port, vlan_limit(vlan_setting), &mut meta, &mut key).map_err(|_| format!("packet: {} bytes is shorter than an Ethernet header; the datapath drops it as a runt frame", bytes.len()))?;
    Ok(key)
}

/// A flow key printed with only the fields that are set.
pub fn describe(key: &FlowKey) -> String {
    let mut mask = FlowKey::default();
    // The registers as the 32-bit ones (as OVS prints them).
    for f in all_fields().filter(|f| !f.is_register() || f.bits() == 32) {
        let v = (f.get)(key);
        if v != 0 {
            (f.put)(&mut mask, f.full_mask());
        }
    }
    if key.dl_type != 0 {
        mask.dl_type = 0xffff;
    }
    if key.is_ip() || key.is_arp() {
        mask.nw_proto = 0xff;
    }
    mask.in_port = u32::MAX;
    Match {
        value: key.masked(&mask),
        mask,
    }
    .to_string()
}

/// Runs the trace and formats it. With the packet's bytes, a
/// recirculation is followed as the datapath does: the actions before it
/// applied to the bytes, the result parsed again (VLAN tags up to
/// `vlans`), and traced from the frozen state.
pub fn trace(env: XlateEnv<'_>, key: &FlowKey, packet: Option<(&[u8], usize)>) -> String {
    let (mut o, t) = trace_pass(env, key);
    if let Some((bytes, vlans)) = packet {
        o += &length_branches(&t.actions, bytes, key.in_port, vlans);
    }
    let Some(&DpAction::Recirc(id)) = t.actions.last() else {
        return o;
    };
    let Some((bytes, vlans)) = packet else {
        o += &format!(
            "\nrecirc({id:#x}): the datapath parses the packet again here and goes on; \
             give the packet in hex (--packet) to follow it\n"
        );
        return o;
    };
    let Ok(mut pool) = PacketPool::new(1, 65536) else {
        return o;
    };
    let Some(mut pkt) = pool.alloc_from(bytes) else {
        return o;
    };
    let mut t = t;
    let mut key = *key;
    for _ in 0..sluice_datapath::MAX_RECIRC_DEPTH {
        let Some(&DpAction::Recirc(id)) = t.actions.last() else {
            break;
        };
        {
            let (data, meta) = pkt.data_and_meta_mut();
            let mut k = FlowKey::default();
            // The offsets the actions use.
            if extract_with_shape(data, key.in_port, vlans, meta, &mut k).is_err() {
                break;
            }
        }
        for a in &t.actions {
            sluice_datapath::execute::apply(&mut pkt, a);
        }
        let (data, meta) = pkt.data_and_meta_mut();
        if extract_with_shape(data, key.in_port, vlans, meta, &mut key).is_err() {
            o += "\nThe packet is shorter than an Ethernet header now: dropped as a runt\n";
            break;
        }
        key.recirc_id = id;
        o += &format!(
            "\n{}\nrecirc({id:#x}) - the packet parsed again, the translation resumed\n{}\n",
            "=".repeat(79),
            "=".repeat(79)
        );
        // After a ct action the next pass sees the state the tracker
        // gives; a trace does not consult the tracker and takes the
        // packet as a new connection's, as ofproto/trace does by default.
        if let Some(DpAction::Ct(req)) = t
            .actions
            .iter()
            .rev()
            .find(|a| matches!(a, DpAction::Ct(_)))
        {
            let mut r = sluice_conntrack::CtResult {
                state: sluice_packet::key::CS_TRACKED | sluice_packet::key::CS_NEW,
                zone: req.zone,
                ..Default::default()
            };
            if req.commit {
                r.mark = req.mark.map_or(0, |(v, m)| v & m);
                r.label = sluice_conntrack::split(req.label.map_or(0, |(v, m)| v & m));
            }
            r.write_key(&mut key);
            o += "(ct_state=new|trk: a trace takes the packet as a new connection's, as ofproto/trace does)\n";
        }
        let (more, next) = trace_pass(env, &key);
        o += &more;
        t = next;
    }
    pool.free(pkt);
    o
}

/// Which branch of each `check_pkt_len` in `acts` (outside its
/// branches) the packet `bytes` takes, as the datapath measures it.
fn length_branches(acts: &[DpAction], bytes: &[u8], in_port: u32, vlans: usize) -> String {
    let lens: Vec<u16> = acts
        .iter()
        .filter_map(|a| match a {
            DpAction::CheckPktLen { len, .. } => Some(*len),
            _ => None,
        })
        .collect();
    let mut o = String::new();
    if lens.is_empty() {
        return o;
    }
    let Ok(mut pool) = PacketPool::new(1, 65536) else {
        return o;
    };
    let Some(mut pkt) = pool.alloc_from(bytes) else {
        return o;
    };
    let (data, meta) = pkt.data_and_meta_mut();
    let mut k = FlowKey::default();
    let _ = extract_with_shape(data, in_port, vlans, meta, &mut k);
    let n = sluice_datapath::execute::check_len(&pkt);
    pool.free(pkt);
    for len in lens {
        let branch = if n > usize::from(len) { "gt" } else { "le" };
        o += &format!(
            "check_pkt_len(size={len}): this packet is {n} bytes (Ethernet padding not counted): the {branch} branch\n"
        );
    }
    o
}

/// What `sluice ctl trace` is asked: the packet's flow, and its bytes
/// when given in hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRequest {
    /// The flow the datapath would extract.
    pub key: FlowKey,
    /// The frame, with `--packet`.
    pub bytes: Option<Vec<u8>>,
    /// No nw_ttl was given: 64 was taken.
    pub ttl_assumed: bool,
}

/// How `sluice ctl trace` is called.
pub const LIVE_USAGE: &str =
    "trace FLOW (e.g. in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80) | trace --packet HEX --in-port N";

impl LiveRequest {
    /// Reads `sluice ctl trace`'s arguments: a flow description, or
    /// `--packet HEX --in-port N` (VLAN tags parsed up to `vlan_setting`,
    /// as the running datapath does).
    pub fn parse(args: &[&str], vlan_setting: usize) -> Result<LiveRequest, String> {
        let mut packet = None;
        let mut in_port = None;
        let mut flow = Vec::new();
        let mut it = args.iter();
        while let Some(&a) = it.next() {
            let mut value = |name: &str| -> Result<String, String> {
                match a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                    Some(v) => Ok(v.to_string()),
                    None => it
                        .next()
                        .map(|v| v.to_string())
                        .ok_or_else(|| format!("{name} needs a value; usage: {LIVE_USAGE}")),
                }
            };
            if a == "--packet" || a.starts_with("--packet=") {
                packet = Some(value("--packet")?);
            } else if a == "--in-port" || a.starts_with("--in-port=") {
                let v = value("--in-port")?;
                in_port = Some(
                    v.parse::<u32>()
                        .map_err(|_| format!("--in-port '{v}' is not a port number"))?,
                );
            } else if a.starts_with("--") {
                return Err(format!("unknown option '{a}'; usage: {LIVE_USAGE}"));
            } else {
                flow.push(a);
            }
        }
        match (packet, flow.is_empty()) {
            (Some(hex), true) => {
                let port = in_port
                    .ok_or_else(|| format!("--packet needs --in-port; usage: {LIVE_USAGE}"))?;
                Ok(LiveRequest {
                    key: key_from_packet(&hex, port, vlan_setting)?,
                    bytes: Some(packet_bytes(&hex)?),
                    ttl_assumed: false,
                })
            }
            (Some(_), false) => Err(format!(
                "give a flow or --packet, not both; usage: {LIVE_USAGE}"
            )),
            (None, true) => Err(format!("which packet? usage: {LIVE_USAGE}")),
            (None, false) => {
                if in_port.is_some() {
                    return Err(format!("--in-port goes with --packet; in a flow write in_port=N; usage: {LIVE_USAGE}"));
                }
                let (key, ttl_assumed) = key_from_description(&flow.join(","))?;
                Ok(LiveRequest {
                    key,
                    bytes: None,
                    ttl_assumed,
                })
            }
        }
    }
}

/// `sluice ctl trace`: the trace of the packet through the running
/// switch's rules (as `sluice trace`), then what each PMD's caches hold
/// for it now.
pub fn live(
    env: XlateEnv<'_>,
    req: &LiveRequest,
    vlans: usize,
    probes: &[(crate::pmd::Placement, sluice_datapath::CacheProbe)],
) -> String {
    let mut o = String::new();
    if req.ttl_assumed {
        o += "(no nw_ttl given: traced with nw_ttl=64)\n";
    }
    o += &trace(env, &req.key, req.bytes.as_deref().map(|b| (b, vlans)));
    o += "\nCaches now (the first pass; nothing changed by looking):\n";
    for (at, p) in probes {
        o += &format!("  {at}: {}", p.level.name());
        match &p.megaflow {
            Some(m) => {
                o += &format!(
                    "{}\n    megaflow: {m}\n",
                    if p.stale {
                        " (the rules changed since it was made: translated again before use)"
                    } else {
                        ""
                    }
                )
            }
            None => o += ": the translation above would be installed as its megaflow\n",
        }
    }
    o
}

fn trace_pass(env: XlateEnv<'_>, key: &FlowKey) -> (String, Translation) {
    let mut t = Translation::default();
    translate(env, key, &mut t, true);
    // The bridge the packet enters (its input port's).
    let name = if env.bridges.is_empty() {
        env.rules.name()
    } else {
        let (b, _) = sluice_classifier::xlate::split_dp_port(key.in_port);
        env.rules_of(b).map_or("?", |r| r.name())
    };
    let head = format!("bridge(\"{name}\")");
    let mut o = format!(
        "Flow: {}\n\n{head}\n{}\n",
        describe(key),
        "-".repeat(head.len())
    );
    for line in t.trace.as_deref().unwrap_or(&[]) {
        o += " ";
        o += line;
        o += "\n";
    }
    o += "\nFinal flow: ";
    if t.final_flow == *key {
        o += "unchanged";
    } else {
        o += &describe(&t.final_flow);
    }
    let mega = Match {
        value: key.masked(&t.wc),
        mask: t.wc,
    };
    o += &format!(
        "\nMegaflow: {}\nDatapath actions: {}\n",
        mega,
        format_dp_actions(&t.actions)
    );
    if let Some(d) = t.drop {
        o += &format!("Drop reason: {}\n", d.name());
    }
    if let [sluice_classifier::dpaction::DpAction::Select(_)] = t.actions.as_slice() {
        // What this packet runs (a recirculation in it is followed).
        t.actions = sluice_classifier::resolve_select(&t.actions, key).to_vec();
        o += &format!("This packet's actions: {}\n", format_dp_actions(&t.actions));
    }
    let hit = t.rules.iter().filter(|r| !r.is_counter()).count();
    if hit > 0 {
        o += &format!("Rules hit: {hit}\n");
    }
    (o, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_classifier::{parse_flow_file, RuleSet};

    #[test]
    fn packet_hex_refuses_what_is_not_hex_without_panicking() {
        assert_eq!(packet_bytes("0a:1B ff").unwrap(), vec![0x0a, 0x1b, 0xff]);
        let e = packet_bytes("aéb").unwrap_err();
        assert!(e.contains("'é' (character 2) is not a hex digit"), "{e}");
        assert!(packet_bytes("abc").unwrap_err().contains("odd"));
        assert!(packet_bytes("+1").unwrap_err().contains("'+'"));
    }

    proptest! {
        /// Any text is bytes or an error, never a panic; hex of bytes
        /// reads back as those bytes.
        #[test]
        fn packet_hex_takes_any_text(text in "\\PC{0,40}", bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = packet_bytes(&text);
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(packet_bytes(&hex).unwrap(), bytes);
        }
    }

    /// With the packet's bytes, the trace says which branch of a
    /// `check_pkt_len` the packet takes, its Ethernet padding not counted.
    #[test]
    fn trace_tells_the_length_branch() {
        let rules = RuleSet::from_specs(
            &parse_flow_file(
                "actions=check_pkt_larger(45)->NXM_NX_REG0[0],resubmit(,1)\ntable=1,reg0=1,actions=output:2\ntable=1,reg0=0,actions=output:3\n",
                None,
            )
            .unwrap(),
            0,
        );
        // IPv4/UDP, 4 bytes of data: a 46-byte frame, then padded to 60.
        let frame = "020000000002 020000000001 0800 \
                     45000020000000004011f9c00a0000010a000002 \
                     3039003500080000 00000000";
        for (pad, branch) in [
            ("", "46 bytes (Ethernet padding not counted): the gt branch"),
            (
                " 0000000000000000000000000000",
                "46 bytes (Ethernet padding not counted): the gt branch",
            ),
        ] {
            let hex = format!("{frame}{pad}");
            let key = key_from_packet(&hex, 1, 1).unwrap();
            let bytes = packet_bytes(&hex).unwrap();
            let out = trace(
                XlateEnv::single(&rules, &[1, 2, 3]),
                &key,
                Some((&bytes, 1)),
            );
            assert!(
                out.contains("Datapath actions: check_pkt_len(size=45,gt(2),le(3))"),
                "{out}"
            );
            assert!(
                out.contains(&format!("check_pkt_len(size=45): this packet is {branch}")),
                "{out}"
            );
        }
        let rules = RuleSet::from_specs(
            &parse_flow_file("actions=check_pkt_larger(46)->NXM_NX_REG0[0],resubmit(,1)\ntable=1,reg0=1,actions=output:2\ntable=1,reg0=0,actions=output:3\n", None).unwrap(),
            0,
        );
        let hex = format!("{frame} 0000000000000000000000000000");
        let key = key_from_packet(&hex, 1, 1).unwrap();
        let out = trace(
            XlateEnv::single(&rules, &[1, 2, 3]),
            &key,
            Some((&packet_bytes(&hex).unwrap(), 1)),
        );
        assert!(
            out.contains("this packet is 46 bytes (Ethernet padding not counted): the le branch"),
            "{out}"
        );
    }

    #[test]
    fn live_trace_arguments() {
        let flow = LiveRequest::parse(&["in_port=1,tcp", "tp_dst=80"], 1).unwrap();
        assert!(flow.ttl_assumed && flow.bytes.is_none());
        assert_eq!((flow.key.in_port, flow.key.tp_dst), (1, 80));
        let frame = "ffffffffffff0000000000010806";
        for args in [
            vec!["--packet", frame, "--in-port", "3"],
            vec!["--packet=ffff ffffffff0000000000010806", "--in-port=3"],
        ] {
            let p = LiveRequest::parse(&args, 1).unwrap();
            assert_eq!((p.key.in_port, p.key.dl_type), (3, 0x0806));
            assert_eq!(p.bytes.as_deref().map(<[u8]>::len), Some(14));
        }
        for (args, said) in [
            (vec![], "which packet?"),
            (vec!["--packet", frame], "--packet needs --in-port"),
            (
                vec!["--packet", frame, "--in-port", "x"],
                "'x' is not a port number",
            ),
            (vec!["--packet"], "--packet needs a value"),
            (vec!["--packet", frame, "--in-port", "1", "tcp"], "not both"),
            (
                vec!["--in-port", "1", "tcp"],
                "--in-port goes with --packet",
            ),
            (vec!["--verbose", "tcp"], "unknown option '--verbose'"),
            (vec!["--packet", "zz", "--in-port", "1"], "not a hex digit"),
            (vec!["tp_dst=80"], "tp_dst requires"),
        ] {
            let e = LiveRequest::parse(&args, 1).unwrap_err();
            assert!(e.contains(said), "{args:?}: {e}");
        }
    }

    #[test]
    fn trace_like_ofproto_trace() {
        let rules = RuleSet::from_specs(
            &parse_flow_file("priority=100,tcp,nw_dst=10.0.0.0/24,actions=mod_nw_dst:10.1.1.1,resubmit(,1)\ntable=1,ip,nw_dst=10.1.1.1,actions=output:2\n", None).unwrap(),
            0,
        );
        let (key, assumed) =
            key_from_description("in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80").unwrap();
        assert!(assumed);
        let out = trace(XlateEnv::single(&rules, &[1, 2]), &key, None);
        assert!(
            out.contains("Flow: tcp,in_port=1,nw_dst=10.0.0.1,nw_ttl=64,tp_dst=80"),
            "{out}"
        );
        assert!(
            out.contains(" 0. tcp,nw_dst=10.0.0.0/24, priority 100"),
            "{out}"
        );
        assert!(
            out.contains("     1. ip,nw_dst=10.1.1.1, priority 32768"),
            "{out}"
        );
        assert!(
            out.contains("Datapath actions: set(ipv4(dst=10.1.1.1)),2"),
            "{out}"
        );
        assert!(
            out.contains("Final flow: tcp,in_port=1,nw_dst=10.1.1.1"),
            "{out}"
        );
    }

    #[test]
    fn a_recirculation_is_followed_when_the_packet_is_given() {
        let rules = RuleSet::from_specs(
            &parse_flow_file(
                "mpls,actions=pop_mpls:0x0800,goto_table:1\ntable=1,udp,tp_dst=53,actions=output:2\n",
                None,
            )
            .unwrap(),
            0,
        );
        // An MPLS label over IPv4/UDP to port 53.
        let hex = "020000000002 020000000001 8847 00064140 \
                   45000020000000004011f9c00a0000010a000002 \
                   3039003500080000 00000000";
        let key = key_from_packet(hex, 1, 1).unwrap();
        let bytes = packet_bytes(hex).unwrap();
        let out = trace(XlateEnv::single(&rules, &[1, 2]), &key, Some((&bytes, 1)));
        assert!(
            out.contains("Datapath actions: pop_mpls(eth_type=0x800),recirc(0x1)"),
            "{out}"
        );
        assert!(
            out.contains("recirc(0x1) - the packet parsed again"),
            "{out}"
        );
        assert!(out.contains("Datapath actions: 2"), "{out}");
        // Without the bytes the trace says where it stops.
        let out = trace(XlateEnv::single(&rules, &[1, 2]), &key, None);
        assert!(out.contains("give the packet in hex"), "{out}");
    }

    #[test]
    fn packet_hex() {
        let k = key_from_packet("ffffffffffff 020000000001 0806", 3, 1).unwrap();
        assert_eq!((k.in_port, k.dl_type), (3, 0x0806));
        assert!(key_from_packet("ff", 1, 1).unwrap_err().contains("runt"));
        assert!(key_from_packet("zz", 1, 1).is_err());
    }
}
