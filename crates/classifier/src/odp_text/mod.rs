//! Megaflows in Open vSwitch's datapath (ODP) text, as `ovs-appctl
//! dpctl/dump-flows` prints them: `recirc_id(0),in_port(1),
//! packet_type(ns=0,id=0),eth_type(0x0800),ipv4(dst=10.0.0.2,frag=no)`,
//! with OVS 3.1's `odp_flow_format` rules: the attributes in its order,
//! an attribute or a field left out when its mask is all zero (unless
//! verbose), `value/mask` where a mask is partial, C's `%#x` (so `0`, not
//! `0x0`). Sluice's keys hold the matched bits only, so a verbose dump
//! shows a wildcarded field as `0/0` where OVS shows the first packet's
//! value over a zero mask. The actions are in [`actions`].

mod actions;

pub use actions::format_odp_actions;

use sluice_packet::key::{FlowKey, FRAG_ANY, FRAG_LATER};
use sluice_packet::wire::ethernet::fmt_mac;
use sluice_packet::wire::ipv4::fmt_ipv4;

use crate::flow_match::Match;

/// EtherTypes the layers below look at.
const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;
/// IP protocols with an ODP layer-4 attribute.
const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
/// A VLAN TCI's "present" bit (OVS's CFI).
const VLAN_CFI: u16 = 0x1000;

