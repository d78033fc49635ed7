//! An independent reference for the differential test: OpenFlow actions
//! applied to packet bytes one at a time, the key re-extracted before every
//! lookup, every checksum recomputed from scratch (and Open vSwitch's update
//! of two payload bytes of an IPv4 later fragment on an address rewrite,
//! modelled on its own). It shares only the key extraction and the linear
//! rule lookup with the datapath; `scripts/ovs-compare` checks both against
//! Open vSwitch itself.

use sluice_classifier::action::Action;
use sluice_classifier::RuleSet;
use sluice_packet::extract::{extract, extract_with_shape};
use sluice_packet::wire::checksum::{checksum, crc32c, finish, pseudo_v4, pseudo_v6, sum};
use sluice_packet::{FlowKey, PacketMeta};

/// The ports of the test switch.
pub const PORTS: [u32; 4] = [1, 2, 3, 4];
/// Where the reference records controller outputs.
pub const CONTROLLER: u32 = u32::MAX;

pub fn key_of(bytes: &[u8], in_port: u32) -> Option<(FlowKey, PacketMeta)> {
    let mut k = FlowKey::default();
    let mut m = PacketMeta::default();
    extract(bytes, in_port, &mut m, &mut k).ok()?;
    Some((k, m))
}

/// The key of `bytes` parsed past exactly `vlans` VLAN tags at most: what
/// Open vSwitch's flow holds after its actions pushed or popped tags on a
/// packet it parsed with vlan-limit 1 (it never re-parses: a pushed tag
/// keeps the L3 fields, popping the one tag it parsed of a double-tagged
/// frame leaves the inner tag's TPID as the EtherType).
pub fn key_with_vlans(bytes: &[u8], in_port: u32, vlans: usize) -> Option<(FlowKey, PacketMeta)> {
    let mut k = FlowKey::default();
    let mut m = PacketMeta::default();
    extract_with_shape(bytes, in_port, vlans, &mut m, &mut k).ok()?;
    Some((k, m))
}

/// Recomputes the IPv4 header checksum and the L4 checksum from scratch.
pub fn fix_checksums(b: &mut [u8], udp_had_csum: bool, vlans: usize) {
    let Some((k, m)) = key_with_vlans(b, 0, vlans) else {
        return;
    };
    let Some(l3) = m.l3() else { return };
    let l4_end;
    if k.is_ipv4() {
        let hl = ((b[l3] & 0xf) as usize) * 4;
        let tot = u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]) as usize;
        if hl < 20 || l3 + tot > b.len() || tot < hl {
            return;
        }
        b[l3 + 10..l3 + 12].fill(0);
        let c = checksum(&b[l3..l3 + hl]);
        b[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        l4_end = l3 + tot;
    } else if k.is_ipv6() {
        l4_end = l3 + 40 + u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]) as usize;
    } else {
        return;
    }
    let Some(l4) = m.l4() else { return };
    let len = l4_end - l4;
    let ph = if k.is_ipv4() {
        pseudo_v4(k.nw_src, k.nw_dst, m.l4_proto, len as u16)
    } else {
        pseudo_v6(&k.ipv6_src, &k.ipv6_dst, m.l4_proto, len as u32)
    };
    let seg = &mut b[l4..l4_end];
    match m.l4_proto {
        6 if len >= 20 => {
            seg[16..18].fill(0);
            let c = finish(sum(ph, seg));
            seg[16..18].copy_from_slice(&c.to_be_bytes());
        }
        17 if len >= 8 && udp_had_csum => {
            seg[6..8].fill(0);
            let mut c = finish(sum(ph, seg));
            if c == 0 {
                c = 0xffff;
            }
            seg[6..8].copy_from_slice(&c.to_be_bytes());
        }
        1 if len >= 8 && k.is_ipv4() => {
            seg[2..4].fill(0);
            let c = checksum(seg);
            seg[2..4].copy_from_slice(&c.to_be_bytes());
        }
        58 if len >= 8 && k.is_ipv6() => {
            seg[2..4].fill(0);
            let c = finish(sum(ph, seg));
            seg[2..4].copy_from_slice(&c.to_be_bytes());
        }
        132 if len >= 12 => {
            seg[8..12].fill(0);
            let crc = crc32c(seg);
            seg[8..12].copy_from_slice(&crc.to_le_bytes());
        }
        _ => {}
    }
}

