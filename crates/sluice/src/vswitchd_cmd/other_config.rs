//! `Open_vSwitch:other_config` as ovs-vswitchd reads it: the keys only a
//! start applies, read into the switch's configuration before the
//! datapath starts.

use std::collections::BTreeMap;

/// `Open_vSwitch:other_config` keys read when the daemon starts (a change
/// later is logged and waits for the next start).
pub(super) const START_ONLY: &[&str] = &[
    "pmd-cpu-mask",
    "emc-insert-inv-prob",
    "smc-enable",
    "vlan-limit",
    "pmd-sleep-after",
    "ct-prealloc",
];

/// The switch's configuration from `Open_vSwitch:other_config`, as
/// ovs-vswitchd reads these keys: `pmd-cpu-mask` (hex: a PMD thread on
/// each CPU set), `emc-insert-inv-prob`, `smc-enable`, `vlan-limit`,
/// `tx-flush-interval` (µs; absent: Sluice's `auto`),
/// `pmd-perf-metrics`, and Sluice's own `pmd-sleep-after` (µs an idle PMD
/// that reads only kernel ports polls before it sleeps; 0: never sleeps)
/// and `ct-prealloc` (connections the tracker has memory ready for).
/// Returns what was applied and what was not, for the log.
pub fn apply_other_config(
    cfg: &mut crate::config::Config,
    oc: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (k, v) in oc {
        let r: Result<(), String> = match k.as_str() {
            "pmd-cpu-mask" => {
                let hex = v.trim_start_matches("0x").trim_start_matches("0X");
                match u128::from_str_radix(hex, 16) {
                    Ok(0) | Err(_) => Err(format!("'{v}' is not a CPU mask (hex, e.g. 0x6)")),
                    Ok(m) => {
                        let cpus: Vec<usize> = (0..128).filter(|c| m >> c & 1 == 1).collect();
                        crate::config::check_cpus(&cpus).map(|()| cfg.pmd_cores = cpus)
                    }
                }
            }
            "emc-insert-inv-prob" => v
                .parse::<u32>()
                .map(|p| cfg.datapath.cache.emc_insert_inv_prob = p)
                .map_err(|_| format!("'{v}' is not 0 to 4294967295")),
            "smc-enable" => match v.as_str() {
                "true" | "false" => {
                    cfg.datapath.cache.smc_enabled = v == "true";
                    Ok(())
                }
                _ => Err(format!("'{v}' is not true or false")),
            },
            "vlan-limit" => v
                .parse::<usize>()
                .map(|n| cfg.datapath.vlan_limit = n)
                .map_err(|_| format!("'{v}' is not a number")),
            "tx-flush-interval" => v
                .parse::<u64>()
                .map(|us| cfg.datapath.tx_flush = sluice_datapath::TxFlush::Fixed(us))
                .map_err(|_| format!("'{v}' is not a number of µs")),
            "pmd-perf-metrics" => {
                cfg.datapath.perf_metrics = v == "true";
                Ok(())
            }
            // Sluice's own (OVS polls such ports from its main thread).
            "pmd-sleep-after" => v
                .parse::<u32>()
                .map(|us| cfg.datapath.sleep_after_us = us)
                .map_err(|_| format!("'{v}' is not a number of µs")),
            "ct-prealloc" => v
                .parse::<u64>()
                .map(|n| cfg.ct_prealloc = Some(n))
                .map_err(|_| format!("'{v}' is not a number of connections")),
            _ => continue,
        };
        notes.push(match r {
            Ok(()) => format!("other_config:{k}={v}: applied"),
            Err(e) => format!("other_config:{k}: {e}; the default stays"),
        });
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_config_keys_as_ovs_vswitchd_reads_them() {
        let mut cfg = crate::config::Config::default();
        let oc: BTreeMap<String, String> = [
            ("pmd-cpu-mask", "0x1"),
            ("emc-insert-inv-prob", "0"),
            ("smc-enable", "false"),
            ("vlan-limit", "2"),
            ("tx-flush-interval", "50"),
            ("pmd-perf-metrics", "true"),
            ("pmd-sleep-after", "0"),
            ("ct-prealloc", "4096"),
            ("hw-offload", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let notes = apply_other_config(&mut cfg, &oc);
        assert_eq!(notes.len(), 8, "{notes:?}");
        assert_eq!(cfg.datapath.sleep_after_us, 0);
        assert_eq!(cfg.ct_prealloc, Some(4096));
        assert_eq!(cfg.pmd_cores, vec![0]);
        assert_eq!(cfg.datapath.cache.emc_insert_inv_prob, 0);
        assert!(!cfg.datapath.cache.smc_enabled);
        assert_eq!(cfg.datapath.vlan_limit, 2);
        assert_eq!(cfg.datapath.tx_flush, sluice_datapath::TxFlush::Fixed(50));
        assert!(cfg.datapath.perf_metrics);
        let bad: BTreeMap<String, String> = [("pmd-cpu-mask", "zz"), ("smc-enable", "maybe")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut cfg = crate::config::Config::default();
        let notes = apply_other_config(&mut cfg, &bad);
        assert!(
            notes.iter().all(|n| n.contains("the default stays")),
            "{notes:?}"
        );
        assert!(cfg.pmd_cores.is_empty());
    }
}
