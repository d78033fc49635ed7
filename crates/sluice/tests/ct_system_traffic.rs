//! Open vSwitch's own connection tracking system tests
//! (`tests/system-traffic.at`, OVS 3.1: "conntrack - simple SNAT", "SNAT
//! with port range with exhaustion", "simple DNAT", "DNAT with
//! additional SNAT", "all-zero IP SNAT", "ICMP related with NAT"), their
//! rules and expectations as the reference, run against Sluice between
//! two network namespaces. Where they answer ARP for translated
//! addresses with a responder table (NORMAL, `output:FIELD`: not in
//! Sluice yet) the hosts here get permanent neighbour entries instead,
//! and ARP is forwarded by two rules. Needs root.

mod support;

use support::*;

/// ARP between the two ports, in place of the tests' `arp,action=normal`
/// and their ARP responder tables.
const ARP: &str = "\
priority=10,arp,in_port=1,actions=output:2
priority=10,arp,in_port=2,actions=output:1
";

/// Two hosts (10.1.1.1 at port 1, 10.1.1.2 at port 2) and a Sluice with
/// `flows` (and the ARP rules) between them.
fn pair(tag: &str, flows: &str) -> (Host, Host, Sluice) {
    let ns0 = Host::new(&format!("{tag}0"), Some("10.1.1.1/24"));
    let ns1 = Host::new(&format!("{tag}1"), Some("10.1.1.2/24"));
    let sw = Sluice::start(
        None,
        &format!("{ARP}{flows}"),
        &[
            &format!("1=afpacket:{}", ns0.root_if),
            &format!("2=afpacket:{}", ns1.root_if),
        ],
    );
    (ns0, ns1, sw)
}

/// An HTTP server on port `port` in `host`.
fn http_server(host: &Host, addr: &str, port: u16) {
    host.exec(&format!(
        "bash -c 'python3 -m http.server {port} --bind {addr} >/dev/null 2>&1 &'"
    ));
    wait_for("the HTTP server", 10, || {
        host.exec_status(&format!(
            "bash -c 'echo > /dev/tcp/{addr}/{port}' 2>/dev/null"
        ))
        .status
        .success()
    });
}

/// `wget URL` from `host`: its exit status.
fn wget(host: &Host, url: &str, tries: u32) -> i32 {
    host.exec_status(&format!(
        "wget {url} -t {tries} -T 1 --retry-connrefused -q -O /dev/null"
    ))
    .status
    .code()
    .unwrap_or(-1)
}

