#!/usr/bin/env python3
"""Builds the golden test cases for `sluice run` with scapy, an independent
packet library: input captures, a flow file, and the expected output
captures, computed by editing the packets with scapy and letting scapy
recompute every checksum from scratch.

Each case is a folder with:
  rules.flows          the rules
  ports                one line per port: "N rx FILE" or "N tx FILE"
  inN.pcap             input captures
  expected_outN.pcap   what port N must send (frame bytes; timestamps ignored)

Run from this folder: python3 make_golden.py   (needs: pip install scapy)
"""
import os
from scapy.all import Ether, Dot1Q, IP, IPv6, TCP, UDP, ICMP, ICMPv6EchoRequest, ARP, Raw, wrpcap

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def fresh(p):
    """Rebuild p with every length and checksum recomputed."""
    p = p.copy()
    for layer in (IP, TCP, UDP, ICMP):
        if p.haslayer(layer):
            l = p[layer]
            if layer is UDP and l.chksum == 0:
                continue  # "no checksum" stays so
            if hasattr(l, "chksum"):
                del l.chksum
    if p.haslayer(IPv6):
        for layer in (TCP, UDP, ICMPv6EchoRequest):
            if p.haslayer(layer) and hasattr(p[layer], "cksum"):
                del p[layer].cksum
            if p.haslayer(layer) and hasattr(p[layer], "chksum"):
                del p[layer].chksum
    if p.haslayer(IP):
        del p[IP].len
    return Ether(bytes(p))


def case(name, rules, inputs, outputs):
    os.makedirs(name, exist_ok=True)
    with open(os.path.join(name, "rules.flows"), "w") as f:
        f.write(rules.strip() + "\n")
    lines = []
    for port, pkts in sorted(inputs.items()):
        wrpcap(os.path.join(name, f"in{port}.pcap"), [fresh(p) for p in pkts])
        lines.append(f"{port} rx in{port}.pcap")
    for port, pkts in sorted(outputs.items()):
        wrpcap(os.path.join(name, f"expected_out{port}.pcap"), [fresh(p) for p in pkts])
        lines.append(f"{port} tx out{port}.pcap")
    with open(os.path.join(name, "ports"), "w") as f:
        f.write("\n".join(lines) + "\n")


def tcp(src, dst, sport, dport, **kw):
    return Ether(src=A, dst=B) / IP(src=src, dst=dst, ttl=kw.get("ttl", 64), tos=kw.get("tos", 0)) / TCP(sport=sport, dport=dport, flags="A") / Raw(b"sluice-golden")


def udp(src, dst, sport, dport, **kw):
    return Ether(src=A, dst=B) / IP(src=src, dst=dst, ttl=kw.get("ttl", 64)) / UDP(sport=sport, dport=dport) / Raw(b"dns?")


# 1. Forwarding by L3 prefix and L4 port, with a table miss and an ACL drop.
ins = [tcp("10.0.0.1", "10.1.0.5", 1000, 80), tcp("10.0.0.1", "10.2.0.5", 1001, 80),
       tcp("10.0.0.1", "10.1.0.5", 1002, 22), udp("10.0.0.1", "10.2.9.9", 5353, 53),
       tcp("10.0.0.1", "172.16.0.1", 1003, 80)]
case("l3_forward", """
priority=10,ip,nw_dst=10.1.0.0/16,actions=output:2
priority=10,ip,nw_dst=10.2.0.0/16,actions=output:3
priority=20,tcp,tp_dst=22,actions=drop
""", {1: ins}, {2: [ins[0]], 3: [ins[1], ins[3]]})

# 2. NAT-style rewrites of addresses and ports; checksums must be right,
#    and a UDP checksum of zero must stay zero.
t = tcp("10.0.0.1", "192.0.2.10", 40000, 80)
u = udp("10.0.0.1", "192.0.2.10", 40001, 53)
u0 = udp("10.0.0.1", "192.0.2.10", 40002, 53)
u0[UDP].chksum = 0
ins = [t, u, u0]
outs = []
for p in ins:
    q = p.copy()
    q[IP].src = "203.0.113.1"
    q[IP].dst = "10.9.9.9"
    l4 = q[TCP] if q.haslayer(TCP) else q[UDP]
    l4.sport = 1234
    l4.dport = 8080
    q[IP].ttl = 63
    q[IP].tos = 0xb8
    outs.append(q)
case("nat_rewrite", """
ip,nw_dst=192.0.2.10,actions=mod_nw_src:203.0.113.1,mod_nw_dst:10.9.9.9,dec_ttl,mod_nw_tos:184,resubmit(,1)
table=1,tcp,actions=mod_tp_src:1234,mod_tp_dst:8080,output:2
table=1,udp,actions=set_field:1234->udp_src,set_field:8080->udp_dst,output:2
""", {1: ins}, {2: outs})

# 3. VLANs: access port 1 tags into VLAN 10 toward the trunk (port 2); the
#    trunk's VLAN 10 is untagged toward port 1; QinQ pushes an S-tag.
untagged = tcp("10.0.0.1", "10.0.0.2", 1, 2)
tagged = Ether(src=B, dst=A) / Dot1Q(vlan=10, prio=5) / IP(src="10.0.0.2", dst="10.0.0.1") / UDP(sport=3, dport=4) / Raw(b"x" * 20)
ins1 = [untagged]
ins2 = [tagged]
to_trunk = Ether(src=A, dst=B) / Dot1Q(vlan=10, prio=0) / untagged[IP]
to_access = Ether(src=B, dst=A) / tagged[IP]
qinq = Ether(src=B, dst=A, type=0x88a8) / Dot1Q(vlan=0, prio=0, type=0x8100) / Dot1Q(vlan=10, prio=5) / tagged[IP]
case("vlan", """
in_port=1,actions=mod_vlan_vid:10,output:2
in_port=2,dl_vlan=10,actions=strip_vlan,output:1,push_vlan:0x8100,mod_vlan_pcp:5,mod_vlan_vid:10,push_vlan:0x88a8,output:3
""", {1: ins1, 2: ins2}, {2: [to_trunk], 1: [to_access], 3: [qinq]})

# 4. IPv6 and ICMP: rewrite an IPv6 destination (TCP checksum over the
#    pseudo-header), decrement the hop limit, and flood ICMP echo.
v6 = Ether(src=A, dst=B) / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=9) / TCP(sport=5, dport=443, flags="S")
v6o = v6.copy()
v6o[IPv6].dst = "2001:db8::99"
v6o[IPv6].hlim = 8
ping = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(type=8) / Raw(b"ping")
case("ipv6_icmp", """
tcp6,actions=set_field:2001:db8::99->ipv6_dst,dec_ttl,output:2
icmp,actions=all
""", {1: [v6, ping]}, {2: [v6o, ping], 3: [ping]})

# 5. TTL expiry and output to the input port are drops, not forwards.
case("ttl_and_in_port", """
ip,nw_dst=10.0.0.2,actions=dec_ttl,output:2
ip,nw_dst=10.0.0.3,actions=output:1
""", {1: [tcp("10.0.0.1", "10.0.0.2", 1, 2, ttl=1), tcp("10.0.0.1", "10.0.0.2", 1, 2, ttl=2), tcp("10.0.0.1", "10.0.0.3", 1, 2)]},
    {2: [tcp("10.0.0.1", "10.0.0.2", 1, 2, ttl=1)]})
