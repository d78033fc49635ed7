//! What a database schema says of each column that reading updates needs:
//! whether it holds a map, a set or exactly one atom (RFC 7047 §3.2). An
//! `update2` diff means different things for each (§4.1.14 of OVS's
//! extension: a set's diff lists the atoms to add or remove, a map's the
//! pairs, a scalar's the new value).

use std::collections::HashMap;

use serde_json::Value;

/// The shape of a column's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Exactly one atom (min 1, max 1).
    Scalar,
    /// At most one atom (min 0, max 1): an `update2` diff is the new
    /// value, as ovsdb-server sends it (`["set", []]` when it goes).
    Optional,
    /// A set of atoms: an `update2` diff adds or removes each atom.
    Set,
    /// A map.
    Map,
}

/// The columns' shapes of every table of a schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// The database's name.
    pub name: String,
    /// Its version (`"8.3.1"` for Open vSwitch 3.1's).
    pub version: String,
    tables: HashMap<String, HashMap<String, Shape>>,
}

impl Schema {
    /// Reads a schema as `get_schema` returns it.
    pub fn from_json(v: &Value) -> Result<Schema, String> {
        let name = v["name"]
            .as_str()
            .ok_or("a schema has a \"name\"")?
            .to_string();
        let version = v["version"].as_str().unwrap_or("").to_string();
        let tables = v["tables"].as_object().ok_or("a schema has \"tables\"")?;
        let mut out = HashMap::new();
        for (t, tv) in tables {
            let cols = tv["columns"]
                .as_object()
                .ok_or_else(|| format!("table {t} has no \"columns\""))?;
            let mut shapes = HashMap::new();
            for (c, cv) in cols {
                shapes.insert(
                    c.clone(),
                    shape_of(&cv["type"]).map_err(|e| format!("{t}.{c}: {e}"))?,
                );
            }
            // Every row has these, whatever the schema lists.
            shapes.insert("_uuid".into(), Shape::Scalar);
            shapes.insert("_version".into(), Shape::Scalar);
            out.insert(t.clone(), shapes);
        }
        Ok(Schema {
            name,
            version,
            tables: out,
        })
    }

    /// The shape of `table.column`, if the schema has it.
    pub fn shape(&self, table: &str, column: &str) -> Option<Shape> {
        self.tables.get(table)?.get(column).copied()
    }

    /// Whether the schema has `table`.
    pub fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    /// The columns of `table`.
    pub fn columns(&self, table: &str) -> impl Iterator<Item = &str> {
        self.tables
            .get(table)
            .into_iter()
            .flat_map(|c| c.keys().map(String::as_str))
    }
}

fn shape_of(t: &Value) -> Result<Shape, String> {
    match t {
        Value::String(_) => Ok(Shape::Scalar),
        Value::Object(o) => {
            if o.get("value").is_some() {
                return Ok(Shape::Map);
            }
            let min = o
                .get("min")
                .map_or(Some(1), Value::as_u64)
                .ok_or("\"min\" is not a number")?;
            let max = match o.get("max") {
                None => 1,
                Some(Value::String(s)) if s == "unlimited" => u64::MAX,
                Some(v) => v
                    .as_u64()
                    .ok_or("\"max\" is not a number or \"unlimited\"")?,
            };
            Ok(match (min, max) {
                (1, 1) => Shape::Scalar,
                (0, 1) => Shape::Optional,
                _ => Shape::Set,
            })
        }
        _ => Err(format!("a column type is a string or an object, not {t}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_of_the_column_kinds() {
        let s = Schema::from_json(&json!({
            "name": "Open_vSwitch", "version": "8.3.1",
            "tables": {"Bridge": {"columns": {
                "name": {"type": "string"},
                "ports": {"type": {"key": {"type": "uuid", "refTable": "Port"}, "min": 0, "max": "unlimited"}},
                "datapath_type": {"type": {"key": "string"}},
                "fail_mode": {"type": {"key": {"type": "string", "enum": ["set", ["standalone", "secure"]]}, "min": 0, "max": 1}},
                "other_config": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
            }}}
        }))
        .unwrap();
        assert_eq!(s.version, "8.3.1");
        assert_eq!(s.shape("Bridge", "name"), Some(Shape::Scalar));
        assert_eq!(s.shape("Bridge", "datapath_type"), Some(Shape::Scalar));
        assert_eq!(s.shape("Bridge", "ports"), Some(Shape::Set));
        assert_eq!(s.shape("Bridge", "fail_mode"), Some(Shape::Optional));
        assert_eq!(s.shape("Bridge", "other_config"), Some(Shape::Map));
        assert_eq!(s.shape("Bridge", "_uuid"), Some(Shape::Scalar));
        assert_eq!(s.shape("Port", "name"), None);
        assert!(Schema::from_json(&json!({"tables": {}})).is_err());
    }
}
