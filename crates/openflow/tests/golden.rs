//! Golden bytes: OpenFlow 1.3 messages as `ovs-ofctl -O OpenFlow13` (Open
//! vSwitch 3.1) sent them to a running Sluice (captured with tcpdump on
//! 2026-11-25), decoded to what they mean and encoded back to the same
//! bytes.

use sluice_openflow::action::{Instruction, OfAction};
use sluice_openflow::consts::port;
use sluice_openflow::convert::{flow_mod_op, FlowModOp};
use sluice_openflow::multipart::MpRequest;
use sluice_openflow::oxm::f;
use sluice_openflow::{decode, Message};

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn round_trip(hex: &str) -> Message {
    let b = bytes(hex);
    let (h, m) = decode(&b).expect("ovs-ofctl's bytes decode");
    assert_eq!(
        sluice_openflow::msg::to_bytes(&m, h.xid),
        b,
        "encoded back to the same bytes"
    );
    m
}

const FLOW_MOD_ADD: &str = "040e00880000000600000000000000000000000000000000000000000000012cffffffffffffffffffffffff000000000001002180000a020800800017080a010000ffff0000800014010680001c0201bb00000000000000000400300000000000190010800018040a00000900000000001800080000000000000010000000030000000000000000";
const PACKET_OUT: &str = "040d005200000006fffffffffffffffd001000000000000000000010fffffff90000000000000000ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";
const FLOW_MOD_DEL: &str = "040e00580000000600000000000000000000000000000000ff0400000000012cffffffffffffffffffffffff000000000001002180000a020800800017080a010000ffff0000800014010680001c0201bb00000000000000";
const PORT_MOD: &str =
    "04100028000000040000000300000000000000000000000000000020000000200000000000000000";
const FLOW_STATS_REQUEST: &str = "04120040000000060001000000000000ff000000ffffffffffffffff00000000000000000000000000000000000000000001000a80000a020800000000000000";

#[test]
fn add_flow_with_a_prefix_a_port_and_three_actions() {
    // priority=300,tcp,nw_src=10.1.0.0/16,tp_dst=443,
    //   actions=set_field:10.0.0.9->ip_dst,dec_ttl,output:3
    let Message::FlowMod(fm) = round_trip(FLOW_MOD_ADD) else {
        panic!("a flow-mod")
    };
    assert_eq!((fm.command, fm.priority, fm.table_id), (0, 300, 0));
    let fields: Vec<u8> = fm.oxms.iter().map(|o| o.field).collect();
    assert_eq!(fields, [f::ETH_TYPE, f::IPV4_SRC, f::IP_PROTO, f::TCP_DST]);
    assert_eq!(fm.oxms[1].mask, Some(0xffff_0000));
    let Instruction::ApplyActions(acts) = &fm.instructions[0] else {
        panic!("apply-actions")
    };
    assert!(matches!(
        acts[..],
        [
            OfAction::SetField(_),
            OfAction::DecNwTtl,
            OfAction::Output { port: 3, .. }
        ]
    ));
    let Ok(FlowModOp::Add(spec)) = flow_mod_op(&fm, 254) else {
        panic!("an add")
    };
    assert_eq!(
        format!(
            "{} {}",
            spec.matcher,
            sluice_classifier::action::format_actions(&spec.actions)
        ),
        "tcp,nw_src=10.1.0.0/16,tp_dst=443 set_field:10.0.0.9->nw_dst,dec_ttl,output:3"
    );
}

#[test]
fn delete_strict() {
    let Message::FlowMod(fm) = round_trip(FLOW_MOD_DEL) else {
        panic!("a flow-mod")
    };
    assert_eq!((fm.command, fm.priority, fm.table_id), (4, 300, 0xff));
    assert!(matches!(
        flow_mod_op(&fm, 254),
        Ok(FlowModOp::Delete {
            all_tables: true,
            ..
        })
    ));
}

#[test]
fn packet_out_through_the_tables() {
    let Message::PacketOut(po) = round_trip(PACKET_OUT) else {
        panic!("a packet-out")
    };
    assert_eq!((po.buffer_id, po.in_port), (u32::MAX, port::CONTROLLER));
    assert!(matches!(
        po.actions[..],
        [OfAction::Output {
            port: port::TABLE,
            ..
        }]
    ));
    assert_eq!(po.data.len(), 42);
}

#[test]
fn mod_port_no_forward() {
    let Message::PortMod(pm) = round_trip(PORT_MOD) else {
        panic!("a port-mod")
    };
    assert_eq!((pm.port_no, pm.config, pm.mask), (3, 0x20, 0x20));
}

#[test]
fn dump_flows_ip() {
    let Message::MultipartRequest {
        body: MpRequest::Flow(q),
        ..
    } = round_trip(FLOW_STATS_REQUEST)
    else {
        panic!("a flow stats request")
    };
    assert_eq!((q.table_id, q.out_port), (0xff, port::ANY));
    assert_eq!(q.oxms.len(), 1);
}
