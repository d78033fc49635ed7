//! Port specifications as users write them: `pcap:rx=in.pcap,tx=out.pcap`,
//! `pcap:rx=in.pcap,loop`, `null`.

use std::path::PathBuf;

use crate::null::NullPort;
use crate::pcap_port::PcapPort;
use crate::{Port, PortError};

/// What a port spec says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// Capture files.
    Pcap {
        /// File to receive from.
        rx: Option<PathBuf>,
        /// File to write sent packets to.
        tx: Option<PathBuf>,
        /// Load `rx` once and replay it forever.
        looping: bool,
    },
    /// Discard everything sent; receive nothing.
    Null,
}

/// The syntax, for error messages and `--help`.
pub const SPEC_SYNTAX: &str = "pcap:rx=FILE[,tx=FILE][,loop] | pcap:tx=FILE | null";

impl std::str::FromStr for PortSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "null" if args.is_empty() => Ok(PortSpec::Null),
            "null" => Err(format!("'{s}': null takes no options")),
            "pcap" => {
                let (mut rx, mut tx, mut looping) = (None, None, false);
                for opt in args.split(',').filter(|o| !o.is_empty()) {
                    match opt.split_once('=') {
                        Some(("rx", f)) if !f.is_empty() => rx = Some(PathBuf::from(f)),
                        Some(("tx", f)) if !f.is_empty() => tx = Some(PathBuf::from(f)),
                        None if opt == "loop" => looping = true,
                        _ => {
                            return Err(format!(
                            "'{s}': unknown pcap option '{opt}'; expected rx=FILE, tx=FILE or loop"
                        ))
                        }
                    }
                }
                if rx.is_none() && tx.is_none() {
                    return Err(format!("'{s}': a pcap port needs rx=FILE, tx=FILE or both"));
                }
                if looping && rx.is_none() {
                    return Err(format!("'{s}': loop needs rx=FILE"));
                }
                Ok(PortSpec::Pcap { rx, tx, looping })
            }
            _ => Err(format!(
                "'{s}': unknown port type '{kind}'; expected {SPEC_SYNTAX}"
            )),
        }
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortSpec::Null => f.write_str("null"),
            PortSpec::Pcap { rx, tx, looping } => {
                let mut parts = Vec::new();
                if let Some(r) = rx {
                    parts.push(format!("rx={}", r.display()));
                }
                if let Some(t) = tx {
                    parts.push(format!("tx={}", t.display()));
                }
                if *looping {
                    parts.push("loop".into());
                }
                write!(f, "pcap:{}", parts.join(","))
            }
        }
    }
}

/// Opens the port a spec describes.
pub fn open_port(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    match spec {
        PortSpec::Null => Ok(Box::new(NullPort::new())),
        PortSpec::Pcap { rx, tx, looping } => Ok(Box::new(PcapPort::open(
            &spec.to_string(),
            rx.as_deref(),
            tx.as_deref(),
            *looping,
        )?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for s in [
            "null",
            "pcap:rx=a.pcap",
            "pcap:tx=b.pcap",
            "pcap:rx=a.pcap,tx=b.pcap,loop",
        ] {
            assert_eq!(s.parse::<PortSpec>().unwrap().to_string(), s);
        }
        assert!("pcap:"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("needs rx"));
        assert!("pcap:tx=a,loop"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("loop needs"));
        assert!("pcap:rx=a,speed=9"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("unknown pcap option"));
        assert!("eth0"
            .parse::<PortSpec>()
            .unwrap_err()
            .contains("unknown port type"));
        assert!("null:x".parse::<PortSpec>().is_err());
    }
}
