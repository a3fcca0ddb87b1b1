//! Membership changes and disk-level events of a [`TestCluster`]: a node
//! that joins the running cluster (`kvnode --join`), waiting until every
//! node reports a node in a lifecycle status, wiping a stopped node's data
//! directory (a replaced disk), and reading a node's log.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use kv_types::NodeId;

use crate::cluster::{TestCluster, free_ports};
use crate::poll::{Step, poll};

impl TestCluster {
    /// Prepares a new member that joins the running cluster: signs its
    /// node certificate with the cluster CA (`kv_tls::add_node`, as
    /// `kvctl certs add` does), writes its config (zone `zone`, a host of
    /// its own, the cluster's seeds) and records it as node `index` with id
    /// `node<index>`. It is not started: [`TestCluster::start_node`] starts
    /// it with `kvnode --join`, so it comes up JOINING, pulls the
    /// partitions it will own and then turns UP. Preparing it apart from
    /// starting it lets a test start it while other work borrows the
    /// cluster (e.g. a workload running). Once started it is one of
    /// [`TestCluster::running`], so the waits and `kvctl` include it.
    ///
    /// # Errors
    /// When the certificate or the config cannot be written.
    pub fn add_joining_node(&mut self, zone: &str) -> anyhow::Result<usize> {
        let index = self.nodes.len() + 1;
        let id = NodeId::new(format!("node{index}"))?;
        ensure!(
            self.index_of(id.as_str()).is_err(),
            "{id} exists already in this cluster"
        );
        kv_tls::add_node(&self.certs, &id)
            .with_context(|| format!("cannot sign a certificate for {id}"))?;
        let port = free_ports(1)?.first().copied().context("no free port")?;
        let certs = self.certs.clone();
        self.add_node(id, true, port, certs, zone.into(), format!("host-{index}"))?;
        if let Some(node) = self.nodes.last_mut() {
            node.join = true;
        }
        Ok(index)
    }

    /// Waits until every running member reports node `index` with lifecycle
    /// status `status` (`JOINING`, `UP`, `DRAINING` or `LEFT`) and no
    /// transfer in progress. Node `index` itself is asked too, except for
    /// `LEFT`: a node that left routes without itself. Streaming takes
    /// time in proportion to the data, hence the explicit `timeout`.
    ///
    /// # Errors
    /// When that does not happen within `timeout` or a node exits.
    pub async fn wait_node_status(
        &self,
        index: usize,
        status: &str,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let id = self.id(index)?.to_string();
        let what = format!("every running node to report {id} {status} with no transfer");
        poll(&what, timeout, async || {
            for i in self.running() {
                if i == index && status == "LEFT" {
                    continue;
                }
                let report = self.poll_status(i).await?;
                let seen = report.nodes.iter().find(|n| n.id == id);
                match seen {
                    Some(n) if n.status == status && n.transfer.is_empty() => {}
                    Some(n) => {
                        return Err(Step::NotYet(format!(
                            "{} reports {id} {} (transfer {:?})",
                            report.node, n.status, n.transfer
                        )));
                    }
                    None => {
                        return Err(Step::NotYet(format!("{} does not list {id}", report.node)));
                    }
                }
            }
            Ok(())
        })
        .await
    }

    /// Deletes the data directory of node `index` and makes it again empty,
    /// as if its disk had been replaced: started again, it comes up with a
    /// new incarnation and no data, no ring and no hints.
    ///
    /// # Errors
    /// When the node is running, or the directory cannot be replaced.
    pub fn wipe_data(&self, index: usize) -> anyhow::Result<()> {
        let node = self.node(index)?;
        if node.is_started() {
            bail!(
                "{} is running: stop or kill it before wiping its data",
                node.id
            );
        }
        std::fs::remove_dir_all(&node.data)
            .with_context(|| format!("cannot delete {}", node.data.display()))?;
        std::fs::create_dir_all(&node.data)
            .with_context(|| format!("cannot create {}", node.data.display()))?;
        Ok(())
    }

    /// Starts node `index` again with `extra` flags (e.g. `--rebuild`) and
    /// waits until it answers `status`, as [`TestCluster::start_node`].
    ///
    /// # Errors
    /// As [`TestCluster::start_node`].
    pub async fn start_node_with(&self, index: usize, extra: &[&str]) -> anyhow::Result<()> {
        self.node(index)?.spawn_with(&self.bins.kvnode, extra)?;
        self.wait_serving(index).await
    }

    /// Runs `kvnode --config <node index's config> <extra>` in the
    /// foreground, for a start that must fail: answers its exit status
    /// and everything it printed (standard output and error). The node
    /// must be stopped.
    ///
    /// # Errors
    /// When it cannot be run, or is still running after 30 s (then it is
    /// killed).
    pub async fn run_refused(
        &self,
        index: usize,
        extra: &[&str],
    ) -> anyhow::Result<(std::process::ExitStatus, String)> {
        let node = self.node(index)?;
        let mut command = tokio::process::Command::new(&self.bins.kvnode);
        command
            .arg("--config")
            .arg(&node.config)
            .args(extra)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(std::time::Duration::from_secs(30), command.output())
            .await
            .map_err(|_| anyhow::anyhow!("{} still runs after 30 s", node.id))??;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok((output.status, text))
    }

    /// The data directory of node `index` (its config's `data_dir`), for
    /// tests that damage or inspect it while the node is stopped.
    ///
    /// # Errors
    /// When there is no such node.
    pub fn data_dir(&self, index: usize) -> anyhow::Result<std::path::PathBuf> {
        Ok(self.node(index)?.data.clone())
    }

    /// Everything node `index` has logged, over all its runs (for what the
    /// wire does not show, such as the hints a node still holds).
    ///
    /// # Errors
    /// When there is no such node.
    pub fn log_text(&self, index: usize) -> anyhow::Result<String> {
        Ok(self.node(index)?.log_text())
    }
}
