//! The simulated clients' door: [`kv_workload::Store`] on the cores of the
//! simulated cluster, as the node's QUIC handler would serve it. Each
//! request goes to a coordinator drawn from the seed among the nodes a
//! client could reach, with a request id from the seed; the core's errors
//! become the client library's as `node/src/translate.rs` and the client
//! map them (so the workload classifies outcomes exactly as in a chaos
//! run). A request that takes longer than the client's timeout is
//! indeterminate, as a QUIC client's would be.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kv_client::{ErrorKind, GetReply, NodeReport, StatusReport};
use kv_replication::{ClientWrite, Core, Error, Refusal, WriteMode};
use kv_storage::Storage;
use kv_types::{NodeId, NodeStatus};

use crate::world::{Phase, World, lock};

/// The client's deadline for one request (kvctl's default is 10 s; the
/// core's own request timeout in the simulation is 2 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// N of the simulated cluster (`test_settings`), for final reads with R=N.
const REPLICAS: u8 = 3;

/// The workload's store in the simulation.
pub struct SimStore {
    /// The world.
    world: Arc<World>,
    /// Status requests so far: the first is the workload's start, the
    /// second means the clients are done (the settle phase began).
    statuses: AtomicU64,
    /// The key whose replicas are traced after each request (`SIM_WATCH`).
    watched: Option<String>,
}

impl SimStore {
    /// The store of `world`.
    pub fn new(world: Arc<World>) -> Self {
        SimStore {
            world,
            statuses: AtomicU64::new(0),
            watched: std::env::var("SIM_WATCH").ok(),
        }
    }

    /// A coordinator drawn from the reachable nodes, and a request id,
    /// after the client's own latency to it (1-10 ms, seeded).
    async fn coordinator(&self) -> kv_client::Result<(NodeId, Arc<Core>, u64)> {
        tokio::time::sleep(Duration::from_millis(1 + self.world.draw(10))).await;
        let reachable = self.world.reachable();
        let Some(node) = reachable
            .get(self.world.draw(reachable.len() as u64) as usize)
            .cloned()
        else {
            return Err(kv_client::Error::Unavailable {
                node: "-".into(),
                message: "no node is reachable".into(),
            });
        };
        let core = self.world.cluster.lock().await.core(&node).clone();
        Ok((node, core, self.world.rng.next_u64()))
    }

    fn touch(&self, key: &[u8]) {
        lock(&self.world.touched).insert(key.to_vec());
    }

    async fn write(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        context: &[u8],
        w: Option<u8>,
    ) -> kv_client::Result<Vec<u8>> {
        self.touch(key);
        let (node, core, id) = self.coordinator().await?;
        let write = ClientWrite {
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
            context: context.to_vec(),
            mode: WriteMode::Context,
            w,
        };
        let what = match value {
            Some(v) => format!("put {}", String::from_utf8_lossy(v)),
            None => "delete".into(),
        };
        let answer =
            tokio::time::timeout(CLIENT_TIMEOUT, core.coordinator().write(id, write)).await;
        let result = match answer {
            Ok(Ok(written)) => Ok(written.context),
            Ok(Err(e)) => Err(client_error(&node, &e)),
            Err(_) => Err(timed_out(&node)),
        };
        self.world.trace.note(format!(
            "client {what} {} via {node}: {}",
            String::from_utf8_lossy(key),
            outcome(&result)
        ));
        self.watch(key).await;
        result
    }

    /// With `SIM_WATCH=<key>` in the environment, traces what every node
    /// stores for that key after each request on it.
    async fn watch(&self, key: &[u8]) {
        let Some(watched) = &self.watched else { return };
        if watched.as_bytes() != key {
            return;
        }
        let cluster = self.world.cluster.lock().await;
        for id in cluster.ids() {
            let stored = match cluster.node(&id).storage.get(key) {
                Ok(Some(object)) => show(&object),
                Ok(None) => "absent".into(),
                Err(e) => e.to_string(),
            };
            self.world
                .trace
                .note(format!("  watch {watched} on {id}: {stored}"));
        }
    }
}

/// An object in one line: each entry's actor, counter and values.
fn show(object: &kv_types::Object) -> String {
    let text = format!("{object:?}");
    text.replace("Entry { actor: Actor { node: ", "")
        .replace("DvvSet { entries: ", "")
        .replace("Sibling { data: ", "")
}

