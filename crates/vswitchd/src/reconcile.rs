//! Makes the switch what the database asks for: compares the
//! configuration ([`Desired`]) with what was applied before and tells the
//! switch ([`Switch`]) only the difference: bridges made or removed, ports
//! added, removed, or remade when their spec changed (a port whose spec is
//! unchanged is never touched, so its traffic goes on). It returns what
//! ovs-vswitchd writes back for each row: the interface's OpenFlow number
//! (`-1` and the reason in `error` when it cannot be made) and the
//! bridge's datapath id. Nothing here does I/O but through the switch.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sluice_ovsdb::Uuid;

use crate::desired::{BridgeCfg, Desired, SslCfg};
use crate::iface::port_spec;
pub use crate::mirrors::MirrorSet;
use crate::ofports::{OfPorts, LOCAL};

/// What the reconciler asks of the switch.
pub trait Switch {
    /// How many bridges it serves at once.
    fn max_bridges(&self) -> usize;
    /// Makes bridge `name`: its OpenFlow side (`RUNDIR/NAME.mgmt`) with
    /// `datapath_id`, in fail mode secure (no rules until a controller
    /// gives them) or standalone (`priority=0,actions=NORMAL`).
    fn add_bridge(&mut self, name: &str, datapath_id: u64, secure: bool) -> Result<(), String>;
    /// Removes bridge `name` (its ports are removed first).
    fn del_bridge(&mut self, name: &str);
    /// Whether port `spec` can be opened, checked before it is given a
    /// number (as OVS opens a netdev before it numbers it: a missing
    /// device takes no number).
    fn can_open(&self, name: &str, spec: &str) -> Result<(), String>;
    /// Opens port `spec` as OpenFlow port `ofport` of `bridge`.
    fn add_port(&mut self, bridge: &str, ofport: u32, name: &str, spec: &str)
        -> Result<(), String>;
    /// Removes port `ofport` of `bridge`.
    fn del_port(&mut self, bridge: &str, ofport: u32, name: &str);
    /// Changes port `ofport` of `bridge` from spec `old` to `new` in place
    /// (its MTU, its VLAN mode), if it can; an error: it is made again.
    fn change_port(
        &mut self,
        bridge: &str,
        ofport: u32,
        name: &str,
        old: &str,
        new: &str,
    ) -> Result<(), String>;
    /// Sets `bridge`'s fail mode (whether it fails open when its
    /// controllers are gone).
    fn set_fail_mode(&mut self, bridge: &str, secure: bool);
    /// Sets the OpenFlow versions `bridge`'s new connections may speak
    /// (`Bridge.protocols`: none named, every one); returns what it could
    /// not honour, for the log.
    fn set_protocols(&mut self, bridge: &str, protocols: &[String]) -> Option<String>;
    /// Deletes every flow of `bridge`, then adds `priority=0,actions=NORMAL`
    /// when `normal` (OVS's `ofproto_flush_flows` and `connmgr_flushed`).
    fn flush_flows(&mut self, bridge: &str, normal: bool);
    /// Makes `targets` the OpenFlow controllers `bridge` connects to;
    /// returns why, for each target it cannot use.
    fn set_controllers(&mut self, bridge: &str, targets: &[String]) -> BTreeMap<String, String>;
    /// Each controller of `bridge` that is connected, with its role
    /// (`master`, `slave`, `other`).
    fn connected_controllers(&self, bridge: &str) -> BTreeMap<String, String>;
    /// `Open_vSwitch:other_config` keys that changed (None: removed);
    /// returns what it did or could not do with each, for the log.
    fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String>;
    /// What the datapath of type `datapath_type` can do, as OVS writes it
    /// in a `Datapath` row's `capabilities` (none: no such datapath).
    fn datapath_capabilities(&self, datapath_type: &str) -> Vec<(String, String)>;
    /// Every port's counters by bridge and switch port number, named as
    /// OVS's `Interface:statistics` names them (`rx_packets`, `tx_bytes`,
    /// ...).
    fn statistics(&self) -> Statistics;
    /// Makes `mirrors` `bridge`'s port mirrors (none: no mirroring).
    fn set_mirrors(&mut self, bridge: &str, mirrors: &[MirrorSet]) -> Result<(), String>;
    /// Makes `ssl` (the `SSL` row; none: no row) what `ssl:` and `pssl:`
    /// controllers use from now on; `pssl:` listeners close (the
    /// reconciler then gives each bridge with an `ssl:` or `pssl:` target
    /// its targets again). An error says why the files cannot be used.
    fn set_ssl(&mut self, ssl: Option<&SslCfg>) -> Result<(), String>;
    /// Makes `policies` the connection tracker's zone timeout policies
    /// (by zone, OVS's attribute names and seconds; a zone not named
    /// has the defaults). An error says which attribute it refused.
    fn set_ct_timeouts(
        &mut self,
        policies: &BTreeMap<u16, Vec<(String, i64)>>,
    ) -> Result<(), String>;
}

