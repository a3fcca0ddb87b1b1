//! Where the cluster is: endpoints and certificate directory from the
//! command line, the environment, or the local cluster's settings file.
//!
//! `scripts/cluster up` writes `.cluster/kvctl.toml` at the repository root:
//!
//! ```toml
//! endpoints = ["127.0.0.1:7101", "127.0.0.1:7102"]
//! certs = "/abs/path/.cluster/certs"
//! ```
//!
//! Flags (and their environment variables) win; whatever they leave out is
//! taken from the first `.cluster/kvctl.toml` found walking up from the
//! current directory, then from the directory of the kvctl executable (so
//! that `target/release/kvctl` finds its repository's cluster from
//! anywhere). A relative `certs` is relative to the file's directory.

use std::path::{Path, PathBuf};

use kv_client::Error;
use serde::Deserialize;

/// The settings file, relative to a directory that may hold it.
pub const CLUSTER_FILE: &str = ".cluster/kvctl.toml";

/// Largest settings file read, in bytes.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Endpoints and certificates of the cluster to talk to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `HOST:PORT` of the nodes.
    pub endpoints: Vec<String>,
    /// Directory with `ca.pem` and the identity's certificate and key.
    pub certs: PathBuf,
    /// The settings file that supplied any of them, if one did.
    pub source: Option<PathBuf>,
    /// Whether the endpoints are the settings file's (not the flags').
    pub endpoints_from_file: bool,
}

/// The file name of the routing cache beside a `kvctl.toml`.
pub const CACHE_FILE: &str = "kvctl-cache.json";

impl Settings {
    /// Where kvctl keeps what it learned of the cluster (ring, dead nodes)
    /// between calls: beside the settings file that named the cluster
    /// (`.cluster/kvctl-cache.json` for a `scripts/cluster` cluster; with
    /// other endpoints from the flags, `kvctl-cache-HASH.json` there, so
    /// that calls with different endpoint lists do not overwrite each
    /// other's cache), else in the user's cache directory
    /// (`$XDG_CACHE_HOME/kvctl/` or `~/.cache/kvctl/`), one file per
    /// endpoint list. `None` when there is no such directory.
    pub fn cache_file(&self) -> Option<PathBuf> {
        let id = kv_types::key_hash(self.endpoints.join(",").as_bytes());
        if let Some(dir) = self.source.as_deref().and_then(Path::parent) {
            return Some(if self.endpoints_from_file {
                dir.join(CACHE_FILE)
            } else {
                dir.join(format!("kvctl-cache-{id:016x}.json"))
            });
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|d| !d.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("kvctl").join(format!("{id:016x}.json")))
    }
}

/// The shape of `.cluster/kvctl.toml`; other keys are ignored, so the
/// cluster script may add its own.
#[derive(Debug, Default, Deserialize)]
struct ClusterFile {
    /// `HOST:PORT` of the nodes.
    #[serde(default)]
    endpoints: Vec<String>,
    /// The certificate directory.
    #[serde(default)]
    certs: Option<PathBuf>,
}

