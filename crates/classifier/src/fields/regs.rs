//! The registers: `reg0`..`reg15` (32 bits each), and the same bits as
//! `xreg0`..`xreg7` (64 bits: `xregN` is `reg(2N)` above `reg(2N+1)`) and
//! `xxreg0`..`xxreg3` (128 bits: `reg(4N)` highest), as Open vSwitch
//! names them. Pipeline state, never packet bytes: `set_field`, `load`
//! and `move` write them, rules match them, nothing is committed to the
//! packet (see [`sluice_packet::key::REG_WORDS`]).

use sluice_packet::key::FlowKey;

use super::{Field, Prereq, ValueKind};

fn get_n(k: &FlowKey, first: usize, n: usize) -> u128 {
    k.regs[first..first + n]
        .iter()
        .fold(0u128, |a, &r| (a << 32) | u128::from(r))
}

fn put_n(k: &mut FlowKey, first: usize, n: usize, v: u128) {
    for (i, r) in k.regs[first..first + n].iter_mut().enumerate() {
        *r = (v >> (32 * (n - 1 - i))) as u32;
    }
}

macro_rules! reg_field {
    ($name:literal, $bits:literal, $first:literal, $n:literal) => {
        Field {
            name: $name,
            aliases: &[],
            kind: ValueKind::Int($bits),
            maskable: true,
            prereq: Prereq::None,
            writable: true,
            get: |k| get_n(k, $first, $n),
            put: |k, v| put_n(k, $first, $n, v),
        }
    };
}

/// The register fields, in the order `ovs-ofctl` prints a match's
/// registers (it prints `xreg`/`xxreg` matches as the `reg`s they cover).
pub static REG_FIELDS: &[Field] = &[
    reg_field!("reg0", 32, 0, 1),
    reg_field!("reg1", 32, 1, 1),
    reg_field!("reg2", 32, 2, 1),
    reg_field!("reg3", 32, 3, 1),
    reg_field!("reg4", 32, 4, 1),
    reg_field!("reg5", 32, 5, 1),
    reg_field!("reg6", 32, 6, 1),
    reg_field!("reg7", 32, 7, 1),
    reg_field!("reg8", 32, 8, 1),
    reg_field!("reg9", 32, 9, 1),
    reg_field!("reg10", 32, 10, 1),
    reg_field!("reg11", 32, 11, 1),
    reg_field!("reg12", 32, 12, 1),
    reg_field!("reg13", 32, 13, 1),
    reg_field!("reg14", 32, 14, 1),
    reg_field!("reg15", 32, 15, 1),
    reg_field!("xreg0", 64, 0, 2),
    reg_field!("xreg1", 64, 2, 2),
    reg_field!("xreg2", 64, 4, 2),
    reg_field!("xreg3", 64, 6, 2),
    reg_field!("xreg4", 64, 8, 2),
    reg_field!("xreg5", 64, 10, 2),
    reg_field!("xreg6", 64, 12, 2),
    reg_field!("xreg7", 64, 14, 2),
    reg_field!("xxreg0", 128, 0, 4),
    reg_field!("xxreg1", 128, 4, 4),
    reg_field!("xxreg2", 128, 8, 4),
    reg_field!("xxreg3", 128, 12, 4),
];

/// The 32-bit registers alone (`reg0`..`reg15`), for printing matches.
pub fn regs32() -> &'static [Field] {
    &REG_FIELDS[..sluice_packet::key::N_REGS]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::field_by_name;

    #[test]
    fn wide_registers_are_the_narrow_ones_high_first() {
        let mut k = FlowKey::default();
        (field_by_name("xxreg1").unwrap().put)(&mut k, 0x1111_2222_3333_4444_5555_6666_7777_8888);
        assert_eq!(
            k.regs[4..8],
            [0x1111_2222, 0x3333_4444, 0x5555_6666, 0x7777_8888]
        );
        assert_eq!(
            (field_by_name("xreg3").unwrap().get)(&k),
            0x5555_6666_7777_8888
        );
        assert_eq!((field_by_name("reg6").unwrap().get)(&k), 0x5555_6666);
        (field_by_name("xreg2").unwrap().put)(&mut k, 1);
        assert_eq!(k.regs[4..8], [0, 1, 0x5555_6666, 0x7777_8888]);
    }
}
