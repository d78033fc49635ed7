//! vhost-user ports against DPDK's virtio-user, the guest driver DPDK and
//! OVS test vhost-user with, no VM needed: `dpdk-testpmd --no-huge --vdev
//! net_virtio_user0,path=SOCK` (its memory in memfd, shared with Sluice
//! over the socket) forwarding in `macswap` mode, so every frame a host
//! sends through Sluice to it comes back with its MAC addresses swapped.
//! Both port modes: `vhost:` (Sluice listens, testpmd connects) and
//! `vhost-client:` (testpmd listens with `server=1`; Sluice connects, and
//! reconnects when testpmd comes back).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sluice_packet::build::{Frame, L4};
use support::*;

/// testpmd and Sluice's PMD each poll a core of this 2-core machine: one
/// such pair at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A testpmd in macswap mode on a virtio-user port.
struct Testpmd {
    child: Child,
    out: PathBuf,
}

impl Testpmd {
    /// Starts testpmd on socket `sock` (`server`: it listens there) and
    /// waits until it forwards.
    fn start(dir: &Path, tag: &str, sock: &Path, server: bool) -> Testpmd {
        Testpmd::start_queues(dir, tag, sock, server, 1)
    }

    /// [`Testpmd::start`] with `queues` queue pairs (virtio's `MQ`),
    /// each forwarded back on itself.
    fn start_queues(dir: &Path, tag: &str, sock: &Path, server: bool, queues: usize) -> Testpmd {
        let out = dir.join(format!("testpmd-{tag}.out"));
        let vdev = format!(
            "net_virtio_user0,path={},queues={queues}{}",
            sock.display(),
            if server { ",server=1" } else { "" }
        );
        // stdbuf: testpmd's stdout is a file here, which it would buffer.
        let log = std::fs::File::create(&out).unwrap();
        let child = Command::new("stdbuf")
            .args(["-oL", "dpdk-testpmd"])
            .args([
                "-l",
                "0,1",
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--no-shconf",
            ])
            .arg(format!("--file-prefix=sl{}{tag}", std::process::id()))
            .arg(format!("--vdev={vdev}"))
            .args([
                "--",
                "--forward-mode=macswap",
                "-a",
                "--total-num-mbufs=4096",
            ])
            .arg(format!("--rxq={queues}"))
            .arg(format!("--txq={queues}"))
            .stdin(Stdio::piped())
            .stderr(log.try_clone().unwrap())
            .stdout(log)
            .spawn()
            .expect("starting dpdk-testpmd");
        let mut t = Testpmd { child, out };
        if !server {
            t.wait_forwarding();
        }
        t
    }

    /// Waits for testpmd to say it forwards (its rings are set up).
    fn wait_forwarding(&mut self) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            if text.contains("Press enter to exit") {
                return;
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("dpdk-testpmd exited ({st}):\n{text}");
            }
            assert!(
                Instant::now() < until,
                "dpdk-testpmd did not start forwarding:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Testpmd {
    /// Stops testpmd (SIGTERM: it prints its forwarding statistics) and
    /// returns what it printed.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` UDP frames of varied sizes, each different: each its own flow, or
/// all of one flow (`one_flow`: what one PMD handles, in order, when
/// several share the input).
fn frames_of(n: usize, seed: u8, one_flow: bool) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let pad = 18 + (i * 37) % 1400;
            let payload: Vec<u8> = (0..pad).map(|j| (i + j) as u8 ^ seed).collect();
            let src = if one_flow { 1000 } else { 1000 + i as u16 };
            Frame::ipv4([10, 1, 0, 1], [10, 1, 0, 2], L4::Udp { src, dst: 7 })
                .payload(&payload)
                .build()
        })
        .collect()
}

fn frames(n: usize, seed: u8) -> Vec<Vec<u8>> {
    frames_of(n, seed, false)
}

const SEND_AND_RECEIVE: &str = r#"
import socket, struct, sys, time
frames, out, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
rx.bind(("eth0", 0))
rx.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
rx.settimeout(0.2)
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
tx.bind(("eth0", 0))
d = open(frames, "rb").read()
got = []
def take(until):
    try:
        f, addr = rx.recvfrom(65536)
    except socket.timeout:
        return
    if addr[2] != socket.PACKET_OUTGOING:
        got.append(f)
