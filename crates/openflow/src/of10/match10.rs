//! `ofp10_match`: OpenFlow 1.0's fixed 40-byte match with its wildcard
//! bits, read into the classifier's [`Match`] and written back from one.
//!
//! As Open vSwitch reads it (`ofputil_match_from_ofp10_match` and
//! `ofputil_normalize_match`): `dl_vlan` 0xffff is "no tag"; `nw_tos` is
//! the DSCP bits; `tp_src`/`tp_dst` are ICMP's type and code under ICMP;
//! `nw_src`/`nw_dst` and `nw_proto` are ARP's addresses and opcode under
//! ARP; a field whose prerequisite the match lacks is dropped, not
//! refused (1.0 says such fields are ignored).

use sluice_classifier::fields::{field_by_name, Field, Prereq};
use sluice_classifier::Match;

use super::{port16, port32};
use crate::consts::OfError;

/// The wildcard bits (`OFPFW10_*`).
pub mod fw {
    #![allow(missing_docs)]
    pub const IN_PORT: u32 = 1 << 0;
    pub const DL_VLAN: u32 = 1 << 1;
    pub const DL_SRC: u32 = 1 << 2;
    pub const DL_DST: u32 = 1 << 3;
    pub const DL_TYPE: u32 = 1 << 4;
    pub const NW_PROTO: u32 = 1 << 5;
    pub const TP_SRC: u32 = 1 << 6;
    pub const TP_DST: u32 = 1 << 7;
    pub const NW_SRC_SHIFT: u32 = 8;
    pub const NW_DST_SHIFT: u32 = 14;
    pub const DL_VLAN_PCP: u32 = 1 << 20;
    pub const NW_TOS: u32 = 1 << 21;
    pub const ALL: u32 = (1 << 22) - 1;
}

/// `OFP_VLAN_NONE`: the packet has no tag.
const VLAN_NONE: u16 = 0xffff;
/// The bytes of an `ofp10_match`.
pub const LEN: usize = 40;

fn fd(name: &str) -> &'static Field {
    field_by_name(name).expect("a classifier field")
}

/// A prefix mask of `32 - wild` bits (all wild from 32 up).
fn prefix(wild: u32) -> u128 {
    if wild >= 32 {
        0
    } else {
        u128::from(u32::MAX << wild)
    }
}

/// Reads an `ofp10_match`.
pub fn decode(b: &[u8; LEN]) -> Result<Match, OfError> {
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let mac = |at: usize| crate::wire::be_uint(&b[at..at + 6]);
    let w = be32(0);
    let mut m = Match::catch_all();
    if w & fw::IN_PORT == 0 {
        m.set(fd("in_port"), u128::from(port32(be16(4))), u128::MAX);
    }
    if w & fw::DL_SRC == 0 {
        m.set(fd("dl_src"), mac(6), u128::MAX);
    }
    if w & fw::DL_DST == 0 {
        m.set(fd("dl_dst"), mac(12), u128::MAX);
    }
    // The TCI: VLAN_NONE is no tag (the PCP then says nothing).
    let (vid, pcp) = (be16(18), b[20]);
    let (mut tci, mut tci_mask) = (0u16, 0u16);
    if w & fw::DL_VLAN == 0 {
        if vid == VLAN_NONE {
            tci_mask = 0xffff;
        } else {
            tci = vid & 0x0fff | 0x1000;
            tci_mask = 0x1fff;
        }
    }
    if w & fw::DL_VLAN_PCP == 0 && tci_mask != 0xffff {
        tci |= u16::from(pcp & 7) << 13 | 0x1000;
        tci_mask |= 0xf000;
    }
    if tci_mask != 0 {
        m.set(fd("vlan_tci"), u128::from(tci), u128::from(tci_mask));
    }
    if w & fw::DL_TYPE == 0 {
        m.set(fd("dl_type"), u128::from(be16(22)), u128::MAX);
    }
    let ip = Prereq::Ipv4.holds(&m.value, &m.mask);
    let arp = Prereq::Arp.holds(&m.value, &m.mask);
    if w & fw::NW_TOS == 0 && ip {
        m.set(fd("nw_tos"), u128::from(b[24] & 0xfc), u128::MAX);
    }
    if w & fw::NW_PROTO == 0 && (ip || arp) {
        m.set(fd("nw_proto"), u128::from(b[25]), u128::MAX);
    }
    if ip || arp {
        let src = prefix(w >> fw::NW_SRC_SHIFT & 0x3f);
        let dst = prefix(w >> fw::NW_DST_SHIFT & 0x3f);
        if src != 0 {
            m.set(fd("nw_src"), u128::from(be32(28)), src);
        }
        if dst != 0 {
            m.set(fd("nw_dst"), u128::from(be32(32)), dst);
        }
    }
    let (tp_src, tp_dst) = (u128::from(be16(36)), u128::from(be16(38)));
    if Prereq::L4.holds(&m.value, &m.mask) {
        if w & fw::TP_SRC == 0 {
            m.set(fd("tp_src"), tp_src, u128::MAX);
        }
        if w & fw::TP_DST == 0 {
            m.set(fd("tp_dst"), tp_dst, u128::MAX);
        }
    } else if Prereq::Icmp4.holds(&m.value, &m.mask) {
        if w & fw::TP_SRC == 0 {
            m.set(fd("icmp_type"), tp_src & 0xff, u128::MAX);
        }
        if w & fw::TP_DST == 0 {
            m.set(fd("icmp_code"), tp_dst & 0xff, u128::MAX);
        }
    }
    Ok(m)
}

