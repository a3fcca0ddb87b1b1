//! Dotted version vector sets (DVVSet): the causal metadata of one key.
//!
//! Source: Almeida, Baquero, Gonçalves, Preguiça, Fonte, "Scalable and
//! Accurate Causality Tracking for Eventually Consistent Stores" (DAIS 2014),
//! and the reference Erlang `dvvset` module that Riak 2.0 ships. Unlike plain
//! version vectors with one entry per client, a DVVSet has one entry per
//! *server actor* and still never makes false siblings: each value carries
//! its own dot (actor, counter), implicitly, by its position in the entry.
//!
//! Representation: entries sorted by actor; entry `(a, n, [v_n, ..., v_k])`
//! means "actor `a` issued events 1..=n; the values of events k..=n are
//! still current, newest first; the values of events 1..k-1 are obsolete".
//! Values never travel without a dot here, so the reference implementation's
//! list of anonymous values is not needed: a client's new value always gets
//! its dot from [`DvvSet::update`] on a replica.
//!
//! Invariants (checked by [`DvvSet::validate`] on anything decoded): actors
//! strictly increasing, every counter > 0, `values.len() <= counter`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::{Error, Result};

/// The identity that issues dots: one per node *incarnation*.
///
/// The incarnation is a random number created with the node's data directory,
/// so a node that lost its data can never reissue a dot it issued before
/// (the Riak "kv679" bug).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// The node that issues the dots.
    pub node: NodeId,
    /// Random id of the node's data directory.
    pub incarnation: u64,
}

/// One actor's slice of a [`DvvSet`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry<V> {
    actor: Actor,
    counter: u64,
    /// Values of dots `counter`, `counter - 1`, ... (newest first).
    values: Vec<V>,
}

impl<V> Entry<V> {
    /// The actor of this entry.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }
    /// The highest event counter of this actor seen by the clock.
    pub fn counter(&self) -> u64 {
        self.counter
    }
    /// Current values of this actor, newest first; value `i` has dot
    /// `(actor, counter - i)`.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Events at or below this counter have no current value here.
    fn floor(&self) -> u64 {
        self.counter - self.values.len() as u64
    }
}

/// A set of concurrent values (siblings) of one key with their causal
/// history. `V` is the sibling payload (see [`crate::Sibling`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvvSet<V> {
    entries: Vec<Entry<V>>,
}

impl<V> Default for DvvSet<V> {
    fn default() -> Self {
        DvvSet {
            entries: Vec::new(),
        }
    }
}

impl<V: Clone> DvvSet<V> {
    /// An empty clock: no history, no values.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries, sorted by actor.
    pub fn entries(&self) -> &[Entry<V>] {
        &self.entries
    }

    /// Whether the clock has neither history nor values.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All current values (siblings), each with its dot.
    pub fn values_with_dots(&self) -> impl Iterator<Item = ((&Actor, u64), &V)> {
        self.entries.iter().flat_map(|e| {
            e.values
                .iter()
                .enumerate()
                .map(move |(i, v)| ((&e.actor, e.counter - i as u64), v))
        })
    }

