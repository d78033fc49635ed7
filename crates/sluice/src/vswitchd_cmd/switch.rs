//! The switch as the reconciler sees it ([`SluiceSwitch`]: one datapath
//! with its bridges, each with its control plane and OpenFlow side) and
//! the glue that publishes what it serves to the `ovs-appctl` commands
//! ([`Published`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice_classifier::PatchPort;
use sluice_vswitchd::reconcile::{Statistics, Switch};

use super::appctl::{netdev_type, BridgeTable, PortTable};
use super::other_config::START_ONLY;
use crate::ctl::Control;
use sluice_ofproto::channel::SwitchInfo;
use sluice_ofproto::hub::Hub;

/// Most bridges served at once.
pub const MAX_BRIDGES: usize = 1024;

/// A bridge the switch serves.
pub(super) struct BridgeSide {
    /// Its index in the datapath (0: the datapath's first control).
    pub(super) index: u16,
    pub(super) control: Arc<Control>,
    /// Its `BRIDGE.mgmt` listener (dropped: it closes, the file goes).
    pub(super) mgmt: sluice_ofproto::channel::ListenerLink,
    /// Its controllers: the target as the row has it, the peer as the
    /// OpenFlow side names it, and the connection (dropped: it ends).
    pub(super) controllers: Vec<(String, String, sluice_ofproto::channel::ControllerLink)>,
    /// Its passive controller targets (`ptcp:`, `pssl:`, `punix:`): the
    /// target and its listener (dropped: it closes).
    pub(super) listeners: Vec<(String, sluice_ofproto::channel::ListenerLink)>,
    /// What its OpenFlow connections say of it.
    pub(super) info: SwitchInfo,
    /// Its periodic work, for a bridge besides the first (the first's
    /// runs in the datapath's runner).
    _keeper: Option<Keeper>,
}

