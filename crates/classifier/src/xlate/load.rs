//! `load` and `move`: writes of some bits of a field, from a constant or
//! from bits of another field.

use sluice_packet::wire::ethernet::tci;

use super::Ctx;
use crate::fields::Field;
use crate::subfield::Subfield;

impl Ctx<'_, '_> {
    /// `load` (and `set_field:V/M->F`): the bits `mask` of `field` become
    /// those of `value`.
    pub(super) fn load(&mut self, field: &'static Field, value: u128, mask: u128) {
        if mask == field.full_mask() {
            return self.set_field(field, value, false);
        }
        if !self.present(field, field.write_prereq()) {
            return;
        }
        let old = (field.get)(&self.flow);
        (field.put)(&mut self.flow, (old & !mask) | (value & mask));
        if !field.in_packet() {
            return;
        }
        // The commit writes header fields whole, but for the TOS byte
        // (whose set action writes only the bits actions wrote): the
        // bits this load keeps are the packet's own, and the result
        // depends on them.
        if !matches!(field.name, "nw_tos" | "ip_dscp" | "ip_ecn") {
            self.unwc_read(field, field.full_mask() & !mask);
        }
        let dirty = (field.get)(&self.dirty);
        (field.put)(&mut self.dirty, dirty | mask);
    }

    /// `move`: the bits of `src` are copied into `dst`.
    pub(super) fn move_bits(&mut self, src: Subfield, dst: Subfield) {
        if !self.present(src.field, src.field.prereq) {
            return;
        }
        let bits = src.read(&self.flow);
        self.unwc_read(src.field, src.mask());
        if self.out.trace.is_some() {
            self.note(
                self.depth + 1,
                &format!("-> {dst} is now {}", crate::fields::c_hex(bits)),
            );
        }
        self.load(dst.field, dst.place(bits), dst.mask());
    }

    /// `push:FIELD[BITS]`: the bits onto the packet's stack (OVS's
    /// `nxm_execute_stack_push`).
    pub(super) fn stack_push(&mut self, sf: Subfield) {
        let bits = if self.present(sf.field, sf.field.prereq) {
            self.unwc_read(sf.field, sf.mask());
            sf.read(&self.flow)
        } else {
            0
        };
        self.stack.push(bits);
    }

    /// `pop:FIELD[BITS]`: the bits last pushed into the field; from an
    /// empty stack, nothing changes (OVS warns and goes on likewise).
    pub(super) fn stack_pop(&mut self, sf: Subfield) {
        let Some(bits) = self.stack.pop() else {
            if self.out.trace.is_some() {
                self.note(self.depth + 1, "pop from an empty stack: nothing changes");
            }
            return;
        };
        if self.out.trace.is_some() {
            self.note(
                self.depth + 1,
                &format!("-> {sf} is now {}", crate::fields::c_hex(bits)),
            );
        }
        self.load(sf.field, sf.place(bits), sf.mask());
    }

    /// `multipath`: the link the hash of the packet's fields picks goes
    /// into `dst`; the megaflow matches the fields hashed.
    pub(super) fn multipath(&mut self, mp: &crate::multipath::Multipath) {
        let link = mp.link(&self.flow);
        crate::multipath::unwildcard(mp.fields, &self.flow, &mut self.out.wc);
        if self.out.trace.is_some() {
            self.note(self.depth + 1, &format!("-> {} is now {link}", mp.dst));
        }
        self.load(mp.dst.field, mp.dst.place(u128::from(link)), mp.dst.mask());
    }

    /// Records that the decision read the bits `mask` of `field`. Not
    /// for metadata and the registers: zero in every packet, what they
    /// hold follows from decisions already in the mask.
    pub(super) fn unwc_read(&mut self, field: &'static Field, mask: u128) {
        if field.is_pipeline() || mask == 0 {
            return;
        }
        if matches!(field.name, "vlan_tci" | "vlan_vid" | "vlan_pcp") {
            self.unwc_vlan(0, tci::PRESENT | tci::VID_MASK | tci::PCP_MASK, 0);
            return;
        }
        let cur = (field.get)(&self.out.wc);
        (field.put)(&mut self.out.wc, cur | mask);
    }
}
