//! `ovs-appctl dpctl/dump-conntrack`, `dpctl/flush-conntrack`,
//! `dpctl/ct-set-maxconns`, `dpctl/ct-get-maxconns` and
//! `dpctl/ct-get-nconns` with OVS 3.1's arguments (`lib/dpctl.c`: an
//! optional datapath name first, `zone=N`, the tuples of
//! `lib/ofp-ct.c`'s `ofp_ct_tuple_parse`) and its errors
//! (`ovs-vswitchd: WHAT (Invalid argument)`, which scripts match).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use sluice_conntrack::{Conntrack, FlushMatch, FlushTuple};

/// The names of Sluice's one datapath (`dpif/show`'s `netdev@ovs-netdev`).
const DP_NAMES: [&str; 2] = ["ovs-netdev", "netdev@ovs-netdev"];

/// OVS's `dpctl_error` with `EINVAL`.
fn einval(what: &str) -> String {
    format!("ovs-vswitchd: {what} (Invalid argument)\n")
}

/// OVS's `opt_dpif_open`: `args` without the command, `max_args` with
/// it. A datapath named first is taken off; with as many arguments as
/// the most the command takes, the first must be one.
fn dp_open(args: &[String], max_args: usize) -> Result<&[String], String> {
    match args.first() {
        Some(a) if DP_NAMES.contains(&a.as_str()) => Ok(&args[1..]),
        _ if args.len() + 1 == max_args => Err(einval("datapath not found")),
        _ => Ok(args),
    }
}

/// Runs `method` if it is one of this module's, on the tracker
/// `conntrack` gives (asked for only then).
pub(super) fn call(
    method: &str,
    args: &[String],
    conntrack: impl FnOnce() -> Arc<Conntrack>,
) -> Option<Result<String, String>> {
    Some(match method {
        "dpctl/dump-conntrack" => dump(args, &conntrack()),
        "dpctl/flush-conntrack" => flush(args, &conntrack()),
        "dpctl/ct-set-maxconns" => dp_open(args, 3).and_then(|_| {
            // The last word, whichever it is (the command's own when none).
            let n = args.last().and_then(|a| a.parse::<u32>().ok());
            let n = n.ok_or_else(|| einval("maxconns missing or malformed"))?;
            conntrack().set_max_conns(u64::from(n));
            Ok("setting maxconns successful".into())
        }),
        "dpctl/ct-get-maxconns" => dp_open(args, 2).map(|_| {
            let max = conntrack().max_conns().min(u64::from(u32::MAX));
            format!("{max}\n")
        }),
        "dpctl/ct-get-nconns" => dp_open(args, 2).map(|_| format!("{}\n", conntrack().len())),
        _ => return None,
    })
}

/// `dpctl/dump-conntrack [DP] [zone=N]`: one connection a line.
fn dump(args: &[String], ct: &Conntrack) -> Result<String, String> {
    let flag = args.iter().find(|a| a.starts_with('-'));
    if let Some(f) = flag {
        // `-m` and `-s` add fields Sluice's entries do not have yet:
        // refused rather than answered without them.
        return Err(einval(&format!(
            "'{f}' is not supported by Sluice's dump-conntrack"
        )));
    }
    let zone = args
        .last()
        .and_then(|a| a.strip_prefix("zone=")?.parse::<u16>().ok());
    let rest = if zone.is_some() {
        &args[..args.len() - 1]
    } else {
        args
    };
    dp_open(rest, 2)?;
    Ok(ct
        .dump(zone, ct.now_ms())
        .into_iter()
        .map(|l| l + "\n")
        .collect())
}

/// `dpctl/flush-conntrack [zone=N] [ORIG-TUPLE [REPLY-TUPLE]]`, in OVS
/// 3.1's order of parsing.
fn flush(args: &[String], ct: &Conntrack) -> Result<String, String> {
    let mut rest = args;
    let mut zone = None;
    if let Some(z) = rest.first().and_then(|a| a.strip_prefix("zone=")) {
        zone = Some(
            z.parse::<u16>()
                .map_err(|_| einval("failed to parse zone"))?,
        );
        rest = &rest[1..];
    }
    let mut m = FlushMatch::default();
    for i in 0..2 {
        let Some(arg) = rest.first() else { break };
        if !arg.is_empty() {
            let t = if i == 0 { &mut m.orig } else { &mut m.reply };
            parse_tuple(arg, t, &mut m.proto, &mut m.v6).map_err(|e| einval(&e))?;
        }
        rest = &rest[1..];
    }
    if rest.len() > 1 {
        return Err(einval("invalid arguments"));
    }
    dp_open(args, 5)?;
    ct.flush_matching(zone, &m);
    Ok(String::new())
}

