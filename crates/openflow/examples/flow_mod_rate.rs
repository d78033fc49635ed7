//! Flow-mod decoding cost: `cargo run --release -p sluice-openflow
//! --example flow_mod_rate -- [N]` decodes N OpenFlow 1.3 ADD flow-mods (a
//! host route `ip,nw_dst=10.x.y.z`, apply-actions output:2, as
//! `bench/openflow-compare` sends them) and converts each to the
//! classifier's flow spec, and prints the time per message of each step
//! (all decoded, then all converted) and of both one message at a time (as
//! the OpenFlow channel does, instructions shared from one to the next);
//! then of all the channel does with a burst but read the socket and wait
//! for the PMDs: decode, convert and add each to a rule set, a new version
//! (a clone, as a publication makes, the one before dropped) every
//! `[VERSION]` messages (default 10,000).
use sluice_classifier::table::RuleSet;
use sluice_openflow::convert::{flow_mod_op, FlowModOp, FlowModReader};
use sluice_openflow::msg::{decode, Message};
use std::time::Instant;

fn flow_mod(i: u32) -> Vec<u8> {
    let mut oxm = vec![0x80, 0x00, 5 << 1, 2, 0x08, 0x00];
    oxm.extend([0x80, 0x00, 12 << 1, 4]);
    oxm.extend((0x0A00_0000 | i).to_be_bytes());
    let mut m = vec![0, 1];
    m.extend((4 + oxm.len() as u16).to_be_bytes());
    m.extend(oxm);
    m.resize(m.len().div_ceil(8) * 8, 0);
    // apply-actions { output:2 max_len 0 }
    let inst = [
        0, 4, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mut body = vec![0u8; 16]; // cookie, cookie_mask
    body.extend([0, 0]); // table, ADD
    body.extend([0, 0, 0, 0]); // idle, hard
    body.extend(100u16.to_be_bytes());
    body.extend([0xff; 12]); // buffer_id, out_port, out_group
    body.extend([0, 0, 0, 0]); // flags, pad
    body.extend(m);
    body.extend(inst);
    let mut msg = vec![4, 14];
    msg.extend((8 + body.len() as u16).to_be_bytes());
    msg.extend((i + 1).to_be_bytes());
    msg.extend(body);
    msg
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let every: usize = args.next().map_or(10_000, |a| a.parse().expect("VERSION"));
    let msgs: Vec<Vec<u8>> = (0..n).map(flow_mod).collect();
    for _ in 0..3 {
        let t = Instant::now();
        let decoded: Vec<_> = msgs
            .iter()
            .map(|m| match decode(m) {
                Ok((_, Message::FlowMod(fm))) => fm,
                other => panic!("not a flow-mod: {other:?}"),
            })
            .collect();
        let t_decode = t.elapsed();
        let t = Instant::now();
        let ops: Vec<_> = decoded
            .iter()
            .map(|fm| flow_mod_op(fm, 254).expect("a valid flow-mod"))
            .collect();
        let t_convert = t.elapsed();
        let t = Instant::now();
        let mut reader = FlowModReader::default();
        for m in &msgs {
            reader.read(m).expect("a flow-mod");
            std::hint::black_box(reader.op(254).expect("a valid flow-mod"));
        }
        let t_both = t.elapsed();
        let t = Instant::now();
        let mut reader = FlowModReader::default();
        let mut set = RuleSet::new();
        let mut published = set.clone();
        for (i, m) in msgs.iter().enumerate() {
            reader.read(m).expect("a flow-mod");
            let Ok(FlowModOp::Add(spec)) = reader.op(254) else {
                panic!("not an add")
            };
            set.add_owned(spec, 0);
            if (i + 1) % every == 0 {
                published = set.clone();
            }
        }
        let t_all = t.elapsed();
        assert_eq!(set.len(), msgs.len());
        drop(published);
        let per = |d: std::time::Duration| d.as_nanos() as f64 / f64::from(n);
        println!(
            "{n} flow-mods: decode {:.0} ns, to a flow spec {:.0} ns per message ({} ops); \
             both, one message at a time: {:.0} ns; and added, a version every {every}: {:.0} ns",
            per(t_decode),
            per(t_convert),
            ops.len(),
            per(t_both),
            per(t_all)
        );
    }
}
