//! Where a key lives: its preference list as node indices, and what one
//! replica stores, both asked through a test's own [`Client`].

use anyhow::{Context, ensure};
use kv_client::{Client, Object};

use crate::cluster::TestCluster;

impl TestCluster {
    /// The preference list of `key` as node indices, in ring order, from
    /// `explain` on whichever node `client` asks.
    ///
    /// # Errors
    /// When explain fails, names an unknown node, or lists a node twice.
    pub async fn replicas_of(&self, client: &Client, key: &[u8]) -> anyhow::Result<Vec<usize>> {
        let report = client.explain(key).await.context("explain failed")?;
        let mut indices = Vec::with_capacity(report.replicas.len());
        for replica in &report.replicas {
            let index = self.index_of(&replica.id)?;
            ensure!(
                !indices.contains(&index),
                "{} lists {} twice: {report:?}",
                report.node,
                replica.id
            );
            indices.push(index);
        }
        Ok(indices)
    }

    /// What node `index` itself stores for `key` (no quorum): `None` when
    /// it stores nothing. `client` finds the node's address through its own
    /// endpoints' status.
    ///
    /// # Errors
    /// When the node is unknown or does not answer.
    pub async fn local_get(
        &self,
        client: &Client,
        index: usize,
        key: &[u8],
    ) -> anyhow::Result<Option<Object>> {
        let id = self.id(index)?;
        client
            .local_get(&id, key)
            .await
            .with_context(|| format!("local get of {:?} on {id}", String::from_utf8_lossy(key)))
    }
}
