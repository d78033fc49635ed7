//! Translation of `load`, `move`, masked `set_field` and the registers.

use super::*;
use crate::parse::parse_flow_file;
use sluice_packet::key::N_REGS;
use sluice_packet::rewrite::FragRewrites;

use super::tests::{run, set};

fn tcp_key() -> FlowKey {
    FlowKey {
        dl_src: [2, 0, 0, 0, 0, 1],
        dl_dst: [2, 0, 0, 0, 0, 2],
        ..super::tests::tcp_key()
    }
}

#[test]
fn registers_carry_state_between_tables_and_stay_out_of_the_megaflow() {
    let r = set("table=0,in_port=1,actions=load:0x5->NXM_NX_REG0[0..15],set_field:0x7->reg1,load:1->xreg1[63],resubmit(,1)\n\
                 table=1,reg0=0x5,reg1=0x7/0xff,reg2=0x80000000,actions=output:2\n\
                 table=1,priority=1,actions=output:3\n");
    let t = run(&r, &tcp_key());
    assert_eq!(t.actions, vec![DpAction::Output(2)], "{:?}", t.trace);
    assert_eq!(t.final_flow.regs[..3], [5, 7, 0x8000_0000]);
    assert_eq!(t.wc.regs, [0; N_REGS], "registers are never in a megaflow");
    assert_eq!(t.wc.in_port, u32::MAX);
    // Another value leads elsewhere.
    let r = set(
        "table=0,actions=load:0x6->NXM_NX_REG0[0..15],resubmit(,1)\n\
                 table=1,reg0=0x5,actions=output:2\ntable=1,priority=1,actions=output:3\n",
    );
    assert_eq!(run(&r, &tcp_key()).actions, vec![DpAction::Output(3)]);
}

#[test]
fn move_copies_header_bits_and_reads_its_source() {
    // The ARP-responder idiom: the source MAC becomes the destination.
    let r = set("tcp,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],move:NXM_OF_IP_SRC[]->NXM_NX_REG3[],move:reg3[0..7]->tcp_dst[0..7],output:2\n");
    let t = run(&r, &tcp_key());
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetEthDst([2, 0, 0, 0, 0, 1]),
            DpAction::SetTpDst(1),
            DpAction::Output(2)
        ],
        "{:?}",
        t.trace
    );
    assert_eq!(t.wc.dl_src, [0xff; 6], "the copy depends on the source");
    assert_eq!(t.wc.nw_src, u32::MAX, "read through a register");
    // tcp_dst keeps its high byte from the packet: the megaflow holds it.
    assert_eq!(t.wc.tp_dst, 0xff00);
    assert_eq!(t.final_flow.tp_dst, 1);
}

#[test]
fn partial_loads_keep_the_packets_other_bits() {
    let r = set("ip,actions=load:0x63->NXM_OF_IP_DST[0..7],load:2->NXM_OF_IP_TOS[2..3],output:2\n");
    let mut k = tcp_key();
    k.nw_tos = 0x21;
    let t = run(&r, &k);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0a00_0063, FragRewrites::Ovs),
            DpAction::SetIpTos {
                tos: 0x08,
                mask: 0x0c
            },
            DpAction::Output(2)
        ]
    );
    assert_eq!(t.wc.nw_dst, 0xffff_ff00, "the kept bits");
    assert_eq!(t.wc.nw_tos, 0, "a masked TOS set needs none");
}

#[test]
fn registers_survive_a_recirculation() {
    let r = set(
        "table=0,mpls,actions=load:0x2a->NXM_NX_REG5[],pop_mpls:0x0800,resubmit(,1)\n\
                 table=1,ip,reg5=0x2a,actions=output:2\ntable=1,priority=1,actions=output:3\n",
    );
    let mpls = FlowKey {
        in_port: 1,
        dl_type: 0x8847,
        ipv6_label: (100 << 12) | (1 << 8) | 64,
        ..Default::default()
    };
    let t = run(&r, &mpls);
    let Some(&DpAction::Recirc(id)) = t.actions.last() else {
        panic!("{:?}", t.actions)
    };
    let again = FlowKey {
        recirc_id: id,
        ..tcp_key()
    };
    let t = run(&r, &again);
    assert_eq!(t.actions, vec![DpAction::Output(2)], "{:?}", t.trace);
}

#[test]
fn loads_print_as_ovs_ofctl_shows_them() {
    for (line, shown) in [
        (
            "actions=load:0x5->NXM_NX_REG0[0..15],load:0->reg1",
            "load:0x5->NXM_NX_REG0[0..15],load:0->NXM_NX_REG1[]",
        ),
        (
            "actions=set_field:0x10/0x101->reg2",
            "load:0->NXM_NX_REG2[0],load:0->NXM_NX_REG2[8]",
        ),
        ("actions=set_field:0x7->reg1", "set_field:0x7->reg1"),
        (
            "actions=load:0->NXM_NX_XXREG0[]",
            "load:0->NXM_NX_XXREG0[0..63],load:0->NXM_NX_XXREG0[64..127]",
        ),
        (
            "actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG4[]",
            "move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG4[]",
        ),
        (
            "actions=load:5->OXM_OF_METADATA[0..7]",
            "load:0x5->OXM_OF_METADATA[0..7]",
        ),
    ] {
        let specs = parse_flow_file(line, None).unwrap();
        assert_eq!(
            crate::action::format_actions(&specs[0].actions),
            shown,
            "{line}"
        );
    }
}

#[test]
fn bad_loads_and_moves_are_refused_with_a_reason() {
    for (line, says) in [
        ("actions=load:0x10000->NXM_NX_REG0[0..15]", "too large"),
        ("actions=load:1->NXM_NX_REG0[32]", "out of range"),
        ("actions=load:1->NXM_NX_REG16[]", "unknown field"),
        (
            "actions=move:NXM_OF_ETH_SRC[]->NXM_NX_REG0[]",
            "48 bits wide but destination",
        ),
        (
            "actions=move:NXM_NX_REG0[0..15]->NXM_OF_TCP_DST[]",
            "requires the rule to match",
        ),
        (
            "actions=move:NXM_OF_TCP_SRC[]->NXM_NX_REG0[0..15]",
            "requires the rule to match",
        ),
        ("actions=load:1->NXM_OF_VLAN_TCI[]", "mod_vlan_vid"),
        ("actions=load:1->NXM_NX_TCP_FLAGS[]", "cannot be written"),
        ("actions=load:1", "VALUE->FIELD"),
        (
            "actions=write_actions(load:1->reg0[])",
            "cannot be in an action set",
        ),
    ] {
        let e = parse_flow_file(line, None).unwrap_err().to_string();
        assert!(e.contains(says), "{line}: {e}");
    }
}
