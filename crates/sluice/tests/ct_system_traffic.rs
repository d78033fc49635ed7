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

// ---- Fragments: "conntrack - IPv4 fragmentation" and the cases after it.

/// The tests' DPCTL_MODIFY_FRAGMENTATION: a lower minimum fragment size,
/// fewer fragments held, and the status that says so.
fn modify_fragmentation(sw: &Sluice) {
    assert_eq!(
        sw.ctl(&["ipf-set-min-frag", "v4", "1000"]),
        "setting minimum fragment size successful\n"
    );
    assert_eq!(
        sw.ctl(&["ipf-set-max-nfrags", "500"]),
        "setting maximum fragments successful\n"
    );
    assert_eq!(sw.ctl(&["ipf-get-status"]), ipf_status(0, 0, 0));
}

/// `ipf-get-status` after DPCTL_MODIFY_FRAGMENTATION with `held`
/// fragments held, `accepted` and `completed` IPv4 counts.
fn ipf_status(held: u32, accepted: u32, completed: u32) -> String {
    format!(
        "        Fragmentation Module Status
        ---------------------------
        v4 enabled: 1
        v6 enabled: 1
        max num frags (v4/v6): 500
        num frag: {held}
        min v4 frag size: 1000
        v4 frags accepted: {accepted}
        v4 frags completed: {completed}
        v4 frags expired: 0
        v4 frags too small: 0
        v4 frags overlapped: 0
        v4 frags purged: 0
        min v6 frag size: 1280
        v6 frags accepted: 0
        v6 frags completed: 0
        v6 frags expired: 0
        v6 frags too small: 0
        v6 frags overlapped: 0
        v6 frags purged: 0
"
    )
}

/// `ping -s SIZE -q -c COUNT -i 0.3 -w 2 TO` from `host`: (sent, received).
fn ping_big(host: &Host, cmd: &str, size: u32, count: u32, to: &str) -> (u32, u32) {
    let out = host.exec_status(&format!("{cmd} -s {size} -q -c {count} -i 0.3 -w 2 {to}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {text}"));
    let num = |after: &str| -> u32 {
        let i = line.find(after).unwrap_or_else(|| panic!("{line}"));
        line[..i]
            .trim_end()
            .rsplit([' ', ','])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num(" packets transmitted"), num(" received"))
}

const FRAG_FLOWS: &str = "\
priority=1,action=drop
priority=100,in_port=1,icmp,action=ct(commit,zone=9),2
priority=100,in_port=2,ct_state=-trk,icmp,action=ct(table=0,zone=9)
priority=100,in_port=2,ct_state=+trk+est-new,icmp,action=1
";

#[test]
fn ipv4_fragmentation() {
    require_root_and(&["ip", "ping"]);
    let (ns0, _ns1, sw) = pair("f4", FRAG_FLOWS);
    modify_fragmentation(&sw);
    // Each ping and its answer in two fragments, then in three.
    assert_eq!(ping_big(&ns0, "ping", 1600, 3, "10.1.1.2"), (3, 3));
    assert_eq!(ping_big(&ns0, "ping", 3200, 3, "10.1.1.2"), (3, 3));
    // DPCTL_CHECK_FRAGMENTATION_PASS.
    assert_eq!(
        sw.ctl(&["ipf-get-status", "--more"]),
        ipf_status(0, 30, 30) + "\n        Fragment Lists:\n\n"
    );
    assert_balanced(&sw.stop());
}

#[test]
fn ipv4_fragmentation_expiry() {
    require_root_and(&["ip", "ping"]);
    // Only whole datagrams and first fragments pass: the first fragments
    // wait for the rest, which never comes.
    let (ns0, _ns1, sw) = pair(
        "fx",
        "\
priority=1,action=drop
priority=100,in_port=1,icmp,ip_frag=no,action=ct(commit,zone=9),2
priority=100,in_port=1,icmp,ip_frag=first,action=ct(commit,zone=9),2
priority=100,in_port=2,ct_state=-trk,icmp,action=ct(table=0,zone=9)
priority=100,in_port=2,ct_state=+trk+est-new,icmp,action=1
",
    );
    modify_fragmentation(&sw);
    let (sent, got) = ping_big(&ns0, "ping", 1600, 1, "10.1.1.2");
    assert!(sent >= 1 && got == 0, "{sent} sent, {got} received");
    // DPCTL_CHECK_FRAGMENTATION_FAIL, its FORMAT_FRAG_LIST clearing
    // recirculation and IP ids: one list per ping, its first fragment.
    let status = sw.ctl(&["ipf-get-status", "-m"]);
    let (head, lists) = status.split_once("\n        Fragment Lists:\n\n").unwrap();
    assert_eq!(head, ipf_status(sent, sent, 0));
    let lists: Vec<String> = lists
        .lines()
        .map(|l| {
            let l = l.split_once("recirc_id=").map_or(l.to_string(), |(a, b)| {
                format!("{a}recirc_id=<cleared>{}", &b[b.find(',').unwrap()..])
            });
            l.split_once("ip_id=").map_or(l.clone(), |(a, b)| {
                format!("{a}ip_id=<cleared>{}", &b[b.find(',').unwrap()..])
            })
        })
        .collect();
    assert_eq!(
        lists,
        vec!["(src=10.1.1.1,dst=10.1.1.2,recirc_id=<cleared>,ip_id=<cleared>,dl_type=0x800,zone=9,nw_proto=1,num_fragments=1,state=first frag)"; sent as usize]
    );
    // Stopped, the switch drops what it holds, counted.
    let report = sw.stop();
    assert_balanced(&report);
    assert_eq!(
        report["datapath"]["dropped"]["fragment purged"].as_u64(),
        Some(u64::from(sent)),
        "{}",
        report["datapath"]
    );
}

