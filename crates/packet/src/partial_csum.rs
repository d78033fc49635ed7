//! Partial L4 checksums that a port hands over without saying so.
//!
//! A Linux sender with checksum offload on (every veth by default) leaves
//! in a TCP or UDP checksum field only the folded sum of the pseudo-header;
//! the device, or whoever receives the `CHECKSUM_PARTIAL` buffer, adds the
//! rest. AF_PACKET says so (a virtio-net header, `TP_STATUS_CSUMNOTREADY`);
//! AF_XDP hands over the bytes alone, so a stream forwarded as it came
//! arrives with bad checksums and the receiver's stack drops it.
//!
//! Such a field is recognisable: it holds exactly the folded pseudo-header
//! sum. [`partial_csum_in`] finds those and marks the packet as a partial
//! checksum, which the output stage completes (or passes on to a port that
//! takes the request). Any other checksum, right or wrong, is left as it
//! is. A complete checksum that happens to equal the pseudo-header sum
//! (one in 65,536) is harmless to mark: completing it writes the same
//! value back.

use crate::meta::Offload;
use crate::wire::checksum::{finish, pseudo_v4, pseudo_v6};

const TCP: u8 = 6;
const UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The offload request to put on `frame` when its TCP or UDP checksum
/// field holds only the pseudo-header sum (IPv4 or IPv6, up to two VLAN
/// tags, no IPv4 fragment, no IPv6 extension header), else `None`.
pub fn partial_csum_in(frame: &[u8]) -> Option<Offload> {
    let mut at = 12;
    let mut ty = be16(frame, at)?;
    for _ in 0..2 {
        if ty != 0x8100 && ty != 0x88a8 {
            break;
        }
        at += 4;
        ty = be16(frame, at)?;
    }
    let l3 = at + 2;
    let (l4, proto, l4_len, pseudo) = match ty {
        0x0800 => {
            let ip = frame.get(l3..l3 + 20)?;
            let ihl = usize::from(ip[0] & 15) * 4;
            let total = usize::from(be16(ip, 2)?);
            // A fragment's checksum covers the whole datagram: not here.
            if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || be16(ip, 6)? & 0x3fff != 0 {
                return None;
            }
            let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
            let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
            let len = total - ihl;
            let len16 = u16::try_from(len).ok()?;
            (l3 + ihl, ip[9], len, pseudo_v4(src, dst, ip[9], len16))
        }
        0x86dd => {
            let ip = frame.get(l3..l3 + 40)?;
            let len = usize::from(be16(ip, 4)?);
            let src: &[u8; 16] = ip[8..24].try_into().ok()?;
            let dst: &[u8; 16] = ip[24..40].try_into().ok()?;
            (l3 + 40, ip[6], len, pseudo_v6(src, dst, ip[6], len as u32))
        }
        _ => return None,
    };
    let (offset, header) = match proto {
        TCP => (16, 20),
        UDP => (6, 8),
        _ => return None,
    };
    if l4_len < header || l4 + l4_len > frame.len() {
        return None;
    }
    let field = be16(frame, l4 + offset)?;
    // UDP over IPv4 without a checksum says 0.
    if (proto == UDP && field == 0) || field != !finish(pseudo) {
        return None;
    }
    Some(Offload {
        flags: Offload::NEEDS_CSUM,
        gso_size: 0,
        csum_start: u16::try_from(l4).ok()?,
        csum_offset: offset as u8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Frame, L4};
    use crate::wire::checksum::{sum, sum_wide};
    use proptest::prelude::*;

    /// `f` with its L4 checksum field set to the folded pseudo-header sum,
    /// as a sender with checksum offload leaves it; and where it is.
    fn make_partial(mut f: Vec<u8>, v6: bool, tcp: bool) -> (Vec<u8>, usize) {
        let (l4, pseudo) = if v6 {
            let ip = &f[14..54];
            let len = u32::from(u16::from_be_bytes([ip[4], ip[5]]));
            let p = pseudo_v6(
                ip[8..24].try_into().unwrap(),
                ip[24..40].try_into().unwrap(),
                ip[6],
                len,
            );
            (54, p)
        } else {
            let ip = &f[14..34];
            let total = u16::from_be_bytes([ip[2], ip[3]]);
            let src = u32::from_be_bytes(ip[12..16].try_into().unwrap());
            let dst = u32::from_be_bytes(ip[16..20].try_into().unwrap());
            (34, pseudo_v4(src, dst, ip[9], total - 20))
        };
        let at = l4 + if tcp { 16 } else { 6 };
        f[at..at + 2].copy_from_slice(&(!finish(pseudo)).to_be_bytes());
        (f, l4)
    }

    fn v6(last: u8) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 1, 0xd, 0xb8]);
        a[15] = last;
        a
    }

    fn frames() -> Vec<(Vec<u8>, bool, bool)> {
        let tcp = || L4::Tcp {
            src: 4000,
            dst: 80,
            flags: 0x18,
        };
        let udp = L4::Udp { src: 5000, dst: 53 };
        vec![
            (
                Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], tcp())
                    .payload(&[7; 100])
                    .build(),
                false,
                true,
            ),
            (
                Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], udp)
                    .payload(&[9; 33])
                    .build(),
                false,
                false,
            ),
            (
                Frame::ipv6(v6(1), v6(2), tcp()).payload(&[1; 64]).build(),
                true,
                true,
            ),
        ]
    }

    #[test]
    fn a_pseudo_header_sum_is_found_and_completing_it_gives_the_right_checksum() {
        for (good, v6, tcp) in frames() {
            // A complete checksum is left alone.
            assert_eq!(partial_csum_in(&good), None, "v6={v6} tcp={tcp}");
            let (partial, l4) = make_partial(good.clone(), v6, tcp);
            let o = partial_csum_in(&partial).expect("found");
            assert!(o.needs_csum());
            assert_eq!(usize::from(o.csum_start), l4);
            // Completing it: the sum from csum_start on, into the field.
            let mut done = partial.clone();
            let at = l4 + usize::from(o.csum_offset);
            let c = finish(sum_wide(0, &done[l4..]));
            done[at..at + 2].copy_from_slice(&c.to_be_bytes());
            assert_eq!(done, good, "completed as the sender's stack would");
        }
    }

    #[test]
    fn other_bad_checksums_fragments_and_other_protocols_are_left_alone() {
        for (good, v6, tcp) in frames() {
            let (partial, l4) = make_partial(good, v6, tcp);
            let at = l4 + if tcp { 16 } else { 6 };
            let mut wrong = partial.clone();
            wrong[at] ^= 0x10;
            assert_eq!(
                partial_csum_in(&wrong),
                None,
                "a wrong checksum stays wrong"
            );
            if !v6 {
                let mut frag = partial.clone();
                frag[14 + 6] = 0x20; // MF
                assert_eq!(partial_csum_in(&frag), None);
            }
            assert_eq!(partial_csum_in(&partial[..l4 + 4]), None, "cut short");
        }
        let icmp = Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Icmp { ty: 8, code: 0 }).build();
        assert_eq!(partial_csum_in(&icmp), None);
        assert_eq!(partial_csum_in(&[0u8; 10]), None);
        // UDP without a checksum (0).
        let (mut udp, _) = make_partial(frames()[1].0.clone(), false, false);
        udp[34 + 6..34 + 8].copy_from_slice(&[0, 0]);
        assert_eq!(partial_csum_in(&udp), None);
    }

    proptest! {
        /// Any bytes: no panic, and a request found is within the frame.
        #[test]
        fn any_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Some(o) = partial_csum_in(&data) {
                prop_assert!(usize::from(o.csum_start) + usize::from(o.csum_offset) + 2 <= data.len());
            }
            let _ = sum(0, &data);
        }
    }
}