    /// All current values (siblings).
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().flat_map(|e| e.values.iter())
    }

    /// Number of current values (siblings).
    pub fn sibling_count(&self) -> usize {
        self.entries.iter().map(|e| e.values.len()).sum()
    }

    /// The causal history as a version vector: what a client gets as its
    /// causal context (Erlang `join/1`).
    pub fn join(&self) -> VersionVector {
        VersionVector {
            entries: self
                .entries
                .iter()
                .map(|e| (e.actor.clone(), e.counter))
                .collect(),
        }
    }

    /// Merges two replicas' clocks of the same key: the union of both
    /// histories, keeping exactly the values that neither side has seen
    /// superseded (Erlang `sync/2`). Commutative, associative, idempotent.
    pub fn sync(&self, other: &Self) -> Self {
        let mut out = Vec::with_capacity(self.entries.len().max(other.entries.len()));
        let (mut a, mut b) = (
            self.entries.iter().peekable(),
            other.entries.iter().peekable(),
        );
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => out.extend(a.by_ref().cloned()),
                (None, Some(_)) => out.extend(b.by_ref().cloned()),
                (Some(x), Some(y)) => match x.actor.cmp(&y.actor) {
                    Ordering::Less => out.extend(a.next().cloned()),
                    Ordering::Greater => out.extend(b.next().cloned()),
                    Ordering::Equal => {
                        out.push(merge_entry(x, y));
                        a.next();
                        b.next();
                    }
                },
            }
        }
        DvvSet { entries: out }
    }

    /// Records a new write at a replica (Erlang `update/3`): the result holds
    /// `value` under a fresh dot of `actor`, drops the local values that
    /// `context` saw, and keeps every local value it did not see (concurrent
    /// writes become siblings; nothing is silently discarded).
    ///
    /// `self` is the replica's current clock for the key; `context` is what
    /// the client read (empty for a blind write). The new dot's counter is
    /// one more than the larger of the local and context counters of
    /// `actor`, so a dot is never reused while the actor's own writes are
    /// durable before they are acknowledged.
    pub fn update(&self, context: &VersionVector, actor: &Actor, value: V) -> Self {
        // A floor of 0 raises no counter.
        self.update_with_floor(context, actor, value, 0)
    }

    /// As [`DvvSet::update`], but when `actor` has no current value in the
    /// result (its entry is absent or empty), its counter first rises to at
    /// least `floor`. A replica passes the highest counter its actor ever
    /// issued (for any key): then a key whose record was purged never gets a
    /// dot it had before, which stale copies of the purged record (a hint, a
    /// cache) would otherwise mistake for one they have already seen.
    ///
    /// Raising an entry without values re-labels nothing, so the semantics
    /// of every existing value are unchanged.
    pub fn update_with_floor(
        &self,
        context: &VersionVector,
        actor: &Actor,
        value: V,
        floor: u64,
    ) -> Self {
        let seen = DvvSet {
            entries: context
                .entries
                .iter()
                .map(|(actor, counter)| Entry {
                    actor: actor.clone(),
                    counter: *counter,
                    values: Vec::new(),
                })
                .collect(),
        };
        let mut synced = seen.sync(self);
        match synced.entries.binary_search_by(|e| e.actor.cmp(actor)) {
            Ok(i) => {
                let e = &mut synced.entries[i];
                if e.values.is_empty() {
                    e.counter = e.counter.max(floor);
                }
            }
            Err(i) if floor > 0 => synced.entries.insert(
                i,
                Entry {
                    actor: actor.clone(),
                    counter: floor,
                    values: Vec::new(),
                },
            ),
            Err(_) => {}
        }
        synced.event(actor, value);
        synced
    }

    /// The clock without the entries of actors that `retired` selects and
    /// that hold no current value: their history is dropped, values are
    /// untouched. Safe only once no copy anywhere still holds a value that
    /// such an entry superseded (see the node's anti-entropy rule); never
    /// removes a value, so it cannot lose a write.
    pub fn compact(&self, mut retired: impl FnMut(&Actor) -> bool) -> Self {
        DvvSet {
            entries: self
                .entries
                .iter()
                .filter(|e| !(e.values.is_empty() && retired(&e.actor)))
                .cloned()
                .collect(),
        }
    }

    /// The highest event counter of `actor` in this clock (0 if none).
    pub fn counter_of(&self, actor: &Actor) -> u64 {
        self.entries
            .binary_search_by(|e| e.actor.cmp(actor))
            .map_or(0, |i| self.entries[i].counter)
    }

    /// Adds a new event of `actor` carrying `value`.
    fn event(&mut self, actor: &Actor, value: V) {
        match self.entries.binary_search_by(|e| e.actor.cmp(actor)) {
            Ok(i) => {
                let e = &mut self.entries[i];
                e.counter += 1;
                e.values.insert(0, value);
            }
            Err(i) => self.entries.insert(
                i,
                Entry {
                    actor: actor.clone(),
                    counter: 1,
                    values: vec![value],
                },
            ),
        }
    }

    /// Applies `f` to every value, keeping dots and history.
    pub fn map_values<W: Clone>(&self, mut f: impl FnMut(&V) -> W) -> DvvSet<W> {
        DvvSet {
            entries: self
                .entries
                .iter()
                .map(|e| Entry {
                    actor: e.actor.clone(),
                    counter: e.counter,
                    values: e.values.iter().map(&mut f).collect(),
                })
                .collect(),
        }
    }

    /// Checks the representation invariants; run on every clock decoded from
    /// disk or the network.
    ///
    /// # Errors
    /// [`Error::MalformedClock`] naming the broken invariant.
    pub fn validate(&self) -> Result<()> {
        for pair in self.entries.windows(2) {
            if pair[0].actor >= pair[1].actor {
                return Err(Error::MalformedClock("actors not strictly increasing"));
            }
        }
        for e in &self.entries {
            if e.counter == 0 {
                return Err(Error::MalformedClock("zero counter"));
            }
            if e.values.len() as u64 > e.counter {
                return Err(Error::MalformedClock("more values than events"));
            }
        }
        Ok(())
    }
}

