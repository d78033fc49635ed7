//! Building frames from a description, with correct lengths and checksums.
//!
//! The slow path (the `Repr` side of the header views): used by tests, the
//! traffic generator and the built-in workload, never by the datapath.

use crate::wire::checksum::{self, pseudo_v4, pseudo_v6};
use crate::wire::icmp::nd;
use crate::wire::l4::proto;

/// The L4 part of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4 {
    /// TCP with ports and flags (data offset 5).
    Tcp {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
        /// Flags (12 bits).
        flags: u16,
    },
    /// UDP with ports.
    Udp {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
    },
    /// SCTP common header with ports (no chunks).
    Sctp {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
    },
    /// ICMP (over IPv4) or ICMPv6 (over IPv6) echo-style header.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// ICMPv6 neighbor solicitation (IPv6 only).
    NeighborSolicit {
        /// Target address.
        target: [u8; 16],
        /// Source link-layer address option.
        sll: Option<[u8; 6]>,
    },
    /// Any other protocol number with no header of its own.
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum L3 {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        label: u32,
    },
    Arp {
        op: u16,
        sha: [u8; 6],
        spa: [u8; 4],
        tha: [u8; 6],
        tpa: [u8; 4],
    },
    Raw {
        ethertype: u16,
    },
}

/// A frame description; [`Frame::build`] renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    dst: [u8; 6],
    src: [u8; 6],
    vlans: Vec<(u16, u16)>,
    l3: L3,
    l4: L4,
    tos: u8,
    ttl: u8,
    frag: u16,
    payload: Vec<u8>,
    min_len: usize,
    udp_no_checksum: bool,
}

impl Frame {
    fn new(l3: L3, l4: L4) -> Self {
        Frame {
            dst: [0x02, 0, 0, 0, 0, 2],
            src: [0x02, 0, 0, 0, 0, 1],
            vlans: Vec::new(),
            l3,
            l4,
            tos: 0,
            ttl: 64,
            frag: 0,
            payload: Vec::new(),
            min_len: 60,
            udp_no_checksum: false,
        }
    }

    /// An IPv4 frame.
    pub fn ipv4(src: [u8; 4], dst: [u8; 4], l4: L4) -> Self {
        Frame::new(L3::V4 { src, dst }, l4)
    }

    /// An IPv6 frame.
    pub fn ipv6(src: [u8; 16], dst: [u8; 16], l4: L4) -> Self {
        Frame::new(L3::V6 { src, dst, label: 0 }, l4)
    }

    /// An Ethernet/IPv4 ARP frame.
    pub fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Self {
        Frame::new(
            L3::Arp {
                op,
                sha,
                spa,
                tha,
                tpa,
            },
            L4::Other(0),
        )
    }

    /// A frame of another EtherType whose body is the payload.
    pub fn raw(ethertype: u16) -> Self {
        Frame::new(L3::Raw { ethertype }, L4::Other(0))
    }

    /// Sets the MAC addresses.
    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Self {
        self.src = src;
        self.dst = dst;
        self
    }