# At most 64 frames in flight: what is tested is that each comes back once
# and in order, not how much load the machine takes (a slow build on a
# busy machine would otherwise overflow a ring at a fixed sending rate).
i = 0
k = 0
while i < len(d):
    n = struct.unpack(">H", d[i:i+2])[0]
    tx.send(d[i+2:i+2+n])
    i += 2 + n
    k += 1
    if k % 64 == 0:
        until = time.time() + 10
        while len(got) < k and time.time() < until:
            take(until)
until = time.time() + 20
while len(got) < want and time.time() < until:
    take(until)
time.sleep(0.3)
while True:
    try:
        f, addr = rx.recvfrom(65536)
    except socket.timeout:
        break
    if addr[2] != socket.PACKET_OUTGOING:
        got.append(f)
with open(out, "wb") as o:
    for f in got:
        o.write(struct.pack(">H", len(f)) + f)
"#;

/// Sends `frames` from `host` and returns what came back to it.
fn round_trip(host: &Host, dir: &Path, tag: &str, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let script = dir.join("rt.py");
    std::fs::write(&script, SEND_AND_RECEIVE).unwrap();
    let (inp, out) = (
        dir.join(format!("{tag}.in")),
        dir.join(format!("{tag}.out")),
    );
    let mut bytes = Vec::new();
    for f in frames {
        bytes.extend_from_slice(&(f.len() as u16).to_be_bytes());
        bytes.extend_from_slice(f);
    }
    std::fs::write(&inp, bytes).unwrap();
    host.exec(&format!(
        "python3 {} {} {} {}",
        script.display(),
        inp.display(),
        out.display(),
        frames.len()
    ));
    let d = std::fs::read(&out).unwrap();
    let mut got = Vec::new();
    let mut i = 0;
    while i < d.len() {
        let n = u16::from_be_bytes([d[i], d[i + 1]]) as usize;
        got.push(d[i + 2..i + 2 + n].to_vec());
        i += 2 + n;
    }
    got
}

fn mac_swapped(f: &[u8]) -> Vec<u8> {
    let mut g = f.to_vec();
    g[0..6].copy_from_slice(&f[6..12]);
    g[6..12].copy_from_slice(&f[0..6]);
    g
}

/// Every frame came back once, MACs swapped, byte for byte, and each
/// flow's frames (IPv4 addresses and UDP ports) in the order they were
/// sent. Frames of different flows may pass each other, as in OVS: a
/// flow whose first packet waits for its upcall holds back only itself
/// (docs/caches.md, "Upcall budget").
fn assert_reflected(sent: &[Vec<u8>], got: &[Vec<u8>]) {
    use std::collections::HashMap;
    let flow = |f: &[u8]| f.get(26..38).map(<[u8]>::to_vec).unwrap_or_default();
    let mut index: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    for (i, s) in sent.iter().enumerate().rev() {
        index.entry(mac_swapped(s)).or_default().push(i);
    }
    // Per flow, the index of the last frame seen back.
    let mut last: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut order = Vec::with_capacity(got.len());
    for (k, g) in got.iter().enumerate() {
        let Some(i) = index.get_mut(g).and_then(Vec::pop) else {
            panic!(
                "frame {k} back ({} bytes) is none of those sent, or came back twice; \
                 order back so far: {order:?}",
                g.len()
            );
        };
        if let Some(&before) = last.get(&flow(g)) {
            assert!(
                before < i,
                "frame {i} came back after frame {before} of its flow; order back: {order:?}"
            );
        }
        last.insert(flow(g), i);
        order.push(i);
    }
    assert_eq!(
        got.len(),
        sent.len(),
        "frames back: {} of {}; missing: {:?}",
        got.len(),
        sent.len(),
        index.values().flatten().collect::<Vec<_>>()
    );
}

#[test]
fn testpmd_on_a_listening_vhost_port_gets_every_frame_and_returns_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd"]);
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new("vh", None);
    let sock = dir.path().join("vh.sock");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", host.root_if),
            &format!("2=vhost:{}", sock.display()),
        ],
    );
    let mode = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600,
        "the vhost socket is owner-only"
    );
    let _pmd = Testpmd::start(dir.path(), "a", &sock, false);
    // More frames than the switch's pool holds: a frame not given back
    // after it was copied to the guest would show as a stall.
    let sent = frames(6000, 0);
    let got = round_trip(&host, dir.path(), "a", &sent);
    let report = sw.stop();
    assert_reflected(&sent, &got);
    assert_balanced(&report);
    let vh = port(&report, 2);
    assert_eq!(vh["rx_packets"], 6000, "{vh}");
    assert_eq!(vh["tx_packets"], 6000, "{vh}");
    assert!(
        !sock.exists(),
        "the socket is removed when the switch stops"
    );
}

