//! The `ct` action as rules hold it: OVS's `ct(commit, force,
//! table=T, zone=N | zone=FIELD[BITS], exec(set_field:V[/M]->ct_mark,
//! set_field:V[/M]->ct_label), nat[(src=...|dst=...)])`, parsed,
//! checked and printed as `ovs-ofctl` does.

use sluice_conntrack::Nat;

use crate::fields::{c_hex, field_by_name};
use crate::subfield::Subfield;

/// Where a `ct` action's zone comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtZone {
    /// A number.
    Imm(u16),
    /// 16 bits of a field (a register, usually), read when the action
    /// runs.
    Field(Subfield),
}

/// A `ct` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ct {
    /// `commit`.
    pub commit: bool,
    /// `force`.
    pub force: bool,
    /// `table=T`: the packet goes on in table T, with its connection
    /// state (a recirculation); without it the pipeline goes on and
    /// nothing sees the state.
    pub table: Option<u8>,
    /// `zone=`.
    pub zone: Option<CtZone>,
    /// `exec(set_field:V/M->ct_mark)`.
    pub mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`.
    pub label: Option<(u128, u128)>,
    /// `exec(move:SRC->NXM_NX_CT_MARK[...])`: bits of a field read when
    /// the action runs (after the `set_field`s), source then destination.
    pub mark_move: Option<(Subfield, Subfield)>,
    /// `exec(move:SRC->NXM_NX_CT_LABEL[...])` (what OVN's ACL labels
    /// write).
    pub label_move: Option<(Subfield, Subfield)>,
    /// `nat`, `nat(src=...)`, `nat(dst=...)`.
    pub nat: Option<Nat>,
}

impl Default for CtZone {
    fn default() -> Self {
        CtZone::Imm(0)
    }
}

fn int(s: &str, bits: u32, what: &str) -> Result<u128, String> {
    let s = s.trim();
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u128::from_str_radix(h, 16),
        None => s.parse::<u128>(),
    }
    .map_err(|_| format!("'{s}' is not a number: {what} takes a decimal or 0x-hex integer"))?;
    if bits < 128 && n >> bits != 0 {
        return Err(format!("{n} is too large for {what} ({bits} bits)"));
    }
    Ok(n)
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

impl Ct {
    /// Parses the inside of `ct(...)`; the error says what is wrong.
    pub fn parse(args: &str) -> Result<Ct, String> {
        let mut ct = Ct::default();
        for arg in split_top(args) {
            let (name, value) = match arg.split_once(['=', '(']) {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (arg, None),
            };
            match (name, value) {
                ("commit", None) => ct.commit = true,
                ("force", None) => ct.force = true,
                ("table", Some(v)) => {
                    let t = int(v, 8, "ct's table")? as u8;
                    if t == 255 {
                        return Err("ct's table must be 0 to 254".into());
                    }
                    ct.table = Some(t);
                }
                ("zone", Some(v)) => {
                    ct.zone = Some(if v.starts_with(|c: char| c.is_ascii_digit()) {
                        CtZone::Imm(int(v, 16, "ct's zone")? as u16)
                    } else {
                        let sf = Subfield::parse(v)?;
                        if sf.n_bits != 16 {
                            return Err(format!(
                                "zone={sf}: a zone is 16 bits, the field names {}",
                                sf.n_bits
                            ));
                        }
                        CtZone::Field(sf)
                    });
                }
                ("exec", Some(v)) => {
                    let inner = v
                        .strip_suffix(')')
                        .ok_or("exec( needs its closing parenthesis")?;
                    for a in split_top(inner) {
                        ct.exec(a)?;
                    }
                }
                ("nat", v) => {
                    let inner = match v {
                        None => "",
                        Some(v) => v
                            .strip_suffix(')')
                            .ok_or("nat( needs its closing parenthesis")?,
                    };
                    ct.nat = Some(Nat::parse(inner)?);
                }
                ("alg", _) => {
                    return Err("ct(alg=...) is not supported: Sluice has no application-layer helpers (FTP, TFTP)".into())
                }
                _ => {
                    return Err(format!(
                        "unknown ct argument '{arg}': expected commit, force, table=T, zone=N or zone=FIELD[BITS], nat(...), exec(...)"
                    ))
                }
            }
        }
        if ct.force && !ct.commit {
            return Err("ct(force) needs commit (as ovs-ofctl says)".into());
        }
        if ct.sets_mark_or_label() && !ct.commit {
            return Err(
                "ct(exec(...)) sets ct_mark or ct_label only with commit (as ovs-ofctl says)"
                    .into(),
            );
        }
        Ok(ct)
    }

    /// Whether its `exec` writes `ct_mark` or `ct_label` (which only a
    /// commit may).
    pub fn sets_mark_or_label(&self) -> bool {
        self.mark.is_some()
            || self.label.is_some()
            || self.mark_move.is_some()
            || self.label_move.is_some()
    }

    /// Sets `exec(move:SRC->DST)` where DST is bits of `ct_mark` or
    /// `ct_label`.
    pub fn set_move(&mut self, src: Subfield, dst: Subfield) -> Result<(), String> {
        if src.n_bits != dst.n_bits {
            return Err(format!(
                "move:{src}->{dst}: {} bits into {}",
                src.n_bits, dst.n_bits
            ));
        }
        match dst.field.name {
            "ct_mark" => self.mark_move = Some((src, dst)),
            "ct_label" => self.label_move = Some((src, dst)),
            other => {
                return Err(format!(
                    "move:{src}->{dst}: ct's exec sets ct_mark and ct_label only, not {other}"
                ))
            }
        }
        Ok(())
    }

    /// One `exec` action: `set_field:V[/M]->ct_mark` or `->ct_label`
    /// (and `load:V->NXM_NX_CT_MARK[...]`), or `move:SRC->` one of them.
    fn exec(&mut self, a: &str) -> Result<(), String> {
        if let Some(rest) = a.strip_prefix("move:") {
            let (src, dst) = rest
                .split_once("->")
                .ok_or_else(|| format!("{a}: move needs 'SRC[BITS]->DST[BITS]'"))?;
            return self.set_move(Subfield::parse(src)?, Subfield::parse(dst)?);
        }
        let (field, v, m) = if let Some(rest) = a.strip_prefix("set_field:") {
            let (val, f) = rest
                .split_once("->")
                .ok_or_else(|| format!("{a}: set_field needs 'VALUE->FIELD'"))?;
            let (v, m) = match val.split_once('/') {
                Some((v, m)) => (v, Some(m)),
                None => (val, None),
            };
            let fd = field_by_name(f.trim()).ok_or_else(|| format!("{a}: unknown field"))?;
            let bits = fd.bits();
            let v = int(v, bits, fd.name)?;
            let m = m.map_or(Ok(fd.full_mask()), |m| int(m, bits, fd.name))?;
            (fd.name, v, m)
        } else if let Some(rest) = a.strip_prefix("load:") {
            let (val, f) = rest
                .split_once("->")
                .ok_or_else(|| format!("{a}: load needs 'VALUE->FIELD[BITS]'"))?;
            let sf = Subfield::parse(f)?;
            let v = int(val, u32::from(sf.n_bits), "load")?;
            (sf.field.name, sf.place(v), sf.mask())
        } else {
            return Err(format!(
                "{a}: ct's exec takes set_field (or load) on ct_mark and ct_label only"
            ));
        };
        match field {
            "ct_mark" => self.mark = Some((v as u32 & m as u32, m as u32)),
            "ct_label" => self.label = Some((v & m, m)),
            other => {
                return Err(format!(
                    "{a}: ct's exec sets ct_mark and ct_label only, not {other}"
                ))
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Ct {
    /// As `ovs-ofctl` prints it: `ct(commit,table=1,zone=5,exec(...))`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push("commit".into());
        }
        if self.force {
            parts.push("force".into());
        }
        if let Some(t) = self.table {
            parts.push(format!("table={t}"));
        }
        match self.zone {
            Some(CtZone::Imm(z)) => parts.push(format!("zone={z}")),
            Some(CtZone::Field(sf)) => parts.push(format!("zone={sf}")),
            None => {}
        }
        if let Some(n) = &self.nat {
            parts.push(n.to_string());
        }
        let mut exec = Vec::new();
        if let Some((v, m)) = self.mark {
            exec.push(if m == u32::MAX {
                format!("set_field:{}->ct_mark", c_hex(v.into()))
            } else {
                format!("set_field:{}/{}->ct_mark", c_hex(v.into()), c_hex(m.into()))
            });
        }
        if let Some((v, m)) = self.label {
            exec.push(if m == u128::MAX {
                format!("set_field:{}->ct_label", c_hex(v))
            } else {
                format!("set_field:{}/{}->ct_label", c_hex(v), c_hex(m))
            });
        }
        for (src, dst) in [self.mark_move, self.label_move].into_iter().flatten() {
            exec.push(format!("move:{src}->{dst}"));
        }
        if !exec.is_empty() {
            parts.push(format!("exec({})", exec.join(",")));
        }
        write!(f, "ct({})", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_as_ovs_ofctl() {
        for (input, shown) in [
            (
                "commit,zone=5,exec(set_field:0x1->ct_mark,set_field:0x2->ct_label)",
                "ct(commit,zone=5,exec(set_field:0x1->ct_mark,set_field:0x2->ct_label))",
            ),
            (
                "table=11,zone=NXM_NX_REG0[0..15]",
                "ct(table=11,zone=NXM_NX_REG0[0..15])",
            ),
            (
                "zone=reg6[0..15],table=2",
                "ct(table=2,zone=NXM_NX_REG6[0..15])",
            ),
            ("commit,force", "ct(commit,force)"),
            // OVN's ACL label: a register's bits into ct_label.
            (
                "commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark,move:NXM_NX_XXREG0[0..31]->NXM_NX_CT_LABEL[96..127])",
                "ct(commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark,move:NXM_NX_XXREG0[0..31]->NXM_NX_CT_LABEL[96..127]))",
            ),
            ("", "ct()"),
            ("table=1,nat", "ct(table=1,nat)"),
            (
                "commit,nat(src=10.0.0.1-10.0.0.3:1024-2047,random),exec(set_field:1->ct_mark)",
                "ct(commit,nat(src=10.0.0.1-10.0.0.3:1024-2047,random),exec(set_field:0x1->ct_mark))",
            ),
            ("commit,nat(dst=10.0.0.1:80)", "ct(commit,nat(dst=10.0.0.1:80))"),
            ("commit,nat(dst=10.0.0.1-10.0.0.1)", "ct(commit,nat(dst=10.0.0.1))"),
            ("commit,nat(src)", "ct(commit,nat(src))"),
            ("commit,nat(src=2001:db8::1)", "ct(commit,nat(src=2001:db8::1))"),
            (
                "commit,nat(dst=[2001:db8::1]-[2001:db8::2]:80,persistent)",
                "ct(commit,nat(dst=[2001:db8::1]-[2001:db8::2]:80,persistent))",
            ),
            (
                "commit,exec(set_field:0x5/0xff->ct_mark)",
                "ct(commit,exec(set_field:0x5/0xff->ct_mark))",
            ),
        ] {
            assert_eq!(Ct::parse(input).unwrap().to_string(), shown, "{input}");
        }
        for (input, says) in [
            ("nat(src=10.0.0.1,dst=10.0.0.2)", "one of"),
            ("nat(persistent)", "only with"),
            ("nat(src=10.0.0.2-10.0.0.1)", "invalid nat range"),
            ("nat(src=10.0.0.1:9-8)", "invalid nat range"),
            ("nat(src=10.0.0.1,hash,random)", "not allowed"),
            ("nat(source=1.2.3.4)", "invalid key"),
            ("zone=NXM_NX_REG0[0..7]", "16 bits"),
            ("exec(set_field:1->ct_mark)", "only with commit"),
            (
                "commit,exec(set_field:1->ip_dst)",
                "ct_mark and ct_label only",
            ),
            ("commit,exec(set_field:1->reg0)", "not reg0"),
            ("force", "needs commit"),
            ("table=255", "0 to 254"),
            ("zone=65536", "too large"),
            ("bogus", "unknown ct argument"),
        ] {
            let e = Ct::parse(input).unwrap_err();
            assert!(e.contains(says), "{input}: {e}");
        }
    }
}
