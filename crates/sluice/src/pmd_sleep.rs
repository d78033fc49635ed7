//! An idle PMD thread's sleep.
//!
//! A PMD polls its rx queues in a loop, and on a switch with no traffic
//! that loop takes a whole core. Open vSwitch's userspace datapath reads
//! kernel ports (tap devices, AF_PACKET sockets) from its main thread,
//! which sleeps in `poll(2)` between packets; only DPDK-style ports get a
//! PMD that spins. Sluice keeps one loop for every port and lets it sleep
//! when that cannot lose a packet or a moment: after
//! [`sleep_after_us`](sluice_datapath::DatapathConfig::sleep_after_us) with
//! nothing received, nothing held inside the datapath, and a descriptor
//! for every queue it reads ([`sluice_port::Port::rx_fd`]), it sleeps
//! until one of them is readable, a command comes (an eventfd, [`Wake`]),
//! or [`MAX_SLEEP`] has passed (its periodic work: rule timeouts, cache
//! revalidation, tunnel frames from the control plane). A queue without a
//! descriptor (DPDK, vhost-user, a file) keeps the thread polling.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_datapath::Datapath;
use sluice_port::sys::EventFd;

/// The longest sleep: what waits for time rather than for a packet or a
/// command (rule timeouts, revalidation, frames the control plane hands
/// over) waits at most this long more than with a spinning thread.
pub const MAX_SLEEP: Duration = Duration::from_millis(10);

/// What wakes a sleeping PMD when a command is sent to it.
#[derive(Debug)]
pub struct Wake {
    fd: EventFd,
    asleep: AtomicBool,
}

impl Wake {
    /// A wake-up with its eventfd, the thread awake.
    pub fn new() -> std::io::Result<Self> {
        Ok(Wake {
            fd: EventFd::new()?,
            asleep: AtomicBool::new(false),
        })
    }

    /// Call after putting a command in the PMD's channel: wakes the PMD if
    /// it sleeps (a system call only then). Either this sees the PMD
    /// asleep or the PMD, before it sleeps, sees the command (the fences
    /// here and in [`Sleeper::after`] order the two sides).
    pub fn sent(&self) {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) {
            self.fd.notify();
        }
    }
}

/// A PMD thread's side of sleeping: when it went idle, and the descriptors
/// it waits on.
pub struct Sleeper {
    wake: Arc<Wake>,
    max: Duration,
    /// µs (switch clock) since when nothing came, if nothing has.
    idle_since: Option<u64>,
    fds: Vec<RawFd>,
    /// The descriptors of the last sleep: when they change, `quiet` goes.
    last: Vec<RawFd>,
    /// Descriptors that woke the thread with an error and nothing to read
    /// (a packet socket whose interface went down reports it until read):
    /// left out of its sleeps until something comes or the ports change,
    /// their ports then read every [`MAX_SLEEP`] instead of spinning.
    quiet: Vec<RawFd>,
    polled: Vec<(RawFd, i16)>,
}

impl Sleeper {
    /// A sleeper woken by `wake`, sleeping at most `max` at a time.
    pub fn new(wake: Arc<Wake>, max: Duration) -> Self {
        Sleeper {
            wake,
            max,
            idle_since: None,
            fds: Vec::new(),
            last: Vec::new(),
            quiet: Vec::new(),
            polled: Vec::new(),
        }
    }