/// Port counters by (bridge, switch port number).
pub type Statistics = BTreeMap<(String, u32), Vec<(String, i64)>>;

/// What is written back to one `Controller` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerOut {
    pub target: String,
    /// Its role while connected.
    pub connected: Option<String>,
    /// Why it cannot be used.
    pub error: Option<String>,
}

/// What is written back to one `Interface` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceOut {
    pub bridge: String,
    pub name: String,
    /// `type`, as the row has it.
    pub kind: String,
    /// The OpenFlow number, -1 when the port could not be made.
    pub ofport: i64,
    /// Why not.
    pub error: Option<String>,
    /// Made or changed in this pass (what the kernel says of it is read
    /// again now).
    pub touched: bool,
}

/// What is written back to one `Bridge` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeOut {
    pub name: String,
    /// The datapath id as OVS writes it: 16 hex digits (None: the bridge
    /// is not served).
    pub datapath_id: Option<String>,
    /// Why the bridge is not served.
    pub error: Option<String>,
}

/// The result of one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub interfaces: BTreeMap<Uuid, IfaceOut>,
    pub bridges: BTreeMap<Uuid, BridgeOut>,
    pub controllers: BTreeMap<Uuid, ControllerOut>,
    /// The `capabilities` of each `Datapath` row.
    pub datapaths: BTreeMap<Uuid, Vec<(String, String)>>,
    /// What was done, for the log.
    pub log: Vec<String>,
}

#[derive(Debug)]
struct Applied {
    ofport: i64,
    spec: String,
}

#[derive(Debug)]
struct Served {
    datapath_id: u64,
    secure: bool,
    /// `protocols` as the switch has it.
    protocols: Vec<String>,
    ofports: OfPorts,
    /// Interfaces that run, by name.
    ports: BTreeMap<String, Applied>,
    /// Interfaces that could not be made, with why (logged once).
    refused: BTreeMap<String, String>,
    /// The controllers given to the switch, and those it refused.
    controllers: Vec<String>,
    controller_errors: BTreeMap<String, String>,
    /// The mirrors given to the switch.
    mirrors: Vec<MirrorSet>,
}

/// The state between passes.
#[derive(Debug)]
pub struct Reconciler {
    rundir: PathBuf,
    served: BTreeMap<String, Served>,
    /// `Open_vSwitch:other_config` as the switch has it (None: not yet
    /// compared: the first pass takes what the start read).
    other_config: Option<crate::desired::Smap>,
    /// The `SSL` row as the switch has it (it starts with none).
    ssl: Option<SslCfg>,
    /// The zone timeout policies as the switch has them (none: not yet
    /// given).
    ct_timeouts: Option<BTreeMap<u16, Vec<(String, i64)>>>,
}

/// The datapath id of a bridge: `other_config:datapath-id` (16 hex
/// digits), else from `other_config:hwaddr`, else a number made from the
/// bridge's name (the same at every start; OVS makes one from a random
/// MAC). As OVS, a MAC gives a 48-bit id.
pub fn datapath_id(name: &str, b: &BridgeCfg) -> u64 {
    if let Some(id) = b.other_config.get("datapath-id") {
        let id = id.strip_prefix("0x").unwrap_or(id);
        if id.len() == 16 {
            if let Ok(v) = u64::from_str_radix(id, 16) {
                return v;
            }
        }
    }
    if let Some(mac) = b.other_config.get("hwaddr") {
        let bytes: Vec<u8> = mac
            .split(':')
            .filter_map(|x| u8::from_str_radix(x, 16).ok())
            .collect();
        if bytes.len() == 6 && mac.split(':').count() == 6 {
            return bytes.iter().fold(0u64, |a, b| a << 8 | u64::from(*b));
        }
    }
    // FNV-1a of the name, 48 bits, as a locally administered unicast MAC.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h & 0x0000_feff_ffff_ffff) | 0x0000_0200_0000_0000
}

impl Reconciler {
    /// `rundir`: where vhost-user sockets of `dpdkvhostuser` go.
    pub fn new(rundir: PathBuf) -> Self {
        Reconciler {
            rundir,
            served: BTreeMap::new(),
            other_config: None,
            ssl: None,
            ct_timeouts: None,
        }
    }

