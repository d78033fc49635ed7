//! Tunnels in translation, as OVS's native tunnelling
//! (`ofproto-dpif-xlate.c`'s `native_tunnel_output` and the tunnel-port
//! receive side):
//!
//! - an output to a tunnel port becomes [`DpAction::TnlOutput`]: the
//!   outer header built here from the port's options, the flow's tunnel
//!   fields where an option is `flow`, the route to the destination and
//!   the next hop's Ethernet address (an unknown one queues an ARP
//!   request or neighbour solicitation and drops the packet, named);
//! - on an underlay port (one with an address of the switch's own), ARP
//!   or IPv6 neighbour solicitations for that address are answered by
//!   header rewrites and an output back (and teach the neighbour cache,
//!   as advertisements to it do), and IP to that address on a tunnel's
//!   UDP port (or GRE) becomes [`DpAction::TnlPop`]; everything else goes
//!   through the tables as on any port.

use std::net::IpAddr;
use std::sync::Arc;

use sluice_packet::key::{FRAG_ANY, TUN_FLAG_OAM};
use sluice_packet::rewrite::ArpField;
use sluice_packet::tunnel::{
    Endpoint, GeneveOpts, HeaderParams, TnlHeader, TunnelConfig, TunnelKey, TunnelKind,
};
use sluice_packet::wire::ethernet::ethertype;
use sluice_packet::wire::icmp::nd;
use sluice_packet::wire::ipv4::fmt_ipv4;
use sluice_packet::wire::l4::proto;

use super::{Ctx, XlateDrop};
use crate::dpaction::DpAction;
use crate::tunnel::{Receivers, Tunnels, Underlay};

/// ARP opcodes.
const ARP_REQUEST: u8 = 1;

impl Ctx<'_, '_> {
    /// The datapath's tunnel state (the first bridge's rules hold it,
    /// with datapath port numbers).
    pub(super) fn tunnels(&self) -> Option<Arc<Tunnels>> {
        self.root.0.tunnels().cloned()
    }

    /// The tunnel port `p`'s configuration, if `p` is a tunnel port.
    pub(super) fn tunnel_port(&self, p: u32) -> Option<TunnelConfig> {
        let t = self.root.0.tunnels()?;
        if t.ports().is_empty() {
            return None;
        }
        t.port(self.dp(p)).cloned()
    }