/// One tuple of `ct_nw_src=`, `ct_nw_dst=`, `ct_ipv6_src=`,
/// `ct_ipv6_dst=`, `ct_nw_proto=`, `ct_tp_src=`, `ct_tp_dst=`,
/// `icmp_type=`, `icmp_code=`, `icmp_id=` (after `ct_nw_proto` of ICMP),
/// comma separated, into `t`; the protocol and address family are the
/// match's, shared by both tuples. Errors in OVS's words.
pub(super) fn parse_tuple(
    s: &str,
    t: &mut FlushTuple,
    proto: &mut u8,
    v6: &mut Option<bool>,
) -> Result<(), String> {
    let failed = |key: &str| format!("failed to parse field {key}");
    for kv in s.split([',', ' ', '\t']).filter(|kv| !kv.is_empty()) {
        let (key, value) = kv.split_once(['=', ':']).unwrap_or((kv, ""));
        if value.is_empty() {
            return Err(format!("field {key} missing value"));
        }
        match key {
            "ct_nw_src" | "ct_nw_dst" | "ct_ipv6_src" | "ct_ipv6_dst" => {
                let want_v6 = key.starts_with("ct_ipv6");
                if v6.is_some_and(|had| had != want_v6) {
                    return Err(format!("the L3 protocol does not match {value}"));
                }
                let addr = if key.ends_with("src") {
                    &mut t.src
                } else {
                    &mut t.dst
                };
                if *addr != [0; 16] {
                    return Err(format!("{key} is set multiple times"));
                }
                *addr = if want_v6 {
                    value.parse::<Ipv6Addr>().map_err(|_| failed(key))?.octets()
                } else {
                    value
                        .parse::<Ipv4Addr>()
                        .map_err(|_| failed(key))?
                        .to_ipv6_mapped()
                        .octets()
                };
                *v6 = Some(want_v6);
            }
            "ct_nw_proto" => *proto = number(value).ok_or_else(|| failed(key))?,
            "ct_tp_src" => t.sport = number(value).ok_or_else(|| failed(key))?,
            "ct_tp_dst" => t.dport = number(value).ok_or_else(|| failed(key))?,
            "icmp_type" | "icmp_code" | "icmp_id" => {
                if *proto != 1 && *proto != 58 {
                    return Err("invalid L4 fields".into());
                }
                // As the tracker keeps an ICMP tuple: the id where the
                // source port goes, code and type where the destination
                // port goes (code << 8 | type).
                match key {
                    "icmp_id" => t.sport = number(value).ok_or_else(|| failed(key))?,
                    "icmp_type" => {
                        let ty: u8 = number(value).ok_or_else(|| failed(key))?;
                        t.dport = (t.dport & 0xff00) | u16::from(ty);
                    }
                    _ => {
                        let code: u8 = number(value).ok_or_else(|| failed(key))?;
                        t.dport = (t.dport & 0x00ff) | u16::from(code) << 8;
                    }
                }
            }
            _ => return Err(format!("invalid conntrack tuple field: {key}")),
        }
    }
    if *proto == 0 && (t.sport != 0 || t.dport != 0) {
        return Err("port is set without protocol".into());
    }
    Ok(())
}

