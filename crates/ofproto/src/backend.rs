//! What the OpenFlow side asks of the bridge it serves: its rule set
//! (read, changed by flow-mods, group-mods and meter-mods, each change one
//! new version published to every PMD before the call returns), its ports
//! and their counters, packet-outs and resumed continuations, the Geneve
//! TLV table and the connection tracker.
//!
//! The trait is object safe (a channel holds an `Arc<dyn Backend>`); the
//! generic forms callers use, a closure that returns what it read, are
//! [`BackendExt`]'s, built on the object-safe ones.

use std::sync::Arc;

use sluice_classifier::table::SetFieldMode;
use sluice_classifier::{Action, Rule, RuleSet};
use sluice_datapath::{PortConfig, PortReport};
use sluice_openflow::convert::FlowModOp;
use sluice_openflow::OfError;
use sluice_packet::tunnel::TlvMap;

/// What applying flow-mods gave: each one's error, if any, by position,
/// and the rules deleted (the channel tells those that asked for
/// FLOW_REMOVED).
pub type Applied = (Vec<Option<OfError>>, Vec<Arc<Rule>>);

/// The flow-mods of one burst or bundle, decoded as they are applied (a
/// burst of ten thousand is not held as a list of flow specs).
pub type FlowMods<'a> = &'a mut dyn Iterator<Item = Result<FlowModOp, OfError>>;

/// A bridge as its OpenFlow side sees it.
pub trait Backend: Send + Sync {
    /// Calls `f` on the rule set as the PMDs run it (rule counters
    /// credited first) and the time now (µs since the switch started).
    fn read_rules(&self, f: &mut dyn FnMut(&RuleSet, u64)) -> Result<(), String>;

    /// Changes a new version of the rule set with `f` and, when `f`
    /// succeeds and made a change, publishes it to every PMD before
    /// returning.
    fn write_rules(
        &self,
        f: &mut dyn FnMut(&mut RuleSet) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String>;

    /// Applies flow-mods as one new version of the rules, published
    /// before returning; with `atomic` (a bundle's commit) none when one
    /// fails.
    fn apply_flow_mod_ops(&self, ops: FlowMods<'_>, atomic: bool) -> Result<Applied, String>;

    /// The error that refuses `actions` (a packet-out's), if the rule set
    /// refuses them.
    fn refusal(&self, actions: &[Action]) -> Option<OfError>;

    /// Which fields `set_field` may write.
    fn set_field_mode(&self) -> SetFieldMode;

    /// Every port's counters, by OpenFlow number, summed over the PMDs.
    fn port_reports(&self) -> Result<Vec<PortReport>, String>;

    /// Every port a controller is told of (the datapath's ports of this
    /// bridge and its patch ports): OpenFlow number and name, in order.
    fn described_ports(&self) -> Result<Vec<(u32, String)>, String>;

    /// A port's OpenFlow config bits (0 unless a PORT_MOD set some).
    fn port_config(&self, ofport: u32) -> u32;

    /// Sets a port's OpenFlow config bits (`config`, the whole set) and
    /// what they mean to the datapath (`dp`), in force on every PMD when
    /// this returns.
    fn set_port_config(&self, ofport: u32, config: u32, dp: PortConfig) -> Result<(), String>;

    /// Forwards a controller's packet by `actions` as if it came in on
    /// `in_port`.
    fn packet_out(&self, data: Vec<u8>, in_port: u32, actions: Vec<Action>) -> Result<(), String>;

    /// `NXT_RESUME`: runs the paused translation `id` on `data`, with the
    /// pipeline fields the controller set (`sets`) and its input port.
    fn resume(
        &self,
        data: Vec<u8>,
        id: u32,
        in_port: Option<u32>,
        sets: Vec<Action>,
    ) -> Result<(), String>;

    /// The datapath's Geneve option mapping.
    fn tlv_map(&self) -> TlvMap;

    /// Changes the Geneve option mapping with `f`, where the datapath and
    /// this bridge's rules read it.
    fn write_tlv_map(
        &self,
        f: &mut dyn FnMut(&mut TlvMap) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String>;

    /// The connection tracker.
    fn conntrack(&self) -> Arc<sluice_conntrack::Conntrack>;

    /// Microseconds since the switch started.
    fn uptime_us(&self) -> u64;
}

/// [`Backend`]'s generic forms: closures that return what they read or
/// changed.
pub trait BackendExt {
    /// Calls `f` on the rule set and the time now, and returns what it
    /// gave.
    fn with_rules<T>(&self, f: impl FnOnce(&RuleSet, u64) -> T) -> Result<T, String>;

    /// Changes the rule set with `f` (a group or meter change), published
    /// before returning when `f` succeeded.
    fn change_rules<T>(
        &self,
        f: impl FnOnce(&mut RuleSet) -> Result<T, OfError>,
    ) -> Result<Result<T, OfError>, String>;

    /// Changes the Geneve option mapping with `f`.
    fn change_tlv_map(
        &self,
        f: impl FnOnce(&mut TlvMap) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String>;

    /// Applies flow-mods (see [`Backend::apply_flow_mods`]).
    fn apply_flow_mods(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String>;

    /// Applies flow-mods all or nothing (a bundle's commit).
    fn apply_flow_mods_atomic(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String>;

    /// Empties conntrack zone `zone` (`NXT_CT_FLUSH_ZONE`); returns the
    /// connections removed.
    fn flush_conntrack_zone(&self, zone: u16) -> usize;
}

impl<B: Backend + ?Sized> BackendExt for B {
    fn with_rules<T>(&self, f: impl FnOnce(&RuleSet, u64) -> T) -> Result<T, String> {
        let mut f = Some(f);
        let mut out = None;
        self.read_rules(&mut |rules, now| {
            if let Some(f) = f.take() {
                out = Some(f(rules, now));
            }
        })?;
        out.ok_or_else(|| "the bridge's rules were not read".to_string())
    }

    fn change_rules<T>(
        &self,
        f: impl FnOnce(&mut RuleSet) -> Result<T, OfError>,
    ) -> Result<Result<T, OfError>, String> {
        let mut f = Some(f);
        let mut out = None;
        // Its error, if any, is in `out` too.
        let _done = self.write_rules(&mut |rules| {
            let Some(f) = f.take() else { return Ok(()) };
            let r = f(rules);
            let done = r.as_ref().map(|_| ()).map_err(|e| *e);
            out = Some(r);
            done
        })?;
        out.ok_or_else(|| "the bridge's rules were not changed".to_string())
    }

    fn change_tlv_map(
        &self,
        f: impl FnOnce(&mut TlvMap) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String> {
        let mut f = Some(f);
        self.write_tlv_map(&mut |map| f.take().map_or(Ok(()), |f| f(map)))
    }

    fn apply_flow_mods(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String> {
        self.apply_flow_mod_ops(&mut ops.into_iter(), false)
    }

    fn apply_flow_mods_atomic(
        &self,
        ops: impl IntoIterator<Item = Result<FlowModOp, OfError>>,
    ) -> Result<Applied, String> {
        self.apply_flow_mod_ops(&mut ops.into_iter(), true)
    }

    fn flush_conntrack_zone(&self, zone: u16) -> usize {
        self.conntrack().flush(Some(zone))
    }
}
