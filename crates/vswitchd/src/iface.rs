//! An `Interface` row as one of Sluice's ports: its `type`, `options`
//! and `mtu_request`, and its port's VLAN columns, written as the port
//! spec `sluice run --port` takes (so the one parser of specs checks
//! them). Types as ovs-vswitchd's userspace (`netdev`) datapath gives
//! them meaning:
//!
//! | `type` | Sluice port |
//! |---|---|
//! | `""`, `system` | `afpacket:NAME` (the device through AF_PACKET rings) |
//! | `internal` | `tap:NAME,up=off,persist=on` (a tap made for it and left down, persistent, as OVS's netdev datapath does); the bridge's own interface is `LOCAL` |
//! | `tap` | `tap:NAME,up=off,persist=on` |
//! | `afxdp` | `afxdp:NAME` |
//! | `dpdkvhostuserclient` | `vhost-client:PATH` (`options:vhost-server-path`) |
//! | `dpdkvhostuser` | `vhost:RUNDIR/NAME` (Sluice listens, as OVS does in its run directory) |
//! | `dpdk` | `dpdk:DEVARGS` (`options:dpdk-devargs`; the dpdk build) |
//! | `vxlan`, `geneve`, `gre` | the tunnel port, its options as OVS names them |
//!
//! Anything else is refused with a reason that goes into the row's
//! `error` column, as OVS reports a port it cannot make.

use std::path::Path;

use crate::desired::{IfaceCfg, PortCfg, Smap};

/// The interface types Sluice makes (`Open_vSwitch:iface_types`).
pub const IFACE_TYPES: &[&str] = &[
    "afxdp",
    "dpdkvhostuser",
    "dpdkvhostuserclient",
    "geneve",
    "gre",
    "internal",
    "system",
    "tap",
    "vxlan",
];

/// The tunnel options Sluice's tunnel ports take, as OVS names them.
const TUNNEL_OPTIONS: &[&str] = &[
    "remote_ip",
    "local_ip",
    "key",
    "in_key",
    "out_key",
    "dst_port",
    "csum",
    "tos",
    "ttl",
    "df_default",
    "packet_type",
];

/// The spec of interface `name` of port `port`, or why it cannot be made.
/// `rundir` is where `dpdkvhostuser` sockets go.
pub fn port_spec(
    name: &str,
    iface: &IfaceCfg,
    port: &PortCfg,
    rundir: &Path,
) -> Result<String, String> {
    // A name or path goes into a spec whose options ',' and '=' separate:
    // one holding them could add options of its own (`eth1,tag=5`), and a
    // vhost-user socket's name must not leave the run directory.
    let plain = |what: &str, v: &str| {
        if v.contains([',', '=']) || v.chars().any(char::is_control) {
            Err(format!(
                "{name}: {what} '{v}' holds ',', '=' or a control character, which Sluice's port specs cannot carry"
            ))
        } else {
            Ok(())
        }
    };
    let netdev_name = |v: &str| {
        plain("interface name", v)?;
        if v.is_empty() || v.len() > 15 || v.contains(['/', ':']) || v.contains(char::is_whitespace)
        {
            return Err(format!(
                "could not open network device {v} (Invalid argument): not a Linux interface name"
            ));
        }
        Ok(())
    };
    let mtu = iface
        .mtu_request
        .filter(|&m| m > 0)
        .map(|m| format!(",mtu={m}"))
        .unwrap_or_default();
    let mut spec = match iface.kind.as_str() {
        "" | "system" => {
            netdev_name(name)?;
            format!("afpacket:{name}{mtu}")
        }
        // As OVS's netdev datapath: a tap, left down for the user to
        // bring up (`ip link set br0 up`), persistent (it keeps its
        // addresses over a restart of the switch; deleting the port
        // deletes it).
        "internal" | "tap" => {
            netdev_name(name)?;
            format!("tap:{name},up=off,persist=on{mtu}")
        }
        "afxdp" => {
            netdev_name(name)?;
            format!("afxdp:{name}{mtu}")
        }
        "dpdkvhostuserclient" => match iface.options.get("vhost-server-path") {
            Some(p) if !p.is_empty() => {
                plain("options:vhost-server-path", p)?;
                format!("vhost-client:{p}")
            }
            _ => {
                return Err(format!(
                    "{name}: a dpdkvhostuserclient interface needs options:vhost-server-path (the socket QEMU listens on)"
                ))
            }
        },
        "dpdkvhostuser" => {
            // As OVS: the socket is RUNDIR/NAME, so no '/' in the name.
            plain("name", name)?;
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(format!("{name}: not a vhost-user socket name (it is a file in the run directory)"));
            }
            format!("vhost:{}", rundir.join(name).display())
        }
        "dpdk" => match iface.options.get("dpdk-devargs") {
            // The devargs are the rest of the spec (commas and all): no
            // VLAN options can follow them.
            Some(_) if port.tag.is_some() || !port.trunks.is_empty() || port.vlan_mode.is_some() => {
                return Err(format!("{name}: VLAN modes on dpdk ports are not supported yet"))
            }
            Some(d) if !d.is_empty() => return Ok(format!("dpdk:{d}")),
            _ => return Err(format!("{name}: a dpdk interface needs options:dpdk-devargs")),
        },
        t @ ("vxlan" | "geneve" | "gre") => return tunnel_spec(name, t, &iface.options),
        // OVS's words for a bad peer (netdev-vport's set_patch_config).
        // Not a datapath port: the switch joins the two bridges in its
        // translation.
        "patch" => {
            let peer = match iface.options.get("peer") {
                Some(p) if !p.is_empty() => p,
                _ => {
                    return Err(format!(
                        "{name}: patch type requires valid 'peer' argument"
                    ))
                }
            };
            if iface.options.len() > 1 {
                return Err(format!("{name}: patch type takes only a 'peer' argument"));
            }
            if peer == name {
                return Err(format!("{name}: patch peer must not be self"));
            }
            plain("options:peer", peer)?;
            // Its VLAN mode (`tag`, `trunks`, `vlan_mode`) is NORMAL's,
            // as any port's.
            return Ok(format!("patch:{peer}{}", vlan_options(port)?));
        }
        // OVS's words in the row (its netdev class lookup fails so); the
        // log says which types Sluice makes ([`unknown_type_detail`]).
        _ => {
            return Err(format!(
                "could not open network device {name} (Address family not supported by protocol)"
            ))
        }
    };
    spec.push_str(&vlan_options(port)?);
    Ok(spec)
}