#[test]
fn ipv6_fragmentation() {
    require_root_and(&["ip", "ping"]);
    // Neighbour discovery between the ports, in place of the test's
    // `icmp6,icmp_type=135/136,action=normal`.
    let (ns0, ns1, sw) = pair(
        "f6",
        "\
priority=1,action=drop
priority=10,in_port=1,ipv6,action=ct(commit,zone=9),2
priority=10,in_port=2,ct_state=-trk,ipv6,action=ct(table=0,zone=9)
priority=10,in_port=2,ct_state=+trk+est-new,ipv6,action=1
priority=100,icmp6,icmp_type=135,in_port=1,action=output:2
priority=100,icmp6,icmp_type=135,in_port=2,action=output:1
priority=100,icmp6,icmp_type=136,in_port=1,action=output:2
priority=100,icmp6,icmp_type=136,in_port=2,action=output:1
",
    );
    // One command per exec: each runs in the host's namespace (a shell
    // list would run its tail in the root namespace).
    for (h, a) in [(&ns0, "fc00::1/96"), (&ns1, "fc00::2/96")] {
        h.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=0");
        h.exec("sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0");
        h.exec(&format!("ip addr add {a} dev eth0 nodad"));
    }
    wait_for("IPv6 between the hosts", 10, || {
        ns0.exec_status("ping -6 -c 1 -W 1 fc00::2")
            .status
            .success()
    });
    assert_eq!(ping_big(&ns0, "ping -6", 1600, 3, "fc00::2"), (3, 3));
    assert_eq!(ping_big(&ns0, "ping -6", 3200, 3, "fc00::2"), (3, 3));
    let status = sw.ctl(&["ipf-get-status"]);
    assert!(
        status.contains("        v6 frags accepted: 30\n")
            && status.contains("        v6 frags completed: 30\n")
            && status.contains("        num frag: 0\n"),
        "{status}"
    );
    assert_balanced(&sw.stop());
}

// ---- Fragments by packet-out: "conntrack - IPv4 fragmentation with
// fragments specified", "out of order", "overlapping fragments by 1
// octet" (both orders), "incomplete reassembled packet", and the IPv6
// cases, "multiple extension headers" (1 and 2, both orders). Their
// frames rebuilt here: a UDP datagram from port 1 to port 2 (UDP length
// 8 as theirs), cut in two; packet-outs one by one (theirs are one
// bundle).

/// IPv4 fragment: `data` at byte offset `8 * off8`, more to come or not.
fn frag4(off8: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut f = hex("50540000000a5054000000090800");
    let tot = (20 + data.len()) as u16;
    let word = off8 | if more { 0x2000 } else { 0 };
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&tot.to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&word.to_be_bytes());
    f.extend_from_slice(&[0, 17, 0, 0, 10, 1, 1, 1, 10, 1, 1, 2]);
    let c = sluice_packet::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// IPv6 fragment (its extension headers `before` the fragment header,
