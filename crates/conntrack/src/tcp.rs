//! TCP state and window tracking, with the rules of Open vSwitch's
//! userspace tracker (which follows pf's, after Guido van Rooij's
//! "Real Stateful TCP Packet Filtering"): each peer's lowest and highest
//! acceptable sequence numbers and largest window, scaled when both
//! sides offered window scaling; a segment outside them is invalid.

use crate::tuple::TcpSeg;

/// TCP flag bits.
pub mod flag {
    #![allow(missing_docs)]
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
}

/// A peer's state, in the order it moves (OVS's `CT_DPIF_TCPS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum PeerState {
    /// Nothing seen.
    #[default]
    Closed,
    /// (Not reached: kept for the order and names.)
    Listen,
    /// It sent a SYN (or its first segment).
    SynSent,
    /// (Not reached.)
    SynRecv,
    /// Its first segment was acknowledged.
    Established,
    /// (Not reached.)
    CloseWait,
    /// (Not reached.)
    FinWait1,
    /// It sent a FIN.
    Closing,
    /// (Not reached.)
    LastAck,
    /// Its FIN was acknowledged.
    FinWait2,
    /// (Not reached.)
    TimeWait,
}

impl PeerState {
    /// The name `dump-conntrack` shows.
    pub fn name(self) -> &'static str {
        match self {
            PeerState::Closed => "CLOSED",
            PeerState::Listen => "LISTEN",
            PeerState::SynSent => "SYN_SENT",
            PeerState::SynRecv => "SYN_RECV",
            PeerState::Established => "ESTABLISHED",
            PeerState::CloseWait => "CLOSE_WAIT",
            PeerState::FinWait1 => "FIN_WAIT_1",
            PeerState::Closing => "CLOSING",
            PeerState::LastAck => "LAST_ACK",
            PeerState::FinWait2 => "FIN_WAIT_2",
            PeerState::TimeWait => "TIME_WAIT",
        }
    }
}

/// `wscale`: the peer sent the option.
const WSCALE_FLAG: u8 = 0x80;
/// `wscale`: the connection was picked up mid-stream: scaling unknown.
const WSCALE_UNKNOWN: u8 = 0x40;
const WSCALE_MASK: u8 = 0x0f;
const MAX_WSCALE: u8 = 14;
/// How far an ACK may lag or lead (pf's `MAXACKWINDOW`: a full unscaled
/// window and a fudge of 1500).
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;

/// One side of a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peer {
    /// The highest sequence number it has sent, +1.
    pub seqlo: u32,
    /// The highest sequence number it may send (the other's ack + window).
    pub seqhi: u32,
    /// Its largest window (unscaled).
    pub max_win: u16,
    /// Its window scale and the `WSCALE_*` flags.
    pub wscale: u8,
    /// Its state.
    pub state: PeerState,
}

/// The expiry class a connection's state puts it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpTimeout {
    /// One segment seen.
    FirstPacket,
    /// Opening.
    Opening,
    /// Both established.
    Established,
    /// One side closing.
    Closing,
    /// Both closing.
    FinWait,
    /// Both done.
    Closed,
}

/// What a segment did to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// In the window: `+est`.
    Valid,
    /// A SYN again before an answer, or a SYN after both closed: `+new`.
    ValidNew,
    /// A new connection on a closed one's tuple: the old one goes.
    Reopen,
    /// Outside the window, or impossible flags: `+inv`.
    Invalid,
}

fn seq_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Flags no segment may carry (OVS's `tcp_invalid_flags`).
pub fn invalid_flags(f: u16) -> bool {
    use flag::*;
    if f & SYN != 0 {
        if f & (RST | FIN) != 0 {
            return true;
        }
    } else if f & (ACK | RST) == 0 {
        return true;
    }
    f & ACK == 0 && f & (FIN | PSH | URG) != 0
}

/// Whether a segment may start a connection: not a SYN-ACK (a half-open
/// connection is not picked up), nothing invalid.
pub fn valid_new(seg: &TcpSeg) -> bool {
    !invalid_flags(seg.flags) && seg.flags & (flag::SYN | flag::ACK) != (flag::SYN | flag::ACK)
}

/// The two peers of a connection: `[originator, responder]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpConn {
    /// Originator, responder.
    pub peer: [Peer; 2],
}

