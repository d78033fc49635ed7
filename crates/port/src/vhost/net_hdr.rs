//! The virtio-net header of a frame for the guest, as two words.
//!
//! Held in registers and written into the guest's buffer as two stores
//! ([`GuestMap::write_header`](super::guest::GuestMap::write_header)),
//! never staged as bytes on the stack and copied from there: a copy reads
//! those bytes back with loads that span several of the smaller stores
//! that wrote them, which the core cannot forward from its store buffer,
//! so each such load waits until every older store has left the core —
//! among them the frame before's stores into the guest's buffers, each a
//! line the guest's core holds. In PVP that wait was a third of the PMD's
//! time (docs/vhost.md).

/// A virtio-net header of 10 bytes (legacy, without `MRG_RXBUF`) or 12
/// (`VERSION_1` or `MRG_RXBUF`: with `num_buffers`), little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetHdr {
    /// Bytes 0..8: flags, gso_type, hdr_len, gso_size, csum_start.
    lo: u64,
    /// Bytes 8..12: csum_offset, then num_buffers (12-byte headers).
    hi: u32,
    len: u8,
}

/// The longest header.
pub const MAX_LEN: usize = 12;

impl NetHdr {
    /// An all-zero header of `len` bytes (10 or 12): no offload request.
    #[inline]
    pub fn zero(len: usize) -> NetHdr {
        debug_assert!(len == 10 || len == MAX_LEN);
        NetHdr {
            lo: 0,
            hi: 0,
            len: len as u8,
        }
    }

    /// The header whose first bytes are `bytes` (the rest zero), `len`
    /// bytes long (10 or 12). Bytes past `len` are ignored.
    pub fn new(bytes: &[u8], len: usize) -> NetHdr {
        debug_assert!(len == 10 || len == MAX_LEN);
        let mut b = [0u8; MAX_LEN];
        let n = bytes.len().min(len);
        b[..n].copy_from_slice(&bytes[..n]);
        NetHdr {
            lo: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            hi: u32::from_le_bytes(b[8..].try_into().expect("4 bytes")),
            len: len as u8,
        }
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Always false: a header has 10 or 12 bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same header saying the frame spans `n` receive buffers
    /// (`num_buffers`, bytes 10..12; a 10-byte header has none).
    #[inline]
    pub fn with_num_buffers(self, n: u16) -> NetHdr {
        if self.len() < MAX_LEN {
            return self;
        }
        NetHdr {
            hi: (self.hi & 0xffff) | (u32::from(n) << 16),
            ..self
        }
    }

    /// Its words as stored: bytes 0..8, then bytes 8..len.
    #[inline]
    pub fn words(&self) -> (u64, u32) {
        (self.lo, self.hi)
    }

    /// Its bytes (the first [`len`](Self::len) of them count), for a
    /// header the guest's buffers cut into pieces.
    pub fn to_bytes(self) -> [u8; MAX_LEN] {
        let mut b = [0u8; MAX_LEN];
        b[..8].copy_from_slice(&self.lo.to_le_bytes());
        b[8..].copy_from_slice(&self.hi.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bytes_round_trip(bytes in proptest::array::uniform12(any::<u8>()), twelve in any::<bool>(), n in any::<u16>()) {
            let len = if twelve { 12 } else { 10 };
            let h = NetHdr::new(&bytes, len);
            prop_assert_eq!(h.len(), len);
            prop_assert!(!h.is_empty());
            let back = h.to_bytes();
            prop_assert_eq!(&back[..len], &bytes[..len]);
            prop_assert!(back[len..].iter().all(|&b| b == 0));
            let m = h.with_num_buffers(n).to_bytes();
            prop_assert_eq!(&m[..10], &bytes[..10]);
            if twelve {
                prop_assert_eq!(u16::from_le_bytes([m[10], m[11]]), n);
            } else {
                prop_assert_eq!(m, back);
            }
        }
    }

    #[test]
    fn zero_is_all_zeros() {
        assert_eq!(NetHdr::zero(12).to_bytes(), [0; 12]);
        assert_eq!(NetHdr::zero(10), NetHdr::new(&[], 10));
        assert_eq!(NetHdr::zero(12).with_num_buffers(1).to_bytes()[10], 1);
    }
}
