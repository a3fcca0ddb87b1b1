//! The text form of a [`LoadReport`] as nodes publish it to each other
//! (the membership carries it as four short strings; the node's gossip
//! keys them), and its parser, which takes whatever another node sent.
//!
//! `load` is `"<seq> <cpu> <queue> <backlog> <repair 0|1>"`, `hit_ratio`
//! a decimal, `hot_keys` comma-separated hexadecimal key hashes, `hints`
//! comma-separated `<owner>:<count>` pairs. Ratios are written with three
//! decimals, so a report read back equals the one written up to that
//! rounding.
//!
//! Parsing is bounded and total: ratios must be finite (a NaN would pass
//! a clamp and reach the router's scores) and end up in 0..=1, at most
//! [`MAX_HOT_KEYS`] hot keys and [`MAX_HINT_OWNERS`] hint owners are
//! kept, and entries that do not parse are skipped.

use kv_types::NodeId;

use crate::membership::LoadReport;

/// Hot-key hashes kept from one report (a ring report carries at most as
/// many; a node publishes far fewer).
pub const MAX_HOT_KEYS: usize = 1024;

/// Hint owners kept from one report (the ring's bound on owners).
pub const MAX_HINT_OWNERS: usize = 1024;

/// A [`LoadReport`] as text, one string per published value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportText {
    /// Sequence number, CPU, queue, backlog and repair flag.
    pub load: String,
    /// The read-cache hit ratio.
    pub hit_ratio: String,
    /// The hottest key hashes.
    pub hot_keys: String,
    /// Hints held per owner.
    pub hints: String,
}

impl LoadReport {
    /// The text form of this report, numbered `seq` (so that a repeated
    /// report is still a change that gossip carries).
    pub fn to_text(&self, seq: u64) -> ReportText {
        let hot: Vec<String> = self.hot_keys.iter().map(|h| format!("{h:016x}")).collect();
        let hints: Vec<String> = self
            .hints
            .iter()
            .map(|(id, n)| format!("{id}:{n}"))
            .collect();
        ReportText {
            load: format!(
                "{seq} {:.3} {} {} {}",
                ratio(self.cpu),
                self.queue,
                self.backlog,
                u8::from(self.repair)
            ),
            hit_ratio: format!("{:.3}", ratio(self.hit_ratio)),
            hot_keys: hot.join(","),
            hints: hints.join(","),
        }
    }

    /// Parses a report another node published: `None` when `load` does
    /// not parse (or its CPU is not a finite number). The other values may
    /// be missing (an older node): the hit ratio is then 0 and the lists
    /// empty.
    pub fn from_text(
        load: &str,
        hit_ratio: Option<&str>,
        hot_keys: Option<&str>,
        hints: Option<&str>,
    ) -> Option<LoadReport> {
        let mut load = load.split(' ');
        let _seq: u64 = load.next()?.parse().ok()?;
        let cpu: f64 = load.next()?.parse().ok().filter(|c: &f64| c.is_finite())?;
        let queue: u32 = load.next()?.parse().ok()?;
        let backlog: u32 = load.next()?.parse().ok()?;
        let repair = load.next()? == "1";
        let hit_ratio = hit_ratio
            .and_then(|h| h.parse::<f64>().ok())
            .map_or(0.0, ratio);
        let hot_keys = hot_keys
            .map(|list| {
                list.split(',')
                    .filter_map(|h| u64::from_str_radix(h, 16).ok())
                    .take(MAX_HOT_KEYS)
                    .collect()
            })
            .unwrap_or_default();
        let hints = hints
            .map(|list| {
                list.split(',')
                    .filter_map(|pair| {
                        let (id, n) = pair.split_once(':')?;
                        Some((NodeId::new(id).ok()?, n.parse().ok()?))
                    })
                    .take(MAX_HINT_OWNERS)
                    .collect()
            })
            .unwrap_or_default();
        Some(LoadReport {
            cpu: ratio(cpu),
            queue,
            backlog,
            hit_ratio,
            hot_keys,
            hints,
            repair,
        })
    }
}

/// `x` within 0..=1; 0 for a NaN.
fn ratio(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &ReportText) -> Option<LoadReport> {
        LoadReport::from_text(
            &t.load,
            Some(&t.hit_ratio),
            Some(&t.hot_keys),
            Some(&t.hints),
        )
    }

    #[test]
    fn a_report_survives_its_text() {
        let report = LoadReport {
            cpu: 0.25,
            queue: 7,
            backlog: 3,
            hit_ratio: 0.875,
            hot_keys: vec![0xabc, 0xdef],
            hints: vec![(NodeId::new("node3").unwrap(), 12)],
            repair: true,
        };
        assert_eq!(parse(&report.to_text(9)), Some(report.clone()));
        assert_eq!(LoadReport::from_text("9 x", None, None, None), None);
        let bare = LoadReport::from_text("1 0.5 2 3 0", None, None, None).unwrap();
        assert_eq!((bare.hit_ratio, bare.hot_keys.len()), (0.0, 0));
    }

    #[test]
    fn hostile_numbers_and_lists_are_bounded() {
        // A NaN CPU would survive a clamp and poison every score.
        for load in ["1 NaN 0 0 0", "1 inf 0 0 0", "1 -inf 0 0 0"] {
            assert_eq!(
                LoadReport::from_text(load, None, None, None),
                None,
                "{load}"
            );
        }
        let r = LoadReport::from_text("1 7.5 0 0 0", Some("NaN"), None, None).unwrap();
        assert_eq!((r.cpu, r.hit_ratio), (1.0, 0.0));
        let r = LoadReport::from_text("1 -2 0 0 0", Some("-inf"), None, None).unwrap();
        assert_eq!((r.cpu, r.hit_ratio), (0.0, 0.0));
        let many: Vec<String> = (0..5000).map(|i| format!("{i:x}")).collect();
        let hints: Vec<String> = (0..5000).map(|i| format!("node{i}:1")).collect();
        let r = LoadReport::from_text(
            "1 0 0 0 0",
            None,
            Some(&many.join(",")),
            Some(&hints.join(",")),
        )
        .unwrap();
        assert_eq!(r.hot_keys.len(), MAX_HOT_KEYS);
        assert_eq!(r.hints.len(), MAX_HINT_OWNERS);
    }
}
