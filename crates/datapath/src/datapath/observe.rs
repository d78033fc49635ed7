//! What a datapath thread offers to watch it: performance metrics
//! (`pmd-perf-show`), live captures of its ports (`sluice ctl capture`)
//! and a look at its caches for one flow (`sluice ctl trace`).

use super::{Datapath, DpError};

impl Datapath {
    /// Turns the PMD performance metrics on (afresh, from `now_us`) or
    /// off (`pmd-perf-metrics`).
    pub fn set_perf_metrics(&mut self, on: bool, now_us: u64) {
        self.perf = on.then(|| {
            Box::new(crate::perf::PmdPerf::new(
                now_us,
                &self.stats,
                self.perf_log_us,
            ))
        });
        self.pipeline.time_upcalls = on;
        self.pipeline.upcall_cycles.clear();
    }

    /// Sets the iteration log's threshold (µs); the metrics, if on,
    /// start afresh.
    pub fn set_perf_log_threshold(&mut self, us: u64, now_us: u64) {
        self.perf_log_us = us;
        if self.perf.is_some() {
            self.set_perf_metrics(true, now_us);
        }
    }

    /// The PMD performance metrics, when on.
    pub fn perf(&self) -> Option<&crate::perf::PmdPerf> {
        self.perf.as_deref()
    }

    /// Starts a live capture of port `ofport` (replacing one running).
    pub fn add_tap(&mut self, ofport: u32, spec: crate::capture::TapSpec) -> Result<(), DpError> {
        let i = self
            .out
            .index_of(ofport)
            .ok_or(DpError::NoSuchPort(ofport))?;
        self.out.ports[i].tap = Some(Box::new(crate::capture::Tap::new(spec)));
        Ok(())
    }

    /// Ends every live capture (the run ends).
    pub fn remove_taps(&mut self) {
        for slot in &mut self.out.ports {
            slot.tap = None;
        }
    }

    /// Ends the live capture of port `ofport`, if any (its writer then
    /// has every frame this thread took).
    pub fn remove_tap(&mut self, ofport: u32) -> bool {
        self.out
            .index_of(ofport)
            .and_then(|i| self.out.ports[i].tap.take())
            .is_some()
    }

    /// Which cache level would serve a packet of flow `key` now, and with
    /// which megaflow (nothing changes: `sluice ctl trace`).
    pub fn probe_caches(
        &self,
        key: &sluice_packet::FlowKey,
        now_us: u64,
    ) -> crate::probe::CacheProbe {
        self.pipeline.caches.probe(key, self.epoch, now_us)
    }
}