impl TcpConn {
    /// The connection a valid first segment starts.
    pub fn new(seg: &TcpSeg) -> TcpConn {
        let mut src = Peer {
            seqlo: seg.seq,
            seqhi: seg.seq.wrapping_add(seg.len).wrapping_add(1),
            ..Peer::default()
        };
        let mut dst = Peer::default();
        if seg.flags & flag::SYN != 0 {
            src.seqhi = src.seqhi.wrapping_add(1);
            src.wscale = seg.wscale.map_or(0, |w| w | WSCALE_FLAG);
        } else {
            src.wscale = WSCALE_UNKNOWN;
            dst.wscale = WSCALE_UNKNOWN;
        }
        src.max_win = seg.win.max(1);
        if src.wscale & WSCALE_MASK != 0 {
            let sws = src.wscale & WSCALE_MASK;
            src.max_win = (u32::from(src.max_win).div_ceil(1 << sws)) as u16;
        }
        if seg.flags & flag::FIN != 0 {
            src.seqhi = src.seqhi.wrapping_add(1);
        }
        dst.seqhi = 1;
        dst.max_win = 1;
        src.state = PeerState::SynSent;
        dst.state = PeerState::Closed;
        TcpConn { peer: [src, dst] }
    }

    /// The timeout class the peers' states give.
    pub fn timeout(&self) -> TcpTimeout {
        let [a, b] = self.peer;
        if a.state >= PeerState::FinWait2 && b.state >= PeerState::FinWait2 {
            TcpTimeout::Closed
        } else if a.state >= PeerState::Closing && b.state >= PeerState::Closing {
            TcpTimeout::FinWait
        } else if a.state < PeerState::Established || b.state < PeerState::Established {
            TcpTimeout::Opening
        } else if a.state >= PeerState::Closing || b.state >= PeerState::Closing {
            TcpTimeout::Closing
        } else {
            TcpTimeout::Established
        }
    }

