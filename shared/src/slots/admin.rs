//! The slot administered (SPEC §10, §15.9): read, create (one or a batch,
//! all or nothing), change (capacity and times, under the slot's lock) and
//! delete (refused while it has bookings).
//!
//! Every change holds the slot's row lock from its first statement, the
//! lock the hold path, confirm, cancel, extend and the sweeper take, so it
//! is serialised with all of them; its decisions use figures and a `now`
//! read after the lock (docs/DESIGN.md, "Slots administered").

use super::input::{NewSlot, SlotChange, order_message, share_message};
use super::{Committed, Slots, ledger};
use crate::booking::{expire_waiting, offer_locked, reclaim_locked};
use crate::db;
use crate::db::counter::active_hold;
use crate::domain::{Slot, SlotId};
use crate::error::Error;
use crate::events::{EventType, record_slots};
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySql, MySqlConnection, QueryBuilder};

/// The first statement of a change: the slot's row lock, with the fields a
/// change is checked against. A locking read: no snapshot yet, and no
/// clock (its `now` would predate the lock wait).
pub const LOCK_FOR_CHANGE: &str =
    "SELECT capacity, starts_at, ends_at, max_seats_per_client FROM slots WHERE id = ? FOR UPDATE";

/// [`LOCK_FOR_CHANGE`]'s row: capacity, times and share.
type Locked = (u32, DateTime<Utc>, DateTime<Utc>, Option<u32>);

/// The change, in one statement. `remaining` moves by the capacity's delta
/// (bound signed; the figures it was decided on were read under this
/// lock, so the result is ≥ the active seats ≥ 0 and `remaining ≤
/// capacity` stays true). `remaining` is assigned first: MySQL assigns
/// left to right, and it must not see the new capacity (it does not read
/// it anyway).
pub const CHANGE_SLOT: &str = "UPDATE slots SET remaining = CAST(remaining AS SIGNED) + ?, \
     capacity = ?, starts_at = ?, ends_at = ?, max_seats_per_client = ?, \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";

/// After the lock, so its `now` lies inside the lock: the seats of the
/// slot's confirmed holds and of its active holds, from the holds table
/// itself (the truth the counters summarise). Two ranges of `(slot_id,
/// status, expires_at)`: the bookings (at most `capacity` rows) and the
/// holds unexpired at now; never the slot's history (issue 45).
pub const BOOKINGS: &str = concat!(
    "SELECT CAST(COALESCE((SELECT SUM(quantity) FROM holds ",
    "FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND status = 'confirmed'), 0) AS SIGNED), ",
    "CAST(COALESCE((SELECT SUM(quantity) FROM holds ",
    "FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND ",
    active_hold!(),
    "), 0) AS SIGNED)"
);

/// The holds go with the slot: `holds.slot_id` cascades (SPEC §3).
pub const DELETE_SLOT: &str = "DELETE FROM slots WHERE id = ?";

impl Slots {
    /// The slot resource, from the database (never cached), one statement.
    pub async fn get(&self, id: SlotId) -> Result<Slot, Error> {
        db::transact!(&self.pool, "slot get", self.deadline(), |conn| {
            ledger::read(&mut conn, id).await
        })?
        .ok_or(Error::SlotNotFound(id))
    }

    /// Creates the slots, all or nothing: one transaction, one multi-row
    /// INSERT. Answers them in the given order. The availability cache is
    /// invalidated after the commit.
    pub async fn create(&self, new: &[NewSlot]) -> Result<Vec<Slot>, Error> {
        let deadline = self.deadline_before_invalidation();
        let mut sent = false;
        let outcome = db::transact!(&self.pool, "slots create", deadline, |conn| {
            create_once(&mut conn, new, &mut sent).await
        })
        .map_err(|err| db::unknown_if(sent, err))
        .and_then(super::committed);
        self.invalidate_after(&outcome).await;
        outcome
    }

    /// Changes a slot's capacity and/or times under its row lock. A
    /// capacity below the confirmed and active seats is refused (409
    /// `capacity_below_committed`); otherwise `remaining` moves by the
    /// capacity's delta. A time that would not leave `ends_at > starts_at`
    /// with the stored other one is refused under its field (422).
    pub async fn update(&self, id: SlotId, change: &SlotChange) -> Result<Slot, Error> {
        let deadline = self.deadline_before_invalidation();
        let mut sent = false;
        let outcome = db::transact!(&self.pool, "slot update", deadline, |conn| {
            update_once(&mut conn, id, change, self.hold_ttl, &mut sent).await
        })
        .map_err(|err| db::unknown_if(sent, err))
        .and_then(super::committed);
        self.invalidate_after(&outcome).await;
        outcome
    }

