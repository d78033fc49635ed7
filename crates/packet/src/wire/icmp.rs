//! ICMP and ICMPv6 headers, with IPv6 Neighbor Discovery fields.

use super::{arr, be16, put16, WireError};

/// ICMP / ICMPv6 header length as OVS requires it before keying type/code.
pub const ICMP_HEADER_LEN: usize = 8;

/// ND message types.
pub mod nd {
    /// Neighbor solicitation.
    pub const SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const ADVERT: u8 = 136;
    /// Source link-layer address option.
    pub const OPT_SLL: u8 = 1;
    /// Target link-layer address option.
    pub const OPT_TLL: u8 = 2;
}

/// A view of an ICMP or ICMPv6 header.
#[derive(Debug, Clone, Copy)]
pub struct IcmpHeader<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> IcmpHeader<T> {
    /// Wraps `buf`, checking the 8-byte header is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < ICMP_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IcmpHeader { buf })
    }
    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    /// Message code.
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpHeader<T> {
    /// Sets the type (the caller updates the checksum).
    pub fn set_msg_type_raw(&mut self, t: u8) {
        self.buf.as_mut()[0] = t;
    }
    /// Sets the code (the caller updates the checksum).
    pub fn set_code_raw(&mut self, c: u8) {
        self.buf.as_mut()[1] = c;
    }
    /// Sets the checksum.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf.as_mut(), 2, c);
    }
}

/// Neighbor Discovery fields of a solicitation or advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NdFields {
    /// Target address.
    pub target: [u8; 16],
    /// Source link-layer address option (solicitations).
    pub sll: [u8; 6],
    /// Target link-layer address option (advertisements).
    pub tll: [u8; 6],
}

/// Parses the ND body of an ICMPv6 message (`msg` starts at the ICMPv6
/// header). `None` for other types or a non-zero code; see the body for
/// how truncated and malformed options are read (as OVS).
pub fn parse_nd(msg: &[u8]) -> Option<NdFields> {
    if msg.len() < 8 || msg[1] != 0 {
        return None;
    }
    let t = msg[0];
    if t != nd::SOLICIT && t != nd::ADVERT {
        return None;
    }
    // As Open vSwitch's parse_icmpv6: no target, no fields; options are
    // read while they are whole (what came before a broken one stays);
    // either link-layer option counts in either message; the same option
    // twice (a second one while the first is still all zeros is taken)
    // voids every ND field.
    let mut f = NdFields::default();
    if msg.len() < 24 {
        return Some(f);
    }
    f.target = arr(msg, 8);
    let mut off = 24;
    while off + 8 <= msg.len() {
        let opt_len = msg[off + 1] as usize * 8;
        if opt_len == 0 || off + opt_len > msg.len() {
            break;
        }
        let slot = match msg[off] {
            nd::OPT_SLL if opt_len == 8 => Some(&mut f.sll),
            nd::OPT_TLL if opt_len == 8 => Some(&mut f.tll),
            _ => None,
        };
        if let Some(slot) = slot {
            if *slot != [0; 6] {
                return Some(NdFields::default());
            }
            *slot = arr(msg, off + 2);
        }
        off += opt_len;
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icmp_fields() {
        let mut h = [8u8, 0, 0xf7, 0xff, 0, 1, 0, 1];
        let mut i = IcmpHeader::new_checked(&mut h[..]).unwrap();
        assert_eq!((i.msg_type(), i.code(), i.checksum()), (8, 0, 0xf7ff));
        i.set_msg_type_raw(0);
        i.set_code_raw(3);
        i.set_checksum(1);
        assert_eq!((i.msg_type(), i.code(), i.checksum()), (0, 3, 1));
        assert!(IcmpHeader::new_checked(&h[..7]).is_err());
    }

    fn ns(opts: &[u8]) -> Vec<u8> {
        let mut m = vec![nd::SOLICIT, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        m.extend_from_slice(opts);
        m
    }

    #[test]
    fn nd_solicit_with_sll() {
        let m = ns(&[nd::OPT_SLL, 1, 1, 2, 3, 4, 5, 6]);
        let f = parse_nd(&m).unwrap();
        assert_eq!(f.target[15], 9);
        assert_eq!(f.sll, [1, 2, 3, 4, 5, 6]);
        assert_eq!(f.tll, [0; 6]);
    }

    /// Open vSwitch 3.1's parse_icmpv6, case by case.
    #[test]
    fn nd_malformed_options_as_ovs() {
        let sll = [nd::OPT_SLL, 1, 1, 2, 3, 4, 5, 6];
        let tll = [nd::OPT_TLL, 1, 7, 7, 7, 7, 7, 7];
        // A zero-length or overrunning option ends the walk; the target
        // and the options before it stay.
        let f = parse_nd(&ns(
            &[&sll[..], &[nd::OPT_TLL, 0, 9, 9, 9, 9, 9, 9]].concat()
        ))
        .unwrap();
        assert_eq!(
            (f.target[15], f.sll, f.tll),
            (9, [1, 2, 3, 4, 5, 6], [0; 6])
        );
        let f = parse_nd(&ns(&[nd::OPT_SLL, 2, 1, 2, 3, 4, 5, 6])).unwrap();
        assert_eq!((f.target[15], f.sll), (9, [0; 6]));
        // The same option twice voids every ND field.
        assert_eq!(
            parse_nd(&ns(&[sll, sll].concat())),
            Some(NdFields::default())
        );
        // ... unless the first carried an all-zero address.
        let zero_sll = [nd::OPT_SLL, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse_nd(&ns(&[zero_sll, sll].concat())).unwrap().sll,
            [1, 2, 3, 4, 5, 6]
        );
        // Either option in either message.
        let mut na = ns(&[sll, tll].concat());
        na[0] = nd::ADVERT;
        let f = parse_nd(&na).unwrap();
        assert_eq!((f.sll, f.tll), ([1, 2, 3, 4, 5, 6], [7; 6]));
        // A truncated target: an ND message without ND fields.
        assert_eq!(parse_nd(&ns(&[])[..20]), Some(NdFields::default()));
        let mut m = ns(&[]);
        m[1] = 1;
        assert!(parse_nd(&m).is_none(), "non-zero code");
    }
}
