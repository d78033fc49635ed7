//! What a bridge's control plane does a few times a second besides
//! answering ([`Tender::once`]): tells controllers of links that went up
//! or down, takes in the rules the PMDs' `learn` actions added, fails open
//! a standalone bridge whose controllers are gone, removes timed-out
//! rules (FLOW_REMOVED to the controllers that asked), ages the
//! connection tracker (once per datapath) and the MAC table, and reads
//! the kernel's addresses and routes again when rtnetlink says they
//! changed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::ctl::Control;
use sluice_ofproto::hub::Hub;

/// How often [`Tender::once`] runs.
pub const TICK: Duration = Duration::from_millis(250);

/// One bridge's periodic work.
pub struct Tender {
    control: Arc<Control>,
    hub: Option<Arc<Hub>>,
    standalone: bool,
    /// Whether it also ages the datapath's connection tracker (the first
    /// bridge's tender does, for all).
    datapath: bool,
    links: sluice_port::link::LinkWatch,
    /// Tells of the kernel's route, address and link changes (the first
    /// bridge's tender, for the tunnels through internal ports); none if
    /// rtnetlink would not open, then the kernel is read every tick.
    kernel: Option<sluice_port::rtnetlink::Watch>,
    /// The switch's side of it when last read (tunnel ports, ports).
    kernel_inputs: (usize, usize),
    tick: u64,
}

/// Ticks between two reads of the kernel's addresses and routes when
/// rtnetlink told of no change (what it cannot tell: a port's interface
/// that was there with its address before the port was made).
const KERNEL_RESCAN: u64 = 20;

impl Tender {
    /// The work for `control`'s bridge, whose OpenFlow side is `hub`
    /// (none without one); `standalone`: it may fail open.
    pub fn new(
        control: Arc<Control>,
        hub: Option<Arc<Hub>>,
        standalone: bool,
        datapath: bool,
    ) -> Self {
        Tender {
            control,
            hub,
            standalone,
            datapath,
            links: sluice_port::link::LinkWatch::default(),
            kernel: if datapath {
                sluice_port::rtnetlink::Watch::open().ok()
            } else {
                None
            },
            kernel_inputs: (usize::MAX, 0),
            tick: 0,
        }
    }

    /// One round (every [`TICK`]).
    pub fn once(&mut self) {
        self.tick += 1;
        let control = &self.control;
        // Every half second, for controllers: live ports whose link went
        // up or down (PORT_STATUS, reason modify).
        if self.hub.is_some() && self.tick.is_multiple_of(2) {
            if let Ok(ports) = control.port_reports() {
                let specs = ports.iter().map(|p| (p.ofport, p.name.as_str()));
                for (ofport, _) in self.links.changes(specs) {
                    if let Some(p) = ports.iter().find(|p| p.ofport == ofport) {
                        control.port_changed(crate::ctl::PortChange::Modified, ofport, &p.name);
                    }
                }
            }
        }
        // About once a second: expired connections and MACs go.
        if self.tick.is_multiple_of(4) {
            if self.datapath {
                control.sweep_conntrack();
            } else {
                control.age_macs();
            }
        }
        // The kernel's addresses and routes for tunnels through internal
        // ports (once per datapath): read again when rtnetlink tells of a
        // change, as OVS's route table is, and every few seconds.
        if self.datapath {
            let told = self.kernel.as_ref().is_none_or(|w| w.changed());
            let inputs = control.kernel_tunnel_inputs();
            if told || inputs != self.kernel_inputs || self.tick.is_multiple_of(KERNEL_RESCAN) {
                self.kernel_inputs = inputs;
                control.refresh_kernel_tunnels();
            }
        }
        // Rules the PMDs learned, into the rules the control plane owns
        // (and out to the other PMDs).
        let _ = control.adopt_learned();
        // Standalone: no controller for long enough fails open (every
        // packet NORMAL), until one connects.
        if let Some(h) = self
            .hub
            .as_ref()
            .filter(|h| self.standalone && !h.fail_secure.load(Ordering::Relaxed))
        {
            let open = h
                .controllers_down_for()
                .is_some_and(|d| d >= sluice_ofproto::channel::FAIL_OPEN_AFTER);
            if open != h.failing_open.load(Ordering::Relaxed) && control.set_fail_open(open).is_ok()
            {
                h.failing_open.store(open, Ordering::Relaxed);
                if open {
                    tracing::info!(
                        target: "openflow",
                        "no controller connected for {} s: failing open (every packet NORMAL, as OVS's fail-mode standalone)",
                        sluice_ofproto::channel::FAIL_OPEN_AFTER.as_secs()
                    );
                } else {
                    tracing::info!(target: "openflow", "a controller connected: no longer failing open");
                }
            }
        }
        if let Ok(gone) = control.expire_rules() {
            let Some(hub) = &self.hub else { return };
            let now = control.uptime_us();
            for (r, why) in gone {
                if r.flags & sluice_classifier::table::flag::SEND_FLOW_REM != 0 {
                    hub.flow_removed(&r, why, now);
                }
            }
        }
    }
}

/// Joins `control`'s bridge to its OpenFlow side `hub`: `of-show` shows
/// the hub's connections, and port changes go to them as PORT_STATUS.
pub fn wire_openflow(control: &Arc<Control>, hub: &Arc<Hub>) {
    let h = Arc::clone(hub);
    control.on_of_show(Box::new(move || h.show()));
    let h = Arc::clone(hub);
    let control_for_status = Arc::downgrade(control);
    control.on_port_change(Box::new(move |how, ofport, name| {
        let reason = match how {
            crate::ctl::PortChange::Added => 0,
            crate::ctl::PortChange::Deleted => 1,
            crate::ctl::PortChange::Modified => 2,
        };
        let config = control_for_status
            .upgrade()
            .map_or(0, |c| c.port_config(ofport));
        h.port_status(reason, ofport, name, config);
    }));
}
