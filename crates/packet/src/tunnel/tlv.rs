//! Geneve options as flow fields, as Open vSwitch's TLV map
//! (`ovs-ofctl add-tlv-map br0 "{class=0xffff,type=0,len=4}->tun_metadata0"`):
//! an option of a mapped class and type that a received packet carries
//! is the value of its `tun_metadataN` field; an output to a Geneve port
//! sends an option for each such field the flow has.
//!
//! Sluice keeps [`SLOTS`] of them in the flow key, `tun_metadata0` to
//! `tun_metadata3`, of up to [`MAX_LEN`] bytes each (OVS: 64 of up to
//! 124 bytes, 256 in all). OVN maps one option of 4 bytes.

use std::fmt;

/// `tun_metadataN` fields Sluice holds: `tun_metadata0` to `tun_metadata3`.
pub const SLOTS: usize = 4;
/// Most bytes of option data a field holds.
pub const MAX_LEN: u8 = 8;
/// The bit of an option type that says a receiver must understand it.
pub const CRITICAL: u8 = 0x80;
/// Most bytes of options a header carries: every slot, with its 4-byte
/// option header.
pub const MAX_OPTS_LEN: usize = SLOTS * (4 + MAX_LEN as usize);

/// One mapping: the option of this class and type, this long, is field
/// `tun_metadata<index>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TlvEntry {
    /// Option class.
    pub class: u16,
    /// Option type (its high bit: critical).
    pub ty: u8,
    /// Data length in bytes (a multiple of 4).
    pub len: u8,
    /// Which `tun_metadata` field.
    pub index: u8,
}

impl TlvEntry {
    /// Parses `{class=C,type=T,len=L}->tun_metadataN`.
    pub fn parse(s: &str) -> Result<TlvEntry, String> {
        let bad = || {
            format!(
                "'{s}': expected {{class=C,type=T,len=L}}->tun_metadataN, e.g. {{class=0xffff,type=0,len=4}}->tun_metadata0"
            )
        };
        let (opt, field) = s.trim().split_once("->").ok_or_else(bad)?;
        let body = opt
            .trim()
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .ok_or_else(bad)?;
        let (mut class, mut ty, mut len) = (None, None, None);
        for kv in body.split(',') {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            let n = parse_num(v.trim()).ok_or_else(|| format!("'{s}': '{v}' is not a number"))?;
            match k.trim() {
                "class" => class = u16::try_from(n).ok(),
                "type" => ty = u8::try_from(n).ok(),
                "len" => len = u8::try_from(n).ok(),
                _ => return Err(bad()),
            }
        }
        let (Some(class), Some(ty), Some(len)) = (class, ty, len) else {
            return Err(format!(
                "'{s}': class (0 to 0xffff), type (0 to 255) and len are all needed"
            ));
        };
        let index = field
            .trim()
            .strip_prefix("tun_metadata")
            .and_then(|n| n.parse::<u16>().ok())
            .ok_or_else(bad)?;
        TlvEntry::new(class, ty, len, index).map_err(|e| format!("'{s}': {e}"))
    }
}

impl TlvEntry {
    /// Parses mappings as `ovs-ofctl add-tlv-map` takes them:
    /// `{class=C,type=T,len=L}->tun_metadataN[,{...}->tun_metadataM...]`.
    pub fn parse_list(s: &str) -> Result<Vec<TlvEntry>, String> {
        let mut out = Vec::new();
        let (mut depth, mut start) = (0i32, 0);
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(TlvEntry::parse(&s[start..i])?);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if !s[start..].trim().is_empty() {
            out.push(TlvEntry::parse(&s[start..])?);
        }
        if out.is_empty() {
            return Err(
                "no mapping: expected {class=C,type=T,len=L}->tun_metadataN, e.g. {class=0xffff,type=0,len=4}->tun_metadata0".into(),
            );
        }
        Ok(out)
    }
}

impl fmt::Display for TlvEntry {
    /// As `ovs-ofctl` writes a mapping.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{class={:#x},type={:#x},len={}}}->tun_metadata{}",
            self.class, self.ty, self.len, self.index
        )
    }
}

fn parse_num(v: &str) -> Option<u32> {
    match v.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Why a mapping change was refused (OVS's `NXTTMFC_*` errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlvError {
    /// The field is mapped already (`NXTTMFC_ALREADY_MAPPED`).
    AlreadyMapped(TlvEntry),
    /// The option is mapped to another field (`NXTTMFC_DUP_ENTRY`).
    DupEntry(TlvEntry),
    /// A length Sluice does not hold (`NXTTMFC_BAD_OPT_LEN`).
    BadLen(u8),
    /// A field past `tun_metadata3` (`NXTTMFC_BAD_FIELD_IDX`).
    BadIndex(u16),
}

impl fmt::Display for TlvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlvError::AlreadyMapped(o) => {
                write!(f, "tun_metadata{} is already mapped: {o}", o.index)
            }
            TlvError::DupEntry(o) => write!(
                f,
                "option class {:#x} type {:#x} is already mapped: {o}",
                o.class, o.ty
            ),
            TlvError::BadLen(n) => write!(
                f,
                "len {n}: Sluice holds options of 4 or 8 bytes (Open vSwitch up to 124)"
            ),
            TlvError::BadIndex(i) => write!(
                f,
                "tun_metadata{i}: Sluice holds tun_metadata0 to tun_metadata{} (Open vSwitch up to 63)",
                SLOTS - 1
            ),
        }
    }
}