#[test]
fn a_vhost_port_added_and_removed_at_run_time() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd"]);
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new("va", None);
    let sock = dir.path().join("va.sock");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[&format!("1=afpacket:{}", host.root_if)],
    );
    sw.ctl(&["add-port", &format!("2=vhost:{}", sock.display())]);
    assert!(sock.exists(), "add-port made the socket");
    let pmd = Testpmd::start(dir.path(), "add", &sock, false);
    let sent = frames(300, 4);
    let got = round_trip(&host, dir.path(), "add", &sent);
    assert_reflected(&sent, &got);
    sw.ctl(&["del-port", "2"]);
    assert!(!sock.exists(), "del-port removed the socket");
    drop(pmd);
    // The same path again: a new port, a new guest.
    sw.ctl(&["add-port", &format!("2=vhost:{}", sock.display())]);
    let _pmd = Testpmd::start(dir.path(), "again", &sock, false);
    let sent = frames(300, 5);
    let got = round_trip(&host, dir.path(), "again", &sent);
    assert_reflected(&sent, &got);
    assert_balanced(&sw.stop());
}

/// A switch with two PMDs between `host` (port 1, afpacket) and a
/// `vhost:` port on `sock` (port 2).
fn two_pmds_between(host: &Host, sock: &Path) -> Sluice {
    Sluice::start_with(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", host.root_if),
            &format!("2=vhost:{}", sock.display()),
        ],
        &["--pmd-cores", "0,1"],
    )
}

#[test]
fn two_pmds_share_a_vhost_port() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd"]);
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new("v2", None);
    let sock = dir.path().join("v2.sock");
    let sw = two_pmds_between(&host, &sock);
    let _pmd = Testpmd::start(dir.path(), "two", &sock, false);
    let sent = frames_of(2000, 3, true);
    let got = round_trip(&host, dir.path(), "two", &sent);
    assert_reflected(&sent, &got);
    let report = sw.stop();
    assert_balanced(&report);
    assert_eq!(port(&report, 2)["tx_packets"], 2000);
}

#[test]
fn two_pmds_each_serve_a_queue_pair_of_a_multiqueue_guest() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd"]);
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new("vq", None);
    let sock = dir.path().join("vq.sock");
    // The vhost port gets two queue pairs (MQ), one per PMD, as the
    // afpacket port gets two rx queues (a fanout by flow hash).
    let sw = two_pmds_between(&host, &sock);
    let pmd = Testpmd::start_queues(dir.path(), "mq", &sock, false, 2);
    let sent = frames_of(2000, 5, false);
    let mut got = round_trip(&host, dir.path(), "mq", &sent);
    // Flows on different PMDs interleave: compare as sets.
    let mut want: Vec<Vec<u8>> = sent.iter().map(|f| mac_swapped(f)).collect();
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len(), "frames back");
    assert!(got == want, "frames came back changed");
    let out = pmd.stop();
    let report = sw.stop();
    assert_balanced(&report);
    assert_eq!(port(&report, 2)["tx_packets"], 2000);
    // Both of the guest's queues received frames (testpmd's statistics
    // per forwarding stream, printed as it stops).
    for q in 0..2 {
        let head = format!("RX Port= 0/Queue= {q} -> TX Port= 0/Queue= {q}");
        let at = out
            .find(&head)
            .unwrap_or_else(|| panic!("testpmd has no stream for queue {q}:\n{out}"));
        let rx: u64 = out[at..]
            .split("RX-packets:")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(rx > 0, "queue {q} received nothing:\n{out}");
    }
}

