//! A tunnel port's options, named as OVS's `options:` of a `type=vxlan`,
//! `geneve` or `gre` interface: `remote_ip`, `local_ip`, `key`,
//! `in_key`, `out_key`, `dst_port`, `tos`, `ttl`, `df_default`, `csum`.

use std::net::IpAddr;

use super::TunnelKind;

/// An address option: fixed, or taken from the flow (`flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// This IPv4 or IPv6 address.
    Fixed(IpAddr),
    /// The flow's `tun_dst` or `tun_ipv6_dst` (sending) or any
    /// (receiving).
    Flow,
}

/// A key option: fixed, or taken from the flow (`flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelKey {
    /// This key (VNI: 24 bits; GRE: 32).
    Fixed(u64),
    /// The flow's `tun_id` (sending) or any (receiving).
    Flow,
}

/// A tunnel port's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelConfig {
    /// Protocol.
    pub kind: TunnelKind,
    /// The far end.
    pub remote: Endpoint,
    /// The near end: `None` takes the route's source address.
    pub local: Option<Endpoint>,
    /// The key received packets must carry (`None`: a GRE port with no
    /// key takes packets without one; for VXLAN and Geneve, VNI 0).
    pub in_key: Option<TunnelKey>,
    /// The key sent (`None` as for `in_key`).
    pub out_key: Option<TunnelKey>,
    /// UDP destination port (VXLAN 4789, Geneve 6081; unused for GRE).
    pub dst_port: u16,
    /// Outer TOS: a value, or `None` to copy the inner packet's
    /// (`tos=inherit`). Default 0.
    pub tos: Option<u8>,
    /// Outer TTL (default 64).
    pub ttl: u8,
    /// Whether the outer IPv4 header says "don't fragment" (default yes).
    pub df_default: bool,
    /// Whether the outer UDP (or GRE) header carries a checksum; `None`
    /// (not set): as OVS, yes for UDP over IPv6 and no otherwise (see
    /// [`TunnelConfig::csum_for`]).
    pub csum: Option<bool>,
}

impl TunnelConfig {
    /// The defaults of a port of `kind` to `remote`.
    pub fn new(kind: TunnelKind, remote: Endpoint) -> Self {
        TunnelConfig {
            kind,
            remote,
            local: None,
            in_key: None,
            out_key: None,
            dst_port: kind.default_dst_port(),
            tos: Some(0),
            ttl: 64,
            df_default: true,
            csum: None,
        }
    }

    /// Whether packets to an IPv4 (`ipv6` false) or IPv6 peer carry an
    /// outer checksum: `csum` if set, else only UDP over IPv6 (OVS's
    /// default since 2.14; a zero UDP checksum over IPv6 is refused by
    /// receivers that follow RFC 8200 strictly, the Linux kernel's by
    /// default among them).
    pub fn csum_for(&self, ipv6: bool) -> bool {
        self.csum.unwrap_or(ipv6 && self.kind.is_udp())
    }

    /// The largest key the protocol carries.
    pub fn max_key(&self) -> u64 {
        match self.kind {
            TunnelKind::Gre => u64::from(u32::MAX),
            _ => 0xff_ffff,
        }
    }

    /// The key sent with a flow's `tun_id` (`None`: no key, for GRE).
    pub fn out_key_for(&self, flow_tun_id: u64) -> Option<u64> {
        match self.out_key {
            Some(TunnelKey::Fixed(k)) => Some(k),
            Some(TunnelKey::Flow) => Some(flow_tun_id & self.max_key()),
            None if self.kind == TunnelKind::Gre => None,
            None => Some(0),
        }
    }

