//! The classic libpcap file format: reader and writer.
//!
//! Reads both byte orders and both timestamp resolutions (µs and ns); only
//! Ethernet captures (link type 1). A pcapng file, another link type or a
//! corrupt header is refused with a message that says what to do; a record
//! cut short by the end of the file ends the capture and is reported.

use std::io::{self, Read, Write};

/// Ethernet link type.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record accepted (bigger means a corrupt file).
pub const MAX_RECORD: u32 = 262_144;

/// A pcap file could not be read.
#[derive(Debug)]
pub enum PcapError {
    /// Reading failed.
    Io(io::Error),
    /// The file is not something Sluice can read; the text says why.
    Format(String),
}

impl std::fmt::Display for PcapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "{e}"),
            PcapError::Format(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for PcapError {}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> Self {
        PcapError::Io(e)
    }
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Length of the frame on the wire (may exceed `data.len()`).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Streams records out of a pcap file.
#[derive(Debug)]
pub struct PcapReader<R: Read> {
    r: R,
    swapped: bool,
    nanos: bool,
    offset: u64,
    /// Set when the file ended inside a record.
    pub truncated_at: Option<u64>,
}

impl<R: Read> PcapReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut r: R) -> Result<Self, PcapError> {
        let mut h = [0u8; 24];
        let n = read_full(&mut r, &mut h)?;
        if n < 24 {
            return Err(PcapError::Format(format!(
                "not a pcap file: {n} bytes, shorter than the 24-byte pcap header"
            )));
        }
        let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match magic {
            0xa1b2_c3d4 => (false, false),
            0xa1b2_3c4d => (false, true),
            0xd4c3_b2a1 => (true, false),
            0x4d3c_b2a1 => (true, true),
            0x0a0d_0d0a => {
                return Err(PcapError::Format(
                    "this is a pcapng file; Sluice reads classic pcap: convert it with 'editcap -F pcap IN OUT' or 'tcpdump -r IN -w OUT'".into(),
                ))
            }
            m => return Err(PcapError::Format(format!("not a pcap file (magic number {m:#010x})"))),
        };
        let rd = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if swapped {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let link = rd(20) & 0x0fff_ffff;
        if link != LINKTYPE_ETHERNET {
            return Err(PcapError::Format(format!(
                "link type {link} is not Ethernet (1): capture on an Ethernet interface, not 'any' (Linux cooked capture is 113)"
            )));
        }
        Ok(PcapReader {
            r,
            swapped,
            nanos,
            offset: 24,
            truncated_at: None,
        })
    }

