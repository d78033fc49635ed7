//! Translation: run a packet's flow key through the OpenFlow tables once
//! and produce what the datapath needs to forward every packet like it.
//!
//! The result is a flat list of [`DpAction`]s (header changes committed
//! right before the output that needs them, as OVS's `commit_odp_actions`),
//! the rules to credit, and the wildcard mask: the bits of the key the
//! decision looked at (rule masks consulted by lookups, and fields the
//! actions tested). Any packet equal to this one under that mask gets the
//! same result, which is what makes the result cacheable as a megaflow.

use std::sync::Arc;

use sluice_packet::key::{FlowKey, FRAG_ANY, FRAG_LATER};
use sluice_packet::wire::ethernet::tci;

use crate::action::{format_actions, Action};
use crate::dpaction::DpAction;
use crate::fields::{Field, Prereq};
use crate::frag::FragHandling;
use crate::table::{Rule, RuleSet};

pub use bridges::{dp_port, split_dp_port, BridgeView, PatchPort};

/// Most nested resubmits to the same or an earlier table (as OVS's
/// `MAX_DEPTH`; one to a later table does not count, as in OVS).
pub const MAX_DEPTH: u32 = 64;
/// Most nested resubmits and goto_tables of any kind (the stack the
/// translation may use: 255 tables forward, with room for MAX_DEPTH
/// deepenings among them).
pub const MAX_NESTING: u32 = 512;
/// The stack a thread that translates gives it: [`MAX_NESTING`] levels
/// take some 2 MiB in a debug build (a 255-table chain 1 MiB), less
/// optimised.
pub const STACK_BYTES: usize = 4 << 20;
/// Most resubmits in one translation (as OVS's `MAX_RESUBMITS`).
pub const MAX_RESUBMITS: u32 = 4096;
/// Most datapath actions one translation may produce.
pub const MAX_DP_ACTIONS: usize = 1024;

/// Why a translation forwards the packet nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XlateDrop {
    /// The rule's actions had no output (`drop`, empty, or only skipped
    /// outputs).
    NoOutput,
    /// No rule matched in the pipeline's table (OpenFlow table miss).
    TableMiss,
    /// `dec_ttl` on a packet with TTL <= 1.
    InvalidTtl,
    /// The only outputs named the input port (OpenFlow skips those).
    OutputToInPort,
    /// Outputs named ports that do not exist.
    NoSuchPort,
    /// Resubmit/goto nesting deeper than [`MAX_DEPTH`].
    RecursionTooDeep,
    /// More than [`MAX_RESUBMITS`] resubmits.
    TooManyResubmits,
    /// More than [`MAX_DP_ACTIONS`] datapath actions.
    TooManyActions,
    /// An IP fragment, with fragment handling `drop`.
    Fragment,
    /// A `group:N` action named a group that does not exist (a flow-file
    /// rule; OpenFlow refuses such flow-mods), or groups chained deeper
    /// than [`crate::group::MAX_GROUP_DEPTH`].
    NoSuchGroup,
    /// A `meter:N` instruction named a meter that does not exist (a
    /// flow-file rule; OpenFlow refuses such flow-mods).
    NoSuchMeter,
    /// A recirculation could not be set up (the table of frozen states is
    /// full, or a bucket's `resubmit` reached an action that needs one)
    /// or resumed (its state is unknown).
    Recirc,
    /// An output to a tunnel port whose destination no route reaches (or
    /// is unset: `remote_ip=flow` with no `tun_dst`).
    TunnelNoRoute,
    /// An output to a tunnel port whose next hop's Ethernet address is
    /// not known yet (an ARP request has gone out for it, as OVS does).
    TunnelNoNeighbour,
    /// An ARP packet for the switch's own underlay address: answered (a
    /// request) or learned from (a reply), not forwarded.
    TunnelArp,
    /// A tunnel packet marked congestion experienced around a packet that
    /// is not ECN-capable (RFC 6040; OVS drops it too).
    TunnelEcn,
    /// An output to a tunnel port through a device (`br-phy`) whose
    /// bridge's rules do more to the encapsulated packet than output it
    /// (rewrites, the controller, recirculation): not supported.
    TunnelEgress,
}

impl XlateDrop {
    /// Short counter name.
    pub fn name(self) -> &'static str {
        match self {
            XlateDrop::NoOutput => "action drop",
            XlateDrop::TableMiss => "table miss",
            XlateDrop::InvalidTtl => "invalid ttl",
            XlateDrop::OutputToInPort => "output to input port",
            XlateDrop::NoSuchPort => "output to missing port",
            XlateDrop::RecursionTooDeep => "recursion too deep",
            XlateDrop::TooManyResubmits => "too many resubmits",
            XlateDrop::TooManyActions => "too many actions",
            XlateDrop::Fragment => "ip fragment",
            XlateDrop::NoSuchGroup => "no such group",
            XlateDrop::Recirc => "recirculation failed",
            XlateDrop::NoSuchMeter => "no such meter",
            XlateDrop::TunnelNoRoute => "tunnel: no route",
            XlateDrop::TunnelNoNeighbour => "tunnel: neighbour unknown",
            XlateDrop::TunnelArp => "ARP for the switch",
            XlateDrop::TunnelEcn => "tunnel: ECN CE on a not-ECT packet",
            XlateDrop::TunnelEgress => "tunnel: underlay bridge actions unsupported",
        }
    }
}

/// The result of a translation. Reusable: [`translate`] clears it first,
/// so a thread keeps one and does not allocate once its vectors have grown.
#[derive(Debug, Default, Clone)]
pub struct Translation {
    /// Datapath actions to execute.
    pub actions: Vec<DpAction>,
    /// Rules that matched, to credit with the packet.
    pub rules: Vec<Arc<Rule>>,
    /// Bits of the key the decision depended on.
    pub wc: FlowKey,
    /// The flow key as the last action left it.
    pub final_flow: FlowKey,
    /// Outputs (and controller actions) emitted.
    pub outputs: u32,
    /// Why the packet goes nowhere, when `outputs == 0`.
    pub drop: Option<XlateDrop>,
    /// Human-readable trace, when asked for.
    pub trace: Option<Vec<String>>,
    /// What `NORMAL` would learn from the packet (its source MAC, VLAN
    /// and port): learned by the upcall that installs the translation,
    /// and again as the megaflow is hit (OVS's xlate cache `XC_NORMAL`),
    /// never by a revalidation or a trace.
    pub learn: sluice_bridge::macs::Learns,
    /// The rules `learn` actions built from the packet, in order: added
    /// (or refreshed) by the datapath when it installs the translation,
    /// and refreshed as the megaflow is hit (OVS's `XC_LEARN`).
    pub learned: Vec<(u16, crate::parse::FlowSpec)>,
    /// The (VLAN, MAC) entries of NORMAL's MAC table the decision read:
    /// it is to be redone when one of them changes.
    pub mac_reads: Vec<sluice_bridge::macs::Key>,
    /// The `fin_timeout`s a TCP FIN or RST ran: (index in `rules`, idle,
    /// hard), applied by the datapath when it installs the translation and
    /// as the megaflow (which matches FIN and RST) is hit, as OVS's
    /// `XC_FIN_TIMEOUT`.
    pub fin_timeouts: Vec<(usize, u16, u16)>,
}

