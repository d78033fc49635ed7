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
    /// The link's speed in bits a second, when the driver says.
    pub speed_bps: Option<i64>,
    /// `full` or `half`, when the driver says.
    pub duplex: Option<String>,
    /// The driver's name, version and firmware version (what OVS writes
    /// to `Interface:status`), when it says.
    pub driver: Option<[String; 3]>,
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
    let link = ethtool_link(name);
    Some(Netdev {
        mac: get("address")?,
        ifindex: num("ifindex")?,
        mtu: num("mtu")?,
        admin_up: flags & 1 != 0,
        // Reading carrier of a device that is down fails: no link.
        link_up: get("carrier").as_deref() == Some("1"),
        // As OVS asks the driver (ethtool), which answers while the
        // device is down too (sysfs does not).
        speed_bps: link.map(|l| l.0),
        duplex: link.map(|l| if l.1 { "full" } else { "half" }.to_string()),
        driver: ethtool_driver(name),
    })
}

/// `struct ethtool_cmd` (linux/ethtool.h), what `ETHTOOL_GSET` fills.
#[repr(C)]
#[derive(Default)]
struct EthtoolCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

/// `struct ifreq` with its union as `ifr_data`.
#[repr(C)]
struct IfReqData {
    name: [u8; 16],
    data: *mut libc::c_void,
    _rest: [u8; 16],
}

/// `struct ethtool_drvinfo`, what `ETHTOOL_GDRVINFO` fills.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 1;
const ETHTOOL_GDRVINFO: u32 = 3;

/// Asks the driver of `name` by `SIOCETHTOOL`: `cmd` is the ethtool
/// command's struct (its first word the command). False: no answer.
fn ethtool<T>(name: &str, cmd: &mut T) -> bool {
    let mut req = IfReqData {
        name: [0; 16],
        data: (cmd as *mut T).cast(),
        _rest: [0; 16],
    };
    if name.len() >= 16 {
        return false;
    }
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: a datagram socket only to ask the kernel; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: SIOCETHTOOL reads the NUL-terminated name (under 16 bytes,
    // checked above) and the command through `req`, which points at
    // `cmd`, a struct sized as the kernel's for that command; both live
    // across the call.
    let r = unsafe { libc::ioctl(fd, SIOCETHTOOL, &mut req) };
    // SAFETY: the descriptor made above, closed once.
    unsafe { libc::close(fd) };
    r == 0
}

/// A NUL-terminated field of a kernel struct, as text.
fn c_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The driver's name, version and firmware version, as `ethtool -i`.
fn ethtool_driver(name: &str) -> Option<[String; 3]> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    if !ethtool(name, &mut info) {
        return None;
    }
    Some([
        c_text(&info.driver),
        c_text(&info.version),
        c_text(&info.fw_version),
    ])
}

/// The link's speed (bits a second) and whether it is full duplex, as
/// the driver tells `ethtool` (None: it does not say).
fn ethtool_link(name: &str) -> Option<(i64, bool)> {
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..EthtoolCmd::default()
    };
    if !ethtool(name, &mut cmd) {
        return None;
    }
    let mbps = u32::from(cmd.speed) | u32::from(cmd.speed_hi) << 16;
    if mbps == 0 || mbps == u32::MAX || mbps == 0xffff {
        return None;
    }
    let duplex = match cmd.duplex {
        0 => false,
        1 => true,
        _ => return None,
    };
    Some((i64::from(mbps) * 1_000_000, duplex))
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
        // The loopback device's driver says no speed; a missing device
        // is no answer, not an error. (A veth's and a tap's answer, 10
        // Gbit/s full duplex even while down, is checked against OVS's in
        // crates/sluice/tests/vswitchd.rs.)
        assert_eq!(lo.speed_bps, None);
        assert_eq!(ethtool_link("no-such-device0"), None);
        assert_eq!(ethtool_driver("no-such-device0"), None);
        assert_eq!(ethtool_driver("a-name-far-too-long-for-linux"), None);
    }
}
