//! Metadata that travels with a packet between stages.

/// Marks a layer offset that has not been found (or not parsed yet).
pub const NO_OFFSET: u16 = u16::MAX;

/// Per-packet metadata: where the packet came from, a hash if the port
/// offered one, and the layer offsets the flow-key extraction found, so that
/// later stages (actions, header rewrites) do not parse again (seed 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)] // laid out as PacketMeta::rx_words writes it
pub struct PacketMeta {
    /// OpenFlow port number the packet arrived on.
    pub in_port: u32,
    /// A hash the receiving port computed (RSS or the kernel's skb hash).
    /// Used as the packet's flow hash when `has_hash` is set.
    pub hash: u32,
    /// Whether `hash` is valid: 1, else 0. (A byte, not a `bool`: a
    /// `bool` here would be the tag of an `Option<Packet>`, and a packet
    /// taken out of one would be copied in pieces around that byte into
    /// a temporary, whose wide reloads the core cannot forward from those
    /// pieces; the pointer at the packet's start is the tag instead.)
    pub has_hash: u8,
    /// 1 when the IP and L4 checksums were found right (by the connection
    /// tracker) and every change since kept them right, else 0: a later
    /// tracker of this packet does not sum them again. Any rewrite that
    /// is not known to keep them clears it, as do tunnel headers pushed
    /// or popped. (A byte for the reason `has_hash` is.)
    pub csum_ok: u8,
    /// Offset of the L3 header (after Ethernet and VLAN tags).
    pub l3_ofs: u16,
    /// Offset of the L4 header (after IP options / IPv6 extension headers);
    /// [`NO_OFFSET`] for non-first fragments or when absent.
    pub l4_ofs: u16,
    /// Number of VLAN tags found (0..=2) at offset 12.
    pub n_vlans: u8,
    /// The L4 protocol found at `l4_ofs` (IPv6: after extension headers).
    pub l4_proto: u8,
    /// EtherType of the L3 header at `l3_ofs` (0 when none).
    pub l3_type: u16,
    /// What the sender left for the hardware to do (a virtio-net header's
    /// checksum and segmentation requests); [`Offload::NONE`] for a
    /// complete frame. Fits the padding the fields around it leave.
    pub offload: Offload,
    /// When the packet was received, in ns since the Unix epoch, as the
    /// port knows it (a capture's own timestamp for pcap input; 0 when the
    /// port does not say). Output captures reuse it, so replaying a capture
    /// gives byte-identical output files.
    pub rx_ts_ns: u64,
}

/// Work a packet still needs before it is valid on the wire, as a
/// virtio-net header states it (a vnet-header AF_PACKET or tap port
/// receives such packets from the kernel): an L4 checksum to complete and
/// a super-frame to cut into segments of `gso_size` payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)] // 6 bytes, inside PacketMeta's layout
pub struct Offload {
    /// Payload bytes per segment (GSO packets only).
    pub gso_size: u16,
    /// Where the checksummed bytes start, from the start of the frame.
    pub csum_start: u16,
    /// [`Offload::NEEDS_CSUM`], [`Offload::ECN`] and a GSO kind
    /// ([`Offload::GSO_MASK`]).
    pub flags: u8,
    /// Where the checksum goes, from `csum_start` (16 for TCP, 6 for UDP).
    pub csum_offset: u8,
}

impl Offload {
    /// A complete frame: nothing left to do.
    pub const NONE: Offload = Offload {
        flags: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };
    /// The L4 checksum field holds only the pseudo-header sum: the sum
    /// from `csum_start` to the end must be completed into it.
    pub const NEEDS_CSUM: u8 = 0x80;
    /// GSO with ECN: the CWR flag of the first segment stays.
    pub const ECN: u8 = 0x40;
    /// The GSO kind bits.
    pub const GSO_MASK: u8 = 0x07;
    /// TCP over IPv4 segmentation.
    pub const GSO_TCPV4: u8 = 1;
    /// TCP over IPv6 segmentation.
    pub const GSO_TCPV6: u8 = 2;
    /// UDP segmentation (each segment its own datagram, `UDP_SEGMENT`).
    pub const GSO_UDP_L4: u8 = 3;
    /// The super-frame is inside a UDP tunnel (VXLAN, Geneve): outer
    /// Ethernet, IP and UDP headers and the tunnel's own come first, and
    /// the GSO kind, `csum_start` and the partial checksum are the inner
    /// frame's. Each segment gets the outer headers too, with the outer
    /// lengths and IPv4 ID and checksum its own (the kernel's
    /// `SKB_GSO_UDP_TUNNEL`). Only with a GSO kind.
    pub const UDP_TUNNEL: u8 = 0x08;
    /// With [`Offload::UDP_TUNNEL`]: each segment's outer UDP checksum is
    /// to be made (the field holds the pseudo-header sum of the
    /// super-frame; `SKB_GSO_UDP_TUNNEL_CSUM`). Without it the outer UDP
    /// checksum is 0.
    pub const TUNNEL_CSUM: u8 = 0x10;

    /// The GSO kind (0: not a super-frame).
    #[inline]
    pub fn gso(&self) -> u8 {
        self.flags & Self::GSO_MASK
    }

