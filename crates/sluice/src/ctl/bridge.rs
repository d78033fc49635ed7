//! Several bridges on one datapath: a [`Control`] per bridge, each with
//! its own rules (MAC table, groups, meters) and OpenFlow numbers, all
//! sharing the datapath's PMDs, ports and reconfiguration lock. Bridge 0
//! is the datapath's first [`Control`]; the others are made from it
//! ([`Control::new_bridge`]). A bridge's commands take and show its own
//! OpenFlow numbers; the datapath's are
//! [`sluice_classifier::xlate::dp_port`]'s.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_classifier::xlate::{dp_port, split_dp_port};
use sluice_classifier::{BridgeView, RuleSet};
use sluice_datapath::PortReport;
use sluice_port::PortSpec;

use super::Control;
use crate::pmd::PmdCommand;

impl Control {
    /// A new bridge `bridge` (1 and up) on this control's datapath: no
    /// rules (every packet a table miss until some are added), its own
    /// MAC table, the datapath's connection tracker and recirculation
    /// states; in force on every PMD when this returns.
    pub fn new_bridge(&self, bridge: u16) -> Result<Control, String> {
        if bridge == 0 || bridge >= sluice_classifier::xlate::bridges::MAX_BRIDGES {
            return Err(format!("bridge index {bridge} is out of range"));
        }
        let mut rules = RuleSet::new();
        {
            let first = self.rules.lock().expect("rules");
            rules.share_datapath_state(&first);
            rules.set_modes(first.modes());
        }
        // Its own rules, fail mode, OpenFlow side; the datapath's PMDs,
        // ports, reconfiguration lock, captures and published rules.
        let mut c = Control::new(rules, Vec::new(), self.start, self.n_rxq);
        c.bridge = bridge;
        c.extra_bridges = Arc::clone(&self.extra_bridges);
        c.published = Arc::clone(&self.published);
        c.pmds = Arc::clone(&self.pmds);
        c.reconfig = Arc::clone(&self.reconfig);
        c.specs = Arc::clone(&self.specs);
        c.first = Some(Arc::clone(&self.rules));
        c.captures = Arc::clone(&self.captures);
        c.manual = Arc::clone(&self.manual);
        c.set_vlan_limit(self.vlan_limit());
        self.extra_bridges.fetch_add(1, Ordering::Relaxed);
        let published = {
            let r = c.rules.lock().expect("rules");
            c.publish(&r)
        };
        if let Err(e) = published {
            c.remove_bridge();
            return Err(e);
        }
        Ok(c)
    }

    /// Sets the VLAN mode NORMAL gives this bridge's port `ofport` (a
    /// patch port's, which is no datapath port: the others' come with
    /// their specs); the megaflows that read it are revalidated.
    pub fn set_port_vlan(&self, ofport: u32, vlan: sluice_bridge::PortVlan) {
        self.rules
            .lock()
            .expect("rules")
            .bridge()
            .set_port(ofport, vlan);
    }

    /// What the kernel's part of the tunnel state is made from on the
    /// switch's side: how many tunnel ports and ports there are (when it
    /// changes, the tender reads the kernel again).
    pub fn kernel_tunnel_inputs(&self) -> (usize, usize) {
        let tunnels = self.tunnels().map_or(0, |t| t.ports().len());
        (tunnels, self.specs.lock().expect("specs").len())
    }

    /// Reads the kernel's addresses of the datapath's internal ports and
    /// its routes into the tunnel state, when there are tunnel ports (the
    /// first bridge's tender calls it when rtnetlink tells of a change or
    /// the ports changed, as OVS's route table follows the kernel's).
    pub fn refresh_kernel_tunnels(&self) {
        let Some(t) = self.tunnels() else {
            return;
        };
        if t.ports().is_empty() {
            return;
        }
        // (Only the internal ports' numbers and names are taken, not a
        // copy of every port's spec, four times a second.)
        let taps = crate::tunnels::internal_ports(&self.specs.lock().expect("specs"));
        let bridge_of = |p: u32| {
            let (b, _) = split_dp_port(p);
            let published = self.published.lock().expect("published rules");
            published
                .get(b as usize)
                .and_then(Option::as_ref)
                .map(|r| r.name().to_string())
                .unwrap_or_default()
        };
        if crate::tunnels::refresh_kernel(&t, &taps, bridge_of) {
            tracing::info!(target: "tunnel", "tunnel devices and routes now: {}", crate::tunnels::ports_show(Some(&t)).trim_end().replace('\n', "; "));
        }
        self.manual.lock().expect("manual routes").apply(&t);
    }

    /// Takes this bridge (not the first) off the datapath: its ports must
    /// be gone first. Packets of no bridge are dropped (`no such port`).
    pub fn remove_bridge(&self) {
        if self.bridge == 0 {
            return;
        }
        let _ = self.ask_all(|tx| PmdCommand::SetBridgeRules(self.bridge, None, tx));
        self.record_published(None);
        self.extra_bridges.fetch_sub(1, Ordering::Relaxed);
    }

