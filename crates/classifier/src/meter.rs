//! OpenFlow 1.3 meters (section 5.7): per-flow rate limits that rules
//! reach with the meter instruction (`meter:N` before their actions).
//!
//! A meter has bands, each a rate (kbit/s or packets/s) and what to do
//! with the packets above it: drop them, or raise their DSCP drop
//! precedence. A packet is above a band when the band's token bucket
//! cannot pay for it; of the bands it is above, the one with the highest
//! rate applies.
//!
//! The buckets are shared by every PMD thread and kept without a lock:
//! each band's tokens are one atomic integer, refilled by whichever
//! thread first sees time has passed (a compare-and-swap on the meter's
//! last refill time), and paid from once per batch of a flow's packets
//! (one atomic subtraction for the whole batch, the unspent part given
//! back), not once per packet. The rate is thus shared exactly between
//! threads; a thread may see a refill a batch late.
//!
//! Meters live in the rule set (`crate::table::RuleSet`, whose meter
//! operations are in `table/meters.rs`), versioned as
//! groups: a METER_MOD is a new version, a modified meter starts with
//! full buckets and zero counters.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Largest meter id (`OFPM_MAX`).
pub const METER_MAX: u32 = 0xffff_0000;
/// Every meter, in a delete or a statistics request (`OFPM_ALL`).
pub const METER_ALL: u32 = 0xffff_ffff;
/// Most bands a meter takes.
pub const MAX_BANDS: usize = 8;

/// METER_MOD flags (`OFPMF_*`).
pub mod flags {
    /// Rates in kbit/s.
    pub const KBPS: u16 = 1;
    /// Rates in packets/s.
    pub const PKTPS: u16 = 2;
    /// The bands' burst sizes apply.
    pub const BURST: u16 = 4;
    /// Keep statistics (always kept).
    pub const STATS: u16 = 8;
}

/// What a band does to the packets above its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BandKind {
    /// Drop them.
    Drop,
    /// Raise the drop precedence of their DSCP by this much.
    DscpRemark(u8),
}

impl BandKind {
    /// OpenFlow's band type.
    pub fn number(self) -> u16 {
        match self {
            BandKind::Drop => 1,
            BandKind::DscpRemark(_) => 2,
        }
    }
}

/// One band.
#[derive(Debug)]
pub struct Band {
    /// Drop or remark.
    pub kind: BandKind,
    /// kbit/s or packets/s, as the meter's flags say.
    pub rate: u32,
    /// Burst, in kbit or packets (the `burst_size` sent; 0 without
    /// [`flags::BURST`]).
    pub burst: u32,
    /// Tokens: millibits (kbit/s meters) or micropackets (packets/s).
    tokens: AtomicI64,
    /// Most tokens.
    capacity: i64,
    /// Packets and bytes the band applied to.
    pub packets: AtomicU64,
    /// Their bytes.
    pub bytes: AtomicU64,
}

/// Why a meter is refused (METER_MOD_FAILED codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterError {
    /// ADD of an id in use.
    Exists,
    /// An id of 0 or above [`METER_MAX`].
    Invalid,
    /// MODIFY or use of a meter that does not exist.
    Unknown,
    /// Neither or both of KBPS and PKTPS, or unknown flag bits.
    BadFlags,
    /// A rate of 0.
    BadRate,
    /// A burst size of 0 with BURST set.
    BadBurst,
    /// An unknown band type, no band, or too many.
    BadBand,
    /// A DSCP remark precedence of 0 or above 3.
    BadBandValue,
}

/// A meter.
#[derive(Debug)]
pub struct Meter {
    /// Its id.
    pub id: u32,
    /// [`flags`].
    pub flags: u16,
    /// Bands, as sent.
    pub bands: Vec<Band>,
    /// Packets and bytes that reached the meter.
    pub packets: AtomicU64,
    /// Their bytes.
    pub bytes: AtomicU64,
    /// Made at (µs since the switch started).
    pub created_us: u64,
    /// Last refill (µs).
    last_us: AtomicU64,
}

/// What a meter did to a batch: for each packet (bit `i` of the masks
/// for packet `i` of the batch), the band that applies, if any.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Packets to drop.
    pub drop: u32,
    /// Packets to remark, and by how much.
    pub remark: u32,
    /// The precedence step of the remark band.
    pub prec_level: u8,
}