/// What a translation needs besides the key.
#[derive(Debug, Clone, Copy)]
pub struct XlateEnv<'a> {
    /// The rules.
    pub rules: &'a RuleSet,
    /// Every port's OpenFlow number, ascending (for `all`/`flood` and to
    /// skip outputs to ports that do not exist).
    pub ports: &'a [u32],
    /// The datapath's other bridges, by index (slot 0 unused: bridge 0
    /// is `rules` and `ports`); empty with one bridge, whose OpenFlow
    /// numbers are the datapath's. With several, a packet's `in_port` is
    /// a datapath number ([`bridges::split_dp_port`]): the translation
    /// starts in its bridge.
    pub bridges: &'a [Option<BridgeView>],
    /// The bridge `rules` and `ports` are (0 but while a translation runs
    /// in another).
    pub bridge: u16,
}

impl<'a> XlateEnv<'a> {
    /// One bridge: `rules` and its ports' OpenFlow numbers (ascending).
    pub fn single(rules: &'a RuleSet, ports: &'a [u32]) -> Self {
        XlateEnv {
            rules,
            ports,
            bridges: &[],
            bridge: 0,
        }
    }

    /// Bridge `bridge`'s rules, if the datapath has it.
    pub fn rules_of(&self, bridge: u16) -> Option<&'a RuleSet> {
        if bridge == 0 {
            return Some(self.rules);
        }
        let bridges = self.bridges;
        bridges
            .get(bridge as usize)
            .and_then(Option::as_ref)
            .map(|b| &*b.rules)
    }
}

struct Ctx<'a, 'o> {
    env: XlateEnv<'a>,
    /// Bridge 0's rules and ports (what `env` was given).
    root: (&'a RuleSet, &'a [u32]),
    out: &'o mut Translation,
    flow: FlowKey,
    /// Fields written by actions and not yet committed.
    dirty: FlowKey,
    /// Nesting of resubmits (and the trace's indentation).
    depth: u32,
    /// Of which those to the same or an earlier table (OVS's `depth`).
    deep: u32,
    resubmits: u32,
    error: Option<XlateDrop>,
    reason: Option<XlateDrop>,
    /// For each VLAN slot of `flow`, which tag of the original packet it
    /// is (None: pushed by an action, or nothing). Wildcard bits about a
    /// slot are recorded against that original tag.
    vlan_origin: [Option<usize>; 2],
    /// The packet's tags as the datapath actions so far leave them (OVS's
    /// base flow), with the original tag behind each.
    base_tci: [u16; 2],
    base_tpid: [u16; 2],
    base_origin: [Option<usize>; 2],
    /// Whether an action changed the flow's tags since the last commit.
    vlans_touched: bool,
    /// The ARP fields as the packet has them after the last commit.
    arp_base: FlowKey,
    /// A later ICMP fragment's type and code as OVS's base flow has them
    /// (0, 0: not parsed) after the last commit.
    icmp_later_base: (u16, u16),
    /// The rule whose actions run: table, cookie, whether it is a
    /// table-miss rule (for packet-ins).
    running: (u8, u64, bool),
    /// Its index in the translation's `rules` (none: a packet-out's own
    /// actions).
    running_ix: Option<usize>,
    /// The OpenFlow action set (write_actions), run when the pipeline
    /// ends: at most one action of each kind, one set_field per field.
    action_set: Vec<Action>,
    /// Running the action set now.
    in_action_set: bool,
    /// Running a packet-out's actions (and the tables they lead to).
    in_packet_out: bool,
    /// Groups being run, nested.
    group_depth: u32,
    /// How much of the packet the flow no longer describes (after a pop
    /// of MPLS or PBB): an action that needs more freezes the translation.
    stale: encap::Stale,
    /// The translation being frozen for a recirculation: set where an
    /// action needed a re-parsed packet; each action list on the way out
    /// adds what it had left to run ([`crate::recirc`]).
    frozen: Option<crate::recirc::Frozen>,
    /// A select group the datapath chooses per packet, waiting for the
    /// end of the translation ([`select`]).
    select: Option<select::Pending>,
    /// How many `check_pkt_larger` forks are being translated, nested
    /// ([`fork`]).
    forks: u32,
    /// Datapath actions moved into the branches of forks: they count
    /// against [`MAX_DP_ACTIONS`] with those of the list.
    forked: usize,
    /// The packet's stack (`push:`, `pop:`), bits as pushed; empty until
    /// a push (no allocation before).
    stack: Vec<u128>,
    /// The packet-in of a `controller(pause)`, waiting for the frozen
    /// state's id (its continuation).
    paused: Option<Box<crate::dpaction::PacketInAction>>,
    /// The flow's connection tracking fields are what the translation
    /// wrote (none, after a `ct` or `ct_clear`), not the packet's: putting
    /// them back after a copy reads nothing of the packet.
    ct_written: bool,
    /// A `CtRestore` puts back the packet's own connection tracking state:
    /// unless it is dropped as the last action (it changes nothing then),
    /// the megaflow matches that state ([`Ctx::finish_ct_restores`]).
    ct_restores_packet: bool,
    /// The current bridge's mirrors (bits) that have copied the packet
    /// ([`mirror`]).
    mirrored: u32,
}

/// Translates `key` through the tables, starting at table 0.
pub fn translate(env: XlateEnv<'_>, key: &FlowKey, out: &mut Translation, want_trace: bool) {
    run(env, key, out, want_trace, None);
}