#[test]
fn a_client_vhost_port_reconnects_when_testpmd_comes_back() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd"]);
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new("vc", None);
    let sock = dir.path().join("vc.sock");
    let of = free_port();
    let sw = Sluice::start_with(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", host.root_if),
            &format!("2=vhost-client:{}", sock.display()),
        ],
        &["--listen", &format!("ptcp:{of}")],
    );
    // The port's link, as a controller sees it: down until a guest's
    // driver runs both rings.
    let state = || {
        let (_, out) = ofctl(&["dump-ports-desc", &format!("tcp:127.0.0.1:{of}")]);
        let at = out
            .find("vc.sock")
            .unwrap_or_else(|| panic!("no vc.sock port: {out}"));
        out[at..]
            .lines()
            .find(|l| l.contains("state:"))
            .unwrap_or("")
            .to_string()
    };
    assert!(state().contains("LINK_DOWN"), "{}", state());
    for (round, seed) in [("first", 1u8), ("second", 2)] {
        let mut pmd = Testpmd::start(dir.path(), round, &sock, true);
        pmd.wait_forwarding();
        wait_for("the vhost port's link to come up", 10, || {
            state().contains("LIVE")
        });
        let sent = frames(200, seed);
        let got = round_trip(&host, dir.path(), round, &sent);
        assert_reflected(&sent, &got);
        drop(pmd);
        let _ = std::fs::remove_file(&sock);
        wait_for("the vhost port's link to go down", 10, || {
            state().contains("LINK_DOWN")
        });
    }
    let report = sw.stop();
    assert_balanced(&report);
    let vh = port(&report, 2);
    assert_eq!(vh["rx_packets"], 400, "{vh}");
}

