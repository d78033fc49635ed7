//! Offloads done in software, for packets that arrive with work left for
//! the hardware (a virtio-net header's requests, [`Offload`]) and leave
//! through a port that cannot take such packets: completing a partial L4
//! checksum, and cutting a GSO super-frame into wire-sized segments (TSO
//! and UDP segmentation, as the Linux stack's GSO does it: headers copied,
//! lengths, IPv4 IDs, TCP sequence numbers and flags and every checksum
//! fixed per segment).
//!
//! Also the virtio-net header itself ([`VNET_HDR_LEN`] bytes, little
//! endian as the kernel's packet sockets and taps write it on x86), and
//! its tunnel form ([`VNET_HDR_TNL_LEN`] bytes, Linux 6.17 on, taps only):
//! a super-frame inside a UDP tunnel ([`Offload::UDP_TUNNEL`]) whose
//! segments each carry the outer headers.

use crate::meta::Offload;
use crate::pool::{Packet, PacketPool};
use crate::wire::checksum::{checksum, finish, pseudo_v4, pseudo_v6, sum_wide};

mod tunnel;
#[cfg(test)]
mod tunnel_tests;

pub use tunnel::{from_vnet_hdr_tnl, vnet_hdr_tnl_of, VNET_HDR_TNL_LEN};
use tunnel::{tunnel_headers, Outer};

/// Bytes of a `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_UDP: u8 = 3;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Why a packet's offload request cannot be carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// A request this switch does not carry out (UFO: IPv4 fragmentation
    /// of a UDP super-frame, deprecated in Linux since 4.14).
    Unsupported,
    /// The request does not fit the packet (offsets past its end, a GSO
    /// kind that is not its protocol, segment size 0).
    Malformed,
    /// The pool had no frame for a segment.
    NoBuffer,
}

impl std::fmt::Display for OffloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OffloadError::Unsupported => "unsupported offload request",
            OffloadError::Malformed => "offload request does not fit the packet",
            OffloadError::NoBuffer => "no buffer for a segment",
        })
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The offload requests of a virtio-net header.
pub fn from_vnet_hdr(h: &[u8; VNET_HDR_LEN]) -> Result<Offload, OffloadError> {
    let mut o = Offload::NONE;
    if h[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        o.flags |= Offload::NEEDS_CSUM;
        o.csum_start = le16(h, 6);
        o.csum_offset = u8::try_from(le16(h, 8)).map_err(|_| OffloadError::Malformed)?;
    }
    let kind = match h[1] & !VIRTIO_NET_HDR_GSO_ECN {
        0 => 0,
        VIRTIO_NET_HDR_GSO_TCPV4 => Offload::GSO_TCPV4,
        VIRTIO_NET_HDR_GSO_TCPV6 => Offload::GSO_TCPV6,
        VIRTIO_NET_HDR_GSO_UDP_L4 => Offload::GSO_UDP_L4,
        VIRTIO_NET_HDR_GSO_UDP => return Err(OffloadError::Unsupported),
        _ => return Err(OffloadError::Malformed),
    };
    if kind != 0 {
        o.gso_size = le16(h, 4);
        if o.gso_size == 0 {
            return Err(OffloadError::Malformed);
        }
        o.flags |= kind;
        if h[1] & VIRTIO_NET_HDR_GSO_ECN != 0 {
            o.flags |= Offload::ECN;
        }
    }
    Ok(o)
}

/// The virtio-net header stating `o`, with `hdr_len` the length of the
/// headers in front of the payload (only a hint to the kernel).
pub fn to_vnet_hdr(o: &Offload, hdr_len: u16) -> [u8; VNET_HDR_LEN] {
    let mut h = [0u8; VNET_HDR_LEN];
    if o.needs_csum() {
        h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&o.csum_start.to_le_bytes());
        h[8..10].copy_from_slice(&u16::from(o.csum_offset).to_le_bytes());
    }
    let kind = match o.gso() {
        Offload::GSO_TCPV4 => VIRTIO_NET_HDR_GSO_TCPV4,
        Offload::GSO_TCPV6 => VIRTIO_NET_HDR_GSO_TCPV6,
        Offload::GSO_UDP_L4 => VIRTIO_NET_HDR_GSO_UDP_L4,
        _ => 0,
    };
    if kind != 0 {
        h[1] = kind
            | if o.flags & Offload::ECN != 0 {
                VIRTIO_NET_HDR_GSO_ECN
            } else {
                0
            };
        h[2..4].copy_from_slice(&hdr_len.to_le_bytes());
        h[4..6].copy_from_slice(&o.gso_size.to_le_bytes());
    }
    h
}

