//! `sluice ctl dump-conntrack`, `flush-conntrack`, `conntrack-stats` and
//! `ct-set-maxconns`: the connection tracker of a running switch, in the
//! formats of `ovs-appctl dpctl/dump-conntrack`, `dpctl/flush-conntrack`,
//! `dpctl/ct-stats-show` and `dpctl/ct-set-maxconns`.

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
                "Committed: {}, expired: {}, invalid packets: {}, commits refused (table full): {}\n",
                get(&s.committed),
                get(&s.expired),
                get(&s.invalid),
                get(&s.full)
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
        _ => Err(format!("unknown conntrack command '{cmd}'")),
    }
}
