//! The commands that watch a running switch or tune how it watches and
//! batches: `trace`, `capture`, `set` (`tx-flush-interval`,
//! `pmd-perf-metrics`, `pmd-perf-log-us`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Control, SET_USAGE};
use crate::pmd::PmdCommand;

impl Control {
    /// `trace FLOW | --packet HEX --in-port N`: the live rules' trace and
    /// each PMD's caches for the packet.
    pub(super) fn trace(&self, rest: &[&str]) -> Result<String, String> {
        let vlans = self.vlan_limit.load(Ordering::Relaxed);
        let mut req = crate::trace::LiveRequest::parse(rest, vlans)?;
        // This bridge's port, as the datapath numbers it; the trace starts
        // in this bridge and follows its patch ports.
        req.key.in_port = self.dp_port(req.key.in_port);
        let (root, root_ports, views) = self.trace_views();
        let key = Box::new(req.key);
        let probes = self.ask_each(|_, tx| PmdCommand::ProbeCaches(key.clone(), tx))?;
        let placed: Vec<_> = self
            .pmds
            .lock()
            .expect("pmd senders")
            .iter()
            .map(|(p, _)| *p)
            .zip(probes)
            .collect();
        let env = sluice_classifier::XlateEnv {
            rules: &root,
            ports: &root_ports,
            bridges: &views,
            bridge: 0,
        };
        Ok(crate::trace::live(
            env,
            &req,
            sluice_packet::extract::vlan_limit(vlans),
            &placed,
        ))
    }

    /// The live captures, for the end of the run.
    pub fn captures(&self) -> Arc<crate::capture::Captures> {
        Arc::clone(&self.captures)
    }

    /// `capture PORT FILE ...`: a tap on the port on every PMD, one writer.
    pub(super) fn capture(&self, args: &[&str]) -> Result<String, String> {
        let req = crate::capture::Request::parse(args)?;
        let port = req.port;
        if !self
            .specs
            .lock()
            .expect("specs")
            .iter()
            .any(|(n, _)| *n == port)
        {
            return Err(format!("no port {port}"));
        }
        let n = self.pmds.lock().expect("pmd senders").len();
        let vlans = self.vlan_limit.load(Ordering::Relaxed);
        let mut taps: Vec<Option<_>> = self
            .captures
            .start(req, n, vlans, self.now_us())?
            .into_iter()
            .map(|t| Some(Box::new(t)))
            .collect();
        let answers = self
            .ask_each(|i, tx| PmdCommand::AddTap(port, taps[i].take().expect("a tap each"), tx));
        match answers.and_then(|a| a.into_iter().collect::<Result<Vec<()>, String>>()) {
            Ok(_) => Ok(self.captures.started(port)),
            Err(e) => {
                let _ = self.ask_all(|tx| PmdCommand::RemoveTap(port, tx));
                self.captures.abandon(port);
                Err(e)
            }
        }
    }

    /// `set KEY=VALUE...`: `tx-flush-interval=auto|US [port=N]`,
    /// `pmd-perf-metrics=true|false`, `pmd-perf-log-us=US`.
    pub(super) fn set(&self, args: &[&str]) -> Result<String, String> {
        let mut interval = None;
        let mut port = None;
        let mut perf = None;
        let mut log_us = None;
        for a in args {
            match a.split_once('=') {
                Some(("tx-flush-interval", v)) => {
                    interval = Some(sluice_datapath::TxFlush::parse(v)?)
                }
                Some(("port", v)) => {
                    port = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("'{v}' is not a port number"))?,
                    )
                }
                Some(("pmd-perf-metrics", v)) => {
                    perf = Some(match v {
                        "true" => true,
                        "false" => false,
                        _ => return Err(format!("pmd-perf-metrics={v}: give true or false")),
                    })
                }
                Some(("pmd-perf-log-us", v)) => {
                    log_us = Some(
                        v.parse::<u64>()
                            .ok()
                            .filter(|us| (1..=1_000_000).contains(us))
                            .ok_or_else(|| {
                                format!("pmd-perf-log-us={v}: give 1 to 1000000 (µs)")
                            })?,
                    )
                }
                _ => return Err(format!("'{a}': expected {SET_USAGE}")),
            }
        }
        if interval.is_none() && port.is_some() {
            return Err("port= goes with tx-flush-interval=".into());
        }
        if interval.is_none() && perf.is_none() && log_us.is_none() {
            return Err(format!("expected {SET_USAGE}"));
        }
        if let Some(f) = interval {
            for r in self.ask_all(|tx| PmdCommand::SetTxFlush(port, f, tx))? {
                r?;
            }
        }
        if perf.is_some() || log_us.is_some() {
            self.ask_all(|tx| PmdCommand::SetPerf(perf, log_us, tx))?;
        }
        Ok(String::new())
    }
}