pub fn udp_has_csum(b: &[u8], vlans: usize) -> bool {
    match key_with_vlans(b, 0, vlans) {
        Some((_, m)) if m.l4_proto == 17 => m
            .l4()
            .is_some_and(|l4| b.len() >= l4 + 8 && b[l4 + 6..l4 + 8] != [0, 0]),
        _ => true,
    }
}

pub struct Ref<'a> {
    pub rules: &'a RuleSet,
    pub bytes: Vec<u8>,
    pub in_port: u32,
    pub outputs: Vec<(u32, Vec<u8>)>,
    pub hits: Vec<u64>,
    /// Nested resubmits and goto_tables.
    pub depth: u32,
    /// Of which those to the same or an earlier table (OVS's depth).
    pub deep: u32,
    pub resubmits: u32,
    pub error: bool,
    /// The VLAN tags the flow knows of (see [`key_with_vlans`]); `None`
    /// until the first look.
    pub vlans: Option<usize>,
    /// The pipeline's metadata (write_metadata).
    pub metadata: u64,
    /// The registers (load, move, set_field on reg<N>).
    pub regs: [u32; sluice_packet::key::N_REGS],
}

impl Ref<'_> {
    fn vlans(&mut self) -> usize {
        let bytes = &self.bytes;
        *self.vlans.get_or_insert_with(|| {
            let k = key_of(bytes, 0)
                .expect("reference runs only on non-runts")
                .0;
            usize::from(k.vlan_tci[0] & 0x1000 != 0)
        })
    }

    fn key(&mut self) -> FlowKey {
        let vlans = self.vlans();
        let mut k = key_with_vlans(&self.bytes, self.in_port, vlans)
            .expect("reference runs only on non-runts")
            .0;
        k.metadata = self.metadata;
        k.regs = self.regs;
        k
    }

    pub fn table(&mut self, t: u8) {
        if self.error {
            return;
        }
        let key = self.key();
        let Some(rule) = self
            .rules
            .table(t)
            .find(|r| r.matcher.matches(&key))
            .cloned()
        else {
            return;
        };
        self.hits.push(rule.id);
        self.actions(&rule.actions, t);
    }

    fn out(&mut self, p: u32) {
        if PORTS.contains(&p) {
            self.outputs.push((p, self.bytes.clone()));
        }
    }

    fn vlan_tagged(&mut self) -> bool {
        self.key().vlan_tci[0] & 0x1000 != 0
    }

    /// A new outermost tag. OVS's flow holds two tags: a push onto two
    /// forgets the inner one, and the next commit leaves it out of the
    /// packet (pops what the packet had, pushes what the flow knows).
    fn push_tag(&mut self, tpid: u16, tci: u16) {
        let known = self.vlans();
        let mut tag = tpid.to_be_bytes().to_vec();
        tag.extend_from_slice(&tci.to_be_bytes());
        self.bytes.splice(12..12, tag);
        if known == 2 {
            self.bytes.drain(20..24);
        } else {
            self.vlans = Some(known + 1);
        }
    }

    fn actions(&mut self, actions: &[Action], table: u8) {
        for a in actions {
            if self.error {
                return;
            }
            match *a {
                Action::Output(p) => {
                    if p != self.in_port {
                        self.out(p)
                    }
                }
                Action::InPort => self.out(self.in_port),
                // Stateful (a MAC table): the generated rule sets have none.
                Action::Normal => unreachable!("no NORMAL in generated rules"),
                Action::OutputReg(_) => unreachable!("no output:FIELD in generated rules"),
                Action::Note(_) | Action::Sample(_) | Action::SetQueue(_) | Action::PopQueue => {}
                Action::Clone(_) => unreachable!("no clone in generated rules"),
                Action::Stack { .. } => unreachable!("no push or pop in generated rules"),
                Action::Learn(_) => unreachable!("no learn in generated rules"),
                Action::Multipath(_)
                | Action::Bundle(_)
                | Action::DecTtlIds(_)
                | Action::FinTimeout { .. }
                | Action::CheckPktLarger { .. } => unreachable!(
                    "no multipath, bundle, dec_ttl(ids), fin_timeout or check_pkt_larger in generated rules"
                ),
                Action::Conjunction { .. } => unreachable!("a clause is never a lookup result"),
                Action::All | Action::Flood => {
                    for p in PORTS {
                        if p != self.in_port {
                            self.out(p);
                        }
                    }
                }
                // The whole packet, whatever the action's max_len, as
                // Open vSwitch 3.1 sends it (the datapath's default).
                Action::Controller { .. } => {
                    self.outputs.push((CONTROLLER, self.bytes.clone()));
                }
                // A register is the reference's own state; a header field
                // gets its new value whole (the packet's other bits kept)
                // as a set_field would write it.
                Action::Load { field, value, mask } => {
                    let mut k = self.key();
                    let new = ((field.get)(&k) & !mask) | (value & mask);
                    if field.is_register() {
                        (field.put)(&mut k, new);
                        self.regs = k.regs;
                    } else {
                        let set = Action::SetField {
                            field,
                            value: new,
                            legacy: None,
                        };
                        self.actions(std::slice::from_ref(&set), table);
                    }
                }
                Action::Move { src, dst } => {
                    let k = self.key();
                    if !src.field.prereq.holds_for_key(&k) {
                        continue;
                    }
                    let load = Action::Load {
                        field: dst.field,
                        value: dst.place(src.read(&k)),
                        mask: dst.mask(),
                    };
                    self.actions(std::slice::from_ref(&load), table);
                }
                Action::SetField { field, value, .. } if field.name == "vlan_vid" => {
                    // The DEI bit is lost, as in OVS (the key uses it as "tag present").
                    if self.vlan_tagged() {
                        let t = u16::from_be_bytes([self.bytes[14], self.bytes[15]]);
                        self.bytes[14..16].copy_from_slice(
                            &((t & 0xe000) | (value as u16 & 0x0fff)).to_be_bytes(),
                        );
                    }
                }
                Action::SetField {
                    field,
                    value,
                    legacy,
                } => {
                    let k = self.key();
                    // OpenFlow 1.0 actions (mod_nw_src, ...) act where OVS's
                    // translation lets them: IPv4 only for addresses.
                    let pre = if legacy.is_some() {
                        field.legacy_prereq()
                    } else {
                        field.prereq
                    };
                    if !pre.holds_for_key(&k) {
                        continue;
                    }
                    // OVS: a flow with nw_proto 0 "has no L3 header" and
                    // gets no L3/L4 rewrite (the write is lost for good:
                    // nw_proto never changes).
                    let l2 = matches!(field.name, "dl_src" | "dl_dst");
                    if !l2 && (k.is_ip() || k.is_arp()) && k.nw_proto == 0 {
                        continue;
                    }
                    let vlans = self.vlans();
                    let udp_csum = udp_has_csum(&self.bytes, vlans);
                    set_field_bytes(&mut self.bytes, field.name, value, vlans);
                    fix_checksums(&mut self.bytes, udp_csum, vlans);
                }
                // The parser put a push_vlan before these where the rule
                // did not guarantee a tag (OpenFlow 1.3's encoding).
                Action::ModVlanVid(v) => {
                    if self.vlan_tagged() {
                        let t = u16::from_be_bytes([self.bytes[14], self.bytes[15]]);
                        self.bytes[14..16].copy_from_slice(&((t & 0xf000) | v).to_be_bytes());
                    }
                }
                Action::ModVlanPcp(p) => {
                    if self.vlan_tagged() {
                        let t = u16::from_be_bytes([self.bytes[14], self.bytes[15]]);
                        self.bytes[14..16]
                            .copy_from_slice(&((t & 0x0fff) | ((p as u16) << 13)).to_be_bytes());
                    }
                }
                Action::PushVlan(tpid) => self.push_tag(tpid, 0),
                Action::PopVlan => {
                    if self.vlan_tagged() {
                        self.bytes.drain(12..16);
                        self.vlans = Some(self.vlans() - 1);
                    }
                }
                Action::DecTtl => {
                    let k = self.key();
                    if k.is_ip() {
                        if k.nw_ttl <= 1 {
                            return;
                        }
                        if k.nw_proto == 0 {
                            continue;
                        }
                        let vlans = self.vlans();
                        let udp_csum = udp_has_csum(&self.bytes, vlans);
                        set_field_bytes(&mut self.bytes, "nw_ttl", (k.nw_ttl - 1) as u128, vlans);
                        fix_checksums(&mut self.bytes, udp_csum, vlans);
                    }
                }
                Action::Resubmit { in_port, table: t } => {
                    // As OVS: only a resubmit to this table or an earlier
                    // one counts against the 64.
                    let t = t.unwrap_or(table);
                    let deepens = u32::from(t <= table);
                    self.resubmits += 1;
                    if (deepens == 1 && self.deep >= 64)
                        || self.depth >= 512
                        || self.resubmits > 4096
                    {
                        self.error = true;
                        return;
                    }
                    let saved = self.in_port;
                    if let Some(p) = in_port {
                        self.in_port = p;
                    }
                    self.depth += 1;
                    self.deep += deepens;
                    self.table(t);
                    self.deep -= deepens;
                    self.depth -= 1;
                    self.in_port = saved;
                }
                // The differential test's rule sets have no groups (their
                // translation is tested in crates/classifier/src/xlate/tests.rs).
                Action::Group(_) => unreachable!("no groups in the differential rule sets"),
                Action::GotoTable(t) => {
                    // Forward: never deepens.
                    if self.depth >= 512 {
                        self.error = true;
                        return;
                    }
                    self.depth += 1;
                    self.table(t);
                    self.depth -= 1;
                }
                // The rule generators of the differential tests write no
                // action sets; the OpenFlow tests cover them.
                Action::WriteMetadata { value, mask } => {
                    self.metadata = (self.metadata & !mask) | (value & mask);
                }
                Action::WriteActions(_) | Action::ClearActions => {
                    unreachable!("no action sets in generated rules")
                }
                // MPLS and PBB have their own tests (tests/recirculation.rs
                // and the os-ken suite): the generator makes none.
                Action::PushMpls(_)
                | Action::PopMpls(_)
                | Action::SetMplsTtl(_)
                | Action::DecMplsTtl
                | Action::CopyTtlOut
                | Action::CopyTtlIn
                | Action::PushPbb(_)
                | Action::PopPbb
                | Action::Meter(_) => {
                    unreachable!("no MPLS, PBB or meter actions in generated rules")
                }
                // Connection tracking is compared with OVS itself
                // (scripts/ct-compare) and tested in crates/conntrack.
                Action::Ct(_) | Action::CtClear => {
                    unreachable!("no ct actions in generated rules")
                }
            }
        }
    }
}

