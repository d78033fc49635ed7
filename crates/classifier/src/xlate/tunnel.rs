//! Tunnels in translation, as OVS's native tunnelling
//! (`ofproto-dpif-xlate.c`'s `native_tunnel_output` and the tunnel-port
//! receive side):
//!
//! - an output to a tunnel port becomes [`DpAction::TnlOutput`]: the
//!   outer header built here from the port's options, the flow's tunnel
//!   fields where an option is `flow`, the route to the destination and
//!   the next hop's Ethernet address (an unknown one queues an ARP
//!   request and drops the packet, named);
//! - on an underlay port (one with an address of the switch's own), ARP
//!   for that address is answered by header rewrites and an output back
//!   (and teaches the neighbour cache), and IPv4 to that address on a
//!   tunnel's UDP port (or GRE) becomes [`DpAction::TnlPop`]; everything
//!   else goes through the tables as on any port.

use std::sync::Arc;

use sluice_packet::key::FRAG_ANY;
use sluice_packet::rewrite::ArpField;
use sluice_packet::tunnel::{
    Endpoint, HeaderParams, TnlHeader, TunnelConfig, TunnelKey, TunnelKind,
};
use sluice_packet::wire::ethernet::ethertype;
use sluice_packet::wire::ipv4::fmt_ipv4;
use sluice_packet::wire::l4::proto;

use super::{Ctx, XlateDrop};
use crate::dpaction::DpAction;
use crate::tunnel::Tunnels;

/// ARP opcodes.
const ARP_REQUEST: u8 = 1;

impl Ctx<'_, '_> {
    fn tunnels(&self) -> Option<Arc<Tunnels>> {
        self.env.rules.tunnels().cloned()
    }

    /// The tunnel port `p`'s configuration, if `p` is a tunnel port.
    pub(super) fn tunnel_port(&self, p: u32) -> Option<TunnelConfig> {
        self.env.rules.tunnels().and_then(|t| t.port(p)).cloned()
    }