/// An action's place in the action set: its order of execution (OpenFlow
/// 1.3 section 5.10) and what makes two of them the same kind (one
/// set_field per field).
fn set_kind(a: &Action) -> (u8, &'static str) {
    match a {
        Action::CopyTtlIn => (0, ""),
        Action::PopVlan => (1, "vlan"),
        Action::PopMpls(_) => (1, "mpls"),
        Action::PopPbb => (1, "pbb"),
        Action::PushMpls(_) => (2, ""),
        Action::PushPbb(_) => (3, ""),
        Action::PushVlan(_) => (4, ""),
        Action::CopyTtlOut => (5, ""),
        Action::DecTtl | Action::DecTtlIds(_) => (6, "ip"),
        Action::DecMplsTtl => (6, "mpls"),
        Action::SetField { field, .. } => (7, field.name),
        Action::ModVlanVid(_) => (7, "vlan_vid"),
        Action::ModVlanPcp(_) => (7, "vlan_pcp"),
        Action::SetMplsTtl(_) => (7, "mpls_ttl"),
        Action::Group(_) => (8, ""),
        _ => (9, ""),
    }
}

fn is_output(a: &Action) -> bool {
    matches!(
        a,
        Action::Output(_)
            | Action::InPort
            | Action::All
            | Action::Flood
            | Action::Normal
            | Action::OutputReg(_)
            | Action::Controller { .. }
    ) || matches!(a, Action::Bundle(b) if b.dst.is_none())
}

/// Translates an action list given with the packet instead of found in the
/// tables (OpenFlow's packet-out): `resubmit(,0)` (output to `TABLE`)
/// runs the packet through the tables from table 0.
pub fn translate_actions(
    env: XlateEnv<'_>,
    key: &FlowKey,
    actions: &[Action],
    out: &mut Translation,
) {
    run(env, key, out, false, Some(actions));
}

fn run(
    env: XlateEnv<'_>,
    key: &FlowKey,
    out: &mut Translation,
    want_trace: bool,
    given: Option<&[Action]>,
) {
    out.actions.clear();
    out.rules.clear();
    out.wc = FlowKey::default();
    out.outputs = 0;
    out.drop = None;
    out.learn = sluice_bridge::macs::Learns::NONE;
    out.learned.clear();
    out.mac_reads.clear();
    out.fin_timeouts.clear();
    out.trace = want_trace.then(Vec::new);
    let mut cx = Ctx {
        env,
        root: (env.rules, env.ports),
        out,
        flow: *key,
        dirty: FlowKey::default(),
        depth: 0,
        deep: 0,
        resubmits: 0,
        error: None,
        reason: None,
        vlan_origin: [Some(0), Some(1)],
        base_tci: key.vlan_tci,
        base_tpid: key.vlan_tpid,
        base_origin: [Some(0), Some(1)],
        group_depth: 0,
        vlans_touched: false,
        arp_base: *key,
        icmp_later_base: (0, 0),
        // No rule runs a packet-out's actions: their packet-ins carry
        // OVS's "no cookie" (all ones), as `ctx->rule` NULL does.
        running: (0, if given.is_some() { u64::MAX } else { 0 }, false),
        running_ix: None,
        action_set: Vec::new(),
        in_action_set: false,
        in_packet_out: given.is_some(),
        stale: encap::Stale::None,
        frozen: None,
        select: None,
        forks: 0,
        forked: 0,
        stack: Vec::new(),
        paused: None,
        ct_written: false,
        ct_restores_packet: false,
        mirrored: 0,
    };
    if key.is_ip() {
        // Every IP decision depends on whether the packet is a fragment
        // (OVS unwildcards nw_frag for all IP traffic likewise).
        cx.out.wc.nw_frag = 0xff;
    }
    if env.rules.modes().frag_handling == FragHandling::Drop {
        // The drop decision reads nw_frag for every packet: a megaflow made
        // by a non-IP packet must not also take IP fragments.
        cx.out.wc.nw_frag |= FRAG_ANY;
    }
    if key.nw_frag & FRAG_ANY != 0 && env.rules.modes().frag_handling == FragHandling::Drop {
        cx.error = Some(XlateDrop::Fragment);
    } else if !env.bridges.is_empty() && key.recirc_id == 0 && !cx.enter_input_bridge() {
        // (A resumed pass enters the bridge it was frozen in.)
    } else if key.recirc_id != 0 {
        cx.resume(key.recirc_id);
    } else if let Some(actions) = given {
        // output:TABLE runs the pipeline, action set included.
        cx.mirror_ingress();
        cx.actions(actions, 0);
        cx.run_action_set();
    } else if !cx.underlay_input() && cx.tunnel_receive() {
        cx.mirror_ingress();
        cx.table(0, true);
        cx.run_action_set();
    }
    cx.finish_freeze();
    cx.finish_select();
    cx.finish_ct_restores();
    cx.out.final_flow = cx.flow;
    if let Some(e) = cx.error {
        cx.out.actions.clear();
        cx.out.outputs = 0;
        cx.out.drop = Some(e);
        cx.note(0, &format!(">> {}: the packet is dropped", e.name()));
    } else if cx.out.outputs == 0 {
        cx.out.drop = Some(cx.reason.unwrap_or(XlateDrop::NoOutput));
    }
    // The in_port and the datapath pass are always part of the decision
    // (the datapath keys on them), and so is the EtherType, as OVS's
    // xlate_wc_init has it: an IPv4 packet's megaflow is never an ARP
    // packet's, and `dpctl/dump-flows` shows OVS's `eth_type(...)`.
    cx.out.wc.in_port = u32::MAX;
    cx.out.wc.recirc_id = u32::MAX;
    cx.out.wc.dl_type = u16::MAX;
}

/// Whether `acts` (or a branch in them) restores connection tracking state.
/// The bits of a table's wildcards that go into the megaflow's: all but
/// the pipeline's own fields. Metadata and the registers are zero in
/// every packet and what the tables write into them follows from
/// decisions whose bits are already there (the tunnel fields are not: a
/// packet from a tunnel carries them); so is the conjunction a lookup
/// found (set for its second lookup only), and the action set's output
/// (it follows from the decisions that wrote it); the tags go through
/// their own commit.
fn merged_bits() -> &'static FlowKey {
    static BITS: std::sync::OnceLock<FlowKey> = std::sync::OnceLock::new();
    BITS.get_or_init(|| {
        let mut m = FlowKey::default();
        m.words_mut().fill(!0);
        m.metadata = 0;
        m.regs = [0; sluice_packet::key::N_REGS];
        m.conj_id = 0;
        m.pkt_mark = 0;
        m.actset_output = 0;
        m.vlan_tci = [0; 2];
        m.vlan_tpid = [0; 2];
        m
    })
}