    /// Tracks a segment sent by the originator (`reply` false) or the
    /// responder.
    pub fn update(&mut self, seg: &TcpSeg, reply: bool) -> Update {
        use flag::*;
        let f = seg.flags;
        if invalid_flags(f) {
            return Update::Invalid;
        }
        let (si, di) = if reply { (1, 0) } else { (0, 1) };
        let [mut src, mut dst] = [self.peer[si], self.peer[di]];
        if f & (SYN | ACK) == SYN {
            if dst.state >= PeerState::FinWait2 && src.state >= PeerState::FinWait2 {
                return Update::Reopen;
            } else if src.state <= PeerState::SynSent {
                self.peer[si].state = PeerState::SynSent;
                return Update::ValidNew;
            }
        }
        let (mut sws, mut dws) = (0u8, 0u8);
        if src.wscale & WSCALE_FLAG != 0 && dst.wscale & WSCALE_FLAG != 0 && f & SYN == 0 {
            sws = src.wscale & WSCALE_MASK;
            dws = dst.wscale & WSCALE_MASK;
        } else if src.wscale & WSCALE_UNKNOWN != 0
            && dst.wscale & WSCALE_UNKNOWN != 0
            && f & SYN == 0
        {
            sws = MAX_WSCALE;
            dws = MAX_WSCALE;
        }
        let mut win = u32::from(seg.win);
        let orig_seq = seg.seq;
        let mut seq = seg.seq;
        let mut ack = seg.ack;
        let mut end;
        let mut check_ackskew = true;
        if src.state < PeerState::SynSent {
            // The first segment from this end.
            end = seq.wrapping_add(seg.len);
            if f & SYN != 0 {
                end = end.wrapping_add(1);
                if dst.wscale & WSCALE_FLAG != 0 {
                    src.wscale = seg.wscale.map_or(0, |w| w | WSCALE_FLAG);
                    if src.wscale & WSCALE_FLAG != 0 {
                        sws = src.wscale & WSCALE_MASK;
                        win = win.div_ceil(1 << sws);
                        dws = dst.wscale & WSCALE_MASK;
                    } else {
                        // The other side's window was scaled for nothing.
                        dst.max_win = (u32::from(dst.max_win) << (dst.wscale & WSCALE_MASK))
                            .min(0xffff) as u16;
                        dst.wscale = 0;
                    }
                }
            }
            if f & FIN != 0 {
                end = end.wrapping_add(1);
            }
            src.seqlo = seq;
            src.state = PeerState::SynSent;
            let reach = end.wrapping_add((u32::from(dst.max_win) << dws).max(1));
            if src.seqhi == 1 || seq_ge(reach, src.seqhi) {
                src.seqhi = reach;
                // Picking up a connection: be lenient about the ack.
                check_ackskew = false;
            }
            if win > u32::from(src.max_win) {
                src.max_win = win.min(0xffff) as u16;
            }
        } else {
            end = seq.wrapping_add(seg.len);
            if f & SYN != 0 {
                end = end.wrapping_add(1);
            }
            if f & FIN != 0 {
                end = end.wrapping_add(1);
            }
        }
        if f & ACK == 0 || (ack == 0 && f & (ACK | RST) == (ACK | RST)) {
            // No ack to check (or a stack that sends none with a RST).
            ack = dst.seqlo;
        }
        if seq == end {
            // No data: ease the sequence checks.
            seq = src.seqlo;
            end = seq;
        }
        let ackskew: i64 = if check_ackskew {
            i64::from(dst.seqlo.wrapping_sub(ack) as i32)
        } else {
            0
        };
        let back = u32::from(dst.max_win) << dws;
        let scaled_win = win << sws;
        let in_window = seq_ge(src.seqhi, end)
            && seq_ge(seq, src.seqlo.wrapping_sub(back))
            && ackskew >= -MAX_ACK_WINDOW
            && ackskew <= MAX_ACK_WINDOW << sws
            && (f & RST == 0
                || orig_seq == src.seqlo
                || orig_seq == src.seqlo.wrapping_add(1)
                || orig_seq.wrapping_add(1) == src.seqlo);
        // Both kinds of accepted segment: the sender's largest window,
        // highest sequence number sent, and the window it opened for the
        // other side.
        let slide = |src: &mut Peer, dst: &mut Peer| {
            if u32::from(src.max_win) < win {
                src.max_win = win.min(0xffff) as u16;
            }
            if seq_gt(end, src.seqlo) {
                src.seqlo = end;
            }
            if seq_ge(ack.wrapping_add(scaled_win), dst.seqhi) {
                dst.seqhi = ack.wrapping_add(scaled_win.max(1));
            }
        };
        let result = if in_window {
            slide(&mut src, &mut dst);
            if f & SYN != 0 && src.state < PeerState::SynSent {
                src.state = PeerState::SynSent;
            }
            if f & FIN != 0 && src.state < PeerState::Closing {
                src.state = PeerState::Closing;
            }
            if f & ACK != 0 {
                if dst.state == PeerState::SynSent {
                    dst.state = PeerState::Established;
                } else if dst.state == PeerState::Closing {
                    dst.state = PeerState::FinWait2;
                }
            }
            if f & RST != 0 {
                src.state = PeerState::TimeWait;
                dst.state = PeerState::TimeWait;
            }
            Update::Valid
        } else if (dst.state < PeerState::SynSent
            || dst.state >= PeerState::FinWait2
            || src.state >= PeerState::FinWait2)
            && seq_ge(src.seqhi.wrapping_add(MAX_ACK_WINDOW as u32), end)
            && seq_ge(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW as u32))
        {
            // Shotgunned SYNs, a stream picked up late, stray segments
            // after a close: let them by without moving the state on.
            slide(&mut src, &mut dst);
            if f & FIN != 0 && src.state < PeerState::Closing {
                src.state = PeerState::Closing;
            }
            if f & RST != 0 {
                src.state = PeerState::TimeWait;
                dst.state = PeerState::TimeWait;
            }
            Update::Valid
        } else {
            return Update::Invalid;
        };
        self.peer[si] = src;
        self.peer[di] = dst;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flag::*;