    /// Adds a VLAN tag inside those added before (first call = outermost).
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.vlans.push((tpid, tci));
        self
    }

    /// Sets the TOS / traffic class.
    pub fn tos(mut self, tos: u8) -> Self {
        self.tos = tos;
        self
    }

    /// Sets the TTL / hop limit.
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the IPv6 flow label.
    pub fn label(mut self, label: u32) -> Self {
        if let L3::V6 { label: l, .. } = &mut self.l3 {
            *l = label & 0xfffff;
        }
        self
    }

    /// Sets the IPv4 flags/fragment-offset word.
    pub fn frag(mut self, word: u16) -> Self {
        self.frag = word;
        self
    }

    /// Sets the bytes after the L4 header.
    pub fn payload(mut self, bytes: &[u8]) -> Self {
        self.payload = bytes.to_vec();
        self
    }

    /// Pads the frame with zeros to at least `len` bytes (default 60, the
    /// Ethernet minimum without FCS). Padding lies outside the IP length.
    pub fn min_len(mut self, len: usize) -> Self {
        self.min_len = len;
        self
    }

    /// Sends UDP over IPv4 with a zero ("none") checksum.
    pub fn udp_without_checksum(mut self) -> Self {
        self.udp_no_checksum = true;
        self
    }

    fn l4_bytes(&self) -> (u8, Vec<u8>) {
        let mut b = Vec::new();
        let p = match &self.l4 {
            L4::Tcp { src, dst, flags } => {
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
                b.extend_from_slice(&((5u16 << 12) | (flags & 0x0fff)).to_be_bytes());
                b.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
                proto::TCP
            }
            L4::Udp { src, dst } => {
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                let len = (8 + self.payload.len()) as u16;
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                proto::UDP
            }
            L4::Sctp { src, dst } => {
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
                proto::SCTP
            }
            L4::Icmp { ty, code } => {
                b.extend_from_slice(&[*ty, *code, 0, 0, 0, 1, 0, 1]);
                if matches!(self.l3, L3::V6 { .. }) {
                    proto::ICMPV6
                } else {
                    proto::ICMP
                }
            }
            L4::NeighborSolicit { target, sll } => {
                b.extend_from_slice(&[nd::SOLICIT, 0, 0, 0, 0, 0, 0, 0]);
                b.extend_from_slice(target);
                if let Some(mac) = sll {
                    b.extend_from_slice(&[nd::OPT_SLL, 1]);
                    b.extend_from_slice(mac);
                }
                proto::ICMPV6
            }
            L4::Other(p) => *p,
        };
        b.extend_from_slice(&self.payload);
        (p, b)
    }

    /// Renders the frame.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&self.dst);
        f.extend_from_slice(&self.src);
        for (tpid, tci) in &self.vlans {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        match &self.l3 {
            L3::V4 { src, dst } => {
                f.extend_from_slice(&0x0800u16.to_be_bytes());
                let (p, mut l4) = self.l4_bytes();
                let tot = (20 + l4.len()) as u16;
                let mut ip = vec![0x45, self.tos];
                ip.extend_from_slice(&tot.to_be_bytes());
                ip.extend_from_slice(&[0x12, 0x34]);
                ip.extend_from_slice(&self.frag.to_be_bytes());
                ip.extend_from_slice(&[self.ttl, p, 0, 0]);
                ip.extend_from_slice(src);
                ip.extend_from_slice(dst);
                let c = checksum::checksum(&ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                let ph = pseudo_v4(
                    u32::from_be_bytes(*src),
                    u32::from_be_bytes(*dst),
                    p,
                    l4.len() as u16,
                );
                fill_l4_checksum(p, ph, &mut l4, self.udp_no_checksum);
                f.extend_from_slice(&ip);
                f.extend_from_slice(&l4);
            }
            L3::V6 { src, dst, label } => {
                f.extend_from_slice(&0x86ddu16.to_be_bytes());
                let (p, mut l4) = self.l4_bytes();
                let w = (6u32 << 28) | ((self.tos as u32) << 20) | label;
                f.extend_from_slice(&w.to_be_bytes());
                f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                f.extend_from_slice(&[p, self.ttl]);
                f.extend_from_slice(src);
                f.extend_from_slice(dst);
                let ph = pseudo_v6(src, dst, p, l4.len() as u32);
                fill_l4_checksum(p, ph, &mut l4, false);
                f.extend_from_slice(&l4);
            }
            L3::Arp {
                op,
                sha,
                spa,
                tha,
                tpa,
            } => {
                f.extend_from_slice(&0x0806u16.to_be_bytes());
                f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
                f.extend_from_slice(&op.to_be_bytes());
                f.extend_from_slice(sha);
                f.extend_from_slice(spa);
                f.extend_from_slice(tha);
                f.extend_from_slice(tpa);
            }
            L3::Raw { ethertype } => {
                f.extend_from_slice(&ethertype.to_be_bytes());
                f.extend_from_slice(&self.payload);
            }
        }
        if f.len() < self.min_len {
            f.resize(self.min_len, 0);
        }
        f
    }
}

fn fill_l4_checksum(p: u8, pseudo: u32, l4: &mut [u8], udp_none: bool) {
    let at = match p {
        proto::TCP if l4.len() >= 20 => 16,
        proto::UDP if l4.len() >= 8 => {
            if udp_none {
                return;
            }
            6
        }
        proto::ICMPV6 if l4.len() >= 4 => 2,
        proto::ICMP if l4.len() >= 4 => {
            let c = checksum::checksum(l4);
            l4[2..4].copy_from_slice(&c.to_be_bytes());
            return;
        }
        proto::SCTP if l4.len() >= 12 => {
            l4[8..12].fill(0);
            let crc = checksum::crc32c(l4);
            l4[8..12].copy_from_slice(&crc.to_le_bytes());
            return;
        }
        _ => return,
    };
    let mut c = checksum::finish(checksum::sum(pseudo, l4));
    if p == proto::UDP && c == 0 {
        c = 0xffff;
    }
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum::{checksum, finish, sum};

    #[test]
    fn ipv4_udp_checksums_verify() {
        let b = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: 1, dst: 2 })
            .payload(b"hi")
            .build();
        assert_eq!(b.len(), 60);
        assert_eq!(checksum(&b[14..34]), 0);
        let ph = pseudo_v4(0x0a00_0001, 0x0a00_0002, 17, 10);
        assert_eq!(finish(sum(ph, &b[34..44])), 0);
    }

    #[test]
    fn ipv6_tcp_checksum_verifies() {
        let b = Frame::ipv6(
            [1; 16],
            [2; 16],
            L4::Tcp {
                src: 1,
                dst: 2,
                flags: 2,
            },
        )
        .build();
        let ph = pseudo_v6(&[1; 16], &[2; 16], 6, 20);
        assert_eq!(finish(sum(ph, &b[54..74])), 0);
    }
}
