//! OpenFlow 1.0's flow-mods: `OFPT_FLOW_MOD` (an `ofp10_match`) and
//! Nicira's `NXT_FLOW_MOD` (an NXM match, which may select by cookie),
//! read into the operations 1.3's flow-mods make.
//!
//! 1.0's own rules, as Open vSwitch keeps them: without
//! `NXT_FLOW_MOD_TABLE_ID` a flow-mod names no table (an add goes to
//! table 0, a modify or delete acts on every table); with it, the table is
//! the command's high byte. A modify that selects nothing adds the rule
//! (unless it selects by cookie); one that selects rules gives them the
//! message's cookie (unless it is all ones), as Open vSwitch does. `OFPFF_EMERG` (emergency flows) is
//! refused: Sluice has no emergency table.

use sluice_classifier::Match;

use super::{actions, match10, nxm_match, nxt, port32, t};
use crate::consts::{fm, OfError, TABLE_ALL};
use crate::convert::{op_of, FlowModOp};
use crate::msg::FlowMod;
use crate::nx::NX_VENDOR;
use crate::wire::Rd;

/// What a 1.0 connection has said of its flow-mods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Format {
    /// NXM (`NXT_SET_FLOW_FORMAT` `NXFF_NXM`): what the switch sends
    /// (flow statistics, flow removed) uses NXM.
    pub nxm: bool,
    /// `NXT_FLOW_MOD_TABLE_ID`: a flow-mod's command carries its table.
    pub table_id: bool,
}

/// `OFPFF10_EMERG`.
const EMERG: u16 = 4;

/// Whether `frame` (a whole 1.0 message) is a flow-mod of either kind.
pub fn is_flow_mod(frame: &[u8]) -> bool {
    match frame.get(1) {
        Some(&t::FLOW_MOD) => true,
        Some(&t::VENDOR) => {
            frame.len() >= 16
                && frame[8..12] == NX_VENDOR.to_be_bytes()
                && frame[12..16] == nxt::FLOW_MOD.to_be_bytes()
        }
        _ => false,
    }
}

