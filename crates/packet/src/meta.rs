//! Metadata that travels with a packet between stages.

/// Marks a layer offset that has not been found (or not parsed yet).
pub const NO_OFFSET: u16 = u16::MAX;

/// Per-packet metadata: where the packet came from, a hash if the port
/// offered one, and the layer offsets the flow-key extraction found, so that
/// later stages (actions, header rewrites) do not parse again (seed 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// OpenFlow port number the packet arrived on.
    pub in_port: u32,
    /// A hash the receiving port computed (RSS or the kernel's skb hash).
    /// Used as the packet's flow hash when `has_hash` is set.
    pub hash: u32,
    /// Whether `hash` is valid.
    pub has_hash: bool,
    /// Offset of the L3 header (after Ethernet and VLAN tags).
    pub l3_ofs: u16,
    /// Offset of the L4 header (after IP options / IPv6 extension headers);
    /// [`NO_OFFSET`] for non-first fragments or when absent.
    pub l4_ofs: u16,
    /// Number of VLAN tags found (0..=2) at offset 12.
    pub n_vlans: u8,
    /// The L4 protocol found at `l4_ofs` (IPv6: after extension headers).
    pub l4_proto: u8,
    /// EtherType of the L3 header at `l3_ofs` (0 when none).
    pub l3_type: u16,
    /// When the packet was received, in ns since the Unix epoch, as the
    /// port knows it (a capture's own timestamp for pcap input; 0 when the
    /// port does not say). Output captures reuse it, so replaying a capture
    /// gives byte-identical output files.
    pub rx_ts_ns: u64,
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            in_port: 0,
            hash: 0,
            has_hash: false,
            l3_ofs: NO_OFFSET,
            l4_ofs: NO_OFFSET,
            n_vlans: 0,
            l4_proto: 0,
            l3_type: 0,
            rx_ts_ns: 0,
        }
    }
}

impl PacketMeta {
    /// Offset of the L3 header, if found.
    #[inline]
    pub fn l3(&self) -> Option<usize> {
        (self.l3_ofs != NO_OFFSET).then_some(self.l3_ofs as usize)
    }

    /// Offset of the L4 header, if found.
    #[inline]
    pub fn l4(&self) -> Option<usize> {
        (self.l4_ofs != NO_OFFSET).then_some(self.l4_ofs as usize)
    }
}
