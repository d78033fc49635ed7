//! TCP, UDP and SCTP headers: ports, flags and checksum fields.

use super::{be16, be32, put16, put32, WireError};

/// IP protocol numbers.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// Minimum TCP header length.
pub const TCP_MIN_HEADER_LEN: usize = 20;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// SCTP common header length.
pub const SCTP_HEADER_LEN: usize = 12;

macro_rules! ports_view {
    ($name:ident, $min:expr, $csum_doc:literal) => {
        /// A view of the header's fixed part; `new_checked` requires it whole.
        #[derive(Debug, Clone, Copy)]
        pub struct $name<T: AsRef<[u8]>> {
            buf: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buf`, checking the header's fixed part is present.
            pub fn new_checked(buf: T) -> Result<Self, WireError> {
                if buf.as_ref().len() < $min {
                    return Err(WireError::Truncated);
                }
                Ok($name { buf })
            }
            /// Source port.
            pub fn src_port(&self) -> u16 {
                be16(self.buf.as_ref(), 0)
            }
            /// Destination port.
            pub fn dst_port(&self) -> u16 {
                be16(self.buf.as_ref(), 2)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[doc = "Sets the source port without touching the checksum"]
            #[doc = $csum_doc]
            pub fn set_src_port_raw(&mut self, p: u16) {
                put16(self.buf.as_mut(), 0, p);
            }
            #[doc = "Sets the destination port without touching the checksum"]
            #[doc = $csum_doc]
            pub fn set_dst_port_raw(&mut self, p: u16) {
                put16(self.buf.as_mut(), 2, p);
            }
        }
    };
}

ports_view!(TcpHeader, TCP_MIN_HEADER_LEN, "(the caller updates it).");
ports_view!(UdpHeader, UDP_HEADER_LEN, "(the caller updates it).");
ports_view!(
    SctpHeader,
    SCTP_HEADER_LEN,
    "(the caller recomputes the CRC32c)."
);

impl<T: AsRef<[u8]>> TcpHeader<T> {
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    /// Header length in bytes, from the data offset.
    pub fn header_len(&self) -> usize {
        ((self.buf.as_ref()[12] >> 4) as usize) * 4
    }
    /// Whether the header is sound inside `l4_len` bytes of L4 data, as
    /// Open vSwitch asks before it keys or rewrites TCP fields: a data
    /// offset of at least 5 words, and the whole header (options included)
    /// present. A TCP header that fails this has no ports for matching and
    /// a port rewrite leaves it alone.
    pub fn check_len(self, l4_len: usize) -> Result<Self, WireError> {
        let hl = self.header_len();
        if hl < TCP_MIN_HEADER_LEN || hl > l4_len {
            return Err(WireError::Truncated);
        }
        Ok(self)
    }
    /// The 12 flag bits (NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN and the
    /// three reserved bits), as OVS keys `tcp_flags`.
    pub fn flags(&self) -> u16 {
        be16(self.buf.as_ref(), 12) & 0x0fff
    }
    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 16)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpHeader<T> {
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf.as_mut(), 16, c);
    }
}

impl<T: AsRef<[u8]>> UdpHeader<T> {
    /// Length field (header + data).
    pub fn length(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    /// Checksum (0 over IPv4 means "none").
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpHeader<T> {
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf.as_mut(), 6, c);
    }
}

impl<T: AsRef<[u8]>> SctpHeader<T> {
    /// Verification tag.
    pub fn vtag(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    /// CRC32c checksum field (stored little-endian on the wire per RFC 3309
    /// appendix; read here as the raw big-endian word for comparison only).
    pub fn checksum_raw(&self) -> u32 {
        be32(self.buf.as_ref(), 8)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpHeader<T> {
    /// Recomputes the CRC32c over the whole SCTP packet (`buf` must hold
    /// exactly the SCTP header and its chunks).
    pub fn fill_checksum(&mut self) {
        put32(self.buf.as_mut(), 8, 0);
        let crc = super::checksum::crc32c(self.buf.as_ref());
        self.buf.as_mut()[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    /// Runs `change` on the header and updates the CRC32c so that it is
    /// as right or as wrong as before (Open vSwitch's
    /// `old ^ correct_old ^ correct_new`): a packet that arrived corrupted
    /// stays detectably corrupted.
    pub fn update_checksum_around(&mut self, change: impl FnOnce(&mut Self)) {
        let old: [u8; 4] = self.buf.as_ref()[8..12].try_into().expect("4 bytes");
        self.fill_checksum();
        let right_before: [u8; 4] = self.buf.as_ref()[8..12].try_into().expect("4 bytes");
        change(self);
        self.fill_checksum();
        for i in 0..4 {
            self.buf.as_mut()[8 + i] ^= old[i] ^ right_before[i];
        }
    }
    /// Whether the CRC32c verifies.
    pub fn verify_checksum(&mut self) -> bool {
        let stored = [
            self.buf.as_ref()[8],
            self.buf.as_ref()[9],
            self.buf.as_ref()[10],
            self.buf.as_ref()[11],
        ];
        self.fill_checksum();
        let ok = self.buf.as_ref()[8..12] == stored;
        self.buf.as_mut()[8..12].copy_from_slice(&stored);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_fields() {
        let mut h = [0u8; 20];
        h[0..2].copy_from_slice(&1234u16.to_be_bytes());
        h[2..4].copy_from_slice(&80u16.to_be_bytes());
        h[4..8].copy_from_slice(&7u32.to_be_bytes());
        h[12] = 0x51; // data offset 5, NS bit set
        h[13] = 0x12; // SYN+ACK
        h[16..18].copy_from_slice(&0xbeefu16.to_be_bytes());
        let mut t = TcpHeader::new_checked(&mut h[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port(), t.seq()), (1234, 80, 7));
        assert_eq!(t.header_len(), 20);
        assert_eq!(t.flags(), 0x112);
        assert_eq!(t.checksum(), 0xbeef);
        t.set_src_port_raw(1);
        t.set_dst_port_raw(2);
        t.set_checksum(3);
        assert_eq!((t.src_port(), t.dst_port(), t.checksum()), (1, 2, 3));
        assert!(TcpHeader::new_checked(&h[..19]).is_err());
    }

    #[test]
    fn udp_fields() {
        let mut h = [0, 53, 0x30, 0x39, 0, 8, 0x12, 0x34];
        let mut u = UdpHeader::new_checked(&mut h[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (53, 12345, 8, 0x1234)
        );
        u.set_checksum(0);
        assert_eq!(u.checksum(), 0);
        assert!(UdpHeader::new_checked(&h[..7]).is_err());
    }

    #[test]
    fn sctp_crc() {
        let mut h = [0u8; 16];
        h[0..2].copy_from_slice(&5000u16.to_be_bytes());
        h[2..4].copy_from_slice(&6000u16.to_be_bytes());
        h[4..8].copy_from_slice(&0xdeadbeefu32.to_be_bytes());
        let mut s = SctpHeader::new_checked(&mut h[..]).unwrap();
        assert_eq!(
            (s.src_port(), s.dst_port(), s.vtag()),
            (5000, 6000, 0xdeadbeef)
        );
        s.fill_checksum();
        assert!(s.verify_checksum());
        s.set_dst_port_raw(1);
        assert!(!s.verify_checksum());
        assert!(SctpHeader::new_checked(&h[..11]).is_err());
    }
}
