//! OpenFlow 1.0's decoders on arbitrary bytes and on the fuzz seeds with
//! bytes changed (the fuzz target's check, `fuzz/checks/openflow10.rs`,
//! run by proptest on the stable toolchain): errors, never a panic; what
//! reads writes back the same.

use proptest::prelude::*;

#[path = "../../../fuzz/checks/openflow10.rs"]
mod check;

fn seeds() -> Vec<Vec<u8>> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/openflow10");
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("the seeds")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        check::run(&data);
    }

    #[test]
    fn seeds_with_bytes_changed(
        which in 0usize..6,
        changes in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..6),
        cut in any::<u16>(),
    ) {
        let seeds = seeds();
        let mut data = seeds[which % seeds.len()].clone();
        for (at, v) in changes {
            let n = data.len();
            data[usize::from(at) % n] = v;
        }
        check::run(&data);
        let keep = usize::from(cut) % (data.len() + 1);
        check::run(&data[..keep]);
    }
}
