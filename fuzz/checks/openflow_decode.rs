//! Untrusted OpenFlow bytes as a connection reads them: framed, decoded,
//! each message that decodes encoded again and decoded to the same thing
//! (after one pass, which settles lossy names);
//! flow-mods, group-mods, meter-mods and packet-outs mapped onto the
//! classifier's rules, groups, meters and actions, Nicira TLV table mods
//! onto a TLV map (errors, never a panic);
//! every flow-mod frame also read as the channel reads them, through one
//! reader kept across the input's frames, with the same result; every
//! frame also through OpenFlow 1.4's bundle parser and conversions.

use sluice_openflow::convert::{flow_mod_op, to_action, FlowModReader};
use sluice_openflow::msg::to_bytes;
use sluice_openflow::{decode, frame_len, Message};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let mut at = 0;
    let mut reader = FlowModReader::default();
    while let Ok(Some(len)) = frame_len(&data[at..]) {
        if at + len > data.len() {
            break;
        }
        let frame = &data[at..at + len];
        at += len;
        // As a 1.4 connection reads it: a bundle message parsed, anything
        // else put in 1.3's layout (and what 1.3 writes put in 1.4's).
        let _ = sluice_openflow::of14::parse_bundle(frame);
        if let Ok(f) = sluice_openflow::of14::downgrade(frame) {
            let _ = decode(&f);
        }
        let _ = sluice_openflow::of14::upgrade(frame);
        if frame.get(1) == Some(&sluice_openflow::consts::msg::FLOW_MOD) {
            let read = reader.read(frame).map(|_| ()).and_then(|()| reader.op(254));
            let fresh = match decode(frame) {
                Ok((_, Message::FlowMod(fm))) => flow_mod_op(&fm, 254),
                Ok(_) => Err(sluice_openflow::OfError::BAD_TYPE),
                Err((_, e)) => Err(e),
            };
            assert_eq!(format!("{read:?}"), format!("{fresh:?}"));
        }
        let Ok((h, m)) = decode(frame) else { continue };
        // Encoding then decoding gives the message back, once what the
        // wire cannot hold twice is settled (a name that is not UTF-8 is
        // read lossily; past 65,535 bytes a message is cut).
        let again = to_bytes(&m, h.xid);
        if again.len() < 65535 {
            let (_, m1) = decode(&again).expect("what was encoded decodes");
            let twice = to_bytes(&m1, h.xid);
            if twice.len() < 65535 {
                let (_, m2) = decode(&twice).expect("what was encoded decodes");
                assert_eq!(m2, m1);
            }
        }
        match &m {
            Message::FlowMod(fm) => {
                let _ = flow_mod_op(fm, 254);
            }
            Message::PacketOut(po) => {
                let any = sluice_classifier::Match::catch_all();
                for a in &po.actions {
                    let _ = to_action(a, &any);
                }
            }
            Message::Other { typ: 15, body } => {
                if let Ok(gm) = sluice_openflow::group::decode_group_mod(body) {
                    // What decodes encodes to the same buckets.
                    let again = sluice_openflow::group::encode_group_mod(&gm);
                    let back = sluice_openflow::group::decode_group_mod(&again).expect("decodes");
                    assert_eq!(back.buckets, gm.buckets);
                    if let Ok(g) = sluice_openflow::convert::to_group(&gm, 0) {
                        let mut rules = sluice_classifier::RuleSet::new();
                        let _ = rules.add_group(g);
                    }
                }
            }
            Message::Other { typ: 29, body } => {
                if let Ok(mm) = sluice_openflow::meter::decode_meter_mod(body) {
                    let again = sluice_openflow::meter::encode_meter_mod(&mm);
                    let back = sluice_openflow::meter::decode_meter_mod(&again).expect("decodes");
                    assert_eq!(back, mm);
                    if let Ok(m) = sluice_openflow::convert::to_meter(&mm, 0) {
                        let mut rules = sluice_classifier::RuleSet::new();
                        let _ = rules.add_meter(m);
                    }
                }
            }
            Message::Other { typ: 4, body } => {
                // A connection-tracker flush decodes or is refused, and
                // what it names the tracker takes.
                if body.len() >= 8
                    && body[4..8] == sluice_openflow::ct_flush::NXT_CT_FLUSH.to_be_bytes()
                {
                    if let Ok(f) = sluice_openflow::ct_flush::decode(&body[8..]) {
                        let ct = sluice_conntrack::Conntrack::default();
                        assert_eq!(ct.flush_matching(f.zone, &f.matching), 0);
                    }
                }
                // Nicira experimenter messages: a TLV table mod's mappings
                // go into a TLV map (refused or taken, never a panic).
                if let Ok(sluice_openflow::nx::NxMessage::TlvTableMod { maps, .. }) =
                    sluice_openflow::nx::decode(body)
                {
                    let mut map = sluice_packet::tunnel::TlvMap::default();
                    for m in maps {
                        if let Ok(e) =
                            sluice_packet::tunnel::TlvEntry::new(m.class, m.ty, m.len, m.index)
                        {
                            let _ = map.add(&[e]);
                        }
                    }
                    assert!(map.entries().len() <= sluice_packet::tunnel::tlv::SLOTS);
                }
            }
            _ => {}
        }
    }
}