/// Open vSwitch 3.1 (packet_set_ipv4_addr) updates the two bytes where a
/// TCP or UDP checksum would be, right after the IP header, in IPv4 later
/// fragments too (where they are data): RFC 1624's HC' = ~(~HC + ~m + m').
fn later_fragment_quirk(b: &mut [u8], l3: usize, addr_at: usize, new: u32) {
    let hl = (b[l3] & 0xf) as usize * 4;
    let end = l3 + u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]) as usize;
    let l4 = l3 + hl;
    let at = match b[l3 + 9] {
        6 if end >= l4 + 20 => l4 + 16,
        17 if end >= l4 + 8 => l4 + 6,
        _ => return,
    };
    if end > b.len() {
        return;
    }
    let hc = u16::from_be_bytes([b[at], b[at + 1]]);
    if b[l3 + 9] == 17 && hc == 0 {
        return;
    }
    let old = u32::from_be_bytes([b[addr_at], b[addr_at + 1], b[addr_at + 2], b[addr_at + 3]]);
    let mut acc = !hc as u32;
    for (o, n) in [(old >> 16, new >> 16), (old & 0xffff, new & 0xffff)] {
        acc += (!o & 0xffff) + n;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let mut c = !(acc as u16);
    if b[l3 + 9] == 17 && c == 0 {
        c = 0xffff;
    }
    b[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Writes a field into the packet bytes at the offsets a fresh parse finds.
pub fn set_field_bytes(b: &mut [u8], name: &str, v: u128, vlans: usize) {
    let (k, m) = key_with_vlans(b, 0, vlans).unwrap();
    let l3 = m.l3();
    let l4 = m.l4();
    let put = |b: &mut [u8], at: usize, bytes: &[u8]| {
        if at + bytes.len() <= b.len() {
            b[at..at + bytes.len()].copy_from_slice(bytes);
        }
    };
    let mac = |v: u128| (v as u64).to_be_bytes()[2..].to_vec();
    match name {
        "dl_src" => put(b, 6, &mac(v)),
        "dl_dst" => put(b, 0, &mac(v)),
        "nw_src" | "nw_dst" if k.is_arp() => put(
            b,
            l3.unwrap() + if name == "nw_src" { 14 } else { 24 },
            &(v as u32).to_be_bytes(),
        ),
        "nw_src" | "nw_dst" => {
            let at = l3.unwrap() + if name == "nw_src" { 12 } else { 16 };
            if k.nw_frag & 2 != 0 {
                later_fragment_quirk(b, l3.unwrap(), at, v as u32);
            }
            put(b, at, &(v as u32).to_be_bytes());
        }
        "ip_dscp" | "nw_tos" | "nw_ttl" | "ip_ecn" => {
            let l3 = l3.unwrap();
            let tos = if name == "ip_dscp" {
                Some((k.nw_tos & 3) | ((v as u8) << 2))
            } else if name == "nw_tos" {
                Some((k.nw_tos & 3) | (v as u8 & 0xfc))
            } else if name == "ip_ecn" {
                Some((k.nw_tos & 0xfc) | v as u8)
            } else {
                None
            };
            if k.is_ipv4() {
                match tos {
                    Some(t) => b[l3 + 1] = t,
                    None => b[l3 + 8] = v as u8,
                }
            } else {
                match tos {
                    Some(t) => {
                        let w = u32::from_be_bytes([b[l3], b[l3 + 1], b[l3 + 2], b[l3 + 3]]);
                        let w = (w & 0xf00f_ffff) | ((t as u32) << 20);
                        b[l3..l3 + 4].copy_from_slice(&w.to_be_bytes());
                    }
                    None => b[l3 + 7] = v as u8,
                }
            }
        }
        "tp_src" | "tcp_src" | "udp_src" => {
            if let Some(l4) = l4 {
                if b.len() >= l4 + 8 {
                    put(b, l4, &(v as u16).to_be_bytes())
                }
            }
        }
        "tp_dst" | "tcp_dst" | "udp_dst" => {
            if let Some(l4) = l4 {
                if b.len() >= l4 + 8 {
                    put(b, l4 + 2, &(v as u16).to_be_bytes())
                }
            }
        }
        other => panic!("reference does not model set_field on {other}"),
    }
}
