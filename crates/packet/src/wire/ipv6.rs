//! IPv6 headers and the extension headers Open vSwitch walks.

use super::{arr, be16, be32, put32, WireError};

/// Fixed IPv6 header length.
pub const IPV6_HEADER_LEN: usize = 40;

/// IPv6 next-header values for extension headers.
pub mod ext {
    /// Hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// Destination options.
    pub const DSTOPTS: u8 = 60;
    /// Encapsulating security payload (the walk ends there).
    pub const ESP: u8 = 50;
    /// No next header.
    pub const NONE: u8 = 59;
}

/// OpenFlow's `ipv6_exthdr` flags (OFPIEH_*): which extension headers a
/// packet has, and whether they break RFC 8200's order or repeat.
pub mod exthdr {
    /// "No next header" seen.
    pub const NONEXT: u16 = 1 << 0;
    /// Encrypted security payload.
    pub const ESP: u16 = 1 << 1;
    /// Authentication header.
    pub const AUTH: u16 = 1 << 2;
    /// Destination options (one or two).
    pub const DEST: u16 = 1 << 3;
    /// Fragment header.
    pub const FRAG: u16 = 1 << 4;
    /// Routing header.
    pub const ROUTER: u16 = 1 << 5;
    /// Hop-by-hop options.
    pub const HOP: u16 = 1 << 6;
    /// A header repeated where it may not be.
    pub const UNREP: u16 = 1 << 7;
    /// Headers out of the preferred order.
    pub const UNSEQ: u16 = 1 << 8;
    /// Every flag.
    pub const ALL: u16 = 0x1ff;
}

/// A view of the fixed IPv6 header. `new_checked` requires the 40 bytes
/// and a payload length that fits in the bytes given (as OVS does).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buf`, validating the lengths.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < IPV6_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if be16(b, 4) as usize + IPV6_HEADER_LEN > b.len() {
            return Err(WireError::Truncated);
        }
        Ok(Ipv6Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.b(), 0) >> 4) & 0xff) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.b(), 0) & 0x000f_ffff
    }
    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        arr(self.b(), 8)
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        arr(self.b(), 24)
    }
    /// The payload, bounded by the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[IPV6_HEADER_LEN..IPV6_HEADER_LEN + self.payload_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = be32(self.b(), 0);
        let w = (w & 0xf00f_ffff) | ((tc as u32) << 20);
        put32(self.buf.as_mut(), 0, w);
    }
    /// Sets the flow label (low 20 bits of `label`).
    pub fn set_flow_label(&mut self, label: u32) {
        let w = be32(self.b(), 0);
        put32(
            self.buf.as_mut(),
            0,
            (w & 0xfff0_0000) | (label & 0x000f_ffff),
        );
    }
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buf.as_mut()[7] = h;
    }
    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 16]) {
        self.buf.as_mut()[8..24].copy_from_slice(&a);
    }
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.buf.as_mut()[24..40].copy_from_slice(&a);
    }
}

/// What walking the extension headers found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtWalk {
    /// The upper-layer protocol (or the header where the walk stopped).
    pub proto: u8,
    /// Offset of that header from the start of the IPv6 payload.
    pub offset: usize,
    /// A fragment header was seen.
    pub fragment: bool,
    /// The fragment header had a non-zero offset.
    pub later_fragment: bool,
    /// The [`exthdr`] flags of the headers walked.
    pub flags: u16,
}

/// Tracks the [`exthdr`] flags of a chain header by header. Order ranks
/// follow RFC 8200 section 4.1: hop-by-hop (first only), destination
/// options, routing, fragment, AH, ESP, destination options again.
#[derive(Default)]
struct ExtFlags {
    flags: u16,
    rank: u8,
    n: u8,
    dests: u8,
}

impl ExtFlags {
    fn see(&mut self, hdr: u8) {
        use exthdr::*;
        let (bit, rank) = match hdr {
            ext::HOPOPTS => (HOP, 1),
            // A second destination-options header belongs before the
            // upper layer, after everything else.
            ext::DSTOPTS if self.flags & (ROUTER | FRAG | AUTH | ESP) != 0 => (DEST, 7),
            ext::DSTOPTS => (DEST, 2),
            ext::ROUTING => (ROUTER, 3),
            ext::FRAGMENT => (FRAG, 4),
            ext::AH => (AUTH, 5),
            ext::ESP => (ESP, 6),
            ext::NONE => (NONEXT, 8),
            _ => return,
        };
        let repeated = if hdr == ext::DSTOPTS {
            self.dests += 1;
            self.dests > 2 || (self.dests == 2 && rank == 2)
        } else {
            self.flags & bit != 0
        };
        if repeated {
            self.flags |= UNREP;
        }
        if rank < self.rank || (hdr == ext::HOPOPTS && self.n > 0) {
            self.flags |= UNSEQ;
        }
        self.flags |= bit;
        self.rank = self.rank.max(rank);
        self.n += 1;
    }
}

