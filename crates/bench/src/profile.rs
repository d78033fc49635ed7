//! Traffic profiles.
//!
//! Why Zipf: a cache only helps when some flows are hotter than others.
//! Round robin is the worst case for a cache (every other flow passes
//! between two packets of one), uniform random is nearly as bad, and real
//! traffic follows a power law: the k-th busiest flow carries about
//! 1/k^s of the traffic. Seed 004's discussion shows EMC hit rates that
//! look hopeless under round robin and fine under a power law; measure
//! all three. Sampling is rank-based: flow k is drawn with probability
//! proportional to 1/k^s through a precomputed CDF.

use sluice_packet::build::{Frame, L4};
use sluice_port::replay::Frames;

/// How packets pick their flow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Flow 0, 1, ..., N-1, 0, 1, ...
    RoundRobin,
    /// Uniformly at random.
    Uniform,
    /// Rank-based Zipf with this exponent (1.0 is classic).
    Zipf(f64),
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::RoundRobin => f.write_str("rr"),
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipf(s) if *s == 1.0 => f.write_str("zipf"),
            Distribution::Zipf(s) => write!(f, "zipf{s}"),
        }
    }
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rr" | "round-robin" => Ok(Distribution::RoundRobin),
            "uniform" | "random" => Ok(Distribution::Uniform),
            "zipf" => Ok(Distribution::Zipf(1.0)),
            _ => match s.strip_prefix("zipf") {
                Some(e) => e
                    .trim_start_matches([':', '='])
                    .parse()
                    .map(Distribution::Zipf)
                    .map_err(|_| format!("'{s}': zipf exponent must be a number, e.g. zipf:1.2")),
                None => Err(format!(
                    "'{s}': expected rr, uniform, zipf or zipf:EXPONENT"
                )),
            },
        }
    }
}

/// A small, fast, seedable generator (SplitMix64): reproducible profiles.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Draws flow indexes for a distribution over `n` flows.
pub struct FlowPicker {
    dist: Distribution,
    n: u64,
    next: u64,
    cdf: Vec<f64>,
    rng: Rng,
}

impl FlowPicker {
    /// A picker over `n` flows (n >= 1).
    pub fn new(dist: Distribution, n: u64, seed: u64) -> Self {
        let cdf = match dist {
            Distribution::Zipf(s) => {
                let mut acc = 0.0;
                let mut v: Vec<f64> = (1..=n)
                    .map(|k| {
                        acc += 1.0 / (k as f64).powf(s);
                        acc
                    })
                    .collect();
                let total = acc;
                v.iter_mut().for_each(|x| *x /= total);
                v
            }
            _ => Vec::new(),
        };
        FlowPicker {
            dist,
            n: n.max(1),
            next: 0,
            cdf,
            rng: Rng::new(seed),
        }
    }

    /// The next flow index.
    pub fn pick(&mut self) -> u64 {
        match self.dist {
            Distribution::RoundRobin => {
                let i = self.next;
                self.next = (self.next + 1) % self.n;
                i
            }
            Distribution::Uniform => self.rng.below(self.n),
            Distribution::Zipf(_) => {
                let u = self.rng.next_f64();
                (self.cdf.partition_point(|&c| c < u) as u64).min(self.n - 1)
            }
        }
    }
}

/// The frame of flow `i`: UDP/IPv4, addresses and ports derived from `i`
/// so that flows spread over destination prefixes and ports (and so over
/// the benchmark rule sets' masks), padded to `size` bytes.
pub fn flow_frame(i: u64, size: usize) -> Vec<u8> {
    let (src, dst, sport, dport) = flow_tuple(i);
    udp_frame(src, dst, sport, dport, size)
}

/// The reply to flow `i` ([`flow_frame`]): its addresses and ports
/// swapped, `size` bytes.
pub fn reply_frame(i: u64, size: usize) -> Vec<u8> {
    let (src, dst, sport, dport) = flow_tuple(i);
    udp_frame(dst, src, dport, sport, size)
}

/// Flow `i`'s addresses and ports: source, destination.
fn flow_tuple(i: u64) -> ([u8; 4], [u8; 4], u16, u16) {
    let i32 = i as u32;
    let src = (0x0a00_0000u32 | (i32 & 0x00ff_ffff)).to_be_bytes();
    // Knuth's multiplicative hash spreads destinations across 20.0.0.0/8.
    let dst = (0x1400_0000u32 | (i32.wrapping_mul(2_654_435_761) & 0x00ff_ffff)).to_be_bytes();
    const DPORTS: [u16; 8] = [53, 80, 443, 8080, 5000, 123, 22, 4789];
    let sport = 1024 + (i % 60_000) as u16;
    let dport = DPORTS[((i >> 3) % 8) as usize];
    (src, dst, sport, dport)
}

