//! Tunnels through a device (an internal port with an address in the
//! kernel, OVS's `br-phy`), as ofproto-dpif-xlate's
//! `native_tunnel_output` and `terminate_native_tunnel`:
//!
//! - an output to a tunnel port whose route leaves by a device pushes the
//!   outer header (the device's Ethernet address as its source) and the
//!   packet then enters the device's bridge on the device's port, its
//!   flow now the outer headers: that bridge's rules (`NORMAL`, most
//!   often) choose the physical port. Its wildcards are not the
//!   megaflow's (the outer headers follow from the inner packet, the route
//!   and the neighbour, whose changes redo the translation) and it learns
//!   no MAC (OVS runs it without side effects);
//! - an output to a device of a packet to one of the devices' addresses
//!   and Ethernet address on a tunnel's UDP port (or GRE) is the tunnel's
//!   receive instead (`tnl_pop`); ARP replies and gratuitous ARP (IPv6
//!   neighbour advertisements) going to a device teach the neighbour
//!   cache and go on to the kernel.

use std::net::IpAddr;
use std::sync::Arc;

use sluice_packet::tunnel::{TnlHeader, TunnelKind};
use sluice_packet::wire::ethernet::{ethertype, fmt_mac};
use sluice_packet::wire::icmp::nd;
use sluice_packet::wire::l4::proto;
use sluice_packet::FlowKey;

use super::bridges::split_dp_port;
use super::{Ctx, XlateDrop, MAX_DEPTH, MAX_NESTING};
use crate::dpaction::DpAction;
use crate::tunnel::{Device, Tunnels};

/// ARP's reply opcode.
const ARP_REPLY: u16 = 2;

impl Ctx<'_, '_> {
    /// The encapsulated packet (`header`, of a tunnel of `kind`) enters
    /// device `dev`'s bridge on the device's port; each port that
    /// bridge's rules send it to gets the encapsulation.
    pub(super) fn device_push(&mut self, header: Arc<TnlHeader>, dev: &Device, kind: TunnelKind) {
        // Another bridge's table 0: a deepening resubmit, as OVS's
        // xlate_table_action counts it.
        if self.deep >= MAX_DEPTH || self.depth >= MAX_NESTING {
            self.error = Some(XlateDrop::RecursionTooDeep);
            return;
        }
        let (bridge, port) = split_dp_port(dev.port);
        let outer = outer_flow(&header, kind, port);
        let at = self.out.actions.len();
        let saved = (
            self.snapshot(),
            self.env,
            (self.running, self.running_ix),
            self.action_set.clone(),
            self.stale,
            self.out.wc,
            self.out.learn,
            self.out.outputs,
        );
        if !self.enter_bridge(bridge) {
            self.note(
                self.depth,
                &format!(">> tunnel device {}: its bridge is gone", dev.name),
            );
            self.reason = Some(XlateDrop::TunnelNoRoute);
            return;
        }
        self.bridge_heading();
        self.flow = outer;
        self.dirty = FlowKey::default();
        self.vlan_origin = [Some(0), Some(1)];
        (self.base_tci, self.base_tpid, self.base_origin) = ([0; 2], [0; 2], [Some(0), Some(1)]);
        self.arp_base = outer;
        self.action_set.clear();
        self.depth += 1;
        self.deep += 1;
        self.table(0, true);
        self.run_action_set();
        self.deep -= 1;
        self.depth -= 1;
        let frozen = self.frozen.take().is_some();
        self.paused = None;
        let acts: Vec<DpAction> = self.out.actions.drain(at..).collect();
        let (snap, env, running, set, stale, wc, learn, outputs) = saved;
        let reason = self.reason;
        self.restore(snap);
        self.env = env;
        (self.running, self.running_ix) = running;
        (self.action_set, self.stale) = (set, stale);
        (self.out.wc, self.out.learn, self.out.outputs) = (wc, learn, outputs);
        // Each output gets the header as the VLAN actions before it leave
        // it (NORMAL tags the packet for a trunk uplink when the device is
        // an access port of a VLAN: OVS-DPDK's tunnel endpoint on a
        // tagged internal port); anything else would act on the
        // encapsulated packet in ways a header cannot hold.
        let mut pushes = Vec::new();
        let mut h = Some(Arc::clone(&header));
        for a in &acts {
            h = match (a, h) {
                (DpAction::Output(p), Some(h)) => {
                    pushes.push((Arc::clone(&h), *p));
                    Some(h)
                }
                (DpAction::PushVlan { tpid, tci }, Some(h)) => {
                    h.with_vlan(*tpid, *tci).map(Arc::new)
                }
                (DpAction::PopVlan, Some(h)) => h.without_vlan().map(Arc::new),
                (DpAction::SetVlanTci(tci), Some(h)) => h.with_vlan_tci(*tci).map(Arc::new),
                _ => None,
            };
        }
        if frozen || h.is_none() {
            // Rewrites, recirculation or the controller in the
            // underlay's bridge would act on the encapsulated packet.
            self.note(
                self.depth,
                &format!(
                    ">> bridge \"{}\": actions other than outputs and VLAN tags on an encapsulated packet are not supported (only what NORMAL gives)",
                    dev.bridge
                ),
            );
            self.reason = Some(XlateDrop::TunnelEgress);
            return;
        }
        if pushes.is_empty() {
            self.reason = reason.or(Some(XlateDrop::NoOutput));
        }
        for (header, port) in pushes {
            self.push(DpAction::TnlOutput { header, port });
            self.out.outputs += 1;
        }
    }

