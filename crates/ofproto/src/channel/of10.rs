//! A session that negotiated OpenFlow 1.0 (`ovs-ofctl` without `-O`):
//! its messages, with Open vSwitch's Nicira extensions (NXM flow format,
//! `NXT_FLOW_MOD`, `NXST_FLOW`, the flow-mod table id), served from the
//! same [`Control`] as 1.3's. Flow-mods are batched as 1.3's are
//! ([`Session::flush_mods`]).
//!
//! Its asynchronous messages are 1.0's (`ofhub`): packet-ins as
//! `OFPT_PACKET_IN`, `NXT_PACKET_IN` or `NXT_PACKET_IN2` as it asks, flow
//! removed messages as `OFPT_FLOW_REMOVED` or, in the NXM flow format,
//! `NXT_FLOW_REMOVED`, port status as 1.0's. `PACKET_OUT` takes 1.0
//! actions.

use std::sync::atomic::Ordering;

use sluice_openflow::async_msg::PinFormat;
use sluice_openflow::consts::{port, NO_BUFFER, TABLE_ALL};
use sluice_openflow::of10::flow_mod::Format;
use sluice_openflow::of10::stats::{self, Request};
use sluice_openflow::of10::{self, format, nxt, t};
use sluice_openflow::OfError;

use super::{Conn, Session, N_TABLES};
use crate::backend::BackendExt;

/// `OFPC_INVALID_TTL_TO_CONTROLLER` (an OpenFlow 1.1 flag Open vSwitch
/// takes in 1.0).
const INVALID_TTL_TO_CONTROLLER: u16 = 1 << 2;
use crate::multipart::Filter;

impl<S: Conn> Session<S> {
    /// Answers `e` to the 1.0 message `frame`.
    pub(super) fn error10(&mut self, e: OfError, frame: &[u8]) -> Result<(), String> {
        self.send(&of10::error(e, xid(frame), frame))
    }

    /// Serves one 1.0 message (flow-mods come batched, not here).
    pub(super) fn handle10(&mut self, frame: &[u8]) -> Result<(), String> {
        let x = xid(frame);
        if frame[0] != of10::OFP10 {
            return self.error10(OfError::BAD_VERSION, frame);
        }
        let body = &frame[8..];
        match frame[1] {
            t::HELLO | t::ECHO_REPLY | t::ERROR => Ok(()),
            t::ECHO_REQUEST => self.send(&of10::message(t::ECHO_REPLY, x, body)),
            t::BARRIER_REQUEST => self.send(&of10::message(t::BARRIER_REPLY, x, &[])),
            t::FEATURES_REQUEST => {
                let ports = self
                    .control
                    .described_ports()?
                    .iter()
                    .map(|(n, name)| {
                        let d = crate::hub::port_desc(*n, name, self.control.port_config(*n));
                        of10::Port {
                            port_no: of10::port16(*n),
                            hw_addr: d.hw_addr,
                            name: d.name,
                            config: d.config,
                            state: d.state & 1,
                        }
                    })
                    .collect::<Vec<_>>();
                let dpid = self.info.datapath_id;
                self.send(&of10::features_reply(x, dpid, N_TABLES, &ports))
            }
            t::GET_CONFIG_REQUEST => {
                // OFPC_INVALID_TTL_TO_CONTROLLER: whether it takes
                // packet-ins for a TTL that ran out (as a master).
                let ttl = self.listener.masks[0].load(Ordering::Relaxed) & 1 << 2 != 0;
                let flags = self.config.flags | if ttl { INVALID_TTL_TO_CONTROLLER } else { 0 };
                let mut b = flags.to_be_bytes().to_vec();
                b.extend_from_slice(&self.config.miss_send_len.to_be_bytes());
                self.send(&of10::message(t::GET_CONFIG_REPLY, x, &b))
            }
            t::SET_CONFIG if body.len() == 4 => {
                let flags = u16::from_be_bytes([body[0], body[1]]);
                if flags & 3 != 0 {
                    return self.error10(OfError::SWITCH_CONFIG_BAD_FLAGS, frame);
                }
                // The packet-ins of a TTL that ran out, as Open vSwitch
                // takes the flag: its bit in the master's packet-in mask.
                let m = &self.listener.masks[0];
                if flags & INVALID_TTL_TO_CONTROLLER != 0 {
                    m.fetch_or(1 << 2, Ordering::Relaxed);
                } else {
                    m.fetch_and(!(1 << 2), Ordering::Relaxed);
                }
                self.info.hub.refresh();
                self.config.flags = flags & !INVALID_TTL_TO_CONTROLLER;
                self.config.miss_send_len = u16::from_be_bytes([body[2], body[3]]);
                Ok(())
            }
            t::VENDOR => self.vendor10(frame),
            t::STATS_REQUEST => match stats::decode(frame) {
                Ok(req) => self.stats10(req, x, frame),
                Err(e) => self.error10(e, frame),
            },
            t::PACKET_OUT => match self.packet_out10(body) {
                Ok(()) => Ok(()),
                Err(e) => self.error10(e, frame),
            },
            t::SET_CONFIG => self.error10(OfError::BAD_LEN, frame),
            _ => self.error10(OfError::BAD_TYPE, frame),
        }
    }

