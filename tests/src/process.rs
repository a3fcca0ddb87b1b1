//! One `kvnode` process: its files, and starting, killing and stopping it.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use kv_types::NodeId;
use tokio::time::Instant;

use crate::poll::POLL_INTERVAL;

/// How long a SIGTERM'd node may take to drain and exit: its own drain
/// deadlines are 10 s for requests and 10 s for background work.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// What a node logs when a SIGHUP reloaded its certificates.
pub(crate) const RELOADED: &str = "reloaded the TLS certificate";

/// What a node logs when a SIGHUP found files it would not use.
pub(crate) const RELOAD_FAILED: &str = "certificate reload failed";

/// Lines of a node's log printed when a test fails.
const LOG_TAIL_LINES: usize = 40;

/// A node of a test cluster (or an extra node started beside it).
pub(crate) struct NodeProcess {
    /// Node id (the name of its certificate).
    pub id: NodeId,
    /// Whether it belongs to the cluster (extra nodes never converge with it).
    pub member: bool,
    /// `127.0.0.1:PORT`: its one QUIC endpoint.
    pub endpoint: String,
    /// `127.0.0.1:PORT` of its RESP listener (TCP).
    pub resp: String,
    /// `127.0.0.1:PORT` of its HTTP admin endpoint (TCP).
    pub admin: String,
    /// Its config file.
    pub config: PathBuf,
    /// Its data directory (the config's `data_dir`).
    pub data: PathBuf,
    /// Standard output and error of every run, appended.
    pub log: PathBuf,
    /// The certificate directory it was made with (a client presenting
    /// this directory's `client` certificate is accepted by it).
    pub certs: PathBuf,
    /// Whether it starts with `kvnode --join` (a node joining a running
    /// cluster; the flag only matters the first time its data directory
    /// starts: a restart resumes the status it had).
    pub join: bool,
    /// Environment variables of its process (besides the harness's own),
    /// such as a clock offset.
    pub env: Vec<(String, String)>,
    /// The running process; `None` while it is down. Behind a lock so that
    /// waits can notice an unexpected exit through `&self`.
    child: Mutex<Option<Child>>,
}

impl NodeProcess {
    /// A node that is not running yet.
    pub fn new(id: NodeId, member: bool, endpoint: String, dir: &Path, certs: PathBuf) -> Self {
        NodeProcess {
            id,
            member,
            endpoint,
            env: Vec::new(),
            resp: String::new(),
            admin: String::new(),
            config: dir.join("config.toml"),
            data: dir.join("data"),
            log: dir.join("log"),
            certs,
            join: false,
            child: Mutex::new(None),
        }
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        // A poisoned lock only means a panic elsewhere; the child is intact.
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the process was started and not killed or stopped since.
    pub fn is_started(&self) -> bool {
        self.child().is_some()
    }

    /// Starts `kvnode --config` (and `--join` for a joining node) with
    /// output appended to the log.
    pub fn spawn(&self, kvnode: &Path) -> anyhow::Result<()> {
        self.spawn_with(kvnode, &[])
    }

    /// As [`NodeProcess::spawn`], with `extra` flags after the others
    /// (e.g. `--rebuild`).
    pub fn spawn_with(&self, kvnode: &Path, extra: &[&str]) -> anyhow::Result<()> {
        let mut child = self.child();
        if child.is_some() {
            bail!("{} is already running", self.id);
        }
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let _ = writeln!(log, "=== kv-tests: starting {} ===", self.id);
        let stderr = log.try_clone().context("cannot duplicate the log handle")?;
        let mut command = Command::new(kvnode);
        command.arg("--config").arg(&self.config);
        if self.join {
            command.arg("--join");
        }
        command.args(extra);
        let process = command
            // Logs go to a file: no colour escapes in it.
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", kvnode.display()))?;
        *child = Some(process);
        Ok(())
    }

    /// Why the node is not serving, if its process has ended on its own:
    /// `Some(message)` with the exit status and the log's tail.
    pub fn exited(&self) -> Option<String> {
        let mut child = self.child();
        let status = child.as_mut()?.try_wait().ok()??;
        Some(format!(
            "{} exited on its own ({status}); its log ends with:\n{}",
            self.id,
            self.log_tail()
        ))
    }

    /// SIGKILL, then reaps the process.
    pub fn kill(&self) -> anyhow::Result<()> {
        let Some(mut process) = self.child().take() else {
            bail!("{} is not running", self.id);
        };
        // An error means it already exited; wait() reaps it either way.
        let _ = process.kill();
        process
            .wait()
            .with_context(|| format!("cannot reap {}", self.id))?;
        Ok(())
    }

    /// SIGTERM, then waits for a graceful exit (SIGKILL after
    /// [`STOP_DEADLINE`], reported as an error).
    pub async fn stop(&self) -> anyhow::Result<()> {
        let pid = match self.child().as_ref() {
            Some(process) => process.id(),
            None => bail!("{} is not running", self.id),
        };
        // std has no SIGTERM and this workspace forbids unsafe code: use kill(1).
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .context("cannot run kill(1)")?;
        if !sent.success() {
            bail!("kill -TERM {pid} ({}) failed: {sent}", self.id);
        }
        let deadline = Instant::now() + STOP_DEADLINE;
        loop {
            {
                let mut child = self.child();
                if let Some(process) = child.as_mut()
                    && let Some(status) = process.try_wait()?
                {
                    *child = None;
                    if !status.success() {
                        bail!("{} exited with {status} after SIGTERM", self.id);
                    }
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                self.kill()?;
                bail!(
                    "{} did not exit within {STOP_DEADLINE:?} of SIGTERM; killed",
                    self.id
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Sends `signal` (a kill(1) name: `STOP`, `CONT`) to the running
    /// process.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid = match self.child().as_ref() {
            Some(process) => process.id(),
            None => bail!("{} is not running", self.id),
        };
        // std sends only SIGKILL and this workspace forbids unsafe code: use kill(1).
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .context("cannot run kill(1)")?;
        if !sent.success() {
            bail!("kill -{signal} {pid} ({}) failed: {sent}", self.id);
        }
        Ok(())
    }

    /// The lines of its log (over all its runs) reporting a certificate
    /// reload, either outcome, oldest first.
    pub fn reload_lines(&self) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|l| l.contains(RELOADED) || l.contains(RELOAD_FAILED))
            .map(str::to_string)
            .collect()
    }

    /// Everything the node logged, over all its runs.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("({e})"))
    }

    /// Whether the node's last start failed because one of its ports was
    /// taken (picked free, bound by someone else before the node).
    pub fn lost_port_race(&self) -> bool {
        let text = self.log_text();
        let last_start = text.rfind("=== kv-tests: starting").unwrap_or(0);
        text[last_start..].contains("Address already in use")
    }

    /// The last lines of the node's log.
    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if let Some(mut process) = self.child().take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}
