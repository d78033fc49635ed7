//! `sluice ctl capture`: live captures of a running switch's ports into
//! pcap files, as `ovs-tcpdump -w` or VPP's `pcap trace`. The datapath's
//! taps ([`sluice_datapath::capture`]) copy frames per batch; a writer
//! thread per capture (here, off the PMDs) writes them. A capture ends at
//! `capture-stop`, at its `--count`, or with the switch; its file is then
//! complete.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sluice_datapath::capture::{records, Chunk, Direction, TapCounters, TapSpec};
use sluice_port::pcap::PcapWriter;

/// Chunks (batches of up to 32 frames) a writer may have waiting; the
/// frames of one more are dropped from the capture.
pub const QUEUE_CHUNKS: usize = 256;

/// How `capture` is called.
pub const USAGE: &str = "capture PORT FILE [--rx|--tx|--both] [--count N] [--filter MATCH]";

/// A `capture` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The port.
    pub port: u32,
    /// The pcap file to write.
    pub file: PathBuf,
    /// Which frames.
    pub dir: Direction,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Only frames of flows that match (ovs-ofctl match syntax).
    pub filter: Option<String>,
}

impl Request {
    /// Reads `capture`'s arguments.
    pub fn parse(args: &[&str]) -> Result<Request, String> {
        let mut words = Vec::new();
        let mut dir = Direction::Both;
        let mut count = None;
        let mut filter = None;
        let mut it = args.iter();
        while let Some(&a) = it.next() {
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v)),
                _ => (a, None),
            };
            let mut value = || -> Result<String, String> {
                inline
                    .map(str::to_string)
                    .or_else(|| it.next().map(|v| v.to_string()))
                    .ok_or_else(|| format!("{name} needs a value; usage: {USAGE}"))
            };
            match name {
                "--rx" => dir = Direction::Rx,
                "--tx" => dir = Direction::Tx,
                "--both" => dir = Direction::Both,
                "--count" => {
                    let v = value()?;
                    count = Some(v.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--count '{v}': give a number of frames, 1 or more")
                    })?);
                }
                "--filter" => {
                    let v = value()?;
                    sluice_classifier::parse_flow(&v, sluice_classifier::Require::NoActions)
                        .map_err(|e| format!("--filter '{v}': {e}"))?;
                    filter = Some(v);
                }
                n if n.starts_with("--") => {
                    return Err(format!("unknown option '{n}'; usage: {USAGE}"))
                }
                _ => words.push(a),
            }
        }
        let [port, file] = words.as_slice() else {
            return Err(format!("give a port and a file; usage: {USAGE}"));
        };
        Ok(Request {
            port: port
                .parse()
                .map_err(|_| format!("'{port}' is not a port number; usage: {USAGE}"))?,
            file: PathBuf::from(file),
            dir,
            count,
            filter,
        })
    }
}

/// A capture that runs (or has ended and not yet been stopped).
struct Running {
    req: Request,
    counters: Arc<TapCounters>,
    written: Arc<AtomicU64>,
    writer: Option<JoinHandle<Result<(), String>>>,
}

impl Running {
    fn line(&self) -> String {
        let c = &self.counters;
        let state = if c.done.load(Ordering::Relaxed) {
            "done"
        } else {
            "running"
        };
        format!(
            "port {} ({}) to {}: {state}, {} frames captured, {} written, {} dropped (writer behind){}{}",
            self.req.port,
            match self.req.dir {
                Direction::Rx => "rx",
                Direction::Tx => "tx",
                Direction::Both => "rx and tx",
            },
            self.req.file.display(),
            c.captured.load(Ordering::Relaxed),
            self.written.load(Ordering::Relaxed),
            c.dropped.load(Ordering::Relaxed),
            self.req.count.map(|n| format!(", count {n}")).unwrap_or_default(),
            self.req
                .filter
                .as_ref()
                .map(|f| format!(", filter {f}"))
                .unwrap_or_default(),
        )
    }

