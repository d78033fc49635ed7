//! `ct` and `ct_clear`: the packet through the connection tracker, as
//! Open vSwitch translates them. Pending header changes are committed
//! first (the tracker sees the packet as the actions left it); the
//! datapath action `ct(...)` follows; with `table=T` a recirculation
//! resumes the pipeline in table T, where the packet's key holds the
//! state the tracker gave it, while this pass goes on with the actions
//! after `ct` and no connection state (OVS's "fork").

use sluice_conntrack::CtRequest;

use super::Ctx;
use crate::action::Action;
use crate::ct::{Ct, CtZone};
use crate::dpaction::DpAction;

impl Ctx<'_, '_> {
    pub(super) fn conntrack(&mut self, ct: &Ct, table: u8) {
        self.commit();
        let zone = match ct.zone {
            None => 0,
            Some(CtZone::Imm(z)) => z,
            Some(CtZone::Field(sf)) => {
                self.unwc_read(sf.field, sf.mask());
                sf.read(&self.flow) as u16
            }
        };
        // exec's moves: the source's bits as the packet has them now.
        let mut label = ct.label;
        let mut mark = ct.mark;
        if let Some((src, dst)) = ct.label_move {
            self.unwc_read(src.field, src.mask());
            let (v, m) = (dst.place(src.read(&self.flow)), dst.mask());
            let (pv, pm) = label.unwrap_or((0, 0));
            label = Some(((pv & !m) | v, pm | m));
        }
        if let Some((src, dst)) = ct.mark_move {
            self.unwc_read(src.field, src.mask());
            let (v, m) = (dst.place(src.read(&self.flow)) as u32, dst.mask() as u32);
            let (pv, pm) = mark.unwrap_or((0, 0));
            mark = Some(((pv & !m) | v, pm | m));
        }
        self.push(DpAction::Ct(CtRequest {
            zone,
            commit: ct.commit,
            force: ct.force,
            mark,
            label,
            nat: ct.nat,
        }));
        if let Some(t) = ct.table {
            let state = self.state_here(
                vec![Action::Resubmit {
                    in_port: None,
                    table: Some(t),
                }],
                self.action_set.clone(),
                table,
            );
            self.emit_recirc(state);
        }
        self.clear_ct_fields();
    }

    pub(super) fn ct_clear(&mut self) {
        self.push(DpAction::CtClear);
        self.clear_ct_fields();
    }

    /// The state is the next pass's: the rest of this one sees none.
    fn clear_ct_fields(&mut self) {
        sluice_conntrack::CtResult::default().write_key(&mut self.flow);
        self.ct_written = true;
    }
}
