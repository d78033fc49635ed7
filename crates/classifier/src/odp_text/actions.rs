//! A megaflow's datapath actions in ODP text, as OVS 3.1's
//! `format_odp_actions` prints them: consecutive rewrites of one header
//! in one `set(ipv4(src=...,ttl=...))`, `ct(commit,zone=5,mark=...)`,
//! `tnl_push(tnl_port(...),header(...),out_port(N))` with the header
//! decoded field by field, `userspace(pid=0,controller(...))`.
//!
//! Where Sluice's datapath differs from OVS's the text says Sluice's:
//! a tunnel has no datapath port of its own, so `tnl_port(...)` and
//! `tnl_pop(...)` name it as OVS names its tunnel ports
//! (`genev_sys_6081`, `vxlan_sys_4789`, `gre_sys`); a select group is
//! chosen on the datapath (`select(...)`), not by `hash` and `recirc`;
//! `nd_advert`, `set(vlan(...))`, `copy_ttl_in/out` and the PBB actions
//! are Sluice's own.

use sluice_packet::ndisc::NdField;
use sluice_packet::rewrite::ArpField;
use sluice_packet::tunnel::{TnlHeader, TunnelKind};
use sluice_packet::wire::ethernet::fmt_mac;
use sluice_packet::wire::ipv4::fmt_ipv4;

use super::{cx, ETH_IPV6, ICMP, SCTP, TCP, UDP};
use crate::action::PacketInReason;
use crate::dpaction::DpAction;
use crate::flow_match::Match;

/// What the actions rewrite depends on: whether the packet is IPv6 (the
/// IP rewrites' header) and its transport protocol (the port rewrites').
#[derive(Clone, Copy)]
struct Ctx {
    v6: bool,
    proto: u8,
}

/// The actions, `drop` for none (`m`: the megaflow's match, which says
/// what header a rewrite is in).
pub fn format_odp_actions(actions: &[DpAction], m: &Match) -> String {
    let c = Ctx {
        v6: m.value.dl_type == ETH_IPV6,
        proto: m.value.nw_proto,
    };
    list(actions, c)
}

fn list(actions: &[DpAction], c: Ctx) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    let mut out: Vec<String> = Vec::new();
    // A rewrite of one header waiting for the next of the same one.
    let mut set: Option<(&'static str, Vec<(u8, String)>)> = None;
    let flush = |set: &mut Option<(&'static str, Vec<(u8, String)>)>, out: &mut Vec<String>| {
        if let Some((hdr, mut fields)) = set.take() {
            fields.sort_by_key(|(order, _)| *order);
            let body: Vec<String> = fields.into_iter().map(|(_, f)| f).collect();
            out.push(format!("set({hdr}({}))", body.join(",")));
        }
    };
    for a in actions {
        if let Some((hdr, order, field)) = rewrite(a, c) {
            match &mut set {
                Some((h, fields)) if *h == hdr => {
                    // A field set twice: the last value stands.
                    fields.retain(|(o, _)| *o != order);
                    fields.push((order, field));
                }
                _ => {
                    flush(&mut set, &mut out);
                    set = Some((hdr, vec![(order, field)]));
                }
            }
            continue;
        }
        flush(&mut set, &mut out);
        out.push(action(a, c));
    }
    flush(&mut set, &mut out);
    out.join(",")
}

