//! Super-frames inside UDP tunnels (VXLAN, Geneve): the tunnel form of
//! the virtio-net header a tap exchanges with UDP-tunnel GSO (Linux 6.17
//! on), where such a frame's outer and inner headers are, and the outer
//! headers of each segment cut from one.

use super::{be16, from_vnet_hdr, layout, put16, to_vnet_hdr, vnet_hdr_of, OffloadError};
use super::{segment_ip_header, segment_l4_csum, Segmenter, ETH_IPV4, ETH_IPV6, UDP, VNET_HDR_LEN};
use crate::meta::Offload;
use crate::pool::Packet;

const VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM: u8 = 8;
const VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
const VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
const VIRTIO_NET_HDR_GSO_UDP_TUNNEL: u8 =
    VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4 | VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6;

/// Bytes of a `struct virtio_net_hdr_v1_hash_tunnel`: the header a tap
/// exchanges once told it takes UDP-tunnel GSO (`TUN_F_UDP_TUNNEL_GSO`):
/// the plain header, `num_buffers`, the hash fields (unused here), then the
/// outer transport and inner network header offsets.
pub const VNET_HDR_TNL_LEN: usize = 24;

/// The offload requests of a tunnel-form virtio-net header
/// ([`VNET_HDR_TNL_LEN`] bytes). A tunnelled super-frame must ask for its
/// inner checksum, as the kernel requires; the offsets the header gives
/// are not kept (they are found again in the frame when it is cut).
pub fn from_vnet_hdr_tnl(h: &[u8; VNET_HDR_TNL_LEN]) -> Result<Offload, OffloadError> {
    let tnl = h[1] & VIRTIO_NET_HDR_GSO_UDP_TUNNEL;
    let mut plain = [0u8; VNET_HDR_LEN];
    plain.copy_from_slice(&h[..VNET_HDR_LEN]);
    plain[0] &= !VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM;
    plain[1] &= !VIRTIO_NET_HDR_GSO_UDP_TUNNEL;
    let mut o = from_vnet_hdr(&plain)?;
    if tnl == 0 {
        return Ok(o);
    }
    if tnl == VIRTIO_NET_HDR_GSO_UDP_TUNNEL || o.gso() == 0 || !o.needs_csum() {
        return Err(OffloadError::Malformed);
    }
    o.flags |= Offload::UDP_TUNNEL;
    if h[0] & VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM != 0 {
        o.flags |= Offload::TUNNEL_CSUM;
    }
    Ok(o)
}

/// The tunnel-form virtio-net header that states `pkt`'s offload requests
/// (`None` when `pkt` is a tunnelled super-frame whose headers cannot be
/// found: it cannot be sent as it is).
pub fn vnet_hdr_tnl_of(pkt: &Packet) -> Option<[u8; VNET_HDR_TNL_LEN]> {
    let mut h = [0u8; VNET_HDR_TNL_LEN];
    let o = &pkt.meta.offload;
    if o.flags & Offload::UDP_TUNNEL == 0 {
        h[..VNET_HDR_LEN].copy_from_slice(&vnet_hdr_of(pkt));
        return Some(h);
    }
    let lay = layout(pkt).ok()?;
    let outer = lay.outer?;
    h[..VNET_HDR_LEN].copy_from_slice(&to_vnet_hdr(o, lay.hdr as u16));
    h[1] |= if outer.v6 {
        VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6
    } else {
        VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4
    };
    if o.flags & Offload::TUNNEL_CSUM != 0 {
        h[0] |= VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM;
    }
    h[20..22].copy_from_slice(&(outer.th as u16).to_le_bytes());
    h[22..24].copy_from_slice(&(lay.l3 as u16).to_le_bytes());
    Some(h)
}

/// The outer IP and UDP headers of a tunnelled super-frame.
#[derive(Clone, Copy)]
pub(super) struct Outer {
    pub(super) l3: usize,
    pub(super) th: usize,
    pub(super) v6: bool,
}

/// The L3 offset and EtherType of the Ethernet frame at `at` (VLAN tags
/// skipped).
fn eth_l3(d: &[u8], at: usize) -> Option<(usize, u16)> {
    let mut t = at + 12;
    loop {
        if d.len() < t + 2 {
            return None;
        }
        match be16(d, t) {
            0x8100 | 0x88a8 => t += 4,
            ty => return Some((t + 2, ty)),
        }
    }
}

/// The outer headers of a tunnelled super-frame and where its inner IP
/// header starts: outer Ethernet and IPv4 or IPv6 carrying UDP, then a
/// VXLAN or Geneve header (Geneve's says its protocol, Ethernet; VXLAN's
/// has its I flag), then the inner Ethernet frame.
pub(super) fn tunnel_headers(d: &[u8]) -> Option<(Outer, usize)> {
    let (l3, ty) = eth_l3(d, 0)?;
    let (th, v6) = match ty {
        ETH_IPV4 if d.len() >= l3 + 20 && d[l3] >> 4 == 4 && d[l3 + 9] == UDP => {
            (l3 + usize::from(d[l3] & 0x0f) * 4, false)
        }
        ETH_IPV6 if d.len() >= l3 + 40 && d[l3 + 6] == UDP => (l3 + 40, true),
        _ => return None,
    };
    if th < l3 + 20 {
        return None;
    }
    let t = th + 8;
    if d.len() < t + 8 {
        return None;
    }
    let inner_eth = if be16(d, t + 2) == 0x6558 && d[t] >> 6 == 0 {
        t + 8 + usize::from(d[t] & 0x3f) * 4
    } else if d[t] & 0x08 != 0 {
        t + 8
    } else {
        return None;
    };
    let (inner_l3, _) = eth_l3(d, inner_eth)?;
    Some((Outer { l3, th, v6 }, inner_l3))
}

impl Segmenter {
    /// A tunnelled segment's outer headers (its inner frame final): IP
    /// length, IPv4 ID and header checksum, UDP length and checksum (made
    /// when asked for, else 0). The IPv4 ID stays the super-frame's when
    /// it has DF set (no fragment ever needs it, RFC 6864: each segment
    /// as Sluice encapsulates a single frame), else each segment gets its
    /// own, as the kernel's GSO numbers them.
    pub(super) fn outer_headers(&self, s: &mut [u8], o: Outer, i: usize) {
        let df = !o.v6 && s[o.l3 + 6] & 0x40 != 0;
        let id = (!df).then(|| self.outer_id.wrapping_add(i as u16));
        segment_ip_header(s, o.l3, o.v6, o.th - o.l3, id);
        let ulen = s.len() - o.th;
        put16(s, o.th + 4, ulen as u16);
        if self.outer_csum {
            segment_l4_csum(s, o.l3, o.v6, o.th, UDP, o.th + 6);
        } else {
            put16(s, o.th + 6, 0);
        }
    }
}