/// Completes a partial L4 checksum in place (the field holds the
/// pseudo-header sum; the sum of the bytes from `csum_start` on goes in)
/// and clears the request. A UDP checksum that comes out 0 is sent as
/// 0xffff. `Err` (the packet unchanged) when the offsets are past its end.
pub fn complete_csum(pkt: &mut Packet) -> Result<(), OffloadError> {
    let o = pkt.meta.offload;
    if !o.needs_csum() {
        return Ok(());
    }
    if o.flags & Offload::UDP_TUNNEL != 0 {
        // Its outer headers are the super-frame's: only cutting it makes them.
        return Err(OffloadError::Malformed);
    }
    let start = usize::from(o.csum_start);
    let at = start + usize::from(o.csum_offset);
    if at + 2 > pkt.len() {
        return Err(OffloadError::Malformed);
    }
    let udp = pkt.meta.l4_proto == UDP && o.csum_offset == 6;
    let d = pkt.data_mut();
    let mut c = finish(sum_wide(0, &d[start..]));
    if udp && c == 0 {
        c = 0xffff;
    }
    put16(d, at, c);
    pkt.meta.offload.flags &= !Offload::NEEDS_CSUM;
    Ok(())
}

/// Where a super-frame's parts are: L3 and L4 offsets, the length of the
/// headers the segments repeat, where the IP datagram ends (bytes after it,
/// such as Ethernet padding, are not payload), the L4 protocol; for a
/// tunnelled one ([`Offload::UDP_TUNNEL`]) these are the inner frame's and
/// `outer` says where the outer headers are.
struct Layout {
    l3: usize,
    l4: usize,
    hdr: usize,
    end: usize,
    v6: bool,
    proto: u8,
    outer: Option<Outer>,
}

fn layout(pkt: &Packet) -> Result<Layout, OffloadError> {
    let m = &pkt.meta;
    let d = pkt.data();
    let (l3, l4, l3_type, l4_proto, outer) = if m.offload.flags & Offload::UDP_TUNNEL != 0 {
        // The inner headers: from the frame (the metadata is the outer
        // frame's), the inner L4 header where the checksum starts.
        let (outer, l3) = tunnel_headers(d).ok_or(OffloadError::Malformed)?;
        let l4 = usize::from(m.offload.csum_start);
        if !m.offload.needs_csum() || l4 <= l3 || d.len() <= l3 {
            return Err(OffloadError::Malformed);
        }
        let (ty, proto) = match (d[l3] >> 4, m.offload.gso()) {
            (4, Offload::GSO_UDP_L4) => (ETH_IPV4, UDP),
            (6, Offload::GSO_UDP_L4) => (ETH_IPV6, UDP),
            (4, _) => (ETH_IPV4, TCP),
            (6, _) => (ETH_IPV6, TCP),
            _ => return Err(OffloadError::Malformed),
        };
        (l3, l4, ty, proto, Some(outer))
    } else {
        let (Some(l3), Some(l4)) = (m.l3(), m.l4()) else {
            return Err(OffloadError::Malformed);
        };
        (l3, l4, m.l3_type, m.l4_proto, None)
    };
    let (v6, proto) = match (m.offload.gso(), l3_type, l4_proto) {
        (Offload::GSO_TCPV4, ETH_IPV4, TCP) => (false, TCP),
        (Offload::GSO_TCPV6, ETH_IPV6, TCP) => (true, TCP),
        (Offload::GSO_UDP_L4, ETH_IPV4, UDP) => (false, UDP),
        (Offload::GSO_UDP_L4, ETH_IPV6, UDP) => (true, UDP),
        _ => return Err(OffloadError::Malformed),
    };
    let l4_hdr = if proto == TCP {
        if l4 + 20 > d.len() {
            return Err(OffloadError::Malformed);
        }
        usize::from(d[l4 + 12] >> 4) * 4
    } else {
        8
    };
    let hdr = l4 + l4_hdr;
    let ip_min = if v6 { 40 } else { 20 };
    // A TCP header is at least 20 bytes (segments get their sequence
    // number, flags and checksum written at fixed offsets in it); an IPv4
    // header's own length must fit before L4 (its checksum is made over
    // it). A data offset of 2 to 4 words once let a segment be written
    // past its end (found by the vnet_offload fuzz target).
    let ihl_ok = v6 || {
        let ihl = usize::from(d[l3] & 0x0f) * 4;
        ihl >= 20 && l3 + ihl <= l4
    };
    let l4_min = if proto == TCP { 20 } else { 8 };
    if l4_hdr < l4_min || hdr > d.len() || l3 + ip_min > l4 || !ihl_ok {
        return Err(OffloadError::Malformed);
    }
    // The IP length says where the datagram ends; 0 (a super-frame past
    // 64 KiB, Linux's BIG TCP) leaves it to the frame.
    let len_field = be16(d, l3 + if v6 { 4 } else { 2 });
    let end = if len_field == 0 {
        d.len()
    } else {
        let n = l3 + usize::from(len_field) + if v6 { 40 } else { 0 };
        if n < hdr || n > d.len() {
            return Err(OffloadError::Malformed);
        }
        n
    };
    Ok(Layout {
        l3,
        l4,
        hdr,
        end,
        v6,
        proto,
        outer,
    })
}

