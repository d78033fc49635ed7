//! Asynchronous messages as `ovs-ofctl monitor` takes them in each of its
//! forms (OpenFlow 1.0 with `NXT_PACKET_IN2`, its default; `-P standard`;
//! `-P nxt_packet_in`; OpenFlow 1.3 both ways; 1.0 with `invalid_ttl`),
//! from Sluice and from Open vSwitch 3.1 given the same rules and the same
//! packets: every monitor prints the same lines for both.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{sh, wait_for, Killed, Ovs};

/// Rules for both switches (added over 1.3: `write_metadata`,
/// `goto_table`).
const RULES: &str = "\
table=0,priority=10,udp,actions=load:0x5->NXM_NX_REG0[],controller(userdata=aa.bb.cc)
table=0,priority=9,tcp,actions=write_metadata:0x99,goto_table:1
table=0,priority=8,icmp,actions=dec_ttl,output:2
table=0,priority=0,actions=CONTROLLER:65535
table=1,priority=0,actions=set_field:7->pkt_mark,controller(max_len=32)
table=0,cookie=0x77,priority=50,tcp,tp_dst=81,send_flow_rem,actions=drop
table=0,priority=11,sctp,actions=controller(userdata=dd.ee,meter_id=7)
table=0,priority=12,sctp,tp_dst=9,actions=controller(max_len=20,meter_id=8),output:2
table=1,priority=6,actset_output=2,tcp,tp_dst=9999,actions=drop
table=1,priority=6,actset_output=UNSET,udp,tp_dst=9999,actions=drop
table=1,priority=6,actset_output=LOCAL,sctp,tp_dst=9999,actions=drop
";

/// The monitors: a name, `ovs-ofctl` options, `monitor` arguments after
/// the target.
const MONITORS: [(&str, &[&str], &[&str]); 6] = [
    ("1.0", &[], &["65534"]),
    ("1.0-standard", &["-P", "standard"], &["65534"]),
    ("1.0-nxt", &["-P", "nxt_packet_in"], &["65534"]),
    ("1.0-invalid-ttl", &[], &["65534", "invalid_ttl"]),
    ("1.3", &["-O", "OpenFlow13"], &["65534"]),
    (
        "1.3-standard",
        &["-O", "OpenFlow13", "-P", "standard"],
        &["65534"],
    ),
];

const ARP: &str =
    "ffffffffffff00000000000108060001080006040001000000000001c0a80001000000000000c0a80002";
const UDP: &str = "0200000000020200000000010800450000260000000040117ab3c0a80001c0a80002300030390012000068656c6c6f6f6f6f6f6f";
const TCP: &str = "02000000000202000000000108004500002800000000400679b0c0a80001c0a8000204d200500000000000000000500220000d4d0000";
/// An ICMP echo request whose TTL is 1.
const ICMP_TTL1: &str =
    "02000000000202000000000108004500001c000040000101f88dc0a80001c0a800020800f7fd00010001";

/// One `ovs-ofctl monitor`, its output line-buffered into a file.
struct Mon {
    _child: Killed,
    out: PathBuf,
}

fn start_monitors(dir: &Path, target: &str) -> Vec<Mon> {
    MONITORS
        .iter()
        .map(|(name, opts, args)| {
            let out = dir.join(format!("{name}.txt"));
            let ctl = dir.join(format!("{name}.ctl"));
            let child = Command::new("timeout")
                .args(["-s", "TERM", "60", "stdbuf", "-oL", "ovs-ofctl"])
                .args(*opts)
                .arg(format!("--unixctl={}", ctl.display()))
                .args(["monitor", target])
                .args(*args)
                // (It prints what it receives on stderr.)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&out).unwrap())
                .spawn()
                .expect("timeout, stdbuf and ovs-ofctl");
            // The monitor makes its control socket once it has connected
            // and set its packet-in format: it takes packet-ins from then.
            wait_for(&format!("monitor {name}"), 20, || ctl.exists());
            Mon {
                _child: Killed(child),
                out,
            }
        })
        .collect()
}

