//! The node's plaintext front doors, RESP and the HTTP admin endpoint, as
//! one unit for `node.rs`: bound early (a port conflict stops the node
//! before it joins gossip), started once gossip runs (their addresses are
//! published as the gossip keys [`RESP_ADDR`] and [`ADMIN_ADDR`], which
//! `kvctl status` shows), stopped first at shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_gossip::Membership;
use kv_storage::Storage;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Semaphore;

use crate::admin::{AdminListener, AdminServer};
use crate::antientropy::AntiEntropy;
use crate::cluster::Cluster;
use crate::config::NodeConfig;
use crate::coordinator::Coordinator;
use crate::handoff::HandoffStats;
use crate::metrics::Sources;
use crate::peers::Peers;
use crate::resp::{RespDeps, RespListener, RespServer};
use crate::scoring::Scoring;

/// Gossip key of a node's RESP address (`HOST:PORT`).
pub const RESP_ADDR: &str = "resp_addr";

/// Gossip key of a node's admin endpoint address (`HOST:PORT`).
pub const ADMIN_ADDR: &str = "admin_addr";

/// Bound, not yet serving.
pub struct FrontDoors {
    resp: Option<(RespListener, SocketAddr)>,
    admin: Option<(AdminListener, SocketAddr, PrometheusHandle)>,
    coordinator: Arc<Coordinator>,
    client_slots: Arc<Semaphore>,
    sources: Sources,
}

/// Serving.
pub struct RunningFrontDoors {
    resp: Option<RespServer>,
    admin: Option<AdminServer>,
}

impl FrontDoors {
    /// Installs the metrics recorder (when the admin endpoint is enabled)
    /// and binds both listeners.
    ///
    /// # Errors
    /// A port that cannot be bound, or a recorder installed twice.
    #[allow(clippy::too_many_arguments)]
    pub async fn bind(
        config: &NodeConfig,
        cluster: &Arc<Cluster>,
        coordinator: &Arc<Coordinator>,
        scoring: &Arc<Scoring>,
        storage: &Arc<dyn Storage>,
        handoff: &Arc<HandoffStats>,
        anti_entropy: &Arc<AntiEntropy>,
        (client_slots, peer_slots): (&Arc<Semaphore>, &Arc<Semaphore>),
        cache: &Arc<kv_storage::ReadCache>,
    ) -> anyhow::Result<Self> {
        let resp = match config.resp.enabled {
            true => {
                let settings = config.resp.settings(config.replica_timeout());
                let listener = RespListener::bind(settings).await?;
                let published = config.resp.published(listener.local_addr());
                Some((listener, published))
            }
            false => None,
        };
        let admin = match config.admin.enabled {
            true => {
                let prometheus = crate::metrics::install()?;
                let listener = AdminListener::bind(config.admin.listen).await?;
                let published = config.admin.advertise.unwrap_or(listener.local_addr());
                Some((listener, published, prometheus))
            }
            false => None,
        };
        Ok(FrontDoors {
            resp,
            admin,
            coordinator: coordinator.clone(),
            client_slots: client_slots.clone(),
            sources: Sources {
                cluster: cluster.clone(),
                scoring: scoring.clone(),
                storage: storage.clone(),
                handoff: handoff.clone(),
                anti_entropy: anti_entropy.clone(),
                client_slots: (client_slots.clone(), config.limits.max_client_requests),
                peer_slots: (peer_slots.clone(), config.limits.max_peer_requests),
                started: Instant::now(),
                cache: cache.clone(),
            },
        })
    }

    /// Starts serving and publishes the addresses in gossip.
    pub async fn start(self, peers: &Arc<Peers>, membership: &Membership) -> RunningFrontDoors {
        let resp = match self.resp {
            Some((listener, published)) => {
                membership.publish(RESP_ADDR, &published.to_string()).await;
                Some(listener.serve(RespDeps {
                    coordinator: self.coordinator,
                    cluster: self.sources.cluster.clone(),
                    peers: peers.clone(),
                    client_slots: self.client_slots,
                }))
            }
            None => None,
        };
        let admin = match self.admin {
            Some((listener, published, prometheus)) => {
                membership.publish(ADMIN_ADDR, &published.to_string()).await;
                Some(listener.serve(self.sources, prometheus))
            }
            None => None,
        };
        RunningFrontDoors { resp, admin }
    }
}

impl RunningFrontDoors {
    /// Stops accepting RESP connections (idle ones close; busy ones finish
    /// their command). The admin endpoint keeps answering until
    /// [`RunningFrontDoors::drain`].
    pub fn stop_accepting(&self) {
        if let Some(resp) = &self.resp {
            resp.stop();
        }
    }

    /// Waits (at most `deadline`) for RESP connections to close, then stops
    /// the admin endpoint.
    pub async fn drain(&self, deadline: Duration) {
        if let Some(resp) = &self.resp {
            resp.wait(deadline).await;
        }
        if let Some(admin) = &self.admin {
            admin.shutdown(Duration::from_secs(1)).await;
        }
    }
}
