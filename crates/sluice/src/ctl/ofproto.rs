//! A bridge's control as its OpenFlow side's [`Backend`]: what only that
//! side does (packet-outs, resumes, port descriptions and PORT_MOD)
//! written here, the rest the control's own methods under the
//! object-safe names the channel calls; and those of the control's
//! methods the OpenFlow side shares with the rest of the switch.

use std::sync::Arc;

use sluice_classifier::table::SetFieldMode;
use sluice_classifier::{Action, RuleSet};
use sluice_datapath::{PortConfig, PortReport};
use sluice_ofproto::backend::{Applied, FlowMods};
use sluice_ofproto::Backend;
use sluice_openflow::OfError;
use sluice_packet::tunnel::TlvMap;

use super::{Control, PortChange, PortWatcher};
use crate::pmd::PmdCommand;
use crate::report::merge_ports;

impl Backend for Control {
    fn read_rules(&self, f: &mut dyn FnMut(&RuleSet, u64)) -> Result<(), String> {
        self.with_rules(|rules, now| f(rules, now))
    }

    fn write_rules(
        &self,
        f: &mut dyn FnMut(&mut RuleSet) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String> {
        self.change_rules(f)
    }

    fn apply_flow_mod_ops(&self, ops: FlowMods<'_>, atomic: bool) -> Result<Applied, String> {
        if atomic {
            self.apply_flow_mods_atomic(ops)
        } else {
            self.apply_flow_mods(ops)
        }
    }

    fn refusal(&self, actions: &[Action]) -> Option<OfError> {
        Control::refusal(self, actions)
    }

    fn set_field_mode(&self) -> SetFieldMode {
        Control::set_field_mode(self)
    }

    fn port_reports(&self) -> Result<Vec<PortReport>, String> {
        Control::port_reports(self)
    }

    /// Every port a controller is told of: the datapath's ports of this
    /// bridge and its patch ports, by OpenFlow number, with their names.
    fn described_ports(&self) -> Result<Vec<(u32, String)>, String> {
        let mut v: Vec<(u32, String)> = self
            .port_reports()?
            .into_iter()
            .map(|p| (p.ofport, p.name))
            .collect();
        v.extend(
            self.patch_names
                .lock()
                .expect("patch names")
                .iter()
                .cloned(),
        );
        v.sort_by_key(|p| p.0);
        Ok(v)
    }

    fn port_config(&self, ofport: u32) -> u32 {
        Control::port_config(self, ofport)
    }

    /// Sets a port's OpenFlow config: `down` and `no_recv` drop what it
    /// receives, `down` and `no_fwd` take it out of forwarding,
    /// `no_packet_in` keeps what it receives from the controllers; in
    /// force on every PMD when this returns. `config` is the whole new
    /// set of bits (as port descriptions show them).
    fn set_port_config(&self, ofport: u32, config: u32, dp: PortConfig) -> Result<(), String> {
        let _reconfig = self.reconfig.lock().expect("reconfig");
        let n = self.dp_port(ofport);
        for r in self.ask_all(|tx| PmdCommand::SetPortConfig(n, dp, tx))? {
            r?;
        }
        self.port_config
            .lock()
            .expect("port config")
            .insert(ofport, config);
        let name = self
            .port_reports()?
            .into_iter()
            .find(|p| p.ofport == ofport)
            .map(|p| p.name)
            .unwrap_or_default();
        self.port_changed(PortChange::Modified, ofport, &name);
        Ok(())
    }

    /// Forwards a controller's packet by `actions` as if it came in on
    /// `in_port`, on the first PMD, through its output batches.
    fn packet_out(&self, data: Vec<u8>, in_port: u32, actions: Vec<Action>) -> Result<(), String> {
        let in_port = self.dp_port(in_port);
        self.ask_one(0, |tx| PmdCommand::PacketOut(data, in_port, actions, tx))?
    }

    /// `NXT_RESUME`: the frozen rest of a paused translation (state `id`
    /// of the first bridge's recirculation table) run on `data`, the
    /// packet as the controller sent it back, with its pipeline fields
    /// `sets` (and input port `in_port`, else the frozen one's), as a
    /// packet-out on this bridge.
    fn resume(
        &self,
        data: Vec<u8>,
        id: u32,
        in_port: Option<u32>,
        sets: Vec<Action>,
    ) -> Result<(), String> {
        let state = self
            .first_rules()
            .lock()
            .expect("rules")
            .recirc()
            .get(id)
            .ok_or_else(|| format!("continuation {id:#x}: no such paused state (expired?)"))?;
        let mut actions = Vec::with_capacity(sets.len() + state.actions.len() + 1);
        actions.extend(sets);
        if !state.action_set.is_empty() {
            actions.push(sluice_classifier::Action::WriteActions(
                state.action_set.clone(),
            ));
        }
        actions.extend(state.actions.iter().cloned());
        let in_port = in_port.unwrap_or(state.in_port);
        tracing::debug!(target: "openflow", "NXT_RESUME {id:#x}: in_port {in_port}, {}", sluice_classifier::action::format_actions(&actions));
        self.packet_out(data, in_port, actions)
    }

    fn tlv_map(&self) -> TlvMap {
        Control::tlv_map(self)
    }

    fn write_tlv_map(
        &self,
        f: &mut dyn FnMut(&mut TlvMap) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String> {
        self.change_tlv_map(f)
    }

    fn conntrack(&self) -> Arc<sluice_conntrack::Conntrack> {
        Control::conntrack(self)
    }

    fn uptime_us(&self) -> u64 {
        Control::uptime_us(self)
    }
}

/// What the OpenFlow side and the rest of the switch both use: ports,
/// their config and counters, the TLV table, the connection tracker, and
/// who is told of port changes. (What only the OpenFlow side uses is in
/// the `Backend` impl above.)
impl Control {
    /// Every port's counters, summed over the PMDs.
    /// (Without the cache occupancy a full snapshot scans for: a PMD
    /// answers this in microseconds.)
    pub(crate) fn port_reports(&self) -> Result<Vec<sluice_datapath::PortReport>, String> {
        let per_pmd = self.ask_all(PmdCommand::PortReports)?;
        Ok(self.bridge_ports(merge_ports(&per_pmd)))
    }

    /// The datapath's Geneve option mapping (the first bridge's).
    pub(crate) fn tlv_map(&self) -> sluice_packet::tunnel::TlvMap {
        self.first_rules().lock().expect("rules").tlv_map()
    }

    /// Changes the datapath's Geneve option mapping with `f`: on the
    /// first bridge's rules (whose tunnel state every bridge's Geneve
    /// ports use) and on this bridge's (what its rules are read with).
    pub(crate) fn change_tlv_map(
        &self,
        f: impl FnOnce(&mut sluice_packet::tunnel::TlvMap) -> Result<(), OfError>,
    ) -> Result<Result<(), OfError>, String> {
        let mut map = self.tlv_map();
        if let Err(e) = f(&mut map) {
            return Ok(Err(e));
        }
        if self.bridge != 0 {
            let mut first = self.first_rules().lock().expect("rules");
            if first.set_tlv_map(map.clone()).is_err() {
                return Ok(Err(OfError::NXTTMFC_TABLE_FULL));
            }
            self.publish_first(&first)?;
        }
        self.change_rules(|rules| {
            rules
                .set_tlv_map(map)
                .map_err(|_| OfError::NXTTMFC_TABLE_FULL)
        })
    }

    /// The connection tracker (every bridge's).
    pub(crate) fn conntrack(&self) -> Arc<sluice_conntrack::Conntrack> {
        Arc::clone(self.rules.lock().expect("rules").conntrack())
    }

    /// Names this bridge's patch ports (OpenFlow number, name) for the
    /// controllers' port descriptions, linked to a peer or not, as OVS
    /// lists them.
    pub fn set_patch_names(&self, names: Vec<(u32, String)>) {
        *self.patch_names.lock().expect("patch names") = names;
    }

    /// A port's OpenFlow config bits (0 unless a PORT_MOD set some).
    pub(crate) fn port_config(&self, ofport: u32) -> u32 {
        self.port_config
            .lock()
            .expect("port config")
            .get(&ofport)
            .copied()
            .unwrap_or(0)
    }

    /// What `of-show` prints (the OpenFlow channel's connections).
    pub(crate) fn on_of_show(&self, f: Box<dyn Fn() -> String + Send + Sync>) {
        *self.of_status.lock().expect("of status") = Some(f);
    }

    /// Calls `f` on every port added, removed or changed from now on (the OpenFlow
    /// channel's PORT_STATUS).
    pub(crate) fn on_port_change(&self, f: PortWatcher) {
        *self.port_watcher.lock().expect("port watcher") = Some(f);
    }

    /// Tells the port watcher (the OpenFlow channel's PORT_STATUS) of a
    /// change to port `ofport`.
    pub(crate) fn port_changed(&self, how: PortChange, ofport: u32, name: &str) {
        if let Some(f) = self.port_watcher.lock().expect("port watcher").as_ref() {
            f(how, ofport, name);
        }
    }

    /// Microseconds since the switch started.
    pub(crate) fn uptime_us(&self) -> u64 {
        self.now_us()
    }
}
