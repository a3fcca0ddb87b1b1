//! The node's plaintext front doors, RESP and the HTTP admin endpoint, as
//! one unit for `node.rs`: bound early (a port conflict stops the node
//! before it joins gossip), started once gossip runs (their addresses are
//! published as the gossip keys [`keys::RESP_ADDR`] and
//! [`keys::ADMIN_ADDR`], which `kvctl status` shows), stopped first at
//! shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_gossip::{Membership, keys};
use kv_replication::Core;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Semaphore;

use crate::admin::{AdminListener, AdminServer};
use crate::certs::NodeCerts;
use crate::config::NodeConfig;
use crate::membership::GossipMembership;
use crate::metrics::Sources;
use crate::resp::{RespDeps, RespListener, RespServer};

/// What the front doors serve from.
pub struct FrontDeps {
    /// The replication core.
    pub core: Arc<Core>,
    /// Gossip, for the addresses `/status` shows.
    pub gossip: Arc<GossipMembership>,
    /// The client admission semaphore (shared with the QUIC door).
    pub client_slots: Arc<Semaphore>,
    /// The node's certificate, for `/status`.
    pub certs: Arc<NodeCerts>,
}

/// Bound, not yet serving.
pub struct FrontDoors {
    resp: Option<(RespListener, SocketAddr)>,
    admin: Option<(AdminListener, SocketAddr, PrometheusHandle)>,
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
    pub async fn bind(config: &NodeConfig, deps: FrontDeps) -> anyhow::Result<Self> {
        let resp = match config.resp.enabled {
            true => {
                let listener = RespListener::bind(config.resp.settings()).await?;
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
            sources: Sources {
                core: deps.core,
                gossip: deps.gossip,
                client_slots: (deps.client_slots, config.limits.max_client_requests),
                certs: deps.certs,
                started: Instant::now(),
            },
        })
    }

    /// Starts serving and publishes the addresses in gossip.
    pub async fn start(self, membership: &Membership) -> RunningFrontDoors {
        let resp = match self.resp {
            Some((listener, published)) => {
                membership
                    .publish(keys::RESP_ADDR, &published.to_string())
                    .await;
                let core = &self.sources.core;
                Some(listener.serve(RespDeps {
                    coordinator: core.coordinator().clone(),
                    cluster: core.cluster().clone(),
                    client_slots: self.sources.client_slots.0.clone(),
                }))
            }
            None => None,
        };
        let admin = match self.admin {
            Some((listener, published, prometheus)) => {
                membership
                    .publish(keys::ADMIN_ADDR, &published.to_string())
                    .await;
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
