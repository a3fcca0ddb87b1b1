//! Progress of the long commands (`drain`, `repair`, `bench`) on standard
//! error: a bar on a terminal, one line per step otherwise.
//!
//! A bar redraws itself in place, which only a terminal shows as intended;
//! piped or redirected, it would be nothing (indicatif draws nothing off a
//! terminal) or a mess. Off a terminal a [`Progress`] therefore prints a
//! plain line whenever a step is reached: each tenth of the way, a change
//! of state (`node6 is LEFT`), and the end. With `--json` there is no
//! progress at all: standard output carries the one JSON document.

use std::io::{IsTerminal, Write};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How a command shows its progress.
pub enum Progress {
    /// Nothing (`--json`).
    Hidden,
    /// An indicatif bar (standard error is a terminal).
    Bar(ProgressBar),
    /// One line per step on standard error.
    Lines(Steps),
}

impl Progress {
    /// A progress display for a task of `len` units: hidden with `json`, a
    /// bar drawn with `template` (inside `multi` when given) when standard
    /// error is a terminal, else [`Steps`] lines starting with `prefix` and
    /// counting in `unit`.
    pub fn new(
        json: bool,
        template: &str,
        prefix: &str,
        unit: &str,
        len: u64,
        multi: Option<&MultiProgress>,
    ) -> Self {
        if json {
            return Progress::Hidden;
        }
        if !std::io::stderr().is_terminal() {
            return Progress::Lines(Steps::new(prefix, unit));
        }
        let bar = ProgressBar::new(len.max(1));
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix.to_string());
        let bar = match multi {
            Some(multi) => multi.add(bar),
            None => bar,
        };
        Progress::Bar(bar)
    }

    /// Reports `pos` of `len` units done; `state` is what the task is
    /// doing (a change of it is a step), `detail` a figure that changes
    /// all the time (shown, never a step by itself).
    pub fn update(&mut self, pos: u64, len: u64, state: &str, detail: &str) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(bar) => {
                bar.set_length(len.max(1));
                bar.set_position(pos);
                bar.set_message(join(state, detail));
            }
            Progress::Lines(steps) => {
                if let Some(line) = steps.update(pos, len, state, detail) {
                    emit(&line);
                }
            }
        }
    }

    /// Ends the display: the bar stays drawn at its last position; lines
    /// get a last one when the last update was not already one.
    pub fn finish(&mut self) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(bar) => bar.finish(),
            Progress::Lines(steps) => {
                if let Some(line) = steps.finish() {
                    emit(&line);
                }
            }
        }
    }

    /// Ends the display and removes the bar from the terminal.
    pub fn finish_and_clear(&mut self) {
        match self {
            Progress::Bar(bar) => bar.finish_and_clear(),
            _ => self.finish(),
        }
    }
}

/// Writes one progress line on standard error (errors ignored: progress
/// must never fail a command).
fn emit(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// `state` and `detail` joined by two spaces, either may be empty.
fn join(state: &str, detail: &str) -> String {
    match (state.is_empty(), detail.is_empty()) {
        (true, _) => detail.to_string(),
        (false, true) => state.to_string(),
        (false, false) => format!("{state}  {detail}"),
    }
}

/// The line-per-step form of a progress display, kept pure so that the
/// choice of lines is unit-tested.
pub struct Steps {
    /// Starts every line (`node1`, or empty).
    prefix: String,
    /// What `pos` counts (`partitions`, `s`).
    unit: String,
    /// The tenth of the way (0..=10) of the last line printed.
    last_tenth: Option<u64>,
    /// The state of the last line printed.
    last_state: String,
    /// The last update, printed by `finish` unless it was already a line.
    pending: Option<String>,
}

impl Steps {
    /// No line printed yet.
    pub fn new(prefix: &str, unit: &str) -> Self {
        Steps {
            prefix: prefix.to_string(),
            unit: unit.to_string(),
            last_tenth: None,
            last_state: String::new(),
            pending: None,
        }
    }

    /// The line to print for this update, if it reaches a step: the first
    /// update, a new tenth of the way, or a new state.
    pub fn update(&mut self, pos: u64, len: u64, state: &str, detail: &str) -> Option<String> {
        let len = len.max(1);
        let tenth = pos.min(len).saturating_mul(10) / len;
        let line = self.line(pos, len, state, detail);
        if self.last_tenth == Some(tenth) && self.last_state == state {
            self.pending = Some(line);
            return None;
        }
        self.last_tenth = Some(tenth);
        self.last_state = state.to_string();
        self.pending = None;
        Some(line)
    }

    /// The last update's line if it was not printed.
    pub fn finish(&mut self) -> Option<String> {
        self.pending.take()
    }

    fn line(&self, pos: u64, len: u64, state: &str, detail: &str) -> String {
        let mut line = String::new();
        if !self.prefix.is_empty() {
            line.push_str(&self.prefix);
            line.push_str(": ");
        }
        line.push_str(&format!("{pos}/{len} {}", self.unit));
        let rest = join(state, detail);
        if !rest.is_empty() {
            line.push_str("  ");
            line.push_str(&rest);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_tenth_and_per_state_change() {
        let mut s = Steps::new("", "partitions pulled");
        assert_eq!(
            s.update(0, 100, "node6 is DRAINING", "").as_deref(),
            Some("0/100 partitions pulled  node6 is DRAINING")
        );
        // Within the same tenth and state: no line.
        assert_eq!(s.update(5, 100, "node6 is DRAINING", ""), None);
        assert_eq!(s.update(9, 100, "node6 is DRAINING", ""), None);
        assert!(s.update(10, 100, "node6 is DRAINING", "").is_some());
        assert_eq!(s.update(15, 100, "node6 is DRAINING", ""), None);
        // A new state is a step even within a tenth.
        assert_eq!(
            s.update(15, 100, "node6 is LEFT", "").as_deref(),
            Some("15/100 partitions pulled  node6 is LEFT")
        );
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn finish_prints_the_last_update_once() {
        let mut s = Steps::new("node1", "partitions");
        assert!(s.update(0, 1000, "", "0 keys repaired").is_some());
        assert_eq!(s.update(3, 1000, "", "2 keys repaired"), None);
        assert_eq!(
            s.finish().as_deref(),
            Some("node1: 3/1000 partitions  2 keys repaired")
        );
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn detail_alone_is_never_a_step_and_zero_lengths_are_whole() {
        let mut s = Steps::new("", "s");
        assert!(s.update(0, 0, "", "1 ops").is_some());
        assert_eq!(s.update(0, 0, "", "2 ops"), None);
        assert_eq!(s.update(1, 0, "", "3 ops").as_deref(), Some("1/1 s  3 ops"));
    }
}