/// A header rewrite: its header's ODP name, the field's place in it and
/// `name=value`.
fn rewrite(a: &DpAction, c: Ctx) -> Option<(&'static str, u8, String)> {
    let ip = if c.v6 { "ipv6" } else { "ipv4" };
    let l4 = match c.proto {
        TCP => "tcp",
        UDP => "udp",
        SCTP => "sctp",
        _ => "l4",
    };
    let icmp = if c.proto == ICMP { "icmp" } else { "icmpv6" };
    let v6 = |a: &[u8; 16]| std::net::Ipv6Addr::from(*a).to_string();
    Some(match a {
        DpAction::SetEthSrc(m) => ("eth", 0, format!("src={}", fmt_mac(m))),
        DpAction::SetEthDst(m) => ("eth", 1, format!("dst={}", fmt_mac(m))),
        DpAction::SetIpv4Src(x, _) => ("ipv4", 0, format!("src={}", fmt_ipv4(*x))),
        DpAction::SetIpv4Dst(x, _) => ("ipv4", 1, format!("dst={}", fmt_ipv4(*x))),
        DpAction::SetIpv6Src(x, _) => ("ipv6", 0, format!("src={}", v6(x))),
        DpAction::SetIpv6Dst(x, _) => ("ipv6", 1, format!("dst={}", v6(x))),
        DpAction::SetIpv6Label(l) => ("ipv6", 2, format!("label={}", cx((*l).into()))),
        DpAction::SetIpProto(p, _) => (ip, 3, format!("proto={p}")),
        DpAction::SetIpTos { tos, mask } => {
            let name = if c.v6 { "tclass" } else { "tos" };
            let mut s = format!("{name}={}", cx((*tos).into()));
            if *mask != 0xff {
                s += &format!("/{}", cx((*mask).into()));
            }
            (ip, 4, s)
        }
        DpAction::SetIpTtl(t) => (
            ip,
            5,
            format!("{}={t}", if c.v6 { "hlimit" } else { "ttl" }),
        ),
        DpAction::SetTpSrc(p) => (l4, 0, format!("src={p}")),
        DpAction::SetTpDst(p) => (l4, 1, format!("dst={p}")),
        DpAction::SetIcmpType(t) => (icmp, 0, format!("type={t}")),
        DpAction::SetIcmpCode(x) => (icmp, 1, format!("code={x}")),
        DpAction::SetArp(f) => match f {
            ArpField::Spa(x) => ("arp", 0, format!("sip={}", fmt_ipv4(*x))),
            ArpField::Tpa(x) => ("arp", 1, format!("tip={}", fmt_ipv4(*x))),
            ArpField::Op(x) => ("arp", 2, format!("op={x}")),
            ArpField::Sha(x) => ("arp", 3, format!("sha={}", fmt_mac(x))),
            ArpField::Tha(x) => ("arp", 4, format!("tha={}", fmt_mac(x))),
        },
        DpAction::SetNd(f) => match f {
            NdField::Target(x) => ("nd", 0, format!("target={}", v6(x))),
            NdField::Sll(x) => ("nd", 1, format!("sll={}", fmt_mac(x))),
            NdField::Tll(x) => ("nd", 2, format!("tll={}", fmt_mac(x))),
        },
        _ => return None,
    })
}

/// One action that is not a header rewrite.
fn action(a: &DpAction, c: Ctx) -> String {
    match a {
        DpAction::Output(p) => p.to_string(),
        DpAction::Recirc(id) => format!("recirc({})", cx((*id).into())),
        DpAction::Meter(m) => format!("meter({m})"),
        DpAction::HeldMeter(m) => format!("meter({})", m.0.id),
        DpAction::CtClear => "ct_clear".into(),
        DpAction::Ct(r) => {
            let mut parts = Vec::new();
            if r.commit {
                parts.push(if r.force { "force_commit" } else { "commit" }.to_string());
            }
            if r.zone != 0 {
                parts.push(format!("zone={}", r.zone));
            }
            if let Some((v, m)) = r.mark {
                let mut s = format!("mark={}", cx(v.into()));
                if m != u32::MAX {
                    s += &format!("/{}", cx(m.into()));
                }
                parts.push(s);
            }
            if let Some((v, m)) = r.label {
                let hex = |x: u128| {
                    if x == 0 {
                        "0".into()
                    } else {
                        format!("{x:#x}")
                    }
                };
                let mut s = format!("label={}", hex(v));
                if m != u128::MAX {
                    s += &format!("/{}", hex(m));
                }
                parts.push(s);
            }
            if let Some(n) = &r.nat {
                parts.push(n.to_string());
            }
            if parts.is_empty() {
                "ct".into()
            } else {
                format!("ct({})", parts.join(","))
            }
        }
        DpAction::Controller(p) => {
            // OFPR_* as OpenFlow numbers them.
            let reason = match p.reason {
                PacketInReason::NoMatch => 0,
                PacketInReason::Action => 1,
                PacketInReason::InvalidTtl => 2,
                PacketInReason::ActionSet => 3,
                PacketInReason::Group => 4,
                _ => 5,
            };
            format!(
                "userspace(pid=0,controller(reason={reason},dont_send=0,continuation=0,\
                 recirc_id=0,rule_cookie={},controller_id={},max_len={}))",
                cx(p.cookie),
                p.controller_id,
                p.max_len
            )
        }
        DpAction::TnlOutput { header, port } => tnl_push(header, *port),
        DpAction::TnlPop(r) => format!("tnl_pop({})", vport_name(r.kind, r.dst_port)),
        DpAction::CheckPktLen { len, gt, le } => {
            format!(
                "check_pkt_len(size={len},gt({}),le({}))",
                list(gt, c),
                list(le, c)
            )
        }
        DpAction::Select(sel) => {
            let mut s = format!("select(group={},hash=sym_l4", sel.group);
            for (bucket, acts) in &sel.variants {
                s += &format!(",bucket{bucket}:[{}]", list(acts, c));
            }
            s + ")"
        }
        // The rest print as Sluice's flow language has them (most in
        // ODP's words already: push_vlan, pop_vlan, push_mpls, ...).
        other => other.to_string(),
    }
}

