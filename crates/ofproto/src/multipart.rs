//! The OpenFlow channel's multipart replies (DESC, FLOW, AGGREGATE,
//! TABLE, PORT_DESC, PORT_STATS, TABLE_FEATURES, QUEUE, and the group and
//! meter ones), made from the control's rules and ports: the frames to
//! send, split under 64 KiB, or the error to answer with.

use sluice_classifier::table::SetFieldMode;
use sluice_openflow::consts::{mp, port};
use sluice_openflow::convert::{flow_stats, outputs_to, to_match};
use sluice_openflow::features::table_features;
use sluice_openflow::msg::to_bytes;
use sluice_openflow::multipart::{split_reply, Desc, FlowStatsRequest, MpReply, MpRequest};
use sluice_openflow::{Message, OfError};

use crate::backend::{Backend, BackendExt};
use crate::hub::port_desc;

/// Tables a controller may use (0..=253; 254 is OVS's too).
pub const N_TABLES: u8 = 254;

/// The reply frames to send, or the error to answer with.
pub(crate) type Replies = Result<Vec<Vec<u8>>, OfError>;

/// The replies to a multipart request.
pub(crate) fn replies(
    control: &dyn Backend,
    datapath_id: u64,
    req: MpRequest,
    xid: u32,
) -> Result<Replies, String> {
    let one = |body: MpReply| to_bytes(&Message::MultipartReply { flags: 0, body }, xid);
    Ok(match req {
        MpRequest::Desc => Ok(vec![one(MpReply::Desc(desc(datapath_id)))]),
        MpRequest::Flow(q) => {
            let filter = match Filter::new(&q) {
                Ok(f) => f,
                Err(e) => return Ok(Err(e)),
            };
            let entries = control.with_rules(|rules, now| {
                rules
                    .iter()
                    .filter(|r| filter.takes(r))
                    .map(|r| {
                        let mut v = Vec::new();
                        flow_stats(r, now).encode(&mut v);
                        v
                    })
                    .collect::<Vec<_>>()
            })?;
            Ok(split_reply(mp::FLOW, xid, entries.into_iter()))
        }
        MpRequest::Aggregate(q) => {
            let filter = match Filter::new(&q) {
                Ok(f) => f,
                Err(e) => return Ok(Err(e)),
            };
            let (p, b, n) = control.with_rules(|rules, _| {
                rules.rules().filter(|r| filter.takes(r)).fold(
                    (0u64, 0u64, 0u32),
                    |(p, b, n), r| {
                        let (rp, rb) = r.counters();
                        (p + rp, b + rb, n + 1)
                    },
                )
            })?;
            Ok(vec![one(MpReply::Aggregate {
                packet_count: p,
                byte_count: b,
                flow_count: n,
            })])
        }
        MpRequest::Table => {
            let tables = control.with_rules(|rules, _| {
                (0..N_TABLES)
                    .map(|t| {
                        let (active_count, lookups, matched) = rules.table_counts(t);
                        sluice_openflow::multipart::TableStats {
                            table_id: t,
                            active_count,
                            lookup_count: lookups,
                            matched_count: matched,
                        }
                    })
                    .collect()
            })?;
            Ok(vec![one(MpReply::Table(tables))])
        }
        MpRequest::PortDesc => {
            let ports = control.described_ports()?;
            let descs = ports
                .iter()
                .map(|(n, name)| port_desc(*n, name, control.port_config(*n)))
                .collect();
            Ok(vec![one(MpReply::PortDesc(descs))])
        }
        MpRequest::PortStats(want) => {
            let up = control.uptime_us();
            let ports = control.port_reports()?;
            let stats = ports
                .iter()
                .filter(|p| want == port::ANY || p.ofport == want)
                .map(|p| sluice_openflow::multipart::PortStats {
                    port_no: p.ofport,
                    rx_packets: p.stats.rx_packets,
                    tx_packets: p.stats.tx_packets,
                    rx_bytes: p.stats.rx_bytes,
                    tx_bytes: p.stats.tx_bytes,
                    rx_dropped: p.stats.rx_dropped.iter().sum(),
                    tx_dropped: p.stats.tx_dropped.iter().sum(),
                    duration_sec: (up / 1_000_000) as u32,
                    duration_nsec: (up % 1_000_000 * 1000) as u32,
                    ..Default::default()
                })
                .collect();
            Ok(vec![one(MpReply::PortStats(stats))])
        }
        // A query (no body); setting features is not supported.
        MpRequest::Other(mp::TABLE_FEATURES, body) if body.is_empty() => {
            let spec = control.set_field_mode() == SetFieldMode::Spec;
            let entries = (0..N_TABLES).map(|t| table_features(t, N_TABLES, 1 << 24, spec));
            Ok(split_reply(mp::TABLE_FEATURES, xid, entries))
        }
        // No queues: an empty list (the spec allows it).
        MpRequest::Other(mp::QUEUE, body) if body.len() == 8 => {
            Ok(vec![one(MpReply::Other(mp::QUEUE, Vec::new()))])
        }
        MpRequest::Other(mp::TABLE_FEATURES, _) => Err(OfError::TABLE_FEATURES_EPERM),
        MpRequest::Other(
            t @ (mp::GROUP
            | mp::GROUP_DESC
            | mp::GROUP_FEATURES
            | mp::METER
            | mp::METER_CONFIG
            | mp::METER_FEATURES),
            body,
        ) => {
            let served = if matches!(t, mp::METER | mp::METER_CONFIG | mp::METER_FEATURES) {
                crate::meters::meter_multipart(control, t, &body)?
            } else {
                crate::groups::group_multipart(control, t, &body)?
            };
            match served {
                // A features reply is one body, not entries.
                Some(Ok(mut b)) if matches!(t, mp::GROUP_FEATURES | mp::METER_FEATURES) => {
                    Ok(vec![one(MpReply::Other(t, b.pop().unwrap_or_default()))])
                }
                Some(Ok(entries)) => {
                    // Entries of whatever number: replies under 64 KiB.
                    Ok(split_reply(t, xid, entries.into_iter()))
                }
                Some(Err(e)) => Err(e),
                None => Err(OfError::BAD_MULTIPART),
            }
        }
        MpRequest::Other(..) => Err(OfError::BAD_MULTIPART),
    })
}

