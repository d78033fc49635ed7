//! How the OpenFlow tables see IP fragments: Open vSwitch's fragment
//! handling modes (`ovs-ofctl set-frags`, OpenFlow's OFPC_FRAG_* flags).

/// The fragment handling mode of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FragHandling {
    /// OVS's default (`normal`): for every fragment, first or later, the
    /// L4 ports and ICMP type and code read as 0 to the tables; the
    /// fragment's other fields match as usual. A first fragment carries its
    /// ports, but the rest of the datagram does not: matching on them
    /// would split one datagram's pieces between rules.
    #[default]
    Normal,
    /// `nx-match`: a first fragment's L4 fields match as they are (later
    /// fragments have none); `nw_frag` tells fragments apart.
    NxMatch,
    /// `drop`: every fragment is dropped (counted as `ip fragment`).
    Drop,
}

impl FragHandling {
    /// Parses an `ovs-ofctl set-frags` mode name. `reassemble` is refused:
    /// Sluice does not reassemble.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(FragHandling::Normal),
            "nx-match" => Ok(FragHandling::NxMatch),
            "drop" => Ok(FragHandling::Drop),
            "reassemble" => Err("fragment handling 'reassemble' is not supported: Sluice does not reassemble (use normal, nx-match or drop)".into()),
            _ => Err(format!("unknown fragment handling '{s}' (normal, nx-match or drop)")),
        }
    }

    /// The mode's name, as `ovs-ofctl get-frags` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FragHandling::Normal => "normal",
            FragHandling::NxMatch => "nx-match",
            FragHandling::Drop => "drop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reassemble_is_refused() {
        for m in [
            FragHandling::Normal,
            FragHandling::NxMatch,
            FragHandling::Drop,
        ] {
            assert_eq!(FragHandling::parse(m.name()), Ok(m));
        }
        assert_eq!(FragHandling::default(), FragHandling::Normal);
        assert!(FragHandling::parse("reassemble")
            .unwrap_err()
            .contains("not supported"));
        assert!(FragHandling::parse("x").is_err());
    }
}
