//! Several bridges on one datapath, as Open vSwitch's `ovs-netdev`: every
//! bridge has its own rules (with its MAC table, groups and meters) and
//! its own OpenFlow port numbers; the datapath numbers every port of every
//! bridge in one space. Patch ports join two bridges inside the
//! translation, as ofproto-dpif's `patch_port_output`: a packet crossing
//! one is translated on in the peer bridge in the same pass, so the
//! crossing is one megaflow.
//!
//! Datapath port numbers: [`crate::patch`].

use std::sync::Arc;

use sluice_packet::key::TUN_WORDS;
use sluice_packet::FlowKey;

pub use crate::patch::{dp_port, split_dp_port, PatchPort, LOCAL, MAX_BRIDGES};
use crate::table::RuleSet;

use super::{Ctx, XlateDrop, MAX_DEPTH, MAX_NESTING};

/// One bridge as translation sees it: its rules and its ports' OpenFlow
/// numbers, ascending (patch ports included).
#[derive(Debug, Clone, Default)]
pub struct BridgeView {
    /// The rules (with the MAC table, groups, meters and patch ports).
    pub rules: Arc<RuleSet>,
    /// Every port's OpenFlow number, ascending.
    pub ports: Vec<u32>,
}

impl BridgeView {
    /// The ports of bridge `bridge` among the datapath's `dp_ports`
    /// (ascending datapath numbers), with its patch ports, ascending.
    pub fn ports_of(bridge: u16, dp_ports: &[u32], rules: &RuleSet) -> Vec<u32> {
        let mut v: Vec<u32> = dp_ports
            .iter()
            .map(|&p| split_dp_port(p))
            .filter(|&(b, _)| b == bridge)
            .map(|(_, p)| p)
            .chain(rules.patch_ports().iter().map(|p| p.port))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The first bridge's ports, with its patch ports, ascending: with
    /// no other bridge (`alone`) every datapath number is its own, as it
    /// is; with others, [`BridgeView::ports_of`] bridge 0.
    pub fn first_ports(dp_ports: &[u32], rules: &RuleSet, alone: bool) -> Vec<u32> {
        if !alone {
            return Self::ports_of(0, dp_ports, rules);
        }
        let mut v = dp_ports.to_vec();
        let patches = rules.patch_ports();
        if !patches.is_empty() {
            v.extend(patches.iter().map(|p| p.port));
            v.sort_unstable();
            v.dedup();
        }
        v
    }
}

/// The bits of the pipeline's own fields, which a patch crossing clears
/// for the peer bridge and puts back after (as OVS's `patch_port_output`):
/// the input port, metadata, registers, the action set's output, the
/// tunnel's fields and the connection tracking state.
pub(super) fn crossing_bits() -> &'static FlowKey {
    static BITS: std::sync::OnceLock<FlowKey> = std::sync::OnceLock::new();
    BITS.get_or_init(|| {
        let mut m = FlowKey {
            in_port: !0,
            metadata: !0,
            regs: [!0; sluice_packet::key::N_REGS],
            actset_output: !0,
            ct_state: !0,
            ct_zone: !0,
            ct_mark: !0,
            ct_label: [!0; 2],
            ct_nw_proto: !0,
            ct_tp_src: !0,
            ct_tp_dst: !0,
            ct_nw_src: !0,
            ct_nw_dst: !0,
            ct_ipv6_src: [!0; 16],
            ct_ipv6_dst: [!0; 16],
            ..FlowKey::default()
        };
        m.words_mut()[TUN_WORDS].fill(!0);
        m
    })
}

