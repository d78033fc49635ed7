//! What the `Open_vSwitch` database asks for, read from the monitored
//! tables as ovs-vswitchd's bridge.c reads them: the root row's bridges,
//! each bridge's ports, each port's interfaces, by name. References to
//! rows that are not there (yet) are passed over; a port or interface
//! that two parents claim, or a name used twice, goes to the first (by
//! UUID order, which is stable) and the rest are reported, as OVS logs
//! them. Nothing here does I/O or changes the switch: the reconciler
//! compares this with what runs.

use std::collections::{BTreeMap, BTreeSet};

use sluice_ovsdb::replica::{string, uuids};
use sluice_ovsdb::{Atom, Datum, Replica, Row, Uuid};

/// A string-to-string map column (`other_config`, `options`).
pub type Smap = BTreeMap<String, String>;

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// The root row (`Open_vSwitch`), if there is one yet.
    pub root: Option<Uuid>,
    /// The configuration's sequence number that `cur_cfg` acknowledges.
    pub next_cfg: i64,
    /// `Open_vSwitch:other_config`.
    pub other_config: Smap,
    /// Bridges by name.
    pub bridges: BTreeMap<String, BridgeCfg>,
    /// `Open_vSwitch:datapaths`: the `Datapath` rows by datapath type
    /// (those that are there).
    pub datapaths: BTreeMap<String, Uuid>,
    /// What was passed over, for the log.
    pub warnings: Vec<String>,
    /// `Open_vSwitch:ssl`: the `SSL` row, when there is one.
    pub ssl: Option<SslCfg>,
    /// The userspace (`netdev`) `Datapath` row's `ct_zones`: each zone
    /// whose `CT_Zone` names a `CT_Timeout_Policy`, with that policy's
    /// `timeouts` (`ovs-vsctl add-zone-tp netdev zone=5 udp_first=1`).
    pub ct_timeouts: BTreeMap<u16, Vec<(String, i64)>>,
}

/// The `SSL` row (`ovs-vsctl set-ssl`): the files of the switch's key,
/// its certificate and the CA its peers' certificates chain to, for
/// `ssl:` and `pssl:` controllers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SslCfg {
    pub private_key: String,
    pub certificate: String,
    pub ca_cert: String,
    /// `bootstrap_ca_cert`: learn the CA from the first controller (not
    /// done by Sluice: the CA file must be there).
    pub bootstrap_ca_cert: bool,
}

/// One bridge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BridgeCfg {
    pub uuid: Uuid,
    /// `netdev` (userspace) or `system`; "" is `system` to OVS.
    pub datapath_type: String,
    pub fail_mode: Option<String>,
    /// `protocols`: the OpenFlow versions allowed (none: every one).
    pub protocols: Vec<String>,
    pub other_config: Smap,
    /// Ports by name.
    pub ports: BTreeMap<String, PortCfg>,
    /// `controller`: the OpenFlow controllers, in UUID order.
    pub controllers: Vec<ControllerCfg>,
    /// `mirrors`: the bridge's port mirrors, in UUID order.
    pub mirrors: Vec<MirrorCfg>,
}

/// One `Mirror` row, its ports by name (those of the bridge's ports
/// that are there).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MirrorCfg {
    pub uuid: Uuid,
    pub name: String,
    pub select_all: bool,
    pub select_src_port: Vec<String>,
    pub select_dst_port: Vec<String>,
    pub select_vlan: Vec<i64>,
    pub output_port: Option<String>,
    pub output_vlan: Option<i64>,
}

/// One `Controller` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControllerCfg {
    pub uuid: Uuid,
    /// `target`: `tcp:IP[:PORT]`, `ssl:IP[:PORT]`, `unix:PATH`, ...
    pub target: String,
}

/// One port.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortCfg {
    pub uuid: Uuid,
    pub tag: Option<i64>,
    pub trunks: Vec<i64>,
    pub vlan_mode: Option<String>,
    /// Interfaces by name.
    pub interfaces: BTreeMap<String, IfaceCfg>,
}

