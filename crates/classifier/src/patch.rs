//! Port numbers of a datapath with several bridges, and patch ports
//! (what joins two of them): see [`crate::xlate::bridges`].
//!
//! Bridge 0's ports keep their OpenFlow numbers (a datapath with one
//! bridge is numbered as it always was); bridge `k` (1 to
//! [`MAX_BRIDGES`] - 1) puts `k` above its OpenFlow number's low 16 bits:
//! OpenFlow numbers of ports are below 0xff00, and a reserved port
//! (0xffffff00 and up: `LOCAL`, `CONTROLLER` as a packet-out's input) is
//! `k << 16` and its low 16 bits.

/// OpenFlow's `LOCAL` port, as Sluice numbers it.
pub const LOCAL: u32 = 0xffff_fffe;
/// Most bridges one datapath holds.
pub const MAX_BRIDGES: u16 = 0xfff0;

/// The datapath port number of bridge `bridge`'s OpenFlow port `ofport`.
pub fn dp_port(bridge: u16, ofport: u32) -> u32 {
    match bridge {
        0 => ofport,
        b => u32::from(b) << 16 | (ofport & 0xffff),
    }
}

/// The bridge and OpenFlow number of datapath port `dp`.
pub fn split_dp_port(dp: u32) -> (u16, u32) {
    let b = (dp >> 16) as u16;
    if dp == LOCAL || b == 0 || b >= MAX_BRIDGES {
        return (0, dp);
    }
    match dp & 0xffff {
        p if p >= 0xff00 => (b, 0xffff_0000 | p),
        p => (b, p),
    }
}

/// A patch port: OpenFlow port `port` of its bridge leads to port
/// `peer_port` of bridge `peer` (`options:peer` in OVSDB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PatchPort {
    /// Its OpenFlow number in its own bridge.
    pub port: u32,
    /// The peer's bridge (its index in the datapath).
    pub peer: u16,
    /// The peer's OpenFlow number in that bridge.
    pub peer_port: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_zero_keeps_its_numbers_and_others_are_apart() {
        for p in [1, 7, 0xfeff, LOCAL] {
            assert_eq!(dp_port(0, p), p);
            assert_eq!(split_dp_port(p), (0, p));
        }
        for b in [1u16, 2, 300, MAX_BRIDGES - 1] {
            for p in [1, 7, 0xfeff, LOCAL, 0xffff_fffd, 0xffff_ff00] {
                let d = dp_port(b, p);
                assert_eq!(split_dp_port(d), (b, p), "{b} {p:#x}");
                assert_ne!(d, p);
            }
        }
        assert_ne!(dp_port(1, LOCAL), LOCAL);
    }
}