    /// Parses `KIND:OPT=V,...` options (`s` is the whole spec, for errors).
    pub fn parse(kind: TunnelKind, args: &str, s: &str) -> Result<Self, String> {
        let mut remote = None;
        let mut cfg = TunnelConfig::new(kind, Endpoint::Flow);
        let mut key = None;
        let (mut in_key, mut out_key) = (None, None);
        for opt in args.split(',').filter(|o| !o.is_empty()) {
            let Some((k, v)) = opt.split_once('=') else {
                return Err(format!(
                    "'{s}': tunnel option '{opt}' needs a value (OPTION=VALUE)"
                ));
            };
            match k {
                "remote_ip" => remote = Some(parse_endpoint(s, k, v)?),
                "local_ip" => cfg.local = Some(parse_endpoint(s, k, v)?),
                "key" => key = Some(parse_key(s, k, v, cfg.max_key())?),
                "in_key" => in_key = Some(parse_key(s, k, v, cfg.max_key())?),
                "out_key" => out_key = Some(parse_key(s, k, v, cfg.max_key())?),
                "dst_port" if kind.is_udp() => {
                    cfg.dst_port = v.parse().ok().filter(|&p| p != 0).ok_or_else(|| {
                        format!("'{s}': dst_port takes a UDP port from 1 to 65535, not '{v}'")
                    })?
                }
                "tos" => {
                    cfg.tos = if v == "inherit" {
                        None
                    } else {
                        Some(parse_u8(v).ok_or_else(|| {
                            format!("'{s}': tos takes 0 to 255 or 'inherit', not '{v}'")
                        })?)
                    }
                }
                "ttl" => {
                    cfg.ttl = parse_u8(v)
                        .filter(|&t| t > 0)
                        .ok_or_else(|| format!("'{s}': ttl takes 1 to 255, not '{v}'"))?
                }
                "df_default" => cfg.df_default = parse_bool(s, k, v)?,
                "csum" => cfg.csum = Some(parse_bool(s, k, v)?),
                _ => {
                    let udp = if kind.is_udp() { ", dst_port" } else { "" };
                    return Err(format!(
                        "'{s}': unknown {} option '{k}'; expected remote_ip, local_ip, key, in_key, out_key{udp}, tos, ttl, df_default or csum",
                        kind.name()
                    ));
                }
            }
        }
        cfg.remote = remote.ok_or_else(|| {
            format!(
                "'{s}': a {} port needs remote_ip=IP (or remote_ip=flow), e.g. {}:remote_ip=10.90.0.2,key=42",
                kind.name(),
                kind.name()
            )
        })?;
        cfg.in_key = in_key.or(key);
        cfg.out_key = out_key.or(key);
        if cfg.local == Some(Endpoint::Flow) && cfg.remote != Endpoint::Flow {
            return Err(format!(
                "'{s}': local_ip=flow needs remote_ip=flow (as in Open vSwitch)"
            ));
        }
        if let (Endpoint::Fixed(r), Some(Endpoint::Fixed(l))) = (cfg.remote, cfg.local) {
            if r.is_ipv4() != l.is_ipv4() {
                return Err(format!(
                    "'{s}': remote_ip {r} and local_ip {l} are of different IP versions"
                ));
            }
        }
        Ok(cfg)
    }
}

fn parse_u8(v: &str) -> Option<u8> {
    match v.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn parse_bool(s: &str, k: &str, v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("'{s}': {k} takes true or false, not '{v}'")),
    }
}

fn parse_endpoint(s: &str, k: &str, v: &str) -> Result<Endpoint, String> {
    if v == "flow" {
        return Ok(Endpoint::Flow);
    }
    match v.parse::<IpAddr>() {
        Ok(a) if a.is_unspecified() || a.is_multicast() || a == IpAddr::from([255; 4]) => {
            Err(format!(
                "'{s}': {k} must be a unicast address, not '{v}' (multicast VXLAN is not supported)"
            ))
        }
        Ok(a) => Ok(Endpoint::Fixed(a)),
        Err(_) => Err(format!(
            "'{s}': {k} takes an IPv4 or IPv6 address or 'flow', not '{v}'"
        )),
    }
}

fn parse_key(s: &str, k: &str, v: &str, max: u64) -> Result<TunnelKey, String> {
    if v == "flow" {
        return Ok(TunnelKey::Flow);
    }
    let n = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    };
    match n {
        Some(n) if n <= max => Ok(TunnelKey::Fixed(n)),
        _ => Err(format!(
            "'{s}': {k} takes 'flow' or a number from 0 to {max}, not '{v}'"
        )),
    }
}

fn fmt_endpoint(e: Endpoint) -> String {
    match e {
        Endpoint::Fixed(a) => a.to_string(),
        Endpoint::Flow => "flow".into(),
    }
}

fn fmt_key(k: TunnelKey) -> String {
    match k {
        TunnelKey::Fixed(n) => n.to_string(),
        TunnelKey::Flow => "flow".into(),
    }
}