/// The name OVS gives the datapath port of a tunnel type
/// (`genev_sys_6081`, `vxlan_sys_4789`, `gre_sys`).
fn vport_name(kind: TunnelKind, udp_port: u16) -> String {
    match kind {
        TunnelKind::Geneve => format!("genev_sys_{udp_port}"),
        TunnelKind::Vxlan => format!("vxlan_sys_{udp_port}"),
        TunnelKind::Gre => "gre_sys".into(),
    }
}

/// OVS's `format_odp_tnl_push_action`: the header decoded field by
/// field from the bytes the translation built.
fn tnl_push(h: &TnlHeader, port: u32) -> String {
    let b = h.bytes();
    let be16 = |at: usize| {
        b.get(at..at + 2)
            .map_or(0, |x| u16::from_be_bytes([x[0], x[1]]))
    };
    let be32 = |at: usize| {
        b.get(at..at + 4)
            .map_or(0, |x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let mac = |at: usize| {
        let mut m = [0u8; 6];
        if let Some(x) = b.get(at..at + 6) {
            m.copy_from_slice(x);
        }
        fmt_mac(&m)
    };
    // (After the VLAN tags the underlay's bridge gave it, if any.)
    let ip = h.ip_at();
    let eth_type = be16(ip - 2);
    let v6 = eth_type == ETH_IPV6;
    let l4 = if v6 { ip + 40 } else { ip + 20 };
    let udp_dst = if h.kind == TunnelKind::Gre {
        0
    } else {
        be16(l4 + 2)
    };
    // OVS_VPORT_TYPE_*: GRE 3, VXLAN 4, GENEVE 5, IP6GRE 109.
    let ty = match (h.kind, v6) {
        (TunnelKind::Gre, false) => 3,
        (TunnelKind::Gre, true) => 109,
        (TunnelKind::Vxlan, _) => 4,
        (TunnelKind::Geneve, _) => 5,
    };
    let mut s = format!(
        "tnl_push(tnl_port({}),header(size={},type={ty},eth(dst={},src={},dl_type={eth_type:#06x}),",
        vport_name(h.kind, udp_dst),
        b.len(),
        mac(0),
        mac(6),
    );
    // Tags print as OVS prints a flow's (`vlan(vid=..,pcp=..)`; OVS itself
    // pushes them with its own action after the header).
    for (tpid, tci) in h.vlans() {
        if tpid != 0x8100 {
            s += &format!(
                "vlan(tpid={tpid:#06x},vid={},pcp={}),",
                tci & 0xfff,
                tci >> 13
            );
        } else {
            s += &format!("vlan(vid={},pcp={}),", tci & 0xfff, tci >> 13);
        }
    }
    if v6 {
        let addr = |at: usize| {
            let mut a = [0u8; 16];
            if let Some(x) = b.get(at..at + 16) {
                a.copy_from_slice(x);
            }
            std::net::Ipv6Addr::from(a).to_string()
        };
        let flow = be32(ip);
        s += &format!(
            "ipv6(src={},dst={},label={},proto={},tclass={:#x},hlimit={}),",
            addr(ip + 8),
            addr(ip + 24),
            flow & 0xfffff,
            b.get(ip + 6).copied().unwrap_or(0),
            (flow >> 20) & 0xff,
            b.get(ip + 7).copied().unwrap_or(0),
        );
    } else {
        s += &format!(
            "ipv4(src={},dst={},proto={},tos={},ttl={},frag={:#x}),",
            fmt_ipv4(be32(ip + 12)),
            fmt_ipv4(be32(ip + 16)),
            b.get(ip + 9).copied().unwrap_or(0),
            cx(b.get(ip + 1).copied().unwrap_or(0).into()),
            b.get(ip + 8).copied().unwrap_or(0),
            be16(ip + 6),
        );
    }
    let udp = |s: &mut String| {
        *s += &format!(
            "udp(src={},dst={},csum={:#x}),",
            be16(l4),
            be16(l4 + 2),
            be16(l4 + 6)
        );
    };
    let t = l4 + 8;
    match h.kind {
        TunnelKind::Vxlan => {
            udp(&mut s);
            s += &format!("vxlan(flags={:#x},vni={:#x})", be32(t), be32(t + 4) >> 8);
        }
        TunnelKind::Geneve => {
            udp(&mut s);
            let (f0, f1) = (
                b.get(t).copied().unwrap_or(0),
                b.get(t + 1).copied().unwrap_or(0),
            );
            s += &format!(
                "geneve({}{}vni={:#x}",
                if f1 & 0x80 != 0 { "oam," } else { "" },
                if f1 & 0x40 != 0 { "crit," } else { "" },
                be32(t + 4) >> 8
            );
            let opt_len = usize::from(f0 & 0x3f) * 4;
            if opt_len > 0 {
                s += ",options(";
                s += &geneve_options(b.get(t + 8..t + 8 + opt_len).unwrap_or(&[]));
                s += ")";
            }
            s += ")";
        }
        TunnelKind::Gre => {
            let flags = be16(l4);
            s += &format!("gre((flags={flags:#x},proto={:#x})", be16(l4 + 2));
            let mut at = l4 + 4;
            if flags & 0x8000 != 0 {
                s += &format!(",csum={:#x}", be16(at));
                at += 4;
            }
            if flags & 0x2000 != 0 {
                s += &format!(",key={:#x}", be32(at));
                at += 4;
            }
            if flags & 0x1000 != 0 {
                s += &format!(",seq={:#x}", be32(at));
            }
            s += ")";
        }
    }
    s + &format!("),out_port({port}))")
}

/// Geneve options as OVS prints a header's: `{class=0x102,type=0x80,
/// len=4,0xa}` each (the data as `ds_put_hex`: leading zero bytes left
/// out).
fn geneve_options(mut o: &[u8]) -> String {
    let mut s = String::new();
    while o.len() >= 4 {
        let class = u16::from_be_bytes([o[0], o[1]]);
        let ty = o[2];
        let len = usize::from(o[3] & 0x1f) * 4;
        let data = o.get(4..4 + len).unwrap_or(&[]);
        s += &format!(
            "{{class={},type={},len={len}",
            cx(class.into()),
            cx(ty.into())
        );
        if !data.is_empty() {
            s += ",";
            s += &put_hex(data);
        }
        s += "}";
        o = o.get(4 + len..).unwrap_or(&[]);
    }
    s
}

/// OVS's `ds_put_hex`.
pub(crate) fn put_hex(data: &[u8]) -> String {
    let mut s = String::new();
    for &x in data {
        if s.is_empty() {
            if x != 0 {
                s = format!("{x:#x}");
            }
        } else {
            s += &format!("{x:02x}");
        }
    }
    if s.is_empty() {
        "0".into()
    } else {
        s
    }
}
