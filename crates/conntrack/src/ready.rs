//! Memory for connections made ready before traffic needs it
//! ([`Conntrack::make_ready`]).
//!
//! A burst of new connections grew every shard's table several times
//! over, in the PMD: each growth asked the kernel for memory, and the
//! kernel found, cleared and mapped every page of it there (inside the
//! allocation with `--mlockall`, else at each first touch). In a burst
//! of 100,000 setups that was about a third of the PMD's time (1,400
//! cycles a setup with it, 950 with the memory ready; `perf`: the PMD in
//! `__mm_populate` and `clear_page_erms`). So when the first rule or
//! group that tracks connections is installed, the control plane makes
//! every shard ready for its share of `--ct-prealloc` connections
//! ([`DEFAULT_PREALLOC`] unless set): entries reserved and each of their
//! pages touched, an index large enough. Past that number tables grow
//! as before.

use std::sync::atomic::Ordering;

use crate::{Conntrack, SHARDS};

/// Connections a switch has memory ready for once a rule tracks
/// connections, unless configured (`--ct-prealloc`): 2,048 a shard,
/// about 27 MB (192 bytes an entry, 16 of index). A tracker alone (a
/// test, `sluice trace`) makes none ready until [`Conntrack::set_prealloc`].
pub const DEFAULT_PREALLOC: u64 = 131_072;

impl Conntrack {
    /// Connections to have memory ready for (`--ct-prealloc`,
    /// `other_config:ct-prealloc`); made ready now if a rule already
    /// tracks connections. Memory made ready is kept: a smaller number
    /// later frees nothing.
    pub fn set_prealloc(&self, n: u64) {
        self.prealloc.store(n, Ordering::Relaxed);
        if self.ready_wanted.load(Ordering::Relaxed) {
            self.make_ready();
        }
    }

    /// The number [`Conntrack::set_prealloc`] set.
    pub fn prealloc(&self) -> u64 {
        self.prealloc.load(Ordering::Relaxed)
    }

    /// Connections the tables have memory ready for now, all shards
    /// together.
    pub fn ready_for(&self) -> u64 {
        self.readied.load(Ordering::Acquire)
    }

    /// A rule or group that tracks connections was installed: makes the
    /// shards ready for [`Conntrack::prealloc`] connections, once (on
    /// the control plane's thread, before its rules reach a PMD). Cheap
    /// when done already.
    pub fn make_ready(&self) {
        if !self.ready_wanted.load(Ordering::Relaxed) {
            self.ready_wanted.store(true, Ordering::Relaxed);
        }
        let want = self.prealloc.load(Ordering::Relaxed);
        // (Every rule with a ct action comes here: one load when done.)
        if self.readied.load(Ordering::Acquire) >= want {
            return;
        }
        let _one = self.readying.lock().unwrap_or_else(|e| e.into_inner());
        if self.readied.load(Ordering::Acquire) >= want {
            return;
        }
        let each = usize::try_from(want.div_ceil(SHARDS as u64)).unwrap_or(usize::MAX);
        for i in 0..SHARDS {
            let mut s = self.lock(i);
            s.conns.make_ready(each);
            self.publish(i, &s);
        }
        self.readied.store(want, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{run, udp, COMMIT};
    use crate::CtRequest;
    use sluice_packet::key::{CS_NEW, CS_REPLY_DIR};

    #[test]
    fn ready_once_wanted_and_tables_work_the_same() {
        let ct = Conntrack::default();
        ct.set_prealloc(64 * 100);
        // No rule tracks yet: nothing is made ready.
        assert_eq!(ct.ready_for(), 0);
        ct.make_ready();
        assert_eq!(ct.ready_for(), 6400);
        // A larger number once wanted: made ready at once.
        ct.set_prealloc(64 * 300);
        assert_eq!(ct.ready_for(), 19_200);
        ct.set_prealloc(10);
        assert_eq!(ct.ready_for(), 19_200);
        // As many connections as made ready, and more, come in and are
        // found again.
        let mut n = 0;
        for a in 0..40u8 {
            for p in 0..1000u16 {
                let f = udp([10, 1, 0, a], crate::tests::B, (1000 + p, 53));
                assert_eq!(run(&ct, &f, &COMMIT, 0).state & CS_NEW, CS_NEW);
                n += 1;
            }
        }
        assert_eq!(ct.len(), n);
        for a in 0..40u8 {
            for p in (0..1000u16).step_by(7) {
                let f = udp(crate::tests::B, [10, 1, 0, a], (53, 1000 + p));
                let r = run(&ct, &f, &CtRequest::default(), 0);
                assert_eq!(r.state & CS_REPLY_DIR, CS_REPLY_DIR, "{a} {p}");
            }
        }
    }
}