impl kv_workload::Store for SimStore {
    async fn get(&self, key: &[u8], r: Option<u8>) -> kv_client::Result<GetReply> {
        self.touch(key);
        let (node, core, id) = self.coordinator().await?;
        let answer = tokio::time::timeout(CLIENT_TIMEOUT, core.coordinator().get(id, key, r)).await;
        let result = match answer {
            Ok(Ok(read)) => Ok(GetReply {
                values: read.values(),
                deleted: read.is_deleted(),
                context: read.context,
            }),
            Ok(Err(e)) => Err(client_error(&node, &e)),
            Err(_) => Err(timed_out(&node)),
        };
        let shown = match &result {
            Ok(reply) => format!(
                "ok [{}]",
                reply
                    .values
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => e.to_string(),
        };
        self.world.trace.note(format!(
            "client get {} r={r:?} via {node}: {shown}",
            String::from_utf8_lossy(key)
        ));
        self.watch(key).await;
        result
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> kv_client::Result<Vec<u8>> {
        self.write(key, Some(value), context, w).await
    }

    async fn delete(
        &self,
        key: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> kv_client::Result<Vec<u8>> {
        self.write(key, None, context, w).await
    }

    async fn status(&self) -> kv_client::Result<StatusReport> {
        if self.statuses.fetch_add(1, Ordering::Relaxed) >= 1 && self.world.phase() == Phase::Faults
        {
            self.world.trace.note("clients done: healing every fault");
            self.world.set_phase(Phase::Healing);
        }
        if self.world.phase() != Phase::Faults {
            self.world.wait_phase(|p| p == Phase::Healed).await;
        }
        let (node, core, _) = self.coordinator().await?;
        let view = core.cluster().view();
        let removed = core.cluster().removed();
        let nodes = core
            .cluster()
            .members()
            .into_iter()
            .map(|m| NodeReport {
                id: m.id.to_string(),
                addr: String::new(),
                zone: m.zone.clone(),
                host: m.host.clone(),
                status: if removed.contains(&m.id) {
                    "LEFT".into()
                } else {
                    status_name(m.status).into()
                },
                alive: m.id == node || view.is_alive(&m.id),
                ring_share: 0.0,
                transfer: String::new(),
                resp: String::new(),
                admin: String::new(),
            })
            .collect();
        let placement = core.cluster().placement();
        Ok(StatusReport {
            node: node.to_string(),
            ring_version: placement.target.version(),
            partitions: placement.target.partitions(),
            replicas: REPLICAS,
            nodes,
            mode: String::new(),
        })
    }
}

fn status_name(status: NodeStatus) -> &'static str {
    match status {
        NodeStatus::Joining => "JOINING",
        NodeStatus::Up => "UP",
        NodeStatus::Draining => "DRAINING",
        NodeStatus::Left => "LEFT",
    }
}

fn outcome(result: &kv_client::Result<Vec<u8>>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => e.to_string(),
    }
}

fn timed_out(node: &NodeId) -> kv_client::Error {
    kv_client::Error::Indeterminate {
        node: node.to_string(),
        message: format!("no answer within {} s", CLIENT_TIMEOUT.as_secs()),
    }
}

/// The client library's error for a core error, as the node's translation
/// and the client's decoding give it.
pub fn client_error(node: &NodeId, e: &Error) -> kv_client::Error {
    let server = |kind| kv_client::Error::Server {
        kind,
        node: node.to_string(),
        message: e.to_string(),
    };
    match e {
        Error::Unavailable { .. } => kv_client::Error::Unavailable {
            node: node.to_string(),
            message: e.to_string(),
        },
        Error::Indeterminate { .. } => kv_client::Error::Indeterminate {
            node: node.to_string(),
            message: e.to_string(),
        },
        Error::Refused(Refusal::TooManySiblings(_)) => server(ErrorKind::TooManySiblings),
        Error::Refused(Refusal::Invalid(m)) => kv_client::Error::Invalid { message: m.clone() },
        Error::Overloaded(m) => kv_client::Error::Overloaded {
            node: node.to_string(),
            message: m.clone(),
        },
        Error::Storage { node, message } => kv_client::Error::Storage {
            node: node.to_string(),
            message: message.clone(),
        },
        Error::Corrupt { .. } => server(ErrorKind::Corrupt),
        Error::Internal(_) | Error::DataDir { .. } => server(ErrorKind::Internal),
    }
}