impl Meter {
    /// A meter with full buckets, checked as METER_MOD asks.
    pub fn new(
        id: u32,
        flags: u16,
        bands: &[(BandKind, u32, u32)],
        now_us: u64,
    ) -> Result<Meter, MeterError> {
        if id == 0 || id > METER_MAX {
            return Err(MeterError::Invalid);
        }
        let unit = flags & (flags::KBPS | flags::PKTPS);
        if flags & !0xf != 0 || unit == 0 || unit == flags::KBPS | flags::PKTPS {
            return Err(MeterError::BadFlags);
        }
        if bands.is_empty() || bands.len() > MAX_BANDS {
            return Err(MeterError::BadBand);
        }
        let mut out = Vec::with_capacity(bands.len());
        for &(kind, rate, burst) in bands {
            if rate == 0 {
                return Err(MeterError::BadRate);
            }
            if flags & flags::BURST != 0 && burst == 0 {
                return Err(MeterError::BadBurst);
            }
            if let BandKind::DscpRemark(p) = kind {
                if !(1..=2).contains(&p) {
                    return Err(MeterError::BadBandValue);
                }
            }
            // Tokens per unit: a kbit is 10^6 millibits, a packet 10^6
            // micropackets; a rate of R then adds R tokens a microsecond.
            // Without BURST, a tenth of a second's worth.
            let burst_units = if flags & flags::BURST != 0 {
                i64::from(burst) * 1_000_000
            } else {
                i64::from(rate) * 100_000
            };
            // At least one jumbo frame, or no such frame could ever pass.
            let capacity = burst_units.max(Self::cost_of(flags, 9216));
            out.push(Band {
                kind,
                rate,
                burst: if flags & flags::BURST != 0 { burst } else { 0 },
                tokens: AtomicI64::new(capacity),
                capacity,
                packets: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            });
        }
        Ok(Meter {
            id,
            flags,
            bands: out,
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            created_us: now_us,
            last_us: AtomicU64::new(now_us),
        })
    }

    /// Tokens a packet of `len` bytes costs.
    #[inline]
    fn cost_of(flags: u16, len: usize) -> i64 {
        if flags & flags::PKTPS != 0 {
            1_000_000
        } else {
            len as i64 * 8 * 1000
        }
    }

