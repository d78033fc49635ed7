//! Ethernet II frames and 802.1Q / 802.1ad VLAN tags.

use super::{arr, be16, put16, WireError};

/// Ethernet header length (no tags).
pub const ETH_HEADER_LEN: usize = 14;
/// One VLAN tag (TPID + TCI).
pub const VLAN_HEADER_LEN: usize = 4;

/// EtherType values Sluice understands.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// RARP (keyed like ARP).
    pub const RARP: u16 = 0x8035;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q customer VLAN tag.
    pub const VLAN_8021Q: u16 = 0x8100;
    /// 802.1ad service VLAN tag (QinQ outer).
    pub const VLAN_8021AD: u16 = 0x88a8;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MCAST: u16 = 0x8848;
    /// 802.1ah provider backbone bridging: an I-TAG follows.
    pub const PBB: u16 = 0x88e7;
    /// Smallest value that is an EtherType rather than an 802.3 length.
    pub const MIN: u16 = 0x0600;
}

/// Whether `tpid` introduces a VLAN tag.
#[inline]
pub fn is_vlan_tpid(tpid: u16) -> bool {
    tpid == ethertype::VLAN_8021Q || tpid == ethertype::VLAN_8021AD
}

/// Whether `t` is an MPLS EtherType (unicast or multicast).
#[inline]
pub fn is_mpls(t: u16) -> bool {
    t == ethertype::MPLS || t == ethertype::MPLS_MCAST
}

/// An MPLS label stack entry (host order, as on the wire: label 20 bits,
/// traffic class 3, bottom of stack 1, TTL 8).
pub mod mpls {
    /// Length of one label stack entry.
    pub const LSE_LEN: usize = 4;
    /// Label bits.
    pub const LABEL_MASK: u32 = 0xffff_f000;
    /// Label shift.
    pub const LABEL_SHIFT: u32 = 12;
    /// Traffic class bits.
    pub const TC_MASK: u32 = 0x0000_0e00;
    /// Traffic class shift.
    pub const TC_SHIFT: u32 = 9;
    /// Bottom-of-stack bit.
    pub const BOS: u32 = 0x0000_0100;
    /// TTL bits.
    pub const TTL_MASK: u32 = 0x0000_00ff;

    /// The TTL of `lse`.
    #[inline]
    pub fn ttl(lse: u32) -> u8 {
        lse as u8
    }

    /// `lse` with TTL `ttl`.
    #[inline]
    pub fn with_ttl(lse: u32, ttl: u8) -> u32 {
        (lse & !TTL_MASK) | u32::from(ttl)
    }
}

/// An 802.1ah I-TAG: priority, DEI, UCA and reserved bits in the first
/// byte, the service instance ID (I-SID) in the other three.
pub mod itag {
    /// Length of an I-TAG (after its EtherType).
    pub const LEN: usize = 4;
    /// The I-SID bits.
    pub const ISID_MASK: u32 = 0x00ff_ffff;
    /// Bytes `push_pbb` adds: backbone destination and source, EtherType,
    /// I-TAG.
    pub const PUSH_LEN: usize = 12 + 2 + LEN;
}

/// VLAN TCI bits.
pub mod tci {
    /// The VLAN ID.
    pub const VID_MASK: u16 = 0x0fff;
    /// Priority code point, shifted by [`PCP_SHIFT`].
    pub const PCP_MASK: u16 = 0xe000;
    /// Shift of the PCP field.
    pub const PCP_SHIFT: u16 = 13;
    /// In a flow key: "a tag is present" (OVS reuses the CFI/DEI bit so that
    /// VID 0 with a tag differs from no tag). On the wire it is the DEI bit.
    pub const PRESENT: u16 = 0x1000;
}

/// A view of an Ethernet header.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buf`, checking that it holds an Ethernet header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < ETH_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buf })
    }

    /// Destination MAC address.
    pub fn dst(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 0)
    }

    /// Source MAC address.
    pub fn src(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 6)
    }

    /// The EtherType (or TPID) right after the addresses.
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), 12)
    }

    /// The bytes after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[ETH_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[0..6].copy_from_slice(&mac);
    }

    /// Sets the source MAC.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[6..12].copy_from_slice(&mac);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buf.as_mut(), 12, t);
    }
}

/// A view of one VLAN tag as it sits in a frame: TPID at `at`, TCI after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Tag control information: PCP (3 bits), DEI (1), VID (12).
    pub tci: u16,
}

impl VlanTag {
    /// Reads the tag at byte offset `at` of `frame` (TPID, then TCI).
    pub fn read(frame: &[u8], at: usize) -> Result<Self, WireError> {
        if frame.len() < at + VLAN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(VlanTag {
            tpid: be16(frame, at),
            tci: be16(frame, at + 2),
        })
    }

    /// The VLAN ID.
    pub fn vid(&self) -> u16 {
        self.tci & tci::VID_MASK
    }

    /// The priority code point.
    pub fn pcp(&self) -> u8 {
        (self.tci >> tci::PCP_SHIFT) as u8
    }
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
    )
}

/// Parses what [`fmt_mac`] writes: six pairs of hex digits joined by
/// colons (either case).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        let p = parts.next().filter(|p| p.len() == 2)?;
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_back_from_their_text() {
        let m = [0x02, 0x00, 0x0a, 0x5a, 0xff, 0x01];
        assert_eq!(parse_mac(&fmt_mac(&m)), Some(m));
        assert_eq!(parse_mac("02:00:0A:5A:FF:01"), Some(m));
        for bad in [
            "02:00:0a:5a:ff",
            "02:00:0a:5a:ff:01:02",
            "2:0:a:5a:ff:1",
            "zz:00:00:00:00:00",
            "",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    const FRAME: [u8; 18] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x81, 0x00, 0x60, 0x64, // 802.1Q, pcp 3, vid 100
        0x08, 0x00,
    ];

    #[test]
    fn getters() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst(), [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(f.src(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(f.ethertype(), ethertype::VLAN_8021Q);
        assert_eq!(f.payload().len(), 4);
        let tag = VlanTag::read(&FRAME, 12).unwrap();
        assert_eq!((tag.vid(), tag.pcp()), (100, 3));
        assert!(VlanTag::read(&FRAME, 16).is_err());
        assert!(EthernetFrame::new_checked(&FRAME[..13]).is_err());
        assert_eq!(fmt_mac(&f.src()), "66:77:88:99:aa:bb");
    }

    #[test]
    fn setters() {
        let mut buf = FRAME;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst([1; 6]);
        f.set_src([2; 6]);
        f.set_ethertype(0x86dd);
        assert_eq!((f.dst(), f.src(), f.ethertype()), ([1; 6], [2; 6], 0x86dd));
    }
}
