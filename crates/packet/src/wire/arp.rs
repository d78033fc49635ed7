//! ARP for IPv4 over Ethernet (the only kind keyed, as in OVS).

use super::{arr, be16, be32, put16, put32, WireError};

/// Length of an Ethernet/IPv4 ARP packet.
pub const ARP_ETH_IPV4_LEN: usize = 28;

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buf` if it holds a complete Ethernet/IPv4 ARP packet
    /// (htype 1, ptype 0x0800, hlen 6, plen 4); `Malformed` otherwise.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < ARP_ETH_IPV4_LEN {
            return Err(WireError::Truncated);
        }
        if be16(b, 0) != 1 || be16(b, 2) != 0x0800 || b[4] != 6 || b[5] != 4 {
            return Err(WireError::Malformed);
        }
        Ok(ArpPacket { buf })
    }

    /// Operation (1 request, 2 reply).
    pub fn op(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    /// Sender hardware address.
    pub fn sha(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 8)
    }
    /// Sender protocol address.
    pub fn spa(&self) -> u32 {
        be32(self.buf.as_ref(), 14)
    }
    /// Target hardware address.
    pub fn tha(&self) -> [u8; 6] {
        arr(self.buf.as_ref(), 18)
    }
    /// Target protocol address.
    pub fn tpa(&self) -> u32 {
        be32(self.buf.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the operation.
    pub fn set_op(&mut self, op: u16) {
        put16(self.buf.as_mut(), 6, op);
    }
    /// Sets the sender hardware address.
    pub fn set_sha(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[8..14].copy_from_slice(&mac);
    }
    /// Sets the sender protocol address.
    pub fn set_spa(&mut self, ip: u32) {
        put32(self.buf.as_mut(), 14, ip);
    }
    /// Sets the target hardware address.
    pub fn set_tha(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[18..24].copy_from_slice(&mac);
    }
    /// Sets the target protocol address.
    pub fn set_tpa(&mut self, ip: u32) {
        put32(self.buf.as_mut(), 24, ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: [u8; 28] = [
        0, 1, 8, 0, 6, 4, 0, 1, // eth/ipv4, request
        0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 10, 0, 0, 1, // sha, spa
        0, 0, 0, 0, 0, 0, 10, 0, 0, 2, // tha, tpa
    ];

    #[test]
    fn getters_and_setters() {
        let mut buf = REQ;
        let mut a = ArpPacket::new_checked(&mut buf[..]).unwrap();
        assert_eq!(a.op(), 1);
        assert_eq!(a.sha(), [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
        assert_eq!(a.spa(), 0x0a00_0001);
        assert_eq!(a.tha(), [0; 6]);
        assert_eq!(a.tpa(), 0x0a00_0002);
        a.set_op(2);
        a.set_sha([1; 6]);
        a.set_spa(7);
        a.set_tha([2; 6]);
        a.set_tpa(8);
        assert_eq!(
            (a.op(), a.sha(), a.spa(), a.tha(), a.tpa()),
            (2, [1; 6], 7, [2; 6], 8)
        );
    }

    #[test]
    fn rejects_other_kinds() {
        assert_eq!(
            ArpPacket::new_checked(&REQ[..27]).unwrap_err(),
            WireError::Truncated
        );
        let mut b = REQ;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}
