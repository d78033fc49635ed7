//! Committing the flow's changes to the packet: the set actions that make
//! the packet what the flow says, emitted right before the output (or
//! push, pop, recirculation) that needs them, as OVS's
//! `commit_odp_actions`.

use sluice_packet::key::{FlowKey, FRAG_LATER};
use sluice_packet::ndisc::NdField;
use sluice_packet::rewrite::{ArpField, FragRewrites};
use sluice_packet::wire::l4::proto;

use super::Ctx;
use crate::dpaction::DpAction;

impl Ctx<'_, '_> {
    /// Emits set actions for every written field, so the packet matches
    /// the flow before an output.
    pub(super) fn commit(&mut self) {
        self.commit_vlans();
        if self.dirty.is_zero() {
            return;
        }
        let (f, d) = (self.flow, self.dirty);
        let csum = self.env.rules.modes().frag_rewrites;
        self.dirty = FlowKey::default();
        if d.dl_src != [0; 6] {
            self.push(DpAction::SetEthSrc(f.dl_src));
        }
        if d.dl_dst != [0; 6] {
            self.push(DpAction::SetEthDst(f.dl_dst));
        }
        if d.dl_type != 0 {
            // set_field on eth_type (`--set-field spec`): the bytes only;
            // the headers after it stay as they were.
            self.push(DpAction::SetEthType(f.dl_type));
        }
        if self.commit_encap(&f, &d) {
            return;
        }
        let mut l3 = d;
        (l3.dl_src, l3.dl_dst, l3.dl_type) = ([0; 6], [0; 6], 0);
        if !l3.is_zero() && (f.is_ip() || f.is_arp()) {
            // As OVS's commit_set_nw_action and commit_set_port_action: a
            // flow whose nw_proto is 0 (IP protocol 0, an IPv6 extension
            // chain that does not parse, an ARP opcode of 0 or above 255)
            // "has no L3 header" and gets no L3 or L4 rewrite.
            self.out.wc.nw_proto = 0xff;
            if f.nw_proto == 0 {
                self.note(self.depth, ">> nw_proto is 0: no L3/L4 rewrite (as OVS)");
                return;
            }
        }
        if f.is_arp() && f.dl_type != sluice_packet::wire::ethernet::ethertype::ARP {
            // RARP: OVS's commit_set_nw_action sets ARP fields for ARP
            // only; a RARP packet keeps its own (found by ovs-compare,
            // seed 45 case 113).
            self.note(self.depth, ">> RARP: no ARP field rewrite (as OVS)");
        } else if f.is_arp() {
            // OVS sets only the ARP fields that differ from what the packet
            // had (a masked set): which depends on the packet's value, so
            // each field written is un-wildcarded (nw_proto already is).
            let b = self.arp_base;
            let mut written = FlowKey::default();
            (written.nw_src, written.nw_dst) = (d.nw_src, d.nw_dst);
            (written.arp_sha, written.arp_tha) = (d.arp_sha, d.arp_tha);
            self.out.wc.or_assign(&written);
            let sets = [
                (
                    d.nw_proto != 0 && f.nw_proto != b.nw_proto,
                    ArpField::Op(f.nw_proto as u16),
                ),
                (
                    d.nw_src != 0 && f.nw_src != b.nw_src,
                    ArpField::Spa(f.nw_src),
                ),
                (
                    d.nw_dst != 0 && f.nw_dst != b.nw_dst,
                    ArpField::Tpa(f.nw_dst),
                ),
                (
                    d.arp_sha != [0; 6] && f.arp_sha != b.arp_sha,
                    ArpField::Sha(f.arp_sha),
                ),
                (
                    d.arp_tha != [0; 6] && f.arp_tha != b.arp_tha,
                    ArpField::Tha(f.arp_tha),
                ),
            ];
            for (changed, field) in sets {
                if changed {
                    self.push(DpAction::SetArp(field));
                }
            }
            self.arp_base = f;
            return;
        }
        if f.is_ipv4() {
            if d.nw_src != 0 {
                self.push(DpAction::SetIpv4Src(f.nw_src, csum));
            }
            if d.nw_dst != 0 {
                self.push(DpAction::SetIpv4Dst(f.nw_dst, csum));
            }
        }
        if f.is_ipv6() {
            if d.ipv6_src != [0; 16] {
                self.push(DpAction::SetIpv6Src(f.ipv6_src, csum));
            }
            if d.ipv6_dst != [0; 16] {
                self.push(DpAction::SetIpv6Dst(f.ipv6_dst, csum));
            }
            if d.ipv6_label != 0 {
                self.push(DpAction::SetIpv6Label(f.ipv6_label & 0xf_ffff));
            }
            // Neighbour discovery (set_field checked the ND prerequisite).
            if d.nd_target != [0; 16] {
                self.push(DpAction::SetNd(NdField::Target(f.nd_target)));
            }
            if d.arp_sha != [0; 6] {
                self.push(DpAction::SetNd(NdField::Sll(f.arp_sha)));
            }
            if d.arp_tha != [0; 6] {
                self.push(DpAction::SetNd(NdField::Tll(f.arp_tha)));
            }
        }
        if f.is_ip() {
            if d.nw_tos != 0 {
                // Only the bits actions wrote: the rest stay the packet's own,
                // so the action does not depend on them.
                self.push(DpAction::SetIpTos {
                    tos: f.nw_tos & d.nw_tos,
                    mask: d.nw_tos,
                });
            }
            if d.nw_ttl != 0 {
                self.push(DpAction::SetIpTtl(f.nw_ttl));
            }
            // Emitted for later fragments too (where the datapath finds no
            // L4 header and changes nothing): testing nw_frag here would make
            // the result depend on a bit the mask does not hold.
            let icmp = matches!(f.nw_proto, proto::ICMP | proto::ICMPV6);
            {
                let later = f.nw_frag & FRAG_LATER != 0;
                match (icmp, d.tp_src != 0, d.tp_dst != 0) {
                    // OVS commits type and code together (non-masked), and
                    // a later fragment's flow has 0 for the one not set.
                    (true, s, c) if later && (s || c) => {
                        // Only when it changes what OVS's base flow holds
                        // (a later fragment's is 0, 0 until a commit): OVS
                        // commits nothing otherwise.
                        let now = (f.tp_src, f.tp_dst);
                        if csum == FragRewrites::Ovs
                            && f.nw_proto == proto::ICMP
                            && now != self.icmp_later_base
                        {
                            self.icmp_later_base = now;
                            self.push(DpAction::SetIcmpInLaterFragment {
                                ty: f.tp_src as u8,
                                code: f.tp_dst as u8,
                            });
                        }
                    }
                    (true, s, c) => {
                        if s {
                            self.push(DpAction::SetIcmpType(f.tp_src as u8));
                        }
                        if c {
                            self.push(DpAction::SetIcmpCode(f.tp_dst as u8));
                        }
                    }
                    (false, s, dd) => {
                        if s {
                            self.push(DpAction::SetTpSrc(f.tp_src));
                        }
                        if dd {
                            self.push(DpAction::SetTpDst(f.tp_dst));
                        }
                    }
                }
            }
            if d.nw_proto != 0 {
                // set_field on ip_proto (`--set-field spec`), after the
                // port rewrites, which act on the transport header the
                // packet has.
                self.push(DpAction::SetIpProto(f.nw_proto, csum));
            }
        }
    }
}
