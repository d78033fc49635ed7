//! `sluice ctl dump-conntrack`, `flush-conntrack`, `conntrack-stats`,
//! `ct-set-maxconns` and `ct-set-limits`/`ct-get-limits`/`ct-del-limits`:
//! the connection tracker of a running switch, with the syntax and
//! formats of `ovs-appctl dpctl/dump-conntrack`, `dpctl/flush-conntrack`,
//! `dpctl/ct-stats-show`, `dpctl/ct-set-maxconns` and `dpctl/ct-*-limits`;
//! and the fragment reassembly before tracking, `ipf-get-status [-m]`,
//! `ipf-set-enabled|ipf-set-disabled v4|v6`, `ipf-set-min-frag v4|v6 N`,
//! `ipf-set-max-nfrags N`, as `dpctl/ipf-*`; per zone timeout policies
//! (`ct-set-timeout-policy zone=N ATTR=SECONDS,...`, OVS's `add-zone-tp`
//! attributes), `ct-get-timeout-policy`, `ct-del-timeout-policy`.

use sluice_conntrack::Conntrack;

fn zone_arg(args: &[&str]) -> Result<Option<u16>, String> {
    match args {
        [] => Ok(None),
        [z] => z
            .strip_prefix("zone=")
            .and_then(|n| n.parse::<u16>().ok())
            .map(Some)
            .ok_or_else(|| format!("'{z}': expected zone=N (0 to 65535)")),
        _ => Err("expected at most one argument, zone=N".into()),
    }
}

fn ip_version(v: &str) -> Result<bool, String> {
    match v {
        "v4" => Ok(false),
        "v6" => Ok(true),
        _ => Err(format!("'{v}': expected v4 for IPv4 or v6 for IPv6")),
    }
}

