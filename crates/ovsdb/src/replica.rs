//! A client's copy of the tables it monitors, kept up to date by the
//! server's `update` (RFC 7047 `monitor`) and `update2` (`monitor_cond`)
//! notifications, and the rows each notification changed, so that the
//! daemon reconciles only what changed.
//!
//! `update2` sends diffs (`modify`): for a set, the atoms to add or
//! remove (each present one goes, each absent one comes); for a map, the
//! pairs (a key with the same value goes, with another value is replaced,
//! absent comes); for a scalar, the new value. [`crate::schema::Schema`]
//! says which a column is.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::datum::{Atom, Datum, Uuid};
use crate::schema::{Schema, Shape};

/// A row: its columns' values.
pub type Row = BTreeMap<String, Datum>;

/// The rows of the monitored tables.
#[derive(Debug, Default, Clone)]
pub struct Replica {
    tables: HashMap<String, HashMap<Uuid, Row>>,
}

/// What one notification changed, table by table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changed {
    /// (table, row) inserted or modified.
    pub upserted: BTreeSet<(String, Uuid)>,
    /// (table, row) deleted.
    pub deleted: BTreeSet<(String, Uuid)>,
}

impl Changed {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.upserted.is_empty() && self.deleted.is_empty()
    }

    /// Whether a row of `table` changed.
    pub fn touches(&self, table: &str) -> bool {
        self.upserted
            .iter()
            .chain(&self.deleted)
            .any(|(t, _)| t == table)
    }
}

fn read_row(v: &Value) -> Result<Row, String> {
    let o = v
        .as_object()
        .ok_or_else(|| format!("a row is an object, not {v}"))?;
    o.iter()
        .map(|(c, d)| {
            Datum::from_json(d)
                .map(|d| (c.clone(), d))
                .map_err(|e| format!("column {c}: {e}"))
        })
        .collect()
}

impl Replica {
    /// An empty copy.
    pub fn new() -> Self {
        Replica::default()
    }

    /// The rows of `table`.
    pub fn table(&self, table: &str) -> impl Iterator<Item = (&Uuid, &Row)> {
        self.tables.get(table).into_iter().flat_map(|t| t.iter())
    }

    /// One row.
    pub fn row(&self, table: &str, uuid: &Uuid) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    /// Forgets everything (before a new monitor's initial contents).
    pub fn clear(&mut self) {
        self.tables.clear();
    }

    /// Applies the table updates of an `update2` notification (or a
    /// `monitor_cond` reply). Malformed updates are an error, and what came
    /// before the malformed part stays applied.
    pub fn apply_update2(&mut self, schema: &Schema, updates: &Value) -> Result<Changed, String> {
        let mut ch = Changed::default();
        each_row(updates, |t, u, uuid, upd| {
            let upd = upd
                .as_object()
                .ok_or_else(|| format!("update of {t} row {u} is an object"))?;
            let (kind, body) = upd
                .iter()
                .next()
                .filter(|_| upd.len() == 1)
                .ok_or_else(|| {
                    format!("update of {t} row {u} has one of initial, insert, modify, delete")
                })?;
            let table = self.tables.entry(t.to_string()).or_default();
            match kind.as_str() {
                "initial" | "insert" => {
                    table.insert(uuid, read_row(body)?);
                    ch.upserted.insert((t.to_string(), uuid));
                }
                "delete" => {
                    table.remove(&uuid);
                    ch.deleted.insert((t.to_string(), uuid));
                }
                "modify" => {
                    let diff = read_row(body)?;
                    let row = table.entry(uuid).or_default();
                    for (c, d) in diff {
                        let shape = schema.shape(t, &c).unwrap_or(match d {
                            Datum::Map(_) => Shape::Map,
                            Datum::Set(_) => Shape::Set,
                        });
                        apply_diff(row, c, d, shape);
                    }
                    ch.upserted.insert((t.to_string(), uuid));
                }
                other => return Err(format!("update of {t} row {u}: unknown kind {other:?}")),
            }
            Ok(())
        })?;
        Ok(ch)
    }

