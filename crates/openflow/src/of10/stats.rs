//! OpenFlow 1.0's statistics (`OFPT_STATS_REQUEST`/`REPLY`): the standard
//! descriptions, flow, aggregate, table and port statistics, and Nicira's
//! `NXST_FLOW` and `NXST_AGGREGATE` (flow statistics with NXM matches,
//! what `ovs-ofctl dump-flows` asks for first).

use sluice_classifier::{Match, Rule};

use super::{actions, match10, nxm_match, port16, port32, t, OFP10};
use crate::consts::OfError;
use crate::nx::NX_VENDOR;
use crate::wire::{patch_u16, put_str, Rd};

/// Statistics types (`ofp10_stats_types`).
pub mod st {
    #![allow(missing_docs)]
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const VENDOR: u16 = 0xffff;
}

/// Nicira's statistics subtypes.
mod nxst {
    pub const FLOW: u32 = 0;
    pub const AGGREGATE: u32 = 1;
}

/// A flow or aggregate request's selection.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowQuery {
    /// Asked by `NXST_*` (answered with NXM).
    pub nx: bool,
    /// A table, or 0xff for all.
    pub table_id: u8,
    /// Rules that output to this port (`OFPP_ANY`: any).
    pub out_port: u32,
    /// Cookie bits to select by (NXM's `NXM_NX_COOKIE`).
    pub cookie: u64,
    /// Which.
    pub cookie_mask: u64,
    /// Rules whose match is at least this.
    pub matcher: Match,
}

/// A statistics request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `OFPST_DESC`.
    Desc,
    /// `OFPST_FLOW` or `NXST_FLOW`.
    Flow(FlowQuery),
    /// `OFPST_AGGREGATE` or `NXST_AGGREGATE`.
    Aggregate(FlowQuery),
    /// `OFPST_TABLE`.
    Table,
    /// `OFPST_PORT` of a port (`OFPP_ANY`: all).
    Port(u32),
    /// `OFPST_QUEUE`.
    Queue,
}

/// Reads a stats request frame.
pub fn decode(frame: &[u8]) -> Result<Request, OfError> {
    let mut r = Rd::new(frame, OfError::BAD_LEN);
    r.skip(8)?;
    let typ = r.u16()?;
    r.skip(2)?;
    Ok(match typ {
        st::DESC => Request::Desc,
        st::TABLE => Request::Table,
        st::QUEUE => Request::Queue,
        st::PORT => {
            let p = port32(r.u16()?);
            r.skip(6)?;
            Request::Port(p)
        }
        st::FLOW | st::AGGREGATE => {
            let m: [u8; match10::LEN] = r.array()?;
            let table_id = r.u8()?;
            r.skip(1)?;
            let out_port = port32(r.u16()?);
            let q = FlowQuery {
                nx: false,
                table_id,
                out_port,
                cookie: 0,
                cookie_mask: 0,
                matcher: match10::decode(&m)?,
            };
            if typ == st::FLOW {
                Request::Flow(q)
            } else {
                Request::Aggregate(q)
            }
        }
        st::VENDOR => {
            if r.u32()? != NX_VENDOR {
                return Err(OfError::BAD_EXPERIMENTER);
            }
            let sub = r.u32()?;
            r.skip(4)?;
            if sub != nxst::FLOW && sub != nxst::AGGREGATE {
                return Err(OfError::BAD_SUBTYPE);
            }
            let out_port = port32(r.u16()?);
            let match_len = usize::from(r.u16()?);
            let table_id = r.u8()?;
            r.skip(3)?;
            let b = r.take(match_len).map_err(|_| OfError::BAD_MATCH_LEN)?;
            let (matcher, cookie, cookie_mask) = nxm_match::decode(b)?;
            let q = FlowQuery {
                nx: true,
                table_id,
                out_port,
                cookie,
                cookie_mask,
                matcher,
            };
            if sub == nxst::FLOW {
                Request::Flow(q)
            } else {
                Request::Aggregate(q)
            }
        }
        _ => return Err(OfError::BAD_MULTIPART),
    })
}

