//! The OpenFlow channel's Nicira TLV table messages: `NXT_TLV_TABLE_MOD`
//! changes the Geneve options' mapping onto `tun_metadata` fields (one
//! for the datapath, as OVS's: the first bridge's tunnel state, which
//! every bridge's Geneve ports use, and the bridge's own copy; a new rule
//! version, in force on every PMD before anything after it is
//! answered), `NXT_TLV_TABLE_REQUEST` reads it, as `ovs-ofctl
//! add-tlv-map`/`dump-tlv-map` and `ovn-controller` use them.

use sluice_openflow::nx::{self, command, NxMessage, TlvMapping};
use sluice_openflow::OfError;
use sluice_packet::tunnel::tlv::{MAX_LEN, SLOTS};
use sluice_packet::tunnel::{TlvEntry, TlvError};

use crate::backend::{Backend, BackendExt};

/// The OpenFlow error of a refused mapping change.
fn of_error(e: TlvError) -> OfError {
    match e {
        TlvError::AlreadyMapped(_) => OfError::NXTTMFC_ALREADY_MAPPED,
        TlvError::DupEntry(_) => OfError::NXTTMFC_DUP_ENTRY,
        TlvError::BadLen(_) => OfError::NXTTMFC_BAD_OPT_LEN,
        TlvError::BadIndex(_) => OfError::NXTTMFC_BAD_FIELD_IDX,
    }
}

/// Serves an `EXPERIMENTER` message's body (OpenFlow 1.0's `VENDOR`):
/// the TLV table's and the tracker's flushes ([`crate::ct`]). The
/// reply's body to send back
/// (for a request), nothing (a change made), or the error to answer with.
/// `slave`: the connection's role is slave (it may read, not change).
pub(crate) fn experimenter(
    control: &dyn Backend,
    body: &[u8],
    slave: bool,
) -> Result<Result<Option<Vec<u8>>, OfError>, String> {
    // The connection tracker's flushes are Nicira messages too.
    if let Some(r) = crate::ct::flush(control, body, slave) {
        return Ok(r.map(|()| None));
    }
    let m = match nx::decode(body) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    match m {
        NxMessage::TlvTableRequest => {
            let maps: Vec<TlvMapping> = control
                .tlv_map()
                .entries()
                .iter()
                .map(|e| TlvMapping {
                    class: e.class,
                    ty: e.ty,
                    len: e.len,
                    index: u16::from(e.index),
                })
                .collect();
            let space = SLOTS as u32 * u32::from(MAX_LEN);
            Ok(Ok(Some(nx::tlv_table_reply(space, SLOTS as u16, &maps))))
        }
        NxMessage::TlvTableMod { .. } if slave => Ok(Err(OfError::IS_SLAVE)),
        NxMessage::TlvTableMod { command: cmd, maps } => control
            .change_tlv_map(|map| {
                let entries = maps
                    .iter()
                    .map(|m| TlvEntry::new(m.class, m.ty, m.len, m.index))
                    .collect::<Result<Vec<_>, _>>();
                match cmd {
                    command::ADD => map.add(&entries.map_err(of_error)?).map_err(of_error)?,
                    // By field, as OVS (a field past those held is none).
                    command::DELETE => maps.iter().for_each(|m| map.remove(m.index)),
                    command::CLEAR => map.clear(),
                    _ => return Err(OfError::NXTTMFC_BAD_COMMAND),
                }
                Ok(())
            })
            .map(|r| r.map(|()| None)),
    }
}
