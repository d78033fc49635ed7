//! The control plane of `sluice vswitchd`, the drop-in `ovs-vswitchd`:
//! what it does with the `Open_vSwitch` database on a stock
//! `ovsdb-server`. Its connection ([`db`], the I/O around the protocol
//! core of `sluice-ovsdb`), the configuration the rows ask for
//! ([`desired`]), each interface as a Sluice port ([`iface`]), the
//! OpenFlow port numbers of each bridge's interfaces ([`ofports`], in the
//! order OVS creates them: [`ovs_order`]), the
//! reconciler that makes the switch what the rows ask and says what to
//! write back ([`reconcile`]), the daemon's loop around them ([`daemon`]),
//! what the kernel says of an interface ([`netdev`]), the process as OVS
//! runs it ([`process`]: pidfile, `--detach`) and the `ovs-appctl` socket
//! ([`unixctl`], [`unixctl_server`]).

pub mod daemon;
pub mod db;
pub mod desired;
pub mod iface;
pub mod mirrors;
pub mod netdev;
pub mod ofports;
pub mod ovs_order;
pub mod process;
pub mod reconcile;
pub mod unixctl;
pub mod unixctl_server;
