//! The daemon's loop, as ovs-vswitchd's: connect to `ovsdb-server` (and
//! again, with a backoff of 1 to 8 s, whenever the connection is lost),
//! take the `ovs_vswitchd` lock, monitor the tables it reads, and at each
//! change make the switch what the rows ask ([`Reconciler`]) and write
//! back, under the lock's `assert`, what ovs-vswitchd writes: each
//! interface's `ofport`, `error` and netdev columns, each bridge's
//! `datapath_id`, and `cur_cfg` (which `ovs-vsctl` waits for). What runs
//! is kept across reconnections: a new session finds the same ports and
//! numbers and writes back only what differs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use sluice_ovsdb::{Event, Uuid};

use crate::db::{DbConnection, DbError, Target};
use crate::desired::{desired, Desired};
use crate::iface::IFACE_TYPES;
use crate::reconcile::{Outcome, Reconciler, Switch};

/// The tables and columns ovs-vswitchd reads (and those it writes, so
/// that a new session writes back only what differs).
pub const MONITOR: &[(&str, &[&str])] = &[
    (
        "Open_vSwitch",
        &[
            "bridges",
            "next_cfg",
            "cur_cfg",
            "other_config",
            "datapaths",
            "ssl",
        ],
    ),
    (
        "SSL",
        &["private_key", "certificate", "ca_cert", "bootstrap_ca_cert"],
    ),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "datapath_type",
            "fail_mode",
            "protocols",
            "other_config",
            "datapath_id",
            "controller",
            "mirrors",
        ],
    ),
    (
        "Mirror",
        &[
            "name",
            "select_all",
            "select_src_port",
            "select_dst_port",
            "select_vlan",
            "output_port",
            "output_vlan",
        ],
    ),
    (
        "Port",
        &["name", "interfaces", "tag", "trunks", "vlan_mode"],
    ),
    ("Controller", &["target"]),
    ("Datapath", &["capabilities", "ct_zones"]),
    ("CT_Zone", &["timeout_policy"]),
    ("CT_Timeout_Policy", &["timeouts"]),
    (
        "Interface",
        &[
            "name",
            "type",
            "options",
            "ofport",
            "ofport_request",
            "mtu_request",
            "error",
        ],
    ),
];

/// How often the netdev columns are looked at again without a change.
const REFRESH: Duration = Duration::from_secs(5);

/// How the daemon runs.
pub struct Options {
    /// The database (ovs-vswitchd's DATABASE argument).
    pub target: Target,
    /// `OVS_RUNDIR`.
    pub rundir: PathBuf,
    /// `Open_vSwitch:other_config` as the switch was started with it
    /// ([`read_other_config`]; None: not read).
    pub started_with: Option<crate::desired::Smap>,
    /// How an `ssl:` target is secured (None: no key given).
    pub tls: Option<crate::db::TlsConnect>,
}

