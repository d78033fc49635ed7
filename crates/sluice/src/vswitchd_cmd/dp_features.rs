//! `ovs-appctl dpif/show-dp-features BRIDGE` and `dpif/set-dp-features
//! BRIDGE [FEATURE [VALUE]]` in OVS 3.1's words (ofproto-dpif.c's
//! `dpif_show_support` and `dpif_set_support`), from the capabilities the
//! `Datapath` row says ([`super::capabilities`]): one source for both.
//!
//! OVS can turn a feature its datapath has off at run time (its
//! translation then does without it); Sluice cannot, so turning off a
//! feature Sluice has is refused by name, while turning off one it lacks
//! (`trunc`, `add_mpls`: what OVS's system tests turn off) is the no-op it
//! is, and turning on one it lacks gets OVS's own answer.

/// A feature: its name in `set-dp-features` and the `Datapath` row, its
/// title in `show-dp-features`, and whether it is a count.
struct Feature {
    name: &'static str,
    title: &'static str,
    count: bool,
}

const fn flag(name: &'static str, title: &'static str) -> Feature {
    Feature {
        name,
        title,
        count: false,
    }
}

const fn count(name: &'static str, title: &'static str) -> Feature {
    Feature {
        name,
        title,
        count: true,
    }
}

/// In OVS 3.1's order (its DPIF_SUPPORT_FIELDS, then ODP_SUPPORT_FIELDS).
const FEATURES: &[Feature] = &[
    flag("masked_set_action", "Masked set action"),
    flag("tnl_push_pop", "Tunnel push pop"),
    flag("ufid", "Ufid"),
    flag("trunc", "Truncate action"),
    count("sample_nesting", "Sample nesting"),
    flag("ct_eventmask", "Conntrack eventmask"),
    flag("ct_clear", "Conntrack clear"),
    count("max_hash_alg", "Max dp_hash algorithm"),
    flag("check_pkt_len", "Check pkt length action"),
    flag("ct_timeout", "Conntrack timeout policy"),
    flag("explicit_drop_action", "Explicit Drop action"),
    flag("lb_output_action", "Optimized Balance TCP mode"),
    flag("ct_zero_snat", "Conntrack all-zero IP SNAT"),
    flag("add_mpls", "MPLS Label add"),
    count("max_vlan_headers", "Max VLAN headers"),
    count("max_mpls_depth", "Max MPLS depth"),
    flag("recirc", "Recirc"),
    flag("ct_state", "CT state"),
    flag("ct_zone", "CT zone"),
    flag("ct_mark", "CT mark"),
    flag("ct_label", "CT label"),
    flag("ct_state_nat", "CT state NAT"),
    flag("ct_orig_tuple", "CT orig tuple"),
    flag("ct_orig_tuple6", "CT orig tuple for IPv6"),
    flag("nd_ext", "IPv6 ND Extension"),
];

/// A feature's value among `caps` (a missing one: off, 0).
fn value(caps: &[(String, String)], f: &Feature) -> u64 {
    let v = caps
        .iter()
        .find(|(k, _)| k == f.name)
        .map(|(_, v)| v.as_str());
    match v {
        Some("true") => 1,
        Some(n) => n.parse().unwrap_or(0),
        None => 0,
    }
}

/// `dpif/show-dp-features`: `Title: Yes|No|N` a line.
pub(super) fn show(caps: &[(String, String)]) -> String {
    let mut s = String::new();
    for f in FEATURES {
        let v = value(caps, f);
        if f.count {
            s += &format!("{}: {v}\n", f.title);
        } else {
            s += &format!("{}: {}\n", f.title, if v != 0 { "Yes" } else { "No" });
        }
    }
    s
}

/// `name (Title) : [run time]:V, [boot time]:V` (they never differ in
/// Sluice).
fn line(caps: &[(String, String)], f: &Feature) -> String {
    let v = value(caps, f);
    let t = if f.count {
        v.to_string()
    } else {
        (v != 0).to_string()
    };
    format!(
        "{} ({}) : [run time]:{t}, [boot time]:{t}\n",
        f.name, f.title
    )
}

/// `dpif/set-dp-features BRIDGE [FEATURE [VALUE]]`'s answer after the
/// bridge: every feature, one, or the outcome of setting one (OVS's
/// texts, which it answers without an error status; an error for what
/// Sluice cannot do).
pub(super) fn set(caps: &[(String, String)], args: &[String]) -> Result<String, String> {
    let Some(name) = args.first() else {
        return Ok(FEATURES.iter().map(|f| line(caps, f)).collect());
    };
    let Some(f) = FEATURES.iter().find(|f| f.name == name.as_str()) else {
        return Ok("Unexpected support field".into());
    };
    let Some(want) = args.get(1) else {
        return Ok(line(caps, f));
    };
    let have = value(caps, f);
    if f.count {
        let Ok(v) = want.parse::<i64>() else {
            return Ok("Integer number expected".into());
        };
        return match v {
            v if v < 0 => Ok("Negative number not expected".into()),
            v if v as u64 > have => Ok("Can not set value beyond the datapath capability".into()),
            v if v as u64 == have => Ok(String::new()),
            _ => Err(format!(
                "Sluice cannot lower {name} below what its datapath does ({have})"
            )),
        };
    }
    match want.to_ascii_lowercase().as_str() {
        "true" if have != 0 => Ok(String::new()),
        // (OVS's words, its spelling.)
        "true" => Ok("Can not enable features not supported by the datapth".into()),
        "false" if have == 0 => Ok(String::new()),
        "false" => Err(format!(
            "Sluice cannot turn {name} off: its datapath always has it"
        )),
        _ => Ok("Boolean value expected".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Vec<(String, String)> {
        super::super::capabilities::capabilities(1)
    }

    #[test]
    fn every_feature_in_ovs_order_and_words() {
        let s = show(&caps());
        assert_eq!(s.lines().count(), FEATURES.len());
        assert!(s.starts_with("Masked set action: Yes\nTunnel push pop: Yes\nUfid: No\n"));
        assert!(s.contains("\nMPLS Label add: No\nMax VLAN headers: 1\nMax MPLS depth: 1\n"));
        assert!(s.ends_with("IPv6 ND Extension: No\n"));
        // Every feature is one the Datapath row has.
        for f in FEATURES {
            assert!(caps().iter().any(|(k, _)| k == f.name), "{}", f.name);
        }
    }

    #[test]
    fn setting_as_ovs_answers_and_refusing_what_sluice_cannot() {
        let c = caps();
        let s = |a: &[&str]| set(&c, &a.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["trunc", "false"]), Ok(String::new()));
        assert_eq!(
            s(&["trunc", "true"]),
            Ok("Can not enable features not supported by the datapth".into())
        );
        assert!(s(&["ct_clear", "false"]).is_err());
        assert_eq!(s(&["ct_clear", "true"]), Ok(String::new()));
        assert_eq!(s(&["nope"]), Ok("Unexpected support field".into()));
        assert_eq!(
            s(&["recirc"]),
            Ok("recirc (Recirc) : [run time]:true, [boot time]:true\n".into())
        );
        assert_eq!(
            s(&["max_vlan_headers", "3"]),
            Ok("Can not set value beyond the datapath capability".into())
        );
        assert_eq!(
            s(&["ct_clear", "maybe"]),
            Ok("Boolean value expected".into())
        );
        assert_eq!(s(&[]).unwrap().lines().count(), FEATURES.len());
    }
}
