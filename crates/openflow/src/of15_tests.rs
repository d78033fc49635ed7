use super::*;
use crate::action::{Instruction, OfAction};
use crate::consts::OFP13;
use crate::msg::{decode, Message};
use crate::nxm::NxAction;

fn header(v: u8, t: u8, xid: u32) -> Vec<u8> {
    let mut h = vec![v, t, 0, 0];
    h.extend_from_slice(&xid.to_be_bytes());
    h
}

fn finish(mut f: Vec<u8>) -> Vec<u8> {
    let n = f.len() as u16;
    f[2..4].copy_from_slice(&n.to_be_bytes());
    f
}

/// An OXM match of the given TLVs, padded.
fn ofp_match(tlvs: &[u8]) -> Vec<u8> {
    let mut m = vec![0, 1];
    m.extend_from_slice(&((4 + tlvs.len()) as u16).to_be_bytes());
    m.extend_from_slice(tlvs);
    while m.len() % 8 != 0 {
        m.push(0);
    }
    m
}

const REG0: [u8; 4] = [0x00, 0x01, 0x00, 0x04];
const REG1: [u8; 4] = [0x00, 0x01, 0x02, 0x04];

/// A 1.5 flow-mod (add, table 0, priority 100) matching anything, with
/// these apply-actions.
fn flow_mod15(actions: &[u8]) -> Vec<u8> {
    let mut f = header(OFP15, msg::FLOW_MOD, 9);
    f.extend_from_slice(&[0; 16]); // cookie, mask
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 100]); // table, command, timeouts, priority
    f.extend_from_slice(&[0xff; 12]); // buffer, out_port, out_group
    f.extend_from_slice(&[0; 4]); // flags, importance
    f.extend_from_slice(&ofp_match(&[]));
    f.extend_from_slice(&4u16.to_be_bytes());
    f.extend_from_slice(&((8 + actions.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(actions);
    finish(f)
}

fn instructions_of(frame: &[u8]) -> Vec<Instruction> {
    let down = downgrade(frame).expect("converts");
    assert_eq!(down[0], OFP13);
    match decode(&down).expect("1.3 reads it").1 {
        Message::FlowMod(fm) => fm.instructions,
        m => panic!("{m:?}"),
    }
}

#[test]
fn copy_field_masked_set_field_and_meter_become_1_3s() {
    // move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31] as COPY_FIELD.
    let mut copy = vec![0, 28, 0, 24, 0, 16, 0, 0, 0, 16, 0, 0];
    copy.extend_from_slice(&REG0);
    copy.extend_from_slice(&REG1);
    copy.extend_from_slice(&[0; 4]);
    // set_field:0x5/0xff->reg0 (masked).
    let mut set = vec![0, 25, 0, 16, 0x00, 0x01, 0x01, 0x08];
    set.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 0xff]);
    // meter:7 heading the actions.
    let meter = [0, 29, 0, 8, 0, 0, 0, 7];
    let mut acts = meter.to_vec();
    acts.extend_from_slice(&copy);
    acts.extend_from_slice(&set);
    let ins = instructions_of(&flow_mod15(&acts));
    assert_eq!(ins[0], Instruction::Meter(7), "the meter instruction first");
    let Instruction::ApplyActions(a) = &ins[1] else {
        panic!("{ins:?}")
    };
    assert!(
        matches!(
            a[0],
            OfAction::Nx(NxAction::RegMove {
                n_bits: 16,
                src_ofs: 0,
                dst_ofs: 16,
                ..
            })
        ),
        "{a:?}"
    );
    assert_eq!(a.len(), 2, "{a:?}");

    // A meter after another action is refused, not moved.
    let mut late = copy.clone();
    late.extend_from_slice(&meter);
    assert_eq!(downgrade(&flow_mod15(&late)), Err(OfError::BAD_ACTION_TYPE));
}