impl<'a> Ctx<'a, '_> {
    /// Moves the translation into bridge `bridge` (its rules and ports);
    /// false if the datapath has no such bridge.
    pub(super) fn enter_bridge(&mut self, bridge: u16) -> bool {
        if bridge == 0 {
            self.env.rules = self.root.0;
            self.env.ports = self.root.1;
            self.env.bridge = 0;
            return true;
        }
        let bridges = self.env.bridges;
        match bridges.get(bridge as usize).and_then(Option::as_ref) {
            Some(b) => {
                self.env.rules = &b.rules;
                self.env.ports = &b.ports;
                self.env.bridge = bridge;
                true
            }
            None => false,
        }
    }

    /// At the start of a translation on a datapath with several bridges:
    /// the input port's bridge, and its OpenFlow number in the flow.
    pub(super) fn enter_input_bridge(&mut self) -> bool {
        let (b, p) = split_dp_port(self.flow.in_port);
        if !self.enter_bridge(b) {
            self.note(
                0,
                &format!(">> input port {:#x}: no such bridge", self.flow.in_port),
            );
            self.error = Some(XlateDrop::NoSuchPort);
            return false;
        }
        self.flow.in_port = p;
        true
    }

    /// In a trace, the heading of the bridge the translation enters, as
    /// OVS's trace shows the bridge a patch port or a tunnel leads to.
    pub(super) fn bridge_heading(&mut self) {
        if let Some(t) = &mut self.out.trace {
            let head = format!("bridge(\"{}\")", self.env.rules.name());
            let pad = "    ".repeat(self.depth as usize + 1);
            t.push(String::new());
            t.push(format!("{pad}{head}"));
            t.push(format!("{pad}{}", "-".repeat(head.len())));
        }
    }

    /// The datapath number of the current bridge's OpenFlow port `p`.
    #[inline]
    pub(super) fn dp(&self, p: u32) -> u32 {
        dp_port(self.env.bridge, p)
    }

    /// The patch port `p` of the current bridge, if it is one.
    #[inline]
    pub(super) fn patch_port(&self, p: u32) -> Option<PatchPort> {
        let patches = self.env.rules.patch_ports();
        if patches.is_empty() {
            return None;
        }
        patches
            .binary_search_by_key(&p, |x| x.port)
            .ok()
            .map(|i| patches[i])
    }

    /// An output to patch port `patch`: the packet enters the peer bridge
    /// on the peer port, with metadata, registers, tunnel and connection
    /// state cleared, runs its tables from 0 and its action set; then the
    /// flow and this bridge's state are back (as ofproto-dpif's
    /// `patch_port_output`). A recirculation the peer needs (`ct` with a
    /// table) is finished there, resuming in the peer bridge.
    // (Not inlined: its copies of the flow would make every output's
    // stack frame as large.)
    #[inline(never)]
    pub(super) fn patch_output(&mut self, patch: PatchPort) {
        // Another bridge's table 0: a deepening resubmit, as OVS's
        // xlate_table_action counts it.
        if self.deep >= MAX_DEPTH || self.depth >= MAX_NESTING {
            self.error = Some(XlateDrop::RecursionTooDeep);
            return;
        }
        let saved_env = self.env;
        let saved_running = (self.running, self.running_ix);
        // Mirrors are the bridge's own: the peer's start with none done
        // (and none for what its patch port receives, as OVS's
        // patch_port_output mirrors no ingress).
        let saved_mirrored = std::mem::take(&mut self.mirrored);
        self.in_copy_with(|cx, original| {
            if !cx.enter_bridge(patch.peer) {
                cx.note(
                    cx.depth,
                    &format!(">> patch port {}: its peer's bridge is gone", patch.port),
                );
                cx.reason = Some(XlateDrop::NoSuchPort);
                return;
            }
            cx.bridge_heading();
            // The pipeline's fields as a packet arriving on the peer port
            // has them (whole words written: the table's lookup reads them
            // right after).
            let pipeline = crossing_bits();
            let entry = FlowKey {
                in_port: patch.peer_port,
                ..FlowKey::default()
            };
            let w = cx.flow.words_mut();
            for ((w, p), e) in w.iter_mut().zip(pipeline.words()).zip(entry.words()) {
                *w = (*w & !p) | *e;
            }
            cx.action_set.clear();
            cx.depth += 1;
            cx.deep += 1;
            cx.table(0, true);
            cx.run_action_set();
            cx.finish_freeze();
            cx.deep -= 1;
            cx.depth -= 1;
            // The pipeline's own fields go back with the flow; only the
            // packet's headers are what the peer may have changed.
            let w = cx.flow.words_mut();
            for ((w, p), o) in w.iter_mut().zip(pipeline.words()).zip(original.words()) {
                *w = (*w & !p) | (o & p);
            }
        });
        self.env = saved_env;
        (self.running, self.running_ix) = saved_running;
        self.mirrored = saved_mirrored;
    }
}