/// What a monitor printed, without what differs between two runs (the
/// transaction ids, a flow's age).
fn seen(m: &Mon) -> String {
    let text = std::fs::read_to_string(&m.out).unwrap_or_default();
    text.lines()
        .map(|l| {
            let l = l.replace(" (xid=0x0)", "");
            l.split(' ')
                .filter(|w| !w.starts_with("duration"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends the packets and removes the flow, then waits until every monitor
/// has seen the flow removed (sent after the packet-ins).
fn drive(target: &str, mons: &[Mon]) {
    let ofctl = |args: &[&str]| {
        let o = Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ovs-ofctl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    for p in [ARP, UDP, TCP, ICMP_TTL1] {
        ofctl(&[
            "packet-out",
            target,
            &format!("in_port=1,packet={p},actions=table"),
        ]);
    }
    // The packet-ins come from the datapath; a flow removed comes later
    // than all of them once each monitor has the last packet-in.
    // (Three for each; four for the one that takes invalid_ttl ones.)
    let all_in = || {
        mons.iter().all(|m| {
            let want = if m.out.ends_with("1.0-invalid-ttl.txt") {
                4
            } else {
                3
            };
            seen(m).matches("PACKET_IN").count() >= want
        })
    };
    let t0 = std::time::Instant::now();
    while !all_in() {
        let what: Vec<String> = mons.iter().map(seen).collect();
        assert!(
            t0.elapsed().as_secs() < 20,
            "{target}: the packet-ins: {what:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    ofctl(&["del-flows", target, "--strict", "priority=50,tcp,tp_dst=81"]);
    wait_for("the flow removed", 20, || {
        mons.iter().all(|m| seen(m).contains("FLOW_REMOVED"))
    });
}

#[test]
fn ovs_ofctl_monitor_prints_the_same_for_sluice_and_ovs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("rules"), RULES).unwrap();

    // Open vSwitch.
    let od = d.join("ovs");
    std::fs::create_dir(&od).unwrap();
    let (ovs, ovs_target) = Ovs::with_bridge(&od);
    sh(&format!(
        "ovs-ofctl -O OpenFlow13 add-flows {ovs_target} {}",
        d.join("rules").display()
    ));
    let md = d.join("ovs-mon");
    std::fs::create_dir(&md).unwrap();
    let ovs_mons = start_monitors(&md, &ovs_target);
    drive(&ovs_target, &ovs_mons);

    // Sluice.
    let sock = d.join("of.sock");
    let ctl = d.join("ctl.sock");
    let _sw = Killed(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--port", "1=null", "--port", "2=null"])
            .args(["--duration", "60", "--listen"])
            .arg(format!("punix:{}", sock.display()))
            .arg("--ctl")
            .arg(&ctl)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("switch.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the socket", 20, || sock.exists());
    let target = format!("unix:{}", sock.display());
    sh(&format!(
        "ovs-ofctl -O OpenFlow13 del-flows {target} && ovs-ofctl -O OpenFlow13 add-flows {target} {}",
        d.join("rules").display()
    ));
    let sd = d.join("sluice-mon");
    std::fs::create_dir(&sd).unwrap();
    let mons = start_monitors(&sd, &target);
    drive(&target, &mons);

    // The rules read back the same from both (over 1.3: OVS 3.1's own
    // 1.0 dump stops at a rule with write_metadata, whose encoding its
    // decoder refuses).
    {
        let o = ["-O", "OpenFlow13"];
        let dump = |t: &str| -> Vec<String> {
            let out = Command::new("ovs-ofctl")
                .args(o)
                .args(["dump-flows", t])
                .output()
                .unwrap();
            support::dumped_rules(&String::from_utf8_lossy(&out.stdout))
        };
        assert_eq!(dump(&target), dump(&ovs_target), "dump-flows");
        // actset_output in NXM, from ovs-ofctl's default protocol.
        let table3 = |t: &str| {
            let add = Command::new("ovs-ofctl")
                .args(["add-flow", t, "table=3,actset_output=5,actions=drop"])
                .output()
                .unwrap();
            assert!(
                add.status.success(),
                "{}",
                String::from_utf8_lossy(&add.stderr)
            );
            let out = Command::new("ovs-ofctl")
                .args(["dump-flows", t, "table=3"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let rule = text.lines().find(|l| l.contains("actions=")).map(|l| {
                let (_, r) = l.split_once("n_bytes=").unwrap();
                r.split_once(", ").map_or(r, |x| x.1).trim().to_string()
            });
            rule.unwrap_or(text)
        };
        let (ours, theirs) = (table3(&target), table3(&ovs_target));
        assert_eq!(ours, theirs);
        assert!(ours.contains("actset_output=5 actions=drop"), "{ours}");
    }
    for ((name, _, _), (theirs, ours)) in MONITORS.iter().zip(ovs_mons.iter().zip(&mons)) {
        let (theirs, ours) = (seen(theirs), seen(ours));
        assert_eq!(ours, theirs, "monitor {name}: Sluice, then OVS");
        // What each form is about.
        let want = match *name {
            "1.0" => "NXT_PACKET_IN2",
            "1.0-standard" => "OFPT_PACKET_IN",
            "1.0-nxt" => "NXT_PACKET_IN:",
            "1.3" => "NXT_PACKET_IN2 (OF1.3)",
            "1.3-standard" => "OFPT_PACKET_IN (OF1.3)",
            _ => "(via invalid_ttl)",
        };
        assert!(ours.contains(want), "monitor {name}: {ours}");
    }
    // The userdata reaches the monitors that take NXT_PACKET_IN2.
    assert!(seen(&mons[0]).contains("userdata=aa.bb.cc"));
    drop(ovs);

    // A port added: 1.0's port status to the 1.0 monitors, 1.3's to the
    // others.
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("ctl")
        .arg("--ctl")
        .arg(&ctl)
        .args(["add-port", "3=null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for("the port status", 20, || {
        mons.iter().all(|m| seen(m).contains("ADD: 3(null)"))
    });
    assert!(seen(&mons[1]).contains("OFPT_PORT_STATUS: ADD: 3(null)"));
    assert!(seen(&mons[4]).contains("OFPT_PORT_STATUS (OF1.3): ADD: 3(null)"));
}