    fn seg(seq: u32, ack: u32, flags: u16, len: u32) -> TcpSeg {
        TcpSeg {
            seq,
            ack,
            flags,
            win: 65535,
            len,
            wscale: None,
        }
    }

    #[test]
    fn a_handshake_data_and_close_move_the_states() {
        let syn = seg(1000, 0, SYN, 0);
        assert!(valid_new(&syn));
        let mut c = TcpConn::new(&syn);
        assert_eq!(
            c.update(&seg(5000, 1001, SYN | ACK, 0), true),
            Update::Valid
        );
        assert_eq!(c.peer[0].state, PeerState::Established, "its SYN was acked");
        assert_eq!(c.update(&seg(1001, 5001, ACK, 0), false), Update::Valid);
        assert_eq!(c.timeout(), TcpTimeout::Established);
        assert_eq!(
            c.update(&seg(1001, 5001, ACK | PSH, 100), false),
            Update::Valid
        );
        assert_eq!(c.update(&seg(5001, 1101, ACK, 0), true), Update::Valid);
        assert_eq!(
            c.update(&seg(1101, 5001, FIN | ACK, 0), false),
            Update::Valid
        );
        assert_eq!(c.timeout(), TcpTimeout::Closing);
        assert_eq!(
            c.update(&seg(5001, 1102, FIN | ACK, 0), true),
            Update::Valid
        );
        assert_eq!(c.update(&seg(1102, 5002, ACK, 0), false), Update::Valid);
        assert_eq!(c.timeout(), TcpTimeout::Closed);
        // A new SYN on the closed tuple starts again.
        assert_eq!(c.update(&seg(9000, 0, SYN, 0), false), Update::Reopen);
    }

    #[test]
    fn segments_outside_the_window_are_invalid() {
        let mut c = TcpConn::new(&seg(1000, 0, SYN, 0));
        c.update(&seg(5000, 1001, SYN | ACK, 0), true);
        c.update(&seg(1001, 5001, ACK, 0), false);
        // Far ahead of anything the responder allowed.
        assert_eq!(
            c.update(&seg(1001 + 10_000_000, 5001, ACK, 10), false),
            Update::Invalid
        );
        // Acking data never sent.
        assert_eq!(
            c.update(&seg(5001, 1001 + 10_000_000, ACK, 0), true),
            Update::Invalid
        );
        // A reset must carry the expected sequence number.
        assert_eq!(
            c.update(&seg(1500, 5001, RST | ACK, 0), false),
            Update::Invalid
        );
        assert_eq!(c.update(&seg(1001, 5001, RST, 0), false), Update::Valid);
    }

    #[test]
    fn impossible_flags_and_syn_ack_starts_are_refused() {
        assert!(invalid_flags(SYN | FIN));
        assert!(invalid_flags(SYN | RST));
        assert!(invalid_flags(0));
        assert!(invalid_flags(FIN));
        assert!(!invalid_flags(ACK));
        assert!(!valid_new(&seg(1, 1, SYN | ACK, 0)));
        assert!(valid_new(&seg(1, 1, ACK, 0)), "a stream picked up mid-way");
    }

    #[test]
    fn retransmitted_syns_stay_new() {
        let mut c = TcpConn::new(&seg(1000, 0, SYN, 0));
        assert_eq!(c.update(&seg(1000, 0, SYN, 0), false), Update::ValidNew);
    }
}