    /// Deletes a slot without confirmed or active holds, and its cancelled
    /// and ended holds with it; answers the slot as it was. With bookings:
    /// 409 `slot_has_bookings`.
    pub async fn delete(&self, id: SlotId) -> Result<Slot, Error> {
        let deadline = self.deadline_before_invalidation();
        let mut sent = false;
        let outcome = db::transact!(&self.pool, "slot delete", deadline, |conn| {
            delete_once(&mut conn, id, (&self.pool, deadline), &mut sent).await
        })
        .map_err(|err| db::unknown_if(sent, err))
        .and_then(super::committed);
        self.invalidate_after(&outcome).await;
        outcome
    }
}

async fn create_once(
    conn: &mut MySqlConnection,
    new: &[NewSlot],
    sent: &mut bool,
) -> Result<Committed<Vec<Slot>>, Error> {
    let mut tx = conn.begin().await?;
    let mut insert = QueryBuilder::<MySql>::new(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining, max_seats_per_client, \
         created_at, updated_at) ",
    );
    insert.push_values(new, |mut row, slot| {
        row.push_bind(slot.starts_at.naive_utc())
            .push_bind(slot.ends_at.naive_utc())
            .push_bind(slot.capacity)
            .push_bind(slot.capacity)
            .push_bind(slot.max_seats_per_client)
            .push("UTC_TIMESTAMP(6)")
            .push("UTC_TIMESTAMP(6)");
    });
    // Times are bound as DATETIME (`NaiveDateTime`, UTC): sqlx sends a
    // `DateTime<Utc>` as a TIMESTAMP, which ends in 2038 (later values
    // arrive as NULL); §15.10 allows years up to 9999.
    // Not kept as a prepared statement: each batch size is its own text.
    let done = insert.build().persistent(false).execute(&mut *tx).await?;
    let n = new.len() as u64;
    // LAST_INSERT_ID() of a multi-row INSERT is the first row's id, and
    // this INSERT is a "simple insert" (InnoDB knows its row count before
    // it runs). For a simple insert InnoDB reserves all n values at once,
    // under the AUTO-INC lock (lock modes 0 and 1) or its mutex (mode 2,
    // the interleaved one: concurrent inserts never get values inside a
    // simple insert's reservation): the rows get n consecutive ids, with
    // auto_increment_increment = 1. Checked, not trusted: any other
    // outcome (another increment, a changed engine) fails the request and
    // rolls everything back rather than answer with the wrong rows.
    let first = done.last_insert_id();
    let last = first.checked_add(n.saturating_sub(1));
    let slots = match last {
        Some(last) if done.rows_affected() == n && first > 0 => {
            ledger::read_new(&mut tx, first, last).await?
        }
        _ => Vec::new(),
    };
    let as_inserted = slots.len() == new.len()
        && slots.iter().zip(new).all(|(slot, asked)| {
            (
                slot.starts_at,
                slot.ends_at,
                slot.capacity,
                slot.max_seats_per_client,
            ) == (
                asked.starts_at,
                asked.ends_at,
                asked.capacity,
                asked.max_seats_per_client,
            )
        });
    if !as_inserted {
        tracing::error!(
            first,
            rows = done.rows_affected(),
            read_back = slots.len(),
            "a batch insert did not get consecutive ids (auto_increment_increment?)"
        );
        return Err(Error::Internal(sqlx::Error::Protocol(
            "the inserted slots do not have consecutive ids".into(),
        )));
    }
    record_slots(&mut tx, EventType::SlotCreated, &slots).await?;
    *sent = true; // from here a cut may leave it committed unseen
    Ok(tx.commit().await.map(|()| slots))
}

