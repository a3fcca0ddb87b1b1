//! Replays the committed corpus (`fuzz/corpus/<target>/`, seeds and every
//! crash found, kept as regression inputs) through the fuzz targets, so
//! that CI checks every committed input without a fuzzer.

use std::path::PathBuf;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn every_committed_input_passes_its_target() {
    let root = corpus();
    let mut total = 0;
    for (name, target) in kv_fuzz_targets::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{name} has no committed seed");
        for path in inputs {
            let data = std::fs::read(&path).expect("readable input");
            eprintln!("{name}: {}", path.display());
            target(&data);
            total += 1;
        }
    }
    eprintln!("{total} inputs replayed");
}

#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let dir = corpus().join("../fuzz_targets");
    for (name, _) in kv_fuzz_targets::TARGETS {
        let file = dir.join(format!("{name}.rs"));
        assert!(file.is_file(), "{} is missing", file.display());
    }
}

#[test]
fn empty_and_tiny_inputs_pass_every_target() {
    for (_, target) in kv_fuzz_targets::TARGETS {
        for data in [&[][..], &[0], &[1], &[0, 0], &[0xff; 16]] {
            target(data);
        }
    }
}
