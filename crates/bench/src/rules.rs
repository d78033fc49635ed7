//! The benchmark rule sets. Traffic enters on port 1; port 2 is the sink.
//! The tunnel sets add a VXLAN port 10 (VNI 42) between them: to
//! 10.90.0.2 through port 2 as the underlay (`vxlan-encap`), or from it
//! through port 1 (`vxlan-decap`, the traffic encapsulated as that peer
//! sends it), the underlay's address 10.90.0.1.

use std::sync::Arc;

use sluice_classifier::group::{Bucket, Group, GroupType, GROUP_ANY, PORT_ANY};
use sluice_classifier::meter::{flags as meter_flags, BandKind, Meter};
use sluice_classifier::tunnel::{Tunnels, Underlay};
use sluice_classifier::{Action, Rule, RuleSet};
use sluice_packet::tunnel::{
    push, udp_src_port, GeneveOpts, HeaderParams, TlvMap, TnlHeader, TunnelConfig, TunnelKind,
};
use sluice_port::replay::Frames;

/// The tunnel sets' underlay: the switch's address and Ethernet address,
/// and the peer's.
const UNDER_IP: [u8; 4] = [10, 90, 0, 1];
const UNDER_MAC: [u8; 6] = [2, 0, 10, 90, 0, 1];
const PEER_IP: [u8; 4] = [10, 90, 0, 2];
const PEER_MAC: [u8; 6] = [2, 0, 10, 90, 0, 2];
/// The tunnel port of the tunnel sets.
pub const TUNNEL_PORT: u32 = 10;

/// A benchmark rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSetKind {
    /// `in_port=1,actions=output:2`.
    PortForward,
    /// `patch-forward`: port forwarding across two bridges of one
    /// datapath: `in_port=1,actions=output:3` on the first, port 3 a patch
    /// port to the second's port 1, `in_port=1,actions=output:2` there
    /// (the sink is the second bridge's port 2).
    PatchForward,
    /// `table-forward`: patch-forward's two rules in one bridge,
    /// `in_port=1,actions=resubmit(,1)` and in table 1
    /// `in_port=1,actions=output:2`: the same lookups and rules without
    /// the crossing (what the crossing adds is patch-forward's cost over
    /// this one's).
    TableForward,
    /// Routes by destination prefix (/8, /12, /16, /20, /24), longest first.
    L3,
    /// Prefixes combined with L4 protocol and ports: several masks.
    L3L4,
    /// `routes:N`: N-1 host routes (/32) to addresses the generated
    /// traffic never uses (30.0.0.0/8) and a catch-all at priority 0: a
    /// large table every packet misses but for its last rule.
    Routes(u32),
    /// `prefixes:N`: N routes into the traffic's 20.0.0.0/8 over 20 prefix
    /// lengths (/13 to /32, longest first by priority) and a catch-all: a
    /// large table whose rules the traffic hits, over 20 masks.
    Prefixes(u32),
    /// `select-group`: port forwarding through a select group of two
    /// buckets, both to port 2 (the bucket chosen per flow by hash).
    SelectGroup,
    /// `meter`: port forwarding through a meter whose rate (4·10⁹
    /// packets/s) nothing reaches, so every packet pays the meter and
    /// passes.
    Meter,
    /// `vxlan-encap`: `in_port=1,actions=output:10`, port 10 a VXLAN port
    /// whose underlay is port 2 (the neighbour known).
    VxlanEncap,
    /// `vxlan-decap`: the traffic arrives in VXLAN on underlay port 1 and
    /// leaves by `in_port=10,actions=output:2`.
    VxlanDecap,
    /// `ct-firewall`: a stateful firewall's pipeline: every IP packet
    /// through the connection tracker and on into table 1, where a new
    /// connection is committed and an established one's packets go to
    /// port 2. The profiles' UDP is never replied to, so (as OVS 3.1
    /// tracks UDP) every packet is `+new` and committed again: two
    /// datapath passes and two tracker lookups per packet. (Before
    /// 2026-12-06 Sluice took a UDP connection's second packet as
    /// established, unlike OVS.)
    CtFirewall,
    /// `ct-established`: `ct-firewall`'s rules, the traffic's flows in
    /// pairs, each odd flow the reply of the even one before it
    /// ([`with_replies`]): every connection is answered, so after each
    /// one's first two packets every packet is `+est` (as OVS tracks UDP
    /// too). The established packet's cost, against `port-forward`'s.
    CtEstablished,
    /// `normal`: one rule, `priority=0,actions=NORMAL` (OVS's default
    /// bridge); each flow of the traffic from its own source MAC
    /// ([`with_flow_macs`]), flooded to port 2 (no destination is ever
    /// learned: port 2 only sends).
    Normal,
}