/// One interface.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IfaceCfg {
    pub uuid: Uuid,
    /// `type`: "" (a system device), `internal`, `patch`, `dpdk`,
    /// `dpdkvhostuserclient`, `vxlan`, `geneve`, ...
    pub kind: String,
    pub options: Smap,
    pub ofport_request: Option<i64>,
    /// `ofport` as the row has it (the number given before: kept across
    /// restarts, as OVS's `iface_pick_ofport`).
    pub ofport: Option<i64>,
    pub mtu_request: Option<i64>,
}

/// A string-to-string map column of `row`.
pub fn smap(row: &Row, column: &str) -> Smap {
    match row.get(column) {
        Some(Datum::Map(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
            .collect(),
        _ => Smap::new(),
    }
}

fn int(row: &Row, column: &str) -> Option<i64> {
    row.get(column)?.one()?.as_i64()
}

fn ints(row: &Row, column: &str) -> Vec<i64> {
    row.get(column)
        .map(|d| d.atoms().iter().filter_map(Atom::as_i64).collect())
        .unwrap_or_default()
}

/// The rows of `table` that `parent`'s `column` refers to and that are
/// there with a name, in UUID order (stable whatever the server's order).
fn children<'a>(
    r: &'a Replica,
    parent: &Row,
    column: &str,
    table: &str,
) -> Vec<(Uuid, &'a Row, &'a str)> {
    let mut refs = uuids(parent, column);
    refs.sort();
    refs.into_iter()
        .filter_map(|u| {
            let row = r.row(table, &u)?;
            Some((u, row, string(row, "name")?))
        })
        .collect()
}

/// The timeout policies of the `netdev` datapath's zones, as OVS's
/// `ofproto_ct_set_zone_timeout_policy` reads them: `Datapath:ct_zones`
/// (zone to `CT_Zone`), `CT_Zone:timeout_policy`,
/// `CT_Timeout_Policy:timeouts`. A zone without a policy row is left out.
fn ct_timeouts(
    r: &Replica,
    datapaths: &BTreeMap<String, Uuid>,
) -> BTreeMap<u16, Vec<(String, i64)>> {
    let Some(Datum::Map(zones)) = datapaths
        .get("netdev")
        .and_then(|u| r.row("Datapath", u))
        .and_then(|row| row.get("ct_zones"))
    else {
        return BTreeMap::new();
    };
    zones
        .iter()
        .filter_map(|(k, v)| {
            let zone = u16::try_from(k.as_i64()?).ok()?;
            let zrow = r.row("CT_Zone", &v.as_uuid()?)?;
            let tp = uuids(zrow, "timeout_policy").first().copied()?;
            let timeouts = match r.row("CT_Timeout_Policy", &tp)?.get("timeouts") {
                Some(Datum::Map(m)) => m
                    .iter()
                    .filter_map(|(a, s)| Some((a.as_str()?.to_string(), s.as_i64()?)))
                    .collect(),
                _ => Vec::new(),
            };
            Some((zone, timeouts))
        })
        .collect()
}

/// Reads the configuration from the monitored tables (`Open_vSwitch`,
/// `Bridge`, `Port`, `Interface`).
pub fn desired(r: &Replica) -> Desired {
    let mut d = Desired::default();
    let Some((root, root_row)) = r.table("Open_vSwitch").min_by_key(|(u, _)| **u) else {
        return d;
    };
    d.root = Some(*root);
    d.next_cfg = int(root_row, "next_cfg").unwrap_or(0);
    d.other_config = smap(root_row, "other_config");
    d.ssl = uuids(root_row, "ssl")
        .first()
        .and_then(|u| r.row("SSL", u))
        .map(|row| SslCfg {
            private_key: string(row, "private_key").unwrap_or("").to_string(),
            certificate: string(row, "certificate").unwrap_or("").to_string(),
            ca_cert: string(row, "ca_cert").unwrap_or("").to_string(),
            bootstrap_ca_cert: row
                .get("bootstrap_ca_cert")
                .and_then(|d| d.one()?.as_bool())
                .unwrap_or(false),
        });
    if let Some(Datum::Map(m)) = root_row.get("datapaths") {
        d.datapaths = m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_uuid()?)))
            .filter(|(_, u)| r.row("Datapath", u).is_some())
            .collect();
    }
    d.ct_timeouts = ct_timeouts(r, &d.datapaths);
    let mut ports_taken = BTreeSet::new();
    let mut ifaces_taken = BTreeSet::new();
    let mut iface_names = BTreeSet::new();
    for (bu, brow, name) in children(r, root_row, "bridges", "Bridge") {
        if d.bridges.contains_key(name) {
            d.warnings.push(format!(
                "bridge {name}: a second bridge of that name, ignored"
            ));
            continue;
        }
        let mut b = BridgeCfg {
            uuid: bu,
            datapath_type: string(brow, "datapath_type").unwrap_or("").to_string(),
            fail_mode: string(brow, "fail_mode").map(str::to_string),
            protocols: {
                let mut v: Vec<String> = brow
                    .get("protocols")
                    .map(|d| {
                        d.atoms()
                            .iter()
                            .filter_map(|a| a.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort();
                v
            },
            other_config: smap(brow, "other_config"),
            ports: BTreeMap::new(),
            controllers: {
                let mut refs = uuids(brow, "controller");
                refs.sort();
                refs.into_iter()
                    .filter_map(|u| {
                        let row = r.row("Controller", &u)?;
                        Some(ControllerCfg {
                            uuid: u,
                            target: string(row, "target")?.to_string(),
                        })
                    })
                    .collect()
            },
            mirrors: Vec::new(),
        };
        let mut port_names = BTreeMap::new();
        for (pu, prow, pname) in children(r, brow, "ports", "Port") {
            if !ports_taken.insert(pu) {
                d.warnings.push(format!(
                    "port {pname}: in more than one bridge, kept in the first"
                ));
                continue;
            }
            let mut p = PortCfg {
                uuid: pu,
                tag: int(prow, "tag"),
                trunks: ints(prow, "trunks"),
                vlan_mode: string(prow, "vlan_mode").map(str::to_string),
                interfaces: BTreeMap::new(),
            };
            for (iu, irow, iname) in children(r, prow, "interfaces", "Interface") {
                if !ifaces_taken.insert(iu) || !iface_names.insert(iname.to_string()) {
                    d.warnings.push(format!(
                        "interface {iname}: already in another port, ignored in {pname} of {name}"
                    ));
                    continue;
                }
                p.interfaces.insert(
                    iname.to_string(),
                    IfaceCfg {
                        uuid: iu,
                        kind: string(irow, "type").unwrap_or("").to_string(),
                        options: smap(irow, "options"),
                        ofport_request: int(irow, "ofport_request"),
                        ofport: int(irow, "ofport"),
                        mtu_request: int(irow, "mtu_request"),
                    },
                );
            }
            if p.interfaces.is_empty() {
                d.warnings
                    .push(format!("port {pname} of {name}: no interfaces, ignored"));
                continue;
            }
            port_names.insert(pu, pname.to_string());
            b.ports.insert(pname.to_string(), p);
        }
        b.mirrors = mirrors(r, brow, &port_names);
        d.bridges.insert(name.to_string(), b);
    }
    d
}

/// A bridge's `Mirror` rows, their port references as names of its ports
/// (`port_names`, by UUID); a reference to a port not in the bridge is
/// passed over, as OVS's mirror configuration does.
fn mirrors(r: &Replica, brow: &Row, port_names: &BTreeMap<Uuid, String>) -> Vec<MirrorCfg> {
    let names = |row: &Row, column: &str| -> Vec<String> {
        let mut v: Vec<String> = uuids(row, column)
            .iter()
            .filter_map(|u| port_names.get(u).cloned())
            .collect();
        v.sort();
        v
    };
    let mut refs = uuids(brow, "mirrors");
    refs.sort();
    refs.into_iter()
        .filter_map(|u| {
            let row = r.row("Mirror", &u)?;
            Some(MirrorCfg {
                uuid: u,
                name: string(row, "name").unwrap_or("").to_string(),
                select_all: row
                    .get("select_all")
                    .and_then(|d| d.one()?.as_bool())
                    .unwrap_or(false),
                select_src_port: names(row, "select_src_port"),
                select_dst_port: names(row, "select_dst_port"),
                select_vlan: ints(row, "select_vlan"),
                output_port: uuids(row, "output_port")
                    .first()
                    .and_then(|p| port_names.get(p).cloned()),
                output_vlan: int(row, "output_vlan"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_ovsdb::Schema;

    fn u(n: u8) -> String {
        format!("00000000-0000-0000-0000-0000000000{n:02x}")
    }

    #[test]
    fn rows_to_bridges_ports_and_interfaces() {
        let schema = Schema::from_json(&json!({"name": "Open_vSwitch", "tables": {
            "Open_vSwitch": {"columns": {"bridges": {"type": {"key": "uuid", "min": 0, "max": "unlimited"}},
                                          "next_cfg": {"type": "integer"},
                                          "other_config": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}}},
            "Bridge": {"columns": {"name": {"type": "string"}, "datapath_type": {"type": "string"},
                                    "ports": {"type": {"key": "uuid", "min": 0, "max": "unlimited"}}}},
            "Port": {"columns": {"name": {"type": "string"}, "tag": {"type": {"key": "integer", "min": 0, "max": 1}},
                                  "interfaces": {"type": {"key": "uuid", "min": 1, "max": "unlimited"}}}},
            "Interface": {"columns": {"name": {"type": "string"}, "type": {"type": "string"},
                                       "ofport_request": {"type": {"key": "integer", "min": 0, "max": 1}},
                                       "options": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}}}
        }}))
        .unwrap();
        let mut r = Replica::new();
        r.apply_update2(&schema, &json!({
            "Open_vSwitch": {u(1): {"initial": {"bridges": ["set", [["uuid", u(2)], ["uuid", u(3)], ["uuid", u(9)]]],
                                                "next_cfg": 4, "other_config": ["map", [["pmd-cpu-mask", "0x2"]]]}}},
            "Bridge": {u(2): {"initial": {"name": "br0", "datapath_type": "netdev",
                                          "ports": ["set", [["uuid", u(4)], ["uuid", u(5)], ["uuid", u(6)]]]}},
                       u(3): {"initial": {"name": "br1", "ports": ["uuid", u(5)]}}},
            "Port": {u(4): {"initial": {"name": "br0", "interfaces": ["uuid", u(7)]}},
                     u(5): {"initial": {"name": "p1", "tag": 10, "interfaces": ["uuid", u(8)]}},
                     u(6): {"initial": {"name": "empty", "interfaces": ["uuid", u(0x99)]}}},
            "Interface": {u(7): {"initial": {"name": "br0", "type": "internal"}},
                          u(8): {"initial": {"name": "p1", "type": "", "ofport_request": 5,
                                             "options": ["map", [["peer", "x"]]]}}}
        }))
        .unwrap();
        let d = desired(&r);
        assert_eq!(d.next_cfg, 4);
        assert_eq!(d.other_config["pmd-cpu-mask"], "0x2");
        let br0 = &d.bridges["br0"];
        assert_eq!(br0.datapath_type, "netdev");
        assert_eq!(br0.ports["br0"].interfaces["br0"].kind, "internal");
        let p1 = &br0.ports["p1"];
        assert_eq!(
            (p1.tag, p1.interfaces["p1"].ofport_request),
            (Some(10), Some(5))
        );
        assert_eq!(p1.interfaces["p1"].options["peer"], "x");
        // p1 is claimed by br1 too: it stays in br0; a bridge row that is
        // not there and a port whose interface is not there are passed over.
        assert!(d.bridges["br1"].ports.is_empty());
        assert!(!br0.ports.contains_key("empty"));
        assert_eq!(d.bridges.len(), 2);
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    }
}