    /// An output to tunnel port `p`.
    pub(super) fn tunnel_output(&mut self, p: u32, cfg: &TunnelConfig) {
        let Some(t) = self.tunnels() else {
            return;
        };
        let dst = match cfg.remote {
            Endpoint::Fixed(a) => a,
            Endpoint::Flow => {
                self.out.wc.tun_dst = u32::MAX;
                self.flow.tun_dst
            }
        };
        if dst == 0 {
            self.note(
                self.depth,
                &format!(">> tunnel port {p}: remote_ip=flow and no tun_dst set"),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        }
        if matches!(cfg.out_key, Some(TunnelKey::Flow)) {
            self.out.wc.tunnel_id = u64::MAX;
        }
        let key = cfg.out_key_for(self.flow.tunnel_id);
        let Some(route) = t.route(dst) else {
            self.note(
                self.depth,
                &format!(">> tunnel port {p}: no route to {}", fmt_ipv4(dst)),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        };
        let Some(under) = t.underlay(route.ofport).copied() else {
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        };
        if self.env.ports.binary_search(&under.ofport).is_err() {
            self.note(
                self.depth,
                &format!(
                    ">> tunnel port {p}: underlay port {} is not forwarding",
                    under.ofport
                ),
            );
            self.reason = Some(XlateDrop::NoSuchPort);
            return;
        }
        let src = match cfg.local {
            Some(Endpoint::Fixed(a)) => a,
            Some(Endpoint::Flow) if self.flow.tun_src != 0 => {
                self.out.wc.tun_src = u32::MAX;
                self.flow.tun_src
            }
            _ => route.src,
        };
        let hop = if route.gw != 0 { route.gw } else { dst };
        let Some(n) = t.neighbour(hop) else {
            let asked = t.ask(hop, &under);
            self.note(
                self.depth,
                &format!(
                    ">> tunnel port {p}: neighbour {} unknown{}: the packet is dropped",
                    fmt_ipv4(hop),
                    if asked { ", ARP request sent" } else { "" }
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
        self.commit();
        let header = TnlHeader::build(&HeaderParams {
            kind: cfg.kind,
            eth_src: under.mac,
            eth_dst: n.mac,
            ip_src: src,
            ip_dst: dst,
            tos,
            ttl: cfg.ttl,
            df: cfg.df_default,
            key,
            dst_port: cfg.dst_port,
            csum: cfg.csum,
        });
        if self.out.trace.is_some() {
            self.note(
                self.depth,
                &format!(
                    "-> tunnel port {p}: {} {} -> {} via port {}",
                    cfg.kind.name(),
                    fmt_ipv4(src),
                    fmt_ipv4(dst),
                    under.ofport
                ),
            );
        }
        self.push(DpAction::TnlOutput {
            header: Arc::new(header),
            port: under.ofport,
        });
        self.out.outputs += 1;
    }

    /// A packet that came out of a tunnel, before the tables see it: its
    /// outer ECN reaches the inner packet, as OVS's `tnl_process_ecn`
    /// (congestion experienced on the outside marks an ECN-capable inner
    /// packet CE; an inner packet that is not ECN-capable is dropped).
    /// False when the packet is dropped.
    pub(super) fn tunnel_receive(&mut self) -> bool {
        if self.env.rules.tunnels().is_none() {
            // No tunnels: no packet has tunnel metadata.
            return true;
        }
        // Whether the packet came from a tunnel is part of the decision.
        self.out.wc.tun_dst = u32::MAX;
        if self.flow.tun_dst == 0 {
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

    /// A packet received on an underlay port: ARP for the switch's address
    /// and tunnel packets to it are the switch's own (true); the rest goes
    /// through the tables (false).
    pub(super) fn underlay_input(&mut self) -> bool {
        let Some(t) = self.tunnels() else {
            return false;
        };
        let key = self.flow;
        let Some(u) = t.underlay(key.in_port).copied() else {
            return false;
        };
        self.out.wc.in_port = u32::MAX;
        self.out.wc.dl_type = 0xffff;
        if key.dl_type == ethertype::ARP {
            self.out.wc.nw_dst = u32::MAX;
            self.out.wc.nw_src = u32::MAX;
            let gratuitous = key.nw_src == key.nw_dst;
            if key.nw_dst != u.ip && !gratuitous {
                return false;
            }
            // The decision reads the sender (learned) and the opcode.
            self.out.wc.nw_proto = 0xff;
            self.out.wc.arp_sha = [0xff; 6];
            if t.learn(key.nw_src, key.arp_sha, u.ofport) {
                self.note(
                    0,
                    &format!(
                        "learned neighbour {} at {}",
                        fmt_ipv4(key.nw_src),
                        sluice_packet::wire::ethernet::fmt_mac(&key.arp_sha)
                    ),
                );
            }
            if key.nw_proto == ARP_REQUEST && key.nw_dst == u.ip && !gratuitous {
                // The reply: the request turned around, as a host answers.
                self.out.wc.dl_src = [0xff; 6];
                self.push(DpAction::SetArp(ArpField::Op(2)));
                self.push(DpAction::SetArp(ArpField::Tha(key.arp_sha)));
                self.push(DpAction::SetArp(ArpField::Tpa(key.nw_src)));
                self.push(DpAction::SetArp(ArpField::Sha(u.mac)));
                self.push(DpAction::SetArp(ArpField::Spa(u.ip)));
                self.push(DpAction::SetEthDst(key.dl_src));
                self.push(DpAction::SetEthSrc(u.mac));
                self.push(DpAction::Output(u.ofport));
                self.out.outputs += 1;
                self.note(
                    0,
                    &format!(">> ARP request for {}: answered", fmt_ipv4(u.ip)),
                );
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
        if key.nw_dst != u.ip {
            return false;
        }
        self.out.wc.nw_proto = 0xff;
        self.out.wc.nw_frag = 0xff;
        self.out.wc.dl_dst = [0xff; 6];
        if key.nw_frag & FRAG_ANY != 0 || key.dl_dst != u.mac {
            return false;
        }
        let receivers = match key.nw_proto {
            proto::UDP => {
                self.out.wc.tp_dst = 0xffff;
                t.udp_kind(key.tp_dst)
                    .and_then(|k| t.receivers(k, key.tp_dst))
            }
            47 => t.receivers(TunnelKind::Gre, 0),
            _ => None,
        };
        let Some(r) = receivers else {
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
}