    /// Whether the L4 checksum still has to be completed.
    #[inline]
    pub fn needs_csum(&self) -> bool {
        self.flags & Self::NEEDS_CSUM != 0
    }

    /// Whether anything is left to do.
    #[inline]
    pub fn pending(&self) -> bool {
        self.flags != 0
    }

    /// What a receiver must be able to do to take this packet as it is.
    #[inline]
    pub fn needs(&self) -> OffloadMask {
        let mut m = 0;
        if self.needs_csum() {
            m |= OffloadMask::CSUM;
        }
        m |= match self.gso() {
            Self::GSO_TCPV4 => OffloadMask::TSO4,
            Self::GSO_TCPV6 => OffloadMask::TSO6,
            Self::GSO_UDP_L4 => OffloadMask::USO,
            _ => 0,
        };
        if self.flags & Self::ECN != 0 {
            m |= OffloadMask::ECN;
        }
        if self.flags & Self::UDP_TUNNEL != 0 {
            m |= OffloadMask::UDP_TUNNEL;
        }
        if self.flags & Self::TUNNEL_CSUM != 0 {
            m |= OffloadMask::TUNNEL_CSUM;
        }
        OffloadMask(m)
    }
}

/// The offload requests a port can take with a packet now: partial
/// checksums, TCP (v4, v6) and UDP super-frames, ECN on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OffloadMask(pub u8);

impl OffloadMask {
    /// Partial checksums.
    pub const CSUM: u8 = 1;
    /// TCP over IPv4 super-frames.
    pub const TSO4: u8 = 2;
    /// TCP over IPv6 super-frames.
    pub const TSO6: u8 = 4;
    /// UDP super-frames.
    pub const USO: u8 = 8;
    /// ECN on TCP super-frames.
    pub const ECN: u8 = 16;
    /// Super-frames inside a UDP tunnel ([`Offload::UDP_TUNNEL`]).
    pub const UDP_TUNNEL: u8 = 32;
    /// ... with the outer UDP checksum made per segment.
    pub const TUNNEL_CSUM: u8 = 64;
    /// Nothing: every request is carried out before the packet goes.
    pub const NONE: OffloadMask = OffloadMask(0);
    /// What a plain virtio-net header states (a kernel socket or tap with
    /// virtio-net headers): everything but tunnelled super-frames.
    pub const ALL: OffloadMask = OffloadMask(0x1f);
    /// Everything, tunnelled super-frames too (a tap with the kernel's
    /// UDP-tunnel GSO, Linux 6.17 on).
    pub const ALL_TUNNEL: OffloadMask = OffloadMask(0x7f);

    /// Whether a packet with offload state `o` can go as it is.
    #[inline]
    pub fn takes(self, o: &Offload) -> bool {
        o.needs().0 & !self.0 == 0
    }
}

// The offload state and `csum_ok` ride in the padding: a packet's metadata
// stays 32 bytes, laid out as `rx_words` writes it.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<PacketMeta>() == 32 && size_of::<Offload>() == 6);
    assert!(offset_of!(PacketMeta, in_port) == 0 && offset_of!(PacketMeta, hash) == 4);
    assert!(offset_of!(PacketMeta, has_hash) == 8 && offset_of!(PacketMeta, csum_ok) == 9);
    assert!(offset_of!(PacketMeta, l3_ofs) == 10 && offset_of!(PacketMeta, l4_ofs) == 12);
    assert!(offset_of!(PacketMeta, n_vlans) == 14 && offset_of!(PacketMeta, l4_proto) == 15);
    assert!(offset_of!(PacketMeta, l3_type) == 16 && offset_of!(PacketMeta, offload) == 18);
    assert!(offset_of!(PacketMeta, rx_ts_ns) == 24);
};

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            in_port: 0,
            hash: 0,
            has_hash: 0,
            csum_ok: 0,
            l3_ofs: NO_OFFSET,
            l4_ofs: NO_OFFSET,
            n_vlans: 0,
            l4_proto: 0,
            l3_type: 0,
            rx_ts_ns: 0,
            offload: Offload::NONE,
        }
    }
}

impl PacketMeta {
    /// The metadata of a packet just received on `in_port` with `hash` (a
    /// device's RSS hash, if it gave one), as the four little-endian words
    /// of its layout: what [`PacketMeta::default`] with those fields set
    /// holds, for a receive loop that writes a packet as whole words (see
    /// the layout asserted above; a test compares the two).
    #[inline(always)]
    pub const fn rx_words(in_port: u32, hash: Option<u32>) -> [u64; 4] {
        let (hash, has) = match hash {
            Some(h) => (h as u64, 1u64),
            None => (0, 0),
        };
        let ofs = NO_OFFSET as u64;
        [
            in_port as u64 | hash << 32,
            has | ofs << 16 | ofs << 32,
            0,
            0,
        ]
    }

    /// Offset of the L3 header, if found.
    #[inline]
    pub fn l3(&self) -> Option<usize> {
        (self.l3_ofs != NO_OFFSET).then_some(self.l3_ofs as usize)
    }

    /// Offset of the L4 header, if found.
    #[inline]
    pub fn l4(&self) -> Option<usize> {
        (self.l4_ofs != NO_OFFSET).then_some(self.l4_ofs as usize)
    }
}
