//! The stream port, compatible with Open vSwitch's netdev-dummy
//! (`options:stream=unix:PATH` / `punix:PATH`): Ethernet frames over a unix
//! stream socket, each as a 2-byte big-endian length and the frame.
//!
//! `stream:unix:PATH` connects to a listener (and reconnects, every 100 ms,
//! if there is none or it goes away); `stream:punix:PATH` listens and serves
//! one peer at a time. Needs no privileges: it lets Sluice exchange packets
//! with a sandboxed Open vSwitch or a test harness.
//!
//! A burst reads what the socket holds into a buffer and cuts frames out of
//! it. A tx batch is framed into one buffer and written with one call (one
//! kick per batch); what the socket cannot take now waits (up to
//! [`TX_BUFFER_LIMIT`] bytes) and is retried by the periodic drain.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_packet::{PacketBatch, PacketPool};

use crate::{Port, PortCaps, PortDrop, PortError, PortStats, RxStatus, Warnings};

/// Bytes of framed packets that may wait for the socket.
pub const TX_BUFFER_LIMIT: usize = 1 << 20;
/// The shortest frame the framing carries (an Ethernet header), as
/// netdev-dummy requires.
pub const MIN_FRAME: usize = 14;
const RECONNECT_EVERY: Duration = Duration::from_millis(100);
/// Receive buffer: room for the largest frame the framing can carry.
const RX_BUFFER: usize = 2 * (2 + u16::MAX as usize);

/// What the front of a receive buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Not a whole frame yet: read more.
    Incomplete,
    /// A frame of this many bytes follows the 2-byte length.
    Frame(usize),
    /// A length below [`MIN_FRAME`]: the stream cannot be trusted further.
    Bad(usize),
}

/// Reads the framing at the front of `buf` (untrusted bytes from a peer).
pub fn next_frame(buf: &[u8]) -> Framing {
    let Some(head) = buf.get(..2) else {
        return Framing::Incomplete;
    };
    let len = u16::from_be_bytes([head[0], head[1]]) as usize;
    if len < MIN_FRAME {
        Framing::Bad(len)
    } else if buf.len() < 2 + len {
        Framing::Incomplete
    } else {
        Framing::Frame(len)
    }
}

enum Mode {
    Connect {
        last_try: Option<Instant>,
    },
    /// The listener and its socket file (removed when the port goes).
    Listen(UnixListener, crate::unix_listen::SocketFile),
}

/// A netdev-dummy-compatible stream port.
pub struct StreamPort {
    name: String,
    path: PathBuf,
    mode: Mode,
    conn: Option<UnixStream>,
    rx_buf: Vec<u8>,
    rx_len: usize,
    tx_buf: Vec<u8>,
    /// Frame sizes (with their 2-byte prefix) still in `tx_buf`, oldest first.
    tx_frames: VecDeque<u32>,
    /// Bytes at the front of `tx_buf` already written (part of the oldest
    /// frame; whole frames are removed once written).
    tx_written: usize,
    stats: PortStats,
    warnings: Warnings,
}

impl StreamPort {
    /// Opens a stream port: listens on `path` when `listen`, else connects to
    /// it (retrying in the background if nobody listens yet).
    pub fn open(name: &str, path: &Path, listen: bool) -> Result<Self, PortError> {
        let err = |m: String| PortError {
            port: name.to_string(),
            message: m,
        };
        let mode = if listen {
            let (l, file) =
                crate::unix_listen::listen(path).map_err(|e| err(format!("cannot listen: {e}")))?;
            l.set_nonblocking(true)
                .map_err(|e| err(format!("non-blocking: {e}")))?;
            Mode::Listen(l, file)
        } else {
            Mode::Connect { last_try: None }
        };
        let mut port = StreamPort {
            name: name.to_string(),
            path: path.to_path_buf(),
            mode,
            conn: None,
            rx_buf: vec![0; RX_BUFFER],
            rx_len: 0,
            tx_buf: Vec::with_capacity(64 * 1024),
            tx_frames: VecDeque::new(),
            tx_written: 0,
            stats: PortStats::default(),
            warnings: Warnings::new(16),
        };
        port.connect();
        Ok(port)
    }

    /// Whether a peer is connected now.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Accepts a peer or (re)connects, as the mode says.
    fn connect(&mut self) {
        if self.conn.is_some() {
            return;
        }
        let conn = match &mut self.mode {
            Mode::Listen(l, _) => match l.accept() {
                Ok((s, _)) => Some(s),
                Err(_) => None,
            },
            Mode::Connect { last_try } => {
                if last_try.is_some_and(|t| t.elapsed() < RECONNECT_EVERY) {
                    return;
                }
                *last_try = Some(Instant::now());
                UnixStream::connect(&self.path).ok()
            }
        };
        if let Some(s) = conn {
            if s.set_nonblocking(true).is_ok() {
                self.conn = Some(s);
                self.rx_len = 0;
            }
        }
    }

