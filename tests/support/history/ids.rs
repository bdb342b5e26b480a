//! The facts of a whole history, checked before the search: one hold per
//! key and one key per hold, one entry per key and one key per entry, one
//! offered hold per entry and one entry per offered hold, every answer's
//! resource the one asked for, one `created_at` per hold; and the model's
//! key of each call. A join's key is also the key of the hold offered to
//! its entry (SPEC §18): that hold's own idempotency key, which the
//! service makes, and its id name the entry's key.

use super::partition::show;
use super::{Call, Request};
use std::collections::HashMap;

/// Who is who, by the answers.
pub struct Ids<'a> {
    /// Each hold id's idempotency key.
    hold_key: HashMap<u64, &'a str>,
    key_hold: HashMap<&'a str, u64>,
    /// Each entry id's idempotency key.
    entry_key: HashMap<u64, &'a str>,
    /// Each offered hold's entry's key, by the hold's id.
    offered: HashMap<u64, &'a str>,
    /// Each model key's hold's `created_at`, when some answer showed it.
    pub created: HashMap<String, u64>,
}

/// The model's key of a join's entry (holds' keys are their own: a UUID
/// never starts so).
fn entry(key: &str) -> String {
    format!("{ENTRY}{key}")
}

const ENTRY: &str = "entry ";

/// Whether the model's key `key` is a join's.
pub fn is_entry(key: &str) -> bool {
    key.starts_with(ENTRY)
}

/// Records `value` for `name` the first time (by call `i`); later ones
/// must agree with it.
fn once<K, V>(map: &mut HashMap<K, (V, usize)>, name: K, value: V, i: usize) -> Result<(), usize>
where
    K: std::hash::Hash + Eq,
    V: PartialEq + Copy,
{
    let (first, by) = *map.entry(name).or_insert((value, i));
    if first == value { Ok(()) } else { Err(by) }
}

impl<'a> Ids<'a> {
    pub fn of(history: &'a [Call]) -> Result<Self, String> {
        let mut hold_key = HashMap::new();
        let mut key_hold = HashMap::new();
        let mut entry_key = HashMap::new();
        let mut key_entry = HashMap::new();
        let mut entry_hold = HashMap::new();
        let mut hold_entry = HashMap::new();
        let mut created = HashMap::new();
        let broken = |what: &str, first: usize, i: usize| {
            format!(
                "{what}, broken by call #{first} {}\n  and call #{i} {}",
                show(&history[first]),
                show(&history[i])
            )
        };
        for (i, c) in history.iter().enumerate() {
            let r = &c.response;
            let asked = match (&c.request, &r.hold, &r.entry) {
                (Request::Hold { slot, key }, Some(h), None) => h.slot == *slot && h.key == *key,
                (
                    Request::Confirm { hold }
                    | Request::Cancel { hold }
                    | Request::Extend { hold }
                    | Request::Move { hold, .. }
                    | Request::Read { hold },
                    Some(h),
                    None,
                ) => h.id == *hold,
                (Request::Join { slot, key }, None, Some(e)) => e.slot == *slot && e.key == *key,
                (Request::Leave { entry } | Request::Entry { entry }, None, Some(e)) => {
                    e.id == *entry
                }
                (_, None, None) => true,
                _ => false,
            };
            if !asked {
                return Err(format!(
                    "call #{i}: answered with another resource: {}",
                    show(c)
                ));
            }
            if let Some(h) = &r.hold {
                once(&mut hold_key, h.id, h.key.as_str(), i)
                    .and_then(|()| once(&mut key_hold, h.key.as_str(), h.id, i))
                    .map_err(|first| broken("one hold per key, one key per hold", first, i))?;
                if let Some(at) = h.created_at {
                    once(&mut created, h.id, at, i)
                        .map_err(|first| broken("one hold, two created_at", first, i))?;
                }
            }
            if let Some(e) = &r.entry {
                once(&mut entry_key, e.id, e.key.as_str(), i)
                    .and_then(|()| once(&mut key_entry, e.key.as_str(), e.id, i))
                    .map_err(|first| broken("one entry per key, one key per entry", first, i))?;
                if let Some(hold) = e.hold {
                    once(&mut entry_hold, e.id, hold, i)
                        .and_then(|()| once(&mut hold_entry, hold, e.id, i))
                        .map_err(|first| {
                            broken("one offered hold per entry, one entry per hold", first, i)
                        })?;
                }
            }
        }
        let offered: HashMap<u64, &str> = hold_entry
            .iter()
            .map(|(&hold, &(id, _))| (hold, entry_key[&id].0))
            .collect();
        let mut ids = Self {
            hold_key: hold_key
                .into_iter()
                .map(|(id, (key, _))| (id, key))
                .collect(),
            key_hold: key_hold
                .into_iter()
                .map(|(key, (id, _))| (key, id))
                .collect(),
            entry_key: entry_key
                .into_iter()
                .map(|(id, (key, _))| (id, key))
                .collect(),
            offered,
            created: HashMap::new(),
        };
        for (hold, (at, _)) in created {
            let key = ids.of_hold(hold).expect("an answer showed it");
            ids.created.insert(key, at);
        }
        Ok(ids)
    }

    /// The model's key of hold `id`: its own, or its entry's.
    fn of_hold(&self, id: u64) -> Option<String> {
        match self.offered.get(&id) {
            Some(key) => Some(entry(key)),
            None => self.hold_key.get(&id).map(|key| key.to_string()),
        }
    }

    /// The model's key of `request`'s hold or entry (`None`: no answer
    /// made its id known).
    pub fn key(&self, request: &Request) -> Option<String> {
        match request {
            Request::Hold { key, .. } => Some(match self.key_hold.get(key.as_str()) {
                Some(&id) => self.of_hold(id).expect("an answer showed it"),
                None => key.clone(),
            }),
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. }
            | Request::Read { hold } => self.of_hold(*hold),
            Request::Join { key, .. } => Some(entry(key)),
            Request::Leave { entry: id } | Request::Entry { entry: id } => {
                self.entry_key.get(id).map(|key| entry(key))
            }
        }
    }
}
