//! OpenFlow actions, as rules hold them.

use crate::fields::{c_hex, Field};
use crate::subfield::Subfield;

/// Largest valid OpenFlow port number for `output:N` (OF1.3 `OFPP_MAX`).
pub const OFPP_MAX: u32 = 0xffff_ff00;

/// `OFPP_LOCAL`: the bridge's own port (the internal interface named as
/// the bridge, as `ovs-vsctl add-br` makes it). A port the datapath may
/// have beside the numbered ones.
pub const OFPP_LOCAL: u32 = 0xffff_fffe;

/// An action of a rule's action list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// `output:N` — send a copy to port N (skipped when N is the input port).
    Output(u32),
    /// `in_port` — send back out of the input port.
    InPort,
    /// `all` — every port but the input port.
    All,
    /// `flood` — every port but the input port (no port is excluded from
    /// flooding in Sluice, so this equals `all`).
    Flood,
    /// `output:FIELD[a..b]` — out of the port the field's bits hold (as
    /// `NXAST_OUTPUT_REG`: a value past 65535 goes nowhere; 0xfff8 and up
    /// are OpenFlow 1.0's reserved ports, `IN_PORT`, `NORMAL`, `FLOOD`,
    /// `ALL`, `CONTROLLER`).
    OutputReg(Subfield),
    /// `note:HEX` — does nothing; its bytes ride with the rule (padded
    /// with zeros as `NXAST_NOTE` carries them: the action's length a
    /// multiple of 8).
    Note(Vec<u8>),
    /// `clone(ACTIONS)` — the actions on a copy of the packet and its
    /// pipeline state; after them the packet is as it was (`NXAST_CLONE`).
    Clone(Vec<Action>),
    /// `conjunction(ID,K/N)` — this rule is clause K of N of conjunction
    /// ID: a packet matching a rule of every clause looks up
    /// `conj_id=ID` ([`crate::tss`]'s `conj`). Only `note` may be beside it.
    Conjunction {
        /// The conjunction.
        id: u32,
        /// Which clause, 1 to `n_clauses`.
        clause: u8,
        /// How many (2 to 64).
        n_clauses: u8,
    },
    /// `sample(...)` — IPFIX sampling. Sluice has no IPFIX exporter yet:
    /// it does nothing, as in OVS with no IPFIX configured for the bridge.
    Sample(Sample),
    /// `set_queue:Q` — the output queue for later outputs. Sluice's ports
    /// have no QoS queues: it changes no byte (OVS's userspace datapath
    /// without QoS sets the packet's priority, which no port reads).
    SetQueue(u32),
    /// `pop_queue` — back to the queue the packet came with (as
    /// `set_queue`, nothing a port reads).
    PopQueue,
    /// `learn(...)` — add (or refresh) a rule built from the packet
    /// ([`crate::learn`]).
    Learn(Box<crate::learn::Learn>),
    /// `multipath(fields,basis,algorithm,n_links,arg,dst)` — a hash of the
    /// packet's fields picks a link number into `dst`, as OVS computes it
    /// ([`crate::multipath`]).
    Multipath(Box<crate::multipath::Multipath>),
    /// `bundle(...)` / `bundle_load(...)` — out of (or into `dst`) the
    /// member port chosen as OVS chooses it ([`crate::bundle`]).
    Bundle(Box<crate::bundle::Bundle>),
    /// `fin_timeout(idle_timeout=I,hard_timeout=H)` — a TCP packet with
    /// FIN or RST that runs it lowers its rule's timeouts to these (0:
    /// that one left alone), as OVS.
    FinTimeout {
        /// The idle timeout, seconds.
        idle: u16,
        /// The hard timeout, seconds.
        hard: u16,
    },
    /// `check_pkt_larger(N)->DST` — writes 1 into the one-bit `dst` if
    /// the packet is longer than `len` bytes, else 0 (OVS's length: the
    /// frame without Ethernet padding). The datapath decides per packet
    /// (OVS's `check_pkt_len`): the rest of the action list is translated
    /// for each answer, so one megaflow serves both sizes.
    CheckPktLarger {
        /// The length compared with.
        len: u16,
        /// The bit written.
        dst: Subfield,
    },
    /// `NORMAL` — the bridge's own switching: MAC learning, VLAN port
    /// modes, flooding ([`crate::xlate`], `normal.rs`).
    Normal,
    /// `controller[:max_len]`, `controller(reason=R,max_len=N,id=I,
    /// userdata=HEX)` — a packet-in for the OpenFlow channel.
    Controller {
        /// Bytes of the packet to send (65535 = all).
        max_len: u16,
        /// The rest of `controller(...)`, when any is not the default.
        opts: Option<Box<ControllerOpts>>,
    },
    /// `set_field:V->F`, `mod_dl_src:V`, `mod_nw_dst:V`, ...: write a field.
    SetField {
        /// The field written.
        field: &'static Field,
        /// The value.
        value: u128,
        /// The legacy action name the rule was written with, if any.
        legacy: Option<&'static str>,
    },
    /// `load:V->F[a..b]` (and `set_field:V/M->F`): write the bits `mask`
    /// of a field with those of `value` (both in the field's position).
    Load {
        /// The field written.
        field: &'static Field,
        /// The value, already shifted into place.
        value: u128,
        /// The bits written (not all of the field's: that is `SetField`
        /// or a whole-field `load`, which this also is).
        mask: u128,
    },
    /// `move:SRC[a..b]->DST[c..d]`: copy bits of one field into another
    /// (as many bits on each side).
    Move {
        /// Where the bits come from.
        src: Subfield,
        /// Where they go.
        dst: Subfield,
    },
    /// `push:FIELD[BITS]` (`pop` false) and `pop:FIELD[BITS]`: bits of a
    /// field onto, or back from, the packet's stack (for one pass through
    /// the tables; OVN keeps `in_port` there around a resubmit).
    Stack {
        /// Pop (else push).
        pop: bool,
        /// The bits.
        sf: Subfield,
    },
    /// `ct(...)`: the packet through the connection tracker
    /// ([`crate::ct`]).
    Ct(crate::ct::Ct),
    /// `ct_clear`: the packet's connection tracking state cleared.
    CtClear,
    /// `mod_vlan_vid:V` — set the VID of the outermost tag. Where the rule
    /// does not guarantee a tag, the parser puts `push_vlan:0x8100` before
    /// it, as `ovs-ofctl -O OpenFlow13` encodes the action.
    ModVlanVid(u16),
    /// `mod_vlan_pcp:P` — set the PCP of the outermost tag (a push before
    /// it likewise).
    ModVlanPcp(u8),
    /// `push_vlan:TPID` — push a new outermost tag (VID 0, PCP 0, as OVS).
    PushVlan(u16),
    /// `strip_vlan` / `pop_vlan` — remove the outermost tag, if any.
    PopVlan,
    /// Push an MPLS label stack entry with this EtherType (0x8847 or
    /// 0x8848): label 0, the TTL of the IP header (64 if none), or a copy
    /// of the outermost entry (bottom of stack cleared) on MPLS.
    PushMpls(u16),
    /// Pop the outermost MPLS label; what follows gets this EtherType.
    PopMpls(u16),
    /// Set the outermost MPLS label's TTL.
    SetMplsTtl(u8),
    /// Decrement the outermost MPLS label's TTL (a packet whose TTL is 0
    /// or 1 is dropped, as `dec_ttl`).
    DecMplsTtl,
    /// Copy the TTL of the header under the outermost label into it.
    CopyTtlOut,
    /// Copy the outermost label's TTL into the header under it.
    CopyTtlIn,
    /// The meter instruction: the packet goes through meter N first
    /// ([`crate::meter`]).
    Meter(u32),
    /// Push a PBB encapsulation with this EtherType (0x88e7).
    PushPbb(u16),
    /// Pop a PBB encapsulation.
    PopPbb,
    /// `dec_ttl` — decrement the IP TTL; at TTL <= 1 the packet is not
    /// forwarded by the rest of the action list (counted as `invalid ttl`).
    DecTtl,
    /// `dec_ttl(ID,...)`: `dec_ttl`, naming the controllers OVS tells of an
    /// expired TTL (Sluice sends no such packet-in: an expired TTL is the
    /// counted drop `invalid ttl`, as for `dec_ttl`).
    DecTtlIds(Vec<u16>),
    /// `resubmit([port],[table])` — look up again and run that rule's actions.
    Resubmit {
        /// In-port to look up with (default: the current one).
        in_port: Option<u32>,
        /// Table to look up in (default: the current one).
        table: Option<u8>,
    },
    /// `group:N` — run group N's buckets ([`crate::group`]).
    Group(u32),
    /// `goto_table:T` — continue in table T (T greater than the current).
    GotoTable(u8),
    /// `write_actions(...)` — merge these into the packet's action set,
    /// which runs when the pipeline ends (OpenFlow 1.3 section 5.10: one
    /// action of each kind, one set_field per field, in the spec's order).
    WriteActions(Vec<Action>),
    /// `clear_actions` — empty the action set.
    ClearActions,
    /// `write_metadata:V[/M]` — set the bits `M` of the pipeline's metadata
    /// to those of `V` (OpenFlow 1.3's WRITE_METADATA instruction).
    WriteMetadata {
        /// The value.
        value: u64,
        /// The bits written (all ones when the rule gave no mask).
        mask: u64,
    },
}