impl std::fmt::Display for TunnelConfig {
    /// The spec again, defaults left out (parses back to the same config).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = TunnelConfig::new(self.kind, self.remote);
        write!(
            f,
            "{}:remote_ip={}",
            self.kind.name(),
            fmt_endpoint(self.remote)
        )?;
        if let Some(l) = self.local {
            write!(f, ",local_ip={}", fmt_endpoint(l))?;
        }
        match (self.in_key, self.out_key) {
            (Some(i), Some(o)) if i == o => write!(f, ",key={}", fmt_key(i))?,
            (i, o) => {
                if let Some(i) = i {
                    write!(f, ",in_key={}", fmt_key(i))?;
                }
                if let Some(o) = o {
                    write!(f, ",out_key={}", fmt_key(o))?;
                }
            }
        }
        if self.dst_port != d.dst_port {
            write!(f, ",dst_port={}", self.dst_port)?;
        }
        match self.tos {
            None => f.write_str(",tos=inherit")?,
            Some(t) if Some(t) != d.tos => write!(f, ",tos={t}")?,
            _ => {}
        }
        if self.ttl != d.ttl {
            write!(f, ",ttl={}", self.ttl)?;
        }
        if !self.df_default {
            f.write_str(",df_default=false")?;
        }
        if let Some(c) = self.csum {
            write!(f, ",csum={c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<TunnelConfig, String> {
        let (k, a) = s.split_once(':').unwrap();
        TunnelConfig::parse(TunnelKind::from_name(k).unwrap(), a, s)
    }

    #[test]
    fn options_parse_and_print_back() {
        for s in [
            "vxlan:remote_ip=10.90.0.2,key=42",
            "vxlan:remote_ip=flow,key=flow",
            "geneve:remote_ip=10.0.0.1,local_ip=10.0.0.9,in_key=1,out_key=flow,dst_port=6082,tos=inherit,ttl=9,df_default=false,csum=true",
            "gre:remote_ip=192.168.1.1",
            "gre:remote_ip=192.168.1.1,key=4294967295",
            "vxlan:remote_ip=fd90::2,local_ip=fd90::1,key=42,csum=true",
            "geneve:remote_ip=fd90::2",
            "geneve:remote_ip=fd90::2,csum=false",
        ] {
            let c = parse(s).unwrap();
            assert_eq!(c.to_string(), s);
            assert_eq!(parse(&c.to_string()).unwrap(), c);
        }
        let c = parse("vxlan:remote_ip=10.90.0.2").unwrap();
        assert_eq!(
            (c.dst_port, c.ttl, c.df_default, c.csum),
            (4789, 64, true, None)
        );
        assert!(!c.csum_for(false) && c.csum_for(true), "UDP over IPv6: on");
        let g = parse("gre:remote_ip=fd00::1").unwrap();
        assert!(!g.csum_for(true), "GRE: off unless asked");
        assert!(!parse("vxlan:remote_ip=fd00::1,csum=false")
            .unwrap()
            .csum_for(true));
        assert_eq!(c.out_key_for(7), Some(0), "VXLAN without a key sends VNI 0");
        let g = parse("gre:remote_ip=10.0.0.1").unwrap();
        assert_eq!(g.out_key_for(7), None, "GRE without a key sends none");
        let f = parse("geneve:remote_ip=flow,key=flow").unwrap();
        assert_eq!(f.out_key_for(0x1_2345_6789), Some(0x45_6789));
    }

    #[test]
    fn bad_options_say_what_is_wrong() {
        for (s, says) in [
            ("vxlan:key=1", "needs remote_ip"),
            ("vxlan:remote_ip=10.0.0.300", "IPv4 or IPv6 address"),
            ("vxlan:remote_ip=224.0.0.1", "unicast"),
            ("vxlan:remote_ip=ff02::1", "unicast"),
            ("vxlan:remote_ip=::", "unicast"),
            (
                "vxlan:remote_ip=fd00::2,local_ip=10.0.0.1",
                "different IP versions",
            ),
            ("vxlan:remote_ip=1.2.3.4,key=16777216", "0 to 16777215"),
            (
                "gre:remote_ip=1.2.3.4,dst_port=9",
                "unknown gre option 'dst_port'",
            ),
            ("vxlan:remote_ip=1.2.3.4,dst_port=0", "dst_port"),
            ("vxlan:remote_ip=1.2.3.4,ttl=0", "ttl"),
            ("vxlan:remote_ip=1.2.3.4,csum=yes", "true or false"),
            ("vxlan:remote_ip=1.2.3.4,local_ip=flow", "local_ip=flow"),
            ("vxlan:remote_ip", "needs a value"),
        ] {
            let e = parse(s).unwrap_err();
            assert!(e.contains(says), "{s}: {e}");
        }
    }
}
