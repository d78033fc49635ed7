//! Port mirroring in the translation, as Open vSwitch's `mirror_packet`
//! (`ofproto/ofproto-dpif-xlate.c`): the mirrors that take what the input
//! port receives copy the packet before the first rule's actions run;
//! after each output to a port, those that take what it sends copy the
//! packet as it is then. A copy goes to the mirror's output port tagged
//! as that port's VLAN mode says (as NORMAL outputs); each mirror, and
//! every mirror with the same output, copies a packet at most once, a
//! recirculation included. The bridge's mirrors are
//! [`sluice_bridge::Mirrors`].

use sluice_bridge::Mirrors;
use sluice_packet::wire::ethernet::tci;

use super::Ctx;

impl Ctx<'_, '_> {
    /// The mirrors that take what the input port receives (at the start
    /// of a first pass, or on entering a bridge through a patch port).
    pub(super) fn mirror_ingress(&mut self) {
        if !self.env.rules.bridge().has_mirrors() {
            return;
        }
        let ms = self.env.rules.bridge().mirrors();
        if ms.is_empty() {
            return;
        }
        let p = self.flow.in_port;
        self.mirror_packet(&ms, p, ms.src(p));
    }

    /// After an output to the current bridge's port `port`: the mirrors
    /// that take what it sends.
    pub(super) fn mirror_egress(&mut self, port: u32) {
        if !self.env.rules.bridge().has_mirrors() {
            return;
        }
        let ms = self.env.rules.bridge().mirrors();
        if ms.is_empty() {
            return;
        }
        self.mirror_packet(&ms, port, ms.dst(port));
    }

    /// Copies the packet, received or sent on `port`, to the outputs of
    /// the mirrors `mask` that have not copied it yet.
    fn mirror_packet(&mut self, ms: &Mirrors, port: u32, mask: u32) {
        let mut todo = mask & !self.mirrored;
        if todo == 0 {
            return;
        }
        let bridge = std::sync::Arc::clone(self.env.rules.bridge());
        // The VLAN the packet is in on `port` (mirrors may select by it;
        // a packet the port would not take is not mirrored).
        self.unwc_vlan(0, tci::VID_MASK | tci::PRESENT, 0);
        let in_tags = self.tags();
        let known = self.env.ports.binary_search(&port).is_ok();
        let tags = if known {
            match super::normal::input(&bridge.port(port), in_tags) {
                Some(t) => t,
                None => return,
            }
        } else {
            in_tags
        };
        while todo != 0 {
            let i = todo.trailing_zeros() as usize;
            todo &= !(1 << i);
            let Some((m, same_output)) = ms.get(i) else {
                break;
            };
            if !m.vlans.is_empty() && !m.vlans.contains(&tags[0].vid) {
                continue;
            }
            self.mirrored |= same_output;
            if self.env.ports.binary_search(&m.output).is_ok() {
                self.note(
                    self.depth,
                    &format!("mirror {}: a copy to port {}", m.name, m.output),
                );
                let mode = bridge.port(m.output);
                self.output_normal(m.output, &mode, tags, in_tags);
            }
            // (That output may have run other mirrors.)
            todo &= !self.mirrored;
        }
    }
}
