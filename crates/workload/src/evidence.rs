//! The evidence behind a verdict on a register: which missing writes are
//! accounted for by supersession, and the words that explain a lost one.

use std::collections::{HashMap, HashSet};

use crate::history::{Entry, OpKind, Outcome};

/// The values that are accounted for: present, or superseded by a delete or
/// by an accounted-for put that was not reported failed. Computed as a
/// fixpoint (no recursion: supersession chains can be long); trying the
/// latest puts first settles a real history in one pass.
pub(crate) fn explained<'a>(
    puts: &[(&'a str, &Entry)],
    present: &HashSet<&str>,
    superseders: &HashMap<&str, Vec<&Entry>>,
) -> HashSet<&'a str> {
    let mut order: Vec<(&'a str, &Entry)> = puts.to_vec();
    order.sort_by(|a, b| b.1.start_ms.total_cmp(&a.1.start_ms));
    let mut done: HashSet<&'a str> = HashSet::new();
    loop {
        let before = done.len();
        for (value, _) in &order {
            if done.contains(value) {
                continue;
            }
            let by = superseders
                .get(value)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let accounted = present.contains(value)
                || by.iter().any(|s| {
                    s.outcome != Outcome::Failed
                        && (s.op == OpKind::Delete
                            || s.value.as_deref().is_some_and(|v| done.contains(v)))
                });
            if accounted {
                done.insert(value);
            }
        }
        if done.len() == before {
            return done;
        }
    }
}

/// Why a missing write is not accounted for, given the writes that saw it.
pub(crate) fn why_unexplained(by: &[&Entry]) -> String {
    let list = |ws: &[&&Entry]| {
        ws.iter()
            .map(|w| format!("the {} {}", what(w), when(w)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let failed: Vec<&&Entry> = by.iter().filter(|w| w.outcome == Outcome::Failed).collect();
    let other: Vec<&&Entry> = by.iter().filter(|w| w.outcome != Outcome::Failed).collect();
    if by.is_empty() {
        "no write or delete saw it".into()
    } else if other.is_empty() {
        format!(
            "only writes reported failed saw it ({}): a failed write claims nothing was stored, \
             so an \"unavailable\" answer was not honest",
            list(&failed)
        )
    } else {
        format!(
            "it was superseded only by {}, which is itself neither in the final read nor \
             superseded: a stored write was lost",
            list(&other)
        )
    }
}

/// A write for messages: `put c1-4`, `delete`, `add c2-3`.
pub(crate) fn what(w: &Entry) -> String {
    match w.op {
        OpKind::Put => format!("put {}", w.value.as_deref().unwrap_or("?")),
        OpKind::Add => format!("add {}", w.element.as_deref().unwrap_or("?")),
        _ => "delete".into(),
    }
}

/// Who and when, for messages.
pub(crate) fn when(w: &Entry) -> String {
    let outcome = match w.outcome {
        Outcome::Ok => "acknowledged",
        Outcome::Failed => "failed",
        Outcome::Indeterminate => "indeterminate",
    };
    format!(
        "({outcome}, client {}, started at {:.1} ms)",
        w.client.map_or("-".to_string(), |c| c.to_string()),
        w.start_ms
    )
}

/// A final read for messages, cut after a few siblings.
pub(crate) fn describe(siblings: &[String]) -> String {
    const SHOWN: usize = 5;
    if siblings.is_empty() {
        return "deleted".into();
    }
    let mut text = siblings[..siblings.len().min(SHOWN)].join(", ");
    if siblings.len() > SHOWN {
        text.push_str(&format!(", ... {} more", siblings.len() - SHOWN));
    }
    format!("[{text}]")
}
