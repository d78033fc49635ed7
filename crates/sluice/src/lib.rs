//! Sluice layer 6: configuration, the run loop of the `sluice` command,
//! traces and reports. The binary (`main.rs`) is a thin clap front end.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod auto_lb;
pub mod capture;
pub mod config;
#[allow(unsafe_code)]
pub mod cpu;
pub mod ctcmd;
pub mod ctl;
pub mod ctl_socket;
pub mod log;
pub mod metrics;
pub mod metrics_http;
pub mod perf_show;
pub mod pmd;
pub mod pmd_show;
pub mod pmd_sleep;
pub mod report;
pub mod runner;
pub mod rxq_assign;
pub mod tend;
pub mod trace;
pub mod tunnels;
pub mod vlog;
pub mod vswitchd_cmd;
pub mod workload;
