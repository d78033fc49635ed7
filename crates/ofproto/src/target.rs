//! Where the OpenFlow channel listens (`--listen ptcp:PORT[:IP]`,
//! `punix:PATH`) and what it connects to (`--controller tcp:IP[:PORT]`,
//! `unix:PATH`), in ovs-vswitchd's syntax.

use std::net::SocketAddr;

/// The socket address of IP `ip` (brackets allowed) and port `p`, both
/// from target `s` (named in the errors).
fn address(s: &str, ip: &str, p: &str) -> Result<SocketAddr, String> {
    let ip: std::net::IpAddr = ip
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| format!("'{s}': '{ip}' is not an IP address"))?;
    let p: u16 = p
        .parse()
        .map_err(|_| format!("'{s}': '{p}' is not a TCP port"))?;
    Ok(SocketAddr::new(ip, p))
}

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `ptcp:PORT[:IP]`.
    Tcp(SocketAddr),
    /// `punix:PATH`.
    Unix(std::path::PathBuf),
    /// `pssl:PORT[:IP]`: TCP with TLS, a client certificate required.
    Ssl(SocketAddr),
}

/// Parses `ptcp:PORT[:IP]`, `pssl:PORT[:IP]` (IP defaults to 127.0.0.1)
/// or `punix:PATH`.
pub fn parse_listen(s: &str) -> Result<Target, String> {
    listener(s, "127.0.0.1", None)
}

/// Parses a passive target as ovs-vswitchd takes one from the database
/// (`Controller:target`): `ptcp:[PORT][:IP]` and `pssl:[PORT][:IP]`, the
/// port 6653 and every IPv4 address unless given (OVS's defaults; the
/// command line's `--listen` keeps to 127.0.0.1), or `punix:PATH`.
pub fn parse_passive(s: &str) -> Result<Target, String> {
    listener(s, "0.0.0.0", Some("6653"))
}

/// A listener target `s`, its IP `default_ip` when not given, and its
/// port `default_port` (none: the port must be given).
fn listener(s: &str, default_ip: &str, default_port: Option<&str>) -> Result<Target, String> {
    for (pre, tls) in [("ptcp:", false), ("pssl:", true)] {
        if let Some(rest) = s.strip_prefix(pre) {
            let (p, ip) = rest.split_once(':').unwrap_or((rest, default_ip));
            let p = match default_port {
                Some(d) if p.is_empty() => d,
                _ => p,
            };
            let a = address(s, ip, p)?;
            return Ok(if tls { Target::Ssl(a) } else { Target::Tcp(a) });
        }
    }
    if let Some(path) = s.strip_prefix("punix:") {
        if path.is_empty() {
            return Err(format!("'{s}': punix: needs a path"));
        }
        return Ok(Target::Unix(path.into()));
    }
    Err(format!(
        "'{s}': expected ptcp:PORT[:IP], pssl:PORT[:IP] or punix:PATH (as ovs-vswitchd's listeners)"
    ))
}

/// Where to connect (`--controller`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// `tcp:IP[:PORT]` (port 6653 by default).
    Tcp(SocketAddr),
    /// `unix:PATH`.
    Unix(std::path::PathBuf),
    /// `ssl:IP[:PORT]`: TCP with TLS.
    Ssl(SocketAddr),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "tcp:{a}"),
            Peer::Unix(p) => write!(f, "unix:{}", p.display()),
            Peer::Ssl(a) => write!(f, "ssl:{a}"),
        }
    }
}

/// Parses `tcp:IP[:PORT]` (port 6653 by default) or `unix:PATH`.
pub fn parse_controller(s: &str) -> Result<Peer, String> {
    let (rest, tls) = match (s.strip_prefix("tcp:"), s.strip_prefix("ssl:")) {
        (Some(r), _) => (Some(r), false),
        (_, Some(r)) => (Some(r), true),
        _ => (None, false),
    };
    if let Some(rest) = rest {
        // An IPv6 address is bracketed when a port follows.
        let (ip, p) = match rest.rsplit_once(':') {
            Some((ip, p)) if !ip.is_empty() && (rest.starts_with('[') || !ip.contains(':')) => {
                (ip, Some(p))
            }
            _ => (rest, None),
        };
        let a = address(s, ip, p.unwrap_or("6653"))?;
        return Ok(if tls { Peer::Ssl(a) } else { Peer::Tcp(a) });
    }
    if let Some(path) = s.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(format!("'{s}': unix: needs a path"));
        }
        return Ok(Peer::Unix(path.into()));
    }
    Err(format!(
        "'{s}': expected tcp:IP[:PORT], ssl:IP[:PORT] (port 6653 by default) or unix:PATH"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_targets_from_the_database_take_ovs_defaults() {
        assert_eq!(
            parse_passive("ptcp:").unwrap(),
            Target::Tcp("0.0.0.0:6653".parse().unwrap())
        );
        assert_eq!(
            parse_passive("ptcp:6634").unwrap(),
            Target::Tcp("0.0.0.0:6634".parse().unwrap())
        );
        assert_eq!(
            parse_passive("ptcp::127.0.0.1").unwrap(),
            Target::Tcp("127.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            parse_passive("pssl:6634:[::1]").unwrap(),
            Target::Ssl("[::1]:6634".parse().unwrap())
        );
        assert_eq!(
            parse_passive("punix:/x").unwrap(),
            Target::Unix("/x".into())
        );
        let e = parse_passive("ptcp:99999").unwrap_err();
        assert!(e.contains("'ptcp:99999'"), "{e}");
        assert!(parse_passive("tcp:1.2.3.4").is_err());
    }

    #[test]
    fn listen_and_controller_targets_parse_as_ovs_writes_them() {
        assert_eq!(
            parse_listen("ptcp:6653").unwrap(),
            Target::Tcp("127.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            parse_listen("ptcp:6653:[::1]").unwrap(),
            Target::Tcp("[::1]:6653".parse().unwrap())
        );
        assert_eq!(
            parse_listen("punix:/run/s.sock").unwrap(),
            Target::Unix("/run/s.sock".into())
        );
        assert!(parse_listen("punix:").is_err());
        assert!(parse_listen("ptcp:x").is_err());
        assert!(parse_listen("tcp:1.2.3.4").is_err());
        assert_eq!(
            parse_controller("tcp:10.0.0.1").unwrap(),
            Peer::Tcp("10.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            parse_controller("tcp:[2001:db8::1]:6633").unwrap(),
            Peer::Tcp("[2001:db8::1]:6633".parse().unwrap())
        );
        assert_eq!(
            parse_controller("tcp:2001:db8::1").unwrap(),
            Peer::Tcp("[2001:db8::1]:6653".parse().unwrap())
        );
        assert_eq!(parse_controller("unix:/x").unwrap().to_string(), "unix:/x");
        assert!(parse_controller("unix:").is_err());
        assert!(parse_controller("ptcp:1").is_err());
        // TLS, written as OVS writes it.
        assert_eq!(
            parse_listen("pssl:6653:0.0.0.0").unwrap(),
            Target::Ssl("0.0.0.0:6653".parse().unwrap())
        );
        assert_eq!(
            parse_controller("ssl:[2001:db8::1]:6633").unwrap(),
            Peer::Ssl("[2001:db8::1]:6633".parse().unwrap())
        );
        assert_eq!(
            parse_controller("ssl:10.0.0.1").unwrap().to_string(),
            "ssl:10.0.0.1:6653"
        );
        assert!(parse_listen("pssl:").is_err());
        assert!(parse_controller("ssl:").is_err());
    }
}
