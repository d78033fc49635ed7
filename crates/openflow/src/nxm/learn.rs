//! `NXAST_LEARN` on the wire: `struct nx_action_learn` and its
//! `flow_mod_spec`s, both ways.

use crate::consts::OfError;
use crate::wire::Rd;

/// Where a `learn` spec's value comes from, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NxLearnSrc {
    /// Bits of a field: its NXM header and lowest bit.
    Field(u32, u16),
    /// A constant (its `n_bits` low bits).
    Imm(u128),
}

/// What a `learn` spec makes of its value, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NxLearnDst {
    /// Match these bits of a field (NXM header, lowest bit).
    Match(u32, u16),
    /// Load them.
    Load(u32, u16),
    /// Output to the port the value names.
    Output,
}

/// One `flow_mod_spec` of `NXAST_LEARN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NxLearnSpec {
    /// The value.
    pub src: NxLearnSrc,
    /// Where it goes.
    pub dst: NxLearnDst,
    /// Width (1 to 1023).
    pub n_bits: u16,
}

/// `NXAST_LEARN`'s fields (`struct nx_action_learn`) and specs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NxLearn {
    /// The learned rule's idle timeout (seconds, 0: none).
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Its priority.
    pub priority: u16,
    /// Its cookie.
    pub cookie: u64,
    /// `NX_LEARN_F_*`.
    pub flags: u16,
    /// Its table.
    pub table: u8,
    /// `fin_idle_timeout`.
    pub fin_idle_timeout: u16,
    /// `fin_hard_timeout`.
    pub fin_hard_timeout: u16,
    /// `limit` (0: none; `NXAST_LEARN2` only).
    pub limit: u32,
    /// `result_dst`: NXM header and bit (`NXAST_LEARN2`, with
    /// `NX_LEARN_F_WRITE_RESULT`).
    pub result_dst: Option<(u32, u16)>,
    /// The specs.
    pub specs: Vec<NxLearnSpec>,
}

/// A spec header's parts (`nx_action_learn`'s `flow_mod_spec`).
mod learn_bits {
    pub const N_BITS: u16 = 0x3ff;
    pub const SRC_IMM: u16 = 1 << 13;
    pub const DST_SHIFT: u16 = 11;
    pub const DST_MASK: u16 = 3;
    pub const FLAGS: u16 = 7;
    pub const WRITE_RESULT: u16 = 4;
}

