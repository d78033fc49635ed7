//! The connection tracking fields a `ct` action gives a packet for its
//! next pass: `ct_state` (the `CS_*` flags, written `+trk+est` as
//! `ovs-ofctl` writes them), `ct_zone`, `ct_mark`, `ct_label` and the
//! original direction's tuple (`ct_nw_src`, `ct_nw_dst`, `ct_ipv6_src`,
//! `ct_ipv6_dst`, `ct_nw_proto`, `ct_tp_src`, `ct_tp_dst`: a valid
//! connection's only). Rules match them; only a `ct` action writes them
//! (`ct_mark` and `ct_label` by its `exec(set_field:...)`).

use sluice_packet::key::{
    FlowKey, CS_DST_NAT, CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_REPLY_DIR, CS_SRC_NAT,
    CS_TRACKED,
};

use super::{Field, Prereq, ValueKind};

/// `ct_state`'s flags by name, in bit order (the order `ovs-ofctl`
/// prints them in).
pub const CT_STATE_NAMES: &[(&str, u8)] = &[
    ("new", CS_NEW),
    ("est", CS_ESTABLISHED),
    ("rel", CS_RELATED),
    ("rpl", CS_REPLY_DIR),
    ("inv", CS_INVALID),
    ("trk", CS_TRACKED),
    ("snat", CS_SRC_NAT),
    ("dnat", CS_DST_NAT),
];

/// `ct_state` as `ovs-ofctl` prints a match on it: `+flag` for each bit
/// the mask has and the value sets, `-flag` for those it clears; an
/// exact match as its flags joined by `|` (`new|trk`), or `0`.
pub fn format_ct_state(v: u128, m: u128) -> String {
    if m & 0xff == 0xff {
        let set: Vec<&str> = CT_STATE_NAMES
            .iter()
            .filter(|(_, b)| v & u128::from(*b) != 0)
            .map(|(n, _)| *n)
            .collect();
        return if set.is_empty() {
            "0".into()
        } else {
            set.join("|")
        };
    }
    CT_STATE_NAMES
        .iter()
        .filter(|(_, b)| m & u128::from(*b) != 0)
        .map(|(n, b)| format!("{}{n}", if v & u128::from(*b) != 0 { '+' } else { '-' }))
        .collect()
}

fn label(k: &FlowKey) -> u128 {
    u128::from(k.ct_label[1]) << 64 | u128::from(k.ct_label[0])
}

/// The connection tracking fields.
pub static CT_FIELDS: &[Field] = &[
    // 32 bits wide, as OVS's (moves and OpenFlow carry 32); the flags
    // are the low 8, the only ones a rule may name.
    Field {
        name: "ct_state",
        aliases: &[],
        kind: ValueKind::Int(32),
        maskable: true,
        prereq: Prereq::None,
        writable: false,
        get: |k| u128::from(k.ct_state),
        put: |k, v| k.ct_state = v as u8,
    },
    Field {
        name: "ct_zone",
        aliases: &[],
        kind: ValueKind::Int(16),
        maskable: false,
        prereq: Prereq::None,
        writable: false,
        get: |k| u128::from(k.ct_zone),
        put: |k, v| k.ct_zone = v as u16,
    },
    Field {
        name: "ct_mark",
        aliases: &[],
        kind: ValueKind::Int(32),
        maskable: true,
        prereq: Prereq::None,
        writable: false,
        get: |k| u128::from(k.ct_mark),
        put: |k, v| k.ct_mark = v as u32,
    },
    Field {
        name: "ct_label",
        aliases: &[],
        kind: ValueKind::Int(128),
        maskable: true,
        prereq: Prereq::None,
        writable: false,
        get: label,
        put: |k, v| k.ct_label = [v as u64, (v >> 64) as u64],
    },
    Field {
        name: "ct_nw_src",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::CtIpv4,
        writable: false,
        get: |k| u128::from(k.ct_nw_src),
        put: |k, v| k.ct_nw_src = v as u32,
    },
    Field {
        name: "ct_nw_dst",
        aliases: &[],
        kind: ValueKind::Ipv4,
        maskable: true,
        prereq: Prereq::CtIpv4,
        writable: false,
        get: |k| u128::from(k.ct_nw_dst),
        put: |k, v| k.ct_nw_dst = v as u32,
    },
    Field {
        name: "ct_ipv6_src",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::CtIpv6,
        writable: false,
        get: |k| u128::from_be_bytes(k.ct_ipv6_src),
        put: |k, v| k.ct_ipv6_src = v.to_be_bytes(),
    },
    Field {
        name: "ct_ipv6_dst",
        aliases: &[],
        kind: ValueKind::Ipv6,
        maskable: true,
        prereq: Prereq::CtIpv6,
        writable: false,
        get: |k| u128::from_be_bytes(k.ct_ipv6_dst),
        put: |k, v| k.ct_ipv6_dst = v.to_be_bytes(),
    },
    Field {
        name: "ct_nw_proto",
        aliases: &[],
        kind: ValueKind::Int(8),
        maskable: false,
        prereq: Prereq::Ct,
        writable: false,
        get: |k| u128::from(k.ct_nw_proto),
        put: |k, v| k.ct_nw_proto = v as u8,
    },
    // ICMP: the type and the code. OVS sends these only with a match on
    // ct_nw_proto (see the flow parser).
    Field {
        name: "ct_tp_src",
        aliases: &[],
        kind: ValueKind::Int(16),
        maskable: true,
        prereq: Prereq::Ct,
        writable: false,
        get: |k| u128::from(k.ct_tp_src),
        put: |k, v| k.ct_tp_src = v as u16,
    },
    Field {
        name: "ct_tp_dst",
        aliases: &[],
        kind: ValueKind::Int(16),
        maskable: true,
        prereq: Prereq::Ct,
        writable: false,
        get: |k| u128::from(k.ct_tp_dst),
        put: |k, v| k.ct_tp_dst = v as u16,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ct_state_prints_as_ovs_ofctl() {
        let (trk, new, est) = (CS_TRACKED as u128, CS_NEW as u128, CS_ESTABLISHED as u128);
        assert_eq!(format_ct_state(trk | new, trk | new), "+new+trk");
        assert_eq!(format_ct_state(trk | est, trk | new | est), "-new+est+trk");
        assert_eq!(format_ct_state(trk | new, 0xff), "new|trk");
        assert_eq!(format_ct_state(0, 0xff), "0");
        assert_eq!(format_ct_state(0, trk), "-trk");
    }
}
