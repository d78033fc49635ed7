//! Translation of MPLS and PBB actions, and freezing for recirculation.
//!
//! The flow key knows an MPLS packet down to its outermost label and a
//! PBB packet down to its I-TAG (in `ipv6_label`'s bits, see
//! [`FlowKey`]). Pushes and pops are emitted as datapath actions right
//! away (after committing what the actions before them set: once the
//! packet's shape changes, those fields are somewhere else). A pop leaves
//! the flow not knowing what it exposed ([`Stale`]); the first later
//! action that needs it freezes the translation ([`crate::recirc`]).

use sluice_packet::key::FlowKey;
use sluice_packet::wire::ethernet::{ethertype, is_mpls, itag, mpls};

use super::{Ctx, XlateDrop};
use crate::action::Action;
use crate::dpaction::DpAction;
use crate::recirc::Frozen;

/// How much of the packet the flow no longer describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Stale {
    /// The flow is the packet.
    None,
    /// Past the Ethernet header and tags (after `pop_mpls`, or
    /// `copy_ttl_out`, which sets the label's TTL from bytes the flow does
    /// not hold).
    L3,
    /// All of it but the input port and metadata (after `pop_pbb`: a
    /// whole customer frame, addresses and tags included).
    All,
}

/// Whether an action changes a packet's shape in a way that a later set
/// cannot take back (so a group bucket with it runs on a copy of its own).
pub(super) fn reshapes(a: &Action) -> bool {
    matches!(
        a,
        Action::PushMpls(_)
            | Action::PopMpls(_)
            | Action::PushPbb(_)
            | Action::PopPbb
            | Action::CopyTtlOut
            | Action::CopyTtlIn
    )
}

/// Whether `a` only sends the packet or changes pipeline state, looking
/// at nothing in it.
fn blind(a: &Action) -> bool {
    match a {
        Action::Output(_)
        | Action::InPort
        | Action::All
        | Action::Flood
        | Action::Note(_)
        | Action::Sample(_)
        | Action::SetQueue(_)
        | Action::PopQueue
        | Action::Controller { .. }
        | Action::WriteActions(_)
        | Action::ClearActions
        | Action::WriteMetadata { .. }
        | Action::Meter(_) => true,
        Action::SetField { field, .. } => field.name == "tun_id",
        _ => false,
    }
}

/// Whether `a` touches only the Ethernet header and tags.
fn l2_only(a: &Action) -> bool {
    match a {
        Action::ModVlanVid(_) | Action::ModVlanPcp(_) | Action::PushVlan(_) | Action::PopVlan => {
            true
        }
        Action::SetField { field, .. } => {
            matches!(field.name, "dl_src" | "dl_dst" | "vlan_vid" | "vlan_pcp")
        }
        _ => false,
    }
}

/// The flow of a packet whose headers past L2 are new: its port, L2
/// header and tags, metadata and pass kept, `dl_type` set.
fn l2_of(f: &FlowKey, dl_type: u16) -> FlowKey {
    FlowKey {
        in_port: f.in_port,
        dl_type,
        dl_dst: f.dl_dst,
        dl_src: f.dl_src,
        vlan_tci: f.vlan_tci,
        vlan_tpid: f.vlan_tpid,
        metadata: f.metadata,
        regs: f.regs,
        tunnel_id: f.tunnel_id,
        recirc_id: f.recirc_id,
        ..FlowKey::default()
    }
}

impl Ctx<'_, '_> {
    /// Whether action `a` needs what the flow no longer knows.
    pub(super) fn must_freeze(&self, a: &Action) -> bool {
        match self.stale {
            Stale::None => false,
            Stale::L3 => !blind(a) && !l2_only(a),
            Stale::All => !blind(a),
        }
    }

    /// Starts freezing at an action of table `table`'s rule.
    pub(super) fn start_freeze(&mut self, table: u8) {
        self.note(
            self.depth,
            ">> the rest needs the packet parsed again: recirculating",
        );
        self.frozen = Some(self.state_here(Vec::new(), self.action_set.clone(), table));
    }

    /// The pipeline state a recirculation resumes with: `actions` to run
    /// and `action_set`, in table `table`'s running rule, with the flow's
    /// metadata, registers, tunnel_id and input port as they are now.
    pub(super) fn state_here(
        &self,
        actions: Vec<Action>,
        action_set: Vec<Action>,
        table: u8,
    ) -> Frozen {
        let (_, cookie, miss) = self.running;
        Frozen {
            actions,
            action_set,
            table,
            cookie,
            miss,
            metadata: self.flow.metadata,
            regs: self.flow.regs,
            tunnel_id: self.flow.tunnel_id,
            in_port: self.flow.in_port,
            bridge: self.env.bridge,
            mirrored: self.mirrored,
        }
    }

