//! `kvctl check --history FILE` through the built binary, on the checker's
//! recorded fixtures: the summary line's shape and the exit codes scripts
//! rely on.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

/// The summary line's keys, in their contractual order.
const KEYS: [&str; 11] = [
    "acked",
    "failed",
    "indeterminate",
    "lost",
    "unexpected",
    "duplicated",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "ops_per_s",
    "resurrected",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workload/tests/histories")
        .join(name)
}

fn check(history: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kvctl"))
        .args(["check", "--history"])
        .arg(history)
        .env_remove("KV_ENDPOINTS")
        .env_remove("KV_CERTS")
        .output()
        .unwrap()
}

/// The summary line as (key, value) pairs, checking its shape: one line,
/// `key=number` fields in the contractual order, then optional extras.
fn summary(out: &Output) -> Vec<(String, f64)> {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one summary line expected: {stdout:?}");
    let fields: Vec<(String, f64)> = lines[0]
        .split(' ')
        .map(|field| {
            let (key, value) = field.split_once('=').unwrap();
            (key.to_string(), value.parse().unwrap())
        })
        .collect();
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(&keys[..KEYS.len()], KEYS, "{}", lines[0]);
    fields
}

fn field(fields: &[(String, f64)], key: &str) -> f64 {
    fields.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn a_clean_history_exits_0() {
    let out = check(&fixture("clean.jsonl"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let fields = summary(&out);
    assert_eq!(fields.len(), KEYS.len());
    assert_eq!(field(&fields, "acked"), 2.0);
    assert_eq!(field(&fields, "lost"), 0.0);
    assert_eq!(field(&fields, "p50_ms"), 1.0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_lost_write_exits_6_and_is_described_on_stderr() {
    let out = check(&fixture("lost.jsonl"));
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let fields = summary(&out);
    assert_eq!(field(&fields, "lost"), 1.0);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("lost: key reg-0 value c0-0"), "{stderr}");
}

#[test]
fn an_unchecked_key_exits_4() {
    let out = check(&fixture("unchecked.jsonl"));
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let fields = summary(&out);
    assert_eq!(fields.last().unwrap(), &("unchecked".to_string(), 1.0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("final reads could not complete"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_history_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let clean = std::fs::read_to_string(fixture("clean.jsonl")).unwrap();
    std::fs::write(&path, format!("{clean}{{\"op\":\"put\"\n")).unwrap();
    let out = check(&path);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let line = clean.lines().count() + 1;
    assert!(stderr.contains(&format!("bad.jsonl:{line}: ")), "{stderr}");
    let out = check(&dir.path().join("missing.jsonl"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
