//! The ports the reconciler made, by bridge and OpenFlow number, and the
//! datapath port numbers OVS would give them: what `dpif/show`,
//! `dpctl/dump-flows` and `ofproto/trace` print where OVS prints its
//! own. OVS's userspace datapath numbers its ports as it adds them, each
//! the lowest number free from 1 (0 is the datapath's own `ovs-netdev`);
//! a patch port has none. The reconciler adds them in the order
//! ovs-vswitchd does (a bridge made alone gets its own port first, ports
//! added later the next numbers; several at once in OVS's hash order). Sluice's datapath keeps numbers of its own (a
//! bridge's index above its OpenFlow numbers); these are for display and
//! for what users give back (`filter=in_port=N`).

use std::collections::BTreeMap;

/// A port the reconciler made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PortInfo {
    /// The interface's name.
    pub name: String,
    /// OVS's type as `dpif/show` prints it (`system`, `tap`, `patch:
    /// peer=NAME`, ...).
    pub kind: String,
    /// OVS's datapath port number (none for a patch port).
    pub odp: Option<u32>,
}

/// Every port, by (bridge, OpenFlow number).
#[derive(Debug, Default)]
pub(super) struct Ports {
    ports: BTreeMap<(String, u32), PortInfo>,
}

impl Ports {
    /// The lowest datapath number from 1 that no port has.
    fn free(&self) -> u32 {
        let used: std::collections::BTreeSet<u32> =
            self.ports.values().filter_map(|p| p.odp).collect();
        (1..).find(|n| !used.contains(n)).unwrap_or(1)
    }

    /// Bridge `b` gone, with its ports.
    pub fn del_bridge(&mut self, b: &str) {
        self.ports.retain(|(pb, _), _| pb != b);
    }

    /// Port `n` of bridge `b` made.
    pub fn add_port(&mut self, b: &str, n: u32, name: &str, kind: String) {
        let odp = if kind.starts_with("patch") {
            None
        } else if let Some(p) = self.ports.get(&(b.to_string(), n)) {
            p.odp
        } else {
            Some(self.free())
        };
        let info = PortInfo {
            name: name.to_string(),
            kind,
            odp,
        };
        self.ports.insert((b.to_string(), n), info);
    }

    /// Port `n` of bridge `b` gone.
    pub fn del_port(&mut self, b: &str, n: u32) {
        self.ports.remove(&(b.to_string(), n));
    }

    /// Every port, by (bridge, OpenFlow number).
    pub fn iter(&self) -> impl Iterator<Item = (&(String, u32), &PortInfo)> {
        self.ports.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bridge's own port (`LOCAL`).
    const LOCAL: u32 = 0xffff_fffe;

    fn odp(p: &Ports, b: &str, n: u32) -> Option<u32> {
        p.ports[&(b.to_string(), n)].odp
    }

    #[test]
    fn numbered_as_ovs_numbers_them() {
        let mut p = Ports::default();
        p.add_port("br0", LOCAL, "br0", "tap".into());
        p.add_port("br0", 1, "a0", "system".into());
        p.add_port("br0", 2, "patch-a", "patch: peer=patch-b".into());
        p.add_port("br1", LOCAL, "br1", "tap".into());
        p.add_port("br1", 1, "b0", "system".into());
        assert_eq!(odp(&p, "br0", LOCAL), Some(1));
        assert_eq!(odp(&p, "br0", 1), Some(2));
        assert_eq!(odp(&p, "br0", 2), None);
        assert_eq!(odp(&p, "br1", LOCAL), Some(3));
        assert_eq!(odp(&p, "br1", 1), Some(4));
        // A number freed is the next one given.
        p.del_port("br0", 1);
        p.add_port("br1", 2, "b1", "system".into());
        assert_eq!(odp(&p, "br1", 2), Some(2));
        p.del_bridge("br1");
        assert!(p.iter().all(|((b, _), _)| b == "br0"));
    }
}