    /// The peer went away: forget it, count what waited for it.
    fn disconnect(&mut self, why: String) {
        self.conn = None;
        self.rx_len = 0;
        let lost = self.tx_frames.len() as u64;
        self.stats.tx_drop(PortDrop::NotConnected, lost);
        self.tx_frames.clear();
        self.tx_buf.clear();
        self.tx_written = 0;
        self.warnings.note(why);
    }

    /// Writes what waits in the tx buffer; one write call.
    fn write_out(&mut self) {
        let Some(conn) = &mut self.conn else {
            return;
        };
        if self.tx_buf.len() == self.tx_written {
            return;
        }
        self.stats.tx_kicks += 1;
        let start = self.tx_written;
        match conn.write(&self.tx_buf[start..]) {
            Ok(n) => self.account_written(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => self.disconnect(format!("peer gone on write: {e}")),
        }
    }

    fn account_written(&mut self, n: usize) {
        self.tx_written += n;
        // Retire whole frames; a partly written one stays at the front.
        let mut retired = 0;
        while let Some(&f) = self.tx_frames.front() {
            let f = f as usize;
            if f > self.tx_written {
                break;
            }
            self.tx_written -= f;
            retired += f;
            self.tx_frames.pop_front();
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += (f - 2) as u64;
        }
        self.tx_buf.drain(..retired);
    }
}

impl Port for StreamPort {
    /// The connection, or while there is none the listener (a peer
    /// connecting makes it readable); a port that connects out and is not
    /// connected has none (it tries again every 100 ms).
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        match (&self.conn, &self.mode) {
            (Some(c), _) => Some(c.as_raw_fd()),
            (None, Mode::Listen(l, _)) => Some(l.as_raw_fd()),
            (None, Mode::Connect { .. }) => None,
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            rx: true,
            tx: true,
            finite_rx: false,
            rx_hash: false,
            tx_offload: false,
            rx_can_wait: false,
        }
    }

