//! Running the `kvctl` binary the way a user does, and what it printed.

use std::fmt;
use std::path::Path;
use std::process::Stdio;

use anyhow::Context;

/// How a `kvctl` run ended.
#[derive(Clone, Debug)]
pub struct KvctlOutput {
    /// The exit code (`-1` when a signal ended it).
    pub code: i32,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl KvctlOutput {
    /// Standard output parsed as JSON (for `--json` runs).
    ///
    /// # Errors
    /// When standard output is not JSON.
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_str(&self.stdout).with_context(|| format!("kvctl printed no JSON: {self}"))
    }
}

impl fmt::Display for KvctlOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {}, stdout {:?}, stderr {:?}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `kvctl --endpoints <endpoints> --certs <certs> <args>` in `cwd`,
/// with the variables of `env` set. The other `KV_*` variables are removed
/// so that only these flags (and `env`) decide where it goes and how it
/// routes, and `cwd` keeps it away from any `.cluster/kvctl.toml`.
pub(crate) async fn run(
    kvctl: &Path,
    cwd: &Path,
    endpoints: &[String],
    certs: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> anyhow::Result<KvctlOutput> {
    let mut command = tokio::process::Command::new(kvctl);
    command
        .current_dir(cwd)
        .env_remove("KV_ENDPOINTS")
        .env_remove("KV_CERTS")
        .env_remove("KV_IDENTITY")
        .env_remove("KV_ROUTER_MODE")
        .env_remove("KV_CONNECT_TIMEOUT")
        // kvctl's routing cache goes beside the cluster, not in ~/.cache.
        .env("XDG_CACHE_HOME", cwd);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .arg("--endpoints")
        .arg(endpoints.join(","))
        .arg("--certs")
        .arg(certs)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot run {}", kvctl.display()))?;
    Ok(KvctlOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}
