//! Fragments through `ct` in the real datapath: held until their datagram
//! is whole, then sent on in offset order with its state, translated as
//! it was; every fragment accounted for.

use std::sync::Arc;

use sluice_classifier::{parse_flow_file, RuleSet};
use sluice_datapath::{Datapath, DatapathConfig, DropReason};
use sluice_packet::build::{Frame, L4};
use sluice_packet::wire::checksum::checksum;
use sluice_port::capture::CapturePort;
use sluice_port::replay::{Frames, ReplayPort};

fn rules(text: &str) -> Arc<RuleSet> {
    Arc::new(RuleSet::from_specs(
        &parse_flow_file(text, None).unwrap(),
        0,
    ))
}

/// A UDP datagram of `n` payload bytes.
fn datagram(src: [u8; 4], dst: [u8; 4], ports: (u16, u16), n: usize, id: u8) -> Vec<u8> {
    let payload: Vec<u8> = (0..n).map(|i| (i as u8) ^ id).collect();
    let mut f = Frame::ipv4(
        src,
        dst,
        L4::Udp {
            src: ports.0,
            dst: ports.1,
        },
    )
    .payload(&payload)
    .frag(0)
    .build();
    f[18..20].copy_from_slice(&u16::from(id).to_be_bytes());
    f[24..26].fill(0);
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

/// The datagram cut into fragments of `size` payload bytes (a multiple
/// of 8; the last takes the rest).
fn cut(d: &[u8], size: usize) -> Vec<Vec<u8>> {
    let payload = &d[34..];
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() {
        let n = size.min(payload.len() - off);
        let more = off + n < payload.len();
        let mut f = d[..34].to_vec();
        f[16..18].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        let word = (off / 8) as u16 | if more { 0x2000 } else { 0 };
        f[20..22].copy_from_slice(&word.to_be_bytes());
        f[24..26].fill(0);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&payload[off..off + n]);
        out.push(f);
        off += n;
    }
    out
}

const IN: [u8; 4] = [10, 0, 1, 5];
const OUT: [u8; 4] = [10, 0, 2, 9];

const FIREWALL: &str = "table=0,ip,actions=ct(table=1,zone=7)\n\
    table=1,priority=60,ct_state=+trk+inv,actions=output:4\n\
    table=1,priority=40,ct_state=+new+trk,ip,nw_src=10.0.1.0/24,actions=ct(commit,zone=7),output:2\n\
    table=1,priority=30,ct_state=+est+trk,actions=output:3\n\
    table=1,priority=0,actions=drop\n";

struct Run {
    ports: Vec<Vec<Vec<u8>>>,
    dp: Datapath,
}

fn run(text: &str, frames: Vec<Vec<u8>>) -> Run {
    run_with(rules(text), frames, |_| {})
}

/// As [`run`], with `each(n)` called at the start of the n-th iteration.
fn run_with(rules: Arc<RuleSet>, frames: Vec<Vec<u8>>, mut each: impl FnMut(u64)) -> Run {
    let frames: Frames = frames.into_iter().collect();
    let mut dp = Datapath::new(DatapathConfig::default(), rules).unwrap();
    // A packet at a time: a reply is not in the batch of the packet
    // that commits its connection.
    dp.add_port(
        1,
        Box::new(ReplayPort::new("in", frames, false).with_burst(1)),
    )
    .unwrap();
    let mut caps = Vec::new();
    for p in 2..=4 {
        let (cap, sent) = CapturePort::new();
        dp.add_port(p, Box::new(cap)).unwrap();
        caps.push(sent);
    }
    let mut n = 0u64;
    let clock = move || {
        n += 1;
        each(n);
        n * 10
    };
    dp.run(clock, |_| false).unwrap();
    dp.finish().unwrap();
    let ports = caps.iter().map(|c| c.lock().unwrap().clone()).collect();
    Run { ports, dp }
}

#[test]
fn a_fragmented_conversation_goes_through_the_firewall_whole() {
    let query = cut(&datagram(IN, OUT, (4000, 53), 3500, 1), 1480);
    let answer = cut(&datagram(OUT, IN, (53, 4000), 2000, 2), 1480);
    let unsolicited = cut(&datagram(OUT, IN, (53, 4001), 2000, 3), 1480);
    // The query's fragments arrive last first; a piece too small to be
    // anything but an attack (600 bytes, not the last) is invalid.
    let small = cut(&datagram(IN, OUT, (4000, 53), 1500, 4), 600);
    let mut frames = vec![query[2].clone(), query[0].clone(), query[1].clone()];
    frames.extend(answer.iter().cloned());
    frames.extend(unsolicited.iter().cloned());
    frames.push(small[0].clone());
    let r = run(FIREWALL, frames);
    assert_eq!(
        r.ports[0], query,
        "new from inside: committed, in offset order"
    );
    assert_eq!(r.ports[1], answer, "the answer: established");
    assert_eq!(r.ports[2], vec![small[0].clone()], "too small: invalid");
    let st = r.dp.stats();
    assert_eq!(st.rx_packets, 8);
    // The unsolicited datagram was new from outside: dropped whole.
    assert_eq!(st.forwarded, 6);
    assert_eq!(st.dropped_total(), 2);
    // Held at each ct and let go each time: the query's twice (its
    // commit is a second ct), the others' once.
    assert_eq!(st.ct_frags_held, 10);
    assert_eq!(st.ct_frags_released, 10);
    assert!(st.rx_balanced(), "{st:?}");
    assert_eq!(r.dp.rules().conntrack().len(), 1);
    let s = r.dp.rules().conntrack().ipf().status(false);
    assert!(s.contains("v4 frags accepted: 10\n"), "{s}");
    assert!(s.contains("v4 frags completed: 10\n"), "{s}");
    assert!(s.contains("v4 frags too small: 1\n"), "{s}");
}