/// The switch's description (OpenFlow's `ofp_desc`).
pub(crate) fn desc(datapath_id: u64) -> Desc {
    Desc {
        mfr: "Sluice".into(),
        hw: "Sluice userspace switch".into(),
        sw: env!("CARGO_PKG_VERSION").into(),
        serial: "None".into(),
        dp: format!("dpid {:016x}", datapath_id),
    }
}

/// A flow or aggregate request's selection: table, cookie, out_port and
/// a loose match.
pub(crate) struct Filter {
    table_id: u8,
    cookie: u64,
    cookie_mask: u64,
    out_port: u32,
    m: sluice_classifier::Match,
}

impl Filter {
    fn new(q: &FlowStatsRequest) -> Result<Self, OfError> {
        if q.table_id != sluice_openflow::consts::TABLE_ALL && q.table_id >= N_TABLES {
            return Err(OfError::BAD_TABLE_ID);
        }
        Ok(Filter::of(
            q.table_id,
            q.cookie,
            q.cookie_mask,
            q.out_port,
            to_match(&q.oxms)?,
        ))
    }

    /// The selection of a table (`OFPTT_ALL`: any), cookie bits, output
    /// port (`OFPP_ANY`: any) and loose match.
    pub(crate) fn of(
        table_id: u8,
        cookie: u64,
        cookie_mask: u64,
        out_port: u32,
        m: sluice_classifier::Match,
    ) -> Self {
        Filter {
            table_id,
            cookie,
            cookie_mask,
            out_port,
            m,
        }
    }

    pub(crate) fn takes(&self, r: &sluice_classifier::Rule) -> bool {
        (self.table_id == sluice_openflow::consts::TABLE_ALL || r.table == self.table_id)
            && r.cookie & self.cookie_mask == self.cookie & self.cookie_mask
            && outputs_to(r, self.out_port)
            && r.matcher.is_within(&self.m)
    }
}
