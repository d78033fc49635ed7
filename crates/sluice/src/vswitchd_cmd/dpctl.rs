//! `ovs-appctl dpctl/dump-flows`: its arguments as OVS takes them, and
//! port names put in for datapath port numbers (`--names`, the default
//! with `-m`), in the text and in a `filter=`.

use std::collections::BTreeMap;

/// What `dpctl/dump-flows` was asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct DumpArgs {
    /// `-m`/`--more`: every field.
    pub verbose: bool,
    /// Port names for numbers (`--names`; by default with `-m`).
    pub names: bool,
    /// `filter=MATCH`, as given.
    pub filter: Option<String>,
}

impl DumpArgs {
    /// `[-m|--more] [--names|--no-names] [DP] [filter=MATCH]`: the
    /// datapath, when named, must be this one (`ovs-netdev`,
    /// `netdev@ovs-netdev`); `type=` and `pmd=` are refused by name
    /// rather than ignored.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut d = DumpArgs::default();
        let mut names = None;
        for a in args {
            match a.as_str() {
                "-m" | "--more" => d.verbose = true,
                "--names" => names = Some(true),
                "--no-names" => names = Some(false),
                "ovs-netdev" | "netdev@ovs-netdev" => {}
                o if o.starts_with("filter=") => d.filter = Some(o["filter=".len()..].to_string()),
                o if o.starts_with("type=") || o.starts_with("pmd=") => {
                    return Err(format!(
                        "dpctl/dump-flows: '{o}' is not supported by Sluice yet"
                    ))
                }
                o if o.starts_with('-') => {
                    return Err(format!("dpctl/dump-flows: unknown option '{o}'"))
                }
                o => return Err(format!("dpctl/dump-flows: datapath not found: {o}")),
            }
        }
        d.names = names.unwrap_or(d.verbose);
        Ok(d)
    }

    /// `dump-odp-flows`'s arguments: the filter's `in_port=PORT` (a name
    /// or OVS's number) made Sluice's datapath number by `resolve`.
    pub fn ctl_args(&self, resolve: impl Fn(&str) -> Option<u32>) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        if self.verbose {
            out.push("-m".to_string());
        }
        if let Some(f) = &self.filter {
            let mut parts = Vec::new();
            for p in f.split(',') {
                match p.trim().strip_prefix("in_port=") {
                    Some(n) => {
                        let n = n.trim_matches('"');
                        let Some(dp) = resolve(n) else {
                            return Err(format!("dpctl/dump-flows: filter: unknown port '{n}'"));
                        };
                        parts.push(format!("in_port={dp}"));
                    }
                    None => parts.push(p.to_string()),
                }
            }
            out.push("--filter".to_string());
            out.push(parts.join(","));
        }
        Ok(out)
    }
}

/// The dump with each of Sluice's datapath port numbers put as `ports`
/// says (a name, or OVS's number): `in_port(N)`, `out_port(N)` and an
/// output action (a bare number among the actions, as in `actions:2,3`
/// and a trace's `Datapath actions: 2,3`).
pub(super) fn with_names(text: &str, ports: &BTreeMap<u32, String>) -> String {
    let name = |n: &str| -> Option<&String> { n.parse::<u32>().ok().and_then(|n| ports.get(&n)) };
    let wrapped = |s: &str, tag: &str| -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find(tag) {
            out += &rest[..i + tag.len()];
            rest = &rest[i + tag.len()..];
            let end = rest.find(')').unwrap_or(rest.len());
            match name(&rest[..end]) {
                Some(n) => out += n,
                None => out += &rest[..end],
            }
            rest = &rest[end..];
        }
        out + rest
    };
    let mut out = String::new();
    for line in text.lines() {
        let line = wrapped(&wrapped(line, "in_port("), "out_port(");
        let Some(at) = line.rfind("actions:") else {
            out += &line;
            out.push('\n');
            continue;
        };
        let (head, acts) = line.split_at(at + "actions:".len());
        out += head;
        // The actions split at the commas outside parentheses.
        let mut depth = 0;
        let mut start = 0;
        let mut tokens = Vec::new();
        for (i, c) in acts.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    tokens.push(&acts[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        tokens.push(&acts[start..]);
        let named: Vec<String> = tokens
            .iter()
            .map(|t| {
                let lead = &t[..t.len() - t.trim_start().len()];
                name(t.trim()).map_or(t.to_string(), |n| format!("{lead}{n}"))
            })
            .collect();
        out += &named.join(",");
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> BTreeMap<u32, String> {
        BTreeMap::from([
            (1, "ovs-p0".to_string()),
            (2, "ovs-p1".to_string()),
            (65537, "patch-a".to_string()),
        ])
    }

    #[test]
    fn numbers_become_names_where_ovs_names_them() {
        let t = "flow-dump from pmd thread 0:\n\
                 recirc_id(0),in_port(1),packet_type(ns=0,id=0),ipv4(src=10.0.0.1,frag=no), \
                 packets:1, bytes:42, used:never, actions:set(ipv4(ttl=63)),2,65537,tnl_push(tnl_port(vxlan_sys_4789),header(size=50),out_port(2)),7\n";
        assert_eq!(
            with_names(t, &ports()),
            "flow-dump from pmd thread 0:\n\
             recirc_id(0),in_port(ovs-p0),packet_type(ns=0,id=0),ipv4(src=10.0.0.1,frag=no), \
             packets:1, bytes:42, used:never, actions:set(ipv4(ttl=63)),ovs-p1,patch-a,tnl_push(tnl_port(vxlan_sys_4789),header(size=50),out_port(ovs-p1)),7\n"
        );
    }

    #[test]
    fn arguments_as_ovs_takes_them() {
        let a = |v: &[&str]| DumpArgs::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["-m"]).unwrap(),
            DumpArgs {
                verbose: true,
                names: true,
                filter: None
            }
        );
        assert!(!a(&["-m", "--no-names"]).unwrap().names);
        let f = a(&["--names", "filter=in_port=ovs-p0,ip"]).unwrap();
        assert!(f.names && !f.verbose);
        let resolve = |p: &str| ports().into_iter().find(|(_, n)| n == p).map(|(d, _)| d);
        assert_eq!(
            f.ctl_args(resolve).unwrap(),
            vec!["--filter".to_string(), "in_port=1,ip".to_string()]
        );
        assert!(a(&["filter=in_port=nope"])
            .unwrap()
            .ctl_args(resolve)
            .is_err());
        assert!(a(&["type=offloaded"]).is_err());
        assert!(a(&["system@ovs-system"])
            .unwrap_err()
            .contains("datapath not found"));
    }
}