/// The virtio-net header that states `pkt`'s offload requests.
pub fn vnet_hdr_of(pkt: &Packet) -> [u8; VNET_HDR_LEN] {
    to_vnet_hdr(&pkt.meta.offload, gso_headers_len(pkt))
}

/// For a virtio-net header's `hdr_len`: the length of the headers in
/// front of a super-frame's payload (0 for other packets, or when they
/// cannot be found: the kernel works it out then).
fn gso_headers_len(pkt: &Packet) -> u16 {
    if pkt.meta.offload.gso() == 0 {
        return 0;
    }
    layout(pkt).map_or(0, |l| l.hdr as u16)
}

/// Whether `pkt` is a super-frame with more payload than one segment
/// carries (a GSO packet with one segment's worth only needs its
/// checksum completed), or a tunnelled one (its outer lengths and
/// checksums are made by cutting it, into one segment if that is all).
pub fn needs_segmenting(pkt: &Packet) -> bool {
    let o = &pkt.meta.offload;
    o.gso() != 0
        && layout(pkt).is_ok_and(|l| l.outer.is_some() || l.end - l.hdr > usize::from(o.gso_size))
}

/// The length of the longest frame `pkt` goes on the wire as: itself, or
/// for a super-frame its headers (outer ones included) and one segment's
/// payload.
pub fn longest_segment(pkt: &Packet) -> usize {
    let o = &pkt.meta.offload;
    if o.gso() == 0 {
        return pkt.len();
    }
    layout(pkt).map_or(pkt.len(), |l| {
        l.hdr + (l.end - l.hdr).min(usize::from(o.gso_size))
    })
}

/// Cuts a GSO super-frame into segments of at most `gso_size` payload
/// bytes, one at a time ([`Segmenter::next_segment`]), each a complete
/// frame (no offload left; metadata otherwise copied), so a caller can send
/// them as they come without holding them all.
pub struct Segmenter {
    lay: Layout,
    mss: usize,
    n: usize,
    i: usize,
    ip_id: u16,
    seq: u32,
    ihl: usize,
    udp_csum: bool,
    outer_id: u16,
    outer_csum: bool,
}

