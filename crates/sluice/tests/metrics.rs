//! `--metrics`: the Prometheus endpoint of a running switch, read by hand
//! against `sluice ctl`'s own counters, and scraped by a real Prometheus
//! (Debian's `prometheus`, which `scripts/setup` installs) that answers a
//! query for every family.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{free_port, ofctl_ok, wait_for, write_capture, Sluice};

/// `GET path` on 127.0.0.1:`port`: (status line, body).
fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // HTTP/1.0: the answer is not chunked, and the connection closes.
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// A scrape: each sample line's `name{labels}` and value, and each
/// family's name and type.
struct Scrape {
    samples: BTreeMap<String, f64>,
    families: Vec<(String, String)>,
}

impl Scrape {
    fn get(port: u16) -> Scrape {
        let (status, body) = http_get(port, "/metrics");
        assert!(status.ends_with(" 200 OK"), "{status}: {body}");
        assert!(
            body.ends_with("# EOF\n"),
            "an OpenMetrics page ends in # EOF"
        );
        let mut samples = BTreeMap::new();
        let mut families = Vec::new();
        for line in body.lines() {
            if let Some(t) = line.strip_prefix("# TYPE ") {
                let (name, ty) = t.split_once(' ').unwrap();
                families.push((name.to_string(), ty.to_string()));
            } else if !line.starts_with('#') {
                let (key, v) = line.rsplit_once(' ').unwrap();
                samples.insert(key.to_string(), v.parse().unwrap());
            }
        }
        Scrape { samples, families }
    }

    fn value(&self, key: &str) -> u64 {
        *self
            .samples
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key}: {:#?}", self.samples.keys())) as u64
    }
}

/// The number after `what: ` in `text` (a `sluice ctl` report).
fn number_after(text: &str, what: &str) -> u64 {
    let at = text
        .find(what)
        .unwrap_or_else(|| panic!("no '{what}' in {text}"))
        + what.len();
    text[at..]
        .trim_start_matches([':', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// A switch that has forwarded a finite capture and holds still (its
/// control socket keeps it up): the endpoint says what `sluice ctl`
/// says, family by family; flow-mods from `sluice ctl` and from an
/// OpenFlow client are counted, refused ones apart; HTTP errors for the
/// rest.
#[test]
fn metrics_say_what_the_switch_counts() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 300);
    let (mport, ofport) = (free_port(), free_port());
    let run = Sluice::start_with(
        None,
        "priority=10,udp,actions=output:2\npriority=0,actions=drop\n",
        &[&format!("1=pcap:rx={}", p("in.pcap")), "2=null"],
        &[
            "--metrics",
            &mport.to_string(),
            "--listen",
            &format!("ptcp:{ofport}"),
        ],
    );
    wait_for("the capture to be forwarded", 10, || {
        number_after(&run.ctl(&["pmd-stats"]), "packets received") == 300
    });
    let s = Scrape::get(mport);
    let stats = run.ctl(&["pmd-stats"]);
    for (key, said) in [
        ("sluice_pmd_rx_packets_total{pmd=\"0\"}", "packets received"),
        ("sluice_pmd_tx_packets_total{pmd=\"0\"}", "sent packets"),
        ("sluice_pmd_tx_batches_total{pmd=\"0\"}", "sent batches"),
        ("sluice_pmd_iterations_total{pmd=\"0\"}", "iterations"),
        (
            "sluice_cache_hits_total{pmd=\"0\",level=\"emc\"}",
            "emc hits",
        ),
        (
            "sluice_cache_hits_total{pmd=\"0\",level=\"megaflow\"}",
            "megaflow hits",
        ),
        (
            "sluice_upcalls_total{pmd=\"0\",result=\"ok\"}",
            "miss with success upcall",
        ),
    ] {
        // Iterations go on while the switch idles: the endpoint's count
        // was read first.
        if said == "iterations" {
            assert!(s.value(key) <= number_after(&stats, said), "{key}");
        } else {
            assert_eq!(
                s.value(key),
                number_after(&stats, said),
                "{key} against '{said}'"
            );
        }
    }
    let name = format!("pcap:rx={}", p("in.pcap"));
    assert_eq!(
        s.value(&format!(
            "sluice_port_rx_packets_total{{port=\"1\",name=\"{name}\"}}"
        )),
        300
    );
    assert_eq!(
        s.value("sluice_port_tx_packets_total{port=\"2\",name=\"null\"}"),
        300
    );
    let kicks = s.value("sluice_port_tx_kicks_total{port=\"2\",name=\"null\"}");
    assert!((1..=300).contains(&kicks), "{kicks}");
    assert_eq!(
        s.value("sluice_port_tx_dropped_total{port=\"2\",name=\"null\",reason=\"queue_full\"}"),
        0
    );
    // Every frame is UDP: the priority-10 rule matched them all.
    assert_eq!(s.value("sluice_table_rules{table=\"0\"}"), 2);
    assert_eq!(s.value("sluice_table_matches_total{table=\"0\"}"), 300);
    assert_eq!(
        s.value("sluice_pmd_dropped_total{pmd=\"0\",reason=\"table_miss\"}"),
        0
    );
    assert!(s
        .samples
        .contains_key("sluice_pmd_cycles_total{pmd=\"0\",state=\"busy\"}"));
    assert!(s.value("sluice_rxq_cycles_total{pmd=\"0\",port=\"1\",queue=\"0\"}") > 0);
    // The batch size histograms: every packet in one batch of each.
    assert_eq!(s.value("sluice_pmd_rx_batch_packets_sum{pmd=\"0\"}"), 300);
    assert_eq!(s.value("sluice_pmd_tx_batch_packets_sum{pmd=\"0\"}"), 300);
    let batches = s.value("sluice_pmd_tx_batch_packets_count{pmd=\"0\"}");
    assert_eq!(
        s.value("sluice_pmd_tx_batch_packets_bucket{le=\"+Inf\",pmd=\"0\"}"),
        batches
    );
    assert_eq!(batches, number_after(&stats, "sent batches"));

    // Flow-mods: two rules from `sluice ctl add-flows`, one from an
    // OpenFlow client, one refused (group 7 does not exist).
    std::fs::write(
        d.path().join("more.flows"),
        "priority=20,arp,actions=drop\npriority=21,icmp,actions=drop\n",
    )
    .unwrap();
    run.ctl(&["add-flows", &p("more.flows")]);
    assert!(!run
        .ctl_status(&["add-flow", "priority=30,actions=group:7"])
        .status
        .success());
    ofctl_ok(&[
        "add-flow",
        &format!("tcp:127.0.0.1:{ofport}"),
        "priority=40,tcp,actions=drop",
    ]);
    let s = Scrape::get(mport);
    assert_eq!(s.value("sluice_flow_mods_total{result=\"applied\"}"), 3);
    assert_eq!(s.value("sluice_flow_mods_total{result=\"refused\"}"), 1);
    assert_eq!(s.value("sluice_table_rules{table=\"0\"}"), 5);
    assert_eq!(
        s.value("sluice_openflow_packet_ins_total{outcome=\"sent\"}"),
        0
    );
    assert!(s.samples.contains_key("sluice_openflow_connections"));
    assert!(s.value("sluice_uptime_seconds") < 60);

    // What is not a scrape.
    assert_eq!(http_get(mport, "/nothing").0, "HTTP/1.1 404 Not Found");
    let mut c = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    c.write_all(b"DELETE /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 405"), "{r}");

    support::assert_balanced(&run.stop());
    // The endpoint ends with the switch.
    assert!(TcpStream::connect(("127.0.0.1", mport)).is_err());
}