    /// Applies the table updates of an `update` notification (or a
    /// `monitor` reply): each row's `new` replaces it, no `new` deletes it.
    pub fn apply_update(&mut self, updates: &Value) -> Result<Changed, String> {
        let mut ch = Changed::default();
        each_row(updates, |t, _, uuid, upd| {
            let table = self.tables.entry(t.to_string()).or_default();
            match upd.get("new") {
                Some(new) if !new.is_null() => {
                    // `new` holds the whole row only for columns that
                    // changed or all of them on insert: merge.
                    let row = table.entry(uuid).or_default();
                    for (c, d) in read_row(new)? {
                        row.insert(c, d);
                    }
                    ch.upserted.insert((t.to_string(), uuid));
                }
                _ => {
                    table.remove(&uuid);
                    ch.deleted.insert((t.to_string(), uuid));
                }
            }
            Ok(())
        })?;
        Ok(ch)
    }
}

/// Calls `f(table, row UUID as sent, row UUID, row update)` for each row of
/// table updates (`{table: {uuid: update}}`, both notifications' shape),
/// in order, stopping at the first error.
fn each_row(
    updates: &Value,
    mut f: impl FnMut(&str, &str, Uuid, &Value) -> Result<(), String>,
) -> Result<(), String> {
    let tables = updates
        .as_object()
        .ok_or_else(|| format!("table updates are an object, not {updates}"))?;
    for (t, rows) in tables {
        let rows = rows
            .as_object()
            .ok_or_else(|| format!("updates of table {t} are an object"))?;
        for (u, upd) in rows {
            let uuid = Uuid::parse(u).ok_or_else(|| format!("row {u} of {t}: not a UUID"))?;
            f(t, u, uuid, upd)?;
        }
    }
    Ok(())
}

fn apply_diff(row: &mut Row, column: String, diff: Datum, shape: Shape) {
    match shape {
        // ovsdb-server sends an optional column's new value, not a
        // difference (seen from Open vSwitch 3.1's: removing `tag` sends
        // `["set", []]`, setting it `7`).
        Shape::Scalar | Shape::Optional => {
            row.insert(column, diff);
        }
        Shape::Set => {
            let cur = row.entry(column).or_insert(Datum::Set(Vec::new()));
            let Datum::Set(have) = cur else {
                *cur = diff;
                return;
            };
            for a in diff.atoms() {
                if let Some(i) = have.iter().position(|h| h == a) {
                    have.remove(i);
                } else {
                    have.push(a.clone());
                }
            }
        }
        Shape::Map => {
            let cur = row.entry(column).or_insert(Datum::Map(Vec::new()));
            let (Datum::Map(have), Datum::Map(pairs)) = (cur, diff) else {
                return;
            };
            for (k, v) in pairs {
                match have.iter().position(|(hk, _)| *hk == k) {
                    Some(i) if have[i].1 == v => {
                        have.remove(i);
                    }
                    Some(i) => have[i].1 = v,
                    None => have.push((k, v)),
                }
            }
        }
    }
}

/// A row's string column (`name`, `type`, ...).
pub fn string<'a>(row: &'a Row, column: &str) -> Option<&'a str> {
    row.get(column)?.one()?.as_str()
}