impl Segmenter {
    /// A segmenter for super-frame `pkt` (which must stay unchanged while
    /// it is used).
    pub fn new(pkt: &Packet) -> Result<Self, OffloadError> {
        let lay = layout(pkt)?;
        let mss = usize::from(pkt.meta.offload.gso_size);
        if mss == 0 {
            return Err(OffloadError::Malformed);
        }
        let d = pkt.data();
        let payload = lay.end - lay.hdr;
        Ok(Segmenter {
            mss,
            n: payload.div_ceil(mss).max(1),
            i: 0,
            ip_id: if lay.v6 { 0 } else { be16(d, lay.l3 + 4) },
            seq: if lay.proto == TCP {
                be32(d, lay.l4 + 4)
            } else {
                0
            },
            ihl: usize::from(d[lay.l3] & 0x0f) * 4,
            udp_csum: lay.proto == UDP
                && (be16(d, lay.l4 + 6) != 0 || pkt.meta.offload.needs_csum()),
            outer_id: lay
                .outer
                .map_or(0, |o| if o.v6 { 0 } else { be16(d, o.l3 + 4) }),
            outer_csum: pkt.meta.offload.flags & Offload::TUNNEL_CSUM != 0,
            lay,
        })
    }

    /// How many segments `pkt` makes.
    pub fn count(&self) -> usize {
        self.n
    }

    /// The next segment of `pkt`, or `None` after the last.
    pub fn next_segment(
        &mut self,
        pkt: &Packet,
        pool: &mut PacketPool,
    ) -> Option<Result<Packet, OffloadError>> {
        if self.i == self.n {
            return None;
        }
        let (i, n, mss, lay) = (self.i, self.n, self.mss, &self.lay);
        let d = pkt.data();
        let payload = &d[lay.hdr..lay.end];
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        let Some(mut seg) = pool.alloc_for(lay.hdr + chunk.len()) else {
            return Some(Err(OffloadError::NoBuffer));
        };
        self.i += 1;
        seg.set_len(lay.hdr + chunk.len());
        let s = seg.data_mut();
        s[..lay.hdr].copy_from_slice(&d[..lay.hdr]);
        s[lay.hdr..].copy_from_slice(chunk);
        let l4_len = lay.hdr - lay.l4 + chunk.len();
        // IP: lengths, IDs (each segment its own), the IPv4 header checksum.
        let id = self.ip_id.wrapping_add(i as u16);
        segment_ip_header(s, lay.l3, lay.v6, self.ihl, Some(id));
        let csum_at = if lay.proto == TCP {
            let t = lay.l4;
            s[t + 4..t + 8].copy_from_slice(&self.seq.wrapping_add((i * mss) as u32).to_be_bytes());
            if i + 1 < n {
                s[t + 13] &= !(0x01 | 0x08); // FIN, PSH: the last segment's
            }
            if i > 0 {
                s[t + 13] &= !0x80; // CWR: the first segment's
            }
            t + 16
        } else {
            put16(s, lay.l4 + 4, l4_len as u16);
            lay.l4 + 6
        };
        if lay.proto == TCP || self.udp_csum {
            segment_l4_csum(s, lay.l3, lay.v6, lay.l4, lay.proto, csum_at);
        }
        if let Some(o) = lay.outer {
            self.outer_headers(s, o, i);
        }
        seg.meta = pkt.meta;
        seg.meta.offload = Offload::NONE;
        Some(Ok(seg))
    }
}

/// A segment's IP header at `l3` (the segment ends the datagram): its
/// length; IPv4's ID (when given) and header checksum (over `ihl` bytes).
fn segment_ip_header(s: &mut [u8], l3: usize, v6: bool, ihl: usize, id: Option<u16>) {
    let len = s.len();
    if v6 {
        put16(s, l3 + 4, (len - l3 - 40) as u16);
    } else {
        put16(s, l3 + 2, (len - l3) as u16);
        if let Some(id) = id {
            put16(s, l3 + 4, id);
        }
        put16(s, l3 + 10, 0);
        let c = checksum(&s[l3..l3 + ihl]);
        put16(s, l3 + 10, c);
    }
}