/// The tests' FORMAT_CT(ip): the connections whose dump line has
/// `dst=IP` somewhere, ports, ids and TCP states cleared, sorted, each
/// once.
fn format_ct(dump: &str, ip: &str) -> Vec<String> {
    let clear = |line: &str, key: &str, digits_only: bool| -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(i) = rest.find(key) {
            out += &rest[..i + key.len()];
            rest = &rest[i + key.len()..];
            let n = rest
                .find(|c: char| {
                    !(c.is_ascii_digit() || (!digits_only && (c.is_ascii_uppercase() || c == '_')))
                })
                .unwrap_or(rest.len());
            out += "<cleared>";
            rest = &rest[n..];
        }
        out + rest
    };
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains(&format!("dst={ip}")))
        .map(|l| {
            let l = clear(l, "port=", true);
            let l = clear(&l, "id=", true);
            clear(&l, "state=", false)
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The address of the translated range the dump shows, as the tests'
/// sed does: `dst=10.1.1.24X`/`25X` becomes `dst=10.1.1.2XX`.
fn range_cleared(lines: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = lines
        .into_iter()
        .map(|l| {
            let mut out = l.clone();
            for n in 240..=254 {
                out = out.replace(&format!("dst=10.1.1.{n})"), "dst=10.1.1.2XX)");
                out = out.replace(&format!("dst=10.1.1.{n},"), "dst=10.1.1.2XX,");
            }
            out
        })
        .collect();
    v.dedup();
    v
}

/// Replies to the SNAT range go to the first host (the tests' ARP
/// responder answers for 10.1.1.240/28 with its MAC).
fn pin_range(at: &Host, to: &Host) {
    for n in 240..=254 {
        at.pin_neighbour(&format!("10.1.1.{n}"), to);
    }
}

#[test]
fn simple_snat() {
    require_root_and(&["ip", "wget", "python3"]);
    let (ns0, ns1, sw) = pair(
        "ss",
        "\
in_port=1,ip,action=ct(commit,zone=1,nat(src=10.1.1.240-10.1.1.254)),output:2
in_port=2,ct_state=-trk,ip,action=ct(table=0,zone=1,nat)
in_port=2,ct_state=+trk,ct_zone=1,ip,action=output:1
priority=0,action=drop
",
    );
    pin_range(&ns1, &ns0);
    http_server(&ns1, "10.1.1.2", 80);
    assert_eq!(wget(&ns0, "10.1.1.2", 5), 0);
    assert_eq!(
        range_cleared(format_ct(&sw.ctl(&["dump-conntrack"]), "10.1.1.2")),
        ["tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.2XX,sport=<cleared>,dport=<cleared>),zone=1,protoinfo=(state=<cleared>)"]
    );
    assert_balanced(&sw.stop());
}

#[test]
fn snat_with_port_range_with_exhaustion() {
    require_root_and(&["ip", "wget", "python3"]);
    let (ns0, ns1, sw) = pair(
        "sx",
        "\
in_port=1,tcp,action=ct(commit,zone=1,nat(src=10.1.1.240:34568,random)),output:2
in_port=2,ct_state=-trk,tcp,tp_dst=34567,action=ct(table=0,zone=1,nat)
in_port=2,ct_state=-trk,tcp,tp_dst=34568,action=ct(table=0,zone=1,nat)
in_port=2,ct_state=+trk,ct_zone=1,tcp,action=output:1
priority=0,action=drop
",
    );
    pin_range(&ns1, &ns0);
    http_server(&ns1, "10.1.1.2", 80);
    assert_eq!(wget(&ns0, "10.1.1.2", 1), 0);
    // The one source port is held (TIME_WAIT): the next connection cannot
    // be translated, leaves as it is, and its replies find no rule.
    assert_eq!(wget(&ns0, "10.1.1.2", 1), 4);
    assert_eq!(
        range_cleared(format_ct(&sw.ctl(&["dump-conntrack"]), "10.1.1.2")),
        ["tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.2XX,sport=<cleared>,dport=<cleared>),zone=1,protoinfo=(state=<cleared>)"]
    );
    assert!(
        sw.ctl(&["conntrack-stats"]).contains(" (NAT exhausted)"),
        "the refusal is counted"
    );
    assert_balanced(&sw.stop());
}

#[test]
fn simple_dnat() {
    require_root_and(&["ip", "wget", "python3"]);
    let (ns0, ns1, sw) = pair(
        "sd",
        "\
priority=100,in_port=1,ip,nw_dst=10.1.1.64,action=ct(zone=1,nat(dst=10.1.1.2),commit),output:2
priority=10,in_port=1,ip,action=ct(commit,zone=1),output:2
priority=100,in_port=2,ct_state=-trk,ip,action=ct(table=0,nat,zone=1)
priority=100,in_port=2,ct_state=+trk+est,ct_zone=1,ip,action=output:1
priority=0,action=drop
",
    );
    // The virtual address answers at the server's MAC.
    ns0.pin_neighbour("10.1.1.64", &ns1);
    http_server(&ns1, "0.0.0.0", 80);
    assert_eq!(wget(&ns0, "10.1.1.64", 5), 0);
    let dump = sw.ctl(&["dump-conntrack"]);
    assert_eq!(
        format_ct(&dump, "10.1.1.64"),
        ["tcp,orig=(src=10.1.1.1,dst=10.1.1.64,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),zone=1,protoinfo=(state=<cleared>)"]
    );
    // The assigned address works as well.
    assert_eq!(wget(&ns0, "10.1.1.2", 3), 0);
    assert_eq!(
        format_ct(&sw.ctl(&["dump-conntrack"]), "10.1.1.2"),
        ["tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),zone=1,protoinfo=(state=<cleared>)"]
    );
    assert_balanced(&sw.stop());
}

#[test]
fn dnat_with_additional_snat() {
    require_root_and(&["ip", "wget", "python3"]);
    let (ns0, ns1, sw) = pair(
        "da",
        "\
table=0,priority=30,in_port=1,ip,nw_dst=172.1.1.2,actions=ct(commit,nat(dst=10.1.1.2:80),table=1)
table=0,priority=20,in_port=2,ip,actions=ct(nat),output:1
table=0,priority=1,actions=drop
table=1,ip,actions=ct(commit,nat(src=10.1.1.240),exec(set_field:0xac->ct_mark,set_field:0xac->ct_label),table=2)
table=2,in_port=1,ip,ct_mark=0xac,ct_label=0xac,actions=output:2
",
    );
    ns0.exec("ip route add 172.1.1.0/24 via 10.1.1.2");
    http_server(&ns1, "0.0.0.0", 80);
    assert_eq!(wget(&ns0, "http://172.1.1.2:8080", 5), 0);
    let dump = sw.ctl(&["dump-conntrack"]);
    // Only the destination was translated: the second ct found the
    // connection by its translated tuple.
    assert!(format_ct(&dump, "10.1.1.240").is_empty(), "{dump}");
    assert_eq!(
        format_ct(&dump, "10.1.1.1"),
        ["tcp,orig=(src=10.1.1.1,dst=172.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),mark=172,labels=0xac,protoinfo=(state=<cleared>)"]
    );
    assert_balanced(&sw.stop());
}

#[test]
fn all_zero_ip_snat() {
    require_root_and(&["ip", "python3"]);
    let (ns0, ns1, sw) = pair(
        "sz",
        "\
table=0,priority=30,ct_state=-trk,ip,action=ct(table=0)
table=0,priority=20,ct_state=-rpl,ip,nw_dst=10.1.1.0/24,actions=ct(commit,nat(src=0.0.0.0),table=10)
table=0,priority=20,ct_state=+rpl,ip,nw_dst=10.1.1.0/24,actions=resubmit(,10)
table=0,priority=20,ip,nw_dst=172.1.1.2,actions=ct(commit,nat(dst=10.1.1.2),table=10)
table=0,priority=1,action=drop
table=10,priority=20,ct_state=+rpl,ip,nw_dst=10.1.1.0/24 actions=ct(table=20,nat)
table=10,priority=10,ip,nw_dst=10.1.1.0/24 actions=resubmit(,20)
table=20,priority=10,ip,nw_dst=10.1.1.1,action=output:1
table=20,priority=10,ip,nw_dst=10.1.1.2,action=output:2
",
    );
    ns0.exec("ip route add 172.1.1.0/24 via 10.1.1.2");
    http_server(&ns1, "0.0.0.0", 80);
    // `nc -p PORT`: a client from a chosen source port.
    let send = |port: u16, to: &str| {
        ns0.exec(&format!(
            "python3 -c \"
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('10.1.1.1', {port})); s.settimeout(5); s.connect(('{to}', 80))
s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); s.recv(100); s.close()
\""
        ));
    };
    // No source translation when none is needed.
    send(30000, "10.1.1.2");
    let dump = sw.ctl(&["dump-conntrack"]);
    let from = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = d
            .lines()
            .filter(|l| l.contains("orig=(src=10.1.1.1,"))
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        from(&dump),
        ["tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=30000,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=30000),protoinfo=(state=TIME_WAIT)"]
    );
    // Translation when needed: the second connection's reply tuple
    // would be the first's, so its port moves.
    send(30001, "172.1.1.2");
    send(30001, "10.1.1.2");
    let lines: Vec<String> = from(&sw.ctl(&["dump-conntrack"]))
        .into_iter()
        .filter(|l| l.contains("30001"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1], "tcp,orig=(src=10.1.1.1,dst=172.1.1.2,sport=30001,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=30001),protoinfo=(state=TIME_WAIT)");
    let moved = lines[0]
        .strip_prefix("tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=30001,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=")
        .and_then(|r| r.strip_suffix("),protoinfo=(state=TIME_WAIT)"))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_ne!(moved, 30001);
    assert_balanced(&sw.stop());
}

