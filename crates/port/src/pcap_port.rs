//! The pcap port: receives the frames of a capture file (streamed, or
//! loaded once and replayed forever with `loop`) and writes what it sends
//! to another capture file.
//!
//! Output records carry the timestamp the packet was received with, so
//! running the same capture through the same rules gives byte-identical
//! output files.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_packet::{PacketBatch, PacketPool};

use crate::pcap::{PcapReader, PcapWriter, Record};
use crate::replay::{Frames, ReplayPort};
use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus};

enum RxSide {
    None,
    Stream {
        reader: PcapReader<BufReader<File>>,
        /// The record read last, its buffer reused for the next.
        rec: Record,
        /// Whether `rec` is read but not yet received (no frame was free).
        pending: bool,
        done: bool,
    },
    Loop(Box<ReplayPort>),
}

/// A capture-file port.
pub struct PcapPort {
    name: String,
    rx: RxSide,
    rx_path: Option<PathBuf>,
    tx: Option<PcapWriter<BufWriter<File>>>,
    stats: PortStats,
    warnings: Vec<String>,
    /// Most packets per receive.
    burst: usize,
}

impl std::fmt::Debug for PcapPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapPort")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Reads every frame of a capture into memory (for `loop`), refusing an
/// empty one.
pub fn load_frames(path: &Path) -> Result<Frames, String> {
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut reader =
        PcapReader::new(BufReader::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut frames = Frames::new();
    while let Some(rec) = reader
        .next_record()
        .map_err(|e| format!("{}: {e}", path.display()))?
    {
        frames.push(&rec.data, rec.ts_ns);
    }
    if frames.is_empty() {
        return Err(format!("{}: no packets to loop over", path.display()));
    }
    Ok(frames)
}

impl PcapPort {
    /// Opens the rx file (if any) and creates the tx file (if any).
    pub fn open(
        name: &str,
        rx: Option<&Path>,
        tx: Option<&Path>,
        looping: bool,
    ) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        let rx_side = match rx {
            None => RxSide::None,
            Some(path) => {
                if looping {
                    let frames = load_frames(path).map_err(err)?;
                    RxSide::Loop(Box::new(ReplayPort::new(name, frames, true)))
                } else {
                    let f = File::open(path)
                        .map_err(|e| err(format!("cannot open {}: {e}", path.display())))?;
                    let reader = PcapReader::new(BufReader::new(f))
                        .map_err(|e| err(format!("{}: {e}", path.display())))?;
                    RxSide::Stream {
                        reader,
                        rec: Record {
                            ts_ns: 0,
                            orig_len: 0,
                            data: Vec::with_capacity(2048),
                        },
                        pending: false,
                        done: false,
                    }
                }
            }
        };
        let tx = match tx {
            None => None,
            Some(path) => {
                let f = File::create(path)
                    .map_err(|e| err(format!("cannot create {}: {e}", path.display())))?;
                Some(
                    PcapWriter::new(BufWriter::new(f))
                        .map_err(|e| err(format!("{}: {e}", path.display())))?,
                )
            }
        };
        Ok(PcapPort {
            name: name.to_string(),
            rx: rx_side,
            rx_path: rx.map(Path::to_path_buf),
            tx,
            stats: PortStats::default(),
            warnings: Vec::new(),
            burst: usize::MAX,
        })
    }

    /// At most `n` packets per receive (`None`: a whole batch).
    pub fn with_burst(mut self, n: Option<usize>) -> Self {
        self.burst = n.unwrap_or(usize::MAX);
        self
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: !matches!(self.rx, RxSide::None),
            tx: self.tx.is_some(),
            finite_rx: !matches!(self.rx, RxSide::Loop(_)),
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: true,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        let (reader, rec, pending, done) = match &mut self.rx {
            RxSide::None => return RxStatus::Exhausted,
            RxSide::Loop(r) => return r.rx_into(pool, batch, in_port),
            RxSide::Stream {
                reader,
                rec,
                pending,
                done,
            } => (reader, rec, pending, done),
        };
        let mut n = 0;
        while !batch.is_full() && n < self.burst && !*done {
            if !*pending {
                match reader.read_record(rec) {
                    Ok(true) => {}
                    Ok(false) => {
                        *done = true;
                        if let Some(at) = reader.truncated_at {
                            let path = self
                                .rx_path
                                .as_deref()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default();
                            self.warnings.push(format!("{path}: file ends inside a record at byte {at}; the partial record was not read"));
                        }
                        break;
                    }
                    Err(e) => {
                        *done = true;
                        self.stats.rx_drop(PortDrop::Error, 1);
                        self.warnings
                            .push(format!("read error, input stopped: {e}"));
                        break;
                    }
                }
            }
            *pending = false;
            if rec.data.len() > pool.max_packet_len() {
                self.stats.rx_drop(PortDrop::TooBig, 1);
                continue;
            }
            let Some(mut p) = pool.alloc_from(&rec.data) else {
                // Out of frames: keep the record for the next burst.
                *pending = true;
                break;
            };
            p.meta.in_port = in_port;
            p.meta.rx_ts_ns = rec.ts_ns;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += rec.data.len() as u64;
            let _ = batch.push(p);
            n += 1;
        }
        RxStatus::of_burst(n, *done && !*pending)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        let Some(w) = &mut self.tx else {
            self.stats
                .tx_drop(PortDrop::NotWritable, batch.len() as u64);
            batch.free_all(pool);
            return 0;
        };
        let mut sent = 0;
        let mut now = 0;
        for p in batch.drain() {
            let ts = if p.meta.rx_ts_ns != 0 {
                p.meta.rx_ts_ns
            } else {
                if now == 0 {
                    now = now_ns();
                }
                now
            };
            match w.write(ts, p.data()) {
                Ok(()) => {
                    sent += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += p.len() as u64;
                }
                Err(e) => {
                    self.stats.tx_drop(PortDrop::Error, 1);
                    if self.warnings.len() < 8 {
                        self.warnings.push(format!("write error: {e}"));
                    }
                }
            }
            pool.free(p);
        }
        self.stats.tx_kicks += 1;
        sent
    }

    fn flush(&mut self, _pool: &mut PacketPool) -> Result<(), PortError> {
        if let Some(w) = &mut self.tx {
            w.flush().map_err(|e| PortError {
                port: self.name.clone(),
                message: format!("flush failed: {e}"),
            })?;
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats.clone();
        if let RxSide::Loop(r) = &self.rx {
            let rs = r.replay_stats();
            s.rx_packets = rs.rx_packets;
            s.rx_bytes = rs.rx_bytes;
            s.rx_dropped = rs.rx_dropped;
        }
        s
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::{read_all, write_all};

    #[test]
    fn reads_then_writes_with_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let (inp, out) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
        let frames: Vec<Vec<u8>> = (0..70u8).map(|i| vec![i; 64]).collect();
        std::fs::write(&inp, write_all(&frames)).unwrap();
        let mut port = PcapPort::open("p", Some(&inp), Some(&out), false).unwrap();
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let mut b = PacketBatch::new();
        let mut got = 0;
        loop {
            match port.rx_burst(&mut pool, &mut b, 1) {
                RxStatus::Received(n) => got += n,
                RxStatus::Exhausted => break,
                RxStatus::Idle => unreachable!(),
            }
            port.tx_burst(&mut pool, &mut b);
        }
        port.flush(&mut pool).unwrap();
        assert_eq!(got, 70);
        let back = read_all(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(back.len(), 70);
        assert_eq!(back[69].data, frames[69]);
        assert_eq!(back[69].ts_ns, 1_000_069_000, "timestamps carried through");
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn pool_exhaustion_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let inp = dir.path().join("in.pcap");
        std::fs::write(&inp, write_all(&vec![vec![1u8; 60]; 10])).unwrap();
        let mut port = PcapPort::open("p", Some(&inp), None, false).unwrap();
        let mut pool = PacketPool::new(3, 2048).unwrap();
        let mut b = PacketBatch::new();
        let mut got = 0;
        while let RxStatus::Received(n) = port.rx_burst(&mut pool, &mut b, 1) {
            got += n;
            b.free_all(&mut pool);
        }
        assert_eq!(got, 10);
        assert_eq!(port.stats().rx_dropped_total(), 0);
    }

    #[test]
    fn open_errors_name_the_file() {
        let e =
            PcapPort::open("p", Some(Path::new("/nonexistent/x.pcap")), None, false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
    }
}