    /// Ends a frozen translation with `recirc(id)`, or (paused) with the
    /// packet-in that carries the state's id as its continuation.
    pub(super) fn finish_freeze(&mut self) {
        let Some(state) = self.frozen.take() else {
            return;
        };
        let paused = self.paused.take();
        if self.error.is_some() {
            return;
        }
        self.commit();
        match paused {
            None => self.emit_recirc(state),
            Some(mut pin) => match self.root.0.recirc().id_of(state) {
                Some(id) => {
                    let mut meta = (*pin.meta).clone();
                    meta.continuation = Some(id);
                    pin.meta = std::sync::Arc::new(meta);
                    self.push(DpAction::Controller(pin));
                    self.note(self.depth, &format!("controller(continuation={id:#x})"));
                }
                None => self.error = Some(XlateDrop::Recirc),
            },
        }
    }

    pub(super) fn emit_recirc(&mut self, state: Frozen) {
        match self.root.0.recirc().id_of(state) {
            Some(id) => {
                self.push(DpAction::Recirc(id));
                self.out.outputs += 1;
                self.note(self.depth, &format!("recirc({id:#x})"));
            }
            None => self.error = Some(XlateDrop::Recirc),
        }
    }

    /// Runs a group bucket that reshapes the packet in a pass of its own,
    /// on a copy (the bucket is a clone).
    pub(super) fn recirc_bucket(&mut self, actions: &[Action], table: u8) {
        self.commit();
        let state = self.state_here(actions.to_vec(), Vec::new(), table);
        self.emit_recirc(state);
    }

    /// Resumes the translation frozen under `id`, on the packet parsed
    /// again.
    pub(super) fn resume(&mut self, id: u32) {
        let Some(state) = self.root.0.recirc().get(id) else {
            self.note(0, &format!(">> no recirculation state {id:#x}"));
            self.error = Some(XlateDrop::Recirc);
            return;
        };
        self.note(
            0,
            &format!(
                "resume({id:#x}): {}",
                crate::action::format_list(&state.actions)
            ),
        );
        if !self.enter_bridge(state.bridge) {
            self.note(0, &format!(">> bridge {} is gone", state.bridge));
            self.error = Some(XlateDrop::Recirc);
            return;
        }
        self.flow.metadata = state.metadata;
        self.flow.regs = state.regs;
        self.flow.tunnel_id = state.tunnel_id;
        self.flow.in_port = state.in_port;
        self.mirrored = state.mirrored;
        self.running = (state.table, state.cookie, state.miss);
        self.action_set = state.action_set.clone();
        self.actions(&state.actions, state.table);
        self.run_action_set();
    }

    /// Whether the packet is MPLS (which the decision now depends on).
    fn is_mpls(&mut self) -> bool {
        self.out.wc.dl_type = 0xffff;
        is_mpls(self.flow.dl_type)
    }

    /// Commits the MPLS and PBB fields; true if the flow is MPLS or PBB
    /// (nothing else past L2 to commit then).
    pub(super) fn commit_encap(&mut self, f: &FlowKey, d: &FlowKey) -> bool {
        if is_mpls(f.dl_type) {
            if d.ipv6_label != 0 {
                // The whole entry is written: the bits no action set are
                // the packet's own, which the result now depends on.
                self.out.wc.ipv6_label |= !d.ipv6_label;
                self.push(DpAction::SetMplsLse(f.ipv6_label));
            }
            return true;
        }
        if f.dl_type == ethertype::PBB {
            if d.ipv6_label & itag::ISID_MASK != 0 {
                self.push(DpAction::SetPbbIsid(f.ipv6_label & itag::ISID_MASK));
            }
            return true;
        }
        false
    }

