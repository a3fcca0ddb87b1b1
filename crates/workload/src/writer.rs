//! Writing the history: one JSON line per entry, appended from every client
//! task through one buffered file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::history::Entry;
use crate::{Error, Result};

/// Appends entries to a history file, one line each, from any task.
pub struct HistoryWriter {
    /// The file, for error messages.
    path: PathBuf,
    /// The buffered file, and the first write error (later entries are
    /// dropped once one write failed; [`HistoryWriter::flush`] reports it).
    out: Mutex<(BufWriter<File>, Option<std::io::Error>)>,
}

impl HistoryWriter {
    /// Creates (or truncates) the history file.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be created.
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(HistoryWriter {
            path: path.to_path_buf(),
            out: Mutex::new((BufWriter::new(file), None)),
        })
    }

    /// Appends one entry. A write error is kept for
    /// [`HistoryWriter::flush`]: a history with a hole cannot be checked.
    pub fn append(&self, entry: &Entry) {
        // A poisoned lock only means a panic elsewhere; the file is usable.
        let mut guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let (out, failed) = &mut *guard;
        if failed.is_some() {
            return;
        }
        let written = serde_json::to_writer(&mut *out, entry)
            .map_err(std::io::Error::other)
            .and_then(|()| out.write_all(b"\n"));
        if let Err(e) = written {
            *failed = Some(e);
        }
    }

    /// Flushes the file; appending may go on afterwards.
    ///
    /// # Errors
    /// [`Error::Io`] with the first error any append or the flush met; once
    /// one happened, every later flush reports it again.
    pub fn flush(&self) -> Result<()> {
        let mut guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let (out, failed) = &mut *guard;
        if failed.is_none()
            && let Err(e) = out.flush()
        {
            *failed = Some(e);
        }
        let result = match failed {
            Some(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        };
        result.map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpKind, Outcome, read_history};

    #[test]
    fn entries_round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let writer = HistoryWriter::create(&path).unwrap();
        let put = Entry {
            op: OpKind::Put,
            client: Some(1),
            key: "reg-0".into(),
            value: Some("c1-0".into()),
            element: None,
            blind: true,
            saw: Some(vec![]),
            values: None,
            deleted: None,
            outcome: Outcome::Indeterminate,
            error: Some("indeterminate: node1: timeout".into()),
            start_ms: 1.5,
            latency_ms: 0.25,
        };
        writer.append(&put);
        writer.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(
                r#"{"op":"put","client":1,"key":"reg-0","value":"c1-0","blind":true,"saw":[]"#
            ),
            "{text}"
        );
        assert_eq!(read_history(&path).unwrap(), vec![put]);
    }
}
