//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! same entries the fuzzer runs, on stable Rust: every input a fuzzing run
//! kept, and every crash it found (saved there as a regression case), is
//! checked in CI without libFuzzer.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use attempt_core::fuzzing::TARGETS;

#[test]
fn every_corpus_input_decodes_without_a_panic_or_a_broken_invariant() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for (name, run) in TARGETS {
        let folder = root.join(name);
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        let mut inputs = 0;
        for entry in entries {
            let path = entry.expect("a readable corpus folder").path();
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "fuzz target {name} fails on {}", path.display());
            inputs += 1;
        }
        assert!(inputs > 0, "the corpus of {name} is empty: seed it (fuzz/README.md)");
        replayed += inputs;
    }
    eprintln!("replayed {replayed} corpus inputs");
}