    /// Waits for the writer (the taps are gone): the file is complete.
    fn finish(mut self) -> String {
        let r = self.writer.take().map(|w| w.join());
        let mut s = self
            .line()
            .replace(": running,", ": stopped,")
            .replace(": done,", ": stopped,");
        match r {
            Some(Ok(Err(e))) => s += &format!(" (writing failed: {e})"),
            Some(Err(_)) => s += " (the writer failed)",
            _ => {}
        }
        s
    }
}

/// The switch's captures, by port.
#[derive(Default)]
pub struct Captures {
    running: Mutex<HashMap<u32, Running>>,
}

impl Captures {
    /// Opens `req.file` and starts its writer; returns one tap for each of
    /// `pmds` datapath threads (filter parsed with VLAN setting `vlans`).
    /// `uptime_us`: the switch clock now, for the frames' wall-clock
    /// times.
    pub fn start(
        &self,
        req: Request,
        pmds: usize,
        vlans: usize,
        uptime_us: u64,
    ) -> Result<Vec<TapSpec>, String> {
        let mut running = self.running.lock().expect("captures");
        if let Some(r) = running.get(&req.port) {
            if !r.counters.done.load(Ordering::Relaxed) {
                return Err(format!(
                    "port {} is being captured already (to {}): 'capture-stop {}' first",
                    req.port,
                    r.req.file.display(),
                    req.port
                ));
            }
        }
        let filter = req
            .filter
            .as_deref()
            .map(|f| {
                sluice_classifier::parse_flow(f, sluice_classifier::Require::NoActions)
                    .map(|s| s.matcher)
                    .map_err(|e| format!("--filter '{f}': {e}"))
            })
            .transpose()?;
        let file = create(&req.file)?;
        let pcap = PcapWriter::new(BufWriter::with_capacity(1 << 20, file))
            .map_err(|e| format!("{}: {e}", req.file.display()))?;
        let counters = Arc::new(TapCounters {
            remaining: AtomicU64::new(req.count.unwrap_or(u64::MAX)),
            ..TapCounters::default()
        });
        let written = Arc::new(AtomicU64::new(0));
        let (to_writer, chunks) = sync_channel(QUEUE_CHUNKS);
        let mut lanes = Vec::with_capacity(pmds);
        let mut taps = Vec::with_capacity(pmds);
        let epoch_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            .saturating_sub(uptime_us * 1000);
        for _ in 0..pmds {
            let (back, returned) = sync_channel(8);
            lanes.push(back);
            taps.push(TapSpec {
                dir: req.dir,
                filter,
                vlans: sluice_packet::extract::vlan_limit(vlans),
                to_writer: to_writer.clone(),
                queue: QUEUE_CHUNKS,
                returned,
                counters: Arc::clone(&counters),
                epoch_ns,
            });
        }
        drop(to_writer);
        let w = Arc::clone(&written);
        let queued = Arc::clone(&counters);
        let name = req.file.display().to_string();
        let writer = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || {
                let r = write_frames(pcap, chunks, lanes, &w, &queued);
                // The taps stop taking frames for a writer that is gone.
                queued.done.store(true, Ordering::Relaxed);
                r.map_err(|e| format!("{name}: {e}"))
            })
            .map_err(|e| e.to_string())?;
        if let Some(old) = running.remove(&req.port) {
            old.finish();
        }
        running.insert(
            req.port,
            Running {
                req,
                counters,
                written,
                writer: Some(writer),
            },
        );
        Ok(taps)
    }

    /// The capture of `port` has started on every datapath thread: what
    /// to tell the user.
    pub fn started(&self, port: u32) -> String {
        let running = self.running.lock().expect("captures");
        match running.get(&port) {
            Some(r) => format!(
                "capturing port {port} to {} ('sluice ctl capture-stop {port}' ends it; 'capture-show' tells how far it is)",
                r.req.file.display()
            ),
            None => String::new(),
        }
    }

    /// Forgets the capture of `port` after a failed start.
    pub fn abandon(&self, port: u32) {
        if let Some(r) = self.running.lock().expect("captures").remove(&port) {
            r.counters.done.store(true, Ordering::Relaxed);
            r.finish();
        }
    }

    /// Ends the capture of `port` once the datapath threads have dropped
    /// its taps: waits for its file to be complete; what it captured.
    pub fn stop(&self, port: u32) -> Result<String, String> {
        let r = self
            .running
            .lock()
            .expect("captures")
            .remove(&port)
            .ok_or_else(|| format!("port {port} is not being captured"))?;
        Ok(r.finish())
    }

    /// Whether `port` has a capture.
    pub fn has(&self, port: u32) -> bool {
        self.running.lock().expect("captures").contains_key(&port)
    }

    /// A line per capture.
    pub fn show(&self) -> String {
        let running = self.running.lock().expect("captures");
        let mut ports: Vec<_> = running.keys().copied().collect();
        ports.sort_unstable();
        if ports.is_empty() {
            return "no captures".into();
        }
        ports
            .iter()
            .map(|p| running[p].line())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Ends every capture (the switch stops; the taps are gone): each
    /// file complete.
    pub fn finish_all(&self) -> Vec<String> {
        let mut running = self.running.lock().expect("captures");
        running.drain().map(|(_, r)| r.finish()).collect()
    }
}

