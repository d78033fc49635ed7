//! The control plane of `sluice vswitchd`, the drop-in `ovs-vswitchd`:
//! what it does with the `Open_vSwitch` database on a stock
//! `ovsdb-server`. So far: its connection ([`db`], the I/O around the
//! protocol core of `sluice-ovsdb`), the configuration the rows ask for
//! ([`desired`]), the OpenFlow port numbers of each bridge's interfaces
//! ([`ofports`]) and the `ovs-appctl` socket ([`unixctl`],
//! [`unixctl_server`]). The reconciler (rows to bridges, ports and
//! rules, and what ovs-vswitchd writes back) builds on them.

pub mod db;
pub mod desired;
pub mod ofports;
pub mod unixctl;
pub mod unixctl_server;