/// A number as OVS's `str_to_u8`/`str_to_u16` read one: C's `strtol` in
/// base 0 (leading white space, a sign, hexadecimal after `0x`, octal
/// after a leading `0`, decimal otherwise), the whole string consumed,
/// no negative value, in the type's range.
fn number<T: TryFrom<u64>>(s: &str) -> Option<T> {
    let s = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    // (`from_str_radix` takes a sign of its own: refused here, as strtol
    // takes one sign only.)
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let n = u64::from_str_radix(digits, radix).ok()?;
    if negative && n != 0 {
        return None;
    }
    T::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn tuple(s: &str) -> Result<(FlushTuple, u8, Option<bool>), String> {
        let (mut t, mut p, mut v6) = (FlushTuple::default(), 0, None);
        parse_tuple(s, &mut t, &mut p, &mut v6).map(|()| (t, p, v6))
    }

    #[test]
    fn numbers_read_as_strtol_in_base_0() {
        let n = |s: &str| number::<u16>(s);
        assert_eq!(n("80"), Some(80));
        assert_eq!(n("0x50"), Some(80));
        assert_eq!(n("0X50"), Some(80));
        assert_eq!(n("0120"), Some(80));
        assert_eq!(n(" +80"), Some(80));
        assert_eq!(n("0"), Some(0));
        assert_eq!(n("-0"), Some(0));
        for bad in [
            "", "08", "0x", "80 ", "-1", "+-1", "0x-1", "65536", "8O", "++1",
        ] {
            assert_eq!(n(bad), None, "{bad:?}");
        }
        assert_eq!(number::<u8>("0377"), Some(255));
        assert_eq!(number::<u8>("256"), None);
    }

    #[test]
    fn tuples_parse_as_ovs_parses_them() {
        let (t, p, v6) =
            tuple("ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.1,ct_nw_proto=17,ct_tp_src=2,ct_tp_dst=1")
                .unwrap();
        assert_eq!((p, v6, t.sport, t.dport), (17, Some(false), 2, 1));
        assert_eq!(t.src[10..], [0xff, 0xff, 10, 1, 1, 2]);
        let (t, p, _) = tuple("ct_nw_proto=1,icmp_id=7,icmp_type=8,icmp_code=0").unwrap();
        assert_eq!((p, t.sport, t.dport), (1, 7, 8));
        let (t, _, v6) = tuple("ct_ipv6_src=fc00::1").unwrap();
        assert_eq!((v6, t.src[15]), (Some(true), 1));
        // OVS's errors, word for word.
        for (s, e) in [
            ("ct_tp_src=1", "port is set without protocol"),
            ("icmp_id=1", "invalid L4 fields"),
            (
                "ct_nw_src=10.0.0.1,ct_ipv6_dst=::1",
                "the L3 protocol does not match ::1",
            ),
            (
                "ct_nw_src=10.0.0.1,ct_nw_src=10.0.0.2",
                "ct_nw_src is set multiple times",
            ),
            ("ct_nw_src=10.0.0", "failed to parse field ct_nw_src"),
            ("ct_nw_proto=256", "failed to parse field ct_nw_proto"),
            ("ct_nw_src", "field ct_nw_src missing value"),
            ("frob=1", "invalid conntrack tuple field: frob"),
        ] {
            assert_eq!(tuple(s).unwrap_err(), e, "{s}");
        }
    }

    #[test]
    fn arguments_and_errors_are_ovs_s() {
        let ct = Arc::new(Conntrack::default());
        let run = |m: &str, a: &[&str]| call(m, &strings(a), || Arc::clone(&ct)).unwrap();
        let bad = "ovs-vswitchd: maxconns missing or malformed (Invalid argument)\n";
        assert_eq!(
            run("dpctl/ct-set-maxconns", &["one-bad-dp"]).unwrap_err(),
            bad
        );
        assert_eq!(run("dpctl/ct-set-maxconns", &["a"]).unwrap_err(), bad);
        let nodp = "ovs-vswitchd: datapath not found (Invalid argument)\n";
        assert_eq!(
            run("dpctl/ct-set-maxconns", &["one-bad-dp", "10"]).unwrap_err(),
            nodp
        );
        assert_eq!(
            run("dpctl/ct-get-maxconns", &["one-bad-dp"]).unwrap_err(),
            nodp
        );
        assert_eq!(
            run("dpctl/ct-get-nconns", &["one-bad-dp"]).unwrap_err(),
            nodp
        );
        assert_eq!(
            run("dpctl/ct-set-maxconns", &["10"]).unwrap(),
            "setting maxconns successful"
        );
        assert_eq!(run("dpctl/ct-get-maxconns", &[]).unwrap(), "10\n");
        assert_eq!(
            run("dpctl/ct-set-maxconns", &["ovs-netdev", "12"]).unwrap(),
            "setting maxconns successful"
        );
        assert_eq!(
            run("dpctl/ct-get-maxconns", &["netdev@ovs-netdev"]).unwrap(),
            "12\n"
        );
        assert_eq!(run("dpctl/ct-get-nconns", &[]).unwrap(), "0\n");
        assert_eq!(
            run("dpctl/flush-conntrack", &["zone=x"]).unwrap_err(),
            "ovs-vswitchd: failed to parse zone (Invalid argument)\n"
        );
        assert_eq!(
            run("dpctl/flush-conntrack", &["zone=5", "ct_tp_src=1"]).unwrap_err(),
            "ovs-vswitchd: port is set without protocol (Invalid argument)\n"
        );
        assert_eq!(
            run(
                "dpctl/flush-conntrack",
                &["zone=5", "ct_nw_proto=17,ct_tp_src=1"]
            )
            .unwrap(),
            ""
        );
        assert_eq!(run("dpctl/dump-conntrack", &["zone=5"]).unwrap(), "");
        assert!(call("dpctl/dump-flows", &[], || Arc::clone(&ct)).is_none());
    }
}