#[test]
fn actions_inside_ct_exec_are_converted_too() {
    // ct(commit,exec(set_field:1/1->reg0)): NXAST_CT, 24 bytes, then the
    // nested masked set_field.
    let mut set = vec![0, 25, 0, 16, 0x00, 0x01, 0x01, 0x08];
    set.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    let mut ct = vec![0xff, 0xff, 0, 0, 0, 0, 0x23, 0x20, 0, 35, 0, 1];
    // zone_src, zone, recirc_table, pad, alg.
    ct.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]);
    ct.extend_from_slice(&set);
    let n = ct.len() as u16;
    ct[2..4].copy_from_slice(&n.to_be_bytes());
    let mut out = Vec::new();
    actions(&ct, &mut out, false).unwrap();
    assert_eq!(be16(&out, 2) as usize, out.len());
    assert_eq!(
        &out[24..34],
        &[0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 7],
        "REG_LOAD inside"
    );
    assert_eq!(&out[34..36], &[0, 0], "load:1->NXM_NX_REG0[0]");
}

#[test]
fn a_packet_out_s_match_becomes_in_port_and_set_fields() {
    let mut tlvs = vec![0x80, 0x00, 0x00, 0x04, 0, 0, 0, 3]; // in_port=3
    tlvs.extend_from_slice(&REG1);
    tlvs.extend_from_slice(&[0, 0, 0, 9]); // reg1=9
    let output = [0, 0, 0, 16, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
    let mut f = header(OFP15, msg::PACKET_OUT, 4);
    f.extend_from_slice(&[0xff; 4]);
    f.extend_from_slice(&(output.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&ofp_match(&tlvs));
    f.extend_from_slice(&output);
    f.extend_from_slice(b"packet bytes");
    let down = downgrade(&finish(f)).unwrap();
    let Message::PacketOut(po) = decode(&down).unwrap().1 else {
        panic!()
    };
    assert_eq!(po.in_port, 3);
    assert_eq!(po.data, b"packet bytes");
    assert!(
        matches!(&po.actions[0], OfAction::SetField(o) if o.value == 9),
        "{:?}",
        po.actions
    );
    assert_eq!(
        po.actions[1],
        OfAction::Output {
            port: 1,
            max_len: 0xffff
        }
    );
}

fn group_mod15(command: u16, typ: u8, buckets: &[u8]) -> Vec<u8> {
    let mut f = header(OFP15, msg::GROUP_MOD, 5);
    f.extend_from_slice(&command.to_be_bytes());
    f.extend_from_slice(&[typ, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&(buckets.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
    f.extend_from_slice(buckets);
    // Another experimenter's group property: ignored.
    f.extend_from_slice(&[0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, 0, 0, 1, 0, 0, 0, 0]);
    finish(f)
}

#[test]
fn group_buckets_take_1_3s_layout_and_come_back_with_ids() {
    let output = [0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut bucket = vec![0, 32, 0, 16, 0, 0, 0, 0];
    bucket.extend_from_slice(&output);
    bucket.extend_from_slice(&[0, 0, 0, 8, 0, 100, 0, 0]); // weight 100
    let down = downgrade(&group_mod15(0, GROUP_SELECT, &bucket)).unwrap();
    assert_eq!(down[0], OFP13);
    let gm = crate::group::decode_group_mod(&down[8..]).unwrap();
    assert_eq!((gm.group_id, gm.buckets.len()), (1, 1));
    assert_eq!(gm.buckets[0].weight, 100);
    assert_eq!(gm.buckets[0].watch_port, ANY);
    assert_eq!(
        gm.buckets[0].actions,
        vec![OfAction::Output {
            port: 2,
            max_len: 0
        }]
    );
    assert_eq!(
        gm.selection, None,
        "another experimenter's property is ignored"
    );
    assert_eq!(
        downgrade(&group_mod15(3, GROUP_SELECT, &bucket)),
        Err(OfError::GROUP_BAD_COMMAND),
        "INSERT_BUCKET"
    );
    // Netronome's selection method, as ovn-controller sends it
    // (`selection_method=dp_hash`), is kept.
    let mut f = header(OFP15, msg::GROUP_MOD, 5);
    f.extend_from_slice(&[0, 0, GROUP_SELECT, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&(bucket.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
    f.extend_from_slice(&bucket);
    f.extend_from_slice(&[0xff, 0xff, 0, 40, 0, 0, 0x15, 0x4d, 0, 0, 0, 1, 0, 0, 0, 0]);
    f.extend_from_slice(b"dp_hash\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&(1u64 << 32 | 5).to_be_bytes());
    let gm = crate::group::decode_group_mod(&downgrade(&finish(f)).unwrap()[8..]).unwrap();
    let sel = gm.selection.expect("kept");
    assert_eq!((sel.method.as_str(), sel.param), ("dp_hash", 1 << 32 | 5));
    assert_eq!(gm.buckets.len(), 1);

    // The description comes back in 1.5's layout with the bucket's id.
    let mut desc = header(OFP13, msg::MULTIPART_REPLY, 6);
    desc.extend_from_slice(&[0, 7, 0, 0, 0, 0, 0, 0]);
    desc.extend_from_slice(&[0, 8 + 32, GROUP_SELECT, 0, 0, 0, 0, 1]);
    desc.extend_from_slice(&[
        0, 32, 0, 100, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    desc.extend_from_slice(&output);
    let up = upgrade(&finish(desc));
    assert_eq!(up[0], OFP15);
    assert_eq!(be16(&up, 2) as usize, up.len());
    let e = &up[16..];
    assert_eq!(be16(e, 0) as usize, e.len());
    assert_eq!(be16(e, 8), 8 + 16 + 8, "bucket list length");
    let b = &e[16..];
    assert_eq!(
        &b[..8],
        &[0, 32, 0, 16, 0, 0, 0, 0],
        "len, actions' length, id 0"
    );
    assert_eq!(
        &b[24..32],
        &[0, 0, 0, 8, 0, 100, 0, 0],
        "the weight property"
    );
}

#[test]
fn flow_statistics_and_removals_take_oxs() {
    let mut entry = vec![
        0,
        56 + 16,
        3,
        0,
        0,
        0,
        0,
        2,
        0,
        0,
        0,
        5,
        0,
        100,
        0,
        10,
        0,
        20,
        0,
        1,
        0,
        0,
        0,
        0,
    ];
    entry.extend_from_slice(&0xabu64.to_be_bytes()); // cookie
    entry.extend_from_slice(&7u64.to_be_bytes()); // packets
    entry.extend_from_slice(&700u64.to_be_bytes()); // bytes
    entry.extend_from_slice(&ofp_match(&[]));
    entry.extend_from_slice(&[0, 4, 0, 16, 0, 0, 0, 0]); // apply-actions:
    entry.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0]); // ... with a pad action
    let mut reply = header(OFP13, msg::MULTIPART_REPLY, 2);
    reply.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    reply.extend_from_slice(&entry);
    let up = upgrade(&finish(reply));
    let e = &up[16..];
    assert_eq!(be16(e, 0) as usize, e.len());
    assert_eq!(
        (e[4], be16(e, 6), be16(e, 8), be16(e, 10)),
        (3, 100, 10, 20)
    );
    assert_eq!(be64(e, 16), 0xab);
    assert_eq!(&e[24..32], &ofp_match(&[])[..]);
    let stats = &e[32..];
    assert_eq!(be16(stats, 2), 4 + 36);
    assert_eq!(be32(stats, 4), OXS_DURATION);
    assert_eq!(be64(stats, 8), 2 << 32 | 5);
    assert_eq!((be32(stats, 16), be64(stats, 20)), (OXS_PACKET_COUNT, 7));
    assert_eq!((be32(stats, 28), be64(stats, 32)), (OXS_BYTE_COUNT, 700));
    assert_eq!(&e[72..76], &[0, 4, 0, 16], "the instructions after");

    let mut rem = header(OFP13, msg::FLOW_REMOVED, 0);
    rem.extend_from_slice(&0xcdu64.to_be_bytes());
    rem.extend_from_slice(&[0, 50, 2, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 30, 0, 0]);
    rem.extend_from_slice(&1u64.to_be_bytes());
    rem.extend_from_slice(&64u64.to_be_bytes());
    rem.extend_from_slice(&ofp_match(&[]));
    let up = upgrade(&finish(rem));
    assert_eq!(
        &up[8..16],
        &[4, 2, 0, 50, 0, 30, 0, 0],
        "table, reason, priority, timeouts"
    );
    assert_eq!(be64(&up, 16), 0xcd);
    assert_eq!(be16(&up, 2) as usize, up.len());
}

#[test]
fn requests_1_5_changed_are_read_or_refused() {
    let mut desc = header(OFP15, msg::MULTIPART_REQUEST, 1);
    desc.extend_from_slice(&[0, 7, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0]);
    let down = downgrade(&finish(desc)).unwrap();
    assert_eq!((down[0], down.len()), (OFP13, 16));
    let mut fs = header(OFP15, msg::MULTIPART_REQUEST, 1);
    fs.extend_from_slice(&[0, 17, 0, 0, 0, 0, 0, 0]);
    assert_eq!(downgrade(&finish(fs)), Err(OfError::BAD_MULTIPART));
    let barrier = finish(header(OFP15, msg::BARRIER_REQUEST, 1));
    assert_eq!(downgrade(&barrier).unwrap()[0], OFP13);
    assert_eq!(
        upgrade(&finish(header(OFP13, msg::BARRIER_REPLY, 1)))[0],
        OFP15
    );
}

proptest::proptest! {
    #[test]
    fn any_bytes_convert_without_panicking(v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let _ = downgrade(&v);
        let _ = upgrade(&v);
    }

    #[test]
    fn altered_1_5_messages_convert_without_panicking(at in 0usize..80, byte in proptest::prelude::any::<u8>(), which in 0usize..3) {
        let mut f = match which {
            0 => flow_mod15(&[0, 29, 0, 8, 0, 0, 0, 7]),
            1 => group_mod15(0, GROUP_SELECT, &[0, 16, 0, 8, 0, 0, 0, 0, 0, 0, 0, 8, 0, 100, 0, 0]),
            _ => {
                let mut f = header(OFP15, msg::PACKET_OUT, 4);
                f.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
                f.extend_from_slice(&ofp_match(&[0x80, 0, 0, 4, 0, 0, 0, 1]));
                finish(f)
            }
        };
        if at < f.len() {
            f[at] = byte;
        }
        let _ = downgrade(&f);
        let _ = upgrade(&f);
    }
}

#[test]
fn what_sluice_writes_in_1_3_comes_back_the_same_through_1_5() {
    // meter:3, then apply-actions: load:5->NXM_NX_REG0[0..7], move
    // reg0->reg1, ct(exec(the same load)), then goto_table:5.
    let mut load2 = vec![0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 7, 0, 7];
    load2.extend_from_slice(&REG0);
    load2.extend_from_slice(&5u64.to_be_bytes());
    let mut mv = vec![0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 6, 0, 8, 0, 0, 0, 8];
    mv.extend_from_slice(&REG0);
    mv.extend_from_slice(&REG1);
    let mut ct = vec![0xff, 0xff, 0, 48, 0, 0, 0x23, 0x20, 0, 35, 0, 1];
    ct.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]);
    ct.extend_from_slice(&load2);
    let mut apply = vec![0, 4, 0, 0, 0, 0, 0, 0];
    apply.extend_from_slice(&load2);
    apply.extend_from_slice(&mv);
    apply.extend_from_slice(&ct);
    let n = apply.len() as u16;
    apply[2..4].copy_from_slice(&n.to_be_bytes());
    let mut ins = vec![0, 6, 0, 8, 0, 0, 0, 3];
    ins.extend_from_slice(&apply);
    ins.extend_from_slice(&[0, 1, 0, 8, 5, 0, 0, 0]);

    let mut up = Vec::new();
    instructions_up(&ins, &mut up).unwrap();
    assert_eq!(
        &up[..4],
        &[0, 4, 0, (up.len() - 8) as u8],
        "apply-actions first"
    );
    assert_eq!(
        &up[8..16],
        &[0, 29, 0, 8, 0, 0, 0, 3],
        "the meter heads them"
    );
    assert_eq!(&up[16..20], &[0, 25, 0, 16], "load: a masked set_field");
    assert_eq!(&up[32..36], &[0, 28, 0, 24], "move: copy_field");
    let mut back = Vec::new();
    instructions(&up, &mut back).unwrap();
    assert_eq!(back, ins);

    // NXAST_REG_LOAD2 of a masked reg0.
    let mut load2 = vec![
        0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 33, 0x00, 0x01, 0x01, 0x08,
    ];
    load2.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 0xff, 0, 0]);
    let mut up = Vec::new();
    actions_up(&load2, &mut up).unwrap();
    assert_eq!(up, [0, 25, 0, 16, 0, 1, 1, 8, 0, 0, 0, 5, 0, 0, 0, 0xff]);

    // NXAST_REG_LOAD: load:0x2->NXM_NX_REG0[4..7].
    let mut load = vec![0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 7, 1, 3];
    load.extend_from_slice(&REG0);
    load.extend_from_slice(&2u64.to_be_bytes());
    let mut up = Vec::new();
    actions_up(&load, &mut up).unwrap();
    assert_eq!(up, [0, 25, 0, 16, 0, 1, 1, 8, 0, 0, 0, 0x20, 0, 0, 0, 0xf0]);
}

#[test]
fn a_reply_that_grows_past_64_kib_is_split_in_parts() {
    // 1,000 flow statistics entries of 56 bytes: under 64 KiB in 1.3,
    // over it in 1.5's layout.
    let mut entry = vec![
        0, 56, 3, 0, 0, 0, 0, 2, 0, 0, 0, 5, 0, 100, 0, 10, 0, 20, 0, 1, 0, 0, 0, 0,
    ];
    entry.extend_from_slice(&[0; 24]);
    entry.extend_from_slice(&ofp_match(&[]));
    let mut reply = header(OFP13, msg::MULTIPART_REPLY, 2);
    reply.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    for _ in 0..1000 {
        reply.extend_from_slice(&entry);
    }
    let reply = finish(reply);
    let up = upgrade(&reply);
    let mut at = 0;
    let mut parts = Vec::new();
    while at < up.len() {
        let n = be16(&up, at + 2) as usize;
        assert!(n >= 16 && at + n <= up.len());
        assert_eq!(up[at], OFP15);
        parts.push(be16(&up, at + 10));
        at += n;
    }
    assert_eq!(parts, [1, 0], "REPLY_MORE, then the last");
}

/// Two `NXT_PACKET_IN2`s queued together (as the hub queues a burst of
/// packet-ins, OVN's `put_nd` then `nd_na_router` for one packet) reach
/// a 1.5 peer as two messages: upgraded one by one, each its own length.
#[test]
fn a_burst_of_packet_ins_upgrades_message_by_message() {
    use crate::async_msg::{packet_in, PinData, PinFormat};
    let fields = sluice_classifier::Match::default();
    let mut burst = Vec::new();
    for userdata in [&[1u8, 2][..], &[3, 4, 5]] {
        let p = PinData {
            reason: 1,
            table_id: 10,
            cookie: 7,
            in_port: 2,
            total_len: 60,
            data: &[0xab; 60],
            fields: &fields,
            userdata,
            continuation: None,
        };
        packet_in(OFP13, PinFormat::Nxt2, &p, &mut burst);
    }
    let mut out = Vec::new();
    for f in crate::msg::frames(&burst) {
        out.extend_from_slice(&upgrade(f));
    }
    let msgs: Vec<&[u8]> = crate::msg::frames(&out).collect();
    assert_eq!(msgs.len(), 2);
    for m in &msgs {
        assert_eq!(m[0], OFP15);
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
    }
    // What the writer did before: the whole burst as one message.
    let whole = upgrade(&burst);
    assert_eq!(crate::msg::frames(&whole).count(), 1);
}