/// The newest kernel in /boot and its version (Debian's linux-image-amd64).
fn guest_kernel() -> (PathBuf, String) {
    let mut found: Vec<String> = std::fs::read_dir("/boot")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
                .filter(|v| Path::new(&format!("/lib/modules/{v}")).exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    let v = found
        .pop()
        .expect("no kernel in /boot with its modules: run scripts/setup (linux-image-amd64)");
    (PathBuf::from(format!("/boot/vmlinuz-{v}")), v)
}

/// A real VM: QEMU with Debian's kernel and a small initramfs (busybox,
/// iperf3, the virtio-net driver), its virtio-net on a `vhost:` port with
/// memory shared from memfd. The guest pings a namespace host behind an
/// `afpacket:` port and runs iperf3 TCP against it both ways (its
/// offloads on: TSO super-frames and partial checksums from the guest,
/// segmented by the switch for the veth; frames to it with partial
/// checksums, as its driver accepted), then reboots, and does it all
/// again on the same port.
#[test]
fn a_vm_pings_and_runs_tcp_through_a_vhost_port_and_again_after_a_reboot() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&[
        "ip",
        "iperf3",
        "qemu-system-x86_64",
        "busybox",
        "cpio",
        "modinfo",
    ]);
    if !Path::new("/dev/kvm").exists() {
        eprintln!("skipped: no /dev/kvm on this machine");
        return;
    }
    // This machine's KVM is kvm-pvm (for nested guests), which a stock
    // guest kernel does not boot under: QEMU emulates the CPU there (TCG),
    // and the vhost-user port is the same either way.
    let tcg = Path::new("/sys/module/kvm_pvm").exists();
    let dir = tempfile::tempdir().unwrap();
    let (kernel, kver) = guest_kernel();
    let initrd = dir.path().join("init.cpio.gz");
    sh(&format!(
        "{}/tests/vm/mkinitramfs {} {kver}",
        env!("CARGO_MANIFEST_DIR"),
        initrd.display()
    ));
    let host = Host::with_offloads("vm", Some("10.77.0.1/24"));
    host.exec("iperf3 -s -D");
    let sock = dir.path().join("vm.sock");
    let sw = Sluice::start(
        None,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
        &[
            &format!("1=afpacket:{}", host.root_if),
            &format!("2=vhost:{}", sock.display()),
        ],
    );
    let console = dir.path().join("console.log");
    let mut qemu = Command::new("qemu-system-x86_64");
    if tcg {
        qemu.args(["-accel", "tcg"]);
    } else {
        qemu.args(["-enable-kvm", "-cpu", "host"]);
    }
    qemu.args(["-m", "256", "-smp", "1", "-nographic", "-kernel"])
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args([
            "-append",
            "console=ttyS0 quiet panic=-1 sluice.ip=10.77.0.2/24 sluice.peer=10.77.0.1",
            "-object",
            "memory-backend-memfd,id=mem,size=256M,share=on",
            "-numa",
            "node,memdev=mem",
            "-chardev",
        ])
        .arg(format!("socket,id=c0,path={}", sock.display()))
        .args(["-netdev", "vhost-user,id=n0,chardev=c0", "-device"])
        // Under TCG, QEMU's vhost start crashes on MSI-X vector notifiers
        // (QEMU 10): the device uses INTx there.
        .arg(format!(
            "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,host_mtu=9000,romfile={}",
            if tcg { ",vectors=0" } else { "" }
        ))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&console).unwrap())
        .stderr(Stdio::inherit());
    let mut vm = Killed(qemu.spawn().expect("starting qemu-system-x86_64"));
    let until = Instant::now() + Duration::from_secs(240);
    let log = loop {
        let log = std::fs::read_to_string(&console).unwrap_or_default();
        if log.matches("GUEST-DONE").count() >= 2 {
            break log;
        }
        if let Some(st) = vm.0.try_wait().unwrap() {
            panic!("qemu exited ({st}):\n{log}");
        }
        assert!(
            Instant::now() < until,
            "the guest did not finish twice:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = vm.0.kill();
    let _ = vm.0.wait();
    // The MTU QEMU gives the device (host_mtu, for jumbo frames) reaches
    // the guest's driver through the port (QEMU offers VIRTIO_NET_F_MTU
    // itself, from its own device configuration).
    assert_eq!(log.matches("mtu=9000").count(), 2, "{log}");
    assert_eq!(log.matches("PING-OK").count(), 2, "{log}");
    assert_eq!(log.matches("IPERF-OK").count(), 2, "{log}");
    assert_eq!(log.matches("IPERF-R-OK").count(), 2, "{log}");
    for l in log.lines().filter(|l| l.contains("IPERF")) {
        eprintln!("{l}");
    }
    let report = sw.stop();
    assert_balanced(&report);
    let vh = port(&report, 2);
    assert!(vh["rx_packets"].as_u64().unwrap() > 1000, "{vh}");
    assert!(vh["tx_packets"].as_u64().unwrap() > 1000, "{vh}");
    eprintln!(
        "vhost port: rx {} ({} super-frames), tx {} ({} super-frames)",
        vh["rx_packets"], vh["rx_gso_packets"], vh["tx_packets"], vh["tx_gso_packets"]
    );
    // Super-frames both ways: the guest's TSO, and the host's, taken by
    // the guest's driver as they are.
    assert!(vh["rx_gso_packets"].as_u64().unwrap() > 0, "{vh}");
    assert!(vh["tx_gso_packets"].as_u64().unwrap() > 0, "{vh}");
    assert_eq!(vh["rx_dropped"]["guest fault"], 0, "{vh}");
    assert_eq!(vh["tx_dropped"]["guest fault"], 0, "{vh}");
}

/// What libvirt and OpenStack's os-vif do for a VM's vhost-user port:
/// `ovs-vsctl add-port ... type=dpdkvhostuserclient
/// options:vhost-server-path=SOCK` (the guest's QEMU listens; the switch
/// connects), here with Sluice as ovs-vswitchd and testpmd's virtio-user
/// as the guest, NORMAL between it and a host.
#[test]
fn a_vhost_port_made_by_ovs_vsctl_carries_the_guests_traffic() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and(&["ip", "python3", "dpdk-testpmd", "ovsdb-server", "ovs-vsctl"]);
    use support::ovs::{as_ovs_vswitchd, start_vswitchd, Db};
    let db = Db::start();
    let sw = Host::new("vvs", None);
    let host = Host::new("vvh", None);
    sh(&format!("ip link set {} netns {}", host.root_if, sw.ns));
    let out = start_vswitchd(&db, &sw.ns, &as_ovs_vswitchd(db.run()));
    assert!(out.status.success(), "start: {}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vhu0.sock");
    let mut guest = Testpmd::start(dir.path(), "vsctl", &sock, true);
    let br = format!("vv{}", std::process::id() % 10000);
    db.add_br(
        &br,
        &[
            "--",
            "add-port",
            &br,
            &host.root_if,
            "--",
            "add-port",
            &br,
            "vhu0",
            "--",
            "set",
            "interface",
            "vhu0",
            "type=dpdkvhostuserclient",
            &format!("options:vhost-server-path={}", sock.display()),
        ],
    );
    guest.wait_forwarding();
    // Numbers 1 and 2, in OVS's order (its hash of the port names, which
    // hold this process's id).
    let mut both = [
        db.get("Interface", "vhu0", "ofport"),
        db.get("Interface", &host.root_if, "ofport"),
    ];
    both.sort();
    assert_eq!(both, ["1", "2"]);
    assert_eq!(db.get("Interface", "vhu0", "error"), "[]");
    let sent = frames(300, 9);
    let got = round_trip(&host, dir.path(), "vsctl", &sent);
    assert_reflected(&sent, &got);
    assert!(db.appctl(&["exit"]).status.success());
    wait_for("the daemon to exit", 10, || {
        !db.run().join("ovs-vswitchd.pid").exists()
    });
}
