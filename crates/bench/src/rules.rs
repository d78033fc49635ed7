//! The benchmark rule sets. Traffic enters on port 1; port 2 is the sink.

/// A benchmark rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSetKind {
    /// `in_port=1,actions=output:2`.
    PortForward,
    /// Routes by destination prefix (/8, /12, /16, /20, /24), longest first.
    L3,
    /// Prefixes combined with L4 protocol and ports: several masks.
    L3L4,
}

impl RuleSetKind {
    /// Every kind.
    pub const ALL: [RuleSetKind; 3] =
        [RuleSetKind::PortForward, RuleSetKind::L3, RuleSetKind::L3L4];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            RuleSetKind::PortForward => "port-forward",
            RuleSetKind::L3 => "l3",
            RuleSetKind::L3L4 => "l3l4",
        }
    }

    /// The rules, in the `ovs-ofctl` flow language.
    pub fn flows(self) -> String {
        match self {
            RuleSetKind::PortForward => "in_port=1,actions=output:2\n".to_string(),
            RuleSetKind::L3 => {
                let mut s = String::new();
                // Longest prefix first by priority; a few specific routes per length.
                for (len, prio) in [(24, 240), (20, 200), (16, 160), (12, 120)] {
                    for k in 0..4u32 {
                        let net = 0x1400_0000u32 | (k << (32 - len)) | (k << 16);
                        let net = net & (u32::MAX << (32 - len));
                        s += &format!(
                            "priority={prio},ip,nw_dst={}/{len},actions=output:2\n",
                            std::net::Ipv4Addr::from(net)
                        );
                    }
                }
                s += "priority=80,ip,nw_dst=20.0.0.0/8,actions=output:2\n";
                s += "priority=0,actions=drop\n";
                s
            }
            RuleSetKind::L3L4 => {
                let mut s = String::new();
                s += "priority=300,udp,tp_dst=22,actions=drop\n";
                s += "priority=290,udp,nw_dst=20.0.0.0/16,tp_dst=53,actions=output:2\n";
                s += "priority=280,udp,nw_dst=20.128.0.0/9,tp_dst=80,actions=output:2\n";
                s += "priority=270,udp,nw_dst=20.0.0.0/10,tp_dst=443,actions=output:2\n";
                s += "priority=260,udp,tp_dst=0x1000/0xf000,actions=output:2\n";
                s += "priority=250,udp,tp_src=1024/0xfc00,nw_dst=20.64.0.0/11,actions=output:2\n";
                s += "priority=240,udp,nw_dst=20.32.0.0/12,tp_dst=123,actions=output:2\n";
                s += "priority=200,ip,nw_dst=20.0.0.0/8,actions=output:2\n";
                s += "priority=0,actions=drop\n";
                s
            }
        }
    }
}

impl std::str::FromStr for RuleSetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RuleSetKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("'{s}': expected port-forward, l3 or l3l4"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse_flow_file;

    #[test]
    fn rule_sets_parse() {
        for k in RuleSetKind::ALL {
            let specs = parse_flow_file(&k.flows(), Some(k.name())).unwrap();
            assert!(!specs.is_empty());
            assert_eq!(k.name().parse::<RuleSetKind>().unwrap(), k);
        }
    }
}