    fn rx_burst(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut PacketBatch,
        in_port: u32,
    ) -> RxStatus {
        self.connect();
        let mut n = 0;
        let Some(conn) = &mut self.conn else {
            return RxStatus::Idle;
        };
        if self.rx_len < self.rx_buf.len() {
            match conn.read(&mut self.rx_buf[self.rx_len..]) {
                Ok(0) => {
                    self.disconnect("peer closed the connection".into());
                    return RxStatus::Idle;
                }
                Ok(k) => self.rx_len += k,
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.disconnect(format!("peer gone on read: {e}"));
                    return RxStatus::Idle;
                }
            }
        }
        let mut ofs = 0;
        while !batch.is_full() {
            let len = match next_frame(&self.rx_buf[ofs..self.rx_len]) {
                Framing::Incomplete => break,
                Framing::Frame(len) => len,
                Framing::Bad(len) => {
                    // The framing is lost: nothing after this can be trusted.
                    self.stats.rx_drop(PortDrop::Error, 1);
                    self.disconnect(format!(
                        "peer sent a {len}-byte frame (at least {MIN_FRAME}): framing lost, connection closed"
                    ));
                    return RxStatus::of_burst(n, false);
                }
            };
            let frame = &self.rx_buf[ofs + 2..ofs + 2 + len];
            ofs += 2 + len;
            if len > pool.max_packet_len() {
                self.stats.rx_drop(PortDrop::TooBig, 1);
                continue;
            }
            match pool.alloc_from(frame) {
                Some(mut pkt) => {
                    pkt.meta.in_port = in_port;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    let _ = batch.push(pkt);
                    n += 1;
                }
                None => self.stats.rx_drop(PortDrop::NoBuffer, 1),
            }
        }
        self.rx_buf.copy_within(ofs..self.rx_len, 0);
        self.rx_len -= ofs;
        RxStatus::of_burst(n, false)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, batch: &mut PacketBatch) -> usize {
        self.connect();
        let mut taken = 0;
        for pkt in batch.drain() {
            let len = pkt.len();
            if self.conn.is_none() {
                self.stats.tx_drop(PortDrop::NotConnected, 1);
            } else if len > u16::MAX as usize {
                self.stats.tx_drop(PortDrop::TooBig, 1);
            } else if self.tx_buf.len() + 2 + len > TX_BUFFER_LIMIT {
                self.stats.tx_drop(PortDrop::QueueFull, 1);
            } else {
                self.tx_buf.extend_from_slice(&(len as u16).to_be_bytes());
                self.tx_buf.extend_from_slice(pkt.data());
                self.tx_frames.push_back(2 + len as u32);
                taken += 1;
            }
            pool.free(pkt);
        }
        self.write_out();
        taken
    }

    fn tx_pending(&self) -> usize {
        self.tx_frames.len()
    }

    fn tx_drain(&mut self, _pool: &mut PacketPool) {
        self.write_out();
    }

    fn flush(&mut self, _pool: &mut PacketPool) -> Result<(), PortError> {
        let until = Instant::now() + Duration::from_millis(500);
        while !self.tx_frames.is_empty() && self.conn.is_some() && Instant::now() < until {
            self.write_out();
            if !self.tx_frames.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        if !self.tx_frames.is_empty() {
            let n = self.tx_frames.len() as u64;
            self.stats.tx_drop(PortDrop::QueueFull, n);
            self.tx_frames.clear();
            self.tx_buf.clear();
            self.tx_written = 0;
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats.clone()
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.to_vec()
    }
}

impl Drop for StreamPort {
    fn drop(&mut self) {
        if let Mode::Listen(_, file) = &self.mode {
            file.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::build::{Frame, L4};

    fn frame(i: u16) -> Vec<u8> {
        Frame::ipv4([10, 0, 0, 1], [10, 0, 0, 2], L4::Udp { src: i, dst: 9 }).build()
    }

    #[test]
    fn frames_cross_a_socket_pair_both_ways_with_exact_framing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let mut pool = PacketPool::new(512, 2048).unwrap();
        let mut server = StreamPort::open("srv", &path, true).unwrap();
        let mut client = StreamPort::open("cli", &path, false).unwrap();
        let mut b = PacketBatch::new();
        assert_eq!(server.rx_burst(&mut pool, &mut b, 1), RxStatus::Idle);
        assert!(server.is_connected() && client.is_connected());
        for round in 0..10u16 {
            for i in 0..32 {
                b.push(pool.alloc_from(&frame(round * 32 + i)).unwrap())
                    .unwrap();
            }
            assert_eq!(client.tx_burst(&mut pool, &mut b), 32);
        }
        let mut got = Vec::new();
        let until = Instant::now() + Duration::from_secs(5);
        while got.len() < 320 && Instant::now() < until {
            let mut rb = PacketBatch::new();
            server.rx_burst(&mut pool, &mut rb, 7);
            for p in rb.drain() {
                assert_eq!(p.meta.in_port, 7);
                got.push(p.data().to_vec());
                pool.free(p);
            }
        }
        let want: Vec<Vec<u8>> = (0..320).map(frame).collect();
        assert_eq!(got, want, "every frame, in order, byte for byte");
        assert_eq!(client.stats().tx_packets, 320);
        assert_eq!(client.stats().tx_kicks, 10, "one write per batch");
        assert_eq!(server.stats().rx_packets, 320);
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn a_bad_length_closes_the_connection_with_a_counted_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let mut server = StreamPort::open("srv", &path, true).unwrap();
        let mut peer = UnixStream::connect(&path).unwrap();
        peer.write_all(&[0, 3, 1, 2, 3]).unwrap();
        let mut b = PacketBatch::new();
        let until = Instant::now() + Duration::from_secs(5);
        while server.stats().rx_dropped_by(PortDrop::Error) == 0 && Instant::now() < until {
            server.rx_burst(&mut pool, &mut b, 1);
        }
        assert_eq!(server.stats().rx_dropped_by(PortDrop::Error), 1);
        assert!(!server.is_connected());
        assert!(server.warnings()[0].contains("framing lost"));
    }

    proptest::proptest! {
        /// Frames encoded back to back and cut anywhere come out whole, in
        /// order, and arbitrary bytes never panic or over-read.
        #[test]
        fn framing_round_trips_and_survives_garbage(
            frames in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 14..200), 0..20),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let mut wire = Vec::new();
            for f in &frames {
                wire.extend_from_slice(&(f.len() as u16).to_be_bytes());
                wire.extend_from_slice(f);
            }
            let mut ofs = 0;
            let mut out = Vec::new();
            while let Framing::Frame(len) = next_frame(&wire[ofs..]) {
                out.push(wire[ofs + 2..ofs + 2 + len].to_vec());
                ofs += 2 + len;
            }
            proptest::prop_assert_eq!(&out, &frames);
            proptest::prop_assert_eq!(ofs, wire.len());
            for cut in 0..wire.len().min(64) {
                match next_frame(&wire[..cut]) {
                    Framing::Frame(len) => proptest::prop_assert!(2 + len <= cut),
                    Framing::Incomplete => {}
                    Framing::Bad(_) => proptest::prop_assert!(false, "valid lengths only"),
                }
            }
            let mut ofs = 0;
            while let Framing::Frame(len) = next_frame(&garbage[ofs..]) {
                proptest::prop_assert!(len >= MIN_FRAME && ofs + 2 + len <= garbage.len());
                ofs += 2 + len;
            }
        }
    }

    #[test]
    fn sending_with_no_peer_is_a_counted_drop() {
        let dir = tempfile::tempdir().unwrap();
        let mut pool = PacketPool::new(64, 2048).unwrap();
        let mut port = StreamPort::open("c", &dir.path().join("nobody"), false).unwrap();
        let mut b = PacketBatch::new();
        b.push(pool.alloc_from(&frame(1)).unwrap()).unwrap();
        assert_eq!(port.tx_burst(&mut pool, &mut b), 0);
        assert_eq!(port.stats().tx_dropped_by(PortDrop::NotConnected), 1);
        assert_eq!(pool.available(), pool.capacity());
    }
}
