//! Tunnels against Open vSwitch 3.1's native tunnelling (Debian's
//! ovs-vswitchd in a private run directory, dummy datapath and ports):
//! the same frames sent into a VXLAN, Geneve or GRE port of both switches
//! come out of their underlays byte for byte the same, but for the UDP
//! source port (each switch hashes the inner flow its own way; Sluice's
//! must be one per inner flow) and the UDP checksum that covers it; and
//! each switch decapsulates the other's frames back into the originals.
//! Over IPv4 and IPv6 underlays.

mod support;

use std::net::IpAddr;
use std::path::Path;

use sluice_packet::build::{Frame, L4};
use support::*;

const UNDERLAY_MAC: &str = "02:00:0a:5f:00:01";
const PEER_MAC: &str = "02:00:0a:5f:00:02";

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(p, 16).unwrap();
    }
    m
}

/// Frames of several inner flows and kinds: UDP and TCP flows, ICMP,
/// ECN-capable and congestion-marked IPv4, IPv6, ARP; each flow twice.
fn inner_frames() -> Vec<Vec<u8>> {
    let (a, b) = ([192, 168, 95, 1], [192, 168, 95, 2]);
    let mut v = Vec::new();
    for i in 0..3u16 {
        v.push(
            Frame::ipv4(
                a,
                b,
                L4::Udp {
                    src: 1000 + i,
                    dst: 2000,
                },
            )
            .payload(b"udp flow")
            .build(),
        );
    }
    v.push(
        Frame::ipv4(
            a,
            b,
            L4::Tcp {
                src: 40000,
                dst: 80,
                flags: 0x18,
            },
        )
        .payload(&[7; 300])
        .build(),
    );
    v.push(
        Frame::ipv4(a, b, L4::Icmp { ty: 8, code: 0 })
            .payload(&[1; 56])
            .build(),
    );
    v.push(
        Frame::ipv4(a, b, L4::Udp { src: 9, dst: 9 })
            .tos(0xb9)
            .build(),
    );
    v.push(
        Frame::ipv4(a, b, L4::Udp { src: 9, dst: 10 })
            .tos(0x03)
            .build(),
    );
    v.push(
        Frame::ipv6(
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            L4::Udp { src: 5, dst: 6 },
        )
        .build(),
    );
    v.push(Frame::arp(1, [2, 0, 0, 0, 0, 1], a, [0; 6], b).build());
    let again = v.clone();
    v.extend(again);
    v
}

