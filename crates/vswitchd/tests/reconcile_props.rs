//! The reconciler against a model switch, over random sequences of
//! configurations (bridges, ports, tags, MTUs, ofport requests, types
//! Sluice refuses): after every pass the switch holds exactly the ports
//! the rows ask for and can be made, each under the number written back
//! for it, numbers unique per bridge and `LOCAL` for the bridge's own;
//! a port whose row did not change is never touched; nothing is left
//! behind when everything goes.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice_ovsdb::Uuid;
use sluice_vswitchd::desired::{BridgeCfg, Desired, IfaceCfg, PortCfg};
use sluice_vswitchd::reconcile::{dp_port, Reconciler, Switch};

/// A switch that keeps what it is told, and checks it makes sense.
#[derive(Default)]
struct Model {
    bridges: BTreeSet<String>,
    /// (bridge, switch port) → (name, spec).
    ports: BTreeMap<(String, u32), (String, String)>,
    /// Ports added or removed in the last pass, by name.
    touched: BTreeSet<String>,
}

impl Switch for Model {
    fn max_bridges(&self) -> usize {
        1
    }
    fn add_bridge(&mut self, name: &str, _: u64, _: bool) -> Result<(), String> {
        assert!(
            self.bridges.insert(name.to_string()),
            "bridge {name} made twice"
        );
        Ok(())
    }
    fn del_bridge(&mut self, name: &str) {
        assert!(
            !self.ports.keys().any(|(b, _)| b == name),
            "bridge {name} removed before its ports"
        );
        assert!(self.bridges.remove(name));
    }
    fn can_open(&self, name: &str, _: &str) -> Result<(), String> {
        if name.starts_with("missing") {
            return Err(format!(
                "could not open network device {name} (No such device)"
            ));
        }
        Ok(())
    }
    fn add_port(&mut self, b: &str, n: u32, name: &str, spec: &str) -> Result<(), String> {
        assert!(
            self.bridges.contains(b),
            "a port on bridge {b}, which is not there"
        );
        let old = self
            .ports
            .insert((b.to_string(), n), (name.to_string(), spec.to_string()));
        assert!(
            old.is_none(),
            "port {n} of {b} given twice: {old:?} and {name}"
        );
        self.touched.insert(name.to_string());
        Ok(())
    }
    fn del_port(&mut self, b: &str, n: u32, name: &str) {
        let old = self.ports.remove(&(b.to_string(), n));
        assert_eq!(
            old.map(|(n, _)| n).as_deref(),
            Some(name),
            "removed what is not there"
        );
        self.touched.insert(name.to_string());
    }
    fn change_port(
        &mut self,
        b: &str,
        n: u32,
        name: &str,
        old: &str,
        new: &str,
    ) -> Result<(), String> {
        let p = self
            .ports
            .get_mut(&(b.to_string(), n))
            .expect("changed in place: there");
        assert_eq!((p.0.as_str(), p.1.as_str()), (name, old));
        // In place only when the device part is the same (as Sluice's).
        let base = |s: &str| s.split(',').next().unwrap_or("").to_string();
        if base(old) != base(new) {
            return Err("not in place".into());
        }
        p.1 = new.to_string();
        Ok(())
    }
    fn set_fail_mode(&mut self, _: &str, _: bool) {}
    fn flush_flows(&mut self, _: &str, _: bool) {}
    fn set_controllers(&mut self, _: &str, _: &[String]) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn connected_controllers(&self, _: &str) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    fn datapath_capabilities(&self, _: &str) -> Vec<(String, String)> {
        Vec::new()
    }
    fn set_protocols(&mut self, _: &str, _: &[String]) -> Option<String> {
        None
    }
    fn statistics(&self) -> sluice_vswitchd::reconcile::Statistics {
        BTreeMap::new()
    }
    fn set_mirrors(
        &mut self,
        _: &str,
        _: &[sluice_vswitchd::reconcile::MirrorSet],
    ) -> Result<(), String> {
        Ok(())
    }
    fn set_ssl(&mut self, _: Option<&sluice_vswitchd::desired::SslCfg>) -> Result<(), String> {
        Ok(())
    }
    fn set_ct_timeouts(
        &mut self,
        _: &std::collections::BTreeMap<u16, Vec<(String, i64)>>,
    ) -> Result<(), String> {
        Ok(())
    }
    fn set_other_config(&mut self, _: &[(String, Option<String>)]) -> Vec<String> {
        Vec::new()
    }
}

fn uuid(n: u32) -> Uuid {
    let mut b = [0; 16];
    b[12..].copy_from_slice(&n.to_be_bytes());
    Uuid(b)
}

/// One interface as a test row: (name index, type index, tag, mtu,
/// ofport request).
type Row = (u8, u8, Option<u8>, Option<u16>, Option<u8>);

const KINDS: &[&str] = &["", "internal", "tap", "stt"];

