//! The shape of an AF_PACKET port's rings: slot sizes and counts, for
//! plain rings, virtio-net rings and jumbo MTUs.

/// Where frame data starts in a tx slot: TPACKET_ALIGN(sizeof(tpacket2_hdr)).
pub(super) const TX_DATA_OFFSET: usize = 32;

/// The rings' shape: slot sizes and counts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    pub(super) rx_frame: usize,
    pub(super) rx_frames: usize,
    pub(super) rx_block: usize,
    pub(super) tx_frame: usize,
    pub(super) tx_frames: usize,
    pub(super) tx_block: usize,
}

impl Geometry {
    /// Without virtio-net headers: 2048 rx slots of 2 KiB (4 MiB) in
    /// blocks of 64 KiB, 512 tx slots of 2 KiB.
    pub(super) const PLAIN: Geometry = Geometry {
        rx_frame: 2048,
        rx_frames: 2048,
        rx_block: 1 << 16,
        tx_frame: 2048,
        tx_frames: 512,
        tx_block: 2048 * 32,
    };
    /// With virtio-net headers the tx ring's slots hold a 64 KiB GSO
    /// super-frame with its headers: slots of 64 KiB + 128 B, 15 to a
    /// block of 1 MiB, 255 of them (16 MiB). The rx ring is sized by the
    /// MTU as without them: a longer frame (a super-frame) fills its slot
    /// only with its start and waits whole in the socket's queue
    /// (`PACKET_COPY_THRESH`), read from there straight into a pool frame
    /// (one copy, as a 64 KiB slot's frame would be copied out of it
    /// again).
    pub(super) const VNET_TX: Geometry = Geometry {
        rx_frame: 0,
        rx_frames: 0,
        rx_block: 0,
        tx_frame: VNET_SLOT,
        tx_frames: 17 * 15,
        tx_block: 1 << 20,
    };

    /// The rings for an interface of MTU `mtu`: slots of 2 KiB while a
    /// frame fits them, for jumbo MTUs of the next power of two (8 MiB
    /// of rx ring, 2 MiB tx); with virtio-net headers the tx ring is
    /// [`Geometry::VNET_TX`]'s.
    pub(super) fn for_mtu(vnet: bool, mtu: u32) -> Geometry {
        // Ethernet header, a VLAN tag put back, the slot header and
        // sockaddr_ll (and the virtio-net header) before the frame,
        // alignment.
        let need = mtu as usize + 18 + 128;
        let mut g = if need <= Geometry::PLAIN.rx_frame {
            Geometry::PLAIN
        } else {
            let frame = need.next_power_of_two();
            let block = frame.max(1 << 16);
            Geometry {
                rx_frame: frame,
                rx_frames: ((8 << 20) / frame).max(block / frame),
                rx_block: block,
                tx_frame: frame,
                tx_frames: ((2 << 20) / frame).max(block / frame),
                tx_block: block,
            }
        };
        if vnet {
            g.tx_frame = Geometry::VNET_TX.tx_frame;
            g.tx_frames = Geometry::VNET_TX.tx_frames;
            g.tx_block = Geometry::VNET_TX.tx_block;
        }
        g
    }
}

/// A slot of a vnet ring: the largest GSO super-frame (64 KiB), its
/// virtio-net header, a VLAN tag and the slot header, 16-byte aligned.
pub(super) const VNET_SLOT: usize = (1 << 16) + 128;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_a_frame_of_the_mtu_and_blocks_hold_whole_slots() {
        assert_eq!(Geometry::for_mtu(false, 1500).rx_frame, 2048);
        // With virtio-net headers: rx slots by the MTU (super-frames are
        // read from the socket's queue), tx slots hold a super-frame.
        assert_eq!(Geometry::for_mtu(true, 1500).rx_frame, 2048);
        assert_eq!(Geometry::for_mtu(true, 1500).tx_frame, VNET_SLOT);
        assert_eq!(Geometry::for_mtu(true, 65535).tx_frame, VNET_SLOT);
        for mtu in [68, 1500, 1902, 1903, 4000, 9000, 9710, 16000, 65535] {
            for vnet in [false, true] {
                let g = Geometry::for_mtu(vnet, mtu);
                // Ethernet header, a VLAN tag, the virtio-net header and
                // the slot header before the frame (at most 66 bytes).
                assert!(g.rx_frame >= mtu as usize + 18 + 10 + 66, "{mtu} {g:?}");
                assert!(g.tx_frame >= mtu as usize + 18 + 10 + TX_DATA_OFFSET);
                for (frame, frames, block) in [
                    (g.rx_frame, g.rx_frames, g.rx_block),
                    (g.tx_frame, g.tx_frames, g.tx_block),
                ] {
                    assert_eq!(frame % 16, 0, "TPACKET_ALIGNMENT");
                    assert_eq!(block % 4096, 0, "whole pages");
                    assert!(block >= frame);
                    assert_eq!(frames % (block / frame), 0, "whole blocks");
                }
            }
        }
    }
}