/// The bits of a copy's written fields that stay marked written after it
/// ([`Ctx::in_copy`]): all but the tags' and the pipeline's fields.
fn copy_dirty_bits() -> &'static FlowKey {
    static BITS: std::sync::OnceLock<FlowKey> = std::sync::OnceLock::new();
    BITS.get_or_init(|| {
        let mut m = FlowKey::default();
        m.words_mut().fill(!0);
        m.vlan_tci = [0; 2];
        m.vlan_tpid = [0; 2];
        m.metadata = 0;
        m.regs = [0; sluice_packet::key::N_REGS];
        m
    })
}

fn has_ct_restore(acts: &[DpAction]) -> bool {
    acts.iter().any(|a| match a {
        DpAction::CtRestore(_) => true,
        DpAction::CheckPktLen { gt, le, .. } => has_ct_restore(gt) || has_ct_restore(le),
        DpAction::Select(sel) => sel.variants.iter().any(|(_, v)| has_ct_restore(v)),
        _ => false,
    })
}

impl Ctx<'_, '_> {
    fn note(&mut self, depth: u32, s: &str) {
        if let Some(t) = &mut self.out.trace {
            t.push(format!("{}{}", "    ".repeat(depth as usize + 1), s));
        }
    }

    fn table(&mut self, t: u8, pipeline: bool) {
        // (Its lookup below reads the flow in place, its action set's
        // output put in and taken out again: no copy of the key.)
        if self.error.is_some() {
            return;
        }
        let rules = self.env.rules;
        let mut wc = FlowKey::default();
        let fail_open = rules.fail_open().filter(|_| t == 0);
        let found = if let Some(r) = fail_open {
            // Fail-open: OVS's hidden rule above table 0's own (any
            // lookup there, a resubmit's too, finds it).
            Some(r)
        } else {
            // The tables also see the action set's output
            // (`actset_output`).
            // (Written only when it differs: a narrow store there makes
            // the word reads of the flow after it wait.)
            let before = self.flow.actset_output;
            let now = self.actset_output();
            if now != before {
                self.flow.actset_output = now;
            }
            let found = if self.flow.nw_frag & FRAG_ANY != 0
                && rules.modes().frag_handling == FragHandling::Normal
            {
                // OVS's `normal` mode: the tables see no L4 fields in a
                // fragment (the actions still see the packet as it is).
                let mut seen = self.flow;
                seen.tp_src = 0;
                seen.tp_dst = 0;
                rules.lookup(t, &seen, &mut wc)
            } else {
                rules.lookup(t, &self.flow, &mut wc)
            };
            if now != before {
                self.flow.actset_output = before;
            }
            found
        };
        self.merge_wc(&wc);
        let Some(rule) = found else {
            // Counted as a miss of this table (TABLE statistics).
            self.out.rules.push(Arc::clone(rules.miss_counter(t)));
            if let Some(tr) = &mut self.out.trace {
                tr.push(format!(
                    "{}{t}. No match.",
                    "    ".repeat(self.depth as usize)
                ));
            }
            if pipeline {
                self.reason = Some(XlateDrop::TableMiss);
                self.note(self.depth, "drop");
            }
            return;
        };
        if self.out.trace.is_some() {
            let m = rule.matcher.to_string();
            let mut head = format!("{}{t}. ", "    ".repeat(self.depth as usize));
            if !m.is_empty() {
                head += &m;
                head += ", ";
            }
            head += &format!("priority {}", rule.priority);
            if rule.cookie != 0 {
                head += &format!(", cookie {:#x}", rule.cookie);
            }
            self.out.trace.as_mut().expect("checked").push(head);
            if rule.actions.is_empty() {
                self.note(self.depth, &format_actions(&rule.actions));
            }
        }
        self.out.rules.push(Arc::clone(rule));
        let outer = (self.running, self.running_ix);
        let miss = rule.priority == 0 && rule.matcher.mask == FlowKey::default();
        self.running = (t, rule.cookie, miss);
        self.running_ix = Some(self.out.rules.len() - 1);
        self.actions(&rule.actions, t);
        (self.running, self.running_ix) = outer;
    }

