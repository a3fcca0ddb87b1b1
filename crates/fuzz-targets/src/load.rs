//! Target of the gossiped load report (`kv_replication::LoadReport`'s text
//! form, which the node reads from other nodes' gossip keys).

use kv_replication::{LoadReport, MAX_HINT_OWNERS, MAX_HOT_KEYS};

/// Up to four newline-separated values (load, hit ratio, hot keys,
/// hints; missing ones stay missing) as another node published them. A
/// parsed report is bounded with finite ratios in 0..=1, and survives its
/// own text (floats to the three decimals the text keeps).
pub fn load_report(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\n');
    let load = parts.next().unwrap_or_default();
    let (hit, hot, hints) = (parts.next(), parts.next(), parts.next());
    let Some(report) = LoadReport::from_text(load, hit, hot, hints) else {
        return;
    };
    let ratio = |x: f64| (0.0..=1.0).contains(&x);
    assert!(ratio(report.cpu) && ratio(report.hit_ratio), "{report:?}");
    assert!(report.hot_keys.len() <= MAX_HOT_KEYS && report.hints.len() <= MAX_HINT_OWNERS);
    let written = report.to_text(7);
    let back = LoadReport::from_text(
        &written.load,
        Some(&written.hit_ratio),
        Some(&written.hot_keys),
        Some(&written.hints),
    )
    .expect("a written report parses");
    assert!((back.cpu - report.cpu).abs() <= 0.0005 + f64::EPSILON);
    assert!((back.hit_ratio - report.hit_ratio).abs() <= 0.0005 + f64::EPSILON);
    assert_eq!(
        (
            &back.hot_keys,
            &back.hints,
            back.queue,
            back.backlog,
            back.repair
        ),
        (
            &report.hot_keys,
            &report.hints,
            report.queue,
            report.backlog,
            report.repair
        )
    );
    assert_eq!(back.to_text(7), written, "the text is not stable");
}
