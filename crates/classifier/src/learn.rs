//! The `learn(...)` action (Open vSwitch's `NXAST_LEARN`): a rule that
//! adds or refreshes another rule built from the packet that runs it.
//!
//! Each spec of the action either adds to the new rule's match (a field
//! of the packet, or a constant, as the value of some bits of a field),
//! or adds an action to it (`load:` of a packet's bits or a constant,
//! `output:` to the port a field holds). The translation builds the
//! flow-mod for one packet (`xlate`'s `learned_rule`); where and when it
//! is applied is the datapath's business (the upcall that translates the packet, and again
//! as the cached decision is hit, as OVS's `XC_LEARN`).

use crate::fields::{c_hex, Field};
use crate::flow_match::Match;
use crate::subfield::Subfield;

/// OpenFlow's default priority, a learned rule's unless it says.
const DEFAULT_PRIORITY: u16 = 32768;

/// `learn` flags (`NX_LEARN_F_*`).
pub mod flag {
    /// The learned rule asks for FLOW_REMOVED (`send_flow_rem`).
    pub const SEND_FLOW_REM: u16 = 1;
    /// Deleting the rule with the `learn` deletes what it learned
    /// (`delete_learned`).
    pub const DELETE_LEARNED: u16 = 2;
    /// Write whether learning succeeded into `result_dst`.
    pub const WRITE_RESULT: u16 = 4;
}

/// Where a spec's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnSrc {
    /// Bits of the packet's flow (as the actions before left it).
    Field(Subfield),
    /// A constant, in the low bits.
    Imm(u128),
}

/// What a spec makes of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnDst {
    /// These bits of the learned rule's match.
    Match(Subfield),
    /// An action of the learned rule loading these bits.
    Load(Subfield),
    /// An action of the learned rule: output to the port the value
    /// names (OpenFlow 1.0 numbering, 16 bits).
    Output,
}

/// One spec of a `learn` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LearnSpec {
    /// The value.
    pub src: LearnSrc,
    /// Where it goes.
    pub dst: LearnDst,
    /// Its width in bits.
    pub n_bits: u8,
}

/// A `learn(...)` action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Learn {
    /// The table the rule goes into (default 1).
    pub table: u8,
    /// Its priority (default 32768).
    pub priority: u16,
    /// Its idle timeout, seconds (0: none).
    pub idle_timeout: u16,
    /// Its hard timeout, seconds (0: none); a refresh starts it again.
    pub hard_timeout: u16,
    /// `fin_idle_timeout`: the learned rule's actions start with
    /// `fin_timeout(idle_timeout=...)` (and `fin_hard_timeout`'s), as OVS.
    pub fin_idle_timeout: u16,
    /// `fin_hard_timeout` (likewise).
    pub fin_hard_timeout: u16,
    /// The learned rule's cookie.
    pub cookie: u64,
    /// [`flag`]s.
    pub flags: u16,
    /// `limit` (0: none; refused by the parsers for now).
    pub limit: u32,
    /// `result_dst` (with [`flag::WRITE_RESULT`]).
    pub result_dst: Option<Subfield>,
    /// The specs, in order.
    pub specs: Vec<LearnSpec>,
}

impl Default for Learn {
    fn default() -> Self {
        Learn {
            table: 1,
            priority: DEFAULT_PRIORITY,
            idle_timeout: 0,
            hard_timeout: 0,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            cookie: 0,
            flags: 0,
            limit: 0,
            result_dst: None,
            specs: Vec::new(),
        }
    }
}

/// The name Open vSwitch's `learn` prints a whole field's constant under
/// (its `mf` name, where `ovs-ofctl` matches use the OpenFlow 1.0 one).
fn mf_name(field: &Field) -> &'static str {
    match field.name {
        "dl_src" => "eth_src",
        "dl_dst" => "eth_dst",
        "dl_type" => "eth_type",
        "nw_src" => "ip_src",
        "nw_dst" => "ip_dst",
        "in_port16" => "in_port",
        "nw_proto" => "nw_proto",
        n => n,
    }
}

/// `n_bits` bits as OVS's `ds_put_hex` writes them (`0x5`, `0x0`).
fn put_hex(v: u128) -> String {
    format!("{v:#x}")
}