    fn u32_at(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.swapped {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    /// The next record, or `None` at the end of the file (see
    /// `truncated_at` for a file that ended inside a record).
    pub fn next_record(&mut self) -> Result<Option<Record>, PcapError> {
        let mut rec = Record {
            ts_ns: 0,
            orig_len: 0,
            data: Vec::new(),
        };
        Ok(self.read_record(&mut rec)?.then_some(rec))
    }

    /// Reads the next record into `rec`, reusing its buffer (no allocation
    /// per record once the buffer has grown). False at the end of the file
    /// (see `truncated_at`), with `rec` unspecified.
    pub fn read_record(&mut self, rec: &mut Record) -> Result<bool, PcapError> {
        let mut h = [0u8; 16];
        let n = read_full(&mut self.r, &mut h)?;
        if n == 0 {
            return Ok(false);
        }
        if n < 16 {
            self.truncated_at = Some(self.offset);
            return Ok(false);
        }
        let (sec, frac, incl, orig) = (
            self.u32_at(&h[0..]),
            self.u32_at(&h[4..]),
            self.u32_at(&h[8..]),
            self.u32_at(&h[12..]),
        );
        if incl > MAX_RECORD {
            return Err(PcapError::Format(format!(
                "corrupt record at byte {}: captured length {incl} is larger than {MAX_RECORD}",
                self.offset
            )));
        }
        rec.data.resize(incl as usize, 0);
        let got = read_full(&mut self.r, &mut rec.data)?;
        if got < rec.data.len() {
            self.truncated_at = Some(self.offset);
            return Ok(false);
        }
        self.offset += 16 + incl as u64;
        let ns = if self.nanos {
            frac as u64
        } else {
            frac as u64 * 1000
        };
        rec.ts_ns = sec as u64 * 1_000_000_000 + ns;
        rec.orig_len = orig.max(incl);
        Ok(true)
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Writes a pcap file (µs timestamps, little-endian, Ethernet).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&MAX_RECORD.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    /// Appends one frame captured at `ts_ns`.
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let sec = (ts_ns / 1_000_000_000) as u32;
        let usec = ((ts_ns % 1_000_000_000) / 1000) as u32;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&usec.to_le_bytes());
        h[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(frame)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// Reads a whole pcap file into memory.
pub fn read_all(bytes: &[u8]) -> Result<Vec<Record>, PcapError> {
    let mut r = PcapReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(rec);
    }
    Ok(out)
}

/// Renders frames as a pcap file in memory (timestamps 1 µs apart from
/// 1 s after the epoch: a timestamp of 0 means "unknown" to the ports).
pub fn write_all(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).expect("writing to a Vec cannot fail");
    for (i, f) in frames.iter().enumerate() {
        w.write(1_000_000_000 + i as u64 * 1000, f)
            .expect("writing to a Vec cannot fail");
    }
    w.w
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let frames = vec![vec![1u8; 60], vec![2u8; 1514], vec![]];
        let bytes = write_all(&frames);
        let recs = read_all(&bytes).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.data.clone()).collect::<Vec<_>>(),
            frames
        );
        assert_eq!(recs[1].ts_ns, 1_000_001_000);
    }

    #[test]
    fn big_endian_nanosecond_file() {
        let mut b = Vec::new();
        b.extend_from_slice(&0xa1b2_3c4du32.to_be_bytes());
        b.extend_from_slice(&[
            0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1,
        ]);
        b.extend_from_slice(&5u32.to_be_bytes());
        b.extend_from_slice(&7u32.to_be_bytes());
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(&60u32.to_be_bytes());
        b.extend_from_slice(&[9, 9, 9]);
        let recs = read_all(&b).unwrap();
        assert_eq!(
            recs,
            vec![Record {
                ts_ns: 5_000_000_007,
                orig_len: 60,
                data: vec![9, 9, 9]
            }]
        );
    }

    #[test]
    fn refusals_say_why() {
        let e = read_all(&[
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ])
        .unwrap_err();
        assert!(e.to_string().contains("pcapng"));
        let mut sll = write_all(&[]);
        sll[20] = 113;
        assert!(read_all(&sll)
            .unwrap_err()
            .to_string()
            .contains("link type 113"));
        assert!(read_all(b"short")
            .unwrap_err()
            .to_string()
            .contains("24-byte"));
        let mut big = write_all(&[vec![0; 10]]);
        big[32..36].copy_from_slice(&(MAX_RECORD + 1).to_le_bytes());
        assert!(read_all(&big)
            .unwrap_err()
            .to_string()
            .contains("corrupt record"));
    }

    #[test]
    fn truncated_last_record_is_reported() {
        let bytes = write_all(&[vec![1; 60], vec![2; 60]]);
        let mut r = PcapReader::new(&bytes[..bytes.len() - 10]).unwrap();
        assert!(r.next_record().unwrap().is_some());
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(r.truncated_at, Some(24 + 16 + 60));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = read_all(&bytes);
        }

        #[test]
        fn corrupted_files_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..5),
                                       flips in proptest::collection::vec((0usize..500, any::<u8>()), 0..8)) {
            let mut bytes = write_all(&frames);
            for (at, v) in flips {
                if at < bytes.len() { bytes[at] = v; }
            }
            let _ = read_all(&bytes);
        }
    }
}
