//! Looking at a [`TestCluster`] the way users do: `status` through
//! `kv-client`, `kvctl` runs, clients for the tests, and the waits built on
//! them.

use std::path::Path;
use std::time::Duration;

use kv_client::{CertsReport, Client, ClientSettings, StatusReport};

use crate::cluster::TestCluster;
use crate::kvctl::{self, KvctlOutput};
use crate::poll::{DEADLINE, Step, poll};

/// Deadline of one `status` call made by a wait: short, so that a node
/// that does not answer costs one poll, not the whole wait.
const STATUS_TIMEOUT: Duration = Duration::from_secs(3);

impl TestCluster {
    /// Node `index`'s own `status` report, asked of it alone with the
    /// `client` certificate of the directory it was made with.
    ///
    /// # Errors
    /// When it does not answer within 3 s, or refuses.
    pub async fn status(&self, index: usize) -> anyhow::Result<StatusReport> {
        let node = self.node(index)?;
        let config = ClientSettings {
            timeout: STATUS_TIMEOUT,
            ..ClientSettings::new(vec![node.endpoint.clone()], &node.certs)
        };
        let client = Client::connect(config).await?;
        let report = client.status().await;
        client.close().await;
        Ok(report?)
    }

    /// Every node's certificate as node `index` knows it (its own as loaded
    /// last, the others' from gossip), asked of it alone like
    /// [`TestCluster::status`].
    ///
    /// # Errors
    /// As for [`TestCluster::status`].
    pub async fn certs(&self, index: usize) -> anyhow::Result<CertsReport> {
        let node = self.node(index)?;
        let config = ClientSettings {
            timeout: STATUS_TIMEOUT,
            ..ClientSettings::new(vec![node.endpoint.clone()], &node.certs)
        };
        let client = Client::connect(config).await?;
        let report = client.certs_of(&node.id).await;
        client.close().await;
        Ok(report?)
    }

    /// A client of the cluster's `client` certificate, sending requests to
    /// the given nodes (one node: that node coordinates every request).
    ///
    /// # Errors
    /// When an index is unknown or the certificates cannot be loaded.
    pub async fn client(&self, nodes: &[usize]) -> anyhow::Result<Client> {
        let endpoints = self.endpoints(nodes)?;
        Ok(Client::connect(ClientSettings::new(endpoints, &self.certs)).await?)
    }

    /// Runs `kvctl <args>` against every running member, with the
    /// cluster's certificates.
    ///
    /// # Errors
    /// Only when kvctl cannot be run; its failures are in the output.
    pub async fn kvctl(&self, args: &[&str]) -> anyhow::Result<KvctlOutput> {
        self.kvctl_on(&self.running(), args).await
    }

    /// Runs `kvctl <args>` against the given nodes only.
    ///
    /// # Errors
    /// As for [`TestCluster::kvctl`].
    pub async fn kvctl_on(&self, nodes: &[usize], args: &[&str]) -> anyhow::Result<KvctlOutput> {
        self.kvctl_with_certs(nodes, &self.certs, args).await
    }

    /// Runs `kvctl <args>` against the given nodes, presenting the `client`
    /// certificate of `certs` (e.g. one from another CA).
    ///
    /// # Errors
    /// As for [`TestCluster::kvctl`].
    pub async fn kvctl_with_certs(
        &self,
        nodes: &[usize],
        certs: &Path,
        args: &[&str],
    ) -> anyhow::Result<KvctlOutput> {
        let endpoints = self.endpoints(nodes)?;
        kvctl::run(&self.bins.kvctl, self.dir(), &endpoints, certs, &[], args).await
    }

