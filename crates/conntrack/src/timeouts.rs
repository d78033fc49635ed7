//! How long a connection lives without a packet, by state: Open
//! vSwitch's defaults (`CT_TIMEOUTS` in `lib/conntrack-tp.h`).

use crate::tcp::TcpTimeout;

/// A connection's expiry class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// TCP, by its state.
    Tcp(TcpTimeout),
    /// UDP and others: one packet.
    OtherFirst,
    /// Several packets, one way.
    OtherMultiple,
    /// Both ways.
    OtherBidir,
    /// An ICMP query.
    IcmpFirst,
    /// Its reply seen.
    IcmpReply,
}

impl Timeout {
    /// Milliseconds.
    pub fn ms(self) -> u64 {
        match self {
            Timeout::Tcp(TcpTimeout::FirstPacket) | Timeout::Tcp(TcpTimeout::Opening) => 30_000,
            Timeout::Tcp(TcpTimeout::Established) => 24 * 3600 * 1000,
            Timeout::Tcp(TcpTimeout::Closing) => 15 * 60 * 1000,
            Timeout::Tcp(TcpTimeout::FinWait) => 45_000,
            Timeout::Tcp(TcpTimeout::Closed) => 30_000,
            Timeout::OtherFirst | Timeout::OtherMultiple => 60_000,
            Timeout::OtherBidir => 30_000,
            Timeout::IcmpFirst => 60_000,
            Timeout::IcmpReply => 30_000,
        }
    }
}
