//! How long a connection lives without a packet, by state: Open
//! vSwitch's defaults (`ct_dpif_netdev_tp_def` in `lib/conntrack-tp.c`),
//! and per zone the timeout policies that change them (what `ovs-vsctl
//! add-zone-tp` gives OVS's userspace tracker), under OVS's attribute
//! names.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

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

/// The timeout policy attributes, as OVS names them.
pub const ATTRS: [&str; 11] = [
    "tcp_syn_sent",
    "tcp_syn_recv",
    "tcp_established",
    "tcp_fin_wait",
    "tcp_time_wait",
    "tcp_close",
    "udp_first",
    "udp_single",
    "udp_multiple",
    "icmp_first",
    "icmp_reply",
];

/// Their defaults, seconds.
pub const DEFAULTS: [u32; 11] = [30, 30, 24 * 3600, 15 * 60, 45, 30, 60, 60, 30, 60, 30];

impl Timeout {
    /// The policy attribute that sets it (OVS's `tm_to_ct_dpif_tp`: a
    /// TCP connection closing waits `tcp_fin_wait`, one in FIN_WAIT
    /// `tcp_time_wait`; UDP several one way `udp_single`, both ways
    /// `udp_multiple`).
    pub fn attr(self) -> usize {
        match self {
            Timeout::Tcp(TcpTimeout::FirstPacket) => 0,
            Timeout::Tcp(TcpTimeout::Opening) => 1,
            Timeout::Tcp(TcpTimeout::Established) => 2,
            Timeout::Tcp(TcpTimeout::Closing) => 3,
            Timeout::Tcp(TcpTimeout::FinWait) => 4,
            Timeout::Tcp(TcpTimeout::Closed) => 5,
            Timeout::OtherFirst => 6,
            Timeout::OtherMultiple => 7,
            Timeout::OtherBidir => 8,
            Timeout::IcmpFirst => 9,
            Timeout::IcmpReply => 10,
        }
    }

    /// The default, milliseconds.
    pub fn ms(self) -> u64 {
        u64::from(DEFAULTS[self.attr()]) * 1000
    }
}

/// Per zone, the seconds each attribute is set to (0: the default).
/// Allocated at the first policy set: a tracker that has none reads one
/// pointer per deadline.
#[derive(Debug, Default)]
pub struct Policies {
    zones: OnceLock<Box<[[AtomicU32; 11]]>>,
}

impl Policies {
    /// How long a connection of `zone` in class `t` lives, ms.
    #[inline]
    pub fn ms(&self, zone: u16, t: Timeout) -> u64 {
        let set = self.zones.get().map_or(0, |z| {
            z[usize::from(zone)][t.attr()].load(Ordering::Relaxed)
        });
        if set == 0 {
            t.ms()
        } else {
            u64::from(set) * 1000
        }
    }

    fn slots(&self) -> &[[AtomicU32; 11]] {
        self.zones
            .get_or_init(|| (0..=u16::MAX).map(|_| Default::default()).collect())
    }

    /// Gives `zone` the policy `attrs` (the others back to their
    /// defaults), as OVS replaces a zone's policy whole.
    pub fn set(&self, zone: u16, attrs: &[(usize, u32)]) {
        let z = &self.slots()[usize::from(zone)];
        for a in z {
            a.store(0, Ordering::Relaxed);
        }
        for &(i, secs) in attrs {
            z[i].store(secs, Ordering::Relaxed);
        }
    }

    /// Takes `zone`'s policy away: the defaults again.
    pub fn clear(&self, zone: u16) {
        if let Some(z) = self.zones.get() {
            for a in &z[usize::from(zone)] {
                a.store(0, Ordering::Relaxed);
            }
        }
    }

    /// `zone`'s timeouts, one `attr=SECS` a line, the defaults marked.
    pub fn show(&self, zone: u16) -> String {
        let mut o = format!("zone={zone}\n");
        for (i, name) in ATTRS.iter().enumerate() {
            let set = self
                .zones
                .get()
                .map_or(0, |z| z[usize::from(zone)][i].load(Ordering::Relaxed));
            if set == 0 {
                o += &format!("    {name}={} (default)\n", DEFAULTS[i]);
            } else {
                o += &format!("    {name}={set}\n");
            }
        }
        o
    }
}

/// `ATTR=SECS[,ATTR=SECS...]` (words or comma lists): the attributes a
/// policy sets, checked whole.
pub fn parse_policy(words: &[&str]) -> Result<Vec<(usize, u32)>, String> {
    let mut out = Vec::new();
    for item in words
        .iter()
        .flat_map(|w| w.split(','))
        .filter(|s| !s.is_empty())
    {
        let (name, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}': expected ATTR=SECONDS"))?;
        let i = ATTRS.iter().position(|a| *a == name).ok_or_else(|| {
            format!(
                "'{name}' is not a timeout policy attribute: {}",
                ATTRS.join(", ")
            )
        })?;
        let secs = v
            .parse::<u32>()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| format!("'{v}': {name} is a number of seconds, at least 1"))?;
        out.push((i, secs));
    }
    if out.is_empty() {
        return Err(format!("no attribute given: {}", ATTRS.join(", ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_policy_changes_only_its_own_attributes_and_zone() {
        let p = Policies::default();
        assert_eq!(p.ms(5, Timeout::OtherFirst), 60_000);
        p.set(5, &parse_policy(&["udp_first=2,icmp_reply=3"]).unwrap());
        assert_eq!(p.ms(5, Timeout::OtherFirst), 2_000);
        assert_eq!(p.ms(5, Timeout::IcmpReply), 3_000);
        assert_eq!(p.ms(5, Timeout::OtherBidir), 30_000);
        assert_eq!(p.ms(6, Timeout::OtherFirst), 60_000);
        // Set again: the whole policy replaced.
        p.set(5, &parse_policy(&["udp_multiple=9"]).unwrap());
        assert_eq!(p.ms(5, Timeout::OtherFirst), 60_000);
        assert_eq!(p.ms(5, Timeout::OtherBidir), 9_000);
        assert!(p.show(5).contains("    udp_multiple=9\n"));
        assert!(p.show(5).contains("    tcp_established=86400 (default)\n"));
        p.clear(5);
        assert_eq!(p.ms(5, Timeout::OtherBidir), 30_000);
    }

    #[test]
    fn bad_policies_are_refused_with_the_names() {
        assert!(parse_policy(&["udp_frist=3"])
            .unwrap_err()
            .contains("udp_first"));
        assert!(parse_policy(&["udp_first=0"]).is_err());
        assert!(parse_policy(&["udp_first"]).is_err());
        assert!(parse_policy(&[]).is_err());
    }

    #[test]
    fn defaults_are_ovs_s() {
        assert_eq!(Timeout::Tcp(TcpTimeout::Established).ms(), 24 * 3600 * 1000);
        assert_eq!(Timeout::Tcp(TcpTimeout::Closing).ms(), 15 * 60 * 1000);
        assert_eq!(Timeout::Tcp(TcpTimeout::FinWait).ms(), 45_000);
        assert_eq!(Timeout::OtherMultiple.ms(), 60_000);
        assert_eq!(Timeout::OtherBidir.ms(), 30_000);
    }
}