    /// An output to tunnel port `p`.
    pub(super) fn tunnel_output(&mut self, p: u32, cfg: &TunnelConfig) {
        let Some(t) = self.tunnels() else {
            return;
        };
        // With `remote_ip=flow`, `tun_dst` if set, else `tun_ipv6_dst`
        // (as OVS's flow_tnl_dst).
        let dst = match cfg.remote {
            Endpoint::Fixed(a) => Some(a),
            Endpoint::Flow => {
                self.out.wc.tun_dst = u32::MAX;
                if self.flow.tun_dst != 0 {
                    Some(IpAddr::from(self.flow.tun_dst.to_be_bytes()))
                } else {
                    self.out.wc.tun_ipv6_dst = [0xff; 16];
                    (self.flow.tun_ipv6_dst != [0; 16])
                        .then(|| IpAddr::from(self.flow.tun_ipv6_dst))
                }
            }
        };
        let Some(dst) = dst else {
            self.note(
                self.depth,
                &format!(">> tunnel port {p}: remote_ip=flow and no tun_dst or tun_ipv6_dst set"),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        };
        if matches!(cfg.out_key, Some(TunnelKey::Flow)) {
            self.out.wc.tunnel_id = u64::MAX;
        }
        let key = cfg.out_key_for(self.flow.tunnel_id);
        let Some(route) = t.route(dst) else {
            self.note(
                self.depth,
                &format!(">> tunnel port {p}: no route to {dst}"),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        };
        // Out of an underlay (an address of the switch's own on a port),
        // or into a device's bridge (an internal port with an address in
        // the kernel, OVS's br-phy).
        let (mac, dev) = if let Some(u) = t.underlay(route.ofport) {
            if self.root.1.binary_search(&u.ofport).is_err() {
                self.note(
                    self.depth,
                    &format!(
                        ">> tunnel port {p}: underlay port {} is not forwarding",
                        u.ofport
                    ),
                );
                self.reason = Some(XlateDrop::NoSuchPort);
                return;
            }
            (u.mac, None)
        } else if let Some(d) = t.device(route.ofport) {
            (d.mac, Some(d))
        } else {
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        };
        let src = match cfg.local {
            Some(Endpoint::Fixed(a)) => a,
            Some(Endpoint::Flow) if dst.is_ipv4() => {
                self.out.wc.tun_src = u32::MAX;
                match self.flow.tun_src {
                    0 => route.src,
                    a => IpAddr::from(a.to_be_bytes()),
                }
            }
            Some(Endpoint::Flow) => {
                self.out.wc.tun_ipv6_src = [0xff; 16];
                match self.flow.tun_ipv6_src {
                    a if a == [0; 16] => route.src,
                    a => IpAddr::from(a),
                }
            }
            None => route.src,
        };
        if src.is_ipv4() != dst.is_ipv4() {
            self.note(
                self.depth,
                &format!(">> tunnel port {p}: local_ip {src} cannot reach {dst}"),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        }
        let hop = route.gw.unwrap_or(dst);
        let Some(n) = t.neighbour(hop) else {
            let asked = match &dev {
                None => t.ask_from(hop, route.src, mac, route.ofport, false),
                Some(d) => {
                    let from = d.source_for(hop).unwrap_or(route.src);
                    t.ask_from(hop, from, mac, route.ofport, true)
                }
            };
            let what = if hop.is_ipv4() {
                ", ARP request sent"
            } else {
                ", neighbour solicitation sent"
            };
            self.note(
                self.depth,
                &format!(
                    ">> tunnel port {p}: neighbour {hop} unknown{}: the packet is dropped",
                    if asked { what } else { "" }
                ),
            );
            self.reason = Some(XlateDrop::TunnelNoNeighbour);
            return;
        };
        // The outer TOS: the port's, or the inner DSCP (`tos=inherit`),
        // with the inner packet's ECN (congestion experienced sent as
        // ECT(0)), as OVS's tnl_port_send.
        let mut tos = cfg.tos.unwrap_or(0);
        if self.flow.is_ip() {
            self.out.wc.dl_type = 0xffff;
            let inner = self.flow.nw_tos;
            if cfg.tos.is_none() {
                self.out.wc.nw_tos |= 0xfc;
                tos = inner & 0xfc;
            }
            self.out.wc.nw_tos |= 0x03;
            tos = (tos & 0xfc) | if inner & 3 == 3 { 2 } else { inner & 3 };
        }
        // Geneve options: the flow's mapped `tun_metadata` fields.
        // Geneve's OAM flag: the flow's `tun_flags=+oam`.
        let oam = cfg.kind == TunnelKind::Geneve && {
            self.out.wc.tun_flags |= TUN_FLAG_OAM;
            self.flow.tun_flags & TUN_FLAG_OAM != 0
        };
        let opts = if cfg.kind == TunnelKind::Geneve && !t.tlv().is_empty() {
            self.out.wc.tun_metadata_present = 0xff;
            let present = self.flow.tun_metadata_present;
            for e in t.tlv().entries() {
                if present & 1 << e.index != 0 {
                    self.out.wc.tun_metadata[usize::from(e.index)] = u64::MAX;
                }
            }
            GeneveOpts::of_fields(t.tlv(), present, &self.flow.tun_metadata)
        } else {
            GeneveOpts::default()
        };
        self.commit();
        let header = TnlHeader::build(&HeaderParams {
            kind: cfg.kind,
            eth_src: mac,
            eth_dst: n.mac,
            ip_src: src,
            ip_dst: dst,
            tos,
            ttl: cfg.ttl,
            df: cfg.df_default,
            key,
            dst_port: cfg.dst_port,
            csum: cfg.csum_for(dst.is_ipv6()),
            opts,
            oam,
        });
        if let Some(d) = dev {
            if self.out.trace.is_some() {
                self.note(
                    self.depth,
                    &format!(
                        "-> tunnel port {p}: {} tunneling to {dst} via {}, from {} {src} to {} {hop}",
                        cfg.kind.name(),
                        d.name,
                        sluice_packet::wire::ethernet::fmt_mac(&mac),
                        sluice_packet::wire::ethernet::fmt_mac(&n.mac),
                    ),
                );
            }
            self.device_push(Arc::new(header), &d, cfg.kind);
            return;
        }
        if self.out.trace.is_some() {
            self.note(
                self.depth,
                &format!(
                    "-> tunnel port {p}: {} {src} -> {dst} via port {}",
                    cfg.kind.name(),
                    route.ofport
                ),
            );
        }
        self.push(DpAction::TnlOutput {
            header: Arc::new(header),
            port: route.ofport,
        });
        self.out.outputs += 1;
    }

    /// A packet that came out of a tunnel, before the tables see it: its
    /// outer ECN reaches the inner packet, as OVS's `tnl_process_ecn`
    /// (congestion experienced on the outside marks an ECN-capable inner
    /// packet CE; an inner packet that is not ECN-capable is dropped).
    /// False when the packet is dropped.
    pub(super) fn tunnel_receive(&mut self) -> bool {
        if self.root.0.tunnels().is_none() {
            // No tunnels: no packet has tunnel metadata.
            return true;
        }
        // Whether the packet came from a tunnel is part of the decision.
        self.out.wc.tun_family = 0xff;
        if self.flow.tun_family == 0 {
            return true;
        }
        self.out.wc.tun_tos |= 0x03;
        if self.flow.tun_tos & 3 != 3 || !self.flow.is_ip() {
            return true;
        }
        self.out.wc.dl_type = 0xffff;
        self.out.wc.nw_tos |= 0x03;
        if self.flow.nw_tos & 3 == 0 {
            self.note(
                0,
                ">> tunnel packet marked ECN CE around a packet that is not ECN-capable: dropped",
            );
            self.reason = Some(XlateDrop::TunnelEcn);
            return false;
        }
        self.flow.nw_tos |= 3;
        self.dirty.nw_tos |= 3;
        true
    }

    /// A packet received on an underlay port: ARP or ND for the switch's
    /// address and tunnel packets to it are the switch's own (true); the
    /// rest goes through the tables (false).
    pub(super) fn underlay_input(&mut self) -> bool {
        let Some(t) = self.tunnels() else {
            return false;
        };
        if t.underlays().is_empty() {
            return false;
        }
        let Some(u) = t.underlay(self.dp(self.flow.in_port)).copied() else {
            return false;
        };
        self.out.wc.in_port = u32::MAX;
        self.out.wc.dl_type = 0xffff;
        match u.ip {
            IpAddr::V4(a) => self.underlay_ipv4(&t, &u, u32::from(a)),
            IpAddr::V6(a) => self.underlay_ipv6(&t, &u, a.octets()),
        }
    }

    fn underlay_ipv4(&mut self, t: &Tunnels, u: &Underlay, ip: u32) -> bool {
        let key = self.flow;
        if key.dl_type == ethertype::ARP {
            self.out.wc.nw_dst = u32::MAX;
            self.out.wc.nw_src = u32::MAX;
            let gratuitous = key.nw_src == key.nw_dst;
            if key.nw_dst != ip && !gratuitous {
                return false;
            }
            // The decision reads the sender (learned) and the opcode.
            self.out.wc.nw_proto = 0xff;
            self.out.wc.arp_sha = [0xff; 6];
            let sender = IpAddr::from(key.nw_src.to_be_bytes());
            if t.learn(sender, key.arp_sha, u.ofport) {
                self.note(
                    0,
                    &format!(
                        "learned neighbour {sender} at {}",
                        sluice_packet::wire::ethernet::fmt_mac(&key.arp_sha)
                    ),
                );
            }
            if key.nw_proto == ARP_REQUEST && key.nw_dst == ip && !gratuitous {
                // The reply: the request turned around, as a host answers.
                self.out.wc.dl_src = [0xff; 6];
                self.push(DpAction::SetArp(ArpField::Op(2)));
                self.push(DpAction::SetArp(ArpField::Tha(key.arp_sha)));
                self.push(DpAction::SetArp(ArpField::Tpa(key.nw_src)));
                self.push(DpAction::SetArp(ArpField::Sha(u.mac)));
                self.push(DpAction::SetArp(ArpField::Spa(ip)));
                self.push(DpAction::SetEthDst(key.dl_src));
                self.push(DpAction::SetEthSrc(u.mac));
                self.push(DpAction::Output(u.ofport));
                self.out.outputs += 1;
                self.note(0, &format!(">> ARP request for {}: answered", fmt_ipv4(ip)));
            } else {
                self.reason = Some(XlateDrop::TunnelArp);
                self.note(0, ">> ARP for the switch: taken, not forwarded");
            }
            return true;
        }
        if key.dl_type != ethertype::IPV4 {
            return false;
        }
        self.out.wc.nw_dst = u32::MAX;
        if key.nw_dst != ip {
            return false;
        }
        self.underlay_pop(t, u)
    }

    fn underlay_ipv6(&mut self, t: &Tunnels, u: &Underlay, ip: [u8; 16]) -> bool {
        let key = self.flow;
        if key.dl_type != ethertype::IPV6 {
            return false;
        }
        self.out.wc.nw_proto = 0xff;
        if key.nw_proto == proto::ICMPV6 {
            self.out.wc.tp_src = 0xffff;
            self.out.wc.tp_dst = 0xffff;
            let ty = key.tp_src as u8;
            if key.tp_dst == 0 && (ty == nd::SOLICIT || ty == nd::ADVERT) {
                return self.underlay_nd(t, u, ip, ty == nd::SOLICIT);
            }
        }
        self.out.wc.ipv6_dst = [0xff; 16];
        if key.ipv6_dst != ip {
            return false;
        }
        self.underlay_pop(t, u)
    }

    /// A neighbour solicitation or advertisement on an IPv6 underlay: a
    /// solicitation for the switch's address is answered, an
    /// advertisement to it taken; both teach the neighbour cache.
    fn underlay_nd(&mut self, t: &Tunnels, u: &Underlay, ip: [u8; 16], solicit: bool) -> bool {
        let key = self.flow;
        self.out.wc.nd_target = [0xff; 16];
        self.out.wc.ipv6_dst = [0xff; 16];
        self.out.wc.ipv6_src = [0xff; 16];
        let (who, mac) = if solicit {
            if key.nd_target != ip {
                return false;
            }
            self.out.wc.arp_sha = [0xff; 6];
            (key.ipv6_src, key.arp_sha)
        } else {
            if key.ipv6_dst != ip {
                return false;
            }
            self.out.wc.arp_tha = [0xff; 6];
            (key.nd_target, key.arp_tha)
        };
        let who = IpAddr::from(who);
        if t.learn(who, mac, u.ofport) {
            self.note(
                0,
                &format!(
                    "learned neighbour {who} at {}",
                    sluice_packet::wire::ethernet::fmt_mac(&mac)
                ),
            );
        }
        if solicit && !who.is_unspecified() && !who.is_multicast() {
            self.out.wc.nw_ttl = 0xff;
            if key.nw_ttl == 255 {
                self.push(DpAction::NdAdvert { mac: u.mac, ip });
                self.push(DpAction::Output(u.ofport));
                self.out.outputs += 1;
                self.note(
                    0,
                    &format!(
                        ">> neighbour solicitation for {}: answered",
                        IpAddr::from(ip)
                    ),
                );
                return true;
            }
        }
        self.reason = Some(XlateDrop::TunnelArp);
        self.note(
            0,
            ">> neighbour discovery for the switch: taken, not forwarded",
        );
        true
    }

    /// A packet to the underlay's address: a tunnel packet if it is UDP to
    /// a tunnel's port (or GRE), unfragmented, to the underlay's Ethernet
    /// address. True when it is (then decapsulated).
    fn underlay_pop(&mut self, t: &Tunnels, u: &Underlay) -> bool {
        self.out.wc.dl_dst = [0xff; 6];
        if self.flow.dl_dst != u.mac {
            return false;
        }
        let Some(r) = self.tunnel_receivers(t) else {
            return false;
        };
        self.note(
            0,
            &format!(">> {} packet for the switch: decapsulated", r.kind.name()),
        );
        self.push(DpAction::TnlPop(Arc::clone(r)));
        self.out.outputs += 1;
        true
    }

    /// The tunnel ports that take the packet, an IP packet to one of the
    /// switch's addresses, if it is a tunnel's: unfragmented, UDP to a
    /// tunnel's port or GRE (OVS's `tnl_port_map_lookup`).
    pub(super) fn tunnel_receivers<'t>(&mut self, t: &'t Tunnels) -> Option<&'t Arc<Receivers>> {
        let key = self.flow;
        self.out.wc.nw_proto = 0xff;
        self.out.wc.nw_frag = 0xff;
        if key.nw_frag & FRAG_ANY != 0 {
            return None;
        }
        match key.nw_proto {
            proto::UDP => {
                self.out.wc.tp_dst = 0xffff;
                t.udp_kind(key.tp_dst)
                    .and_then(|k| t.receivers(k, key.tp_dst))
            }
            47 => t.receivers(TunnelKind::Gre, 0),
            _ => None,
        }
    }
}
