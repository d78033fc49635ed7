//! A bridge's control as its OpenFlow side's [`Backend`]: each method is
//! the control's own, under the object-safe names the channel calls.

use std::sync::Arc;

use sluice_classifier::table::SetFieldMode;
use sluice_classifier::{Action, RuleSet};
use sluice_datapath::{PortConfig, PortReport};
use sluice_ofproto::backend::{Applied, FlowMods};
use sluice_ofproto::Backend;
use sluice_openflow::OfError;
use sluice_packet::tunnel::TlvMap;

use super::Control;

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

    fn described_ports(&self) -> Result<Vec<(u32, String)>, String> {
        Control::described_ports(self)
    }

    fn port_config(&self, ofport: u32) -> u32 {
        Control::port_config(self, ofport)
    }

    fn set_port_config(&self, ofport: u32, config: u32, dp: PortConfig) -> Result<(), String> {
        Control::set_port_config(self, ofport, config, dp)
    }

    fn packet_out(&self, data: Vec<u8>, in_port: u32, actions: Vec<Action>) -> Result<(), String> {
        Control::packet_out(self, data, in_port, actions)
    }

    fn resume(
        &self,
        data: Vec<u8>,
        id: u32,
        in_port: Option<u32>,
        sets: Vec<Action>,
    ) -> Result<(), String> {
        Control::resume(self, data, id, in_port, sets)
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