async fn update_once(
    conn: &mut MySqlConnection,
    id: SlotId,
    change: &SlotChange,
    hold_ttl: std::time::Duration,
    sent: &mut bool,
) -> Result<Committed<Slot>, Error> {
    let mut tx = conn.begin().await?;
    // 1. The slot's row lock, first: no snapshot exists before it.
    let locked: Option<Locked> = sqlx::query_as(LOCK_FOR_CHANGE)
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
    let Some((capacity, stored_starts, stored_ends, stored_share)) = locked else {
        return Err(Error::SlotNotFound(id));
    };
    // 2. The times against the stored other field, under the lock: no
    //    clock involved. Bound as DATETIME below (see `create_once`).
    let starts_at = change.starts_at.unwrap_or(stored_starts);
    let ends_at = change.ends_at.unwrap_or(stored_ends);
    if ends_at <= starts_at {
        let (field, message) = order_message(change.ends_at.is_some());
        return Err(Error::invalid(field, message));
    }
    // The share against the capacity the slot will have. Lowering it below
    // what a client already has refuses that client's new holds only
    // (SPEC §16), like a lowered cap.
    let share = change.max_seats_per_client.unwrap_or(stored_share);
    let new_capacity = change.capacity.unwrap_or(capacity);
    if let Some(share) = share.filter(|share| *share > new_capacity) {
        return Err(Error::invalid(
            "max_seats_per_client",
            share_message(share, new_capacity),
        ));
    }
    // 3. The reclaim (under the lock we hold): its count takes a `now`
    //    after the lock and subtracts the holds expired since the
    //    watermark, so `held` is exactly the seats of the active holds at
    //    that moment. It is also the first plain read: the snapshot
    //    follows the lock. Every hold, confirm and cancel of this slot
    //    waits for our commit, so these figures stay true until then.
    let counters = reclaim_locked(&mut tx, id)
        .await?
        .ok_or(Error::SlotNotFound(id))?;
    let confirmed = capacity.saturating_sub(counters.remaining);
    let committed = u64::from(confirmed) + u64::from(counters.held);
    if u64::from(new_capacity) < committed {
        // A refusal changes nothing (SPEC §17's rule for every refusal):
        // the reclaim and its `hold.expired` events roll back with it, and
        // no offer was made yet (the line is offered in step 5 only, after
        // the decision). The slot is as it was: no cache to invalidate.
        tx.rollback().await?;
        return Err(Error::CapacityBelowCommitted {
            slot: id,
            capacity: new_capacity,
            confirmed,
            held: counters.held,
        });
    }
    // 4. One UPDATE: `remaining` by the capacity's delta. New remaining =
    //    new capacity − confirmed ≥ held, so `remaining − held ≥ 0` and D
    //    (which `held` and the watermark define alone) are untouched.
    let delta = i64::from(new_capacity) - i64::from(capacity);
    sqlx::query(CHANGE_SLOT)
        .bind(delta)
        .bind(new_capacity)
        .bind(starts_at.naive_utc())
        .bind(ends_at.naive_utc())
        .bind(share)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    let slot = ledger::read(&mut tx, id)
        .await?
        .ok_or(Error::SlotNotFound(id))?;
    record_slots(&mut tx, EventType::SlotUpdated, std::slice::from_ref(&slot)).await?;
    // 5. The line (SPEC §18), after the change's own event: entries the
    //    new capacity cannot hold end; the seats free (those the reclaim
    //    gave back, those the change adds) are offered. The counters are
    //    exact (the reclaim above, under this lock).
    let slot = if counters.waiting > 0 {
        if new_capacity < capacity {
            expire_waiting(&mut tx, id, Some(new_capacity)).await?;
        }
        let free = (new_capacity - confirmed).saturating_sub(counters.held);
        offer_locked(&mut tx, id, free, hold_ttl).await?;
        ledger::read(&mut tx, id)
            .await?
            .ok_or(Error::SlotNotFound(id))?
    } else {
        slot
    };
    *sent = true;
    Ok(tx.commit().await.map(|()| slot))
}

async fn delete_once(
    conn: &mut MySqlConnection,
    id: SlotId,
    (pool, deadline): (&sqlx::MySqlPool, tokio::time::Instant),
    sent: &mut bool,
) -> Result<Committed<Slot>, Error> {
    let mut tx = conn.begin().await?;
    // 1. The slot's row lock, first, by the reclaim. A hold that claims a
    //    seat of this slot takes the same lock with its claim's UPDATE: it
    //    either committed before (its hold is counted below) or waits, and
    //    then finds no row (404). The reclaim writes the `hold.expired` of
    //    every hold that expired since the watermark: the holds go with
    //    the slot, their expiry stays in the feed.
    reclaim_locked(&mut tx, id)
        .await?
        .ok_or(Error::SlotNotFound(id))?;
    // 2. Its bookings, from the holds table, with a `now` after the lock
    //    (the reclaim's count was the first plain read: the snapshot
    //    follows the lock too).
    let (confirmed, held): (i64, i64) = sqlx::query_as(BOOKINGS)
        .bind(id.0)
        .bind(id.0)
        .fetch_one(&mut *tx)
        .await?;
    if confirmed > 0 || held > 0 {
        return Err(Error::SlotHasBookings {
            slot: id,
            confirmed: seats(confirmed),
            held: seats(held),
        });
    }
    // 3. Its history (every hold it has ended), in batches from another
    //    connection while this one keeps the lock (`purge.rs`): the
    //    cascade below is one batch at most.
    if let Err(err) = super::purge::purge_history(&mut tx, pool, id, deadline).await {
        // Its few rows, at once: nothing of it left to roll back unseen.
        tx.rollback().await?;
        return Err(err);
    }
    // 4. Its waiting entries end, each with its event (SPEC §18), then
    //    the slot as it was, in the same snapshot, then the delete: the
    //    entries go with it.
    expire_waiting(&mut tx, id, None).await?;
    let slot = ledger::read(&mut tx, id)
        .await?
        .ok_or(Error::SlotNotFound(id))?;
    record_slots(&mut tx, EventType::SlotDeleted, std::slice::from_ref(&slot)).await?;
    sqlx::query(DELETE_SLOT)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    *sent = true;
    Ok(tx.commit().await.map(|()| slot))
}

fn seats(sum: i64) -> u32 {
    u32::try_from(sum).unwrap_or(u32::MAX)
}