/// Which rows were written with which values, so that only changes go.
type Written = BTreeMap<(&'static str, Uuid), Map<String, Value>>;

fn uuid_where(u: Uuid) -> Value {
    json!([["_uuid", "==", ["uuid", u.to_string()]]])
}

fn optional<T: Into<Value>>(v: Option<T>) -> Value {
    match v {
        Some(v) => v.into(),
        None => json!(["set", []]),
    }
}

/// What the kernel said of each interface, and when: read again for an
/// interface made or changed in a pass, else every [`REFRESH`] (a pass
/// costs no system call per interface: a thousand ports make a thousand
/// reads only every few seconds).
#[derive(Default)]
pub struct NetdevCache(std::collections::HashMap<String, (Instant, Option<crate::netdev::Netdev>)>);

impl NetdevCache {
    fn get(&mut self, name: &str, fresh: bool) -> Option<crate::netdev::Netdev> {
        match self.0.get(name) {
            Some((at, n)) if !fresh && at.elapsed() < REFRESH => n.clone(),
            _ => {
                let n = crate::netdev::read(name);
                self.0.insert(name.to_string(), (Instant::now(), n.clone()));
                n
            }
        }
    }
}

/// Port counters by bridge and switch port number (see
/// [`Switch::statistics`]).
pub type Statistics = crate::reconcile::Statistics;

/// What to write: the row values for each (table, row).
fn rows_to_write(d: &Desired, o: &Outcome, cache: &mut NetdevCache, stats: &Statistics) -> Written {
    let mut w = Written::new();
    for (u, i) in &o.interfaces {
        let mut row = Map::new();
        row.insert("ofport".into(), json!(i.ofport));
        row.insert("error".into(), optional(i.error.clone()));
        let netdev = matches!(
            i.kind.as_str(),
            "" | "system" | "internal" | "tap" | "afxdp"
        ) && i.ofport > 0;
        let n = netdev.then(|| cache.get(&i.name, i.touched)).flatten();
        row.insert(
            "mac_in_use".into(),
            optional(n.as_ref().map(|n| n.mac.clone())),
        );
        row.insert("ifindex".into(), optional(n.as_ref().map(|n| n.ifindex)));
        row.insert("mtu".into(), optional(n.as_ref().map(|n| n.mtu)));
        let state = |up: bool| if up { "up" } else { "down" };
        row.insert(
            "admin_state".into(),
            optional(n.as_ref().map(|n| state(n.admin_up))),
        );
        row.insert(
            "link_state".into(),
            optional(n.as_ref().map(|n| state(n.link_up))),
        );
        row.insert(
            "link_speed".into(),
            optional(n.as_ref().and_then(|n| n.speed_bps)),
        );
        row.insert(
            "duplex".into(),
            optional(n.as_ref().and_then(|n| n.duplex.clone())),
        );
        let status: Vec<Value> = n
            .as_ref()
            .and_then(|n| n.driver.clone())
            .map(|[d, v, f]| {
                vec![
                    json!(["driver_name", d]),
                    json!(["driver_version", v]),
                    json!(["firmware_version", f]),
                ]
            })
            .unwrap_or_default();
        row.insert("status".into(), json!(["map", status]));
        if let Some(st) = (i.ofport > 0)
            .then(|| stats.get(&(i.bridge.clone(), crate::reconcile::dp_port(i.ofport))))
            .flatten()
        {
            let pairs: Vec<Value> = st.iter().map(|(k, v)| json!([k, v])).collect();
            row.insert("statistics".into(), json!(["map", pairs]));
        }
        w.insert(("Interface", *u), row);
    }
    let names: std::collections::HashSet<&str> =
        o.interfaces.values().map(|i| i.name.as_str()).collect();
    cache.0.retain(|n, _| names.contains(n.as_str()));
    for (u, b) in &o.bridges {
        let mut row = Map::new();
        row.insert("datapath_id".into(), optional(b.datapath_id.clone()));
        row.insert(
            "datapath_version".into(),
            json!(if b.datapath_id.is_some() {
                "<built-in>"
            } else {
                ""
            }),
        );
        w.insert(("Bridge", *u), row);
    }
    for (u, c) in &o.controllers {
        let mut row = Map::new();
        row.insert("is_connected".into(), json!(c.connected.is_some()));
        row.insert("role".into(), optional(c.connected.clone()));
        let mut status = vec![json!([
            "state",
            if c.connected.is_some() {
                "ACTIVE"
            } else {
                "BACKOFF"
            }
        ])];
        if let Some(e) = &c.error {
            status.push(json!(["last_error", e]));
        }
        row.insert("status".into(), json!(["map", status]));
        w.insert(("Controller", *u), row);
    }
    for (u, caps) in &o.datapaths {
        let mut row = Map::new();
        let pairs: Vec<Value> = caps.iter().map(|(k, v)| json!([k, v])).collect();
        row.insert("capabilities".into(), json!(["map", pairs]));
        w.insert(("Datapath", *u), row);
    }
    if let Some(root) = d.root {
        let mut row = Map::new();
        row.insert("cur_cfg".into(), json!(d.next_cfg));
        row.insert(
            "datapath_types".into(),
            json!(["set", ["netdev", "system"]]),
        );
        row.insert("iface_types".into(), json!(["set", IFACE_TYPES]));
        row.insert("dpdk_initialized".into(), json!(false));
        w.insert(("Open_vSwitch", root), row);
    }
    w
}

/// The update operations for what differs from `written`.
fn operations(want: &Written, written: &Written) -> Vec<Value> {
    let mut ops = Vec::new();
    for (key @ (table, u), row) in want {
        let before = written.get(key);
        let changed: Map<String, Value> = row
            .iter()
            .filter(|(c, v)| before.and_then(|b| b.get(*c)) != Some(*v))
            .map(|(c, v)| (c.clone(), v.clone()))
            .collect();
        if !changed.is_empty() {
            ops.push(
                json!({"op": "update", "table": table, "where": uuid_where(*u), "row": changed}),
            );
        }
    }
    ops
}

/// Whether a transaction's result holds an error, and which.
fn transaction_error(result: &Value) -> Option<String> {
    match result {
        Value::Array(rs) => rs.iter().find_map(|r| {
            r.get("error").and_then(Value::as_str).map(|e| {
                let details = r.get("details").and_then(Value::as_str).unwrap_or("");
                format!("{e} {details}").trim().to_string()
            })
        }),
        other => Some(format!("an unexpected reply: {other}")),
    }
}

/// The root row's `other_config`, read once before the switch starts
/// (what only a start applies: `pmd-cpu-mask`, the caches' settings).
/// None when the server does not answer within `wait` or has no root row.
pub fn read_other_config(
    target: &Target,
    tls: Option<&crate::db::TlsConnect>,
    wait: Duration,
) -> Option<crate::desired::Smap> {
    let mut c = DbConnection::connect(target, "Open_vSwitch", tls).ok()?;
    c.wait_for(wait, |e| *e == Event::Schema).ok()??;
    c.client.monitor(&[("Open_vSwitch", &["other_config"])]);
    c.wait_for(wait, |e| matches!(e, Event::Monitored(_)))
        .ok()??;
    let (_, row) = c
        .client
        .replica()
        .table("Open_vSwitch")
        .min_by_key(|(u, _)| **u)?;
    Some(crate::desired::smap(row, "other_config"))
}

/// Runs until `stop`: `ready` is called once the first configuration is
/// applied and written back (for `--detach`).
pub fn run(
    opts: &Options,
    sw: &mut dyn Switch,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(),
) -> Result<(), String> {
    let mut rec = Reconciler::new(opts.rundir.clone());
    rec.started_with(opts.started_with.clone().unwrap_or_default());
    let mut backoff = Duration::from_secs(1);
    let mut said = String::new();
    while !stop.load(Ordering::Relaxed) {
        match DbConnection::connect(&opts.target, "Open_vSwitch", opts.tls.as_ref()) {
            Ok(c) => {
                tracing::info!(target: "reconnect", "{}: connected", opts.target);
                backoff = Duration::from_secs(1);
                said.clear();
                // As OVS's reconnect: a closed connection is information,
                // a server that speaks nonsense a warning.
                match session(c, &mut rec, sw, stop, ready) {
                    Ok(()) => {}
                    Err(e @ DbError::Io(_)) => {
                        tracing::info!(target: "switch", "{}: {e}; connecting again", opts.target)
                    }
                    Err(e) => {
                        tracing::warn!(target: "switch", "{}: {e}; connecting again", opts.target)
                    }
                }
            }
            Err(e) => {
                let msg = format!("{}: {e}", opts.target);
                if msg != said {
                    tracing::info!(target: "switch", "{msg}; trying again every 8 s or less");
                    said = msg;
                }
            }
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        backoff = (backoff * 2).min(Duration::from_secs(8));
    }
    Ok(())
}

fn session(
    mut c: DbConnection,
    rec: &mut Reconciler,
    sw: &mut dyn Switch,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(),
) -> Result<(), DbError> {
    let got = c.wait_for(Duration::from_secs(10), |e| *e == Event::Schema)?;
    if got.is_none() {
        return Err(DbError::Protocol("no schema within 10 s".into()));
    }
    c.client.lock("ovs_vswitchd");
    c.client.monitor(MONITOR);
    let mut written = Written::new();
    let mut cache = NetdevCache::default();
    // Counters, read on OVS's stats-update-interval (5 s).
    let mut stats = Statistics::new();
    let mut stats_at: Option<Instant> = None;
    let mut locked = false;
    let mut monitored = false;
    let mut dirty = false;
    let mut said_warnings: Vec<String> = Vec::new();
    // The transaction in flight: its tag and what it writes.
    let mut pending: Option<(u64, Written)> = None;
    let mut last_pass = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        for e in c.poll(Duration::from_millis(100))? {
            match e {
                Event::Monitored(_) => {
                    monitored = true;
                    dirty = true;
                }
                Event::Updated(_) => dirty = true,
                Event::Locked(true) => {
                    tracing::debug!(target: "switch", "the ovs_vswitchd lock is ours");
                    locked = true;
                    dirty = true;
                }
                Event::Locked(false) => {
                    tracing::warn!(target: "switch", "another process holds the ovs_vswitchd lock (is another ovs-vswitchd running?): waiting for it");
                }
                Event::LockStolen => {
                    tracing::warn!(target: "switch", "the ovs_vswitchd lock was taken by another process: no longer writing the database");
                    locked = false;
                }
                Event::Transacted { tag, result } => {
                    if pending.as_ref().is_some_and(|(t, _)| *t == tag) {
                        let (_, wrote) = pending.take().expect("pending");
                        match transaction_error(&result) {
                            None => {
                                written.extend(wrote);
                                ready();
                            }
                            Some(e) => {
                                tracing::warn!(target: "switch", "writing the database failed ({e}): writing everything again");
                                written.clear();
                                dirty = true;
                            }
                        }
                    }
                }
                Event::Failed { request, error } => {
                    tracing::warn!(target: "switch", "database request {request} failed: {error}");
                    if request == "transact" {
                        pending = None;
                        written.clear();
                        dirty = true;
                    }
                }
                Event::Schema => {}
            }
        }
        if last_pass.elapsed() >= REFRESH {
            dirty = true;
        }
        if !(locked && monitored) {
            continue;
        }
        if !dirty || pending.is_some() {
            continue;
        }
        dirty = false;
        last_pass = Instant::now();
        let d = desired(c.client.replica());
        for w in &d.warnings {
            if !said_warnings.contains(w) {
                tracing::warn!(target: "switch", "{w}");
            }
        }
        said_warnings = d.warnings.clone();
        let o = rec.reconcile(&d, sw);
        for line in &o.log {
            tracing::info!(target: "switch", "{line}");
        }
        if stats_at.is_none_or(|t| t.elapsed() >= REFRESH) {
            stats = sw.statistics();
            stats_at = Some(Instant::now());
        }
        let want = rows_to_write(&d, &o, &mut cache, &stats);
        let ops = operations(&want, &written);
        if ops.is_empty() {
            ready();
            continue;
        }
        let mut all = vec![json!({"op": "assert", "lock": "ovs_vswitchd"})];
        all.extend(ops);
        let tag = c.client.transact(all);
        pending = Some((tag, want));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::{BridgeOut, IfaceOut};

    #[test]
    fn only_what_changed_is_written() {
        let mut d = Desired {
            root: Some(Uuid([1; 16])),
            next_cfg: 3,
            ..Desired::default()
        };
        let mut o = Outcome::default();
        o.interfaces.insert(
            Uuid([2; 16]),
            IfaceOut {
                bridge: "br0".into(),
                name: "nope0".into(),
                kind: "vxlan".into(),
                ofport: -1,
                error: Some("nope0: a vxlan interface needs options:remote_ip".into()),
                touched: false,
            },
        );
        o.bridges.insert(
            Uuid([3; 16]),
            BridgeOut {
                name: "br0".into(),
                datapath_id: Some("0000aabbccddeeff".into()),
                error: None,
            },
        );
        let mut cache = NetdevCache::default();
        let none = Statistics::new();
        let first = rows_to_write(&d, &o, &mut cache, &none);
        let ops = operations(&first, &Written::new());
        assert_eq!(ops.len(), 3);
        let iface = ops.iter().find(|o| o["table"] == "Interface").unwrap();
        assert_eq!(iface["row"]["ofport"], -1);
        assert_eq!(iface["row"]["link_state"], json!(["set", []]));
        assert!(iface["row"]["error"]
            .as_str()
            .unwrap()
            .contains("remote_ip"));
        // Written: nothing more until next_cfg moves; then cur_cfg alone.
        assert!(operations(&rows_to_write(&d, &o, &mut cache, &none), &first).is_empty());
        d.next_cfg = 4;
        let ops = operations(&rows_to_write(&d, &o, &mut cache, &none), &first);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["row"], json!({"cur_cfg": 4}));
    }

    #[test]
    fn transaction_errors_are_found() {
        assert_eq!(transaction_error(&json!([{}, {"count": 1}])), None);
        let e = transaction_error(&json!([{"error": "not owner", "details": "lock"}])).unwrap();
        assert_eq!(e, "not owner lock");
    }
}
