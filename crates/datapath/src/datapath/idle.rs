//! What an idle datapath thread may sleep on: the file descriptors its
//! ports become readable on, and whether anything it holds would wait.
//!
//! A PMD polls its ports in a loop. When all of them are kernel sockets or
//! tap devices (the ports Open vSwitch's userspace datapath polls from its
//! main thread, which sleeps in `poll(2)`), a PMD with nothing to do can
//! sleep the same way, so that a switch with no traffic takes no CPU.

use std::os::fd::RawFd;

use super::Datapath;

impl Datapath {
    /// Collects into `fds` (cleared first) a descriptor for each rx queue
    /// this thread reads, and returns true; false if some queue has none
    /// ([`sluice_port::Port::rx_fd`]: DPDK, vhost-user, files), so that
    /// the thread must keep polling. Queues whose input ended are left
    /// out.
    pub fn rx_wait_fds(&self, fds: &mut Vec<RawFd>) -> bool {
        fds.clear();
        for slot in &self.out.ports {
            if !slot.caps.rx {
                continue;
            }
            let queues = std::iter::once((&slot.port, slot.rx_done))
                .chain(slot.extra_rxqs.iter().map(|q| (&q.port, q.rx_done)));
            for (port, done) in queues {
                if done {
                    continue;
                }
                match port.rx_fd() {
                    Some(fd) => fds.push(fd),
                    None => return false,
                }
            }
        }
        true
    }

    /// Nothing waits inside the datapath for another iteration: no output
    /// batch held, no packet behind a port's full ring, no miss waiting
    /// for the upcall budget, no packet-in waiting to be handed over.
    pub fn quiescent(&self) -> bool {
        self.pipeline.waiting.is_empty()
            && self.pipeline.packet_ins.queue.is_empty()
            && self
                .out
                .ports
                .iter()
                .all(|s| s.txq.is_empty() && s.port.tx_pending() == 0)
    }

    /// [`crate::DatapathConfig::sleep_after_us`].
    pub fn sleep_after_us(&self) -> u32 {
        self.sleep_after_us
    }

    /// Counts a sleep of `us` microseconds between iterations
    /// (`pmd-stats`: `sleeps`).
    pub fn note_sleep(&mut self, us: u64) {
        self.stats.sleeps += 1;
        self.stats.sleep_us += us;
    }
}
