//! NXM: Nicira's match of type-length-values, as `NXT_FLOW_MOD` and the
//! `NXST_FLOW` statistics carry it in OpenFlow 1.0. Each entry is a 32-bit
//! header (class, field, has-mask, length) naming a field by its `NXM_OF_*`,
//! `NXM_NX_*` or `OXM_OF_*` number ([`crate::nxm::field_of_header`]), then
//! the value and the mask. `NXM_NX_COOKIE` is not a field: it selects
//! rules by cookie.
//!
//! Read as Open vSwitch's `nx_pull_match` does: each field at most once,
//! its prerequisites matched by the entries before it. Written in an order
//! that puts prerequisites first, with the `NXM_*` header where the field
//! has one (what `ovs-ofctl` sends in 1.0).

use sluice_classifier::fields::{field_by_name, Field, Prereq, IN_PORT16};
use sluice_classifier::Match;
use sluice_packet::FlowKey;

use crate::consts::OfError;
use crate::nxm::field_of_header;
use crate::wire::{be_uint, put_uint, Rd};

/// `NXM_NX_COOKIE` (class 1, field 30, 8 bytes).
const COOKIE: u32 = 0x0001_3c08;

/// A header's parts: class and field (the mask bit cleared), has-mask,
/// the payload length.
fn split(h: u32) -> (u32, bool, usize) {
    (h & 0xffff_fe00, h & 0x100 != 0, (h & 0xff) as usize)
}

/// The prerequisite an NXM field has in Open vSwitch (the classifier's
/// own is wider for a few fields that double: `nw_src` is also ARP's).
fn prereq(f: &Field) -> Prereq {
    match f.name {
        "nw_src" | "nw_dst" => Prereq::Ipv4,
        "nw_proto" | "nw_tos" | "ip_dscp" => Prereq::Ip,
        "icmp_type" | "icmp_code" => Prereq::Icmp4,
        _ => f.prereq,
    }
}

