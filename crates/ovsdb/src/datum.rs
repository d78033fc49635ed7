//! OVSDB values as they travel in JSON (RFC 7047 §5.1): atoms (integer,
//! real, boolean, string, `["uuid", U]`, `["named-uuid", N]`), sets
//! (`["set", [...]]`, or a lone atom for a set of one) and maps (`["map",
//! [[k, v], ...]]`). What the schema allows a column to hold is checked
//! elsewhere; here a value is only read and written in its JSON form,
//! and anything else is an error that names what was found.

use serde_json::{json, Value};

/// A UUID (a row's identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// Parses the 36-character form `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub fn parse(s: &str) -> Option<Uuid> {
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let mut out = [0u8; 16];
        let mut hex = b.iter().filter(|&&c| c != b'-');
        for o in &mut out {
            let hi = (*hex.next()? as char).to_digit(16)?;
            let lo = (*hex.next()? as char).to_digit(16)?;
            *o = (hi << 4 | lo) as u8;
        }
        Some(Uuid(out))
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// One atomic value.
#[derive(Debug, Clone, PartialEq)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    Uuid(Uuid),
    /// A row inserted by the same transaction, by the name it was given.
    NamedUuid(String),
}

/// A column's value: a set (maybe of one, or none) or a map.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Set(Vec<Atom>),
    Map(Vec<(Atom, Atom)>),
}

/// Why a JSON value is not an OVSDB value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatumError(pub String);

impl std::fmt::Display for DatumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DatumError {}

fn err(what: &str, v: &Value) -> DatumError {
    let mut s = v.to_string();
    if s.len() > 80 {
        let mut cut = 77;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    DatumError(format!("{what}: got {s}"))
}

impl Atom {
    /// Reads an atom.
    pub fn from_json(v: &Value) -> Result<Atom, DatumError> {
        match v {
            Value::Bool(b) => Ok(Atom::Boolean(*b)),
            Value::String(s) => Ok(Atom::String(s.clone())),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Ok(Atom::Integer(i)),
                None => n
                    .as_f64()
                    .map(Atom::Real)
                    .ok_or_else(|| err("a number OVSDB can hold", v)),
            },
            Value::Array(a) => match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("uuid"), Some(Value::String(u)), 2) => Uuid::parse(u)
                    .map(Atom::Uuid)
                    .ok_or_else(|| err("a UUID", v)),
                (Some("named-uuid"), Some(Value::String(n)), 2) => Ok(Atom::NamedUuid(n.clone())),
                _ => Err(err("an atom (number, string, boolean, [\"uuid\", U])", v)),
            },
            _ => Err(err("an atom", v)),
        }
    }

    /// Its JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.to_string()]),
            Atom::NamedUuid(n) => json!(["named-uuid", n]),
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The UUID, if it is one.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }
}

impl Datum {
    /// Reads a value: `["set", [...]]`, `["map", [[k, v], ...]]` or a lone
    /// atom (a set of one).
    pub fn from_json(v: &Value) -> Result<Datum, DatumError> {
        if let Value::Array(a) = v {
            match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("set"), Some(Value::Array(items)), 2) => {
                    return items
                        .iter()
                        .map(Atom::from_json)
                        .collect::<Result<_, _>>()
                        .map(Datum::Set);
                }
                (Some("map"), Some(Value::Array(pairs)), 2) => {
                    return pairs
                        .iter()
                        .map(|p| match p.as_array().map(Vec::as_slice) {
                            Some([k, v]) => Ok((Atom::from_json(k)?, Atom::from_json(v)?)),
                            _ => Err(err("a map pair [key, value]", p)),
                        })
                        .collect::<Result<_, _>>()
                        .map(Datum::Map);
                }
                _ => {}
            }
        }
        Atom::from_json(v).map(|a| Datum::Set(vec![a]))
    }

    /// Its JSON form (a set of one as the lone atom, as OVS writes it).
    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(s) if s.len() == 1 => s[0].to_json(),
            Datum::Set(s) => json!(["set", s.iter().map(Atom::to_json).collect::<Vec<_>>()]),
            Datum::Map(m) => json!([
                "map",
                m.iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// The atoms of a set (none for a map).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Set(s) => s,
            Datum::Map(_) => &[],
        }
    }

    /// The one atom of a set of one (an optional column that is set).
    pub fn one(&self) -> Option<&Atom> {
        match self.atoms() {
            [a] => Some(a),
            _ => None,
        }
    }

    /// The value of string key `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Atom> {
        match self {
            Datum::Map(m) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            Datum::Set(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uuids_parse_and_print() {
        let s = "36b1f2a4-07d4-4d1e-9b3c-0a1b2c3d4e5f";
        assert_eq!(Uuid::parse(s).unwrap().to_string(), s);
        for bad in [
            "",
            "36b1f2a4-07d4-4d1e-9b3c-0a1b2c3d4e5",
            "36b1f2a4x07d4-4d1e-9b3c-0a1b2c3d4e5f",
            "zzb1f2a4-07d4-4d1e-9b3c-0a1b2c3d4e5f",
        ] {
            assert!(Uuid::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn values_as_ovs_writes_them() {
        let v: Value = serde_json::from_str(r#"["map",[["dpdk-init","true"],["n",3]]]"#).unwrap();
        let d = Datum::from_json(&v).unwrap();
        assert_eq!(d.get("dpdk-init"), Some(&Atom::String("true".into())));
        assert_eq!(d.get("n"), Some(&Atom::Integer(3)));
        assert_eq!(
            Datum::from_json(&json!(["set", []])).unwrap(),
            Datum::Set(vec![])
        );
        assert_eq!(
            Datum::from_json(&json!(5)).unwrap().one(),
            Some(&Atom::Integer(5))
        );
        let e = Datum::from_json(&json!(["map", [["a"]]])).unwrap_err();
        assert!(e.0.contains("map pair"), "{e}");
        assert!(Datum::from_json(&json!({"a": 1})).is_err());
        assert!(Datum::from_json(&json!(["uuid", "nope"])).is_err());
    }

    fn atom() -> impl Strategy<Value = Atom> {
        prop_oneof![
            any::<i64>().prop_map(Atom::Integer),
            (-1e9f64..1e9)
                .prop_filter("not integral", |f| f.fract() != 0.0)
                .prop_map(Atom::Real),
            any::<bool>().prop_map(Atom::Boolean),
            ".{0,8}".prop_map(Atom::String),
            any::<[u8; 16]>().prop_map(|b| Atom::Uuid(Uuid(b))),
            "[a-z_][a-z0-9_]{0,8}".prop_map(Atom::NamedUuid),
        ]
    }

    proptest! {
        /// Every value reads back as it was written.
        #[test]
        fn json_round_trip(set in proptest::collection::vec(atom(), 0..5),
                           map in proptest::collection::vec((atom(), atom()), 0..5)) {
            for d in [Datum::Set(set), Datum::Map(map)] {
                let back = Datum::from_json(&d.to_json()).unwrap();
                prop_assert_eq!(back, d);
            }
        }

        /// No JSON value makes the reader panic.
        #[test]
        fn any_json_is_read_or_refused(s in "[\\[\\]\"a-z0-9,:{} -]{0,40}") {
            if let Ok(v) = serde_json::from_str::<Value>(&s) {
                let _ = Datum::from_json(&v);
            }
        }
    }
}
