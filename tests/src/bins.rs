//! Where the `kvnode` and `kvctl` binaries are.
//!
//! Cargo sets `CARGO_BIN_EXE_<name>` only for a binary's own package, so
//! this crate finds them itself: in `KV_BIN_DIR` when set, else in the
//! profile directory the test executable was built in
//! (`target/debug/deps/<test>` -> `target/debug`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The two binaries the tests run.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The node binary.
    pub kvnode: PathBuf,
    /// The command-line client.
    pub kvctl: PathBuf,
}

/// Finds `kvnode` and `kvctl`.
///
/// # Errors
/// When the directory cannot be determined or a binary is missing; the
/// message says how to build them.
pub fn locate() -> anyhow::Result<Binaries> {
    let dir = match std::env::var_os("KV_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => profile_dir()?,
    };
    let kvnode = dir.join("kvnode");
    let kvctl = dir.join("kvctl");
    for bin in [&kvnode, &kvctl] {
        if !bin.is_file() {
            bail!(
                "{} is missing: run `cargo build -p kv-node -p kvctl` first \
                 (or point KV_BIN_DIR at the directory holding kvnode and kvctl)",
                bin.display()
            );
        }
    }
    Ok(Binaries { kvnode, kvctl })
}

/// `target/<profile>`: the parent of the `deps` directory holding the
/// running test executable.
fn profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the test executable")?;
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "cannot derive the target directory from {}; set KV_BIN_DIR",
                exe.display()
            )
        })
}
