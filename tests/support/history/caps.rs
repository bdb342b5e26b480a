//! The per-client cap of SPEC §16 over a recorded history: the half of a
//! hold's answer that spans slots. The slot models (`slot.rs`) take a
//! `409 hold_limit_reached` as a hold their slot would have granted (the
//! key unused, the seats there) that changed nothing; this checks the
//! other half, each client's seats in active holds at the instants its
//! calls could have taken effect:
//! - a hold answered 201 found room: at some instant of its interval, the
//!   seats of the client's other holds surely active then, plus its own,
//!   are within the cap;
//! - a hold answered 409 `hold_limit_reached` did not: at some instant of
//!   its interval, the seats of the client's holds possibly active then,
//!   plus its own, are over it.
//!
//! The two halves are each checked at an instant of their own, so this is
//! weaker than one linearization of all slots at once: it finds a client
//! over its cap, and a refusal no instant explains, which is what the cap
//! can get wrong. Quantity 1 (the workload's holds).

use super::{CLOCK_MARGIN, Call, Request};
use std::collections::{BTreeMap, BTreeSet};

/// A client's cap, and the callers (`Call::client`) that act for it.
#[derive(Debug, Clone)]
pub struct Capped {
    pub cap: u32,
    pub callers: BTreeSet<usize>,
}

/// What the history tells of one hold of a capped client.
#[derive(Debug, Default, Clone)]
struct Life {
    id: Option<u64>,
    /// The first invocation of a hold call with its key that answered
    /// with it or 503 (it may have been created from then on).
    maybe_created: Option<u64>,
    /// The first completion of an answer showing it.
    surely_created: Option<u64>,
    /// The first invocation of a confirm or cancel of it that did not
    /// fail (answered with it, or 503).
    maybe_ended: Option<u64>,
    /// The first completion of an answer showing it confirmed or
    /// cancelled.
    surely_ended: Option<u64>,
    /// `(completed, expires_at)` of every answer showing it.
    expiries: Vec<(u64, u64)>,
    /// A call left it in doubt: its expiry may be any.
    doubtful: bool,
}

impl Life {
    fn surely_active(&self, t: u64) -> bool {
        let expiry = self
            .expiries
            .iter()
            .filter(|(completed, _)| *completed <= t)
            .map(|(_, e)| *e)
            .max();
        self.surely_created.is_some_and(|c| c <= t)
            && self.maybe_ended.is_none_or(|e| e > t)
            && expiry.is_some_and(|e| t.saturating_add(CLOCK_MARGIN) < e)
    }

    fn possibly_active(&self, t: u64) -> bool {
        let expiry = if self.doubtful {
            u64::MAX
        } else {
            self.expiries
                .iter()
                .map(|(_, e)| *e)
                .max()
                .unwrap_or(u64::MAX)
        };
        self.maybe_created.is_some_and(|c| c <= t)
            && self.surely_ended.is_none_or(|e| e > t)
            && t < expiry.saturating_add(CLOCK_MARGIN)
    }
}