    /// Adds the tokens time has brought since the last refill (one thread
    /// does it per tick).
    fn refill(&self, now_us: u64) {
        let last = self.last_us.load(Ordering::Relaxed);
        if now_us <= last
            || self
                .last_us
                .compare_exchange(last, now_us, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let dt = (now_us - last).min(10_000_000) as i64;
        for b in &self.bands {
            b.tokens
                .fetch_add(i64::from(b.rate) * dt, Ordering::Relaxed);
            b.tokens.fetch_min(b.capacity, Ordering::Relaxed);
        }
    }

    /// Whether every band drops (none remarks): what it does to a packet
    /// is then only to keep it or not.
    pub fn drops_only(&self) -> bool {
        self.bands.iter().all(|b| matches!(b.kind, BandKind::Drop))
    }

    /// Meters a batch of packets of the lengths `lens` (at most 32) at
    /// `now_us`: every band pays for the packets its tokens cover, in
    /// order; the rest are above it. Counts the meter's and the applied
    /// bands' packets and bytes.
    pub fn apply(&self, now_us: u64, lens: &[usize]) -> Verdict {
        debug_assert!(lens.len() <= 32);
        self.refill(now_us);
        let total_bytes: usize = lens.iter().sum();
        self.packets.fetch_add(lens.len() as u64, Ordering::Relaxed);
        self.bytes.fetch_add(total_bytes as u64, Ordering::Relaxed);
        // For each packet, the rate of the fastest band it is above.
        let mut best: [Option<(u32, usize)>; 32] = [None; 32];
        for (bi, b) in self.bands.iter().enumerate() {
            let costs = lens.iter().map(|&l| Self::cost_of(self.flags, l));
            let total: i64 = costs.clone().sum();
            let mut have = b.tokens.fetch_sub(total, Ordering::AcqRel);
            let mut refund = 0i64;
            for (i, c) in costs.enumerate() {
                if have >= c {
                    have -= c;
                } else {
                    refund += c;
                    if best[i].is_none_or(|(r, _)| b.rate > r) {
                        best[i] = Some((b.rate, bi));
                    }
                }
            }
            if refund > 0 {
                b.tokens.fetch_add(refund, Ordering::Relaxed);
            }
        }
        let mut v = Verdict::default();
        for (i, hit) in best.iter().enumerate().take(lens.len()) {
            let Some((_, bi)) = *hit else {
                continue;
            };
            let b = &self.bands[bi];
            b.packets.fetch_add(1, Ordering::Relaxed);
            b.bytes.fetch_add(lens[i] as u64, Ordering::Relaxed);
            match b.kind {
                BandKind::Drop => v.drop |= 1 << i,
                BandKind::DscpRemark(p) => {
                    v.remark |= 1 << i;
                    v.prec_level = p;
                }
            }
        }
        v
    }
}

/// A DSCP with its drop precedence raised by `prec_level` (RFC 2597: an
/// AF class's precedence is bits 1-2 of the DSCP; AFx1 + 1 = AFx2, capped
/// at AFx3); other DSCPs are kept.
pub fn raise_drop_precedence(dscp: u8, prec_level: u8) -> u8 {
    let class = dscp >> 3;
    let prec = (dscp >> 1) & 3;
    if !(1..=4).contains(&class) || dscp & 1 != 0 || prec == 0 {
        return dscp;
    }
    let new = (prec + prec_level).min(3);
    (class << 3) | (new << 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(m: &Meter, now_us: u64, lens: &[usize]) -> u32 {
        let v = m.apply(now_us, lens);
        lens.len() as u32 - (v.drop | v.remark).count_ones()
    }

    #[test]
    fn a_packet_rate_is_kept_on_a_virtual_clock() {
        // 1000 packets/s, offered 2000/s for 10 s in batches of 20.
        let m = Meter::new(1, flags::PKTPS, &[(BandKind::Drop, 1000, 0)], 0).unwrap();
        let mut n = 0;
        for t in 0..1000u64 {
            n += passed(&m, t * 10_000, &[64; 20]);
        }
        // A tenth of a second of burst on top of the rate.
        assert!((10_000..=10_110).contains(&n), "{n}");
        assert_eq!(m.packets.load(Ordering::Relaxed), 20_000);
        assert_eq!(
            m.bands[0].packets.load(Ordering::Relaxed),
            20_000 - u64::from(n)
        );
    }

    #[test]
    fn a_bit_rate_counts_bytes_and_offered_below_it_all_pass() {
        // 1 Mbit/s, 1500-byte frames: 83.3 a second.
        let m = Meter::new(1, flags::KBPS, &[(BandKind::Drop, 1000, 0)], 0).unwrap();
        let mut n = 0;
        for t in 0..300u64 {
            // 10 ms ticks, 2 frames each: 200/s offered, 2.4 Mbit/s.
            n += passed(&m, t * 10_000, &[1500; 2]);
        }
        let mbps = f64::from(n) * 1500.0 * 8.0 / 3.0 / 1e6;
        assert!((0.95..1.1).contains(&mbps), "{mbps}");
        let m = Meter::new(2, flags::KBPS, &[(BandKind::Drop, 10_000, 0)], 0).unwrap();
        let all: u32 = (0..300u64)
            .map(|t| passed(&m, t * 10_000, &[1500; 2]))
            .sum();
        assert_eq!(all, 600, "below the rate nothing is dropped");
    }

    #[test]
    fn the_fastest_band_exceeded_applies_and_remarks_raise_af_precedence() {
        let m = Meter::new(
            1,
            flags::PKTPS | flags::BURST,
            &[(BandKind::Drop, 100, 1), (BandKind::DscpRemark(1), 200, 2)],
            0,
        )
        .unwrap();
        // Buckets of 1 and 2 packets: the first packet passes both, the
        // second is above the drop band only, the last two above both,
        // where the faster band (the remark) applies.
        let v = m.apply(0, &[64; 4]);
        assert_eq!(v.drop, 0b0010);
        assert_eq!(v.remark, 0b1100);
        assert_eq!(raise_drop_precedence(18, 1), 20);
        assert_eq!(raise_drop_precedence(20, 2), 22);
        assert_eq!(raise_drop_precedence(46, 1), 46, "EF is not an AF class");
    }

    #[test]
    fn bad_meters_are_refused_with_their_reason() {
        let b = [(BandKind::Drop, 10, 0)];
        assert_eq!(
            Meter::new(0, flags::KBPS, &b, 0).unwrap_err(),
            MeterError::Invalid
        );
        assert_eq!(Meter::new(1, 0, &b, 0).unwrap_err(), MeterError::BadFlags);
        assert_eq!(Meter::new(1, 3, &b, 0).unwrap_err(), MeterError::BadFlags);
        assert_eq!(
            Meter::new(1, flags::KBPS, &[(BandKind::Drop, 0, 0)], 0).unwrap_err(),
            MeterError::BadRate
        );
        assert_eq!(
            Meter::new(1, flags::KBPS | flags::BURST, &b, 0).unwrap_err(),
            MeterError::BadBurst
        );
        assert_eq!(
            Meter::new(1, flags::KBPS, &[], 0).unwrap_err(),
            MeterError::BadBand
        );
        assert_eq!(
            Meter::new(1, flags::KBPS, &[(BandKind::DscpRemark(0), 10, 0)], 0).unwrap_err(),
            MeterError::BadBandValue
        );
    }
}