    /// `push_mpls`: a new outermost label, copied from the one there was
    /// (bottom of stack cleared), or label 0 with the IP TTL (64 when not
    /// IP, as Open vSwitch; 0 with `--push-mpls spec`).
    pub(super) fn push_mpls(&mut self, eth_type: u16) {
        let was_mpls = self.is_mpls();
        self.commit();
        let f = self.flow;
        let lse = if was_mpls {
            self.out.wc.ipv6_label = u32::MAX;
            f.ipv6_label & !mpls::BOS
        } else if f.is_ip() {
            self.out.wc.nw_ttl = 0xff;
            mpls::BOS | u32::from(f.nw_ttl)
        } else if self.env.rules.modes().push_mpls == crate::table::PushMpls::Spec {
            mpls::BOS
        } else {
            mpls::BOS | 64
        };
        self.push(DpAction::PushMpls { eth_type, lse });
        self.flow = l2_of(&f, eth_type);
        self.flow.ipv6_label = lse;
        self.arp_base = self.flow;
    }

    /// `pop_mpls`: the outermost label goes; what is under it is unknown.
    pub(super) fn pop_mpls(&mut self, eth_type: u16) {
        if !self.is_mpls() {
            self.note(self.depth, ">> not MPLS: skipped");
            return;
        }
        self.commit();
        self.push(DpAction::PopMpls(eth_type));
        self.flow = l2_of(&self.flow, eth_type);
        self.arp_base = self.flow;
        self.stale = self.stale.max(Stale::L3);
    }

    /// `set_mpls_ttl`.
    pub(super) fn set_mpls_ttl(&mut self, ttl: u8) {
        if !self.is_mpls() {
            self.note(self.depth, ">> not MPLS: skipped");
            return;
        }
        self.flow.ipv6_label = mpls::with_ttl(self.flow.ipv6_label, ttl);
        self.dirty.ipv6_label |= mpls::TTL_MASK;
    }

    /// `dec_mpls_ttl`; false when the TTL runs out (the rest of the action
    /// list is skipped, as for `dec_ttl`).
    pub(super) fn dec_mpls_ttl(&mut self) -> bool {
        if !self.is_mpls() {
            self.note(self.depth, ">> not MPLS: skipped");
            return true;
        }
        self.out.wc.ipv6_label |= mpls::TTL_MASK;
        let ttl = mpls::ttl(self.flow.ipv6_label);
        if ttl <= 1 {
            self.ttl_packet_ins(&[0]);
            self.reason = Some(XlateDrop::InvalidTtl);
            self.note(
                self.depth,
                ">> MPLS TTL exception: the rest of this action list is skipped",
            );
            return false;
        }
        self.flow.ipv6_label = mpls::with_ttl(self.flow.ipv6_label, ttl - 1);
        self.dirty.ipv6_label |= mpls::TTL_MASK;
        true
    }

    /// `copy_ttl_out` (`out`) or `copy_ttl_in`: done on the packet's
    /// bytes, since the flow does not hold what is under the label.
    pub(super) fn copy_ttl(&mut self, out: bool) {
        if !self.is_mpls() {
            self.note(self.depth, ">> not MPLS: skipped");
            return;
        }
        self.commit();
        if out {
            self.push(DpAction::CopyTtlOut);
            self.stale = self.stale.max(Stale::L3);
        } else {
            self.push(DpAction::CopyTtlIn);
        }
    }

    /// Forgets the packet's VLAN tags (a new outer frame has none).
    fn no_tags(&mut self) {
        self.flow.vlan_tci = [0; 2];
        self.flow.vlan_tpid = [0; 2];
        self.base_tci = [0; 2];
        self.base_tpid = [0; 2];
        self.base_origin = [None; 2];
        self.vlan_origin = [None; 2];
        self.vlans_touched = false;
    }

    /// `push_pbb`: a backbone frame around the packet, with the same
    /// addresses and I-SID 0.
    pub(super) fn push_pbb(&mut self, eth_type: u16) {
        self.commit();
        self.push(DpAction::PushPbb(eth_type));
        let f = self.flow;
        self.flow = l2_of(&f, eth_type);
        self.no_tags();
        self.arp_base = self.flow;
    }

    /// `pop_pbb`: the customer frame is all that is left, and unknown.
    pub(super) fn pop_pbb(&mut self) {
        self.out.wc.dl_type = 0xffff;
        if self.flow.dl_type != ethertype::PBB {
            self.note(self.depth, ">> not PBB: skipped");
            return;
        }
        self.commit();
        self.push(DpAction::PopPbb);
        let f = self.flow;
        self.flow = FlowKey {
            in_port: f.in_port,
            metadata: f.metadata,
            regs: f.regs,
            tunnel_id: f.tunnel_id,
            recirc_id: f.recirc_id,
            ..FlowKey::default()
        };
        self.no_tags();
        self.arp_base = self.flow;
        self.stale = Stale::All;
    }
}