/// Runs one conntrack command.
pub fn command(cmd: &str, args: &[&str], ct: &Conntrack) -> Result<String, String> {
    let now = ct.now_ms();
    match cmd {
        "dump-conntrack" => Ok(ct
            .dump(zone_arg(args)?, now)
            .into_iter()
            .map(|l| l + "\n")
            .collect()),
        "flush-conntrack" => {
            ct.flush(zone_arg(args)?);
            Ok(String::new())
        }
        "conntrack-stats" => {
            if !args.is_empty() {
                return Err("conntrack-stats takes no argument".into());
            }
            let counts = ct.counts(now);
            let total: u64 = counts.values().sum();
            let mut out = format!("Connections Stats:\n    Total: {total}\n");
            for (p, n) in counts {
                out += &format!("    {}: {n}\n", p.to_uppercase());
            }
            let s = &ct.stats;
            let get =
                |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            out += &format!(
                "Committed: {}, expired: {}, invalid packets: {}, commits refused: {} (table full), {} (zone limit), {} (NAT exhausted)\nTranslated (NAT reply tuples held): {}\nMemory ready for: {} connections (ct-prealloc {})\n",
                get(&s.committed),
                get(&s.expired),
                get(&s.invalid),
                get(&s.full),
                get(&s.zone_full),
                get(&s.nat_exhausted),
                ct.nat_reply_tuples(),
                ct.ready_for(),
                ct.prealloc()
            );
            Ok(out)
        }
        "ct-set-maxconns" => {
            let [n] = args else {
                return Err("ct-set-maxconns needs a number of connections".into());
            };
            let n = n
                .parse::<u64>()
                .map_err(|_| format!("'{n}': expected a number of connections"))?;
            ct.set_max_conns(n);
            Ok(String::new())
        }
        "ct-set-limits" => {
            if args.is_empty() {
                return Err("ct-set-limits needs default=N or zone=Z,limit=N".into());
            }
            let num = |v: &str, what: &str| {
                v.parse::<u32>()
                    .map_err(|_| format!("'{v}': {what} is a number of connections (0: none)"))
            };
            // Checked whole before any is applied.
            let mut sets = Vec::new();
            for a in args {
                if let Some(v) = a.strip_prefix("default=") {
                    sets.push((None, num(v, "the default limit")?));
                } else {
                    let (z, l) = a
                        .strip_prefix("zone=")
                        .and_then(|r| r.split_once(",limit="))
                        .ok_or_else(|| format!("'{a}': expected default=N or zone=Z,limit=N"))?;
                    let z = z
                        .parse::<u16>()
                        .map_err(|_| format!("'{z}': a zone is 0 to 65535"))?;
                    sets.push((Some(z), num(l, "a limit")?));
                }
            }
            for (z, l) in sets {
                ct.set_limit(z, l);
            }
            Ok(String::new())
        }
        "ct-get-limits" | "ct-del-limits" => {
            let zones = match args {
                [] if cmd == "ct-get-limits" => Vec::new(),
                [z] => z
                    .strip_prefix("zone=")
                    .ok_or_else(|| format!("'{z}': expected zone=Z[,Z...]"))?
                    .split(',')
                    .map(|n| {
                        n.parse::<u16>()
                            .map_err(|_| format!("'{n}': a zone is 0 to 65535"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => return Err(format!("{cmd} takes zone=Z[,Z...]")),
            };
            if cmd == "ct-get-limits" {
                return Ok(ct.limits(&zones));
            }
            for z in zones {
                ct.set_limit(Some(z), 0);
            }
            Ok(String::new())
        }
        "ct-set-timeout-policy" => {
            let (zone, attrs) =
                match args {
                    [z, rest @ ..] if z.starts_with("zone=") => (zone_arg(&[z])?, rest),
                    _ => return Err(
                        "ct-set-timeout-policy needs zone=N and ATTR=SECONDS (udp_first=30,...)"
                            .into(),
                    ),
                };
            let attrs = sluice_conntrack::timeouts::parse_policy(attrs)?;
            ct.timeout_policies().set(zone.expect("zone given"), &attrs);
            Ok(String::new())
        }
        "ct-get-timeout-policy" | "ct-del-timeout-policy" => {
            let Some(zone) = zone_arg(args)? else {
                return Err(format!("{cmd} needs zone=N"));
            };
            if cmd == "ct-get-timeout-policy" {
                return Ok(ct.timeout_policies().show(zone));
            }
            ct.timeout_policies().clear(zone);
            Ok(String::new())
        }
        "ipf-get-status" => match args {
            [] => Ok(ct.ipf().status(false)),
            ["-m" | "--more"] => Ok(ct.ipf().status(true)),
            _ => Err("ipf-get-status takes only -m (the fragment lists too)".into()),
        },
        "ipf-set-enabled" | "ipf-set-disabled" => {
            let on = cmd == "ipf-set-enabled";
            let [v] = args else {
                return Err(format!("{cmd} needs v4 (IPv4) or v6 (IPv6)"));
            };
            ct.ipf().set_enabled(ip_version(v)?, on);
            Ok(format!(
                "{} fragmentation reassembly successful\n",
                if on { "enabling" } else { "disabling" }
            ))
        }
        "ipf-set-min-frag" => {
            let [v, n] = args else {
                return Err("ipf-set-min-frag needs v4|v6 and a size in bytes".into());
            };
            let n = n
                .parse::<u32>()
                .map_err(|_| format!("'{n}': the minimum fragment size is a number of bytes"))?;
            ct.ipf().set_min_frag(ip_version(v)?, n)?;
            Ok("setting minimum fragment size successful\n".into())
        }
        "ipf-set-max-nfrags" => {
            let [n] = args else {
                return Err("ipf-set-max-nfrags needs a number of fragments".into());
            };
            let n = n
                .parse::<u32>()
                .map_err(|_| format!("'{n}': expected a number of fragments"))?;
            ct.ipf().set_max_frags(n)?;
            Ok("setting maximum fragments successful\n".into())
        }
        _ => Err(format!("unknown conntrack command '{cmd}'")),
    }
}
