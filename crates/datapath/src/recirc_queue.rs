//! Packets waiting for their next pass through the datapath: what a
//! `recirc` action (or a tunnel pop, or a `ct`) sends through it again.

use sluice_conntrack::CtResult;
use sluice_packet::tunnel::TunnelMeta;
use sluice_packet::{Packet, BATCH_SIZE};

/// A packet (or copy) a `recirc` action sends through the datapath again.
#[derive(Debug)]
pub(crate) struct Recirculated {
    pub pkt: Packet,
    /// Its recirculation id.
    pub id: u32,
    /// Whether this copy's fate is the received packet's (counted when
    /// its pass ends); false when the packet already has a fate (another
    /// output, or another copy carries it).
    pub fate: bool,
    /// Where its tunnel metadata is in the queue's `cur_tun` when its
    /// pass runs ([`NO_TUN`]: it came from no tunnel): the next pass's key
    /// holds it. (Set by [`RecircQueue::push`]: most recirculated packets
    /// have none, and 96 bytes less to move each time one is queued.)
    pub tun: u16,
    /// Its connection tracking state (a `ct` action's result, or what
    /// its key had): the next pass's key holds it.
    pub ct: CtResult,
}

/// [`Recirculated::tun`] of a packet from no tunnel (past any index a
/// queue of [`RecircQueue::CAP`] gives: looking it up finds nothing).
pub(crate) const NO_TUN: u16 = u16::MAX;

const _: () = assert!(RecircQueue::CAP < NO_TUN as usize);

/// Packets waiting for their next pass (bounded: see [`RecircQueue::CAP`]).
#[derive(Debug)]
pub(crate) struct RecircQueue {
    /// Waiting for the next pass.
    pub next: Vec<Recirculated>,
    /// The pass being run.
    pub cur: Vec<Recirculated>,
    /// The tunnel metadata of the packets in `next` that have some, and
    /// of those in `cur` (swapped with them; `cur_tun` cleared when the
    /// pass is done).
    pub next_tun: Vec<TunnelMeta>,
    pub cur_tun: Vec<TunnelMeta>,
    /// Scratch for one action list's run: the connection tracking state
    /// a `ct` (or `ct_clear`) gave each packet of the batch, valid where
    /// `ct_set` has its bit (kept here so that a run without `ct` costs
    /// nothing for it).
    pub ct: [CtResult; BATCH_SIZE],
    pub ct_set: u32,
    /// Scratch for one action list's run: the packets whose fate a
    /// queued copy carries, each at `carrier[i]` in `next`.
    pub carried: u32,
    pub carrier: [u16; BATCH_SIZE],
    /// Fragments a `ct` let go (their datagram tracked, or their list
    /// expired), to run the actions after it once the batch is done.
    pub released: Vec<crate::fragments::Released>,
    /// Set while a `check_pkt_len` branch runs: the list's scratch above
    /// is the branch's packets' own from before it, not reset.
    pub branch: bool,
    /// Whether actions before this list (a branch's) changed the packet
    /// since its key was made: a `ct` parses it again.
    pub reparse: bool,
}

impl RecircQueue {
    /// Most packets waiting at once (four batches: more than one batch's
    /// packets when buckets recirculate copies).
    pub const CAP: usize = 4 * BATCH_SIZE;

    /// Queues a copy of packet `i` for the next pass `id`, with its
    /// connection tracking state (`None`: the one a `ct` of this run gave
    /// it, in `self.ct`) and tunnel metadata (if it has any); it
    /// carries the packet's fate unless an earlier copy does or `counted`
    /// has the packet. The packet back when the queue is full. (Made
    /// here from its parts: the ct state is copied once, from where the
    /// `ct` action left it.)
    #[inline]
    pub(crate) fn push(
        &mut self,
        i: u8,
        counted: u32,
        pkt: Packet,
        id: u32,
        ct: Option<&CtResult>,
        tun: Option<TunnelMeta>,
    ) -> Result<(), Packet> {
        if self.next.len() >= Self::CAP {
            return Err(pkt);
        }
        let tun = match tun {
            Some(t) => {
                self.next_tun.push(t);
                (self.next_tun.len() - 1) as u16
            }
            None => NO_TUN,
        };
        self.push_at(i, counted, pkt, id, ct, tun)
    }

    /// A place in `next_tun` for the tunnel metadata of a packet about to
    /// be queued, for its pop to write there in place, and its index for
    /// [`Self::push_at`]. A place whose packet is not queued after all is
    /// given back with [`Self::unreserve_tun`] (or left unused until the
    /// pass ends).
    #[inline]
    pub(crate) fn reserve_tun(&mut self) -> (u16, &mut TunnelMeta) {
        self.next_tun.push(TunnelMeta::default());
        let at = self.next_tun.len() - 1;
        (at as u16, &mut self.next_tun[at])
    }

    /// Gives back the last place [`Self::reserve_tun`] gave.
    #[inline]
    pub(crate) fn unreserve_tun(&mut self) {
        self.next_tun.pop();
    }

    /// [`Self::push`] with the tunnel metadata already in `next_tun` at
    /// `tun` ([`NO_TUN`]: none).
    #[inline]
    pub(crate) fn push_at(
        &mut self,
        i: u8,
        counted: u32,
        pkt: Packet,
        id: u32,
        ct: Option<&CtResult>,
        tun: u16,
    ) -> Result<(), Packet> {
        if self.next.len() >= Self::CAP {
            return Err(pkt);
        }
        let bit = 1u32 << i;
        let fate = (self.carried | counted) & bit == 0;
        if fate {
            self.carried |= bit;
            self.carrier[i as usize] = self.next.len() as u16;
        }
        self.next.push(Recirculated {
            pkt,
            id,
            fate,
            tun,
            ct: *ct.unwrap_or(&self.ct[i as usize]),
        });
        Ok(())
    }

    pub fn new() -> Self {
        RecircQueue {
            next: Vec::with_capacity(Self::CAP),
            cur: Vec::with_capacity(Self::CAP),
            next_tun: Vec::with_capacity(Self::CAP),
            cur_tun: Vec::with_capacity(Self::CAP),
            ct: [CtResult::default(); BATCH_SIZE],
            ct_set: 0,
            carried: 0,
            carrier: [0; BATCH_SIZE],
            released: Vec::new(),
            branch: false,
            reparse: false,
        }
    }
}
