//! The checker on recorded histories: every fixture in `tests/histories/`
//! states what it expects in `# expect:` (the start of the summary line)
//! and `# exit:` comment lines, and gets exactly that.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use kv_workload::{AnomalyKind, Report, check, read_history};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories")
}

fn judge(name: &str) -> Report {
    check(&read_history(&dir().join(name)).unwrap())
}

/// The value of the `# <tag>: ...` comment line of a fixture.
fn expectation(text: &str, tag: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("# {tag}: ")))
        .map(str::to_string)
}

#[test]
fn every_fixture_gets_its_expected_summary_and_exit_code() {
    let mut names = Vec::new();
    for file in std::fs::read_dir(dir()).unwrap() {
        let path = file.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect = expectation(&text, "expect").unwrap_or_else(|| panic!("{name}: no # expect:"));
        let exit: u8 = expectation(&text, "exit").unwrap().parse().unwrap();
        let report = check(&read_history(&path).unwrap());
        let line = report.summary_line();
        assert!(
            line.starts_with(&format!("{expect} p50_ms=")),
            "{name}: got {line}\nexpected {expect} ...\ndetails: {:#?}",
            report.detail_lines()
        );
        assert_eq!(report.exit_code(), exit, "{name}: {line}");
        if name == "resurrected.jsonl" {
            assert!(line.contains(" resurrected=1"), "{line}");
            assert_eq!(
                report.anomalies[0].kind,
                kv_workload::AnomalyKind::Resurrected
            );
        }
        names.push(name);
    }
    names.sort();
    // The cases the checker must be shown to get right, each in a fixture.
    for required in [
        "clean.jsonl",
        "lost.jsonl",
        "siblings.jsonl",
        "indeterminate-seen.jsonl",
        "indeterminate-unseen.jsonl",
        "superseded.jsonl",
        "superseded-transitively.jsonl",
        "superseded-by-missing.jsonl",
        "delete.jsonl",
        "failed-superseder.jsonl",
        "unexpected.jsonl",
        "duplicated.jsonl",
        "resurrected.jsonl",
        "set-clean.jsonl",
        "set-lost.jsonl",
        "unchecked.jsonl",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing fixture {required}"
        );
    }
}

#[test]
fn a_lost_write_names_the_key_the_value_and_the_final_read() {
    let report = judge("lost.jsonl");
    let [lost] = report.anomalies.as_slice() else {
        panic!("{:?}", report.anomalies)
    };
    assert_eq!(lost.kind, AnomalyKind::Lost);
    assert_eq!((lost.key.as_str(), lost.value.as_str()), ("reg-0", "c0-0"));
    let line = lost.to_string();
    assert!(
        line.starts_with("lost: key reg-0 value c0-0: written (acknowledged, client 0"),
        "{line}"
    );
    assert!(line.contains("final read ([c1-0])"), "{line}");
    assert!(line.contains("no write or delete saw it"), "{line}");
}

#[test]
fn a_failed_superseder_is_called_dishonest() {
    let report = judge("failed-superseder.jsonl");
    let detail = &report.anomalies[0].detail;
    assert!(detail.contains("put c1-0 (failed"), "{detail}");
    assert!(
        detail.contains("\"unavailable\" answer was not honest"),
        "{detail}"
    );
}

#[test]
fn a_missing_superseder_is_named() {
    let report = judge("superseded-by-missing.jsonl");
    let detail = &report.anomalies[0].detail;
    assert!(
        detail.contains("superseded only by the put c1-0 (indeterminate"),
        "{detail}"
    );
}

#[test]
fn set_anomalies_name_the_element() {
    let report = judge("set-lost.jsonl");
    assert_eq!(report.anomalies[0].value, "c1-0");
    assert!(
        report.anomalies[0]
            .detail
            .contains("union of the 1 final sibling")
    );
}

#[test]
fn unchecked_keys_are_listed_on_the_summary_line_and_in_the_details() {
    let report = judge("unchecked.jsonl");
    assert_eq!(report.unchecked, ["reg-1"]);
    assert!(report.summary_line().ends_with(" unchecked=1"));
    assert!(
        report
            .detail_lines()
            .iter()
            .any(|l| l.starts_with("unchecked: key reg-1"))
    );
}

#[test]
fn the_latest_successful_final_read_is_the_one_judged() {
    let mut entries = read_history(&dir().join("lost.jsonl")).unwrap();
    let mut reread = entries.last().unwrap().clone();
    reread.values = Some(vec!["c1-0".into(), "c0-0".into()]);
    reread.start_ms += 2000.0;
    entries.push(reread.clone());
    assert_eq!(check(&entries).exit_code(), 0);
    // A failed re-read does not replace a successful one.
    reread.outcome = kv_workload::Outcome::Failed;
    reread.values = None;
    entries.push(reread);
    assert_eq!(check(&entries).exit_code(), 0);
}

#[test]
fn a_value_surviving_an_acknowledged_superseder_is_noted() {
    let mut entries = read_history(&dir().join("superseded.jsonl")).unwrap();
    let last = entries.last_mut().unwrap();
    last.values = Some(vec!["c1-0".into(), "c0-0".into()]);
    let report = check(&entries);
    assert_eq!(report.exit_code(), 0);
    assert!(
        report.notes[0].contains("c0-0 is still in the final read"),
        "{:?}",
        report.notes
    );
}