/// What `controller(...)` says beyond `max_len` (Open vSwitch's
/// `ofpact_controller`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ControllerOpts {
    /// The packet-in's reason (`action` unless said).
    pub reason: PacketInReason,
    /// The controllers it goes to: those that said this id
    /// (`NXT_SET_CONTROLLER_ID`; 0 unless they did).
    pub id: u16,
    /// Bytes for the controller (`NXT_PACKET_IN2`'s userdata; a standard
    /// packet-in has no room for them, as in Open vSwitch).
    pub userdata: Vec<u8>,
    /// The meter its packet-ins go through (`meter_id=N`, OVS's
    /// controller meter): those it drops are not sent.
    pub meter_id: Option<u32>,
    /// `pause`: the translation stops here, the rest of it kept as a
    /// continuation the packet-in carries (`NXT_PACKET_IN2`), to go on
    /// when the controller sends the packet back in `NXT_RESUME`.
    pub pause: bool,
}

impl Action {
    /// `controller:max_len` with nothing else.
    pub fn controller(max_len: u16) -> Action {
        Action::Controller {
            max_len,
            opts: None,
        }
    }
}

/// Why a packet goes to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketInReason {
    /// An explicit `controller` action.
    Action,
    /// The `controller` action of a table-miss rule (priority 0, matching
    /// everything): OpenFlow 1.3's `OFPR_NO_MATCH`.
    NoMatch,
    /// `controller(reason=invalid_ttl)`.
    InvalidTtl,
    /// `controller(reason=action_set)`.
    ActionSet,
    /// `controller(reason=group)`.
    Group,
    /// `controller(reason=packet_out)`, and a plain `controller` action
    /// met while the translation runs a packet-out's actions.
    PacketOut,
    /// A plain `controller` (or `reason=action`) in a table-miss rule
    /// (priority 0, matching everything): `no_match` to an OpenFlow 1.3
    /// controller, `action` to a 1.0 one, which has no such notion (Open
    /// vSwitch's `OFPR_EXPLICIT_MISS`; not a reason a flow file names).
    ExplicitMiss,
}