    /// After each poll iteration: `idle` says it received nothing and
    /// the thread holds nothing of its own (packet-ins to hand over);
    /// `now_us` reads the switch clock (only when idle).
    /// Sleeps when the datapath has been idle long enough and can be
    /// waited for, at most until `deadline`. A command found on the way
    /// (taken from `commands` to see whether one waits) is returned, to be
    /// handled before anything else.
    pub fn after<C>(
        &mut self,
        dp: &mut Datapath,
        idle: bool,
        now_us: impl FnOnce() -> u64,
        deadline: Option<Instant>,
        commands: &Receiver<C>,
    ) -> Option<C> {
        if !idle {
            self.idle_since = None;
            self.quiet.clear();
            return None;
        }
        let after = u64::from(dp.sleep_after_us());
        if after == 0 {
            return None;
        }
        let now_us = now_us();
        let since = *self.idle_since.get_or_insert(now_us);
        // The rest only once idle long enough (a polling PMD's idle
        // iterations stop at the clock).
        if now_us.saturating_sub(since) < after || !dp.quiescent() || !dp.rx_wait_fds(&mut self.fds)
        {
            return None;
        }
        let mut timeout = self.max;
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(Instant::now()));
        }
        if timeout.is_zero() {
            return None;
        }
        self.wake.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if let Ok(c) = commands.try_recv() {
            self.wake.asleep.store(false, Ordering::Relaxed);
            return Some(c);
        }
        if self.fds != self.last {
            self.quiet.clear();
            self.last.clone_from(&self.fds);
        }
        self.polled.clear();
        self.polled.extend(
            self.fds
                .iter()
                .filter(|fd| !self.quiet.contains(fd))
                .map(|&fd| (fd, libc::POLLIN)),
        );
        self.polled.push((self.wake.fd.as_raw_fd(), libc::POLLIN));
        // Whole milliseconds, rounded up: never short of a deadline.
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let t0 = Instant::now();
        let woken = sluice_port::sys::poll(&self.polled, ms);
        self.wake.asleep.store(false, Ordering::Relaxed);
        if let Ok(events) = woken {
            let (ports, wake) = events.split_at(events.len() - 1);
            if wake[0] != 0 {
                self.wake.fd.drain();
            }
            for (&e, &(fd, _)) in ports.iter().zip(&self.polled) {
                if e & libc::POLLIN == 0
                    && e & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
                {
                    self.quiet.push(fd);
                }
            }
        }
        dp.note_sleep(t0.elapsed().as_micros() as u64);
        // Still idle: if nothing comes, the next iteration sleeps again.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    use sluice_classifier::RuleSet;
    use sluice_datapath::DatapathConfig;
    use sluice_port::stream::StreamPort;

    /// A datapath whose one port listens on a unix socket (a descriptor
    /// to wait on), with a peer connected to it.
    fn datapath(dir: &std::path::Path) -> (Datapath, UnixStream) {
        let path = dir.join("p1.sock");
        let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(RuleSet::new())).unwrap();
        let port = StreamPort::open("p1", &path, true).unwrap();
        dp.add_port(1, Box::new(port)).unwrap();
        let peer = UnixStream::connect(&path).unwrap();
        // The port accepts it on its next poll.
        for _ in 0..10 {
            dp.poll_once(0);
        }
        (dp, peer)
    }

    fn sleeper(max: Duration) -> (Sleeper, Arc<Wake>) {
        let wake = Arc::new(Wake::new().unwrap());
        (Sleeper::new(Arc::clone(&wake), max), wake)
    }

    #[test]
    fn sleeps_only_after_the_idle_time_and_at_most_max() {
        let dir = tempfile::tempdir().unwrap();
        let (mut dp, _peer) = datapath(dir.path());
        let (mut s, _wake) = sleeper(Duration::from_millis(30));
        let (_tx, rx) = mpsc::channel::<()>();
        // Not idle, or not idle long enough: no sleep.
        s.after(&mut dp, false, || 0, None, &rx);
        s.after(&mut dp, true, || 1_000, None, &rx);
        s.after(&mut dp, true, || 1_100, None, &rx);
        assert_eq!(dp.stats().sleeps, 0);
        let t = Instant::now();
        s.after(&mut dp, true, || 1_300, None, &rx);
        assert_eq!(dp.stats().sleeps, 1);
        assert!(
            t.elapsed() >= Duration::from_millis(25),
            "{:?}",
            t.elapsed()
        );
        // Still idle: sleeps again at once.
        s.after(&mut dp, true, || 1_301, None, &rx);
        assert_eq!(dp.stats().sleeps, 2);
        // A deadline shortens it; one passed already, no sleep.
        s.after(&mut dp, true, || 1_302, Some(Instant::now()), &rx);
        assert_eq!(dp.stats().sleeps, 2);
        // sleep_after_us 0: never.
        let cfg = DatapathConfig {
            sleep_after_us: 0,
            ..Default::default()
        };
        let mut never = Datapath::new(cfg, Arc::new(RuleSet::new())).unwrap();
        s.after(&mut never, true, || 10_000, None, &rx);
        s.after(&mut never, true, || 90_000, None, &rx);
        assert_eq!(never.stats().sleeps, 0);
    }

    #[test]
    fn a_command_or_a_frame_wakes_it_long_before_max() {
        let dir = tempfile::tempdir().unwrap();
        let (mut dp, mut peer) = datapath(dir.path());
        let (mut s, wake) = sleeper(Duration::from_secs(20));
        let (tx, rx) = mpsc::channel::<u32>();
        s.after(&mut dp, true, || 0, None, &rx);
        // A command sent while it sleeps.
        let w = Arc::clone(&wake);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(7).unwrap();
            w.sent();
            tx
        });
        let t = Instant::now();
        assert_eq!(s.after(&mut dp, true, || 1_000, None, &rx), None);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(rx.try_recv(), Ok(7));
        let tx = sender.join().unwrap();
        // A command already waiting: no sleep, it is handed back.
        tx.send(8).unwrap();
        wake.sent();
        let before = dp.stats().sleeps;
        assert_eq!(s.after(&mut dp, true, || 2_000, None, &rx), Some(8));
        assert_eq!(dp.stats().sleeps, before);
        // A frame from the peer (2-byte length, then 60 bytes).
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut f = vec![0u8, 60];
            f.extend([0xffu8; 60]);
            peer.write_all(&f).unwrap();
            peer
        });
        let t = Instant::now();
        s.after(&mut dp, true, || 3_000, None, &rx);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let _peer = writer.join().unwrap();
        dp.poll_once(4_000);
        assert_eq!(dp.stats().rx_packets, 1);
    }

    #[test]
    fn a_port_without_a_descriptor_keeps_it_polling() {
        let dir = tempfile::tempdir().unwrap();
        let (mut dp, _peer) = datapath(dir.path());
        let mut frames = sluice_port::replay::Frames::new();
        frames.push(&[0u8; 60], 0);
        let replay = sluice_port::replay::ReplayPort::new("r", frames, true);
        dp.add_port(2, Box::new(replay)).unwrap();
        let (mut s, _wake) = sleeper(Duration::from_secs(20));
        let (_tx, rx) = mpsc::channel::<()>();
        s.after(&mut dp, true, || 0, None, &rx);
        s.after(&mut dp, true, || 100_000, None, &rx);
        assert_eq!(dp.stats().sleeps, 0);
    }

    /// A port whose descriptor reports a hang-up and never data (a pipe
    /// whose writer is gone), as a packet socket whose interface went
    /// down reports an error.
    struct HungUp(std::os::fd::OwnedFd);

    impl sluice_port::Port for HungUp {
        fn name(&self) -> &str {
            "hung-up"
        }
        fn caps(&self) -> sluice_port::PortCaps {
            sluice_port::PortCaps {
                rx: true,
                tx: true,
                ..Default::default()
            }
        }
        fn rx_burst(
            &mut self,
            _pool: &mut sluice_packet::PacketPool,
            _batch: &mut sluice_packet::PacketBatch,
            _in_port: u32,
        ) -> sluice_port::RxStatus {
            sluice_port::RxStatus::Idle
        }
        fn tx_burst(
            &mut self,
            pool: &mut sluice_packet::PacketPool,
            batch: &mut sluice_packet::PacketBatch,
        ) -> usize {
            batch.free_all(pool);
            0
        }
        fn stats(&self) -> sluice_port::PortStats {
            sluice_port::PortStats::default()
        }
        fn rx_fd(&self) -> Option<RawFd> {
            Some(self.0.as_raw_fd())
        }
    }

    #[test]
    fn a_descriptor_that_only_reports_an_error_is_left_out_of_the_next_sleeps() {
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        let mut dp = Datapath::new(DatapathConfig::default(), Arc::new(RuleSet::new())).unwrap();
        dp.add_port(1, Box::new(HungUp(r.into()))).unwrap();
        let max = Duration::from_millis(40);
        let (mut s, _wake) = sleeper(max);
        let (_tx, rx) = mpsc::channel::<()>();
        s.after(&mut dp, true, || 0, None, &rx);
        // Woken at once by the hang-up...
        let t = Instant::now();
        s.after(&mut dp, true, || 1_000, None, &rx);
        assert!(t.elapsed() < max / 2, "{:?}", t.elapsed());
        // ...then it sleeps its whole time instead of spinning.
        let t = Instant::now();
        s.after(&mut dp, true, || 2_000, None, &rx);
        assert!(t.elapsed() >= max / 2, "{:?}", t.elapsed());
        assert_eq!(dp.stats().sleeps, 2);
    }
}