    /// Nicira's vendor messages: the flow format, the flow-mod table id,
    /// the packet-in format and controller id, the TLV table.
    fn vendor10(&mut self, frame: &[u8]) -> Result<(), String> {
        if frame.len() < 16 || frame[8..12] != sluice_openflow::nx::NX_VENDOR.to_be_bytes() {
            return self.error10(OfError::BAD_EXPERIMENTER, frame);
        }
        let sub = u32::from_be_bytes([frame[12], frame[13], frame[14], frame[15]]);
        let arg = &frame[16..];
        let fmt = self.v10.get_or_insert_with(Format::default);
        match sub {
            nxt::SET_FLOW_FORMAT if arg.len() == 4 => {
                match u32::from_be_bytes([arg[0], arg[1], arg[2], arg[3]]) {
                    format::OPENFLOW10 => fmt.nxm = false,
                    format::NXM => fmt.nxm = true,
                    _ => return self.error10(OfError { typ: 1, code: 5 }, frame),
                }
                let nxm = fmt.nxm;
                self.listener.nxm.store(nxm, Ordering::Relaxed);
                Ok(())
            }
            nxt::FLOW_MOD_TABLE_ID if arg.len() == 8 => {
                fmt.table_id = arg[0] != 0;
                Ok(())
            }
            nxt::SET_PACKET_IN_FORMAT if arg.len() == 4 => {
                match PinFormat::of_wire(u32::from_be_bytes([arg[0], arg[1], arg[2], arg[3]])) {
                    Some(f) => {
                        self.listener.pin_format.store(f.wire(), Ordering::Relaxed);
                        Ok(())
                    }
                    None => self.error10(OfError { typ: 1, code: 5 }, frame),
                }
            }
            nxt::SET_CONTROLLER_ID if arg.len() == 8 => {
                let id = u16::from_be_bytes([arg[6], arg[7]]);
                self.listener.controller_id.store(id, Ordering::Relaxed);
                Ok(())
            }
            nxt::SET_FLOW_FORMAT
            | nxt::FLOW_MOD_TABLE_ID
            | nxt::SET_CONTROLLER_ID
            | nxt::SET_PACKET_IN_FORMAT => self.error10(OfError::BAD_LEN, frame),
            _ => {
                let slave = self.is_slave();
                match crate::tlv::experimenter(&*self.control, &frame[8..], slave)? {
                    Ok(Some(reply)) => self.send(&of10::message(t::VENDOR, xid(frame), &reply)),
                    Ok(None) => Ok(()),
                    Err(e) => self.error10(e, frame),
                }
            }
        }
    }

