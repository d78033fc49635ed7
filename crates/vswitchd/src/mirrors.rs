//! The bridges' port mirrors (`Mirror` rows) as the switch takes them:
//! the rows' ports turned into the OpenFlow numbers they run with, and
//! what cannot be mirrored said for the log.

use crate::desired::BridgeCfg;

/// A port mirror as the switch takes it: its ports by OpenFlow number.
pub use sluice_bridge::Mirror as MirrorSet;

/// Bridge `bridge`'s mirrors as the switch takes them (ports by the
/// numbers they run with: `running` gives an interface's), and what was
/// passed over, for the log: a mirror with no output port (OVS's
/// `output_vlan`, RSPAN, is not supported) or one whose ports are not
/// running.
pub fn mirror_sets(
    bridge: &str,
    b: &BridgeCfg,
    running: impl Fn(&str) -> Option<i64>,
) -> (Vec<MirrorSet>, Vec<String>) {
    let ofport = |pname: &String| -> Option<u32> {
        let p = b.ports.get(pname)?;
        let iname = p.interfaces.keys().next()?;
        u32::try_from(running(iname)?).ok().filter(|&n| n > 0)
    };
    let mut notes = Vec::new();
    let mut sets = Vec::new();
    for m in &b.mirrors {
        let out = match (&m.output_port, m.output_vlan) {
            (Some(p), _) => match ofport(p) {
                Some(n) => n,
                None => {
                    notes.push(format!(
                        "bridge {bridge}: mirror {}: output port {p} is not running, mirror ignored",
                        m.name
                    ));
                    continue;
                }
            },
            (None, Some(v)) => {
                notes.push(format!(
                    "bridge {bridge}: mirror {}: output_vlan {v} (RSPAN) is not supported, mirror ignored",
                    m.name
                ));
                continue;
            }
            (None, None) => {
                notes.push(format!(
                    "bridge {bridge}: mirror {}: no output port or VLAN, mirror ignored",
                    m.name
                ));
                continue;
            }
        };
        let ports = |names: &[String]| -> Vec<u32> { names.iter().filter_map(ofport).collect() };
        let set = MirrorSet {
            name: m.name.clone(),
            select_all: m.select_all,
            src: ports(&m.select_src_port),
            dst: ports(&m.select_dst_port),
            vlans: m
                .select_vlan
                .iter()
                .filter_map(|&v| u16::try_from(v).ok().filter(|&v| v < 4096))
                .collect(),
            output: out,
        };
        if !set.select_all && set.src.is_empty() && set.dst.is_empty() {
            notes.push(format!(
                "bridge {bridge}: mirror {}: selects no running port, mirror ignored",
                m.name
            ));
            continue;
        }
        sets.push(set);
    }
    (sets, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{IfaceCfg, MirrorCfg, PortCfg};

    #[test]
    fn rows_become_port_numbers_and_what_cannot_be_mirrored_is_said() {
        let mut b = BridgeCfg::default();
        for name in ["p1", "p2", "p3", "down"] {
            let mut p = PortCfg::default();
            p.interfaces.insert(name.into(), IfaceCfg::default());
            b.ports.insert(name.into(), p);
        }
        let running = |i: &str| match i {
            "p1" => Some(1),
            "p2" => Some(2),
            "p3" => Some(3),
            _ => Some(-1),
        };
        let m = |name: &str, src: &[&str], out: Option<&str>, vlan: Option<i64>| MirrorCfg {
            name: name.into(),
            select_src_port: src.iter().map(|s| s.to_string()).collect(),
            select_vlan: vec![10, 5000],
            output_port: out.map(str::to_string),
            output_vlan: vlan,
            ..MirrorCfg::default()
        };
        b.mirrors = vec![
            m("span", &["p1", "p2", "down"], Some("p3"), None),
            m("rspan", &["p1"], None, Some(7)),
            m("dead", &["p1"], Some("down"), None),
            m("none", &["down"], Some("p3"), None),
        ];
        let (sets, notes) = mirror_sets("br0", &b, running);
        assert_eq!(
            sets,
            [MirrorSet {
                name: "span".into(),
                select_all: false,
                src: vec![1, 2],
                dst: vec![],
                vlans: vec![10],
                output: 3,
            }]
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].contains("RSPAN"), "{notes:?}");
        assert!(
            notes[1].contains("output port down is not running"),
            "{notes:?}"
        );
        assert!(notes[2].contains("selects no running port"), "{notes:?}");
    }
}