    /// The `other_config` the switch was started with (changes from it
    /// are given to [`Switch::set_other_config`]).
    pub fn started_with(&mut self, other_config: crate::desired::Smap) {
        self.other_config = Some(other_config);
    }

    /// Takes served bridge `name` off the switch: its ports, then it.
    fn remove(&mut self, name: &str, sw: &mut dyn Switch) {
        if let Some(s) = self.served.remove(name) {
            for (iface, a) in s.ports {
                sw.del_port(name, dp_port(a.ofport), &iface);
            }
            sw.del_bridge(name);
        }
    }

    /// The bridges served now.
    pub fn bridges(&self) -> impl Iterator<Item = &str> {
        self.served.keys().map(String::as_str)
    }

    /// One pass: makes the switch what `d` asks for, as far as it can.
    pub fn reconcile(&mut self, d: &Desired, sw: &mut dyn Switch) -> Outcome {
        let mut out = Outcome::default();
        if d.root.is_some() {
            let before = self.other_config.take().unwrap_or_default();
            let mut changed: Vec<(String, Option<String>)> = d
                .other_config
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(v))
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect();
            changed.extend(
                before
                    .keys()
                    .filter(|k| !d.other_config.contains_key(*k))
                    .map(|k| (k.clone(), None)),
            );
            if !changed.is_empty() {
                out.log.extend(sw.set_other_config(&changed));
            }
            self.other_config = Some(d.other_config.clone());
        }
        // The SSL row before any controller (as OVS's bridge_reconfigure
        // does bridge_configure_ssl first).
        let ssl_changed = self.ssl != d.ssl;
        if ssl_changed {
            if let Err(e) = sw.set_ssl(d.ssl.as_ref()) {
                out.log.push(format!("SSL: {e}"));
            }
            if d.ssl.as_ref().is_some_and(|s| s.bootstrap_ca_cert) {
                out.log.push(
                    "SSL: bootstrap_ca_cert is not done by Sluice: ca_cert must be there".into(),
                );
            }
            self.ssl = d.ssl.clone();
        }
        // As OVS's datapath_reconfigure: the zones' timeout policies,
        // and what each datapath the root row names can do.
        if self.ct_timeouts.as_ref() != Some(&d.ct_timeouts) {
            if let Err(e) = sw.set_ct_timeouts(&d.ct_timeouts) {
                out.log.push(format!("CT_Timeout_Policy: {e}"));
            }
            self.ct_timeouts = Some(d.ct_timeouts.clone());
        }
        for (kind, u) in &d.datapaths {
            let caps = sw.datapath_capabilities(kind);
            if !caps.is_empty() {
                out.datapaths.insert(*u, caps);
            }
        }
        // Bridges gone.
        let gone: Vec<String> = self
            .served
            .keys()
            .filter(|n| !d.bridges.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name, sw);
            out.log.push(format!("bridge {name}: removed"));
        }
        for (name, b) in &d.bridges {
            let secure = b.fail_mode.as_deref() == Some("secure");
            let dpid = datapath_id(name, b);
            // A changed fail mode, as OVS's connmgr_set_fail_mode: with no
            // controller the flows are flushed (and NORMAL put back in
            // standalone); the ports stay.
            if let Some(s) = self.served.get_mut(name) {
                if s.secure != secure {
                    sw.set_fail_mode(name, secure);
                    if s.controllers.is_empty() {
                        sw.flush_flows(name, !secure);
                    }
                    s.secure = secure;
                    out.log.push(format!(
                        "bridge {name}: fail mode {}",
                        if secure { "secure" } else { "standalone" }
                    ));
                }
            }
            // A changed datapath id: the bridge is made again.
            if let Some(s) = self.served.get(name) {
                if s.datapath_id != dpid {
                    self.remove(name, sw);
                    out.log.push(format!(
                        "bridge {name}: made again (its datapath id changed)"
                    ));
                }
            }
            let refusal = if self.served.contains_key(name) {
                None
            } else if self.served.len() >= sw.max_bridges() {
                Some(format!(
                    "bridge {name} is not served: Sluice's ovs-vswitchd serves {} bridge(s) so far ({} served)",
                    sw.max_bridges(),
                    self.served.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            } else {
                match sw.add_bridge(name, dpid, secure) {
                    Ok(()) => {
                        self.served.insert(
                            name.clone(),
                            Served {
                                datapath_id: dpid,
                                secure,
                                protocols: Vec::new(),
                                ofports: OfPorts::default(),
                                ports: BTreeMap::new(),
                                refused: BTreeMap::new(),
                                controllers: Vec::new(),
                                controller_errors: BTreeMap::new(),
                                mirrors: Vec::new(),
                            },
                        );
                        out.log.push(format!(
                            "bridge {name}: added, datapath id {dpid:016x}, fail mode {}",
                            if secure { "secure" } else { "standalone" }
                        ));
                        None
                    }
                    Err(e) => Some(format!("bridge {name}: {e}")),
                }
            };
            if let Some(e) = refusal {
                out.bridges.insert(
                    b.uuid,
                    BridgeOut {
                        name: name.clone(),
                        datapath_id: None,
                        error: Some(e.clone()),
                    },
                );
                for p in b.ports.values() {
                    for (iname, i) in &p.interfaces {
                        out.interfaces.insert(
                            i.uuid,
                            IfaceOut {
                                bridge: name.clone(),
                                name: iname.clone(),
                                kind: i.kind.clone(),
                                ofport: -1,
                                error: Some(e.clone()),
                                touched: false,
                            },
                        );
                    }
                }
                continue;
            }
            out.bridges.insert(
                b.uuid,
                BridgeOut {
                    name: name.clone(),
                    datapath_id: Some(format!("{dpid:016x}")),
                    error: None,
                },
            );
            let s = self.served.get_mut(name).expect("served");
            if s.protocols != b.protocols {
                if let Some(note) = sw.set_protocols(name, &b.protocols) {
                    out.log.push(format!("bridge {name}: {note}"));
                }
                s.protocols = b.protocols.clone();
            }
            self::ports(&self.rundir, name, b, s, sw, &mut out);
            let running = |iname: &str| s.ports.get(iname).map(|a| a.ofport);
            let (mirrors, notes) = crate::mirrors::mirror_sets(name, b, running);
            if mirrors != s.mirrors {
                match sw.set_mirrors(name, &mirrors) {
                    Ok(()) => {
                        out.log.push(format!(
                            "bridge {name}: mirrors [{}]",
                            mirrors
                                .iter()
                                .map(|m| m.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        s.mirrors = mirrors;
                    }
                    Err(e) => out.log.push(format!("bridge {name}: mirrors: {e}")),
                }
                out.log.extend(notes);
            }
            let targets: Vec<String> = b.controllers.iter().map(|c| c.target.clone()).collect();
            if targets != s.controllers {
                let had = !s.controllers.is_empty();
                // As OVS's connmgr_set_controllers: from none to some or
                // back, the flows are flushed (NORMAL put back when a
                // standalone bridge is left with none): before the first
                // controller connects (it may add flows at once), after
                // the last is gone.
                let flush = had == targets.is_empty();
                if flush && !had {
                    sw.flush_flows(name, false);
                }
                s.controller_errors = sw.set_controllers(name, &targets);
                if flush && had {
                    sw.flush_flows(name, !s.secure);
                }
                for (t, e) in &s.controller_errors {
                    out.log.push(format!("bridge {name}: controller {t}: {e}"));
                }
                out.log.push(format!(
                    "bridge {name}: controllers [{}]",
                    targets.join(", ")
                ));
                s.controllers = targets;
            } else if ssl_changed
                && targets
                    .iter()
                    .any(|t| t.starts_with("ssl:") || t.starts_with("pssl:"))
            {
                // The same targets, made again with the new key and
                // certificates (no flush: the controllers did not change).
                s.controller_errors = sw.set_controllers(name, &targets);
                for (t, e) in &s.controller_errors {
                    out.log.push(format!("bridge {name}: controller {t}: {e}"));
                }
            }
            let up = sw.connected_controllers(name);
            for c in &b.controllers {
                out.controllers.insert(
                    c.uuid,
                    ControllerOut {
                        target: c.target.clone(),
                        connected: up.get(&c.target).cloned(),
                        error: s.controller_errors.get(&c.target).cloned(),
                    },
                );
            }
        }
        out
    }
}

/// A served bridge's ports.
fn ports(
    rundir: &std::path::Path,
    bridge: &str,
    b: &BridgeCfg,
    s: &mut Served,
    sw: &mut dyn Switch,
    out: &mut Outcome,
) {
    // Each interface's spec, or why it cannot be made.
    let mut specs = BTreeMap::new();
    for p in b.ports.values() {
        for (iname, i) in &p.interfaces {
            let spec = if iname == bridge && i.kind != "internal" {
                Err(format!(
                    "{iname}: the bridge's own interface is of type internal, not '{}'",
                    i.kind
                ))
            } else {
                port_spec(iname, i, p, rundir)
                    .and_then(|spec| sw.can_open(iname, &spec).map(|()| spec))
            };
            specs.insert(iname.clone(), (i, spec));
        }
    }
    // Numbers for those that can be made, as OVS gives them (a port that
    // fails before it is opened takes none).
    // In the order ovs-vswitchd creates them (its shash of port names;
    // interfaces by UUID within a port), which decides the numbers of
    // several that come at once.
    let mut rows: Vec<(Uuid, &str)> = b.ports.iter().map(|(n, p)| (p.uuid, n.as_str())).collect();
    rows.sort();
    let names: Vec<&str> = rows.iter().map(|(_, n)| *n).collect();
    let mut wanted: Vec<(&str, Option<i64>, Option<i64>)> = Vec::new();
    for pname in crate::ovs_order::shash_order(&names) {
        let mut ifaces: Vec<(Uuid, &str)> = b.ports[pname]
            .interfaces
            .iter()
            .map(|(n, i)| (i.uuid, n.as_str()))
            .collect();
        ifaces.sort();
        for (_, iname) in ifaces {
            let Some((i, Ok(_))) = specs.get(iname) else {
                continue;
            };
            // As OVS's iface_pick_ofport: the request, else the number
            // the row holds from before (a restart keeps the numbers).
            let before = i.ofport.filter(|&p| p > 0 && p != LOCAL);
            wanted.push((iname, i.ofport_request, before));
        }
    }
    let numbers = s.ofports.assign_with_hints(bridge, &wanted);
    let mut touched = std::collections::BTreeSet::new();
    // Changed where it can be in place (its MTU, its VLAN mode: the port,
    // its interface and its traffic stay).
    for (n, a) in s.ports.iter_mut() {
        let Some(Ok(now)) = specs.get(n).map(|(_, spec)| spec.as_ref()) else {
            continue;
        };
        if *now != a.spec && numbers.get(n) == Some(&a.ofport) {
            match sw.change_port(bridge, dp_port(a.ofport), n, &a.spec, now) {
                Ok(()) => {
                    out.log
                        .push(format!("{bridge}: port {n} changed in place ({now})"));
                    a.spec = now.clone();
                    touched.insert(n.clone());
                }
                Err(e) => out
                    .log
                    .push(format!("{bridge}: port {n} is made again: {e}")),
            }
        }
    }
    // Gone, or changed otherwise: removed first (a number may move to
    // another).
    let stale: Vec<String> = s
        .ports
        .iter()
        .filter(|(n, a)| {
            let now = specs.get(*n).and_then(|(_, spec)| spec.as_ref().ok());
            now != Some(&a.spec) || numbers.get(*n) != Some(&a.ofport)
        })
        .map(|(n, _)| n.clone())
        .collect();
    for n in stale {
        let a = s.ports.remove(&n).expect("applied");
        sw.del_port(bridge, dp_port(a.ofport), &n);
        out.log
            .push(format!("{bridge}: port {n} (ofport {}) removed", a.ofport));
    }
    s.refused.retain(|n, _| specs.contains_key(n));
    let mut failed = Vec::new();
    // Made in the order OVS creates them (the datapath numbers them in
    // that order), then those that cannot be.
    let order: Vec<&String> = wanted
        .iter()
        .filter_map(|(n, _, _)| specs.get_key_value(*n).map(|(k, _)| k))
        .chain(
            specs
                .iter()
                .filter(|(_, (_, spec))| spec.is_err())
                .map(|(k, _)| k),
        )
        .collect();
    for iname in order {
        let (i, spec) = &specs[iname];
        let result = match spec {
            Err(e) => Err(e.clone()),
            Ok(spec) => {
                let ofport = numbers.get(iname).copied().unwrap_or(-1);
                if s.ports.contains_key(iname) {
                    Ok(ofport)
                } else if ofport < 1 {
                    Err(format!("{iname}: no OpenFlow port number left on {bridge}"))
                } else {
                    match sw.add_port(bridge, dp_port(ofport), iname, spec) {
                        Ok(()) => {
                            s.ports.insert(
                                iname.clone(),
                                Applied {
                                    ofport,
                                    spec: spec.clone(),
                                },
                            );
                            out.log.push(format!(
                                "{bridge}: added port {iname} as ofport {ofport} ({spec})"
                            ));
                            Ok(ofport)
                        }
                        Err(e) => {
                            failed.push(iname.clone());
                            Err(format!("could not open {iname}: {e}"))
                        }
                    }
                }
            }
        };
        match &result {
            Err(e) if s.refused.get(iname) != Some(e) => {
                out.log.push(format!("{bridge}: {e}"));
                out.log.extend(
                    crate::iface::unknown_type_detail(iname, &i.kind)
                        .map(|d| format!("{bridge}: {d}")),
                );
                s.refused.insert(iname.clone(), e.clone());
            }
            Err(_) => {}
            Ok(_) => {
                s.refused.remove(iname);
            }
        }
        out.interfaces.insert(
            i.uuid,
            IfaceOut {
                bridge: bridge.to_string(),
                name: iname.clone(),
                kind: i.kind.clone(),
                ofport: *result.as_ref().unwrap_or(&-1),
                error: result.err(),
                touched: touched.contains(iname),
            },
        );
    }
    if !failed.is_empty() {
        // Those that failed give their numbers back.
        let keep: Vec<(&str, Option<i64>, Option<i64>)> = wanted
            .into_iter()
            .filter(|(n, _, _)| !failed.iter().any(|f| f == n))
            .collect();
        s.ofports.assign_with_hints(bridge, &keep);
    }
}

/// The switch port number of an OpenFlow port number (`LOCAL` is OpenFlow
/// 1.3's `0xfffffffe` in the datapath).
pub fn dp_port(ofport: i64) -> u32 {
    if ofport == LOCAL {
        0xffff_fffe
    } else {
        ofport as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{IfaceCfg, PortCfg};

    #[derive(Default)]
    struct Fake {
        max: usize,
        log: Vec<String>,
        refuse: Vec<String>,
    }

    impl Switch for Fake {
        fn max_bridges(&self) -> usize {
            self.max
        }
        fn add_bridge(&mut self, name: &str, id: u64, secure: bool) -> Result<(), String> {
            self.log.push(format!("add-br {name} {id:x} {secure}"));
            Ok(())
        }
        fn del_bridge(&mut self, name: &str) {
            self.log.push(format!("del-br {name}"));
        }
        fn can_open(&self, name: &str, _: &str) -> Result<(), String> {
            if self.refuse.iter().any(|r| r == name) {
                return Err("No such device".into());
            }
            Ok(())
        }
        fn add_port(&mut self, b: &str, n: u32, name: &str, spec: &str) -> Result<(), String> {
            self.log.push(format!("add {b} {n} {name} {spec}"));
            Ok(())
        }
        fn del_port(&mut self, b: &str, n: u32, name: &str) {
            self.log.push(format!("del {b} {n} {name}"));
        }
        fn change_port(
            &mut self,
            b: &str,
            n: u32,
            name: &str,
            _: &str,
            new: &str,
        ) -> Result<(), String> {
            if new.contains("tag=") {
                self.log.push(format!("change {b} {n} {name} {new}"));
                Ok(())
            } else {
                Err("not in place".into())
            }
        }
        fn set_fail_mode(&mut self, b: &str, secure: bool) {
            self.log.push(format!("fail-mode {b} {secure}"));
        }
        fn flush_flows(&mut self, b: &str, normal: bool) {
            self.log.push(format!("flush {b} {normal}"));
        }
        fn set_controllers(&mut self, b: &str, t: &[String]) -> BTreeMap<String, String> {
            self.log.push(format!("controllers {b} {t:?}"));
            t.iter()
                .filter(|t| t.starts_with("bogus"))
                .map(|t| (t.clone(), "not a target".to_string()))
                .collect()
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
        fn statistics(&self) -> Statistics {
            BTreeMap::new()
        }
        fn set_mirrors(&mut self, b: &str, m: &[MirrorSet]) -> Result<(), String> {
            self.log.push(format!("mirrors {b} {m:?}"));
            Ok(())
        }
        fn set_ssl(&mut self, ssl: Option<&SslCfg>) -> Result<(), String> {
            self.log.push(format!(
                "ssl {:?}",
                ssl.map(|s| (&s.private_key, &s.certificate, &s.ca_cert))
            ));
            Ok(())
        }
        fn set_ct_timeouts(&mut self, p: &BTreeMap<u16, Vec<(String, i64)>>) -> Result<(), String> {
            if !p.is_empty() {
                self.log.push(format!("ct timeouts {p:?}"));
            }
            Ok(())
        }
        fn set_other_config(&mut self, changed: &[(String, Option<String>)]) -> Vec<String> {
            changed
                .iter()
                .map(|(k, v)| format!("other_config {k}={v:?}"))
                .collect()
        }
    }

    fn u(n: u8) -> Uuid {
        let mut b = [0; 16];
        b[15] = n;
        Uuid(b)
    }

    fn bridge(id: u8, ports: &[(&str, &str, Option<i64>)]) -> BridgeCfg {
        let mut b = BridgeCfg {
            uuid: u(id),
            ..BridgeCfg::default()
        };
        for (k, (name, kind, tag)) in ports.iter().enumerate() {
            let mut p = PortCfg {
                uuid: u(id + 100 + k as u8),
                tag: *tag,
                ..PortCfg::default()
            };
            p.interfaces.insert(
                name.to_string(),
                IfaceCfg {
                    uuid: u(id + 50 + k as u8),
                    kind: kind.to_string(),
                    ..IfaceCfg::default()
                },
            );
            b.ports.insert(name.to_string(), p);
        }
        b
    }

    fn ofport(o: &Outcome, name: &str) -> i64 {
        o.interfaces
            .values()
            .find(|i| i.name == name)
            .unwrap()
            .ofport
    }

    #[test]
    fn only_the_difference_reaches_the_switch() {
        let mut r = Reconciler::new("/run".into());
        let mut sw = Fake {
            max: 1,
            refuse: vec!["gone0".into()],
            ..Fake::default()
        };
        let mut d = Desired::default();
        d.bridges.insert(
            "br0".into(),
            bridge(
                1,
                &[
                    ("br0", "internal", None),
                    ("p1", "", None),
                    ("gone0", "", None),
                ],
            ),
        );
        let o = r.reconcile(&d, &mut sw);
        assert_eq!(
            sw.log,
            [
                format!(
                    "add-br br0 {:x} false",
                    datapath_id("br0", &d.bridges["br0"])
                ),
                "add br0 4294967294 br0 tap:br0,up=off,persist=on".into(),
                "add br0 1 p1 afpacket:p1".into(),
            ]
        );
        assert_eq!(
            (ofport(&o, "br0"), ofport(&o, "p1"), ofport(&o, "gone0")),
            (LOCAL, 1, -1)
        );
        let err = o.interfaces.values().find(|i| i.name == "gone0").unwrap();
        assert!(err.error.as_deref().unwrap().contains("No such device"));
        // The same again: nothing reaches the switch (the refused port is
        // tried again, and refused again).
        sw.log.clear();
        let again = r.reconcile(&d, &mut sw);
        assert!(sw.log.is_empty(), "{:?}", sw.log);
        assert_eq!(again.interfaces, o.interfaces);
        // A tag on p1: p1 alone is remade, under the same number.
        d.bridges.insert(
            "br0".into(),
            bridge(
                1,
                &[
                    ("br0", "internal", None),
                    ("p1", "", Some(5)),
                    ("gone0", "", None),
                ],
            ),
        );
        let o = r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["change br0 1 p1 afpacket:p1,tag=5"]);
        assert_eq!(ofport(&o, "p1"), 1);
        // Taken away: the switch cannot in place (here), so p1 is made
        // again under its number.
        sw.log.clear();
        d.bridges.insert(
            "br0".into(),
            bridge(
                1,
                &[
                    ("br0", "internal", None),
                    ("p1", "", None),
                    ("gone0", "", None),
                ],
            ),
        );
        let o = r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["del br0 1 p1", "add br0 1 p1 afpacket:p1"]);
        assert_eq!(ofport(&o, "p1"), 1);
        // A second bridge is refused while one is served, and says so.
        sw.log.clear();
        d.bridges
            .insert("br1".into(), bridge(2, &[("br1", "internal", None)]));
        let o = r.reconcile(&d, &mut sw);
        assert!(sw.log.is_empty());
        assert_eq!(ofport(&o, "br1"), -1);
        assert!(o.bridges[&u(2)]
            .error
            .as_deref()
            .unwrap()
            .contains("not served"));
        // br0 goes: its ports, then it; br1 is served next.
        d.bridges.remove("br0");
        let o = r.reconcile(&d, &mut sw);
        assert_eq!(
            sw.log[..3],
            ["del br0 4294967294 br0", "del br0 1 p1", "del-br br0"]
        );
        assert!(sw.log[3].starts_with("add-br br1"));
        assert_eq!(ofport(&o, "br1"), LOCAL);
    }

    #[test]
    fn controllers_reach_the_switch_when_they_change() {
        use crate::desired::ControllerCfg;
        let mut r = Reconciler::new("/run".into());
        let mut sw = Fake {
            max: 1,
            ..Fake::default()
        };
        let mut d = Desired::default();
        let mut b = bridge(1, &[("br0", "internal", None)]);
        b.controllers = vec![
            ControllerCfg {
                uuid: u(200),
                target: "tcp:127.0.0.1:6653".into(),
            },
            ControllerCfg {
                uuid: u(201),
                target: "bogus:1".into(),
            },
        ];
        d.bridges.insert("br0".into(), b);
        let o = r.reconcile(&d, &mut sw);
        // From no controller to some: the flows are flushed, no NORMAL,
        // before the controllers connect.
        let at = |l: &str| sw.log.iter().position(|x| x.starts_with(l));
        assert!(
            at("flush br0 false") < at("controllers br0"),
            "{:?}",
            sw.log
        );
        assert_eq!(o.controllers[&u(200)].error, None);
        assert_eq!(
            o.controllers[&u(201)].error.as_deref(),
            Some("not a target")
        );
        sw.log.clear();
        r.reconcile(&d, &mut sw);
        assert!(sw.log.is_empty(), "unchanged: {:?}", sw.log);
        // Secure with controllers: a fail mode change touches no flow.
        d.bridges.get_mut("br0").unwrap().fail_mode = Some("secure".into());
        r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["fail-mode br0 true"]);
        // The controllers go: flushed, and a secure bridge gets no NORMAL.
        sw.log.clear();
        d.bridges.get_mut("br0").unwrap().controllers.clear();
        r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["controllers br0 []", "flush br0 false"]);
        // Standalone again with none: flushed, NORMAL back.
        sw.log.clear();
        d.bridges.get_mut("br0").unwrap().fail_mode = None;
        r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["fail-mode br0 false", "flush br0 true"]);
    }

    #[test]
    fn an_ssl_change_gives_ssl_targets_again_without_a_flush() {
        use crate::desired::ControllerCfg;
        let mut r = Reconciler::new("/run".into());
        let mut sw = Fake {
            max: 2,
            ..Fake::default()
        };
        let mut d = Desired::default();
        for (n, name, target) in [(1, "br0", "pssl:6653"), (2, "br1", "tcp:127.0.0.1:6653")] {
            let mut b = bridge(n, &[(name, "internal", None)]);
            b.controllers = vec![ControllerCfg {
                uuid: u(200 + n),
                target: target.into(),
            }];
            d.bridges.insert(name.into(), b);
        }
        r.reconcile(&d, &mut sw);
        assert!(
            !sw.log.iter().any(|l| l.starts_with("ssl")),
            "no row, none given: {:?}",
            sw.log
        );
        sw.log.clear();
        d.ssl = Some(SslCfg {
            private_key: "/k".into(),
            certificate: "/c".into(),
            ca_cert: "/ca".into(),
            bootstrap_ca_cert: false,
        });
        r.reconcile(&d, &mut sw);
        // First the files, then the bridge with a TLS target gets its
        // targets again; no flush, and the plain one untouched.
        assert_eq!(
            sw.log,
            [
                r#"ssl Some(("/k", "/c", "/ca"))"#,
                r#"controllers br0 ["pssl:6653"]"#
            ]
        );
        sw.log.clear();
        r.reconcile(&d, &mut sw);
        assert!(sw.log.is_empty(), "unchanged: {:?}", sw.log);
        d.ssl = None;
        r.reconcile(&d, &mut sw);
        assert_eq!(sw.log, ["ssl None", r#"controllers br0 ["pssl:6653"]"#]);
    }

    #[test]
    fn other_config_changes_from_what_the_start_read() {
        let mut r = Reconciler::new("/run".into());
        let mut sw = Fake::default();
        let mut start = crate::desired::Smap::new();
        start.insert("pmd-cpu-mask".into(), "0x2".into());
        r.started_with(start.clone());
        let mut d = Desired {
            root: Some(u(1)),
            other_config: start,
            ..Desired::default()
        };
        assert!(
            r.reconcile(&d, &mut sw).log.is_empty(),
            "as the start had it"
        );
        d.other_config
            .insert("tx-flush-interval".into(), "50".into());
        d.other_config.remove("pmd-cpu-mask");
        let log = r.reconcile(&d, &mut sw).log;
        assert_eq!(
            log,
            [
                "other_config tx-flush-interval=Some(\"50\")",
                "other_config pmd-cpu-mask=None"
            ]
        );
    }

    #[test]
    fn datapath_ids_as_ovs_reads_them() {
        let mut b = BridgeCfg::default();
        let named = datapath_id("br0", &b);
        assert_eq!(named, datapath_id("br0", &b), "the same at every start");
        assert_ne!(named, datapath_id("br1", &b));
        assert_eq!(named >> 48, 0);
        assert_eq!(named >> 40 & 3, 2, "locally administered, unicast");
        b.other_config
            .insert("hwaddr".into(), "00:11:22:33:44:55".into());
        assert_eq!(datapath_id("br0", &b), 0x0011_2233_4455);
        b.other_config
            .insert("datapath-id".into(), "00000000000000aa".into());
        assert_eq!(datapath_id("br0", &b), 0xaa);
    }
}
