//! The codec: encode/decode round trips and no panic on any input.

use proptest::prelude::*;
use sluice_openflow::action::{Instruction, OfAction};
use sluice_openflow::msg::{to_bytes, FlowMod, SwitchConfig};
use sluice_openflow::oxm::{f, Oxm};
use sluice_openflow::{decode, frame_len, Message, OfError};

fn flow_mod(priority: u16, port: u32, dst: u32, plen: u32) -> FlowMod {
    let mask = if plen == 0 {
        0
    } else {
        u32::MAX << (32 - plen)
    };
    FlowMod {
        cookie: 7,
        cookie_mask: 0,
        table_id: 0,
        command: 0,
        idle_timeout: 0,
        hard_timeout: 30,
        priority,
        buffer_id: u32::MAX,
        out_port: u32::MAX,
        out_group: u32::MAX,
        flags: 1,
        oxms: vec![
            Oxm::exact(f::ETH_TYPE, 0x0800),
            Oxm {
                field: f::IPV4_DST,
                value: u128::from(dst & mask),
                mask: Some(u128::from(mask)),
            },
        ],
        instructions: vec![
            Instruction::ApplyActions(vec![
                OfAction::SetField(Oxm::exact(f::IPV4_SRC, 0x0a000001)),
                OfAction::SetNwTtl(priority as u8),
                OfAction::DecNwTtl,
                OfAction::PushMpls(0x8847),
                OfAction::SetField(Oxm::exact(f::MPLS_LABEL, u128::from(dst >> 12))),
                OfAction::SetMplsTtl(priority as u8),
                OfAction::DecMplsTtl,
                OfAction::CopyTtlOut,
                OfAction::CopyTtlIn,
                OfAction::PopMpls(0x0800),
                OfAction::PushPbb(0x88e7),
                OfAction::SetField(Oxm::exact(f::PBB_ISID, u128::from(dst & 0xff_ffff))),
                OfAction::PopPbb,
                OfAction::SetField(Oxm::exact(f::TUNNEL_ID, u128::from(dst))),
                OfAction::Output {
                    port,
                    max_len: priority,
                },
            ]),
            Instruction::GotoTable(3),
        ],
    }
}

proptest! {
    #[test]
    fn messages_round_trip(priority in any::<u16>(), port in 1u32..0xffff_ff00, dst in any::<u32>(),
                           plen in 1u32..=32, xid in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
        for m in [
            Message::FlowMod(flow_mod(priority, port, dst, plen)),
            Message::EchoRequest(data.clone()),
            Message::Hello { versions: 1 << 4 },
            Message::SetConfig(SwitchConfig { flags: 0, miss_send_len: priority }),
            Message::BarrierRequest,
            Message::Error { err: OfError::BAD_PREREQ, data: data.clone() },
        ] {
            let b = to_bytes(&m, xid);
            prop_assert_eq!(frame_len(&b).unwrap(), Some(b.len()));
            let (h, back) = decode(&b).expect("decodes");
            prop_assert_eq!(h.xid, xid);
            prop_assert_eq!(back, m);
        }
    }

    #[test]
    fn any_bytes_decode_or_fail_cleanly(mut b in proptest::collection::vec(any::<u8>(), 0..300), typ in 0u8..32) {
        if b.len() >= 8 {
            b[0] = 4;
            b[1] = typ;
            let l = b.len() as u16;
            b[2..4].copy_from_slice(&l.to_be_bytes());
        }
        let _ = decode(&b);
        let _ = frame_len(&b);
    }
}

#[test]
fn hello_without_a_bitmap_offers_every_version_up_to_its_own() {
    // Found by the fuzzer: version 31 overflowed.
    for (v, want) in [
        (1u8, 0b11u32),
        (4, 0b11111),
        (31, u32::MAX),
        (255, u32::MAX),
    ] {
        let (_, m) = decode(&[v, 0, 0, 8, 0, 0, 0, 1]).unwrap();
        assert_eq!(m, Message::Hello { versions: want }, "version {v}");
    }
}

#[test]
fn errors_name_the_spec() {
    // A match field without its prerequisite: ipv4_dst without eth_type.
    let mut fm = flow_mod(1, 2, 0x0a000000, 8);
    fm.oxms.remove(0);
    assert_eq!(
        sluice_openflow::convert::flow_mod_op(&fm, 254).unwrap_err(),
        OfError::BAD_PREREQ
    );
    // goto_table must go forward.
    let mut fm = flow_mod(1, 2, 0x0a000000, 8);
    fm.table_id = 5;
    assert_eq!(
        sluice_openflow::convert::flow_mod_op(&fm, 254).unwrap_err(),
        OfError::BAD_INST_TABLE_ID
    );
    // A length under the header's is not framable.
    assert_eq!(frame_len(&[4, 0, 0, 4, 0, 0, 0, 0]), Err(OfError::BAD_LEN));
}
