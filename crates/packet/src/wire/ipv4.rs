//! IPv4 headers, options included.

use super::{be16, be32, checksum, put16, put32, WireError};

/// Minimum IPv4 header length.
pub const IPV4_MIN_HEADER_LEN: usize = 20;

/// "More fragments" flag in the flags/fragment-offset word.
pub const FLAG_MF: u16 = 0x2000;
/// "Don't fragment" flag.
pub const FLAG_DF: u16 = 0x4000;
/// Fragment offset bits.
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 header.
///
/// `new_checked` applies the checks Open vSwitch applies before it keys L3
/// fields: a complete base header, IHL >= 5, the whole header present, and
/// total length covering the header and not exceeding the bytes given. The
/// version nibble is not checked, as in OVS.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buf`, validating the lengths.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < IPV4_MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let hl = ((b[0] & 0x0f) as usize) * 4;
        if hl < IPV4_MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if b.len() < hl {
            return Err(WireError::Truncated);
        }
        let tot = be16(b, 2) as usize;
        if tot < hl {
            return Err(WireError::Malformed);
        }
        if tot > b.len() {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        ((self.b()[0] & 0x0f) as usize) * 4
    }
    /// The TOS byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.b()[1]
    }
    /// Total length.
    pub fn total_len(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Flags and fragment offset word.
    pub fn frag_word(&self) -> u16 {
        be16(self.b(), 6)
    }
    /// Whether this is any fragment (MF set or offset non-zero).
    pub fn is_fragment(&self) -> bool {
        self.frag_word() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }
    /// Whether this is a fragment other than the first.
    pub fn is_later_fragment(&self) -> bool {
        self.frag_word() & FRAG_OFFSET_MASK != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }
    /// Protocol.
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }
    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 10)
    }
    /// Source address.
    pub fn src(&self) -> u32 {
        be32(self.b(), 12)
    }
    /// Destination address.
    pub fn dst(&self) -> u32 {
        be32(self.b(), 16)
    }
    /// Whether the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.b()[..self.header_len()]) == 0
    }
    /// The payload, bounded by the total length (padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// Sets the TOS byte, updating the header checksum.
    pub fn set_tos(&mut self, tos: u8) {
        let old = be16(self.b(), 0);
        self.bm()[1] = tos;
        self.fix16(old, be16(self.b(), 0));
    }
    /// Sets the TTL, updating the header checksum.
    pub fn set_ttl(&mut self, ttl: u8) {
        let old = be16(self.b(), 8);
        self.bm()[8] = ttl;
        self.fix16(old, be16(self.b(), 8));
    }
    /// Sets the protocol, updating the header checksum.
    pub fn set_protocol(&mut self, p: u8) {
        let old = be16(self.b(), 8);
        self.bm()[9] = p;
        self.fix16(old, be16(self.b(), 8));
    }
    /// Sets the source address, updating the header checksum.
    pub fn set_src(&mut self, ip: u32) {
        let old = self.src();
        put32(self.bm(), 12, ip);
        let c = checksum::update32(self.checksum(), old, ip);
        put16(self.bm(), 10, c);
    }
    /// Sets the destination address, updating the header checksum.
    pub fn set_dst(&mut self, ip: u32) {
        let old = self.dst();
        put32(self.bm(), 16, ip);
        let c = checksum::update32(self.checksum(), old, ip);
        put16(self.bm(), 10, c);
    }
    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        put16(self.bm(), 10, 0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.b()[..hl]);
        put16(self.bm(), 10, c);
    }

    fn fix16(&mut self, old: u16, new: u16) {
        let c = checksum::update16(self.checksum(), old, new);
        put16(self.bm(), 10, c);
    }
}

/// Formats an IPv4 address held as a host-order integer.
pub fn fmt_ipv4(ip: u32) -> String {
    std::net::Ipv4Addr::from(ip).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    // 20-byte header: tos 0x10, tot 28, ident 1, DF, ttl 64, udp, 10.0.0.1 -> 10.0.0.2
    fn hdr() -> Vec<u8> {
        let mut h = vec![
            0x45, 0x10, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 0,
            0, 0, 0, 0,
        ];
        let c = checksum::checksum(&h[..20]);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn getters() {
        let h = hdr();
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.tos(), 0x10);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 1);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 17);
        assert_eq!(p.src(), 0x0a00_0001);
        assert_eq!(p.dst(), 0x0a00_0002);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 8);
        assert_eq!(fmt_ipv4(p.src()), "10.0.0.1");
    }

    #[test]
    fn setters_keep_checksum_valid() {
        let mut h = hdr();
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        p.set_tos(0xb8);
        p.set_ttl(3);
        p.set_src(0xc0a8_0101);
        p.set_dst(0x0808_0808);
        assert!(p.verify_checksum());
        assert_eq!(
            (p.tos(), p.ttl(), p.src(), p.dst()),
            (0xb8, 3, 0xc0a8_0101, 0x0808_0808)
        );
        p.fill_checksum();
        assert!(p.verify_checksum());
    }

    #[test]
    fn length_checks() {
        let h = hdr();
        assert_eq!(
            Ipv4Packet::new_checked(&h[..19]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = h.clone();
        bad[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut long = h.clone();
        long[3] = 200;
        assert_eq!(
            Ipv4Packet::new_checked(&long[..]).unwrap_err(),
            WireError::Truncated
        );
        let mut short = h.clone();
        short[3] = 10;
        assert_eq!(
            Ipv4Packet::new_checked(&short[..]).unwrap_err(),
            WireError::Malformed
        );
        // Options: IHL 6 needs 24 bytes.
        let mut opt = h;
        opt[0] = 0x46;
        assert!(Ipv4Packet::new_checked(&opt[..22]).is_err());
        assert_eq!(Ipv4Packet::new_checked(&opt[..]).unwrap().header_len(), 24);
    }

    #[test]
    fn fragments() {
        let mut h = hdr();
        h[6] = 0x20; // MF
        h[7] = 0;
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert!(p.is_fragment() && !p.is_later_fragment());
        h[6] = 0x00;
        h[7] = 0x10;
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert!(p.is_fragment() && p.is_later_fragment());
    }
}