impl NxLearn {
    /// Reads the action after its subtype, checked as OVS's `learn_pull`:
    /// known flags, a table other than 255, a zero pad, specs whose
    /// kinds exist and whose constants fit, zeros after the last.
    pub(super) fn decode(b: &mut Rd, learn2: bool) -> Result<NxLearn, OfError> {
        let bad = OfError::BAD_ARGUMENT;
        let idle_timeout = b.u16()?;
        let hard_timeout = b.u16()?;
        let priority = b.u16()?;
        let cookie = u64::from(b.u32()?) << 32 | u64::from(b.u32()?);
        let flags = b.u16()?;
        let table = b.take(1)?[0];
        let pad = b.take(1)?[0];
        let fin_idle_timeout = b.u16()?;
        let fin_hard_timeout = b.u16()?;
        if flags & !learn_bits::FLAGS != 0 || table == 255 || pad != 0 {
            return Err(bad);
        }
        // NXAST_LEARN2: the limit, result_dst's bit and header.
        let (mut limit, mut result_dst) = (0, None);
        if learn2 {
            limit = b.u32()?;
            let ofs = b.u16()?;
            b.skip(2)?;
            if flags & learn_bits::WRITE_RESULT != 0 {
                result_dst = Some((b.u32()?, ofs));
            }
        } else if flags & learn_bits::WRITE_RESULT != 0 {
            return Err(bad);
        }
        let mut specs = Vec::new();
        while b.left() >= 2 {
            let h = b.u16()?;
            if h == 0 {
                break;
            }
            let n_bits = h & learn_bits::N_BITS;
            let imm = h & learn_bits::SRC_IMM != 0;
            let dst_kind = (h >> learn_bits::DST_SHIFT) & learn_bits::DST_MASK;
            if h >> 14 != 0 || n_bits == 0 || dst_kind == 3 || (imm && dst_kind == 2) {
                return Err(bad);
            }
            let src = if imm {
                let n = 2 * usize::from(n_bits).div_ceil(16);
                let bytes = b.take(n)?;
                // The constant's bits past n_bits are zero; Sluice's
                // fields are at most 128 bits wide.
                let (hi, lo) = bytes.split_at(n.saturating_sub(16));
                let v = lo.iter().fold(0u128, |v, &x| v << 8 | u128::from(x));
                if hi.iter().any(|&z| z != 0) || (n_bits < 128 && v >> n_bits != 0) {
                    return Err(bad);
                }
                NxLearnSrc::Imm(v)
            } else {
                NxLearnSrc::Field(b.u32()?, b.u16()?)
            };
            let dst = match dst_kind {
                0 => NxLearnDst::Match(b.u32()?, b.u16()?),
                1 => NxLearnDst::Load(b.u32()?, b.u16()?),
                _ => NxLearnDst::Output,
            };
            specs.push(NxLearnSpec { src, dst, n_bits });
        }
        if b.take(b.left())?.iter().any(|&z| z != 0) {
            return Err(bad);
        }
        Ok(NxLearn {
            idle_timeout,
            hard_timeout,
            priority,
            cookie,
            flags,
            table,
            fin_idle_timeout,
            fin_hard_timeout,
            limit,
            result_dst,
            specs,
        })
    }

    /// Whether it needs `NXAST_LEARN2` (a limit or a result_dst).
    pub fn is_learn2(&self) -> bool {
        self.limit != 0 || self.result_dst.is_some()
    }

    /// Appends the action after its subtype (the caller pads to 8 bytes,
    /// which ends the specs).
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.idle_timeout, self.hard_timeout, self.priority] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&[self.table, 0]);
        out.extend_from_slice(&self.fin_idle_timeout.to_be_bytes());
        out.extend_from_slice(&self.fin_hard_timeout.to_be_bytes());
        if self.is_learn2() {
            out.extend_from_slice(&self.limit.to_be_bytes());
            let (h, ofs) = self.result_dst.unwrap_or((0, 0));
            out.extend_from_slice(&ofs.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            if self.result_dst.is_some() {
                out.extend_from_slice(&h.to_be_bytes());
            }
        }
        for s in &self.specs {
            let dst_kind: u16 = match s.dst {
                NxLearnDst::Match(..) => 0,
                NxLearnDst::Load(..) => 1,
                NxLearnDst::Output => 2,
            };
            let imm = matches!(s.src, NxLearnSrc::Imm(_));
            let h = (s.n_bits & learn_bits::N_BITS)
                | dst_kind << learn_bits::DST_SHIFT
                | if imm { learn_bits::SRC_IMM } else { 0 };
            out.extend_from_slice(&h.to_be_bytes());
            match s.src {
                NxLearnSrc::Field(hdr, ofs) => {
                    out.extend_from_slice(&hdr.to_be_bytes());
                    out.extend_from_slice(&ofs.to_be_bytes());
                }
                NxLearnSrc::Imm(v) => {
                    let n = 2 * usize::from(s.n_bits).div_ceil(16);
                    let bytes = v.to_be_bytes();
                    if n <= 16 {
                        out.extend_from_slice(&bytes[16 - n..]);
                    } else {
                        out.extend(std::iter::repeat_n(0, n - 16));
                        out.extend_from_slice(&bytes);
                    }
                }
            }
            if let NxLearnDst::Match(hdr, ofs) | NxLearnDst::Load(hdr, ofs) = s.dst {
                out.extend_from_slice(&hdr.to_be_bytes());
                out.extend_from_slice(&ofs.to_be_bytes());
            }
        }
    }
}