impl TlvEntry {
    /// A mapping, checked against what Sluice holds.
    pub fn new(class: u16, ty: u8, len: u8, index: u16) -> Result<TlvEntry, TlvError> {
        if len == 0 || !len.is_multiple_of(4) || len > MAX_LEN {
            return Err(TlvError::BadLen(len));
        }
        if usize::from(index) >= SLOTS {
            return Err(TlvError::BadIndex(index));
        }
        Ok(TlvEntry {
            class,
            ty,
            len,
            index: index as u8,
        })
    }
}

/// The map: at most one mapping per field and per option class and type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlvMap {
    entries: Vec<TlvEntry>,
}

impl TlvMap {
    /// The mappings, by field.
    pub fn entries(&self) -> &[TlvEntry] {
        &self.entries
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The mapping of option class `class` and type `ty`.
    #[inline]
    pub fn lookup(&self, class: u16, ty: u8) -> Option<&TlvEntry> {
        self.entries.iter().find(|e| e.class == class && e.ty == ty)
    }

    /// The mapping of field `tun_metadata<index>`.
    pub fn field(&self, index: u8) -> Option<&TlvEntry> {
        self.entries.iter().find(|e| e.index == index)
    }

    /// Adds mappings, all or none (`ovs-ofctl add-tlv-map`): a field
    /// mapped already (even to the same option) or an option mapped to
    /// another field is an error, as in OVS.
    pub fn add(&mut self, new: &[TlvEntry]) -> Result<(), TlvError> {
        let mut next = self.clone();
        for e in new {
            if let Some(o) = next.field(e.index) {
                return Err(TlvError::AlreadyMapped(*o));
            }
            if let Some(o) = next.lookup(e.class, e.ty) {
                return Err(TlvError::DupEntry(*o));
            }
            next.entries.push(*e);
        }
        next.entries.sort_by_key(|e| e.index);
        *self = next;
        Ok(())
    }

    /// Removes the mapping of field `tun_metadata<index>` (`del-tlv-map`
    /// goes by field, as OVS's delete). A field not mapped is no error.
    pub fn remove(&mut self, index: u16) {
        self.entries.retain(|e| u16::from(e.index) != index);
    }

    /// Removes every mapping.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// `ovs-ofctl dump-tlv-map`'s table of the mappings.
    pub fn dump(&self) -> String {
        let mut s = format!(
            "max option space={} max fields={}\nallocated option space={}\n\n mapping table:\n class  type  length  match field\n ------ ----  ------  --------------\n",
            MAX_OPTS_LEN - SLOTS * 4,
            SLOTS,
            self.entries.iter().map(|e| usize::from(e.len)).sum::<usize>()
        );
        for e in &self.entries {
            s += &format!(
                " {:#06x} {:#04x}  {:<6}  tun_metadata{}\n",
                e.class, e.ty, e.len, e.index
            );
        }
        s
    }
}

/// The options of a Geneve header an output sends, built from the flow's
/// `tun_metadata` fields at translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOpts {
    bytes: [u8; MAX_OPTS_LEN],
    len: u8,
    /// Whether one of them is critical (the header's C bit).
    pub critical: bool,
}

impl Default for GeneveOpts {
    fn default() -> Self {
        GeneveOpts {
            bytes: [0; MAX_OPTS_LEN],
            len: 0,
            critical: false,
        }
    }
}

impl GeneveOpts {
    /// An option for each field set in `present` (bit N: `tun_metadataN`)
    /// that `map` maps, in field order (as OVS), with the low `len` bytes
    /// of its value.
    pub fn of_fields(map: &TlvMap, present: u8, values: &[u64; SLOTS]) -> Self {
        let mut o = GeneveOpts::default();
        for e in map.entries() {
            if present & 1 << e.index == 0 {
                continue;
            }
            let at = usize::from(o.len);
            let n = usize::from(e.len);
            o.bytes[at..at + 2].copy_from_slice(&e.class.to_be_bytes());
            o.bytes[at + 2] = e.ty;
            o.bytes[at + 3] = e.len / 4;
            let v = values[usize::from(e.index)].to_be_bytes();
            o.bytes[at + 4..at + 4 + n].copy_from_slice(&v[8 - n..]);
            o.len += (4 + n) as u8;
            o.critical |= e.ty & CRITICAL != 0;
        }
        o
    }

    /// The options' bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// What a received header's options said: the fields they fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fields {
    /// Bit N: `tun_metadataN` is present.
    pub present: u8,
    /// The values.
    pub values: [u64; SLOTS],
}