impl PacketInReason {
    /// Every reason, in OpenFlow's numbering (`OFPR_*`, 1.4's for the
    /// last three) with the name `ovs-ofctl` gives it.
    pub const ALL: [(PacketInReason, u8, &'static str); 6] = [
        (PacketInReason::NoMatch, 0, "no_match"),
        (PacketInReason::Action, 1, "action"),
        (PacketInReason::InvalidTtl, 2, "invalid_ttl"),
        (PacketInReason::ActionSet, 3, "action_set"),
        (PacketInReason::Group, 4, "group"),
        (PacketInReason::PacketOut, 5, "packet_out"),
    ];

    /// Its `OFPR_*` number.
    pub fn code(self) -> u8 {
        if self == PacketInReason::ExplicitMiss {
            return 0;
        }
        Self::ALL.iter().find(|r| r.0 == self).map_or(1, |r| r.1)
    }

    /// Its number in a packet-in of OpenFlow 1.0 (`v10`) or 1.3: those
    /// have no number past `invalid_ttl` (the reasons 1.4 added are
    /// `action` in them), and 1.0 no explicit miss (Open vSwitch's
    /// `encode_packet_in_reason`).
    pub fn wire(self, v10: bool) -> u8 {
        match self {
            PacketInReason::ExplicitMiss if v10 => 1,
            r => match r.code() {
                c @ 0..=2 => c,
                _ => 1,
            },
        }
    }

    /// Its name, as `ovs-ofctl` prints it.
    pub fn name(self) -> &'static str {
        if self == PacketInReason::ExplicitMiss {
            return "no_match";
        }
        Self::ALL
            .iter()
            .find(|r| r.0 == self)
            .map_or("action", |r| r.2)
    }

