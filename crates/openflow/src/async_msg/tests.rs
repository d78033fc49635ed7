use super::*;
use sluice_classifier::parse::Require;
use sluice_classifier::parse_flow;

fn fields(s: &str) -> Match {
    parse_flow(s, Require::NoActions).unwrap().matcher
}

/// What `ovs-ofctl ofp-print` makes of `bytes` (Open vSwitch decoding
/// Sluice's encoding).
fn ofp_print(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let out = std::process::Command::new("ovs-ofctl")
        .args(["ofp-print", &hex])
        .output()
        .expect("ovs-ofctl (scripts/setup installs openvswitch-switch)");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

const ARP: &str =
    "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";

fn arp() -> Vec<u8> {
    (0..ARP.len() / 2)
        .map(|i| u8::from_str_radix(&ARP[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn each_form(m: &Match, ud: &[u8], data: &[u8], total: usize) -> Vec<(String, String)> {
    let p = PinData {
        reason: 1,
        table_id: 3,
        cookie: 0x1234,
        in_port: 7,
        total_len: total,
        data,
        fields: m,
        userdata: ud,
        continuation: None,
    };
    let mut v = Vec::new();
    for version in [OFP10, 4] {
        for format in [PinFormat::Standard, PinFormat::Nxt, PinFormat::Nxt2] {
            let mut out = Vec::new();
            packet_in(version, format, &p, &mut out);
            assert_eq!(
                usize::from(u16::from_be_bytes([out[2], out[3]])),
                out.len(),
                "{version} {format:?}: the length in the header"
            );
            v.push((format!("{version} {format:?}"), ofp_print(&out)));
        }
    }
    v
}

#[test]
fn every_packet_in_form_reads_back_in_ovs_ofctl() {
    let m = fields("reg0=5,reg3=0x10,metadata=0x99,pkt_mark=4");
    let data = arp();
    for (form, text) in each_form(&m, &[0xaa, 0xbb], &data, data.len()) {
        assert!(!text.contains("***"), "{form}: {text}");
        assert!(text.contains("in_port=7"), "{form}: {text}");
        assert!(text.contains("(via action)"), "{form}: {text}");
        assert!(text.contains("data_len=42"), "{form}: {text}");
        assert!(text.contains("arp,"), "{form}: {text}");
        if form.ends_with("Standard") && form.starts_with('1') {
            // 1.0's own packet-in has no room for the rest.
            assert!(!text.contains("reg0"), "{form}: {text}");
            continue;
        }
        assert!(text.contains("cookie=0x1234"), "{form}: {text}");
        assert!(text.contains("table_id=3"), "{form}: {text}");
        for f in ["reg0=0x5", "reg3=0x10", "metadata=0x99", "pkt_mark=0x4"] {
            assert!(text.contains(f), "{form}: {f} in {text}");
        }
        assert_eq!(
            text.contains("userdata=aa.bb"),
            form.ends_with("Nxt2"),
            "{form}: {text}"
        );
    }
}

#[test]
fn a_truncated_packet_in_says_its_whole_length() {
    let m = Match::catch_all();
    let data = arp();
    for (form, text) in each_form(&m, &[], &data[..20], 42) {
        assert!(text.contains("total_len=42"), "{form}: {text}");
        assert!(text.contains("data_len=20"), "{form}: {text}");
    }
}

#[test]
fn flow_removed_and_port_status_for_openflow_1_0() {
    let m = fields("tcp,nw_dst=10.0.0.0/8,tp_dst=80,reg1=3");
    let fr = FlowRemoved {
        cookie: 0x55,
        priority: 100,
        reason: 2,
        table_id: 4,
        duration_sec: 3,
        duration_nsec: 500_000_000,
        idle_timeout: 10,
        hard_timeout: 0,
        packet_count: 7,
        byte_count: 700,
        oxms: Vec::new(),
    };
    let nx = ofp_print(&flow_removed10(&fr, &m, true));
    assert!(nx.contains("NXT_FLOW_REMOVED"), "{nx}");
    for f in [
        "reg1=0x3",
        "tcp",
        "nw_dst=10.0.0.0/8",
        "tp_dst=80",
        "reason=delete",
        "table_id=4",
        "cookie:0x55",
        "duration3.500s",
        "idle10",
        "pkts7",
        "bytes700",
    ] {
        assert!(nx.contains(f), "{f} in {nx}");
    }
    let std = ofp_print(&flow_removed10(&fr, &m, false));
    assert!(std.contains("OFPT_FLOW_REMOVED"), "{std}");
    assert!(
        std.contains("nw_dst=10.0.0.0/8") && std.contains("pkts7"),
        "{std}"
    );
    let ps = ofp_print(&port_status10(
        0,
        &of10::Port {
            port_no: 3,
            hw_addr: [2, 0, 0, 0, 0, 3],
            name: "veth3".into(),
            config: 0,
            state: 0,
        },
    ));
    assert!(
        ps.contains("OFPT_PORT_STATUS")
            && ps.contains("ADD: 3(veth3)")
            && ps.contains("addr:02:00:00:00:00:03"),
        "{ps}"
    );
}
