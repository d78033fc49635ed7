//! The built-in workload that `sluice` runs with no arguments: a small
//! data-centre edge rule set and generated traffic from two in-memory
//! replay ports into two null sinks, through the real datapath.

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_packet::build::{Frame, L4};
use sluice_port::null::NullPort;
use sluice_port::replay::{Frames, ReplayPort};
use sluice_port::Port;

/// The workload's rules, in the `ovs-ofctl` flow language.
pub const RULES: &str = "\
# ARP goes to both server-side ports.
table=0,priority=300,arp,actions=output:3,output:4
# No SSH into the server subnets.
table=0,priority=200,tcp,nw_dst=10.0.0.0/16,tp_dst=22,actions=drop
# Web servers behind port 3.
table=0,priority=100,ip,nw_dst=10.0.1.0/24,actions=output:3
# Storage subnet behind a router on port 4: rewrite the next hop, age the packet.
table=0,priority=100,ip,nw_dst=10.0.2.0/24,actions=mod_dl_dst:02:00:00:00:02:01,dec_ttl,output:4
# DNS is redirected to the resolver and forwarded by table 1.
table=0,priority=90,udp,nw_dst=10.0.3.0/24,tp_dst=53,actions=mod_nw_dst:10.0.1.53,resubmit(,1)
table=1,priority=100,ip,nw_dst=10.0.1.53,actions=mod_vlan_vid:53,output:3
# Anything else misses the tables and is dropped (counted as 'table miss').
";

/// Packets each replay port sends.
pub const PACKETS_PER_PORT: u64 = 1_000_000;
/// Distinct flows each replay port cycles through.
pub const DEFAULT_FLOWS: u32 = 1024;

/// The workload's rule set.
pub fn rules() -> RuleSet {
    RuleSet::from_specs(
        &parse_flow_file(RULES, Some("built-in")).expect("built-in rules parse"),
        0,
    )
}

/// The traffic mix: `n` distinct flows (round robin), 64-byte frames.
pub fn frames(seed: u8, n: u32) -> Frames {
    let mut frames = Frames::new();
    for i in 0..n {
        let host = (i % 250) as u8 + 1;
        let sport = 10_000u16.wrapping_add(i as u16);
        let src = [192, 168, seed.wrapping_add((i >> 16) as u8), host];
        let f = match i % 16 {
            0 => Frame::arp(1, [2, 0, 0, 0, seed, host], src, [0; 6], [10, 0, 1, host]),
            1 => Frame::ipv4(
                src,
                [10, 0, 1, host],
                L4::Tcp {
                    src: sport,
                    dst: 22,
                    flags: 0x02,
                },
            ),
            2..=3 => Frame::ipv4(
                src,
                [10, 0, 3, 1],
                L4::Udp {
                    src: sport,
                    dst: 53,
                },
            ),
            4..=6 => Frame::ipv4(
                src,
                [10, 0, 2, host],
                L4::Tcp {
                    src: sport,
                    dst: 3260,
                    flags: 0x10,
                },
            ),
            7 => Frame::ipv4(
                src,
                [172, 16, 0, host],
                L4::Udp {
                    src: sport,
                    dst: 4789,
                },
            ),
            _ => Frame::ipv4(
                src,
                [10, 0, 1, host],
                L4::Tcp {
                    src: sport,
                    dst: 80,
                    flags: 0x10,
                },
            ),
        };
        frames.push(&f.build(), 0);
    }
    frames
}

/// The workload's ports: 1 and 2 send (`flows` flows each), 3 and 4 are sinks.
pub fn ports(packets_per_port: u64, flows: u32) -> Vec<(u32, Box<dyn Port>)> {
    let replay = |seed| {
        let name = format!("replay ({flows} flows)");
        Box::new(ReplayPort::new(name, frames(seed, flows), true).with_limit(packets_per_port))
            as Box<dyn Port>
    };
    vec![
        (1, replay(1)),
        (2, replay(2)),
        (3, Box::new(NullPort::new())),
        (4, Box::new(NullPort::new())),
    ]
}