/// whose next header is UDP), `data` at byte offset `off`.
fn frag6(before: &[u8], off: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut f = hex("50540000000a50540000000986dd60000000");
    let plen = (before.len() + 8 + data.len()) as u16;
    f.extend_from_slice(&plen.to_be_bytes());
    f.push(if before.is_empty() { 44 } else { 0 });
    f.push(0xff);
    f.extend_from_slice(&hex(
        "fc000000000000000000000000000001fc000000000000000000000000000002",
    ));
    f.extend_from_slice(before);
    f.extend_from_slice(&[17, 0]);
    f.extend_from_slice(&(off | u16::from(more)).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1]);
    f.extend_from_slice(data);
    f
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A UDP datagram's bytes (header: ports 1 to 2, length 8; checksum 0
/// over IPv4, right over IPv6 for the whole datagram) cut at `cut`.
fn udp_halves(len: usize, cut: usize, v6: bool) -> (Vec<u8>, Vec<u8>) {
    let mut d = vec![0, 1, 0, 2, 0, 8, 0, 0];
    d.extend((0..len - 8).map(|i| (i % 10) as u8));
    if v6 {
        use sluice_packet::wire::checksum::{finish, pseudo_v6, sum_wide};
        let a = |n: u8| {
            let mut x = [0u8; 16];
            x[0] = 0xfc;
            x[15] = n;
            x
        };
        let c = finish(sum_wide(pseudo_v6(&a(1), &a(2), 17, len as u32), &d));
        d[6..8].copy_from_slice(&c.to_be_bytes());
    }
    let second = d.split_off(cut);
    (d, second)
}

/// Sends `frames` by packet-out with `actions=ct(commit)` to a Sluice
/// (minimum fragment sizes 400, DPCTL_SET_MIN_FRAG_SIZE), waits until
/// the tracker has seen `seen` fragments (taken or refused), and gives
/// its `dump-conntrack` for `ip` as FORMAT_CT does.
fn packet_outs(frames: &[Vec<u8>], seen: u32, ip: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("of.sock");
    let sw = Sluice::start_with(
        None,
        "priority=0,actions=drop\n",
        &["1=null"],
        &["--listen", &format!("punix:{}", sock.display())],
    );
    for v in ["v4", "v6"] {
        assert_eq!(
            sw.ctl(&["ipf-set-min-frag", v, "400"]),
            "setting minimum fragment size successful\n"
        );
    }
    let target = format!("unix:{}", sock.display());
    wait_for("the OpenFlow socket", 10, || sock.exists());
    for f in frames {
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        let (ok, out) = ofctl(&[
            "packet-out",
            &target,
            &format!("in_port=1,packet={hex},actions=ct(commit)"),
        ]);
        assert!(ok, "packet-out: {out}");
    }
    let count = |status: &str, what: &str| -> u32 {
        status
            .lines()
            .filter(|l| l.contains(what))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u32>().unwrap())
            .sum()
    };
    wait_for("the fragments at the tracker", 10, || {
        let s = sw.ctl(&["ipf-get-status"]);
        count(&s, "frags accepted") + count(&s, "frags overlapped") >= seen
    });
    let dump = format_ct(&sw.ctl(&["dump-conntrack"]), ip);
    assert_balanced(&sw.stop());
    dump
}

const UDP4: &str = "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>)";
const UDP6: &str = "udp,orig=(src=fc00::1,dst=fc00::2,sport=<cleared>,dport=<cleared>),reply=(src=fc00::2,dst=fc00::1,sport=<cleared>,dport=<cleared>)";

#[test]
fn ipv4_fragments_specified_in_order_out_of_order_and_overlapping() {
    require_root_and(&["ovs-ofctl"]);
    let (a, b) = udp_halves(428, 400, false);
    let first = frag4(0, true, &a);
    let second = frag4(50, false, &b);
    // Starting one byte-octet inside the first: overlapping.
    let overlapping = frag4(49, false, &b);
    assert_eq!(
        packet_outs(&[first.clone(), second.clone()], 2, "10.1.1.2"),
        [UDP4]
    );
    assert_eq!(packet_outs(&[second, first.clone()], 2, "10.1.1.2"), [UDP4]);
    assert!(packet_outs(&[first.clone(), overlapping.clone()], 2, "10.1.1.2").is_empty());
    assert!(packet_outs(&[overlapping, first.clone()], 2, "10.1.1.2").is_empty());
    // Incomplete: nothing tracked.
    assert!(packet_outs(&[first], 1, "10.1.1.2").is_empty());
}

#[test]
fn ipv6_fragments_specified_with_extension_headers() {
    require_root_and(&["ovs-ofctl"]);
    let (a, b) = udp_halves(1300, 1272, true);
    for before in [
        Vec::new(),
        hex("2c00000000000000"),
        // A router alert among the hop-by-hop options.
        hex("2c00000005020000"),
    ] {
        let first = frag6(&before, 0, true, &a);
        let second = frag6(&before, 1272, false, &b);
        assert_eq!(
            packet_outs(&[first.clone(), second.clone()], 2, "fc00::2"),
            [UDP6]
        );
        assert_eq!(packet_outs(&[second, first.clone()], 2, "fc00::2"), [UDP6]);
        assert!(packet_outs(&[first], 1, "fc00::2").is_empty());
    }
}
