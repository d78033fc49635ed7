//! `NORMAL`: the bridge's own switching, as Open vSwitch's `xlate_normal`
//! does it (`ofproto/ofproto-dpif-xlate.c` is the reference; no bonds or
//! multicast snooping here; a mirror's output port is left out, mirroring
//! itself is [`super::mirror`]): the packet's VLAN from its input
//! port's mode, its source learned (by the upcall, see
//! [`super::Translation::learn`]), its destination looked up in the MAC
//! table of its VLAN: to the learned port, or flooded to every other port
//! that carries the VLAN; each output tagged or not as its port's mode
//! says. The decision reads the source and destination MACs, the VLAN id
//! and the input port, which the megaflow then matches.

use sluice_bridge::macs::Learn;
use sluice_bridge::{PortVlan, VlanMode};
use sluice_packet::wire::ethernet::tci;

use super::Ctx;

/// A tag as NORMAL handles it (OVS's `xvlan`): absent when its id and
/// priority are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Tag {
    tpid: u16,
    pub(super) vid: u16,
    pcp: u16,
}

impl Tag {
    fn present(&self) -> bool {
        self.vid != 0 || self.pcp != 0
    }
}

/// Reserved multicast destinations (802.1D: 01:80:c2:00:00:00-0f),
/// dropped as OVS drops them without `forward-bpdu`.
fn reserved(mac: &[u8; 6]) -> bool {
    mac[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && mac[5] & 0xf0 == 0
}

impl Ctx<'_, '_> {
    /// The packet's tags, outermost first (`xvlan_extract`).
    pub(super) fn tags(&self) -> [Tag; 2] {
        let mut t = [Tag::default(); 2];
        for (i, slot) in t.iter_mut().enumerate() {
            let v = self.flow.vlan_tci[i];
            if v & tci::PRESENT == 0 {
                break;
            }
            *slot = Tag {
                tpid: self.flow.vlan_tpid[i],
                vid: v & tci::VID_MASK,
                pcp: (v & tci::PCP_MASK) >> tci::PCP_SHIFT,
            };
        }
        t
    }

    pub(super) fn normal(&mut self) {
        let bridge = std::sync::Arc::clone(self.env.rules.bridge());
        self.out.wc.dl_src = [0xff; 6];
        self.out.wc.dl_dst = [0xff; 6];
        self.out.wc.in_port = u32::MAX;
        self.unwc_vlan(0, tci::VID_MASK | tci::PRESENT, 0);
        let in_port = self.flow.in_port;
        let (src, dst) = (self.flow.dl_src, self.flow.dl_dst);
        let in_tags = self.tags();
        // A packet from no port of the bridge (a packet-out from the
        // controller) is OVS's OFPP_NONE bundle: any VLAN, nothing
        // learned, flooded to every port.
        let known = self.env.ports.binary_search(&in_port).is_ok();
        let mirrors = bridge.mirrors();
        if known && mirrors.is_output(in_port) {
            self.note(
                self.depth,
                ">> input port is reserved for mirroring, dropping",
            );
            return;
        }
        let in_mode = bridge.port(in_port);
        let tags = if known {
            match input(&in_mode, in_tags) {
                Some(t) => t,
                None => {
                    self.note(
                        self.depth,
                        ">> disallowed VLAN VID for this input port, dropping",
                    );
                    return;
                }
            }
        } else {
            in_tags
        };
        let vlan = tags[0].vid;
        if reserved(&dst) {
            self.note(
                self.depth,
                ">> packet has reserved destination MAC, dropping",
            );
            return;
        }
        if known && src[0] & 1 == 0 {
            let l = Learn {
                mac: src,
                vlan,
                port: in_port,
                bridge: self.env.bridge,
            };
            if !self.out.learn.push(l) {
                self.note(
                    self.depth,
                    ">> NORMAL in a third bridge in one pass: its MAC learning is not kept",
                );
            }
        }
        // The source is learned on the input port before the lookup (the
        // learning itself waits for the upcall).
        let found = if known && dst == src && dst[0] & 1 == 0 {
            Some(in_port)
        } else {
            if dst[0] & 1 == 0 {
                // (A multicast address is never in the table.)
                self.out
                    .mac_reads
                    .push(sluice_bridge::macs::Key { vlan, mac: dst });
            }
            bridge.macs.lookup(dst, vlan)
        };
        match found {
            Some(p) if p == in_port => {
                self.note(self.depth, ">> learned port is input port, dropping");
            }
            Some(p) if self.env.ports.binary_search(&p).is_ok() && !mirrors.is_output(p) => {
                self.note(self.depth, &format!("forwarding to learned port {p}"));
                self.output_normal(p, &bridge.port(p), tags, in_tags);
            }
            Some(_) => {
                self.note(self.depth, ">> learned port is unknown, dropping");
            }
            None => {
                self.note(self.depth, "no learned MAC for destination, flooding");
                let ports = self.env.ports;
                // In OVS's order: its bundles as the bridge made them, the
                // bridge's own port first (ports are numbered as made).
                const LOCAL: u32 = 0xffff_fffe;
                let local_first = ports
                    .binary_search(&LOCAL)
                    .ok()
                    .map(|i| ports[i])
                    .into_iter()
                    .chain(ports.iter().copied().filter(|&p| p != LOCAL));
                for p in local_first {
                    if p == in_port || mirrors.is_output(p) {
                        continue;
                    }
                    let mode = bridge.port(p);
                    if mode.includes(vlan) {
                        self.output_normal(p, &mode, tags, in_tags);
                    }
                }
            }
        }
    }

    /// One output of NORMAL: the packet's tags as port `mode` sends VLAN
    /// `tags[0]` (`xvlan_output_translate`, `xvlan_put`), then back.
    pub(super) fn output_normal(
        &mut self,
        port: u32,
        mode: &PortVlan,
        tags: [Tag; 2],
        in_tags: [Tag; 2],
    ) {
        let out = match mode.mode {
            VlanMode::Access => [Tag::default(); 2],
            VlanMode::Trunk | VlanMode::NativeTagged => tags,
            VlanMode::NativeUntagged if tags[0].vid == mode.tag => [tags[1], Tag::default()],
            VlanMode::NativeUntagged => tags,
        };
        let saved = (self.flow.vlan_tci, self.flow.vlan_tpid, self.vlan_origin);
        for (i, t) in out.iter().enumerate() {
            if t.present() {
                self.flow.vlan_tci[i] = tci::PRESENT | t.vid | t.pcp << tci::PCP_SHIFT;
                self.flow.vlan_tpid[i] = if t.tpid != 0 { t.tpid } else { 0x8100 };
            } else {
                self.flow.vlan_tci[i] = 0;
                self.flow.vlan_tpid[i] = 0;
            }
            // Which of the packet's own tags this one is, if any.
            self.vlan_origin[i] = (0..2)
                .find(|&j| in_tags[j].present() && in_tags[j] == *t && t.present())
                .and_then(|j| saved.2[j]);
        }
        self.vlans_touched = true;
        self.emit_output(port);
        (self.flow.vlan_tci, self.flow.vlan_tpid, self.vlan_origin) = saved;
        self.vlans_touched = true;
    }
}

/// The tags a packet with tags `t` belongs to on an input port of mode
/// `m` (`input_vid_is_valid`, `xvlan_input_translate`), or `None` when
/// the port does not take it.
pub(super) fn input(m: &PortVlan, t: [Tag; 2]) -> Option<[Tag; 2]> {
    let vlan = m.input(t[0].vid)?;
    let mut x = t;
    if vlan != t[0].vid || m.mode == VlanMode::Access {
        // Given the port's own VLAN: an access port's packet loses any
        // tag it had (a priority tag), a native one gains it.
        if m.mode == VlanMode::Access {
            x = [Tag::default(); 2];
        }
        x[0] = Tag {
            tpid: t[0].tpid,
            vid: vlan,
            pcp: t[0].pcp,
        };
    }
    Some(x)
}
