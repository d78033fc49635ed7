//! `sluice trace`: how the rules handle one packet, in the format of
//! `ovs-appctl ofproto/trace`.

use sluice_classifier::dpaction::format_dp_actions;
use sluice_classifier::fields::FIELDS;
use sluice_classifier::{parse_flow, translate, Match, Require, RuleSet, Translation, XlateEnv};
use sluice_packet::extract::{extract_with_shape, vlan_limit};
use sluice_packet::{FlowKey, PacketMeta};

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

/// The flow of a packet given in hex, received on `in_port`, with VLAN
/// tags parsed up to the `vlan-limit` setting.
pub fn key_from_packet(hex: &str, in_port: u32, vlan_setting: usize) -> Result<FlowKey, String> {
    let clean: String = hex
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    if !clean.len().is_multiple_of(2) {
        return Err("packet: odd number of hex digits".into());
    }
    let bytes = (0..clean.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&clean[i..i + 2], 16)
                .map_err(|_| format!("packet: '{}' is not hex", &clean[i..i + 2]))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    let mut key = FlowKey::default();
    let mut meta = PacketMeta::default();
    extract_with_shape(&bytes, in_port, vlan_limit(vlan_setting), &mut meta, &mut key).map_err(|_| format!("packet: {} bytes is shorter than an Ethernet header; the datapath drops it as a runt frame", bytes.len()))?;
    Ok(key)
}

/// A flow key printed with only the fields that are set.
pub fn describe(key: &FlowKey) -> String {
    let mut mask = FlowKey::default();
    for f in FIELDS {
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

/// Runs the trace and formats it.
pub fn trace(rules: &RuleSet, ports: &[u32], key: &FlowKey) -> String {
    let mut t = Translation::default();
    translate(XlateEnv { rules, ports }, key, &mut t, true);
    let mut o = format!(
        "Flow: {}\n\nbridge(\"sluice\")\n----------------\n",
        describe(key)
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
    let hit = t.rules.iter().filter(|r| !r.is_counter()).count();
    if hit > 0 {
        o += &format!("Rules hit: {hit}\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse_flow_file;

    #[test]
    fn trace_like_ofproto_trace() {
        let rules = RuleSet::from_specs(
            &parse_flow_file("priority=100,tcp,nw_dst=10.0.0.0/24,actions=mod_nw_dst:10.1.1.1,resubmit(,1)\ntable=1,ip,nw_dst=10.1.1.1,actions=output:2\n", None).unwrap(),
            0,
        );
        let (key, assumed) =
            key_from_description("in_port=1,tcp,nw_dst=10.0.0.1,tp_dst=80").unwrap();
        assert!(assumed);
        let out = trace(&rules, &[1, 2], &key);
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
    fn packet_hex() {
        let k = key_from_packet("ffffffffffff 020000000001 0806", 3, 1).unwrap();
        assert_eq!((k.in_port, k.dl_type), (3, 0x0806));
        assert!(key_from_packet("ff", 1, 1).unwrap_err().contains("runt"));
        assert!(key_from_packet("zz", 1, 1).is_err());
    }
}