/// For the log: why an interface of type `kind` was refused, when it is
/// a type Sluice does not know.
pub fn unknown_type_detail(name: &str, kind: &str) -> Option<String> {
    let known = IFACE_TYPES.contains(&kind) || matches!(kind, "" | "patch" | "dpdk");
    (!known).then(|| {
        format!(
            "{name}: interface type '{kind}' is not one Sluice makes (it makes: {})",
            IFACE_TYPES.join(", ")
        )
    })
}

fn tunnel_spec(name: &str, kind: &str, options: &Smap) -> Result<String, String> {
    if !options.contains_key("remote_ip") {
        return Err(format!(
            "{name}: a {kind} interface needs options:remote_ip"
        ));
    }
    let mut parts = Vec::new();
    for (k, v) in options {
        if !TUNNEL_OPTIONS.contains(&k.as_str()) {
            return Err(format!(
                "{name}: {kind} option '{k}' is not supported by Sluice (it takes: {})",
                TUNNEL_OPTIONS.join(", ")
            ));
        }
        if v.contains([',', ' ']) {
            return Err(format!("{name}: options:{k}={v}: not a value Sluice reads"));
        }
        parts.push(format!("{k}={v}"));
    }
    Ok(format!("{kind}:{}", parts.join(",")))
}

/// `,tag=N`, `,trunks=A;B`, `,vlan_mode=M` from the port's columns.
fn vlan_options(port: &PortCfg) -> Result<String, String> {
    let mut s = String::new();
    if let Some(t) = port.tag {
        s.push_str(&format!(",tag={t}"));
    }
    if !port.trunks.is_empty() {
        let t: Vec<String> = port.trunks.iter().map(i64::to_string).collect();
        s.push_str(&format!(",trunks={}", t.join(";")));
    }
    if let Some(m) = &port.vlan_mode {
        s.push_str(&format!(",vlan_mode={m}"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(kind: &str, options: &[(&str, &str)]) -> IfaceCfg {
        IfaceCfg {
            kind: kind.into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..IfaceCfg::default()
        }
    }

    #[test]
    fn types_as_the_netdev_datapath_gives_them_meaning() {
        let run = Path::new("/run/ovs");
        let plain = PortCfg::default();
        let spec = |name: &str, i: IfaceCfg| port_spec(name, &i, &plain, run);
        assert_eq!(spec("eth1", iface("", &[])).unwrap(), "afpacket:eth1");
        assert_eq!(spec("eth1", iface("system", &[])).unwrap(), "afpacket:eth1");
        assert_eq!(
            spec("br0", iface("internal", &[])).unwrap(),
            "tap:br0,up=off,persist=on"
        );
        assert_eq!(spec("x", iface("afxdp", &[])).unwrap(), "afxdp:x");
        assert_eq!(
            spec("patch-a", iface("patch", &[("peer", "patch-b")])).unwrap(),
            "patch:patch-b"
        );
        assert_eq!(
            spec(
                "vh0",
                iface(
                    "dpdkvhostuserclient",
                    &[("vhost-server-path", "/tmp/q.sock")]
                )
            )
            .unwrap(),
            "vhost-client:/tmp/q.sock"
        );
        assert_eq!(
            spec("vh1", iface("dpdkvhostuser", &[])).unwrap(),
            "vhost:/run/ovs/vh1"
        );
        assert_eq!(
            spec(
                "t",
                iface("vxlan", &[("remote_ip", "10.0.0.2"), ("key", "flow")])
            )
            .unwrap(),
            "vxlan:key=flow,remote_ip=10.0.0.2"
        );
        let mut mtu = iface("", &[]);
        mtu.mtu_request = Some(9000);
        assert_eq!(spec("eth2", mtu).unwrap(), "afpacket:eth2,mtu=9000");
        for (i, says) in [
            (iface("dpdkvhostuserclient", &[]), "vhost-server-path"),
            (iface("geneve", &[]), "remote_ip"),
            (
                iface("vxlan", &[("remote_ip", "1.1.1.1"), ("bogus", "1")]),
                "'bogus'",
            ),
            (
                iface("patch", &[]),
                "patch type requires valid 'peer' argument",
            ),
            (
                iface("patch", &[("peer", "p")]),
                "patch peer must not be self",
            ),
            (
                iface("patch", &[("peer", "x"), ("a", "b")]),
                "takes only a 'peer' argument",
            ),
            (
                iface("stt", &[]),
                "(Address family not supported by protocol)",
            ),
        ] {
            let e = spec("p", i).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn vlan_columns_become_the_specs_options() {
        let port = PortCfg {
            tag: Some(10),
            trunks: vec![20, 30],
            vlan_mode: Some("native-untagged".into()),
            ..PortCfg::default()
        };
        assert_eq!(
            port_spec("eth1", &iface("", &[]), &port, Path::new("/r")).unwrap(),
            "afpacket:eth1,tag=10,trunks=20;30,vlan_mode=native-untagged"
        );
    }
}