    fn actions(&mut self, actions: &[Action], table: u8) {
        for (i, a) in actions.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            if self.frozen.is_none() && self.must_freeze(a) {
                self.start_freeze(table);
            }
            if let Some(f) = &mut self.frozen {
                f.actions.extend_from_slice(&actions[i..]);
                return;
            }
            if self.out.trace.is_some() {
                self.note(self.depth, &a.to_string());
            }
            match *a {
                Action::Output(p) => self.output(p),
                Action::InPort => {
                    self.out.wc.in_port = u32::MAX;
                    self.emit_output(self.flow.in_port);
                }
                Action::All | Action::Flood => {
                    self.out.wc.in_port = u32::MAX;
                    let ports = self.env.ports;
                    for &p in ports {
                        if p != self.flow.in_port {
                            self.emit_output(p);
                        }
                    }
                }
                Action::Normal => self.normal(),
                Action::Clone(ref inner) => self.clone_actions(inner, table),
                Action::OutputReg(src) => self.output_reg(src),
                // A clause of a conjunction: its rule is never a lookup's
                // result, so this never runs.
                Action::Note(_) | Action::Conjunction { .. } => {}
                // No IPFIX exporter, no QoS queue: nothing a port sees.
                Action::Sample(_) | Action::SetQueue(_) | Action::PopQueue => {}
                Action::Learn(ref l) => self.learn(l),
                Action::Controller { max_len, ref opts } => {
                    self.controller(max_len, opts.as_deref())
                }
                Action::SetField {
                    field,
                    value,
                    legacy,
                } => self.set_field(field, value, legacy.is_some()),
                Action::Load { field, value, mask } => self.load(field, value, mask),
                Action::Multipath(ref mp) => self.multipath(mp),
                Action::FinTimeout { idle, hard } => self.fin_timeout(idle, hard),
                Action::Bundle(ref b) => self.bundle(b),
                Action::CheckPktLarger { len, dst } => {
                    // The rest of this list runs in the fork's branches.
                    return self.check_pkt_larger(len, dst, &actions[i + 1..], table);
                }
                Action::Ct(ref ct) => self.conntrack(ct, table),
                Action::CtClear => self.ct_clear(),
                Action::Move { src, dst } => self.move_bits(src, dst),
                Action::Stack { pop: false, sf } => self.stack_push(sf),
                Action::Stack { pop: true, sf } => self.stack_pop(sf),
                Action::ModVlanVid(vid) => self.set_vlan_bits(tci::VID_MASK, vid),
                Action::ModVlanPcp(pcp) => {
                    self.set_vlan_bits(tci::PCP_MASK, (pcp as u16) << tci::PCP_SHIFT)
                }
                Action::PushVlan(tpid) => self.push_vlan(tpid),
                Action::PopVlan => {
                    self.unwc_vlan(0, tci::PRESENT, 0);
                    if self.flow.vlan_tci[0] & tci::PRESENT != 0 {
                        self.flow.vlan_tci = [self.flow.vlan_tci[1], 0];
                        self.flow.vlan_tpid = [self.flow.vlan_tpid[1], 0];
                        self.vlan_origin = [self.vlan_origin[1], None];
                        self.vlans_touched = true;
                    }
                }
                Action::DecTtl | Action::DecTtlIds(_) => {
                    self.out.wc.dl_type = 0xffff;
                    if self.flow.is_ip() {
                        self.out.wc.nw_ttl = 0xff;
                        if self.flow.nw_ttl > 1 {
                            self.flow.nw_ttl -= 1;
                            self.dirty.nw_ttl = 0xff;
                        } else {
                            match actions[i] {
                                Action::DecTtlIds(ref ids) => self.ttl_packet_ins(ids),
                                _ => self.ttl_packet_ins(&[0]),
                            }
                            self.reason = Some(XlateDrop::InvalidTtl);
                            self.note(self.depth, ">> IPv4/IPv6 TTL exception: the rest of this action list is skipped");
                            return;
                        }
                    }
                }
                Action::Resubmit { in_port, table: t } => {
                    self.resubmit(in_port, t.unwrap_or(table), false);
                }
                Action::GotoTable(t) => self.resubmit(None, t, true),
                Action::Group(g) => self.group(g, table),
                Action::WriteActions(ref set) => {
                    for a in set {
                        let kind = set_kind(a);
                        self.action_set.retain(|b| set_kind(b) != kind);
                        self.action_set.push(a.clone());
                    }
                }
                Action::ClearActions => self.action_set.clear(),
                Action::WriteMetadata { value, mask } => {
                    self.flow.metadata = (self.flow.metadata & !mask) | (value & mask);
                }
                Action::PushMpls(t) => self.push_mpls(t),
                Action::PopMpls(t) => self.pop_mpls(t),
                Action::SetMplsTtl(ttl) => self.set_mpls_ttl(ttl),
                Action::DecMplsTtl => {
                    if !self.dec_mpls_ttl() {
                        return;
                    }
                }
                Action::CopyTtlOut => self.copy_ttl(true),
                Action::CopyTtlIn => self.copy_ttl(false),
                Action::PushPbb(t) => self.push_pbb(t),
                Action::Meter(m) => {
                    let Some(meter) = self.env.rules.meter(m) else {
                        self.note(self.depth, &format!(">> no meter {m}"));
                        self.reason = Some(XlateDrop::NoSuchMeter);
                        return;
                    };
                    if self.env.bridge == 0 {
                        self.push(DpAction::Meter(m));
                    } else {
                        let held = crate::dpaction::HeldMeter(Arc::clone(meter));
                        self.push(DpAction::HeldMeter(held));
                    }
                }
                Action::PopPbb => self.pop_pbb(),
            }
        }
    }

    /// Records that the decision looked at `tci`/`tpid` bits of VLAN slot
    /// `slot` of the current flow.
    fn unwc_vlan(&mut self, slot: usize, tci: u16, tpid: u16) {
        if let Some(o) = self.vlan_origin[slot] {
            self.out.wc.vlan_tci[o] |= tci;
            self.out.wc.vlan_tpid[o] |= tpid;
        }
    }

    /// Adds the bits a lookup on the current flow consulted, mapping VLAN
    /// slots back to the original packet's tags.
    fn merge_wc(&mut self, wc: &FlowKey) {
        // (ORed through a mask: no copy of the key per table.)
        self.out.wc.or_assign_masked(wc, merged_bits());
        for slot in 0..2 {
            self.unwc_vlan(slot, wc.vlan_tci[slot], wc.vlan_tpid[slot]);
        }
    }

    /// The action set's output port, 16-bit (`actset_output`): `UNSET`
    /// without an output, or with a group beside it, as Open vSwitch
    /// keeps it.
    fn actset_output(&self) -> u16 {
        let mut port = None;
        for a in &self.action_set {
            // (Reserved ports are outputs to them in OpenFlow.)
            port = match a {
                Action::Group(_) => return crate::fields::port16(crate::fields::OFPP_UNSET),
                Action::Output(p) => Some(*p),
                Action::InPort => Some(0xffff_fff8),
                Action::Normal => Some(0xffff_fffa),
                Action::Flood => Some(0xffff_fffb),
                Action::All => Some(0xffff_fffc),
                Action::Controller { opts: None, .. } => Some(0xffff_fffd),
                _ => port,
            };
        }
        crate::fields::port16(port.unwrap_or(crate::fields::OFPP_UNSET))
    }

    fn push(&mut self, a: DpAction) {
        if self.out.actions.len() + self.forked >= MAX_DP_ACTIONS {
            self.error = Some(XlateDrop::TooManyActions);
            return;
        }
        self.out.actions.push(a);
    }

    /// `push_vlan`: a new outermost tag (VID 0, PCP 0). The flow tracks two
    /// tags, as OVS's (FLOW_MAX_VLAN_HEADERS): a third push forgets the
    /// innermost, and the commit then leaves it out of the packet, as OVS.
    fn push_vlan(&mut self, tpid: u16) {
        let mut new = tci::PRESENT;
        if self.env.rules.modes().push_vlan == crate::table::PushVlan::Spec {
            // OpenFlow 1.3: the new tag copies the outer one's VID and PCP
            // (which the decision then reads, presence included).
            self.unwc_vlan(0, 0xffff, 0);
            if self.flow.vlan_tci[0] & tci::PRESENT != 0 {
                new = self.flow.vlan_tci[0];
            }
        }
        self.flow.vlan_tci = [new, self.flow.vlan_tci[0]];
        self.flow.vlan_tpid = [tpid, self.flow.vlan_tpid[0]];
        self.vlan_origin = [None, self.vlan_origin[0]];
        self.vlans_touched = true;
    }

    /// `mod_vlan_vid` / `mod_vlan_pcp`: the bits `mask` of the outermost
    /// tag, if there is one (the parser puts a `push_vlan` before these
    /// where the rule does not guarantee a tag, as OpenFlow 1.3 does).
    /// On a packet whose tag an earlier action popped, `mod_vlan_vid`
    /// makes the tag again (PCP 0), as OVS, which sends it as
    /// `set_field:VID|OFPVID_PRESENT->vlan_vid` over OpenFlow 1.3 and whose
    /// OpenFlow 1.0 set_vlan_vid pushes a tag where there is none;
    /// `mod_vlan_pcp` (a set_field of vlan_pcp over 1.3) is skipped.
    fn set_vlan_bits(&mut self, mask: u16, bits: u16) {
        self.unwc_vlan(0, mask | tci::PRESENT, 0);
        if self.flow.vlan_tci[0] & tci::PRESENT == 0 {
            if mask == tci::VID_MASK {
                self.tag_again(bits, ">> no VLAN tag: mod_vlan_vid makes one");
                return;
            }
            self.note(self.depth, ">> no VLAN tag: skipped");
            return;
        }
        self.flow.vlan_tci[0] = (self.flow.vlan_tci[0] & !mask) | bits;
        self.vlans_touched = true;
    }

    /// A tag again where an earlier action popped the packet's: VID `vid`,
    /// PCP 0, TPID 0x8100 (OVS's flow_set_vlan_vid and flow_fix_vlan_tpid).
    fn tag_again(&mut self, vid: u16, why: &str) {
        self.flow.vlan_tci[0] = tci::PRESENT | vid;
        if self.flow.vlan_tpid[0] == 0 {
            self.flow.vlan_tpid[0] = 0x8100;
        }
        self.vlan_origin[0] = None;
        self.vlans_touched = true;
        self.note(self.depth, why);
    }

    /// Makes the packet's tags those of the flow, as OVS's
    /// commit_vlan_action: the tags both have innermost are kept, the
    /// packet's others popped and the flow's others pushed (one tag
    /// changed in place is a set). Every original tag compared or popped
    /// is un-wildcarded in full, its presence too.
    fn commit_vlans(&mut self) {
        if !self.vlans_touched {
            return;
        }
        self.vlans_touched = false;
        // How many tags the packet has decides what is popped.
        self.out.wc.vlan_tci[0] |= tci::PRESENT;
        self.out.wc.vlan_tci[1] |= tci::PRESENT;
        let count = |t: &[u16; 2]| t.iter().take_while(|t| *t & tci::PRESENT != 0).count();
        let (mut b, mut f) = (count(&self.base_tci), count(&self.flow.vlan_tci));
        while b > 0 && f > 0 {
            self.unwc_base(b - 1);
            self.unwc_vlan(f - 1, 0xffff, 0xffff);
            let same = self.base_tci[b - 1] == self.flow.vlan_tci[f - 1]
                && self.base_tpid[b - 1] == self.flow.vlan_tpid[f - 1];
            if !same {
                break;
            }
            b -= 1;
            f -= 1;
        }
        if b == 1 && f == 1 && self.base_tpid[0] == self.flow.vlan_tpid[0] {
            self.push(DpAction::SetVlanTci(self.flow.vlan_tci[0] & !tci::PRESENT));
        } else {
            for slot in 0..b {
                self.unwc_base(slot);
                self.push(DpAction::PopVlan);
            }
            for slot in (0..f).rev() {
                self.push(DpAction::PushVlan {
                    tpid: self.flow.vlan_tpid[slot],
                    tci: self.flow.vlan_tci[slot] & !tci::PRESENT,
                });
            }
        }
        self.base_tci = self.flow.vlan_tci;
        self.base_tpid = self.flow.vlan_tpid;
        self.base_origin = self.vlan_origin;
    }

    /// Un-wildcards the original tag behind slot `slot` of the packet as
    /// the datapath actions so far leave it.
    fn unwc_base(&mut self, slot: usize) {
        if let Some(o) = self.base_origin[slot] {
            self.out.wc.vlan_tci[o] = 0xffff;
            self.out.wc.vlan_tpid[o] = 0xffff;
        }
    }

    fn output(&mut self, p: u32) {
        self.out.wc.in_port = u32::MAX;
        if p == self.flow.in_port {
            self.note(self.depth, ">> skipping output to input port");
            self.reason = Some(XlateDrop::OutputToInPort);
            return;
        }
        self.emit_output(p);
    }

    /// `clone(...)`, as OVS's `xlate_clone` without a datapath clone:
    /// the actions run on the flow, then the flow, its pipeline state and
    /// the action set are back as they were; the header fields the clone
    /// changed are marked written, so the next output sets them back.
    fn clone_actions(&mut self, inner: &[Action], table: u8) {
        self.in_copy(|cx| cx.actions(inner, table));
    }

    /// Runs `run` on a copy of the packet: afterwards the flow, its
    /// pipeline state and the action set are back as they were, and the
    /// header fields the copy changed are marked written, so the next
    /// output sets them back. A recirculation `run` leaves unfinished is
    /// refused (false).
    fn in_copy(&mut self, run: impl FnOnce(&mut Self)) -> bool {
        self.in_copy_with(|cx, _| run(cx))
    }

    /// [`Ctx::in_copy`], `run` given the flow as it was before it (the
    /// one put back after).
    fn in_copy_with(&mut self, run: impl FnOnce(&mut Self, &FlowKey)) -> bool {
        let (flow, dirty, origin, stale, ct_written) = (
            self.flow,
            self.dirty,
            self.vlan_origin,
            self.stale,
            self.ct_written,
        );
        // (An empty action set, most often, is taken rather than copied.)
        let set = if self.action_set.is_empty() {
            Vec::new()
        } else {
            self.action_set.clone()
        };
        let frozen = self.frozen.is_some();
        let start = self.out.actions.len();
        run(self, &flow);
        // The copy's connection tracking (OVN's logical patches are
        // `clone(ct_clear, ..., resubmit)`): the packet's own state comes
        // back, and addresses a NAT rewrote are set back at the next
        // output.
        let tracked = self.out.actions.get(start..).is_some_and(|a| {
            a.iter()
                .any(|a| matches!(a, DpAction::Ct(_) | DpAction::CtClear))
        });
        let natted = self.out.actions.get(start..).is_some_and(|a| {
            a.iter()
                .any(|a| matches!(a, DpAction::Ct(r) if r.nat.is_some()))
        });
        if !frozen && self.frozen.is_some() {
            // The copy would need a recirculation of its own.
            self.note(
                self.depth,
                ">> a clone that needs the packet parsed again: not supported",
            );
            self.frozen = None;
            self.paused = None;
            self.error = Some(XlateDrop::Recirc);
            return false;
        }
        // What the copy changed, bit by bit (nothing, most often: one
        // comparison then, and nothing to put back).
        let same = self.flow == flow;
        let xor = (!same).then(|| {
            let mut xor = FlowKey::default();
            for ((c, x), y) in xor
                .words_mut()
                .iter_mut()
                .zip(self.flow.words())
                .zip(flow.words())
            {
                *c = x ^ y;
            }
            xor
        });
        // The fields written before, and those the copy changed; but the
        // tags, which go back through their own commit, and the
        // pipeline's fields, which are not the packet's (whole words
        // written: a commit reads them next).
        let (kept, x) = (copy_dirty_bits().words(), xor.as_ref().map(FlowKey::words));
        for (i, d) in self.dirty.words_mut().iter_mut().enumerate() {
            *d = (dirty.words()[i] | x.map_or(0, |x| x[i])) & kept[i];
        }
        if let Some(xor) = &xor {
            // Setting a field back writes the packet's own value: the
            // decision reads every bit of each field the copy changed.
            for f in crate::fields::all_fields() {
                if f.writable && !f.is_pipeline() && (f.get)(xor) != 0 {
                    let mut wc = self.out.wc;
                    (f.put)(&mut wc, (f.get)(&self.out.wc) | f.full_mask());
                    self.out.wc = wc;
                }
            }
            self.flow = flow;
        }
        self.ct_written = ct_written;
        if tracked {
            self.restore_ct();
        }
        if natted {
            for name in [
                "nw_src", "nw_dst", "ipv6_src", "ipv6_dst", "tp_src", "tp_dst",
            ] {
                let Some(f) = crate::fields::field_by_name(name) else {
                    continue;
                };
                if self.present(f, f.prereq) {
                    (f.put)(&mut self.dirty, f.full_mask());
                    self.unwc_read(f, f.full_mask());
                }
            }
        }
        self.vlan_origin = origin;
        self.vlans_touched = true;
        self.action_set = set;
        self.stale = stale;
        true
    }

    /// The packet's connection tracking state as the flow holds it, back
    /// in the datapath (after a copy's `ct` or `ct_clear`); the megaflow
    /// matches it where it is the packet's. After a `ct_clear` before the
    /// copy (OVN's router pipeline clears, then crosses to the next switch
    /// in a `clone`) it is a constant, and the megaflow stays wide: matching
    /// the connection's tuple made a megaflow per connection.
    fn restore_ct(&mut self) {
        self.push(DpAction::CtRestore(Box::new(
            sluice_conntrack::CtResult::of_key(&self.flow),
        )));
        self.ct_restores_packet |= !self.ct_written;
    }

    /// Restores at the end of the actions change nothing (the packet went
    /// where it goes before them: a clone's `ct` then the packet's own
    /// recirculation, as OVN's logical patches end): dropped. If one that
    /// puts back the packet's own state is left, the megaflow matches that
    /// state, every field of it.
    fn finish_ct_restores(&mut self) {
        while matches!(self.out.actions.last(), Some(DpAction::CtRestore(_))) {
            self.out.actions.pop();
        }
        if !self.ct_restores_packet || !has_ct_restore(&self.out.actions) {
            return;
        }
        let wc = &mut self.out.wc;
        wc.ct_state = !0;
        wc.ct_zone = !0;
        wc.ct_mark = !0;
        wc.ct_label = [!0; 2];
        wc.ct_nw_proto = !0;
        wc.ct_tp_src = !0;
        wc.ct_tp_dst = !0;
        wc.ct_nw_src = !0;
        wc.ct_nw_dst = !0;
        wc.ct_ipv6_src = [!0; 16];
        wc.ct_ipv6_dst = [!0; 16];
    }

    /// `output:FIELD`, as OVS's `xlate_output_reg_action`: the port the
    /// bits hold, OpenFlow 1.0's numbering (reserved ports from 0xfff8).
    fn output_reg(&mut self, src: crate::subfield::Subfield) {
        if !self.present(src.field, src.field.prereq) {
            return;
        }
        let v = src.read(&self.flow);
        self.unwc_read(src.field, src.mask());
        let Ok(p) = u16::try_from(v) else {
            return self.note(self.depth, &format!(">> output port {v} is out of range"));
        };
        // A reserved port is the action that names it.
        match Action::of10_port(p) {
            Some(Action::Output(p)) => self.output(p),
            Some(a) => self.actions(&[a], self.running.0),
            None => self.note(
                self.depth,
                &format!(">> output to reserved port {v:#x}: nothing"),
            ),
        }
    }

    /// `fin_timeout`: on TCP, the megaflow tells FIN and RST apart (the
    /// flags OVS's datapath flow accumulates for its translation cache),
    /// and a packet with either lowers the running rule's timeouts.
    fn fin_timeout(&mut self, idle: u16, hard: u16) {
        const FIN_RST: u16 = 0x001 | 0x004;
        // Whether the packet is TCP with a header is read too: a megaflow
        // of another protocol must not serve a FIN.
        self.out.wc.dl_type = 0xffff;
        if !self.flow.is_ip() {
            return;
        }
        self.out.wc.nw_proto = 0xff;
        self.out.wc.nw_frag |= 2;
        if self.flow.nw_proto != 6 || self.flow.nw_frag & 2 != 0 {
            return;
        }
        self.out.wc.tcp_flags |= FIN_RST;
        if let Some(ix) = self
            .running_ix
            .filter(|_| self.flow.tcp_flags & FIN_RST != 0)
        {
            self.note(
                self.depth + 1,
                &format!("-> the rule's timeouts lowered to idle {idle}, hard {hard}"),
            );
            self.out.fin_timeouts.push((ix, idle, hard));
        }
    }

    /// `bundle` / `bundle_load`: the member a port of the switch, chosen
    /// as OVS chooses it, is output to or loaded (`OFPP_NONE`, 0xffff,
    /// when no member is up).
    fn bundle(&mut self, b: &crate::bundle::Bundle) {
        let ports = self.env.ports;
        let flow = self.flow;
        let p = b.choose(&flow, &mut self.out.wc, |p| ports.binary_search(&p).is_ok());
        match b.dst {
            Some(d) => {
                if self.out.trace.is_some() {
                    let v = crate::fields::c_hex(u128::from(p));
                    self.note(self.depth + 1, &format!("-> {d} is now {v}"));
                }
                self.load(d.field, d.place(u128::from(p)), d.mask())
            }
            None if p == crate::bundle::NONE => {
                self.note(self.depth, ">> bundle: no member is up");
            }
            None => self.output(p),
        }
    }

    fn emit_output(&mut self, p: u32) {
        if self.env.ports.binary_search(&p).is_err() {
            self.note(self.depth, &format!(">> output to nonexistent port {p}"));
            self.reason = Some(XlateDrop::NoSuchPort);
            return;
        }
        if let Some(patch) = self.patch_port(p) {
            self.patch_output(patch);
            return;
        }
        if let Some(cfg) = self.tunnel_port(p) {
            self.tunnel_output(p, &cfg);
            self.mirror_egress(p);
            return;
        }
        if self.device_output(p) {
            return;
        }
        self.commit();
        let dp = self.dp(p);
        self.push(DpAction::Output(dp));
        self.out.outputs += 1;
        self.mirror_egress(p);
    }

    /// Runs the action set at the end of the pipeline, in the order of
    /// OpenFlow 1.3 section 5.10: pop, push, decrement TTL, set-field,
    /// output (the controller being an output).
    fn run_action_set(&mut self) {
        if self.action_set.is_empty() || self.error.is_some() || self.frozen.is_some() {
            return;
        }
        let mut set = std::mem::take(&mut self.action_set);
        set.sort_by_key(|a| set_kind(a).0);
        // With a group in the set, its output is not run (spec 5.10).
        if set.iter().any(|a| matches!(a, Action::Group(_))) {
            set.retain(|a| set_kind(a).0 != 9 || !is_output(a));
        }
        if self.out.trace.is_some() {
            self.note(
                0,
                &format!("action set: {}", crate::action::format_list(&set)),
            );
        }
        let table = self.running.0;
        self.in_action_set = true;
        self.actions(&set, table);
        self.in_action_set = false;
    }

    fn resubmit(&mut self, in_port: Option<u32>, t: u8, goto: bool) {
        // As OVS: only a resubmit to this table or an earlier one deepens
        // (a pipeline going forward, OVN's 60 tables and more, does not);
        // the nesting itself is bounded by the tables forward and
        // MAX_DEPTH deepenings.
        let deepens = t <= self.running.0;
        if (deepens && self.deep >= MAX_DEPTH) || self.depth >= MAX_NESTING {
            self.error = Some(XlateDrop::RecursionTooDeep);
            return;
        }
        if !goto {
            self.resubmits += 1;
            if self.resubmits > MAX_RESUBMITS {
                self.error = Some(XlateDrop::TooManyResubmits);
                return;
            }
        }
        let saved = self.flow.in_port;
        if let Some(p) = in_port {
            self.flow.in_port = p;
        }
        self.depth += 1;
        self.deep += u32::from(deepens);
        self.table(t, goto);
        self.deep -= u32::from(deepens);
        self.depth -= 1;
        self.flow.in_port = saved;
    }

    /// Un-wildcards what testing a prerequisite on the flow reads.
    fn unwildcard_prereq(&mut self, p: Prereq) {
        match p {
            Prereq::None => {}
            Prereq::Ct => self.out.wc.ct_state = 0xff,
            Prereq::CtIpv4 | Prereq::CtIpv6 => {
                self.out.wc.ct_state = 0xff;
                self.out.wc.dl_type = 0xffff;
            }
            Prereq::Vlan => self.unwc_vlan(0, tci::PRESENT, 0),
            Prereq::Nd => {
                self.out.wc.dl_type = 0xffff;
                self.out.wc.nw_proto = 0xff;
                self.out.wc.tp_src = 0xffff;
                self.out.wc.tp_dst = 0xffff;
            }
            Prereq::L4 | Prereq::Tcp | Prereq::Udp | Prereq::Sctp | Prereq::IpNotLater => {
                self.out.wc.dl_type = 0xffff;
                self.out.wc.nw_proto = 0xff;
                self.out.wc.nw_frag |= FRAG_LATER;
            }
            _ => {
                self.out.wc.dl_type = 0xffff;
                self.out.wc.nw_proto = 0xff;
            }
        }
    }

    /// Whether the packet has `field` (its prerequisite `prereq`, which
    /// the decision then depends on); a note in the trace if not.
    fn present(&mut self, field: &Field, prereq: Prereq) -> bool {
        self.unwildcard_prereq(prereq);
        if prereq.holds_for_key(&self.flow) {
            return true;
        }
        self.note(
            self.depth,
            &format!(">> {} is not present in this packet: skipped", field.name),
        );
        false
    }

    fn set_field(&mut self, field: &'static Field, value: u128, legacy: bool) {
        let prereq = if legacy {
            field.legacy_prereq()
        } else {
            field.write_prereq()
        };
        if !self.present(field, prereq) {
            return;
        }
        if field.name == "vlan_vid" || field.name == "vlan_pcp" {
            self.unwc_vlan(0, tci::PRESENT, 0);
            if self.flow.vlan_tci[0] & tci::PRESENT == 0 {
                // A tag an earlier action popped (the rule's match had
                // one): OVS's set_field of an OXM vlan_vid with
                // OFPVID_PRESENT writes the present bit too, so the tag is
                // back, its PCP 0 (flow_set_vlan_vid, flow_fix_vlan_tpid).
                // A vlan_pcp (OVS's set_vlan_pcp) or a VID without the bit
                // is skipped on a packet without a tag, as OVS does.
                if field.name == "vlan_vid" && value as u16 & tci::PRESENT != 0 {
                    self.tag_again(
                        value as u16 & tci::VID_MASK,
                        ">> no VLAN tag: the present bit makes one",
                    );
                    return;
                }
                self.note(self.depth, ">> no VLAN tag: skipped");
                return;
            }
            (field.put)(&mut self.flow, value);
            self.flow.vlan_tci[0] |= tci::PRESENT;
            self.vlans_touched = true;
            return;
        }
        // Ports on a later fragment were refused by the prerequisite
        // (OVS's MFP_TCP/UDP/SCTP); ICMP type and code are not (MFP_ICMPV4),
        // and the commit decides what reaches the packet.
        (field.put)(&mut self.flow, value);
        // The tunnel fields are metadata (an output to a tunnel port
        // reads them), the registers pipeline state: there is nothing to
        // write into the packet.
        if field.in_packet() {
            (field.put)(&mut self.dirty, field.full_mask());
        }
    }
}

pub mod bridges;
mod commit;
mod ct;
mod encap;
mod fork;
mod groups;
mod learn;
pub use learn::learned_rule;
mod device;
#[cfg(test)]
mod device_tests;
mod load;
mod mirror;
mod normal;
mod packet_in;
mod select;
mod tunnel;
pub use select::resolve as resolve_select;
#[cfg(test)]
mod bridges_tests;
#[cfg(test)]
mod fork_tests;
#[cfg(test)]
mod load_tests;
#[cfg(test)]
mod mirror_tests;
#[cfg(test)]
mod nicira_tests;
#[cfg(test)]
mod normal_tests;
#[cfg(test)]
mod spec_mode_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tunnel_tests;
