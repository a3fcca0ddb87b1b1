//! One client of the workload: its loop of seeded steps and the requests
//! behind each step, every one recorded in the history.
//!
//! A client remembers, per key, the context and the values of its last
//! successful read, because a write's `saw` must be exactly what the read
//! whose context it carries returned. It never writes with the context a
//! write returned: that one covers every version on the coordinating
//! replica, including siblings the client never saw. Errors are recorded
//! and the client goes on after a short, jittered pause (the nemesis is
//! expected to cause errors).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::checker::elements;
use crate::generator::{Basis, Generator, Step, Target};
use crate::history::{Entry, OpKind};
use crate::runner::{SET_CAPACITY, Shared, fail, text};
use crate::store::Store;

/// The context and values of a client's last successful read of a key.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The causal context the read returned.
    context: Vec<u8>,
    /// Register: its values; set: the union of its siblings' elements,
    /// sorted.
    values: Vec<String>,
}
impl<S: Store> Shared<S> {
    fn key(&self, target: Target, generations: &[u32]) -> String {
        let name = match target {
            Target::Register(i) => format!("reg-{i}"),
            Target::Set(j) => {
                let generation = generations.get(j as usize).copied().unwrap_or(0);
                format!("set-{}", generation * self.config.sets + j)
            }
        };
        if self.config.namespace.is_empty() {
            name
        } else {
            format!("{}/{name}", self.config.namespace)
        }
    }

    /// One client's loop until the end of the run.
    pub(crate) async fn client(&self, client: u32) {
        let config = &self.config;
        let mut generator =
            Generator::new(config.seed, client, config.keys, config.sets, config.mix);
        let mut memory: HashMap<String, Seen> = HashMap::new();
        let mut generations = vec![0u32; config.sets as usize];
        let mut jitter = StdRng::seed_from_u64(config.seed ^ (u64::from(client) << 32) ^ 0x6A17);
        while Instant::now() < self.end && self.take_op() {
            let step = generator.next_step();
            let failed = match step {
                Step::Read(target) => {
                    let key = self.key(target, &generations);
                    let set = matches!(target, Target::Set(_));
                    self.read(client, &key, set, &mut memory).await.err()
                }
                Step::Put {
                    register,
                    value,
                    basis,
                } => {
                    let key = self.key(Target::Register(register), &generations);
                    self.write(client, &key, Some(value), basis, &mut memory)
                        .await
                        .err()
                }
                Step::Delete { register, basis } => {
                    let key = self.key(Target::Register(register), &generations);
                    self.write(client, &key, None, basis, &mut memory)
                        .await
                        .err()
                }
                Step::Add { set, element } => self
                    .add(client, set, element, &mut generations, &mut memory)
                    .await
                    .err(),
            };
            if let Some(error) = failed {
                // Jitter from the client's own seeded stream: errors must
                // not shift the stream of steps, and the same seed must
                // pause the same way (the simulation replays seeds).
                let pause_ms = match error.exit_code() {
                    3 | 4 => jitter.random_range(5..=25),
                    _ => jitter.random_range(50..=150),
                };
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            }
        }
    }

    /// A recorded read; a success is remembered for later writes.
    async fn read(
        &self,
        client: u32,
        key: &str,
        set: bool,
        memory: &mut HashMap<String, Seen>,
    ) -> kv_client::Result<Seen> {
        let began = Instant::now();
        let result = self.store.get(key.as_bytes(), None).await;
        let mut entry = self.entry(OpKind::Read, Some(client), key, began);
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => {
                fail(&mut entry, &e);
                self.record(&entry);
                return Err(e);
            }
        };
        let values: Vec<String> = reply.values.iter().map(|v| text(v)).collect();
        let seen_values = if set {
            let union: BTreeSet<&str> = values.iter().flat_map(|v| elements(v)).collect();
            union.into_iter().map(str::to_string).collect()
        } else {
            values.clone()
        };
        entry.values = Some(values);
        entry.deleted = Some(reply.deleted);
        self.record(&entry);
        let seen = Seen {
            context: reply.context,
            values: seen_values,
        };
        memory.insert(key.to_string(), seen.clone());
        Ok(seen)
    }

    /// A put of `value` (or a delete when `None`) with the context `basis`
    /// names; a fresh read first when needed.
    async fn write(
        &self,
        client: u32,
        key: &str,
        value: Option<String>,
        basis: Basis,
        memory: &mut HashMap<String, Seen>,
    ) -> kv_client::Result<()> {
        let seen = match (basis, memory.get(key)) {
            (Basis::Blind, _) => Seen::default(),
            (Basis::Remembered, Some(seen)) => seen.clone(),
            _ => self.read(client, key, false, memory).await?,
        };
        let began = Instant::now();
        let (op, result) = match &value {
            Some(v) => {
                let put = self
                    .store
                    .put(key.as_bytes(), v.as_bytes(), &seen.context, None);
                (OpKind::Put, put.await)
            }
            None => (
                OpKind::Delete,
                self.store.delete(key.as_bytes(), &seen.context, None).await,
            ),
        };
        let mut entry = self.entry(op, Some(client), key, began);
        entry.value = value;
        entry.blind = basis == Basis::Blind;
        entry.saw = Some(seen.values);
        self.finish(entry, result)
    }

    /// Reads set slot `set`, then writes the union read plus `element` with
    /// the read's context. A full set moves the slot to its next key.
    async fn add(
        &self,
        client: u32,
        set: u32,
        element: String,
        generations: &mut [u32],
        memory: &mut HashMap<String, Seen>,
    ) -> kv_client::Result<()> {
        let key = self.key(Target::Set(set), generations);
        let seen = self.read(client, &key, true, memory).await?;
        if seen.values.len() >= SET_CAPACITY {
            if let Some(generation) = generations.get_mut(set as usize) {
                *generation += 1;
            }
            return Ok(());
        }
        let mut all = seen.values.clone();
        all.push(element.clone());
        all.sort_unstable();
        let began = Instant::now();
        let result = self
            .store
            .put(
                key.as_bytes(),
                all.join(",").as_bytes(),
                &seen.context,
                None,
            )
            .await;
        let mut entry = self.entry(OpKind::Add, Some(client), &key, began);
        entry.element = Some(element);
        entry.saw = Some(seen.values);
        self.finish(entry, result)
    }

    fn finish(
        &self,
        mut entry: Entry,
        result: kv_client::Result<Vec<u8>>,
    ) -> kv_client::Result<()> {
        let outcome = result.map(|_| ());
        if let Err(e) = &outcome {
            fail(&mut entry, e);
        }
        self.record(&entry);
        outcome
    }
}