impl std::fmt::Display for Learn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        if self.idle_timeout != 0 {
            write!(f, ",idle_timeout={}", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, ",hard_timeout={}", self.hard_timeout)?;
        }
        if self.fin_idle_timeout != 0 {
            write!(f, ",fin_idle_timeout={}", self.fin_idle_timeout)?;
        }
        if self.fin_hard_timeout != 0 {
            write!(f, ",fin_hard_timeout={}", self.fin_hard_timeout)?;
        }
        if self.priority != DEFAULT_PRIORITY {
            write!(f, ",priority={}", self.priority)?;
        }
        if self.flags & flag::SEND_FLOW_REM != 0 {
            f.write_str(",send_flow_rem")?;
        }
        if self.flags & flag::DELETE_LEARNED != 0 {
            f.write_str(",delete_learned")?;
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        if self.limit != 0 {
            write!(f, ",limit={}", self.limit)?;
        }
        if let Some(r) = self.result_dst {
            write!(f, ",result_dst={r}")?;
        }
        for s in &self.specs {
            f.write_str(",")?;
            match (s.src, s.dst) {
                (LearnSrc::Imm(v), LearnDst::Match(d)) if d.is_whole() => {
                    write!(f, "{}={}", mf_name(d.field), d.field.format_value(v))?
                }
                (LearnSrc::Imm(v), LearnDst::Match(d)) => write!(f, "{d}={}", put_hex(v))?,
                (LearnSrc::Field(src), LearnDst::Match(d)) => {
                    write!(f, "{d}")?;
                    if src.field != d.field || src.ofs != d.ofs {
                        write!(f, "={src}")?;
                    }
                }
                (LearnSrc::Imm(v), LearnDst::Load(d)) => write!(f, "load:{}->{d}", put_hex(v))?,
                (LearnSrc::Field(src), LearnDst::Load(d)) => write!(f, "load:{src}->{d}")?,
                (LearnSrc::Field(src), LearnDst::Output) => write!(f, "output:{src}")?,
                (LearnSrc::Imm(v), LearnDst::Output) => write!(f, "output:{}", c_hex(v))?,
            }
        }
        f.write_str(")")
    }
}

impl Learn {
    /// Whether the action can run under a rule matching `rule` (as the
    /// actions before it leave the packet), as OVS's `learn_check` asks
    /// when the rule is added: each source's prerequisites hold in the
    /// rule, each destination's in the learned match as the constants
    /// before it build it (`eth_type=0x800,NXM_OF_IP_SRC[]`, not
    /// `NXM_OF_IP_SRC[]` alone). What Sluice does not do yet is refused.
    pub fn check(&self, rule: &Match) -> Result<(), String> {
        if self.table == 255 {
            return Err("table id 255 not valid for 'learn' action".into());
        }
        if let Some(dst) = self.result_dst {
            if !(dst.field.writable || dst.field.is_pipeline()) || dst.n_bits != 1 {
                return Err(format!("learn: result_dst {dst} is not a writable bit"));
            }
            if !dst.field.prereq.holds(&rule.value, &rule.mask) {
                return Err(format!("learn: result_dst {dst} lacks its prerequisites"));
            }
        }
        let mut learned = Match::catch_all();
        for s in &self.specs {
            if let LearnSrc::Field(src) = s.src {
                if !src.field.prereq.holds(&rule.value, &rule.mask) {
                    return Err(format!(
                        "learn: source field {src} lacks correct prerequisites: the rule must match {}",
                        src.field.prereq.describe()
                    ));
                }
            }
            match s.dst {
                LearnDst::Match(d) => {
                    if !d.field.prereq.holds(&learned.value, &learned.mask) {
                        return Err(format!(
                            "learn: the learned match on {d} lacks its prerequisites: set {} earlier in the learn (e.g. eth_type=0x800 before NXM_OF_IP_SRC[])",
                            d.field.prereq.describe()
                        ));
                    }
                    if let LearnSrc::Imm(v) = s.src {
                        learned.set_bits(d.field, d.place(v), d.mask());
                    }
                }
                LearnDst::Load(d) => {
                    if !(d.field.writable || d.field.is_pipeline()) {
                        return Err(format!("learn: {} cannot be written", d.field.name));
                    }
                    if !d.field.write_prereq().holds(&learned.value, &learned.mask) {
                        return Err(format!(
                            "learn: load into {d} needs the learned match to match {}",
                            d.field.write_prereq().describe()
                        ));
                    }
                }
                LearnDst::Output => {}
            }
        }
        Ok(())
    }

    /// The bits of the packet the learned rule depends on: the sources
    /// read from fields (OVS's `learn_mask`).
    pub fn read_fields(&self) -> impl Iterator<Item = Subfield> + '_ {
        self.specs.iter().filter_map(|s| match s.src {
            LearnSrc::Field(sf) => Some(sf),
            LearnSrc::Imm(_) => None,
        })
    }
}

#[cfg(test)]
#[path = "learn_tests.rs"]
mod tests;
