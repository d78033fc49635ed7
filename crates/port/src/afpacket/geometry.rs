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
    /// With virtio-net headers every slot must hold a 64 KiB GSO
    /// super-frame with its headers: slots of 64 KiB + 128 B, 15 to a
    /// block of 1 MiB; 510 rx slots (32 MiB), 255 tx slots (16 MiB).
    pub(super) const VNET: Geometry = Geometry {
        rx_frame: VNET_SLOT,
        rx_frames: 34 * 15,
        rx_block: 1 << 20,
        tx_frame: VNET_SLOT,
        tx_frames: 17 * 15,
        tx_block: 1 << 20,
    };

    /// The rings for an interface of MTU `mtu`: [`Geometry::VNET`] with
    /// virtio-net headers (its slots hold any MTU); else
    /// [`Geometry::PLAIN`] while a frame fits 2 KiB slots, and for jumbo
    /// MTUs slots of the next power of two (8 MiB of rx ring, 2 MiB tx).
    pub(super) fn for_mtu(vnet: bool, mtu: u32) -> Geometry {
        // Ethernet header, a VLAN tag put back, the slot header and
        // sockaddr_ll before the frame, alignment.
        let need = mtu as usize + 18 + 128;
        if vnet {
            Geometry::VNET
        } else if need <= Geometry::PLAIN.rx_frame {
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
        }
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
        assert_eq!(Geometry::for_mtu(true, 1500).rx_frame, VNET_SLOT);
        assert_eq!(Geometry::for_mtu(true, 65535).rx_frame, VNET_SLOT);
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