/// Whether 1.0's match can say all `m` matches (else the rule needs NXM).
pub fn expressible(m: &Match) -> bool {
    let mut back = Match::catch_all();
    encode_into(m, &mut back);
    back == *m
}

/// Writes `m` as an `ofp10_match`: what 1.0 can say of it (a dump in the
/// standard format of a rule that matches more leaves that out, as
/// Open vSwitch does).
pub fn encode(m: &Match) -> [u8; LEN] {
    encode_into(m, &mut Match::catch_all())
}

/// [`encode`], also building in `said` the match the bytes say.
fn encode_into(m: &Match, said: &mut Match) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    let mut w = fw::ALL;
    let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
    // Exact: every bit the field has in a key (nw_tos has six).
    let all = sluice_packet::FlowKey::all_ones();
    let exact = |name: &str| {
        let f = fd(name);
        let (v, mk) = m.get(f);
        (mk == (f.get)(&all)).then_some(v)
    };
    let keep = |name: &str, said: &mut Match| {
        let f = fd(name);
        let (v, mk) = m.get(f);
        said.set(f, v, mk);
    };
    if let Some(p) = exact("in_port") {
        w &= !fw::IN_PORT;
        put(4, &port16(p as u32).to_be_bytes());
        keep("in_port", said);
    }
    if let Some(v) = exact("dl_src") {
        w &= !fw::DL_SRC;
        put(6, &v.to_be_bytes()[10..]);
        keep("dl_src", said);
    }
    if let Some(v) = exact("dl_dst") {
        w &= !fw::DL_DST;
        put(12, &v.to_be_bytes()[10..]);
        keep("dl_dst", said);
    }
    let (tci, tci_mask) = m.get(fd("vlan_tci"));
    let (tci, tci_mask) = (tci as u16, tci_mask as u16);
    if tci_mask == 0xffff && tci == 0 {
        w &= !fw::DL_VLAN;
        put(18, &VLAN_NONE.to_be_bytes());
        keep("vlan_tci", said);
    } else if tci_mask & 0x1000 != 0 && tci & 0x1000 != 0 {
        let vid = tci_mask & 0x0fff == 0x0fff;
        let pcp = tci_mask & 0xe000 == 0xe000;
        if vid {
            w &= !fw::DL_VLAN;
            put(18, &(tci & 0x0fff).to_be_bytes());
        }
        if pcp {
            w &= !fw::DL_VLAN_PCP;
            put(20, &[(tci >> 13) as u8]);
        }
        if vid || pcp {
            let mask = 0x1000 | if vid { 0x0fff } else { 0 } | if pcp { 0xe000 } else { 0 };
            said.set(fd("vlan_tci"), u128::from(tci & mask), u128::from(mask));
        }
    }
    if let Some(v) = exact("dl_type") {
        w &= !fw::DL_TYPE;
        put(22, &(v as u16).to_be_bytes());
        keep("dl_type", said);
    }
    let ip = Prereq::Ipv4.holds(&m.value, &m.mask);
    let arp = Prereq::Arp.holds(&m.value, &m.mask);
    if ip {
        if let Some(v) = exact("nw_tos") {
            w &= !fw::NW_TOS;
            put(24, &[v as u8]);
            keep("nw_tos", said);
        }
    }
    if ip || arp {
        if let Some(v) = exact("nw_proto") {
            w &= !fw::NW_PROTO;
            put(25, &[v as u8]);
            keep("nw_proto", said);
        }
        for (name, at, shift) in [
            ("nw_src", 28, fw::NW_SRC_SHIFT),
            ("nw_dst", 32, fw::NW_DST_SHIFT),
        ] {
            let (v, mk) = m.get(fd(name));
            let ones = (mk as u32).leading_ones();
            // A prefix only: 1.0 says nothing else.
            if mk != 0 && (mk as u32) == u32::MAX.checked_shl(32 - ones).unwrap_or(0) {
                w = w & !(0x3f << shift) | (32 - ones) << shift;
                put(at, &(v as u32).to_be_bytes());
                said.set(fd(name), v, mk);
            }
        }
    }
    let ports = if Prereq::L4.holds(&m.value, &m.mask) {
        Some(("tp_src", "tp_dst"))
    } else if Prereq::Icmp4.holds(&m.value, &m.mask) {
        Some(("icmp_type", "icmp_code"))
    } else {
        None
    };
    if let Some((s, d)) = ports {
        for (name, at, bit) in [(s, 36, fw::TP_SRC), (d, 38, fw::TP_DST)] {
            if let Some(v) = exact(name) {
                w &= !bit;
                put(at, &(v as u16).to_be_bytes());
                keep(name, said);
            }
        }
    }
    b[..4].copy_from_slice(&w.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse::Require;
    use sluice_classifier::parse_flow;

    fn rule(s: &str) -> Match {
        parse_flow(s, Require::NoActions).unwrap().matcher
    }

    /// What 1.0 can say goes both ways unchanged.
    #[test]
    fn round_trips() {
        for s in [
            "",
            "in_port=3",
            "tcp,nw_src=10.0.0.0/8,tp_dst=80",
            "udp,dl_vlan=5,dl_vlan_pcp=3,tp_src=53",
            "icmp,icmp_type=8,icmp_code=0",
            "arp,arp_op=1,arp_spa=10.0.0.1",
            "dl_src=00:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,vlan_tci=0",
            "ip,nw_tos=16,nw_proto=17",
        ] {
            let m = rule(s);
            assert!(expressible(&m), "{s}");
            assert_eq!(decode(&encode(&m)).unwrap(), m, "{s}");
        }
        for s in [
            "ip,nw_ttl=3",
            "reg0=1",
            "tcp,tp_dst=0x100/0xff00",
            "ipv6,ipv6_src=::1",
        ] {
            assert!(!expressible(&rule(s)), "{s}");
        }
    }

    /// Fields without their prerequisite are dropped, as Open vSwitch
    /// normalises a 1.0 match.
    #[test]
    fn fields_without_prerequisites_are_dropped() {
        let mut b = [0u8; LEN];
        // Everything exact but dl_type wildcarded: tp_dst and nw_src go.
        b[..4].copy_from_slice(&(fw::DL_TYPE | fw::DL_SRC | fw::DL_DST).to_be_bytes());
        b[4..6].copy_from_slice(&2u16.to_be_bytes());
        b[18..20].copy_from_slice(&0xffffu16.to_be_bytes());
        b[28..32].copy_from_slice(&[10, 0, 0, 1]);
        b[38..40].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(decode(&b).unwrap(), rule("in_port=2,vlan_tci=0"));
    }
}