/// `Ok` when every capped client's answers fit its cap (see the module).
pub fn check_caps(history: &[Call], clients: &[Capped]) -> Result<(), String> {
    for client in clients {
        let calls: Vec<&Call> = history
            .iter()
            .filter(|c| client.callers.contains(&c.client))
            .collect();
        let lives = lives(&calls);
        for call in &calls {
            let Request::Hold { key, .. } = &call.request else {
                continue;
            };
            let r = &call.response;
            let (from, to) = (
                call.invoked.saturating_sub(CLOCK_MARGIN),
                call.completed.saturating_add(CLOCK_MARGIN),
            );
            let instants = instants(&lives, from, to);
            let others = |t: u64, active: &dyn Fn(&Life, u64) -> bool| {
                lives
                    .iter()
                    .filter(|(k, life)| *k != key && active(life, t))
                    .count() as u32
            };
            if r.status == 201 {
                let fits = instants
                    .iter()
                    .any(|&t| others(t, &|l, t| l.surely_active(t)) < client.cap);
                if !fits {
                    return Err(over(call, client, &lives, "created over the cap"));
                }
            } else if r.status == 409 && r.reason.as_deref() == Some("hold_limit_reached") {
                let full = instants
                    .iter()
                    .any(|&t| others(t, &|l, t| l.possibly_active(t)) >= client.cap);
                if !full {
                    return Err(over(
                        call,
                        client,
                        &lives,
                        "refused with room under the cap",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Each key's life, from the calls of one client.
fn lives(calls: &[&Call]) -> BTreeMap<String, Life> {
    let mut lives: BTreeMap<String, Life> = BTreeMap::new();
    let mut key_of: BTreeMap<u64, String> = BTreeMap::new();
    for call in calls {
        if let (Request::Hold { key, .. }, Some(hold)) = (&call.request, &call.response.hold) {
            key_of.insert(hold.id, key.clone());
        }
    }
    for call in calls {
        let r = &call.response;
        let key = match &call.request {
            Request::Hold { key, .. } => Some(key.clone()),
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. }
            | Request::Read { hold } => key_of.get(hold).cloned(),
            // The capped workload joins no line.
            Request::Join { .. } | Request::Leave { .. } | Request::Entry { .. } => None,
        };
        let Some(key) = key else { continue };
        let life = lives.entry(key).or_default();
        let first = |slot: &mut Option<u64>, at: u64| *slot = Some(slot.map_or(at, |s| s.min(at)));
        // A move changes neither status nor expiry: its 503 leaves no doubt.
        let doubt = r.status == 503 && !matches!(call.request, Request::Move { .. });
        life.doubtful |= doubt;
        if let Some(hold) = &r.hold {
            life.id = Some(hold.id);
            first(&mut life.surely_created, call.completed);
            if let Some(expires) = hold.expires_at {
                life.expiries.push((call.completed, expires));
            }
            if matches!(hold.status.as_str(), "confirmed" | "cancelled") {
                first(&mut life.surely_ended, call.completed);
            }
        }
        match &call.request {
            Request::Hold { .. } if r.hold.is_some() || doubt => {
                first(&mut life.maybe_created, call.invoked)
            }
            Request::Confirm { .. } | Request::Cancel { .. } if r.hold.is_some() || doubt => {
                first(&mut life.maybe_ended, call.invoked)
            }
            _ => {}
        }
    }
    // A key only ever refused was never a hold.
    lives.retain(|_, life| life.maybe_created.is_some());
    lives
}

/// The instants of `[from, to]` at which the counts may change: its ends
/// and every boundary of a life inside it.
fn instants(lives: &BTreeMap<String, Life>, from: u64, to: u64) -> Vec<u64> {
    let mut at: BTreeSet<u64> = [from, to].into();
    for life in lives.values() {
        let edges = [
            life.maybe_created,
            life.surely_created,
            life.maybe_ended,
            life.surely_ended,
        ];
        for edge in edges.into_iter().flatten() {
            at.insert(edge);
        }
        for (completed, expires) in &life.expiries {
            at.insert(*completed);
            at.insert(*expires);
            at.insert(expires.saturating_sub(CLOCK_MARGIN));
        }
    }
    at.into_iter().filter(|t| (from..=to).contains(t)).collect()
}

fn over(call: &Call, client: &Capped, lives: &BTreeMap<String, Life>, what: &str) -> String {
    let mut out = format!(
        "client with cap {} (callers {:?}): {}: {}\nits holds:\n",
        client.cap,
        client.callers,
        what,
        super::partition::show(call)
    );
    for (key, life) in lives {
        out += &format!("  {}: {life:?}\n", super::partition::short(key));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Response, Rules, check};
    use super::*;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    fn hold(client: usize, (from, to): (u64, u64), key: &str, response: Response) -> Call {
        Call {
            client,
            invoked: from * MS,
            completed: to * MS,
            request: Request::Hold {
                slot: 1,
                key: key.into(),
            },
            response,
        }
    }

    fn created(id: u64, key: &str, at: u64) -> Response {
        Response::hold(201, id, 1, key, "held").at(at * MS, (at + 500) * MS)
    }

    fn capped(cap: u32) -> Vec<Capped> {
        vec![Capped {
            cap,
            callers: [0, 1].into(),
        }]
    }

    #[test]
    fn a_hold_created_while_the_cap_was_full_is_caught() {
        let history = [
            hold(0, (0, 2), "a", created(1, "a", 1)),
            hold(1, (3, 5), "b", created(2, "b", 4)),
            hold(0, (10, 12), "c", created(3, "c", 11)),
        ];
        assert!(check_caps(&history, &capped(3)).is_ok());
        let err = check_caps(&history, &capped(2)).unwrap_err();
        assert!(err.contains("created over the cap"), "{err}");
    }

    #[test]
    fn a_refusal_with_room_under_the_cap_is_caught() {
        let refused = Response::error(409, "hold_limit_reached");
        let history = [
            hold(0, (0, 2), "a", created(1, "a", 1)),
            hold(1, (10, 12), "b", refused.clone()),
        ];
        assert!(check_caps(&history, &capped(1)).is_ok());
        let err = check_caps(&history, &capped(2)).unwrap_err();
        assert!(err.contains("refused with room under the cap"), "{err}");
        // Once the hold expired, or was cancelled, the cap has room again.
        let later = [
            hold(0, (0, 2), "a", created(1, "a", 1)),
            hold(1, (600, 602), "b", refused),
        ];
        assert!(check_caps(&later, &capped(1)).is_err());
    }

    #[test]
    fn a_slot_answers_hold_limit_reached_only_where_it_would_have_granted() {
        let rules = Rules::new(Duration::from_millis(500), Duration::from_millis(600));
        let refused = Response::error(409, "hold_limit_reached");
        let room = [
            hold(0, (0, 2), "a", created(1, "a", 1)),
            hold(1, (3, 5), "b", refused.clone()),
        ];
        assert!(check(&room, &[(1, 2)].into(), rules).linearizable());
        // Full: the slot's capacity comes first (SPEC §19.1).
        let report = check(&room, &[(1, 1)].into(), rules);
        assert!(!report.linearizable(), "{report}");
    }
}