/// A UDP/IPv4 frame of zeros padded to `size` bytes.
fn udp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, size: usize) -> Vec<u8> {
    let payload_len = size.saturating_sub(14 + 20 + 8);
    Frame::ipv4(
        src,
        dst,
        L4::Udp {
            src: sport,
            dst: dport,
        },
    )
    .payload(&vec![0u8; payload_len])
    .min_len(size)
    .build()
}

/// `packets` frames over `flows` flows picked by `dist`.
pub fn flows_profile(
    flows: u64,
    dist: Distribution,
    packets: u64,
    size: usize,
    seed: u64,
) -> Frames {
    let mut picker = FlowPicker::new(dist, flows, seed);
    let mut frames = Frames::new();
    for k in 0..packets {
        frames.push(&flow_frame(picker.pick(), size), k * 1000);
    }
    frames
}

/// A churn profile: `working_set` flows live at a time, and at a packet
/// rate of `pps`, `new_per_sec` new flows replace the oldest each second.
pub fn churn_profile(
    working_set: u64,
    new_per_sec: u64,
    pps: u64,
    packets: u64,
    size: usize,
    seed: u64,
) -> Frames {
    let mut rng = Rng::new(seed);
    let mut frames = Frames::new();
    for k in 0..packets {
        let t = k as f64 / pps.max(1) as f64;
        let base = (t * new_per_sec as f64) as u64;
        let flow = base + rng.below(working_set.max(1));
        frames.push(&flow_frame(flow, size), (t * 1e9) as u64);
    }
    frames
}

/// A miss storm: every packet a new flow (seed 001's udpping test).
pub fn miss_storm_profile(packets: u64, size: usize) -> Frames {
    let mut frames = Frames::new();
    for k in 0..packets {
        frames.push(&flow_frame(k, size), k * 1000);
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::extract::extract;
    use sluice_packet::{FlowKey, PacketMeta};

    #[test]
    fn distributions() {
        let mut rr = FlowPicker::new(Distribution::RoundRobin, 3, 1);
        assert_eq!(
            (0..7).map(|_| rr.pick()).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2, 0]
        );
        let mut z = FlowPicker::new(Distribution::Zipf(1.0), 1000, 1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.pick() as usize] += 1;
        }
        // Rank 1 gets about 1/H(1000) = 13.4 % of the packets, rank 2 half that.
        assert!((12_000..15_000).contains(&counts[0]), "{}", counts[0]);
        assert!((counts[0] as f64 / counts[1] as f64 - 2.0).abs() < 0.3);
        let mut u = FlowPicker::new(Distribution::Uniform, 10, 1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[u.pick() as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(
            "zipf:1.2".parse::<Distribution>().unwrap(),
            Distribution::Zipf(1.2)
        );
        assert!("pareto".parse::<Distribution>().is_err());
    }

    #[test]
    fn frames_are_valid_distinct_and_sized() {
        let mut keys = std::collections::HashSet::new();
        for i in 0..1000 {
            let f = flow_frame(i, 64);
            assert_eq!(f.len(), 64);
            let (mut k, mut m) = (FlowKey::default(), PacketMeta::default());
            extract(&f, 1, &mut m, &mut k).unwrap();
            assert_eq!((k.dl_type, k.nw_proto), (0x0800, 17));
            keys.insert(k);
        }
        assert_eq!(keys.len(), 1000);
        assert_eq!(flow_frame(1, 1518).len(), 1518);
    }

    #[test]
    fn churn_and_miss_storm() {
        let storm = miss_storm_profile(100, 64);
        let distinct: std::collections::HashSet<&[u8]> = (0..100).map(|i| storm.get(i)).collect();
        assert_eq!(distinct.len(), 100);
        // 10 flows live, 1000 new per second at 1000 pps: one new per packet.
        let churn = churn_profile(10, 1000, 1000, 200, 64, 1);
        let distinct: std::collections::HashSet<&[u8]> = (0..200).map(|i| churn.get(i)).collect();
        assert!(distinct.len() > 100, "{}", distinct.len());
    }
}