    /// An output to port `p` of the current bridge when it is a device:
    /// true when the packet is a tunnel's to one of the devices'
    /// addresses, then decapsulated instead; ARP and ND replies to the
    /// bridge's devices teach the neighbour cache (and go on).
    pub(super) fn device_output(&mut self, p: u32) -> bool {
        let Some(t) = self.tunnels() else {
            return false;
        };
        if !t.has_devices() {
            return false;
        }
        let Some(dev) = t.device(self.dp(p)) else {
            return false;
        };
        let key = self.flow;
        self.out.wc.dl_type = 0xffff;
        let dst = match key.dl_type {
            ethertype::ARP => {
                self.snoop_arp(&t, &dev);
                return false;
            }
            ethertype::IPV4 => {
                self.out.wc.nw_dst = u32::MAX;
                IpAddr::from(key.nw_dst.to_be_bytes())
            }
            ethertype::IPV6 => {
                self.out.wc.nw_proto = 0xff;
                if key.nw_proto == proto::ICMPV6 {
                    self.snoop_nd(&t, &dev);
                }
                self.out.wc.ipv6_dst = [0xff; 16];
                IpAddr::from(key.ipv6_dst)
            }
            _ => return false,
        };
        self.out.wc.dl_dst = [0xff; 6];
        if !t.device_takes(dst, key.dl_dst) {
            return false;
        }
        let Some(r) = self.tunnel_receivers(&t) else {
            return false;
        };
        // The sender is a neighbour (OVS's tnl_neigh_set on receipt).
        let src = if key.dl_type == ethertype::IPV4 {
            IpAddr::from(key.nw_src.to_be_bytes())
        } else {
            IpAddr::from(key.ipv6_src)
        };
        if self.out.trace.is_none() {
            t.learn(src, key.dl_src, dev.port);
        }
        self.note(
            self.depth,
            &format!(
                "-> {} packet to {dst} on {}: decapsulated",
                r.kind.name(),
                dev.name
            ),
        );
        self.commit();
        self.push(DpAction::TnlPop(Arc::clone(r)));
        self.out.outputs += 1;
        true
    }

