//! A port's VLAN mode, as Open vSwitch's `Port` table sets it (`tag`,
//! `trunks`, `vlan_mode`), and what NORMAL does with it: which VLAN a
//! packet received belongs to, whether a port carries a VLAN, and how a
//! packet leaves it (`ofproto/ofproto-dpif-xlate.c`: input_vid_is_valid,
//! xvlan_input_translate, xbundle_includes_vlan, xvlan_output_translate).

use std::fmt;

/// `vlan_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlanMode {
    /// One VLAN, untagged on the wire (`tag=N`).
    Access,
    /// Tagged VLANs (`trunks`, or all); untagged packets are VLAN 0.
    Trunk,
    /// A trunk whose native VLAN (`tag`) arrives untagged and leaves
    /// tagged.
    NativeTagged,
    /// A trunk whose native VLAN arrives and leaves untagged.
    NativeUntagged,
}

impl VlanMode {
    fn name(self) -> &'static str {
        match self {
            VlanMode::Access => "access",
            VlanMode::Trunk => "trunk",
            VlanMode::NativeTagged => "native-tagged",
            VlanMode::NativeUntagged => "native-untagged",
        }
    }
}

/// A port's VLAN configuration. The default is OVS's for a port with no
/// `tag` and no `trunks`: a trunk of every VLAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortVlan {
    /// The mode.
    pub mode: VlanMode,
    /// `tag`: the access or native VLAN (0 for a trunk without one).
    pub tag: u16,
    /// `trunks`: the VLANs a trunk carries, sorted (empty: all).
    pub trunks: Vec<u16>,
}

impl Default for PortVlan {
    fn default() -> Self {
        PortVlan {
            mode: VlanMode::Trunk,
            tag: 0,
            trunks: Vec::new(),
        }
    }
}

/// How a packet leaves a port: untagged or with a VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// Without a tag.
    Untagged,
    /// Tagged with this VLAN id.
    Tagged(u16),
}

impl PortVlan {
    /// Whether the port is plain (a trunk of all VLANs): what a port with
    /// no VLAN options is.
    pub fn is_default(&self) -> bool {
        *self == PortVlan::default()
    }

    /// Takes `tag=N`, `trunks=A;B;C` (or `A:B:C`; OVS's list), and
    /// `vlan_mode=access|trunk|native-tagged|native-untagged` as OVS
    /// does: no mode given, a tag makes an access port and trunks a
    /// trunk. A tag is 0 to 4095; an access port takes no trunks, a
    /// native one needs a tag.
    pub fn parse(opts: &[(&str, &str)]) -> Result<PortVlan, String> {
        let vid = |v: &str, what: &str| -> Result<u16, String> {
            v.parse::<u16>()
                .ok()
                .filter(|n| *n <= 4095)
                .ok_or_else(|| format!("{what}={v}: a VLAN is 0 to 4095"))
        };
        let (mut tag, mut trunks, mut mode) = (None, Vec::new(), None);
        for &(k, v) in opts {
            match k {
                "tag" => tag = Some(vid(v, "tag")?),
                "trunks" => {
                    for t in v.split([';', ':', ' ']).filter(|t| !t.is_empty()) {
                        trunks.push(vid(t, "trunks")?);
                    }
                    if trunks.is_empty() {
                        return Err("trunks= names no VLAN".into());
                    }
                }
                "vlan_mode" => {
                    mode = Some(match v {
                        "access" => VlanMode::Access,
                        "trunk" => VlanMode::Trunk,
                        "native-tagged" => VlanMode::NativeTagged,
                        "native-untagged" => VlanMode::NativeUntagged,
                        _ => {
                            return Err(format!(
                        "vlan_mode={v}: expected access, trunk, native-tagged or native-untagged"
                    ))
                        }
                    })
                }
                _ => {
                    return Err(format!(
                        "'{k}' is not a VLAN option (tag, trunks, vlan_mode)"
                    ))
                }
            }
        }
        trunks.sort_unstable();
        trunks.dedup();
        let mode = match (mode, tag, trunks.is_empty()) {
            (Some(m), _, _) => m,
            // OVS would make this an access port and ignore the trunks
            // (with an error in its log): refused here instead.
            (None, Some(_), false) => {
                return Err(
                    "tag=N with trunks= needs vlan_mode=native-tagged or native-untagged".into(),
                )
            }
            (None, Some(_), true) => VlanMode::Access,
            (None, None, _) => VlanMode::Trunk,
        };
        match mode {
            VlanMode::Trunk if tag.is_some() => {
                return Err(
                    "vlan_mode=trunk takes no tag (a native VLAN: native-tagged or native-untagged)"
                        .into(),
                );
            }
            VlanMode::Access if tag.is_none() => {
                return Err("vlan_mode=access needs tag=N".into());
            }
            VlanMode::Access if !trunks.is_empty() => {
                return Err("an access port (tag=N) takes no trunks=".into());
            }
            VlanMode::NativeTagged | VlanMode::NativeUntagged if tag.is_none() => {
                return Err(format!(
                    "vlan_mode={} needs tag=N, its native VLAN",
                    mode.name()
                ));
            }
            _ => {}
        }
        Ok(PortVlan {
            mode,
            tag: tag.unwrap_or(0),
            trunks,
        })
    }

