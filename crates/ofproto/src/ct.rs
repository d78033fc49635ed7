//! The OpenFlow channel's connection-tracker flushes: `NXT_CT_FLUSH_ZONE`
//! (a zone: what ovn-controller sends for a zone it gives a new port) and
//! `NXT_CT_FLUSH` (the connections a partial tuple names: what it sends
//! when a load balancer loses a backend, as the `Datapath` row's
//! `ct_flush` capability says Sluice takes), on either OpenFlow version.

use sluice_openflow::ct_flush;
use sluice_openflow::nx::nx_body;
use sluice_openflow::OfError;

use crate::backend::{Backend, BackendExt};

/// Serves an experimenter body (vendor id on) if it is a flush: done, or
/// the error to answer; `None` for any other message. A slave may not
/// flush.
pub(crate) fn flush(
    control: &dyn Backend,
    body: &[u8],
    slave: bool,
) -> Option<Result<(), OfError>> {
    if let Some(b) = nx_body(body, ct_flush::NXT_CT_FLUSH_ZONE) {
        if slave {
            return Some(Err(OfError::IS_SLAVE));
        }
        let Some(zone) = ct_flush::decode_zone(b) else {
            return Some(Err(OfError::BAD_LEN));
        };
        let n = control.flush_conntrack_zone(zone);
        tracing::debug!(target: "openflow", "NXT_CT_FLUSH_ZONE {zone}: {n} connections");
        return Some(Ok(()));
    }
    let b = nx_body(body, ct_flush::NXT_CT_FLUSH)?;
    if slave {
        return Some(Err(OfError::IS_SLAVE));
    }
    Some(ct_flush::decode(b).map(|f| {
        let n = control.conntrack().flush_matching(f.zone, &f.matching);
        tracing::debug!(target: "openflow", "NXT_CT_FLUSH {f:?}: {n} connections");
    }))
}
