//! Untrusted packets through the connection tracker: the input is a
//! sequence of frames (a selector byte: commit, force, zone; two bytes
//! of length; the frame), each extracted and tracked in turn by one
//! tracker. Never a panic; every answer is untracked (not IP) or
//! tracked with one verdict (new, established, related or invalid); the
//! count of connections is what a dump lists; a flush empties it.

use sluice_conntrack::{Conntrack, CtRequest};
use sluice_packet::extract::extract;
use sluice_packet::key::{CS_ESTABLISHED, CS_INVALID, CS_NEW, CS_RELATED, CS_TRACKED};
use sluice_packet::{FlowKey, PacketMeta};

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let ct = Conntrack::default();
    let mut rest = data;
    let mut now = 0;
    while let [sel, hi, lo, tail @ ..] = rest {
        let n = (usize::from(*hi) << 8 | usize::from(*lo)).min(tail.len());
        let (frame, next) = tail.split_at(n);
        rest = next;
        now += u64::from(*sel >> 4) * 1000;
        let req = CtRequest {
            zone: u16::from(sel & 3),
            commit: sel & 4 != 0,
            force: sel & 8 != 0 && sel & 4 != 0,
            mark: (sel & 0x10 != 0).then_some((u32::from(*sel), 0xff)),
            label: None,
        };
        let (mut meta, mut key) = (PacketMeta::default(), FlowKey::default());
        if extract(frame, 1, &mut meta, &mut key).is_err() {
            continue;
        }
        let r = ct.process(frame, &meta, &key, &req, now);
        if r.state != 0 {
            assert!(r.state & CS_TRACKED != 0, "{r:?}");
            let verdicts = [CS_NEW, CS_ESTABLISHED, CS_RELATED, CS_INVALID]
                .iter()
                .filter(|&&b| r.state & b != 0)
                .count();
            assert_eq!(verdicts, 1, "{r:?}");
        }
        assert_eq!(r.zone, req.zone);
    }
    assert_eq!(ct.len() as usize, ct.dump(None, 0).len());
    ct.sweep(u64::MAX);
    assert!(ct.is_empty());
}
