//! `OFPMP_TABLE_FEATURES` replies (spec 7.3.5.5): what each table matches,
//! which instructions and actions it takes and which fields they set, as
//! Sluice really supports them.

use sluice_classifier::fields::field_by_name;

use crate::action::{at, it};
use crate::convert::matched_fields;
use crate::oxm::{basic_field, wire_of};
use crate::wire::{pad8, patch_u16, put_str};

/// Table feature property types (`ofp_table_feature_prop_type`).
mod prop {
    pub const INSTRUCTIONS: u16 = 0;
    pub const NEXT_TABLES: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const APPLY_SETFIELD: u16 = 14;
}

/// The actions `apply_actions` takes.
const APPLY: &[u16] = &[
    at::OUTPUT,
    at::COPY_TTL_OUT,
    at::COPY_TTL_IN,
    at::SET_MPLS_TTL,
    at::DEC_MPLS_TTL,
    at::PUSH_VLAN,
    at::POP_VLAN,
    at::PUSH_MPLS,
    at::POP_MPLS,
    at::GROUP,
    at::SET_NW_TTL,
    at::DEC_NW_TTL,
    at::SET_FIELD,
    at::PUSH_PBB,
    at::POP_PBB,
];

/// The action types Sluice takes (a bitmap by type, as GROUP_FEATURES
/// states them).
pub fn action_bitmap() -> u32 {
    APPLY.iter().fold(0, |m, &a| m | 1 << a)
}

fn property(out: &mut Vec<u8>, typ: u16, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    body(out);
    let len = out.len() - start;
    patch_u16(out, start + 2, len as u16);
    pad8(out, start);
}

fn oxm_header(out: &mut Vec<u8>, field: u8, masked: bool) {
    let (size, _) = basic_field(field).expect("a known field");
    let (class, wire) = wire_of(field);
    out.extend_from_slice(&class.to_be_bytes());
    out.push(wire << 1 | u8::from(masked));
    out.push((size * (1 + usize::from(masked))) as u8);
}

/// The `ofp_table_features` entry of table `t` of `n_tables`, each holding
/// up to `max_entries` rules; `spec_set_field`: set_field may also write
/// the fields Open vSwitch keeps read-only (`--set-field spec`).
pub fn table_features(t: u8, n_tables: u8, max_entries: u32, spec_set_field: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(1024);
    v.extend_from_slice(&[0, 0, t, 0, 0, 0, 0, 0]);
    put_str(&mut v, &format!("table{t}"), 32);
    v.extend_from_slice(&u64::MAX.to_be_bytes()); // metadata_match: every bit
    v.extend_from_slice(&u64::MAX.to_be_bytes()); // metadata_write: every bit
    v.extend_from_slice(&0u32.to_be_bytes()); // config
    v.extend_from_slice(&max_entries.to_be_bytes());
    let last = t + 1 >= n_tables;
    property(&mut v, prop::INSTRUCTIONS, |o| {
        let mut ids = vec![
            it::METER,
            it::APPLY_ACTIONS,
            it::WRITE_ACTIONS,
            it::CLEAR_ACTIONS,
            it::WRITE_METADATA,
        ];
        if !last {
            ids.push(it::GOTO_TABLE);
        }
        for i in ids {
            o.extend_from_slice(&i.to_be_bytes());
            o.extend_from_slice(&4u16.to_be_bytes());
        }
    });
    property(&mut v, prop::NEXT_TABLES, |o| {
        o.extend(t + 1..n_tables);
    });
    property(&mut v, prop::WRITE_ACTIONS, |o| {
        for a in APPLY {
            o.extend_from_slice(&a.to_be_bytes());
            o.extend_from_slice(&4u16.to_be_bytes());
        }
    });
    property(&mut v, prop::APPLY_ACTIONS, |o| {
        for a in APPLY {
            o.extend_from_slice(&a.to_be_bytes());
            o.extend_from_slice(&4u16.to_be_bytes());
        }
    });
    let fields = matched_fields();
    property(&mut v, prop::MATCH, |o| {
        for &(f, name) in &fields {
            let masked = basic_field(f).is_some_and(|(_, m)| m)
                && field_by_name(name).is_some_and(|fd| fd.maskable);
            oxm_header(o, f, masked);
        }
    });
    property(&mut v, prop::WILDCARDS, |o| {
        for &(f, _) in &fields {
            oxm_header(o, f, false);
        }
    });
    for p in [prop::WRITE_SETFIELD, prop::APPLY_SETFIELD] {
        property(&mut v, p, |o| {
            for &(f, name) in &fields {
                let settable = |fd: &sluice_classifier::fields::Field| {
                    fd.writable || spec_set_field && fd.spec_writable()
                };
                if field_by_name(name).is_some_and(settable) {
                    oxm_header(o, f, false);
                }
            }
        });
    }
    let len = v.len() as u16;
    patch_u16(&mut v, 0, len);
    v
}