    /// The reason of a number (`None` past 5).
    pub fn of_code(c: u8) -> Option<Self> {
        Self::ALL.iter().find(|r| r.1 == c).map(|r| r.0)
    }
}

/// The settings of `sample(...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Packets sampled per 65535.
    pub probability: u16,
    /// The IPFIX collector set.
    pub collector_set_id: u32,
    /// The observation domain.
    pub obs_domain_id: u32,
    /// The observation point.
    pub obs_point_id: u32,
    /// `sampling_port` (the tunnel port whose egress is exported).
    pub sampling_port: Option<u32>,
    /// 0: default, 1: `ingress`, 2: `egress`.
    pub direction: u8,
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
            self.probability, self.collector_set_id, self.obs_domain_id, self.obs_point_id
        )?;
        if let Some(p) = self.sampling_port {
            write!(f, ",sampling_port={p}")?;
        }
        match self.direction {
            1 => f.write_str(",ingress")?,
            2 => f.write_str(",egress")?,
            _ => {}
        }
        f.write_str(")")
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Output(OFPP_LOCAL) => write!(f, "LOCAL"),
            Action::Output(p) => write!(f, "output:{p}"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::InPort => f.write_str("IN_PORT"),
            Action::All => f.write_str("ALL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Learn(l) => write!(f, "{l}"),
            Action::Multipath(m) => write!(f, "{m}"),
            Action::FinTimeout { idle, hard } => {
                // As ovs-ofctl: what is not 0.
                let mut parts = Vec::new();
                if *idle != 0 {
                    parts.push(format!("idle_timeout={idle}"));
                }
                if *hard != 0 {
                    parts.push(format!("hard_timeout={hard}"));
                }
                write!(f, "fin_timeout({})", parts.join(","))
            }
            Action::Bundle(b) => write!(f, "{b}"),
            Action::CheckPktLarger { len, dst } => write!(f, "check_pkt_larger({len})->{dst}"),
            Action::Sample(s) => write!(f, "{s}"),
            Action::SetQueue(q) => write!(f, "set_queue:{q}"),
            Action::PopQueue => f.write_str("pop_queue"),
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            } => write!(f, "conjunction({id},{clause}/{n_clauses})"),
            Action::Clone(a) => write!(f, "clone({})", format_list(a)),
            Action::OutputReg(src) => write!(f, "output:{src}"),
            Action::Note(bytes) => {
                f.write_str("note:")?;
                for (i, b) in bytes.iter().enumerate() {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            Action::Controller {
                max_len,
                opts: None,
            } => write!(f, "CONTROLLER:{max_len}"),
            Action::Controller {
                max_len,
                opts: Some(o),
            } => {
                // As ovs-ofctl: what is not the default, in this order.
                let mut parts = Vec::new();
                if o.reason != PacketInReason::Action {
                    parts.push(format!("reason={}", o.reason.name()));
                }
                if *max_len != 65535 {
                    parts.push(format!("max_len={max_len}"));
                }
                if o.id != 0 {
                    parts.push(format!("id={}", o.id));
                }
                if !o.userdata.is_empty() {
                    let hex: Vec<String> = o.userdata.iter().map(|b| format!("{b:02x}")).collect();
                    parts.push(format!("userdata={}", hex.join(".")));
                }
                if o.pause {
                    parts.push("pause".into());
                }
                if let Some(m) = o.meter_id {
                    parts.push(format!("meter_id={m}"));
                }
                write!(f, "controller({})", parts.join(","))
            }
            Action::SetField {
                field,
                value,
                legacy: Some(name),
            } => {
                write!(f, "{name}:{}", field.format_value(*value))
            }
            Action::SetField {
                field,
                value,
                legacy: None,
            } => {
                write!(
                    f,
                    "set_field:{}->{}",
                    field.format_value(*value),
                    field.name
                )
            }
            Action::Load { field, value, mask } => fmt_load(f, field, *value, *mask),
            Action::Move { src, dst } => write!(f, "move:{src}->{dst}"),
            Action::Stack { pop, sf } => write!(f, "{}:{sf}", if *pop { "pop" } else { "push" }),
            Action::Ct(ct) => write!(f, "{ct}"),
            Action::CtClear => f.write_str("ct_clear"),
            Action::ModVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::ModVlanPcp(p) => write!(f, "mod_vlan_pcp:{p}"),
            Action::PushVlan(t) => write!(f, "push_vlan:{t:#06x}"),
            Action::PopVlan => f.write_str("pop_vlan"),
            Action::PushMpls(t) => write!(f, "push_mpls:{t:#06x}"),
            Action::PopMpls(t) => write!(f, "pop_mpls:{t:#06x}"),
            Action::SetMplsTtl(t) => write!(f, "set_mpls_ttl({t})"),
            Action::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            Action::CopyTtlOut => f.write_str("copy_ttl_out"),
            Action::CopyTtlIn => f.write_str("copy_ttl_in"),
            Action::PushPbb(t) => write!(f, "push_pbb:{t:#06x}"),
            Action::Meter(m) => write!(f, "meter:{m}"),
            Action::PopPbb => f.write_str("pop_pbb"),
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::DecTtlIds(ids) => {
                let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
                write!(f, "dec_ttl({})", ids.join(","))
            }
            // As OVS: `resubmit:PORT` when no table is named.
            Action::Resubmit {
                in_port: Some(p),
                table: None,
            } => write!(f, "resubmit:{}", resubmit_port(*p)),
            Action::Resubmit { in_port, table } => {
                let p = in_port.map(resubmit_port).unwrap_or_default();
                let t = table.map(|t| t.to_string()).unwrap_or_default();
                write!(f, "resubmit({p},{t})")
            }
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::WriteActions(a) => write!(f, "write_actions({})", format_list(a)),
            Action::ClearActions => f.write_str("clear_actions"),
            Action::WriteMetadata {
                value,
                mask: u64::MAX,
            } => write!(f, "write_metadata:{value:#x}"),
            Action::WriteMetadata { value, mask } => {
                write!(f, "write_metadata:{value:#x}/{mask:#x}")
            }
        }
    }
}