    /// Runs `kvctl <args>` against the given nodes with the variables of
    /// `env` set (e.g. `KV_ROUTER_MODE`); the harness removes every other
    /// `KV_*` variable, as for [`TestCluster::kvctl`].
    ///
    /// # Errors
    /// As for [`TestCluster::kvctl`].
    pub async fn kvctl_env(
        &self,
        nodes: &[usize],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> anyhow::Result<KvctlOutput> {
        let endpoints = self.endpoints(nodes)?;
        kvctl::run(
            &self.bins.kvctl,
            self.dir(),
            &endpoints,
            &self.certs,
            env,
            args,
        )
        .await
    }

    /// Waits until every running member sees every running member alive
    /// and all of them route with the same ring version.
    ///
    /// # Errors
    /// When that does not happen within [`DEADLINE`] or a node exits.
    pub async fn wait_converged(&self) -> anyhow::Result<()> {
        poll("the cluster to converge", DEADLINE, async || {
            let running = self.running();
            let mut versions = Vec::new();
            for &i in &running {
                let report = self.poll_status(i).await?;
                for &j in &running {
                    let id = self.name(j);
                    if !report.nodes.iter().any(|n| n.id == id && n.alive) {
                        let seen = format!("{} does not see {id} alive", report.node);
                        return Err(Step::NotYet(seen));
                    }
                }
                versions.push((report.node, report.ring_version));
            }
            if versions.windows(2).any(|w| w[0].1 != w[1].1) {
                return Err(Step::NotYet(format!("ring versions differ: {versions:?}")));
            }
            Ok(())
        })
        .await
    }

    /// Waits until every other running member's status shows node `index`
    /// as `alive: false` (after [`TestCluster::kill`] or `stop`).
    ///
    /// # Errors
    /// When that does not happen within [`DEADLINE`].
    pub async fn wait_dead(&self, index: usize) -> anyhow::Result<()> {
        self.wait_seen(index, false).await
    }

    /// Waits until every running member, node `index` included, shows node
    /// `index` as `alive: true`.
    ///
    /// # Errors
    /// When node `index` is not running, or that does not happen within
    /// [`DEADLINE`].
    pub async fn wait_alive(&self, index: usize) -> anyhow::Result<()> {
        // Others may still call a freshly killed node alive: that is not it.
        anyhow::ensure!(
            self.node(index)?.is_started(),
            "{} is not running: start it before waiting for it to be alive",
            self.name(index)
        );
        self.wait_seen(index, true).await
    }

    async fn wait_seen(&self, index: usize, alive: bool) -> anyhow::Result<()> {
        let id = self.id(index)?.to_string();
        let what = format!("every running node to see {id} alive: {alive}");
        poll(&what, DEADLINE, async || {
            for i in self.running() {
                if i == index && !alive {
                    continue;
                }
                let report = self.poll_status(i).await?;
                let seen = report.nodes.iter().find(|n| n.id == id).map(|n| n.alive);
                if seen != Some(alive) {
                    let seen = format!("{} reports {id} alive: {seen:?}", report.node);
                    return Err(Step::NotYet(seen));
                }
            }
            Ok(())
        })
        .await
    }

    /// Waits until node `index` answers `status` as itself.
    pub(crate) async fn wait_serving(&self, index: usize) -> anyhow::Result<()> {
        let id = self.id(index)?.to_string();
        poll(&format!("{id} to answer status"), DEADLINE, async || {
            let report = self.poll_status(index).await?;
            if report.node == id {
                Ok(())
            } else {
                Err(Step::NotYet(format!(
                    "{} answered instead of {id}",
                    report.node
                )))
            }
        })
        .await
    }

    /// One status call inside a wait: a node that exited ends the wait at
    /// once (its log is in the message); any other failure is "not yet".
    pub(crate) async fn poll_status(&self, index: usize) -> Result<StatusReport, Step> {
        if let Some(exited) = self.node(index).ok().and_then(|n| n.exited()) {
            return Err(Step::Never(exited));
        }
        self.status(index)
            .await
            .map_err(|e| Step::NotYet(format!("{}: {e:#}", self.name(index))))
    }

    fn name(&self, index: usize) -> String {
        self.id(index)
            .map_or_else(|_| format!("#{index}"), |id| id.to_string())
    }

    fn endpoints(&self, nodes: &[usize]) -> anyhow::Result<Vec<String>> {
        nodes.iter().map(|&i| self.endpoint(i)).collect()
    }
}
