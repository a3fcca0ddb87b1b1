//! The convergence check after healing: every replica of every touched key
//! (the current holders and pending owners, as a running node's placement
//! says) holds the same object, siblings and clocks alike, read straight
//! from the engines. Polled every 100 ms of simulated time from the heal,
//! up to [`BOUND`].

use std::sync::Arc;
use std::time::Duration;

use kv_storage::Storage;
use kv_types::Object;
use kv_workload::Convergence;
use tokio::time::Instant;

use crate::world::{World, lock};

/// The bound: replicas agree within 30 s of simulated time after
/// the last fault healed.
pub const BOUND: Duration = Duration::from_secs(30);

/// How often the replicas are compared.
const POLL: Duration = Duration::from_millis(100);

/// Waits until every touched key's replicas agree, or the bound passes.
pub async fn measure(world: Arc<World>) -> Convergence {
    let healed = lock(&world.healed_at).unwrap_or_else(Instant::now);
    loop {
        let elapsed = healed.elapsed();
        let differing = differing(&world, elapsed).await;
        if differing.is_empty() || elapsed >= BOUND {
            let max_ms = elapsed.min(BOUND).as_secs_f64() * 1000.0;
            if !differing.is_empty() {
                world.trace.note(format!(
                    "convergence: {} key(s) still differ after {} s",
                    differing.len(),
                    BOUND.as_secs()
                ));
            }
            return Convergence {
                max_ms,
                unconverged: differing,
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The touched keys whose replicas differ now.
async fn differing(world: &World, healed_for: Duration) -> Vec<String> {
    let keys: Vec<Vec<u8>> = lock(&world.touched).iter().cloned().collect();
    let cluster = world.cluster.lock().await;
    let Some(any) = cluster.running().into_iter().next() else {
        return keys
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
    };
    let placement = cluster.core(&any).cluster().placement();
    let mut out = Vec::new();
    for key in &keys {
        let (_, replicas) = placement.key_replicas(key);
        let objects: Vec<Option<Object>> = replicas
            .current
            .iter()
            .chain(&replicas.pending)
            .map(|id| cluster.node(id).storage.get(key).ok().flatten())
            .collect();
        // Absent and empty are the same state; a corrupt record differs.
        let norm = |o: &Option<Object>| o.clone().filter(|o| !o.is_empty());
        if objects.windows(2).any(|w| norm(&w[0]) != norm(&w[1])) {
            let name = String::from_utf8_lossy(key).into_owned();
            if healed_for >= BOUND {
                for (id, object) in replicas
                    .current
                    .iter()
                    .chain(&replicas.pending)
                    .zip(&objects)
                {
                    world
                        .trace
                        .note(format!("convergence: {name} on {id}: {object:?}"));
                }
            }
            out.push(name);
        }
    }
    out
}
