//! Where a key lives: its preference list as node indices, and what one
//! replica stores, both asked through a test's own [`Client`].

use std::time::Duration;

use anyhow::{Context, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use kv_client::{Client, Object};
use tokio::time::Instant;

use crate::cluster::TestCluster;
use crate::poll::poll_until;

/// Local reads in flight at once while checking what a node holds.
const IN_FLIGHT: usize = 16;

impl TestCluster {
    /// The preference list of `key` as node indices, in ring order, from
    /// `explain` on whichever node `client` asks.
    ///
    /// # Errors
    /// When explain fails, names an unknown node, or lists a node twice.
    pub async fn replicas_of(&self, client: &Client, key: &[u8]) -> anyhow::Result<Vec<usize>> {
        let report = client.explain(key, false).await.context("explain failed")?;
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

    /// The entries of `expected` (key, value) that node `index` does not
    /// store with that value among its live versions, asked with local
    /// reads (no quorum, so no read repair). Returns their positions.
    ///
    /// # Errors
    /// When a local read fails.
    pub async fn missing_on(
        &self,
        client: &Client,
        index: usize,
        expected: &[(Vec<u8>, Vec<u8>)],
    ) -> anyhow::Result<Vec<usize>> {
        let held: Vec<bool> = stream::iter(expected)
            .map(|(key, value)| async move {
                let stored = self.local_get(client, index, key).await?;
                anyhow::Ok(stored.is_some_and(|o| o.live_values().any(|v| v == value)))
            })
            .buffered(IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(held
            .iter()
            .enumerate()
            .filter(|(_, held)| !**held)
            .map(|(i, _)| i)
            .collect())
    }

    /// Polls [`TestCluster::missing_on`] until node `index` stores every
    /// entry of `expected`, and returns how long that took.
    ///
    /// # Errors
    /// When it still misses some after `timeout` (the error says how many
    /// and which).
    pub async fn wait_holding(
        &self,
        client: &Client,
        index: usize,
        expected: &[(Vec<u8>, Vec<u8>)],
        timeout: Duration,
    ) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let id = self.id(index)?;
        poll_until(
            &format!("{id} to store {} keys", expected.len()),
            timeout,
            async || match self.missing_on(client, index, expected).await {
                Ok(missing) if missing.is_empty() => Ok(()),
                Ok(missing) => Err(format!(
                    "{} of {} missing, e.g. {:?}",
                    missing.len(),
                    expected.len(),
                    missing
                        .iter()
                        .take(5)
                        .map(|&i| String::from_utf8_lossy(&expected[i].0).into_owned())
                        .collect::<Vec<_>>()
                )),
                Err(e) => Err(format!("{e:#}")),
            },
        )
        .await?;
        Ok(start.elapsed())
    }
}