/// A row's UUID set column (`ports`, `interfaces`, `bridges`, ...).
pub fn uuids(row: &Row, column: &str) -> Vec<Uuid> {
    row.get(column)
        .map(|d| d.atoms().iter().filter_map(Atom::as_uuid).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::from_json(&json!({"name": "Open_vSwitch", "tables": {"Bridge": {"columns": {
            "name": {"type": "string"},
            "ports": {"type": {"key": "uuid", "min": 0, "max": "unlimited"}},
            "fail_mode": {"type": {"key": "string", "min": 0, "max": 1}},
            "other_config": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
        }}}}))
        .unwrap()
    }

    const B: &str = "00000000-0000-0000-0000-000000000001";
    const P1: &str = "00000000-0000-0000-0000-0000000000a1";
    const P2: &str = "00000000-0000-0000-0000-0000000000a2";

    #[test]
    fn update2_diffs_by_column_shape() {
        let s = schema();
        let mut r = Replica::new();
        let ch = r
            .apply_update2(
                &s,
                &json!({"Bridge": {B: {"initial": {
                "name": "br0", "ports": ["uuid", P1],
                "other_config": ["map", [["hwaddr", "02:00:00:00:00:01"], ["x", "1"]]]}}}}),
            )
            .unwrap();
        let b = Uuid::parse(B).unwrap();
        assert!(ch.upserted.contains(&("Bridge".to_string(), b)));
        // A port added, fail_mode set, one key changed, one removed, the
        // name replaced.
        r.apply_update2(
            &s,
            &json!({"Bridge": {B: {"modify": {
            "name": "br1", "ports": ["uuid", P2], "fail_mode": "secure",
            "other_config": ["map", [["hwaddr", "02:00:00:00:00:02"], ["x", "1"]]]}}}}),
        )
        .unwrap();
        let row = r.row("Bridge", &b).unwrap();
        assert_eq!(string(row, "name"), Some("br1"));
        assert_eq!(string(row, "fail_mode"), Some("secure"));
        assert_eq!(
            uuids(row, "ports"),
            vec![Uuid::parse(P1).unwrap(), Uuid::parse(P2).unwrap()]
        );
        assert_eq!(
            row["other_config"].get("hwaddr"),
            Some(&Atom::String("02:00:00:00:00:02".into()))
        );
        assert_eq!(row["other_config"].get("x"), None);
        // An optional column's diff is its new value, as ovsdb-server
        // sends it: another value, then none.
        r.apply_update2(
            &s,
            &json!({"Bridge": {B: {"modify": {"fail_mode": "standalone"}}}}),
        )
        .unwrap();
        assert_eq!(
            string(r.row("Bridge", &b).unwrap(), "fail_mode"),
            Some("standalone")
        );
        // A port removed (present in the diff: it goes), fail_mode cleared.
        r.apply_update2(
            &s,
            &json!({"Bridge": {B: {"modify": {"ports": ["uuid", P1], "fail_mode": ["set", []]}}}}),
        )
        .unwrap();
        let row = r.row("Bridge", &b).unwrap();
        assert_eq!(uuids(row, "ports"), vec![Uuid::parse(P2).unwrap()]);
        assert_eq!(string(row, "fail_mode"), None);
        let ch = r
            .apply_update2(&s, &json!({"Bridge": {B: {"delete": null}}}))
            .unwrap();
        assert!(ch.deleted.contains(&("Bridge".to_string(), b)) && r.row("Bridge", &b).is_none());
        assert!(ch.touches("Bridge") && !ch.touches("Port"));
    }

    #[test]
    fn update_v1_and_malformed_updates() {
        let mut r = Replica::new();
        r.apply_update(&json!({"Bridge": {B: {"new": {"name": "br0"}}}}))
            .unwrap();
        r.apply_update(&json!({"Bridge": {B: {"old": {"name": "br0"}, "new": {"name": "br9"}}}}))
            .unwrap();
        let b = Uuid::parse(B).unwrap();
        assert_eq!(string(r.row("Bridge", &b).unwrap(), "name"), Some("br9"));
        r.apply_update(&json!({"Bridge": {B: {"old": {"name": "br9"}}}}))
            .unwrap();
        assert!(r.row("Bridge", &b).is_none());
        let s = schema();
        for bad in [
            json!([]),
            json!({"Bridge": 1}),
            json!({"Bridge": {"x": {"insert": {}}}}),
            json!({"Bridge": {B: {"frob": {}}}}),
            json!({"Bridge": {B: {"insert": {"name": {}}}}}),
        ] {
            assert!(r.apply_update2(&s, &bad).is_err(), "{bad}");
        }
    }
}
