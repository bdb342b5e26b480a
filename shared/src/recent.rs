//! What an execution environment remembers for a while, in bounded memory:
//! each entry is forgotten after the lifetime, counted from the instant it
//! was given; at the bound the expired entries go, then, if none had, all
//! (a flood costs a look-up again, never memory).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

pub struct Recent<K, V> {
    lifetime: Duration,
    max: usize,
    entries: HashMap<K, (V, Instant)>,
}

impl<K: Eq + Hash, V> Recent<K, V> {
    pub fn new(lifetime: Duration, max: usize) -> Self {
        Self {
            lifetime,
            max,
            entries: HashMap::new(),
        }
    }

    /// `key`'s value, unless it is older than the lifetime.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries
            .get(key)
            .filter(|(_, at)| at.elapsed() < self.lifetime)
            .map(|(value, _)| value)
    }

    /// Remembers `value` for `key` as of `at`.
    pub fn insert(&mut self, key: K, value: V, at: Instant) {
        if self.entries.len() >= self.max {
            let lifetime = self.lifetime;
            self.entries.retain(|_, (_, at)| at.elapsed() < lifetime);
            if self.entries.len() >= self.max {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (value, at));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