    /// OVS's `tnl_arp_snoop`: an ARP reply to one of the bridge's devices'
    /// addresses, or a gratuitous ARP, says where its sender is.
    fn snoop_arp(&mut self, t: &Tunnels, dev: &Device) {
        let key = self.flow;
        self.out.wc.nw_src = u32::MAX;
        self.out.wc.nw_dst = u32::MAX;
        let garp = key.nw_src == key.nw_dst;
        let target = IpAddr::from(key.nw_dst.to_be_bytes());
        if !garp && !self.bridge_has(t, target) {
            return;
        }
        self.out.wc.nw_proto = 0xff;
        self.out.wc.arp_sha = [0xff; 6];
        if (!garp && u16::from(key.nw_proto) != ARP_REPLY) || key.arp_sha == [0; 6] {
            return;
        }
        let sender = IpAddr::from(key.nw_src.to_be_bytes());
        if self.out.trace.is_none() && t.learn(sender, key.arp_sha, dev.port) {
            self.note(
                self.depth,
                &format!("learned neighbour {sender} at {}", fmt_mac(&key.arp_sha)),
            );
        }
    }

    /// OVS's `tnl_nd_snoop`: a neighbour advertisement to one of the
    /// bridge's devices' addresses with a target link-layer address.
    fn snoop_nd(&mut self, t: &Tunnels, dev: &Device) {
        let key = self.flow;
        self.out.wc.tp_src = 0xffff;
        self.out.wc.tp_dst = 0xffff;
        self.out.wc.ipv6_dst = [0xff; 16];
        if key.tp_src as u8 != nd::ADVERT || key.tp_dst != 0 {
            return;
        }
        if !self.bridge_has(t, IpAddr::from(key.ipv6_dst)) {
            return;
        }
        self.out.wc.arp_tha = [0xff; 6];
        self.out.wc.nd_target = [0xff; 16];
        self.out.wc.ipv6_src = [0xff; 16];
        if key.arp_tha == [0; 6] {
            return;
        }
        let who = IpAddr::from(key.nd_target);
        if self.out.trace.is_none() && t.learn(who, key.arp_tha, dev.port) {
            self.note(
                self.depth,
                &format!("learned neighbour {who} at {}", fmt_mac(&key.arp_tha)),
            );
        }
    }

    /// Whether a device of the current bridge has address `ip`.
    fn bridge_has(&self, t: &Tunnels, ip: IpAddr) -> bool {
        t.devices()
            .iter()
            .any(|d| split_dp_port(d.port).0 == self.env.bridge && d.has(ip))
    }
}

/// The flow of an encapsulated packet as its header makes it (OVS's
/// `propagate_tunnel_data_to_flow`), coming in on `in_port`.
fn outer_flow(h: &TnlHeader, kind: TunnelKind, in_port: u32) -> FlowKey {
    let b = h.bytes();
    let mut f = FlowKey {
        in_port,
        ..FlowKey::default()
    };
    f.dl_dst.copy_from_slice(&b[0..6]);
    f.dl_src.copy_from_slice(&b[6..12]);
    f.dl_type = u16::from_be_bytes([b[12], b[13]]);
    let l4 = if f.dl_type == ethertype::IPV6 {
        f.nw_tos = ((u16::from_be_bytes([b[14], b[15]]) >> 4) & 0xff) as u8;
        f.nw_ttl = b[21];
        f.nw_proto = b[20];
        f.ipv6_src.copy_from_slice(&b[22..38]);
        f.ipv6_dst.copy_from_slice(&b[38..54]);
        54
    } else {
        let ihl = usize::from(b[14] & 0x0f) * 4;
        f.nw_tos = b[15];
        f.nw_ttl = b[22];
        f.nw_proto = b[23];
        f.nw_src = u32::from_be_bytes([b[26], b[27], b[28], b[29]]);
        f.nw_dst = u32::from_be_bytes([b[30], b[31], b[32], b[33]]);
        14 + ihl
    };
    if kind.is_udp() && b.len() >= l4 + 4 {
        // The source port is chosen per packet (0 here, as OVS's flow
        // before the datapath fills it).
        f.tp_dst = u16::from_be_bytes([b[l4 + 2], b[l4 + 3]]);
    }
    f
}
