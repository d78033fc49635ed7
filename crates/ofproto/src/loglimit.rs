//! Log lines a peer can cause, rate-limited: a flood of connections or
//! errors writes a few lines a second and a count of what it left out,
//! never a line per event (as OVS's `VLOG_RATE_LIMIT_INIT`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most `burst` lines per `period`; the lines left out are counted and
/// said with the next line written.
pub struct LogLimit {
    burst: u32,
    period: Duration,
    state: Mutex<State>,
}

struct State {
    window: Option<Instant>,
    written: u32,
    suppressed: u64,
}

impl LogLimit {
    /// A limit of `burst` lines per `period`.
    pub const fn new(burst: u32, period: Duration) -> Self {
        LogLimit {
            burst,
            period,
            state: Mutex::new(State {
                window: None,
                written: 0,
                suppressed: 0,
            }),
        }
    }

    /// The line to write now (with the count of lines left out since the
    /// last one), or `None` when over the limit.
    pub fn admit(&self, line: &str, now: Instant) -> Option<String> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !s
            .window
            .is_some_and(|w| now.duration_since(w) < self.period)
        {
            s.window = Some(now);
            s.written = 0;
        }
        if s.written >= self.burst {
            s.suppressed += 1;
            return None;
        }
        s.written += 1;
        Some(match std::mem::take(&mut s.suppressed) {
            0 => line.to_string(),
            n => format!("{line} ({n} similar lines not logged)"),
        })
    }

    /// Logs `line` (information, target `openflow`) if the limit allows.
    pub fn log(&self, line: &str) {
        if let Some(l) = self.admit(line, Instant::now()) {
            tracing::info!(target: "openflow", "{l}");
        }
    }
}

/// Lines about OpenFlow connections (accepted, refused, closed, TLS
/// failures): at most 20 a second, whatever the peers do.
static CONNECTIONS: LogLimit = LogLimit::new(20, Duration::from_secs(1));

/// Writes a line about a connection to stderr, rate-limited.
pub fn log_connection(line: &str) {
    CONNECTIONS.log(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_a_few_lines_and_counts_the_rest() {
        let l = LogLimit::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        let written: Vec<String> = (0..1000)
            .filter_map(|i| l.admit(&format!("line {i}"), t0))
            .collect();
        assert_eq!(written, ["line 0", "line 1", "line 2"]);
        let next = l.admit("later", t0 + Duration::from_millis(1500));
        assert_eq!(
            next.as_deref(),
            Some("later (997 similar lines not logged)")
        );
        assert_eq!(
            l.admit("again", t0 + Duration::from_millis(1501))
                .as_deref(),
            Some("again")
        );
    }
}
