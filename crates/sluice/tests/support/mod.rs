//! Test hosts for the live-port tests: network namespaces joined to the
//! root namespace by veth pairs, and `sluice run` as a real process between
//! them. Everything a test creates is removed when its guard drops.
#![allow(dead_code)]

pub mod ovn;
pub mod ovs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Frames in the pcap file a capture port wrote (0 if none or unreadable).
pub fn pcap_frames(p: &Path) -> usize {
    std::fs::read(p)
        .ok()
        .and_then(|b| sluice_port::pcap::read_all(&b).ok())
        .map_or(0, |v| v.len())
}

/// Runs a command line through `sh -c`, panicking with its output on failure.
pub fn sh(cmd: &str) -> String {
    let out = sh_status(cmd);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command line through `sh -c` and returns what happened.
pub fn sh_status(cmd: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("running sh")
}

/// Asserts the test runs as root with the tools it needs, with a clear
/// message otherwise (`scripts/setup` installs them).
pub fn require_root_and(tools: &[&str]) {
    assert_eq!(
        sh("id -u").trim(),
        "0",
        "the live-port tests create namespaces and veth pairs: run them as root"
    );
    for t in tools {
        assert!(
            sh_status(&format!("command -v {t}")).status.success(),
            "{t} is missing: run scripts/setup"
        );
    }
}

/// A namespace `ns` with interface `eth0`, whose veth peer `root_if` sits in
/// the root namespace (where Sluice opens it).
pub struct Host {
    /// Namespace name.
    pub ns: String,
    /// The veth end in the root namespace.
    pub root_if: String,
}

impl Host {
    /// Creates host `tag` (unique per test) with IPv4 `addr` (CIDR) on eth0,
    /// IPv6 off (no stray router solicitations), offloads off (the
    /// default port kinds take no virtio-net headers).
    pub fn new(tag: &str, addr: Option<&str>) -> Host {
        Host::create(tag, addr, false)
    }

    /// As [`Host::new`], but the veth pair keeps the kernel's default
    /// offloads (partial checksums, TSO/GSO super-frames), as container
    /// runtimes leave them.
    #[allow(dead_code)]
    pub fn with_offloads(tag: &str, addr: Option<&str>) -> Host {
        Host::create(tag, addr, true)
    }

    /// A host whose eth0 is interface `ifname` of the root namespace (a
    /// tap a Sluice port holds, as a VM's would be), moved into a new
    /// namespace and renamed; offloads as the interface has them.
    #[allow(dead_code)]
    pub fn adopt(tag: &str, ifname: &str, addr: Option<&str>) -> Host {
        let id = std::process::id() % 10000;
        let ns = format!("sl{id}{tag}");
        let _ = sh_status(&format!("ip netns del {ns} 2>/dev/null"));
        sh(&format!("ip netns add {ns}"));
        let host = Host {
            ns,
            root_if: ifname.to_string(),
        };
        sh(&format!(
            "ip link set {ifname} netns {ns} && \
             ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 && \
             ip netns exec {ns} ip link set {ifname} name eth0 && \
             ip netns exec {ns} ip link set lo up && \
             ip netns exec {ns} ip link set eth0 up",
            ns = host.ns
        ));
        if let Some(a) = addr {
            host.exec(&format!("ip addr add {a} dev eth0"));
        }
        host
    }

    fn create(tag: &str, addr: Option<&str>, offloads: bool) -> Host {
        let id = std::process::id() % 10000;
        let ns = format!("sl{id}{tag}");
        let root_if = format!("s{id}{tag}");
        assert!(root_if.len() <= 15, "interface name too long: {root_if}");
        let _ = sh_status(&format!(
            "ip netns del {ns} 2>/dev/null; ip link del {root_if} 2>/dev/null"
        ));
        sh(&format!("ip netns add {ns}"));
        let host = Host { ns, root_if };
        sh(&format!(
            "ip link add {r} type veth peer name eth0 netns {ns} && \
             sysctl -qw net.ipv6.conf.{r}.disable_ipv6=1 && \
             ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 && \
             ip netns exec {ns} ip link set lo up && \
             {off} \
             ip netns exec {ns} ip link set eth0 up",
            r = host.root_if,
            ns = host.ns,
            off = if offloads {
                String::new()
            } else {
                format!(
                    "ip netns exec {ns} ethtool -K eth0 tx off tso off gso off >/dev/null && \
                     ethtool -K {r} tx off tso off gso off >/dev/null &&",
                    ns = host.ns,
                    r = host.root_if
                )
            }
        ));
        if let Some(a) = addr {
            host.exec(&format!("ip addr add {a} dev eth0"));
        }
        host
    }

    /// The MAC address of its eth0, as text.
    #[allow(dead_code)]
    pub fn mac(&self) -> String {
        self.exec("cat /sys/class/net/eth0/address")
            .trim()
            .to_string()
    }

    /// Makes `ip` a permanent neighbour at `other`'s MAC (no ARP needed:
    /// for addresses nobody answers for, or hosts that cannot answer).
    #[allow(dead_code)]
    pub fn pin_neighbour(&self, ip: &str, other: &Host) {
        self.exec(&format!(
            "ip neigh replace {ip} lladdr {} dev eth0 nud permanent",
            other.mac()
        ));
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, cmd: &str) -> String {
        sh(&self.in_ns(cmd))
    }

    /// Runs a command inside the namespace and returns what happened.
    pub fn exec_status(&self, cmd: &str) -> Output {
        sh_status(&self.in_ns(cmd))
    }

    /// `ip netns exec` for one command. A shell list (`&&`, `||`, `;`,
    /// a pipe) not wrapped in `sh -c` would run its tail in the root
    /// namespace, whose addresses and routes are the machine's own:
    /// refused.
    fn in_ns(&self, cmd: &str) -> String {
        // `[timeout N] sh|bash|python3 -c ...`: the list is the program's.
        let mut words = cmd.split_whitespace().peekable();
        if words.peek() == Some(&"timeout") {
            words.next();
            words.next();
        }
        let prog = words.next().unwrap_or("").rsplit('/').next().unwrap_or("");
        let wrapped = matches!(prog, "sh" | "bash" | "python3") && words.next() == Some("-c");
        assert!(
            wrapped || !["&&", "||", ";", "|"].iter().any(|op| cmd.contains(op)),
            "one command per exec, or wrap the list in sh -c: {cmd}"
        );
        format!("ip netns exec {} {cmd}", self.ns)
    }

    /// Whether two pings of `to` are answered (for pings that may fail).
    #[allow(dead_code)]
    pub fn pings(&self, to: &str) -> bool {
        self.exec_status(&format!("ping -c 2 -i 0.2 -W 1 {to}"))
            .status
            .success()
    }

    /// Pings `to` three times; every answer must come.
    #[allow(dead_code)]
    pub fn ping(&self, to: &str) {
        let out = self.exec_status(&format!("ping -c 3 -i 0.2 -W 2 {to}"));
        assert!(
            out.status.success(),
            "ping {to} from {}: {}",
            self.ns,
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Whatever the test left running in the namespace (an iperf3
        // server whose client never came) goes with it: a process keeps a
        // deleted namespace alive, and would outlive the test run.
        let _ = sh_status(&format!(
            "ip netns pids {ns} 2>/dev/null | xargs -r kill -9; ip netns del {ns} 2>/dev/null; ip link del {} 2>/dev/null",
            self.root_if,
            ns = self.ns
        ));
    }
}

/// Runs `ovs-ofctl -O OpenFlow13 ARGS`: (success, stdout + stderr).
#[allow(dead_code)]
pub fn ofctl(args: &[&str]) -> (bool, String) {
    ofctl_as(&["-O", "OpenFlow13"], args)
}

/// Runs `ovs-ofctl ARGS` as users do, with its default protocol
/// (OpenFlow 1.0 and Nicira's extensions): (success, stdout + stderr).
#[allow(dead_code)]
pub fn ofctl10(args: &[&str]) -> (bool, String) {
    ofctl_as(&[], args)
}

fn ofctl_as(options: &[&str], args: &[&str]) -> (bool, String) {
    let out = Command::new("ovs-ofctl")
        .args(options)
        .args(args)
        .output()
        .expect("ovs-ofctl runs (scripts/setup installs openvswitch-switch)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Asserts that every packet the datapath received is accounted for in a
/// `--json` report: received = forwarded + to controller + dropped.
#[allow(dead_code)]
pub fn assert_balanced(report: &serde_json::Value) {
    let dp = &report["datapath"];
    let rx = dp["packets received"].as_u64().unwrap();
    let fwd = dp["forwarded"].as_u64().unwrap();
    let ctl = dp["to controller"].as_u64().unwrap();
    assert_eq!(rx, fwd + ctl + dp_drops(report), "every packet accounted");
}

/// Starts `osken-manager` with app `app` (a file of tests/osken)
/// listening for switches on `port`, its output in `log`.
#[allow(dead_code)]
pub fn osken_manager(app: &str, port: u16, log: &Path) -> Killed {
    let app = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/osken")
        .join(app);
    Killed(
        Command::new("osken-manager")
            .arg("--ofp-tcp-listen-port")
            .arg(port.to_string())
            .arg(app)
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("osken-manager runs (scripts/setup installs python3-os-ken)"),
    )
}

/// A running `sluice run`, stopped (SIGTERM) when dropped or by `stop`.
pub struct Sluice {
    child: Option<Child>,
    /// Its control socket.
    pub ctl: PathBuf,
    _dir: tempfile::TempDir,
}

/// A free TCP port on the loopback (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The path of the built `sluice` binary.
pub fn sluice_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sluice")
}

/// Runs `sluice ARGS` to its end.
pub fn sluice(args: &[&str]) -> Output {
    Command::new(sluice_bin()).args(args).output().unwrap()
}

/// What a command wrote to stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a command wrote to stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl Sluice {
    /// Starts `sluice run --json --ctl SOCK` with `flows` and the port
    /// specs, in namespace `ns` (or the root namespace), and waits until its
    /// control socket answers.
    pub fn start(ns: Option<&str>, flows: &str, ports: &[&str]) -> Sluice {
        Sluice::start_with(ns, flows, ports, &[])
    }

    /// [`start`](Self::start) with more `sluice run` arguments.
    pub fn start_with(ns: Option<&str>, flows: &str, ports: &[&str], extra: &[&str]) -> Sluice {
        Sluice::spawn(ns, Some(flows), ports, extra)
    }

    /// [`start_with`](Self::start_with) with no flow file (the default
    /// rule, NORMAL).
    #[allow(dead_code)]
    pub fn start_without_flows(ports: &[&str], extra: &[&str]) -> Sluice {
        Sluice::spawn(None, None, ports, extra)
    }

    fn spawn(ns: Option<&str>, flows: Option<&str>, ports: &[&str], extra: &[&str]) -> Sluice {
        let dir = tempfile::tempdir().unwrap();
        let ctl = dir.path().join("ctl.sock");
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, sluice_bin()]);
                c
            }
            None => Command::new(sluice_bin()),
        };
        cmd.arg("run").arg("--json").arg("--ctl").arg(&ctl);
        if let Some(flows) = flows {
            let flow_file = dir.path().join("rules.flows");
            std::fs::write(&flow_file, flows).unwrap();
            cmd.arg("--flows").arg(&flow_file);
        }
        for p in ports {
            cmd.arg("--port").arg(p);
        }
        cmd.args(extra);
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sluice");
        let mut s = Sluice {
            child: Some(child),
            ctl,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if s.ctl.exists() && s.ctl_status(&["pmd-stats"]).status.success() {
                return s;
            }
            if let Some(st) = s.child.as_mut().unwrap().try_wait().unwrap() {
                let out = s.child.take().unwrap().wait_with_output().unwrap();
                panic!(
                    "sluice exited ({st}) before serving its control socket: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("sluice did not open its control socket");
    }

    /// `sluice ctl ARGS` against this instance; panics on failure.
    pub fn ctl(&self, args: &[&str]) -> String {
        let out = self.ctl_status(args);
        assert!(
            out.status.success(),
            "sluice ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `sluice ctl ARGS` and what happened.
    pub fn ctl_status(&self, args: &[&str]) -> Output {
        Command::new(sluice_bin())
            .arg("ctl")
            .arg("--ctl")
            .arg(&self.ctl)
            .args(args)
            .output()
            .unwrap()
    }

    /// Stops it (SIGTERM) and returns its JSON report.
    pub fn stop(mut self) -> serde_json::Value {
        let child = self.child.take().unwrap();
        sh(&format!("kill -TERM {}", child.id()));
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "sluice failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "report is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `sluice run` to completion (finite inputs) in `ns`; returns the report.
pub fn run_to_end(
    ns: Option<&str>,
    flows: &str,
    ports: &[&str],
    extra: &str,
    dir: &Path,
) -> serde_json::Value {
    let flow_file = dir.join("send.flows");
    std::fs::write(&flow_file, flows).unwrap();
    let mut line = match ns {
        Some(ns) => format!("ip netns exec {ns} "),
        None => String::new(),
    };
    line += &format!(
        "{} run --json --flows {} {extra}",
        sluice_bin(),
        flow_file.display()
    );
    for p in ports {
        line += &format!(" --port {p}");
    }
    serde_json::from_str(&sh(&line)).unwrap()
}

/// The counters of port `n` in a JSON report.
pub fn port(report: &serde_json::Value, n: u64) -> &serde_json::Value {
    report["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["number"] == n)
        .unwrap_or_else(|| panic!("no port {n} in {report}"))
}

/// Sum of a port's drop counters (`rx_dropped` or `tx_dropped`).
pub fn drops(port: &serde_json::Value, which: &str) -> u64 {
    port[which]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

/// Datapath drops in a JSON report (every reason).
pub fn dp_drops(report: &serde_json::Value) -> u64 {
    report["datapath"]["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

/// Waits up to `secs` seconds for `ok`, looking every 100 ms.
pub fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ovs-ofctl -O OpenFlow13 ARGS`, which must succeed: its output.
pub fn ofctl_ok(args: &[&str]) -> String {
    let (ok, out) = ofctl(args);
    assert!(ok, "ovs-ofctl {args:?}: {out}");
    out
}

/// `sluice run` with `1=null` and `ports` (N=SPEC each), listening for
/// OpenFlow on a unix socket in `dir`; killed if the test ends without
/// [`OfSwitch::stop`].
pub struct OfSwitch {
    child: Killed,
    /// Its `ovs-ofctl` target (`unix:PATH`).
    pub target: String,
}

impl OfSwitch {
    /// Starts it and waits for its socket.
    pub fn start(dir: &Path, ports: &[String]) -> OfSwitch {
        let sock = dir.join("of.sock");
        let mut cmd = Command::new(sluice_bin());
        cmd.args(["run", "--port", "1=null", "--duration", "60", "--listen"])
            .arg(format!("punix:{}", sock.display()));
        for p in ports {
            cmd.arg("--port").arg(p);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the socket", 20, || sock.exists());
        OfSwitch {
            child: Killed(child),
            target: format!("unix:{}", sock.display()),
        }
    }

    /// Stops it with SIGTERM (its capture ports then write what they
    /// sent) and asserts it exits cleanly.
    pub fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.0.id().to_string()])
            .status()
            .unwrap();
        assert!(self.child.0.wait().unwrap().success());
    }
}

/// A child process, killed and reaped when the guard drops.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ovs-ofctl -O OpenFlow13 monitor TARGET MISS_LEN`, ended by SIGTERM
/// after `secs` seconds: it writes what it saw only when it ends.
pub struct Monitor {
    child: Killed,
    out: PathBuf,
    err: PathBuf,
}

impl Monitor {
    /// Starts it, its output and unixctl socket in `dir`.
    pub fn start(dir: &Path, target: &str, miss_len: &str, secs: u32) -> Monitor {
        let (out, err) = (dir.join("monitor.txt"), dir.join("monitor.err"));
        let child = Command::new("timeout")
            .args([
                "-s",
                "TERM",
                &secs.to_string(),
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
            ])
            .arg(format!("--unixctl={}", dir.join("ofctl.ctl").display()))
            .args(["monitor", target, miss_len])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("timeout and ovs-ofctl (scripts/setup installs openvswitch-switch)");
        Monitor {
            child: Killed(child),
            out,
            err,
        }
    }

    /// Everything it wrote, once it has ended.
    pub fn seen(mut self) -> String {
        let _ = self.child.0.wait();
        std::fs::read_to_string(&self.out).unwrap() + &std::fs::read_to_string(&self.err).unwrap()
    }
}

/// Writes `n` UDP frames (one flow per frame) to a capture at `path`.
pub fn write_capture(path: &Path, n: usize) {
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            sluice_packet::build::Frame::ipv4(
                [10, 0, 0, 1],
                [10, 0, (i % 3) as u8, 9],
                sluice_packet::build::L4::Udp {
                    src: 1000 + i as u16,
                    dst: 53,
                },
            )
            .build()
        })
        .collect();
    std::fs::write(path, sluice_port::pcap::write_all(&frames)).unwrap();
}

/// A `sluice run --json --ctl SOCK ARGS` in the background.
pub struct RunningSwitch {
    child: std::process::Child,
    pub sock: String,
}

impl RunningSwitch {
    /// Starts it and waits for its control socket.
    pub fn start(sock: &str, args: &[&str]) -> RunningSwitch {
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--json", "--ctl", sock])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !Path::new(sock).exists() {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the control socket did not appear"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        RunningSwitch {
            child,
            sock: sock.to_string(),
        }
    }

    /// `sluice ctl --ctl SOCK ARGS`.
    pub fn ctl(&self, args: &[&str]) -> Output {
        ctl_at(&self.sock, args)
    }

    /// Waits for the end of the run; its JSON report.
    pub fn finish(self) -> serde_json::Value {
        self.finish_with_stderr().0
    }

    /// Stops it (SIGTERM) and returns its JSON report and what it logged.
    pub fn stop_with_stderr(self) -> (serde_json::Value, String) {
        sh(&format!("kill -TERM {}", self.child.id()));
        self.finish_with_stderr()
    }

    /// Waits for the end of the run; its JSON report and what it logged.
    pub fn finish_with_stderr(self) -> (serde_json::Value, String) {
        let out = self.child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (serde_json::from_slice(&out.stdout).unwrap(), err)
    }
}

/// `sluice ctl --ctl SOCK ARGS`.
pub fn ctl_at(sock: &str, args: &[&str]) -> Output {
    let mut a = vec!["ctl", "--ctl", sock];
    a.extend_from_slice(args);
    sluice(&a)
}

/// A private ovsdb-server + ovs-vswitchd, stopped on drop.
pub struct Ovs {
    /// Its run directory.
    pub dir: PathBuf,
}

impl Ovs {
    /// `ovs-appctl` against its ovs-vswitchd.
    pub fn appctl(&self, args: &str) -> String {
        sh(&format!(
            "ovs-appctl -t {}/ovs-vswitchd.ctl {args}",
            self.dir.display()
        ))
    }

    /// `ovs-vsctl` against its database.
    pub fn vsctl(&self, args: &str) -> String {
        sh(&format!(
            "ovs-vsctl --db=unix:{}/db.sock --timeout=30 {args}",
            self.dir.display()
        ))
    }

    /// `ovs-ofctl -O OpenFlow13`, `BR` standing for br0's management socket.
    pub fn ofctl(&self, args: &str) -> String {
        // The word BR alone (a temporary directory's name may hold "BR").
        let br = format!("unix:{}/br0.mgmt", self.dir.display());
        let args: Vec<&str> = args
            .split(' ')
            .map(|a| if a == "BR" { br.as_str() } else { a })
            .collect();
        sh(&format!("ovs-ofctl -O OpenFlow13 {}", args.join(" ")))
    }

    /// Starts one in `dir` with bridge br0: dummy ports 1 and 2,
    /// fail-mode secure, OpenFlow 1.0 and 1.3; returns it and br0's
    /// OpenFlow target.
    #[allow(dead_code)]
    pub fn with_bridge(dir: &Path) -> (Ovs, String) {
        let ovs = Ovs::start(dir);
        ovs.vsctl(
            "add-br br0 -- set bridge br0 datapath_type=dummy fail-mode=secure \
             protocols=OpenFlow10,OpenFlow13 \
             -- add-port br0 p1 -- set interface p1 type=dummy ofport_request=1 \
             -- add-port br0 p2 -- set interface p2 type=dummy ofport_request=2",
        );
        let target = format!("unix:{}/br0.mgmt", dir.display());
        (ovs, target)
    }

    /// Starts one in `dir` (dummy datapath only; no root needed).
    pub fn start(dir: &Path) -> Ovs {
        let d = dir.display();
        let env = format!("OVS_RUNDIR={d} OVS_DBDIR={d} OVS_LOGDIR={d} OVS_SYSCONFDIR={d}");
        let vswitchd = if Path::new("/usr/lib/openvswitch-switch/ovs-vswitchd").exists() {
            "/usr/lib/openvswitch-switch/ovs-vswitchd".to_string()
        } else {
            "ovs-vswitchd".to_string()
        };
        sh(&format!(
            "{env} ovsdb-tool create {d}/conf.db /usr/share/openvswitch/vswitch.ovsschema && \
             {env} ovsdb-server --detach --no-chdir --pidfile={d}/ovsdb-server.pid \
               --unixctl={d}/ovsdb-server.ctl --remote=punix:{d}/db.sock \
               --log-file={d}/ovsdb-server.log -vconsole:off {d}/conf.db"
        ));
        let ovs = Ovs {
            dir: dir.to_path_buf(),
        };
        ovs.vsctl("--no-wait init");
        sh(&format!(
            "{env} {vswitchd} --detach --no-chdir --pidfile={d}/ovs-vswitchd.pid \
               --unixctl={d}/ovs-vswitchd.ctl --log-file={d}/ovs-vswitchd.log -vconsole:off \
               --enable-dummy --disable-system --disable-system-route unix:{d}/db.sock"
        ));
        ovs
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for d in ["ovs-vswitchd", "ovsdb-server"] {
            let _ = sh_status(&format!(
                "kill $(cat {}/{d}.pid 2>/dev/null) 2>/dev/null",
                self.dir.display()
            ));
        }
    }
}

/// The rules of an `ovs-ofctl dump-flows` (any protocol) as lines without
/// their counters and ages (`duration`, `n_packets`, `n_bytes`,
/// `idle_age`), cookie and table kept, sorted: what two switches given the
/// same commands must both show.
#[allow(dead_code)]
pub fn dumped_rules(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains("actions="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|w| {
                    !["duration=", "n_packets=", "n_bytes=", "idle_age="]
                        .iter()
                        .any(|p| w.starts_with(p))
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

/// A CA `ca`, a second CA `other`, and certificates signed by them:
/// `sw` and `ctl` by `ca`, `intruder` by `other`; each NAME.key, NAME.pem.
pub fn make_pki(dir: &Path) {
    require_root_and(&["openssl"]);
    let run = |args: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("cd {} && {args}", dir.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    for ca in ["ca", "other"] {
        run(&format!(
            "openssl req -x509 -newkey rsa:2048 -nodes -keyout {ca}.key -out {ca}.pem -days 30 -subj /CN={ca} -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
        ));
    }
    for (leaf, ca) in [("sw", "ca"), ("ctl", "ca"), ("intruder", "other")] {
        run(&format!(
            "openssl req -newkey rsa:2048 -nodes -keyout {leaf}.key -out {leaf}.csr -subj /CN={leaf} && openssl x509 -req -in {leaf}.csr -CA {ca}.pem -CAkey {ca}.key -CAcreateserial -out {leaf}.pem -days 30 -extfile ext"
        ));
    }
}