/// Each frame from a source MAC of its own flow: 02:00 and its IPv4
/// source address (the profiles' flows each have their own), so that
/// NORMAL learns one MAC per flow.
pub fn with_flow_macs(frames: &Frames) -> Frames {
    let mut out = Frames::new();
    for i in 0..frames.len() {
        let mut f = frames.get(i).to_vec();
        if f.len() >= 30 && f[12..14] == [0x08, 0x00] {
            let ip = [f[26], f[27], f[28], f[29]];
            f[6..12].copy_from_slice(&[0x02, 0x00, ip[0], ip[1], ip[2], ip[3]]);
        }
        out.push(&f, frames.timestamp(i));
    }
    out
}

/// The profile's flows in pairs ([`crate::profile::flow_frame`]'s: flow
/// `i` from 10.0.0.0/8 plus `i`): each frame of an odd flow becomes the
/// reply of the even flow before it, its addresses and ports swapped, so
/// that a connection tracker sees both directions of every connection.
/// Frames of other shapes pass as they are.
pub fn with_replies(frames: &Frames) -> Frames {
    let mut out = Frames::new();
    for i in 0..frames.len() {
        let f = frames.get(i);
        let is_flow = f.len() >= 34 && f[12..14] == [0x08, 0x00] && f[26] == 0x0a;
        let flow = u64::from(u32::from_be_bytes([0, f[27], f[28], f[29]]));
        if is_flow && flow % 2 == 1 {
            out.push(
                &crate::profile::reply_frame(flow - 1, f.len()),
                frames.timestamp(i),
            );
        } else {
            out.push(f, frames.timestamp(i));
        }
    }
    out
}

impl RuleSetKind {
    /// Every fixed kind (the parameterised ones are for large tables).
    pub const ALL: [RuleSetKind; 3] =
        [RuleSetKind::PortForward, RuleSetKind::L3, RuleSetKind::L3L4];

    /// Short name, as `--rules` takes it.
    pub fn name(self) -> String {
        match self {
            RuleSetKind::PortForward => "port-forward".into(),
            RuleSetKind::PatchForward => "patch-forward".into(),
            RuleSetKind::TableForward => "table-forward".into(),
            RuleSetKind::L3 => "l3".into(),
            RuleSetKind::L3L4 => "l3l4".into(),
            RuleSetKind::Routes(n) => format!("routes:{n}"),
            RuleSetKind::Prefixes(n) => format!("prefixes:{n}"),
            RuleSetKind::SelectGroup => "select-group".into(),
            RuleSetKind::Meter => "meter".into(),
            RuleSetKind::VxlanEncap => "vxlan-encap".into(),
            RuleSetKind::VxlanDecap => "vxlan-decap".into(),
            RuleSetKind::CtFirewall => "ct-firewall".into(),
            RuleSetKind::CtEstablished => "ct-established".into(),
            RuleSetKind::Normal => "normal".into(),
        }
    }