/// A segment's full L4 checksum (TCP or UDP at `l4`, to the segment's
/// end, under the IP header at `l3`) written at `csum_at`; a UDP one that
/// comes out 0 is sent as 0xffff.
fn segment_l4_csum(s: &mut [u8], l3: usize, v6: bool, l4: usize, proto: u8, csum_at: usize) {
    let l4_len = s.len() - l4;
    put16(s, csum_at, 0);
    let pseudo = if v6 {
        let src: [u8; 16] = s[l3 + 8..l3 + 24].try_into().expect("16 bytes");
        let dst: [u8; 16] = s[l3 + 24..l3 + 40].try_into().expect("16 bytes");
        pseudo_v6(&src, &dst, proto, l4_len as u32)
    } else {
        pseudo_v4(be32(s, l3 + 12), be32(s, l3 + 16), proto, l4_len as u16)
    };
    let mut c = finish(sum_wide(pseudo, &s[l4..]));
    if proto == UDP && c == 0 {
        c = 0xffff;
    }
    put16(s, csum_at, c);
}

/// Cuts GSO super-frame `pkt` into segments (see [`Segmenter`]), handing
/// each to `out` in order. Returns how many were made; on `Err` the
/// segments made so far have gone to `out`. `pkt` is left as it was.
pub fn segment(
    pkt: &Packet,
    pool: &mut PacketPool,
    out: &mut dyn FnMut(Packet),
) -> Result<usize, OffloadError> {
    let mut seg = Segmenter::new(pkt)?;
    let mut made = 0;
    while let Some(r) = seg.next_segment(pkt, pool) {
        out(r?);
        made += 1;
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Frame, L4};
    use crate::extract::extract;
    use crate::wire::checksum::sum;
    use proptest::prelude::*;

    pub(super) fn pool() -> PacketPool {
        let mut p = PacketPool::new(1024, 2048).unwrap();
        p.add_big_frames(4, 1 << 17).unwrap();
        p
    }

    /// A TCP or UDP super-frame of `payload` bytes as the kernel hands it
    /// over: checksum partial (the pseudo-header sum in the field).
    pub(super) fn super_frame(
        pool: &mut PacketPool,
        v6: bool,
        udp: bool,
        payload: &[u8],
        mss: u16,
    ) -> Packet {
        let l4 = if udp {
            L4::Udp {
                src: 5000,
                dst: 5201,
            }
        } else {
            L4::Tcp {
                src: 5000,
                dst: 5201,
                flags: 0x18 | 0x01 | 0x80,
            }
        };
        let f = if v6 {
            Frame::ipv6(
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                l4,
            )
        } else {
            Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], l4)
        };
        let bytes = f.payload(payload).build();
        let mut p = pool.alloc_from(&bytes).unwrap();
        let mut key = crate::key::FlowKey::default();
        let (data, meta) = p.data_and_meta_mut();
        extract(data, 1, meta, &mut key).unwrap();
        let l4o = p.meta.l4().unwrap();
        let (csum_off, pseudo) = {
            let d = p.data();
            let len = (d.len() - l4o) as u32;
            let l3 = p.meta.l3().unwrap();
            let proto = if udp { UDP } else { TCP };
            let ps = if v6 {
                pseudo_v6(
                    &d[l3 + 8..l3 + 24].try_into().unwrap(),
                    &d[l3 + 24..l3 + 40].try_into().unwrap(),
                    proto,
                    len,
                )
            } else {
                pseudo_v4(be32(d, l3 + 12), be32(d, l3 + 16), proto, len as u16)
            };
            (if udp { 6 } else { 16 }, !finish(ps))
        };
        put16(p.data_mut(), l4o + csum_off, pseudo);
        p.meta.offload = Offload {
            flags: Offload::NEEDS_CSUM
                | if udp {
                    Offload::GSO_UDP_L4
                } else if v6 {
                    Offload::GSO_TCPV6
                } else {
                    Offload::GSO_TCPV4
                },
            gso_size: mss,
            csum_start: l4o as u16,
            csum_offset: csum_off as u8,
        };
        p
    }

    /// Whether the frame's IPv4 header and L4 checksums verify.
    pub(super) fn verifies(f: &[u8], v6: bool) -> bool {
        let l3 = 14;
        let (l4, proto, pseudo) = if v6 {
            let plen = be16(f, l3 + 4) as u32;
            (
                l3 + 40,
                f[l3 + 6],
                pseudo_v6(
                    &f[l3 + 8..l3 + 24].try_into().unwrap(),
                    &f[l3 + 24..l3 + 40].try_into().unwrap(),
                    f[l3 + 6],
                    plen,
                ),
            )
        } else {
            let ihl = (f[l3] & 15) as usize * 4;
            if finish(sum(0, &f[l3..l3 + ihl])) != 0 {
                return false;
            }
            let tot = be16(f, l3 + 2) as usize;
            (
                l3 + ihl,
                f[l3 + 9],
                pseudo_v4(
                    be32(f, l3 + 12),
                    be32(f, l3 + 16),
                    f[l3 + 9],
                    (tot - ihl) as u16,
                ),
            )
        };
        let _ = proto;
        finish(sum(pseudo, &f[l4..])) == 0
    }

    #[test]
    fn vnet_header_round_trip() {
        let o = Offload {
            flags: Offload::NEEDS_CSUM | Offload::GSO_TCPV6 | Offload::ECN,
            gso_size: 1448,
            csum_start: 54,
            csum_offset: 16,
        };
        let h = to_vnet_hdr(&o, 74);
        assert_eq!(h, [1, 0x84, 74, 0, 0xa8, 5, 54, 0, 16, 0]);
        assert_eq!(from_vnet_hdr(&h), Ok(o));
        assert_eq!(from_vnet_hdr(&[0; 10]), Ok(Offload::NONE));
        assert_eq!(
            from_vnet_hdr(&[0, 3, 0, 0, 1, 0, 0, 0, 0, 0]),
            Err(OffloadError::Unsupported)
        );
        assert_eq!(
            from_vnet_hdr(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(OffloadError::Malformed)
        );
        assert_eq!(
            from_vnet_hdr(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            Err(OffloadError::Malformed)
        );
    }

    #[test]
    fn partial_checksum_completes_to_the_full_one() {
        let mut pool = pool();
        for (v6, udp) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut p = super_frame(&mut pool, v6, udp, &[7u8; 300], 1400);
            p.meta.offload.flags &= !Offload::GSO_MASK;
            assert!(!verifies(p.data(), v6));
            complete_csum(&mut p).unwrap();
            assert!(verifies(p.data(), v6), "v6 {v6} udp {udp}");
            assert!(!p.meta.offload.pending());
            pool.free(p);
        }
    }

    #[test]
    fn a_bad_request_is_an_error_not_a_panic() {
        let mut pool = pool();
        let mut p = super_frame(&mut pool, false, false, &[1u8; 100], 40);
        p.meta.offload.csum_start = 200;
        assert_eq!(complete_csum(&mut p), Err(OffloadError::Malformed));
        p.meta.offload.flags = Offload::GSO_TCPV6; // not its protocol
        assert!(!needs_segmenting(&p));
        assert_eq!(
            segment(&p, &mut pool, &mut |_| ()),
            Err(OffloadError::Malformed)
        );
        pool.free(p);
    }

    #[test]
    fn a_tcp_header_shorter_than_20_bytes_is_not_segmented() {
        // A data offset of 2 to 4 words: segments used to be written past
        // their end (the vnet_offload fuzz target's find).
        let mut pool = pool();
        for words in 2..5u8 {
            let mut p = super_frame(&mut pool, false, false, &[1u8; 100], 40);
            let l4 = p.meta.l4().unwrap();
            p.data_mut()[l4 + 12] = words << 4;
            assert_eq!(
                segment(&p, &mut pool, &mut |s| panic!(
                    "a segment of {} bytes",
                    s.len()
                )),
                Err(OffloadError::Malformed),
                "data offset {words}"
            );
            pool.free(p);
        }
        assert_eq!(pool.available(), pool.capacity());
    }

    /// Address and port rewrites on a packet whose checksum is partial
    /// keep it completable: after the rewrite, completing it (or cutting
    /// it into segments) gives valid checksums, and every segment carries
    /// the rewrite.
    #[test]
    fn rewrites_on_partial_checksums_stay_valid() {
        use crate::rewrite::{set_ipv4_dst, set_ipv6_dst, set_tp_port, FragRewrites, PortField};
        let mut pool = pool();
        for (v6, udp) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut p = super_frame(&mut pool, v6, udp, &[0x5a; 5000], 1000);
            if v6 {
                let mut a = [0u8; 16];
                a[15] = 99;
                assert!(set_ipv6_dst(&mut p, a, FragRewrites::Ovs));
            } else {
                assert!(set_ipv4_dst(&mut p, 0x0a00_0063, FragRewrites::Ovs));
            }
            assert!(set_tp_port(&mut p, PortField::Dst, 8080));
            let l4 = p.meta.l4().unwrap();
            let mut segs = Vec::new();
            assert_eq!(segment(&p, &mut pool, &mut |s| segs.push(s)), Ok(5));
            for s in segs {
                assert!(verifies(s.data(), v6), "v6 {v6} udp {udp}");
                assert_eq!(be16(s.data(), l4 + 2), 8080);
                pool.free(s);
            }
            p.meta.offload.flags &= !Offload::GSO_MASK;
            complete_csum(&mut p).unwrap();
            assert!(verifies(p.data(), v6), "v6 {v6} udp {udp}");
            pool.free(p);
        }
    }

    #[test]
    fn ethernet_padding_after_a_short_super_frame_is_not_payload() {
        // 1 byte of TCP payload: the frame is padded to 60 bytes, and the
        // 5 bytes of padding must not become payload of the segment.
        let mut pool = pool();
        let p = super_frame(&mut pool, false, false, &[7], 40);
        assert_eq!(p.len(), 60);
        let mut segs = Vec::new();
        assert_eq!(segment(&p, &mut pool, &mut |s| segs.push(s)), Ok(1));
        let hdr = p.meta.l4().unwrap() + 20;
        assert_eq!(&segs[0].data()[hdr..], &[7]);
        assert!(verifies(segs[0].data(), false));
        for s in segs {
            pool.free(s);
        }
        pool.free(p);
    }

    proptest! {
        /// Segments reassemble to the original payload, each within the
        /// segment size, each with valid IPv4/IPv6 and L4 checksums,
        /// sequence numbers and IDs advancing, flags as Linux's GSO sets them.
        #[test]
        fn segments_reassemble_and_verify(len in 1usize..20_000, mss in 40u16..1500,
                                          v6 in any::<bool>(), udp in any::<bool>(), seed in any::<u8>()) {
            let mut pool = pool();
            let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let p = super_frame(&mut pool, v6, udp, &payload, mss);
            let hdr = if udp { p.meta.l4().unwrap() + 8 } else { p.meta.l4().unwrap() + 20 };
            let mut segs = Vec::new();
            let free_before = pool.available();
            let n = segment(&p, &mut pool, &mut |s| segs.push(s)).unwrap();
            prop_assert_eq!(n, len.div_ceil(mss as usize));
            let mut got = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let f = s.data();
                prop_assert!(f.len() - hdr <= mss as usize);
                prop_assert!(verifies(f, v6), "segment {} of {}", i, n);
                prop_assert!(!s.meta.offload.pending());
                if !udp {
                    let seq0 = be32(p.data(), hdr - 20 + 4);
                    prop_assert_eq!(be32(f, hdr - 20 + 4), seq0.wrapping_add((i * mss as usize) as u32));
                    let flags = f[hdr - 20 + 13];
                    prop_assert_eq!(flags & 0x09 != 0, i + 1 == n, "FIN/PSH only last");
                    prop_assert_eq!(flags & 0x80 != 0, i == 0, "CWR only first");
                }
                if !v6 {
                    prop_assert_eq!(be16(f, 18), be16(p.data(), 18).wrapping_add(i as u16));
                }
                got.extend_from_slice(&f[hdr..]);
            }
            prop_assert_eq!(got, payload);
            prop_assert_eq!(pool.available(), free_before - n);
            for s in segs { pool.free(s); }
            pool.free(p);
        }
    }
}