/// Walks hop-by-hop, routing, destination-options, AH and fragment headers
/// in `payload` starting with `next`. A later fragment stops the walk (its
/// upper-layer header is elsewhere). A truncated extension header is an
/// error: the caller keys no L4 fields then, as OVS does.
pub fn walk_ext_headers(payload: &[u8], mut next: u8) -> Result<ExtWalk, WireError> {
    let mut off = 0usize;
    let mut fragment = false;
    let mut later = false;
    let mut flags = ExtFlags::default();
    // As Open vSwitch's parse_ipv6_ext_hdrs: every header is at least 8
    // bytes, so the walk ends within payload.len() / 8 steps.
    loop {
        flags.see(next);
        match next {
            ext::HOPOPTS | ext::ROUTING | ext::DSTOPTS | ext::AH | ext::FRAGMENT
                if payload.len() < off + 8 =>
            {
                return Err(WireError::Truncated);
            }
            ext::HOPOPTS | ext::ROUTING | ext::DSTOPTS | ext::AH => {
                let len = if next == ext::AH {
                    (payload[off + 1] as usize + 2) * 4
                } else {
                    (payload[off + 1] as usize + 1) * 8
                };
                if payload.len() < off + len {
                    return Err(WireError::Truncated);
                }
                next = payload[off];
                off += len;
            }
            ext::FRAGMENT => {
                // Offset, reserved bits and M flag all zero: an atomic
                // fragment (RFC 6946), not a fragment at all.
                let offlg = be16(payload, off + 2);
                next = payload[off];
                off += 8;
                if offlg != 0 {
                    fragment = true;
                    if offlg & 0xfff8 != 0 {
                        // A later fragment keys the fragment header itself
                        // as its protocol (OVS: nw_proto=44).
                        later = true;
                        next = ext::FRAGMENT;
                        break;
                    }
                }
            }
            _ => break,
        }
    }
    Ok(ExtWalk {
        proto: next,
        offset: off,
        fragment,
        later_fragment: later,
        flags: flags.flags,
    })
}

/// Formats an IPv6 address.
pub fn fmt_ipv6(a: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*a).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0x6b, 0x85, 0x43, 0x21];
        h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        h.extend_from_slice(&[next, 64]);
        h.extend_from_slice(&[0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn getters_and_setters() {
        let mut h = hdr(17, &[0; 8]);
        let mut p = Ipv6Packet::new_checked(&mut h[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x54321);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(fmt_ipv6(&p.src()), "2001:db8::1");
        assert_eq!(fmt_ipv6(&p.dst()), "2001:db8::2");
        p.set_traffic_class(0x04);
        p.set_flow_label(0xfffff);
        p.set_hop_limit(1);
        p.set_src([1; 16]);
        p.set_dst([2; 16]);
        assert_eq!(p.traffic_class(), 0x04);
        assert_eq!(p.flow_label(), 0xfffff);
        assert_eq!(p.version(), 6);
        assert_eq!((p.hop_limit(), p.src(), p.dst()), (1, [1; 16], [2; 16]));
    }

    #[test]
    fn payload_len_must_fit() {
        let mut h = hdr(17, &[0; 8]);
        h[5] = 9;
        assert_eq!(
            Ipv6Packet::new_checked(&h[..]).unwrap_err(),
            WireError::Truncated
        );
        assert!(Ipv6Packet::new_checked(&h[..39]).is_err());
    }

    #[test]
    fn ext_header_flags_say_what_is_there_and_what_is_out_of_order() {
        let chain = |hdrs: &[u8], last: u8| {
            let mut p = Vec::new();
            for (i, _) in hdrs.iter().enumerate() {
                let next = hdrs.get(i + 1).copied().unwrap_or(last);
                p.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
            }
            p.extend_from_slice(&[0; 8]);
            walk_ext_headers(&p, hdrs.first().copied().unwrap_or(last)).map(|w| w.flags)
        };
        use exthdr::*;
        assert_eq!(chain(&[], 6), Ok(0));
        assert_eq!(chain(&[], ext::NONE), Ok(NONEXT));
        assert_eq!(chain(&[ext::HOPOPTS, ext::AH], 6), Ok(HOP | AUTH));
        assert_eq!(
            chain(
                &[ext::HOPOPTS, ext::DSTOPTS, ext::ROUTING, ext::DSTOPTS],
                17
            ),
            Ok(HOP | DEST | ROUTER)
        );
        assert_eq!(
            chain(&[ext::ROUTING, ext::HOPOPTS], 6),
            Ok(HOP | ROUTER | UNSEQ)
        );
        assert_eq!(chain(&[ext::ROUTING, ext::ROUTING], 6), Ok(ROUTER | UNREP));
        assert_eq!(chain(&[ext::DSTOPTS, ext::DSTOPTS], 6), Ok(DEST | UNREP));
        assert_eq!(
            chain(&[ext::AH, ext::ROUTING], 6),
            Ok(AUTH | ROUTER | UNSEQ)
        );
    }

    #[test]
    fn ext_header_walk() {
        // hop-by-hop (8 bytes) -> fragment (first, MF) -> udp
        let mut p = vec![ext::FRAGMENT, 0, 0, 0, 0, 0, 0, 0];
        p.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 7]);
        p.extend_from_slice(&[0; 8]);
        let w = walk_ext_headers(&p, ext::HOPOPTS).unwrap();
        assert_eq!(
            w,
            ExtWalk {
                proto: 17,
                offset: 16,
                fragment: true,
                later_fragment: false,
                flags: exthdr::HOP | exthdr::FRAG,
            }
        );
        // later fragment: offset 8
        p[10] = 0x00;
        p[11] = 0x40;
        let w = walk_ext_headers(&p, ext::HOPOPTS).unwrap();
        assert!(w.later_fragment);
        assert_eq!(
            walk_ext_headers(&p[..12], ext::HOPOPTS).unwrap_err(),
            WireError::Truncated
        );
        // AH length is in 4-byte units minus 2.
        let ah = [6u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let w = walk_ext_headers(&ah, ext::AH).unwrap();
        assert_eq!((w.proto, w.offset), (6, 12));
    }
}
