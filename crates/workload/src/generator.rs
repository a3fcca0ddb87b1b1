//! What each client does next: a seeded, reproducible stream of steps.
//!
//! Pure logic, no I/O: a client's generator is seeded from the run's seed
//! and the client's number, so the same seed makes every client choose the
//! same operations, keys and values in the same order (what the cluster
//! answers may still differ between runs). Every value and set element a
//! client writes is unique in the run: `c<client>-<seq>`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How often each operation is chosen, in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    /// Reads of a register or a set.
    pub read: u32,
    /// Puts of a unique value to a register.
    pub put: u32,
    /// Deletes of a register, with the context read.
    pub delete: u32,
    /// Adds of a unique element to a grow-only set.
    pub add: u32,
    /// Share of puts written blind (no context), in percent of puts.
    pub blind: u32,
    /// Share of contextual puts and deletes that reuse the context the
    /// client remembers from an earlier read of the key instead of reading
    /// again, in percent.
    pub reuse: u32,
}

impl Default for Mix {
    /// 25% reads, 55% puts (10% of them blind), 5% deletes, 15% set adds;
    /// 30% of contextual writes reuse a remembered context.
    fn default() -> Self {
        Mix {
            read: 25,
            put: 55,
            delete: 5,
            add: 15,
            blind: 10,
            reuse: 30,
        }
    }
}

/// Which key a step is about, before it is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Register `reg-<i>`.
    Register(u32),
    /// Grow-only set slot `j` (`set-<j>` until it fills up).
    Set(u32),
}

/// Which context a write carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// No context: the write never discards another one.
    Blind,
    /// The context of a read made just before.
    Fresh,
    /// The context remembered from the client's last read of the key (a
    /// fresh read when there is none).
    Remembered,
}

/// One step of a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read a key.
    Read(Target),
    /// Write a unique value to a register.
    Put {
        /// The register.
        register: u32,
        /// The value.
        value: String,
        /// Which context.
        basis: Basis,
    },
    /// Delete a register.
    Delete {
        /// The register.
        register: u32,
        /// Which context (never blind).
        basis: Basis,
    },
    /// Read a set, then write its union plus a unique element.
    Add {
        /// The set slot.
        set: u32,
        /// The new element.
        element: String,
    },
}

/// The step stream of one client.
#[derive(Debug)]
pub struct Generator {
    /// Seeded from the run's seed and the client number.
    rng: StdRng,
    /// The client number, part of every value.
    client: u32,
    /// Number of registers.
    registers: u32,
    /// Number of set slots (0: no adds).
    sets: u32,
    /// The operation mix.
    mix: Mix,
    /// Sequence number of the next unique value.
    seq: u64,
}

impl Generator {
    /// The generator of `client` in a run seeded with `seed`.
    pub fn new(seed: u64, client: u32, registers: u32, sets: u32, mix: Mix) -> Self {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..12].copy_from_slice(&client.to_le_bytes());
        Generator {
            rng: StdRng::from_seed(bytes),
            client,
            registers: registers.max(1),
            sets,
            mix,
            seq: 0,
        }
    }

    /// The next step.
    pub fn next_step(&mut self) -> Step {
        let mix = self.mix;
        let total = (mix.read + mix.put + mix.delete + mix.add).max(1);
        let roll = self.rng.random_range(0..total);
        let register = self.rng.random_range(0..self.registers);
        if roll < mix.read {
            let i = self.rng.random_range(0..self.registers + self.sets);
            return Step::Read(match i.checked_sub(self.registers) {
                Some(set) => Target::Set(set),
                None => Target::Register(i),
            });
        }
        if roll >= mix.read + mix.put + mix.delete && self.sets > 0 {
            let set = self.rng.random_range(0..self.sets);
            return Step::Add {
                set,
                element: self.unique(),
            };
        }
        if roll >= mix.read + mix.put && roll < mix.read + mix.put + mix.delete {
            let basis = self.contextual();
            return Step::Delete { register, basis };
        }
        let basis = if self.rng.random_ratio(mix.blind.min(100), 100) {
            Basis::Blind
        } else {
            self.contextual()
        };
        Step::Put {
            register,
            value: self.unique(),
            basis,
        }
    }

    fn contextual(&mut self) -> Basis {
        if self.rng.random_ratio(self.mix.reuse.min(100), 100) {
            Basis::Remembered
        } else {
            Basis::Fresh
        }
    }

    fn unique(&mut self) -> String {
        let value = format!("c{}-{}", self.client, self.seq);
        self.seq += 1;
        value
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn steps(seed: u64, client: u32, n: usize) -> Vec<Step> {
        let mut g = Generator::new(seed, client, 50, 4, Mix::default());
        (0..n).map(|_| g.next_step()).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_steps() {
        assert_eq!(steps(7, 3, 500), steps(7, 3, 500));
        assert_ne!(steps(7, 3, 500), steps(8, 3, 500));
        assert_ne!(steps(7, 3, 500), steps(7, 4, 500));
    }

    #[test]
    fn values_are_unique_and_name_the_client() {
        let mut seen = HashSet::new();
        for step in steps(1, 5, 2000) {
            let value = match step {
                Step::Put { value, .. } => value,
                Step::Add { element, .. } => element,
                _ => continue,
            };
            assert!(value.starts_with("c5-"), "{value}");
            assert!(seen.insert(value), "a value repeated");
        }
    }

    #[test]
    fn the_mix_is_respected() {
        let all = steps(42, 0, 20_000);
        let share =
            |f: &dyn Fn(&Step) -> bool| all.iter().filter(|s| f(s)).count() * 100 / all.len();
        let reads = share(&|s| matches!(s, Step::Read(_)));
        let deletes = share(&|s| matches!(s, Step::Delete { .. }));
        let adds = share(&|s| matches!(s, Step::Add { .. }));
        let blind = share(&|s| {
            matches!(
                s,
                Step::Put {
                    basis: Basis::Blind,
                    ..
                }
            )
        });
        assert!((23..=27).contains(&reads), "reads {reads}%");
        assert!((4..=6).contains(&deletes), "deletes {deletes}%");
        assert!((13..=17).contains(&adds), "adds {adds}%");
        // 10% of the 55% puts.
        assert!((4..=7).contains(&blind), "blind {blind}%");
        assert!(all.iter().all(|s| match s {
            Step::Delete { basis, .. } => *basis != Basis::Blind,
            Step::Read(Target::Register(i)) | Step::Put { register: i, .. } => *i < 50,
            Step::Read(Target::Set(j)) | Step::Add { set: j, .. } => *j < 4,
        }));
    }

    #[test]
    fn without_sets_there_are_no_adds() {
        let mut g = Generator::new(1, 0, 3, 0, Mix::default());
        for _ in 0..1000 {
            assert!(!matches!(
                g.next_step(),
                Step::Add { .. } | Step::Read(Target::Set(_))
            ));
        }
    }
}