/// A load as `ovs-ofctl dump-flows` shows it: one `load:` per run of
/// contiguous bits of the mask, at most 64 bits each (the most one
/// Nicira load action carries).
fn fmt_load(
    f: &mut std::fmt::Formatter<'_>,
    field: &'static Field,
    value: u128,
    mask: u128,
) -> std::fmt::Result {
    for (i, sf) in Subfield::runs(field, mask).enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "load:{}->{sf}", c_hex((value & sf.mask()) >> sf.ofs))?;
    }
    Ok(())
}

impl Action {
    /// The output OpenFlow 1.0's 16-bit port number `p` names: a port
    /// (below 0xff00), or the reserved `IN_PORT`, `NORMAL`, `FLOOD`,
    /// `ALL`, `CONTROLLER`; `None` for the other reserved numbers.
    pub fn of10_port(p: u16) -> Option<Action> {
        Some(match p {
            0xfff8 => Action::InPort,
            0xfffa => Action::Normal,
            0xfffb => Action::Flood,
            0xfffc => Action::All,
            0xfffd => Action::controller(65535),
            0xfffe => Action::Output(OFPP_LOCAL),
            0xff00.. => return None,
            p => Action::Output(u32::from(p)),
        })
    }

    /// Whether it may not be inside `clone(...)`: an instruction or a
    /// meter. (`ct` and `ct_clear` may: the packet's own connection state
    /// comes back after the clone.)
    pub fn refused_in_clone(&self) -> bool {
        matches!(
            self,
            Action::WriteActions(_)
                | Action::ClearActions
                | Action::WriteMetadata { .. }
                | Action::GotoTable(_)
                | Action::Meter(_)
                | Action::Conjunction { .. }
        )
    }
}