/// The reply frames of `typ` (`nx`: a Nicira one, `subtype` of the
/// request's kind) holding `entries`, each under 64 KiB, all but the last
/// flagged `OFPSF_REPLY_MORE`.
pub fn replies(
    xid: u32,
    typ: u16,
    nx: Option<bool>,
    entries: impl Iterator<Item = Vec<u8>>,
) -> Vec<Vec<u8>> {
    let head = |out: &mut Vec<u8>| {
        out.extend_from_slice(&[OFP10, t::STATS_REPLY, 0, 0]);
        out.extend_from_slice(&xid.to_be_bytes());
        match nx {
            Some(flow) => {
                out.extend_from_slice(&st::VENDOR.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&NX_VENDOR.to_be_bytes());
                let sub = if flow { nxst::FLOW } else { nxst::AGGREGATE };
                out.extend_from_slice(&sub.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            None => {
                out.extend_from_slice(&typ.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
            }
        }
    };
    let mut frames = Vec::new();
    let mut cur = Vec::new();
    head(&mut cur);
    let empty = cur.len();
    for e in entries {
        if cur.len() + e.len() > usize::from(u16::MAX) && cur.len() > empty {
            let done = std::mem::take(&mut cur);
            frames.push(done);
            head(&mut cur);
        }
        cur.extend_from_slice(&e);
    }
    frames.push(cur);
    let n = frames.len();
    for (i, f) in frames.iter_mut().enumerate() {
        let len = f.len() as u16;
        patch_u16(f, 2, len);
        if i + 1 < n {
            // OFPSF_REPLY_MORE.
            f[11] = 1;
        }
    }
    frames
}

/// A rule's age fields at `now_us`: duration (s, ns), and Nicira's idle
/// and hard ages (seconds since last used and since last changed, plus
/// one).
fn ages(r: &Rule, now_us: u64) -> (u32, u32, u16, u16) {
    use std::sync::atomic::Ordering::Relaxed;
    let age = now_us.saturating_sub(r.created_us);
    let since = |t: u64| {
        let t = if t == 0 { r.created_us } else { t };
        (now_us.saturating_sub(t) / 1_000_000 + 1).min(65535) as u16
    };
    (
        (age / 1_000_000) as u32,
        (age % 1_000_000 * 1000) as u32,
        since(r.stats.last_used_us.load(Relaxed)),
        since(r.stats.modified_us.load(Relaxed)),
    )
}

/// One rule's entry: `ofp10_flow_stats`, or `nx_flow_stats` when `nx`.
pub fn flow_entry(r: &Rule, now_us: u64, nx: bool) -> Vec<u8> {
    let (dur_s, dur_ns, idle_age, hard_age) = ages(r, now_us);
    let (packets, bytes) = r.counters();
    let mut out = Vec::with_capacity(128);
    if nx {
        out.extend_from_slice(&[0, 0, r.table, 0]);
        out.extend_from_slice(&dur_s.to_be_bytes());
        out.extend_from_slice(&dur_ns.to_be_bytes());
        out.extend_from_slice(&r.priority.to_be_bytes());
        out.extend_from_slice(&r.timeouts().0.to_be_bytes());
        out.extend_from_slice(&r.timeouts().1.to_be_bytes());
        let match_len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&idle_age.to_be_bytes());
        out.extend_from_slice(&hard_age.to_be_bytes());
        out.extend_from_slice(&r.cookie.to_be_bytes());
        out.extend_from_slice(&packets.to_be_bytes());
        out.extend_from_slice(&bytes.to_be_bytes());
        let n = nxm_match::encode(&r.matcher, 0, 0, &mut out);
        patch_u16(&mut out, match_len_at, n as u16);
        out.resize(out.len() + (8 - n % 8) % 8, 0);
    } else {
        out.extend_from_slice(&[0, 0, r.table, 0]);
        out.extend_from_slice(&match10::encode(&r.matcher));
        out.extend_from_slice(&dur_s.to_be_bytes());
        out.extend_from_slice(&dur_ns.to_be_bytes());
        out.extend_from_slice(&r.priority.to_be_bytes());
        out.extend_from_slice(&r.timeouts().0.to_be_bytes());
        out.extend_from_slice(&r.timeouts().1.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&r.cookie.to_be_bytes());
        out.extend_from_slice(&packets.to_be_bytes());
        out.extend_from_slice(&bytes.to_be_bytes());
    }
    actions::encode(&r.actions, &mut out);
    let len = out.len() as u16;
    patch_u16(&mut out, 0, len);
    out
}

/// The aggregate body (the same in both kinds).
pub fn aggregate(packets: u64, bytes: u64, flows: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&packets.to_be_bytes());
    b.extend_from_slice(&bytes.to_be_bytes());
    b.extend_from_slice(&flows.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b
}

/// One table's `ofp10_table_stats`.
pub fn table_entry(table_id: u8, active: u32, lookups: u64, matched: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&[table_id, 0, 0, 0]);
    put_str(&mut b, &format!("table{table_id}"), 32);
    // Every 1.0 field can be wildcarded.
    b.extend_from_slice(&super::match10::fw::ALL.to_be_bytes());
    b.extend_from_slice(&1_000_000u32.to_be_bytes());
    b.extend_from_slice(&active.to_be_bytes());
    b.extend_from_slice(&lookups.to_be_bytes());
    b.extend_from_slice(&matched.to_be_bytes());
    b
}

/// One port's `ofp10_port_stats`: packets, bytes and drops each way (the
/// error counters 1.0 has, Sluice counts as drops: left at 0 here).
pub fn port_entry(port_no: u32, rx: (u64, u64, u64), tx: (u64, u64, u64)) -> Vec<u8> {
    let mut b = Vec::with_capacity(104);
    b.extend_from_slice(&port16(port_no).to_be_bytes());
    b.extend_from_slice(&[0; 6]);
    for v in [rx.0, tx.0, rx.1, tx.1, rx.2, tx.2] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    // rx_errors, tx_errors, rx_frame_err, rx_over_err, rx_crc_err,
    // collisions.
    b.extend_from_slice(&[0; 48]);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(typ: u16, body: &[u8]) -> Vec<u8> {
        let mut b = vec![1, t::STATS_REQUEST, 0, 0, 0, 0, 0, 3];
        b.extend_from_slice(&typ.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn requests_of_both_kinds() {
        let mut body = vec![0u8; 44];
        body[..4].copy_from_slice(&match10::fw::ALL.to_be_bytes());
        body[40] = 0xff;
        body[42..44].copy_from_slice(&0xffffu16.to_be_bytes());
        let Request::Flow(q) = decode(&request(st::FLOW, &body)).unwrap() else {
            panic!()
        };
        assert_eq!(
            (q.nx, q.table_id, q.out_port),
            (false, 0xff, crate::consts::port::ANY)
        );
        assert_eq!(q.matcher, Match::catch_all());
        let mut nx = vec![0, 0, 0x23, 0x20, 0, 0, 0, 1, 0, 0, 0, 0];
        nx.extend_from_slice(&[0xff, 0xff, 0, 6, 3, 0, 0, 0]);
        nx.extend_from_slice(&[0, 0, 6, 2, 8, 0, 0, 0]);
        let Request::Aggregate(q) = decode(&request(st::VENDOR, &nx)).unwrap() else {
            panic!()
        };
        assert_eq!((q.nx, q.table_id), (true, 3));
        assert_eq!(
            q.matcher
                .get(sluice_classifier::fields::field_by_name("dl_type").unwrap())
                .0,
            0x0800
        );
        assert_eq!(decode(&request(99, &[])), Err(OfError::BAD_MULTIPART));
        assert_eq!(decode(&request(st::FLOW, &[0; 10])), Err(OfError::BAD_LEN));
    }

    #[test]
    fn replies_split_under_64k_with_more_flags() {
        let entries = (0..1000).map(|_| vec![0u8; 200]);
        let frames = replies(9, st::FLOW, Some(true), entries);
        assert_eq!(frames.len(), 4);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(usize::from(u16::from_be_bytes([f[2], f[3]])), f.len());
            assert!(f.len() <= 65535);
            assert_eq!(f[11], u8::from(i < 3));
            assert_eq!(&f[12..20], &[0, 0, 0x23, 0x20, 0, 0, 0, 0]);
        }
        let total: usize = frames.iter().map(|f| f.len() - 24).sum();
        assert_eq!(total, 200_000);
    }
}