#[test]
fn snat_rewrites_every_fragment_as_the_datagram() {
    let text = "table=0,ip,actions=ct(table=1,zone=7,nat)\n\
        table=1,ct_state=+new+trk,ip,actions=ct(commit,zone=7,nat(src=10.0.2.254:7000)),output:2\n\
        table=1,priority=0,actions=output:4\n";
    let d = datagram(IN, OUT, (4000, 53), 3000, 1);
    let frags = cut(&d, 1480);
    let r = run(text, frags.to_vec());
    let out = &r.ports[0];
    assert_eq!(out.len(), 3);
    for (i, (got, sent)) in out.iter().zip(&frags).enumerate() {
        assert_eq!(
            &got[26..30],
            &[10, 0, 2, 254],
            "fragment {i}: source translated"
        );
        assert_eq!(checksum(&got[14..34]), 0, "fragment {i}: header checksum");
        assert_eq!(got[34..].len(), sent[34..].len());
        if i > 0 {
            assert_eq!(got[34..], sent[34..], "later data as it was");
        }
    }
    assert_eq!(&out[0][34..36], &7000u16.to_be_bytes(), "port translated");
    // The rewritten fragments hold a datagram whose UDP checksum is right.
    let mut whole = out[0][34..].to_vec();
    for f in &out[1..] {
        whole.extend_from_slice(&f[34..]);
    }
    use sluice_packet::wire::checksum::{finish, pseudo_v4, sum_wide};
    let ps = pseudo_v4(0x0a00_02fe, 0x0a00_0209, 17, whole.len() as u16);
    assert_eq!(
        finish(sum_wide(ps, &whole)),
        0,
        "UDP checksum over the datagram"
    );
    assert!(r.dp.stats().rx_balanced());
}

#[test]
fn a_datagram_never_completed_is_purged_counted() {
    let frags = cut(&datagram(IN, OUT, (4000, 53), 3000, 1), 1480);
    let r = run(FIREWALL, vec![frags[0].clone(), frags[2].clone()]);
    assert!(r.ports.iter().all(|p| p.is_empty()));
    let st = r.dp.stats();
    assert_eq!(st.dropped_by(DropReason::FragmentPurged), 2);
    assert!(st.rx_balanced(), "{st:?}");
    assert_eq!(r.dp.rules().conntrack().ipf().held(), 0);
}

#[test]
fn fragments_under_a_vlan_tag_are_reassembled_too() {
    let tag = |f: &Vec<u8>| {
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
        t.extend_from_slice(&f[12..]);
        t
    };
    let query: Vec<Vec<u8>> = cut(&datagram(IN, OUT, (4000, 53), 3500, 1), 1480)
        .iter()
        .map(tag)
        .collect();
    let answer: Vec<Vec<u8>> = cut(&datagram(OUT, IN, (53, 4000), 2000, 2), 1480)
        .iter()
        .map(tag)
        .collect();
    let mut frames = vec![query[1].clone(), query[2].clone(), query[0].clone()];
    frames.extend(answer.iter().cloned());
    let r = run(FIREWALL, frames);
    assert_eq!(r.ports[0], query);
    assert_eq!(r.ports[1], answer);
    assert!(r.dp.stats().rx_balanced());
}

#[test]
fn an_expired_list_goes_on_invalid_with_the_next_ct() {
    let frags = cut(&datagram(IN, OUT, (4000, 53), 3000, 1), 1480);
    let later = datagram(IN, OUT, (4001, 53), 100, 2);
    let rules = rules(FIREWALL);
    // Past the list's 15 s once the two fragments are in: the datagram
    // after them finds it expired.
    let ct = Arc::clone(rules.conntrack());
    let frames = vec![frags[0].clone(), frags[1].clone(), later.clone()];
    let r = run_with(Arc::clone(&rules), frames, |n| {
        if n == 3 {
            ct.warp(15_001);
        }
    });
    // The datagram is committed and goes out; the expired fragments go on
    // with only +inv (not +trk, as OVS marks them), which no rule of
    // table 1 takes: dropped there.
    assert_eq!(r.ports[0], vec![later]);
    let st = r.dp.stats();
    assert_eq!((st.forwarded, st.dropped_total()), (1, 2), "{st:?}");
    assert_eq!(st.dropped_by(DropReason::FragmentPurged), 0);
    assert!(st.rx_balanced(), "{st:?}");
    let s = rules.conntrack().ipf().status(false);
    assert!(s.contains("v4 frags expired: 2\n"), "{s}");
}

#[test]
fn a_fragment_sent_before_its_ct_counts_once_as_forwarded() {
    let frags = cut(&datagram(IN, OUT, (4000, 53), 3000, 1), 1480);
    let r = run("ip,actions=output:2,ct(commit,zone=3)\n", frags.clone());
    // Each fragment out of port 2 at once; held by the ct (its fate
    // already settled), tracked with its datagram, then done.
    assert_eq!(r.ports[0], frags);
    let st = r.dp.stats();
    assert_eq!(
        (st.rx_packets, st.forwarded, st.dropped_total()),
        (3, 3, 0),
        "{st:?}"
    );
    assert_eq!((st.ct_frags_held, st.ct_frags_released), (0, 0));
    assert!(st.rx_balanced(), "{st:?}");
    assert_eq!(r.dp.rules().conntrack().len(), 1, "committed whole");
}