/// A resubmit's port as OVS prints it: a reserved one by name.
fn resubmit_port(p: u32) -> String {
    crate::fields::reserved_port_name(p).map_or_else(|| p.to_string(), str::to_string)
}

/// Formats an action list the way `ovs-ofctl dump-flows` does (`drop` when empty).
pub fn format_actions(actions: &[Action]) -> String {
    format_list(actions)
}

/// The groups an action list sends to (`group:N`, in its write-actions
/// too).
pub fn groups_of(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().flat_map(|a| {
        let inner: &[Action] = match a {
            Action::WriteActions(set) | Action::Clone(set) => set,
            a => std::slice::from_ref(a),
        };
        inner.iter().filter_map(|a| match a {
            Action::Group(g) => Some(*g),
            _ => None,
        })
    })
}

/// The fields an action list's `set_field`s write (in its write-actions
/// too).
pub fn fields_written(actions: &[Action]) -> impl Iterator<Item = &'static Field> + '_ {
    actions.iter().flat_map(|a| {
        let inner: &[Action] = match a {
            Action::WriteActions(set) | Action::Clone(set) => set,
            a => std::slice::from_ref(a),
        };
        inner.iter().filter_map(|a| match a {
            Action::SetField { field, .. } | Action::Load { field, .. } => Some(*field),
            Action::Move { dst, .. } => Some(dst.field),
            Action::Stack { pop: true, sf } => Some(sf.field),
            _ => None,
        })
    })
}

/// Whether an action list tracks connections (a `ct`, in its
/// write-actions or a clone too).
pub fn tracks_connections(actions: &[Action]) -> bool {
    actions.iter().any(|a| match a {
        Action::Ct(_) => true,
        Action::WriteActions(set) | Action::Clone(set) => tracks_connections(set),
        _ => false,
    })
}

/// The meters an action list sends its packets through (`meter:N`).
pub fn meters_of(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        Action::Meter(m) => Some(*m),
        _ => None,
    })
}

/// Joins displayable actions with commas, `drop` for none.
pub fn format_list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "drop".to_string();
    }
    items
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
