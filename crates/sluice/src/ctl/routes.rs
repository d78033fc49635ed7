//! Routes and neighbours given by hand, as `ovs-appctl ovs/route/add`,
//! `ovs/route/del` and `tnl/neigh/set` give them to OVS: kept by the
//! switch whether or not it has tunnels yet, and put into the tunnel
//! state as soon as there is one (and again whenever it is rebuilt).

use std::net::IpAddr;

use super::Control;
use crate::tunnels::UserRoute;

impl Control {
    /// Adds (or replaces, same prefix and mark) a route given by hand and
    /// puts it into the tunnel state if there is one.
    pub fn user_route_add(&self, r: UserRoute) {
        let mut m = self.manual.lock().expect("manual routes");
        m.add_route(r);
        if let Some(t) = self.tunnels() {
            m.apply(&t);
        }
    }

    /// Removes a route given by hand; false if there was none.
    pub fn user_route_del(&self, prefix: IpAddr, len: u8, mark: u32) -> bool {
        let gone = self
            .manual
            .lock()
            .expect("manual routes")
            .del_route(prefix, len, mark);
        if gone {
            if let Some(t) = self.tunnels() {
                t.route_del(prefix, len);
            }
        }
        gone
    }

    /// The routes given by hand, in the order given.
    pub fn user_routes(&self) -> Vec<UserRoute> {
        self.manual.lock().expect("manual routes").routes().to_vec()
    }

    /// Sets neighbour `ip` at `mac` behind `bridge` (a bridge or an
    /// internal port's name) by hand; in the tunnel state now if there
    /// is one, else once there is.
    pub fn neighbour_set(&self, bridge: &str, ip: IpAddr, mac: [u8; 6]) {
        let mut m = self.manual.lock().expect("manual routes");
        m.set_neighbour(bridge, ip, mac);
        if let Some(t) = self.tunnels() {
            m.apply(&t);
        }
    }

    /// Forgets the neighbours set by hand (`tnl/neigh/flush`).
    pub fn neighbours_forget_manual(&self) {
        self.manual
            .lock()
            .expect("manual routes")
            .forget_neighbours();
    }
}