/// Reads `len` bytes of NXM: the match, and the cookie and its mask
/// (`NXM_NX_COOKIE`; 0 and 0 without it).
pub fn decode(b: &[u8]) -> Result<(Match, u64, u64), OfError> {
    let mut r = Rd::new(b, OfError::BAD_MATCH_LEN);
    let mut m = Match::catch_all();
    let (mut cookie, mut cookie_mask) = (0u64, 0u64);
    let mut seen: Vec<u32> = Vec::new();
    while r.left() > 0 {
        let h = r.u32()?;
        if h >> 16 == u32::from(crate::oxm::OXM_EXPERIMENTER) {
            // An experimenter's field: its id, then the value. Only ONF's
            // actset_output (32 bits, no mask), as Open vSwitch sends it.
            let want = u32::from(crate::oxm::ONF_ACTSET_OUTPUT) << 9 | 8;
            if h & 0xffff != want || r.u32()? != crate::oxm::ONF_EXPERIMENTER {
                return Err(OfError::BAD_FIELD);
            }
            let f = field_by_name("actset_output").expect("actset_output");
            if seen.contains(&h) {
                return Err(OfError::DUP_FIELD);
            }
            seen.push(h);
            m.set(f, u128::from(r.u32()?), f.full_mask());
            continue;
        }
        let (id, masked, len) = split(h);
        let size = if masked { len / 2 } else { len };
        if len == 0 || (masked && len % 2 != 0) {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let body = r.take(len)?;
        let value = be_uint(&body[..size.min(16)]);
        let mask = if masked {
            be_uint(&body[size..size + size.min(16)])
        } else {
            u128::MAX
        };
        if seen.contains(&id) {
            return Err(OfError::DUP_FIELD);
        }
        seen.push(id);
        if id | 8 == COOKIE && size == 8 {
            cookie_mask = mask as u64;
            cookie = value as u64 & cookie_mask;
            continue;
        }
        let f = field_of_header(id | size as u32).ok_or(OfError::BAD_FIELD)?;
        if size > 16 {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let full = f.full_mask();
        if value & mask & !full != 0 {
            return Err(OfError::BAD_VALUE);
        }
        if masked && (!f.maskable || mask & !full != 0) {
            return Err(OfError::BAD_MASK);
        }
        if !prereq(f).holds(&m.value, &m.mask) {
            return Err(OfError::BAD_PREREQ);
        }
        m.set(f, value & mask, mask & full);
    }
    Ok((m, cookie, cookie_mask))
}

/// The fields a match is written as, in this order: the pipeline's, then
/// Ethernet's, then each layer after what it needs. (`in_port` is
/// written by hand: 16 bits when the port has a 16-bit number.)
const ORDER: &[&str] = &[
    "metadata",
    "tun_id",
    "tun_src",
    "tun_dst",
    "tun_ipv6_src",
    "tun_ipv6_dst",
    "tun_flags",
    "pkt_mark",
    "conj_id",
    "ct_state",
    "ct_zone",
    "ct_mark",
    "ct_label",
    "ct_nw_proto",
    "ct_nw_src",
    "ct_nw_dst",
    "ct_ipv6_src",
    "ct_ipv6_dst",
    "ct_tp_src",
    "ct_tp_dst",
    "reg0",
    "reg1",
    "reg2",
    "reg3",
    "reg4",
    "reg5",
    "reg6",
    "reg7",
    "reg8",
    "reg9",
    "reg10",
    "reg11",
    "reg12",
    "reg13",
    "reg14",
    "reg15",
    "dl_src",
    "dl_dst",
    "vlan_tci",
    "dl_type",
    "mpls_label",
    "mpls_tc",
    "mpls_bos",
    "mpls_ttl",
    "pbb_isid",
    "nw_proto",
    "nw_tos",
    "ip_ecn",
    "nw_ttl",
    "nw_frag",
    "nw_src",
    "nw_dst",
    "ipv6_src",
    "ipv6_dst",
    "ipv6_label",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "tcp_src",
    "tcp_dst",
    "tcp_flags",
    "udp_src",
    "udp_dst",
    "sctp_src",
    "sctp_dst",
    "icmp_type",
    "icmp_code",
    "icmpv6_type",
    "icmpv6_code",
    "nd_target",
    "nd_sll",
    "nd_tll",
];

fn put(out: &mut Vec<u8>, header: u32, size: usize, v: u128, mk: u128, full: u128) {
    let masked = mk != full;
    let len = if masked { 2 * size } else { size };
    out.extend_from_slice(
        &(header & 0xffff_fe00 | u32::from(masked) << 8 | len as u32).to_be_bytes(),
    );
    put_uint(out, v, size);
    if masked {
        put_uint(out, mk, size);
    }
}

/// Appends `m` (and a cookie selection, when the mask is not zero) as NXM
/// entries; returns their length (before any padding).
pub fn encode(m: &Match, cookie: u64, cookie_mask: u64, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let all = FlowKey::all_ones();
    let (p, pm) = m.get(field_by_name("in_port").expect("in_port"));
    if pm != 0 {
        if (p as u32) < 0xff00 || p as u32 >= 0xffff_ff00 {
            let p16 = (IN_PORT16.get)(&m.value);
            put(out, 0x0000_0002, 2, p16, 0xffff, 0xffff);
        } else {
            put(out, 0x8000_0004, 4, p, pm, pm);
        }
    }
    let (a, am) = m.get(field_by_name("actset_output").expect("actset_output"));
    if am != 0 {
        // ONF's experimenter field: header, experimenter, value.
        let h = u32::from(crate::oxm::OXM_EXPERIMENTER) << 16
            | u32::from(crate::oxm::ONF_ACTSET_OUTPUT) << 9
            | 8;
        out.extend_from_slice(&h.to_be_bytes());
        out.extend_from_slice(&crate::oxm::ONF_EXPERIMENTER.to_be_bytes());
        out.extend_from_slice(&(a as u32).to_be_bytes());
    }
    if cookie_mask != 0 {
        let full = u128::from(u64::MAX);
        put(
            out,
            COOKIE,
            8,
            u128::from(cookie & cookie_mask),
            u128::from(cookie_mask),
            full,
        );
    }
    for name in ORDER {
        let f = field_by_name(name).expect("a classifier field");
        let (v, mk) = m.get(f);
        if mk == 0 || !prereq(f).holds(&m.value, &m.mask) {
            continue;
        }
        let Some(h) = crate::nxm::header_of(f) else {
            continue;
        };
        let size = (h & 0xff) as usize;
        // The bits the field has in a key: all of them is no mask.
        let full = (f.get)(&all);
        put(out, h, size, v, mk, full);
    }
    out.len() - start
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse::Require;
    use sluice_classifier::parse_flow;

    fn rule(s: &str) -> Match {
        parse_flow(s, Require::NoActions).unwrap().matcher
    }

    #[test]
    fn round_trips() {
        for s in [
            "",
            "in_port=3,reg0=5/0xff,pkt_mark=7",
            "tcp,nw_src=10.0.0.0/8,tp_dst=80,tcp_flags=+syn",
            "udp6,ipv6_src=fd00::/64,udp_dst=53",
            "dl_vlan=5,dl_vlan_pcp=3,arp,arp_op=2,arp_sha=00:00:00:00:00:01",
            "icmp6,icmp_type=135,nd_target=fd00::1",
            "ip,nw_ttl=3,nw_frag=later,ip_ecn=1,nw_tos=16",
            "mpls,mpls_label=5,metadata=0x10/0xf0",
            "ct_state=+trk+est,ct_zone=3,tcp",
            "in_port=65280",
        ] {
            let m = rule(s);
            let mut b = Vec::new();
            encode(&m, 0, 0, &mut b);
            assert_eq!(decode(&b).unwrap(), (m, 0, 0), "{s}");
        }
    }

    #[test]
    fn cookie_selection_and_errors() {
        let mut b = Vec::new();
        encode(&rule("ip"), 0x50, 0xf0, &mut b);
        assert_eq!(decode(&b).unwrap(), (rule("ip"), 0x50, 0xf0));
        // NXM_OF_IP_SRC before NXM_OF_ETH_TYPE: the prerequisite is not
        // matched yet.
        let mut bad = vec![0, 0, 14, 4, 10, 0, 0, 1];
        bad.extend_from_slice(&[0, 0, 6, 2, 8, 0]);
        assert_eq!(decode(&bad), Err(OfError::BAD_PREREQ));
        // The same field twice.
        assert_eq!(
            decode(&[0, 0, 6, 2, 8, 0, 0, 0, 6, 2, 8, 0]),
            Err(OfError::DUP_FIELD)
        );
        // A field Sluice does not know, and a short entry.
        assert_eq!(decode(&[0, 0x7f, 0, 2, 0, 0]), Err(OfError::BAD_FIELD));
        assert_eq!(decode(&[0, 0, 6, 2, 8]), Err(OfError::BAD_MATCH_LEN));
    }
}