    /// Records this bridge's rules as published (`None`: it is gone).
    pub(super) fn record_published(&self, rules: Option<Arc<RuleSet>>) {
        self.record_published_at(self.bridge, rules);
    }

    /// Records bridge `bridge`'s rules as published.
    pub(super) fn record_published_at(&self, bridge: u16, rules: Option<Arc<RuleSet>>) {
        let mut all = self.published.lock().expect("published rules");
        let k = bridge as usize;
        if all.len() <= k {
            all.resize(k + 1, None);
        }
        all[k] = rules;
    }

    /// What a trace translates with: this bridge's view of the datapath
    /// (every bridge's published rules and ports, patch ports followed)
    /// and the datapath's number of this bridge's port `in_port`.
    pub(super) fn trace_views(&self) -> (Arc<RuleSet>, Vec<u32>, Vec<Option<BridgeView>>) {
        let mut dp_ports: Vec<u32> = self
            .specs
            .lock()
            .expect("specs")
            .iter()
            .map(|(n, _)| *n)
            .collect();
        dp_ports.sort_unstable();
        let all = self.published.lock().expect("published rules").clone();
        let root = all
            .first()
            .cloned()
            .flatten()
            .unwrap_or_else(|| Arc::new(RuleSet::new()));
        let alone = self.extra_bridges.load(Ordering::Relaxed) == 0;
        let root_ports = BridgeView::first_ports(&dp_ports, &root, alone);
        if alone {
            return (root, root_ports, Vec::new());
        }
        let views = all
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let r = r.as_ref().filter(|_| k != 0)?;
                Some(BridgeView {
                    ports: BridgeView::ports_of(k as u16, &dp_ports, r),
                    rules: Arc::clone(r),
                })
            })
            .collect();
        (root, root_ports, views)
    }

    /// Which bridge it is (its index in the datapath).
    pub fn bridge_index(&self) -> u16 {
        self.bridge
    }

    /// The datapath's number of this bridge's OpenFlow port `ofport`.
    pub(crate) fn dp_port(&self, ofport: u32) -> u32 {
        dp_port(self.bridge, ofport)
    }

    /// [`Control::dp_port`] for a port to add: a bridge other than the
    /// first numbers its ports below 0xff00 and has no underlay (`ip=`:
    /// Sluice's own stand-alone form; tunnel ports are on any bridge).
    pub(super) fn dp_port_checked(&self, ofport: u32, spec: &PortSpec) -> Result<u32, String> {
        if self.bridge == 0 {
            return Ok(ofport);
        }
        if ofport != sluice_classifier::xlate::bridges::LOCAL && (ofport == 0 || ofport >= 0xff00) {
            return Err(format!(
                "port number {ofport}: a bridge's ports are numbered 1 to 65279"
            ));
        }
        if matches!(spec, PortSpec::Underlay { .. }) {
            return Err(
                "an underlay port (ip=) works on the datapath's first bridge only: on the others, give an internal port an address in the kernel (as OVS's br-phy)"
                    .into(),
            );
        }
        Ok(dp_port(self.bridge, ofport))
    }

    /// The reports of this bridge's ports among the datapath's, with
    /// their OpenFlow numbers (all of them, as they are, while the
    /// datapath has one bridge).
    pub(super) fn bridge_ports(&self, all: Vec<PortReport>) -> Vec<PortReport> {
        if self.bridge == 0 && self.extra_bridges.load(Ordering::Relaxed) == 0 {
            return all;
        }
        all.into_iter()
            .filter_map(|mut p| {
                let (b, of) = split_dp_port(p.ofport);
                (b == self.bridge).then(|| {
                    p.ofport = of;
                    p
                })
            })
            .collect()
    }

    /// Sets this bridge's patch ports: (its port, the peer bridge, the
    /// peer's port) each; in force on every PMD when this returns.
    pub fn set_patch_ports(
        &self,
        patches: Vec<sluice_classifier::PatchPort>,
    ) -> Result<(), String> {
        self.change_rules(|r| {
            r.set_patch_ports(patches);
            Ok(())
        })
        .map(|_| ())
    }

    /// Names the bridge (traces show it), in force on every PMD when this
    /// returns.
    pub fn set_name(&self, name: &str) -> Result<(), String> {
        self.change_rules(|r| {
            r.set_name(name);
            Ok(())
        })
        .map(|_| ())
    }

    /// Ages this bridge's MAC table (the first bridge's ages with the
    /// connection tracker's sweep).
    pub fn age_macs(&self) {
        let b = Arc::clone(self.rules.lock().expect("rules").bridge());
        b.macs.run(b.now_ms());
    }
}