    fn stats10(&mut self, req: Request, x: u32, frame: &[u8]) -> Result<(), String> {
        let frames = match req {
            Request::Desc => {
                let d = crate::multipart::desc(self.info.datapath_id);
                let mut b = Vec::new();
                sluice_openflow::multipart::MpReply::Desc(d).encode(&mut b);
                stats::replies(x, stats::st::DESC, None, std::iter::once(b))
            }
            Request::Flow(q) | Request::Aggregate(q)
                if q.table_id != TABLE_ALL && q.table_id >= N_TABLES =>
            {
                return self.error10(OfError::BAD_TABLE_ID, frame);
            }
            Request::Flow(q) => {
                let filter = Filter::of(q.table_id, q.cookie, q.cookie_mask, q.out_port, q.matcher);
                let entries = self.control.with_rules(|rules, now| {
                    rules
                        .iter()
                        .filter(|r| filter.takes(r))
                        .map(|r| stats::flow_entry(r, now, q.nx))
                        .collect::<Vec<_>>()
                })?;
                let nx = q.nx.then_some(true);
                stats::replies(x, stats::st::FLOW, nx, entries.into_iter())
            }
            Request::Aggregate(q) => {
                let filter = Filter::of(q.table_id, q.cookie, q.cookie_mask, q.out_port, q.matcher);
                let (p, b, n) = self.control.with_rules(|rules, _| {
                    rules
                        .rules()
                        .filter(|r| filter.takes(r))
                        .fold((0, 0, 0u32), |(p, b, n), r| {
                            let (rp, rb) = r.counters();
                            (p + rp, b + rb, n + 1)
                        })
                })?;
                let nx = q.nx.then_some(false);
                let body = stats::aggregate(p, b, n);
                stats::replies(x, stats::st::AGGREGATE, nx, std::iter::once(body))
            }
            Request::Table => {
                let entries = self.control.with_rules(|rules, _| {
                    (0..N_TABLES)
                        .map(|t| {
                            let (active, lookups, matched) = rules.table_counts(t);
                            stats::table_entry(t, active, lookups, matched)
                        })
                        .collect::<Vec<_>>()
                })?;
                stats::replies(x, stats::st::TABLE, None, entries.into_iter())
            }
            Request::Port(want) => {
                let entries = self
                    .control
                    .port_reports()?
                    .iter()
                    .filter(|p| want == port::ANY || p.ofport == want)
                    .map(|p| {
                        let s = &p.stats;
                        stats::port_entry(
                            p.ofport,
                            (s.rx_packets, s.rx_bytes, s.rx_dropped.iter().sum()),
                            (s.tx_packets, s.tx_bytes, s.tx_dropped.iter().sum()),
                        )
                    })
                    .collect::<Vec<_>>();
                stats::replies(x, stats::st::PORT, None, entries.into_iter())
            }
            // No queues.
            Request::Queue => stats::replies(x, stats::st::QUEUE, None, std::iter::empty()),
        };
        frames.iter().try_for_each(|f| self.send(f))
    }

    /// `OFPT_PACKET_OUT` in 1.0: no buffer, in_port a port or
    /// `CONTROLLER`/`NONE`, 1.0 actions checked against the packet.
    fn packet_out10(&mut self, body: &[u8]) -> Result<(), OfError> {
        if self.is_slave() {
            return Err(OfError::IS_SLAVE);
        }
        if body.len() < 8 {
            return Err(OfError::BAD_LEN);
        }
        let buffer_id = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let in_port = of10::port32(u16::from_be_bytes([body[4], body[5]]));
        let actions_len = usize::from(u16::from_be_bytes([body[6], body[7]]));
        if buffer_id != NO_BUFFER {
            return Err(OfError::BUFFER_UNKNOWN);
        }
        let (acts, data) = body[8..]
            .split_at_checked(actions_len)
            .ok_or(OfError::BAD_LEN)?;
        let in_port = match in_port {
            p @ 1..=port::MAX => p,
            port::CONTROLLER | port::ANY => port::CONTROLLER,
            _ => return Err(OfError::BAD_PORT),
        };
        let m = super::packet_match(data, in_port)?;
        let actions = of10::actions::decode(acts, &m)?;
        if let Some(e) = self.control.refusal(&actions) {
            return Err(e);
        }
        self.control
            .packet_out(data.to_vec(), in_port, actions)
            .map_err(|e| {
                tracing::warn!(target: "openflow", "packet-out: {e}");
                OfError::BAD_PACKET
            })
    }
}

fn xid(frame: &[u8]) -> u32 {
    u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]])
}
