//! What the kernel says of a network device, read from
//! `/sys/class/net/NAME` of the namespace the daemon runs in: the columns
//! ovs-vswitchd writes to an `Interface` row from its netdev
//! (`mac_in_use`, `ifindex`, `mtu`, `admin_state`, `link_state`).

use std::path::PathBuf;

/// One device's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netdev {
    pub mac: String,
    pub ifindex: i64,
    pub mtu: i64,
    /// `IFF_UP`.
    pub admin_up: bool,
    /// Carrier.
    pub link_up: bool,
}

/// A name the kernel could give a device (no path in it).
fn plausible(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
}

/// The device's state, or None when there is no such device.
pub fn read(name: &str) -> Option<Netdev> {
    if !plausible(name) {
        return None;
    }
    let dir = PathBuf::from("/sys/class/net").join(name);
    let get = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let num = |f: &str| {
        get(f).and_then(|s| {
            let s = s
                .strip_prefix("0x")
                .map_or_else(|| s.parse().ok(), |h| i64::from_str_radix(h, 16).ok());
            s
        })
    };
    let flags = num("flags")?;
    Some(Netdev {
        mac: get("address")?,
        ifindex: num("ifindex")?,
        mtu: num("mtu")?,
        admin_up: flags & 1 != 0,
        // Reading carrier of a device that is down fails: no link.
        link_up: get("carrier").as_deref() == Some("1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_device_and_names_that_are_not_devices() {
        let lo = read("lo").expect("lo is in every namespace");
        assert_eq!(lo.mac, "00:00:00:00:00:00");
        assert!(lo.ifindex >= 1 && lo.mtu > 0);
        for bad in ["", "..", "../lo", "a/b", "no-such-device0"] {
            assert!(read(bad).is_none(), "{bad}");
        }
    }
}
