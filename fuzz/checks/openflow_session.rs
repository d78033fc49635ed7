//! Untrusted bytes from an OpenFlow peer, as a whole session: HELLO,
//! then any sequence of messages (multipart requests in parts, flow-mod
//! bursts, group and meter mods, roles, barriers) through the channel and
//! a switch's rule tables (a `Control` with no PMD thread). What the
//! switch sends back is a sequence of well-framed OpenFlow messages of
//! the version negotiated (1.5, 1.4, 1.3, or 1.0 with Nicira's
//! extensions); nothing panics.

use std::sync::Arc;
use std::time::Instant;

use sluice::ctl::Control;
use sluice_classifier::RuleSet;

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let control = Arc::new(Control::new(
        RuleSet::new(),
        Vec::new(),
        Instant::now(),
        None,
    ));
    let out = sluice_ofproto::channel::serve_bytes(control, data);
    // The switch speaks first (its HELLO, of the highest version it
    // offers: 1.5), and every reply is a whole OpenFlow message.
    assert!(
        out.len() >= 8 && out[..2] == [6, 0],
        "no HELLO first: {:02x?}",
        &out[..out.len().min(16)]
    );
    let mut types = Vec::new();
    let mut at = 0;
    // After the HELLO: 1.3 errors for what the peer sent before its own
    // HELLO, if any, then every message of the version negotiated (the
    // highest both offered).
    let mut version: Option<u8> = None;
    while at < out.len() {
        types.push(out[at + 1]);
        assert!(out.len() - at >= 8, "a cut message: {:02x?}", &out[at..]);
        let v = out[at];
        let ok = if at == 0 {
            v == 6
        } else if version.is_none() && v == 4 && out[at + 1] == 1 {
            true
        } else {
            *version.get_or_insert(v) == v
        };
        assert!(
            ok && matches!(v, 1 | 4 | 5 | 6),
            "an OpenFlow 1.5, 1.4, 1.3 or 1.0 message, all of one version but early 1.3 errors: {:02x?}",
            &out[..out.len().min(64)]
        );
        let len = usize::from(u16::from_be_bytes([out[at + 2], out[at + 3]]));
        assert!(len >= 8 && at + len <= out.len(), "length {len} at {at}");
        at += len;
    }
    // A peer whose HELLO offers OpenFlow 1.3 (a version bitmap with bit
    // 4) and that then asks for the features is answered. (One that offers
    // no 1.3 gets HELLO_INCOMPATIBLE and is closed.)
    let hello_then_features = data.len() >= 24
        && data[..2] == [4, 0]
        && usize::from(u16::from_be_bytes([data[2], data[3]])) == 16
        && data[8..12] == [0, 1, 0, 8]
        && u32::from_be_bytes([data[12], data[13], data[14], data[15]]) & (1 << 4) != 0
        && data[16..18] == [4, 5]
        && data[18..20] == [0, 8];
    if hello_then_features {
        assert!(types.contains(&6), "no FEATURES_REPLY: {types:?}");
    }
}