/// The settings from the flags, completed from the first settings file found
/// walking up from each of `starts` in turn when the flags leave something
/// out.
///
/// # Errors
/// [`Error::Config`] when the file cannot be read or parsed, or when
/// endpoints or certificates are still missing; the message says how to
/// provide them.
pub fn resolve(
    endpoints: &[String],
    certs: Option<&Path>,
    starts: &[PathBuf],
) -> Result<Settings, Error> {
    let mut endpoints: Vec<String> = endpoints
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    let mut certs = certs.map(Path::to_path_buf);
    let mut source = None;
    let mut endpoints_from_file = false;
    let incomplete = endpoints.is_empty() || certs.is_none();
    if let Some(path) = incomplete.then(|| find(starts)).flatten() {
        let file = read(&path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if endpoints.is_empty() {
            endpoints = file.endpoints;
            endpoints_from_file = true;
        }
        if certs.is_none() {
            certs = file.certs.map(|c| dir.join(c));
        }
        source = Some(path);
    }
    let missing = match (endpoints.is_empty(), certs.is_none()) {
        (false, false) => None,
        (true, true) => Some("endpoints and certificates"),
        (true, false) => Some("endpoints"),
        (false, true) => Some("a certificate directory"),
    };
    match (missing, certs) {
        (None, Some(certs)) => Ok(Settings {
            endpoints,
            certs,
            source,
            endpoints_from_file,
        }),
        (missing, _) => {
            let found = match source {
                Some(path) => format!("{} does not name them", path.display()),
                None => format!("no {CLUSTER_FILE} found"),
            };
            Err(Error::Config {
                // The error's hint says how to provide them.
                message: format!(
                    "no cluster to talk to: {} missing ({found})",
                    missing.unwrap_or("settings")
                ),
            })
        }
    }
}

/// Where discovery starts: the current directory, then the directory of the
/// running executable.
pub fn default_starts() -> Vec<PathBuf> {
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    starts
}

/// The first `.cluster/kvctl.toml` in a directory on the way up from each of
/// `starts`, in order.
pub fn find(starts: &[PathBuf]) -> Option<PathBuf> {
    starts.iter().find_map(|start| {
        start
            .ancestors()
            .map(|dir| dir.join(CLUSTER_FILE))
            .find(|candidate| candidate.is_file())
    })
}

fn read(path: &Path) -> Result<ClusterFile, Error> {
    let config = |message: String| Error::Config {
        message: format!("{}: {message}", path.display()),
    };
    let len = std::fs::metadata(path)
        .map_err(|e| config(e.to_string()))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(config(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| config(e.to_string()))?;
    toml::from_str(&text).map_err(|e| config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A tree `root/.cluster/kvctl.toml` and `root/a/b`, returning root.
    fn tree(contents: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join(".cluster")).unwrap();
        fs::create_dir_all(root.path().join("a/b")).unwrap();
        fs::write(root.path().join(CLUSTER_FILE), contents).unwrap();
        root
    }

    #[test]
    fn the_file_is_found_walking_up() {
        let root = tree(
            "endpoints = [\"127.0.0.1:7101\", \"127.0.0.1:7102\"]\ncerts = \"/abs/certs\"\nextra = 1\n",
        );
        let start = root.path().join("a/b");
        assert_eq!(
            find(std::slice::from_ref(&start)),
            Some(root.path().join(CLUSTER_FILE))
        );
        let s = resolve(&[], None, &[start]).unwrap();
        assert_eq!(s.endpoints, ["127.0.0.1:7101", "127.0.0.1:7102"]);
        assert_eq!(s.certs, PathBuf::from("/abs/certs"));
    }

    #[test]
    fn later_starts_are_tried_when_the_first_finds_nothing() {
        let empty = tempfile::tempdir().unwrap();
        let root = tree("endpoints = [\"h:1\"]\ncerts = \"certs\"\n");
        let s = resolve(
            &[],
            None,
            &[empty.path().to_path_buf(), root.path().join("a")],
        )
        .unwrap();
        // A relative certs path is relative to the file's directory.
        assert_eq!(s.certs, root.path().join(".cluster/certs"));
    }

    #[test]
    fn flags_win_and_the_file_fills_the_rest() {
        let root = tree("endpoints = [\"h:1\"]\ncerts = \"/file/certs\"\n");
        let starts = [root.path().to_path_buf()];
        let s = resolve(&["x:2".into()], None, &starts).unwrap();
        assert_eq!(s.endpoints, ["x:2"]);
        assert_eq!(s.certs, PathBuf::from("/file/certs"));
        let s = resolve(&["x:2".into()], Some(Path::new("/flag")), &starts).unwrap();
        assert_eq!(s.certs, PathBuf::from("/flag"));
        let s = resolve(&[], Some(Path::new("/flag")), &starts).unwrap();
        assert_eq!(s.endpoints, ["h:1"]);
    }

    #[test]
    fn nothing_found_says_what_to_do() {
        let empty = tempfile::tempdir().unwrap();
        let e = resolve(&[], None, &[empty.path().to_path_buf()]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let text = format!("{e}; {}", e.hint());
        assert!(text.contains("scripts/cluster up"), "{text}");
        assert!(text.contains("--endpoints"), "{text}");
        assert!(text.contains("--certs"), "{text}");
        let e = resolve(&["h:1".into()], None, &[empty.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("certificate"), "{e}");
    }

    #[test]
    fn a_broken_file_is_named() {
        let root = tree("endpoints = [");
        let e = resolve(&[], None, &[root.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("kvctl.toml"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }
}
