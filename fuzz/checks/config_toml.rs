//! An untrusted TOML configuration (`sluice run --config`): read into a
//! configuration or refused with an error, never a panic.

/// One input, as the fuzz target and the corpus replay run it.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = sluice::config::Config::from_toml(text, std::path::Path::new("/fuzz")) {
        // What it read is within the bounds the options keep.
        if let Some(n) = cfg.n_rxq {
            assert!((1..=sluice::config::MAX_RXQ).contains(&n));
        }
        assert!(sluice::config::check_cpus(&cfg.pmd_cores).is_ok());
    }
}
