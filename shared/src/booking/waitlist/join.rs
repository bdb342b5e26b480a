//! Joining a full slot's waiting line (SPEC §18).
//!
//! Lock order, as a capped hold's: the client's allowance row (capped
//! clients only: its waiting seats count against its cap), then the
//! slot's row; every decision after both, from one statement.

use super::sql::find_entry_by_key;
use crate::booking::Booking;
use crate::booking::fair::{Counted, incomplete, over_cap, over_share};
use crate::booking::reclaim::reclaim_and_offer;
use crate::clients::Caller;
use crate::db::counter::{client_held, slot_client_seats};
use crate::db::{self, Tx};
use crate::domain::{Entry, EntryId, IdempotencyKey, SlotId};
use crate::error::{Error, KeyReuse};
use crate::events::{EventType, commit_with, entry_event};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

/// What `join_waitlist` did: a new entry (201) or the replay of the key's
/// entry (200, `Idempotent-Replayed: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub entry: Entry,
    pub created: bool,
}

/// A capped client's allowance row, locked (made if missing): its holds
/// and joins take it first, so its count below is final. The row made
/// here is set to the count before the commit.
pub const JOIN_LOCK_ALLOWANCE: &str = "INSERT INTO client_allowances (client_id, held, counted_at, recount_after) \
     VALUES (?, 0, '1000-01-01', '1000-01-01') ON DUPLICATE KEY UPDATE held = held";

/// After the slot's lock (and a reclaim with its offers), one statement
/// with one `now`: the slot's capacity, whether it started, its share and
/// the client's seats on it (−1: no share), a capped client's held and
/// waiting seats, and the key's entry. Binds: client, capped, client,
/// client, key, slot.
pub const JOIN_CHECK: &str = concat!(
    "SELECT s.capacity, s.starts_at <= UTC_TIMESTAMP(6) AS closed, s.max_seats_per_client AS share, ",
    "IF(s.max_seats_per_client IS NULL, -1, (",
    slot_client_seats!(),
    ")) AS seats, IF(?, (",
    client_held!(),
    "), NULL) AS held, UTC_TIMESTAMP(6) AS now, k.id AS key_entry FROM slots s ",
    "LEFT JOIN waitlist_entries k ON k.client_id = ? AND k.idempotency_key = ? WHERE s.id = ?"
);

pub const JOIN_INSERT: &str = "INSERT INTO waitlist_entries (slot_id, client_id, quantity, idempotency_key, \
     status, created_at, updated_at) VALUES (?, ?, ?, ?, 'waiting', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";

/// The line's summary follows the entry.
pub const JOIN_COUNT: &str = "UPDATE slots SET waiting = waiting + ?, \
     waiting_min = LEAST(COALESCE(waiting_min, ?), ?), \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";

#[derive(sqlx::FromRow)]
struct Checked {
    capacity: u32,
    closed: Option<bool>,
    share: Option<u32>,
    seats: Option<i64>,
    held: Option<i64>,
    now: Option<chrono::NaiveDateTime>,
    key_entry: Option<u64>,
}

impl Booking {
    /// Puts the caller in `slot_id`'s line for `quantity` seats (SPEC
    /// §18). Refused: 404 no such slot; 409 `slot_closed` once it started;
    /// 422 `quantity` beyond its capacity; 409 `seats_available` when the
    /// seats are bookable now (after the line's offers); then §16's
    /// share and cap (a waiting entry's seats count as held). A replay of
    /// the key (same slot and quantity) answers its entry, whatever now.
    pub async fn join_waitlist(
        &self,
        caller: &Caller,
        slot_id: SlotId,
        quantity: u32,
        key: &IdempotencyKey,
    ) -> Result<Joined, Error> {
        let mut written: Option<Entry> = None;
        let mut offered = false;
        let outcome = db::transact!(&self.pool, "join", self.deadline(), |conn| {
            self.join_once(
                &mut conn,
                caller,
                (slot_id, quantity),
                key,
                (&mut written, &mut offered),
            )
            .await
        })
        .map_err(|err| db::unknown_if(written.is_some(), err));
        self.invalidate_after_offers(offered).await;
        outcome
    }