#[test]
fn icmp_related_with_nat() {
    require_root_and(&["ip", "python3"]);
    let (ns0, ns1, sw) = pair(
        "sr",
        "\
in_port=1,udp,action=ct(commit,nat(src=10.1.1.240-10.1.1.254),exec(set_field:1->ct_mark)),output:2
in_port=2,icmp,ct_state=-trk,action=ct(table=0,nat)
in_port=2,icmp,nw_dst=10.1.1.1,ct_state=+trk+rel,ct_mark=1,action=output:1
priority=0,action=drop
",
    );
    pin_range(&ns1, &ns0);
    // A UDP datagram to a closed port: ns1's "port unreachable" comes
    // back translated (outside and the datagram it quotes) with right
    // checksums, or the kernel would not match it to the socket, which
    // then sees ECONNREFUSED.
    let out = ns0.exec(
        "python3 -c \"
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.connect(('10.1.1.2', 10000)); s.send(b'a')
try:
    s.recv(10); print('answered')
except ConnectionRefusedError:
    print('refused')
except socket.timeout:
    print('timeout')
\"",
    );
    assert_eq!(out.trim(), "refused");
    let lines = range_cleared(format_ct(&sw.ctl(&["dump-conntrack"]), "10.1.1.2"));
    assert_eq!(
        lines,
        ["udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.2XX,sport=<cleared>,dport=<cleared>),mark=1"]
    );
    assert_balanced(&sw.stop());
}