/// Merges one actor's entries of two clocks (Erlang `merge/5`): keep the
/// newer side's values except those the older side has already discarded.
fn merge_entry<V: Clone>(x: &Entry<V>, y: &Entry<V>) -> Entry<V> {
    let (hi, lo) = if x.counter >= y.counter {
        (x, y)
    } else {
        (y, x)
    };
    if hi.floor() >= lo.floor() {
        return hi.clone();
    }
    // hi's values with dots at or below lo's floor were superseded on lo's side.
    let keep = (hi.counter - lo.floor()) as usize;
    Entry {
        actor: hi.actor.clone(),
        counter: hi.counter,
        values: hi.values[..keep.min(hi.values.len())].to_vec(),
    }
}

/// A version vector: for each actor, how many of its events are known.
///
/// This is the causal context handed to clients: a PUT carrying it
/// supersedes exactly the versions it covers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionVector {
    /// Sorted by actor; counters > 0.
    entries: Vec<(Actor, u64)>,
}

impl VersionVector {
    /// The empty vector: has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a vector from `(actor, counter)` pairs in any order; duplicate
    /// actors keep the larger counter and zero counters are dropped.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Actor, u64)>) -> Self {
        let mut entries: Vec<(Actor, u64)> = pairs.into_iter().filter(|(_, n)| *n > 0).collect();
        entries.sort();
        let mut out: Vec<(Actor, u64)> = Vec::with_capacity(entries.len());
        for (actor, n) in entries {
            match out.last_mut() {
                Some((last, m)) if *last == actor => *m = (*m).max(n),
                _ => out.push((actor, n)),
            }
        }
        VersionVector { entries: out }
    }

    /// The `(actor, counter)` pairs, sorted by actor.
    pub fn entries(&self) -> &[(Actor, u64)] {
        &self.entries
    }

    /// Whether nothing has been seen.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many events of `actor` are known (0 if none).
    pub fn get(&self, actor: &Actor) -> u64 {
        self.entries
            .binary_search_by(|(a, _)| a.cmp(actor))
            .map(|i| self.entries[i].1)
            .unwrap_or(0)
    }

    /// Whether the dot `(actor, counter)` is covered by this history.
    pub fn contains(&self, actor: &Actor, counter: u64) -> bool {
        self.get(actor) >= counter
    }

    /// Whether `self` has seen everything `other` has (`self >= other`).
    pub fn descends(&self, other: &VersionVector) -> bool {
        other.entries.iter().all(|(a, n)| self.get(a) >= *n)
    }

    /// Pointwise maximum of two histories.
    pub fn merge(&self, other: &VersionVector) -> VersionVector {
        VersionVector::from_pairs(self.entries.iter().chain(other.entries.iter()).cloned())
    }

    /// Checks the invariants of a vector decoded from outside.
    ///
    /// # Errors
    /// [`Error::MalformedClock`] if actors are unsorted or a counter is zero.
    pub fn validate(&self) -> Result<()> {
        for pair in self.entries.windows(2) {
            if pair[0].0 >= pair[1].0 {
                return Err(Error::MalformedClock("actors not strictly increasing"));
            }
        }
        if self.entries.iter().any(|(_, n)| *n == 0) {
            return Err(Error::MalformedClock("zero counter"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;

    fn actor(name: &str) -> Actor {
        Actor {
            node: NodeId::new(name).unwrap(),
            incarnation: 1,
        }
    }

    fn vals(c: &DvvSet<&'static str>) -> BTreeSet<&'static str> {
        c.values().copied().collect()
    }

    #[test]
    fn blind_writes_through_one_actor_become_siblings() {
        let a = actor("a");
        let c1 = DvvSet::new().update(&VersionVector::new(), &a, "v1");
        let c2 = c1.update(&VersionVector::new(), &a, "v2");
        assert_eq!(vals(&c2), BTreeSet::from(["v1", "v2"]));
        // A write with the context of c2 resolves both.
        let c3 = c2.update(&c2.join(), &a, "v3");
        assert_eq!(vals(&c3), BTreeSet::from(["v3"]));
        assert_eq!(c3.join().get(&a), 3);
    }

    #[test]
    fn a_write_with_an_old_context_keeps_the_concurrent_one() {
        // Reference scenario of the dvvset module: Mary writes v1, Peter reads
        // it, Mary writes v2 blind, Peter writes v3 with what he read.
        let a = actor("a");
        let a0 = DvvSet::new().update(&VersionVector::new(), &a, "v1");
        let peter = a0.join();
        let a1 = a0.update(&VersionVector::new(), &a, "v2");
        assert_eq!(vals(&a1), BTreeSet::from(["v1", "v2"]));
        let a2 = a1.update(&peter, &a, "v3");
        assert_eq!(vals(&a2), BTreeSet::from(["v2", "v3"]));
    }

    #[test]
    fn sync_of_divergent_replicas_keeps_both_and_drops_superseded() {
        let (a, b) = (actor("a"), actor("b"));
        let base = DvvSet::new().update(&VersionVector::new(), &a, "v1");
        // Both replicas saw v1, then each took a write that superseded it.
        let on_a = base.update(&base.join(), &a, "va");
        let on_b = base.update(&base.join(), &b, "vb");
        let merged = on_a.sync(&on_b);
        assert_eq!(vals(&merged), BTreeSet::from(["va", "vb"]));
        assert_eq!(merged, on_b.sync(&on_a));
        assert_eq!(merged.sync(&merged), merged);
        // A replica that only has v1 learns that v1 is gone.
        assert_eq!(vals(&base.sync(&merged)), BTreeSet::from(["va", "vb"]));
    }

    #[test]
    fn a_purged_key_never_reuses_a_dot() {
        let a = actor("a");
        let old = DvvSet::new()
            .update(&VersionVector::new(), &a, "v1")
            .update(&VersionVector::new(), &a, "v2");
        let tomb = old.update(&old.join(), &a, "tombstone");
        assert_eq!(tomb.counter_of(&a), 3);
        // The record is purged; the replica's floor is 3. A blind write on
        // the empty key gets dot 4, so the stale tombstone (a hint still in
        // flight) cannot hide it.
        let fresh = DvvSet::new().update_with_floor(&VersionVector::new(), &a, "new", 3);
        assert_eq!(fresh.counter_of(&a), 4);
        assert_eq!(vals(&fresh.sync(&tomb)), BTreeSet::from(["new"]));
        // Without the floor, dot 1 is reused and the new write is lost.
        let reused = DvvSet::new().update(&VersionVector::new(), &a, "new");
        assert_eq!(vals(&reused.sync(&tomb)), BTreeSet::from(["tombstone"]));
        // An entry with current values is never re-labelled by the floor.
        let kept = old.update_with_floor(&VersionVector::new(), &a, "v3", 100);
        assert_eq!(vals(&kept), BTreeSet::from(["v1", "v2", "v3"]));
        assert_eq!(kept.counter_of(&a), 3);
    }

    #[test]
    fn compaction_drops_only_valueless_entries_of_retired_actors() {
        let (old, new) = (actor("a"), actor("b"));
        let c = DvvSet::new().update(&VersionVector::new(), &old, "v1");
        let c = c.update(&c.join(), &new, "v2");
        let compacted = c.compact(|a| *a == old);
        assert_eq!(compacted.entries().len(), 1);
        assert_eq!(vals(&compacted), BTreeSet::from(["v2"]));
        // An entry that still holds a value is kept.
        let sib = c.update(&VersionVector::new(), &old, "v3");
        assert_eq!(sib.compact(|a| *a == old), sib);
    }

    #[test]
    fn validate_rejects_broken_clocks() {
        let a = actor("a");
        let ok = DvvSet::new().update(&VersionVector::new(), &a, 1u8);
        assert!(ok.validate().is_ok());
        let bad = DvvSet {
            entries: vec![Entry {
                actor: a.clone(),
                counter: 1,
                values: vec![1u8, 2],
            }],
        };
        assert!(bad.validate().is_err());
        let unsorted = DvvSet {
            entries: vec![
                Entry {
                    actor: actor("b"),
                    counter: 1,
                    values: vec![1u8],
                },
                Entry {
                    actor: a,
                    counter: 1,
                    values: vec![1u8],
                },
            ],
        };
        assert!(unsorted.validate().is_err());
    }

    // ----- Model-based property tests -------------------------------------
    //
    // The model keeps explicit dots: a clock is (history, {dot -> value}).
    // sync keeps a value iff the other side either holds the same dot or has
    // not seen it; update drops the values whose dot the context covers and
    // adds a new dot. The compact DVVSet must agree with it on every trace.

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Model {
        history: BTreeMap<u8, u64>,
        values: BTreeMap<(u8, u64), u32>,
    }

    impl Model {
        fn sync(&self, other: &Model) -> Model {
            let mut history = self.history.clone();
            for (a, n) in &other.history {
                let e = history.entry(*a).or_default();
                *e = (*e).max(*n);
            }
            let keep = |mine: &Model, theirs: &Model| {
                mine.values
                    .iter()
                    .filter(|((a, n), _)| {
                        theirs.values.contains_key(&(*a, *n))
                            || theirs.history.get(a).copied().unwrap_or(0) < *n
                    })
                    .map(|(d, v)| (*d, *v))
                    .collect::<Vec<_>>()
            };
            let mut values = BTreeMap::new();
            values.extend(keep(self, other));
            values.extend(keep(other, self));
            Model { history, values }
        }

        fn update(&self, ctx: &BTreeMap<u8, u64>, actor: u8, value: u32) -> Model {
            let mut m = self.clone();
            m.values
                .retain(|(a, n), _| ctx.get(a).copied().unwrap_or(0) < *n);
            for (a, n) in ctx {
                let e = m.history.entry(*a).or_default();
                *e = (*e).max(*n);
            }
            let next = m.history.get(&actor).copied().unwrap_or(0) + 1;
            m.history.insert(actor, next);
            m.values.insert((actor, next), value);
            m
        }
    }

    fn to_actor(i: u8) -> Actor {
        Actor {
            node: NodeId::new(format!("n{i}")).unwrap(),
            incarnation: 7,
        }
    }

    fn vv_of(history: &BTreeMap<u8, u64>) -> VersionVector {
        VersionVector::from_pairs(history.iter().map(|(a, n)| (to_actor(*a), *n)))
    }

    fn model_of(c: &DvvSet<u32>) -> Model {
        let index = |a: &Actor| -> u8 { a.node.as_str()[1..].parse().unwrap() };
        Model {
            history: c
                .entries()
                .iter()
                .map(|e| (index(&e.actor), e.counter))
                .collect(),
            values: c
                .values_with_dots()
                .map(|((a, n), v)| ((index(a), n), *v))
                .collect(),
        }
    }

    /// One step of a random trace over three replicas and clients that read
    /// from one replica and write through another.
    #[derive(Clone, Debug)]
    enum Op {
        /// A client reads replica `from`, then writes through replica `via`
        /// (blind when `blind`).
        Put {
            from: usize,
            via: usize,
            blind: bool,
        },
        /// Replica `to` merges replica `from`'s clock (replication, repair).
        Sync { from: usize, to: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3usize, 0..3usize, any::<bool>()).prop_map(|(from, via, blind)| Op::Put {
                from,
                via,
                blind
            }),
            (0..3usize, 0..3usize).prop_map(|(from, to)| Op::Sync { from, to }),
        ]
    }

    proptest! {
        #[test]
        fn dvvset_agrees_with_the_explicit_dot_model(ops in prop::collection::vec(op(), 1..60)) {
            let mut real: Vec<DvvSet<u32>> = vec![DvvSet::new(); 3];
            let mut model: Vec<Model> = vec![Model::default(); 3];
            for (i, op) in ops.into_iter().enumerate() {
                let value = i as u32;
                match op {
                    Op::Put { from, via, blind } => {
                        let ctx = if blind { BTreeMap::new() } else { model[from].history.clone() };
                        let vv = if blind { VersionVector::new() } else { real[from].join() };
                        prop_assert_eq!(vv_of(&ctx), vv.clone());
                        real[via] = real[via].update(&vv, &to_actor(via as u8), value);
                        model[via] = model[via].update(&ctx, via as u8, value);
                    }
                    Op::Sync { from, to } => {
                        real[to] = real[to].sync(&real[from]);
                        model[to] = model[to].sync(&model[from]);
                    }
                }
                for r in 0..3 {
                    prop_assert!(real[r].validate().is_ok());
                    prop_assert_eq!(model_of(&real[r]), model[r].clone());
                }
            }
        }

        #[test]
        fn sync_is_commutative_associative_idempotent(ops in prop::collection::vec(op(), 1..40)) {
            let mut real: Vec<DvvSet<u32>> = vec![DvvSet::new(); 3];
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Put { from, via, blind } => {
                        let vv = if blind { VersionVector::new() } else { real[from].join() };
                        real[via] = real[via].update(&vv, &to_actor(via as u8), i as u32);
                    }
                    Op::Sync { from, to } => real[to] = real[to].sync(&real[from]),
                }
            }
            let (a, b, c) = (&real[0], &real[1], &real[2]);
            prop_assert_eq!(a.sync(b), b.sync(a));
            prop_assert_eq!(a.sync(b).sync(c), a.sync(&b.sync(c)));
            prop_assert_eq!(a.sync(a), a.clone());
            // The merged history descends both inputs.
            prop_assert!(a.sync(b).join().descends(&a.join()));
            prop_assert!(a.sync(b).join().descends(&b.join()));
        }

        #[test]
        fn a_write_with_the_full_context_leaves_exactly_one_value(ops in prop::collection::vec(op(), 1..30), via in 0..3usize) {
            let mut real: Vec<DvvSet<u32>> = vec![DvvSet::new(); 3];
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Put { from, via, blind } => {
                        let vv = if blind { VersionVector::new() } else { real[from].join() };
                        real[via] = real[via].update(&vv, &to_actor(via as u8), i as u32);
                    }
                    Op::Sync { from, to } => real[to] = real[to].sync(&real[from]),
                }
            }
            let all = real[0].sync(&real[1]).sync(&real[2]);
            let resolved = real[via].update(&all.join(), &to_actor(via as u8), 9999);
            let everywhere = all.sync(&resolved);
            prop_assert_eq!(everywhere.values().copied().collect::<Vec<_>>(), vec![9999]);
        }
    }
}
