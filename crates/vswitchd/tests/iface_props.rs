//! An `Interface` row's columns, whatever they hold (names, paths and
//! options from the database: anything a client wrote), become either a
//! refusal or a port spec that Sluice's own parser reads back as exactly
//! that interface: no name or option smuggles in options of its own
//! (`eth1,tag=5`), no vhost-user socket leaves the run directory.

use std::path::Path;

use proptest::prelude::*;
use sluice_port::PortSpec;
use sluice_vswitchd::desired::{IfaceCfg, PortCfg};
use sluice_vswitchd::iface::port_spec;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9]{0,14}",
        "[a-z0-9,=/:. _-]{0,20}",
        "/tmp/[a-z0-9,=._-]{1,12}",
        // Attempts to add an option of its own.
        "[a-z/]{1,5},(tag|mtu|vnet|up|trunks|vlan_mode|ip)=(off|on|[0-9]{1,4}|access|1;2)",
        any::<String>(),
    ]
}

fn kind() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("system".to_string()),
        Just("internal".to_string()),
        Just("tap".to_string()),
        Just("afxdp".to_string()),
        Just("dpdkvhostuser".to_string()),
        Just("dpdkvhostuserclient".to_string()),
        Just("vxlan".to_string()),
        Just("geneve".to_string()),
        Just("gre".to_string()),
        "[a-z]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_row_is_refused_or_read_back_as_itself(
        name in text(),
        kind in kind(),
        opt_key in prop_oneof![Just("vhost-server-path".to_string()), Just("remote_ip".to_string()), Just("key".to_string()), "[a-z_]{1,8}"],
        opt_val in text(),
        mtu in prop::option::of(-5i64..70000),
        tag in prop::option::of(0i64..5000),
    ) {
        let iface = IfaceCfg {
            kind: kind.clone(),
            options: [(opt_key.clone(), opt_val.clone())].into_iter().collect(),
            mtu_request: mtu,
            ..IfaceCfg::default()
        };
        let port = PortCfg { tag, ..PortCfg::default() };
        let run = Path::new("/run/ovs");
        let Ok(spec) = port_spec(&name, &iface, &port, run) else {
            return Ok(());
        };
        // What the switch would open: the parser takes it or says why
        // (an MTU or a tag out of range is its to refuse), never
        // something else than the row.
        let Ok(parsed) = spec.parse::<PortSpec>() else {
            return Ok(());
        };
        let (base, vlan) = parsed.split_vlan();
        if let Some(v) = vlan {
            prop_assert_eq!(Some(i64::from(v.tag)), tag, "{} -> {:?}", spec, parsed);
        } else {
            prop_assert!(tag.is_none() || tag == Some(0), "{} lost its tag", spec);
        }
        match kind.as_str() {
            "" | "system" | "afxdp" => prop_assert_eq!(base.own_ifname(), Some(name.as_str()), "{}", spec),
            "internal" | "tap" => {
                let is_tap = matches!(base, PortSpec::Tap { ifname, up: false, .. } if *ifname == name);
                prop_assert!(is_tap, "{} -> {:?}", spec, parsed);
            }
            "dpdkvhostuser" => {
                let ok = matches!(base, PortSpec::Vhost { path, server: true } if path.parent() == Some(run) && path.file_name().is_some_and(|f| f == name.as_str()));
                prop_assert!(ok, "{} -> {:?}", spec, parsed);
            }
            "dpdkvhostuserclient" => {
                let ok = matches!(base, PortSpec::Vhost { path, server: false } if path == Path::new(&opt_val));
                prop_assert!(ok, "{} -> {:?}", spec, parsed);
            }
            "vxlan" | "geneve" | "gre" => prop_assert!(matches!(base, PortSpec::Tunnel(_)), "{} -> {:?}", spec, parsed),
            other => prop_assert!(false, "type {:?} gave a spec: {}", other, spec),
        }
    }
}