/// A port the endpoint cannot have is a clear error at the start.
#[test]
fn a_metrics_address_in_use_is_an_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = support::sluice(&[
        "run",
        "--port",
        "1=null",
        "--metrics",
        &port,
        "--duration",
        "1",
    ]);
    assert!(!o.status.success());
    assert!(
        support::stderr(&o).contains(&format!("--metrics 127.0.0.1:{port}: ")),
        "{}",
        support::stderr(&o)
    );
    let o = support::sluice(&["run", "--port", "1=null", "--metrics", "nowhere"]);
    assert!(
        support::stderr(&o).contains("--metrics 'nowhere': expected PORT"),
        "{}",
        support::stderr(&o)
    );
}

/// A Prometheus server, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` every second, on a free
    /// loopback port, with its data in a temporary directory.
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (scripts/setup installs it)");
        // Made first, so that its drop stops the server if the wait fails.
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        // It listens before it is ready (its queries answer 503 while
        // its storage opens): wait for /-/ready.
        wait_for("Prometheus to answer /-/ready", 30, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                && http_get(port, "/-/ready").0.contains("200")
        });
        p
    }

    /// The JSON answer to an instant query.
    fn query(&self, q: &str) -> serde_json::Value {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (status, body) = http_get(self.port, &format!("/api/v1/query?query={enc}"));
        assert!(status.contains("200"), "{status}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The series an instant query returns.
    fn series(&self, q: &str) -> Vec<serde_json::Value> {
        let v = self.query(q);
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus scrapes a running switch: the target is up, and a
/// query for every family the endpoint serves answers with its series;
/// the rate of received packets is what the port receives.
#[test]
fn prometheus_scrapes_a_running_switch() {
    assert!(
        support::sh_status("command -v prometheus").status.success(),
        "prometheus is missing: run scripts/setup"
    );
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();
    write_capture(&d.path().join("in.pcap"), 50);
    let mport = free_port();
    let run = Sluice::start_with(
        None,
        "actions=output:2\n",
        &[&format!("1=pcap:rx={},loop", p("in.pcap")), "2=null"],
        &[
            "--metrics",
            &mport.to_string(),
            "--listen",
            &format!("ptcp:{}", free_port()),
        ],
    );
    let prom = Prometheus::start(&format!("127.0.0.1:{mport}"));
    let t0 = Instant::now();
    let mut up = Vec::new();
    // (Prometheus is ready: start waited for it.)
    while t0.elapsed() < Duration::from_secs(30) {
        up = prom.series("up{job=\"sluice\"}");
        if up.first().is_some_and(|s| s["value"][1] == "1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        up.first().is_some_and(|s| s["value"][1] == "1"),
        "Prometheus scraped the switch: {up:?}"
    );
    // Two scrapes at least, for a rate.
    std::thread::sleep(Duration::from_millis(2500));
    let families = Scrape::get(mport).families;
    assert!(families.len() >= 30, "{families:?}");
    for (name, ty) in &families {
        let series = match ty.as_str() {
            "counter" => format!("{name}_total"),
            "histogram" => format!("{name}_count"),
            _ => name.clone(),
        };
        let got = prom.series(&series);
        assert!(!got.is_empty(), "Prometheus has no {series}");
        assert!(
            got.iter().all(|s| s["metric"]["job"] == "sluice"),
            "{series}: {got:?}"
        );
    }
    let rate = prom.series("rate(sluice_port_rx_packets_total{port=\"1\"}[5s])");
    let pps: f64 = rate[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(
        pps > 1000.0,
        "a looping capture is received at {pps} packets/s"
    );
    drop(prom);
    support::assert_balanced(&run.stop());
}
