//! Builds the DPDK shim when the `dpdk` feature is on (Debian's libdpdk-dev,
//! found with pkg-config). The default build needs nothing.

fn main() {
    println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
    #[cfg(feature = "dpdk")]
    {
        let lib = pkg_config::Config::new()
            .atleast_version("21.11")
            .probe("libdpdk")
            .expect("the dpdk feature needs DPDK's development files: apt-get install libdpdk-dev pkg-config");
        let mut build = cc::Build::new();
        build
            .file("csrc/dpdk_shim.c")
            .flag("-march=native")
            .warnings(false);
        for p in &lib.include_paths {
            build.include(p);
        }
        for (k, v) in &lib.defines {
            build.define(k, v.as_deref());
        }
        build.compile("sluice_dpdk_shim");
    }
}