/// Reads a Geneve header's options through `map`. `None` when they are
/// malformed, a mapped option has another length than its mapping, or an
/// option not mapped is critical (OVS drops such packets too); options
/// neither mapped nor critical are skipped.
#[inline]
pub fn read_options(mut opts: &[u8], map: &TlvMap) -> Option<Fields> {
    let mut f = Fields::default();
    while !opts.is_empty() {
        if opts.len() < 4 {
            return None;
        }
        let class = u16::from_be_bytes([opts[0], opts[1]]);
        let ty = opts[2];
        let n = usize::from(opts[3] & 0x1f) * 4;
        let data = opts.get(4..4 + n)?;
        match map.lookup(class, ty) {
            Some(e) if usize::from(e.len) == n => {
                let mut v = [0u8; 8];
                v[8 - n..].copy_from_slice(data);
                f.values[usize::from(e.index)] = u64::from_be_bytes(v);
                f.present |= 1 << e.index;
            }
            Some(_) => return None,
            None if ty & CRITICAL != 0 => return None,
            None => {}
        }
        opts = &opts[4 + n..];
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_parse_print_and_refuse_clashes() {
        let e = TlvEntry::parse("{class=0xffff,type=0,len=4}->tun_metadata0").unwrap();
        assert_eq!(
            e,
            TlvEntry {
                class: 0xffff,
                ty: 0,
                len: 4,
                index: 0
            }
        );
        assert_eq!(
            e.to_string(),
            "{class=0xffff,type=0x0,len=4}->tun_metadata0"
        );
        assert_eq!(TlvEntry::parse(&e.to_string()).unwrap(), e);
        for (bad, says) in [
            ("{class=1,type=2,len=12}->tun_metadata0", "4 or 8"),
            ("{class=1,type=2,len=6}->tun_metadata0", "4 or 8"),
            (
                "{class=1,type=2,len=4}->tun_metadata9",
                "tun_metadata0 to tun_metadata3",
            ),
            ("{class=1,type=2,len=4}->tun_metadata999999", "expected"),
            ("{class=1,len=4}->tun_metadata0", "all needed"),
            ("{class=0x10000,type=2,len=4}->tun_metadata0", "all needed"),
            ("class=1,type=2,len=4->tun_metadata0", "expected"),
        ] {
            let err = TlvEntry::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let mut m = TlvMap::default();
        m.add(&[e]).unwrap();
        assert_eq!(m.add(&[e]), Err(TlvError::AlreadyMapped(e)), "as OVS");
        let other = TlvEntry { ty: 1, ..e };
        assert_eq!(m.add(&[other]), Err(TlvError::AlreadyMapped(e)));
        let same_opt = TlvEntry { index: 1, ..e };
        assert_eq!(m.add(&[same_opt]), Err(TlvError::DupEntry(e)));
        assert!(m
            .add(&[same_opt])
            .unwrap_err()
            .to_string()
            .contains("already mapped"));
        m.remove(u16::from(other.index));
        assert!(m.is_empty(), "removal goes by field");
        assert_eq!(TlvEntry::new(1, 1, 12, 0), Err(TlvError::BadLen(12)));
        assert_eq!(TlvEntry::new(1, 1, 4, 4), Err(TlvError::BadIndex(4)));
    }

    #[test]
    fn options_go_out_and_come_back_as_fields() {
        let mut m = TlvMap::default();
        m.add(&[
            TlvEntry::parse("{class=0x102,type=0x80,len=4}->tun_metadata0").unwrap(),
            TlvEntry::parse("{class=0xffff,type=3,len=8}->tun_metadata2").unwrap(),
        ])
        .unwrap();
        let values = [0x0001_0002, 0, 0x1122_3344_5566_7788, 9];
        let o = GeneveOpts::of_fields(&m, 0b1111, &values);
        assert!(o.critical);
        assert_eq!(
            o.bytes(),
            &[
                0x01, 0x02, 0x80, 1, 0, 1, 0, 2, // tun_metadata0
                0xff, 0xff, 3, 2, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
            ]
        );
        let f = read_options(o.bytes(), &m).unwrap();
        assert_eq!(f.present, 0b101, "unmapped fields are not sent");
        assert_eq!(
            (f.values[0], f.values[2]),
            (0x0001_0002, 0x1122_3344_5566_7788)
        );
        // An option nobody mapped: skipped, unless critical.
        let mut extra = o.bytes().to_vec();
        extra.extend_from_slice(&[0, 7, 1, 1, 9, 9, 9, 9]);
        assert_eq!(read_options(&extra, &m).unwrap().present, 0b101);
        let at = len_at(&extra);
        extra[at] |= CRITICAL;
        assert_eq!(read_options(&extra, &m), None);
        // A mapped option of another length; a truncated one.
        assert_eq!(
            read_options(&[1, 2, 0x80, 2, 0, 0, 0, 0, 0, 0, 0, 0], &m),
            None
        );
        assert_eq!(read_options(&o.bytes()[..6], &m), None);
    }

    /// Where the last option's type byte is.
    fn len_at(b: &[u8]) -> usize {
        b.len() - 6
    }
}