/// The operation of a 1.0 flow-mod frame (`OFPT_FLOW_MOD` or
/// `NXT_FLOW_MOD`), checked.
pub fn decode(frame: &[u8], format: Format, n_tables: u8) -> Result<FlowModOp, OfError> {
    let nx = frame.get(1) == Some(&t::VENDOR);
    let mut r = Rd::new(frame, OfError::BAD_LEN);
    r.skip(if nx { 16 } else { 8 })?;
    let ofp_match: Option<[u8; match10::LEN]> = if nx { None } else { Some(r.array()?) };
    // A modify gives the rules it changes the message's cookie (Open
    // vSwitch's `new_cookie`; all ones: they keep theirs).
    let new_cookie = r.u64()?;
    let mut fm = FlowMod {
        cookie: new_cookie,
        ..Default::default()
    };
    let command = r.u16()?;
    fm.idle_timeout = r.u16()?;
    fm.hard_timeout = r.u16()?;
    fm.priority = r.u16()?;
    fm.buffer_id = r.u32()?;
    fm.out_port = port32(r.u16()?);
    let flags = r.u16()?;
    let (matcher, cookie_mask) = match ofp_match {
        Some(b) => (match10::decode(&b), 0),
        None => {
            let match_len = usize::from(r.u16()?);
            r.skip(6)?;
            let bytes = r.take(match_len).map_err(|_| OfError::BAD_MATCH_LEN)?;
            r.skip((8 - match_len % 8) % 8)
                .map_err(|_| OfError::BAD_MATCH_LEN)?;
            match nxm_match::decode(bytes) {
                Ok((m, cookie, mask)) => {
                    if command as u8 != fm::ADD {
                        // The match's cookie selects; the message's is the
                        // new one (kept for an add).
                        fm.cookie = cookie;
                    }
                    (Ok::<Match, OfError>(m), mask)
                }
                Err(e) => (Err(e), 0),
            }
        }
    };
    let action_bytes = r.rest();
    if flags & EMERG != 0 {
        return Err(OfError::BAD_FLAGS);
    }
    fm.flags = flags & (fm::SEND_FLOW_REM | fm::CHECK_OVERLAP);
    fm.command = command as u8;
    fm.cookie_mask = cookie_mask;
    fm.table_id = if format.table_id {
        (command >> 8) as u8
    } else {
        TABLE_ALL
    };
    let modify = matches!(fm.command, fm::MODIFY | fm::MODIFY_STRICT);
    let any_table = fm.table_id == TABLE_ALL;
    if any_table && (fm.command == fm::ADD || modify) {
        fm.table_id = 0;
    }
    let op = op_of(
        &fm,
        matcher,
        n_tables,
        |m, _| actions::decode(action_bytes, m).map(Into::into),
        || None,
    )?;
    Ok(match op {
        FlowModOp::Modify(mut spec, how) => {
            spec.table_given = !any_table;
            spec.new_cookie = Some(new_cookie);
            if cookie_mask == 0 {
                FlowModOp::ModifyOrAdd(spec, how)
            } else {
                FlowModOp::Modify(spec, how)
            }
        }
        op => op,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::action::format_actions;

    /// An OFPT_FLOW_MOD of the flow `s` (match and actions as ovs-ofctl
    /// 1.0 encodes them, from Sluice's own encoders).
    fn std_frame(s: &str, command: u16) -> Vec<u8> {
        let spec =
            sluice_classifier::parse_flow(s, sluice_classifier::parse::Require::Actions).unwrap();
        let mut b = vec![1, t::FLOW_MOD, 0, 0, 0, 0, 0, 9];
        b.extend_from_slice(&match10::encode(&spec.matcher));
        b.extend_from_slice(&7u64.to_be_bytes());
        b.extend_from_slice(&command.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&spec.priority.to_be_bytes());
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        b.extend_from_slice(&0xffffu16.to_be_bytes());
        b.extend_from_slice(&1u16.to_be_bytes());
        actions::encode(&spec.actions, &mut b);
        let len = b.len() as u16;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        b
    }

    fn nx_frame(s: &str, command: u16, cookie: (u64, u64)) -> Vec<u8> {
        let spec =
            sluice_classifier::parse_flow(s, sluice_classifier::parse::Require::Actions).unwrap();
        let mut b = vec![
            1,
            t::VENDOR,
            0,
            0,
            0,
            0,
            0,
            9,
            0,
            0,
            0x23,
            0x20,
            0,
            0,
            0,
            13,
        ];
        b.extend_from_slice(&7u64.to_be_bytes());
        b.extend_from_slice(&command.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&spec.priority.to_be_bytes());
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        b.extend_from_slice(&0xffffu16.to_be_bytes());
        b.extend_from_slice(&0u16.to_be_bytes());
        let at = b.len();
        b.extend_from_slice(&[0; 8]);
        let n = nxm_match::encode(&spec.matcher, cookie.0, cookie.1, &mut b);
        b[at..at + 2].copy_from_slice(&(n as u16).to_be_bytes());
        b.resize(b.len() + (8 - n % 8) % 8, 0);
        actions::encode(&spec.actions, &mut b);
        let len = b.len() as u16;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        b
    }

    #[test]
    fn flow_mods_of_both_kinds_read_as_the_flow_language() {
        for s in [
            "priority=5,ip,nw_dst=10.0.0.0/8,actions=mod_dl_src:00:00:00:00:00:01,output:2",
            "tcp,tp_dst=80,actions=mod_vlan_vid:10,mod_tp_dst:8080,controller:64",
            "dl_vlan=3,actions=strip_vlan,enqueue:2:5,NORMAL",
            "ip,actions=dec_ttl,mod_nw_tos:16,mod_nw_src:1.2.3.4,set_queue:3,group:1",
        ] {
            let want = sluice_classifier::parse_flow(s, sluice_classifier::parse::Require::Actions)
                .unwrap();
            for frame in [std_frame(s, 0), nx_frame(s, 0, (0, 0))] {
                let FlowModOp::Add(spec) = decode(&frame, Format::default(), 254).unwrap() else {
                    panic!("an add");
                };
                assert_eq!(spec.matcher, want.matcher, "{s}");
                assert_eq!(spec.table, 0);
                assert_eq!(spec.cookie, 7);
                assert_eq!(
                    format_actions(&spec.actions),
                    format_actions(&want.actions),
                    "{s}"
                );
            }
        }
        // NXM says what 1.0 cannot, and a table with FLOW_MOD_TABLE_ID.
        let s = "reg0=5,ip,nw_ttl=3,actions=load:1->NXM_NX_REG1[],resubmit(,3)";
        let f = Format {
            nxm: true,
            table_id: true,
        };
        let FlowModOp::Add(spec) = decode(&nx_frame(s, 2 << 8, (0, 0)), f, 254).unwrap() else {
            panic!("an add");
        };
        assert_eq!(spec.table, 2);
        assert_eq!(
            format_actions(&spec.actions),
            "load:0x1->NXM_NX_REG1[],resubmit(,3)"
        );
    }

    #[test]
    fn modify_adds_unless_it_selects_by_cookie_and_deletes_span_tables() {
        let s = "ip,actions=output:1";
        match decode(&std_frame(s, 1), Format::default(), 254).unwrap() {
            FlowModOp::ModifyOrAdd(spec, _) => assert!(!spec.table_given),
            op => panic!("{op:?}"),
        }
        match decode(&nx_frame(s, 1, (5, 0xff)), Format::default(), 254).unwrap() {
            FlowModOp::Modify(spec, _) => assert_eq!(
                (spec.cookie, spec.cookie_mask, spec.new_cookie),
                (5, 0xff, Some(7))
            ),
            op => panic!("{op:?}"),
        }
        match decode(&std_frame(s, 3), Format::default(), 254).unwrap() {
            FlowModOp::Delete { all_tables, .. } => assert!(all_tables),
            op => panic!("{op:?}"),
        }
    }

    #[test]
    fn bad_flow_mods_get_errors() {
        let mut f = std_frame("actions=output:1", 0);
        // An OFPP_NONE output.
        let n = f.len();
        f[n - 4..n - 2].copy_from_slice(&0xffffu16.to_be_bytes());
        assert_eq!(
            decode(&f, Format::default(), 254).err(),
            Some(OfError::BAD_OUT_PORT)
        );
        let mut f = std_frame("actions=output:1", 0);
        f[70..72].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(
            decode(&f, Format::default(), 254).err(),
            Some(OfError::BAD_FLAGS)
        );
        let f = std_frame("actions=output:1", 0);
        assert_eq!(
            decode(&f[..40], Format::default(), 254).err(),
            Some(OfError::BAD_LEN)
        );
        let mut f = std_frame("actions=output:1", 0);
        f.truncate(f.len() - 4);
        assert_eq!(
            decode(&f, Format::default(), 254).err(),
            Some(OfError::BAD_ACTION_LEN)
        );
    }
}
