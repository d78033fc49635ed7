//! Packet-ins: the `controller` action, and those a TTL that runs out
//! sends (`dec_ttl`, `dec_mpls_ttl`), each carrying the pipeline fields
//! as Open vSwitch's packet-ins do.

use std::sync::Arc;

use sluice_packet::key::{CS_INVALID, CS_TRACKED};

use super::Ctx;
use crate::action::ControllerOpts;
use crate::dpaction::{DpAction, PacketInAction, PacketInMeta, PacketInReason};
use crate::fields::{field_by_name, Field};
use crate::Match;

/// Pipeline fields that come from the packet's key (a tunnel it came out
/// of, a `ct` before a recirculation): a packet-in that carries them makes
/// the megaflow match them.
const KEYED: [&str; 9] = [
    "tun_id",
    "tun_src",
    "tun_dst",
    "tun_ipv6_src",
    "tun_ipv6_dst",
    "ct_state",
    "ct_zone",
    "ct_mark",
    "ct_label",
];

/// Fields the pipeline alone sets (zero in every packet's key).
const SET: [&str; 18] = [
    "metadata", "reg0", "reg1", "reg2", "reg3", "reg4", "reg5", "reg6", "reg7", "reg8", "reg9",
    "reg10", "reg11", "reg12", "reg13", "reg14", "reg15", "pkt_mark",
];

/// The original direction's addresses of a tracked connection: carried
/// when `ct_state` says the packet is tracked and valid.
const CT_TUPLE4: [&str; 5] = [
    "ct_nw_src",
    "ct_nw_dst",
    "ct_nw_proto",
    "ct_tp_src",
    "ct_tp_dst",
];
const CT_TUPLE6: [&str; 5] = [
    "ct_ipv6_src",
    "ct_ipv6_dst",
    "ct_nw_proto",
    "ct_tp_src",
    "ct_tp_dst",
];

fn field(name: &str) -> &'static Field {
    field_by_name(name).expect("built-in field")
}

impl Ctx<'_, '_> {
    /// The `controller` action.
    pub(super) fn controller(&mut self, max_len: u16, opts: Option<&ControllerOpts>) {
        self.commit();
        let (_, _, miss) = self.running;
        // A reason the action names is the packet-in's; a plain one's is
        // where it runs (as an output to CONTROLLER in Open vSwitch): a
        // packet-out's actions, a group's bucket, the action set, else
        // `action`. `action` in a table-miss rule is an explicit miss.
        let (reason, controller_id, userdata) = match opts {
            Some(o) => (o.reason, o.id, o.userdata.as_slice()),
            None if self.in_packet_out => (PacketInReason::PacketOut, 0, &[][..]),
            None if self.group_depth > 0 => (PacketInReason::Group, 0, &[][..]),
            None if self.in_action_set => (PacketInReason::ActionSet, 0, &[][..]),
            None => (PacketInReason::Action, 0, &[][..]),
        };
        let meter_id = opts.and_then(|o| o.meter_id);
        let reason = match reason {
            PacketInReason::Action if miss => PacketInReason::ExplicitMiss,
            r => r,
        };
        self.packet_in(reason, controller_id, max_len, userdata.to_vec(), meter_id);
        self.out.outputs += 1;
        if opts.is_some_and(|o| o.pause) {
            // The rest waits for the controller (OVS's continuation): it
            // is frozen as a recirculation is, and the packet-in carries
            // the state's id (`finish_freeze`).
            if let Some(DpAction::Controller(pin)) = self.out.actions.pop() {
                self.note(
                    self.depth,
                    ">> paused: the rest runs when the controller resumes it",
                );
                self.paused = Some(pin);
                let table = self.running.0;
                self.frozen = Some(self.state_here(Vec::new(), self.action_set.clone(), table));
            }
        }
    }

    /// A TTL that runs out sends the whole packet to the controllers of
    /// `ids` (`dec_ttl(ids)`; plain `dec_ttl` and `dec_mpls_ttl`: id 0)
    /// with reason `invalid_ttl`, as Open vSwitch does; only a controller
    /// that asked for such packet-ins takes them (OpenFlow 1.0's
    /// `OFPC_INVALID_TTL_TO_CONTROLLER`, 1.3's asynchronous
    /// configuration). The packet is dropped either way: no output is
    /// counted here.
    pub(super) fn ttl_packet_ins(&mut self, ids: &[u16]) {
        self.commit();
        for &id in ids {
            self.packet_in(PacketInReason::InvalidTtl, id, u16::MAX, Vec::new(), None);
        }
    }

    fn packet_in(
        &mut self,
        reason: PacketInReason,
        controller_id: u16,
        max_len: u16,
        userdata: Vec<u8>,
        meter_id: Option<u32>,
    ) {
        let (table_id, cookie, _) = self.running;
        let meta = Arc::new(PacketInMeta {
            fields: self.pipeline_fields(),
            userdata,
            meter_id,
            continuation: None,
        });
        self.push(DpAction::Controller(Box::new(PacketInAction {
            reason,
            controller_id,
            max_len,
            table_id,
            cookie,
            meta,
            bridge: self.env.bridge,
            in_port: self.flow.in_port,
        })));
    }

    /// The pipeline fields that are not zero now (Open vSwitch's
    /// `flow_get_metadata`, less the Geneve options and tunnel flags),
    /// the packet fields among them matched exactly.
    fn pipeline_fields(&mut self) -> Match {
        let mut m = Match::catch_all();
        for name in KEYED {
            let f = field(name);
            let seen = (f.get)(&self.out.wc);
            (f.put)(&mut self.out.wc, seen | f.full_mask());
        }
        for name in KEYED.iter().chain(SET.iter()) {
            let f = field(name);
            let v = (f.get)(&self.flow);
            if v != 0 {
                m.set_exact(f, v);
            }
        }
        let state = self.flow.ct_state;
        if state != 0 {
            // For the connection tracking fields to be read right.
            self.out.wc.dl_type = 0xffff;
            m.set_exact(field("dl_type"), u128::from(self.flow.dl_type));
        }
        let tuple = match self.flow.dl_type {
            0x0800 => &CT_TUPLE4,
            0x86dd => &CT_TUPLE6,
            _ => &[][..],
        };
        if state & CS_TRACKED != 0 && state & CS_INVALID == 0 && !tuple.is_empty() {
            let proto = field("ct_nw_proto");
            let seen = (proto.get)(&self.out.wc);
            (proto.put)(&mut self.out.wc, seen | proto.full_mask());
            if self.flow.ct_nw_proto != 0 {
                for name in tuple {
                    let f = field(name);
                    let seen = (f.get)(&self.out.wc);
                    (f.put)(&mut self.out.wc, seen | f.full_mask());
                    m.set_exact(f, (f.get)(&self.flow));
                }
            }
        }
        m
    }
}