fn config(bridges: &[(u8, Vec<Row>)]) -> Desired {
    let mut d = Desired {
        root: Some(uuid(1)),
        ..Desired::default()
    };
    for (bi, rows) in bridges {
        let bname = format!("br{bi}");
        let mut b = BridgeCfg {
            uuid: uuid(100 + u32::from(*bi)),
            ..BridgeCfg::default()
        };
        // The bridge's own interface, as ovs-vsctl add-br makes it.
        let mut own = PortCfg {
            uuid: uuid(1000 + u32::from(*bi)),
            ..PortCfg::default()
        };
        own.interfaces.insert(
            bname.clone(),
            IfaceCfg {
                uuid: uuid(2000 + u32::from(*bi)),
                kind: "internal".into(),
                ..IfaceCfg::default()
            },
        );
        b.ports.insert(bname.clone(), own);
        for (name, kind, tag, mtu, req) in rows {
            // Names are unique over the whole database (as OVS's rows).
            let iname = if name % 5 == 0 {
                format!("missing{bi}x{name}")
            } else {
                format!("p{bi}x{name}")
            };
            let mut p = PortCfg {
                uuid: uuid(10_000 + u32::from(*bi) * 256 + u32::from(*name)),
                tag: tag.map(i64::from),
                ..PortCfg::default()
            };
            p.interfaces.insert(
                iname.clone(),
                IfaceCfg {
                    uuid: uuid(20_000 + u32::from(*bi) * 256 + u32::from(*name)),
                    kind: KINDS[usize::from(*kind) % KINDS.len()].to_string(),
                    mtu_request: mtu.map(|m| i64::from(m) + 1000),
                    ofport_request: req.map(i64::from),
                    ..IfaceCfg::default()
                },
            );
            b.ports.insert(iname, p);
        }
        d.bridges.insert(bname, b);
    }
    d
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (
            0u8..12,
            0u8..4,
            prop::option::of(1u8..4),
            prop::option::of(0u16..3),
            prop::option::weighted(0.3, 1u8..6),
        ),
        0..8,
    )
    .prop_map(|mut v| {
        v.sort_by_key(|r| r.0);
        v.dedup_by_key(|r| r.0);
        v
    })
}

fn configs() -> impl Strategy<Value = Vec<Vec<(u8, Vec<Row>)>>> {
    prop::collection::vec(prop::collection::vec((0u8..3, rows()), 0..3), 1..8).prop_map(|steps| {
        steps
            .into_iter()
            .map(|mut bs| {
                bs.sort_by_key(|b| b.0);
                bs.dedup_by_key(|b| b.0);
                bs
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_switch_holds_what_the_rows_ask(steps in configs()) {
        let mut r = Reconciler::new("/run/test".into());
        let mut sw = Model::default();
        let mut before: Option<(Desired, Vec<String>)> = None;
        for step in &steps {
            let d = config(step);
            sw.touched.clear();
            let o = r.reconcile(&d, &mut sw);
            let served: Vec<&str> = r.bridges().collect();
            prop_assert!(served.len() <= 1);
            // Every interface of a served bridge that can be made is on
            // the switch under the number written back; the others have
            // -1 and a reason.
            let mut want = BTreeMap::new();
            for (bname, b) in &d.bridges {
                for p in b.ports.values() {
                    for (iname, i) in &p.interfaces {
                        let out = &o.interfaces[&i.uuid];
                        let makeable = served.contains(&bname.as_str())
                            && !iname.starts_with("missing")
                            && i.kind != "stt";
                        if makeable {
                            prop_assert!(out.ofport > 0 && out.error.is_none(), "{iname}: {out:?}");
                            if iname == bname {
                                prop_assert_eq!(out.ofport, 65534);
                            }
                            want.insert((bname.clone(), dp_port(out.ofport)), iname.clone());
                        } else {
                            prop_assert_eq!(out.ofport, -1);
                            prop_assert!(out.error.is_some());
                        }
                    }
                }
            }
            let have: BTreeMap<(String, u32), String> =
                sw.ports.iter().map(|(k, (n, _))| (k.clone(), n.clone())).collect();
            prop_assert_eq!(&have, &want);
            // A port whose row did not change (same bridge, same columns)
            // was not touched.
            if let Some((prev, prev_served)) = &before {
                for (bname, b) in &d.bridges {
                    let Some(pb) = prev.bridges.get(bname) else { continue };
                    if !served.contains(&bname.as_str()) || !prev_served.contains(bname) {
                        continue;
                    }
                    for (pname, p) in &b.ports {
                        let same = pb.ports.get(pname).is_some_and(|q| {
                            q.tag == p.tag && q.interfaces.iter().zip(&p.interfaces).all(|((_, x), (_, y))| {
                                x.kind == y.kind && x.mtu_request == y.mtu_request && x.ofport_request == y.ofport_request
                            })
                        });
                        let requests_moved = p.interfaces.values().any(|i| i.ofport_request.is_some())
                            || pb.ports.values().any(|q| q.interfaces.values().any(|i| i.ofport_request.is_some()))
                            || b.ports.values().any(|q| q.interfaces.values().any(|i| i.ofport_request.is_some()));
                        if same && !requests_moved {
                            for iname in p.interfaces.keys() {
                                prop_assert!(!sw.touched.contains(iname), "{iname} touched though unchanged");
                            }
                        }
                    }
                }
            }
            let served: Vec<String> = served.iter().map(|s| s.to_string()).collect();
            before = Some((d, served));
        }
        // Everything goes: nothing is left on the switch.
        r.reconcile(&config(&[]), &mut sw);
        prop_assert!(sw.ports.is_empty() && sw.bridges.is_empty());
    }
}