/// A thread running a bridge's [`crate::tend::Tender`] until dropped.
struct Keeper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keeper {
    fn start(name: &str, mut tender: crate::tend::Tender) -> Result<Keeper, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("tend-{name}").chars().take(15).collect())
            // Revalidation translates here.
            .stack_size(sluice_classifier::xlate::STACK_BYTES)
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(crate::tend::TICK);
                    tender.once();
                }
            })
            .map_err(|e| format!("its thread: {e}"))?;
        Ok(Keeper {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A patch interface: its bridge, its OpenFlow number, its peer's name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PatchEnd {
    bridge: String,
    ofport: u32,
    peer: String,
}

/// A patch port's spec (`patch:PEER[,tag=N][,trunks=A;B][,vlan_mode=M]`):
/// its peer and its VLAN mode (none: a trunk of every VLAN).
fn patch_spec(spec: &str) -> Option<Result<(String, sluice_bridge::PortVlan), String>> {
    spec.strip_prefix("patch:")?;
    Some(sluice_port::spec::split_vlan(spec).map(|(plain, vlan)| {
        let peer = plain.strip_prefix("patch:").unwrap_or(&plain).to_string();
        (peer, vlan.unwrap_or_default())
    }))
}

/// The switch as the reconciler sees it: one datapath, its bridges, each
/// with its control plane and OpenFlow side.
pub struct SluiceSwitch {
    /// The datapath's first bridge's control (index 0), whichever bridge
    /// holds it now: the datapath-wide commands go there.
    pub(super) control: Arc<Control>,
    /// Its OpenFlow side (the hub every PMD's packet-ins reach first).
    pub(super) openflow: SwitchInfo,
    pub(super) rundir: PathBuf,
    pub(super) bridges: BTreeMap<String, BridgeSide>,
    /// Patch interfaces by name.
    patches: BTreeMap<String, PatchEnd>,
    /// The patch ports each bridge was last given.
    linked: BTreeMap<String, Vec<PatchPort>>,
    /// The zones the database last gave a timeout policy.
    ct_timeout_zones: Vec<u16>,
}

impl SluiceSwitch {
    /// A switch on the datapath whose first control is `control`.
    pub(super) fn new(control: Arc<Control>, openflow: SwitchInfo, rundir: PathBuf) -> Self {
        SluiceSwitch {
            control,
            openflow,
            rundir,
            bridges: BTreeMap::new(),
            patches: BTreeMap::new(),
            linked: BTreeMap::new(),
            ct_timeout_zones: Vec::new(),
        }
    }

    /// Bridge `bridge`'s control, if it is served.
    fn control_of(&self, bridge: &str) -> Option<&Arc<Control>> {
        self.bridges.get(bridge).map(|b| &b.control)
    }

    fn ctl_on(&self, bridge: &str, cmd: &str, args: &[String]) -> Result<String, String> {
        let c = self
            .control_of(bridge)
            .ok_or_else(|| format!("no bridge {bridge}"))?;
        super::ctl(c, cmd, args)
    }

    fn ctl(&self, cmd: &str, args: &[String]) -> Result<String, String> {
        super::ctl(&self.control, cmd, args)
    }

    /// Deletes every flow of `control`'s bridge, then adds
    /// `priority=0,actions=NORMAL` when `normal`.
    fn reset_flows(control: &Control, normal: bool) -> Result<(), String> {
        super::ctl(control, "del-flows", &[])?;
        if normal {
            super::ctl(control, "add-flow", &["priority=0,actions=NORMAL".into()])?;
        }
        Ok(())
    }

    /// Gives each bridge the patch ports whose peers are there and name
    /// them back (as ofproto-dpif links a patch port to its peer), where
    /// that changed.
    fn relink(&mut self) {
        let mut want: BTreeMap<String, Vec<PatchPort>> = self
            .bridges
            .keys()
            .map(|b| (b.clone(), Vec::new()))
            .collect();
        for (name, end) in &self.patches {
            let Some(peer) = self.patches.get(&end.peer).filter(|p| p.peer == *name) else {
                continue;
            };
            let Some(peer_bridge) = self.bridges.get(&peer.bridge) else {
                continue;
            };
            if let Some(v) = want.get_mut(&end.bridge) {
                v.push(PatchPort {
                    port: end.ofport,
                    peer: peer_bridge.index,
                    peer_port: peer.ofport,
                });
            }
        }
        // Every patch port is described to controllers, linked or not.
        for (bridge, b) in &self.bridges {
            let named: Vec<(u32, String)> = self
                .patches
                .iter()
                .filter(|(_, e)| e.bridge == *bridge && e.ofport != 0)
                .map(|(n, e)| (e.ofport, n.clone()))
                .collect();
            b.control.set_patch_names(named);
        }
        for (bridge, mut list) in want {
            list.sort_unstable();
            if self.linked.get(&bridge) == Some(&list) {
                continue;
            }
            let Some(c) = self.control_of(&bridge) else {
                continue;
            };
            match c.set_patch_ports(list.clone()) {
                Ok(()) => {
                    self.linked.insert(bridge, list);
                }
                Err(e) => {
                    tracing::warn!(target: "switch", "bridge {bridge}: its patch ports: {e}")
                }
            }
        }
        self.linked.retain(|b, _| self.bridges.contains_key(b));
    }
}

/// The versions `Bridge.protocols` allows that Sluice speaks (every one
/// when none is named, as OVS), and what it passed over.
fn protocol_versions(protocols: &[String]) -> (u32, Option<String>) {
    use sluice_openflow::{consts::OFP13, of10::OFP10};
    if protocols.is_empty() {
        return (sluice_ofproto::channel::ALL_VERSIONS, None);
    }
    let mut v = 0;
    let mut not = Vec::new();
    for p in protocols {
        match p.as_str() {
            "OpenFlow10" => v |= 1 << OFP10,
            "OpenFlow13" => v |= 1 << OFP13,
            "OpenFlow14" => v |= 1 << sluice_openflow::of14::OFP14,
            "OpenFlow15" => v |= 1 << sluice_openflow::of15::OFP15,
            other => not.push(other.to_string()),
        }
    }
    let note = (!not.is_empty()).then(|| {
        format!(
            "protocols {}: Sluice speaks OpenFlow10, OpenFlow13, OpenFlow14 and OpenFlow15{}",
            not.join(", "),
            if v == 0 {
                ": no connection can be made"
            } else {
                ""
            }
        )
    });
    (v, note)
}

/// Why an `ssl:` or `pssl:` target cannot be used.
const NO_SSL: &str = "ssl: and pssl: need the SSL table's private_key, certificate and ca_cert \
     (ovs-vsctl set-ssl KEY CERT CA-CERT), readable";

impl Switch for SluiceSwitch {
    fn max_bridges(&self) -> usize {
        MAX_BRIDGES
    }

    fn add_bridge(&mut self, name: &str, datapath_id: u64, secure: bool) -> Result<(), String> {
        if name.is_empty() || name.contains(['/', '\0']) || name.len() > 200 {
            return Err(format!("'{name}' is not a name a socket can take"));
        }
        let index = (0..MAX_BRIDGES as u16)
            .find(|i| !self.bridges.values().any(|b| b.index == *i))
            .ok_or("too many bridges")?;
        let (control, hub) = if index == 0 {
            (Arc::clone(&self.control), Arc::clone(&self.openflow.hub))
        } else {
            let c = Arc::new(self.control.new_bridge(index)?);
            let h = Arc::new(Hub::for_bridge(&self.openflow.hub, 0));
            crate::tend::wire_openflow(&c, &h);
            self.openflow.hub.route_bridge(index, Some(Arc::clone(&h)));
            (c, h)
        };
        let gone = |sw: &SluiceSwitch| {
            if index != 0 {
                sw.openflow.hub.route_bridge(index, None);
                control.remove_bridge();
            }
        };
        if let Err(e) = Self::reset_flows(&control, !secure).and_then(|()| control.set_name(name)) {
            gone(self);
            return Err(e);
        }
        let info = SwitchInfo::new(datapath_id, Arc::clone(&hub), self.openflow.tls.clone());
        let path = self.rundir.join(format!("{name}.mgmt"));
        let target = sluice_ofproto::channel::Target::Unix(path);
        let mgmt =
            match sluice_ofproto::channel::listen_link(&target, control.clone(), info.clone()) {
                Ok((_, l)) => l,
                Err(e) => {
                    gone(self);
                    return Err(format!("its OpenFlow socket: {e}"));
                }
            };
        hub.fail_secure.store(secure, Ordering::Relaxed);
        let keeper = if index == 0 {
            None
        } else {
            let t = crate::tend::Tender::new(Arc::clone(&control), Some(hub), true, false);
            match Keeper::start(name, t) {
                Ok(k) => Some(k),
                Err(e) => {
                    drop(mgmt);
                    gone(self);
                    return Err(e);
                }
            }
        };
        self.bridges.insert(
            name.to_string(),
            BridgeSide {
                index,
                control,
                mgmt,
                controllers: Vec::new(),
                listeners: Vec::new(),
                info,
                _keeper: keeper,
            },
        );
        self.relink();
        Ok(())
    }

    fn del_bridge(&mut self, name: &str) {
        let Some(b) = self.bridges.remove(name) else {
            return;
        };
        drop(b.mgmt);
        // Its controller connections and listeners end with it.
        drop(b.controllers);
        drop(b.listeners);
        b.info.hub.set_controllers(0);
        b.info.hub.fail_secure.store(false, Ordering::Relaxed);
        if b.index == 0 {
            // The datapath's first control stays, as a new bridge finds it.
            let _ = Self::reset_flows(&b.control, true);
            let _ = super::ctl(&b.control, "fdb-flush", &[]);
        } else {
            drop(b._keeper);
            self.openflow.hub.route_bridge(b.index, None);
            b.control.remove_bridge();
        }
        self.relink();
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
        bridge: &str,
        ofport: u32,
        name: &str,
        spec: &str,
    ) -> Result<(), String> {
        if let Some(patch) = patch_spec(spec) {
            let Some(c) = self.control_of(bridge) else {
                return Err(format!("no bridge {bridge}"));
            };
            let (peer, vlan) = patch?;
            c.set_port_vlan(ofport, vlan);
            self.patches.insert(
                name.to_string(),
                PatchEnd {
                    bridge: bridge.to_string(),
                    ofport,
                    peer: peer.to_string(),
                },
            );
            self.relink();
            return Ok(());
        }
        self.ctl_on(bridge, "add-port", &[format!("{ofport}={spec}")])
            .map(|_| ())
    }

    fn del_port(&mut self, bridge: &str, ofport: u32, name: &str) {
        if self
            .patches
            .get(name)
            .is_some_and(|p| p.bridge == bridge && p.ofport == ofport)
        {
            self.patches.remove(name);
            if let Some(c) = self.control_of(bridge) {
                c.set_port_vlan(ofport, sluice_bridge::PortVlan::default());
            }
            self.relink();
            return;
        }
        if let Err(e) = self.ctl_on(bridge, "del-port", &[ofport.to_string()]) {
            tracing::warn!(target: "switch", "removing port {name} ({ofport}) of {bridge}: {e}");
        }
    }

    fn change_port(
        &mut self,
        bridge: &str,
        ofport: u32,
        _name: &str,
        old: &str,
        new: &str,
    ) -> Result<(), String> {
        match (patch_spec(old), patch_spec(new)) {
            (None, None) => {}
            (Some(o), Some(n)) => {
                let ((old_peer, _), (peer, vlan)) = (o?, n?);
                if old_peer != peer {
                    return Err("a patch port's peer changes by making it again".into());
                }
                // The same peer: its VLAN mode changed.
                let c = self
                    .control_of(bridge)
                    .ok_or_else(|| format!("no bridge {bridge}"))?;
                c.set_port_vlan(ofport, vlan);
                return Ok(());
            }
            _ => return Err("a patch port's peer changes by making it again".into()),
        }
        self.ctl_on(bridge, "set-port", &[format!("{ofport}={new}")])
            .map(|_| ())
    }

    fn set_protocols(&mut self, bridge: &str, protocols: &[String]) -> Option<String> {
        let b = self.bridges.get(bridge)?;
        let (versions, note) = protocol_versions(protocols);
        b.info.versions.store(versions, Ordering::Relaxed);
        note
    }

    fn set_fail_mode(&mut self, bridge: &str, secure: bool) {
        if let Some(b) = self.bridges.get(bridge) {
            b.info.hub.fail_secure.store(secure, Ordering::Relaxed);
        }
    }

    fn flush_flows(&mut self, bridge: &str, normal: bool) {
        let Some(c) = self.control_of(bridge) else {
            return;
        };
        if let Err(e) = Self::reset_flows(c, normal) {
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
        // A listener still wanted stays (its connections with it); the
        // others close.
        b.listeners.retain(|(t, _)| targets.contains(t));
        for t in targets {
            if t.starts_with("ptcp:") || t.starts_with("punix:") || t.starts_with("pssl:") {
                if b.listeners.iter().any(|(l, _)| l == t) {
                    continue;
                }
                let listener = sluice_ofproto::channel::parse_passive(t).and_then(|target| {
                    if matches!(target, sluice_ofproto::channel::Target::Ssl(_))
                        && b.info.tls.is_none()
                    {
                        return Err(NO_SSL.into());
                    }
                    sluice_ofproto::channel::listen_link(&target, b.control.clone(), b.info.clone())
                });
                match listener {
                    Ok((name, l)) => {
                        tracing::info!(target: "openflow", "bridge {bridge}: listening for OpenFlow connections on {name}");
                        b.listeners.push((t.clone(), l));
                    }
                    Err(e) => {
                        errors.insert(t.clone(), e);
                    }
                }
                continue;
            }
            let peer = match sluice_ofproto::channel::parse_controller(t) {
                Ok(p) => p,
                Err(e) => {
                    errors.insert(t.clone(), e);
                    continue;
                }
            };
            if matches!(peer, sluice_ofproto::channel::Peer::Ssl(_)) && b.info.tls.is_none() {
                errors.insert(t.clone(), NO_SSL.into());
                continue;
            }
            let name = peer.to_string();
            match sluice_ofproto::channel::connect_link(peer, b.control.clone(), b.info.clone()) {
                Ok(link) => b.controllers.push((t.clone(), name, link)),
                Err(e) => {
                    errors.insert(t.clone(), e);
                }
            }
        }
        b.info.hub.set_controllers(b.controllers.len());
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

    fn datapath_capabilities(&self, datapath_type: &str) -> Vec<(String, String)> {
        // Sluice is the userspace (netdev) datapath; there is no other.
        if datapath_type != "netdev" {
            return Vec::new();
        }
        super::capabilities::capabilities(self.control.vlan_limit())
    }

    fn statistics(&self) -> Statistics {
        let mut all = Statistics::new();
        for (name, b) in &self.bridges {
            let Ok(ports) = b.control.port_reports() else {
                continue;
            };
            all.extend(ports.into_iter().map(|p| {
                let s = &p.stats;
                let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                (
                    (name.clone(), p.ofport),
                    vec![
                        ("rx_bytes".to_string(), n(s.rx_bytes)),
                        ("rx_dropped".to_string(), n(s.rx_dropped.iter().sum())),
                        ("rx_packets".to_string(), n(s.rx_packets)),
                        ("tx_bytes".to_string(), n(s.tx_bytes)),
                        ("tx_dropped".to_string(), n(s.tx_dropped.iter().sum())),
                        ("tx_packets".to_string(), n(s.tx_packets)),
                    ],
                )
            }));
        }
        all
    }

    fn set_mirrors(
        &mut self,
        bridge: &str,
        mirrors: &[sluice_vswitchd::reconcile::MirrorSet],
    ) -> Result<(), String> {
        let b = self
            .bridges
            .get(bridge)
            .ok_or_else(|| format!("no bridge {bridge}"))?;
        b.control
            .bridge_state()
            .set_mirrors(sluice_bridge::Mirrors::new(mirrors.to_vec())?);
        Ok(())
    }

    fn set_ssl(&mut self, ssl: Option<&sluice_vswitchd::desired::SslCfg>) -> Result<(), String> {
        // The key and certificates read now (OVS reads them again when
        // the row changes, not when a file does).
        let loaded = match ssl {
            None => Ok(None),
            Some(s) => {
                let path = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
                sluice_ofproto::tls::TlsFiles {
                    private_key: path(&s.private_key),
                    certificate: path(&s.certificate),
                    ca_cert: path(&s.ca_cert),
                }
                .load()
                .map(|t| Some(Arc::new(t)))
            }
        };
        let (tls, result) = match loaded {
            Ok(t) => (t, Ok(())),
            Err(e) => (None, Err(e)),
        };
        self.openflow.tls = tls.clone();
        for b in self.bridges.values_mut() {
            b.info.tls = tls.clone();
            // Listeners made with the old configuration close; the
            // reconciler gives the bridge its targets again.
            b.listeners.retain(|(t, _)| !t.starts_with("pssl:"));
        }
        result
    }

    fn set_ct_timeouts(
        &mut self,
        policies: &BTreeMap<u16, Vec<(String, i64)>>,
    ) -> Result<(), String> {
        use sluice_conntrack::timeouts::ATTRS;
        let ct = self.control.conntrack();
        let tp = ct.timeout_policies();
        for z in self.ct_timeout_zones.drain(..) {
            tp.clear(z);
        }
        let mut refused = Vec::new();
        for (&zone, timeouts) in policies {
            let attrs: Vec<(usize, u32)> = timeouts
                .iter()
                .filter_map(|(name, secs)| {
                    let known = ATTRS.iter().position(|a| a == name);
                    match (known, u32::try_from(*secs)) {
                        (Some(i), Ok(secs)) => Some((i, secs)),
                        _ => {
                            refused.push(format!("zone {zone}: {name}={secs}"));
                            None
                        }
                    }
                })
                .collect();
            tp.set(zone, &attrs);
            self.ct_timeout_zones.push(zone);
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "not a timeout of Sluice's tracker, left at its default: {}",
                refused.join(", ")
            ))
        }
    }

    fn connected_controllers(&self, bridge: &str) -> BTreeMap<String, String> {
        let Some(b) = self.bridges.get(bridge) else {
            return BTreeMap::new();
        };
        let peers = b.info.hub.peers();
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
    pub(super) names: BridgeTable,
    pub(super) ports: PortTable,
}

impl Published<'_> {
    fn publish(&self) {
        *self.names.lock().unwrap_or_else(|p| p.into_inner()) = self
            .sw
            .bridges
            .iter()
            .map(|(n, b)| (n.clone(), Arc::clone(&b.control)))
            .collect();
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
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .del_bridge(name);
        self.publish();
    }
    fn can_open(&self, name: &str, spec: &str) -> Result<(), String> {
        self.sw.can_open(name, spec)
    }
    fn add_port(&mut self, b: &str, n: u32, name: &str, spec: &str) -> Result<(), String> {
        self.sw.add_port(b, n, name, spec)?;
        // (As OVS's dpif/show names a patch port's peer.)
        let kind = match spec.strip_prefix("patch:") {
            Some(rest) => format!("patch: peer={}", rest.split(',').next().unwrap_or(rest)),
            None => netdev_type(spec).to_string(),
        };
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add_port(b, n, name, kind);
        Ok(())
    }
    fn del_port(&mut self, b: &str, n: u32, name: &str) {
        self.sw.del_port(b, n, name);
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .del_port(b, n);
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
    fn set_protocols(&mut self, b: &str, protocols: &[String]) -> Option<String> {
        self.sw.set_protocols(b, protocols)
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
    fn datapath_capabilities(&self, datapath_type: &str) -> Vec<(String, String)> {
        self.sw.datapath_capabilities(datapath_type)
    }
    fn statistics(&self) -> Statistics {
        self.sw.statistics()
    }
    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
        self.sw.set_other_config(changed)
    }
    fn set_mirrors(
        &mut self,
        b: &str,
        m: &[sluice_vswitchd::reconcile::MirrorSet],
    ) -> Result<(), String> {
        self.sw.set_mirrors(b, m)
    }
    fn set_ssl(&mut self, ssl: Option<&sluice_vswitchd::desired::SslCfg>) -> Result<(), String> {
        self.sw.set_ssl(ssl)
    }
    fn set_ct_timeouts(&mut self, p: &BTreeMap<u16, Vec<(String, i64)>>) -> Result<(), String> {
        self.sw.set_ct_timeouts(p)
    }
}
