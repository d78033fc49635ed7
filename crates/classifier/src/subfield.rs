//! Subfields: a run of bits of one field, as `load:` and `move:` name
//! them (`NXM_NX_REG0[0..15]`, `NXM_OF_ETH_SRC[]`, `reg1[3]`), with
//! Open vSwitch's syntax: the field by its name or its NXM/OXM name, then
//! `[]` (all of it), `[N]` (one bit) or `[START..END]` (inclusive,
//! counted from the least significant bit); no brackets is all of it.

use sluice_packet::key::FlowKey;

use crate::fields::{field_by_name, field_by_nxm_name, nxm_name, Field};

/// Bits `ofs..ofs + n_bits` of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subfield {
    /// The field.
    pub field: &'static Field,
    /// The lowest bit.
    pub ofs: u8,
    /// How many bits (1 to the field's width).
    pub n_bits: u8,
}

impl Subfield {
    /// All of a field.
    pub fn whole(field: &'static Field) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.bits() as u8,
        }
    }

    /// Parses `NAME[...]`; the error says what is wrong, for the caller
    /// to place.
    pub fn parse(s: &str) -> Result<Subfield, String> {
        let s = s.trim();
        let (name, range) = match s.find('[') {
            Some(i) => (&s[..i], Some(&s[i..])),
            None => (s, None),
        };
        // As OVS: `tp_src`/`tp_dst` name TCP's ports here (Sluice's
        // fields of those names are any transport's).
        // `in_port` is OpenFlow 1.0's 16-bit one (`in_port_oxm` the
        // 32-bit).
        let name = match name {
            "tp_src" => "tcp_src",
            "tp_dst" => "tcp_dst",
            "in_port" => "NXM_OF_IN_PORT",
            "in_port_oxm" => "OXM_OF_IN_PORT",
            n => n,
        };
        let field = field_by_name(name)
            .or_else(|| field_by_nxm_name(name))
            .ok_or_else(|| format!("{s}: unknown field '{name}'"))?;
        let bits = field.bits();
        let (start, end) = match range {
            None | Some("[]") => (0, bits - 1),
            Some(r) => {
                let inner = r
                    .strip_prefix('[')
                    .and_then(|r| r.strip_suffix(']'))
                    .ok_or_else(|| {
                        format!("{s}: syntax error expecting [] or [<bit>] or [<start>..<end>]")
                    })?;
                let num = |t: &str| {
                    t.trim().parse::<u32>().map_err(|_| {
                        format!("{s}: syntax error expecting [] or [<bit>] or [<start>..<end>]")
                    })
                };
                match inner.split_once("..") {
                    Some((a, b)) => (num(a)?, num(b)?),
                    None => {
                        let b = num(inner)?;
                        (b, b)
                    }
                }
            }
        };
        if start > end {
            return Err(format!(
                "{s}: starting bit {start} is after ending bit {end}"
            ));
        }
        if end >= bits {
            return Err(format!(
                "{s}: bit {end} is out of range: {} is {bits} bits wide",
                field.name
            ));
        }
        Ok(Subfield {
            field,
            ofs: start as u8,
            n_bits: (end - start + 1) as u8,
        })
    }

    /// The subfield's bits in the field's value.
    pub fn mask(&self) -> u128 {
        let ones = if self.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.n_bits) - 1
        };
        ones << self.ofs
    }

    /// Whether it is all of its field.
    pub fn is_whole(&self) -> bool {
        u32::from(self.n_bits) == self.field.bits()
    }

    /// The subfield's value in a key, shifted down to bit 0.
    pub fn read(&self, k: &FlowKey) -> u128 {
        ((self.field.get)(k) & self.mask()) >> self.ofs
    }

    /// The subfield of `mask` that is set: `bits` placed at the subfield.
    pub fn place(&self, bits: u128) -> u128 {
        (bits << self.ofs) & self.mask()
    }

    /// The runs of contiguous set bits of a field's mask, lowest first,
    /// cut at 64 bits (the most one Nicira load carries): how a masked
    /// write is shown and sent as `load`s.
    pub fn runs(field: &'static Field, mask: u128) -> impl Iterator<Item = Subfield> {
        let mut rest = mask;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let ofs = rest.trailing_zeros();
            let n = (rest >> ofs).trailing_ones().min(64);
            let sf = Subfield {
                field,
                ofs: ofs as u8,
                n_bits: n as u8,
            };
            rest &= !sf.mask();
            Some(sf)
        })
    }

    /// The subfield a contiguous run of set bits of a field's mask is,
    /// if it is one (how `set_field:V/M->F` reads as a `load`).
    pub fn of_mask(field: &'static Field, mask: u128) -> Option<Subfield> {
        if mask == 0 {
            return None;
        }
        let ofs = mask.trailing_zeros();
        let run = mask >> ofs;
        (run & run.wrapping_add(1) == 0).then_some(Subfield {
            field,
            ofs: ofs as u8,
            n_bits: run.count_ones() as u8,
        })
    }
}

