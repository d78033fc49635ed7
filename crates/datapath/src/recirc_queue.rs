//! Packets waiting for their next pass through the datapath: what a
//! `recirc` action (or a tunnel pop, or a `ct`) sends through it again.

use sluice_conntrack::CtResult;
use sluice_packet::tunnel::TunnelMeta;
use sluice_packet::{Packet, Slots, BATCH_SIZE};

/// Packets (or copies) a `recirc` action sends through the datapath
/// again, kept as columns: a packet queued is one 64-byte move and a few
/// small stores. (As one 144-byte record per packet it was built field
/// by field on the stack and then copied whole, and the core cannot
/// forward a wide load from several narrower stores: it waited for them,
/// a tenth of a decapsulation's cycles.)
#[derive(Debug)]
pub(crate) struct Queued {
    pub pkts: Vec<Packet>,
    /// Each one's recirculation id.
    pub ids: Vec<u32>,
    /// Whether this copy's fate is the received packet's (counted when
    /// its pass ends); false when the packet already has a fate (another
    /// output, or another copy carries it).
    pub fates: Vec<bool>,
    /// Where its tunnel metadata is in the queue's `cur_tun` when its
    /// pass runs ([`NO_TUN`]: it came from no tunnel): the next pass's key
    /// holds it. (Most recirculated packets have none: 96 bytes less to
    /// move each time one is queued.)
    pub tuns: Vec<u16>,
    /// Its connection tracking state (a `ct` action's result, or what
    /// its key had): the next pass's key holds it.
    pub cts: Vec<CtResult>,
}

impl Queued {
    fn with_capacity(n: usize) -> Self {
        Queued {
            pkts: Vec::with_capacity(n),
            ids: Vec::with_capacity(n),
            fates: Vec::with_capacity(n),
            tuns: Vec::with_capacity(n),
            cts: Vec::with_capacity(n),
        }
    }

    /// Packets queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether none is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Forgets the first `n` entries' columns but the packets (taken
    /// from `pkts` by the caller).
    #[inline]
    pub fn drop_front_info(&mut self, n: usize) {
        self.ids.drain(..n);
        self.fates.drain(..n);
        self.tuns.drain(..n);
        self.cts.drain(..n);
    }
}

/// [`Queued::tuns`] of a packet from no tunnel (past any index a
/// queue of [`RecircQueue::CAP`] gives: looking it up finds nothing).
pub(crate) const NO_TUN: u16 = u16::MAX;

const _: () = assert!(RecircQueue::CAP < NO_TUN as usize);

/// Packets waiting for their next pass (bounded: see [`RecircQueue::CAP`]).
#[derive(Debug)]
pub(crate) struct RecircQueue {
    /// Waiting for the next pass.
    pub next: Queued,
    /// The pass being run.
    pub cur: Queued,
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
        let tun = self.tun_index(tun);
        self.next.pkts.push(pkt);
        self.record(i, counted, id, ct, tun);
        Ok(())
    }

    /// Where `tun` goes in `next_tun` for a packet about to be queued
    /// ([`NO_TUN`] for none).
    #[inline]
    pub(crate) fn tun_index(&mut self, tun: Option<TunnelMeta>) -> u16 {
        match tun {
            Some(t) => {
                self.next_tun.push(t);
                (self.next_tun.len() - 1) as u16
            }
            None => NO_TUN,
        }
    }

    /// A place in `next_tun` for the tunnel metadata of a packet about to
    /// be queued, written there in place (a tunnel pop's), and its index
    /// for [`Self::push_slot`]. A place whose packet is not queued after
    /// all is given back with [`Self::unreserve_tun`] (or left unused
    /// until the pass ends).
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

    /// Queues slot `i`'s packet for the next pass `id`, as [`Self::push`]
    /// does, with its tunnel metadata already in `next_tun` at `tun`
    /// ([`NO_TUN`]: none), moving the packet straight from the slot's
    /// memory into the queue. False, moving nothing, when the queue is
    /// full or the slot empty.
    /// With `hash`, the queued packet's cache hash for that pass is set
    /// once it is in the queue (set in the slot just before, the stores
    /// would still be in flight when the move reads the packet whole).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_slot(
        &mut self,
        i: u8,
        counted: u32,
        slots: &mut Slots,
        id: u32,
        ct: Option<&CtResult>,
        tun: u16,
        hash: Option<u32>,
    ) -> bool {
        if self.next.len() >= Self::CAP || !slots.move_to_vec(i as usize, &mut self.next.pkts) {
            return false;
        }
        if let (Some(h), Some(p)) = (hash, self.next.pkts.last_mut()) {
            p.meta.hash = h;
            p.meta.has_hash = 1;
        }
        self.record(i, counted, id, ct, tun);
        true
    }

    /// The columns of the packet just queued (the last in `next.pkts`).
    #[inline]
    fn record(&mut self, i: u8, counted: u32, id: u32, ct: Option<&CtResult>, tun: u16) {
        let bit = 1u32 << i;
        let fate = (self.carried | counted) & bit == 0;
        let at = self.next.pkts.len() - 1;
        if fate {
            self.carried |= bit;
            self.carrier[i as usize] = at as u16;
        }
        let n = &mut self.next;
        n.ids.push(id);
        n.fates.push(fate);
        n.tuns.push(tun);
        n.cts.push(*ct.unwrap_or(&self.ct[i as usize]));
    }

    pub fn new() -> Self {
        RecircQueue {
            next: Queued::with_capacity(Self::CAP),
            cur: Queued::with_capacity(Self::CAP),
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