/// `ct_state` bits by name, lowest first (`odp_ct_state_to_string`).
const CT_STATE_NAMES: &[&str] = &["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];
/// TCP flags by name, lowest first (`packet_tcp_flag_to_string`).
const TCP_FLAG_NAMES: &[&str] = &[
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];
/// Tunnel flags by name, lowest first (`flow_tun_flag_to_string`).
const TUN_FLAG_NAMES: &[&str] = &["oam", "df", "csum", "key"];

/// C's `%#x`: `0x` before any value but zero.
pub(crate) fn cx(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// An attribute's fields being written: each `name=value[/mask],`, the
/// last comma taken off when it closes (OVS's `ds_chomp`).
#[derive(Default)]
pub(crate) struct Fields(pub(crate) String);

impl Fields {
    fn put(&mut self, show: bool, name: &str, value: String, mask: Option<String>) {
        if show {
            self.0.push_str(name);
            self.0.push('=');
            self.0.push_str(&value);
            if let Some(m) = mask {
                self.0.push('/');
                self.0.push_str(&m);
            }
            self.0.push(',');
        }
    }

    pub(crate) fn eth(&mut self, v: bool, name: &str, k: &[u8; 6], m: &[u8; 6]) {
        let partial = (*m != [0xff; 6]).then(|| fmt_mac(m));
        self.put(v || *m != [0; 6], name, fmt_mac(k), partial);
    }

    pub(crate) fn ipv4(&mut self, v: bool, name: &str, k: u32, m: u32) {
        let partial = (m != u32::MAX).then(|| fmt_ipv4(m));
        self.put(v || m != 0, name, fmt_ipv4(k), partial);
    }

    pub(crate) fn ipv6(&mut self, v: bool, name: &str, k: &[u8; 16], m: &[u8; 16]) {
        let a = |x: &[u8; 16]| std::net::Ipv6Addr::from(*x).to_string();
        let partial = (*m != [0xff; 16]).then(|| a(m));
        self.put(v || *m != [0; 16], name, a(k), partial);
    }

    /// `%#x`, a partial mask `/%#x`.
    pub(crate) fn hex(&mut self, v: bool, name: &str, k: u64, m: u64, full: u64) {
        let partial = (m != full).then(|| cx(m));
        self.put(v || m != 0, name, cx(k), partial);
    }

    /// Decimal, a partial mask `/%#x`.
    pub(crate) fn dec(&mut self, v: bool, name: &str, k: u64, m: u64, full: u64) {
        let partial = (m != full).then(|| cx(m));
        self.put(v || m != 0, name, k.to_string(), partial);
    }

    /// The fields written, the last comma off.
    pub(crate) fn done(mut self) -> String {
        if self.0.ends_with(',') {
            self.0.pop();
        }
        self.0
    }
}

/// OVS's `format_flags`: the names of the bits set, joined by `del`
/// (`0` for none; unnamed bits as one hex number after them).
fn flags(names: &[&str], v: u32, del: char) -> String {
    if v == 0 {
        return "0".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut bad = 0;
    for bit in 0..32 {
        if v & (1 << bit) == 0 {
            continue;
        }
        match names.get(bit) {
            Some(n) => out.push((*n).to_string()),
            None => bad |= 1 << bit,
        }
    }
    if bad != 0 {
        out.push(format!("{bad:#x}"));
    }
    out.join(&del.to_string())
}

/// OVS's `format_flags_masked`: all of a full mask's flags as
/// [`flags`]; otherwise `+name` or `-name` for each bit of the mask
/// (`0/0` for none).
fn flags_masked(names: &[&str], v: u32, m: u32, full: u32) -> String {
    if m == full {
        return flags(names, v, '|');
    }
    if m == 0 {
        return "0/0".into();
    }
    let mut s = String::new();
    for bit in 0..32 {
        if m & (1 << bit) == 0 {
            continue;
        }
        s.push(if v & (1 << bit) != 0 { '+' } else { '-' });
        match names.get(bit) {
            Some(n) => s.push_str(n),
            None => s.push_str(&format!("[{:#x}]", 1u32 << bit)),
        }
    }
    s
}

/// The attributes of a megaflow's match, joined by commas.
struct Attrs {
    out: Vec<String>,
    verbose: bool,
}

impl Attrs {
    fn push(&mut self, name: &str, body: String) {
        self.out.push(format!("{name}({body})"));
    }

    /// An attribute of fields, shown when any field is (a field is shown
    /// where its mask has bits, or verbose).
    fn fields(&mut self, name: &str, f: Fields) {
        if self.verbose || !f.0.is_empty() {
            self.push(name, f.done());
        }
    }
}

/// A megaflow's match in ODP text (`verbose`: `dpctl/dump-flows -m`,
/// every attribute and field, wildcarded ones as `0/0`).
pub fn format_odp_match(m: &Match, verbose: bool) -> String {
    let (k, w) = (&m.value, &m.mask);
    let v = verbose;
    let mut a = Attrs {
        out: Vec::new(),
        verbose,
    };
    if v {
        a.push("skb_priority", "0/0".into());
    }
    tunnel(&mut a, k, w);
    if v || w.pkt_mark != 0 {
        let mut s = cx(k.pkt_mark.into());
        if w.pkt_mark != u32::MAX {
            s += &format!("/{}", cx(w.pkt_mark.into()));
        }
        a.push("skb_mark", s);
    }
    conntrack(&mut a, k, w);
    let mut s = cx(k.recirc_id.into());
    if w.recirc_id != u32::MAX {
        s += &format!("/{}", cx(w.recirc_id.into()));
    }
    a.push("recirc_id", s);
    if v {
        a.push("dp_hash", "0/0".into());
    }
    if w.in_port == u32::MAX {
        a.push("in_port", k.in_port.to_string());
    } else {
        a.push("in_port", format!("{}/{}", k.in_port, cx(w.in_port.into())));
    }
    a.push("packet_type", "ns=0,id=0".into());
    let mut f = Fields::default();
    f.eth(v, "src", &k.dl_src, &w.dl_src);
    f.eth(v, "dst", &k.dl_dst, &w.dl_dst);
    a.fields("eth", f);
    // VLAN tags: each its TPID as the EtherType, its TCI, and the rest
    // inside `encap(...)`.
    let mut tags = 0;
    while tags < 2 && k.vlan_tci[tags] & VLAN_CFI != 0 {
        a.push("eth_type", format!("{:#06x}", k.vlan_tpid[tags]));
        a.push("vlan", vlan_tci(k.vlan_tci[tags], w.vlan_tci[tags], v));
        tags += 1;
    }
    let mut inner = Attrs {
        out: Vec::new(),
        verbose,
    };
    layer3(&mut inner, k, w);
    let mut body = inner.out.join(",");
    for _ in 0..tags {
        body = format!("encap({body})");
    }
    if !body.is_empty() {
        a.out.push(body);
    }
    a.out.join(",")
}

/// `vid=`, `pcp=`, `cfi=0` as OVS's `format_vlan_tci`.
fn vlan_tci(tci: u16, mask: u16, v: bool) -> String {
    let mut f = Fields::default();
    let (vid, mvid) = (tci & 0xfff, mask & 0xfff);
    if v || vid != 0 || mvid != 0 {
        let partial = (mvid != 0xfff).then(|| format!("{mvid:#x}"));
        f.put(true, "vid", vid.to_string(), partial);
    }
    let (pcp, mpcp) = (tci >> 13, mask >> 13);
    if v || pcp != 0 || mpcp != 0 {
        let partial = (mpcp != 7).then(|| format!("{mpcp:#x}"));
        f.put(true, "pcp", pcp.to_string(), partial);
    }
    if tci & VLAN_CFI == 0 {
        f.0.push_str("cfi=0,");
    }
    f.done()
}

/// `tunnel(tun_id=...,src=...,dst=...,ttl=...,flags(...))`.
fn tunnel(a: &mut Attrs, k: &FlowKey, w: &FlowKey) {
    // Not for a flag alone that is clear: every megaflow of a bridge with
    // tunnels checks a packet is no tunnel's OAM frame, and OVS has no
    // tunnel attribute for a packet from no tunnel.
    let fields = w.tunnel_id != 0
        || w.tun_src != 0
        || w.tun_dst != 0
        || w.tun_ipv6_src != [0; 16]
        || w.tun_ipv6_dst != [0; 16]
        || w.tun_tos != 0
        || w.tun_ttl != 0
        || w.tun_metadata_present != 0;
    if !fields && k.tun_flags & w.tun_flags == 0 {
        return;
    }
    let v = a.verbose;
    let mut f = Fields::default();
    if v || w.tunnel_id != 0 {
        let partial = (w.tunnel_id != u64::MAX).then(|| cx(w.tunnel_id));
        f.put(true, "tun_id", format!("{:#x}", k.tunnel_id), partial);
    }
    if k.tun_family == 6 {
        f.ipv6(v, "ipv6_src", &k.tun_ipv6_src, &w.tun_ipv6_src);
        f.ipv6(v, "ipv6_dst", &k.tun_ipv6_dst, &w.tun_ipv6_dst);
    } else {
        f.ipv4(v, "src", k.tun_src, w.tun_src);
        f.ipv4(v, "dst", k.tun_dst, w.tun_dst);
    }
    f.hex(v, "tos", k.tun_tos.into(), w.tun_tos.into(), 0xff);
    f.dec(v, "ttl", k.tun_ttl.into(), w.tun_ttl.into(), 0xff);
    if v || w.tun_flags != 0 {
        let s = flags_masked(
            TUN_FLAG_NAMES,
            k.tun_flags.into(),
            (w.tun_flags & 0xf).into(),
            0xf,
        );
        f.0.push_str(&format!("flags({s}),"));
    }
    a.push("tunnel", f.done());
}

/// `ct_state`, `ct_zone`, `ct_mark`, `ct_label` and the original
/// direction's tuple.
fn conntrack(a: &mut Attrs, k: &FlowKey, w: &FlowKey) {
    let v = a.verbose;
    if v || w.ct_state != 0 {
        // A 32-bit attribute whose mask is never all ones: always
        // `+name-name`.
        let s = flags_masked(
            CT_STATE_NAMES,
            k.ct_state.into(),
            w.ct_state.into(),
            u32::MAX,
        );
        a.push("ct_state", s);
    }
    if v || w.ct_zone != 0 {
        let mut s = cx(k.ct_zone.into());
        if w.ct_zone != u16::MAX {
            s += &format!("/{}", cx(w.ct_zone.into()));
        }
        a.push("ct_zone", s);
    }
    if v || w.ct_mark != 0 {
        let mut s = cx(k.ct_mark.into());
        if w.ct_mark != u32::MAX {
            s += &format!("/{}", cx(w.ct_mark.into()));
        }
        a.push("ct_mark", s);
    }
    let label = |l: [u64; 2]| u128::from(l[1]) << 64 | u128::from(l[0]);
    let (kl, wl) = (label(k.ct_label), label(w.ct_label));
    if v || wl != 0 {
        let hex = |x: u128| {
            if x == 0 {
                "0".into()
            } else {
                format!("{x:#x}")
            }
        };
        let mut s = hex(kl);
        if wl != u128::MAX {
            s += &format!("/{}", hex(wl));
        }
        a.push("ct_label", s);
    }
    if k.ct_nw_proto == 0 {
        return;
    }
    let mut f = Fields::default();
    let proto = (k.ct_nw_proto.into(), w.ct_nw_proto.into());
    let ports = [
        (k.ct_tp_src.into(), w.ct_tp_src.into()),
        (k.ct_tp_dst.into(), w.ct_tp_dst.into()),
    ];
    if k.dl_type == ETH_IPV6 {
        f.ipv6(v, "src", &k.ct_ipv6_src, &w.ct_ipv6_src);
        f.ipv6(v, "dst", &k.ct_ipv6_dst, &w.ct_ipv6_dst);
        f.dec(v, "proto", proto.0, proto.1, 0xff);
        f.dec(v, "src_port", ports[0].0, ports[0].1, 0xffff);
        f.dec(v, "dst_port", ports[1].0, ports[1].1, 0xffff);
        a.fields("ct_tuple6", f);
    } else {
        f.ipv4(v, "src", k.ct_nw_src, w.ct_nw_src);
        f.ipv4(v, "dst", k.ct_nw_dst, w.ct_nw_dst);
        f.dec(v, "proto", proto.0, proto.1, 0xff);
        f.dec(v, "tp_src", ports[0].0, ports[0].1, 0xffff);
        f.dec(v, "tp_dst", ports[1].0, ports[1].1, 0xffff);
        a.fields("ct_tuple4", f);
    }
}

/// `frag=no|first|later` (a partial mask as `/0x..`: OVS refuses one).
fn frag(f: &mut Fields, k: &FlowKey, w: &FlowKey) {
    let m = w.nw_frag & (FRAG_ANY | FRAG_LATER);
    if m == 0 {
        return;
    }
    let t = if k.nw_frag & FRAG_ANY == 0 {
        "no"
    } else if k.nw_frag & FRAG_LATER == 0 {
        "first"
    } else {
        "later"
    };
    f.0.push_str("frag=");
    f.0.push_str(t);
    if m != FRAG_ANY | FRAG_LATER {
        f.0.push_str(&format!("/{:#x}", 0xfc | m));
    }
    f.0.push(',');
}

/// The EtherType and what is behind it.
fn layer3(a: &mut Attrs, k: &FlowKey, w: &FlowKey) {
    let v = a.verbose;
    if !v && w.dl_type == 0 {
        return;
    }
    let mut s = format!("{:#06x}", k.dl_type);
    if w.dl_type != u16::MAX {
        s += &format!("/{:#06x}", w.dl_type);
    }
    a.push("eth_type", s);
    let ip = match k.dl_type {
        ETH_IPV4 => {
            let mut f = Fields::default();
            f.ipv4(v, "src", k.nw_src, w.nw_src);
            f.ipv4(v, "dst", k.nw_dst, w.nw_dst);
            f.dec(v, "proto", k.nw_proto.into(), w.nw_proto.into(), 0xff);
            f.hex(v, "tos", k.nw_tos.into(), w.nw_tos.into(), 0xff);
            f.dec(v, "ttl", k.nw_ttl.into(), w.nw_ttl.into(), 0xff);
            frag(&mut f, k, w);
            a.fields("ipv4", f);
            true
        }
        ETH_IPV6 => {
            let mut f = Fields::default();
            f.ipv6(v, "src", &k.ipv6_src, &w.ipv6_src);
            f.ipv6(v, "dst", &k.ipv6_dst, &w.ipv6_dst);
            let (kl, wl) = (k.ipv6_label & 0xfffff, w.ipv6_label & 0xfffff);
            if v || wl != 0 {
                let partial = (wl != 0xfffff).then(|| cx(wl.into()));
                f.put(true, "label", cx(kl.into()), partial);
            }
            f.dec(v, "proto", k.nw_proto.into(), w.nw_proto.into(), 0xff);
            f.hex(v, "tclass", k.nw_tos.into(), w.nw_tos.into(), 0xff);
            f.dec(v, "hlimit", k.nw_ttl.into(), w.nw_ttl.into(), 0xff);
            frag(&mut f, k, w);
            a.fields("ipv6", f);
            true
        }
        ETH_ARP | ETH_RARP => {
            let mut f = Fields::default();
            f.ipv4(v, "sip", k.nw_src, w.nw_src);
            f.ipv4(v, "tip", k.nw_dst, w.nw_dst);
            f.dec(v, "op", k.nw_proto.into(), w.nw_proto.into(), 0xff);
            f.eth(v, "sha", &k.arp_sha, &w.arp_sha);
            f.eth(v, "tha", &k.arp_tha, &w.arp_tha);
            a.fields("arp", f);
            false
        }
        _ => false,
    };
    if ip && k.nw_frag & FRAG_LATER == 0 {
        layer4(a, k, w);
    }
}

/// The transport header's attribute (and TCP's flags, ND's fields).
fn layer4(a: &mut Attrs, k: &FlowKey, w: &FlowKey) {
    let v = a.verbose;
    let ports = |names: [&str; 2]| {
        let mut f = Fields::default();
        f.dec(v, names[0], k.tp_src.into(), w.tp_src.into(), 0xffff);
        f.dec(v, names[1], k.tp_dst.into(), w.tp_dst.into(), 0xffff);
        f
    };
    let types = |names: [&str; 2]| {
        let mut f = Fields::default();
        f.dec(v, names[0], k.tp_src.into(), w.tp_src.into(), 0xff);
        f.dec(v, names[1], k.tp_dst.into(), w.tp_dst.into(), 0xff);
        f
    };
    match k.nw_proto {
        TCP => {
            a.fields("tcp", ports(["src", "dst"]));
            if v || w.tcp_flags != 0 {
                let s = flags_masked(
                    TCP_FLAG_NAMES,
                    k.tcp_flags.into(),
                    (w.tcp_flags & 0xfff).into(),
                    0xfff,
                );
                a.push("tcp_flags", s);
            }
        }
        UDP => a.fields("udp", ports(["src", "dst"])),
        SCTP => a.fields("sctp", ports(["src", "dst"])),
        ICMP if k.dl_type == ETH_IPV4 => a.fields("icmp", types(["type", "code"])),
        ICMPV6 if k.dl_type == ETH_IPV6 => {
            a.fields("icmpv6", types(["type", "code"]));
            // Neighbour solicitations and advertisements.
            if matches!(k.tp_src, 135 | 136) {
                let mut f = Fields::default();
                f.ipv6(v, "target", &k.nd_target, &w.nd_target);
                f.eth(v, "sll", &k.arp_sha, &w.arp_sha);
                f.eth(v, "tll", &k.arp_tha, &w.arp_tha);
                a.fields("nd", f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