/// Creates (or truncates) the capture file; refuses anything at the path
/// that is not a regular file (a directory, a device, a socket, a link).
fn create(path: &Path) -> Result<File, String> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(format!(
                "{}: exists and is not a regular file; give another path",
                path.display()
            ));
        }
    }
    File::create(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The writer: chunks to pcap records until every tap is gone, flushing
/// whenever the queue runs dry; emptied buffers go back to the taps.
fn write_frames(
    mut pcap: PcapWriter<BufWriter<File>>,
    chunks: Receiver<Chunk>,
    lanes: Vec<SyncSender<Chunk>>,
    written: &AtomicU64,
    counters: &TapCounters,
) -> std::io::Result<()> {
    let mut lane = 0;
    loop {
        match chunks.recv_timeout(Duration::from_millis(100)) {
            Ok(chunk) => {
                counters.queued.fetch_sub(1, Ordering::AcqRel);
                let mut n = 0;
                for (ts, frame) in records(&chunk) {
                    pcap.write(ts, frame)?;
                    n += 1;
                }
                written.fetch_add(n, Ordering::Relaxed);
                if !lanes.is_empty() {
                    lane = (lane + 1) % lanes.len();
                    let _ = lanes[lane].try_send(chunk);
                }
            }
            Err(RecvTimeoutError::Timeout) => pcap.flush()?,
            Err(RecvTimeoutError::Disconnected) => return pcap.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = Request::parse(&[
            "2",
            "/tmp/x.pcap",
            "--tx",
            "--count",
            "5",
            "--filter=udp,tp_dst=53",
        ])
        .unwrap();
        assert_eq!(
            (r.port, r.dir, r.count, r.filter.as_deref()),
            (2, Direction::Tx, Some(5), Some("udp,tp_dst=53"))
        );
        assert_eq!(Request::parse(&["1", "f"]).unwrap().dir, Direction::Both);
        for (args, said) in [
            (&["1"][..], "give a port and a file"),
            (&["x", "f"], "'x' is not a port number"),
            (&["1", "f", "--count", "0"], "1 or more"),
            (&["1", "f", "--count"], "--count needs a value"),
            (&["1", "f", "--filter", "tp_dst=53"], "--filter 'tp_dst=53'"),
            (&["1", "f", "--snaplen", "9"], "unknown option '--snaplen'"),
            (&["1", "f", "g"], "give a port and a file"),
        ] {
            let e = Request::parse(args).unwrap_err();
            assert!(e.contains(said), "{args:?}: {e}");
        }
    }

    #[test]
    fn only_a_regular_file_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        assert!(create(d.path()).unwrap_err().contains("not a regular file"));
        let f = d.path().join("c.pcap");
        std::fs::write(&f, b"old").unwrap();
        create(&f).unwrap();
        assert_eq!(std::fs::read(&f).unwrap().len(), 0);
        let l = d.path().join("link");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(create(&l).unwrap_err().contains("not a regular file"));
    }
}
