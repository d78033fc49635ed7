//! The switch as the reconciler sees it ([`SluiceSwitch`]: one datapath,
//! its control plane and OpenFlow side) and the glue that publishes what
//! it serves to the `ovs-appctl` commands ([`Published`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use sluice_vswitchd::reconcile::Switch;

use super::appctl::{netdev_type, PortTable};
use super::other_config::START_ONLY;
use crate::ctl::Control;
use crate::ofchannel::SwitchInfo;

/// A bridge the switch serves.
pub(super) struct BridgeSide {
    pub(super) socket: Option<sluice_port::unix_listen::SocketFile>,
    /// Its controllers: the target as the row has it, the peer as the
    /// OpenFlow side names it, and the connection (dropped: it ends).
    pub(super) controllers: Vec<(String, String, crate::ofchannel::ControllerLink)>,
    /// What its OpenFlow connections say of it.
    pub(super) info: SwitchInfo,
}

/// The switch as the reconciler sees it: one datapath, its control plane
/// and OpenFlow side.
pub struct SluiceSwitch {
    pub(super) control: Arc<Control>,
    pub(super) openflow: SwitchInfo,
    pub(super) rundir: PathBuf,
    pub(super) bridges: BTreeMap<String, BridgeSide>,
}

impl SluiceSwitch {
    fn ctl(&self, cmd: &str, args: &[String]) -> Result<String, String> {
        super::ctl(&self.control, cmd, args)
    }

    /// Deletes every flow, then adds `priority=0,actions=NORMAL` when
    /// `normal`.
    fn reset_flows(&self, normal: bool) -> Result<(), String> {
        self.ctl("del-flows", &[])?;
        if normal {
            self.ctl("add-flow", &["priority=0,actions=NORMAL".into()])?;
        }
        Ok(())
    }
}

impl Switch for SluiceSwitch {
    fn max_bridges(&self) -> usize {
        1
    }

    fn add_bridge(&mut self, name: &str, datapath_id: u64, secure: bool) -> Result<(), String> {
        if name.is_empty() || name.contains(['/', '\0']) || name.len() > 200 {
            return Err(format!("'{name}' is not a name a socket can take"));
        }
        self.reset_flows(!secure)?;
        let path = self.rundir.join(format!("{name}.mgmt"));
        let mut info = self.openflow.clone();
        info.datapath_id = datapath_id;
        let target = crate::ofchannel::Target::Unix(path);
        let (_, socket) =
            crate::ofchannel::listen(&target, Arc::clone(&self.control), info.clone())
                .map_err(|e| format!("its OpenFlow socket: {e}"))?;
        self.set_fail_mode(name, secure);
        self.bridges.insert(
            name.to_string(),
            BridgeSide {
                socket,
                controllers: Vec::new(),
                info,
            },
        );
        Ok(())
    }

    fn del_bridge(&mut self, name: &str) {
        if let Some(b) = self.bridges.remove(name) {
            if let Some(s) = b.socket {
                s.remove();
            }
            // Its controller connections end with it.
            drop(b.controllers);
            self.openflow.hub.set_controllers(0);
            self.set_fail_mode(name, false);
        }
        let _ = self.reset_flows(true);
        let _ = self.ctl("fdb-flush", &[]);
    }

    fn can_open(&self, name: &str, spec: &str) -> Result<(), String> {
        let netdev = spec.starts_with("afpacket:") || spec.starts_with("afxdp:");
        if netdev && sluice_vswitchd::netdev::read(name).is_none() {
            return Err(format!(
                "could not open network device {name} (No such device)"
            ));
        }
        Ok(())
    }

    fn add_port(
        &mut self,
        _bridge: &str,
        ofport: u32,
        _name: &str,
        spec: &str,
    ) -> Result<(), String> {
        self.ctl("add-port", &[format!("{ofport}={spec}")])
            .map(|_| ())
    }

    fn del_port(&mut self, _bridge: &str, ofport: u32, name: &str) {
        if let Err(e) = self.ctl("del-port", &[ofport.to_string()]) {
            tracing::warn!(target: "switch", "removing port {name} ({ofport}): {e}");
        }
    }

    fn change_port(
        &mut self,
        _bridge: &str,
        ofport: u32,
        _name: &str,
        _old: &str,
        new: &str,
    ) -> Result<(), String> {
        self.ctl("set-port", &[format!("{ofport}={new}")])
            .map(|_| ())
    }

    fn set_fail_mode(&mut self, _bridge: &str, secure: bool) {
        self.openflow
            .hub
            .fail_secure
            .store(secure, Ordering::Relaxed);
    }

    fn flush_flows(&mut self, bridge: &str, normal: bool) {
        if let Err(e) = self.reset_flows(normal) {
            tracing::warn!(target: "switch", "bridge {bridge}: flushing its flows: {e}");
        }
    }