    /// The second bridge's rules, for the sets that cross a patch port.
    pub fn second_bridge(self) -> Option<&'static str> {
        (self == RuleSetKind::PatchForward).then_some("in_port=1,actions=output:2\n")
    }

    /// The datapath number of the port the traffic leaves by (the null
    /// sink).
    pub fn sink_port(self) -> u32 {
        match self {
            RuleSetKind::PatchForward => sluice_classifier::xlate::dp_port(1, 2),
            _ => 2,
        }
    }

    /// The patch ports of the first bridge (index 0) and of the second.
    pub fn patch_ports(self) -> [Vec<sluice_classifier::PatchPort>; 2] {
        use sluice_classifier::PatchPort;
        if self != RuleSetKind::PatchForward {
            return [Vec::new(), Vec::new()];
        }
        [
            vec![PatchPort {
                port: 3,
                peer: 1,
                peer_port: 1,
            }],
            vec![PatchPort {
                port: 1,
                peer: 0,
                peer_port: 3,
            }],
        ]
    }

    /// The tunnel port's configuration, for the tunnel sets.
    pub fn tunnel(self) -> Option<TunnelConfig> {
        matches!(self, RuleSetKind::VxlanEncap | RuleSetKind::VxlanDecap).then(|| {
            let mut c = TunnelConfig::new(
                TunnelKind::Vxlan,
                sluice_packet::tunnel::Endpoint::Fixed(PEER_IP.into()),
            );
            c.in_key = Some(sluice_packet::tunnel::TunnelKey::Fixed(42));
            c.out_key = c.in_key;
            c
        })
    }

    /// The traffic the set takes, made from the profile's frames: as they
    /// are, or for `vxlan-decap` each in the VXLAN header the peer would
    /// put on it (one UDP source port per inner flow).
    pub fn traffic(self, frames: &Frames) -> Result<Frames, String> {
        if self == RuleSetKind::Normal {
            return Ok(with_flow_macs(frames));
        }
        if self == RuleSetKind::CtEstablished {
            return Ok(with_replies(frames));
        }
        if self != RuleSetKind::VxlanDecap {
            return Ok(frames.clone());
        }
        let h = TnlHeader::build(&HeaderParams {
            kind: TunnelKind::Vxlan,
            eth_src: PEER_MAC,
            eth_dst: UNDER_MAC,
            ip_src: PEER_IP.into(),
            ip_dst: UNDER_IP.into(),
            tos: 0,
            ttl: 64,
            df: true,
            key: Some(42),
            dst_port: TunnelKind::Vxlan.default_dst_port(),
            csum: false,
            opts: GeneveOpts::default(),
            oam: false,
        });
        let mut pool = sluice_packet::PacketPool::new(2, 2048).map_err(|e| format!("{e:?}"))?;
        let mut out = Frames::new();
        for i in 0..frames.len() {
            let inner = frames.get(i);
            let mut p = pool
                .alloc_from(inner)
                .ok_or("a frame too long to encapsulate")?;
            let sport = udp_src_port(sluice_port::replay::rss_hash(inner));
            if !push(&mut p, &h, sport) {
                return Err("a frame too long to encapsulate".into());
            }
            out.push(p.data(), frames.timestamp(i));
            pool.free(p);
        }
        Ok(out)
    }

    /// Whether the rules need a group, a meter or a tunnel port
    /// ([`Self::install`]), which a flow file cannot hold.
    pub fn needs_install(self) -> bool {
        matches!(
            self,
            RuleSetKind::SelectGroup
                | RuleSetKind::Meter
                | RuleSetKind::VxlanEncap
                | RuleSetKind::VxlanDecap
        )
    }

    /// Adds the groups and meters the rules use.
    pub fn install(self, rules: &mut RuleSet) -> Result<(), String> {
        match self {
            RuleSetKind::SelectGroup => {
                let bucket = || Bucket {
                    weight: 1,
                    watch_port: PORT_ANY,
                    watch_group: GROUP_ANY,
                    actions: vec![Action::Output(2)],
                    counter: Arc::new(Rule::counter()),
                };
                rules
                    .add_group(Group {
                        id: 1,
                        kind: GroupType::Select,
                        buckets: vec![bucket(), bucket()],
                        of_buckets: None,
                        counter: Arc::new(Rule::counter()),
                        created_us: 0,
                        slots: Default::default(),
                        selection: Default::default(),
                    })
                    .map_err(|e| format!("select-group: {e:?}"))
            }
            RuleSetKind::Meter => {
                let m = Meter::new(
                    1,
                    meter_flags::PKTPS,
                    &[(BandKind::Drop, 4_000_000_000, 0)],
                    0,
                )
                .map_err(|e| format!("meter: {e:?}"))?;
                rules.add_meter(m).map_err(|e| format!("meter: {e:?}"))
            }
            RuleSetKind::VxlanEncap | RuleSetKind::VxlanDecap => {
                let underlay = if self == RuleSetKind::VxlanEncap {
                    2
                } else {
                    1
                };
                let t = Tunnels::new(
                    vec![(TUNNEL_PORT, self.tunnel().expect("a tunnel set"))],
                    vec![Underlay {
                        ofport: underlay,
                        ip: UNDER_IP.into(),
                        prefix: 24,
                        mac: UNDER_MAC,
                    }],
                    TlvMap::default(),
                )?;
                t.set_neighbour(underlay, PEER_IP.into(), PEER_MAC)?;
                rules.set_tunnels(Some(Arc::new(t)));
                Ok(())
            }
            RuleSetKind::PatchForward => {
                let [first, _] = self.patch_ports();
                rules.set_patch_ports(first);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The rules, in the `ovs-ofctl` flow language (the first bridge's).
    pub fn flows(self) -> String {
        match self {
            RuleSetKind::PortForward => "in_port=1,actions=output:2\n".to_string(),
            RuleSetKind::PatchForward => "in_port=1,actions=output:3\n".to_string(),
            RuleSetKind::TableForward => {
                "in_port=1,actions=resubmit(,1)\ntable=1,in_port=1,actions=output:2\n".to_string()
            }
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
            RuleSetKind::Routes(n) => {
                let mut s = String::with_capacity(n as usize * 48);
                for i in 0..n.saturating_sub(1) {
                    let a = std::net::Ipv4Addr::from(0x1e00_0000 | (i & 0x00ff_ffff));
                    s += &format!("priority=100,ip,nw_dst={a},actions=output:2\n");
                }
                s + "priority=0,actions=output:2\n"
            }
            RuleSetKind::Prefixes(n) => prefix_routes(n),
            RuleSetKind::SelectGroup => "in_port=1,actions=group:1\n".to_string(),
            RuleSetKind::Meter => "in_port=1,actions=meter:1,output:2\n".to_string(),
            RuleSetKind::VxlanEncap => "in_port=1,actions=output:10\n".to_string(),
            RuleSetKind::VxlanDecap => "in_port=10,actions=output:2\n".to_string(),
            RuleSetKind::CtFirewall | RuleSetKind::CtEstablished => "\
table=0,priority=100,ip,in_port=1,actions=ct(table=1,zone=1)
table=0,priority=0,actions=drop
table=1,priority=100,ct_state=+trk+new,ip,actions=ct(commit,zone=1),output:2
table=1,priority=100,ct_state=+trk+est,ip,actions=output:2
table=1,priority=0,actions=drop
"
            .to_string(),
            RuleSetKind::Normal => "priority=0,actions=NORMAL\n".to_string(),
        }
    }
}

/// `n - 1` distinct routes into 20.0.0.0/8 over the lengths 13..=32 (each
/// length at most half of its prefixes, so that shorter ones are not all
/// hit; what a length cannot take goes to the longer ones), priority 10 per
/// bit of length, then the catch-all.
fn prefix_routes(n: u32) -> String {
    let mut rng = crate::profile::Rng::new(16);
    let mut s = String::with_capacity(n as usize * 56);
    let mut left = n.saturating_sub(1) as u64;
    for len in 13..=32u32 {
        let room = 1u64 << (len - 9);
        let take = (left / u64::from(33 - len)).min(room);
        left -= take;
        let mut seen = std::collections::HashSet::new();
        while (seen.len() as u64) < take {
            let host = rng.below(1u64 << (len - 8)) as u32;
            if seen.insert(host) {
                let a = std::net::Ipv4Addr::from(0x1400_0000 | (host << (32 - len)));
                s += &format!(
                    "priority={},ip,nw_dst={a}/{len},actions=output:2\n",
                    len * 10
                );
            }
        }
    }
    s + "priority=0,actions=output:2\n"
}

impl std::str::FromStr for RuleSetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let sized = |n: &str, f: fn(u32) -> RuleSetKind| {
            n.parse::<u32>()
                .ok()
                .filter(|&n| (1..=16_000_000).contains(&n))
                .map(f)
                .ok_or_else(|| format!("'{s}': the number of rules is 1 to 16000000"))
        };
        if let Some(n) = s.strip_prefix("routes:") {
            return sized(n, RuleSetKind::Routes);
        }
        if let Some(n) = s.strip_prefix("prefixes:") {
            return sized(n, RuleSetKind::Prefixes);
        }
        RuleSetKind::ALL
            .into_iter()
            .chain([
                RuleSetKind::PatchForward,
                RuleSetKind::TableForward,
                RuleSetKind::SelectGroup,
                RuleSetKind::Meter,
                RuleSetKind::VxlanEncap,
                RuleSetKind::VxlanDecap,
                RuleSetKind::CtFirewall,
                RuleSetKind::CtEstablished,
                RuleSetKind::Normal,
            ])
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("'{s}': expected port-forward, patch-forward, table-forward, l3, l3l4, select-group, meter, vxlan-encap, vxlan-decap, ct-firewall, ct-established, normal, routes:N or prefixes:N")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse_flow_file;

    #[test]
    fn rule_sets_parse() {
        for k in RuleSetKind::ALL {
            let specs = parse_flow_file(&k.flows(), Some(&k.name())).unwrap();
            assert!(!specs.is_empty());
            assert_eq!(k.name().parse::<RuleSetKind>().unwrap(), k);
        }
    }

    #[test]
    fn ct_established_traffic_is_connections_both_ways() {
        use crate::profile::{flow_frame, flows_profile, Distribution};
        let k: RuleSetKind = "ct-established".parse().unwrap();
        assert_eq!(k.flows(), RuleSetKind::CtFirewall.flows());
        let frames = k
            .traffic(&flows_profile(8, Distribution::RoundRobin, 16, 64, 1))
            .unwrap();
        assert_eq!(frames.len(), 16);
        for i in 0..16 {
            let f = frames.get(i);
            assert_eq!(f.len(), 64);
            let flow = (i % 8) as u64;
            if flow.is_multiple_of(2) {
                assert_eq!(f, &flow_frame(flow, 64)[..]);
            } else {
                // The addresses and ports of the flow before, swapped.
                let fwd = flow_frame(flow - 1, 64);
                assert_eq!(f[26..30], fwd[30..34]);
                assert_eq!(f[30..34], fwd[26..30]);
                assert_eq!(f[34..36], fwd[36..38]);
                assert_eq!(f[36..38], fwd[34..36]);
            }
        }
    }

    #[test]
    fn large_rule_sets() {
        for k in [RuleSetKind::Routes(1000), RuleSetKind::Prefixes(1000)] {
            let specs = parse_flow_file(&k.flows(), None).unwrap();
            assert_eq!(specs.len(), 1000, "{}", k.name());
            assert_eq!(k.name().parse::<RuleSetKind>().unwrap(), k);
        }
        let masks: std::collections::HashSet<_> =
            parse_flow_file(&RuleSetKind::Prefixes(1000).flows(), None)
                .unwrap()
                .iter()
                .map(|s| s.matcher.mask)
                .collect();
        assert_eq!(masks.len(), 21, "20 prefix lengths and the catch-all");
        assert_eq!(
            RuleSetKind::Routes(1).flows(),
            "priority=0,actions=output:2\n"
        );
        assert!("routes:0".parse::<RuleSetKind>().is_err());
        assert!("prefixes:x".parse::<RuleSetKind>().is_err());
    }
}