    async fn join_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        (slot_id, quantity): (SlotId, u32),
        key: &IdempotencyKey,
        (written, offered): (&mut Option<Entry>, &mut bool),
    ) -> Result<Joined, Error> {
        let (client, cap) = (caller.id, caller.held_cap);
        // This request's own entry, committed by an earlier attempt whose
        // answer was lost (its id is never reused): 201 with the entry as
        // that answer showed it, whatever changed it since (an offer).
        let found = |entry: Entry| match written.as_ref() {
            Some(mine) if mine.id == entry.id => Ok(Joined {
                entry: mine.clone(),
                created: true,
            }),
            _ => replay(entry, slot_id, quantity),
        };
        if let Some(entry) = find_entry_by_key(&mut **conn, client, key).await? {
            return found(entry);
        }
        let mut tx = Tx::begin(conn).await?;
        if cap.is_some() {
            sqlx::query(JOIN_LOCK_ALLOWANCE)
                .bind(client.0)
                .execute(&mut *tx)
                .await?;
        }
        // The slot's lock; what is free, offered to the line first: only
        // seats no waiting entry can use are left.
        let Some(counters) = reclaim_and_offer(&mut tx, slot_id, self.hold_ttl).await? else {
            tx.rollback().await?;
            return Err(Error::SlotNotFound(slot_id));
        };
        *offered |= counters.offered > 0;
        let checked: Checked = sqlx::query_as(JOIN_CHECK)
            .bind(client.0)
            .bind(cap.is_some())
            .bind(client.0)
            .bind(client.0)
            .bind(key.as_str())
            .bind(slot_id.0)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::SlotNotFound(slot_id))?;
        if let Some(id) = checked.key_entry {
            tx.rollback().await?;
            let entry = super::sql::find_entry(&mut **conn, EntryId(id))
                .await?
                .ok_or(Error::EntryNotFound(EntryId(id)))?;
            return found(entry);
        }
        let free = counters.remaining.saturating_sub(counters.held);
        let refused = match checked.closed {
            None => return Err(incomplete("slot")),
            Some(true) => Some(Error::SlotClosed(slot_id)),
            Some(false) if quantity > checked.capacity => Some(Error::invalid(
                "quantity",
                format!(
                    "The quantity field must be at most the slot's capacity, {}.",
                    checked.capacity
                ),
            )),
            Some(false) if free >= quantity => Some(Error::SeatsAvailable {
                slot: slot_id,
                quantity: free,
            }),
            Some(false) => None,
        };
        if let Some(refused) = refused {
            tx.rollback().await?;
            return Err(refused);
        }
        let share = match (checked.share, checked.seats) {
            (None, Some(-1)) => None,
            (Some(share), Some(seats)) if seats >= 0 => Some(share),
            _ => return Err(incomplete("fair use")),
        };
        let counted = match (cap, checked.held, checked.now) {
            (None, _, _) => None,
            (Some(_), Some(held), Some(at)) => Some(Counted {
                held: u32::try_from(held).unwrap_or(u32::MAX),
                at,
            }),
            _ => return Err(incomplete("fair use")),
        };
        let refused = over_share(slot_id, share, checked.seats, quantity)
            .or_else(|| over_cap(cap, checked.held, quantity));
        if let Some(refused) = refused {
            tx.rollback().await?;
            return Err(refused);
        }
        let inserted = sqlx::query(JOIN_INSERT)
            .bind(slot_id.0)
            .bind(client.0)
            .bind(quantity)
            .bind(key.as_str())
            .execute(&mut *tx)
            .await;
        let id = match inserted {
            Ok(done) => EntryId(done.last_insert_id()),
            Err(err) if db::is_unique_violation(&err) => {
                // The same key's twin committed while we waited for the
                // index: its entry is the answer.
                tx.rollback().await?;
                return match find_entry_by_key(&mut **conn, client, key).await? {
                    Some(entry) => found(entry),
                    None => Err(Error::Internal(err)),
                };
            }
            Err(err) => return Err(err.into()),
        };
        sqlx::query(JOIN_COUNT)
            .bind(quantity)
            .bind(quantity)
            .bind(quantity)
            .bind(slot_id.0)
            .execute(&mut *tx)
            .await?;
        if let Some(counted) = counted {
            // The bound: the count under the locks, plus this entry.
            crate::booking::allowance::set(&mut tx, client, counted, quantity).await?;
        }
        let entry = super::sql::find_entry(&mut *tx, id)
            .await?
            .ok_or(Error::EntryNotFound(id))?;
        let event = entry_event(EventType::WaitlistJoined, &entry)?;
        *written = Some(entry.clone());
        commit_with(tx, &[event]).await?;
        Ok(Joined {
            entry,
            created: true,
        })
    }
}

/// A key's entry answers a request with the same slot and quantity; any
/// other is refused (SPEC §18, as §9 for holds).
fn replay(entry: Entry, slot: SlotId, quantity: u32) -> Result<Joined, Error> {
    if entry.slot_id != slot {
        return Err(Error::IdempotencyKeyReuse(KeyReuse::Slot {
            used_for: entry.slot_id,
        }));
    }
    if entry.quantity != quantity {
        return Err(Error::IdempotencyKeyReuse(KeyReuse::Quantity {
            used_for: entry.quantity,
            asked: quantity,
        }));
    }
    Ok(Joined {
        entry,
        created: false,
    })
}
