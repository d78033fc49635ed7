//! Untrusted OpenFlow 1.0 bytes (what `ovs-ofctl` without `-O` sends),
//! one message: read as a flow-mod of either kind (`OFPT_FLOW_MOD`,
//! `NXT_FLOW_MOD`) in each flow format, as a statistics request, its body
//! as a 1.0 action list and as an NXM match; errors, never a panic. An NXM
//! match that reads is written back and reads the same; an action list
//! that reads is written as 1.0 and reads to the same actions.

use sluice_classifier::Match;
use sluice_openflow::of10::flow_mod::{decode, is_flow_mod, Format};
use sluice_openflow::of10::{actions, nxm_match, stats};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    if data.len() >= 8 {
        let _ = is_flow_mod(data);
        for nxm in [false, true] {
            for table_id in [false, true] {
                let _ = decode(data, Format { nxm, table_id }, 254);
            }
        }
        let _ = stats::decode(data);
    }
    if let Ok((m, cookie, mask)) = nxm_match::decode(data) {
        let mut b = Vec::new();
        nxm_match::encode(&m, cookie, mask, &mut b);
        assert_eq!(
            nxm_match::decode(&b),
            Ok((m, cookie & mask, mask)),
            "NXM written back reads the same"
        );
    }
    if let Ok(acts) = actions::decode(data, &Match::catch_all()) {
        let mut b = Vec::new();
        actions::encode(&acts, &mut b);
        let again = actions::decode(&b, &Match::catch_all()).expect("what was written reads");
        assert_eq!(
            sluice_classifier::action::format_actions(&again),
            sluice_classifier::action::format_actions(&acts),
            "1.0 actions written back read the same"
        );
    }
}