fn frames_of(p: &Path) -> Vec<Vec<u8>> {
    match std::fs::read(p) {
        Ok(b) => sluice_port::pcap::read_all(&b)
            .unwrap()
            .into_iter()
            .map(|r| r.data)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Where a frame's outer UDP header starts (after IPv4 or IPv6).
fn l4_at(f: &[u8]) -> usize {
    if f[12..14] == [0x86, 0xdd] {
        54
    } else {
        34
    }
}

/// A frame with the bytes the switches may choose differently zeroed:
/// the UDP source port, and the UDP checksum (which covers it) but for
/// whether there is one.
fn comparable(f: &[u8], udp: bool) -> Vec<u8> {
    let mut f = f.to_vec();
    let l4 = l4_at(&f);
    if udp && f.len() > l4 + 8 {
        f[l4..l4 + 2].fill(0);
        let present = f[l4 + 6..l4 + 8] != [0, 0];
        f[l4 + 6..l4 + 8].fill(if present { 0xff } else { 0 });
    }
    f
}

/// One end of the underlay.
struct Side {
    ip: IpAddr,
    mac: [u8; 6],
    peer_ip: IpAddr,
    peer_mac: [u8; 6],
}

impl Side {
    /// The underlay port spec: receives `rx`, writes `tx`.
    fn underlay(&self, d: &Path, rx: &str, tx: &str) -> String {
        let prefix = if self.ip.is_ipv4() { 24 } else { 64 };
        let m = self
            .mac
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        format!(
            "1=pcap:rx={},tx={},ip={}/{prefix},mac={m}",
            d.join(rx).display(),
            d.join(tx).display(),
            self.ip
        )
    }

    /// The peer's ARP reply or neighbour advertisement, which teaches
    /// Sluice the next hop.
    fn arp_reply(&self) -> Vec<u8> {
        match (self.ip, self.peer_ip) {
            (IpAddr::V4(me), IpAddr::V4(peer)) => {
                Frame::arp(2, self.peer_mac, peer.octets(), self.mac, me.octets())
                    .macs(self.peer_mac, self.mac)
                    .build()
            }
            (IpAddr::V6(me), IpAddr::V6(peer)) => {
                // Target, then a target link-layer address option.
                let mut body = peer.octets().to_vec();
                body.extend_from_slice(&[2, 1]);
                body.extend_from_slice(&self.peer_mac);
                Frame::ipv6(peer.octets(), me.octets(), L4::Icmp { ty: 136, code: 0 })
                    .payload(&body)
                    .ttl(255)
                    .macs(self.peer_mac, self.mac)
                    .build()
            }
            _ => unreachable!("one IP version a side"),
        }
    }
}

/// The underlay addresses swapped: the same set-up seen from the peer.
fn swap(s: &str) -> String {
    s.replace("10.95.0.2", "PEER")
        .replace("10.95.0.1", "10.95.0.2")
        .replace("PEER", "10.95.0.1")
        .replace("fd95::2", "PEER")
        .replace("fd95::1", "fd95::2")
        .replace("PEER", "fd95::1")
}

/// Sluice on `side` encapsulating `in.pcap` (port 3) into port 10:
/// the frames out of its underlay, and its report.
fn sluice_encap(
    d: &Path,
    tag: &str,
    side: &Side,
    rules: &str,
    spec: &str,
    extra: &str,
) -> (Vec<Vec<u8>>, serde_json::Value) {
    let arp = format!("arp-{tag}.pcap");
    let out = format!("out-{tag}.pcap");
    std::fs::write(
        d.join(&arp),
        sluice_port::pcap::write_all(&[side.arp_reply()]),
    )
    .unwrap();
    let r = run_to_end(
        None,
        rules,
        &[
            &side.underlay(d, &arp, &out),
            &format!("3=pcap:rx={}", d.join("in.pcap").display()),
            &format!("10={spec}"),
        ],
        extra,
        d,
    );
    (frames_of(&d.join(out)), r)
}

fn sorted_raw(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}

fn compare(case: &str, ovs_opts: &str, sluice_spec: &str, flows_in: &str, flows_out: &str) {
    compare_with(case, "", ovs_opts, sluice_spec, flows_in, flows_out)
}

/// [`compare`] with Geneve options mapped to fields (`tlv`, as
/// `ovs-ofctl add-tlv-map` takes it) in both switches.
fn compare_with(
    case: &str,
    tlv: &str,
    ovs_opts: &str,
    sluice_spec: &str,
    flows_in: &str,
    flows_out: &str,
) {
    assert!(
        sh_status("command -v ovs-vswitchd").status.success(),
        "Open vSwitch is missing: run scripts/setup"
    );
    let udp = !sluice_spec.starts_with("gre:");
    let v6 = sluice_spec.contains("fd95::") || flows_in.contains("fd95::");
    let (near_ip, far_ip): (IpAddr, IpAddr) = if v6 {
        ("fd95::1".parse().unwrap(), "fd95::2".parse().unwrap())
    } else {
        ("10.95.0.1".parse().unwrap(), "10.95.0.2".parse().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ovs = Ovs::start(d);
    ovs.vsctl(&format!(
        "add-br br0 -- set bridge br0 datapath_type=dummy fail-mode=secure protocols=OpenFlow13 \
         -- add-port br0 p1 -- set interface p1 type=dummy ofport_request=1 options:tx_pcap={d}/ovs-p1.pcap \
         -- add-port br0 t0 -- set interface t0 ofport_request=10 {ovs_opts} \
         -- add-br brp -- set bridge brp datapath_type=dummy other-config:hwaddr={UNDERLAY_MAC} \
         -- add-port brp u0 -- set interface u0 type=dummy ofport_request=1 options:tx_pcap={d}/ovs-u0.pcap",
        d = d.display()
    ));
    if v6 {
        ovs.appctl("netdev-dummy/ip6addr brp fd95::1/64");
        ovs.appctl("ovs/route/add fd95::/64 brp");
    } else {
        ovs.appctl("netdev-dummy/ip4addr brp 10.95.0.1/24");
        ovs.appctl("ovs/route/add 10.95.0.0/24 brp");
    }
    ovs.appctl(&format!("tnl/neigh/set brp {far_ip} {PEER_MAC}"));
    sh(&format!(
        "ovs-ofctl add-flow unix:{}/brp.mgmt actions=normal",
        d.display()
    ));
    std::fs::write(
        d.join("f"),
        format!("{flows_in}\n{flows_out}\n").replace("HOST", "1"),
    )
    .unwrap();
    let extra = if tlv.is_empty() {
        String::new()
    } else {
        ovs.ofctl(&format!("add-tlv-map BR '{tlv}'"));
        format!("--tlv-map '{tlv}'")
    };
    ovs.ofctl(&format!("replace-flows BR {}", d.join("f").display()));

    // Encapsulation by both.
    let inner = inner_frames();
    for f in &inner {
        ovs.appctl(&format!("netdev-dummy/receive p1 {}", hex(f)));
    }
    let ovs_u0 = d.join("ovs-u0.pcap");
    wait_for("OVS's encapsulated frames", 10, || {
        frames_of(&ovs_u0).len() >= inner.len()
    });
    let theirs = frames_of(&ovs_u0);
    let rules = format!("{flows_in}\n{flows_out}\n").replace("HOST", "3");
    std::fs::write(d.join("in.pcap"), sluice_port::pcap::write_all(&inner)).unwrap();
    // Sluice as OVS's side (10.95.0.1), and as the peer (10.95.0.2).
    let near = Side {
        ip: near_ip,
        mac: mac(UNDERLAY_MAC),
        peer_ip: far_ip,
        peer_mac: mac(PEER_MAC),
    };
    let far = Side {
        ip: far_ip,
        mac: mac(PEER_MAC),
        peer_ip: near_ip,
        peer_mac: mac(UNDERLAY_MAC),
    };
    let (ours, enc) = sluice_encap(d, "near", &near, &rules, sluice_spec, &extra);
    assert_balanced(&enc);
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{case}: frames out of the underlays\n{enc}"
    );
    // The same frames; the order may differ across inner flows (Sluice
    // sends a batch's packets grouped by flow, OVS got them one by one).
    let sorted = |v: &[Vec<u8>]| {
        let mut v: Vec<String> = v.iter().map(|f| hex(&comparable(f, udp))).collect();
        v.sort();
        v
    };
    if !tlv.is_empty() {
        for f in &ours {
            let g = l4_at(f) + 8;
            assert!(f[g] & 0x3f != 0, "{case}: a Geneve header without options");
        }
    }
    let (o, t) = (sorted(&ours), sorted(&theirs));
    for (i, (o, t)) in o.iter().zip(&t).enumerate() {
        assert_eq!(o, t, "{case}: frame {i} in sorted order (Sluice, then OVS)");
    }
    if udp {
        // One source port per inner flow (frames alike but for it).
        let mut port_of = std::collections::HashMap::new();
        for f in &ours {
            let l4 = l4_at(f);
            let p = [f[l4], f[l4 + 1]];
            assert_eq!(
                *port_of.entry(comparable(f, true)).or_insert(p),
                p,
                "{case}: one inner flow, two source ports"
            );
        }
        let ports: std::collections::HashSet<_> = port_of.values().collect();
        assert!(
            ports.len() > 3,
            "{case}: inner flows spread over source ports: {ports:?}"
        );
    }

    // Decapsulation: Sluice as the peer takes OVS's frames; OVS takes
    // those of Sluice as its peer.
    std::fs::write(d.join("theirs.pcap"), sluice_port::pcap::write_all(&theirs)).unwrap();
    let dec = run_to_end(
        None,
        &swap(&rules),
        &[
            &far.underlay(d, "theirs.pcap", "unused.pcap"),
            &format!("3=pcap:tx={}", d.join("s3-back.pcap").display()),
            &format!("10={}", swap(sluice_spec)),
        ],
        &extra,
        d,
    );
    assert_balanced(&dec);
    assert_eq!(
        sorted_raw(frames_of(&d.join("s3-back.pcap"))),
        sorted_raw(inner.clone()),
        "{case}: Sluice decapsulating OVS's frames\n{dec}"
    );
    let (from_far, _) = sluice_encap(d, "far", &far, &swap(&rules), &swap(sluice_spec), &extra);
    for f in &from_far {
        ovs.appctl(&format!("netdev-dummy/receive u0 {}", hex(f)));
    }
    let ovs_p1 = d.join("ovs-p1.pcap");
    wait_for("OVS's decapsulated frames", 10, || {
        frames_of(&ovs_p1).len() >= inner.len()
    });
    assert_eq!(
        sorted_raw(frames_of(&ovs_p1)),
        sorted_raw(inner),
        "{case}: OVS decapsulating Sluice's frames"
    );
}

#[test]
fn vxlan_with_a_fixed_key_as_ovs() {
    compare(
        "vxlan key=42",
        "type=vxlan options:remote_ip=10.95.0.2 options:key=42",
        "vxlan:remote_ip=10.95.0.2,key=42",
        "in_port=HOST,actions=output:10",
        "in_port=10,tun_id=42,actions=output:HOST",
    );
}

#[test]
fn vxlan_flow_based_with_checksums_tos_and_ttl_as_ovs() {
    compare(
        "vxlan remote_ip=flow key=flow csum ttl tos=inherit df_default=false",
        "type=vxlan options:remote_ip=flow options:key=flow options:csum=true options:ttl=9 options:tos=inherit options:df_default=false",
        "vxlan:remote_ip=flow,key=flow,tos=inherit,ttl=9,df_default=false,csum=true",
        "in_port=HOST,actions=set_field:10.95.0.2->tun_dst,set_field:0x123456->tun_id,output:10",
        "in_port=10,tun_src=10.95.0.2,tun_id=0x123456,actions=output:HOST",
    );
}

#[test]
fn geneve_with_checksums_as_ovs() {
    compare(
        "geneve key=5 csum",
        "type=geneve options:remote_ip=10.95.0.2 options:key=5 options:csum=true",
        "geneve:remote_ip=10.95.0.2,key=5,csum=true",
        "in_port=HOST,actions=output:10",
        "in_port=10,actions=output:HOST",
    );
}

#[test]
fn gre_with_key_and_checksum_as_ovs() {
    compare(
        "gre key=9 csum",
        "type=gre options:remote_ip=10.95.0.2 options:key=9 options:csum=true",
        "gre:remote_ip=10.95.0.2,key=9,csum=true",
        "in_port=HOST,actions=output:10",
        "in_port=10,tun_id=9,actions=output:HOST",
    );
}

#[test]
fn gre_without_key_as_ovs() {
    compare(
        "gre",
        "type=gre options:remote_ip=10.95.0.2",
        "gre:remote_ip=10.95.0.2",
        "in_port=HOST,actions=output:10",
        "in_port=10,actions=output:HOST",
    );
}

#[test]
fn vxlan_over_ipv6_as_ovs() {
    compare(
        "vxlan over IPv6 key=42",
        "type=vxlan options:remote_ip=fd95::2 options:key=42",
        "vxlan:remote_ip=fd95::2,key=42",
        "in_port=HOST,actions=output:10",
        "in_port=10,tun_ipv6_src=fd95::2,tun_id=42,actions=output:HOST",
    );
}

#[test]
fn geneve_over_ipv6_flow_based_with_checksums_as_ovs() {
    compare(
        "geneve over IPv6 remote_ip=flow key=flow csum",
        "type=geneve options:remote_ip=flow options:key=flow options:csum=true",
        "geneve:remote_ip=flow,key=flow,csum=true",
        "in_port=HOST,actions=set_field:fd95::2->tun_ipv6_dst,set_field:7->tun_id,output:10",
        "in_port=10,tun_ipv6_src=fd95::2,tun_id=7,actions=output:HOST",
    );
}

#[test]
fn gre_over_ipv6_as_ovs() {
    compare(
        "gre over IPv6 key=9",
        "type=ip6gre options:remote_ip=fd95::2 options:key=9",
        "gre:remote_ip=fd95::2,key=9",
        "in_port=HOST,actions=output:10",
        "in_port=10,tun_id=9,actions=output:HOST",
    );
}

#[test]
fn geneve_options_as_ovs() {
    compare_with(
        "geneve with options (tun_metadata0 critical, 4 bytes; tun_metadata1, 8 bytes)",
        "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata1",
        "type=geneve options:remote_ip=10.95.0.2 options:key=5",
        "geneve:remote_ip=10.95.0.2,key=5",
        "in_port=HOST,actions=set_field:0x10002->tun_metadata0,set_field:0x1122334455667788->tun_metadata1,output:10",
        "in_port=10,tun_metadata0=0x10002,tun_metadata1=0x1122334455667788,actions=output:HOST",
    );
}

#[test]
fn geneve_oam_as_ovs() {
    compare(
        "geneve with tun_flags=+oam (the O bit)",
        "type=geneve options:remote_ip=10.95.0.2 options:key=5",
        "geneve:remote_ip=10.95.0.2,key=5",
        "in_port=HOST,actions=set_field:oam->tun_flags,output:10",
        "in_port=10,tun_flags=+oam,actions=output:HOST",
    );
}