    /// Whether a trunk carries `vlan` tagged (`xbundle_trunks_vlan`).
    pub fn trunks_vlan(&self, vlan: u16) -> bool {
        self.mode != VlanMode::Access
            && (self.trunks.is_empty() || self.trunks.binary_search(&vlan).is_ok())
    }

    /// The VLAN a packet received with tag `vid` (0: untagged) belongs
    /// to, or `None` when the port does not take it
    /// (`input_vid_is_valid`, `xvlan_input_translate`).
    pub fn input(&self, vid: u16) -> Option<u16> {
        match self.mode {
            VlanMode::Access => (vid == 0).then_some(self.tag),
            VlanMode::NativeTagged | VlanMode::NativeUntagged if vid == 0 => Some(self.tag),
            _ => self.trunks_vlan(vid).then_some(vid),
        }
    }

    /// Whether packets of `vlan` go out of this port
    /// (`xbundle_includes_vlan`).
    pub fn includes(&self, vlan: u16) -> bool {
        match self.mode {
            VlanMode::Access => vlan == self.tag,
            _ => self.trunks_vlan(vlan),
        }
    }

    /// How a packet of `vlan` leaves (`xvlan_output_translate`; VLAN 0
    /// is no tag).
    pub fn egress(&self, vlan: u16) -> Egress {
        match self.mode {
            VlanMode::Access => Egress::Untagged,
            VlanMode::NativeUntagged if vlan == self.tag => Egress::Untagged,
            _ if vlan == 0 => Egress::Untagged,
            _ => Egress::Tagged(vlan),
        }
    }
}

impl fmt::Display for PortVlan {
    /// As the options are written (nothing for the default).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.mode != VlanMode::Trunk {
            parts.push(format!("tag={}", self.tag));
        }
        if !self.trunks.is_empty() {
            let t: Vec<String> = self.trunks.iter().map(u16::to_string).collect();
            parts.push(format!("trunks={}", t.join(";")));
        }
        if matches!(self.mode, VlanMode::NativeTagged | VlanMode::NativeUntagged) {
            parts.push(format!("vlan_mode={}", self.mode.name()));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[(&str, &str)]) -> PortVlan {
        PortVlan::parse(s).unwrap()
    }

    #[test]
    fn modes_as_ovs_sets_them() {
        let access = p(&[("tag", "10")]);
        assert_eq!(access.mode, VlanMode::Access);
        assert_eq!(access.input(0), Some(10));
        assert_eq!(access.input(10), None, "a tagged packet on an access port");
        assert!(access.includes(10) && !access.includes(20));
        assert_eq!(access.egress(10), Egress::Untagged);

        let trunk = p(&[("trunks", "10;20")]);
        assert_eq!(trunk.mode, VlanMode::Trunk);
        assert_eq!(trunk.input(10), Some(10));
        assert_eq!(trunk.input(30), None);
        assert_eq!(trunk.input(0), None, "untagged is VLAN 0, not trunked");
        assert_eq!(trunk.egress(20), Egress::Tagged(20));

        let all = PortVlan::default();
        assert_eq!(all.input(0), Some(0));
        assert_eq!(all.input(4000), Some(4000));
        assert_eq!(all.egress(0), Egress::Untagged);

        let nu = p(&[
            ("tag", "5"),
            ("trunks", "5;6"),
            ("vlan_mode", "native-untagged"),
        ]);
        assert_eq!(nu.input(0), Some(5));
        assert_eq!(nu.input(6), Some(6));
        assert_eq!(nu.egress(5), Egress::Untagged);
        assert_eq!(nu.egress(6), Egress::Tagged(6));
        let nt = p(&[("tag", "5"), ("vlan_mode", "native-tagged")]);
        assert_eq!(nt.input(0), Some(5));
        assert_eq!(nt.egress(5), Egress::Tagged(5));
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            &[("tag", "4096")][..],
            &[("vlan_mode", "access")],
            &[("tag", "3"), ("trunks", "4"), ("vlan_mode", "access")],
            &[("vlan_mode", "native-tagged")],
            &[("vlan_mode", "hybrid")],
            &[("trunks", "")],
            &[("colour", "blue")],
            &[("tag", "3"), ("trunks", "4")],
            &[("tag", "3"), ("vlan_mode", "trunk")],
        ] {
            assert!(PortVlan::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn printed_back_as_written() {
        for s in [
            vec![("tag", "10")],
            vec![("trunks", "10;20")],
            vec![
                ("tag", "5"),
                ("trunks", "5;6"),
                ("vlan_mode", "native-untagged"),
            ],
            vec![("tag", "5"), ("vlan_mode", "native-tagged")],
        ] {
            let v = p(&s);
            let text = v.to_string();
            let again: Vec<(&str, &str)> = text
                .split(',')
                .map(|kv| kv.split_once('=').unwrap())
                .collect();
            assert_eq!(p(&again), v, "{text}");
        }
        assert_eq!(PortVlan::default().to_string(), "");
    }
}
