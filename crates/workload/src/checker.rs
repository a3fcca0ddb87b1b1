//! The checker: proves from a history that no acknowledged write was lost.
//!
//! Every key a client operation touched is judged on its last successful
//! final read (R=N, after the cluster settled). The rules:
//!
//! - **Registers.** An acknowledged put must be in the final read, as the
//!   value or one of the siblings, or be *superseded*: some put or delete
//!   that was acknowledged or indeterminate carried a context whose read saw
//!   it (`saw` contains it), and that superseder is itself accounted for: a
//!   delete (a tombstone needs nothing more; a delete seen nowhere later is
//!   fine), or a put that is in the final read or superseded in turn
//!   (transitively: A superseded by B, B by C, C in the final read). A chain
//!   that ends in a missing, unsuperseded write means something stored was
//!   lost: if the superseder was never stored the original is lost, if it
//!   was, the superseder is. A write reported `failed` claimed nothing was
//!   stored, so it supersedes nothing; a write explained by failed writes
//!   only is lost, and the details say that an "unavailable" answer was not
//!   honest.
//! - **Grow-only sets.** Every add writes the union it read plus one new
//!   element, so supersession never removes an element: every element of an
//!   acknowledged add must be in the union of the final siblings.
//! - Failed and indeterminate writes may or may not be present.
//! - **Unexpected**: a final value (or set element) that no operation of the
//!   history ever wrote to that key.
//! - **Duplicated**: the same value twice among one final read's siblings,
//!   an element twice within one set sibling, or one set sibling twice (the
//!   same write stored twice, for example by an unsafe retry).
//! - A touched key whose final read never succeeded is **unchecked**: it is
//!   reported, never silently passed.
//! - **Resurrected**: a value still present in the final read although an
//!   acknowledged delete saw it (its context covered it, and values are
//!   unique, so nothing wrote it again): the deleted value came back.
//! - Not counted, but noted: a value still present in the final read
//!   although an acknowledged put saw it (its context should have
//!   superseded it).
//!
//! A key is a set when the history adds to it, or when nothing else writes
//! it and its name (after the last `/`) starts with `set-`. Set values are
//! elements joined by commas.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::evidence::{describe, explained, what, when, why_unexplained};
use crate::history::{Entry, OpKind, Outcome};
use crate::report::{Anomaly, AnomalyKind, Counts, Report};
use crate::stats::Stats;

/// Judges a history.
pub fn check(entries: &[Entry]) -> Report {
    let mut keys: BTreeMap<&str, KeyHistory<'_>> = BTreeMap::new();
    let mut counts = Counts::default();
    for entry in entries {
        let key = keys.entry(entry.key.as_str()).or_default();
        if entry.op.is_write() {
            key.writes.push(entry);
            match entry.outcome {
                Outcome::Ok => counts.acked += 1,
                Outcome::Failed => counts.failed += 1,
                Outcome::Indeterminate => counts.indeterminate += 1,
            }
        }
        match entry.op {
            OpKind::Final if entry.outcome == Outcome::Ok => key.last_final = Some(entry),
            OpKind::Final => {}
            _ => key.touched = true,
        }
    }
    let mut report = Report {
        counts,
        stats: Stats::of(entries),
        ..Report::default()
    };
    for (name, key) in &keys {
        if !key.touched {
            continue;
        }
        let Some(last) = key.last_final else {
            report.unchecked.push(name.to_string());
            continue;
        };
        let siblings = last.values.as_deref().unwrap_or_default();
        let judge = Judge {
            key: name,
            writes: &key.writes,
            siblings,
            report: &mut report,
        };
        if key.is_set(name) {
            judge.set();
        } else {
            judge.register();
        }
    }
    report
}

/// What the history says about one key.
#[derive(Default)]
struct KeyHistory<'a> {
    /// Puts, deletes and adds, in history order.
    writes: Vec<&'a Entry>,
    /// The last successful final read.
    last_final: Option<&'a Entry>,
    /// Whether a client operation used the key.
    touched: bool,
}

impl KeyHistory<'_> {
    fn is_set(&self, name: &str) -> bool {
        let base = name.rsplit('/').next().unwrap_or(name);
        self.writes.iter().any(|w| w.op == OpKind::Add)
            || (self.writes.is_empty() && base.starts_with("set-"))
    }
}

/// Judges one key, appending to the report.
struct Judge<'a, 'r> {
    key: &'a str,
    writes: &'a [&'a Entry],
    siblings: &'a [String],
    report: &'r mut Report,
}

