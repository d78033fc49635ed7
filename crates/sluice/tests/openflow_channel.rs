//! The OpenFlow channel against the real `ovs-ofctl` (installed by
//! scripts/setup with openvswitch-switch).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Switch(Child);

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ofctl(args: &[&str]) -> (bool, String) {
    let out = Command::new("ovs-ofctl")
        .arg("-O")
        .arg("OpenFlow13")
        .args(args)
        .output()
        .expect("ovs-ofctl runs (scripts/setup installs openvswitch-switch)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn ovs_ofctl_reads_a_running_switch() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("of.sock");
    let flows = dir.path().join("r.flows");
    std::fs::write(
        &flows,
        "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2\npriority=5,in_port=1,tcp,tp_dst=80,actions=mod_nw_dst:1.2.3.4,output:2\n",
    )
    .unwrap();
    let _sw = Switch(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--flows"])
            .arg(&flows)
            .args(["--port", "1=null", "--port", "2=null", "--duration", "60"])
            .args(["--datapath-id", "0x00000000000000ab"])
            .arg("--listen")
            .arg(format!("punix:{}", sock.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    let target = format!("unix:{}", sock.display());
    let (ok, show) = ofctl(&["show", &target]);
    assert!(ok, "{show}");
    assert!(show.contains("dpid:00000000000000ab"), "{show}");
    assert!(show.contains("n_tables:254, n_buffers:0"), "{show}");
    assert!(
        show.contains(" 1(null)") && show.contains(" 2(null)"),
        "{show}"
    );
    let (ok, desc) = ofctl(&["dump-desc", &target]);
    assert!(ok && desc.contains("Manufacturer: Sluice"), "{desc}");
    let (ok, flows) = ofctl(&["dump-flows", &target]);
    assert!(ok, "{flows}");
    assert!(
        flows.contains("priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2"),
        "{flows}"
    );
    assert!(
        flows.contains(
            "priority=5,tcp,in_port=1,tp_dst=80 actions=set_field:1.2.3.4->ip_dst,output:2"
        ),
        "{flows}"
    );
    let (ok, agg) = ofctl(&["dump-aggregate", &target]);
    assert!(ok && agg.contains("flow_count=2"), "{agg}");
    let (ok, ports) = ofctl(&["dump-ports", &target]);
    assert!(ok && ports.contains("2 ports"), "{ports}");
}
