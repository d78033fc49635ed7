//! OpenFlow port numbers of a bridge's interfaces, as OVS's ofproto gives
//! them: the bridge's own internal interface (the one named as the
//! bridge) is `LOCAL` (65534); an interface with a valid, free
//! `ofport_request` gets it; the others take numbers from a cursor that
//! goes up from 1 and wraps below OpenFlow's reserved range, skipping
//! numbers in use, so that a number freed is not given again at once
//! (OVS's `alloc_ofp_port`, which keeps old flows from matching a new
//! port). A number stays with its interface while the interface stays.

use std::collections::{BTreeMap, BTreeSet};

/// `OFPP_LOCAL`.
pub const LOCAL: i64 = 65534;
/// The first number OpenFlow reserves (`OFPP_MAX` + 1 = 0xff00).
pub const RESERVED: i64 = 0xff00;

/// The numbers one bridge has given.
#[derive(Debug, Clone, Default)]
pub struct OfPorts {
    by_name: BTreeMap<String, i64>,
    cursor: i64,
}

impl OfPorts {
    /// The number of interface `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.by_name.get(name).copied()
    }

    /// Makes the numbers those of `interfaces` (name, `ofport_request`) of
    /// bridge `bridge`: interfaces gone give theirs up, new ones get one,
    /// and one whose request changed to a free number moves to it.
    /// Returns each interface's number.
    pub fn assign(
        &mut self,
        bridge: &str,
        interfaces: &[(&str, Option<i64>)],
    ) -> BTreeMap<String, i64> {
        let with: Vec<(&str, Option<i64>, Option<i64>)> =
            interfaces.iter().map(|(n, r)| (*n, *r, None)).collect();
        self.assign_with_hints(bridge, &with)
    }

    /// [`OfPorts::assign`] with, for each interface, the number its row
    /// held before (`ofport`, read at a restart): an interface that has no
    /// number yet takes it if it is free, as OVS's `iface_pick_ofport`
    /// asks for it, but it takes no number over (only `ofport_request`
    /// does). New interfaces are numbered in the order given (OVS's:
    /// [`crate::ovs_order`]).
    pub fn assign_with_hints(
        &mut self,
        bridge: &str,
        interfaces: &[(&str, Option<i64>, Option<i64>)],
    ) -> BTreeMap<String, i64> {
        let wanted: BTreeSet<&str> = interfaces.iter().map(|(n, _, _)| *n).collect();
        self.by_name.retain(|n, _| wanted.contains(n.as_str()));
        let valid = |r: Option<i64>| r.filter(|&r| (1..RESERVED).contains(&r));
        // Requests first, in name order: a request another interface holds
        // without having asked for it takes the number over.
        for (name, req, _) in interfaces {
            if *name == bridge {
                self.by_name.insert(name.to_string(), LOCAL);
                continue;
            }
            let Some(r) = valid(*req) else { continue };
            if self.by_name.get(*name) == Some(&r) {
                continue;
            }
            let holder = self
                .by_name
                .iter()
                .find(|(_, &p)| p == r)
                .map(|(n, _)| n.clone());
            let holder_asked = holder.as_ref().is_some_and(|h| {
                interfaces
                    .iter()
                    .any(|(n, q, _)| n == h && valid(*q) == Some(r))
            });
            if holder_asked {
                continue;
            }
            if let Some(h) = holder {
                self.by_name.remove(&h);
            }
            self.by_name.insert(name.to_string(), r);
        }
        for (name, _, hint) in interfaces {
            if self.by_name.contains_key(*name) {
                continue;
            }
            let used: BTreeSet<i64> = self.by_name.values().copied().collect();
            let p = match valid(*hint).filter(|h| !used.contains(h)) {
                Some(h) => h,
                None => self.next_free(&used),
            };
            self.by_name.insert(name.to_string(), p);
        }
        self.by_name.clone()
    }

    fn next_free(&mut self, used: &BTreeSet<i64>) -> i64 {
        for _ in 0..RESERVED {
            self.cursor += 1;
            if self.cursor >= RESERVED {
                self.cursor = 1;
            }
            if !used.contains(&self.cursor) {
                return self.cursor;
            }
        }
        // 65,279 interfaces on one bridge: none left (OVS: ofport -1).
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_ovs_gives_them() {
        let mut o = OfPorts::default();
        let got = o.assign("br0", &[("br0", None), ("p1", None), ("p2", Some(7))]);
        assert_eq!(got["br0"], LOCAL);
        assert_eq!(got["p2"], 7);
        assert_eq!(got["p1"], 1);
        // p1 goes, p3 comes: 1 is not given again at once.
        let got = o.assign("br0", &[("br0", None), ("p2", Some(7)), ("p3", None)]);
        assert_eq!(got["p3"], 2);
        assert!(o.get("p1").is_none());
        // A request for a number another interface holds unasked takes it.
        let got = o.assign(
            "br0",
            &[
                ("br0", None),
                ("p2", Some(7)),
                ("p3", None),
                ("p4", Some(2)),
            ],
        );
        assert_eq!((got["p4"], got["p2"]), (2, 7));
        assert_eq!(got["p3"], 3);
        // Two asking for one number: the first by name keeps it.
        let got = o.assign("br0", &[("a", Some(9)), ("b", Some(9))]);
        assert_eq!(got["a"], 9);
        assert_ne!(got["b"], 9);
        // A restart: the numbers the rows held are taken again where free,
        // never over another's.
        let mut o = OfPorts::default();
        let got = o.assign_with_hints(
            "br0",
            &[
                ("a", None, Some(5)),
                ("b", None, Some(5)),
                ("c", Some(5), None),
            ],
        );
        assert_eq!(got["c"], 5, "a request beats a number held before");
        assert_eq!((got["a"], got["b"]), (1, 2));
        // Out of range requests are numbers like any other interface's.
        let got = o.assign("br0", &[("x", Some(0)), ("y", Some(0xff00))]);
        assert!(got.values().all(|&p| (1..RESERVED).contains(&p)));
    }
}
