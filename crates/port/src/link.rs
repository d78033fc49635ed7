//! The link state of live ports: whether the interface under an
//! `afpacket:`, `afxdp:` or `tap:` port has carrier (read from sysfs, as
//! `ip link` shows it), and which ports' links went up or down since the
//! last look (the OpenFlow channel's PORT_STATUS).

use std::collections::HashMap;

/// The interface a live port's spec names (`afpacket:veth1,fanout=hash`
/// names `veth1`); `None` for ports without one (null, pcap, stream, ...).
pub fn interface(spec: &str) -> Option<&str> {
    ["afpacket:", "afxdp:", "tap:"]
        .iter()
        .find_map(|p| spec.strip_prefix(p))
        .map(|rest| rest.split([',', ':']).next().unwrap_or(rest))
}

/// The socket path of a vhost-user port's spec (`vhost:PATH`,
/// `vhost-client:PATH`); `None` for other ports.
pub fn vhost_socket(spec: &str) -> Option<&str> {
    spec.strip_prefix("vhost:")
        .or_else(|| spec.strip_prefix("vhost-client:"))
}

/// Whether the link of port `spec` is up: `None` for a port without an
/// interface (always up); for a live port, whether its interface has
/// carrier (an interface that is administratively down, or gone, has
/// none); for a vhost-user port, whether a guest's driver runs its rings.
pub fn link_up(spec: &str) -> Option<bool> {
    if let Some(path) = vhost_socket(spec) {
        // Up while a guest's driver runs both rings.
        return Some(crate::vhost::link_up(std::path::Path::new(path)) == Some(true));
    }
    let name = interface(spec)?;
    // A name that could climb out of /sys/class/net has no link.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Some(false);
    }
    let carrier = std::fs::read_to_string(format!("/sys/class/net/{name}/carrier"));
    Some(carrier.is_ok_and(|c| c.trim() == "1"))
}

/// The Ethernet address of a live port's interface (`None` for a port
/// without one, or one the kernel shows as all zeros).
pub fn mac(spec: &str) -> Option<[u8; 6]> {
    interface(spec).and_then(crate::sys::if_mac)
}

/// The link state of each live port at the last look.
#[derive(Debug, Default)]
pub struct LinkWatch {
    last: HashMap<u32, bool>,
}

impl LinkWatch {
    /// Looks at the links of `ports` (number, spec) and returns the ports
    /// whose link went up or down since the last look, with the new state.
    /// A port seen for the first time is only recorded (its addition is
    /// told otherwise); ports no longer there are forgotten.
    pub fn changes<'a>(
        &mut self,
        ports: impl IntoIterator<Item = (u32, &'a str)>,
    ) -> Vec<(u32, bool)> {
        let mut now = HashMap::new();
        let mut changed = Vec::new();
        for (ofport, spec) in ports {
            let Some(up) = link_up(spec) else {
                continue;
            };
            if self.last.get(&ofport).is_some_and(|&was| was != up) {
                changed.push((ofport, up));
            }
            now.insert(ofport, up);
        }
        self.last = now;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_ports_have_an_interface_others_none() {
        assert_eq!(interface("afpacket:veth1"), Some("veth1"));
        assert_eq!(interface("afpacket:veth1,fanout=hash"), Some("veth1"));
        assert_eq!(interface("afxdp:eth0:3"), Some("eth0"));
        assert_eq!(interface("tap:tap0"), Some("tap0"));
        assert_eq!(interface("null"), None);
        assert_eq!(interface("pcap:rx=/x.pcap"), None);
        assert_eq!(link_up("null"), None);
    }

    #[test]
    fn a_missing_or_strange_interface_has_no_link() {
        assert_eq!(link_up("afpacket:sluice-no-such0"), Some(false));
        assert_eq!(link_up("afpacket:../../etc"), Some(false));
        assert_eq!(link_up("tap:"), Some(false));
        // Loopback is always there and up.
        assert_eq!(link_up("afpacket:lo"), Some(true));
        // Its address, and none for what has no interface.
        assert_eq!(mac("afpacket:lo"), None, "all zeros: no address");
        assert_eq!(mac("afpacket:../../etc"), None);
        assert_eq!(mac("afpacket:sluice-no-such0"), None);
        assert_eq!(mac("null"), None);
    }

    #[test]
    fn only_changes_after_the_first_look_are_told() {
        let mut w = LinkWatch::default();
        assert!(w
            .changes([
                (1, "afpacket:lo"),
                (2, "afpacket:sluice-no-such0"),
                (3, "null")
            ])
            .is_empty());
        assert!(w.changes([(1, "afpacket:lo")]).is_empty());
        // Port 2 comes back under another interface that is up: a change
        // only if it was seen at the last look (it was not).
        assert!(w
            .changes([(1, "afpacket:lo"), (2, "afpacket:lo")])
            .is_empty());
        assert_eq!(
            w.changes([(1, "afpacket:lo"), (2, "afpacket:sluice-no-such0")]),
            [(2, false)]
        );
    }
}
