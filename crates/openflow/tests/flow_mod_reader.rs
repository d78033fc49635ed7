//! The OpenFlow channel's flow-mod reader (buffers and instructions kept
//! from one message to the next) against decoding each message afresh:
//! for any sequence of flow-mods, valid, refused or corrupt, with the same
//! or changing instructions and tables, every one gives the same
//! operation or the same error.

use proptest::prelude::*;
use sluice_openflow::action::{Instruction, OfAction};
use sluice_openflow::convert::{flow_mod_op, FlowModReader};
use sluice_openflow::msg::{to_bytes, FlowMod};
use sluice_openflow::oxm::{f, Oxm};
use sluice_openflow::{decode, Message, OfError};

/// A flow-mod from random numbers: a few shapes of match and of
/// instructions, so that consecutive ones often share their instructions.
fn flow_mod(r: &[u32; 6]) -> FlowMod {
    let mut oxms = vec![Oxm::exact(f::ETH_TYPE, 0x0800)];
    match r[0] % 4 {
        0 => oxms.push(Oxm::exact(f::IPV4_DST, u128::from(r[1]))),
        1 => oxms.push(Oxm {
            field: f::IPV4_DST,
            value: u128::from(r[1] & 0xffff_ff00),
            mask: Some(0xffff_ff00),
        }),
        // Without its prerequisite (ip_proto): refused.
        2 => oxms.push(Oxm::exact(f::TCP_DST, 80)),
        _ => oxms.clear(),
    }
    let instructions = match r[2] % 6 {
        0 | 1 => vec![Instruction::ApplyActions(vec![OfAction::Output {
            port: 2,
            max_len: 0,
        }])],
        2 => vec![Instruction::ApplyActions(vec![OfAction::Output {
            port: 1 + r[3] % 3,
            max_len: 128,
        }])],
        3 => vec![
            Instruction::WriteActions(vec![OfAction::DecNwTtl]),
            Instruction::GotoTable(1 + (r[3] % 3) as u8),
        ],
        // Actions whose prerequisites the match must have (not shared
        // from one flow-mod to the next).
        4 => vec![Instruction::ApplyActions(vec![
            OfAction::SetField(Oxm::exact(f::IPV4_SRC, 0x0a00_0001)),
            OfAction::Output {
                port: 2,
                max_len: 0,
            },
        ])],
        _ => Vec::new(),
    };
    FlowMod {
        cookie: u64::from(r[4]),
        table_id: (r[4] % 3) as u8,
        command: [0, 0, 0, 1, 2, 3, 4][r[5] as usize % 7],
        priority: r[5] as u16,
        buffer_id: if r[5].is_multiple_of(11) { 7 } else { u32::MAX },
        out_port: u32::MAX,
        out_group: u32::MAX,
        oxms,
        instructions,
        ..FlowMod::default()
    }
}

/// What decoding the frame afresh gives.
fn afresh(frame: &[u8]) -> Result<String, OfError> {
    match decode(frame) {
        Ok((_, Message::FlowMod(fm))) => flow_mod_op(&fm, 254).map(|op| format!("{op:?}")),
        Ok(_) => Err(OfError::BAD_TYPE),
        Err((_, e)) => Err(e),
    }
}

proptest! {
    #[test]
    fn reader_equals_decoding_afresh(
        mods in proptest::collection::vec((any::<[u32; 6]>(), any::<u16>(), any::<u8>()), 1..40)
    ) {
        let mut reader = FlowModReader::default();
        for (r, at, byte) in mods {
            let mut frame = to_bytes(&Message::FlowMod(flow_mod(&r)), 1);
            // One in four corrupt: a byte past the header changed (the
            // length kept, so that the frame still reads as one message).
            if r[3].is_multiple_of(4) {
                let at = 8 + usize::from(at) % (frame.len() - 8);
                frame[at] ^= byte | 1;
            }
            let got = reader
                .read(&frame)
                .map(|_| ())
                .and_then(|()| reader.op(254))
                .map(|op| format!("{op:?}"));
            prop_assert_eq!(got, afresh(&frame));
        }
    }
}
