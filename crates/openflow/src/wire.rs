//! Bounded reading and writing of big-endian wire data: every read checks
//! the length first and fails with the caller's error instead of panicking.

use crate::consts::OfError;

/// A reader over untrusted bytes.
#[derive(Debug, Clone)]
pub struct Rd<'a> {
    b: &'a [u8],
    /// What a read past the end reports.
    short: OfError,
}

impl<'a> Rd<'a> {
    /// Reads `b`; a read past its end is the error `short`.
    pub fn new(b: &'a [u8], short: OfError) -> Self {
        Rd { b, short }
    }

    /// Bytes left.
    pub fn left(&self) -> usize {
        self.b.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], OfError> {
        if n > self.b.len() {
            return Err(self.short);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), OfError> {
        self.take(n).map(|_| ())
    }

    /// The next `N` bytes, as an array: a fixed part read with one
    /// check, its fields then at constant offsets ([`be16`], [`be32`],
    /// [`be64`]).
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], OfError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, OfError> {
        Ok(self.take(1)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16, OfError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Result<u32, OfError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Result<u64, OfError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// A big-endian unsigned number of `n` (1..=16) bytes.
    pub fn uint(&mut self, n: usize) -> Result<u128, OfError> {
        Ok(be_uint(self.take(n)?))
    }
}

/// The big-endian u16 at `at` of a fixed part ([`Rd::array`]).
pub fn be16<const N: usize>(a: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([a[at], a[at + 1]])
}

/// The big-endian u32 at `at` of a fixed part.
pub fn be32<const N: usize>(a: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([a[at], a[at + 1], a[at + 2], a[at + 3]])
}

/// The big-endian u64 at `at` of a fixed part.
pub fn be64<const N: usize>(a: &[u8; N], at: usize) -> u64 {
    u64::from(be32(a, at)) << 32 | u64::from(be32(a, at + 4))
}

/// A big-endian number of up to 16 bytes.
pub fn be_uint(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |v, &x| v << 8 | u128::from(x))
}

/// Appends the low `n` bytes of `v`, big-endian.
pub fn put_uint(out: &mut Vec<u8>, v: u128, n: usize) {
    out.extend_from_slice(&v.to_be_bytes()[16 - n..]);
}

/// Appends zero bytes up to a multiple of 8 from `start`.
pub fn pad8(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start;
    out.resize(out.len() + (8 - len % 8) % 8, 0);
}

/// Writes `v` as the big-endian u16 at `at` (a length filled in later).
pub fn patch_u16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// A fixed-size, NUL-padded string field (descriptions, port names).
pub fn put_str(out: &mut Vec<u8>, s: &str, size: usize) {
    let b = s.as_bytes();
    let n = b.len().min(size - 1);
    out.extend_from_slice(&b[..n]);
    out.resize(out.len() + size - n, 0);
}

/// The string in a NUL-padded field.
pub fn get_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