impl std::fmt::Display for Subfield {
    /// As `ovs-ofctl` prints it: the NXM name, then `[]`, `[N]` or
    /// `[START..END]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = nxm_name(self.field);
        if self.is_whole() {
            write!(f, "{name}[]")
        } else if self.n_bits == 1 {
            write!(f, "{name}[{}]", self.ofs)
        } else {
            let end = u32::from(self.ofs) + u32::from(self.n_bits) - 1;
            write!(f, "{name}[{}..{end}]", self.ofs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_ovs_and_prints_nxm_names() {
        for (input, shown) in [
            ("NXM_NX_REG0[0..15]", "NXM_NX_REG0[0..15]"),
            ("reg2[8..15]", "NXM_NX_REG2[8..15]"),
            ("OXM_OF_PKT_REG3[63]", "OXM_OF_PKT_REG3[63]"),
            ("NXM_OF_ETH_SRC[]", "NXM_OF_ETH_SRC[]"),
            ("eth_src", "NXM_OF_ETH_SRC[]"),
            ("xxreg1[0..47]", "NXM_NX_XXREG1[0..47]"),
            ("tcp_dst[4..7]", "NXM_OF_TCP_DST[4..7]"),
            ("OXM_OF_IPV4_DST[0..31]", "NXM_OF_IP_DST[]"),
            ("in_port", "NXM_OF_IN_PORT[]"),
            ("OXM_OF_IN_PORT[0..15]", "OXM_OF_IN_PORT[0..15]"),
        ] {
            assert_eq!(
                Subfield::parse(input).unwrap().to_string(),
                shown,
                "{input}"
            );
        }
        let e = |s: &str| Subfield::parse(s).unwrap_err();
        assert!(
            e("NXM_NX_REG0[32]").contains("out of range"),
            "{}",
            e("NXM_NX_REG0[32]")
        );
        assert!(e("NXM_NX_REG0[5..3]").contains("after"));
        assert!(e("NXM_NX_REG0[x]").contains("syntax error"));
        assert!(e("NXM_NX_REG99[]").contains("unknown field"));
    }

    #[test]
    fn reads_and_places_bits() {
        let sf = Subfield::parse("reg0[8..15]").unwrap();
        let mut k = FlowKey::default();
        k.regs[0] = 0x1234_5678;
        assert_eq!(sf.read(&k), 0x56);
        assert_eq!(sf.place(0x1ab), 0xab00);
        assert_eq!(sf.mask(), 0xff00);
        let x = Subfield::parse("xxreg0[]").unwrap();
        assert_eq!(x.mask(), u128::MAX);
        let f = crate::fields::field_by_name("reg3").unwrap();
        assert_eq!(
            Subfield::of_mask(f, 0xf0).map(|s| s.to_string()).as_deref(),
            Some("NXM_NX_REG3[4..7]")
        );
        assert_eq!(Subfield::of_mask(f, 0x101), None);
        let w = crate::fields::field_by_name("xxreg0").unwrap();
        assert!(Subfield::of_mask(w, u128::MAX).unwrap().is_whole());
    }
}
