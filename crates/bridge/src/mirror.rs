//! Port mirroring (SPAN), as Open vSwitch's `Mirror` table sets it up
//! (`ofproto/ofproto-dpif-mirror.c` is the reference): a mirror selects
//! the packets received on some ports (`select_src_port`), sent to some
//! (`select_dst_port`) or every packet (`select_all`), optionally only
//! those of some VLANs (`select_vlan`), and sends a copy of each to its
//! output port. The translation applies them ([`Mirrors::src`],
//! [`Mirrors::dst`]); NORMAL leaves a mirror's output port out of its
//! switching ([`Mirrors::is_output`]).

/// Most mirrors on one bridge (OVS's `MAX_MIRRORS`): a packet's mirrors
/// are a bit each in a word.
pub const MAX_MIRRORS: usize = 32;

/// One mirror, its ports by OpenFlow number.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mirror {
    /// Its name (the row's).
    pub name: String,
    /// Every packet the bridge receives or sends (`select_all`).
    pub select_all: bool,
    /// Ports whose received packets it takes.
    pub src: Vec<u32>,
    /// Ports whose sent packets it takes.
    pub dst: Vec<u32>,
    /// Only packets of these VLANs (none: every VLAN).
    pub vlans: Vec<u16>,
    /// Where the copies go.
    pub output: u32,
}

/// A bridge's mirrors, with what the translation asks of them precomputed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors {
    list: Vec<Mirror>,
}

impl Mirrors {
    /// Mirrors `list` (at most [`MAX_MIRRORS`]; one with no output, or
    /// selecting nothing, is an error naming it).
    pub fn new(list: Vec<Mirror>) -> Result<Mirrors, String> {
        if list.len() > MAX_MIRRORS {
            return Err(format!(
                "{} mirrors on one bridge: at most {MAX_MIRRORS}",
                list.len()
            ));
        }
        for m in &list {
            if !m.select_all && m.src.is_empty() && m.dst.is_empty() {
                return Err(format!("mirror {}: selects no packets", m.name));
            }
            if m.vlans.iter().any(|&v| v > 4095) {
                return Err(format!("mirror {}: a VLAN past 4095", m.name));
            }
        }
        Ok(Mirrors { list })
    }

    /// Whether there are none (the translation does nothing then).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The mirrors, in order (a mirror's bit is its place).
    pub fn list(&self) -> &[Mirror] {
        &self.list
    }

    /// The mirrors (bits) that take what port `port` receives.
    pub fn src(&self, port: u32) -> u32 {
        self.mask(|m| m.select_all || m.src.contains(&port))
    }

    /// The mirrors (bits) that take what port `port` sends.
    pub fn dst(&self, port: u32) -> u32 {
        self.mask(|m| m.select_all || m.dst.contains(&port))
    }

    /// Whether port `port` is a mirror's output: reserved for mirroring,
    /// NORMAL neither takes its packets nor sends it any.
    pub fn is_output(&self, port: u32) -> bool {
        self.list.iter().any(|m| m.output == port)
    }

    /// Mirror `i`, and the mirrors (bits) with its output port: a packet
    /// copied by one of them is not copied again by the others.
    pub fn get(&self, i: usize) -> Option<(&Mirror, u32)> {
        let m = self.list.get(i)?;
        Some((m, self.mask(|o| o.output == m.output)))
    }

    fn mask(&self, f: impl Fn(&Mirror) -> bool) -> u32 {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, m)| f(m))
            .fold(0, |acc, (i, _)| acc | 1 << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, src: &[u32], dst: &[u32], output: u32) -> Mirror {
        Mirror {
            name: name.into(),
            src: src.to_vec(),
            dst: dst.to_vec(),
            output,
            ..Mirror::default()
        }
    }

    #[test]
    fn masks_say_which_mirrors_take_a_port_and_share_an_output() {
        let all = Mirror {
            select_all: true,
            ..m("all", &[], &[], 9)
        };
        let ms = Mirrors::new(vec![m("a", &[1], &[2], 9), m("b", &[2], &[], 8), all]).unwrap();
        assert_eq!(ms.src(1), 0b101);
        assert_eq!(ms.src(2), 0b110);
        assert_eq!(ms.dst(2), 0b101);
        assert_eq!(ms.dst(3), 0b100);
        assert!(ms.is_output(9) && ms.is_output(8) && !ms.is_output(1));
        assert_eq!(ms.get(0).unwrap().1, 0b101);
        assert_eq!(ms.get(1).unwrap().1, 0b010);
        assert!(ms.get(3).is_none());
    }

    #[test]
    fn a_mirror_that_selects_nothing_or_too_many_is_refused() {
        let e = Mirrors::new(vec![m("x", &[], &[], 1)]).unwrap_err();
        assert!(e.contains("mirror x"), "{e}");
        let many = (0..33).map(|i| m(&i.to_string(), &[1], &[], 2)).collect();
        assert!(Mirrors::new(many).is_err());
        let bad = Mirror {
            vlans: vec![4096],
            ..m("v", &[1], &[], 2)
        };
        assert!(Mirrors::new(vec![bad]).is_err());
    }
}