impl Judge<'_, '_> {
    fn anomaly(&mut self, kind: AnomalyKind, value: &str, detail: String) {
        self.report.anomalies.push(Anomaly {
            kind,
            key: self.key.to_string(),
            value: value.to_string(),
            detail,
        });
    }

    fn register(mut self) {
        let present: HashSet<&str> = self.siblings.iter().map(String::as_str).collect();
        let puts: Vec<(&str, &Entry)> = self
            .writes
            .iter()
            .filter(|w| w.op == OpKind::Put)
            .filter_map(|w| Some((w.value.as_deref()?, *w)))
            .collect();
        let mut superseders: HashMap<&str, Vec<&Entry>> = HashMap::new();
        for w in self.writes.iter().filter(|w| w.op != OpKind::Add) {
            for seen in w.saw.iter().flatten() {
                superseders.entry(seen.as_str()).or_default().push(w);
            }
        }
        let explained = explained(&puts, &present, &superseders);
        let final_text = describe(self.siblings);
        for (value, put) in puts.iter().filter(|(_, p)| p.outcome == Outcome::Ok) {
            if explained.contains(value) {
                continue;
            }
            let by = superseders
                .get(value)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let detail = format!(
                "written {}; not in the final read ({final_text}) and {}",
                when(put),
                why_unexplained(by)
            );
            self.anomaly(AnomalyKind::Lost, value, detail);
        }
        let written: HashSet<&str> = puts.iter().map(|(v, _)| *v).collect();
        for value in self
            .siblings
            .iter()
            .filter(|v| !written.contains(v.as_str()))
        {
            let detail = "in the final read, but no operation of the history wrote it to this key";
            self.anomaly(AnomalyKind::Unexpected, value, detail.into());
        }
        self.duplicates(self.siblings, "siblings of the final read");
        for w in self.writes.iter().filter(|w| w.outcome == Outcome::Ok) {
            for seen in w
                .saw
                .iter()
                .flatten()
                .filter(|v| present.contains(v.as_str()))
            {
                if w.op == OpKind::Delete {
                    let detail = format!(
                        "in the final read, although the delete {} saw it (values are \
                         unique: nothing wrote it again)",
                        when(w)
                    );
                    self.anomaly(AnomalyKind::Resurrected, seen, detail);
                    continue;
                }
                self.report.notes.push(format!(
                    "key {}: {seen} is still in the final read although the {} {} saw it",
                    self.key,
                    what(w),
                    when(w)
                ));
            }
        }
    }

    fn set(mut self) {
        let mut union: HashSet<&str> = HashSet::new();
        for sibling in self.siblings {
            let elements: Vec<&str> = elements(sibling).collect();
            union.extend(&elements);
            self.duplicates(&elements, "elements of one final sibling");
        }
        self.duplicates(self.siblings, "siblings of the final read");
        let mut added: HashSet<&str> = HashSet::new();
        for add in self.writes.iter().filter(|w| w.op == OpKind::Add) {
            let Some(element) = add.element.as_deref() else {
                continue;
            };
            added.insert(element);
            if add.outcome == Outcome::Ok && !union.contains(element) {
                let detail = format!(
                    "added {}; missing from the union of the {} final sibling(s)",
                    when(add),
                    self.siblings.len()
                );
                self.anomaly(AnomalyKind::Lost, element, detail);
            }
        }
        let mut stray: Vec<&str> = union.difference(&added).copied().collect();
        stray.sort_unstable();
        for element in stray {
            let detail = "in the final set, but no add of the history wrote it to this key";
            self.anomaly(AnomalyKind::Unexpected, element, detail.into());
        }
    }

    /// One `duplicated` anomaly per value appearing more than once in
    /// `items`.
    fn duplicates<S: AsRef<str>>(&mut self, items: &[S], among: &str) {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for item in items {
            *seen.entry(item.as_ref()).or_default() += 1;
        }
        for (value, n) in seen.into_iter().filter(|(_, n)| *n > 1) {
            let detail = format!("appears {n} times among the {} {among}", items.len());
            self.anomaly(AnomalyKind::Duplicated, value, detail);
        }
    }
}

/// The elements of one set sibling.
pub(crate) fn elements(sibling: &str) -> impl Iterator<Item = &str> {
    sibling.split(',').filter(|e| !e.is_empty())
}
