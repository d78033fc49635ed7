//! What Sluice's datapath can do, in the words of a `Datapath` row's
//! `capabilities` (OVS's `get_datapath_cap`, ofproto-dpif.c): OVN and
//! other controllers read them to choose how they program the switch, so
//! each says what Sluice really has, not what OVS's userspace datapath
//! says. Where they differ from Open vSwitch 3.1's netdev datapath (every
//! key `true` there, `max_mpls_depth` 3, `max_hash_alg` 1), the comment
//! says why.

/// The capabilities with `vlan-limit` `vlan_limit` (0: no limit), as
/// (key, value).
pub fn capabilities(vlan_limit: usize) -> Vec<(String, String)> {
    // The flow key holds two tags; `vlan-limit` parses fewer (OVS's is
    // the smaller of the two likewise: 1 by default).
    let vlans = match vlan_limit {
        0 => 2,
        n => n.min(2),
    };
    std::iter::once(("max_vlan_headers".to_string(), vlans.to_string()))
        .chain(
            CAPABILITIES
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .collect()
}

/// The capabilities but `max_vlan_headers`, as (key, value).
const CAPABILITIES: &[(&str, &str)] = &[
    // The flow key holds one MPLS label stack entry (OVS: 3).
    ("max_mpls_depth", "1"),
    ("recirc", "true"),
    ("ct_state", "true"),
    ("ct_zone", "true"),
    ("ct_mark", "true"),
    ("ct_label", "true"),
    ("ct_state_nat", "true"),
    ("ct_orig_tuple", "true"),
    ("ct_orig_tuple6", "true"),
    // No nd_reserved / nd_options_type fields (OVS: true).
    ("nd_ext", "false"),
    ("masked_set_action", "true"),
    ("tnl_push_pop", "true"),
    // Megaflows are not named by UFIDs (OVS: true).
    ("ufid", "false"),
    // No output truncation (`output(port=P,max_len=N)`; OVS: true).
    ("trunc", "false"),
    ("clone", "true"),
    // `sample` is accepted and samples nothing (no IPFIX/sFlow exporter).
    ("sample_nesting", "false"),
    ("ct_eventmask", "false"),
    ("ct_clear", "true"),
    // dp_hash select groups hash symmetric L4 (OVS_HASH_ALG_SYM_L4).
    ("max_hash_alg", "1"),
    ("check_pkt_len", "true"),
    // Zone timeout policies (`ovs-vsctl add-zone-tp`, the CT_Timeout_Policy
    // rows), applied by the tracker to each connection of the zone as OVS's
    // userspace datapath applies the policy its ct actions name.
    ("ct_timeout", "true"),
    // Every drop is counted with its reason.
    ("explicit_drop_action", "true"),
    // No bonds (OVS: true).
    ("lb_output_action", "false"),
    // `nat(src)` without a range commits with the packet's own source,
    // another port on a tuple collision (conntrack's reply_tuple).
    ("ct_zero_snat", "true"),
    // No `add_mpls` (OVS: true).
    ("add_mpls", "false"),
    // NXT_CT_FLUSH: connections by partial tuple (ct_flush.rs).
    ("ct_flush", "true"),
];