    fn set_controllers(&mut self, bridge: &str, targets: &[String]) -> BTreeMap<String, String> {
        let mut errors = BTreeMap::new();
        let Some(b) = self.bridges.get_mut(bridge) else {
            return errors;
        };
        // The old connections end (those still wanted are made again: a
        // list that changed is rare, and a new connection says HELLO).
        b.controllers.clear();
        for t in targets {
            if t.starts_with("ptcp:") || t.starts_with("punix:") || t.starts_with("pssl:") {
                errors.insert(t.clone(), "passive controller targets (ptcp:, pssl:, punix:) are not supported yet: ovs-ofctl and ovn-controller use BRIDGE.mgmt".into());
                continue;
            }
            let peer = match crate::ofchannel::parse_controller(t) {
                Ok(p) => p,
                Err(e) => {
                    errors.insert(t.clone(), e);
                    continue;
                }
            };
            if matches!(peer, crate::ofchannel::Peer::Ssl(_)) {
                errors.insert(
                    t.clone(),
                    "ssl: controllers need the SSL table, which is not read yet".into(),
                );
                continue;
            }
            let name = peer.to_string();
            match crate::ofchannel::connect_link(peer, Arc::clone(&self.control), b.info.clone()) {
                Ok(link) => b.controllers.push((t.clone(), name, link)),
                Err(e) => {
                    errors.insert(t.clone(), e);
                }
            }
        }
        self.openflow.hub.set_controllers(b.controllers.len());
        errors
    }

    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
        changed
            .iter()
            .map(|(k, v)| {
                let set = |what: String| match self.ctl("set", &[what]) {
                    Ok(_) => format!("other_config:{k}: applied"),
                    Err(e) => format!("other_config:{k}: {e}"),
                };
                match (k.as_str(), v.as_deref()) {
                    ("tx-flush-interval", Some(us)) => set(format!("tx-flush-interval={us}")),
                    ("tx-flush-interval", None) => set("tx-flush-interval=auto".into()),
                    ("pmd-perf-metrics", v) => {
                        set(format!("pmd-perf-metrics={}", v == Some("true")))
                    }
                    (k, _) if START_ONLY.contains(&k) => format!(
                        "other_config:{k} changed: Sluice applies it when ovs-vswitchd starts again"
                    ),
                    (k, _) => format!("other_config:{k} is not a key Sluice reads"),
                }
            })
            .collect()
    }

    fn statistics(&self) -> BTreeMap<u32, Vec<(String, i64)>> {
        let Ok(ports) = self.control.port_reports() else {
            return BTreeMap::new();
        };
        ports
            .into_iter()
            .map(|p| {
                let s = &p.stats;
                let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                (
                    p.ofport,
                    vec![
                        ("rx_bytes".to_string(), n(s.rx_bytes)),
                        ("rx_dropped".to_string(), n(s.rx_dropped.iter().sum())),
                        ("rx_packets".to_string(), n(s.rx_packets)),
                        ("tx_bytes".to_string(), n(s.tx_bytes)),
                        ("tx_dropped".to_string(), n(s.tx_dropped.iter().sum())),
                        ("tx_packets".to_string(), n(s.tx_packets)),
                    ],
                )
            })
            .collect()
    }

    fn connected_controllers(&self, bridge: &str) -> BTreeMap<String, String> {
        let Some(b) = self.bridges.get(bridge) else {
            return BTreeMap::new();
        };
        let peers = self.openflow.hub.peers();
        b.controllers
            .iter()
            .filter_map(|(t, name, _)| {
                peers
                    .iter()
                    .find(|(p, _)| p == name)
                    .map(|(_, role)| (t.clone(), role.to_string()))
            })
            .collect()
    }
}

/// Reconciler glue: the switch, with the served bridges published for
/// the commands that name one.
pub(super) struct Published<'a> {
    pub(super) sw: &'a mut SluiceSwitch,
    pub(super) names: Arc<Mutex<Vec<String>>>,
    pub(super) ports: PortTable,
}

impl Published<'_> {
    fn publish(&self) {
        *self.names.lock().unwrap_or_else(|p| p.into_inner()) =
            self.sw.bridges.keys().cloned().collect();
    }
}

impl Switch for Published<'_> {
    fn max_bridges(&self) -> usize {
        self.sw.max_bridges()
    }
    fn add_bridge(&mut self, name: &str, id: u64, secure: bool) -> Result<(), String> {
        let r = self.sw.add_bridge(name, id, secure);
        self.publish();
        r
    }
    fn del_bridge(&mut self, name: &str) {
        self.sw.del_bridge(name);
        self.publish();
    }
    fn can_open(&self, name: &str, spec: &str) -> Result<(), String> {
        self.sw.can_open(name, spec)
    }
    fn add_port(&mut self, b: &str, n: u32, name: &str, spec: &str) -> Result<(), String> {
        self.sw.add_port(b, n, name, spec)?;
        self.ports.lock().unwrap_or_else(|p| p.into_inner()).insert(
            (b.to_string(), n),
            (name.to_string(), netdev_type(spec).to_string()),
        );
        Ok(())
    }
    fn del_port(&mut self, b: &str, n: u32, name: &str) {
        self.sw.del_port(b, n, name);
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(b.to_string(), n));
    }
    fn change_port(
        &mut self,
        b: &str,
        n: u32,
        name: &str,
        old: &str,
        new: &str,
    ) -> Result<(), String> {
        self.sw.change_port(b, n, name, old, new)
    }
    fn set_fail_mode(&mut self, b: &str, secure: bool) {
        self.sw.set_fail_mode(b, secure)
    }
    fn flush_flows(&mut self, b: &str, normal: bool) {
        self.sw.flush_flows(b, normal)
    }
    fn set_controllers(&mut self, b: &str, t: &[String]) -> BTreeMap<String, String> {
        self.sw.set_controllers(b, t)
    }
    fn connected_controllers(&self, b: &str) -> BTreeMap<String, String> {
        self.sw.connected_controllers(b)
    }
    fn statistics(&self) -> BTreeMap<u32, Vec<(String, i64)>> {
        self.sw.statistics()
    }
    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
        self.sw.set_other_config(changed)
    }
}
