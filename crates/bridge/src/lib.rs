//! Sluice's bridge state for `NORMAL` (a control-plane component, below
//! the classifier that translates `NORMAL` and the datapath that
//! revalidates when it changes): the MAC learning table ([`macs`]), each
//! port's VLAN mode ([`vlan`]) and the bridge's port mirrors
//! ([`mirror`]), as Open vSwitch's bridge keeps them.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;

pub mod macs;
pub mod mirror;
pub mod vlan;

pub use macs::MacTable;
pub use mirror::{Mirror, Mirrors};
pub use vlan::{Egress, PortVlan, VlanMode};

/// A bridge: its MAC table and its ports' VLAN modes (a port not named
/// is a trunk of every VLAN, OVS's default).
#[derive(Debug)]
pub struct Bridge {
    /// The MAC learning table.
    pub macs: MacTable,
    ports: RwLock<HashMap<u32, PortVlan>>,
    mirrors: RwLock<std::sync::Arc<Mirrors>>,
    /// Whether `mirrors` has any (read on every translation without the
    /// lock: most bridges have none).
    any_mirrors: AtomicBool,
    /// Moves when a port's VLAN mode or the mirrors change.
    ports_version: AtomicU64,
    /// The clock MAC ages are counted on (ms since the bridge was made).
    origin: std::time::Instant,
}

impl Default for Bridge {
    fn default() -> Self {
        Bridge {
            macs: MacTable::default(),
            ports: RwLock::default(),
            mirrors: RwLock::default(),
            any_mirrors: AtomicBool::new(false),
            ports_version: AtomicU64::new(0),
            origin: std::time::Instant::now(),
        }
    }
}

impl Bridge {
    /// The bridge's clock, ms.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Moves on every change that may change a `NORMAL` decision (the
    /// MAC table's, a port's VLAN mode).
    pub fn version(&self) -> u64 {
        self.macs
            .version()
            .wrapping_add(self.ports_version.load(Ordering::Acquire))
    }

    /// Moves on every change of a port's VLAN mode (or a port's removal)
    /// or of the mirrors: any decision may change.
    pub fn ports_version(&self) -> u64 {
        self.ports_version.load(Ordering::Acquire)
    }

    /// Sets port `port`'s VLAN mode.
    pub fn set_port(&self, port: u32, vlan: PortVlan) {
        let mut g = self.ports.write().unwrap_or_else(|e| e.into_inner());
        if vlan.is_default() {
            g.remove(&port);
        } else {
            g.insert(port, vlan);
        }
        drop(g);
        self.ports_version.fetch_add(1, Ordering::Release);
    }

    /// Forgets port `port` (its VLAN mode and the MACs learned on it).
    pub fn remove_port(&self, port: u32) {
        self.ports
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&port);
        self.macs.forget_port(port);
        self.ports_version.fetch_add(1, Ordering::Release);
    }

    /// Sets the bridge's mirrors (every cached decision is made again).
    pub fn set_mirrors(&self, mirrors: Mirrors) {
        let any = !mirrors.is_empty();
        *self.mirrors.write().unwrap_or_else(|e| e.into_inner()) = std::sync::Arc::new(mirrors);
        self.any_mirrors.store(any, Ordering::Release);
        self.ports_version.fetch_add(1, Ordering::Release);
    }

    /// Whether the bridge has mirrors (no lock taken: a translation asks
    /// this first, and the mirrors only when there are some).
    #[inline]
    pub fn has_mirrors(&self) -> bool {
        self.any_mirrors.load(Ordering::Acquire)
    }

    /// The bridge's mirrors.
    pub fn mirrors(&self) -> std::sync::Arc<Mirrors> {
        std::sync::Arc::clone(&self.mirrors.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Port `port`'s VLAN mode.
    pub fn port(&self, port: u32) -> PortVlan {
        self.ports
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&port)
            .cloned()
            .unwrap_or_default()
    }

    /// Every port with a VLAN mode of its own.
    pub fn ports(&self) -> Vec<(u32, PortVlan)> {
        let mut v: Vec<(u32, PortVlan)> = self
            .ports
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(p, v)| (*p, v.clone()))
            .collect();
        v.sort_by_key(|(p, _)| *p);
        v
    }
}
